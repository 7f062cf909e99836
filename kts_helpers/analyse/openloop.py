"""Open-loop arrivals: offered vs achieved rate, response vs service time, and overload.

A closed-loop harness issues the next operation only when the previous one finished, so a slow period
is sampled once instead of as often as callers arrived (coordinated omission). An open-loop tenant
(Poisson or fixed-rate arrivals) measures from the *intended* arrival, so every caller that waited counts.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from kts_helpers.analyse.compare import Scenario, catalogue
from kts_helpers.analyse.load import RunData
from kts_helpers.analyse.rules import ccdf


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


def _open_loop_series(data: RunData) -> list[tuple[Scenario, str, dict[str, Any], pd.DataFrame]]:
    """(scenario, tenant, meta, all rows) for each open-loop series.

    Open loop: the worker's KTS_META says ``arrival`` is not ``closed``; without meta, most first-phase
    rows have an intended time different from their start (a closed-loop worker writes start as intended).
    """
    it = data.iterations
    out = []
    for s in catalogue(data):
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
        if "in_overlap" in req:
            req = req[req["in_overlap"]]  # co-running requests only, like every other statistic
        series = [(RESPONSE_LABEL, req["response_ms"].to_numpy())]
        other = None
        if closed_rows is not None:
            kind = "baseline" if when == "alone" else "shared"
            c = closed_rows[(closed_rows["tenant"] == tenant) & (closed_rows["kind"] == kind)
                            & (closed_rows["intended_ns"] == closed_rows["start_ns"])]
            if "in_overlap" in c:
                c = c[c["in_overlap"].astype(bool)]
            if len(c) >= 2:
                other = (CLOSED_LABEL, c.groupby(["scenario", "iteration"])["wall_ms"].sum().to_numpy())
        series.append(other or (SERVICE_LABEL, req["service_ms"].to_numpy()))
        for label, x in series:
            if len(x) < 2:
                continue
            lat, p = ccdf(x)
            parts.append(pd.DataFrame({"tenant": tenant, "when": when, "clock": label, "latency_ms": lat,
                                       "exceedance": p}))
    cols = ["tenant", "when", "clock", "latency_ms", "exceedance"]
    if not parts:
        return pd.DataFrame(columns=cols)
    out = pd.concat(parts, ignore_index=True)[cols]
    return out.drop_duplicates(["tenant", "when", "clock", "latency_ms", "exceedance"]).reset_index(drop=True)


