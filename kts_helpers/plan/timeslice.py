"""The time-slicing simulator: one GPU shared round-robin by tenants, with a time-slice quantum.

One engine for the lesson (``teaching.model`` is this module under the lesson's name) and the planner
(``plan.engine`` drives it with each tenant's measured alone distributions).

Why it exists: the measured numbers (DF, p99, the gap between wall and device time) are easier
to trust once you have seen them come out of a model small enough to check by hand. The model:

* Each tenant is a closed loop, like ``workers/kts_worker.py``: issue one kernel, wait for it to
  complete, sleep ``period_ms`` (plus a uniform +/- ``jitter_ms``), repeat. ``period_ms=0`` issues
  back to back. Tenants start at random offsets (drawn from ``seed``) unless given ``offsets_ms``.
* The GPU runs one context at a time. The context holding it keeps it until its kernel completes,
  or until its quantum expires *while another context has pending work* (a launch-bound operation of
  several short kernels, ``SimTenant.kernels`` with ``busy_share`` < 1: already once it has caught up with
  its host's launches, at that kernel's boundary); then the next pending context in round-robin order
  gets it. A lone context is never preempted. When the holder's quantum starts is ``slice_timer``:

  - ``"switch-in"`` (what the H200 probe measured, ``data/reference/h200-*-probe``; ``teaching.measured``
    models real runs with it): the
    holder's slices are counted from its switch-in, the switch included (the holder pays for it), and
    follow each other every quantum while it holds the GPU. A kernel that arrives while another runs
    waits until the holder's current slice ends: between 0 and one quantum, spread evenly;
  - ``"contention"`` (the default: the lesson's case to check by hand): the quantum starts when another
    context starts waiting (or at the switch-in if one already waits), so such a kernel always waits
    ``min(holder's remaining work, quantum)``: the worst case of the two, every time.
* Changing the resident context costs ``context_switch_ms`` of idle GPU before the new one runs.

It is event-driven and exact (no time steps): the state changes only at arrivals, completions
and quantum expiries, so 10^5 kernels take about a second of pure Python.

Longer than 500 lines: the event loop stays one function (locals, not attributes), with its fast path for runs of
handovers beside the general loop it is tested against (``handovers``: launch-bound tenants hand the GPU round at
their kernel boundaries), the hand-over to the compiled loop (``plan.compiled``: the planner's capacity answer for
N <= 8 must fit in 10 s on 2 cores; its operations drawn ahead, its rows as arrays, :class:`SimOps`), and this
docstring is the model the lesson checks by hand.

**The event rule.** A tenant times a kernel with two CUDA events recorded in its own stream; both
are processed when *its* context runs. So waiting *before the kernel's first instruction* (another
context holds the GPU) is outside the interval, while a kernel *preempted mid-way* keeps its start
event behind it and has the neighbour's slice (and the switches) inside it. A short kernel (shorter
than the quantum) is never preempted: its events see nothing of the neighbour. A long one is: its
events stretch. The columns keep the clocks apart, with the names the kit's logs use:

* ``arrival_ms``: when the tenant issued the kernel (the host's launch).
* ``start_ms``: when the kernel first ran on the GPU (its context got the GPU, switch paid).
* ``end_ms``: when it completed.
* ``work_ms``: the GPU time the kernel itself ran: its own work, never a wait or a neighbour's slice.
* ``device_ms``: ``end - start``: what the pair of CUDA events records (the kit's ``device_ms``).
  Equal to ``work_ms`` unless the kernel was preempted mid-way; then it includes the time it was
  switched out.
* ``wall_ms``: ``end - arrival`` (plus the tenant's host ``overhead_ms``, 0 by default): what the host
  sees (the kit's ``wall_ms``).
* ``wait_ms``: ``start - arrival`` (= wall - device - overhead): waiting before the first instruction,
  what the kit's wait clock measures (wall - device less its overhead floor).

Its chart builders are in ``teaching.charts``; ``teaching.fit`` fits its quantum to measured waits,
``teaching.measured`` puts a real run next to it, ``teaching.synthetic`` writes simulated run
directories (the kit's log format, a known quantum behind them) and ``plan.mps`` (``teaching.mps``) is its
counterpart for spatial sharing (MPS).
"""

from __future__ import annotations

import bisect
import math
import random
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pandas as pd

from kts_helpers.analyse.rules import degradation as degradation_factor
from kts_helpers.errors import KtsError
from kts_helpers.plan import compiled


class SimError(KtsError, ValueError):
    """A simulator parameter is invalid (negative length, unknown sweep parameter, ...)."""


@dataclass(frozen=True)
class SimTenant:
    """One simulated tenant: its kernel length and its sleep between kernels (closed loop).

    ``overhead_ms``: the host's own launch and synchronisation cost per kernel, outside the GPU: it is in
    the tenant's wall clock (alone and shared alike) and nowhere else (0 in the lesson's hand-made cases; a
    real run's tenant pays its alone median of wall - device).

    ``kernels``: how many kernels of equal length one operation launches (1: one kernel). Why: a launch-bound
    holder (``busy_share`` < 1) whose queue runs dry yields the GPU at that kernel's boundary when another
    context waits (the multi-context probe's short neighbours hand over at every sync), so a waiting context
    behind a chain of short kernels (an LLM step) waits one short kernel and a switch, not the rest of the slice.
    A GPU-bound chain (``busy_share`` 1) has its next kernels queued behind the one running: nothing empties, and
    its quantum ends its turn as a one-kernel op's does. (It used to yield at every kernel boundary: starved next
    to any launch-bound neighbour, a ResNet-50 measured at 0.98 simulated 12 ms, at 1.0 564 ms.)

    ``busy_share``: the share of its operation's time the GPU spends on its kernels (1: the GPU-bound default).
    Why: a launch-bound operation (an LLM step) keeps launching while another context holds the GPU, and its
    queued kernels then run back to back, so it makes up a neighbour's slice instead of paying it in full; it
    cannot end before its last launch (``kernel_ms`` after its start), as alone.
    """

    name: str
    kernel_ms: float
    period_ms: float
    jitter_ms: float = 0.0
    overhead_ms: float = 0.0
    kernels: int = 1
    busy_share: float = 1.0


KERNEL_COLUMNS = ["tenant", "iteration", "arrival_ms", "start_ms", "end_ms", "work_ms", "device_ms",
                  "wall_ms", "wait_ms"]
CLOCKS = ("wall", "device")  # the two clocks a tenant has: the host's and its CUDA events'
SEGMENT_COLUMNS = ["tenant", "start_ms", "end_ms", "what"]
DEFAULT_DURATION_MS = 20_000.0
SLICE_TIMERS = ("switch-in", "contention")  # when the holder's quantum starts (see the module doc)
DEFAULT_SLICE_TIMER = "contention"


def checked_tenants(tenants: Sequence[Any], kind: type, who: str,
                    rules: Sequence[tuple[str, Callable[[float], bool], str]]) -> list[Any]:
    """The tenants as a list, or a SimError naming the first invalid one: the one rule both simulators share
    (at least one, unique names, the simulator's own tenant class, every field finite and within ``rules``:
    (field, test, "what it must be"))."""
    tenants = list(tenants)
    if not tenants:
        raise SimError(f"{who} needs at least one tenant")
    names = [getattr(t, "name", None) for t in tenants]
    if len(set(names)) != len(names):
        raise SimError(f"tenant names must be unique, got {names}")
    for t in tenants:
        if not isinstance(t, kind):
            raise SimError(f"tenants must be {kind.__name__}, got {type(t).__name__}")
        for field, ok, must in rules:
            value = getattr(t, field)
            if not (math.isfinite(value) and ok(value)):
                raise SimError(f"tenant {t.name!r}: {field} must be {must}, got {value}")
    return tenants


TENANT_RULES = (("kernel_ms", lambda v: v > 0, "> 0"), ("period_ms", lambda v: v >= 0, ">= 0"),
                ("jitter_ms", lambda v: v >= 0, ">= 0"), ("overhead_ms", lambda v: v >= 0, ">= 0"))
SIM_TENANT_RULES = (*TENANT_RULES, ("kernels", lambda v: v >= 1 and v == int(v), "a whole number >= 1"),
                    ("busy_share", lambda v: 0 < v <= 1, "in (0, 1]"))


def check_params(tenants: Sequence[SimTenant], quantum_ms: float, context_switch_ms: float,
                 duration_ms: float, slice_timer: str = DEFAULT_SLICE_TIMER) -> list[SimTenant]:
    """The tenants as a list, or a SimError naming the first invalid parameter."""
    tenants = checked_tenants(tenants, SimTenant, "simulate", SIM_TENANT_RULES)
    if not (math.isfinite(quantum_ms) and quantum_ms > 0):
        raise SimError(f"quantum_ms must be > 0, got {quantum_ms}")
    if not (math.isfinite(context_switch_ms) and context_switch_ms >= 0):
        raise SimError(f"context_switch_ms must be >= 0, got {context_switch_ms}")
    if slice_timer not in SLICE_TIMERS:
        raise SimError(f"slice_timer must be one of {', '.join(SLICE_TIMERS)}, got {slice_timer!r}")
    if slice_timer == "switch-in" and not context_switch_ms < quantum_ms:
        raise SimError(f"with slice_timer 'switch-in' the switch is paid inside the slice: context_switch_ms "
                       f"({context_switch_ms}) must be < quantum_ms ({quantum_ms})")
    if not (math.isfinite(duration_ms) and duration_ms > 0):
        raise SimError(f"duration_ms must be > 0, got {duration_ms}")
    return tenants


def start_offsets(tenants: Sequence[Any], duration_ms: float, rng: random.Random,
                  offsets_ms: Sequence[float] | None) -> list[float]:
    """When each tenant issues first: the given offsets, checked, or a random phase within one cycle (inside
    the run, so every tenant issues at least once). One rule for the time-slice and the MPS simulators."""
    if offsets_ms is None:
        return [rng.uniform(0.0, min(t.kernel_ms + t.period_ms, duration_ms)) for t in tenants]
    offsets = [float(o) for o in offsets_ms]
    if len(offsets) != len(tenants) or any(not math.isfinite(o) or o < 0 for o in offsets):
        raise SimError(f"offsets_ms needs {len(tenants)} finite values >= 0, got {list(offsets_ms)}")
    return offsets


@dataclass(frozen=True)
class Op:
    """One operation a tenant issues (the planner's draw from its alone run): its kernel's GPU time, the host's
    launch/sync overhead (wall clock only), the host time before the next operation, the log's phase, and its own
    busy share (its phase's, from the tenant's profile; 0: the tenant's ``SimTenant.busy_share``).

    Why an op carries its share: one op loop can hold phases of very different kinds. A Whisper-style server's
    encode keeps the GPU busy about 70 % of its op and its decode steps about 17 %; at the tenant's calls-weighted
    share (about 0.28) the encode was simulated as launch-bound, making up a training neighbour's slices, and was
    predicted 13 ms where the H100 measured 20-21.5 ms next to ViT-B/16 and ConvNeXt-T training (issue 51's sealed
    time-slicing runs). Read by the time-slicing loops only (MPS has its own per-phase host share,
    ``plan.mps.MpsTenant.phase_host_shares``)."""

    kernel_ms: float
    overhead_ms: float
    gap_ms: float
    phase: str = "op"
    busy_share: float = 0.0


Draw = Callable[[], Op]


@dataclass(frozen=True)
class OpArrays:
    """A tenant's operations drawn ahead, in the order its draw gives them (``plan.draws``): the compiled loops'
    input (``plan.compiled``). Fields as :class:`Op`'s, one array each."""

    kernel_ms: np.ndarray
    overhead_ms: np.ndarray
    gap_ms: np.ndarray
    phase: np.ndarray  # str objects
    busy_share: np.ndarray


def busy_ms(ops: OpArrays) -> float:
    """The least time the operations take one after another: an op never ends before its arrival + its GPU time
    (in either simulator), and the next one arrives its gap later."""
    return float(np.sum(ops.kernel_ms + np.maximum(ops.gap_ms, 0.0)))


def drawn_ahead(draws: Sequence[Draw] | None, horizon_ms: float) -> tuple[OpArrays, np.ndarray, np.ndarray] | None:
    """Every tenant's operations drawn ahead, at least ``horizon_ms`` of them each (a tenant issues none after the
    run's end), as one flat :class:`OpArrays` with each tenant's first index and count; None where a draw cannot
    give them ahead (a caller's own function: the general loop takes it)."""
    if draws is None or not all(callable(getattr(d, "ahead", None)) for d in draws):
        return None
    parts = [d.ahead(horizon_ms) for d in draws]  # type: ignore[attr-defined]
    count = np.array([len(p.kernel_ms) for p in parts], np.int64)
    base = np.concatenate([[0], np.cumsum(count)[:-1]]).astype(np.int64)
    flat = OpArrays(*(np.concatenate([getattr(p, f) for p in parts]) for f in ("kernel_ms", "overhead_ms", "gap_ms",
                                                                                "phase", "busy_share")))
    return flat, base, count


def compiled_loops() -> Any:
    """``plan.compiled`` with its loops compiled where numba is installed, else None (the Python loops run)."""
    return compiled.load()
# the multi-context rule: (contexts with work besides the arriving one, the holder's kernel length) -> the
# arriving kernel's wait before it runs, or None to leave it to the round robin
MultiWait = Callable[[int, float], "float | None"]


def _run(tenants: Sequence[SimTenant], quantum_ms: float, context_switch_ms: float, duration_ms: float,
         seed: int, offsets_ms: Sequence[float] | None, want_segments: bool, slice_timer: str,
         draws: Sequence[Draw] | None = None, multi_wait: MultiWait | None = None,
         idle_resets_slice: bool = False, switch_after_idle: bool = True, fast: bool = True, ops: bool = False
         ) -> tuple[pd.DataFrame | SimOps, pd.DataFrame | None]:
    """The event loop. Returns (one row per kernel, the GPU's occupancy segments or None).

    ``draws`` (the planner): each tenant's next operation drawn from its measured alone run instead of the fixed
    kernel and sleep (the rows then carry each draw's phase and overhead). ``multi_wait``: a kernel arriving
    while two or more other contexts have work waits what the rule says (the multi-context probe's measured
    waits), then preempts the holder. ``idle_resets_slice``: a context that finds the GPU idle starts a new
    slice (its timer restarts), as when a lone closed-loop neighbour syncs between its kernels.
    ``switch_after_idle`` False: a context that finds the GPU idle starts at once (no switch cost); the switch is
    paid only when the GPU is handed from one context with work to another (what the probe measures: the slice
    the holder loses). Why: on the H200 an FFT arriving at an idle GPU after a GEMM ran pays nothing
    (``h200-2026-11-30-article``: FFT wall p50 0.536 ms shared, 0.560 ms alone; with the switch charged the
    model said 0.70 ms). ``fast`` False: every handover through the general loop (``handovers``: the reference
    the fast path is tested against). ``fast`` with ``draws`` that give their operations ahead (``plan.draws``), no
    multi-context rule and no segments, where numba is installed: the compiled loop (``plan.compiled``, the general
    loop to the bit; ``tests/test_plan_compiled.py``). ``ops``: the completed operations as :class:`SimOps`.
    """
    tenants = check_params(tenants, quantum_ms, context_switch_ms, duration_ms, slice_timer)
    if draws is not None and len(draws) != len(tenants):
        raise SimError(f"draws needs one per tenant ({len(tenants)}), got {len(draws)}")
    periodic = slice_timer == "switch-in"
    n = len(tenants)
    rng = random.Random(seed)
    offsets = start_offsets(tenants, duration_ms, rng, offsets_ms)
    inf = math.inf
    q, cs = float(quantum_ms), float(context_switch_ms)
    kernel = [float(t.kernel_ms) for t in tenants]
    period = [float(t.period_ms) for t in tenants]
    jitter = [float(t.jitter_ms) for t in tenants]
    n_kernels = [int(t.kernels) for t in tenants]
    tenant_share = [float(t.busy_share) for t in tenants]
    share = list(tenant_share)  # the busy share of each tenant's op in flight (its own where it carries one: Op)
    nxt = [o if o < duration_ms else inf for o in offsets]  # next issue time of idle tenants
    pending = [False] * n
    rem = [0.0] * n  # remaining work of the pending kernel
    arrival = [0.0] * n
    started = [-1.0] * n
    iteration = [0] * n
    op: list[Op | None] = [None] * n  # the operation in flight (planner draws)
    prio = -1  # the tenant the multi-context rule hands the GPU to next (-1: round robin)
    rows: list[tuple] = []
    segs: list[list] = []
    cur, last = -1, -1  # context holding the GPU (-1: idle) and the last resident one
    run_from = 0.0  # when the holder starts making progress (after a switch)
    slice_end = inf  # when the holder's quantum expires (inf: nobody else is waiting)
    origin = 0.0  # "switch-in": when the holder's slices began (they follow each other every quantum)
    t = 0.0

    loops = compiled_loops() if fast and multi_wait is None and not want_segments and draws is not None else None
    ahead = drawn_ahead(draws, duration_ms) if loops is not None else None
    if ahead is not None:
        done_ops = _compiled_ops(tenants, loops, ahead, q, cs, duration_ms, periodic, idle_resets_slice,
                                 switch_after_idle, offsets, draws)
        return (done_ops if ops else done_ops.frame()), None

    def give(i: int, now: float, idle: bool = False) -> None:
        nonlocal cur, last, run_from, slice_end, origin
        switch = last not in (-1, i) and not (idle and not switch_after_idle)
        run_from = now + cs if switch else now
        if want_segments and switch and cs > 0:
            segs.append([i, now, run_from, "switch"])
        if switch or last == -1 or (idle_resets_slice and cur == -1):
            origin = now  # the slice starts with the switch-in; the same context keeps its timer
        cur, last = i, i
        if started[i] < 0:
            started[i] = run_from
        others = sum(pending) - pending[i] > 0
        slice_end = (min(next_boundary(now) if periodic else run_from + q, kernel_boundary(i, run_from))
                     if others else inf)

    def kernel_boundary(i: int, from_ms: float) -> float:
        """When launch-bound holder ``i``, running from ``from_ms``, has run its queued kernels and yields at the
        boundary of the kernel it waits for (inf: one kernel per operation, whose end is its completion, or a
        GPU-bound op, whose queue never empties: the quantum ends its turn, as a one-kernel op's)."""
        if n_kernels[i] <= 1 or share[i] >= 1.0:
            return inf
        o = op[i]
        work = kernel[i] if o is None else o.kernel_ms
        g = work / n_kernels[i]
        done = work - rem[i]
        backlog = max(from_ms - arrival[i] - done, 0.0)
        caught = from_ms + backlog * share[i] / (1.0 - share[i]) + share[i] * g
        return caught if caught < completion(i, from_ms) - 1e-9 else inf

    def completion(i: int, from_ms: float) -> float:
        """When holder ``i``, running without a break from ``from_ms``, completes its operation."""
        if share[i] >= 1.0:
            return from_ms + rem[i]
        work = kernel[i] if op[i] is None else op[i].kernel_ms  # type: ignore[union-attr]
        return max(arrival[i] + work, from_ms + rem[i] * share[i])

    def progress(i: int, from_ms: float, to_ms: float) -> None:
        """The holder's remaining work after running from ``from_ms`` to ``to_ms``."""
        if share[i] >= 1.0:
            rem[i] -= to_ms - from_ms
            return
        work = kernel[i] if op[i] is None else op[i].kernel_ms  # type: ignore[union-attr]
        done = min(work - rem[i] + (to_ms - from_ms) / share[i], to_ms - arrival[i], work)
        rem[i] = max(work - done, 0.0)

    def next_boundary(now: float) -> float:
        """The end of the holder's current slice (switch-in timer): the first origin + k q after now."""
        return origin + (math.floor((now - origin) / q) + 1) * q

    def pick(after: int, now: float, idle: bool = False) -> None:
        nonlocal prio
        if prio >= 0:
            j, prio = prio, -1
            if pending[j]:
                give(j, now, idle)
                return
        for k in range(1, n + 1):
            j = (after + k) % n
            if pending[j]:
                give(j, now, idle)
                return

    spec_of: list[tuple | None] = [None] * n  # handovers' constants of each tenant's operation in flight

    def spec(k: int) -> tuple:
        """Tenant ``k``'s constants while its operation is in flight (``handovers``), kept until it arrives again."""
        w = kernel[k] if op[k] is None else op[k].kernel_ms  # type: ignore[union-attr]
        spec_of[k] = (k, w, share[k], n_kernels[k] > 1 and share[k] < 1.0, arrival[k], arrival[k] + w,
                      share[k] * (w / n_kernels[k]), 1.0 - share[k])
        return spec_of[k]  # type: ignore[return-value]

    def complete(i: int, te: float) -> None:
        """Tenant i's operation ends at te: its row, and its next issue after its gap (the one home of both loops)."""
        o = op[i]
        rows.append((i, iteration[i], arrival[i], started[i], te, kernel[i] if o is None else o.kernel_ms,
                     "op" if o is None else o.phase, float(tenants[i].overhead_ms) if o is None else o.overhead_ms))
        iteration[i] += 1
        pending[i] = False
        gap = (period[i] + (rng.uniform(-jitter[i], jitter[i]) if jitter[i] > 0 else 0.0)) if o is None else o.gap_ms
        issue = te + max(gap, 0.0)
        nxt[i] = issue if issue < duration_ms else inf

    def handovers(now: float) -> float:
        """Round robin from the holder whose slice expired at ``now``, and on through every further handover,
        arrival and completion while some context has work; returns the last event's time (the loop's ``t``).

        Why: next to a waiting context a launch-bound holder yields at its next kernel boundary once it has caught
        up (``kernel_boundary``), so LLM-like tenants hand the GPU round at nearly every one of their ~550 kernel
        boundaries per step, and those handovers were nearly all the events (the real-model capacity question took
        397 s of CPU; where numba is installed the planner's runs take the compiled loop, ``plan.compiled``, and
        this serves the lesson and a machine without numba). This runs ``pick``, ``give``, ``kernel_boundary``,
        ``completion``, ``progress``, the completions and the arrivals for that case on local variables, with each
        operation's constants taken once (``spec``): the same floating-point operations in the same order, so the
        rows are bit-identical to the general loop's
        (``fast=False``; ``tests/test_plan_fast.py`` holds the two equal). A holder left alone (its slice no longer
        ends) and an arrival under the multi-context rule go back to the general loop.
        """
        nonlocal cur, last, run_from, slice_end, origin
        t_arr = min(nxt)
        pend = [k for k in range(n) if pending[k]]  # the round robin's order (the holder is pending)
        m = len(pend)
        specs = [spec_of[k] or spec(k) for k in pend]
        p = pend.index(cur)
        i, rf, se, org = cur, run_from, slice_end, origin
        floor = math.floor
        hand = True
        while True:
            if hand:
                p = p + 1 if p + 1 < m else 0  # pick: the next pending context in round-robin order
                j, w, sh, chain, arr, arr_w, sh_g, one_sh = specs[p]
                if j != i:  # give: the switch is paid, the slice clock restarts (always after a completion: others
                    rf, org = now + cs, now  # waited, so the GPU never falls to the same context or to no one here)
                else:
                    rf = now
                if started[j] < 0:
                    started[j] = rf
                i = j
                r = rem[i]
                if m < 2:
                    se = inf
                    break
                se = org + (floor((now - org) / q) + 1) * q if periodic else rf + q
                if chain:  # kernel_boundary(i, rf): a launch-bound chain
                    backlog = rf - arr - (w - r)
                    backlog = 0.0 if backlog < 0.0 else backlog
                    kb = rf + backlog * sh / one_sh + sh_g
                    c2 = rf + r * sh  # completion(i, rf)
                    c = c2 if c2 > arr_w else arr_w
                    if not kb < c - 1e-9:
                        kb = inf
                    se = kb if kb < se else se
            bf = rf if rf > now else now  # max(t, run_from)
            if sh >= 1.0:  # completion(i, bf)
                td = bf + r
            else:
                c2 = bf + r * sh
                td = c2 if c2 > arr_w else arr_w
            te = td if td < t_arr else t_arr
            te = se if se < te else te
            if t_arr <= te and multi_wait is not None:
                break
            if te - bf > 0:  # progress(i, bf, te)
                if sh >= 1.0:
                    r = r - (te - bf)
                else:
                    d = w - r + (te - bf) / sh
                    d2 = te - arr
                    d = d2 if d2 < d else d
                    d = w if w < d else d
                    r = w - d
                    r = 0.0 if r < 0.0 else r
                rem[i] = r
            now = te
            done = te >= td
            if done:  # completion (wins ties with expiries and arrivals)
                complete(i, te)
            if done or t_arr <= te:  # arrivals (while a slice runs, or before the next pick)
                for k in range(n):
                    if not pending[k] and nxt[k] <= te:
                        if draws is not None:
                            op[k] = draws[k]()
                            share[k] = op[k].busy_share or tenant_share[k]  # type: ignore[union-attr]
                        pending[k], arrival[k], started[k], spec_of[k] = True, nxt[k], -1.0, None
                        rem[k] = kernel[k] if op[k] is None else op[k].kernel_ms  # type: ignore[union-attr]
                        nxt[k] = inf
                t_arr = min(nxt)
                pend = [k for k in range(n) if pending[k]]
                m = len(pend)
                specs = [spec_of[k] or spec(k) for k in pend]
                p = bisect.bisect_right(pend, i) - 1  # the round robin goes on after i (past a hand, m >= 2: a
                # completion leaves someone pending, so the GPU never falls idle here)
            hand = done or te >= se
        cur, last, run_from, slice_end, origin = i, i, rf, se, org
        return now

    while True:
        t_arr = min(nxt)  # a pending tenant's next issue is inf until it completes
        if cur >= 0:
            busy_from = max(t, run_from)
            t_done = completion(cur, busy_from)
        else:
            busy_from, t_done = inf, inf
        te = min(t_arr, t_done, slice_end)
        if te == inf:
            break
        done = False
        if cur >= 0:
            ran = te - busy_from
            if ran > 0:
                progress(cur, busy_from, te)
                if want_segments:
                    if segs and segs[-1][0] == cur and segs[-1][2] == busy_from and segs[-1][3] == "run":
                        segs[-1][2] = te
                    else:
                        segs.append([cur, busy_from, te, "run"])
            if te >= t_done:  # completion (wins ties with expiries and arrivals)
                done = True
                complete(cur, te)
                cur, slice_end = -1, inf
        t = te
        for i in range(n) if done or t_arr <= te else ():  # arrivals at te (a back-to-back tenant re-arrives at
            if not pending[i] and nxt[i] <= te:  # its own completion)
                if draws is not None:
                    op[i] = draws[i]()
                    share[i] = op[i].busy_share or tenant_share[i]  # type: ignore[union-attr]
                pending[i], arrival[i], started[i], spec_of[i] = True, nxt[i], -1.0, None
                rem[i] = kernel[i] if op[i] is None else op[i].kernel_ms  # type: ignore[union-attr]
                nxt[i] = inf
                if cur >= 0 and i != cur and slice_end == inf:
                    # contention starts: the holder's quantum runs (or its current slice ends)
                    slice_end = min(next_boundary(te) if periodic else max(te, run_from) + q,
                                    kernel_boundary(cur, max(te, run_from)))
                busy = sum(pending) - 1
                if multi_wait is not None and cur >= 0 and i != cur and busy >= 2 and prio < 0:
                    w = multi_wait(busy, rem[cur])
                    if w is not None:  # the measured rule: the holder is preempted so that i starts after w
                        slice_end = max(min(slice_end, te + max(w - cs, 0.0)), run_from)
                        prio = i
        if done:
            pick(last, te)
        elif cur >= 0 and te >= slice_end:  # quantum expired while others wait: round robin
            if fast and prio < 0 and not want_segments:
                t = handovers(te)
            else:
                pick(cur, te)
        elif cur < 0:
            pick(last if last >= 0 else n - 1, te, idle=True)
    names = [tn.name for tn in tenants]
    df = pd.DataFrame(rows, columns=["_i", "iteration", "arrival_ms", "start_ms", "end_ms", "work_ms", "phase",
                                     "overhead_ms"])
    df.insert(0, "tenant", pd.Series([names[i] for i in df["_i"]], dtype=object))
    df = df.drop(columns="_i")
    if draws is None:
        overheads = {tn.name: float(tn.overhead_ms) for tn in tenants}
        return finish_columns(df, overheads), _segments(segs, names) if want_segments else None
    out = finish_columns(df, None, keep=("phase", "overhead_ms"))
    out["wall_ms"] += out["overhead_ms"]
    return SimOps.of_frame(out, names) if ops else out, _segments(segs, names) if want_segments else None


def _compiled_ops(tenants: Sequence[SimTenant], loops: Any, ahead: tuple[OpArrays, np.ndarray, np.ndarray],
                    q: float, cs: float, duration_ms: float, periodic: bool, idle_resets_slice: bool,
                    switch_after_idle: bool, offsets: Sequence[float], draws: Sequence[Draw]) -> SimOps:
    """``_run``'s operations for drawn operations from the compiled loop (``plan.compiled.timeslice_loop``): the general
    loop's, to the bit. A tenant that ran out of drawn operations has them drawn again twice as far."""
    nk = np.array([int(t.kernels) for t in tenants], np.int64)
    share = np.array([float(t.busy_share) for t in tenants], float)
    horizon = duration_ms
    while True:
        ops, base, count = ahead
        size = int(np.sum(count))
        out = [np.empty(size, np.int64), np.empty(size, np.int64)] + [np.empty(size) for _ in range(3)]
        rows = loops.timeslice_loop(q, cs, float(duration_ms), periodic, idle_resets_slice, switch_after_idle, nk,
                                    share, np.asarray(offsets, float), ops.kernel_ms, ops.gap_ms, ops.busy_share, base,
                                    count, *out)
        if rows != loops.OUT_OF_OPS:
            break
        horizon *= 2.0
        ahead = drawn_ahead(draws, horizon)  # type: ignore[assignment]
    return SimOps.of_loop(tenants, ops, *(a[:rows] for a in out))


@dataclass(frozen=True)
class SimOps:
    """A simulated run's completed operations as arrays, in completion order (each tenant's in its issue order): what
    the compiled loops give and the planner's replicates read (``engine.replicate_stats``), without a table.

    ``tenant``: the index into ``names``; the rest as the rows' columns of the same names.
    """

    names: tuple[str, ...]
    tenant: np.ndarray
    arrival_ms: np.ndarray
    start_ms: np.ndarray
    end_ms: np.ndarray
    work_ms: np.ndarray
    overhead_ms: np.ndarray
    phase: np.ndarray

    @classmethod
    def of_loop(cls, tenants: Sequence[Any], ops: OpArrays, who: np.ndarray, at: np.ndarray, arrival: np.ndarray,
                start: np.ndarray, end: np.ndarray) -> SimOps:
        """From the compiled loops' output: tenant, index into ``ops``, arrival, start, end."""
        return cls(tuple(t.name for t in tenants), who, arrival, start, end, ops.kernel_ms[at], ops.overhead_ms[at],
                   ops.phase[at])

    @classmethod
    def of_frame(cls, df: pd.DataFrame, names: Sequence[str]) -> SimOps:
        """From the general loops' rows for drawn operations (``finish_columns`` with phase and overhead)."""
        index = {name: k for k, name in enumerate(names)}
        return cls(tuple(names), np.array([index[x] for x in df["tenant"]], np.int64),
                   *(df[c].to_numpy(float) for c in ("arrival_ms", "start_ms", "end_ms", "work_ms", "overhead_ms")),
                   df["phase"].to_numpy(object))

    def device_ms(self, at: np.ndarray | slice = slice(None)) -> np.ndarray:
        """The CUDA events' clock of the operations ``at`` (``device_clock``)."""
        return device_clock(self.start_ms[at], self.end_ms[at], self.work_ms[at])

    def wall_ms(self, at: np.ndarray | slice = slice(None)) -> np.ndarray:
        """The host's clock of the operations ``at``: issue to completion, plus the op's own overhead."""
        return self.end_ms[at] - self.arrival_ms[at] + self.overhead_ms[at]

    def frame(self) -> pd.DataFrame:
        """The rows the general loops build for drawn operations (``finish_columns``' output, phase and overhead
        kept, the overhead in the wall clock), to the bit."""
        iteration = np.zeros(len(self.tenant), np.int64)
        for k in range(len(self.names)):
            mine = self.tenant == k
            iteration[mine] = np.arange(int(np.count_nonzero(mine)))
        df = pd.DataFrame({"tenant": pd.Series(np.array(self.names, object)[self.tenant], dtype=object),
                           "iteration": iteration, "arrival_ms": self.arrival_ms, "start_ms": self.start_ms,
                           "end_ms": self.end_ms, "work_ms": self.work_ms, "phase": self.phase,
                           "overhead_ms": self.overhead_ms})
        out = finish_columns(df, None, keep=("phase", "overhead_ms"))
        out["wall_ms"] += out["overhead_ms"]
        return out


def device_clock(start: np.ndarray, end: np.ndarray, work: np.ndarray) -> np.ndarray:
    """What the pair of CUDA events records: end - start, or the op's own work where they differ by float dust
    (< 1 fs: neither a preemption nor a wait)."""
    device = end - start
    return np.where(np.abs(device - work) > 1e-9, device, work)


def finish_columns(df: pd.DataFrame, overhead_ms: Mapping[str, float] | None = None,
                   keep: Sequence[str] = ()) -> pd.DataFrame:
    """The derived clocks (device = events, wall, wait) from arrival/start/end/work, in KERNEL_COLUMNS order.

    ``overhead_ms`` per tenant is added to the wall clock only (the host's launch/sync cost); ``keep``: further
    columns kept after those (the planner's phase and per-operation overhead).
    """
    df = df.copy()
    df["device_ms"] = device_clock(*(df[c].to_numpy(float) for c in ("start_ms", "end_ms", "work_ms")))
    df["wall_ms"] = df["end_ms"] - df["arrival_ms"]
    if overhead_ms:
        df["wall_ms"] += df["tenant"].map(overhead_ms).fillna(0.0).astype(float)
    wait = df["start_ms"] - df["arrival_ms"]
    df["wait_ms"] = wait.where(wait.abs() > 1e-9, 0.0)
    df = df.sort_values(["arrival_ms", "tenant"], kind="stable").reset_index(drop=True)
    return df[KERNEL_COLUMNS + list(keep)]


def _segments(segs: list[list], names: list[str]) -> pd.DataFrame:
    seg_df = pd.DataFrame(segs, columns=["_i", "start_ms", "end_ms", "what"])
    seg_df.insert(0, "tenant", pd.Series([names[i] for i in seg_df["_i"]], dtype=object))
    return seg_df.drop(columns="_i")


def simulate(tenants: Sequence[SimTenant], quantum_ms: float = 2.0, context_switch_ms: float = 0.0,
             duration_ms: float = DEFAULT_DURATION_MS, seed: int = 0,
             offsets_ms: Sequence[float] | None = None, *, slice_timer: str = DEFAULT_SLICE_TIMER,
             draws: Sequence[Draw] | None = None, multi_wait: MultiWait | None = None,
             idle_resets_slice: bool = False, switch_after_idle: bool = True, fast: bool = True,
             ops: bool = False) -> Any:
    """Simulate the tenants sharing one GPU; one row per completed kernel (see the module doc and ``_run``).

    ``ops`` (with ``draws``): the completed operations as arrays (:class:`SimOps`, the planner's replicates), not a
    table."""
    return _run(tenants, quantum_ms, context_switch_ms, duration_ms, seed, offsets_ms, False, slice_timer,
                draws, multi_wait, idle_resets_slice, switch_after_idle, fast, ops)[0]


def timeline(tenants: Sequence[SimTenant], quantum_ms: float = 2.0, context_switch_ms: float = 0.0,
             duration_ms: float = DEFAULT_DURATION_MS, seed: int = 0,
             offsets_ms: Sequence[float] | None = None, *,
             slice_timer: str = DEFAULT_SLICE_TIMER) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Like :func:`simulate`, plus who held the GPU when: segments (tenant, start, end, run/switch)."""
    kernels, segs = _run(tenants, quantum_ms, context_switch_ms, duration_ms, seed, offsets_ms, True, slice_timer)
    assert segs is not None
    return kernels, segs


def _pct(values: np.ndarray, p: float) -> float:
    return float(np.percentile(values, p)) if len(values) else math.nan


def summarize_sim(df: pd.DataFrame) -> pd.DataFrame:
    """p50/p95/p99 of wall, device (CUDA events) and wait per tenant (numpy's linear-interpolation percentiles).

    ``device`` is the event clock (``device_ms``), which includes a neighbour's slice when a kernel was
    preempted mid-way; the tenant's own GPU work is ``work_ms`` in the kernel table.
    """
    missing = {"tenant", "wall_ms", "device_ms", "wait_ms"} - set(df.columns)
    if missing:
        raise SimError(f"summarize_sim needs simulate()'s columns; missing {sorted(missing)}")
    out = []
    for tenant, g in df.groupby("tenant", sort=True):
        row: dict[str, Any] = {"tenant": tenant, "n": len(g)}
        for col in ("wall_ms", "device_ms", "wait_ms"):
            v = g[col].to_numpy(float)
            for p in (50, 95, 99):
                row[f"{col[:-3]}_p{p}_ms"] = _pct(v, p)
        out.append(row)
    return pd.DataFrame(out)


def compare_clocks(shared: pd.DataFrame, alone: Mapping[str, pd.DataFrame], names: Sequence[str]) -> pd.DataFrame:
    """Per tenant and clock: p50/p99 alone and shared, DF = shared p99 / alone p99 (``rules.degradation``).

    Columns: tenant, then for each clock in ``CLOCKS`` (``wall``: ``p50_alone_ms`` ... ``df``; ``device``:
    the same names prefixed ``device_``). ``alone`` maps a tenant to its kernels when it ran alone.
    """
    out = []
    for name in names:
        mine = shared[shared["tenant"] == name]
        if mine.empty:
            raise SimError(f"tenant {name!r} completed no kernel; lengthen duration_ms")
        row: dict[str, Any] = {"tenant": name}
        for clock in CLOCKS:
            pre = "" if clock == "wall" else f"{clock}_"
            a = alone[name][f"{clock}_ms"].to_numpy(float)
            s = mine[f"{clock}_ms"].to_numpy(float)
            row.update({f"{pre}p50_alone_ms": _pct(a, 50), f"{pre}p99_alone_ms": _pct(a, 99),
                        f"{pre}p50_shared_ms": _pct(s, 50), f"{pre}p99_shared_ms": _pct(s, 99),
                        f"{pre}df": degradation_factor([s], [a], 0.99, interval=False).estimate})
        out.append(row)
    return pd.DataFrame(out)


def degradation(tenants: Sequence[SimTenant], quantum_ms: float = 2.0, context_switch_ms: float = 0.0,
                duration_ms: float = DEFAULT_DURATION_MS, seed: int = 0, *,
                slice_timer: str = DEFAULT_SLICE_TIMER) -> pd.DataFrame:
    """Per tenant, both clocks: p50/p99 alone and shared and DF (wall: ``df``; CUDA events: ``device_df``).

    A short tenant's ``device_df`` stays 1 (its kernels are never preempted mid-way); a long tenant's grows
    with the neighbour's slices that land inside its events.
    """
    tenants = check_params(tenants, quantum_ms, context_switch_ms, duration_ms, slice_timer)
    shared = simulate(tenants, quantum_ms, context_switch_ms, duration_ms, seed, slice_timer=slice_timer)
    alone = {t.name: simulate([t], quantum_ms, context_switch_ms, duration_ms, seed, slice_timer=slice_timer)
             for t in tenants}
    return compare_clocks(shared, alone, [t.name for t in tenants])


SWEEP_PARAMS = ("quantum_ms", "context_switch_ms", "<tenant>.kernel_ms", "<tenant>.period_ms")


def sweep(tenants: Sequence[SimTenant], param: str, values: Iterable[float], *, quantum_ms: float = 2.0,
          context_switch_ms: float = 0.0, duration_ms: float = DEFAULT_DURATION_MS,
          seed: int = 0, slice_timer: str = DEFAULT_SLICE_TIMER) -> pd.DataFrame:
    """DF per tenant for each value of one parameter (long format: param, value, tenant, df, device_df, p99s).

    ``param`` is ``quantum_ms``, ``context_switch_ms``, or ``<tenant>.kernel_ms`` /
    ``<tenant>.period_ms`` to vary one tenant's kernel length or cadence.
    """
    tenants = list(tenants)
    names = [t.name for t in tenants]
    who, field = None, param
    if "." in param:
        who, field = param.rsplit(".", 1)
        if who not in names or field not in ("kernel_ms", "period_ms"):
            raise SimError(f"unknown sweep parameter {param!r}; use one of {', '.join(SWEEP_PARAMS)} "
                           f"with a tenant among {names}")
    elif param not in ("quantum_ms", "context_switch_ms"):
        raise SimError(f"unknown sweep parameter {param!r}; use one of {', '.join(SWEEP_PARAMS)}")
    values = [float(v) for v in values]
    if not values:
        raise SimError("sweep needs at least one value")
    parts = []
    for v in values:
        q, cs, ts = quantum_ms, context_switch_ms, tenants
        if param == "quantum_ms":
            q = v
        elif param == "context_switch_ms":
            cs = v
        else:
            ts = [replace(t, **{field: v}) if t.name == who else t for t in tenants]
        d = degradation(ts, q, cs, duration_ms, seed, slice_timer=slice_timer)[["tenant", "p99_alone_ms", "p99_shared_ms", "df",
                                                         "device_p99_shared_ms", "device_df"]]
        d.insert(0, "value", v)
        d.insert(0, "param", param)
        parts.append(d)
    return pd.concat(parts, ignore_index=True)

