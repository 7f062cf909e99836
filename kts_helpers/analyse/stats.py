"""Confidence intervals for latency quantiles, DF, jitter and throughput; steady state; sample size.

Why this module exists: a tenant's p99 from one run is a noisy number, consecutive iterations of a GPU
workload are autocorrelated (a slow time slice makes several iterations slow), and only a handful of
samples lie beyond a p99. The default method, ``"order"``, is the order-statistic interval with the
binomial ranks taken at the effective sample size of the exceedance indicator (``orderstat``); where
the data hold no bound at 95 % it says so (``hi = inf``) instead of printing one that is too tight.
Ratios (DF, jitter, throughput change) combine two intervals by MOVER on the log scale. The block and
i.i.d. bootstraps (``"stationary"``, ``"circular"``, ``"iid"``; the engine is ``resample``) remain for
comparison: their percentile intervals of a p99 under-cover at the kit's sizes (``analyse.coverage``).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace

import numpy as np

from kts_helpers.analyse import orderstat
from kts_helpers.analyse.resample import (
    boot_means,
    boot_orders,
    boot_quantiles,
    bracket,
    join_notes,
    lerp_quantile,
    pct_interval,
    pooled_quantiles,
    redraw_note,
)
from kts_helpers.errors import KtsError

__all__ = [
    "BOOTSTRAPS", "INSUFFICIENT_DATA", "METHODS", "SHORT_SERIES_N", "Interval", "ShortSeriesWarning", "StatsError", "df_wording",
    "effective_sample_size", "jitter_ci", "mean_ratio_ci", "min_samples_for_quantile", "percentile",
    "quantile_ci", "quantile_ci_runs", "quantile_interval", "ratio_ci", "ratio_ci_runs", "ratio_of",
    "resolve_block_length", "sample_size_warning", "steady_state_start",
]

METHODS = ("order", "stationary", "circular", "iid")
BOOTSTRAPS = METHODS[1:]
SHORT_SERIES_N = 32  # below this Politis-White is not trusted; block length = ceil(n ** (1/3))


class StatsError(KtsError, ValueError):
    """Bad input to a statistic (too few samples, NaN/inf, q outside (0, 1), ...)."""


class ShortSeriesWarning(UserWarning):
    """The series is too short to estimate a block length; a fallback length was used."""


@dataclass(frozen=True)
class Interval:
    """A point estimate with its interval and how it was obtained.

    ``lo`` is -inf and ``hi`` inf where the data hold no such bound at this confidence;
    ``ess`` (n / tau of the exceedance indicator) and ``lag1`` (dependence) per series for ``"order"``.
    """

    estimate: float
    lo: float
    hi: float
    method: str
    block_length: int | tuple[int, ...] | None
    n: int | tuple[int, ...]
    n_resamples: int
    confidence: float
    degenerate: bool = False  # lo == hi (constant data or fully tied resamples)
    note: str = ""
    ess: float | tuple[float, ...] | None = None
    lag1: float | tuple[float, ...] | None = None

    @property
    def bounded(self) -> bool:
        """Both bounds exist."""
        return math.isfinite(self.hi) and math.isfinite(self.lo)

    def to_dict(self) -> dict:
        """JSON-ready form (tuples become lists, a missing bound None)."""
        d = asdict(self)
        for k in ("block_length", "n", "ess", "lag1"):
            if isinstance(d[k], tuple):
                d[k] = list(d[k])
        for k in ("lo", "hi"):
            if not math.isfinite(d[k]):
                d[k] = None
        return d


# ----------------------------------------------------------------------------- validation

def _as_sample(x: object, name: str = "x", min_n: int = 2) -> np.ndarray:
    try:
        a = np.asarray(x, dtype=np.float64)
    except (TypeError, ValueError):
        raise StatsError(f"{name} must be a sequence of numbers") from None
    if a.ndim != 1:
        raise StatsError(f"{name} must be one-dimensional, got shape {a.shape}")
    if a.size < min_n:
        raise StatsError(f"{name} needs at least {min_n} samples, got {a.size}")
    bad = ~np.isfinite(a)
    if bad.any():
        raise StatsError(f"{name} holds {int(bad.sum())} NaN/inf value(s) (first at index "
                         f"{int(np.argmax(bad))}); drop or fix them first")
    return a


def _check_q(q: object, name: str = "q") -> float:
    if isinstance(q, bool) or not isinstance(q, (int, float, np.integer, np.floating)):
        raise StatsError(f"{name} must be a number in (0, 1), got {q!r}")
    qf = float(q)
    if not 0.0 < qf < 1.0:
        raise StatsError(f"{name} must be in (0, 1) (e.g. 0.99 for p99), got {q!r}")
    return qf


def _check_common(method: str, confidence: float, n_resamples: int) -> None:
    if method not in METHODS:
        raise StatsError(f"method must be one of {', '.join(METHODS)}, got {method!r}")
    if isinstance(confidence, bool) or not isinstance(confidence, (int, float)) or not 0 < confidence < 1:
        raise StatsError(f"confidence must be in (0, 1), got {confidence!r}")
    if isinstance(n_resamples, bool) or not isinstance(n_resamples, (int, np.integer)) or n_resamples < 10:
        raise StatsError(f"n_resamples must be an integer >= 10, got {n_resamples!r}")


def _rng(seed: int | np.random.Generator | None) -> np.random.Generator:
    return seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)


# ----------------------------------------------------------------------------- basics

def percentile(x: Sequence[float] | np.ndarray, q: float) -> float:
    """The q-quantile (q in (0, 1)) with numpy's default linear interpolation."""
    return float(np.quantile(_as_sample(x, min_n=1), _check_q(q)))


def resolve_block_length(x: np.ndarray, method: str, block_length: float | None = None) -> tuple[int, str]:
    """Block length to use and a note; Politis-White (arch) when ``block_length`` is None.

    For n < SHORT_SERIES_N the estimate is meaningless, so ceil(n ** (1/3)) (the rate-optimal
    order) is used and a ShortSeriesWarning is issued.
    """
    n = len(x)
    if method == "iid":
        return 1, ""
    if block_length is not None:
        if isinstance(block_length, bool) or not isinstance(block_length, (int, float, np.integer, np.floating)) \
                or not math.isfinite(block_length) or block_length < 1:
            raise StatsError(f"block_length must be a number >= 1, got {block_length!r}")
        b = min(n, math.ceil(block_length))
        return b, ("" if b == math.ceil(block_length) else f"block length capped at n={n}")
    if n < SHORT_SERIES_N:
        b = max(1, math.ceil(n ** (1 / 3)))
        note = (f"short series: {n} samples < {SHORT_SERIES_N}, too few to estimate a block length; "
                f"used fallback block length {b} = ceil(n^(1/3))")
        warnings.warn(note, ShortSeriesWarning, stacklevel=3)
        return b, note
    if np.ptp(x) == 0:
        return 1, ""
    from arch.bootstrap import optimal_block_length  # arch: ~1 s to import, only for Politis-White

    est = float(optimal_block_length(x)[method].iloc[0])
    if not math.isfinite(est):
        b = max(1, math.ceil(n ** (1 / 3)))
        return b, f"block length estimate not finite; used ceil(n^(1/3)) = {b}"
    return min(n, max(1, math.ceil(est))), ""


# ----------------------------------------------------------------------------- public intervals

def _from_bounds(b: orderstat.Bounds, confidence: float) -> Interval:
    note = "" if math.isfinite(b.hi) else (f"no {100 * confidence:g} % upper bound at n = {b.n} "
                                            f"(~{b.ess:.0f} effective samples)")
    if b.lo == b.hi:
        note = join_notes(note, "constant series" if b.lo == b.estimate else "ties")
    return Interval(b.estimate, b.lo, b.hi, "order", None, b.n, 0, confidence, b.lo == b.hi, note,
                    ess=round(b.ess, 1), lag1=round(b.lag1, 3))


def ratio_of(num: Interval, den: Interval, confidence: float = 0.95, rho: float = 0.0, *,
             shift: float = 0.0) -> Interval:
    """num / den from their two intervals (MOVER on the log scale; ``rho``: their correlation, 0 for two
    independent series; ``shift`` -1 turns a ratio into a change)."""
    lo, hi = orderstat.log_ratio((num.estimate, num.lo, num.hi), (den.estimate, den.lo, den.hi), rho)
    n = (num.n, den.n) if num is not den else num.n
    note = join_notes(*dict.fromkeys(iv.note for iv in (num, den) if iv.note))
    return Interval(num.estimate / den.estimate + shift, lo + shift, hi + shift, "order", None, n, 0,
                    confidence, lo == hi, note, ess=(num.ess, den.ess), lag1=(num.lag1, den.lag1))


def quantile_interval(x: Sequence[float] | np.ndarray, q: float, *, n_resamples: int = 10_000,
                      confidence: float = 0.95, method: str = "order", block_length: float | None = None,
                      seed: int | np.random.Generator | None = None) -> Interval:
    """Interval for the q-quantile of x (numpy linear estimate): ``"order"`` (default) or a bootstrap."""
    a = _as_sample(x)
    q = _check_q(q)
    _check_common(method, confidence, n_resamples)
    if method == "order":
        return _from_bounds(orderstat.quantile_bounds(a, q, confidence), confidence)
    est = float(np.quantile(a, q))
    if np.ptp(a) == 0:
        return Interval(est, est, est, method, None if method == "iid" else 1, len(a), n_resamples,
                        confidence, True, "constant series: every resample gives the same value")
    b, bnote = resolve_block_length(a, method, block_length)
    dist, nf = boot_quantiles(a, q, n_resamples, method, b, _rng(seed))
    lo, hi = pct_interval(dist, confidence)
    degenerate = lo == hi
    note = join_notes(bnote, redraw_note(nf), "all resamples gave the same value (ties)" if degenerate else "")
    return Interval(est, lo, hi, method, None if method == "iid" else b, len(a), n_resamples, confidence,
                    degenerate, note)


def quantile_ci(x: Sequence[float] | np.ndarray, q: float, *, n_resamples: int = 10_000,
                confidence: float = 0.95, method: str = "order", block_length: float | None = None,
                seed: int | np.random.Generator | None = None) -> tuple[float, float]:
    """(lo, hi) of the interval for the q-quantile; see quantile_interval."""
    iv = quantile_interval(x, q, n_resamples=n_resamples, confidence=confidence, method=method,
                           block_length=block_length, seed=seed)
    return iv.lo, iv.hi


def _positive(a: np.ndarray, name: str) -> np.ndarray:
    if np.any(a <= 0):
        raise StatsError(f"{name} must be positive latencies for a ratio; found {int((a <= 0).sum())} value(s) <= 0")
    return a


def ratio_ci(shared: Sequence[float] | np.ndarray, baseline: Sequence[float] | np.ndarray, q: float = 0.99, *,
             n_resamples: int = 10_000, confidence: float = 0.95, method: str = "order",
             block_length: float | None = None, seed: int | np.random.Generator | None = None) -> Interval:
    """DF = shared q-quantile / baseline q-quantile; each side's own interval, the two series independent.

    ``"order"``: MOVER on the log scale of the two order-statistic intervals; a bootstrap resamples the
    two samples independently.
    """
    sh, ba = _positive(_as_sample(shared, "shared"), "shared"), _positive(_as_sample(baseline, "baseline"), "baseline")
    q = _check_q(q)
    _check_common(method, confidence, n_resamples)
    if method == "order":
        return ratio_of(quantile_interval(sh, q, confidence=confidence), quantile_interval(ba, q, confidence=confidence),
                      confidence)
    rng = _rng(seed)
    est = float(np.quantile(sh, q) / np.quantile(ba, q))
    dists, blocks, notes = [], [], []
    for a in (sh, ba):
        b, bnote = resolve_block_length(a, method, block_length) if np.ptp(a) else (1, "")
        d, nf = boot_quantiles(a, q, n_resamples, method, b, rng)
        dists.append(d)
        blocks.append(b)
        notes += [bnote, redraw_note(nf)]
    lo, hi = pct_interval(dists[0] / dists[1], confidence)
    return Interval(est, lo, hi, method, None if method == "iid" else tuple(blocks), (len(sh), len(ba)),
                    n_resamples, confidence, lo == hi, join_notes(*notes))


def jitter_ci(x: Sequence[float] | np.ndarray, hi: float = 0.99, lo: float = 0.50, *, n_resamples: int = 10_000,
              confidence: float = 0.95, method: str = "order", block_length: float | None = None,
              seed: int | np.random.Generator | None = None) -> Interval:
    """Jitter = hi-quantile / lo-quantile (default p99/p50) of ONE series.

    ``"order"``: MOVER of the two quantiles' intervals with their correlation (they come from the same
    sample); a bootstrap takes both quantiles from the same resample.
    """
    a = _positive(_as_sample(x), "x")
    qh, ql = _check_q(hi, "hi"), _check_q(lo, "lo")
    if ql >= qh:
        raise StatsError(f"lo ({lo}) must be below hi ({hi})")
    _check_common(method, confidence, n_resamples)
    if method == "order":
        return ratio_of(quantile_interval(a, qh, confidence=confidence), quantile_interval(a, ql, confidence=confidence),
                      confidence, orderstat.quantile_correlation(ql, qh))
    est = float(np.quantile(a, qh) / np.quantile(a, ql))
    if np.ptp(a) == 0:
        return Interval(est, est, est, method, None if method == "iid" else 1, len(a), n_resamples, confidence,
                        True, "constant series: every resample gives the same value")
    b, bnote = resolve_block_length(a, method, block_length)
    n = len(a)
    (l1, h1), (l2, h2) = bracket(n, qh), bracket(n, ql)
    v, nf = boot_orders(a, [l1, h1, l2, h2], n_resamples, method, b, _rng(seed))
    dist = lerp_quantile(v[:, 0], v[:, 1], n, qh) / lerp_quantile(v[:, 2], v[:, 3], n, ql)
    clo, chi = pct_interval(dist, confidence)
    return Interval(est, clo, chi, method, None if method == "iid" else b, n, n_resamples, confidence,
                    clo == chi, join_notes(bnote, redraw_note(nf)))


def mean_ratio_ci(shared: Sequence[float] | np.ndarray, baseline: Sequence[float] | np.ndarray, *,
                  n_resamples: int = 10_000, confidence: float = 0.95, method: str = "order",
                  block_length: float | None = None, seed: int | np.random.Generator | None = None) -> Interval:
    """Throughput change when shared: baseline_mean / shared_mean - 1.

    Throughput = 1000 / mean(iteration ms) iterations/s, so the change in throughput is
    thr_shared / thr_baseline - 1 = baseline_mean / shared_mean - 1 (-0.3 = 30% fewer
    iterations/s when shared). ``"order"``: each mean's Student-t interval with its series' long-run
    variance, MOVER on the log scale; bootstrap resamples are materialised (O(n * n_resamples)).
    """
    sh, ba = _positive(_as_sample(shared, "shared"), "shared"), _positive(_as_sample(baseline, "baseline"), "baseline")
    _check_common(method, confidence, n_resamples)
    if method == "order":
        ba_b, sh_b = orderstat.mean_bounds(ba, confidence), orderstat.mean_bounds(sh, confidence)
        return ratio_of(_from_bounds(ba_b, confidence), _from_bounds(sh_b, confidence), confidence, shift=-1.0)
    rng = _rng(seed)
    est = float(ba.mean() / sh.mean() - 1)
    means, blocks, notes = [], [], []
    for a in (sh, ba):
        b, bnote = resolve_block_length(a, method, block_length) if np.ptp(a) else (1, "")
        means.append(boot_means(a, n_resamples, method, b, rng))
        blocks.append(b)
        notes.append(bnote)
    lo, hi = pct_interval(means[1] / means[0] - 1, confidence)
    return Interval(est, lo, hi, method, None if method == "iid" else tuple(blocks), (len(sh), len(ba)),
                    n_resamples, confidence, lo == hi, join_notes(*notes))


INSUFFICIENT_DATA = "insufficient data"


def df_wording(lo: float, hi: float) -> str:
    """Plain words for a DF interval: above 1 => degraded; below 1 => faster; around 1 => no detectable change.

    A one-sided interval still decides in its direction ("≥ 1.3": degraded); one that contains 1 and
    lacks a bound cannot say there was no change: insufficient data.
    """
    if math.isnan(lo) or math.isnan(hi) or lo > hi:
        raise StatsError(f"DF interval must have lo <= hi, got ({lo}, {hi})")
    if lo > 1:
        return "degraded"
    if hi < 1:
        return "faster when shared"
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return f"{INSUFFICIENT_DATA} (no {'upper' if math.isfinite(lo) else 'lower'} bound)"
    return "no detectable change"


# ----------------------------------------------------------------------------- repeats (two-level)

def _as_runs(runs: Sequence[Sequence[float] | np.ndarray], name: str) -> list[np.ndarray]:
    if isinstance(runs, np.ndarray) and runs.ndim == 1:
        raise StatsError(f"{name} must be a list of runs (arrays), not one array")
    out = [_as_sample(r, f"{name}[{i}]") for i, r in enumerate(runs)]
    if len(out) < 2:
        raise StatsError(f"{name} needs at least 2 runs for a two-level bootstrap, got {len(out)}; "
                         "use quantile_interval for a single run")
    return out


def _runs_setup(runs: list[np.ndarray], method: str, block_length: float | None) -> tuple[list[int], str]:
    blocks, notes = [], []
    for x in runs:
        b, note = resolve_block_length(x, method, block_length) if np.ptp(x) else (1, "")
        blocks.append(b)
        notes.append(note)
    return blocks, join_notes(*dict.fromkeys(notes))


def quantile_ci_runs(runs: Sequence[Sequence[float] | np.ndarray], q: float, *, n_resamples: int = 10_000,
                     confidence: float = 0.95, method: str = "order", block_length: float | None = None,
                     seed: int | np.random.Generator | None = None) -> Interval:
    """The q-quantile of repeats pooled, with an interval that widens with run-to-run spread.

    ``"order"``: the pooled order-statistic interval with tau also estimated from the runs' scatter
    (``orderstat.between_runs_tau``); bootstrap: two-level (runs, then iterations within each run).
    """
    rs = _as_runs(runs, "runs")
    q = _check_q(q)
    _check_common(method, confidence, n_resamples)
    pooled = np.concatenate(rs)
    if method == "order":
        iv = _from_bounds(orderstat.quantile_bounds(pooled, q, confidence, runs=rs), confidence)
        return replace(iv, n=tuple(len(x) for x in rs))
    est = float(np.quantile(pooled, q))
    blocks, note = _runs_setup(rs, method, block_length)
    dist = pooled_quantiles(rs, q, n_resamples, method, blocks, _rng(seed))
    lo, hi = pct_interval(dist, confidence)
    return Interval(est, lo, hi, method, None if method == "iid" else tuple(blocks), tuple(len(x) for x in rs),
                    n_resamples, confidence, lo == hi, note)


def ratio_ci_runs(shared_runs: Sequence[Sequence[float] | np.ndarray],
                  baseline_runs: Sequence[Sequence[float] | np.ndarray], q: float = 0.99, *,
                  n_resamples: int = 10_000, confidence: float = 0.95, method: str = "order",
                  block_length: float | None = None, seed: int | np.random.Generator | None = None) -> Interval:
    """DF over repeats: each side's pooled interval over its runs, independently, then their ratio."""
    sh = [_positive(x, "shared_runs") for x in _as_runs(shared_runs, "shared_runs")]
    ba = [_positive(x, "baseline_runs") for x in _as_runs(baseline_runs, "baseline_runs")]
    q = _check_q(q)
    _check_common(method, confidence, n_resamples)
    if method == "order":
        iv = ratio_of(quantile_ci_runs(sh, q, confidence=confidence), quantile_ci_runs(ba, q, confidence=confidence),
                    confidence)
        return replace(iv, n=(sum(len(x) for x in sh), sum(len(x) for x in ba)))
    rng = _rng(seed)
    est = float(np.quantile(np.concatenate(sh), q) / np.quantile(np.concatenate(ba), q))
    (bs, ns), (bb, nb) = _runs_setup(sh, method, block_length), _runs_setup(ba, method, block_length)
    dist = pooled_quantiles(sh, q, n_resamples, method, bs, rng) / pooled_quantiles(ba, q, n_resamples, method,
                                                                                      bb, rng)
    lo, hi = pct_interval(dist, confidence)
    return Interval(est, lo, hi, method, None if method == "iid" else tuple(bs + bb),
                    (sum(len(x) for x in sh), sum(len(x) for x in ba)), n_resamples, confidence, lo == hi,
                    join_notes(ns, nb))


# ----------------------------------------------------------------------------- steady state, sample size

def steady_state_start(x: Sequence[float] | np.ndarray, *, fixed: int = 0, detect: bool = True, batch: int = 5,
                       max_fraction: float = 0.5) -> tuple[int, str]:
    """How many leading iterations to drop, and why.

    Rule: max(fixed, MSER-5 truncation point), capped at ``max_fraction`` of the series.
    MSER-5 (White 1997) averages batches of 5 and picks the truncation d that minimises the
    squared standard error of the remaining batch means, sum((Y_i - mean)^2) / (m - d)^2,
    searched over the first ``max_fraction`` of the batches.
    """
    a = _as_sample(x)
    if isinstance(fixed, bool) or not isinstance(fixed, (int, np.integer)) or fixed < 0:
        raise StatsError(f"fixed must be an integer >= 0, got {fixed!r}")
    if not 0 < max_fraction <= 1 or batch < 1:
        raise StatsError("max_fraction must be in (0, 1] and batch >= 1")
    n = len(a)
    cap = int(n * max_fraction)
    reasons = []
    drop = 0
    if fixed:
        drop = min(fixed, cap)
        reasons.append(f"fixed warm-up of {fixed}" + (f" (capped at {cap})" if fixed > cap else ""))
    m = n // batch
    if detect and m >= 4:
        y = a[: m * batch].reshape(m, batch).mean(axis=1)
        s1 = np.cumsum(y[::-1])[::-1]
        s2 = np.cumsum((y * y)[::-1])[::-1]
        cnt = np.arange(m, 0, -1, dtype=np.float64)
        mser = (s2 - s1 * s1 / cnt) / cnt**2
        dmax = max(0, min(m - 2, cap // batch))
        d = int(np.argmin(mser[: dmax + 1]))
        if d * batch > drop:
            drop = d * batch
            reasons.append(f"MSER-{batch} truncation point at iteration {d * batch}")
        else:
            reasons.append(f"MSER-{batch} found no later transient (point {d * batch})")
    elif detect:
        reasons.append(f"too few samples ({n}) for MSER-{batch}")
    return drop, "; ".join(reasons) if reasons else "no truncation requested"


def min_samples_for_quantile(q: float, confidence: float = 0.99) -> int:
    """Smallest n for a one-sided binomial bound on the q-quantile at ``confidence``.

    n is the least such that P(Binomial(n, 1-q) <= 1) <= 1 - confidence: with that
    confidence at least two samples lie beyond the true quantile, so the second most extreme
    sample bounds it without resting on the single maximum. This is the minimum MLPerf
    LoadGen's early-stopping rule needs: 662 for p99 and 64 for p90 at 99% confidence.
    For q < 0.5 the lower tail (probability q) is used.
    """
    q = _check_q(q)
    if isinstance(confidence, bool) or not isinstance(confidence, (int, float)) or not 0 < confidence < 1:
        raise StatsError(f"confidence must be in (0, 1), got {confidence!r}")
    from scipy.stats import binom  # scipy: ~0.6 s to import, loaded at the first interval, not to parse

    t = min(q, 1 - q)
    lo, hi = 2, 4
    while binom.cdf(1, hi, t) > 1 - confidence:
        lo, hi = hi, hi * 2
    while lo < hi:
        mid = (lo + hi) // 2
        if binom.cdf(1, mid, t) <= 1 - confidence:
            hi = mid
        else:
            lo = mid + 1
    return int(lo)


def effective_sample_size(x: Sequence[float] | np.ndarray) -> float:
    """n / (1 + 2 sum rho_k), rho summed by Geyer's initial positive sequence; at most n.

    Consecutive iterations are correlated, so n overstates how much the data know; this is the
    number of independent samples with the same variance of the mean. Constant data => n.
    """
    a = _as_sample(x)
    tau, _ = orderstat.geyer(orderstat.acf(a))
    return float(len(a) / tau)


def sample_size_warning(n: int, q: float = 0.99, *, confidence: float = 0.99, ess: float | None = None) -> str | None:
    """A one-line warning when n (or the effective sample size) is too small for this quantile."""
    need = min_samples_for_quantile(q, confidence)
    name = f"p{100 * q:g}"
    if n < need:
        return (f"only {n} samples: a {name} needs at least {need} for a one-sided "
                f"{100 * confidence:g}%-confidence bound; treat it as indicative")
    if ess is not None and ess < need:
        return (f"{n} samples but only ~{ess:.0f} effective (autocorrelated); a {name} needs {need} "
                f"independent samples for a {100 * confidence:g}% bound; the interval, taken at the effective "
                "sample size, accounts for this, but the estimate is fragile")
    return None

