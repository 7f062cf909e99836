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
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass

import numpy as np

from kts_helpers.analyse.rules import degradation
from kts_helpers.analyse.stats import jitter_ci, mean_ratio_ci, quantile_ci_runs, quantile_interval

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
    covered = below = above = unbounded = one = degraded = 0
    for _ in range(reps):
        lo, hi, reading = draw(rng)
        hit = lo <= truth <= hi
        open_ = not (math.isfinite(lo) and math.isfinite(hi))
        covered += hit
        below += truth < lo
        above += truth > hi
        unbounded += open_
        one += hit and open_
        degraded += reading == "degraded"
    return Cell(statistic, str(n), str(phi), reps, covered, below, above, unbounded, one, degraded)


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
