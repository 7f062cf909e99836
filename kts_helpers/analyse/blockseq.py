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
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import pandas as pd

from kts_helpers.analyse.intervals import add_all_intervals
from kts_helpers.analyse.summary import summarize_frame

LOOKS = (8, 12, 16, 20, 24)  # shared blocks at each look: the first is the fixed design's 8
LOOK_STEP = 4
SPENDING_RHO = 1.0  # alpha(t) = alpha * t^rho
BUDGET_FACTOR = 1.5  # the run stops adding blocks once the next look would end past this times the first look's time


def looks(first: int = LOOKS[0], most: int = LOOKS[-1], step: int = LOOK_STEP) -> tuple[int, ...]:
    """The shared-block counts at which the verdicts are read."""
    out = list(range(first, most + 1, step))
    if out[-1] != most:
        out.append(most)
    return tuple(out)


@lru_cache(maxsize=64)
def nominal_alphas(schedule: tuple[int, ...], alpha: float, rho: float = SPENDING_RHO) -> tuple[float, ...]:
    """The one-sided level each look is read at: alpha_k with P(some look crosses | no effect) = alpha.

    Solved look by look: c_k such that P(Z_1 < c_1, ..., Z_k-1 < c_k-1, Z_k >= c_k) equals the spending function's
    increment alpha (t_k^rho - t_k-1^rho), Z multivariate normal with corr(Z_i, Z_j) = sqrt(t_i / t_j)."""
    from scipy.optimize import brentq  # scipy: ~0.6 s to import, needed here only
    from scipy.stats import multivariate_normal, norm  # scipy: ~0.6 s to import, needed here only

    t = np.asarray(schedule, np.float64) / schedule[-1]
    cov = np.sqrt(np.minimum.outer(t, t) / np.maximum.outer(t, t))
    spend = alpha * t**rho
    bounds: list[float] = []
    for k in range(len(t)):
        inc = spend[k] - (spend[k - 1] if k else 0.0)
        if k == 0:
            bounds.append(float(norm.isf(inc)))
            continue
        below = (float(norm.cdf(bounds[0])) if k == 1 else
                 float(multivariate_normal(np.zeros(k), cov[:k, :k]).cdf(np.array(bounds))))
        law = multivariate_normal(np.zeros(k + 1), cov[:k + 1, :k + 1])

        def gap(c: float, below: float = below, law=law, inc: float = inc) -> float:
            return below - float(law.cdf(np.array([*bounds, c]))) - inc

        bounds.append(float(brentq(gap, 0.0, 10.0, xtol=1e-7)))
    return tuple(float(norm.sf(c)) for c in bounds)


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


@dataclass(frozen=True)
class Look:
    """What one look read: after how many shared blocks, at which level, and which verdicts had decided."""

    blocks: int
    alpha: float  # the one-sided nominal level of this look
    decided: int
    verdicts: int
    elapsed_s: float
    words: str = ""  # each undecided verdict, for the progress line and the record

    @property
    def all_decided(self) -> bool:
        return self.verdicts > 0 and self.decided == self.verdicts

    def to_dict(self) -> dict:
        return {"blocks": self.blocks, "alpha": self.alpha, "decided": self.decided, "verdicts": self.verdicts,
                "elapsed_s": round(self.elapsed_s, 3), "words": self.words}


def budget_words(schedule: tuple[int, ...], first_look_s: float | None = None) -> str:
    """The budget as the progress line and the report state it."""
    t = (f", or {BUDGET_FACTOR:g}x the {first_look_s:.0f} s the first look took" if first_look_s else
         f", or {BUDGET_FACTOR:g}x the time the first {schedule[0]} take")
    return (f"blocks=auto: {schedule[0]} shared blocks, then {LOOK_STEP} more at a time until every verdict decides, "
            f"at most {schedule[-1]}{t}")


def within_budget(schedule: tuple[int, ...], blocks: int, first_look_s: float, elapsed_s: float,
                  since_first_s: float) -> bool:
    """Whether the next look fits the budget: the time per block since the first look (or the first look's own
    per-block time) projects its end inside ``BUDGET_FACTOR`` x the first look's time."""
    nxt = next((b for b in schedule if b > blocks), None)
    if nxt is None:
        return False
    done_since = blocks - schedule[0]
    per_block = since_first_s / done_since if done_since > 0 else first_look_s / max(schedule[0], 1)
    return elapsed_s + per_block * (nxt - blocks) <= BUDGET_FACTOR * first_look_s + 1e-9


def read_look(frame: pd.DataFrame, blocks: int, schedule: tuple[int, ...], elapsed_s: float,
              confidence: float = 0.95, on_host: bool = False) -> Look:
    """Every verdict of a sharing mode after ``blocks`` shared blocks, at the look's nominal level, as one family
    (``frame``: the mode's iterations so far, as ``load`` gives them)."""
    conf = confidence_at(schedule, blocks, confidence)
    out = read_table(frame, blocks, conf, on_host)
    rows = out[(out["kind"] == "shared") & out["metric"].isin(("wall", "device")) & out["reading"].notna()]
    undecided = rows[rows["reading"].astype(str).str.startswith("inconclusive")]
    words = "; ".join(f"{r.tenant} ({r.phase}, {r.metric}) undecided" for r in undecided.itertuples())
    return Look(blocks, (1 - conf) / 2, len(rows) - len(undecided), len(rows), elapsed_s, words)


def read_table(frame: pd.DataFrame, blocks: int, confidence: float, on_host: bool = False) -> pd.DataFrame:
    """The summary rows with intervals and verdicts of the first ``blocks`` shared blocks, read at ``confidence``:
    the report's own computation (``intervals.add_all_intervals``) on what the look saw."""
    seen = restrict(frame, blocks)
    table = pd.concat([summarize_frame(seen, m) for m in ("wall", "device")], ignore_index=True)
    return add_all_intervals(table, seen, confidence=confidence, on_host=on_host)


def alpha_at(blocks: int, schedule: tuple[int, ...], confidence: float = 0.95) -> float:
    """The nominal one-sided level of the look at ``blocks`` (``math.nan`` where it is none)."""
    return (1 - confidence_at(schedule, blocks, confidence)) / 2 if blocks in schedule else math.nan
