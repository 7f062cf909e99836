"""Beyond the article: sharing modes side by side, who hurts whom, open-loop arrivals, LLM phases.

The article compares one pair of tenants alone and time-sliced. A run of this kit can hold more:
the same pair under CUDA time-slicing, MPS and MPS with a thread limit; every pair of three
tenants plus all of them together (a contention matrix); a tenant whose operations arrive on
their own schedule (open loop); and an LLM-like tenant with a prefill and a decode phase.
Each function here is a pure function of a :class:`~kts_helpers.analysis.RunData` (or of the
tables built from it) and returns a DataFrame; the matching charts are in ``plots``.

Conventions shared with the rest of the kit:

* shared scenarios use only the iterations inside the overlap window (``in_overlap``);
* repeats of a scenario (``shared-r2``...) form one group; with two or more repeats the
  intervals come from the two-level bootstrap (runs, then iterations), else from the
  stationary block bootstrap over the iterations of the one run;
* DF = shared q-quantile / alone q-quantile of the same tenant and phase (falling back to
  the same workload), the two samples resampled independently (``stats.ratio_ci``);
* intervals are 95 % bootstrap percentile intervals; ``note`` carries what the bootstrap said
  (a short series, redrawn resamples), ``""`` when nothing.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from kts_helpers.analyse import stats
from kts_helpers.analyse.load import RunData, df_reading, scenario_group

__all__ = [
    "MODE_ORDER", "contention_matrix", "has_matrix", "has_modes", "has_open_loop", "has_phases",
    "modes_table", "open_closed_frame", "open_loop_table", "phase_table", "queue_growth",
]

MODE_ORDER = ("alone", "timeslice", "mps", "mps-limited")
ALL_OTHERS = "all others"
PRIMARY_PHASE = {"llm": "decode"}  # the phase a workload's headline number uses; others: every phase


# -- scenario catalogue -------------------------------------------------------------------------------------
@dataclass(frozen=True)
class _Scen:
    name: str
    group: str
    kind: str
    sharing: str
    repeat: int
    tenants: tuple[str, ...]


def _catalogue(data: RunData) -> list[_Scen]:
    """Every scenario with iterations: from the manifest's spec where it lists it, else from the iterations."""
    it = data.iterations
    present = set(it["scenario"].unique())
    out: list[_Scen] = []
    seen: set[str] = set()
    for s in data.manifest.get("spec", {}).get("scenarios", []):
        if s["name"] in present and s.get("kind") in ("baseline", "shared"):
            out.append(_Scen(s["name"], scenario_group(s["name"]), s["kind"], s.get("sharing", "timeslice"),
                             int(s.get("repeat", 0) or 0), tuple(t["name"] for t in s["tenants"])))
            seen.add(s["name"])
    for name, grp in it[~it["scenario"].isin(seen)].groupby("scenario", sort=False):
        kind = str(grp["scenario_kind"].iloc[0])
        if kind not in ("baseline", "shared"):
            continue
        out.append(_Scen(str(name), scenario_group(str(name)), kind,
                         str(grp["sharing"].iloc[0]) if "sharing" in grp else "timeslice",
                         int(grp["repeat"].iloc[0]) if "repeat" in grp else 0,
                         tuple(dict.fromkeys(grp["tenant"].astype(str)))))
    return out


def _tenant_order(data: RunData) -> list[str]:
    names: list[str] = []
    for s in _catalogue(data):
        names += [t for t in s.tenants if t not in names]
    return names


def _rows(data: RunData, scenarios: Iterable[str], tenant: str, phase: str | None = None) -> pd.DataFrame:
    """Overlap-clipped rows of one tenant (and phase) in some scenarios, in time order."""
    it = data.iterations
    sel = it["scenario"].isin(list(scenarios)) & (it["tenant"] == tenant)
    if phase is not None:
        sel &= it["phase"] == phase
    if "in_overlap" in it:
        sel &= it["in_overlap"].astype(bool)
    return it[sel].sort_values("start_ns")


def _runs(rows: pd.DataFrame, col: str) -> list[np.ndarray]:
    """One array per repeat (time order kept): what the two-level bootstrap resamples."""
    if rows.empty:
        return []
    key = "repeat" if "repeat" in rows else "scenario"
    return [g[col].to_numpy(np.float64) for _, g in rows.groupby(key, sort=True)]


def _baseline_rows(data: RunData, cat: list[_Scen], tenant: str, workload: str, phase: str) -> pd.DataFrame:
    """The alone series a shared series is compared with: same tenant, else same workload; same phase."""
    base = [s for s in cat if s.kind == "baseline"]
    rows = _rows(data, [s.name for s in base if tenant in s.tenants], tenant, phase)
    if rows.empty:
        it = data.iterations
        names = [s.name for s in base]
        sel = it["scenario"].isin(names) & (it["workload"] == workload) & (it["phase"] == phase)
        rows = it[sel].sort_values("start_ns")
    return rows


# -- intervals ----------------------------------------------------------------------------------------------
def _nan_interval(note: str) -> stats.Interval:
    return stats.Interval(float("nan"), float("nan"), float("nan"), "stationary", None, 0, 0, 0.95, False, note)


def _quantile(runs: list[np.ndarray], q: float, n_resamples: int, seed: int | None) -> stats.Interval:
    """q-quantile of the pooled runs with its interval (two-level bootstrap when there are repeats)."""
    runs = [r for r in runs if len(r)]
    if not runs or sum(len(r) for r in runs) < 2:
        return _nan_interval("fewer than 2 samples")
    opts: dict[str, Any] = {"n_resamples": n_resamples, "seed": seed, "method": "stationary"}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", stats.ShortSeriesWarning)
        if len(runs) > 1 and all(len(r) >= 2 for r in runs):
            return stats.quantile_ci_runs(runs, q, **opts)
        return stats.quantile_interval(np.concatenate(runs), q, **opts)


def _ratio(shared: list[np.ndarray], alone: list[np.ndarray], q: float, n_resamples: int,
           seed: int | None) -> stats.Interval:
    """DF = shared q-quantile / alone q-quantile with its interval; NaN with a note when it cannot be had."""
    shared, alone = [r for r in shared if len(r)], [r for r in alone if len(r)]
    if sum(len(r) for r in shared) < 2 or sum(len(r) for r in alone) < 2:
        return _nan_interval("no alone series to compare with" if not alone else "fewer than 2 samples")
    if min(float(np.min(r)) for r in shared + alone) <= 0:
        return _nan_interval("latencies <= 0: no ratio")
    opts: dict[str, Any] = {"n_resamples": n_resamples, "seed": seed, "method": "stationary"}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", stats.ShortSeriesWarning)
        if len(shared) > 1 and len(alone) > 1 and all(len(r) >= 2 for r in shared + alone):
            return stats.ratio_ci_runs(shared, alone, q, **opts)
        return stats.ratio_ci(np.concatenate(shared), np.concatenate(alone), q, **opts)


def _wording(iv: stats.Interval, n_shared: int) -> str:
    """The shared series' DF reading: too little co-running data first (``analysis.df_reading``)."""
    words = stats.df_wording(iv.lo, iv.hi) if np.isfinite(iv.lo) and np.isfinite(iv.hi) else None
    return df_reading(n_shared, words)


def _notes(*ivs: stats.Interval) -> str:
    return "; ".join(dict.fromkeys(iv.note for iv in ivs if iv.note))


def _phase_label(tenant: str, phase: str) -> str:
    return tenant if phase in ("op", "") else f"{tenant} ({phase})"


# -- 1. sharing modes ---------------------------------------------------------------------------------------
def has_modes(data: RunData) -> bool:
    """Whether the run's shared scenarios use more than one sharing mode (timeslice, mps, mps-limited)."""
    return len({s.sharing for s in _catalogue(data) if s.kind == "shared"}) > 1


def _thread_pct(data: RunData, scen: str, tenant: str) -> float:
    for s in data.manifest.get("spec", {}).get("scenarios", []):
        if s["name"] == scen:
            for t in s["tenants"]:
                if t["name"] == tenant and t.get("mps_thread_percentage") is not None:
                    return float(t["mps_thread_percentage"])
    return float("nan")


def modes_table(data: RunData, *, metric: str = "wall", n_resamples: int = 2000,
                seed: int | None = 0) -> pd.DataFrame:
    """Per tenant (and phase) and sharing mode: p50/p99 with intervals, DF vs alone, device p50.

    Why: the article measures time-slicing only. MPS lets kernels of different processes share
    the SMs at once, and a thread limit caps a tenant's share; whether that helps the victim, and
    what it costs the neighbour, is only visible with both tenants' numbers side by side, each
    with its interval. One row per tenant is the alone baseline (mode "alone"); for each mode the
    scenario with the most tenants is used (``shared``/``shared-all`` in matrix runs).
    Columns: tenant, workload, phase, label, mode, scenario, thread_pct (MPS thread limit), n,
    p50_ms/p50_lo/p50_hi, p99_ms/p99_lo/p99_hi, device_p50_ms, df/df_lo/df_hi (p99), wording, note.
    """
    col = f"{metric}_ms"
    cat = _catalogue(data)
    picked: dict[str, list[_Scen]] = {}
    for mode in dict.fromkeys(s.sharing for s in cat if s.kind == "shared"):
        scens = [s for s in cat if s.kind == "shared" and s.sharing == mode]
        top = max(len(s.tenants) for s in scens)
        groups = list(dict.fromkeys(s.group for s in scens if len(s.tenants) == top))
        picked[mode] = [s for s in scens if s.group == groups[0]]
    it = data.iterations
    rows = []
    for tenant in _tenant_order(data):
        mine = it[it["tenant"] == tenant]
        if mine.empty:
            continue
        workload = str(mine["workload"].iloc[0])
        for phase in dict.fromkeys(mine["phase"].astype(str)):
            alone = _baseline_rows(data, cat, tenant, workload, phase)
            series = [("alone", [s for s in cat if s.kind == "baseline" and tenant in s.tenants], alone)]
            for mode, scens in picked.items():
                scens = [s for s in scens if tenant in s.tenants]
                if scens:
                    series.append((mode, scens, _rows(data, [s.name for s in scens], tenant, phase)))
            base_runs = _runs(alone, col)
            for mode, scens, r in series:
                if r.empty and mode == "alone":
                    continue
                runs = _runs(r, col)
                p50 = _quantile(runs, 0.50, n_resamples, seed)
                p99 = _quantile(runs, 0.99, n_resamples, seed)
                df = _ratio(runs, base_runs, 0.99, n_resamples, seed) if mode != "alone" else None
                scen_name = scens[0].group if scens else "baseline"
                rows.append({
                    "tenant": tenant, "workload": workload, "phase": phase, "label": _phase_label(tenant, phase),
                    "mode": mode, "scenario": scen_name,
                    "thread_pct": _thread_pct(data, scens[0].name, tenant) if scens else float("nan"),
                    "n": int(len(r)),
                    "p50_ms": p50.estimate, "p50_lo": p50.lo, "p50_hi": p50.hi,
                    "p99_ms": p99.estimate, "p99_lo": p99.lo, "p99_hi": p99.hi,
                    "device_p50_ms": float(np.median(r["device_ms"])) if len(r) else float("nan"),
                    "df": df.estimate if df else float("nan"), "df_lo": df.lo if df else float("nan"),
                    "df_hi": df.hi if df else float("nan"), "wording": _wording(df, len(r)) if df else "",
                    "note": _notes(*(x for x in (p50, p99, df) if x is not None)),
                })
    return pd.DataFrame(rows, columns=[
        "tenant", "workload", "phase", "label", "mode", "scenario", "thread_pct", "n", "p50_ms", "p50_lo",
        "p50_hi", "p99_ms", "p99_lo", "p99_hi", "device_p50_ms", "df", "df_lo", "df_hi", "wording", "note"])


# -- 2. contention matrix -----------------------------------------------------------------------------------
def has_matrix(data: RunData) -> bool:
    """Whether some tenant was measured next to more than one set of neighbours in one sharing mode."""
    cat = _catalogue(data)
    for mode in {s.sharing for s in cat if s.kind == "shared"}:
        sets = {frozenset(s.tenants) for s in cat if s.kind == "shared" and s.sharing == mode}
        if len(sets) > 1:
            return True
    return False


def _neighbour_label(s: _Scen, victim: str, all_tenants: list[str]) -> str:
    others = [t for t in s.tenants if t != victim]
    if len(all_tenants) > 2 and set(s.tenants) >= set(all_tenants) and len(others) > 1:
        return ALL_OTHERS
    order = {t: i for i, t in enumerate(all_tenants)}
    return "+".join(sorted(others, key=lambda t: order.get(t, len(order))))


def contention_matrix(data: RunData, *, q: float = 0.99, metric: str = "wall", n_resamples: int = 2000,
                      seed: int | None = 0) -> pd.DataFrame:
    """Who hurts whom: the victim's DF next to each set of neighbours, with its interval and wording.

    Why: one shared scenario says a tenant is slower, not because of whom. Pair scenarios
    (``shared-<a>+<b>``) isolate each neighbour's effect, ``shared-all`` (neighbours "all others")
    shows whether effects add up. One row per victim, neighbour set, sharing mode and phase; for a
    multi-phase workload (llm) every phase has a row and ``primary`` marks the headline one
    (decode: the per-token latency a user feels); single-phase workloads' rows are all primary.
    Columns: victim, neighbours, sharing, phase, primary, scenario, q, metric, alone_ms, shared_ms
    (the q-quantiles), df, df_lo, df_hi, wording, n_shared, n_alone, note.
    """
    col = f"{metric}_ms"
    cat = _catalogue(data)
    tenants = _tenant_order(data)
    it = data.iterations
    workloads = it.drop_duplicates("tenant").set_index("tenant")["workload"].astype(str).to_dict()
    rows = []
    for victim in tenants:
        workload = workloads.get(victim, victim)
        phases = list(dict.fromkeys(it.loc[it["tenant"] == victim, "phase"].astype(str)))
        for mode in dict.fromkeys(s.sharing for s in cat if s.kind == "shared"):
            scens = [s for s in cat if s.kind == "shared" and s.sharing == mode and victim in s.tenants]
            groups: dict[str, list[_Scen]] = {}
            for s in scens:
                groups.setdefault(s.group, []).append(s)
            ordered = sorted(groups.values(), key=lambda g: (len(g[0].tenants), _pair_key(g[0], victim, tenants)))
            for grp in ordered:
                label = _neighbour_label(grp[0], victim, tenants)
                for phase in phases:
                    shared = _rows(data, [s.name for s in grp], victim, phase)
                    alone = _baseline_rows(data, cat, victim, workload, phase)
                    iv = _ratio(_runs(shared, col), _runs(alone, col), q, n_resamples, seed)
                    primary = PRIMARY_PHASE.get(workload, phase) == phase or len(phases) == 1
                    rows.append({
                        "victim": victim, "neighbours": label, "sharing": mode, "phase": phase, "primary": primary,
                        "scenario": grp[0].group, "q": q, "metric": metric,
                        "alone_ms": float(np.quantile(alone[col], q)) if len(alone) else float("nan"),
                        "shared_ms": float(np.quantile(shared[col], q)) if len(shared) else float("nan"),
                        "df": iv.estimate, "df_lo": iv.lo, "df_hi": iv.hi, "wording": _wording(iv, len(shared)),
                        "n_shared": int(len(shared)), "n_alone": int(len(alone)), "note": iv.note,
                    })
    return pd.DataFrame(rows, columns=[
        "victim", "neighbours", "sharing", "phase", "primary", "scenario", "q", "metric", "alone_ms", "shared_ms",
        "df", "df_lo", "df_hi", "wording", "n_shared", "n_alone", "note"])


def _pair_key(s: _Scen, victim: str, tenants: list[str]) -> list[int]:
    order = {t: i for i, t in enumerate(tenants)}
    return sorted(order.get(t, len(order)) for t in s.tenants if t != victim)


# -- 3. open loop -------------------------------------------------------------------------------------------
def _meta_for(data: RunData, scen: str, tenant: str) -> dict[str, Any]:
    m = data.meta
    if m.empty or "tenant" not in m:
        return {}
    hit = m[(m["scenario"] == scen) & (m["tenant"] == tenant)]
    return {} if hit.empty else hit.iloc[0].to_dict()


def _requests(rows: pd.DataFrame) -> pd.DataFrame:
    """One row per operation (iteration): due at its first phase's intended time, done at its last phase's end.

    For single-phase workloads this is the rows themselves; for the llm a request is prefill + all
    decode steps, and its service time is the sum of the phases' wall times.
    """
    g = rows.groupby("iteration", sort=True)
    out = pd.DataFrame({"intended_ns": g["intended_ns"].min(), "start_ns": g["start_ns"].min(),
                        "end_ns": g["end_ns"].max(), "service_ms": g["wall_ms"].sum()})
    if "in_overlap" in rows:
        out["in_overlap"] = g["in_overlap"].all()
    out = out.sort_values("intended_ns")
    out["response_ms"] = (out["end_ns"] - out["intended_ns"]).to_numpy(np.int64) / 1e6
    out["queue_ms"] = (out["start_ns"] - out["intended_ns"]).to_numpy(np.int64) / 1e6
    return out.reset_index()


def _open_loop_series(data: RunData) -> list[tuple[_Scen, str, dict[str, Any], pd.DataFrame]]:
    """(scenario, tenant, meta, all rows) for each open-loop series.

    Open loop: the worker's KTS_META says ``arrival`` is not ``closed``; without meta, most first-phase
    rows have an intended time different from their start (a closed-loop worker writes start as intended).
    """
    it = data.iterations
    out = []
    for s in _catalogue(data):
        for tenant in s.tenants:
            rows = it[(it["scenario"] == s.name) & (it["tenant"] == tenant)]
            if len(rows) < 2:
                continue
            meta = _meta_for(data, s.name, tenant)
            arrival = meta.get("arrival")
            if isinstance(arrival, str) and arrival:
                is_open = arrival != "closed"
            else:
                first = rows[rows["phase"] == rows["phase"].iloc[0]]
                is_open = bool((first["intended_ns"] != first["start_ns"]).mean() > 0.5)
            if is_open:
                out.append((s, tenant, meta, rows))
    return out


def has_open_loop(data: RunData) -> bool:
    """Whether some tenant's operations arrived on their own schedule (Poisson or fixed rate)."""
    return bool(_open_loop_series(data))


def _quantile_or_nan(x: pd.Series, q: float) -> float:
    """A quantile of the co-running requests; NaN when none co-ran (the row stays and says so)."""
    return float(np.quantile(x, q)) if len(x) else float("nan")


def _slope(t: np.ndarray, y: np.ndarray) -> float:
    if len(t) < 3 or np.ptp(t) == 0:
        return 0.0
    return float(np.polyfit(t, y, 1)[0])


def open_loop_table(data: RunData, *, growth_factor: float = 10.0, rate_tolerance: float = 0.95,
                    floor_ms: float = 1.0) -> pd.DataFrame:
    """Offered vs achieved rate, response vs service time, and whether the tenant was overloaded.

    Why: in an open loop the tenant does not wait for its previous operation before issuing the
    next, so when sharing slows service down, work queues up. Response time (from the intended
    arrival) includes that queueing; service time (launch to completion, what a closed-loop
    harness reports) does not. When arrivals come faster than the tenant can be served, the queue
    grows without bound and the response-time percentiles describe the length of the run, not
    the GPU: such rows are flagged.

    Per open-loop tenant and scenario (alone/shared). A request is one iteration (all its phases).
    ``offered_hz``: the configured rate (KTS_META rate_hz); ``offered_measured_hz``: arrivals actually
    scheduled, (n-1) / span of intended times; ``achieved_hz``: completions, (n-1) / span of end times;
    ``utilisation``: offered_measured x mean service time. Rates and queue growth use the whole series;
    latency percentiles the overlap-clipped one, like every other table of the kit.
    ``overloaded`` when any of: achieved < ``rate_tolerance`` x offered (measured); the queue delay
    (start - intended) rose, by linear regression over the last half of the run, by more than
    max(``growth_factor`` x median service, ``floor_ms``); the final queue delay (median of the last
    5 % of requests, at least 5) exceeds that same threshold. ``message`` says which, in one line.
    """
    rows = []
    for s, tenant, meta, all_rows in _open_loop_series(data):
        req = _requests(all_rows)
        n = len(req)
        t_int = req["intended_ns"].to_numpy(np.int64)
        t_end = np.sort(req["end_ns"].to_numpy(np.int64))
        offered_meas = (n - 1) / ((t_int[-1] - t_int[0]) / 1e9) if t_int[-1] > t_int[0] else float("nan")
        achieved = (n - 1) / ((t_end[-1] - t_end[0]) / 1e9) if t_end[-1] > t_end[0] else float("nan")
        rate = meta.get("rate_hz")
        offered = float(rate) if rate is not None and np.isfinite(float(rate)) and float(rate) > 0 else offered_meas
        clipped = req[req["in_overlap"]] if "in_overlap" in req else req
        service_med = float(np.median(req["service_ms"]))
        threshold = max(growth_factor * service_med, floor_ms)
        half = req.iloc[n // 2:]
        t_s = (half["intended_ns"].to_numpy(np.int64) - t_int[0]) / 1e9
        slope = _slope(t_s, half["queue_ms"].to_numpy(np.float64))
        growth = slope * (float(np.ptp(t_s)) if len(t_s) else 0.0)
        k = max(5, int(np.ceil(0.05 * n)))
        final = float(np.median(req["queue_ms"].iloc[-k:]))
        reasons = []
        if np.isfinite(achieved) and np.isfinite(offered_meas) and achieved < rate_tolerance * offered_meas:
            reasons.append(f"achieved {achieved:.1f}/s of {offered_meas:.1f}/s offered")
        if growth > threshold:
            reasons.append(f"queue delay grew {growth:.0f} ms over the last half ({slope:.1f} ms/s)")
        if final > threshold:
            reasons.append(f"final queue delay {final:.0f} ms = {final / service_med:.0f}x the median service time"
                           if service_med > 0 else f"final queue delay {final:.0f} ms")
        when = "alone" if s.kind == "baseline" else "shared"
        message = (f"{tenant} ({when}, {s.group}) is overloaded: " + "; ".join(reasons)
                   + ": response times measure the backlog, not the GPU") if reasons else ""
        if clipped.empty:
            message = "; ".join(m for m in (message, "no co-running samples: latency percentiles left out") if m)
        rows.append({
            "tenant": tenant, "workload": str(all_rows["workload"].iloc[0]), "scenario": s.group, "when": when,
            "sharing": s.sharing, "arrival": str(meta.get("arrival") or "open"), "n": n,
            "offered_hz": offered, "offered_measured_hz": offered_meas, "achieved_hz": achieved,
            "utilisation": offered_meas * float(req["service_ms"].mean()) / 1000.0,
            "response_p50_ms": _quantile_or_nan(clipped["response_ms"], 0.50),
            "response_p99_ms": _quantile_or_nan(clipped["response_ms"], 0.99),
            "service_p50_ms": _quantile_or_nan(clipped["service_ms"], 0.50),
            "service_p99_ms": _quantile_or_nan(clipped["service_ms"], 0.99),
            "queue_p50_ms": _quantile_or_nan(clipped["queue_ms"], 0.50),
            "queue_p99_ms": _quantile_or_nan(clipped["queue_ms"], 0.99),
            "queue_final_ms": final, "queue_slope_ms_per_s": slope, "overloaded": bool(reasons), "message": message,
        })
    return pd.DataFrame(rows, columns=[
        "tenant", "workload", "scenario", "when", "sharing", "arrival", "n", "offered_hz", "offered_measured_hz",
        "achieved_hz", "utilisation", "response_p50_ms", "response_p99_ms", "service_p50_ms", "service_p99_ms",
        "queue_p50_ms", "queue_p99_ms", "queue_final_ms", "queue_slope_ms_per_s", "overloaded", "message"])


def queue_growth(data: RunData) -> pd.DataFrame:
    """Queue delay (start - intended arrival, ms) of each open-loop request against its arrival time.

    Why: a stable queue hovers near zero with spikes after slow iterations; an overloaded one
    climbs steadily. Columns: tenant, scenario, when (alone/shared), t_s (since the first arrival),
    queue_ms, service_ms.
    """
    parts = []
    for s, tenant, _meta, rows in _open_loop_series(data):
        req = _requests(rows)
        t0 = int(req["intended_ns"].iloc[0])
        parts.append(pd.DataFrame({
            "tenant": tenant, "scenario": s.group if s.repeat == 0 else s.name,
            "when": "alone" if s.kind == "baseline" else "shared",
            "t_s": (req["intended_ns"].to_numpy(np.int64) - t0) / 1e9,
            "queue_ms": req["queue_ms"].to_numpy(np.float64), "service_ms": req["service_ms"].to_numpy(np.float64)}))
    cols = ["tenant", "scenario", "when", "t_s", "queue_ms", "service_ms"]
    return pd.concat(parts, ignore_index=True)[cols] if parts else pd.DataFrame(columns=cols)


def _ccdf(x: np.ndarray, max_points: int = 1500) -> tuple[np.ndarray, np.ndarray]:
    x = np.sort(np.asarray(x, np.float64))
    n = len(x)
    p = 1.0 - np.arange(1, n + 1) / n
    keep = np.unique(np.concatenate([np.linspace(0, n - 1, min(n, max_points)).astype(int),
                                     np.arange(max(0, n - 200), n)]))
    keep = keep[p[keep] > 0]
    return x[keep], p[keep]


RESPONSE_LABEL = "response time (from arrival: what a caller sees)"
SERVICE_LABEL = "service time (from launch: what a closed-loop harness reports)"
CLOSED_LABEL = "closed-loop run (wall)"


def open_closed_frame(data: RunData, closed: RunData | None = None) -> pd.DataFrame:
    """CCDF points of open-loop response time next to its closed-loop counterpart, per tenant and alone/shared.

    Why (coordinated omission): a closed-loop harness issues the next operation only after the
    previous one finished, so while the GPU is held by a neighbour no new operation is issued
    and the slow period is sampled once instead of as often as callers arrived. An open-loop
    tenant measures from the intended arrival, so every caller that waited is counted.
    The counterpart is, when ``closed`` (another run) holds the same tenant in closed loop, that
    run's wall time in the matching alone/shared scenario; otherwise the service time (wall) of
    the same open-loop iterations: what a closed-loop harness would have reported for them.
    Columns: tenant, when, clock, latency_ms, exceedance (P(X > x)).
    """
    parts = []
    closed_rows = closed.iterations if closed is not None else None
    for s, tenant, _meta, rows in _open_loop_series(data):
        when = "alone" if s.kind == "baseline" else "shared"
        req = _requests(rows)
        if "in_overlap" in req and req["in_overlap"].any():
            req = req[req["in_overlap"]]
        series = [(RESPONSE_LABEL, req["response_ms"].to_numpy())]
        other = None
        if closed_rows is not None:
            kind = "baseline" if when == "alone" else "shared"
            c = closed_rows[(closed_rows["tenant"] == tenant) & (closed_rows["scenario_kind"] == kind)
                            & (closed_rows["intended_ns"] == closed_rows["start_ns"])]
            if "in_overlap" in c:
                c = c[c["in_overlap"].astype(bool)]
            if len(c) >= 2:
                other = (CLOSED_LABEL, c.groupby(["scenario", "iteration"])["wall_ms"].sum().to_numpy())
        series.append(other or (SERVICE_LABEL, req["service_ms"].to_numpy()))
        for label, x in series:
            if len(x) < 2:
                continue
            lat, p = _ccdf(x)
            parts.append(pd.DataFrame({"tenant": tenant, "when": when, "clock": label, "latency_ms": lat,
                                       "exceedance": p}))
    cols = ["tenant", "when", "clock", "latency_ms", "exceedance"]
    if not parts:
        return pd.DataFrame(columns=cols)
    out = pd.concat(parts, ignore_index=True)[cols]
    return out.drop_duplicates(["tenant", "when", "clock", "latency_ms", "exceedance"]).reset_index(drop=True)


# -- 4. LLM phases ------------------------------------------------------------------------------------------
PHASE_STATS = {"prefill": ("time to first token", "response_ms"), "decode": ("per-token decode", "wall_ms")}


def has_phases(data: RunData) -> bool:
    """Whether some tenant reports a prefill and a decode phase (the llm workload)."""
    it = data.iterations
    for _tenant, grp in it.groupby("tenant"):
        if {"prefill", "decode"} <= set(grp["phase"].astype(str)):
            return True
    return False


def phase_table(data: RunData, *, n_resamples: int = 2000, seed: int | None = 0) -> pd.DataFrame:
    """Time to first token and per-token decode latency per scenario, with intervals and DF vs alone.

    Why: an LLM tenant's users feel two numbers, not one: the wait for the first token (the
    prefill, one long pass over the prompt) and the pace of the following tokens (one short
    decode step each). A neighbour can hurt them differently: short decode kernels queue behind
    a time slice as often as long ones but lose proportionally more.
    Time to first token = prefill ``response_ms`` (end - intended: from launch in closed loop,
    from arrival in open loop); per-token decode = each decode step's ``wall_ms``.
    Columns: tenant, stat, phase, scenario, when, sharing, n, p50_ms/p50_lo/p50_hi,
    p99_ms/p99_lo/p99_hi, df/df_lo/df_hi (p99 vs alone), wording, note.
    """
    cat = _catalogue(data)
    it = data.iterations
    rows = []
    for tenant in _tenant_order(data):
        mine = it[it["tenant"] == tenant]
        if not {"prefill", "decode"} <= set(mine["phase"].astype(str)):
            continue
        workload = str(mine["workload"].iloc[0])
        for phase, (stat, col) in PHASE_STATS.items():
            alone = _baseline_rows(data, cat, tenant, workload, phase)
            base_runs = _runs(alone, col)
            groups: dict[str, list[_Scen]] = {}
            for s in cat:
                if tenant in s.tenants:
                    groups.setdefault(s.group, []).append(s)
            for group, scens in groups.items():
                r = _rows(data, [s.name for s in scens], tenant, phase)
                shared = scens[0].kind == "shared"
                if r.empty and not shared:
                    continue
                runs = _runs(r, col)
                p50 = _quantile(runs, 0.50, n_resamples, seed)
                p99 = _quantile(runs, 0.99, n_resamples, seed)
                df = _ratio(runs, base_runs, 0.99, n_resamples, seed) if shared else None
                rows.append({
                    "tenant": tenant, "stat": stat, "phase": phase, "scenario": group,
                    "when": "shared" if shared else "alone", "sharing": scens[0].sharing, "n": int(len(r)),
                    "p50_ms": p50.estimate, "p50_lo": p50.lo, "p50_hi": p50.hi,
                    "p99_ms": p99.estimate, "p99_lo": p99.lo, "p99_hi": p99.hi,
                    "df": df.estimate if df else float("nan"), "df_lo": df.lo if df else float("nan"),
                    "df_hi": df.hi if df else float("nan"), "wording": _wording(df, len(r)) if df else "",
                    "note": _notes(*(x for x in (p50, p99, df) if x is not None)),
                })
    return pd.DataFrame(rows, columns=[
        "tenant", "stat", "phase", "scenario", "when", "sharing", "n", "p50_ms", "p50_lo", "p50_hi", "p99_ms",
        "p99_lo", "p99_hi", "df", "df_lo", "df_hi", "wording", "note"])
