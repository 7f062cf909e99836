"""Interim looks: the verdict read while a shared scenario runs, so a tenant that has decided stops timing.

Why: at the article's 800 iterations the FFT's wall verdict decides in about 86 % of runs of its mixture
(``coverage.decisions``); an undecided tenant needs more shared iterations, a decided one none. With
``shared_max_factor`` > 1 a shared tenant pads at each look (n, 1.5 n, ... below the maximum: its load stays on)
while the local backend asks this judge, and stops when every phase's verdict has decided.

The design is Haybittle-Peto's: an interim look decides only at ``INTERIM_CONFIDENCE`` (99.8 %), and a tenant
that reaches the maximum is read as any fixed design of that size, at the report's 95 %. The interim looks
spend almost nothing of the error rate, so the report needs no other level. ``design_decisions`` measures the
whole design's false alarms and power on the coverage grid's generators (``make bench``:
``bench/results/sequential.md``), next to a design whose alone series grows in step (not built: it says what
growing the alone side would buy). The judge uses the analysis' own rules: the log parser, the co-running
window, baseline matching and ``verdict.decide``.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from kts_helpers.analyse.coverage import Generator
from kts_helpers.analyse.load import load_logs, load_run
from kts_helpers.analyse.rules import collided_of, match_baseline, runs_of
from kts_helpers.analyse.verdict import (
    DEGRADED,
    FASTER,
    INCONCLUSIVE,
    decide,
    faster_readings,
    slower_readings,
)
from kts_helpers.run.corun import LookAnswer
from kts_helpers.run.looks import look_counts
from kts_helpers.run.runs import Run
from kts_helpers.run.spec import ScenarioSpec

INTERIM_CONFIDENCE = 0.998  # Haybittle-Peto: an interim look decides only on strong evidence


class VerdictJudge:
    """Reads one tenant's verdict from its first n shared iterations against its alone series."""

    def __init__(self, *, confidence: float = INTERIM_CONFIDENCE, metric: str = "wall") -> None:
        self.confidence = confidence
        self.column = f"{metric}_ms"
        self._alone: dict[Path, tuple[pd.DataFrame, float]] = {}

    def _baselines(self, run: Run) -> tuple[pd.DataFrame, float]:
        """The run's alone iterations and floor, read once (the baselines are complete before a shared scenario)."""
        if run.path not in self._alone:
            data = load_run(run)
            it = data.iterations
            self._alone[run.path] = (it[it["kind"] == "baseline"], data.floor_ms)
        return self._alone[run.path]

    def __call__(self, run: Run, scenario: ScenarioSpec, tenant: str, n: int) -> LookAnswer:
        alone, floor = self._baselines(run)
        frame, _ = load_logs([], [run.log_path(scenario.name, t) for t in scenario.tenant_names], floor_ms=floor)
        mine = frame[(frame["tenant"] == tenant) & frame["in_overlap"] & (frame["iteration"] < n)]
        if mine.empty:
            return LookAnswer(False, INCONCLUSIVE, f"no co-running iteration of {tenant} among its first {n}")
        workload = str(mine["workload"].iloc[0])
        readings = {}
        for phase, rows in mine.groupby("phase", sort=False):
            base = match_baseline(alone, tenant, workload, str(phase))
            v = decide(runs_of(rows, self.column), runs_of(base, self.column), confidence=self.confidence,
                       collided=collided_of(rows))
            readings[str(phase)] = v
        stop = all(v.decided for v in readings.values())
        words = "; ".join(f"{p}: {v.words}" for p, v in readings.items())
        return LookAnswer(stop, " / ".join(v.reading for v in readings.values()), words)


@dataclass(frozen=True)
class DesignDecisions:
    """How often one sequential design read each verdict on ``reps`` independent (alone, shared) pairs."""

    alone: str
    shared: str
    design: str  # "fixed n", "shared to f x n" (built), "both to f x n" (alone grows in step: not built)
    reps: int
    degraded: float  # a slowdown read ("degraded" or a small one)
    faster: float  # a speed-up read (large or small)
    no_change: float
    inconclusive: float
    mean_shared_n: float
    mean_alone_n: float
    seconds: float

    def to_dict(self) -> dict:
        return asdict(self)


def design_decisions(alone: Generator, shared: Generator, reps: int, *, n: int = 800, factor: float = 2.0,
                     grow_alone: bool = False, seed: int = 0,
                     interim: float = INTERIM_CONFIDENCE) -> DesignDecisions:
    """Run the looks design on simulated pairs: each look reads ``decide`` at ``interim`` and stops when it
    decides (the reading then at 95 %); at the maximum the reading is at 95 %. ``factor`` 1: the fixed design."""
    looks, top = look_counts(n, factor)
    rng = np.random.default_rng(seed)
    xa = alone.draw(rng, reps, top if grow_alone else n)
    # the live judge reads the neighbours' timestamps (``rules.collided_of``): so does the simulation, where the
    # shared generator has collisions to flag
    xs, hit = shared.flagged(rng, reps, top) if shared.flagged is not None else (shared.draw(rng, reps, top), None)
    said: list[str] = []
    ns: list[tuple[int, int]] = []
    t0 = time.perf_counter()
    steps = (*looks, top) if factor > 1 else (n,)
    for i in range(reps):
        for k in steps:
            m = k if grow_alone else n
            flags = [hit[i][:k]] if hit is not None else None
            if k == steps[-1] or decide([xs[i][:k]], [xa[i][:m]], confidence=interim, collided=flags).decided:
                said.append(decide([xs[i][:k]], [xa[i][:m]], collided=flags).reading)
                ns.append((k, m))
                break
    counts = {w: sum(r in group for r in said) / reps
              for w, group in ((DEGRADED, slower_readings()), (FASTER, faster_readings()), (INCONCLUSIVE, (INCONCLUSIVE,)))}
    name = (f"fixed {n}" if factor <= 1 else f"{'both' if grow_alone else 'shared'} to {top} (looks "
            f"{', '.join(map(str, looks))})")
    return DesignDecisions(alone.name, shared.name, name, reps, counts[DEGRADED], counts[FASTER],
                           1 - sum(counts.values()), counts[INCONCLUSIVE], float(np.mean([a for a, _ in ns])),
                           float(np.mean([b for _, b in ns])), round(time.perf_counter() - t0, 1))


def designs_markdown(rows: list[tuple[str, DesignDecisions]]) -> str:
    """One row per (generator pair, design): what each design read, and how long the series grew."""
    lines = ["| measures | alone / shared | design | pairs | degraded | faster | no change | inconclusive | "
             "mean n shared / alone |", "|---|---|---|---|---|---|---|---|---|"]
    for kind, d in rows:
        lines.append(f"| {kind} | {d.alone} / {d.shared} | {d.design} | {d.reps} | {d.degraded:.3f} | "
                     f"{d.faster:.3f} | {d.no_change:.3f} | {d.inconclusive:.3f} | "
                     f"{d.mean_shared_n:.0f} / {d.mean_alone_n:.0f} |")
    return "\n".join(lines)
