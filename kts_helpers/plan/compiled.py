"""The planner's two event loops compiled (numba): the time-slice round robin and the MPS fluid model, on arrays.

Why: the capacity question for the real models (BERT + ViT + the Llama step, N <= 8, time-slicing and MPS) is
some 10^7 simulated events (a launch-bound step hands the GPU round at each of its ~550 kernel boundaries), about
a microsecond each of pure Python at the very least; the goal is the whole answer in <= 10 s on 2 cores. Compiled,
an event costs tens of nanoseconds.

What they are: transcriptions of the general loops, ``timeslice._run`` (with ``draws``, no multi-context rule,
no segments) and ``mps.simulate_mps`` (with ``draws``), statement for statement, the same floating-point operations
in the same order (Python's ``min``/``max`` written out as the comparisons they make; no fast-math), so the rows
are the general loops' to the bit: ``tests/test_plan_compiled.py`` holds them equal, on the lesson's and the real
models' cases. The model itself is stated (and documented) there; here only its arithmetic lives twice.

Inputs: each tenant's operations drawn ahead (``timeslice.OpArrays``, one flat array over the tenants with
``base``/``count`` per tenant: their order is the draws' order, so drawing them ahead changes nothing); outputs:
the completed operations in completion order (tenant, flat op index, arrival, start, end), which the callers turn
into the general loops' rows. A tenant that runs out of drawn operations stops the loop (returned -1): the caller
draws further and runs it again, the same run.

The functions are plain Python until :func:`load` compiles them (numba imported then, at the planner's first run:
the lesson's simulations never pay for it); without numba ``load`` gives None and the callers keep their own loops.
"""

from __future__ import annotations

import math
import sys
from typing import Any

import numpy as np

OUT_OF_OPS = -1  # a tenant needed more drawn operations than it was given
NEED_RATES = -2  # the MPS loop met a set of running tenants whose rates the caller has not computed yet


def _ts_kernel_boundary(from_ms, nk, share, work, rem, arrival, arrival_w):
    """``timeslice._run``'s ``kernel_boundary`` for the holder's op (its kernels ``nk``, busy ``share``, GPU time
    ``work``, remaining ``rem``, ``arrival``). Scalars only: an array passed to a compiled call costs two atomic
    reference counts, which made these calls most of an event's time."""
    if nk <= 1 or share >= 1.0:
        return math.inf
    backlog = from_ms - arrival - (work - rem)
    if backlog < 0.0:
        backlog = 0.0
    caught = from_ms + backlog * share / (1.0 - share) + share * (work / nk)
    return caught if caught < _ts_completion(from_ms, share, rem, arrival_w) - 1e-9 else math.inf


def _ts_completion(from_ms, share, rem, arrival_w):
    """``timeslice._run``'s ``completion`` (``arrival_w``: arrival + the op's GPU time)."""
    if share >= 1.0:
        return from_ms + rem
    b = from_ms + rem * share
    return b if b > arrival_w else arrival_w


def timeslice_loop(q, cs, duration, periodic, idle_resets, switch_after_idle, nk, tenant_share, offsets,
                   op_kernel, op_gap, op_share, base, count, out_i, out_op, out_arrival, out_start, out_end):
    """``timeslice._run``'s general loop for drawn operations; returns the number of completed operations (the
    out arrays' rows) or OUT_OF_OPS. ``op_share``: each op's own busy share (0: its tenant's)."""
    n = nk.shape[0]
    share = tenant_share.copy()  # the busy share of each tenant's op in flight
    inf = math.inf
    nxt = np.empty(n)
    for i in range(n):
        nxt[i] = offsets[i] if offsets[i] < duration else inf
    pending = np.zeros(n, np.bool_)
    rem = np.zeros(n)
    arrival = np.zeros(n)
    arrival_w = np.zeros(n)  # arrival + work: the held op's completion floor (launch-bound)
    kern = np.zeros(n)  # the op in flight's GPU time
    started = np.full(n, -1.0)
    drawn = np.zeros(n, np.int64)
    op_of = np.zeros(n, np.int64)
    rows = 0
    cur, last = -1, -1
    run_from, slice_end, origin, t = 0.0, inf, 0.0, 0.0
    while True:
        t_arr = nxt[0]
        for k in range(1, n):
            if nxt[k] < t_arr:
                t_arr = nxt[k]
        if cur >= 0:
            busy_from = run_from if run_from > t else t
            t_done = _ts_completion(busy_from, share[cur], rem[cur], arrival_w[cur])
        else:
            busy_from, t_done = inf, inf
        te = t_arr
        if t_done < te:
            te = t_done
        if slice_end < te:
            te = slice_end
        if te == inf:
            break
        done = False
        if cur >= 0:
            if te - busy_from > 0:  # progress(cur, busy_from, te)
                if share[cur] >= 1.0:
                    rem[cur] -= te - busy_from
                else:
                    work = kern[cur]
                    d = work - rem[cur] + (te - busy_from) / share[cur]
                    d2 = te - arrival[cur]
                    if d2 < d:
                        d = d2
                    if work < d:
                        d = work
                    r = work - d
                    rem[cur] = 0.0 if r < 0.0 else r
            if te >= t_done:  # completion (wins ties with expiries and arrivals): complete(cur, te)
                done = True
                out_i[rows], out_op[rows], out_arrival[rows], out_start[rows], out_end[rows] = (
                    cur, op_of[cur], arrival[cur], started[cur], te)
                rows += 1
                pending[cur] = False
                gap = op_gap[op_of[cur]]
                issue = te + (0.0 if gap < 0.0 else gap)
                nxt[cur] = issue if issue < duration else inf
                cur, slice_end = -1, inf
        t = te
        if done or t_arr <= te:
            for i in range(n):  # arrivals at te
                if not pending[i] and nxt[i] <= te:
                    if drawn[i] >= count[i]:
                        return OUT_OF_OPS
                    o = base[i] + drawn[i]
                    drawn[i] += 1
                    op_of[i] = o
                    pending[i], arrival[i], started[i] = True, nxt[i], -1.0
                    kern[i] = op_kernel[o]
                    share[i] = op_share[o] if op_share[o] > 0.0 else tenant_share[i]
                    arrival_w[i] = arrival[i] + kern[i]
                    rem[i] = kern[i]
                    nxt[i] = inf
                    if cur >= 0 and i != cur and slice_end == inf:
                        bf = run_from if run_from > te else te
                        a = origin + (math.floor((te - origin) / q) + 1) * q if periodic else bf + q
                        b = _ts_kernel_boundary(bf, nk[cur], share[cur], kern[cur], rem[cur], arrival[cur], arrival_w[cur])
                        slice_end = b if b < a else a
        if done:
            after, idle = last, False
        elif cur >= 0 and te >= slice_end:
            after, idle = cur, False
        elif cur < 0:
            after, idle = (last if last >= 0 else n - 1), True
        else:
            continue
        for k in range(1, n + 1):  # pick(after, te, idle): the next pending context in round-robin order
            j = (after + k) % n
            if pending[j]:  # give(j, te, idle)
                switch = last != -1 and last != j and not (idle and not switch_after_idle)
                run_from = te + cs if switch else te
                if switch or last == -1 or (idle_resets and cur == -1):
                    origin = te
                cur, last = j, j
                if started[j] < 0:
                    started[j] = run_from
                others = 0
                for m in range(n):
                    if pending[m] and m != j:
                        others += 1
                if others > 0:
                    a = origin + (math.floor((te - origin) / q) + 1) * q if periodic else run_from + q
                    b = _ts_kernel_boundary(run_from, nk[j], share[j], kern[j], rem[j], arrival[j], arrival_w[j])
                    slice_end = b if b < a else a
                else:
                    slice_end = inf
                break
    return rows


def mps_loop(duration, fillers, busy_share, offsets, op_kernel, op_gap, op_slack, base, count, rates, known, state_f,
             state_i, nxt, rem, has, arrival, iteration, waits, queued, drawn, op_of,
             out_i, out_op, out_arrival, out_end):
    """``mps.simulate_mps``'s loop for drawn operations, resumable: its state lives in the arrays passed in (``state_f``:
    [t]; ``state_i``: [rows, started, mask]). Returns the number of completed operations, OUT_OF_OPS, or NEED_RATES
    (``state_i[2]``: the running set, a bit mask, whose ``rates`` row the caller fills in before calling again)."""
    n = fillers.shape[0]
    inf = math.inf
    if state_i[1] == 0:
        for i in range(n):
            nxt[i] = offsets[i] if offsets[i] < duration else inf
        state_i[1] = 1
    t = state_f[0]
    rows = state_i[0]
    ended = np.zeros(n, np.bool_)
    starting = np.zeros(n, np.bool_)
    speed = np.zeros(n)
    while True:
        mask = 0
        for i in range(n):
            if has[i]:
                free = True
                for j in range(n):
                    if waits[i, j]:
                        free = False
                        break
                if free:
                    mask |= 1 << i
        if not known[mask]:
            state_f[0], state_i[0], state_i[2] = t, rows, mask
            return NEED_RATES
        t_done = inf
        first = True
        for i in range(n):
            if mask >> i & 1:
                r = rates[mask, i] / op_slack[op_of[i]]  # ``mps.op_speed``
                speed[i] = 1.0 if r > 1.0 else r
                v = t + rem[i] / speed[i]
                if first or v < t_done:
                    t_done = v
                    first = False
        t_arr = inf
        first = True
        for i in range(n):
            if not has[i] and (first or nxt[i] < t_arr):
                t_arr = nxt[i]
                first = False
        te = t_arr if t_arr < t_done else t_done
        if te == inf:
            break
        any_ended = False
        for i in range(n):
            ended[i] = False
            if mask >> i & 1:
                rem[i] -= speed[i] * (te - t)
                o = op_of[i]
                work = op_kernel[o]
                if rem[i] <= 1e-9 * work:
                    out_i[rows], out_op[rows], out_arrival[rows], out_end[rows] = i, o, arrival[i], te
                    rows += 1
                    iteration[i] += 1
                    has[i] = False
                    ended[i] = True
                    any_ended = True
                    gap = op_gap[o]
                    issue = te + (0.0 if gap < 0.0 else gap)
                    nxt[i] = issue if issue < duration else inf
        if any_ended:
            for i in range(n):  # a filler's boundary: who queued behind it runs its queued kernels back to back
                hit = False
                for j in range(n):
                    if waits[i, j] and ended[j]:
                        hit = True
                if hit:
                    left = False
                    for j in range(n):
                        if ended[j]:
                            waits[i, j] = False
                        elif waits[i, j]:
                            left = True
                    if not left:
                        queued[i] = True
                        a = busy_share[i] * rem[i]
                        b = arrival[i] + op_kernel[op_of[i]] - te
                        rem[i] = b if b > a else a
        for i in range(n):
            starting[i] = not has[i] and nxt[i] <= te
        for i in range(n):
            if starting[i]:
                if drawn[i] >= count[i]:
                    state_f[0], state_i[0] = t, rows
                    return OUT_OF_OPS
                o = base[i] + drawn[i]
                drawn[i] += 1
                op_of[i] = o
                rem[i], arrival[i], nxt[i], queued[i] = op_kernel[o], nxt[i], inf, False
                has[i] = True
        for i in range(n):
            if starting[i]:
                if fillers[i]:  # kernels launched from now on queue behind this one
                    for j in range(n):
                        if (not fillers[j] and not starting[j] and has[j] and not queued[j]
                                and te < arrival[j] + op_kernel[op_of[j]]):
                            waits[j, i] = True
                else:
                    for j in range(n):
                        waits[i, j] = fillers[j] and has[j] and not starting[j]
        t = te
    state_f[0], state_i[0] = t, rows
    return rows


_LOADED: list[Any] = []  # [this module] once load() compiled its loops; [None] where numba is missing


def load() -> Any:
    """This module with its loops compiled (numba; cached beside the module, so a fresh checkout compiles them
    once), or None where numba is not installed."""
    global _ts_completion, _ts_kernel_boundary, timeslice_loop, mps_loop
    if not _LOADED:
        try:
            from numba import njit  # ~0.4 s to import: only the planner's runs need it, not the lesson's
        except ImportError:  # pragma: no cover - a machine without numba
            _LOADED.append(None)
            return None
        jit = njit(cache=True)
        # rebound here, so that the compiled loops call the compiled helpers (numba reads the module's globals)
        _ts_completion, _ts_kernel_boundary = jit(_ts_completion), jit(_ts_kernel_boundary)
        timeslice_loop, mps_loop = jit(timeslice_loop), jit(mps_loop)
        _LOADED.append(sys.modules[__name__])
    return _LOADED[0]


def warm() -> None:
    """Load (or compile) both loops now, on a tiny run with the callers' argument types: a process about to fork
    its workers calls this first, so that each worker inherits them instead of loading numba and its cache anew
    (about a second of CPU each)."""
    one_f, one_i, one_b = np.ones(1), np.ones(1, np.int64), np.zeros(1, np.bool_)
    out_i, out_f = np.empty(1, np.int64), np.empty(1)
    timeslice_loop(2.0, 0.1, 1.0, True, True, False, one_i, one_f, np.zeros(1), one_f, one_f, np.zeros(1),
                   np.zeros(1, np.int64), one_i, out_i, out_i, out_f, out_f, out_f)
    mps_loop(1.0, one_b, one_f, np.zeros(1), one_f, one_f, one_f, np.zeros(1, np.int64), one_i, np.ones((2, 1)),
             np.ones(2, np.bool_), np.zeros(1), np.zeros(3, np.int64), np.zeros(1), np.zeros(1), np.zeros(1, np.bool_),
             np.zeros(1), np.zeros(1, np.int64), np.zeros((1, 1), np.bool_), np.zeros(1, np.bool_),
             np.zeros(1, np.int64), np.zeros(1, np.int64), out_i, out_i, out_f, out_f)
