"""A real run next to the model: fit the quantum to the measured waits, simulate, compare DFs.

The run is read through the analyse wing's loader and rules (co-running iterations only, the same
trimming, the same DF), so the "measured" numbers here are the report's numbers for the same run.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable
from typing import Any

import numpy as np
import pandas as pd

from kts_helpers.analyse.load import RunData, load_run
from kts_helpers.analyse.rules import degradation, match_baseline
from kts_helpers.analyse.summary import primary_shared
from kts_helpers.errors import RunError
from kts_helpers.teaching.model import DEFAULT_CANDIDATES, SimTenant, fit_distances
from kts_helpers.teaching.model import degradation as simulated_degradation


def _series(data: RunData, scenario_group: str, tenant: str) -> pd.DataFrame:
    it = data.iterations
    rows = it[(it["group"] == scenario_group) & (it["tenant"] == tenant) & it["in_overlap"].astype(bool)]
    return rows.sort_values("start_ns")


def from_run(run_dir: str | os.PathLike | RunData, *, candidates: Iterable[float] = DEFAULT_CANDIDATES,
             context_switch_ms: float = 0.0, duration_ms: float = 60_000.0, seed: int = 0) -> dict[str, Any]:
    """Model a real run: fit the quantum to its measured waits, simulate, compare DFs.

    Per tenant of the main shared scenario (``summary.primary_shared``): kernel length = median device_ms
    of its alone series (no preemption inflates it); cadence = its configured sleep_ms (an open-loop
    tenant: 1000 / rate_hz - kernel length, a closed loop of the same mean rate); jitter = half the 5-95 %
    spread of its alone gaps (end of one iteration to start of the next). Measured waits = shared
    (wall - device) minus the alone median of (wall - device): the launch/sync overhead a tenant pays even
    alone is not time-slice waiting. Measured DF: ``rules.degradation`` of the co-running shared series,
    exactly as the report computes it.

    Returns ``quantum_ms`` (fitted), ``comparison`` (per tenant: measured and simulated p99s and DF),
    ``fit`` (distance per candidate), ``tenants`` (the SimTenants) and ``measured_waits``.
    """
    data = run_dir if isinstance(run_dir, RunData) else load_run(run_dir)
    if data.manifest.status != "complete":
        raise RunError(f"run {data.run_id} is {data.manifest.status!r}, not 'complete'; simulate only finished runs")
    it = data.iterations
    groups = list(dict.fromkeys(it.loc[it["kind"] == "shared", "group"]))
    group = primary_shared(groups)
    if group is None:
        raise RunError(f"run {data.run_id} has no shared scenario to compare with")
    scenario = next(s for s in data.manifest.scenarios if s.kind == "shared" and s.name.startswith(group))
    alone_rows = it[it["kind"] == "baseline"]
    tenants: list[SimTenant] = []
    waits: dict[str, np.ndarray] = {}
    measured: dict[str, tuple[float, float, float]] = {}
    for t in scenario.tenants:
        phase = "decode" if t.workload == "llm" else "op"
        base = match_baseline(alone_rows, t.name, t.workload, phase).sort_values("start_ns")
        sh = _series(data, group, t.name)
        sh = sh[sh["phase"] == phase]
        if base.empty or sh.empty:
            why = f" ({'; '.join(data.problems)})" if data.problems else ""
            raise RunError(f"run {data.run_id}: tenant {t.name!r} has no alone or no co-running shared iterations"
                           + why)
        kernel_ms = float(base["device_ms"].median())
        if not kernel_ms > 0:
            raise RunError(f"run {data.run_id}: tenant {t.name!r} has a non-positive median device time")
        sleep_ms = float(t.sleep_ms)
        if t.arrival != "closed" and float(t.rate_hz or 0) > 0:
            # open-loop tenant: approximate its mean inter-arrival time with a closed loop of the same rate
            sleep_ms = max(1000.0 / float(t.rate_hz) - kernel_ms, 0.0)
        gaps = (base["start_ns"].to_numpy()[1:] - base["end_ns"].to_numpy()[:-1]) / 1e6
        jitter = float(np.subtract(*np.percentile(gaps, [95, 5])) / 2) if len(gaps) > 1 else 0.0
        tenants.append(SimTenant(t.name, kernel_ms, sleep_ms, max(jitter, 0.0)))
        overhead = float((base["wall_ms"] - base["device_ms"]).median())
        waits[t.name] = np.clip((sh["wall_ms"] - sh["device_ms"]).to_numpy(float) - overhead, 0.0, None)
        d = degradation([sh["wall_ms"].to_numpy(float)], [base["wall_ms"].to_numpy(float)], 0.99, interval=False)
        measured[t.name] = (float(np.quantile(base["wall_ms"], 0.99)), float(np.quantile(sh["wall_ms"], 0.99)),
                            d.estimate)
    fit = fit_distances(waits, tenants, candidates, context_switch_ms=context_switch_ms,
                        duration_ms=duration_ms, seed=seed)
    quantum = float(fit.loc[fit["distance_ms"].idxmin(), "quantum_ms"])
    sim = simulated_degradation(tenants, quantum, context_switch_ms, duration_ms, seed).set_index("tenant")
    rows = []
    for t in tenants:
        alone, shared_p99, df = measured[t.name]
        rows.append({"tenant": t.name, "kernel_ms": t.kernel_ms, "period_ms": t.period_ms,
                     "measured_p99_alone_ms": alone, "measured_p99_shared_ms": shared_p99,
                     "measured_df": df if df == df else math.nan,
                     "sim_p99_alone_ms": sim.loc[t.name, "p99_alone_ms"],
                     "sim_p99_shared_ms": sim.loc[t.name, "p99_shared_ms"], "sim_df": sim.loc[t.name, "df"]})
    return {"quantum_ms": quantum, "comparison": pd.DataFrame(rows), "fit": fit, "tenants": tenants,
            "measured_waits": waits, "group": group}
