"""A real run next to the model: fit the quantum when the data allow it, simulate, compare both clocks.

Why here and not in the notebook: what the lesson may claim about a run depends on rules (is there a time
slice at all, are there enough contended waits, which quantum to believe), and rules belong in code with
tests. The run is read through the analyse wing's loader and rules (co-running iterations only, the same
trimming, the report's summary table and intervals), so the "measured" numbers are the report's numbers
for the same run.

The fit runs only where it can say something: on a GPU (a CPU's waits are the OS scheduler's: no GPU
quantum to fit), with a shared scenario, and on the tenants with at least ``rules.min_corunning_samples()`` contended
waits each (waits above the tenant's own launch noise, ``analyse.probe.contended_waits``: the probe's rule;
a p99 of a tenant's waits needs that many). Otherwise it says why, and the simulation uses the probe's measured quantum if a probe run is given, else the lesson's.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from kts_helpers.analyse.estimate import Estimate
from kts_helpers.analyse.intervals import add_intervals
from kts_helpers.analyse.load import RunData, load_run
from kts_helpers.analyse.probe import TICK_BB, ProbeReading, contended_waits, is_probe, read_probe
from kts_helpers.analyse.rules import match_baseline, min_corunning_samples
from kts_helpers.analyse.summary import baseline_row, primary_shared, summarize_frame
from kts_helpers.errors import RunError
from kts_helpers.present.tables import fmt_ci
from kts_helpers.teaching.fit import DEFAULT_CANDIDATES, QuantumFit, fit_with_interval
from kts_helpers.teaching.model import CLOCKS, SLICE_TIMERS, SimTenant, simulate
from kts_helpers.teaching.model import degradation as simulated_degradation
from kts_helpers.teaching.synthetic import SIMULATED_DEVICE

COMPARISON_COLUMNS = ["tenant", "clock", "measured_p99_alone_ms", "measured_p99_shared_ms", "measured_df",
                      "measured_df_lo", "measured_df_hi", "reading", "n_shared", "sim_p99_alone_ms",
                      "sim_p99_shared_ms", "sim_df", "sim_in_interval"]


@dataclass
class RunComparison:
    """What the lesson can say about one run: the fit (or why none), the quantum used, both clocks compared."""

    run_id: str
    gpu: str
    group: str | None
    fit: QuantumFit | None
    why_not_fitted: str
    quantum_ms: float
    quantum_source: str
    switch_ms: float
    switch_source: str
    slice_timer: str = "switch-in"
    n_contended: dict[str, int] = field(default_factory=dict)
    probe: ProbeReading | None = None
    comparison: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=COMPARISON_COLUMNS))
    tenants: list[SimTenant] = field(default_factory=list)
    measured_waits: dict[str, np.ndarray] = field(default_factory=dict)
    preempted_share: dict[str, float] = field(default_factory=dict)  # simulated kernels preempted mid-way

    @property
    def fitted(self) -> bool:
        return self.fit is not None

    def probe_agreement(self) -> str:
        """The fitted quantum against the probe's measurement (intervals overlapping or not)."""
        if self.probe is None:
            return ""
        q = self.probe.quantum
        if not q.has_value:
            return f"the probe gives no quantum ({q.text()})"
        if self.fit is None:
            return f"the probe measured a quantum of {q.text()} (no fit here to compare with)"
        apart = (math.isfinite(q.lo) and math.isfinite(q.hi)
                 and (self.fit.hi < q.lo or q.hi < self.fit.lo))
        verdict = "they disagree (intervals apart)" if apart else "they agree within their intervals"
        return f"fitted {self.fit.text()} vs the probe's {q.text()}: {verdict}"

    def long_tenant(self) -> str | None:
        """The tenant with the longest kernels: the one a neighbour's slice can land inside."""
        return max(self.tenants, key=lambda t: t.kernel_ms).name if self.tenants else None

    def long_tenant_text(self) -> str:
        """The long tenant's device clock, measured vs simulated, read against the event rule."""
        name = self.long_tenant()
        rows = self.comparison.set_index(["tenant", "clock"])
        if name is None or (name, "device") not in rows.index:
            return ""
        r = rows.loc[(name, "device")]
        short = min(self.tenants, key=lambda t: t.kernel_ms)
        head = (f"The long tenant (**{name}**, {max(t.kernel_ms for t in self.tenants):.3f} ms kernels): measured "
                f"device-time DF {fmt_ci(Estimate(r.measured_df, r.measured_df_lo, r.measured_df_hi))} ({r.reading}), "
                f"simulated {r.sim_df:.3f}. ")
        share = self.preempted_share.get(name, math.nan)
        model = (f" In the model (a {self.quantum_ms:.3f} ms quantum) {100 * share:.1f} % of its kernels were "
                 "preempted mid-way" + (": fewer than 1 %, so its simulated p99 cannot show them." if share < 0.01
                                        else "."))
        if r.measured_df_lo > 1:
            grew = r.measured_p99_shared_ms - r.measured_p99_alone_ms
            return head + (f"Its device p99 grew by {grew:.3f} ms, against the {short.name}'s kernel of "
                           f"{short.kernel_ms:.3f} ms: what the event rule predicts when more than 1 % of its kernels "
                           "are preempted mid-way and carry the neighbour's slice inside their events." + model)
        if share >= 0.01:  # the model expects growth; the measurement's interval is too wide to show it
            return head + (f"The model expects its device p99 to grow (simulated DF {r.sim_df:.3f}), and the measured "
                           f"interval reaches below 1: at this run's size and design the verdict cannot separate "
                           f"a growth this small from the drift allowed between the alone and shared moments "
                           f"({r.reading}). Run more alone/shared blocks to measure the drift instead." + model)
        return head + "No growth of its device clock is detectable here: too few of its kernels were preempted " \
                      "mid-way." + model

    def df_lines(self) -> list[str]:
        """One Markdown line per tenant and clock: measured DF [interval] (reading) vs simulated DF."""
        out = []
        for r in self.comparison.itertuples():
            within = "inside" if r.sim_in_interval else "outside"
            df = fmt_ci(Estimate(r.measured_df, r.measured_df_lo, r.measured_df_hi), 2)
            out.append(f"- **{r.tenant}**, {r.clock}: measured DF {df} ({r.reading}), "
                       f"simulated DF {r.sim_df:.2f} ({within} the interval)")
        return out

    def lines(self) -> list[str]:
        """Markdown bullet lines: the fit or why not, the probe, the quantum and switch cost the model used."""
        out = [f"Run `{self.run_id}` on {self.gpu}" + (f", shared scenario `{self.group}`" if self.group else "")]
        counts = ", ".join(f"{k} {v}" for k, v in self.n_contended.items())
        if self.fit is not None:
            out.append(f"Fitted quantum: **{self.fit.text()}** ({100 * self.fit.confidence:.0f} % stationary-"
                       f"bootstrap interval over the measured waits, {self.fit.n_resamples} resamples; contended "
                       f"waits: {counts}; fitted on {', '.join(dict.fromkeys(self.fit.wait_quantiles['tenant']))}). The interval is the sampling error only: at the fitted quantum the "
                       f"model's wait quantiles still differ from the measured ones by {self.fit.residual_ms:.3f} ms "
                       "on average (the shape of the model's waits, not just its quantum)"
                       + (f"; {self.fit.note}" if self.fit.note else ""))
        else:
            out.append(f"Quantum fit skipped: {self.why_not_fitted}")
        if self.probe is not None:
            out.append(f"Probe `{self.probe.run_id}`: quantum {self.probe.quantum.text()}, switch cost "
                       f"{self.probe.switch.text()}; {self.probe_agreement()}")
        if not self.comparison.empty:
            out.append(f"The model below uses a quantum of {self.quantum_ms:.3f} ms ({self.quantum_source}) and a "
                       f"switch cost of {self.switch_ms:.3f} ms ({self.switch_source}), with the slice timer "
                       f"`{self.slice_timer}` ({TIMER_WHY[self.slice_timer]})")
        return out


TIMER_WHY = {"switch-in": "a slice counted from the holder's switch-in, as the H200 probe measured: a short kernel "
                          "waits for what is left of the holder's current slice",
             "contention": "the simulated run was made with it: a short kernel that finds the GPU busy waits a "
                           "whole quantum"}


def slice_timer_of(data: RunData) -> str:
    """A simulated run's own slice timer (``teaching.synthetic`` records it), else ``switch-in``: what the
    H200 probe measured of a real GPU (the slice starts with the holder's switch-in)."""
    recorded = data.manifest.spec.resolved.get("slice_timer")
    return recorded if data.manifest.device == SIMULATED_DEVICE and recorded in SLICE_TIMERS else "switch-in"


def display_comparison(comparison: pd.DataFrame) -> pd.DataFrame:
    """The comparison as a person reads it: p99 alone -> shared and DF, measured [interval] and simulated."""
    rows = []
    for r in comparison.itertuples():
        rows.append({"tenant": r.tenant, "clock": r.clock,
                     "measured p99 alone → shared (ms)": f"{r.measured_p99_alone_ms:.3f} → {r.measured_p99_shared_ms:.3f}",
                     "measured DF [95% CI]": fmt_ci(Estimate(r.measured_df, r.measured_df_lo, r.measured_df_hi)), "reading": r.reading,
                     "simulated p99 alone → shared (ms)": f"{r.sim_p99_alone_ms:.3f} → {r.sim_p99_shared_ms:.3f}",
                     "simulated DF": f"{r.sim_df:.3f}", "simulated inside the interval": bool(r.sim_in_interval)})
    return pd.DataFrame(rows)


def _gpu_name(data: RunData) -> str:
    return str(data.manifest.device_name or data.manifest.device or "an unknown device")


def _series(data: RunData, group: str, tenant: str, phase: str) -> pd.DataFrame:
    it = data.iterations
    rows = it[(it["group"] == group) & (it["tenant"] == tenant) & (it["phase"] == phase)
              & it["in_overlap"].astype(bool)]
    return rows.sort_values("start_ns")


def _model_tenants(data: RunData, group: str) -> tuple[list[SimTenant], dict[str, np.ndarray], dict[str, int]]:
    """Per tenant of the shared group: its SimTenant, its measured excess waits, its contended-wait count.

    Kernel length = median device_ms alone (no preemption inflates it); cadence = its configured sleep (an
    open-loop tenant: 1000 / rate_hz - kernel, a closed loop of the same mean rate); jitter = half the 5-95 %
    spread of its alone gaps; host overhead = the alone median of (wall - device), in the model's wall clock.
    Waits = shared (wall - device) less that overhead: the launch/sync cost a tenant pays even alone is not
    time-slice waiting. In a probe run the overhead taken off is an awake GPU's (its back-to-back tenant
    alone), as ``analyse.probe`` reads it: the tick alone finds the GPU asleep, next to the hog never.
    """
    it = data.iterations
    scenario = next(s for s in data.manifest.scenarios if s.kind == "shared" and s.name.startswith(group))
    alone_rows = it[it["kind"] == "baseline"]
    awake = match_baseline(alone_rows, TICK_BB, "gemm", "op") if is_probe(data) else pd.DataFrame()
    tenants, waits, contended = [], {}, {}
    for t in scenario.tenants:
        phase = "decode" if t.workload == "llm" else "op"
        base = match_baseline(alone_rows, t.name, t.workload, phase).sort_values("start_ns")
        sh = _series(data, group, t.name, phase)
        if base.empty or sh.empty:
            why = f" ({'; '.join(data.problems)})" if data.problems else ""
            raise RunError(f"run {data.run_id}: tenant {t.name!r} has no alone or no co-running shared iterations"
                           + why)
        kernel_ms = float(base["device_ms"].median())
        if not kernel_ms > 0:
            raise RunError(f"run {data.run_id}: tenant {t.name!r} has a non-positive median device time")
        sleep_ms = float(t.sleep_ms)
        if t.arrival != "closed" and float(t.rate_hz or 0) > 0:
            sleep_ms = max(1000.0 / float(t.rate_hz) - kernel_ms, 0.0)
        gaps = (base["start_ns"].to_numpy()[1:] - base["end_ns"].to_numpy()[:-1]) / 1e6
        jitter = float(np.subtract(*np.percentile(gaps, [95, 5])) / 2) if len(gaps) > 1 else 0.0
        overhead = max(float((base["wall_ms"] - base["device_ms"]).median()), 0.0)
        tenants.append(SimTenant(t.name, kernel_ms, sleep_ms, max(jitter, 0.0), overhead))
        excess, hit, _noise = contended_waits(sh, awake if len(awake) else base)
        waits[t.name] = np.clip(excess, 0.0, None)
        contended[t.name] = int(len(hit))
    return tenants, waits, contended


def measured_table(data: RunData, group: str, n_resamples: int = 2000) -> pd.DataFrame:
    """The report's summary rows (both clocks) of the shared group's tenants, with the report's DF intervals.

    The same summary and interval code as the report, on the alone scenarios and this group only (rows are
    computed independently, so they equal the report's rows for the same run).
    """
    it = data.iterations
    frame = it[(it["kind"] == "baseline") | (it["group"] == group)]
    rows = []
    for clock in CLOCKS:
        table = add_intervals(summarize_frame(frame, clock), frame, clock, n_resamples=n_resamples)
        for _, r in table[(table["kind"] == "shared") & (table["phase"] != "prefill")].iterrows():
            base = baseline_row(table, r)
            # no interval at all: with a DF, neither bound held (open both ways); without one, nothing to bound
            ci = (Estimate.from_row(r, "df").pair()
                  or ([None, None] if math.isfinite(float(r["df"])) else [math.nan, math.nan]))
            rows.append({"tenant": r["tenant"], "clock": clock,
                         "measured_p99_alone_ms": float(base["p99_ms"]) if base is not None else math.nan,
                         "measured_p99_shared_ms": float(r["p99_ms"]), "measured_df": float(r["df"]),
                         "measured_df_lo": -math.inf if ci[0] is None else float(ci[0]),  # None: no bound held
                         "measured_df_hi": math.inf if ci[1] is None else float(ci[1]),
                         "reading": r["reading"], "n_shared": int(r["n"])})
    return pd.DataFrame(rows)


def from_run(run_dir: str | os.PathLike | RunData, *, probe: str | os.PathLike | RunData | ProbeReading | None = None,
             lesson_quantum_ms: float = 2.0, context_switch_ms: float = 0.0,
             candidates: Any = DEFAULT_CANDIDATES, duration_ms: float = 60_000.0, seed: int = 0,
             n_resamples: int = 1000, slice_timer: str | None = None) -> RunComparison:
    """Model a real run (see the module doc). A probe run given as ``run_dir`` is its own probe."""
    data = run_dir if isinstance(run_dir, RunData) else load_run(run_dir)
    if data.manifest.status != "complete":
        raise RunError(f"run {data.run_id} is {data.manifest.status!r}, not 'complete'; simulate only finished runs")
    if probe is None and is_probe(data):
        probe = data
    reading = probe if isinstance(probe, ProbeReading) or probe is None else read_probe(probe)
    it = data.iterations
    group = primary_shared(list(dict.fromkeys(it.loc[it["kind"] == "shared", "group"])))
    result = RunComparison(data.run_id, _gpu_name(data), group, None, "", lesson_quantum_ms, "the lesson's",
                           context_switch_ms, "the lesson's", slice_timer or slice_timer_of(data), probe=reading)
    timer = {"slice_timer": result.slice_timer}
    if group is None:
        result.why_not_fitted = (f"run {data.run_id} has no shared scenario: no tenant ever had a neighbour whose "
                                 "time slice it could wait for, so there is nothing to fit or compare")
        return result
    tenants, waits, contended = _model_tenants(data, group)
    result.tenants, result.measured_waits, result.n_contended = tenants, waits, contended
    if not (data.on_gpu or data.manifest.device == SIMULATED_DEVICE):
        result.why_not_fitted = (f"run {data.run_id} ran on the {data.manifest.device or 'unknown device'}, not a "
                                 "GPU: its waits are the OS scheduler's, not a GPU time slice's, so there is no "
                                 "quantum to fit (and a time-sliced GPU model says nothing about it)")
        return result
    need = min_corunning_samples()
    enough = {k: w for k, w in waits.items() if contended[k] >= need}  # a p99 of waits per tenant
    if reading is not None and reading.switch.has_value:
        result.switch_ms, result.switch_source = reading.switch.value, f"measured by probe {reading.run_id}"
    if enough:
        result.fit = fit_with_interval(enough, tenants, candidates, context_switch_ms=result.switch_ms,
                                       duration_ms=duration_ms, seed=seed, n_resamples=n_resamples, **timer)
        result.quantum_ms, result.quantum_source = result.fit.quantum_ms, "fitted to this run's waits"
    else:
        counts = ", ".join(f"{k} {v}" for k, v in contended.items())
        result.why_not_fitted = (f"too few contended waits ({counts}; a wait counts when it lies above the "
                                 f"tenant's own launch noise alone) for a fit with an interval: at least {need} of "
                                 "one tenant are needed, the analysis's minimum for a p99")
        if reading is not None and reading.quantum.has_value:
            result.quantum_ms, result.quantum_source = reading.quantum.value, f"measured by probe {reading.run_id}"
        else:
            result.quantum_source = "the lesson's, not fitted"
    sim = simulated_degradation(tenants, result.quantum_ms, result.switch_ms, duration_ms, seed, **timer)
    sim = sim.set_index("tenant")
    kernels = simulate(tenants, result.quantum_ms, result.switch_ms, duration_ms, seed, **timer)
    result.preempted_share = {name: float((g["device_ms"] > g["work_ms"] + 1e-9).mean())
                              for name, g in kernels.groupby("tenant")}
    table = measured_table(data, group)
    for col, key in (("sim_p99_alone_ms", "p99_alone_ms"), ("sim_p99_shared_ms", "p99_shared_ms"), ("sim_df", "df")):
        table[col] = [float(sim.loc[r.tenant, key if r.clock == "wall" else f"device_{key}"])
                      for r in table.itertuples()]
    # a relative 1e-9 of slack: on noiseless (simulated) runs the interval is one point, the same ratio
    # computed in another order
    slack = 1e-9 * table["sim_df"].abs()
    table["sim_in_interval"] = ((table["sim_df"] >= table["measured_df_lo"] - slack)
                                & (table["sim_df"] <= table["measured_df_hi"] + slack))
    result.comparison = table[COMPARISON_COLUMNS]
    return result


def slice_timers(probe_run: str | os.PathLike | RunData, *, duration_ms: float = 60_000.0, seed: int = 0,
                 quantiles: tuple[float, ...] = (0.01, 0.1, 0.25, 0.5, 0.75, 0.9, 0.99)) -> pd.DataFrame:
    """A probe's measured tick waits next to both slice timers' simulated ones, at the probe's quantum and switch.

    Why: the two timers make the same worst wait but a different spread (a whole quantum every time, or
    what is left of the holder's slice); the probe's waits say which one the GPU has. Long format: quantile,
    source (``measured`` or ``simulated, <timer>``), wait_ms.
    """
    data = probe_run if isinstance(probe_run, RunData) else load_run(probe_run)
    reading = read_probe(data)
    if not (reading.quantum.has_value and reading.switch.has_value):
        raise RunError(f"probe {data.run_id} measured no quantum and switch cost: {reading.quantum.text()}")
    tenants, _waits, _n = _model_tenants(data, "shared")
    tick = tenants[0].name
    qs = np.asarray(quantiles, float)
    rows = [{"quantile": q, "source": "measured", "wait_ms": float(v)}
            for q, v in zip(qs, np.quantile(reading.waits_ms, qs), strict=True)]
    for timer in SLICE_TIMERS:
        sim = simulate(tenants, reading.quantum.value, reading.switch.value, duration_ms, seed, slice_timer=timer)
        w = sim.loc[(sim["tenant"] == tick) & (sim["wait_ms"] > 0), "wait_ms"].to_numpy(float)
        rows += [{"quantile": q, "source": f"simulated, {timer}", "wait_ms": float(v)}
                 for q, v in zip(qs, np.quantile(w, qs), strict=True)]
    return pd.DataFrame(rows)
