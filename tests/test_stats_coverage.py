"""Coverage of the 95% intervals for a p99 on autocorrelated latencies with a known true p99.

Latencies are exp(AR(1)), phi = 0.8: the stationary log margin is N(0, sigma_e^2 / (1 - phi^2)),
so the true p99 is exp(z_0.99 * sd). The stationary bootstrap should cover it about 95% of the
time; the i.i.d. bootstrap, blind to the autocorrelation, should clearly under-cover.
The block length is chosen once by Politis-White (arch) on a pilot series of the same process
(estimating it costs ~0.3 s per series, too slow for 240 series in CI); the automatic choice
itself is exercised in test_stats.py.
"""

from __future__ import annotations

import numpy as np
from scipy.signal import lfilter
from scipy.stats import norm

from kts_helpers.analyse.stats import quantile_interval, resolve_block_length

PHI, SD, N, REPS, RESAMPLES = 0.8, 0.5, 10_000, 240, 1_000
SIGMA_E = SD * np.sqrt(1 - PHI**2)
TRUE_P99 = float(np.exp(norm.ppf(0.99) * SD))


def _series(rng: np.random.Generator) -> np.ndarray:
    z = rng.normal(0.0, SIGMA_E, N + 500)
    return np.exp(lfilter([1.0], [1.0, -PHI], z)[500:])  # burn-in: start from the stationary law


def test_stationary_covers_and_iid_undercovers() -> None:
    rng = np.random.default_rng(20240601)
    block, _ = resolve_block_length(_series(rng), "stationary")
    assert 10 <= block <= 150  # PW picks a long block for phi = 0.8
    hits = {"stationary": 0, "iid": 0}
    for i in range(REPS):
        x = _series(rng)
        for method in hits:
            iv = quantile_interval(x, 0.99, method=method, block_length=block if method == "stationary" else None,
                                   n_resamples=RESAMPLES, seed=i)
            assert iv.lo < iv.hi and not iv.degenerate
            hits[method] += iv.lo <= TRUE_P99 <= iv.hi
    cov = {k: v / REPS for k, v in hits.items()}
    print(f"coverage over {REPS} series of n={N} (block {block}): {cov}")
    assert 0.92 <= cov["stationary"] <= 0.98, cov
    assert cov["iid"] <= 0.85, cov
    assert cov["stationary"] - cov["iid"] >= 0.10, cov
