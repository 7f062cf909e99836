"""A teaching simulator: one GPU shared round-robin by tenants, with a time-slice quantum.

Why it exists: the measured numbers (DF, p99, the gap between wall and device time) are easier
to trust once you have seen them come out of a model small enough to check by hand. The model:

* Each tenant is a closed loop, like ``workers/kts_worker.py``: issue one kernel, wait for it to
  complete, sleep ``period_ms`` (plus a uniform +/- ``jitter_ms``), repeat. ``period_ms=0`` issues
  back to back. Tenants start at random offsets (drawn from ``seed``) unless given ``offsets_ms``.
* The GPU runs one context at a time. The context holding it keeps it until its kernel completes,
  or until its quantum expires *while another context has pending work*; then the next pending
  context in round-robin order gets it. A lone context is never preempted. The quantum is counted
  from the later of (the holder got the GPU, another context became pending): so a kernel that
  arrives while another runs waits ``min(holder's remaining work, quantum)``.
* Changing the resident context costs ``context_switch_ms`` of idle GPU before the new one runs.

It is event-driven and exact (no time steps): the state changes only at arrivals, completions
and quantum expiries, so 10^5 kernels take about a second of pure Python.

Columns of :func:`simulate` (all in ms):

* ``arrival_ms``: when the tenant issued the kernel (the host's launch).
* ``start_ms``: when the kernel first ran on the GPU (its context got the GPU, switch paid).
* ``end_ms``: when it completed.
* ``device_ms``: the GPU time it actually ran; never includes waiting.
* ``span_ms``: ``end - start``: what a pair of CUDA events recorded in the tenant's stream bracket.
  Equal to ``device_ms`` unless the kernel itself was preempted mid-way (kernels longer than the
  quantum), in which case the events also count the time it was switched out.
* ``wall_ms``: ``end - arrival``: what the host sees.
* ``wait_ms``: ``wall - device``: time the kernel was issued but not running.

Its chart builders are in ``teaching.charts``; ``teaching.measured`` puts a real run next to it and
``teaching.synthetic`` writes simulated run directories (the kit's log format, a known quantum behind them).
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pandas as pd

from kts_helpers.analyse.rules import degradation as degradation_factor
from kts_helpers.errors import KtsError


class SimError(KtsError, ValueError):
    """A simulator parameter is invalid (negative length, unknown sweep parameter, ...)."""


@dataclass(frozen=True)
class SimTenant:
    """One simulated tenant: its kernel length and its sleep between kernels (closed loop)."""

    name: str
    kernel_ms: float
    period_ms: float
    jitter_ms: float = 0.0


KERNEL_COLUMNS = ["tenant", "iteration", "arrival_ms", "start_ms", "end_ms", "device_ms", "span_ms",
                  "wall_ms", "wait_ms"]
SEGMENT_COLUMNS = ["tenant", "start_ms", "end_ms", "what"]
DEFAULT_DURATION_MS = 20_000.0
# Quantiles the quantum fit compares: the quantum shows in the upper part of the wait distribution
# (most short kernels find the GPU free and wait ~0), so the median alone cannot see it.
FIT_QUANTILES = (0.5, 0.75, 0.9, 0.95, 0.99)


def check_params(tenants: Sequence[SimTenant], quantum_ms: float, context_switch_ms: float,
                 duration_ms: float) -> list[SimTenant]:
    """The tenants as a list, or a SimError naming the first invalid parameter."""
    tenants = list(tenants)
    if not tenants:
        raise SimError("simulate needs at least one tenant")
    names = [t.name for t in tenants]
    if len(set(names)) != len(names):
        raise SimError(f"tenant names must be unique, got {names}")
    for t in tenants:
        if not isinstance(t, SimTenant):
            raise SimError(f"tenants must be SimTenant, got {type(t).__name__}")
        if not (math.isfinite(t.kernel_ms) and t.kernel_ms > 0):
            raise SimError(f"tenant {t.name!r}: kernel_ms must be > 0, got {t.kernel_ms}")
        if not (math.isfinite(t.period_ms) and t.period_ms >= 0):
            raise SimError(f"tenant {t.name!r}: period_ms must be >= 0, got {t.period_ms}")
        if not (math.isfinite(t.jitter_ms) and t.jitter_ms >= 0):
            raise SimError(f"tenant {t.name!r}: jitter_ms must be >= 0, got {t.jitter_ms}")
    if not (math.isfinite(quantum_ms) and quantum_ms > 0):
        raise SimError(f"quantum_ms must be > 0, got {quantum_ms}")
    if not (math.isfinite(context_switch_ms) and context_switch_ms >= 0):
        raise SimError(f"context_switch_ms must be >= 0, got {context_switch_ms}")
    if not (math.isfinite(duration_ms) and duration_ms > 0):
        raise SimError(f"duration_ms must be > 0, got {duration_ms}")
    return tenants


def _run(tenants: Sequence[SimTenant], quantum_ms: float, context_switch_ms: float, duration_ms: float,
         seed: int, offsets_ms: Sequence[float] | None, want_segments: bool
         ) -> tuple[pd.DataFrame, pd.DataFrame | None]:
    """The event loop. Returns (one row per kernel, the GPU's occupancy segments or None)."""
    tenants = check_params(tenants, quantum_ms, context_switch_ms, duration_ms)
    n = len(tenants)
    rng = random.Random(seed)
    if offsets_ms is None:
        # a random phase within one cycle (but inside the run, so every tenant issues at least once)
        offsets = [rng.uniform(0.0, min(t.kernel_ms + t.period_ms, duration_ms)) for t in tenants]
    else:
        offsets = [float(o) for o in offsets_ms]
        if len(offsets) != n or any(not math.isfinite(o) or o < 0 for o in offsets):
            raise SimError(f"offsets_ms needs {n} finite values >= 0, got {list(offsets_ms)}")
    inf = math.inf
    q, cs = float(quantum_ms), float(context_switch_ms)
    kernel = [float(t.kernel_ms) for t in tenants]
    period = [float(t.period_ms) for t in tenants]
    jitter = [float(t.jitter_ms) for t in tenants]
    nxt = [o if o < duration_ms else inf for o in offsets]  # next issue time of idle tenants
    pending = [False] * n
    rem = [0.0] * n  # remaining work of the pending kernel
    arrival = [0.0] * n
    started = [-1.0] * n
    iteration = [0] * n
    rows: list[tuple] = []
    segs: list[list] = []
    cur, last = -1, -1  # context holding the GPU (-1: idle) and the last resident one
    run_from = 0.0  # when the holder starts making progress (after a switch)
    slice_end = inf  # when the holder's quantum expires (inf: nobody else is waiting)
    t = 0.0

    def give(i: int, now: float) -> None:
        nonlocal cur, last, run_from, slice_end
        switch = last not in (-1, i)
        run_from = now + cs if switch else now
        if want_segments and switch and cs > 0:
            segs.append([i, now, run_from, "switch"])
        cur, last = i, i
        if started[i] < 0:
            started[i] = run_from
        slice_end = run_from + q if any(pending[j] for j in range(n) if j != i) else inf

    def pick(after: int, now: float) -> None:
        for k in range(1, n + 1):
            j = (after + k) % n
            if pending[j]:
                give(j, now)
                return

    while True:
        t_arr = min((nxt[i] for i in range(n) if not pending[i]), default=inf)
        if cur >= 0:
            busy_from = max(t, run_from)
            t_done = busy_from + rem[cur]
        else:
            busy_from, t_done = inf, inf
        te = min(t_arr, t_done, slice_end)
        if te == inf:
            break
        done = False
        if cur >= 0:
            ran = te - busy_from
            if ran > 0:
                rem[cur] -= ran
                if want_segments:
                    if segs and segs[-1][0] == cur and segs[-1][2] == busy_from and segs[-1][3] == "run":
                        segs[-1][2] = te
                    else:
                        segs.append([cur, busy_from, te, "run"])
            if te >= t_done:  # completion (wins ties with expiries and arrivals)
                done = True
                i = cur
                rows.append((i, iteration[i], arrival[i], started[i], te, kernel[i]))
                iteration[i] += 1
                pending[i] = False
                gap = period[i] + (rng.uniform(-jitter[i], jitter[i]) if jitter[i] > 0 else 0.0)
                issue = te + max(gap, 0.0)
                nxt[i] = issue if issue < duration_ms else inf
                cur, slice_end = -1, inf
        t = te
        for i in range(n):  # arrivals at te (a back-to-back tenant re-arrives at its own completion)
            if not pending[i] and nxt[i] <= te:
                pending[i], rem[i], arrival[i], started[i] = True, kernel[i], nxt[i], -1.0
                nxt[i] = inf
                if cur >= 0 and i != cur and slice_end == inf:
                    slice_end = max(te, run_from) + q  # contention starts: the holder's quantum runs
        if done:
            pick(last, te)
        elif cur >= 0 and te >= slice_end:  # quantum expired while others wait: round robin
            pick(cur, te)
        elif cur < 0:
            pick(last if last >= 0 else n - 1, te)
    names = [tn.name for tn in tenants]
    df = pd.DataFrame(rows, columns=["_i", "iteration", "arrival_ms", "start_ms", "end_ms", "device_ms"])
    df.insert(0, "tenant", pd.Series([names[i] for i in df["_i"]], dtype=object))
    df = df.drop(columns="_i")
    df["span_ms"] = df["end_ms"] - df["start_ms"]
    df["wall_ms"] = df["end_ms"] - df["arrival_ms"]
    wait = df["wall_ms"] - df["device_ms"]
    df["wait_ms"] = wait.where(wait.abs() > 1e-9, 0.0)  # float dust (< 1 fs) is no wait
    df = df.sort_values(["arrival_ms", "tenant"], kind="stable").reset_index(drop=True)
    seg_df = None
    if want_segments:
        seg_df = pd.DataFrame(segs, columns=["_i", "start_ms", "end_ms", "what"])
        seg_df.insert(0, "tenant", pd.Series([names[i] for i in seg_df["_i"]], dtype=object))
        seg_df = seg_df.drop(columns="_i")
    return df[KERNEL_COLUMNS], seg_df


def simulate(tenants: Sequence[SimTenant], quantum_ms: float = 2.0, context_switch_ms: float = 0.0,
             duration_ms: float = DEFAULT_DURATION_MS, seed: int = 0,
             offsets_ms: Sequence[float] | None = None) -> pd.DataFrame:
    """Simulate the tenants sharing one GPU; one row per completed kernel (see the module doc)."""
    return _run(tenants, quantum_ms, context_switch_ms, duration_ms, seed, offsets_ms, False)[0]


def timeline(tenants: Sequence[SimTenant], quantum_ms: float = 2.0, context_switch_ms: float = 0.0,
             duration_ms: float = DEFAULT_DURATION_MS, seed: int = 0,
             offsets_ms: Sequence[float] | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Like :func:`simulate`, plus who held the GPU when: segments (tenant, start, end, run/switch)."""
    kernels, segs = _run(tenants, quantum_ms, context_switch_ms, duration_ms, seed, offsets_ms, True)
    assert segs is not None
    return kernels, segs


def _pct(values: np.ndarray, p: float) -> float:
    return float(np.percentile(values, p)) if len(values) else math.nan


def summarize_sim(df: pd.DataFrame) -> pd.DataFrame:
    """p50/p95/p99 of wall, device and wait per tenant (numpy's linear-interpolation percentiles)."""
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


def degradation(tenants: Sequence[SimTenant], quantum_ms: float = 2.0, context_switch_ms: float = 0.0,
                duration_ms: float = DEFAULT_DURATION_MS, seed: int = 0) -> pd.DataFrame:
    """Per tenant: p50/p99 wall alone and shared, and DF = shared p99 wall / alone p99 wall."""
    tenants = check_params(tenants, quantum_ms, context_switch_ms, duration_ms)
    shared = simulate(tenants, quantum_ms, context_switch_ms, duration_ms, seed)
    out = []
    for t in tenants:
        alone = simulate([t], quantum_ms, context_switch_ms, duration_ms, seed)["wall_ms"].to_numpy(float)
        mine = shared.loc[shared["tenant"] == t.name, "wall_ms"].to_numpy(float)
        if not len(mine):
            raise SimError(f"tenant {t.name!r} completed no kernel in {duration_ms} ms; lengthen duration_ms")
        out.append({"tenant": t.name, "p50_alone_ms": _pct(alone, 50), "p99_alone_ms": _pct(alone, 99),
                    "p50_shared_ms": _pct(mine, 50), "p99_shared_ms": _pct(mine, 99),
                    "df": degradation_factor([mine], [alone], 0.99, interval=False).estimate})
    return pd.DataFrame(out)


SWEEP_PARAMS = ("quantum_ms", "context_switch_ms", "<tenant>.kernel_ms", "<tenant>.period_ms")


def sweep(tenants: Sequence[SimTenant], param: str, values: Iterable[float], *, quantum_ms: float = 2.0,
          context_switch_ms: float = 0.0, duration_ms: float = DEFAULT_DURATION_MS,
          seed: int = 0) -> pd.DataFrame:
    """DF per tenant for each value of one parameter (long format: param, value, tenant, df, p99s).

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
        d = degradation(ts, q, cs, duration_ms, seed)
        d.insert(0, "value", v)
        d.insert(0, "param", param)
        parts.append(d)
    return pd.concat(parts, ignore_index=True)


def _queue_waits(df: pd.DataFrame, tenant: str) -> np.ndarray:
    """Issue-to-first-run waits: exactly what host wall minus CUDA-event time measures on a real GPU."""
    g = df[df["tenant"] == tenant]
    return (g["start_ms"] - g["arrival_ms"]).to_numpy(float)


def fit_distances(measured_waits_ms: Mapping[str, Sequence[float]] | Sequence[float],
                  tenants: Sequence[SimTenant], candidates: Iterable[float], *, context_switch_ms: float = 0.0,
                  duration_ms: float = DEFAULT_DURATION_MS, seed: int = 0,
                  quantiles: Sequence[float] = FIT_QUANTILES) -> pd.DataFrame:
    """The distance of each candidate quantum's simulated waits to the measured ones (see fit_quantum)."""
    tenants = list(tenants)
    names = [t.name for t in tenants]
    if isinstance(measured_waits_ms, Mapping):
        measured = {k: np.asarray(v, float) for k, v in measured_waits_ms.items()}
    else:
        measured = {names[0] if names else "": np.asarray(measured_waits_ms, float)}
    unknown = sorted(set(measured) - set(names))
    if unknown:
        raise SimError(f"measured waits for unknown tenant(s) {unknown}; tenants are {names}")
    for k, v in measured.items():
        if v.ndim != 1 or not len(v) or not np.isfinite(v).all():
            raise SimError(f"measured waits of {k!r} must be a non-empty list of finite numbers")
    cands = sorted({float(c) for c in candidates})
    if not cands or any(not math.isfinite(c) or c <= 0 for c in cands):
        raise SimError(f"candidates must be non-empty and > 0, got {cands}")
    qs = np.asarray(quantiles, float)
    out = []
    for c in cands:
        sim = simulate(tenants, c, context_switch_ms, duration_ms, seed)
        dist = 0.0
        for name, meas in measured.items():
            simw = _queue_waits(sim, name)
            if not len(simw):
                raise SimError(f"tenant {name!r} completed no kernel in {duration_ms} ms; lengthen duration_ms")
            dist += float(np.abs(np.quantile(meas, qs) - np.quantile(simw, qs)).mean())
        out.append({"quantum_ms": c, "distance_ms": dist / len(measured)})
    return pd.DataFrame(out)


def fit_quantum(measured_waits_ms: Mapping[str, Sequence[float]] | Sequence[float],
                tenants: Sequence[SimTenant], candidates: Iterable[float], *, context_switch_ms: float = 0.0,
                duration_ms: float = DEFAULT_DURATION_MS, seed: int = 0,
                quantiles: Sequence[float] = FIT_QUANTILES) -> float:
    """The candidate quantum whose simulated waits best match the measured ones.

    ``measured_waits_ms``: per tenant name, the measured waits (host wall - device event time);
    a bare sequence means the first tenant's. The simulated wait compared is issue-to-first-run
    (``start_ms - arrival_ms``), which is what wall minus CUDA-event time measures. Distance: the
    mean absolute difference between measured and simulated wait quantiles at ``quantiles``
    (default p50, p75, p90, p95, p99: the upper part, where the quantum shows), averaged over
    tenants. Ties go to the smaller quantum.
    """
    d = fit_distances(measured_waits_ms, tenants, candidates, context_switch_ms=context_switch_ms,
                      duration_ms=duration_ms, seed=seed, quantiles=quantiles)
    return float(d.loc[d["distance_ms"].idxmin(), "quantum_ms"])


DEFAULT_CANDIDATES = tuple(float(x) for x in np.round(np.geomspace(0.25, 64.0, 25), 3))
