"""Coverage of the 95 % intervals where the kit uses them, and four faults a coverage test must catch.

Series are log-AR(1) with a known truth (``analyse.coverage``); every interval goes through the kit's own
entry points (``stats``, ``rules.degradation``). This is the fast subset (a few hundred replications a
cell, fixed seeds); ``make bench`` runs the full grid with 1000 and writes bench/results/coverage.md.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from kts_helpers.analyse import coverage as C
from kts_helpers.analyse import rules
from kts_helpers.analyse import stats as S

REPS = 250


def _judge(cell: C.Cell) -> None:
    print(C.markdown([cell]).splitlines()[-1])
    assert cell.verdict in ("ok", "no bound"), C.markdown([cell])


@pytest.mark.parametrize("phi", C.GRID_PHI)
@pytest.mark.parametrize("n", C.GRID_N)
def test_p99_covers_at_the_kits_sizes(n: int, phi: float) -> None:
    cell = C.quantile_cell(0.99, n, phi, REPS, seed=7 * n + int(10 * phi))
    _judge(cell)
    assert cell.coverage >= C.TARGET[0]
    if n == 300:  # 0.99^300 > 0.025: no 95 % upper bound from 300 samples, by design, and it says so
        assert cell.unbounded == cell.reps and cell.verdict == "no bound"
    if n == 5000:
        assert cell.unbounded == 0


@pytest.mark.parametrize("n_alone, phi_alone, n_shared, phi_shared", [
    (800, 0.0, 800, 0.0), (800, 0.5, 800, 0.5), (5000, 0.8, 5000, 0.8), (300, 0.8, 300, 0.8),
    (5000, 0.8, 5000, 0.0), (5000, 0.0, 5000, 0.8), (800, 0.8, 800, 0.0),
])
def test_df_covers_with_alone_and_shared_alike_and_unlike(n_alone: int, phi_alone: float, n_shared: int,
                                                          phi_shared: float) -> None:
    cell = C.df_cell(n_alone, phi_alone, n_shared, phi_shared, REPS, seed=n_alone + int(100 * phi_alone + phi_shared))
    _judge(cell)
    assert cell.degraded <= 0.04 * cell.reps  # a true DF of 1 called "degraded" at most ~2.5 % (+ noise)


def test_other_statistics_cover() -> None:
    for cell in (C.quantile_cell(0.5, 800, 0.8, REPS, seed=1), C.quantile_cell(0.95, 5000, 0.5, REPS, seed=2),
                 C.jitter_cell(5000, 0.8, REPS, seed=3), C.throughput_cell(800, 0.8, REPS, seed=4),
                 C.repeats_cell(0.99, 3, 300, 0.0, 0.1, REPS, seed=5)):
        _judge(cell)


def test_the_percentile_bootstrap_misses_high_at_800() -> None:
    """Why the kit left it: its p99 upper bound cannot reach past the few largest values (the issue's table)."""
    cell = C.quantile_cell(0.99, 800, 0.8, 120, seed=3, method="stationary", n_resamples=1000)
    assert cell.coverage < 0.90 and cell.above > 2 * cell.below, C.markdown([cell])


# ---------------------------------------------------------------- faults that must not survive

def test_df_interval_carries_the_alone_sides_uncertainty() -> None:
    """Fault 1 (DF interval ignoring the baseline's uncertainty): a short, noisy alone series must widen DF,
    by at least the alone p99's own distance to its bounds, and DF must still cover."""
    rng = np.random.default_rng(11)
    d = rules.degradation([C.log_ar1(rng, 20_000, 0.0)], [C.log_ar1(rng, 1500, 0.5)], 0.99)
    al = d.alone
    assert al is not None and al.bounded and d.interval is not None and d.interval.bounded
    assert d.lo <= d.estimate * al.estimate / al.hi * (1 + 1e-12)
    assert d.hi >= d.estimate * al.estimate / al.lo * (1 - 1e-12)
    _judge(C.df_cell(1500, 0.5, 20_000, 0.0, 200, seed=12))


def test_df_interval_is_at_95_percent() -> None:
    """Fault 2 (DF computed at 90 %): the reported interval is the 95 % one, wider than the 90 % one."""
    rng = np.random.default_rng(13)
    sh, al = [C.log_ar1(rng, 5000, 0.3, scale=1.2)], [C.log_ar1(rng, 5000, 0.3)]
    d95, d90 = rules.degradation(sh, al), rules.degradation(sh, al, confidence=0.90)
    assert d95.interval is not None and d95.interval.confidence == 0.95
    assert d95.lo < d90.lo < d95.estimate < d90.hi < d95.hi
    for side in (d95.shared, d95.alone):
        assert side is not None and side.confidence == 0.95
    # and at the size where it matters, the coverage of the default is the 95 % one
    cell = C.df_cell(5000, 0.0, 5000, 0.0, 400, seed=14)
    assert cell.two_sided is not None and cell.two_sided >= 0.93, C.markdown([cell])


def test_autocorrelated_shared_side_is_not_treated_as_independent() -> None:
    """Fault 3 (shared side resampled i.i.d.): a strongly autocorrelated shared series has far fewer
    effective samples than n, its interval says so, and DF still covers."""
    rng = np.random.default_rng(15)
    d = rules.degradation([C.log_ar1(rng, 5000, 0.8)], [C.log_ar1(rng, 5000, 0.0)], 0.99)
    assert d.shared is not None and d.alone is not None
    assert d.shared.ess < 0.5 * 5000 < d.alone.ess
    cell = C.df_cell(5000, 0.0, 5000, 0.8, 300, seed=16)
    assert cell.two_sided is not None and cell.two_sided >= 0.92, C.markdown([cell])


def test_jitter_takes_both_quantiles_from_one_series() -> None:
    """Fault 4 (jitter's p99 and p50 from different resamples): jitter is that series' p99 over its p50, with
    the two quantiles' correlation; the bootstrap takes both from one resample, which is narrower when they
    move together."""
    rng = np.random.default_rng(17)
    x, other = C.log_ar1(rng, 4000, 0.5), C.log_ar1(rng, 4000, 0.5)
    iv = S.jitter_ci(x)
    p99, p50 = S.quantile_interval(x, 0.99), S.quantile_interval(x, 0.5)
    same = S.ratio_of(p99, p50, 0.95, rho=math.sqrt(0.5 * 0.01 / (0.99 * 0.5)))
    assert (iv.estimate, iv.lo, iv.hi) == pytest.approx((same.estimate, same.lo, same.hi), rel=1e-12)
    mixed = S.ratio_of(p99, S.quantile_interval(other, 0.5), 0.95)
    assert (iv.lo, iv.hi) != pytest.approx((mixed.lo, mixed.hi), rel=1e-3)
    _judge(C.jitter_cell(5000, 0.5, REPS, seed=18))
    # the bootstrap path: one resample for both quantiles, on a series whose level wanders (p50 and p99 co-move)
    y = C.log_ar1(rng, 3000, 0.97)
    one = S.jitter_ci(y, method="stationary", n_resamples=1000, seed=1)
    a = S.quantile_interval(y, 0.99, method="stationary", n_resamples=1000, seed=2)
    b = S.quantile_interval(y, 0.5, method="stationary", n_resamples=1000, seed=3)
    separate = math.log(a.hi / b.lo) - math.log(a.lo / b.hi)  # what independent resamples could at most span
    assert math.log(one.hi / one.lo) < 0.8 * separate


def test_readings_only_inside_the_tested_range() -> None:
    rng = np.random.default_rng(19)
    alone = [C.log_ar1(rng, 250, 0.0)]
    d = rules.degradation([C.log_ar1(rng, 2000, 0.0, scale=3.0)], alone)
    assert d.reading.startswith("insufficient data (alone: n = 250 < 300")
    d = rules.degradation([C.log_ar1(rng, 5000, 0.97, scale=3.0)], [C.log_ar1(rng, 5000, 0.0)])
    assert d.reading.startswith("insufficient data (shared: lag-1 autocorrelation 0.9")
    d = rules.degradation([C.log_ar1(rng, 5000, 0.0, scale=3.0)], [C.log_ar1(rng, 5000, 0.0)])
    assert d.reading == "degraded"
    d = rules.degradation([C.log_ar1(rng, 800, 0.0, scale=1.02)], [C.log_ar1(rng, 800, 0.8)])
    assert d.reading.startswith("insufficient data (the alone p99 has no upper bound at n = 800")
    d = rules.degradation([C.log_ar1(rng, 5000, 0.0)], [C.log_ar1(rng, 5000, 0.0)], method="stationary",
                          n_resamples=300)
    assert d.reading.startswith("insufficient data (the stationary bootstrap")
