"""``blocks=auto`` inside one warm session: when to look, when the budget ends, and which blocks are left out.

Why its own module: the warm session (``backends.warm``) runs blocks; this decides how many. The spec plans the
most blocks ``blocks=auto`` may take (``run.looks.AUTO_LOOKS[-1]``), each the size of the first look's; after each
look's alone round the session's ``AutoBlocks`` asks the judge (``run.looks.BlockJudge``, built above the run
wing: ``analyse.blockseq.BlocksJudge``) whether every verdict of the sharing mode has decided, and checks the budget
(``run.looks.within_budget``: the next look must end inside 1.5x the first look's time). Once either says stop,
the mode's remaining blocks are recorded ``skipped`` with the reason -- they never ran, and the run is complete
without them -- and the session goes on to what follows them (the idle-neighbour control). Every look is recorded
in the manifest's ``looks`` list, so the report reads each verdict at the level of the look that stopped the run.
Standard library only (the runner works on a bare GPU host).
"""

from __future__ import annotations

import sys
import time
from typing import Any

from kts_helpers.run.backends.procs import record_outcome
from kts_helpers.run.looks import BlockJudge, budget_words, reachable, within_budget
from kts_helpers.run.runs import Run
from kts_helpers.run.spec import ScenarioSpec


class AutoBlocks:
    """One sharing mode's looks under ``blocks=auto`` (``auto``: the spec's ``blocks_auto``)."""

    def __init__(self, run: Run, mode: str, auto: dict[str, Any], judge: BlockJudge | None, backend: str,
                 progress: bool = True) -> None:
        self.run, self.mode, self.judge, self.backend, self.progress = run, mode, judge, backend, progress
        self.schedule = tuple(int(b) for b in auto["looks"])  # the most looks; cut to what the budget reaches
        self.t0 = time.monotonic()
        self.first_s: float | None = None
        self.t_first: float | None = None
        self.t_round1: float | None = None  # when the first alone round ended (the workers' set-up is before it)
        self.stopped_at: int | None = None
        self.why = ""
        if progress:
            print(f"kts: {mode}: {budget_words(self.schedule)}", file=sys.stderr, flush=True)

    def skips(self, scenario: ScenarioSpec) -> bool:
        """Whether a block of this mode comes after the look that stopped the run (a control block never does)."""
        if self.stopped_at is None or scenario.sharing != self.mode:
            return False
        return (scenario.kind == "shared" and scenario.repeat >= self.stopped_at) or (
            scenario.kind == "baseline" and scenario.repeat > self.stopped_at)

    def skip(self, scenario: ScenarioSpec) -> None:
        now = time.time_ns()
        record_outcome(self.run, scenario, self.backend, "skipped", now, [], "", {},
                       skipped=f"blocks=auto stopped after {self.stopped_at} shared blocks: {self.why}")

    def after(self, scenario: ScenarioSpec, following: ScenarioSpec | None) -> None:
        """After a block: at the end of an alone round that closes a look, read the look and decide."""
        if self.stopped_at is not None or scenario.kind != "baseline" or scenario.sharing != self.mode:
            return
        if following is not None and following.kind == "baseline" and following.repeat == scenario.repeat:
            return  # the round's other tenants still to run
        blocks = scenario.repeat  # alone round k + 1 closes k shared blocks
        if blocks == 0:
            self.t_round1 = time.monotonic()
        if blocks not in self.schedule:
            return
        before = time.monotonic()
        if blocks == self.schedule[0]:
            self.first_s, self.t_first = before - self.t0, before
            per_block = (before - (self.t_round1 or self.t0)) / max(blocks, 1)
            self.schedule = reachable(self.schedule, self.first_s, self.first_s, per_block)
        look = self.judge(self.run, self.mode, blocks, self.schedule) if self.judge is not None else None
        now = time.monotonic()
        elapsed = now - self.t0
        if look is not None and look.all_decided:
            stop, why = True, f"every verdict decided at {blocks} shared blocks"
        elif blocks >= self.schedule[-1]:
            stop, why = True, (f"the last look the budget reaches ({self.schedule[-1]} shared blocks, 1.5x the "
                               f"{self.first_s or elapsed:.0f} s the first look took)")
        elif blocks > self.schedule[0] and not within_budget(self.schedule, blocks, self.first_s or elapsed,
                                                             elapsed, before - (self.t_first or before),
                                                             now - before):
            # at the first look the schedule was just cut to what the budget reaches (``reachable``); asking
            # ``within_budget`` there too, with the first look's whole time (set-up included) as its pace, stopped
            # every run whose first reading took any time (two H100 runs stopped at 8 of a reachable 12)
            stop, why = True, (f"the next look would end past {1.5 * (self.first_s or elapsed):.0f} s, the budget "
                               f"(1.5x the {self.first_s or elapsed:.0f} s the first look took)")
        else:
            stop, why = False, ""
        self.run.record_look({
            "sharing": self.mode, "blocks": blocks, "schedule": list(self.schedule), "elapsed_s": round(elapsed, 3),
            "first_look_s": round(self.first_s, 3) if self.first_s is not None else None,
            "alpha": look.alpha if look else None, "decided": look.decided if look else None,
            "verdicts": look.verdicts if look else None, "words": look.words if look else "no judge here",
            "stop": stop, "why": why})
        if self.progress:
            said = f"{look.decided} of {look.verdicts} verdicts decided" if look else "no judge (analysis stack absent)"
            print(f"kts: {self.mode}: look at {blocks} shared blocks: {said}"
                  + (f"; stopping: {why}" if stop else f"; {self.schedule[self.schedule.index(blocks) + 1]} next"),
                  file=sys.stderr, flush=True)
        if stop:
            self.stopped_at, self.why = blocks, why
