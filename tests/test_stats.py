"""kts_helpers.analyse.stats: agreement with scipy/arch and with naive resampling, errors, derived intervals."""

from __future__ import annotations

import json
import math
import warnings

import numpy as np
import pytest
from scipy.signal import lfilter
from scipy.stats import binom, ks_2samp

from kts_helpers.analyse import resample as R
from kts_helpers.analyse import stats as S
from kts_helpers.analyse.stats import (
    Interval,
    ShortSeriesWarning,
    StatsError,
    df_wording,
    effective_sample_size,
    jitter_ci,
    mean_ratio_ci,
    min_samples_for_quantile,
    percentile,
    quantile_ci,
    quantile_ci_runs,
    quantile_interval,
    ratio_ci,
    sample_size_warning,
    steady_state_start,
)


def _ar1(n: int, phi: float = 0.8, sd: float = 0.5, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    z = rng.normal(0.0, sd * math.sqrt(1 - phi**2), n + 300)
    return np.exp(lfilter([1.0], [1.0, -phi], z)[300:])


@pytest.fixture(scope="module")
def lognormal() -> np.ndarray:
    return np.random.default_rng(7).lognormal(0.0, 0.5, 5000)


@pytest.fixture(scope="module")
def ar1() -> np.ndarray:
    return _ar1(5000)


def _close(a: float, b: float, tol: float = 0.02) -> bool:
    return abs(a - b) <= tol * abs(b)


# ---------------------------------------------------------------- percentile and validation

@pytest.mark.parametrize("q", [0.001, 0.1, 0.5, 0.9, 0.99, 0.999])
def test_percentile_matches_numpy_exactly(lognormal: np.ndarray, q: float) -> None:
    assert percentile(lognormal, q) == float(np.quantile(lognormal, q))
    assert percentile(list(lognormal[:7]), q) == float(np.quantile(lognormal[:7], q))


@pytest.mark.parametrize("q", [0.0, 1.0, -0.1, 99, float("nan"), "0.9", True])
def test_q_outside_open_unit_interval(lognormal: np.ndarray, q: object) -> None:
    with pytest.raises(ValueError, match="q must"):
        percentile(lognormal, q)  # type: ignore[arg-type]
    with pytest.raises(StatsError):
        quantile_ci(lognormal, q)  # type: ignore[arg-type]


@pytest.mark.parametrize("bad, match", [
    ([1.0], "at least 2 samples"), ([], "at least 2 samples"),
    ([1.0, float("nan"), 3.0], "NaN/inf"), ([1.0, 2.0, float("inf")], "NaN/inf"),
    ([[1.0, 2.0], [3.0, 4.0]], "one-dimensional"), (["a", "b"], "numbers"),
])
def test_bad_samples_are_one_line_value_errors(bad: object, match: str) -> None:
    with pytest.raises(ValueError, match=match) as ei:
        quantile_ci(bad, 0.99)  # type: ignore[arg-type]
    assert isinstance(ei.value, StatsError) and "\n" not in str(ei.value)


def test_bad_options(lognormal: np.ndarray) -> None:
    with pytest.raises(StatsError, match="method"):
        quantile_ci(lognormal, 0.99, method="moving")
    with pytest.raises(StatsError, match="confidence"):
        quantile_ci(lognormal, 0.99, confidence=95)
    with pytest.raises(StatsError, match="n_resamples"):
        quantile_ci(lognormal, 0.99, n_resamples=0)
    with pytest.raises(StatsError, match="block_length"):
        quantile_ci(lognormal, 0.99, block_length=0, method="stationary")


def test_constant_series_is_degenerate_not_nan() -> None:
    x = np.full(500, 3.25)
    for method in S.METHODS:
        iv = quantile_interval(x, 0.99, method=method, n_resamples=200, seed=1)
        assert (iv.estimate, iv.lo, iv.hi) == (3.25, 3.25, 3.25)
        assert iv.degenerate and "constant" in iv.note
    assert quantile_ci(x, 0.5) == (3.25, 3.25)
    assert jitter_ci(x, n_resamples=100).degenerate


def test_short_series_falls_back_with_warning() -> None:
    x = np.random.default_rng(3).lognormal(size=20)
    with pytest.warns(ShortSeriesWarning, match="short series"):
        iv = quantile_interval(x, 0.9, n_resamples=500, seed=2, method="stationary")
    assert iv.block_length == math.ceil(20 ** (1 / 3)) == 3
    assert "short series" in iv.note and iv.lo <= iv.estimate <= iv.hi
    with warnings.catch_warnings():  # the i.i.d. bootstrap needs no block length: no warning
        warnings.simplefilter("error")
        quantile_interval(x, 0.9, method="iid", n_resamples=500)
        quantile_interval(np.r_[x, x], 0.9, n_resamples=500, method="stationary")  # 40 >= SHORT_SERIES_N
        quantile_interval(x, 0.9)  # the order-statistic interval needs no block length


def test_automatic_block_length_uses_politis_white(ar1: np.ndarray) -> None:
    from arch.bootstrap import optimal_block_length

    pw = optimal_block_length(ar1)
    iv = quantile_interval(ar1, 0.99, n_resamples=200, seed=1, method="stationary")
    assert iv.block_length == math.ceil(pw["stationary"].iloc[0]) > 5
    iv = quantile_interval(ar1, 0.99, method="circular", n_resamples=200, seed=1)
    assert iv.block_length == math.ceil(pw["circular"].iloc[0])
    assert quantile_interval(ar1, 0.99, method="iid", n_resamples=200).block_length is None


# ---------------------------------------------------------------- agreement with scipy / arch

def test_iid_agrees_with_scipy_bootstrap(lognormal: np.ndarray) -> None:
    from scipy.stats import bootstrap

    ref = bootstrap((lognormal,), lambda s, axis: np.quantile(s, 0.99, axis=axis), method="percentile",
                    vectorized=True, n_resamples=4000, random_state=np.random.default_rng(11), batch=500)
    lo, hi = quantile_ci(lognormal, 0.99, method="iid", n_resamples=4000, seed=12)
    assert _close(lo, ref.confidence_interval.low) and _close(hi, ref.confidence_interval.high), \
        ((lo, hi), ref.confidence_interval)


@pytest.mark.parametrize("method", ["stationary", "circular"])
def test_block_methods_agree_with_arch(ar1: np.ndarray, method: str) -> None:
    from arch.bootstrap import CircularBlockBootstrap, StationaryBootstrap

    cls = StationaryBootstrap if method == "stationary" else CircularBlockBootstrap
    block = 25
    ref = cls(block, ar1, seed=5).conf_int(lambda a: np.quantile(a, 0.99), reps=4000, method="percentile")
    lo, hi = quantile_ci(ar1, 0.99, method=method, block_length=block, n_resamples=4000, seed=6)
    assert _close(lo, ref[0, 0]) and _close(hi, ref[1, 0]), ((lo, hi), ref.ravel())


@pytest.mark.parametrize("method, b, q", [
    ("stationary", 12, 0.99), ("stationary", 3, 0.01), ("stationary", 40, 0.95),
    ("circular", 12, 0.99), ("circular", 5, 0.02),
])
def test_tail_engine_matches_naive_distribution(method: str, b: int, q: float) -> None:
    """The fast tail path must give the naive bootstrap's distribution, not an approximation."""
    x = _ar1(3000, seed=4)
    fast, nf = R.boot_quantiles(x, q, 6000, method, b, np.random.default_rng(1), engine="tail")
    naive, _ = R.boot_quantiles(x, q, 6000, method, b, np.random.default_rng(2), engine="naive")
    assert nf == 0
    assert ks_2samp(fast, naive).pvalue > 0.001
    assert abs(fast.mean() - naive.mean()) < 4 * naive.std() / math.sqrt(3000)


def test_iid_order_statistics_exact_jointly(lognormal: np.ndarray) -> None:
    """Beta-chain order statistics vs materialised resamples, jointly (p99 / p50 from one resample)."""
    x = lognormal[:2000]
    n = len(x)
    ks = [*R.bracket(n, 0.99), *R.bracket(n, 0.5)]
    fast, _ = R.boot_orders(x, ks, 5000, "iid", 1, np.random.default_rng(3))
    naive, _ = R.boot_orders(x, ks, 5000, "iid", 1, np.random.default_rng(4), engine="naive")
    jf = R.lerp_quantile(fast[:, 0], fast[:, 1], n, 0.99) / R.lerp_quantile(fast[:, 2], fast[:, 3], n, 0.5)
    jn = R.lerp_quantile(naive[:, 0], naive[:, 1], n, 0.99) / R.lerp_quantile(naive[:, 2], naive[:, 3], n, 0.5)
    for a, b in ((fast[:, 0], naive[:, 0]), (fast[:, 2], naive[:, 2]), (jf, jn)):
        assert ks_2samp(a, b).pvalue > 0.001


def test_order_statistic_lerp_is_numpy_quantile(ar1: np.ndarray) -> None:
    pos = R.naive_positions(len(ar1), 50, "stationary", 10, np.random.default_rng(0))
    vals = ar1[pos]
    for q in (0.5, 0.9, 0.99, 0.013):
        lo, hi = R.bracket(len(ar1), q)
        part = np.partition(vals, [lo, hi], axis=1)
        np.testing.assert_array_equal(R.lerp_quantile(part[:, lo], part[:, hi], len(ar1), q),
                                      np.quantile(vals, q, axis=1))


def test_stationary_positions_have_geometric_blocks() -> None:
    pos = R.naive_positions(10_000, 20, "stationary", 8, np.random.default_rng(0))
    jumps = np.diff(pos, axis=1) != 1
    jumps &= ~((pos[:, :-1] == 9_999) & (pos[:, 1:] == 0))  # wrap-around continues the block
    assert abs(jumps.mean() - 1 / 8) < 0.01


def test_too_few_tail_elements_are_redrawn_and_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    """Force the rare event (a resample with fewer tail elements than the rank needs).

    With the default 7-sigma tail it has probability ~1e-12 per resample (the KS tests above
    assert it never happens); here a negative margin makes it common, to exercise the path:
    those resamples are redrawn naively, counted, and the count is reported in the note.
    """
    x = _ar1(3000, seed=9)
    monkeypatch.setattr(R, "_Z_TAIL", -1.0)
    vals, nf = R.boot_quantiles(x, 0.99, 500, "stationary", 10, np.random.default_rng(1), engine="tail")
    assert 0 < nf <= 500 and np.all((vals >= x.min()) & (vals <= x.max()))
    iv = quantile_interval(x, 0.99, n_resamples=500, block_length=10, seed=1, method="stationary")
    assert "redrawn naively" in iv.note and iv.lo < iv.hi
    monkeypatch.setattr(R, "_Z_TAIL", 7.0)
    assert "redrawn" not in quantile_interval(x, 0.99, n_resamples=500, block_length=10, seed=1,
                                              method="stationary").note


# ---------------------------------------------------------------- derived intervals

def test_df_wording() -> None:
    assert df_wording(1.2, 1.5) == "degraded"
    assert df_wording(0.9, 1.1) == "no detectable change"
    assert df_wording(1.0, 1.3) == "no detectable change"
    assert df_wording(0.7, 0.95) == "faster when shared"
    with pytest.raises(StatsError):
        df_wording(1.5, 1.2)
    with pytest.raises(StatsError):
        df_wording(float("nan"), 1.2)


def test_ratio_ci_detects_degradation_and_its_absence() -> None:
    rng = np.random.default_rng(5)
    base = rng.lognormal(0, 0.4, 4000)
    shared = 1.5 * rng.lognormal(0, 0.4, 4000)
    iv = ratio_ci(shared, base, 0.99, n_resamples=2000, seed=1)
    assert iv.estimate == pytest.approx(np.quantile(shared, 0.99) / np.quantile(base, 0.99))
    assert iv.lo < iv.estimate < iv.hi and iv.lo < 1.5 < iv.hi
    assert df_wording(iv.lo, iv.hi) == "degraded"
    same = ratio_ci(rng.lognormal(0, 0.4, 4000), base, 0.99, n_resamples=2000, seed=2)
    assert df_wording(same.lo, same.hi) == "no detectable change"
    assert isinstance(same.n, tuple) and same.n == (4000, 4000)
    with pytest.raises(StatsError, match="positive"):
        ratio_ci(shared, np.r_[base, 0.0])


def test_jitter_ci_uses_one_resample_for_both_quantiles() -> None:
    x = np.random.default_rng(8).lognormal(0, 0.5, 3000)
    iv = jitter_ci(x, method="iid", n_resamples=3000, seed=1)
    assert iv.estimate == pytest.approx(np.quantile(x, 0.99) / np.quantile(x, 0.5))
    assert iv.lo < iv.estimate < iv.hi
    # Reference: naive resamples, both quantiles from the same resample.
    rng = np.random.default_rng(2)
    ref = []
    for _ in range(10):
        v = x[rng.integers(0, len(x), (300, len(x)))]
        ref.append(np.quantile(v, 0.99, axis=1) / np.quantile(v, 0.5, axis=1))
    lo, hi = np.quantile(np.concatenate(ref), [0.025, 0.975])
    assert _close(iv.lo, lo, 0.02) and _close(iv.hi, hi, 0.02)
    blk = jitter_ci(_ar1(2000), n_resamples=500, seed=1, method="stationary")
    assert blk.lo < blk.estimate < blk.hi and blk.block_length > 1
    with pytest.raises(StatsError, match="below"):
        jitter_ci(x, hi=0.5, lo=0.9)


def test_mean_ratio_ci_is_throughput_change() -> None:
    rng = np.random.default_rng(9)
    base = rng.lognormal(0, 0.3, 3000)
    shared = 2.0 * rng.lognormal(0, 0.3, 3000)
    iv = mean_ratio_ci(shared, base, n_resamples=1000, seed=1)
    assert iv.estimate == pytest.approx(base.mean() / shared.mean() - 1)
    assert iv.lo < -0.5 + 0.03 and iv.hi > -0.5 - 0.03 and iv.hi < -0.4


def test_two_level_bootstrap_widens_with_run_spread() -> None:
    rng = np.random.default_rng(10)
    same = [rng.lognormal(0, 0.4, 2000) for _ in range(5)]
    spread = [f * rng.lognormal(0, 0.4, 2000) for f in (0.8, 0.9, 1.0, 1.1, 1.25)]
    kw = dict(method="iid", n_resamples=1000, seed=3)
    w_same = quantile_ci_runs(same, 0.99, **kw)
    w_spread = quantile_ci_runs(spread, 0.99, **kw)
    pooled = quantile_interval(np.concatenate(spread), 0.99, **kw)
    width = lambda iv: iv.hi - iv.lo  # noqa: E731
    assert w_spread.estimate == pytest.approx(np.quantile(np.concatenate(spread), 0.99))
    assert width(w_spread) > 1.5 * width(w_same)
    assert width(w_spread) > 1.5 * width(pooled)  # ignoring runs hides run-to-run variation
    ragged = quantile_ci_runs([spread[0][:1500], spread[1], spread[2][:1800]], 0.99, n_resamples=300, seed=1)
    assert ragged.lo < ragged.estimate < ragged.hi and ragged.n == (1500, 2000, 1800)
    df = S.ratio_ci_runs(spread, same, 0.99, n_resamples=300, seed=4, method="iid")
    assert df.lo < df.estimate < df.hi
    with pytest.raises(StatsError, match="at least 2 runs"):
        quantile_ci_runs([same[0]], 0.99)


def test_interval_to_dict_is_json() -> None:
    iv = ratio_ci(np.arange(1.0, 101.0), np.arange(2.0, 102.0), 0.9, n_resamples=100, seed=1, method="circular",
                  block_length=4)
    d = json.loads(json.dumps(iv.to_dict()))
    assert d["block_length"] == [4, 4] and d["n"] == [100, 100] and isinstance(iv, Interval)


# ---------------------------------------------------------------- steady state, sample size, ESS

def test_min_samples_for_quantile_is_the_binomial_rule() -> None:
    assert min_samples_for_quantile(0.99) == 662
    assert min_samples_for_quantile(0.99, confidence=0.99) == 662
    assert min_samples_for_quantile(0.9) == 64
    assert min_samples_for_quantile(0.01) == 662  # lower tail mirrors the upper
    n = min_samples_for_quantile(0.999, 0.95)
    assert binom.cdf(1, n, 0.001) <= 0.05 < binom.cdf(1, n - 1, 0.001)


def test_sample_size_warning() -> None:
    assert "662" in sample_size_warning(500, 0.99)
    assert sample_size_warning(1000, 0.99) is None
    assert "effective" in sample_size_warning(5000, 0.99, ess=300)


def test_effective_sample_size() -> None:
    n = 5000
    iid = np.random.default_rng(1).normal(size=n)
    assert 0.85 * n <= effective_sample_size(iid) <= n
    ess = effective_sample_size(np.log(_ar1(n, phi=0.8, seed=2)))
    assert n / 20 < ess < n / 4  # theory: n (1 - phi) / (1 + phi) = n / 9
    assert effective_sample_size(np.ones(10)) == 10.0


def test_steady_state_start_finds_warmup() -> None:
    rng = np.random.default_rng(4)
    x = rng.lognormal(0, 0.2, 2000)
    x[:150] *= np.linspace(4.0, 1.2, 150)  # slow warm-up
    drop, why = steady_state_start(x)
    assert 100 <= drop <= 400 and "MSER-5" in why
    drop, why = steady_state_start(rng.lognormal(0, 0.2, 2000), fixed=10)
    assert 10 <= drop <= 100 and "fixed" in why
    drop, why = steady_state_start(x, fixed=5000)
    assert drop == 1000 and "capped" in why  # never more than half
    assert steady_state_start(x, fixed=20, detect=False) == (20, "fixed warm-up of 20")
    with pytest.raises(StatsError):
        steady_state_start(x, fixed=-1)
