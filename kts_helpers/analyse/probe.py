"""The time-slice probe's reading: the GPU's effective quantum and switch cost, each with an interval.

The probe run (``run/probe.py``) holds two shared scenarios. Three independent readings come out of them:

* **Upper edge of the tick's waits** (``shared``): a tick that arrives while the hog's long kernel holds the
  GPU waits (wall - device, less the launch/sync overhead of an awake GPU) until the hog's slice ends, then
  one switch. The 99th percentile of those contended waits, with the kit's bootstrap interval, is
  slice + switch; the 1st percentile is the lower edge.
* **Switch cost from the hog's stretch** (``shared``): each tick that runs costs the back-to-back hog two
  switches and the tick's kernel: inside its CUDA events when the tick preempted a kernel mid-way (a
  preempted kernel's events include the neighbour's slice), before its next kernel's start when the tick
  arrived in a kernel's last slice. Both land in the hog's wall time, so with ticks arriving at rate r,
  ``c = 2 s + t_tick = (1 - alone/shared) / r`` from the hog's mean wall time shared vs alone. The event-time
  stretch is reported next to it: most of ``c`` must show inside the events.
* **The hog's run per slice** (``shared-reverse``): next to back-to-back short kernels (t_bb), the hog is
  preempted after every slice, so its events stretch by ``shared/alone - 1 = (2 s + t_bb) / run``; with ``s``
  from above this gives how long the hog ran per slice, from its own clock (high by at most run / kernel
  length, a few per cent, as the last partial slice is not preempted).

The effective quantum is upper edge - switch. The run per slice then says how the switch is paid: equal to
the quantum if the switch comes on top of the slice (the teaching simulator's model), a switch shorter if the
slice timer starts with the switch-in (the holder pays for it). The reading states which the data supports.

The tick runs alone at 40 Hz, so alone it finds the GPU idle and its events and overhead include the GPU
waking up; next to the busy hog it never does. The overhead taken off its waits is therefore the back-to-back
tenant's alone (an awake GPU), and the tick's kernel time is its own in the shared scenario.

A tick that never found the GPU busy gives "no contended samples" and no estimate; fewer contended samples
than a p99 needs gives "insufficient data" (the same minimum as the DF, ``rules.min_corunning_samples``).
"""

from __future__ import annotations

import math
import os
import warnings
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from kts_helpers.analyse import stats
from kts_helpers.analyse.load import RunData, load_run
from kts_helpers.analyse.rules import match_baseline, min_corunning_samples, quantile
from kts_helpers.errors import RunError
from kts_helpers.run.probe import (
    HOG,
    HOG_LONG,
    HOG_POISSON,
    HOG_SHORT,
    LENGTHS,
    MULTI_PREFIX,
    PROBE_PROFILE,
    TICK,
    TICK_BB,
)
from kts_helpers.run.probe import (
    MULTI as MULTI,  # re-exported: the lesson's simulated probe reads the layout here
)
from kts_helpers.run.probe import multi_name as multi_name  # likewise

FORWARD, REVERSE = "shared", "shared-reverse"
CONTENDED_FLOOR_MS = 0.05  # a wait this far above the tick's own alone noise counts as "found the GPU busy"


@dataclass(frozen=True)
class Estimate:
    """One reading with its interval; ``note`` says why there is none ("no contended samples", ...)."""

    value: float
    lo: float = math.nan
    hi: float = math.nan
    note: str = ""

    @property
    def has_value(self) -> bool:
        return math.isfinite(self.value)

    def text(self, unit: str = "ms", digits: int = 3) -> str:
        if not self.has_value:
            return self.note or "no estimate"
        ci = (f" [{self.lo:.{digits}f}, {self.hi:.{digits}f}]" if math.isfinite(self.lo) and math.isfinite(self.hi)
              else " (no bound)")
        return f"{self.value:.{digits}f}{ci} {unit}".rstrip()


NONE = Estimate(math.nan)


@dataclass(frozen=True)
class ProbeReading:
    """Everything the probe says about the GPU it ran on; ``lines()`` is what the CLI and report print."""

    run_id: str
    gpu: str
    n_ticks: int
    n_contended: int
    contended_noise_ms: float
    tick_device_ms: float
    hog_kernel_ms: float
    upper_edge: Estimate
    lower_edge: Estimate
    per_preemption: Estimate
    hog_event_loss: Estimate
    switch: Estimate
    quantum: Estimate
    slice_run: Estimate
    agreement: str
    waits_ms: np.ndarray = field(repr=False, default_factory=lambda: np.empty(0))

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d.pop("waits_ms")
        return d

    def rows(self) -> list[tuple[str, Estimate]]:
        """The readings in the order the report and the README show them."""
        return [("effective quantum", self.quantum), ("switch cost", self.switch),
                ("tick wait upper edge, p99 (slice + switch)", self.upper_edge),
                ("tick wait lower edge, p1", self.lower_edge),
                ("hog's cost per tick (2 switches + tick kernel)", self.per_preemption),
                ("hog's run per slice (reverse roles)", self.slice_run)]

    def lines(self) -> list[str]:
        share = f"{self.n_contended} of {self.n_ticks} ticks found the GPU busy" if self.n_ticks else "no tick co-ran"
        return [f"time-slice probe of run {self.run_id} on {self.gpu}: {share}",
                f"effective quantum: {self.quantum.text()}",
                f"switch cost: {self.switch.text()}",
                f"tick wait upper edge (slice + switch, p99): {self.upper_edge.text()}; lower edge (p1): "
                f"{self.lower_edge.text()}",
                f"per preemption of the hog (2 switches + tick kernel): {self.per_preemption.text()}; share of the "
                f"hog's event time not its own next to the ticks: {self.hog_event_loss.text('', 4)}",
                f"hog's run per slice next to back-to-back short kernels: {self.slice_run.text()}",
                f"cross-check: {self.agreement}"]


def is_probe(data: RunData) -> bool:
    """Whether the run is a time-slice probe (its scenarios, not its label, say so)."""
    names = {s.name for s in data.manifest.scenarios}
    return FORWARD in names and REVERSE in names and data.manifest.profile == PROBE_PROFILE


def _rows(data: RunData, scenario: str, tenant: str, *, corunning: bool) -> pd.DataFrame:
    it = data.iterations
    rows = it[(it["scenario"] == scenario) & (it["tenant"] == tenant) & (it["phase"] == "op")]
    if corunning:
        rows = rows[rows["in_overlap"].astype(bool)]
    return rows.sort_values("start_ns")


def _alone(data: RunData, tenant: str, workload: str) -> pd.DataFrame:
    it = data.iterations
    return match_baseline(it[it["kind"] == "baseline"], tenant, workload, "op").sort_values("start_ns")


def contended_waits(tick_shared: pd.DataFrame, awake_alone: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, float]:
    """(all excess waits, the contended ones, the noise threshold).

    Excess wait = (wall - device) less the median launch/sync overhead of a tenant alone on an awake GPU
    (``awake_alone``: the back-to-back one); contended = above that overhead's 99.9th percentile plus
    ``CONTENDED_FLOOR_MS`` (launch noise never counts).
    """
    alone_wait = (awake_alone["wall_ms"] - awake_alone["device_ms"]).to_numpy(float)
    if not len(alone_wait):
        raise RunError("the probe has no back-to-back tenant alone: cannot tell launch overhead from waiting")
    overhead = float(np.median(alone_wait))
    noise = float(np.quantile(alone_wait - overhead, 0.999)) + CONTENDED_FLOOR_MS
    excess = (tick_shared["wall_ms"] - tick_shared["device_ms"]).to_numpy(float) - overhead
    return excess, excess[excess > noise], noise


def _edge(waits: np.ndarray, q: float, *, n_resamples: int, seed: int | None) -> Estimate:
    need = min_corunning_samples(0.99)
    if not len(waits):
        return Estimate(math.nan, note="no contended samples")
    if len(waits) < need:
        return Estimate(math.nan, note=f"insufficient data (n = {len(waits)} contended < {need})")
    iv = quantile([waits], q, n_resamples=n_resamples, seed=seed)
    return Estimate(iv.estimate, iv.lo, iv.hi)


def _loss(shared: np.ndarray, alone: np.ndarray, *, n_resamples: int, seed: int | None) -> Estimate:
    """1 - mean(alone) / mean(shared): the fraction of the hog's event time that was not its own work.

    Interval: stationary bootstrap of both means (``stats.mean_ratio_ci``, which reports alone/shared - 1).
    """
    if len(shared) < 2 or len(alone) < 2:
        return Estimate(math.nan, note="insufficient data (fewer than 2 hog kernels)")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", stats.ShortSeriesWarning)  # the reverse hog has tens of kernels, not 32+
        iv = stats.mean_ratio_ci(shared, alone, n_resamples=n_resamples, seed=seed)
    return Estimate(-iv.estimate, -iv.hi, -iv.lo)


def read_probe(run_dir: str | os.PathLike | RunData, *, n_resamples: int = 2000, seed: int | None = 0) -> ProbeReading:
    """The probe's three readings (see the module doc) from a complete probe run."""
    data = run_dir if isinstance(run_dir, RunData) else load_run(run_dir)
    if not is_probe(data):
        raise RunError(f"run {data.run_id} is not a time-slice probe (make it with: kts probe)")
    tick_sh = _rows(data, FORWARD, TICK, corunning=True)
    hog_sh = _rows(data, FORWARD, HOG, corunning=True)
    hog_al = _alone(data, HOG, "gemm")
    hog_rev = _rows(data, REVERSE, HOG_POISSON, corunning=True)
    hog_rev_al = _alone(data, HOG_POISSON, "gemm")
    bb_al = _alone(data, TICK_BB, "gemm")
    excess, waits, noise = contended_waits(tick_sh, bb_al)
    upper = _edge(waits, 0.99, n_resamples=n_resamples, seed=seed)
    lower = _edge(waits, 0.01, n_resamples=n_resamples, seed=seed)
    tick_dev = float(tick_sh["device_ms"].median()) if len(tick_sh) else math.nan  # an awake GPU's tick kernel

    # ticks per ms of the hog's co-running time: the tick's co-running count over the hog's co-running window
    window_ms = (hog_sh["end_ns"].max() - hog_sh["start_ns"].min()) / 1e6 if len(hog_sh) else math.nan
    in_window = tick_sh[(tick_sh["start_ns"] >= hog_sh["start_ns"].min()) & (tick_sh["end_ns"] <= hog_sh["end_ns"].max())] \
        if len(hog_sh) else tick_sh.iloc[:0]
    rate = len(in_window) / window_ms if window_ms and window_ms > 0 else math.nan
    fwd = _loss(hog_sh["wall_ms"].to_numpy(float), hog_al["wall_ms"].to_numpy(float),
                n_resamples=n_resamples, seed=seed)
    fwd_events = _loss(hog_sh["device_ms"].to_numpy(float), hog_al["device_ms"].to_numpy(float),
                       n_resamples=n_resamples, seed=seed)
    if not len(waits):  # the hog never held the GPU when a tick came: its stretch says nothing about switching
        fwd = fwd_events = Estimate(math.nan, note="no contended samples")
    if fwd.has_value and rate > 0 and fwd.value > 0:
        per = Estimate(*(f / rate for f in (fwd.value, fwd.lo, fwd.hi)))
    else:
        per = Estimate(math.nan, note=fwd.note or "the hog did not slow down next to the ticks")
    if per.has_value and per.value > tick_dev:
        switch = Estimate(*(max((c - tick_dev) / 2, 0.0) for c in (per.value, per.lo, per.hi)))
    elif per.has_value:
        switch = Estimate(0.0, 0.0, max((per.hi - tick_dev) / 2, 0.0),
                          note="the hog's stretch is within its noise: switch cost indistinguishable from 0")
    else:
        switch = Estimate(math.nan, note=per.note)

    if upper.has_value and switch.has_value:
        quantum = Estimate(upper.value - switch.value, upper.lo - switch.hi, upper.hi - switch.lo)
    else:
        quantum = Estimate(math.nan, note=upper.note or switch.note)

    rev = _loss(hog_rev["device_ms"].to_numpy(float), hog_rev_al["device_ms"].to_numpy(float),
                n_resamples=n_resamples, seed=seed)
    t_bb = float(bb_al["device_ms"].median()) if len(bb_al) else math.nan
    if rev.has_value and switch.has_value and rev.value > 0 and math.isfinite(t_bb):
        # preempted after every slice of its own work: loss / (1 - loss) = (2 s + t_bb) / run
        def run_of(s: float, f: float) -> float:
            return (2 * s + t_bb) * (1 - f) / f if f > 0 else math.nan  # a loss indistinguishable from 0: no bound

        run = Estimate(run_of(switch.value, rev.value), run_of(switch.lo, rev.hi), run_of(switch.hi, rev.lo))
    else:
        run = Estimate(math.nan, note=switch.note or rev.note or "the hog did not stretch next to the short kernels")
    hog_kernel = float(hog_rev_al["device_ms"].median()) if len(hog_rev_al) else math.nan
    verdict = agreement(quantum, switch, run, hog_kernel)
    gpu = str(data.manifest.environment.get("gpu_name") or data.manifest.device or "unknown GPU")
    return ProbeReading(data.run_id, gpu, int(len(excess)), int(len(waits)), noise, tick_dev, hog_kernel, upper,
                        lower, per, fwd_events, switch, quantum, run, verdict, waits)


def _overlap(a: tuple[float, float], b: tuple[float, float]) -> bool:
    return a[0] <= b[1] and b[0] <= a[1]


def agreement(quantum: Estimate, switch: Estimate, run: Estimate, hog_kernel_ms: float) -> str:
    """How the hog's run per slice compares with the quantum: which way the switch is paid, or neither.

    The run per slice reads high by up to run / kernel length (the last partial slice is not preempted), so
    its interval's lower end is widened by that much; a missing upper bound is open.
    """
    if not (quantum.has_value and run.has_value and switch.has_value):
        return "only one reading; nothing to compare"
    bias = run.value / hog_kernel_ms if hog_kernel_ms > 0 else 0.0
    r = (run.lo * (1 - bias), run.hi if math.isfinite(run.hi) else math.inf)
    on_top = _overlap(r, (quantum.lo, quantum.hi))
    inside = _overlap(r, (quantum.lo - switch.hi, quantum.hi - switch.lo))
    nums = f"run per slice {run.value:.3f} ms, quantum {quantum.value:.3f} ms, switch {switch.value:.3f} ms"
    if on_top and not inside:
        return f"the hog ran a whole quantum per slice ({nums}): the switch is paid on top of the slice"
    if inside and not on_top:
        return (f"the hog ran a quantum less one switch per slice ({nums}): the slice starts with the switch-in, "
                "so the holder pays for it")
    if on_top and inside:
        return f"the two readings agree ({nums}); the switch is too short to tell how it is paid"
    return (f"the readings disagree ({nums}, intervals apart): the round-robin model does not describe this "
            "GPU's scheduler; trust the tick's waits, which measure directly")


# -- the multi-context probe (``kts probe --multi``) ------------------------------------------------------------
WAIT_QUANTILES = (0.05, 0.25, 0.5, 0.75, 0.95, 0.99)


@dataclass(frozen=True)
class MultiConfig:
    """The tick's waits next to ``k`` busy neighbours whose kernels take ``neighbour_kernel_ms`` alone.

    ``waits_ms``: every co-running tick's excess wait (wall - device - awake overhead), contended or not: the
    empirical distribution the planner draws from (``plan.engine``), in arrival order.
    """

    length: str
    k: int
    neighbour_kernel_ms: float
    n_ticks: int
    n_contended: int
    quantiles_ms: dict[float, float]
    max_ms: float
    waits_ms: np.ndarray = field(repr=False, default_factory=lambda: np.empty(0))

    @property
    def contended_share(self) -> float:
        return self.n_contended / self.n_ticks if self.n_ticks else math.nan

    def to_dict(self) -> dict[str, Any]:
        return {"length": self.length, "k": self.k, "neighbour_kernel_ms": self.neighbour_kernel_ms,
                "n_ticks": self.n_ticks, "n_contended": self.n_contended,
                "quantiles_ms": {f"p{round(q * 100)}": v for q, v in self.quantiles_ms.items()}, "max_ms": self.max_ms}


@dataclass(frozen=True)
class MultiReading:
    """The multi-context probe: one :class:`MultiConfig` per (neighbour length, k)."""

    run_id: str
    gpu: str
    overhead_ms: float
    configs: tuple[MultiConfig, ...]

    def config(self, length: str, k: int) -> MultiConfig | None:
        return next((c for c in self.configs if c.length == length and c.k == k), None)

    def to_dict(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "gpu": self.gpu, "overhead_ms": self.overhead_ms,
                "configs": [c.to_dict() for c in self.configs]}

    def table(self) -> pd.DataFrame:
        rows = []
        for c in self.configs:
            row: dict[str, Any] = {"neighbours": f"{c.k} x {c.length} ({c.neighbour_kernel_ms:.2f} ms)",
                                   "ticks": c.n_ticks, "busy share": c.contended_share}
            row.update({f"wait p{round(q * 100)} ms": v for q, v in c.quantiles_ms.items()})
            row["wait max ms"] = c.max_ms
            rows.append(row)
        return pd.DataFrame(rows)

    def lines(self) -> list[str]:
        head = (f"multi-context probe of run {self.run_id} on {self.gpu}: the tick's wait (wall - device - "
                f"{self.overhead_ms:.3f} ms awake overhead) next to k busy neighbours")
        return [head, self.table().to_string(index=False, float_format=lambda v: f"{v:.3f}")]


def is_multi_probe(data: RunData) -> bool:
    """Whether the run is a multi-context probe (``kts probe --multi``)."""
    return data.manifest.profile == PROBE_PROFILE and any(s.name.startswith(MULTI_PREFIX)
                                                           for s in data.manifest.scenarios)


def read_multi(run_dir: str | os.PathLike | RunData) -> MultiReading:
    """Per (neighbour length, k): the co-running tick's wait quantiles (empirical; no model assumed)."""
    data = run_dir if isinstance(run_dir, RunData) else load_run(run_dir)
    if not is_multi_probe(data):
        raise RunError(f"run {data.run_id} is not a multi-context probe (make it with: kts probe --multi)")
    awake = _alone(data, HOG_SHORT, "gemm")
    alone_wait = (awake["wall_ms"] - awake["device_ms"]).to_numpy(float)
    if not len(alone_wait):
        raise RunError("the multi-context probe has no short neighbour alone: cannot tell overhead from waiting")
    overhead = float(np.median(alone_wait))
    kernel = {length: float(_alone(data, name, "gemm")["device_ms"].median())
              for length, name in (("short", HOG_SHORT), ("long", HOG_LONG))}
    configs = []
    for s in data.manifest.scenarios:
        if not s.name.startswith(MULTI_PREFIX):
            continue
        length, k_text = s.name.removeprefix(MULTI_PREFIX).rsplit("-k", 1)
        if length not in LENGTHS:
            continue
        tick = _rows(data, s.name, TICK, corunning=True)
        excess, contended, _noise = contended_waits(tick, awake)
        qs = {q: float(np.quantile(excess, q)) if len(excess) else math.nan for q in WAIT_QUANTILES}
        configs.append(MultiConfig(length, int(k_text), kernel[length], int(len(excess)), int(len(contended)), qs,
                                   float(excess.max()) if len(excess) else math.nan, excess))
    gpu = str(data.manifest.environment.get("gpu_name") or data.manifest.device or "unknown GPU")
    configs.sort(key=lambda c: (LENGTHS.index(c.length), c.k))
    return MultiReading(data.run_id, gpu, overhead, tuple(configs))
