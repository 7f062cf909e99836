"""blocks=auto in the run wing (issue 52): when a warm session looks, which blocks it leaves out, the budget."""

from __future__ import annotations

import json

import pytest

from kts_helpers.run import looks as L
from kts_helpers.run.backends import autoblocks as AB
from kts_helpers.run.spec import ScenarioSpec


class _Run:
    """What AutoBlocks writes: its looks and the skipped blocks' records."""

    def __init__(self) -> None:
        self.looks: list[dict] = []
        self.records: dict[str, dict] = {}

    def record_look(self, look: dict) -> None:
        json.dumps(look)  # what the manifest stores must be JSON
        self.looks.append(look)

    def record_scenario(self, name: str, info: dict) -> None:
        self.records[name] = info


def _blocks(b: int) -> list[ScenarioSpec]:
    out = []
    for k in range(b + 1):
        out += [ScenarioSpec(f"baseline-{t}-r{k + 1}", "baseline", (), "timeslice", k) for t in ("a", "b")]
        if k < b:
            out.append(ScenarioSpec(f"shared-r{k + 1}", "shared", (), "timeslice", k))
    return out + [ScenarioSpec("control-a-absent", "control", (), "timeslice", b)]


def _drive(judge, clock, per_block_s: float = 1.0, setup_s: float = 10.0):
    """Runs the warm session's loop over 24 planned blocks with a fake clock; returns (ran, run)."""
    run = _Run()
    clock["t"] = 0.0
    auto = AB.AutoBlocks(run, "timeslice", {"looks": list(L.block_looks())}, judge, "local", progress=False)
    clock["t"] = setup_s
    group, ran = _blocks(24), []
    for k, s in enumerate(group):
        if auto.skips(s):
            auto.skip(s)
            continue
        clock["t"] += per_block_s / 3
        ran.append(s.name)
        auto.after(s, group[k + 1] if k + 1 < len(group) else None)
    return ran, run


@pytest.fixture
def clock(monkeypatch):
    state = {"t": 0.0}
    monkeypatch.setattr(AB.time, "monotonic", lambda: state["t"])
    return state


def test_a_mode_stops_at_the_first_look_where_every_verdict_decided(clock) -> None:
    asked = []

    def judge(run, mode, blocks, schedule):
        asked.append((blocks, schedule))
        return L.BlockLook(blocks, 0.01, 8 if blocks >= 12 else 6, 8)

    ran, run = _drive(judge, clock, per_block_s=1.0, setup_s=100.0)
    assert [b for b, _ in asked] == [8, 12]
    assert ran[-3:] == ["baseline-a-r13", "baseline-b-r13", "control-a-absent"]  # the control still runs
    assert "shared-r13" in run.records and run.records["shared-r13"]["status"] == "skipped"
    assert "every verdict decided at 12" in run.records["shared-r13"]["skipped"]
    assert [lk["stop"] for lk in run.looks] == [False, True] and run.looks[0]["decided"] == 6


def test_the_budget_fixes_the_reachable_looks_at_the_first_and_ends_the_run_there(clock) -> None:
    """The first look took 10 s of set-up and 8 s of blocks: 1.5 x 18 = 27 s reaches 12 and 16 blocks (4 s each
    4 blocks), not 20; the judge is told so, and the run stops at 16 undecided."""
    schedules = []

    def judge(run, mode, blocks, schedule):
        schedules.append(schedule)
        return L.BlockLook(blocks, 0.01, 3, 8)

    ran, run = _drive(judge, clock, per_block_s=1.0, setup_s=10.0)
    assert schedules[0] == (8, 12, 16) and all(s == (8, 12, 16) for s in schedules)
    assert [lk["blocks"] for lk in run.looks] == [8, 12, 16] and run.looks[-1]["stop"]
    assert "the last look the budget reaches (16" in run.looks[-1]["why"]
    assert "shared-r16" in ran and "shared-r17" not in ran
    assert run.looks[0]["schedule"] == [8, 12, 16]


def test_a_first_look_that_takes_time_to_read_still_goes_on_to_the_looks_the_budget_reaches(clock) -> None:
    """Two H100 runs (the real-model mix, and a GPT-2 + ViT mix under MPS) fixed their looks at (8, 12), then stopped
    at 8 undecided: the budget check took the first look's whole time (set-up included) over 8 blocks as the pace,
    which projects the next look to exactly 1.5x the first, so any reading time at all ended the run. Here the
    set-up is 80 s, a block 20 s, the reading 3 s: 12 blocks are reachable (333 s of 380) and must run."""

    def judge(run, mode, blocks, schedule):
        clock["t"] += 3.0  # reading the verdicts takes time on a real host
        return L.BlockLook(blocks, 0.01, 7, 8)

    ran, run = _drive(judge, clock, per_block_s=20.0, setup_s=80.0)
    assert run.looks[0]["schedule"] == [8, 12]
    assert [lk["blocks"] for lk in run.looks] == [8, 12] and not run.looks[0]["stop"]
    assert "shared-r12" in ran and "shared-r13" not in ran
    assert "the last look the budget reaches (12" in run.looks[-1]["why"]


def test_without_a_judge_the_run_takes_its_budget(clock) -> None:
    ran, run = _drive(None, clock, per_block_s=1.0, setup_s=100.0)
    assert [lk["blocks"] for lk in run.looks] == [8, 12, 16, 20, 24] and run.looks[0]["words"] == "no judge here"
    assert "shared-r24" in ran


def test_reachable_looks() -> None:
    sched = L.block_looks()
    assert L.reachable(sched, 100.0, 100.0, 10.0) == (8, 12)  # 4 more blocks: 140 s; 8 more: 180 s > 150
    assert L.reachable(sched, 100.0, 100.0, 1.0) == sched
    assert L.reachable(sched, 100.0, 100.0, 20.0) == (8,)
