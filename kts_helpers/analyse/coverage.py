"""How often the kit's 95 % intervals cover the truth, measured where the kit uses them.

Why: an interval is only as good as its coverage at the sizes the kit runs (300-800 iterations, not
10,000), on series as autocorrelated as GPU latencies are. The test series are log-AR(1): log x_t =
phi log x_{t-1} + e_t with the stationary standard deviation ``SIGMA``, so every true quantile is known
(exp(z_q SIGMA)) and so is DF (the ratio of two such series' scales). The same grid runs in the tests
(fewer replications) and in ``make bench`` (the full table, ``bench/results/coverage.md``), and the
README states the full table's numbers. Every interval goes through the kit's own entry points
(``stats`` and ``rules.degradation``), so what is measured is what the report prints.

Each interval is judged against its own nominal level. A two-sided interval should cover 95 %: a cell
passes when its two-sided intervals cover within ``TARGET`` (92-98 %), up to the Monte Carlo error of the
cell itself (its Wilson 95 % interval must reach into ``TARGET``; at 1000 replications about ±1.4 points). Where the data hold no bound (a
p99 from 300 samples has no 95 % upper bound: 0.99^300 > 0.025), the interval is one-sided by design and
its one bound alone should cover at least 97.5 %: those must cover at least ``TARGET[0]``. A cell whose
intervals are almost all one-sided (``NO_BOUND_SHARE``) reads "no bound".

The wider grid (issue 19) adds series like a time-sliced GPU makes them -- the article's tight bulk plus
collisions at random, in Markov bursts or on the beat of two cadences, t3 tails, slowly drifting levels --
judged by ``holds`` (coverage >= 0.93 with an open side counting as covering, each side's miss <= 3.5 %),
and ``decisions``: how often ``verdict.decide`` and each of its two rules read what, under DF = 1 (false
alarms) and true effects (power). Longer than 500 lines: both grids share the cell machinery here, and the
generators must know their exact quantiles, so they live next to it.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from kts_helpers.analyse.rules import degradation
from kts_helpers.analyse.stats import jitter_ci, mean_ratio_ci, quantile_ci_runs, quantile_interval
from kts_helpers.analyse.verdict import (
    DEGRADED,
    FASTER,
    INCONCLUSIVE,
    collided_alpha,
    decide,
    exceedance,
    exceedance_alpha,
)

GRID_N = (300, 800, 5000)
GRID_PHI = (0.0, 0.5, 0.8)
BENCH_N = (300, 800, 2000, 5000)  # 2000: between the kit's sizes, where a p99 bound first appears at phi 0.8
BENCH_PHI = (*GRID_PHI, 0.9)
SIGMA = 0.5  # log-scale standard deviation: a p99 about 3.2x the median, like a GPU latency tail
TARGET = (0.92, 0.98)
NO_BOUND_SHARE = 0.9  # a cell with at least this share of one-sided intervals is "no bound by design"
MIN_JUDGED = 30  # fewer intervals of a kind than this are too few to judge their coverage


def log_ar1(rng: np.random.Generator, n: int, phi: float, scale: float = 1.0, sigma: float = SIGMA) -> np.ndarray:
    """n samples of scale * exp(AR(1)), started from the stationary law (no warm-up transient)."""
    e = rng.normal(0.0, sigma * math.sqrt(1 - phi * phi), n)
    z = np.empty(n)
    z[0] = rng.normal(0.0, sigma)
    if phi == 0:
        z[1:] = e[1:]
    else:
        from scipy.signal import lfilter  # scipy: ~0.6 s to import, only the coverage grid needs it

        z[1:] = lfilter([1.0], [1.0, -phi], e[1:], zi=[phi * z[0]])[0]
    return scale * np.exp(z)


def true_quantile(q: float, scale: float = 1.0, sigma: float = SIGMA) -> float:
    from scipy.stats import norm  # scipy: ~0.6 s to import, only the coverage grid needs it

    return float(scale * math.exp(norm.ppf(q) * sigma))


@dataclass(frozen=True)
class Cell:
    """One cell of the grid: how often the interval held the truth, and how it missed."""

    statistic: str
    n: str
    phi: str
    reps: int
    covered: int
    below: int  # the truth lay below the interval (lower bound too high)
    above: int  # the truth lay above it (upper bound too low)
    unbounded: int  # intervals with a missing bound (one-sided by design)
    covered_one_sided: int = 0  # of those, how many held the truth
    degraded: int = 0  # DF cells: readings "degraded" (a false alarm when the true DF is 1)

    @property
    def coverage(self) -> float:
        return self.covered / self.reps

    @property
    def two_sided(self) -> float | None:
        """Coverage of the two-sided intervals alone (None when there are none)."""
        k = self.reps - self.unbounded
        return (self.covered - self.covered_one_sided) / k if k else None

    @property
    def one_sided(self) -> float | None:
        return self.covered_one_sided / self.unbounded if self.unbounded else None

    @property
    def verdict(self) -> str:
        """"ok", "no bound" (one-sided by design), or what went wrong (each kind against its own level)."""
        lo, hi = TARGET
        k1, k2 = self.unbounded, self.reps - self.unbounded
        if k1 >= MIN_JUDGED and wilson(self.covered_one_sided, k1)[1] < lo:
            return "under-covers (one-sided)"
        if k1 >= NO_BOUND_SHARE * self.reps or k2 < MIN_JUDGED:
            return "no bound"
        w_lo, w_hi = wilson(self.covered - self.covered_one_sided, k2)
        return "ok" if w_hi >= lo and w_lo <= hi else "under-covers" if w_hi < lo else "over-covers"

    def to_dict(self) -> dict:
        return {**asdict(self), "coverage": self.coverage, "two_sided": self.two_sided,
                "one_sided": self.one_sided, "verdict": self.verdict}


def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """Wilson score interval of a proportion k / n: the Monte Carlo error of a measured coverage."""
    p = k / n
    c = z * z / n
    mid = (p + c / 2) / (1 + c)
    half = z * math.sqrt(p * (1 - p) / n + c / (4 * n)) / (1 + c)
    return mid - half, mid + half


def _cell(statistic: str, n: object, phi: object, reps: int, truth: float,
          draw: Callable[[np.random.Generator], tuple[float, float, str | None]], seed: int) -> Cell:
    rng = np.random.default_rng(seed)
    return _matrix_cell(statistic, n, phi, truth, (draw(rng) for _ in range(reps)), reps)


def quantile_cell(q: float, n: int, phi: float, reps: int, *, seed: int = 0, method: str = "order",
                  n_resamples: int = 2000) -> Cell:
    """Coverage of the q-quantile's interval (``stats.quantile_interval``) on log-AR(1) series."""
    def draw(rng: np.random.Generator) -> tuple[float, float, None]:
        iv = quantile_interval(log_ar1(rng, n, phi), q, method=method, n_resamples=n_resamples,
                               seed=int(rng.integers(2**31)))
        return iv.lo, iv.hi, None

    label = f"p{100 * q:g}" + ("" if method == "order" else f" ({method} bootstrap)")
    return _cell(label, n, phi, reps, true_quantile(q), draw, seed)


def df_cell(n_alone: int, phi_alone: float, n_shared: int, phi_shared: float, reps: int, *, df: float = 1.0,
            seed: int = 0) -> Cell:
    """Coverage of DF's interval and how often it reads "degraded", from ``rules.degradation`` itself."""
    def draw(rng: np.random.Generator) -> tuple[float, float, str]:
        d = degradation([log_ar1(rng, n_shared, phi_shared, scale=df)], [log_ar1(rng, n_alone, phi_alone)], 0.99)
        return d.lo, d.hi, d.reading

    n = str(n_alone) if n_alone == n_shared else f"{n_alone}/{n_shared}"
    phi = str(phi_alone) if phi_alone == phi_shared else f"{phi_alone}/{phi_shared}"
    return _cell(f"DF = {df:g}", n, phi, reps, df, draw, seed)


def jitter_cell(n: int, phi: float, reps: int, *, seed: int = 0) -> Cell:
    def draw(rng: np.random.Generator) -> tuple[float, float, None]:
        iv = jitter_ci(log_ar1(rng, n, phi))
        return iv.lo, iv.hi, None

    return _cell("jitter p99/p50", n, phi, reps, true_quantile(0.99) / true_quantile(0.5), draw, seed)


def throughput_cell(n: int, phi: float, reps: int, *, change: float = -0.2, seed: int = 0) -> Cell:
    """Throughput change = alone mean / shared mean - 1, the shared series slower by 1 / (1 + change)."""
    def draw(rng: np.random.Generator) -> tuple[float, float, None]:
        iv = mean_ratio_ci(log_ar1(rng, n, phi, scale=1 / (1 + change)), log_ar1(rng, n, phi))
        return iv.lo, iv.hi, None

    return _cell(f"throughput change {100 * change:+g} %", n, phi, reps, change, draw, seed)


def repeats_cell(q: float, runs: int, n: int, phi: float, spread: float, reps: int, *, seed: int = 0) -> Cell:
    """Pooled repeats whose levels differ by exp(N(0, spread)): the truth is the mixture's q-quantile."""
    truth = true_quantile(q, sigma=math.hypot(SIGMA, spread))  # log x = run level + AR(1): both variances

    def draw(rng: np.random.Generator) -> tuple[float, float, None]:
        rs = [log_ar1(rng, n, phi, scale=math.exp(rng.normal(0, spread))) for _ in range(runs)]
        iv = quantile_ci_runs(rs, q)
        return iv.lo, iv.hi, None

    return _cell(f"p{100 * q:g}, {runs} repeats, run spread {spread:g}", f"{runs}x{n}", phi, reps, truth, draw, seed)


def grid(reps: int, *, phis: Iterable[float] = GRID_PHI, ns: Iterable[int] = GRID_N, seed: int = 0,
         with_bootstrap: bool = False, bootstrap_reps: int | None = None) -> list[Cell]:
    """The full grid: p50/p95/p99, jitter and throughput at every (n, phi); DF with alone and shared alike and
    unlike; repeats. ``with_bootstrap``: the stationary bootstrap's p99 next to it, as it was before."""
    phis, ns = tuple(phis), tuple(ns)
    cells = []
    for phi in phis:
        for n in ns:
            k = seed + 1000 * int(10 * phi) + n
            cells += [quantile_cell(q, n, phi, reps, seed=k) for q in (0.5, 0.95, 0.99)]
            if with_bootstrap:
                cells.append(quantile_cell(0.99, n, phi, bootstrap_reps or reps, seed=k, method="stationary"))
            cells.append(jitter_cell(n, phi, reps, seed=k + 1))
            cells.append(throughput_cell(n, phi, reps, seed=k + 2))
            cells.append(df_cell(n, phi, n, phi, reps, seed=k + 3))
    for n in ns:  # alone more autocorrelated than shared (the H200 reference), and the reverse
        cells.append(df_cell(n, 0.8, n, 0.0, reps, seed=seed + n + 7))
        cells.append(df_cell(n, 0.0, n, 0.8, reps, seed=seed + n + 8))
        cells.append(df_cell(n, 0.8, n, 0.5, reps, df=1.5, seed=seed + n + 9))
    for phi in (0.0, 0.8):
        for spread in (0.0, 0.1):
            cells.append(repeats_cell(0.99, 3, 300, phi, spread, reps, seed=seed + 11))
    return cells


def markdown(cells: Iterable[Cell]) -> str:
    """The table the README and bench/results/coverage.md show."""
    lines = ["| statistic | n | φ (lag-1) | coverage | two-sided: coverage | one-sided: share, coverage "
             "| truth below / above | DF read \"degraded\" | verdict |", "|---|---|---|---|---|---|---|---|---|"]

    def pct(v: float | None) -> str:
        return "—" if v is None else f"{v:.3f}"

    for c in cells:
        deg = f"{c.degraded / c.reps:.3f}" if c.statistic.startswith("DF") else ""
        lines.append(f"| {c.statistic} | {c.n} | {c.phi} | {c.coverage:.3f} | {pct(c.two_sided)} "
                     f"| {c.unbounded / c.reps:.2f}, {pct(c.one_sided)} | {c.below / c.reps:.3f} / "
                     f"{c.above / c.reps:.3f} | {deg} | {c.verdict} |")
    return "\n".join(lines)


# ----------------------------------------------------------------------------- the wider grid (issue 19)
# Series like the ones a GPU time-slice produces: a tight lognormal bulk (the article's FFT: median 0.56 ms,
# 5 % spread) plus collisions with a neighbour that add U[0, 2.4 ms] to 1.7 % of the iterations -- at random,
# in Markov bursts, or on the beat of two fixed cadences -- and heavy tails and slowly drifting levels. Every
# generator knows its true marginal quantiles, so the p99, DF and tail-share truths are exact.

ARTICLE_MEDIAN_MS = 0.56
ARTICLE_SPREAD = 0.05  # log-scale standard deviation of the uncontended bulk
COLLISION_SHARE = 0.017
COLLISION_WAIT_MS = 2.4
BEAT = 35  # iterations between collisions at the article's cadences (100 ms vs 150 ms sleeps)


@dataclass(frozen=True)
class Generator:
    """A family of series: ``draw(rng, reps, n)`` gives a (reps, n) array, ``quantile(q)`` the true marginal one."""

    name: str
    draw: Callable[[np.random.Generator, int, int], np.ndarray]
    quantile: Callable[[float], float]
    exceed: Callable[[float], float]  # P(X > x): the true tail share above a threshold
    # (reps, n) values and which iterations collided (their added wait): the collided launches' own test
    flagged: Callable[[np.random.Generator, int, int], tuple[np.ndarray, np.ndarray]] | None = None


def _log_ar1_matrix(rng: np.random.Generator, reps: int, n: int, phi: float, sigma: float) -> np.ndarray:
    e = rng.normal(0.0, sigma * math.sqrt(1 - phi * phi), (reps, n))
    e[:, 0] = rng.normal(0.0, sigma, reps)
    if phi == 0:
        return e
    from scipy.signal import lfilter  # scipy: ~0.6 s to import, needed here only

    return lfilter([1.0], [1.0, -phi], e, axis=1)  # z_0 = e_0 ~ N(0, sigma): started stationary


def lognormal(phi: float = 0.0, *, median: float = ARTICLE_MEDIAN_MS, spread: float = ARTICLE_SPREAD,
              scale: float = 1.0) -> Generator:
    """median * exp(AR(1)) with lag-1 autocorrelation phi (0: i.i.d.): a bulk that drifts slowly when phi ~ 0.9."""
    from scipy.stats import norm  # scipy: ~0.6 s to import, needed here only

    m = median * scale
    return Generator(f"lognormal φ {phi:g}" + ("" if scale == 1 else f" ×{scale:g}"),
                     lambda rng, reps, n: m * np.exp(_log_ar1_matrix(rng, reps, n, phi, spread)),
                     lambda q: float(m * math.exp(norm.ppf(q) * spread)),
                     lambda x: float(norm.sf(math.log(x / m) / spread)) if x > 0 else 1.0)


def heavy_tailed(df: float = 3.0, *, median: float = ARTICLE_MEDIAN_MS, spread: float = 0.1) -> Generator:
    """median * exp(spread * t_df): a tail far heavier than lognormal."""
    from scipy.stats import t  # scipy: ~0.6 s to import, needed here only

    return Generator(f"log-t{df:g}", lambda rng, reps, n: median * np.exp(spread * rng.standard_t(df, (reps, n))),
                     lambda q: float(median * math.exp(spread * t.ppf(q, df))),
                     lambda x: float(t.sf(math.log(x / median) / spread, df)) if x > 0 else 1.0)


def _mixture_cdf(x: float, share: float, wait: float, median: float, spread: float) -> float:
    """P(X <= x) for lognormal bulk + (with prob. share) U[0, wait]."""
    from scipy.stats import norm  # scipy: ~0.6 s to import, needed here only

    def bulk(v: np.ndarray) -> np.ndarray:
        out = np.zeros_like(v)
        pos = v > 0
        out[pos] = norm.cdf(np.log(v[pos] / median) / spread)
        return out

    u = (np.arange(2000) + 0.5) / 2000 * wait
    return float((1 - share) * bulk(np.array([x]))[0] + share * bulk(x - u).mean())


def collisions(kind: str = "random", *, share: float = COLLISION_SHARE, wait: float = COLLISION_WAIT_MS,
               burst: float = 3.0, median: float = ARTICLE_MEDIAN_MS, spread: float = ARTICLE_SPREAD) -> Generator:
    """The article's bulk plus collisions that add U[0, wait] ms to a ``share`` of iterations.

    ``kind``: "random" (independent), "bursty" (a Markov chain with mean burst ``burst``), "periodic" (on a
    phase that advances 1 / ``BEAT`` per iteration with a little jitter: collisions 35 or 70 iterations
    apart, the wait set by where in the neighbour's busy window the launch falls). The marginal law is the
    same for all three: only how the collisions cluster differs.
    """
    from scipy.optimize import brentq  # scipy: ~0.6 s to import, needed here only

    def flagged(rng: np.random.Generator, reps: int, n: int) -> tuple[np.ndarray, np.ndarray]:
        bulk = median * np.exp(rng.normal(0.0, spread, (reps, n)))
        hit, depth = collision_flags(kind, rng, reps, n, share=share, burst=burst)
        return bulk + np.where(hit, depth * wait, 0.0), hit

    def draw(rng: np.random.Generator, reps: int, n: int) -> np.ndarray:
        return flagged(rng, reps, n)[0]

    def quantile(q: float) -> float:
        return float(brentq(lambda x: _mixture_cdf(x, share, wait, median, spread) - q, median * 0.5,
                            median * 3 + wait, xtol=1e-10))

    label = f"{kind} collisions {100 * share:g} %" + (f" (burst {burst:g})" if kind == "bursty" else "")
    return Generator(label, draw, quantile, lambda x: 1.0 - _mixture_cdf(x, share, wait, median, spread), flagged)


def collision_flags(kind: str, rng: np.random.Generator, reps: int, n: int, *, share: float = COLLISION_SHARE,
                    burst: float = 3.0) -> tuple[np.ndarray, np.ndarray]:
    """(hit, depth): which iterations meet a busy neighbour, and how much of a full wait each pays (0-1).

    "random": independent; "bursty": a Markov chain with mean burst ``burst``; "periodic": on a phase that
    advances 1 / ``BEAT`` per iteration with a little jitter (the depth set by where in the neighbour's busy
    window the launch falls). Drawn in the order ``collisions`` always drew them, so seeds reproduce.
    """
    if kind == "random":
        return rng.random((reps, n)) < share, rng.uniform(0.0, 1.0, (reps, n))
    if kind == "bursty":
        stay = 1 - 1 / burst
        enter = share * (1 - stay) / (1 - share)
        hit = np.empty((reps, n), bool)
        hit[:, 0] = rng.random(reps) < share
        u = rng.random((reps, n))
        for i in range(1, n):
            hit[:, i] = np.where(hit[:, i - 1], u[:, i] < stay, u[:, i] < enter)
        return hit, rng.uniform(0.0, 1.0, (reps, n))
    if kind == "periodic":
        step = 1 / BEAT + rng.normal(0.0, 0.002, (reps, n))
        step[:, 0] = rng.random(reps)
        phase = np.cumsum(step, axis=1) % 1.0
        return phase < share, (share - phase) / share
    raise ValueError(f"unknown collision kind {kind!r}")


def _matrix_cell(statistic: str, n: object, phi: object, truth: float, rows: Iterable[tuple[float, float, str | None]],
                 reps: int) -> Cell:
    covered = below = above = unbounded = one = degraded = 0
    for lo, hi, reading in rows:
        hit = lo <= truth <= hi
        open_ = not (math.isfinite(lo) and math.isfinite(hi))
        covered += hit
        below += truth < lo
        above += truth > hi
        unbounded += open_
        one += hit and open_
        degraded += reading == "degraded"
    return Cell(statistic, str(n), str(phi), reps, covered, below, above, unbounded, one, degraded)


def series_quantile_cell(gen: Generator, n: int, reps: int, *, q: float = 0.99, seed: int = 0,
                         method: str = "order", n_resamples: int = 1000) -> Cell:
    """Coverage of the q-quantile's interval (``stats.quantile_interval``) on one generator's series."""

    xs = gen.draw(np.random.default_rng(seed), reps, n)

    def rows() -> Iterable[tuple[float, float, None]]:
        for i, x in enumerate(xs):
            iv = quantile_interval(x, q, method=method, n_resamples=n_resamples, seed=seed + i)
            yield iv.lo, iv.hi, None

    label = f"p{100 * q:g}" + ("" if method == "order" else f" ({method} bootstrap)")
    return _matrix_cell(label, n, gen.name, gen.quantile(q), rows(), reps)


def series_df_cell(alone: Generator, shared: Generator, n: int, reps: int, *, q: float = 0.99, seed: int = 0,
                   method: str = "order", n_resamples: int = 1000) -> Cell:
    """Coverage of DF's interval (``rules.degradation``) with alone and shared from two generators."""

    rng = np.random.default_rng(seed)
    xa, xs = alone.draw(rng, reps, n), shared.draw(rng, reps, n)
    truth = shared.quantile(q) / alone.quantile(q)

    def rows() -> Iterable[tuple[float, float, str]]:
        for i in range(reps):
            d = degradation([xs[i]], [xa[i]], q, method=method, n_resamples=n_resamples, seed=seed + i)
            yield d.lo, d.hi, d.reading

    label = f"DF = {truth:.3g}" + ("" if method == "order" else f" ({method} bootstrap)")
    return _matrix_cell(label, n, f"{alone.name} / {shared.name}", truth, rows(), reps)


@dataclass(frozen=True)
class Decisions:
    """How often each rule and the combined verdict decided what, on pairs of series with a known truth."""

    alone: str
    shared: str
    n: int
    reps: int
    true_df: float
    df_degraded: int  # DF rule alone: lower bound > 1
    df_faster: int  # upper bound < 1
    ex_degraded: int  # exceedance test alone (ladder-corrected p <= (1 - confidence) / 2)
    ex_faster: int
    degraded: int  # the combined verdict
    faster: int
    no_change: int
    inconclusive: int
    ex_ratio_covered: int  # the exceedance ratio's interval held the true ratio at the true alone p99
    seconds: float

    def to_dict(self) -> dict:
        return asdict(self)


def decisions(alone: Generator, shared: Generator, n: int, reps: int, *, seed: int = 0, q: float = 0.99,
              margin: float = 0.10) -> Decisions:
    """Run ``verdict.decide`` on ``reps`` independent pairs and count what each rule said."""


    rng = np.random.default_rng(seed)
    xa, xs = alone.draw(rng, reps, n), shared.draw(rng, reps, n)
    thr = alone.quantile(q)
    true_ratio = shared.exceed(thr) / alone.exceed(thr)
    counts = dict.fromkeys(("dd", "df", "ed", "ef", "d", "f", "e", "i", "rc"), 0)
    t0 = time.perf_counter()
    alpha = exceedance_alpha(design="one block")  # the level the tail test decides at in a one-block verdict
    for i in range(reps):
        v = decide([xs[i]], [xa[i]], q=q, margin=margin)
        counts["dd"] += v.df.lo > 1
        counts["df"] += v.df.hi < 1
        # the raw series' test (its ratio is the true one's estimate); the verdict publishes the scaled one
        ex = exceedance([xs[i]], [xa[i]], q=q)
        if ex is not None:
            counts["ed"] += ex.p_more <= alpha
            counts["ef"] += ex.p_less <= alpha
            counts["rc"] += ex.lo <= true_ratio <= ex.hi
        counts["d"] += v.reading == DEGRADED
        counts["f"] += v.reading == FASTER
        counts["i"] += v.reading == INCONCLUSIVE
        counts["e"] += v.reading not in (DEGRADED, FASTER, INCONCLUSIVE)
    dt = time.perf_counter() - t0
    return Decisions(alone.name, shared.name, n, reps, shared.quantile(q) / alone.quantile(q), counts["dd"],
                     counts["df"], counts["ed"], counts["ef"], counts["d"], counts["f"], counts["e"], counts["i"],
                     counts["rc"], round(dt, 2))


@dataclass(frozen=True)
class CollidedDecisions:
    """The verdict with the neighbours' timestamps: how often the collided launches' test, and the combined
    verdict, read what, on pairs whose shared iterations carry collision flags."""

    alone: str
    shared: str
    flags: str  # "own collisions" (the shared generator's: power) or an independent kind (false alarms)
    n: int
    reps: int
    true_df: float
    mean_collided: float  # flagged launches per shared series
    collided_degraded: int  # the collided launches' test alone: p <= verdict.collided_alpha(one block, timestamps)
    degraded: int  # the combined verdict, flags given
    faster: int
    no_change: int
    inconclusive: int
    degraded_without: int  # the combined verdict on the same pairs without flags
    seconds: float

    def to_dict(self) -> dict:
        return asdict(self)


def collided_decisions(alone: Generator, shared: Generator, n: int, reps: int, *, flags: str | None = None,
                       seed: int = 0, q: float = 0.99, margin: float = 0.10) -> CollidedDecisions:
    """``verdict.decide`` with and without ``collided`` on ``reps`` pairs. ``flags`` None: the shared
    generator's own collisions are flagged (they cost time: power); a kind ("random", "bursty", "periodic"):
    flags drawn independently of the values, as launches that met a neighbour which cost nothing (false alarms)."""
    rng = np.random.default_rng(seed)
    xa = alone.draw(rng, reps, n)
    if flags is None:
        if shared.flagged is None:
            raise ValueError(f"{shared.name} has no collisions to flag")
        xs, hit = shared.flagged(rng, reps, n)
    else:
        xs = shared.draw(rng, reps, n)
        hit, _depth = collision_flags(flags, rng, reps, n)
    alpha = collided_alpha(design="one block, timestamps")
    counts = dict.fromkeys(("cd", "d", "f", "e", "i", "dw"), 0)
    t0 = time.perf_counter()
    for i in range(reps):
        v = decide([xs[i]], [xa[i]], q=q, margin=margin, collided=[hit[i]])
        counts["cd"] += v.collided is not None and v.collided.p_more <= alpha
        counts["d"] += v.reading == DEGRADED
        counts["f"] += v.reading == FASTER
        counts["i"] += v.reading == INCONCLUSIVE
        counts["e"] += v.reading not in (DEGRADED, FASTER, INCONCLUSIVE)
        counts["dw"] += decide([xs[i]], [xa[i]], q=q, margin=margin).reading == DEGRADED
    return CollidedDecisions(alone.name, shared.name, "own collisions" if flags is None else f"{flags}, no cost", n,
                             reps, shared.quantile(q) / alone.quantile(q), float(hit.sum(axis=1).mean()),
                             counts["cd"], counts["d"], counts["f"], counts["e"], counts["i"], counts["dw"],
                             round(time.perf_counter() - t0, 2))


def collided_pairs() -> list[tuple[str, Generator, Generator, str | None]]:
    """(what it measures, alone, shared, flags): DF = 1 with collisions that cost nothing, of every kind, on
    every false-alarm pair of the decision grid; then collisions that cost time, flagged."""
    out = [("false alarm", a, s, kind) for kind_, a, s in decision_pairs() if kind_ == "false alarm"
           for kind in ("random", "bursty", "periodic")]
    iid = lognormal()
    out += [("power", iid, collisions(kind), None) for kind in ("random", "bursty", "periodic")]
    out += [("power", iid, collisions(kind, wait=0.3), None) for kind in ("random", "periodic")]  # a small cost
    return out


def collided_grid(reps: int, *, ns: Iterable[int] = (800, 2000), seed: int = 0
                  ) -> list[tuple[str, CollidedDecisions]]:
    return [(kind, collided_decisions(a, s, n, reps, flags=flags, seed=seed + 100 * j + n))
            for n in ns for j, (kind, a, s, flags) in enumerate(collided_pairs())]


def collided_markdown(rows: Iterable[tuple[str, CollidedDecisions]]) -> str:
    lines = ["| measures | alone / shared | flagged launches | n | true DF | mean flagged | collided test: degraded | "
             "verdict with flags: degraded / faster / no change / inconclusive | verdict without flags: degraded |",
             "|---|---|---|---|---|---|---|---|---|"]
    for kind, d in rows:
        r = d.reps
        lines.append(f"| {kind} | {d.alone} / {d.shared} | {d.flags} | {d.n} | {d.true_df:.3g} | {d.mean_collided:.1f} | "
                     f"{d.collided_degraded / r:.3f} | {d.degraded / r:.3f} / {d.faster / r:.3f} / {d.no_change / r:.3f}"
                     f" / {d.inconclusive / r:.3f} | {d.degraded_without / r:.3f} |")
    return "\n".join(lines)


# ----------------------------------------------------------------------------- the issue-19 grid and decisions
WIDE_N = (300, 800, 2000)
MIN_COVERAGE = 0.93  # each cell at n >= 800: two-sided coverage (an open side counts as covering) ...
MAX_SIDE_MISS = 0.035  # ... and neither side missing more often than this


def wide_series() -> list[Generator]:
    """The generators of the wider p99 grid."""
    return [collisions("random"), collisions("bursty"), collisions("periodic"), heavy_tailed(),
            lognormal(0.0), lognormal(0.9), lognormal(0.95)]


def df_pairs() -> list[tuple[Generator, Generator]]:
    """(alone, shared) pairs of the DF grid: DF = 1 under dependence of every kind, then true effects."""
    iid = lognormal()
    return [(collisions("bursty"), collisions("bursty")), (collisions("periodic"), collisions("periodic")),
            (heavy_tailed(), heavy_tailed()), (lognormal(0.95), lognormal(0.95)), (lognormal(0.9), iid),
            (iid, lognormal(0.9)), (collisions("random"), collisions("random")),
            (iid, collisions("random")), (iid, collisions("bursty")), (iid, collisions("periodic")),
            (lognormal(0.5), lognormal(0.5, scale=1.3)), (iid, lognormal(scale=0.85))]


def holds(cell: Cell) -> bool:
    """The issue-19 criterion: coverage >= MIN_COVERAGE and each side's miss <= MAX_SIDE_MISS."""
    return (cell.coverage >= MIN_COVERAGE and cell.below / cell.reps <= MAX_SIDE_MISS
            and cell.above / cell.reps <= MAX_SIDE_MISS)


def wide_grid(reps: int, *, ns: Iterable[int] = WIDE_N, seed: int = 0, bootstrap_reps: int = 0) -> list[Cell]:
    """p99 and DF coverage on the wider generators; ``bootstrap_reps`` > 0 adds the stationary bootstrap's rows."""
    cells = []
    for n in ns:
        for j, g in enumerate(wide_series()):
            cells.append(series_quantile_cell(g, n, reps, seed=seed + 100 * j + n))
            if bootstrap_reps:
                cells.append(series_quantile_cell(g, n, bootstrap_reps, seed=seed + 100 * j + n, method="stationary"))
        for j, (a, s) in enumerate(df_pairs()):
            cells.append(series_df_cell(a, s, n, reps, seed=seed + 100 * j + n + 7))
    return cells


def decision_pairs() -> list[tuple[str, Generator, Generator]]:
    """(what it measures, alone, shared): false alarms under DF = 1, then power."""
    iid = lognormal()
    return [("false alarm", collisions("bursty"), collisions("bursty")),
            ("false alarm", lognormal(0.95), lognormal(0.95)),
            ("false alarm", lognormal(0.9), iid), ("false alarm", iid, lognormal(0.9)),
            ("false alarm", collisions("periodic"), collisions("periodic")),
            ("false alarm", collisions("random"), collisions("random")),
            ("false alarm", heavy_tailed(), heavy_tailed()), ("false alarm", iid, iid),
            ("power", iid, collisions("random")), ("power", iid, collisions("bursty")),
            ("power", iid, collisions("periodic")), ("power", lognormal(0.5), lognormal(0.5, scale=1.3)),
            ("power (faster)", iid, lognormal(scale=0.85))]


def decision_grid(reps: int, *, ns: Iterable[int] = (300, 800, 2000), seed: int = 0) -> list[tuple[str, Decisions]]:
    return [(kind, decisions(a, s, n, reps, seed=seed + 100 * j + n))
            for n in ns for j, (kind, a, s) in enumerate(decision_pairs())]


def wide_markdown(cells: Iterable[Cell]) -> str:
    lines = ["| statistic | n | series (alone / shared) | coverage | below / above | open side | holds (≥ 0.93, "
             "each side ≤ 3.5 %) |", "|---|---|---|---|---|---|---|"]
    for c in cells:
        judged = int(c.n) >= 800 if c.n.isdigit() else True
        mark = ("yes" if holds(c) else "**no**") if judged else ("(yes)" if holds(c) else "(no)")
        lines.append(f"| {c.statistic} | {c.n} | {c.phi} | {c.coverage:.3f} | {c.below / c.reps:.3f} / "
                     f"{c.above / c.reps:.3f} | {c.unbounded / c.reps:.2f} | {mark} |")
    return "\n".join(lines)


def decisions_markdown(rows: Iterable[tuple[str, Decisions]]) -> str:
    lines = ["| measures | alone / shared | n | true DF | DF rule: degraded / faster | exceedance: degraded / "
             "faster | verdict: degraded / faster / no change / inconclusive | exceedance ratio covers |",
             "|---|---|---|---|---|---|---|---|"]
    for kind, d in rows:
        r = d.reps
        lines.append(f"| {kind} | {d.alone} / {d.shared} | {d.n} | {d.true_df:.3g} | {d.df_degraded / r:.3f} / "
                     f"{d.df_faster / r:.3f} | {d.ex_degraded / r:.3f} / {d.ex_faster / r:.3f} | {d.degraded / r:.3f} / "
                     f"{d.faster / r:.3f} / {d.no_change / r:.3f} / {d.inconclusive / r:.3f} | "
                     f"{d.ex_ratio_covered / r:.3f} |")
    return "\n".join(lines)


# -- the committed measurement, as the report's Methods quotes it ----------------------------------------------
COMMITTED_GRID = Path(__file__).resolve().parents[2] / "bench" / "reference" / "cpu-2026-11-30-issue19-coverage-wide.json"


@dataclass(frozen=True)
class MethodCoverage:
    """How one interval method's p99 covered on the committed wider grid at one n: the worst cell."""

    method: str  # "order" or the bootstrap's name
    n: int
    cells: int
    worst: float  # lowest coverage over the grid's series
    worst_series: str
    worst_above: float  # that cell's share of misses above the truth


def committed_p99_coverage(n: int = 800, path: Path = COMMITTED_GRID) -> list[MethodCoverage]:
    """The p99 rows of the committed grid (``make bench`` wrote it) at ``n``, per method; [] without the file.

    Why from a file: the report states why its default interval is not the bootstrap with the numbers measured
    for that claim, not with numbers typed into a sentence.
    """
    if not path.is_file():
        return []
    out = []
    cells = [c for c in json.loads(path.read_text())["cells"] if c["n"] == str(n)]
    for label, method in (("p99", "order"), ("p99 (stationary bootstrap)", "stationary")):
        rows = [c for c in cells if c["statistic"] == label]
        if rows:
            worst = min(rows, key=lambda c: c["coverage"])
            out.append(MethodCoverage(method, n, len(rows), float(worst["coverage"]), str(worst["phi"]),
                                      worst["above"] / worst["reps"]))
    return out
