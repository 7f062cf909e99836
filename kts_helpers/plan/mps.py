"""A fluid model of MPS (spatial sharing): explicitly a model, much simpler than a GPU.

Why: under time-slicing a tenant waits for the GPU *outside* its CUDA events (or, preempted mid-way,
has a neighbour's slice inside them); under MPS the tenants' kernels run *at the same time* on shared
SMs, so there is nothing to wait for and the interference lands *inside* every kernel's events, as a
slower kernel. This model makes that difference, and what ``CUDA_MPS_ACTIVE_THREAD_PERCENTAGE`` changes,
small enough to reason about:

* each tenant is a closed loop like ``plan.timeslice`` (``kernel_ms`` is its kernel's length alone on the
  whole GPU, ``period_ms`` its sleep, ``jitter_ms``, the host's ``overhead_ms``);
* the GPU's capacity (its SMs and the memory bandwidth that feeds them, pooled into one resource) is
  divided among the kernels in flight in proportion to their ``weight``: how hard a kernel claims SMs when
  others want them (a GEMM whose long thread blocks fill every SM claims much more than a short FFT
  kernel that must wait for blocks to retire);
* no tenant gets more than its cap, ``thread_pct / 100`` (the thread percentage); capacity a capped
  tenant cannot use goes to the others (water-filling), and a capped tenant is slower even alone;
* a kernel of ``kernel_ms`` at share ``s`` progresses ``s`` ms of work per ms: no waiting before it starts,
  only slower running. So ``wait_ms`` is 0 and ``device_ms`` (the events) carries all the interference.
* Alone (the baseline, as the kit runs it, without MPS) a tenant has the whole GPU.

A kernel that needs only part of the SMs for its alone speed (``sm_need``) runs at
``min(1, share / sm_need)``. Left out: caches, clocks, the MPS server's own cost. The
weight of a tenant is not known a priori; ``teaching.reference`` calibrates it from one measured number.

The kernel-boundary queue (``fills_gpu``, the planner's GEMM): a kernel of many waves of long thread blocks keeps
every SM until its last wave, and the block scheduler serves kernels in the order they arrive, so a small
kernel from another client that arrives meanwhile does not share: it *waits for that kernel's end*, inside its
own events. Its host keeps launching, so after the boundary its queued kernels run back to back (``busy_share``
of their host-paced time) ahead of the filler's next kernel. A launch-bound operation running when a filler's
kernel arrives has its later kernels queued behind it (blocked until that kernel ends), unless all its kernels
were already queued. Measured on the H200 (the FFT next to the saturating GEMM ends one GEMM kernel boundary
after it wakes: 8.0 ms every 100 ms, 5.4 every 60, 3.4 every 40, 6.6 every 80 ms, the sleep's distance to the next
boundary of the 21.6 ms kernels; back-to-back LLM decode steps each wait one whole GEMM kernel, 21.5 ms, while a
prefill after a 20 ms sleep waits only the rest of one and keeps its alone wall). Fillers share SMs among
themselves, the others among themselves; a capped filler leaves SMs free and queues no one.

The kernel-boundary queue at the kernel's own length (``blocking``, issue 51): that queue is exact where an op is
one kernel. A training step is ~1000 kernels of a few to a few hundred us, and a kernel of another client that
arrives while one of them fills the SMs waits the *rest of that kernel*, not the step. Each tenant's kernels that
fill the SMs (``blocking``: (length d, how many per ms of its op), from its profile's kernel record) cost a
neighbour that launches ``kernel_rate`` kernels per ms of its own op the time from its first kernel's arrival in one
of them to that kernel's end: d - (1 - exp(-rate d)) / rate (the mean rest d / 2 of each arrival where arrivals
are rare against d; at most d, the whole kernel, where they are dense: the later ones queue behind the first in
its stream). Summed over the neighbours in flight (uncapped: a thread cap leaves SMs free) that is a share W of the
time in which the tenant's GPU work makes no progress: its GPU work takes 1 / (1 - W) longer (:func:`kernel_waits`).
Where a neighbour's kernel lengths are unknown (a profile without the record) the engine widens the prediction
interval instead (``plan.engine.unknown_waits``).

The host's slack (issue 51, the third round): a launch-bound op is paced by the host thread that launches its
kernels; its kernels keep the GPU busy only ``1 - h`` of its alone time (``h``: its host share, measured per phase by
its profile) and the GPU idles between them. When they run slower or wait for a neighbour's kernel, the host goes on
launching, the stream queues them, and they catch up in the idle time that follows. So the op takes the longer of
its alone time and its GPU work at the shared speed: its speed is min(1, r / (1 - h)) for a GPU rate r (the fluid
share over its SM need, less the waits: :func:`running_rates`; :func:`op_speed`), where the model before took the
host part plus the stretched GPU part, 1 / (h + (1 - h) / r). Why: on the H100 GPT-2-medium's decode step next to
ViT-B/16 or ConvNeXt-T training (485 kernels in 8.3-8.9 ms, the GPU busy 22-24 % of it) ran 1.04x its alone time
and its prefill 1.04-1.08x, where the sum said 1.36-1.73x; a Whisper-style decode (busy 16-19 %) ran 1.03x next to
ViT, and its encode (busy 56-70 %, little slack) 1.38x. The max is the bound for slack spread evenly through the op;
slack bunched between bursts of long kernels hides less. A tenant without a profile has no host share and no
change: its speed is r, as before.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pandas as pd

from kts_helpers.plan.timeslice import (
    DEFAULT_DURATION_MS,
    TENANT_RULES,
    Draw,
    Op,
    OpArrays,
    SimError,
    SimOps,
    checked_tenants,
    compare_clocks,
    compiled_loops,
    drawn_ahead,
    finish_columns,
    start_offsets,
)


@dataclass(frozen=True)
class MpsTenant:
    """One tenant under MPS: its closed loop, how hard its kernels claim SMs, and its thread percentage.

    ``sm_need``: the share of the SMs on which its kernels already run at their alone speed (1: a kernel that
    needs the whole GPU, its speed is its share). Why: a bandwidth-bound kernel (the FFT) reaches its alone speed
    on part of the SMs, so next to a neighbour capped by its thread percentage it runs on the SMs the cap leaves
    at (near) alone speed, not at the share's speed. ``fills_gpu``: its kernels keep every SM while uncapped, so
    the others queue at its kernel boundary (the module's docstring); ``busy_share``: the share of its host-paced
    kernel time its kernels keep the GPU busy (how fast its queued kernels run once the boundary comes).

    ``host_share``: the share of its op that is host time between its kernels (the planner's measured 1 - busy
    share; 0: all GPU work, the lesson's and the unprofiled tenants' case); ``phase_host_shares`` each phase's own.
    Only the GPU part runs at the fluid share's speed, and the host's slack hides it (the module's docstring,
    :func:`op_speed`). That speed is its share while its kernels are in flight, claiming ``weight / (1 - h)`` (its
    SM need) against the others' time-averaged ``weight`` (a neighbour's kernels are in flight only its busy share
    of the time, so a neighbour sees this tenant's averaged weight too). Why: llama-decode's step next to a
    training step under MPS measured 19-21 ms on the H200 (alone 24.7-29.0), where stretching the whole step by
    its small time-averaged share said 90-100 ms; BERT and ViT next to each other and llama-decode ran at or
    below their alone times (7.5 and 5.5 ms against 9.3 and 6.6 alone).
    """

    name: str
    kernel_ms: float
    period_ms: float
    jitter_ms: float = 0.0
    weight: float = 1.0
    thread_pct: float = 100.0
    overhead_ms: float = 0.0
    sm_need: float = 1.0
    fills_gpu: bool = False
    busy_share: float = 1.0
    host_share: float = 0.0
    kernel_rate: float = 0.0  # kernels it launches per ms of its op: how often it meets a neighbour's kernel
    blocking: tuple[tuple[float, float], ...] = ()  # its kernels that fill the SMs: (ms, how many per ms of its op)
    # each phase's own host share, where its profile measured it (an encode of long kernels next to a decode of
    # short ones: one host share for both says neither); a phase not listed has ``host_share``
    phase_host_shares: tuple[tuple[str, float], ...] = ()


MPS_TENANT_RULES = (*TENANT_RULES, ("weight", lambda v: v > 0, "> 0"),
                    ("thread_pct", lambda v: 0 < v <= 100, "in (0, 100]"), ("sm_need", lambda v: 0 < v <= 1, "in (0, 1]"),
                    ("busy_share", lambda v: 0 < v <= 1, "in (0, 1]"), ("host_share", lambda v: 0 <= v < 1, "in [0, 1)"),
                    ("kernel_rate", lambda v: v >= 0, ">= 0"))
# A tenant loses at most this share of its time to its neighbours' kernels (several neighbours that each hold the
# SMs most of the time: the sum of their shares can pass 1, their kernels cannot all run at once)
MAX_WAIT_SHARE = 0.9


def kernel_wait(length_ms: float, per_ms: float, kernel_rate: float) -> float:
    """The share of a tenant's time lost behind a neighbour's kernels of ``length_ms`` that fill the SMs,
    ``per_ms`` of them per ms, when it launches ``kernel_rate`` kernels per ms: each costs it the time from its
    first arrival in that kernel to the kernel's end, d - (1 - exp(-rate d)) / rate (Poisson arrivals)."""
    if kernel_rate <= 0.0 or per_ms <= 0.0:
        return 0.0
    x = kernel_rate * length_ms
    lost = length_ms + math.expm1(-x) / kernel_rate if x > 1e-6 else 0.5 * kernel_rate * length_ms * length_ms
    return per_ms * lost


def kernel_waits(tenants: Sequence[MpsTenant], caps: Sequence[float], i: int, running: Sequence[int]) -> float:
    """The share of tenant ``i``'s time spent waiting for the rest of a neighbour's kernel in flight (the module's
    docstring): over its uncapped neighbours in ``running``, at most :data:`MAX_WAIT_SHARE`."""
    rate = tenants[i].kernel_rate
    w = sum(kernel_wait(d, per_ms, rate) for j in running if j != i and caps[j] >= 1.0
            for d, per_ms in tenants[j].blocking)
    return min(w, MAX_WAIT_SHARE)


def check_tenants(tenants: Sequence[MpsTenant], duration_ms: float) -> list[MpsTenant]:
    """The tenants as a list, or a SimError naming the first invalid parameter."""
    tenants = checked_tenants(tenants, MpsTenant, "simulate_mps", MPS_TENANT_RULES)
    for t in tenants:
        if not all(isinstance(h, float | int) and 0 <= h < 1 for _, h in t.phase_host_shares):
            raise SimError(f"tenant {t.name!r}: phase_host_shares must be (phase, share in [0, 1)) pairs, got "
                           f"{t.phase_host_shares}")
        if not all(math.isfinite(d) and d > 0 and math.isfinite(k) and k >= 0 for d, k in t.blocking):
            raise SimError(f"tenant {t.name!r}: blocking must be (length ms > 0, per ms >= 0) pairs, got {t.blocking}")
    if not (math.isfinite(duration_ms) and duration_ms > 0):
        raise SimError(f"duration_ms must be > 0, got {duration_ms}")
    return tenants


def shares(weights: Sequence[float], caps: Sequence[float]) -> list[float]:
    """Split a capacity of 1 in proportion to ``weights``, nobody above its cap (water-filling)."""
    out = [0.0] * len(weights)
    free, left = 1.0, set(range(len(weights)))
    while left:
        total = sum(weights[i] for i in left)
        capped = [i for i in left if free * weights[i] / total >= caps[i]]
        if not capped:
            for i in left:
                out[i] = free * weights[i] / total
            break
        for i in capped:
            out[i] = caps[i]
            free -= caps[i]
            left.discard(i)
        free = max(free, 0.0)
    return out


def running_rates(tenants: Sequence[MpsTenant], caps: Sequence[float], fillers: set[int],
                  running: tuple[int, ...]) -> dict[int, float]:
    """How fast each running tenant's *GPU work* progresses (``running``: those with a kernel in flight, not queued
    behind a filler): the fluid shares (:func:`shares`) over its SM need, less the time it waits for the rest of its
    neighbours' kernels that fill the SMs (:func:`kernel_waits`). Its op's own speed at that GPU speed depends on how
    much of the op is host time (:func:`op_speed`, per op: its phase's host share)."""
    out: dict[int, float] = {}
    # fillers and the others do not share SMs (one waits for the other's boundary): two fluid pools
    for group in ((tuple(i for i in running if i in fillers), tuple(i for i in running if i not in fillers))
                  if fillers else (running,)):
        weights, group_caps = [tenants[i].weight for i in group], [caps[i] for i in group]
        got = shares(weights, group_caps)
        for k, i in enumerate(group):
            h = tenants[i].host_share
            if h > 0.0:  # its GPU part: its kernels in flight, claiming as such against the others' average
                got[k] = shares([w / (1.0 - h) if j == k else w for j, w in enumerate(weights)], group_caps)[k]
            out[i] = min(1.0, got[k] / tenants[i].sm_need)
    if any(t.blocking for t in tenants):
        for i in running:
            out[i] *= 1.0 - kernel_waits(tenants, caps, i, running)
    return out


def op_speed(gpu_rate: float, slack: float) -> float:
    """How fast an op progresses when its GPU work runs at ``gpu_rate`` (:func:`running_rates`) and its kernels keep
    the GPU busy ``slack`` (= 1 - its host share) of its alone time: min(1, rate / slack). The module's docstring
    (the host's slack) says why; with no host part (``slack`` 1) it is the GPU rate itself."""
    r = gpu_rate / slack
    return 1.0 if r > 1.0 else r


def phase_slack(tenant: MpsTenant, phase: str | None) -> float:
    """1 - the host share of ``tenant``'s op of ``phase`` (its own phase's where measured, else the tenant's)."""
    h = next((v for ph, v in tenant.phase_host_shares if ph == phase), tenant.host_share)
    return 1.0 - h


def simulate_mps(tenants: Sequence[MpsTenant], duration_ms: float = DEFAULT_DURATION_MS, seed: int = 0,
                 offsets_ms: Sequence[float] | None = None, *, draws: Sequence[Draw] | None = None,
                 ops: bool = False) -> Any:
    """Simulate the tenants under MPS; one row per completed kernel, the columns of ``timeslice.simulate``.

    ``draws`` (the planner): each tenant's next operation drawn from its alone run (as in ``timeslice``); ``ops``
    (with ``draws``): the completed operations as arrays (``timeslice.SimOps``), not a table.
    """
    tenants = check_tenants(tenants, duration_ms)
    if draws is not None and len(draws) != len(tenants):
        raise SimError(f"draws needs one per tenant ({len(tenants)}), got {len(draws)}")
    op: list[Op | None] = [None] * len(tenants)
    n = len(tenants)
    rng = random.Random(seed)
    offsets = start_offsets(tenants, duration_ms, rng, offsets_ms)
    inf = math.inf
    caps = [t.thread_pct / 100.0 for t in tenants]
    fillers = {i for i, t in enumerate(tenants) if t.fills_gpu and caps[i] >= 1.0}  # an uncapped filler queues others
    nxt = [o if o < duration_ms else inf for o in offsets]
    rem: list[float | None] = [None] * n  # remaining work of the kernel in flight (None: none)
    arrival = [0.0] * n
    iteration = [0] * n
    waits_for: list[set[int]] = [set() for _ in range(n)]  # the fillers whose kernel in flight it queues behind
    queued = [False] * n  # all its kernels are queued (it waited a boundary): a new filler kernel cannot block it
    slack = [phase_slack(tn, None) for tn in tenants]  # of the op in flight: 1 - its phase's host share
    rows: list[tuple] = []
    rates: dict[tuple[int, ...], dict[int, float]] = {}  # the rates depend only on who is in flight

    def work_of(i: int) -> float:
        o = op[i]
        return tenants[i].kernel_ms if o is None else o.kernel_ms

    def rates_of(running: tuple[int, ...]) -> dict[int, float]:
        return running_rates(tenants, caps, fillers, running)

    loops = compiled_loops() if draws is not None else None
    ahead = drawn_ahead(draws, duration_ms) if loops is not None else None
    if ahead is not None:
        done = _compiled_ops(tenants, loops, ahead, caps, fillers, duration_ms, offsets, draws)
        return done if ops else done.frame()
    t = 0.0
    while True:
        active = tuple(i for i in range(n) if rem[i] is not None and not waits_for[i])
        gpu_rate = rates.get(active)
        if gpu_rate is None:
            gpu_rate = rates[active] = rates_of(active)
        rate = {i: op_speed(gpu_rate[i], slack[i]) for i in active}
        t_done = min((t + rem[i] / rate[i] for i in active), default=inf)  # type: ignore[operator]
        t_arr = min((nxt[i] for i in range(n) if rem[i] is None), default=inf)
        te = min(t_done, t_arr)
        if te == inf:
            break
        ended: list[int] = []
        for i in active:
            rem[i] -= rate[i] * (te - t)  # type: ignore[operator]
            o = op[i]
            work = work_of(i)
            if rem[i] <= 1e-9 * work:  # type: ignore[operator]
                rows.append((i, iteration[i], arrival[i], arrival[i], te, work, "op" if o is None else o.phase,
                             tenants[i].overhead_ms if o is None else o.overhead_ms))
                iteration[i] += 1
                rem[i] = None
                ended.append(i)
                if o is None:
                    gap = tenants[i].period_ms + (rng.uniform(-tenants[i].jitter_ms, tenants[i].jitter_ms)
                                                  if tenants[i].jitter_ms > 0 else 0.0)
                else:
                    gap = o.gap_ms
                issue = te + max(gap, 0.0)
                nxt[i] = issue if issue < duration_ms else inf
        for i in range(n):  # a filler's boundary: who queued behind it runs its queued kernels back to back
            if waits_for[i].intersection(ended):
                waits_for[i].difference_update(ended)
                if not waits_for[i]:
                    queued[i] = True
                    rem[i] = max(tenants[i].busy_share * rem[i], arrival[i] + work_of(i) - te)  # type: ignore[operator]
        starting = [i for i in range(n) if rem[i] is None and nxt[i] <= te]
        for i in starting:
            if draws is not None:
                op[i] = draws[i]()
            rem[i], arrival[i], nxt[i], queued[i] = float(work_of(i)), nxt[i], inf, False
            slack[i] = phase_slack(tenants[i], None if op[i] is None else op[i].phase)  # type: ignore[union-attr]
        for i in starting:
            if i in fillers:  # kernels launched from now on queue behind this one: still launching, or arriving
                for j in range(n):  # (one arriving at the same instant goes first)
                    if (j not in fillers and j not in starting and rem[j] is not None and not queued[j]
                            and te < arrival[j] + work_of(j)):
                        waits_for[j].add(i)
            else:
                waits_for[i] = {j for j in fillers if rem[j] is not None and j not in starting}
        t = te
    names = [tn.name for tn in tenants]
    df = pd.DataFrame(rows, columns=["_i", "iteration", "arrival_ms", "start_ms", "end_ms", "work_ms", "phase",
                                     "overhead_ms"])
    df.insert(0, "tenant", pd.Series([names[i] for i in df["_i"]], dtype=object))
    if draws is None:
        return finish_columns(df.drop(columns="_i"), {tn.name: tn.overhead_ms for tn in tenants})
    out = finish_columns(df.drop(columns="_i"), None, keep=("phase", "overhead_ms"))
    out["wall_ms"] += out["overhead_ms"]
    return SimOps.of_frame(out, names) if ops else out


_RATES: dict[tuple, tuple[np.ndarray, np.ndarray]] = {}  # the tenants' rate parameters -> (rates, known) by mask


def _compiled_ops(tenants: Sequence[MpsTenant], loops: Any, ahead: tuple[OpArrays, np.ndarray, np.ndarray],
                    caps: Sequence[float], fillers: set[int], duration_ms: float, offsets: Sequence[float],
                    draws: Sequence[Draw]) -> SimOps:
    """``simulate_mps``'s operations for drawn operations from the compiled loop (``plan.compiled.mps_loop``): the general
    loop's, to the bit. The rates of a set of running tenants are computed here (:func:`running_rates`) the first
    time the loop meets it; a tenant that ran out of drawn operations has them drawn again twice as far."""
    n = len(tenants)
    is_filler = np.array([i in fillers for i in range(n)], np.bool_)
    busy = np.array([t.busy_share for t in tenants], float)
    slack = _op_slack(tenants, ahead[0], ahead[1], ahead[2])
    key = tuple((t.weight, c, t.sm_need, t.host_share, i in fillers, t.kernel_rate, t.blocking)
                for i, (t, c) in enumerate(zip(tenants, caps, strict=True)))
    if key not in _RATES:  # what the rates depend on: every replicate of a scenario shares them
        if len(_RATES) >= 64:
            _RATES.clear()
        _RATES[key] = (np.zeros((1 << n, n)), np.zeros(1 << n, np.bool_))
    rates, known = _RATES[key]
    horizon = duration_ms
    while True:
        ops, base, count = ahead
        size = int(np.sum(count))
        state_f, state_i = np.zeros(1), np.zeros(3, np.int64)
        state = [np.zeros(n), np.zeros(n), np.zeros(n, np.bool_), np.zeros(n), np.zeros(n, np.int64),
                 np.zeros((n, n), np.bool_), np.zeros(n, np.bool_), np.zeros(n, np.int64), np.zeros(n, np.int64)]
        out = [np.empty(size, np.int64), np.empty(size, np.int64), np.empty(size), np.empty(size)]
        while True:
            rows = loops.mps_loop(float(duration_ms), is_filler, busy, np.asarray(offsets, float), ops.kernel_ms,
                                  ops.gap_ms, slack, base, count, rates, known, state_f, state_i, *state, *out)
            if rows != loops.NEED_RATES:
                break
            mask = int(state_i[2])
            running = tuple(i for i in range(n) if mask >> i & 1)
            for i, r in running_rates(tenants, caps, fillers, running).items():
                rates[mask, i] = r
            known[mask] = True
        if rows != loops.OUT_OF_OPS:
            break
        horizon *= 2.0
        ahead = drawn_ahead(draws, horizon)  # type: ignore[assignment]
        slack = _op_slack(tenants, ahead[0], ahead[1], ahead[2])  # type: ignore[index]
    who, at, arrival, end = (a[:rows] for a in out)
    return SimOps.of_loop(tenants, ops, who, at, arrival, arrival, end)


def _op_slack(tenants: Sequence[MpsTenant], ops: OpArrays, base: np.ndarray, count: np.ndarray) -> np.ndarray:
    """Each drawn op's slack (:func:`phase_slack`: 1 - its phase's host share), one flat array like ``ops``."""
    out = np.empty(len(ops.kernel_ms))
    for i, t in enumerate(tenants):
        lo, hi = int(base[i]), int(base[i] + count[i])
        names, at = np.unique(ops.phase[lo:hi].astype(str), return_inverse=True)
        out[lo:hi] = np.array([phase_slack(t, str(ph)) for ph in names])[at]
    return out


def mps_degradation(tenants: Sequence[MpsTenant], duration_ms: float = DEFAULT_DURATION_MS,
                    seed: int = 0) -> pd.DataFrame:
    """Per tenant, both clocks: alone (whole GPU, no MPS, as the kit's baselines) vs shared under MPS."""
    tenants = check_tenants(tenants, duration_ms)
    shared = simulate_mps(tenants, duration_ms, seed)
    alone = {t.name: simulate_mps([replace(t, thread_pct=100.0)], duration_ms, seed) for t in tenants}
    return compare_clocks(shared, alone, [t.name for t in tenants])


def thread_sweep(tenants: Sequence[MpsTenant], who: str, thread_pcts: Iterable[float],
                 duration_ms: float = DEFAULT_DURATION_MS, seed: int = 0) -> pd.DataFrame:
    """``mps_degradation`` for each thread percentage of tenant ``who`` (long: thread_pct, tenant, ...)."""
    tenants = list(tenants)
    if who not in [t.name for t in tenants]:
        raise SimError(f"unknown tenant {who!r}; tenants are {[t.name for t in tenants]}")
    parts = []
    for pct in thread_pcts:
        d = mps_degradation([replace(t, thread_pct=float(pct)) if t.name == who else t for t in tenants],
                            duration_ms, seed)
        d.insert(0, "thread_pct", float(pct))
        parts.append(d)
    if not parts:
        raise SimError("thread_sweep needs at least one thread percentage")
    return pd.concat(parts, ignore_index=True)


def weight_for_share(share: float) -> float:
    """The weight that gives a tenant ``share`` of the GPU next to one always-busy neighbour of weight 1."""
    if not (math.isfinite(share) and 0 < share < 1):
        raise SimError(f"a share must lie in (0, 1), got {share}")
    return share / (1.0 - share)
