"""The order-statistic interval at the effective sample size: scipy's ranks, the no-bound rule, tau, MOVER."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import norm, quantile_test

from kts_helpers.analyse import coverage as C
from kts_helpers.analyse import orderstat as O
from kts_helpers.analyse import stats as S


@pytest.mark.parametrize("n, q", [(1000, 0.5), (1000, 0.95), (1000, 0.99), (400, 0.99), (5000, 0.999), (50, 0.1)])
def test_independent_ranks_bracket_scipys_exact_ranks(n: int, q: float) -> None:
    """tau = 1: the continuous ranks lie within one rank of scipy.stats.quantile_test's exact ones."""
    x = np.random.default_rng(n).lognormal(size=n)
    s = np.sort(x)
    ci = quantile_test(x, p=q).confidence_interval(0.95)
    lo_r, hi_r = O.rank_bounds(n, q, 1.0, 0.95)
    lo_k = int(np.searchsorted(s, ci.low)) + 1  # scipy's 1-based ranks
    assert lo_r is not None and lo_k <= lo_r < lo_k + 1
    if np.isnan(ci.high):
        assert hi_r is None
    else:
        hi_k = int(np.searchsorted(s, ci.high)) + 1
        assert hi_r is not None and hi_k - 1 < hi_r <= hi_k


def test_no_upper_bound_for_a_p99_below_367_independent_samples() -> None:
    """0.99^n > 0.025 means the maximum itself is below the true p99 too often: no 95 % upper bound."""
    assert 0.99**367 > 0.025 > 0.99**368
    assert O.rank_bounds(367, 0.99, 1.0, 0.95)[1] is None
    assert O.rank_bounds(368, 0.99, 1.0, 0.95)[1] == pytest.approx(368, abs=0.01)  # the maximum
    # with autocorrelation the same holds at the effective size: 800 samples worth 3 each are 267
    assert O.rank_bounds(800, 0.99, 3.0, 0.95)[1] is None
    assert O.rank_bounds(1200, 0.99, 3.0, 0.95)[1] is not None


@pytest.mark.parametrize("n, tau", [(800, 1.0), (800, 1.7), (1200, 2.4), (2000, 3.4), (5000, 1.3)])
def test_upper_rank_is_a_whole_count_of_effective_samples_then_a_whole_sample(n: int, tau: float) -> None:
    """T = tau * Binomial(n / tau, q) has whole counts: the upper rank rounds the count up, then the rank up,
    so it never reads between two order statistics (which let bursty p99s miss above in 4.9 % of series)."""
    from scipy.special import bdtrik

    hi = O.rank_bounds(n, 0.99, tau, 0.95)[1]
    j = float(bdtrik(0.975, n / tau, 0.99))
    assert hi is not None and hi == int(hi)
    assert hi >= tau * math.ceil(j - 1e-9) + 1 - 1e-9 and hi - 1 < tau * math.ceil(j - 1e-9) + 1


def test_interval_states_a_missing_bound_instead_of_a_tight_one() -> None:
    x = C.log_ar1(np.random.default_rng(1), 300, 0.0)
    iv = S.quantile_interval(x, 0.99)
    assert math.isinf(iv.hi) and iv.lo <= iv.estimate and not iv.bounded
    assert "no 95 % upper bound at n = 300" in iv.note
    assert iv.to_dict()["hi"] is None
    iv = S.quantile_interval(C.log_ar1(np.random.default_rng(1), 2000, 0.0), 0.99)
    assert iv.bounded and iv.lo < iv.estimate < iv.hi


def test_tau_of_the_exceedance_indicator_matches_theory() -> None:
    """log-AR(1), phi = 0.8: tau = 1 + 2 sum (P(both beyond) - p^2) / (p (1 - p)), from the bivariate normal."""
    from scipy.stats import multivariate_normal

    def theory(q: float, phi: float) -> float:
        z, p = norm.ppf(q), 1 - q
        s = sum((multivariate_normal([0, 0], [[1, phi**k], [phi**k, 1]]).cdf([-z, -z]) - p * p) / (p * (1 - p))
                for k in range(1, 80))
        return 1 + 2 * s

    rng = np.random.default_rng(3)
    taus = {q: np.median([O.indicator_tau(C.log_ar1(rng, 20_000, 0.8), q)[0] for _ in range(5)])
            for q in (0.5, 0.95)}
    assert taus[0.5] == pytest.approx(theory(0.5, 0.8), rel=0.15)  # 6.4
    assert taus[0.95] == pytest.approx(theory(0.95, 0.8), rel=0.2)  # 4.2
    assert O.indicator_tau(C.log_ar1(rng, 20_000, 0.0), 0.99)[0] < 1.15
    assert O.dependence(C.log_ar1(rng, 20_000, 0.8))[0] == pytest.approx(0.8, abs=0.02)
    assert abs(O.dependence(C.log_ar1(rng, 20_000, 0.0))[0]) < 0.03


def test_t_widening_vanishes_with_many_degrees_of_freedom() -> None:
    assert O.t_widened(0.95, math.inf) == 0.95
    assert O.t_widened(0.95, 1e5) == pytest.approx(0.95, abs=1e-4)
    assert 0.96 < O.t_widened(0.95, 10) < O.t_widened(0.95, 5) < 1


def test_mover_on_the_log_scale() -> None:
    """Symmetric log intervals: the half-widths add in quadrature; a missing bound propagates to its side."""
    e1, e2, h1, h2 = 4.0, 2.0, 0.3, 0.4
    lo, hi = O.log_ratio((e1, e1 * math.exp(-h1), e1 * math.exp(h1)), (e2, e2 * math.exp(-h2), e2 * math.exp(h2)))
    assert math.log(hi / 2.0) == pytest.approx(0.5) and math.log(2.0 / lo) == pytest.approx(0.5)
    lo_c, hi_c = O.log_ratio((e1, e1 * math.exp(-h1), e1 * math.exp(h1)), (e2, e2 * math.exp(-h2), e2 * math.exp(h2)),
                             rho=0.5)
    assert lo < lo_c < 2.0 < hi_c < hi  # positively correlated estimates: the ratio is surer
    lo, hi = O.log_ratio((e1, 3.0, math.inf), (e2, 1.5, 2.5))
    assert hi == math.inf and 0 < lo < 2.0
    lo, hi = O.log_ratio((e1, 3.0, 5.0), (e2, 1.5, math.inf))
    assert lo == -math.inf and 2.0 < hi < math.inf


def test_repeats_widen_with_run_to_run_spread() -> None:
    rng = np.random.default_rng(4)
    same = [C.log_ar1(rng, 2000, 0.3) for _ in range(4)]
    spread = [f * C.log_ar1(rng, 2000, 0.3) for f in (0.8, 0.9, 1.1, 1.25)]
    assert O.between_runs_tau(same, 0.99) < 2.5
    assert O.between_runs_tau(spread, 0.99) > 5
    w = {k: S.quantile_ci_runs(r, 0.99) for k, r in (("same", same), ("spread", spread))}
    pooled = S.quantile_interval(np.concatenate(spread), 0.99)
    assert w["spread"].estimate == pytest.approx(np.quantile(np.concatenate(spread), 0.99))
    width = {k: math.log(iv.hi / iv.lo) for k, iv in w.items()}
    assert width["spread"] > 1.5 * width["same"]
    assert width["spread"] > 1.5 * math.log(pooled.hi / pooled.lo)  # ignoring the runs hides their spread
    assert w["spread"].n == (2000, 2000, 2000, 2000)


def test_constant_and_tiny_series() -> None:
    iv = S.quantile_interval(np.full(500, 2.5), 0.99)
    assert (iv.estimate, iv.lo, iv.hi) == (2.5, 2.5, 2.5) and iv.degenerate
    iv = S.quantile_interval([1.0, 2.0, 3.0], 0.5)
    assert not iv.bounded and iv.lo <= iv.estimate <= iv.hi  # three samples bound nothing at 95 %


def test_throughput_change_interval_is_a_change_of_means() -> None:
    rng = np.random.default_rng(9)
    alone, shared = C.log_ar1(rng, 3000, 0.5), C.log_ar1(rng, 3000, 0.5, scale=2.0)
    iv = S.mean_ratio_ci(shared, alone)
    assert iv.estimate == pytest.approx(alone.mean() / shared.mean() - 1)
    assert iv.lo < -0.5 < iv.hi < -0.4 and iv.method == "order"
