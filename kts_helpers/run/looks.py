"""Where the looks fall: a shared tenant's interim looks (``shared_max_factor`` > 1) and ``blocks=auto``'s looks
over the warm design's blocks, in one place for spec, backends and tests.

Interim looks grow geometrically (n, 1.5 n, 2.25 n, ...) so each adds about as much evidence as the last; the judge
that reads them is ``analyse.sequential``, the worker's side ``workers/kts_worker.py`` (``Looks``). Block looks
come every ``AUTO_STEP`` shared blocks from the fixed design's 8 to ``AUTO_LOOKS[-1]``, inside a time budget; the
judge that reads them, and the levels it reads them at, are ``analyse.blockseq``'s.
Standard library only (the runner works on a bare GPU host).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

LOOK_GROWTH = 1.5


def look_counts(n: int, factor: float) -> tuple[tuple[int, ...], int]:
    """(interim looks, maximum) for a design of n iterations that may grow to ``factor`` times n."""
    top = math.ceil(n * factor)
    looks, k = [], float(n)
    while round(k) < top:
        looks.append(int(round(k)))
        k *= LOOK_GROWTH
    return tuple(looks), top


# -- blocks=auto: the warm design's looks over blocks (the judge that reads them: analyse.blockseq) -------------
AUTO_LOOKS = (8, 12, 16, 20, 24)  # shared blocks at each look: the first is the fixed design's 8
AUTO_STEP = 4
BUDGET_FACTOR = 1.5  # no look is begun whose projected end passes this times the first look's time


def block_looks(first: int = AUTO_LOOKS[0], most: int = AUTO_LOOKS[-1], step: int = AUTO_STEP) -> tuple[int, ...]:
    """The shared-block counts at which ``blocks=auto`` reads the verdicts."""
    out = list(range(first, most + 1, step))
    if out[-1] != most:
        out.append(most)
    return tuple(out)


def budget_words(schedule: tuple[int, ...], first_look_s: float | None = None) -> str:
    """The budget, as the progress line, the record and the report state it."""
    t = (f", or {BUDGET_FACTOR:g}x the {first_look_s:.0f} s the first {schedule[0]} took" if first_look_s else
         f", or {BUDGET_FACTOR:g}x the time the first {schedule[0]} take")
    return (f"blocks=auto: {schedule[0]} shared blocks, then {AUTO_STEP} more at a time until every verdict "
            f"decides, at most {schedule[-1]}{t}")


def within_budget(schedule: tuple[int, ...], blocks: int, first_look_s: float, elapsed_s: float,
                  since_first_s: float, look_s: float = 0.0) -> bool:
    """Whether the next look fits the budget: the time per shared block since the first look (before it, the first
    look's own) and one more reading of the verdicts (``look_s``, what the last one took) project its end inside
    ``BUDGET_FACTOR`` x the first look's time, all from the session's start."""
    nxt = next((b for b in schedule if b > blocks), None)
    if nxt is None:
        return False
    done_since = blocks - schedule[0]
    per_block = since_first_s / done_since if done_since > 0 else first_look_s / max(schedule[0], 1)
    return elapsed_s + per_block * (nxt - blocks) + look_s <= BUDGET_FACTOR * first_look_s + 1e-9


@dataclass(frozen=True)
class BlockLook:
    """What one look of ``blocks=auto`` read of a sharing mode: after how many shared blocks, at which nominal
    one-sided level, how many of the mode's verdicts had decided, and which had not."""

    blocks: int
    alpha: float
    decided: int
    verdicts: int
    words: str = ""

    @property
    def all_decided(self) -> bool:
        return self.verdicts > 0 and self.decided == self.verdicts


# block_judge(run, mode, blocks) -> BlockLook: built above the run wing (analyse.blockseq.BlocksJudge) and handed
# down; without one no look decides and the run takes its whole budget
BlockJudge = Callable[..., BlockLook]
