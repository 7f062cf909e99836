"""The prediction engine: what each tenant would measure when sharing, from its alone run and the GPU's probe.

Why one engine: the planner (``kts plan``), the report's "Capacity" section and the lesson's exercise must
give the same numbers for the same question, and a prediction only counts when it is checked against runs
that did not tune it (``plan.validation``). Its inputs are exactly those a user has *before* sharing:

* each tenant's **alone distributions** (:class:`AloneProfile`, from its baseline logs only): the GPU time of
  every operation (CUDA events), the host's launch/sync overhead (wall - device) and the host time before
  the next operation (the sleep with its real jitter, the closed loop's own gaps). Operations are drawn by
  resampling whole alone iterations (an LLM's prefill and decode steps stay together), so no fixed sleep
  can phase-lock two tenants the way the lesson's noiseless simulator does;
* the **GPU model** (:class:`GpuModel`, from the time-slice probe): quantum and switch cost with their
  intervals, the slice timer ("switch-in", measured), and the **multi-context rule**: where a multi-context
  probe (``kts probe --multi``) exists, a kernel arriving while two or more other contexts have work waits a
  draw from the probe's measured waits for that many busy neighbours and that kernel length (empirical: no
  simple rule is assumed); without one, the round robin decides (and the prediction says so);
* each tenant's **traits** (``plan.traits.TenantTraits``: kernels per op, busy share, MPS weight, SM need, whether
  it fills the GPU), measured by the profile its alone run recorded, else the documented fallbacks of
  ``plan.traits`` (re-exported here: :data:`KERNELS_PER_OP`, :data:`BUSY_SHARE`, :data:`GPU_BUSY_SHARE`,
  :data:`MPS_WEIGHTS`, :data:`SM_NEED`, :data:`FILLS_GPU`);
* the **sharing mode**: time-slicing (``plan.timeslice``; a launch-bound op is a chain of kernels whose boundaries
  let a waiting context in; tenants of one cadence start together, :func:`common_start`), MPS and MPS with thread
  caps (``plan.mps``, the fluid model: a tenant claims SMs by its weight and reaches its alone speed on its SM need;
  next to an uncapped tenant that fills the GPU the others queue at its kernel boundary instead of sharing).

The engine's inputs are loaded once (``plan.inputs.PlanInput``); the ``*_run`` functions here are conveniences
that load a run and delegate.

Intervals: ``replicates`` simulated runs of the scenario's actual iteration counts, each with its own
quantum and switch drawn from the probe's intervals and its own block-bootstrap resample of the alone iterations
(:func:`block_resample`: slow spells come whole):
the spread of their p50s and p99s holds parameter uncertainty and finite-run noise together, turned into a 95 %
interval for the next run by :func:`prediction_interval`.

Longer than 500 lines: every measured constant keeps its provenance (which runs, which numbers) beside the code
that uses it, and inputs, one scenario and a run's scenarios stay one module, the one engine all three callers share.
"""

from __future__ import annotations

import json
import math
import os
import random
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from kts_helpers import diskcache
from kts_helpers.analyse.logparse import parse_file
from kts_helpers.analyse.probe import read_multi, read_probe
from kts_helpers.errors import KtsError, RunError
from kts_helpers.fsutil import atomic_write_json
from kts_helpers.plan.draws import IterationDraws, PhaseShifted, of_iterations
from kts_helpers.plan.mps import MAX_WAIT_SHARE, MpsTenant, simulate_mps
from kts_helpers.plan.multi import round_robin_holds
from kts_helpers.plan.timeslice import Op, SimTenant, simulate
from kts_helpers.plan.traits import (  # noqa: F401 - the documented fallbacks, re-exported (README, tests)
    BUSY_SHARE,
    FILLS_GPU,
    GPU_BUSY_SHARE,
    KERNELS_PER_OP,
    MPS_WEIGHTS,
    MPS_WEIGHTS_TUNED_ON,
    SM_NEED,
    TenantTraits,
    fallback_traits,
    traits_from_profile,
)
from kts_helpers.run.logformat import PAD_PHASE
from kts_helpers.run.probe import MULTI_PREFIX
from kts_helpers.run.runs import Run, open_run

REFERENCE_ROOT = Path(__file__).resolve().parents[2] / "data" / "reference"
# committed runs outside the references (validation runs, probes of cards no reference used): not rendered by make test
VALIDATION_ROOT = REFERENCE_ROOT.parent / "validation"
PROBE_ROOTS = (REFERENCE_ROOT, VALIDATION_ROOT)  # where committed probes are looked for
MODES = ("timeslice", "mps", "mps-limited")
DEFAULT_REPLICATES = 39  # the fewest whose minimum and maximum make a 95 % interval: prediction_interval
LEVEL = 0.95


# -- inputs -------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class AloneProfile:
    """One tenant alone: its iterations, each a tuple of operations (phase, GPU ms, overhead ms, gap after ms)."""

    name: str
    workload: str
    iterations: tuple[tuple[Op, ...], ...]
    thread_pct: float = 100.0
    traits: TenantTraits | None = None  # from the alone run's profile; None: the documented fallbacks
    # per phase, the log-sd (p50, p99) of the host's drift between moments (``plan.traits.host_drift``): the
    # prediction interval carries it (:func:`widened`); empty: none (a one-block run without a profile)
    drift: tuple[tuple[str, float, float], ...] = ()
    # for a GPU profile, whether CUPTI was detached after it (False for the workers before the teardown: Kineto's
    # default, which left every later launch paying CUPTI's callbacks); None on a CPU or without a profile
    profile_teardown: bool | None = None

    def drift_of(self, phase: str) -> tuple[float, float]:
        """(p50, p99) log-sd of the host's drift for ``phase`` (0, 0: none)."""
        return next(((a, b) for ph, a, b in self.drift if ph == phase), (0.0, 0.0))

    @property
    def phases(self) -> list[str]:
        seen: dict[str, None] = {}
        for it in self.iterations:
            for op in it:
                seen.setdefault(op.phase, None)
        return list(seen)

    def column(self, what: str, phase: str) -> np.ndarray:
        """One field of every operation of ``phase`` ("kernel_ms", "overhead_ms", "gap_ms", "wall_ms")."""
        ops = [op for it in self.iterations for op in it if op.phase == phase]
        if what == "wall_ms":
            return np.array([op.kernel_ms + op.overhead_ms for op in ops], float)
        return np.array([getattr(op, what) for op in ops], float)

    def cycle_ms(self) -> float:
        """The mean time of one iteration alone (GPU, host and gaps): how long n iterations take."""
        return float(np.mean([sum(op.kernel_ms + op.overhead_ms + op.gap_ms for op in it) for it in self.iterations]))

    def drawer(self, rng: random.Random, pool: Sequence[int] | None = None) -> Callable[[], Op]:
        """Draw operations: a random alone iteration (from ``pool``, a bootstrap resample), its ops in order
        (``plan.draws``: one at a time, or ahead as arrays for the compiled loops)."""
        return IterationDraws(self.iterations, rng, pool)


def profile_from_log(path: str | os.PathLike, name: str, workload: str, thread_pct: float = 100.0) -> AloneProfile:
    """The tenant's alone profile from its baseline log (timed lines only, in the order they ran), with its traits
    from the profile the worker recorded in ``KTS_META`` (none there: the documented fallbacks apply)."""
    parsed = parse_file(path)
    alone = _alone_iterations(parsed.frame, path, name, workload, thread_pct)
    recorded = next((m["profile"] for m in parsed.meta if isinstance(m.get("profile"), dict)), None)
    if recorded is None:
        return alone
    walls = {ph: float(np.median(alone.column("wall_ms", ph))) for ph in alone.phases}
    gpu = recorded.get("device") == "cuda"
    traits = traits_from_profile(recorded, walls)
    return replace(alone, traits=traits, iterations=_at_phase_busy(alone.iterations, traits),
                   profile_teardown=bool(recorded.get("cupti_teardown")) if gpu else None)


def _at_phase_busy(iterations: tuple[tuple[Op, ...], ...], traits: TenantTraits | None) -> tuple[tuple[Op, ...], ...]:
    """The iterations with each op carrying its phase's own busy share (``TenantTraits.phase_busy``; ``Op`` says
    why), where the profile measured more than one phase; as they are otherwise (one phase's share is the
    tenant's)."""
    shares = dict(traits.phase_busy) if traits is not None else {}
    if len(shares) < 2:
        return iterations
    return tuple(tuple(replace(op, busy_share=shares.get(op.phase, 0.0)) for op in it) for it in iterations)


def _alone_iterations(frame: Any, path: Any, name: str, workload: str, thread_pct: float) -> AloneProfile:
    frame = frame[frame["phase"] != PAD_PHASE].sort_values("start_ns", kind="stable")
    if frame.empty:
        raise RunError(f"{path}: no timed iteration alone; cannot predict {name} sharing")
    start = frame["start_ns"].to_numpy(np.int64)
    end = frame["end_ns"].to_numpy(np.int64)
    gaps = np.empty(len(frame))
    gaps[:-1] = np.maximum(start[1:] - end[:-1], 0) / 1e6
    its = frame["iteration"].to_numpy()
    last_of_it = np.r_[its[1:] != its[:-1], True]
    # the last line has no successor: it takes the median gap of the other iterations' last lines
    ends = gaps[:-1][last_of_it[:-1]]
    gaps[-1] = float(np.median(ends)) if len(ends) else 0.0
    device = frame["device_ms"].to_numpy(float)
    overhead = np.maximum(frame["wall_ms"].to_numpy(float) - device, 0.0)
    phases = frame["phase"].astype(str).to_numpy()
    iterations: list[tuple[Op, ...]] = []
    cur: list[Op] = []
    for k in range(len(frame)):
        cur.append(Op(float(device[k]), float(overhead[k]), float(gaps[k]), str(phases[k])))
        if last_of_it[k]:
            iterations.append(tuple(cur))
            cur = []
    return AloneProfile(name, workload, tuple(iterations), float(thread_pct))


@dataclass(frozen=True)
class Estimate3:
    """A value with its interval (either bound may be nan: no bound)."""

    value: float
    lo: float
    hi: float

    def draw(self, rng: random.Random, floor: float = 0.0) -> float:
        """A value drawn from the interval read as a normal 95 % interval (parameter uncertainty)."""
        if not (math.isfinite(self.lo) and math.isfinite(self.hi)) or self.hi <= self.lo:
            return self.value
        return max(floor, rng.gauss(self.value, (self.hi - self.lo) / 3.92))


@dataclass(frozen=True)
class GpuModel:
    """What the probe says about the GPU: quantum, switch cost (ms, intervals), slice timer, multi-context waits.

    ``multi_waits[(length, k)]``: the tick's measured waits next to k busy neighbours of kernel ``length``
    ("short"/"long" against the quantum); empty without a multi-context probe (the round robin decides).
    """

    quantum_ms: Estimate3
    switch_ms: Estimate3
    source: str
    slice_timer: str = "switch-in"
    multi_waits: dict[tuple[str, int], np.ndarray] = field(default_factory=dict)
    multi_source: str = ""
    busy_share: dict[str, float] = field(default_factory=dict)  # this GPU's measured entries of GPU_BUSY_SHARE
    # A context that finds the GPU idle starts a fresh slice. Tuned on the saturating reference: with the
    # slice clock running on across the lone GEMM's sync gaps, the FFT's 100 ms cadence phase-locks to it
    # (simulated wall p50 1.71 = p99 1.81 ms) where the H200 spread its waits over 0.4-2.4 ms (p99 2.64).
    idle_resets_slice: bool = True
    # The switch is paid only on a handover between contexts with work, never by a context that finds the GPU
    # idle (the probe measures the slice a holder loses; the article reference shows no cost after idle: FFT
    # wall p50 0.536 ms shared against 0.560 ms alone). A bug fix, not a fit: see ``timeslice._run``.
    switch_after_idle: bool = False
    gpu_name: str = ""  # where known: the GPU model it describes

    @classmethod
    def mps_only(cls, gpu_name: str) -> GpuModel:
        """A GPU without a time-slice probe: enough for MPS, which has no slices to measure (its own entries of
        :data:`GPU_BUSY_SHARE`); time-slicing asked of it is one clear error (:func:`simulate_once`)."""
        nan = Estimate3(math.nan, math.nan, math.nan)
        return cls(nan, nan, "", busy_share=dict(GPU_BUSY_SHARE.get(gpu_name, {})), gpu_name=gpu_name)

    @property
    def has_probe(self) -> bool:
        """Whether a time-slice probe measured its quantum and switch (without one, MPS only)."""
        return bool(self.source)

    @property
    def multi_rule(self) -> str:
        if not self.has_probe:
            return "none (no time-slice probe for this GPU: MPS only)"
        if not self.multi_source:
            return "round robin (no multi-context probe to check it)"
        if not self.multi_waits:
            return f"round robin (the multi-context probe {Path(self.multi_source).name} agrees with it)"
        configs = ", ".join(f"{k} x {length}" for length, k in sorted(self.multi_waits))
        return (f"empirical where the round robin misses the multi-context probe {Path(self.multi_source).name} "
                f"({configs}: waits drawn from the measured ones)")

    def multi_wait(self, rng: random.Random, quantum_ms: float) -> Callable[[int, float], float | None] | None:
        """The multi-context rule for one simulated run: a wait drawn from the probe's configuration nearest
        to (k busy contexts, the holder's remaining kernel against the quantum)."""
        if not self.multi_waits:
            return None
        ks = sorted({k for _l, k in self.multi_waits})

        def rule(busy: int, holder_ms: float) -> float | None:
            length = "long" if holder_ms > quantum_ms else "short"
            k = min(ks, key=lambda x: abs(x - busy))
            waits = self.multi_waits.get((length, k))
            if waits is None or not len(waits):
                return None
            return max(float(waits[rng.randrange(len(waits))]), 0.0)

        return rule


@lru_cache(maxsize=8)
def gpu_model_from_probe(probe_dir: str, multi_dir: str = "") -> GpuModel:
    """The GPU model from a time-slice probe run (and, if given, a multi-context probe run).

    Reading a probe (its bootstrap, the multi-context waits) takes seconds, and every report, lesson and ``kts
    plan`` of a GPU reads the same committed probe again in a fresh process: the model is kept on disk
    (``_stored_model``), keyed by the probes' bytes and the kit's source, so a stored model is the one reading
    the probes now would give, to the bit."""

    return diskcache.stored_or_computed(
        diskcache.cache_dir() / f"gpu-model-{_model_key(probe_dir, multi_dir)}.json",
        lambda path: _stored_model(path, probe_dir, multi_dir), lambda: _read_model(probe_dir, multi_dir),
        lambda path, model: atomic_write_json(path, _model_to_json(model)))


def _model_key(probe_dir: str, multi_dir: str) -> str:
    """The kit's source (any change to how a probe is read is a new key) and the probes' files."""
    return diskcache.key([d for d in (probe_dir, multi_dir) if d], probe=bool(probe_dir), multi=bool(multi_dir))


def _model_to_json(m: GpuModel) -> dict[str, Any]:
    return {"quantum_ms": asdict(m.quantum_ms), "switch_ms": asdict(m.switch_ms), "slice_timer": m.slice_timer,
            "multi_waits": [[length, k, [float(w) for w in waits]] for (length, k), waits in m.multi_waits.items()],
            "busy_share": m.busy_share}


def _stored_model(path: Path, probe_dir: str, multi_dir: str) -> GpuModel | None:
    """The model stored at ``path`` (its probe paths are this call's), or None when absent or unreadable."""
    try:
        d = json.loads(path.read_text())
        est = {k: Estimate3(*(np.float64(d[k][f]) for f in ("value", "lo", "hi"))) for k in ("quantum_ms", "switch_ms")}
        return GpuModel(est["quantum_ms"], est["switch_ms"], str(probe_dir), d["slice_timer"],
                        {(length, int(k)): np.asarray(w, float) for length, k, w in d["multi_waits"]},
                        str(multi_dir) if multi_dir else "", {str(k): float(v) for k, v in d["busy_share"].items()})
    except (OSError, ValueError, KeyError, TypeError):  # absent, cut short or of another layout: read the probes
        return None


def _read_model(probe_dir: str, multi_dir: str) -> GpuModel:
    r = read_probe(probe_dir, n_resamples=300, seed=0)
    if not (r.quantum.has_value and r.switch.has_value):
        raise RunError(f"the probe {probe_dir} gives no quantum or switch cost ({r.quantum.text()}); "
                       "the planner needs both")
    timer = "switch-in" if "holder pays" in r.agreement else "contention" if "on top" in r.agreement else "switch-in"
    waits: dict[tuple[str, int], np.ndarray] = {}
    if multi_dir:
        m = read_multi(multi_dir)
        waits = {(c.length, c.k): np.asarray(c.waits_ms, float) for c in m.configs
                 if c.k >= 2 and c.n_ticks and not round_robin_holds(c, r.quantum.value, r.switch.value, timer)}
    gpu = _gpu_name(open_run(probe_dir))
    return GpuModel(Estimate3(*map(np.float64, (r.quantum.value, r.quantum.lo, r.quantum.hi))),
                    Estimate3(*map(np.float64, (r.switch.value, r.switch.lo, r.switch.hi))), str(probe_dir), timer, waits,
                    str(multi_dir) if multi_dir else "", dict(GPU_BUSY_SHARE.get(gpu, {})))


def _gpu_name(run: Run) -> str:
    return str(run.read().environment.get("gpu_name") or "")


@lru_cache(maxsize=8)
def committed_probes(gpu_name: str, roots: tuple[Path, ...] = PROBE_ROOTS, skip: str = "") -> tuple[str, str]:
    """(pair probe, multi-context probe or "") committed for this GPU model under ``roots``, newest first by run name
    (``skip``: a run already loaded, e.g. the one being planned, which is not opened again)."""

    pair = multi = ""
    for d in sorted((d for root in roots for d in root.glob("*")), key=lambda d: d.name, reverse=True):
        if not (d / "manifest.json").exists() or (skip and d.resolve() == Path(skip).resolve()):
            continue
        try:
            m = open_run(d).read()
        except KtsError:  # a folder that is not a run is not a probe
            continue
        if m.profile != "probe" or str(m.environment.get("gpu_name") or "") != gpu_name:
            continue
        names = [s.name for s in m.scenarios]
        if any(n.startswith(MULTI_PREFIX) for n in names):
            multi = multi or str(d)
        elif "shared-reverse" in names:
            pair = pair or str(d)
    return pair, multi


def gpu_model_for(run_dir: str | os.PathLike, probe: str | os.PathLike | None = None,
                  multi: str | os.PathLike | None = None) -> GpuModel:
    """The GPU model for a run: the given probe(s), else the committed probes of the run's GPU model."""
    return gpu_model_for_name(_gpu_name(open_run(run_dir)), probe, multi)


def gpu_model_for_name(gpu: str, probe: str | os.PathLike | None = None,
                       multi: str | os.PathLike | None = None, *, loaded: str = "", mps_only: bool = False
                       ) -> GpuModel:
    """The GPU model for a GPU model's name (a run's ``gpu_name``): the given probe(s), else the committed ones
    (``loaded``: the run already open, skipped in the search). Without any probe: an error, or with ``mps_only``
    the model MPS needs (:meth:`GpuModel.mps_only`)."""
    found_pair, found_multi = committed_probes(gpu, PROBE_ROOTS, loaded) if gpu else ("", "")
    pair = str(probe) if probe else found_pair
    if not pair and mps_only:
        return GpuModel.mps_only(gpu)
    if not pair:
        who = gpu or "the run's GPU"
        raise RunError(f"no time-slice probe for {who} under {' or '.join(map(str, PROBE_ROOTS))}; "
                       "give one with --probe (make one with: kts probe)")
    if multi is None:
        multi = found_multi
    return gpu_model_from_probe(pair, str(multi or ""))


# -- one shared scenario ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Prediction:
    """One tenant, clock and phase of one predicted scenario, each number with its prediction interval."""

    scenario: str
    tenant: str
    workload: str
    metric: str
    phase: str
    sharing: str
    n: int
    p50_ms: float
    p50_lo: float
    p50_hi: float
    p99_ms: float
    p99_lo: float
    p99_hi: float
    threshold_ms: float
    share_above: float
    share_lo: float
    share_hi: float
    wait_p50_ms: float = math.nan

    def to_dict(self) -> dict[str, Any]:
        return {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in asdict(self).items()}


@dataclass(frozen=True)
class Scenario:
    """What to predict: tenants (alone profiles), how many timed iterations each, and the sharing mode."""

    name: str
    tenants: tuple[AloneProfile, ...]
    n: tuple[int, ...]
    sharing: str = "timeslice"
    thresholds_ms: dict[str, float] = field(default_factory=dict)  # tenant -> slow-iteration threshold (wall)


def _quantiles(values: np.ndarray) -> tuple[float, float]:
    return (float(np.quantile(values, 0.5)), float(np.quantile(values, 0.99))) if len(values) else (math.nan,) * 2


SLEEP_QUANTA = 5  # a host gap this many quanta long is a sleep: its phase against the slice clock is unknown


def _phase_shifted(draw: Callable[[], Op], shift_ms: float, min_gap_ms: float) -> Callable[[], Op]:
    """The draws with every sleep (gap >= ``min_gap_ms``) moved by ``shift_ms``: one replicate's lock phase.

    Why: next to busy neighbours that never leave the GPU idle the slice clock never restarts, and a tenant
    with a steady sleep locks to it at a phase set by (sleep mod quantum): 45 slices of a 100 ms sleep turn the
    probe's ±0.05 ms on the quantum into ±2 ms of phase, unknowable. Each replicate draws the phase instead.
    """
    return PhaseShifted(draw, shift_ms, min_gap_ms)


BARRIER_SKEW_MS = 0.1  # the workers' release from the start barrier: one time.sleep to a common instant


def common_start(cycles: Sequence[float], kernels: Sequence[float], rng: random.Random) -> list[float] | None:
    """The tenants' first launches: tenants of one cadence together (within the barrier's skew), others at random
    (None where no two share a cadence: the simulator's own random start).

    Why: the runner releases every tenant of a shared scenario from one barrier to one start instant (the
    workers' ``wait_for_start``; padding then keeps each at its cadence). Two tenants whose cycles differ by less
    than the shorter one's kernel still overlap one cycle after they collide, so they stay locked at the phase
    the start gave them; between other cadences the beat sweeps every phase, and a random one stands in for it.
    Time-slicing only: the MPS fluid model would hold two co-started kernels at an even split for ever, an
    equilibrium the H200's block scheduler breaks at once (the earlier launch fills the SMs first:
    ``h200-2026-11-30-val-fft-2gemm-sleepy``'s co-started GEMMs ran at alone speed under MPS).
    """
    offsets = [rng.uniform(0.0, c) for c in cycles]
    locked = False
    for i in range(len(cycles)):
        for j in range(i):
            if abs(cycles[i] - cycles[j]) < min(kernels[i], kernels[j]):
                offsets[i] = offsets[j] + rng.uniform(0.0, BARRIER_SKEW_MS)
                locked = True
                break
    return offsets if locked else None


def block_resample(n: int, rng: random.Random) -> list[int]:
    """n alone-iteration indices drawn as a circular block bootstrap (blocks of ceil(sqrt(n)) iterations).

    Why blocks: an alone run has slow spells (tens of iterations of a slower host or GPU: hold3-2llm's llm-2 had
    one over 60 of its 300 iterations, p99 5.6 ms against 3.4 for its twin), and a shared run may or may not
    have one. Drawn one iteration at a time, every replicate holds the spell's share and the interval is as
    narrow as if it always recurred; drawn in blocks, replicates with and without it differ as runs do.
    """
    length = max(1, math.ceil(math.sqrt(n)))
    out: list[int] = []
    while len(out) < n:
        start = rng.randrange(n)
        out.extend((start + k) % n for k in range(length))
    return out[:n]


def _means(t: AloneProfile) -> tuple[float, float, float, float]:
    """(its cycle, the mean GPU time of an operation (at least 1 ns), its mean gap after, its mean op wall): what
    one simulated run takes of a profile besides its draws, once per profile's iterations (``plan.draws.of_iterations``)."""
    def compute() -> tuple[float, float, float, float]:
        ops = [op for it in t.iterations for op in it]
        return (t.cycle_ms(), max(float(np.mean([op.kernel_ms for op in ops])), 1e-6),
                float(np.mean([op.gap_ms for op in ops])),
                max(float(np.mean([op.kernel_ms + op.overhead_ms for op in ops])), 1e-6))

    return of_iterations(t.iterations, "means4", compute)  # type: ignore[return-value]


def simulate_once(sc: Scenario, gpu: GpuModel, seed: int, *, vary: bool = True, duration_ms: float | None = None,
                  ops: bool = False) -> Any:
    """One simulated run of the scenario (pandas rows, ``timeslice.simulate``'s columns + phase, overhead).

    ``vary``: draw quantum and switch from their intervals and bootstrap the alone iterations (a replicate);
    otherwise the point values and every alone iteration. ``ops``: the completed operations as arrays
    (``timeslice.SimOps``, what :func:`replicate_stats` reads), not a table.
    """
    if sc.sharing not in MODES:
        raise RunError(f"unknown sharing mode {sc.sharing!r}; choose one of {', '.join(MODES)}")
    rng = random.Random(seed)
    pools = [block_resample(len(t.iterations), rng) if vary else None for t in sc.tenants]
    draws = [t.drawer(random.Random(rng.random()), pool) for t, pool in zip(sc.tenants, pools, strict=True)]
    cycles, mean_k, mean_gap, mean_wall = zip(*(_means(t) for t in sc.tenants), strict=True)
    duration = duration_ms or 1.25 * max(n * c for n, c in zip(sc.n, cycles, strict=True)) + 50.0
    offsets = common_start(cycles, mean_k, random.Random(seed + 1))
    # how fast queued kernels run (this GPU's measured share, else the a-priori one): one value for both modes
    traits = [t.traits or fallback_traits(t.workload, gpu.busy_share) for t in sc.tenants]
    busy = [tr.busy_share for tr in traits]
    if sc.sharing == "timeslice":
        if not gpu.has_probe:
            raise RunError(f"no time-slice probe for {gpu.gpu_name or 'this GPU'}: time-slicing cannot be predicted "
                           "(make one with: kts probe, or give one with --probe); MPS needs none")
        q = gpu.quantum_ms.draw(rng, 0.05) if vary else gpu.quantum_ms.value
        s = min(gpu.switch_ms.draw(rng, 0.0) if vary else gpu.switch_ms.value, 0.5 * q)
        if vary:  # one lock phase for every tenant: same-cadence tenants keep their common start's phase
            shift = rng.uniform(-q / 2, q / 2)
            draws = [_phase_shifted(d, shift, SLEEP_QUANTA * q) for d in draws]
        tenants = [SimTenant(t.name, k, g, kernels=tr.kernels, busy_share=b)
                   for t, k, g, b, tr in zip(sc.tenants, mean_k, mean_gap, busy, traits, strict=True)]
        return simulate(tenants, q, s, duration, seed, offsets, slice_timer=gpu.slice_timer, draws=draws,
                        multi_wait=gpu.multi_wait(random.Random(rng.random()), q),
                        idle_resets_slice=gpu.idle_resets_slice, switch_after_idle=gpu.switch_after_idle, ops=ops)
    caps = [t.thread_pct if sc.sharing == "mps-limited" else 100.0 for t in sc.tenants]
    # a launch-bound step claims SMs only while its kernels are in flight: its weight holds its busy share
    # the host-time term: only an op's GPU part runs at the fluid share's speed (``plan.traits``)
    # the kernel-boundary queue at each kernel's length: its kernels per ms of its op meet the neighbours' kernels
    # that fill the SMs (``plan.mps.kernel_waits``)
    tenants = [MpsTenant(t.name, k, g, weight=tr.mps_weight, thread_pct=c, sm_need=tr.sm_need,
                         fills_gpu=tr.fills_gpu, busy_share=b, host_share=tr.host_share,
                         kernel_rate=tr.kernels / w, blocking=tr.blocking, phase_host_shares=tr.phase_host_shares)
               for t, k, g, c, b, tr, w in zip(sc.tenants, mean_k, mean_gap, caps, busy, traits, mean_wall, strict=True)]
    return simulate_mps(tenants, duration, seed, draws=draws, ops=ops)  # random phases: see ``common_start``


def unknown_waits(sc: Scenario) -> dict[str, float]:
    """Per tenant, the factor by which its predicted wall's upper bounds grow under MPS where a neighbour's kernel
    lengths are unknown (1: none is).

    Why: the waits for the rest of a neighbour's kernel in flight (``plan.mps.kernel_waits``) need its kernel
    lengths, which only a profile's kernel record holds (``workers/kts_profile.py`` version 2). A profile made before
    it gives the op-level numbers only, and those bound the waits without saying them: they cost a tenant at most the
    share of its time a neighbour's kernels can hold the SMs (``traits.TenantTraits.unknown_block_share``). The point
    counts no such wait (the model these runs validated); the interval reaches up to the bound, 1 / (1 - share), so
    the prediction states what it does not know rather than guessing it. Uncapped neighbours only (a thread cap
    leaves SMs free); time-slicing does not read kernel lengths."""
    out = {t.name: 1.0 for t in sc.tenants}
    if sc.sharing not in ("mps", "mps-limited"):
        return out
    capped = {t.name: sc.sharing == "mps-limited" and t.thread_pct < 100.0 for t in sc.tenants}
    for t in sc.tenants:
        share = sum(o.traits.unknown_block_share for o in sc.tenants
                    if o.name != t.name and o.traits is not None and not capped[o.name])
        out[t.name] = 1.0 / (1.0 - min(share, MAX_WAIT_SHARE))
    return out


def sync_waits(sc: Scenario, gpu: GpuModel | None) -> dict[tuple[str, str], float]:
    """Per (tenant, phase), the ms by which its predicted wall's upper bounds grow under time-slicing for the host's
    waits for the device in the middle of its op (the profile's ``host_syncs``, ``kts_profile`` version 3); 0 where
    it counted none, or where no probe bounds them.

    Why: the simulator has a launch-bound op keep launching while it waits for the GPU (``plan.timeslice``), so a
    wait hides inside its launches. A host that reads a result mid-op (``.item()``, a mask check, a copy to the
    host) stops launching until its queued kernels have run, and while a neighbour holds the GPU that wait shows
    in its wall. How long is not modelled; it is bounded: a context that waits gets the GPU within one slice and a
    switch of each other context with work (the round robin the multi-context probe measured, ``GpuModel``), so
    each such wait adds at most (neighbours) x (quantum + switch), at the probe's upper bounds. The point counts
    none (what the simulator says); the interval reaches up to the bound, and ``kts plan`` says so
    (``inputs.PlanInput.sync_notes``). MPS has no slices to wait for: 0."""
    out: dict[tuple[str, str], float] = {}
    if sc.sharing != "timeslice" or gpu is None or not gpu.has_probe:
        return out
    q, cs = (e.hi if math.isfinite(e.hi) else e.value for e in (gpu.quantum_ms, gpu.switch_ms))
    others = len(sc.tenants) - 1
    for t in sc.tenants:
        for phase in t.phases:
            syncs = t.traits.syncs_of(phase) if t.traits is not None else 0.0
            if syncs > 0 and others > 0:
                out[(t.name, phase)] = syncs * others * (q + cs)
    return out


def prediction_interval(values: np.ndarray, level: float = LEVEL, *, log: bool = True) -> tuple[float, float]:
    """Where one more run's statistic falls with probability ``level``, from ``m`` simulated runs of it.

    With m >= 2 / (1 - level) - 1 runs (39 at 95 %): their minimum and maximum, which hold the next run with
    probability (m - 1) / (m + 1) whatever the distribution (Wilks) and never leave what the simulator can produce
    (a phase-locked FFT's p99 has a hard ceiling of two slices). With fewer (the capacity table's 10): the t
    prediction interval mean +- t(m - 1) * sd * sqrt(1 + 1/m), on the log scale for positive times.

    Why not the replicates' own 2.5-97.5 % quantiles (as before): from m = 24 runs those hold only about
    (m - 1.25) / (m + 1) = 87 % of the next run's outcomes, from m = 6 about 68 %; a prediction checked against
    one measured run needs the interval for one more run, at its stated level (``tests/test_plan.py`` measures it).
    """
    x = np.asarray(values, float)
    x = x[np.isfinite(x)]
    if len(x) == 0:
        return math.nan, math.nan
    if len(x) + 1 >= 2 / (1 - level) or len(x) < 2 or float(np.ptp(x)) == 0.0:
        return float(np.min(x)), float(np.max(x))
    from scipy.special import stdtrit  # about 0.15 s, once; the engine otherwise runs on numpy alone

    use_log = log and bool(np.all(x > 0))
    y = np.log(x) if use_log else x
    half = float(stdtrit(len(y) - 1, 0.5 + level / 2)) * float(np.std(y, ddof=1)) * math.sqrt(1 + 1 / len(y))
    lo, hi = float(np.mean(y)) - half, float(np.mean(y)) + half
    return (math.exp(lo), math.exp(hi)) if use_log else (lo, hi)


DRIFT_Z = 1.959964  # the 95 % normal quantile: the host's drift as a 95 % spread on the log scale


def widened(point: float, lo: float, hi: float, sd_log: float) -> tuple[float, float]:
    """The prediction interval [lo, hi] around ``point`` with the host's drift (log-sd ``sd_log``) added in
    quadrature on the log scale: each side's log distance d becomes sqrt(d^2 + (z sd)^2).

    Why: the replicates resample one alone run, so they hold its host speed as given; a host-bound tenant's next
    run may sit at another speed (``plan.traits.host_drift``: llama-decode's alone p50 ranged 11.3-24.7 ms within
    an hour). Independent sources of spread add as variances.
    """
    if not (sd_log > 0 and point > 0 and math.isfinite(point)):
        return lo, hi
    extra = DRIFT_Z * sd_log
    down = math.log(point / lo) if math.isfinite(lo) and lo > 0 else 0.0
    up = math.log(hi / point) if math.isfinite(hi) and hi > 0 else 0.0
    return (point * math.exp(-math.hypot(max(down, 0.0), extra)), point * math.exp(math.hypot(max(up, 0.0), extra)))


ReplicateStats = dict[tuple[str, str, str], tuple[float, float, float, float]]


def replicate_seed(seed: int, r: int) -> int:
    """The simulator's seed of replicate ``r`` of a prediction seeded ``seed``."""
    return seed * 1_000_003 + r


def replicate_stats(sc: Scenario, gpu: GpuModel, seed: int, replicates: Sequence[int]) -> list[ReplicateStats]:
    """What :func:`predict` keeps of each replicate in ``replicates``: per (tenant, phase, clock) its p50, p99,
    share above the threshold and median wait.

    Why apart from :func:`predict`: each replicate draws from its own seed alone, so the capacity question runs
    them in chunks on every core and asks again with 39 replicates without re-simulating the first ones
    (``plan.capacity.predict_all``); :func:`summarize` turns them into the same predictions. Each replicate is read
    as arrays (``timeslice.SimOps``: its tenant's operations in the order they ran, as the table's rows), the
    per-tenant constants once per call.
    """
    consts = []  # per tenant: (phase, how many of its ops a run's n iterations hold, threshold)
    for t, n in zip(sc.tenants, sc.n, strict=True):
        phases = []
        for phase in t.phases:
            per_it = max(1, sum(1 for op in t.iterations[0] if op.phase == phase))
            thr = sc.thresholds_ms.get(t.name)
            phases.append((phase, n * per_it,
                           thr if thr is not None else float(np.quantile(t.column("wall_ms", phase), 0.99))))
        consts.append(phases)
    out = []
    for r in replicates:
        per: ReplicateStats = {}
        ops = simulate_once(sc, gpu, replicate_seed(seed, r), ops=True)
        for k, (t, phases) in enumerate(zip(sc.tenants, consts, strict=True)):
            mine = np.flatnonzero(ops.tenant == k)
            for phase, limit, thr in phases:
                at = mine[ops.phase[mine] == phase][:limit]
                wall, device = ops.wall_ms(at), ops.device_ms(at)
                wait = wall - device - ops.overhead_ms[at]
                share = float(np.mean(wall > thr)) if len(wall) else math.nan
                for metric, values in (("wall", wall), ("device", device)):
                    p50, p99 = _quantiles(values)
                    per[(t.name, phase, metric)] = (p50, p99, share, float(np.median(wait)) if len(wait) else math.nan)
        out.append(per)
    return out


def predict(sc: Scenario, gpu: GpuModel, *, replicates: int = DEFAULT_REPLICATES, seed: int = 0
            ) -> list[Prediction]:
    """Each tenant's wall and device p50/p99 (and wait, share above threshold) with prediction intervals."""
    return summarize(sc, replicate_stats(sc, gpu, seed, range(replicates)), gpu)


def summarize(sc: Scenario, stats: Sequence[ReplicateStats], gpu: GpuModel | None = None) -> list[Prediction]:
    """The predictions (medians and prediction intervals) from the replicates' statistics, in replicate order
    (``gpu``: the model they were simulated with, which bounds the waits the simulator leaves out: :func:`sync_waits`)."""
    per: dict[tuple[str, str, str], list[tuple[float, float, float, float]]] = {}
    for rep in stats:
        for key, values in rep.items():
            per.setdefault(key, []).append(values)
    out = []
    unknown = unknown_waits(sc)
    syncs = sync_waits(sc, gpu)
    for t, n in zip(sc.tenants, sc.n, strict=True):
        thr = sc.thresholds_ms.get(t.name)
        for phase in t.phases:
            for metric in ("wall", "device"):
                a = np.array(per[(t.name, phase, metric)], float)
                finite = a[np.isfinite(a[:, 1])]
                if not len(finite):
                    continue
                med = np.median(finite, axis=0)
                (p50_lo, p50_hi), (p99_lo, p99_hi) = (prediction_interval(finite[:, k]) for k in (0, 1))
                sd50, sd99 = t.drift_of(phase)
                p50_lo, p50_hi = widened(float(med[0]), p50_lo, p50_hi, sd50)
                p99_lo, p99_hi = widened(float(med[1]), p99_lo, p99_hi, sd99)
                if metric == "wall":  # its neighbours' kernel lengths unknown: as slow as they can make it
                    p50_hi, p99_hi = p50_hi * unknown[t.name], p99_hi * unknown[t.name]
                    extra = syncs.get((t.name, phase), 0.0)  # its host's waits mid-op: up to their bound
                    p50_hi, p99_hi = p50_hi + extra, p99_hi + extra
                share_lo, share_hi = prediction_interval(finite[:, 2], log=False)
                threshold = thr if thr is not None else float(np.quantile(t.column("wall_ms", phase), 0.99))
                out.append(Prediction(sc.name, t.name, t.workload, metric, phase, sc.sharing, int(n),
                                      float(med[0]), p50_lo, p50_hi, float(med[1]), p99_lo, p99_hi, threshold,
                                      float(med[2]), max(share_lo, 0.0), min(share_hi, 1.0), float(med[3])))
    return out


def predictions_table(rows: Sequence[Prediction]) -> str:
    """The predictions as aligned text: one line per scenario, tenant, clock and phase."""
    head = (f"{'scenario':<22} {'tenant':<10} {'metric':<6} {'phase':<8} {'p50 [PI] ms':<24} {'p99 [PI] ms':<24} "
            "slow share")
    lines = [head]
    for r in rows:
        lines.append(f"{r.scenario:<22} {r.tenant:<10} {r.metric:<6} {r.phase:<8} "
                     f"{r.p50_ms:7.3f} [{r.p50_lo:.3f}, {r.p50_hi:.3f}]{'':<2} "
                     f"{r.p99_ms:7.3f} [{r.p99_lo:.3f}, {r.p99_hi:.3f}]{'':<2} "
                     f"{r.share_above:.1%} above {r.threshold_ms:.3f} ms")
    return "\n".join(lines)
