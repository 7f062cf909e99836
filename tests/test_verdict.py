"""The verdict rule (analyse.verdict): one reading per tenant and clock, each rule checked where it decides."""

from __future__ import annotations

import math
from dataclasses import FrozenInstanceError
from pathlib import Path

import numpy as np
import pytest

from kts_helpers.analyse import coverage as C
from kts_helpers.analyse import rules
from kts_helpers.analyse import verdict as V

REPO = Path(__file__).resolve().parents[1]


def _pair(alone: C.Generator, shared: C.Generator, n: int, seed: int) -> tuple[list[np.ndarray], list[np.ndarray]]:
    rng = np.random.default_rng(seed)
    return [shared.draw(rng, 1, n)[0]], [alone.draw(rng, 1, n)[0]]


def test_readings_are_exactly_four_words() -> None:
    assert V.readings() == ("degraded", "faster when shared", "no change within ±10 %", "inconclusive")
    assert V.no_change(0.05) == "no change within ±5 %"
    sh, al = _pair(C.lognormal(), C.lognormal(scale=1.5), 800, 1)
    v = V.decide(sh, al)
    assert v.reading in V.readings() and v.decided
    with pytest.raises(FrozenInstanceError):
        v.reading = "x"  # type: ignore[misc]


def test_two_sided_minimum_of_co_running_samples() -> None:
    """0.99^n < 0.025 first at n = 368: the two-sided 95 % interval's upper bound needs that many."""
    assert rules.min_corunning_samples() == rules.MIN_CORUNNING == 368
    assert 0.99**367 > 0.025 > 0.99**368
    sh, al = _pair(C.lognormal(), C.lognormal(scale=3.0), 367, 2)
    v = V.decide(sh, al)
    assert v.reading == "inconclusive" and "367 < 368" in v.missing and v.iterations_needed == 368


def test_degraded_needs_only_the_lower_side() -> None:
    """Rule 2, DF: a shared p99 clearly above, with an open upper side, is "degraded" from its lower bound."""
    rng = np.random.default_rng(3)
    al = [C.lognormal().draw(rng, 1, 2000)[0]]
    sh = [C.lognormal(0.9, scale=1.6).draw(rng, 1, 800)[0]]  # drifting shared series: no upper bound at 800
    v = V.decide(sh, al)
    assert math.isinf(v.df.hi) and v.df.lo > 1
    assert v.reading == "degraded" and "shared p99 upper" in v.open_sides and "lower bound" in v.rule


def test_faster_when_shared() -> None:
    sh, al = _pair(C.lognormal(), C.lognormal(scale=0.8), 2000, 4)
    v = V.decide(sh, al)
    assert v.reading == "faster when shared" and v.df.hi < 1


def test_no_change_only_inside_the_margin() -> None:
    """Rule 3: equal series read "no change within ±10 %" only where DF's whole interval lies in [0.9, 1.1]."""
    sh, al = _pair(C.lognormal(), C.lognormal(), 5000, 5)
    v = V.decide(sh, al)
    assert v.df.lo >= 0.9 and v.df.hi <= 1.1
    assert v.reading == "no change within ±10 %"
    narrow = V.decide(sh, al, margin=0.01)  # the same data, a margin its interval does not fit: undecided
    assert narrow.reading == "inconclusive" and narrow.iterations_needed and narrow.iterations_needed > 5000


def test_article_mixture_is_degraded_by_its_tail() -> None:
    """Rule 2, exceedance: 1.7 % collisions put the shared tail beyond the alone p99 far more often."""
    sh, al = _pair(C.lognormal(), C.collisions("random"), 800, 6)
    v = V.decide(sh, al)
    ex = v.exceedance
    assert ex is not None and ex.p_more <= 0.025 and v.reading == "degraded"
    assert ex.shared.count > ex.alone.count and ex.ratio > 1
    assert 0 <= ex.alone.lo <= ex.alone.estimate <= ex.alone.hi <= 1


def test_slo_threshold() -> None:
    sh, al = _pair(C.lognormal(), C.collisions("random"), 800, 7)
    ex = V.exceedance(sh, al, slo_ms=1.0)
    assert ex.threshold_ms == 1.0 and ex.source == "the SLO" and len(ex.steps) == 1
    assert ex.shared.count == int((sh[0] > 1.0).sum()) and ex.alone.count == int((al[0] > 1.0).sum())


def test_the_article_reference_reads_fft_wall_degraded_and_device_not() -> None:
    from kts_helpers.analyse.load import load_run

    it = load_run(REPO / "data" / "reference" / "h200-2026-11-30-article").iterations
    out = {}
    for clock in ("wall", "device"):
        groups = {(meta["kind"], meta["tenant"]): runs for meta, runs in rules.series_groups(it, clock)}
        out[clock] = V.decide(groups[("shared", "fft")], groups[("baseline", "fft")])
        print(clock, out[clock].words)
    assert out["wall"].reading == "degraded"
    assert out["device"].reading != "degraded"
