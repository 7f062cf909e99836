"""The verdict on generated warm-design runs: many short blocks, drift with time structure (issue 43).

Why: the block-paired tests (``blocks``) are only as good as the drift they were tried against. Here a tenant's run
is drawn as the warm design runs it -- 9 alone blocks alternating with 8 shared ones, each of 100-300 iterations
(``Warm``) -- with GPU-like samples (``gpu_block``: an AR(1) lognormal bulk, bursts of slow iterations, OS
hiccups) and a drift between blocks of each shape ``driftgrid.levels`` knows (independent, linear, OU, AR(1), step,
bursts, a tail width that moves while the median holds), sd 2-15 %. Each cell counts what one verdict read, or
what a report of several tenants x two clocks read as one family (``verdict.family``). One-block logs with the
neighbours' timestamps (``one_block_collisions``) try the same-moment contrast: 1-2 % of launches delayed by up to
a few ms, n = 800. ``bench/bench_blocks.py`` runs the grid; tests/test_blocks.py a small version.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np

from kts_helpers.analyse import driftgrid as G
from kts_helpers.analyse import verdict as V

BULK_SD = 0.04  # the bulk's log-sd within a block (a GPU step's jitter)
BULK_PHI = 0.5  # its lag-1 autocorrelation
BURST_RATE = 0.004  # per iteration, the chance a burst of slow iterations starts ...
BURST_LEN = (3, 10)  # ... this many iterations long ...
BURST_FACTOR = (1.3, 2.0)  # ... each this much slower
HICCUP_RATE, HICCUP_FACTOR = 0.001, (5.0, 20.0)


@dataclass(frozen=True)
class Warm:
    """The design: alone blocks alternating with shared ones, each of ``size`` iterations (uniform)."""

    alone: int = 9
    shared: int = 8
    size: tuple[int, int] = (100, 300)

    @property
    def name(self) -> str:
        return f"{self.alone} alone / {self.shared} shared blocks of {self.size[0]}-{self.size[1]}"


def gpu_block(rng: np.random.Generator, n: int, median: float = 1.0) -> np.ndarray:
    """n GPU-like iteration times: AR(1) lognormal bulk, bursts of slow iterations, rare OS hiccups."""
    e = np.empty(n)
    e[0] = rng.normal(0.0, BULK_SD)
    inn = rng.normal(0.0, BULK_SD * math.sqrt(1 - BULK_PHI**2), n)
    for i in range(1, n):
        e[i] = BULK_PHI * e[i - 1] + inn[i]
    x = median * np.exp(e)
    for start in np.flatnonzero(rng.random(n) < BURST_RATE):
        length = int(rng.integers(*BURST_LEN))
        x[start:start + length] *= rng.uniform(*BURST_FACTOR)
    hic = rng.random(n) < HICCUP_RATE
    return np.where(hic, x * rng.uniform(*HICCUP_FACTOR, n), x)


def warm_pair(rng: np.random.Generator, design: Warm, shape: str, sd: float, *, effect: float = 1.0,
              tail_effect: float = 1.0) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """(shared blocks, alone blocks) of one tenant and clock. ``effect``: the shared blocks' median x this;
    ``tail_effect``: their log deviations above the median x this (a tail that sharing widens)."""
    lv, width = G.levels(rng, shape, sd, design.alone + design.shared)
    pa, ps = G.run_order(G.Design(design.alone, design.shared))

    def block(i: int, shared: bool) -> np.ndarray:
        x = gpu_block(rng, int(rng.integers(design.size[0], design.size[1] + 1)))
        x = G.shaped(x, float(lv[i]), float(width[i]))
        if shared and tail_effect != 1.0:
            med = float(np.median(x))
            x = np.where(x > med, med * (x / med) ** tail_effect, x)
        return x * effect if shared else x

    return [block(i, True) for i in ps], [block(i, False) for i in pa]


@dataclass(frozen=True)
class Row:
    """What ``reps`` verdicts (or reports) of one cell read: counts of each reading (reports: with at least one)."""

    measures: str
    shape: str
    sd: float
    tenants: int  # 1: one verdict; more: a report of tenants x 2 clocks
    effect: float
    reps: int
    degraded: int
    faster: int
    no_change: int
    inconclusive: int
    seconds: float

    def share(self, what: str) -> float:
        return getattr(self, what) / self.reps


def _tally(readings: list[str]) -> dict[str, int]:
    slower = sum(r in V.slower_readings() for r in readings)
    faster = sum(r in V.faster_readings() for r in readings)
    same = sum(r.startswith("no change") for r in readings)
    return {"degraded": slower, "faster": faster, "no_change": same,
            "inconclusive": len(readings) - slower - faster - same}


def cell(measures: str, shape: str, sd: float, reps: int, *, tenants: int = 1, effect: float = 1.0,
         design: Warm | None = None, seed: int = 0) -> Row:
    """``reps`` draws: one verdict (``tenants`` = 1) or a report of ``tenants`` x 2 clocks (one family), the first
    tenant's wall clock carrying ``effect`` (the others none). A report counts once per reading it holds."""
    design = design or Warm()
    rng = np.random.default_rng(seed)
    t0 = time.perf_counter()
    counts = dict.fromkeys(("degraded", "faster", "no_change", "inconclusive"), 0)
    for _ in range(reps):
        vs = []
        for k in range(tenants if tenants > 1 else 1):
            for clock in range(2 if tenants > 1 else 1):
                sh, al = warm_pair(rng, design, shape, sd, effect=effect if k == 0 and clock == 0 else 1.0)
                vs.append(V.decide(sh, al))
        vs = V.family(vs) if len(vs) > 1 else vs
        said = [v.reading for v in (vs[:1] if effect != 1.0 else vs)]  # power: the affected verdict's reading
        c = _tally(said)
        for key in counts:
            counts[key] += c[key] > 0
    return Row(measures, shape, sd, tenants, effect, reps, **counts, seconds=round(time.perf_counter() - t0, 1))


def one_block_collisions(reps: int, *, n: int = 800, share: float = 0.015, wait_ms: float = 2.4,
                         median_ms: float = 0.45, seed: int = 0, effect: bool = True) -> Row:
    """One alone and one shared block of n launches (foreign logs through ``summarize``), the neighbours'
    timestamps known: ``share`` of the shared launches delayed by U(0, wait_ms) and flagged, as many again flagged
    that met a neighbour at no cost (``effect`` False: flags only, no delay). The tenant is GPU-bound (``kind``)."""
    rng = np.random.default_rng(seed)
    t0 = time.perf_counter()
    said = []
    for _ in range(reps):
        al = gpu_block(rng, n, median_ms)
        sh = gpu_block(rng, n, median_ms) * math.exp(rng.normal(0.0, 0.02))
        hit = rng.random(n) < share
        met = hit | (rng.random(n) < share)
        if effect:
            sh = np.where(hit, sh + rng.uniform(0.0, wait_ms, n), sh)
        said.append(V.decide([sh], [al], collided=[met], kind="gpu").reading)
    return Row("one block, collisions" if effect else "one block, flags that cost nothing", "independent", 0.02, 1,
               1.0, reps, **_tally(said), seconds=round(time.perf_counter() - t0, 1))


def markdown(rows: list[Row]) -> str:
    lines = ["| measures | drift shape | drift sd | tenants | effect | runs | degraded (or small) | faster (or small) | "
             "no change | inconclusive |", "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        who = "one verdict" if r.tenants == 1 else f"report of {r.tenants} x 2 clocks"
        lines.append(f"| {r.measures} | {r.shape} | {100 * r.sd:g} % | {who} | x{r.effect:g} | {r.reps} | "
                     f"{r.share('degraded'):.3f} | {r.share('faster'):.3f} | {r.share('no_change'):.3f} | "
                     f"{r.share('inconclusive'):.3f} |")
    return "\n".join(lines)
