"""How many replicas can this mix take? The capacity question, answered with the prediction engine.

An operator's question behind time-slicing: with these workloads and their latency goals, what may
``replicas:`` be in the device plugin's time-slicing config, and would MPS serve them better? For N = 1..8
pods sharing one GPU (filled from the mix in turn: fft, gemm, fft, gemm, ...), ``plan.engine`` predicts
every pod's wall p50/p99 and its share of slow iterations, with intervals; a goal is met when the predicted
value is (``meets``) and the interval says how sure that is (``sure``: the upper bound meets it too).

Sharing modes as Kubernetes offers them: **time-slicing** (the device plugin's ``timeSlicing`` replicas:
every pod sees the whole GPU, taking turns) and **MPS** (the device plugin's ``mps`` replicas: every pod
limited to 1/N of the SMs, ``CUDA_MPS_ACTIVE_THREAD_PERCENTAGE`` = 100/N; the fluid model with thread caps).

The largest N is the largest for which every N' ≤ N meets every goal (a planner that recommends 5 where 3
fails is no help), and the answer names, per mode, the goal that breaks first (at N + 1: the pod furthest past its
goal), so an operator knows which tenant the mix is sized by. Its ConfigMap is the committed overlay's with
``replicas`` set to N (the same schema, read from ``manifests/``; there is no TimeSlicingConfig custom resource).
On a GPU without a time-slice probe the question is asked under MPS only (its model needs no probe), and the
answer says so.
"""

from __future__ import annotations

import itertools
import math
import multiprocessing
import os
import re
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from kts_helpers.errors import RunError, SpecError
from kts_helpers.plan.engine import (
    DEFAULT_REPLICATES,
    AloneProfile,
    GpuModel,
    Prediction,
    ReplicateStats,
    Scenario,
    replicate_stats,
    summarize,
)
from kts_helpers.plan.inputs import load_plan_input, mix_of
from kts_helpers.plan.timeslice import compiled_loops

MANIFESTS = Path(__file__).resolve().parents[2] / "manifests" / "overlays"
OVERLAYS = {"timeslice": "device-plugin-timeslicing", "mps": "device-plugin-mps"}
CONFIG_FILES = {"timeslice": "time-slicing-config.yaml", "mps": "mps-config.yaml"}
MAX_N = 8
CAPACITY_REPLICATES = 10  # per N and mode at first: 8 N x 2 modes x 10 runs in <= 10 s on 2 cores (bench_plan) ...
SETTLE_REPLICATES = DEFAULT_REPLICATES  # ... and 39 (a prediction interval's own count) where the answer turns on it:
# the first N of a mode whose interval holds its goal (``settle``). Where a p99 sits on its goal the median of 10
# replicates is a coin flip: the article FFT at N = 2 under time-slicing spreads over 0.4-4 ms across replicates, and
# its median of 10 moved from 1.20 to 0.99 ms (N = 2, against 1.60 measured) when the probe's quantum interval moved
# by 0.003 ms; the median of 6 did so with nothing changed. Of 20 and 39 replicates: 1.1-1.3 ms, N = 1.
CAPACITY_ITERATIONS = 300  # each pod's predicted run: the kit's smallest design with a p99 bound


@dataclass(frozen=True)
class Goal:
    """A tenant type's goal: its wall p99 at most ``slo_ms``, and/or at most ``max_slow_share`` of its
    iterations slower than ``slo_ms`` (or, without an SLO, than its own alone p99)."""

    workload: str
    slo_ms: float | None = None
    max_slow_share: float | None = None

    def text(self) -> str:
        parts = []
        if self.slo_ms is not None:
            parts.append(f"p99 ≤ {self.slo_ms:g} ms")
        if self.max_slow_share is not None:
            over = f"{self.slo_ms:g} ms" if self.slo_ms is not None else "its alone p99"
            parts.append(f"≤ {self.max_slow_share:.1%} of iterations above {over}")
        return f"{self.workload}: " + " and ".join(parts)


@dataclass(frozen=True)
class PodRow:
    """One pod at one N and mode: its predicted wall p50/p99 and slow share, each with its interval."""

    n: int
    mode: str
    tenant: str
    workload: str
    p50_ms: float
    p50_lo: float
    p50_hi: float
    p99_ms: float
    p99_lo: float
    p99_hi: float
    slow_share: float
    slow_lo: float
    slow_hi: float
    meets: bool
    sure: bool
    phase: str = "op"  # an LLM pod has two rows, prefill and decode

    @property
    def pod(self) -> str:
        return self.tenant if self.phase == "op" else f"{self.tenant} {self.phase}"


@dataclass(frozen=True)
class CapacityAnswer:
    """The capacity table, the largest N per mode (0: not even one pod meets its goals), and the ConfigMap."""

    mix: tuple[str, ...]
    goals: tuple[Goal, ...]
    rows: tuple[PodRow, ...]
    largest: dict[str, int]
    gpu_rule: str
    configmap: str = field(repr=False, default="")
    # per mode asked: the goal that breaks first (the first N that misses, its pod furthest past its goal); "" where
    # none breaks up to the largest N tried
    breaks_first: dict[str, str] = field(default_factory=dict)

    @property
    def modes(self) -> tuple[str, ...]:
        """The sharing modes asked (time-slicing needs the GPU's probe)."""
        return tuple(m for m in OVERLAYS if m in self.largest)

    @property
    def best_mode(self) -> str:
        return max(self.modes, key=lambda m: (self.largest.get(m, 0), m == "timeslice"))

    @property
    def feasible(self) -> bool:
        """Whether any N meets every goal (N = 1, a single pod, can miss: a goal tighter than the tenant alone)."""
        return max(self.largest.values(), default=0) > 0

    @property
    def recommendation(self) -> str:
        """What to deploy, in words: the mode and replicas, or that no N meets the goals (then no ConfigMap)."""
        if not self.feasible:
            return ("none: not even one pod meets every goal (N = 1 misses), so no sharing can; the goals are "
                    "tighter than the tenants alone")
        return f"{self.best_mode} with replicas {self.largest[self.best_mode]} ({self.overlay})"

    @property
    def overlay(self) -> str:
        return f"manifests/overlays/{OVERLAYS[self.best_mode]}"

    def to_dict(self) -> dict[str, Any]:
        return {"mix": list(self.mix), "goals": [asdict(g) for g in self.goals],
                "largest_n": dict(self.largest), "recommended_mode": self.best_mode if self.feasible else None,
                "overlay": self.overlay if self.feasible else None, "recommendation": self.recommendation,
                "breaks_first": {m: self.breaks_first.get(m) or None for m in self.modes},
                "multi_context_rule": self.gpu_rule, "rows": [asdict(r) for r in self.rows],
                "configmap": self.configmap}

    def table(self) -> str:
        head = f"{'N':>2} {'mode':<9} {'pod':<14} {'p50 [PI] ms':<22} {'p99 [PI] ms':<22} {'slow share [PI]':<22} goal"
        lines = [head]
        for r in self.rows:
            goal = "met" if r.meets and r.sure else "met (interval crosses)" if r.meets else "MISSED"
            lines.append(f"{r.n:>2} {r.mode:<9} {r.pod:<14} {r.p50_ms:6.2f} [{r.p50_lo:.2f}, {r.p50_hi:.2f}]"
                         f"{'':<3} {r.p99_ms:6.2f} [{r.p99_lo:.2f}, {r.p99_hi:.2f}]{'':<3} "
                         f"{r.slow_share:6.1%} [{r.slow_lo:.1%}, {r.slow_hi:.1%}]  {goal}")
        lines.append("")
        lines += [f"goal {g.text()}" for g in self.goals]
        for mode in OVERLAYS:
            if mode not in self.largest:
                lines.append(f"{mode}: not asked (no time-slice probe for this GPU: kts probe, or --probe)")
                continue
            lines.append(f"largest N meeting every goal under {mode}: {self.largest[mode]}")
            lines.append(f"  breaks first under {mode}: {self.breaks_first.get(mode) or 'none up to the largest N tried'}")
        lines.append(f"recommended: {self.recommendation}; multi-context rule: {self.gpu_rule}")
        return "\n".join(lines)


def parse_goals(slo: dict[str, float] | None, max_slow_share: float | None, mix: Sequence[str]) -> tuple[Goal, ...]:
    """Goals per tenant type from ``slo_ms={"fft": 1.0}`` and a maximum share of slow iterations."""
    slo = dict(slo or {})
    unknown = sorted(set(slo) - set(mix))
    if unknown:
        raise SpecError(f"an SLO for {', '.join(unknown)}, which is not in the mix ({', '.join(mix)})")
    if any(not (isinstance(v, (int, float)) and v > 0) for v in slo.values()):
        raise SpecError(f"an SLO must be a positive number of ms, got {slo}")
    if max_slow_share is not None and not 0 <= max_slow_share < 1:
        raise SpecError(f"max_slow_share must lie in [0, 1), got {max_slow_share}")
    if not slo and max_slow_share is None:
        raise SpecError('give a goal: an SLO (e.g. slo_ms={"fft": 1.0}) or a maximum share of slow iterations')
    types = list(dict.fromkeys(mix))
    return tuple(Goal(w, slo.get(w), max_slow_share) for w in types if w in slo or max_slow_share is not None)


def with_cadence(profile: AloneProfile, sleep_ms: float | None = None, rate_hz: float | None = None,
                 seed: int = 0) -> AloneProfile:
    """The profile at another cadence: its sleep replaced (the jitter kept), or Poisson arrivals at ``rate_hz``
    (exponential gaps; a closed-loop approximation of open-loop arrivals)."""
    if sleep_ms is None and rate_hz is None:
        return profile
    old = float(np.median([it[-1].gap_ms for it in profile.iterations]))
    rng = np.random.default_rng(seed)
    its = []
    for it in profile.iterations:
        if rate_hz is not None:
            gap = float(rng.exponential(1000.0 / rate_hz))
        else:
            gap = max(it[-1].gap_ms - old + float(sleep_ms), 0.0)  # type: ignore[arg-type]
        its.append((*it[:-1], replace(it[-1], gap_ms=gap)))
    return replace(profile, iterations=tuple(its))


def pods(mix: Sequence[AloneProfile], n: int) -> tuple[AloneProfile, ...]:
    """N pods filled from the mix in turn, named <workload>-<k>."""
    counts: dict[str, int] = {}
    out = []
    for i in range(n):
        p = mix[i % len(mix)]
        counts[p.workload] = counts.get(p.workload, 0) + 1
        out.append(replace(p, name=f"{p.workload}-{counts[p.workload]}"))
    return tuple(out)


def _meets(pred: Prediction, goal: Goal | None, slow: tuple[float, float, float]) -> tuple[bool, bool]:
    if goal is None:
        return True, True
    ok, sure = True, True
    if goal.slo_ms is not None:
        ok &= pred.p99_ms <= goal.slo_ms
        sure &= pred.p99_hi <= goal.slo_ms
    if goal.max_slow_share is not None:
        ok &= slow[0] <= goal.max_slow_share
        sure &= slow[2] <= goal.max_slow_share
    return ok, sure and ok


def _past_goal(row: PodRow, goal: Goal | None) -> float:
    """How far a pod's prediction lies past its goal, as a ratio (> 1: missed; the larger of its p99 over its SLO
    and its slow share over the share allowed)."""
    if goal is None:
        return 0.0
    out = 0.0
    if goal.slo_ms is not None:
        out = max(out, row.p99_ms / goal.slo_ms)
    if goal.max_slow_share is not None:
        out = max(out, row.slow_share / goal.max_slow_share if goal.max_slow_share > 0 else
                  (math.inf if row.slow_share > 0 else 0.0))
    return out


def breaks_first(rows: Sequence[PodRow], mode: str, by_type: dict[str, Goal]) -> str:
    """Which goal breaks first under ``mode``: at the smallest N with a missed goal, the pod furthest past its
    goal, in words ("" where none is missed)."""
    missed = [r for r in rows if r.mode == mode and not r.meets]
    if not missed:
        return ""
    n = min(r.n for r in missed)
    worst = max((r for r in missed if r.n == n), key=lambda r: _past_goal(r, by_type.get(r.workload)))
    goal = by_type[worst.workload]
    what = []
    if goal.slo_ms is not None:
        what.append(f"p99 {worst.p99_ms:.2f} ms [{worst.p99_lo:.2f}, {worst.p99_hi:.2f}] against {goal.slo_ms:g} ms")
    if goal.max_slow_share is not None:
        what.append(f"{worst.slow_share:.1%} of its iterations slow against at most {goal.max_slow_share:.1%}")
    return f"{worst.workload}'s goal, at N = {n} ({worst.pod}: {'; '.join(what)})"


def predict_all(scenarios: Sequence[Scenario], gpu: GpuModel, *, replicates: int, seed: int = 0,
                workers: int | None = None, known: dict[int, list[ReplicateStats]] | None = None
                ) -> list[list[Prediction]]:
    """Each scenario's predictions, on every core this process may use (forked workers), else in turn.

    Why: a capacity question is 2 x 8 independent simulations, and the goal is an answer in <= 10 s on 2 cores;
    in turn they took 9.5 s for a three-type mix. The predictions do not depend on how they were scheduled:
    each replicate draws from its own seed alone (``engine.replicate_stats``), so the replicates are handed out in
    chunks, the costliest first (one scenario asked again with 39 replicates keeps every core busy), and
    ``known`` (the caller's memo, ``id(scenario)`` -> its replicates so far, updated here) spares re-simulating
    the replicates a scenario already has.
    """
    memo = known if known is not None else {}
    stats = [list(memo.get(id(sc), []))[:replicates] for sc in scenarios]
    tasks = _chunks(scenarios, [range(len(st), replicates) for st in stats], workers)
    for i, part in zip((i for i, _ in tasks), _run_chunks(scenarios, tasks, gpu, seed, workers), strict=True):
        stats[i].extend(part)
    for sc, st in zip(scenarios, stats, strict=True):
        memo[id(sc)] = st
    return [summarize(sc, st, gpu) for sc, st in zip(scenarios, stats, strict=True)]


def _cores(workers: int | None) -> int:
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return workers or cores


def _chunks(scenarios: Sequence[Scenario], todo: Sequence[range], workers: int | None) -> list[tuple[int, range]]:
    """(scenario index, replicates) tasks in scenario and replicate order: each scenario's replicates split so
    that every core gets a share of the largest scenarios (about two chunks per core of the costliest)."""
    cores = _cores(workers)
    tasks = []
    for i, reps in enumerate(todo):
        parts = min(len(reps), 2 * cores if len(scenarios[i].tenants) > 1 else 1)
        bounds = [round(k * len(reps) / parts) for k in range(parts + 1)] if parts else []
        tasks += [(i, reps[a:b]) for a, b in itertools.pairwise(bounds)]
    return tasks


_FORKED: dict[str, Any] = {}  # a worker's scenarios, GPU model and seed, inherited at its fork (never pickled)


def _inherit(scenarios: Sequence[Scenario], gpu: GpuModel, seed: int) -> None:
    _FORKED.update(scenarios=scenarios, gpu=gpu, seed=seed)


def _chunk_stats(i: int, reps: range) -> list[ReplicateStats]:
    return replicate_stats(_FORKED["scenarios"][i], _FORKED["gpu"], _FORKED["seed"], reps)


def _run_chunks(scenarios: Sequence[Scenario], tasks: Sequence[tuple[int, range]], gpu: GpuModel, seed: int,
                workers: int | None) -> list[list[ReplicateStats]]:
    """Each task's replicate statistics, in task order (forked workers where more than one core and task).

    The workers inherit the scenarios at their fork (the pool's initializer), so a task sends two numbers, not its
    scenario: pickling the matrix mix's scenario and GPU model takes 0.06 s, once per chunk.
    """
    n_workers = min(len(tasks), _cores(workers))
    if n_workers <= 1 or "fork" not in multiprocessing.get_all_start_methods():
        return [replicate_stats(scenarios[i], gpu, seed, reps) for i, reps in tasks]
    loops = compiled_loops()
    if loops is not None:  # loaded before the fork, the workers inherit the compiled loops
        loops.warm()
    with ProcessPoolExecutor(n_workers, mp_context=multiprocessing.get_context("fork"), initializer=_inherit,
                             initargs=(scenarios, gpu, seed)) as pool:
        costliest_first = sorted(range(len(tasks)), key=lambda k: -len(scenarios[tasks[k][0]].tenants))
        futures = {k: pool.submit(_chunk_stats, *tasks[k]) for k in costliest_first}
        return [futures[k].result() for k in range(len(tasks))]


def _unsettled(preds: Sequence[Prediction], by_type: dict[str, Goal]) -> bool:
    """Whether a goal of this scenario lies inside a wall prediction's interval (neither surely met nor surely missed)."""
    for pred in preds:
        goal = by_type.get(pred.workload)
        if pred.metric != "wall" or goal is None:
            continue
        if goal.slo_ms is not None and pred.p99_lo <= goal.slo_ms < pred.p99_hi:
            return True
        if goal.max_slow_share is not None and pred.share_lo <= goal.max_slow_share < pred.share_hi:
            return True
    return False


def _all_met(preds: Sequence[Prediction], by_type: dict[str, Goal]) -> bool:
    return all(_meets(p, by_type.get(p.workload), (p.share_above, p.share_lo, p.share_hi))[0]
               for p in preds if p.metric == "wall")


def settle(plan: Sequence[tuple[str, int, Scenario]], predicted: list[list[Prediction]], by_type: dict[str, Goal],
           gpu: GpuModel, *, replicates: int, seed: int, workers: int | None,
           known: dict[int, list[ReplicateStats]] | None = None) -> None:
    """Predict again, with ``replicates``, the scenarios the answer turns on; ``predicted`` is updated in place.

    Why: the largest N is decided at the first N of a mode that fails. Where a goal lies inside that N's
    interval, the point is a median of few replicates of a spread-out p99, and which side of the goal it falls
    is chance. Walking each mode upwards, the first scenario whose interval holds a goal is asked again with as
    many replicates as a prediction interval needs; if it now meets its goals the walk goes on.
    """
    done: set[int] = set()
    while True:
        todo = []
        for mode in OVERLAYS:
            for i, (m, _n, _sc) in enumerate(plan):
                if m != mode:
                    continue
                if i not in done and _unsettled(predicted[i], by_type):
                    todo.append(i)
                    break
                if not _all_met(predicted[i], by_type):
                    break
        if not todo:
            return
        # with ``known`` (capacity's memo) the first replicates are not simulated again
        again = predict_all([plan[i][2] for i in todo], gpu, replicates=replicates, seed=seed, workers=workers,
                            known=known)
        for i, preds in zip(todo, again, strict=True):
            predicted[i] = preds
            done.add(i)


def capacity(mix: Sequence[AloneProfile], goals: Sequence[Goal], gpu: GpuModel, *, max_n: int = MAX_N,
             replicates: int = CAPACITY_REPLICATES, iterations: int = CAPACITY_ITERATIONS,
             seed: int = 0, workers: int | None = None) -> CapacityAnswer:
    """For N = 1..max_n under time-slicing and MPS: every pod's predictions and whether the goals hold."""
    if not mix:
        raise SpecError("the mix needs at least one tenant type")
    if not 1 <= max_n <= 16:
        raise SpecError(f"max_n must be in 1..16, got {max_n}")
    by_type = {g.workload: g for g in goals}
    plan: list[tuple[str, int, Scenario]] = []
    modes = tuple(m for m in OVERLAYS if m != "timeslice" or gpu.has_probe)  # MPS needs no probe
    for mode in modes:
        for n in range(1, max_n + 1):
            group = pods(mix, n)
            # one pod alone: its own GPU (as its alone run), time-slicing without a neighbour; under MPS without a
            # probe, MPS without a neighbour, the same (the fluid model alone is the tenant's own run)
            sharing = ("timeslice" if gpu.has_probe else "mps") if mode == "timeslice" or n == 1 else "mps-limited"
            cap = 100.0 / n
            group = tuple(replace(p, thread_pct=cap) for p in group) if sharing == "mps-limited" else group
            thresholds = {p.name: by_type[p.workload].slo_ms for p in group
                          if p.workload in by_type and by_type[p.workload].slo_ms is not None}
            plan.append((mode, n, Scenario(f"{mode}-n{n}", group, (iterations,) * n, sharing,  # type: ignore[arg-type]
                                           thresholds)))
    known: dict[int, list[ReplicateStats]] = {}
    predicted = predict_all([sc for _, _, sc in plan], gpu, replicates=replicates, seed=seed, workers=workers,
                            known=known)
    settle(plan, predicted, by_type, gpu, replicates=max(replicates, SETTLE_REPLICATES), seed=seed, workers=workers,
           known=known)
    rows: list[PodRow] = []
    largest: dict[str, int] = {}
    failed: dict[str, bool] = {}
    for (mode, n, _), preds in zip(plan, predicted, strict=True):
        all_ok = True
        for pred in preds:
            if pred.metric != "wall":
                continue
            goal = by_type.get(pred.workload)
            slow = (pred.share_above, pred.share_lo, pred.share_hi)
            ok, sure = _meets(pred, goal, slow)
            all_ok &= ok
            rows.append(PodRow(n, mode, pred.tenant, pred.workload, pred.p50_ms, pred.p50_lo, pred.p50_hi,
                               pred.p99_ms, pred.p99_lo, pred.p99_hi, *slow, ok, sure, pred.phase))
        if all_ok and not failed.get(mode, False):
            largest[mode] = n
        failed[mode] = failed.get(mode, False) or not all_ok
    for mode in modes:
        largest.setdefault(mode, 0)
    answer = CapacityAnswer(tuple(p.workload for p in mix), tuple(goals), tuple(rows), largest, gpu.multi_rule,
                            breaks_first={m: breaks_first(rows, m, by_type) for m in modes})
    return replace(answer, configmap=device_plugin_configmap(answer.best_mode, answer.largest[answer.best_mode])
                   if answer.feasible else "")


def device_plugin_configmap(mode: str, replicas: int, manifests: Path = MANIFESTS) -> str:
    """The device plugin's ConfigMap for ``replicas`` pods per GPU: the committed overlay's, replicas changed."""
    if mode not in OVERLAYS:
        raise SpecError(f"unknown sharing mode {mode!r}; choose one of {', '.join(OVERLAYS)}")
    if not 1 <= replicas <= 64:
        raise SpecError(f"replicas must be in 1..64, got {replicas}")
    text = (manifests / OVERLAYS[mode] / CONFIG_FILES[mode]).read_text()
    new, count = re.subn(r"(\n\s+replicas: )\d+", rf"\g<1>{replicas}", text)
    if count != 1:
        raise SpecError(f"{OVERLAYS[mode]}/{CONFIG_FILES[mode]} does not hold exactly one replicas: line")
    # the overlay's comment states its own count ("4 clients per physical GPU, each limited to 1/4"): it follows
    new = re.sub(r"\b\d+ clients per physical GPU", f"{replicas} clients per physical GPU", new)
    return re.sub(r"\b1/\d+ of the SMs", f"1/{replicas} of the SMs", new)


def profiles_of_run(run_dir: Any) -> list[AloneProfile]:
    """One alone profile per workload of a run (its first baseline of each), the mix's tenant types
    (``plan.inputs.mix_of`` on the run loaded once)."""
    return mix_of(load_plan_input(run_dir, gpu=False))


SHOWN_MAX_N = 4  # the report's section and the lesson's exercise: the same small question ...
SHOWN_REPLICATES = CAPACITY_REPLICATES  # ... answered as `kts plan --capacity` does (the article's FFT at N = 2
# sits near its 1 ms goal; the report and the CLI must not differ)
DEFAULT_SLOW_SHARE = 0.05  # without a user's SLO: at most 5 % of iterations slower than the tenant's alone p99


def capacity_of_run(run_dir: Any, *, slo_ms: dict[str, float] | None = None, max_slow_share: float | None = None,
                    max_n: int = SHOWN_MAX_N, replicates: int = SHOWN_REPLICATES) -> CapacityAnswer:
    """The capacity question for a run's own workloads, as the report and the lesson ask it (one function, so
    the two cannot differ): the committed probe of the run's GPU, the run's alone baselines, the given goals
    (default: at most 5 % of iterations slower than the alone p99)."""

    inp = load_plan_input(run_dir)
    if inp.gpu is None or not inp.gpu.has_probe:  # the report and the lesson ask both modes: the probe's GPUs only
        who = inp.gpu_name or "the run's GPU"
        raise RunError(f"no time-slice probe for {who}; the capacity question asks time-slicing too "
                       "(kts plan --capacity answers MPS alone)")
    mix = mix_of(inp)
    share = max_slow_share if max_slow_share is not None or slo_ms else DEFAULT_SLOW_SHARE
    goals = parse_goals(slo_ms, share, [p.workload for p in mix])
    return capacity(mix, goals, inp.gpu, max_n=max_n, replicates=replicates)  # type: ignore[arg-type]


def capacity_frame(answer: CapacityAnswer) -> Any:
    """The answer's rows as a table (N, mode, pod, p50/p99 with intervals, slow share, goal)."""

    return pd.DataFrame([{"N": r.n, "mode": r.mode, "pod": r.pod,
                          "p50 ms [PI]": f"{r.p50_ms:.2f} [{r.p50_lo:.2f}, {r.p50_hi:.2f}]",
                          "p99 ms [PI]": f"{r.p99_ms:.2f} [{r.p99_lo:.2f}, {r.p99_hi:.2f}]",
                          "slow share [PI]": f"{r.slow_share:.1%} [{r.slow_lo:.1%}, {r.slow_hi:.1%}]",
                          "goal": "met" if r.meets and r.sure else "met (interval crosses)" if r.meets else "missed"}
                         for r in answer.rows])
