"""The planner's one input, loaded once from a run: its manifest, every tenant's alone profile, the GPU model.

Why: the planner used to pass run directories down, so one ``kts plan --capacity`` reached ``runs.open_run`` six
times on its way through ``engine``, ``capacity`` and ``live``, each re-reading the manifest and re-parsing logs.
Here the CLI (or the report, or the validation) calls :func:`load_plan_input` once; everything below takes the
typed :class:`PlanInput` and never opens the run again (``tests/test_plan_inputs.py`` counts the opens).

What it holds is what a user has *before* sharing: the manifest (the scenarios' tenants and counts), each
baseline tenant's alone iterations with its traits (``plan.traits``: from the profile its alone run recorded, or
the documented fallbacks), and the GPU model (``plan.engine.GpuModel``, from the committed probes of the run's GPU
model unless given). The shared logs are never read: a prediction must not see what it predicts.

The bracketed design (issue 30: ``baseline-<t>-r1, shared-r1, baseline-<t>-r2, shared-r2, baseline-<t>-r3``) puts
alone blocks on both sides of each shared block, minutes apart: shared block rK is predicted from the alone blocks
rK and rK+1 together (:func:`alone_for`), so a host that drifted during the run is met half-way. Each tenant's
alone blocks also measure that drift (``plan.traits.host_drift``), which the prediction interval carries.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from kts_helpers.analyse.profiles import profile_warnings
from kts_helpers.errors import RunError, SpecError
from kts_helpers.plan.engine import (
    DEFAULT_REPLICATES,
    AloneProfile,
    GpuModel,
    Prediction,
    Scenario,
    gpu_model_for_name,
    predict,
    profile_from_log,
)
from kts_helpers.plan.traits import host_drift
from kts_helpers.run.runs import open_run


@dataclass(frozen=True)
class PlanInput:
    """A run as the planner needs it, loaded once."""

    run_id: str
    path: str
    manifest: Any  # run.runs.Manifest
    gpu_name: str
    alone: dict[tuple[str, str], AloneProfile] = field(default_factory=dict)  # (baseline, tenant) -> alone profile
    gpu: GpuModel | None = None
    # alone blocks the run declared but never recorded (interrupted), whose tenants have another block that was:
    # left out, and each shared block is predicted from the alone blocks that completed (``alone_for``)
    unfinished: tuple[str, ...] = ()

    def fallbacks(self) -> list[str]:
        """One line per tenant type whose traits are not measured (no profile in its alone run)."""
        out = []
        # a block without a profile whose tenant has a profiled block (the warm design's plain alone blocks, without
        # the MPS server) predicts nothing: the profiled blocks do
        profiled = {tenant for (_s, tenant), p in self.alone.items() if p.traits is not None}
        for (scenario, tenant), p in self.alone.items():
            if p.traits is None and tenant not in profiled:
                out.append(f"{tenant} ({scenario}): no profile in its alone run; the documented fallbacks for "
                           f"{p.workload!r} apply (plan.traits)")
        return out

    def notes(self) -> list[str]:
        """What the planner left out of the run: alone blocks that never completed, time-slicing where no probe of
        its GPU exists, and the kernel lengths a profile did not record."""
        out = [f"{name}: never recorded (the run was interrupted); its tenants are predicted from their alone "
               f"blocks that did" for name in self.unfinished]
        if self.gpu is not None and not self.gpu.has_probe:
            out.append(f"no time-slice probe for {self.gpu_name or 'this GPU'}: MPS only (time-slicing needs one: "
                       "kts probe, or --probe)")
        uncapped = any(s.kind == "shared" and s.sharing == "mps" for s in self.manifest.scenarios)
        sliced = any(s.kind == "shared" and s.sharing == "timeslice" for s in self.manifest.scenarios)
        return (out + (self.kernel_notes() if uncapped else [])  # a thread cap leaves SMs free: no wait to bound
                + (self.sync_notes() if sliced and self.gpu is not None and self.gpu.has_probe else [])
                + self.busy_notes())

    def busy_notes(self) -> list[str]:
        """One line per tenant whose profiled kernels took longer than its timed alone op (busy share measured
        above 1, held to 1): GPU-bound as far as the planner can tell; the reading is shown, not hidden."""
        seen: dict[str, tuple[str, float]] = {}
        for (scenario, tenant), p in self.alone.items():
            if p.traits is not None and p.traits.busy_measured > 1.0:
                seen.setdefault(tenant, (scenario, p.traits.busy_measured))
        return [f"{tenant} ({scenario}): its profiled kernels take {100 * share:.0f} % of its timed alone op, held to 100 %: "
                f"GPU-bound (under time-slicing it keeps its quantum); kernels run longer under the profiler than "
                f"timed, or overlap on several streams" for tenant, (scenario, share) in seen.items()]

    def sync_notes(self) -> list[str]:
        """One line per tenant and phase whose profile counted host waits for the device mid-op: under
        time-slicing each can wait for its neighbours' slices, which the simulator does not count; its predicted
        wall reaches up to that bound (``plan.engine.sync_waits``), not a guess."""
        seen: dict[tuple[str, str], float] = {}
        for (_scenario, tenant), p in self.alone.items():
            for phase, n in (p.traits.phase_syncs or ()) if p.traits is not None else ():
                if n > 0:
                    seen.setdefault((tenant, phase), n)
        return [f"{tenant} ({phase}): its host waits for the GPU {n:g} time(s) in the middle of each op (profile "
                f"host_syncs); under time-slicing each such wait can last up to a slice and a switch of each neighbour, "
                f"which the simulator does not count: its predicted wall's upper bounds reach that far, not a guess"
                for (tenant, phase), n in seen.items()]

    def kernel_notes(self) -> list[str]:
        """One line per tenant whose profile lacks the kernel-level record (made before ``kts_profile`` version 2):
        under MPS how long its kernels hold the SMs is unknown, and its neighbours' intervals are widened to the most
        they can lose to it (``plan.engine.unknown_waits``), not guessed."""
        seen: dict[str, float] = {}
        for (_scenario, tenant), p in self.alone.items():
            if p.traits is not None and p.traits.unknown_block_share > 0:
                seen.setdefault(tenant, p.traits.unknown_block_share)
        return [f"{tenant}: its profile has no kernel-level record (kts_profile before version 2), so under MPS how "
                f"long its kernels hold the SMs is unknown; its neighbours' predicted walls reach up to its bound "
                f"(its kernels holding the SMs up to {share:.0%} of the time), not a guess"
                for tenant, share in seen.items()]

    def profile_warnings(self) -> list[str]:
        """Alone blocks whose timed iterations may carry their profile (``analyse.profiles.profile_warnings``)."""
        return profile_warnings([(tenant, scenario, p.profile_teardown)
                                 for (scenario, tenant), p in self.alone.items() if p.traits is not None])


def load_plan_input(run_dir: str | os.PathLike, probe: str | os.PathLike | None = None,
                    multi: str | os.PathLike | None = None, *, gpu: bool = True) -> PlanInput:
    """Open the run once: its manifest, every baseline tenant's alone profile, and (``gpu``) the GPU model."""
    run = open_run(run_dir)
    m = run.read()
    name = str(m.environment.get("gpu_name") or "")
    alone = {}
    unfinished = []
    for s in m.scenarios:
        if s.kind == "baseline":
            if m.record(s.name) is None and _has_other_block(m, s):
                unfinished.append(s.name)  # interrupted before it was recorded: its tenants' other blocks stand
                continue
            for t in s.tenants:
                alone[(s.name, t.name)] = profile_from_log(run.log_path(s.name, t.name), t.name, t.workload)
    alone = with_host_drift(alone, bracketed=is_bracketed(m))
    # not skipping the run itself: a probe run plans against itself, and one cached search serves every run
    model = gpu_model_for_name(name, probe, multi, mps_only=True) if gpu else None
    return PlanInput(run.run_id, str(run.path), m, name, alone, model, tuple(unfinished))


def _has_other_block(manifest: Any, scenario: Any) -> bool:
    """Whether every tenant of an alone scenario has another alone block that was recorded."""
    names = {t.name for t in scenario.tenants}
    done = {t.name for s in manifest.scenarios if s.kind == "baseline" and s.name != scenario.name
            and manifest.record(s.name) is not None for t in s.tenants}
    return names <= done


def is_bracketed(manifest: Any) -> bool:
    """Whether the run is the bracketed design: every shared block rK has alone blocks rK and rK+1 after it.

    Not the older ``repeats`` design (alone rK, shared rK, for every K): its last shared block has no alone block
    after it."""
    shared = {s.repeat for s in manifest.scenarios if s.kind == "shared"}
    alone = {s.repeat for s in manifest.scenarios if s.kind == "baseline"}
    return bool(shared) and all(r in alone and r + 1 in alone for r in shared)


def with_host_drift(alone: dict[tuple[str, str], AloneProfile], *, bracketed: bool
                    ) -> dict[tuple[str, str], AloneProfile]:
    """Each alone profile with its tenant's host drift (``plan.traits.host_drift``) over all its alone blocks.

    A tenant with a profile always carries it (from one block: the prior scaled by its host share); a tenant without
    one only in the bracketed design, where its own blocks measure it (the older designs' unprofiled tenants keep
    the intervals the fft/gemm/llm table validated).
    """
    blocks: dict[str, list[AloneProfile]] = {}
    for (_scenario, tenant), p in alone.items():
        blocks.setdefault(tenant, []).append(p)
    out = {}
    for key, p in alone.items():
        mine = blocks[key[1]]
        if p.traits is None and not (bracketed and len(mine) > 1):
            out[key] = p
            continue
        stats = [{ph: _p50_p99(b.column("wall_ms", ph)) for ph in b.phases} for b in mine]
        drift = host_drift(stats, p.traits.host_share if p.traits is not None else 0.0)
        out[key] = replace(p, drift=tuple((ph, a, b) for ph, (a, b) in drift.items()))
    return out


def _p50_p99(wall: Any) -> tuple[float, float]:
    return float(np.quantile(wall, 0.5)), float(np.quantile(wall, 0.99))


def _baseline_for(manifest: Any, tenant: Any, repeat: int) -> tuple[str, str]:
    """(baseline scenario, tenant name in it) for a shared tenant: same name and repeat, else same workload."""
    base = [s for s in manifest.scenarios if s.kind == "baseline"]
    for rule in (lambda s, t: t.name == tenant.name and s.repeat == repeat,
                 lambda s, t: (t.workload, t.matrix_size) == (tenant.workload, tenant.matrix_size) and s.repeat == repeat,
                 lambda s, t: t.workload == tenant.workload and s.repeat == repeat,
                 lambda s, t: t.workload == tenant.workload):
        for s in base:
            for t in s.tenants:
                if rule(s, t):
                    return s.name, t.name
    raise RunError(f"no alone baseline for tenant {tenant.name!r} ({tenant.workload}); cannot predict it")


def alone_for(inp: PlanInput, tenant: Any, repeat: int) -> tuple[AloneProfile, int]:
    """(the alone profile a shared tenant of block ``repeat`` is predicted from, the iterations of one block).

    Bracketed design: its alone blocks rK and rK+1 (the same tenant, both sides of the shared block), their
    iterations pooled (the block bootstrap draws from both); the traits are block rK's. Otherwise the one baseline
    ``_baseline_for`` names."""
    key = _baseline_for(inp.manifest, tenant, repeat)
    first = inp.alone[key]
    if not is_bracketed(inp.manifest):
        return first, len(first.iterations)
    after = next((k for k in inp.alone if k[1] == key[1] and _repeat_of(inp.manifest, k[0]) == repeat + 1), None)
    if after is None:
        return first, len(first.iterations)
    return replace(first, iterations=first.iterations + inp.alone[after].iterations), len(first.iterations)


def _repeat_of(manifest: Any, scenario: str) -> int:
    return next(s.repeat for s in manifest.scenarios if s.name == scenario)


def scenarios_of(inp: PlanInput, *, thresholds_ms: dict[str, float] | None = None) -> list[Scenario]:
    """Every shared scenario of the run, each tenant with its alone profile (renamed, capped as it ran)."""
    out = []
    for s in inp.manifest.scenarios:
        if s.kind != "shared":
            continue
        profiles, counts = [], []
        for t in s.tenants:
            alone, n_alone = alone_for(inp, t, s.repeat)
            pct = float(t.mps_thread_percentage) if t.mps_thread_percentage else 100.0
            profiles.append(replace(alone, name=t.name, workload=t.workload, thread_pct=pct))
            # a count the manifest does not fix (auto, open loop, a simulated run): as many as it ran alone
            fixed = not t.auto and t.arrival == "closed" and t.iterations > 0
            counts.append(int(t.iterations) if fixed else n_alone)
        out.append(Scenario(s.name, tuple(profiles), tuple(counts), s.sharing, dict(thresholds_ms or {})))
    if not out:
        raise RunError(f"run {inp.run_id} has no shared scenario to predict")
    return out


def predict_input(inp: PlanInput, *, replicates: int = DEFAULT_REPLICATES, seed: int = 0) -> list[Prediction]:
    """``kts plan --from-run``: every shared scenario of the run predicted from its manifest and alone logs."""
    if inp.gpu is None:
        raise RunError(f"run {inp.run_id} was loaded without its GPU model; load it with gpu=True to predict")
    out: list[Prediction] = []
    for sc in scenarios_of(inp):
        out += predict(sc, inp.gpu, replicates=replicates, seed=seed)
    return out


def mix_of(inp: PlanInput) -> list[AloneProfile]:
    """One alone profile per workload of the run (its first baseline of each): the capacity question's tenant types."""
    out: dict[str, AloneProfile] = {}
    for s in inp.manifest.scenarios:
        if s.kind == "baseline":
            for t in s.tenants:
                if t.workload not in out and t.workload != "noop":
                    out[t.workload] = replace(inp.alone[(s.name, t.name)], name=t.workload)
    if not out:
        raise SpecError(f"run {inp.run_id} has no alone baseline to take tenant types from")
    return list(out.values())


# -- a run's shared scenarios: conveniences that load the run once and delegate ---------------------------------
def scenarios_of_run(run_dir: str | os.PathLike, *, thresholds_ms: dict[str, float] | None = None
                     ) -> list[Scenario]:
    """Every shared scenario of a run, with its tenants' alone profiles (``scenarios_of``)."""
    return scenarios_of(load_plan_input(run_dir, gpu=False), thresholds_ms=thresholds_ms)


def predict_run(run_dir: str | os.PathLike, probe: str | os.PathLike | None = None, *,
                multi: str | os.PathLike | None = None, replicates: int = DEFAULT_REPLICATES, seed: int = 0
                ) -> list[Prediction]:
    """Every shared scenario of the run predicted from its manifest and alone logs (``predict_input``)."""
    return predict_input(load_plan_input(run_dir, probe, multi), replicates=replicates, seed=seed)
