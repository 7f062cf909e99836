"""The analysis rules, each written once: every table, comparison, chart and the teaching notebook use these.

* **Clocks**: wait = wall - device - overhead floor (clipped at 0); open-loop response = end - intended arrival.
* **Co-running**: a shared iteration counts only if it lies inside [latest first start, earliest last end] over
  its scenario's tenants, computed from the raw lines (padding included) before any trimming; padding
  (phase ``pad``) is never a statistic.
* **Warm-up**: nothing data-driven by default (the same fixed ``trim`` for every series); MSER-5 as a
  diagnostic, or ``mser5-paired``: one cut for a tenant's alone and shared series alike.
* **Repeat groups**: ``shared-r2`` belongs to group ``shared``; repeats pool into one row, and their intervals
  come from the two-level bootstrap (runs, then iterations).
* **Baseline matching**: a shared series is compared with the alone series of the same tenant and phase, else
  of the same workload and phase.
* **DF** = shared q-quantile / alone q-quantile, its interval from both sides' intervals (MOVER), and its
  reading ("degraded", ...) only with enough co-running samples (``MIN_CORUNNING`` = 368 for a two-sided p99
  at 95 %) and only where the interval's coverage was measured (n >= 300, lag-1 autocorrelation <= 0.9;
  ``analyse.coverage``), else "insufficient data". The verdict over DF and the tail-exceedance test
  (degraded / faster when shared / no change within ±10 % / inconclusive) is ``analyse.verdict.decide``;
  it calls ``degradation`` here, the one DF.
* **The interval choice**: the order-statistic interval at the exceedance indicator's effective sample size
  (``orderstat``; repeats pooled, their scatter included); a bootstrap only on request (for comparison, its
  readings are "insufficient data": its coverage fails at the kit's sizes); fewer than 2 samples: none.
* **CCDF**: exceedance P(X > x), thinned in the body, every point in the tail.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from kts_helpers.analyse import orderstat, stats
from kts_helpers.analyse.estimate import Estimate
from kts_helpers.errors import LogParseError, RunError
from kts_helpers.run.logformat import PAD_PHASE

METRICS = ("device", "wall", "wait")
PERCENTILES = (0.50, 0.95, 0.99)
WARMUP_RULES = ("none", "mser5-paired")
NO_CORUNNING = "no co-running samples"
INSUFFICIENT_CORUNNING = "insufficient co-running data"
REPEAT_SUFFIX = r"-r\d+$"
# Keys of one summary row: the scenario kind (baseline/shared), the repeat group, and who.
GROUP_KEYS = ["kind", "group", "sharing", "tenant", "workload", "phase"]


# -- clocks ---------------------------------------------------------------------------------------------------
def add_clocks(frame: pd.DataFrame, floor_ms: float) -> pd.DataFrame:
    """Add ``wait_ms`` (wall - device - floor, at least 0) and ``response_ms`` (from the intended arrival)."""
    out = frame.copy()
    out["wait_ms"] = np.maximum(out["wall_ms"] - out["device_ms"] - floor_ms, 0.0)
    out["response_ms"] = (out["end_ns"] - out["intended_ns"]).to_numpy(np.int64) / 1e6
    return out


# -- repeat groups --------------------------------------------------------------------------------------------
def scenario_group(name: str) -> str:
    """Repeats of a scenario ("shared-r2") form one group ("shared")."""
    return re.sub(REPEAT_SUFFIX, "", str(name))


def scenario_groups(names: pd.Series) -> pd.Series:
    return names.astype(str).str.replace(REPEAT_SUFFIX, "", regex=True)


# -- co-running -----------------------------------------------------------------------------------------------
def series_label(tenant: str, phase: str) -> str:
    """How a tenant's series is named everywhere (tables, charts, the index): the phase only where a workload has
    several (an llm's prefill and decode), so two rows never read the same."""
    return tenant if phase in ("op", "") else f"{tenant} ({phase})"


def mark_overlap(frame: pd.DataFrame, *, clip: bool = True) -> pd.DataFrame:
    """Flag iterations that ran while every tenant of their shared scenario was active (``in_overlap``).

    Computed from the raw logs, padding lines included and before any trimming: a shared scenario's
    window is [latest first start, earliest last end] over its tenants' lines, and only iterations
    entirely inside it count as shared. Baseline scenarios are all "inside". (The same rule as
    ``tests/independent/corunning.py``, the independent check.)
    """
    out = frame.copy()
    out["in_overlap"] = True
    if not clip:
        return out
    for _scen, grp in out[out["kind"] == "shared"].groupby("scenario", sort=False):
        spans = grp.groupby("tenant")[["start_ns", "end_ns"]].agg({"start_ns": "min", "end_ns": "max"})
        if len(spans) < 2:
            continue
        lo, hi = int(spans["start_ns"].max()), int(spans["end_ns"].min())
        out.loc[grp.index, "in_overlap"] = (grp["start_ns"] >= lo) & (grp["end_ns"] <= hi)
    return out


def in_flight(launch_ns: np.ndarray, op_start_ns: np.ndarray, op_end_ns: np.ndarray) -> np.ndarray:
    """For each launch instant, whether it lies inside some operation's closed [start, end]: a collision.

    Those two host stamps enclose a neighbour's launch and its synchronize, so its GPU work lies inside them
    (``collisions`` says why the same definition as ``tests/independent/tailcount.py``)."""
    launch = np.asarray(launch_ns, np.int64)
    if len(op_start_ns) == 0:
        return np.zeros(len(launch), bool)
    order = np.argsort(op_start_ns, kind="stable")
    starts = np.asarray(op_start_ns, np.int64)[order]
    reach = np.maximum.accumulate(np.asarray(op_end_ns, np.int64)[order])  # latest end among ops started so far
    i = np.searchsorted(starts, launch, side="right") - 1
    return (i >= 0) & (reach[np.maximum(i, 0)] >= launch)


def mark_collided(frame: pd.DataFrame) -> pd.DataFrame:
    """Flag each shared iteration launched while a neighbour's operation was in flight (``collided``).

    Applied to the raw lines (padding and any later-trimmed iterations included: they held the GPU), so the
    flag is the one ``collisions.run_collisions`` counts. The verdict asks whether these launches, picked by the
    neighbours' timestamps and not by the tenant's own time, are slower than the alone tail
    (``verdict.decide``'s ``collided``). Alone rows, and shared ones without a neighbour, are never flagged.
    """
    out = frame.copy()
    out["collided"] = False
    for _key, grp in out[out["kind"] == "shared"].groupby(["scenario", "repeat"], sort=False):
        for _tenant, own in grp.groupby("tenant", sort=False):
            ops = grp[grp["tenant"] != _tenant]
            if len(ops):
                out.loc[own.index, "collided"] = in_flight(own["start_ns"].to_numpy(np.int64),
                                                           ops["start_ns"].to_numpy(np.int64),
                                                           ops["end_ns"].to_numpy(np.int64))
    return out


def split_padding(frame: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(timed iterations, padding lines): padding proves a neighbour was busy and is never a statistic."""
    pad = frame["phase"] == PAD_PHASE
    return frame[~pad], frame[pad]


def min_corunning_samples(q: float = 0.99, confidence: float = 0.95) -> int:
    """The fewest co-running samples from which a shared series' q-quantile gets a reading.

    The interval is two-sided at ``confidence``: its upper bound exists only when the chance that *no*
    sample lies above the true quantile, q^n, is below (1 - confidence) / 2 -- n >= 368 for a p99 at 95 %
    (0.99^367 = 0.0251). Below that the sample p99 is little more than the maximum. Such a series gets
    "insufficient co-running data" instead of a reading. (The stricter 662-sample rule for a two-sample
    99 % bound stays a warning in the sample notes.)
    """
    t = max(q, 1 - q)
    return int(np.floor(np.log((1.0 - confidence) / 2) / np.log(t))) + 1


MIN_CORUNNING = min_corunning_samples()
# The one sample-size rule the report and every docs page quote, word for word (a test holds them to it).
SAMPLE_SIZE_RULE = (f"A p99 has a two-sided 95 % interval only from {MIN_CORUNNING} effective samples (n / τ, τ from "
                    f"how its slow iterations cluster; 0.99^{MIN_CORUNNING} < 0.025): below that its upper bound is "
                    f"open, and slow iterations in a few bursts can keep it open above.")


def sample_note(n: int, ess: float | None = None, q: float = 0.99) -> str | None:
    """The report's sample-size note for a series by ``SAMPLE_SIZE_RULE``, naming the effective samples (n / τ, the
    p99 interval's own) that decide; None where there are enough."""
    eff = float(n) if ess is None or ess != ess else min(float(n), ess)
    if eff >= MIN_CORUNNING:
        return None
    held = f"{n} samples, {eff:.0f} effective (n / τ)" if eff < n - 0.5 else f"{n} samples"
    return (f"{held}: a p{100 * q:g}'s two-sided 95 % interval needs {MIN_CORUNNING} effective samples, so its upper "
            "bound is open")


def df_reading(n_shared: int, wording: str | None) -> str:
    """The words for a shared row's DF: too little co-running data first, then the interval's wording."""
    if n_shared == 0:
        return NO_CORUNNING
    if n_shared < MIN_CORUNNING:
        return f"{INSUFFICIENT_CORUNNING} (n = {n_shared} < {MIN_CORUNNING})"
    return wording or "no interval computed"


# -- warm-up --------------------------------------------------------------------------------------------------
def trim_leading(frame: pd.DataFrame, n: int) -> pd.DataFrame:
    """Drop the first ``n`` timed iterations of each (scenario, tenant, phase) series."""
    if n <= 0:
        return frame
    keys = [c for c in ("source", "scenario", "tenant", "phase") if c in frame]
    rank = frame.groupby(keys, sort=False).cumcount()
    return frame[rank >= n]


def apply_warmup(frame: pd.DataFrame, *, trim: int = 0, rule: str = "none",
                 max_fraction: float = 0.2) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Drop leading timed iterations; return the kept ones and a table of what each series lost and why.

    The untimed warm-up runs before the start barrier, so by default only the fixed ``trim`` is
    applied, the same count to every series. A data-driven cut could remove the contention itself
    (a neighbour's burst at the start of a shared series looks like a transient), so MSER-5 (White
    1997: the cut minimising the standard error of the remaining mean over batches of 5) is only a
    *diagnostic* here (column ``mser5_point``), unless ``rule="mser5-paired"``: then each tenant's
    alone and shared series lose the same number of iterations, the largest MSER-5 point over all of
    them (at most ``max_fraction`` of the shortest), so DF compares tails cut alike.
    """
    if rule not in WARMUP_RULES:
        raise RunError(f"unknown warm-up rule {rule!r}; choose one of {', '.join(WARMUP_RULES)}")
    if trim < 0:
        raise RunError(f"trim must be >= 0, got {trim}")
    series = []
    for (scen, tenant, phase), grp in frame.groupby(["scenario", "tenant", "phase"], sort=False):
        grp = grp.sort_values("start_ns")
        x = grp["wall_ms"].to_numpy(np.float64)
        point = stats.steady_state_start(x, detect=True, max_fraction=max_fraction)[0] if len(x) >= 20 else None
        series.append((scen, tenant, phase, grp, point))
    paired: dict[tuple[str, str], int] = {}
    if rule == "mser5-paired":
        cuts: dict[tuple[str, str], list[tuple[int, int]]] = {}
        for _scen, tenant, phase, grp, point in series:
            cuts.setdefault((tenant, phase), []).append((point or 0, len(grp)))
        for key, found in cuts.items():  # the largest point, but never more than max_fraction of the shortest
            paired[key] = min(max(p for p, _ in found), int(max_fraction * min(n for _, n in found)))
    keep, rows = [], []
    for scen, tenant, phase, grp, point in series:
        n = min(max(trim, paired.get((tenant, phase), 0)), len(grp))
        why = (f"fixed: first {trim} timed iterations" if rule == "none" else
               f"paired MSER-5: the same {n} iterations in every series of {tenant}")
        keep.append(grp.iloc[n:])
        rows.append({"scenario": scen, "tenant": tenant, "phase": phase, "iterations": len(grp), "dropped": int(n),
                     "rule": why, "mser5_point": point, "diagnostic": _stationarity_note(point, len(grp))})
    kept = pd.concat(keep).sort_index() if keep else frame
    return kept, pd.DataFrame(rows, columns=["scenario", "tenant", "phase", "iterations", "dropped", "rule",
                                             "mser5_point", "diagnostic"])


def _stationarity_note(point: int | None, n: int) -> str:
    if point is None:
        return "too short for MSER-5"
    if point == 0:
        return "stationary by MSER-5"
    return f"not stationary by MSER-5: its level settles after iteration {point} ({100 * point / n:.0f} %)"


# -- the samples behind a row ---------------------------------------------------------------------------------
def series_groups(frame: pd.DataFrame, metric: str, column: str | None = None
                  ) -> list[tuple[dict[str, Any], list[np.ndarray]]]:
    """The samples behind each summary row: one array per repeat, co-running only, in time order.

    A series with no iteration inside its overlap window still gets its (empty) arrays, so the row
    that says "no co-running samples" is shown instead of vanishing. ``column``: another per-iteration
    column in the same grouping and order (``collided``), aligned element for element with the metric's.
    """
    if metric not in METRICS:
        raise ValueError(f"unknown metric {metric!r}; choose one of {', '.join(METRICS)}")
    col = column or f"{metric}_ms"
    if col not in frame:
        raise LogParseError(f"metric {metric!r} needs column {col}; add_clocks() first")
    data = frame[frame["phase"] != PAD_PHASE]
    if "group" not in data:
        data = data.assign(group=scenario_groups(data["scenario"]))
    if "repeat" not in data:
        data = data.assign(repeat=0)
    inside = data["in_overlap"].to_numpy(bool) if "in_overlap" in data else np.ones(len(data), bool)
    data = data.assign(_inside=inside)
    out = []
    for key, grp in data.groupby(GROUP_KEYS, sort=False, dropna=False):
        runs = [g.loc[g["_inside"]].sort_values("start_ns")[col].to_numpy(np.float64)
                for _, g in grp.groupby("repeat", sort=True)]
        out.append((dict(zip(GROUP_KEYS, key, strict=True)), runs))
    return out


# -- baseline matching ----------------------------------------------------------------------------------------
def match_baseline(candidates: pd.DataFrame, tenant: str, workload: str, phase: str,
                   sharing: str | None = None) -> pd.DataFrame:
    """The alone rows a shared series is compared with: same tenant and phase, else same workload and phase; and
    where the run has alone blocks of the shared series' own ``sharing`` mode, only those.

    ``candidates``: rows (iterations or summary rows) of alone scenarios with tenant/workload/phase columns. Why
    the mode: under the warm design the MPS mode's alone blocks run as MPS clients with the server up
    (``baseline-mps-<t>-rK``, sharing ``mps``), interleaved with the MPS shared blocks; they, not the plain alone
    blocks of another moment, are what an MPS shared block is paired with. Runs whose alone blocks are all plain
    (every run before the warm design) compare every mode with them, as before.
    """
    match = candidates[(candidates["tenant"] == tenant) & (candidates["phase"] == phase)]
    if match.empty:
        match = candidates[(candidates["workload"] == workload) & (candidates["phase"] == phase)]
    if sharing is not None and "sharing" in match:
        same = match[match["sharing"] == sharing]
        match = same if not same.empty else match[match["sharing"] == "timeslice"] if (
            match["sharing"] == "timeslice").any() else match
    return match


# -- quantiles and DF with their intervals --------------------------------------------------------------------
def _nan_interval(note: str) -> stats.Interval:
    return stats.Interval(float("nan"), float("nan"), float("nan"), "stationary", None, 0, 0, 0.95, False, note)


def _usable(runs: Sequence[np.ndarray]) -> list[np.ndarray]:
    return [np.asarray(r, np.float64) for r in runs if len(r)]


def quantile(runs: Sequence[np.ndarray], q: float, *, n_resamples: int = 2000, seed: int | None = 0,
             method: str = "order", confidence: float = 0.95) -> stats.Interval:
    """q-quantile of the pooled runs with its interval (the repeats' scatter included), else of one series."""
    runs = _usable(runs)
    if not runs or sum(len(r) for r in runs) < 2:
        return _nan_interval("fewer than 2 samples")
    opts: dict[str, Any] = {"n_resamples": n_resamples, "seed": seed, "method": method, "confidence": confidence}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", stats.ShortSeriesWarning)
        if len(runs) > 1 and all(len(r) >= 2 for r in runs):
            return stats.quantile_ci_runs(runs, q, **opts)
        return stats.quantile_interval(np.concatenate(runs), q, **opts)


def jitter(runs: Sequence[np.ndarray], *, method: str = "order", confidence: float = 0.95,
           n_resamples: int = 2000, seed: int | None = 0) -> stats.Interval | None:
    """Jitter p99 / p50 of one series (or of repeats pooled) with its interval; None where it has no ratio."""
    runs = _usable(runs)
    x = np.concatenate(runs) if runs else np.zeros(0)
    if len(x) < 2 or x.min() <= 0:
        return None
    if method == "order" and len(runs) > 1 and all(len(r) >= 2 for r in runs):
        return stats.ratio_of(quantile(runs, 0.99, confidence=confidence), quantile(runs, 0.50, confidence=confidence),
                              confidence, orderstat.quantile_correlation(0.50, 0.99))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", stats.ShortSeriesWarning)
        return stats.jitter_ci(x, method=method, confidence=confidence, n_resamples=n_resamples, seed=seed)


def throughput_change(shared: Sequence[np.ndarray], alone: Sequence[np.ndarray], *, method: str = "order",
                      confidence: float = 0.95, n_resamples: int = 2000,
                      seed: int | None = 0) -> stats.Interval | None:
    """Throughput shared vs alone (1000 / mean latency), as a change (-0.2: 20 % fewer per second), with its
    interval; repeats are pooled (their series' long-run variance includes the runs' level shifts)."""
    sh, al = _usable(shared), _usable(alone)
    if sum(len(r) for r in sh) < 2 or sum(len(r) for r in al) < 2:
        return None
    x, y = np.concatenate(sh), np.concatenate(al)
    if min(x.min(), y.min()) <= 0:
        return None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", stats.ShortSeriesWarning)
        return stats.mean_ratio_ci(x, y, method=method, confidence=confidence, n_resamples=n_resamples, seed=seed)


@dataclass(frozen=True)
class Degradation:
    """DF = shared q-quantile / alone q-quantile, with its interval and its reading."""

    estimate: float
    lo: float
    hi: float
    n_shared: int
    n_alone: int
    reading: str
    note: str = ""
    interval: stats.Interval | None = None
    shared: stats.Interval | None = None  # the two sides' own intervals ("order")
    alone: stats.Interval | None = None

    @property
    def bounds(self) -> Estimate:
        """DF with its interval as it travels to the tables (``estimate.Estimate``)."""
        return Estimate(self.estimate, self.lo, self.hi)


def _untested(method: str, sides: dict[str, stats.Interval]) -> str | None:
    """Why no reading may rest on these intervals: a bootstrap, or a side outside the tested range."""
    if method != "order":
        return f"{stats.INSUFFICIENT_DATA} (the {method} bootstrap's coverage fails at the kit's sizes)"
    for side, iv in sides.items():
        n = sum(iv.n) if isinstance(iv.n, tuple) else int(iv.n)
        why = orderstat.untested(n, float(iv.lag1 or 0.0))
        if why:
            return f"{stats.INSUFFICIENT_DATA} ({side}: {why})"
    return None


def _wording(d: stats.Interval, sides: dict[str, stats.Interval], q: float) -> str:
    """The interval's reading; where a missing bound leaves it open, which side's quantile lacks which bound."""
    wording = stats.df_wording(d.lo, d.hi)
    if not wording.startswith(stats.INSUFFICIENT_DATA):
        return wording
    missing = [f"the {side} p{100 * q:g} has no {name} bound at n = {sum(iv.n) if isinstance(iv.n, tuple) else iv.n}"
               for side, iv in sides.items() for name, bound in (("upper", iv.hi), ("lower", iv.lo))
               if not np.isfinite(bound)]
    return f"{stats.INSUFFICIENT_DATA} ({'; '.join(missing)})" if missing else wording


def degradation(shared: Sequence[np.ndarray], alone: Sequence[np.ndarray], q: float = 0.99, *,
                interval: bool = True, n_resamples: int = 2000, seed: int | None = 0, method: str = "order",
                confidence: float = 0.95) -> Degradation:
    """The degradation factor of a shared series against its alone series (each a list of runs/repeats).

    The interval combines the two sides' own intervals (``quantile``; MOVER on the log scale), the two
    series being independent. The reading ("degraded", "no detectable change", "faster when shared")
    needs ``MIN_CORUNNING`` shared samples, and both sides inside the range where the interval's coverage
    was measured (``orderstat.untested``), else "insufficient data (why)". ``interval=False`` gives the
    point estimate only (the summary table before intervals).
    """
    sh, al = _usable(shared), _usable(alone)
    n_sh, n_al = sum(len(r) for r in sh), sum(len(r) for r in al)
    if n_sh == 0 or n_al == 0:
        why = "no alone series to compare with" if n_al == 0 else NO_CORUNNING
        return Degradation(float("nan"), float("nan"), float("nan"), n_sh, n_al, df_reading(n_sh, None), why)
    base = float(np.quantile(np.concatenate(al), q))
    est = float(np.quantile(np.concatenate(sh), q)) / base if base > 0 else float("nan")
    if not interval or n_sh < 2 or n_al < 2 or min(float(np.min(r)) for r in sh + al) <= 0:
        note = "" if not interval else "fewer than 2 samples or latencies <= 0: no interval"
        return Degradation(est, float("nan"), float("nan"), n_sh, n_al, df_reading(n_sh, None), note)
    opts: dict[str, Any] = {"n_resamples": n_resamples, "seed": seed, "method": method, "confidence": confidence}
    sides: dict[str, stats.Interval] = {}
    if method == "order":
        sides = {"shared": quantile(sh, q, **opts), "alone": quantile(al, q, **opts)}
        iv = stats.ratio_of(sides["shared"], sides["alone"], confidence)
    else:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", stats.ShortSeriesWarning)
            if len(sh) > 1 and len(al) > 1 and all(len(r) >= 2 for r in sh + al):
                iv = stats.ratio_ci_runs(sh, al, q, **opts)
            else:
                iv = stats.ratio_ci(np.concatenate(sh), np.concatenate(al), q, **opts)
    wording = _untested(method, sides) or _wording(iv, sides, q)
    return Degradation(iv.estimate, iv.lo, iv.hi, n_sh, n_al, df_reading(n_sh, wording), iv.note, iv,
                       sides.get("shared"), sides.get("alone"))


def runs_of(rows: pd.DataFrame, col: str) -> list[np.ndarray]:
    """One array per repeat (time order kept): what the two-level bootstrap resamples."""
    if rows.empty:
        return []
    key = "repeat" if "repeat" in rows else "scenario"
    return [g.sort_values("start_ns")[col].to_numpy(np.float64) for _, g in rows.groupby(key, sort=True)]


def collided_of(rows: pd.DataFrame) -> list[np.ndarray] | None:
    """Per repeat, which iterations found a neighbour in flight, aligned with ``runs_of`` (None: not flagged)."""
    return [r.astype(bool) for r in runs_of(rows, "collided")] if "collided" in rows else None


# -- the tail -------------------------------------------------------------------------------------------------
def ccdf(x: Sequence[float] | np.ndarray, max_points: int = 1500, tail_points: int = 200) -> tuple[np.ndarray, np.ndarray]:
    """(sorted latencies, P(X > x)) thinned to about ``max_points`` in the body, every point in the tail.

    The last point (exceedance 0) is left out: it cannot be drawn on a log scale.
    """
    xs = np.sort(np.asarray(x, np.float64))
    n = len(xs)
    if n == 0:
        return xs, xs
    p = 1.0 - np.arange(1, n + 1) / n
    keep = np.unique(np.concatenate([np.linspace(0, n - 1, min(n, max_points)).astype(int),
                                     np.arange(max(0, n - tail_points), n)]))
    keep = keep[p[keep] > 0]
    return xs[keep], p[keep]
