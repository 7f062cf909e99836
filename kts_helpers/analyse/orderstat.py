"""Distribution-free intervals for quantiles of autocorrelated series, and for ratios of them.

Why not the bootstrap: a percentile bootstrap of a p99 from 800 samples can never reach beyond about the
5th-largest value, so its upper bound is too low whenever the true p99 lies beyond it; measured on
log-AR(1) series it covers 57-91 % at n = 300-800 instead of 95 %, almost all misses on the upper side.

The interval here is the order-statistic interval (Conover, *Practical Nonparametric Statistics*, 3.2;
``scipy.stats.quantile_test``), made to hold for autocorrelated series:

* For i.i.d. data the number T of samples at or below the true q-quantile is Binomial(n, q), so
  [X_(l), X_(u)] with ranks from its quantiles is exact for any distribution.
* For a stationary, mixing series T still has mean n q but variance n q (1 - q) tau, where tau =
  1 + 2 sum_k rho_k is the long-run variance factor of the indicator 1{X_t <= xi_q} (the Bahadur
  representation for dependent sequences, Wu 2005). T is modelled as tau * Binomial(n / tau, q): the
  same mean and variance, and the binomial's skew in the tail, where only a handful of samples lie
  beyond a p99. With n / tau "effective" samples the ranks come from ``scipy.special.bdtrik`` (the
  binomial CDF inverted in k, continuous in n and k) and are mapped back to the series: rank
  r = tau * k + 1, read off the sorted sample by linear interpolation. tau = 1 gives scipy's ranks.
* The upper rank is rounded outward twice: k up to a whole count of effective samples (the model's T
  has whole counts), then r up to a whole sample (Conover's exact ranks; with tau = 1, scipy's). Where
  a p99 has only two or three samples beyond it, reading between counts is what let the bound fall
  below the true p99 too often: collisions in Markov bursts of mean 3 missed above in 4.9 % of series at
  n = 800 (3.9 % at 2000) with the continuous rank, 3.0 % (2.0 %) rounded (``bench/bench_upper_rank.py``,
  8 x 600 series). The price: where tau > 1 a p99's upper bound from 800 samples can be the largest
  sample (one OS hiccup in an alone series), which leaves DF without a lower bound above 1 where the
  exceedance test still decides (the saturating FFT: DF 4.53 [0.81, 5.02], "degraded" by 760 of 800
  shared iterations beyond the alone p99.75). The lower rank stays continuous: ~20 samples lie beyond it.
* tau is read from the tail, where the bound lives (``indicator_tau``): the largest, over the exceedance
  indicators at q and around it (``tail_levels``: twice as many beyond, ``K_BEYOND`` beyond, half as many
  beyond), of Geyer's initial positive sequence (1992) over the indicator's autocorrelations and of the
  clusters' sum(size^2) / sum(size) (the variance factor of a count of independent excursions, less what
  independent exceedances cluster by chance). At p99 and n = 800 the indicator holds only 8 ones: bursts of
  collisions show at p98, drift of the level at 40 beyond, a burst of the largest values at p99.5.
* Estimating tau costs coverage, so the level is widened as if the interval were a Student t with nu
  degrees of freedom, nu the independent clusters expected beyond q, less one (at least ``MIN_NU``): the
  information about how excursions cluster is in how many there are. (Before, nu came from the lags Geyer
  keeps for the whole series' normal scores -- the bulk's slow drift, which said nu = 4 for the article's
  alone FFT, whose tail is nearly independent.)
* When the upper rank exceeds n the data hold no upper bound at this confidence (a p99 from 300
  samples: 0.99^300 = 0.049 > 0.025): ``hi`` is ``inf``, shown as "≥ lo (no upper bound at n = ...)".

Repeats (several runs of one scenario) pool their samples; tau is then also estimated from how the
runs' exceedance fractions scatter (batch means with the runs as batches), with R - 1 degrees of freedom
when that is the larger, so run-to-run variation widens the interval.

Ratios (DF = shared p99 / alone p99, jitter = p99 / p50, throughput change) combine the two intervals
by MOVER on the log scale (Zou & Donner 2008; Newcombe 2011): each side's own, possibly skewed, distance
from its estimate enters, an unbounded side makes the ratio unbounded on that side, and the jitter's two
quantiles of one series enter with their correlation.

The coverage of every interval here is measured (``analyse.coverage``) at n = 300, 800, 5000 and
lag-1 autocorrelation 0, 0.5, 0.8 (0.9 in ``make bench``), and on the wider grid of collisions (random,
bursty, periodic), t3 tails and drift to 0.95 at n = 300, 800, 2000: ``TESTED_MIN_N`` and
``TESTED_MAX_LAG1`` bound where a reading may rest on it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

K_BEYOND = 40  # tau is also estimated at the level with at least this many samples beyond it
MIN_NU = 2.0  # one cluster alone would leave no degrees of freedom: a t with 2 is as wide as the rule goes
RARE = 0.05  # beyond this share of the samples exceedances are excursions that cluster (the tail)
CLUSTER_GAP = 2  # exceedances at most this many iterations apart belong to one cluster (one excursion)
TESTED_MIN_N = 300  # coverage measured from here up (below it a p99 has no 95 % upper bound anyway)
TESTED_MAX_LAG1 = 0.9  # ... and up to this lag-1 autocorrelation (of the normal scores)


@dataclass(frozen=True)
class Bounds:
    """An interval for one quantile: ``lo``/``hi`` are -inf/inf where the data hold no bound."""

    estimate: float
    lo: float
    hi: float
    tau: float  # long-run variance factor of the exceedance indicator (1: as if independent)
    nu: float  # degrees of freedom of the tau estimate
    n: int
    lag1: float  # lag-1 autocorrelation of the normal scores: how far the coverage tests reach

    @property
    def ess(self) -> float:
        return self.n / self.tau


# ----------------------------------------------------------------------------- dependence

def acf(y: np.ndarray) -> np.ndarray:
    """Sample autocorrelations rho_0..rho_{n-1} (biased, divided by n), by FFT; zeros for a constant series."""
    n = len(y)
    c = y - y.mean()
    f = np.fft.rfft(c, 2 * n)
    ac = np.fft.irfft(f * np.conj(f), 2 * n)[:n]
    return ac / ac[0] if ac[0] > 0 else np.zeros(n)


def geyer(rho: np.ndarray) -> tuple[float, int]:
    """(tau, L): 1 + 2 sum_{k=1..L} rho_k summed over Geyer's initial positive sequence, at least 1.

    Pairs rho_{2m} + rho_{2m+1} are added while positive (Geyer 1992): the sum stops where noise starts.
    """
    n = len(rho)
    if n < 2 or rho[0] <= 0:
        return 1.0, 0
    npairs = n // 2
    pairs = rho[: 2 * npairs].reshape(npairs, 2).sum(axis=1)
    neg = np.flatnonzero(pairs <= 0)
    k = int(neg[0]) if neg.size else npairs
    tau = -1.0 + 2.0 * float(pairs[:k].sum())
    return max(1.0, tau), max(0, 2 * k - 1)


def dependence(x: np.ndarray) -> tuple[float, int]:
    """(lag-1 autocorrelation, lags Geyer's rule keeps) of the normal scores of x.

    The lag-1 autocorrelation is what the coverage tests are indexed by (for a log-AR(1) series it is
    the AR coefficient). Scores instead of raw values: a few huge latencies would dominate a raw
    autocorrelation.
    """
    n = len(x)
    if n < 3 or np.ptp(x) == 0:
        return 0.0, 0
    from scipy.special import ndtri  # scipy: ~0.6 s to import, loaded at the first interval, not to parse
    from scipy.stats import rankdata  # scipy: ~0.6 s to import, loaded at the first interval, not to parse

    rho = acf(ndtri((rankdata(x) - 0.5) / n))
    return float(rho[1]), geyer(rho)[1]


def tail_levels(n: int, q: float) -> tuple[float, ...]:
    """q and the levels around it whose exceedance indicators tell how the tail's excursions cluster.

    At q itself a p99 from 800 samples has 8 exceedances, too few to see a cluster reliably; at twice
    as many beyond (p98) collisions that make the p99 still dominate the indicator, at ``K_BEYOND``
    beyond slow drift of the level shows, and at half as many (p99.5, at least 2) a burst of the
    largest values. Never past the median.
    """
    beyond = n * (1 - q) if q >= 0.5 else n * q

    def level(k: float) -> float:
        return min(q, max(0.5, 1 - k / n)) if q >= 0.5 else max(q, min(0.5, k / n))

    top = max(0.5, 1 - max(2.0, beyond / 2) / n) if q >= 0.5 else min(0.5, max(2.0, beyond / 2) / n)
    return tuple(dict.fromkeys((q, level(2 * beyond), level(K_BEYOND), top)))


def cluster_sizes(y: np.ndarray) -> np.ndarray:
    """Sizes of the clusters of a 0/1 exceedance indicator: runs of ones apart by at most ``CLUSTER_GAP`` zeros."""
    idx = np.flatnonzero(y)
    if idx.size == 0:
        return np.zeros(0, np.int64)
    cuts = np.flatnonzero(np.diff(idx) > CLUSTER_GAP + 1)
    return np.diff(np.concatenate(([0], cuts + 1, [idx.size])))


def indicator_tau(x: np.ndarray, q: float) -> tuple[float, float]:
    """(tau, nu) of the q-quantile's exceedance indicator, read from the tail (``tail_levels``).

    tau is the largest, over the levels, of Geyer's sum over the indicator's autocorrelations and of the
    clusters' sum(size^2) / sum(size) -- the variance factor of a count made of independent clusters
    (compound Poisson), which sees bursts of collisions that a few autocorrelations at one level miss --
    less the 2 (gap + 1) p that independent exceedances at rate p cluster by chance.
    Clusters only make sense for rare exceedances (at most ``RARE`` of the samples); for a central quantile
    nu is the lag window's n / (2L + 1). In the tail nu, the degrees of freedom of tau, is the number of
    independent clusters beyond the quantile less one: the
    information about how excursions cluster is in how many of them there are, not in the series'
    length (nor in the bulk's drift, which would leave 4 degrees of freedom where the tail is nearly
    independent).
    """
    n = len(x)
    s = np.sort(x)
    tau, nu = 1.0, math.inf  # no exceedance at all (a constant series): nothing to estimate
    for level in tail_levels(n, q):
        thr = float(np.interp(level * (n - 1), np.arange(n), s))
        y = (x > thr) if q >= 0.5 else (x <= thr)
        k = int(y.sum())
        if not 0 < k < n:
            continue
        g_tau, lags = geyer(acf(y.astype(np.float64)))
        tau = max(tau, g_tau)
        if k <= RARE * n:  # excursions: clusters are the independent units
            sizes = cluster_sizes(y)
            # less what independent exceedances would give by chance: a neighbour within the gap, 2 (gap + 1) k / n
            tau = max(tau, float(np.sum(sizes**2)) / k - 2 * (CLUSTER_GAP + 1) * k / n)
            if math.isinf(nu):  # the clusters expected beyond the quantile itself (ties leave fewer samples)
                beyond = n * (1 - level if q >= 0.5 else level)
                nu = max(MIN_NU, beyond * len(sizes) / k - 1.0)
        elif math.isinf(nu):  # a central quantile: the lag window's equivalent degrees of freedom
            nu = n / (2 * lags + 1)
    return tau, nu


def between_runs_tau(runs: Sequence[np.ndarray], q: float) -> float:
    """tau from the scatter of the runs' exceedance fractions at the pooled q-quantile (runs as batches)."""
    x = np.concatenate(runs)
    n, r = len(x), len(runs)
    thr = np.quantile(x, q)
    p = float(np.mean(x > thr))
    if r < 2 or not 0 < p < 1:
        return 1.0
    fr = np.array([np.mean(run > thr) for run in runs])
    w = np.array([len(run) for run in runs], np.float64) / n
    var_pbar = float(np.sum(w * (fr - p) ** 2)) / (r - 1)  # weighted batch-means variance of the pooled fraction
    return max(1.0, n * var_pbar / (p * (1 - p)))


# ----------------------------------------------------------------------------- the interval

def t_widened(confidence: float, nu: float) -> float:
    """The confidence a z-based rule needs to act like a Student t with nu degrees of freedom."""
    if not math.isfinite(nu) or nu > 1e6:
        return confidence
    from scipy.stats import norm, t  # scipy: ~0.6 s to import, loaded at the first interval, not to parse

    return float(1 - 2 * norm.sf(t.ppf(0.5 + confidence / 2, max(nu, 1.0))))


def rank_bounds(n: int, q: float, tau: float, confidence: float) -> tuple[float | None, float | None]:
    """1-based (fractional) ranks of the lower and upper bound in the sorted sample; None: no such bound."""
    from scipy.special import bdtrik  # scipy: ~0.6 s to import, loaded at the first interval, not to parse

    a2 = (1 - confidence) / 2
    m = n / tau
    lo = hi = None
    if (1 - q) ** m < a2:  # P(T_eff <= 0) < a2: a lower bound exists
        j = float(bdtrik(a2, m, q))
        if math.isfinite(j):
            lo = tau * j + 1
    j = float(bdtrik(1 - a2, m, q))
    if math.isfinite(j) and j + 1 <= m:  # the bound is an order statistic of the n / tau effective samples
        # ... a whole one: T counts whole effective samples, then the rank a whole sample (the module's doc)
        hi = float(min(n, math.ceil(tau * math.ceil(j - 1e-9) + 1 - 1e-9)))
    return lo, hi


def at_rank(s: np.ndarray, r: float) -> float:
    """The sorted sample read at a fractional 1-based rank, by linear interpolation."""
    return float(np.interp(r - 1.0, np.arange(len(s)), s))


def quantile_bounds(x: np.ndarray, q: float, confidence: float = 0.95, *,
                    runs: Sequence[np.ndarray] | None = None) -> Bounds:
    """The interval for the q-quantile of x (numpy's linear estimate); ``runs``: x is these repeats pooled."""
    n = len(x)
    est = float(np.quantile(x, q))
    if runs is not None and len(runs) > 1:
        taus = [indicator_tau(r, q) for r in runs]
        deps = [dependence(r) for r in runs]
        tau = max(t for t, _ in taus)
        nu = sum(v for _, v in taus)
        tb = between_runs_tau(runs, q)
        if tb > tau:
            tau, nu = tb, float(len(runs) - 1)
        dep = max(d[0] for d in deps)
    else:
        tau, nu = indicator_tau(x, q)
        dep = dependence(x)[0]
    lo_r, hi_r = rank_bounds(n, q, tau, t_widened(confidence, nu))
    s = np.sort(x)
    lo = at_rank(s, lo_r) if lo_r is not None else -math.inf
    hi = at_rank(s, hi_r) if hi_r is not None else math.inf
    return Bounds(est, min(lo, est), max(hi, est), tau, nu, n, dep)


def mean_bounds(x: np.ndarray, confidence: float = 0.95) -> Bounds:
    """Student-t interval for the mean with the series' own long-run variance (Geyer): throughput's interval."""
    from scipy.stats import t  # scipy: ~0.6 s to import, loaded at the first interval, not to parse

    n = len(x)
    est = float(x.mean())
    tau, L = geyer(acf(x))
    nu = max(1.0, min(n - 1.0, n / (2 * L + 1)))
    half = float(t.ppf(0.5 + confidence / 2, nu)) * float(x.std(ddof=1)) * math.sqrt(tau / n) if n > 1 else math.inf
    return Bounds(est, est - half, est + half, tau, nu, n, dependence(x)[0])


def log_ratio(num: tuple[float, float, float], den: tuple[float, float, float],
              rho: float = 0.0) -> tuple[float, float]:
    """MOVER interval for num / den from (estimate, lo, hi) of each, on the log scale.

    ``rho``: the correlation of the two estimates (0 for independent series). A missing bound (lo <= 0,
    hi = inf) on a side that limits the ratio leaves the ratio without that bound (-inf or inf).
    """
    (e1, l1, u1), (e2, l2, u2) = num, den

    def dist(a: float, b: float) -> float:  # |log a - log b|, inf where a bound is missing
        return abs(math.log(a) - math.log(b)) if a > 0 and b > 0 and math.isfinite(a) and math.isfinite(b) \
            else math.inf

    d = math.log(e1) - math.log(e2)
    lower = (dist(e1, l1), dist(u2, e2))
    upper = (dist(u1, e1), dist(e2, l2))

    def width(a: float, b: float) -> float:
        return math.sqrt(max(a * a + b * b - 2 * rho * a * b, 0.0)) if math.isfinite(a) and math.isfinite(b) \
            else math.inf

    lo = d - width(*lower)
    hi = d + width(*upper)
    return (math.exp(lo) if math.isfinite(lo) else -math.inf), (math.exp(hi) if math.isfinite(hi) else math.inf)


def quantile_correlation(q1: float, q2: float) -> float:
    """Asymptotic correlation of two sample quantiles of one i.i.d. sample (q1 < q2): jitter's MOVER term."""
    a, b = min(q1, q2), max(q1, q2)
    return math.sqrt(a * (1 - b) / (b * (1 - a)))


def untested(n: int, dependence: float) -> str | None:
    """Why an interval lies outside the range its coverage was measured in (None: inside)."""
    if n < TESTED_MIN_N:
        return f"n = {n} < {TESTED_MIN_N}"
    if dependence > TESTED_MAX_LAG1:
        return f"lag-1 autocorrelation {dependence:.2f} > {TESTED_MAX_LAG1} (beyond the tested range)"
    return None
