"""Blocks until the answer is known: the warm design's looks, their alpha spending, and the judge that reads them.

Why: a fixed block count is wrong for most tenants. Real models drift 10-20 % between blocks with the host's speed
and needed 16-160 shared blocks to decide, GPU-bound kernels decide at 8, and a pair of warm blocks costs seconds.
With ``blocks=auto`` the warm design runs ``LOOKS[0]`` shared blocks, then reads every verdict of the sharing mode
(the report's own rule: ``intervals.add_all_intervals``, the family included) and adds ``LOOK_STEP`` more until each
has decided -- a slowdown, a speed-up or "no change" -- or the budget ends: ``LOOKS[-1]`` shared blocks, or
``BUDGET_FACTOR`` times the wall time the first look took (so a run never costs more than 1.5x today's fixed
8 blocks), whichever comes first.

Looking more than once would inflate the error rate if every look were read at the full level. Each look k is read
at a nominal one-sided level alpha_k instead (``nominal_alphas``): a group-sequential design whose alpha spending
function is alpha * t^rho at information fraction t = blocks / ``LOOKS[-1]`` (Kim and DeMets 1987's power family;
rho = 1 spends like Pocock's boundary, so an early look keeps most of its power), and whose boundaries are solved
exactly for a statistic whose looks correlate as sqrt(t_i / t_j) (the block regression's, to first order: each
look adds independent blocks). A verdict that decided at a look stays decided; a run that stops by its budget
before the last look has simply spent less. ``bench/bench_blocks.py`` measures the whole design's false alarms
and power over the looks on generated runs (docs/methods/blocks.md).
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np
import pandas as pd

from kts_helpers.analyse.intervals import add_all_intervals
from kts_helpers.analyse.load import load_run
from kts_helpers.analyse.summary import summarize_frame
from kts_helpers.run.looks import AUTO_LOOKS, AUTO_STEP, BlockLook, block_looks
from kts_helpers.run.manifest import RunManifest
from kts_helpers.run.runs import Run

LOOKS = AUTO_LOOKS
SPENDING_RHO = 1.0  # alpha(t) = alpha * t^rho


def looks(first: int = LOOKS[0], most: int = LOOKS[-1], step: int = AUTO_STEP) -> tuple[int, ...]:
    """The shared-block counts at which the verdicts are read (``run.looks.block_looks``)."""
    return block_looks(first, most, step)


@lru_cache(maxsize=64)
def nominal_alphas(schedule: tuple[int, ...], alpha: float, rho: float = SPENDING_RHO) -> tuple[float, ...]:
    """The one-sided level each look is read at: alpha_k with P(some look crosses | no effect) = alpha.

    Solved look by look: c_k such that P(Z_1 < c_1, ..., Z_k-1 < c_k-1, Z_k >= c_k) equals the spending function's
    increment alpha (t_k^rho - t_k-1^rho), Z_k = S_k / sqrt(n_k) with S a sum of independent increments (the
    looks correlate as sqrt(t_i / t_j)). The sub-density of S_k on the continuation region is carried on a grid
    and convolved with each increment's normal law (Armitage, McPherson and Rowe 1969): deterministic, where a
    quasi-Monte Carlo multivariate normal would give another level each call."""
    from scipy.optimize import brentq  # scipy: ~0.6 s to import, needed here only
    from scipy.stats import norm  # scipy: ~0.6 s to import, needed here only

    n = np.asarray(schedule, np.float64)
    t = n / n[-1]
    spend = alpha * t**rho
    h = 0.02  # grid step of S in units of one block's sd
    grid = np.arange(-10.0 * math.sqrt(n[-1]), 10.0 * math.sqrt(n[-1]) + h, h)
    dens: np.ndarray | None = None  # sub-density of S_k-1 on its continuation region
    out = []
    for k in range(len(n)):
        inc = spend[k] - (spend[k - 1] if k else 0.0)
        if dens is None:
            d = norm.pdf(grid, scale=math.sqrt(n[0]))
        else:
            sd = math.sqrt(n[k] - n[k - 1])
            kernel = norm.pdf(np.arange(-8 * sd, 8 * sd + h, h), scale=sd) * h
            d = np.convolve(dens, kernel, mode="same")

        def beyond(c: float, d: np.ndarray = d, k: int = k) -> float:
            return float(np.sum(d[grid >= c * math.sqrt(n[k])]) * h)

        c = brentq(lambda c, inc=inc: beyond(c) - inc, 0.0, 10.0, xtol=1e-6)
        out.append(float(norm.sf(c)))
        dens = np.where(grid < c * math.sqrt(n[k]), d, 0.0)
    return tuple(out)


def confidence_at(schedule: tuple[int, ...], blocks: int, confidence: float = 0.95) -> float:
    """The two-sided confidence a verdict is read at after ``blocks`` shared blocks of ``schedule``: 1 - 2 alpha_k
    (each direction at alpha_k); the fixed level where ``blocks`` is no look of the schedule."""
    if blocks not in schedule:
        return confidence
    a = nominal_alphas(tuple(schedule), (1 - confidence) / 2)[schedule.index(blocks)]
    return 1 - 2 * a


def restrict(frame: pd.DataFrame, shared_blocks: int) -> pd.DataFrame:
    """The iterations a look after ``shared_blocks`` shared blocks saw: shared blocks r1..rB and the alone rounds
    r1..rB+1 around them (``repeat`` counts from 0); the idle-neighbour control, which runs after every block, not."""
    kind = frame["kind"].to_numpy()
    rep = frame["repeat"].to_numpy()
    keep = ((kind == "shared") & (rep < shared_blocks)) | ((kind == "baseline") & (rep <= shared_blocks))
    return frame[keep]


def read_look(frame: pd.DataFrame, blocks: int, schedule: tuple[int, ...], confidence: float = 0.95,
              on_host: bool = False) -> BlockLook:
    """Every verdict of a sharing mode after ``blocks`` shared blocks, at the look's nominal level, as one family
    (``frame``: the mode's iterations so far, as ``load`` gives them)."""
    conf = confidence_at(schedule, blocks, confidence)
    out = read_table(frame, blocks, conf, on_host, verdicts_only=True)
    rows = out[(out["kind"] == "shared") & out["metric"].isin(("wall", "device")) & out["reading"].notna()]
    undecided = rows[rows["reading"].astype(str).str.startswith("inconclusive")]
    words = "; ".join(f"{r.tenant} ({r.phase}, {r.metric})" for r in undecided.itertuples())
    return BlockLook(blocks, (1 - conf) / 2, len(rows) - len(undecided), len(rows),
                     f"undecided: {words}" if words else "every verdict decided")


class BlocksJudge:
    """``blocks=auto``'s judge (``run.looks.BlockJudge``): the run wing calls it after each look's alone round with
    the sharing mode and the shared blocks done; it reads that mode's blocks so far (logs only: the session's
    telemetry is still being written) with the report's own rule at the look's level."""

    def __init__(self, confidence: float = 0.95) -> None:
        self.confidence = confidence

    def __call__(self, run: Run, mode: str, blocks: int) -> BlockLook:
        m = run.read()
        schedule = tuple(m.spec.resolved.get("blocks_auto", {}).get("looks") or LOOKS)
        data = load_run(run, telemetry=False)
        it = data.iterations
        return read_look(it[it["sharing"] == mode], blocks, schedule, mode_confidence(m, self.confidence),
                         on_host=not data.on_gpu)


def mode_confidence(manifest: RunManifest, confidence: float = 0.95) -> float:
    """Each sharing mode's share of the report's level: with M modes looked at apart, each at alpha / M (Bonferroni),
    so the report's family keeps alpha whatever each mode's looks did."""
    modes = max(len(manifest.spec.resolved.get("sharing") or ["timeslice"]), 1)
    return 1 - (1 - confidence) / modes


def run_confidence(manifest: RunManifest, confidence: float = 0.95) -> float:
    """The two-sided confidence a run's verdicts are read at: ``confidence`` for a fixed design; under
    ``blocks=auto`` the nominal level of the look that stopped each sharing mode (``mode_confidence``'s share), the
    strictest over the modes. Reading the last look only is what the stopping rule saw when every verdict had
    decided, and no more than the spending allows where the budget stopped the run (the last look's region is
    inside the union of the looks')."""
    auto = manifest.spec.resolved.get("blocks_auto")
    if not auto:
        return confidence
    schedule = tuple(int(b) for b in auto["looks"])
    per_mode = mode_confidence(manifest, confidence)
    looks = manifest.looks
    out = per_mode
    for mode in manifest.spec.resolved.get("sharing") or ["timeslice"]:
        mine = [lk for lk in looks if lk.get("sharing") == mode]
        last = int(mine[-1]["blocks"]) if mine else _shared_blocks_run(manifest, mode)
        out = max(out, confidence_at(schedule, last, per_mode) if last in schedule else per_mode)
    return out


def _shared_blocks_run(manifest: RunManifest, mode: str) -> int:
    """How many of a mode's shared blocks ran (a run whose looks were never recorded)."""
    return sum(1 for s in manifest.scenarios if s.kind == "shared" and s.sharing == mode
               and manifest.record(s.name) is not None and manifest.record(s.name).status == "complete")


def read_table(frame: pd.DataFrame, blocks: int, confidence: float, on_host: bool = False,
               verdicts_only: bool = False) -> pd.DataFrame:
    """The summary rows with intervals and verdicts of the first ``blocks`` shared blocks, read at ``confidence``:
    the report's own computation (``intervals.add_all_intervals``) on what the look saw."""
    seen = restrict(frame, blocks)
    table = pd.concat([summarize_frame(seen, m) for m in ("wall", "device")], ignore_index=True)
    return add_all_intervals(table, seen, confidence=confidence, on_host=on_host, verdicts_only=verdicts_only)


def alpha_at(blocks: int, schedule: tuple[int, ...], confidence: float = 0.95) -> float:
    """The nominal one-sided level of the look at ``blocks`` (``math.nan`` where it is none)."""
    return (1 - confidence_at(schedule, blocks, confidence)) / 2 if blocks in schedule else math.nan
