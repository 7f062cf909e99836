"""Block-paired inference for the warm design: many short alone and shared blocks, alternating (issue 43).

Why: a tenant's speed moves between blocks (the host's launch speed, clocks, neighbours' residue), by 2-15 % of
the median for real models. With 3 alone and 2 shared blocks that drift was estimated from five medians (a t with
3 degrees of freedom) and the median test held 30 % of the level, so a +42 % slowdown in both shared blocks read
"inconclusive". The warm design alternates alone r1, shared r1, alone r2, ..., shared rB, alone rB+1: each shared
block sits between two alone blocks of the same minute. Here the 2B + 1 block statistics, in run order, are
regressed on an intercept, a linear time trend and the shared indicator (``paired``): the indicator's coefficient
is the log sharing effect, against the residual scatter with 2B - 2 degrees of freedom. A level or a linear drift
is absorbed by the intercept and the trend, a slow (OU, AR, step) drift mostly cancels in the alternation, and
whatever is left is in the residual, so it widens the test instead of reading as sharing.

The median is also read by the local pairing the alternation gives (``neighbours``: each shared block against its
two neighbouring alone blocks), which a slow wander or a step cannot move; the verdict takes the stronger of the
two at half the level each (``BlockPair.level_p``).

Two statistics are tested by the regression (``BlockPair``):

- **median**: each block's log median -- the bulk's sharing effect;
- **tail shape**: each block's log(p95 / p50) (``TAIL_Q``) -- how far the tail reaches beyond the bulk. Its
  between-block term is the blocks' own scatter, so alone blocks whose tails vary as much as shared ones do read as
  drift, not as sharing (the pooled exceedance test, with no such term, read 8 % false slowdowns when the tail's
  width moved by log-sd 0.3 between blocks). p95 rather than p99: a 100-iteration block holds five samples beyond
  its p95 and one beyond its p99.

"No change within ±margin" (``BlockPair.within``): two one-sided t tests put the block-paired median within the
margin, and the tail's shape shows no change either way; the verdict also holds the p99 to the margin. The p95
itself (``quantile``) is shown beside them.

**The host's speed as a covariate** (issue 52). A GPU host's vCPUs switch between two speeds (the same interpreter
work 0.29-0.30 or 0.48-0.53 ms, from one second to the next), and a launch-bound tenant's step follows: across
the alone blocks of a 19-block H100 run the log block median tracked the log host probe (correlation 0.875 for
BERT, 0.83 for llama-decode). The worker times a fixed piece of interpreter work after every iteration
(``host_probe_ms``); each block's median probe (``host_levels``) enters the median's and the p95's regressions
beside the trend, and the local pairing's as each triple's probe difference, so the effect is sharing's at equal
host speed. The adjustment assumes the probe measures the host, not sharing: ``balance`` checks it on every run
(the probe's block levels regressed like the median's) and where sharing moved it the verdict does not adjust
and says what the host's change accounts for. It also assumes a log-linear link between the host's speed and
the step (one slope per tenant and clock, fitted on all blocks).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

MIN_SHARED_BLOCKS = 3  # fewer: the regression has fewer than 4 residual degrees of freedom (bracketed: 2 shared)
MIN_HOST_BLOCKS = 4  # fewer shared blocks: the host covariate is not fitted (it would leave the local pairing 1 df)
TAIL_Q = 0.95
MIN_BLOCK_N = 20  # a block with fewer timed iterations has no p95 to speak of; it is left out of the tail test
BALANCE_ALPHA = 0.05  # two-sided: the host probe moved between alone and shared blocks at this level -> no adjustment


def order(n_shared: int, n_alone: int, times: tuple[Sequence[float], Sequence[float]] | None = None
          ) -> tuple[np.ndarray, np.ndarray] | None:
    """The run-order positions of the shared and the alone blocks, or None where the design is not interleaved.

    ``times``: each block's start (shared, alone), any clock: the positions are those instants (seconds or ns; the
    regression standardises them), so a linear drift is removed as a drift in time, not in rank (the audit: blocks of
    unequal length placed by rank leaked a 10 % drift into the effect, 3.1 % rejections at a nominal 1.5 %).
    Without times the warm design's alternation is assumed where the counts fit it -- one more alone block than
    shared, at least ``MIN_SHARED_BLOCKS`` shared: alone r1 at 0, shared r1 at 1, alone r2 at 2, ... (blocks in the
    order of their names' r_k, as ``rules.runs_of`` gives them).
    """
    if n_shared < MIN_SHARED_BLOCKS or n_alone < MIN_SHARED_BLOCKS:
        return None
    if times is not None:
        ts, ta = (np.asarray(t, np.float64) for t in times)
        if len(ts) != n_shared or len(ta) != n_alone or not (np.all(np.isfinite(ts)) and np.all(np.isfinite(ta))):
            return None
        # interleaved: some alone block before the first shared block and after the last (no all-alone-first design)
        if not (ta.min() < ts.min() and ta.max() > ts.max()):
            return None
        origin = min(ta.min(), ts.min())
        return ts - origin, ta - origin
    if n_alone != n_shared + 1:
        return None
    return np.arange(n_shared) * 2.0 + 1.0, np.arange(n_alone) * 2.0


@dataclass(frozen=True)
class Host:
    """The host's speed in each block: the log of the block's median host probe (ms), shared and alone, aligned with
    the blocks; NaN where a block has no probe (``host_levels``)."""

    shared: tuple[float, ...]
    alone: tuple[float, ...]


def host_levels(shared_probes: Sequence[np.ndarray], alone_probes: Sequence[np.ndarray]) -> Host | None:
    """``Host`` from each block's per-iteration probes (ms); None where no block has one."""
    def level(x: np.ndarray) -> float:
        x = np.asarray(x, np.float64)
        x = x[np.isfinite(x) & (x > 0)]
        return math.log(float(np.median(x))) if len(x) >= MIN_BLOCK_N else math.nan
    h = Host(tuple(level(x) for x in shared_probes), tuple(level(x) for x in alone_probes))
    return h if any(math.isfinite(v) for v in h.shared + h.alone) else None


@dataclass(frozen=True)
class BlockTest:
    """One statistic's block-paired test: the shared indicator's coefficient with trend (and host speed) removed."""

    what: str  # "median", "tail shape", "p95", "median against its neighbours"
    effect: float  # log shared / alone, trend removed (and, ``adjusted``, at equal host speed)
    se: float
    df: int
    shared: tuple[float, ...]  # each block's statistic (ms for the median and the p95, ratio for the shape)
    alone: tuple[float, ...]
    ratios: tuple[float, ...]  # each shared block against its two neighbouring alone blocks (geometric mean)
    resid_sd: float = math.nan  # the residual sd around intercept + trend + sharing: one block's drift and noise
    host_slope: float = math.nan  # ``adjusted``: log statistic per log host probe (1: the statistic is all host)
    adjusted: bool = False  # the host's speed per block was a covariate
    unadjusted: float = math.nan  # ``adjusted``: the ratio the same test gives without the covariate

    @property
    def ratio(self) -> float:
        return math.exp(self.effect)

    def p_more(self) -> float:
        from scipy.stats import t  # scipy: ~0.6 s to import, needed here only

        return float(t.sf(self.effect / self.se, self.df)) if self.se > 0 else float(self.effect <= 0)

    def p_less(self) -> float:
        from scipy.stats import t  # scipy: ~0.6 s to import, needed here only

        return float(t.cdf(self.effect / self.se, self.df)) if self.se > 0 else float(self.effect >= 0)

    def interval(self, level: float) -> tuple[float, float]:
        """The ratio's two-sided ``level`` interval (t with ``df``)."""
        from scipy.stats import t  # scipy: ~0.6 s to import, needed here only

        h = float(t.isf((1 - level) / 2, self.df)) * self.se
        return math.exp(self.effect - h), math.exp(self.effect + h)

    @property
    def words(self) -> str:
        rs = " ".join(f"{r:.2f}" for r in self.ratios)
        up = sum(r > 1 for r in self.ratios)
        host = (f"; at equal host speed (host-probe slope {self.host_slope:.2f}; {self.unadjusted:.3f}x without it)"
                if self.adjusted else "")
        return (f"the block-paired {self.what} {self.ratio:.3f}x alone ({len(self.shared)} shared blocks against "
                f"their neighbouring alone blocks: {rs}; {up} of {len(self.ratios)} above 1; trend removed{host}, t "
                f"with {self.df} df)")


def _windows(x: np.ndarray, window: int | None) -> list[np.ndarray]:
    """``x`` cut into consecutive windows of about ``window`` iterations (all of it where it holds fewer than two)."""
    if not window or len(x) < 2 * window:
        return [x]
    k = len(x) // window
    return np.array_split(x, k)


def _stat(x: np.ndarray, what: str, window: int | None = None) -> float:
    """A block's statistic. The p95 and the shape are read in one window of the shortest block's length, the
    block's middle one: a block's p95 / p50 depends on its length (a longer block's p95 sits lower in its bursts and
    spans more of the host's states), so blocks of unequal length -- shared blocks run 3-5x longer than alone ones
    -- read a shape change that is only their length (the audit: 16-17 false reports in 100 at 8 blocks with the
    host's state redrawn every 150 iterations; here 7.7 % one-sided rejections at a nominal 1.25 % for shared blocks
    4x longer, no host at all). The average over every window has the right mean but a distribution unlike a
    single window's (a burst's skew averages out), and still read 9 %; one window of equal length reads 0.75 %."""
    x = np.asarray(x, np.float64)
    if what == "median":
        return float(np.median(x))
    parts = _windows(x, window)
    w = parts[len(parts) // 2]
    med = float(np.median(w))
    q = float(np.quantile(w, TAIL_Q))
    return q if what == "p95" else q / med if med > 0 else math.nan


def _fit(y: np.ndarray, X: np.ndarray) -> tuple[np.ndarray, np.ndarray, float, int] | None:
    """OLS: (coefficients, their covariance, residual sd, residual df), or None where the design is singular."""
    df = len(y) - X.shape[1]
    if df < 1 or np.linalg.matrix_rank(X) < X.shape[1]:
        return None
    beta, *_ = np.linalg.lstsq(X, y, rcond=None)
    resid = y - X @ beta
    s2 = float(resid @ resid) / df
    return beta, s2 * np.linalg.inv(X.T @ X), math.sqrt(s2), df


def _neighbour_ratios(pos_s: np.ndarray, pos_a: np.ndarray, ys: Sequence[float], ya: Sequence[float]
                      ) -> list[float]:
    ratios = []
    for p, v in zip(pos_s, ys, strict=True):
        near = _near(p, pos_a, ya)
        ok_v = math.isfinite(v) and near and all(a > 0 for a in near) and v > 0
        ratios.append(v / math.exp(np.mean(np.log(near))) if ok_v else math.nan)
    return ratios


def _near(p: float, pos_a: np.ndarray, ya: Sequence[float]) -> list[float]:
    """The values of the alone blocks just before and just after position ``p`` (those that exist and are finite)."""
    before = [(q, a) for q, a in zip(pos_a, ya, strict=True) if q < p and math.isfinite(a)]
    after = [(q, a) for q, a in zip(pos_a, ya, strict=True) if q > p and math.isfinite(a)]
    return ([max(before)[1]] if before else []) + ([min(after)[1]] if after else [])


def paired(shared_runs: Sequence[np.ndarray], alone_runs: Sequence[np.ndarray], what: str = "median",
           times: tuple[Sequence[float], Sequence[float]] | None = None, host: Host | None = None
           ) -> BlockTest | None:
    """The block-paired test of one statistic ("median", "tail shape" or "p95"), or None where the blocks are not
    interleaved (``order``) or too few have the statistic.

    ``host``: each block's host speed (``Host``), a covariate beside the trend where every block used has one and
    there are ``MIN_HOST_BLOCKS`` shared blocks: the effect is then sharing's at equal host speed (``balance``
    says whether the host's speed is a covariate sharing left alone; the caller decides whether to pass it)."""
    pos = order(len(shared_runs), len(alone_runs), times)
    if pos is None:
        return None
    pos_s, pos_a = pos
    key = "shape" if what == "tail shape" else what
    least = MIN_BLOCK_N if key != "median" else 1
    lens = [len(r) for r in list(shared_runs) + list(alone_runs) if len(r) >= least]
    window = max(MIN_BLOCK_N, min(lens)) if lens and key != "median" else None
    ys = [_stat(r, key, window) if len(r) >= least else math.nan for r in shared_runs]
    ya = [_stat(r, key, window) if len(r) >= least else math.nan for r in alone_runs]
    raw = np.array(ya + ys, np.float64)
    y = np.log(np.clip(raw, 1e-300, None))
    y[~np.isfinite(raw)] = np.nan
    t = np.concatenate([pos_a, pos_s])
    s = np.concatenate([np.zeros(len(ya)), np.ones(len(ys))])
    c = (np.array(host.alone + host.shared, np.float64) if host is not None
         and len(host.alone) == len(ya) and len(host.shared) == len(ys) else None)
    ok = np.isfinite(y)
    if ok[len(ya):].sum() < MIN_SHARED_BLOCKS or ok[:len(ya)].sum() < MIN_SHARED_BLOCKS:
        return None
    use_host = (c is not None and bool(np.all(np.isfinite(c[ok]))) and ok[len(ya):].sum() >= MIN_HOST_BLOCKS
                and float(np.ptp(c[ok])) > 0)
    y, t, s = y[ok], t[ok], s[ok]
    t = (t - t.mean()) / (t.std() or 1.0)
    base = _fit(y, np.column_stack([np.ones(len(y)), t, s]))
    if base is None:
        return None
    fit = _fit(y, np.column_stack([np.ones(len(y)), t, s, c[ok] - c[ok].mean()])) if use_host else None
    beta, cov, sd, df = fit if fit is not None else base
    ratios = _neighbour_ratios(pos_s, pos_a, ys, ya)
    return BlockTest(what, float(beta[2]), math.sqrt(max(float(cov[2, 2]), 0.0)), int(df), tuple(ys), tuple(ya),
                     tuple(ratios), sd, float(beta[3]) if fit is not None else math.nan, fit is not None,
                     math.exp(float(base[0][2])) if fit is not None else math.nan)


# var(mean d) / (var(d) / b) for the local pairing under white block noise of equal variance: d_k and d_k+1 share an
# alone block, so cov(d_k, d_k+1) = var(d) / 6 (the shared alone block's noise / 4 against var(d) = 1.5 sigma^2);
# var(mean d) = var(d) (b + (b - 1) / 3) / b^2. A random walk's d_k are independent (factor 1), so the factor errs
# only towards "inconclusive" there. The old bound, cov <= var(d) / 2, made the se 1.37x too wide (the audit: size
# 0.0015 against a nominal 0.0075), and its docstring's "exact under a random walk" was wrong.
def pairing_factor(b: int) -> float:
    return (b + (b - 1) / 3) / b


def neighbours(shared_runs: Sequence[np.ndarray], alone_runs: Sequence[np.ndarray],
               times: tuple[Sequence[float], Sequence[float]] | None = None, host: Host | None = None
               ) -> BlockTest | None:
    """The local pairing: each shared block's log median against the mean log median of its two neighbouring alone
    blocks (d_k), their mean the effect; a drift of any slow shape (a random walk, a step, an OU wander) cancels
    within each triple, where the regression (``paired``) leaves it in its residual.

    The d_k of consecutive shared blocks share an alone block, so they are correlated (``pairing_factor``: exact
    under white block noise, conservative under a random walk); t with b - 1 degrees of freedom. ``host``: each
    d_k's host difference (the shared block's log probe against its neighbours') is a covariate (b - 2 df), the
    effect then the intercept: sharing's at equal host speed.
    """
    pos = order(len(shared_runs), len(alone_runs), times)
    if pos is None:
        return None
    pos_s, pos_a = pos
    ya = [float(np.median(r)) if len(r) else math.nan for r in alone_runs]
    ys = [float(np.median(r)) if len(r) else math.nan for r in shared_runs]
    ha = list(host.alone) if host is not None and len(host.alone) == len(ya) else None
    hs = list(host.shared) if host is not None and len(host.shared) == len(ys) else None
    d, dh, ratios = [], [], []
    for i, (p, v) in enumerate(zip(pos_s, ys, strict=True)):
        near = [a for a in _near(p, pos_a, ya) if a > 0]
        if near and math.isfinite(v) and v > 0:
            d.append(math.log(v) - float(np.mean(np.log(near))))
            if ha is not None and hs is not None:
                hn = _near(p, pos_a, ha)
                dh.append(hs[i] - float(np.mean(hn)) if hn and math.isfinite(hs[i]) else math.nan)
        ratios.append(math.exp(d[-1]) if near and math.isfinite(v) and v > 0 else math.nan)
    b = len(d)
    if b < MIN_SHARED_BLOCKS:
        return None
    dd = np.asarray(d)
    var = float(np.var(dd, ddof=1))
    plain = (float(np.mean(dd)), math.sqrt(var * pairing_factor(b) / b), b - 1, math.sqrt(var))
    effect, se, df, sd = plain
    slope, adjusted = math.nan, False
    if len(dh) == b and b >= MIN_HOST_BLOCKS and np.all(np.isfinite(dh)) and float(np.ptp(dh)) > 0:
        fit = _fit(dd, np.column_stack([np.ones(b), np.asarray(dh)]))
        if fit is not None:
            beta, cov, sd, df = fit
            effect, se, slope, adjusted = float(beta[0]), math.sqrt(float(cov[0, 0]) * pairing_factor(b)), \
                float(beta[1]), True
    return BlockTest("median against its neighbours", effect, se, df, tuple(ys), tuple(ya), tuple(ratios), sd,
                     slope, adjusted, math.exp(plain[0]) if adjusted else math.nan)


@dataclass(frozen=True)
class Balance:
    """Did sharing move the host's speed? The host probe's block levels regressed on the trend and the shared
    indicator, as the median is: ``ratio`` shared / alone with its interval and two-sided ``p``.

    Why it gates the adjustment: an adjustment for a covariate that sharing moved removes that part of sharing's
    effect (an observational study's "adjust only for pre-treatment covariates"). Where the probe moved
    (``moved``: p < ``BALANCE_ALPHA``), the verdict does not adjust, and the host-side cost (the probe's change
    times the tenant's host slope, measured in the alone blocks) is reported apart from the GPU's."""

    ratio: float
    lo: float
    hi: float
    p: float
    df: int
    slope: float = math.nan  # the median's host slope, from the alone blocks alone (no sharing in it)

    @property
    def moved(self) -> bool:
        return self.p < BALANCE_ALPHA

    @property
    def host_cost(self) -> float:
        """The median's change that the host's change alone accounts for (ratio; 1: none), where the probe moved."""
        return math.exp(self.slope * math.log(self.ratio)) if math.isfinite(self.slope) else math.nan

    @property
    def words(self) -> str:
        state = (f"moved by sharing (p = {self.p:.2g}): not adjusted for; the host's change alone accounts for "
                 f"{self.host_cost:.3f}x of the median" if self.moved else
                 f"balanced (p = {self.p:.2g}), so the verdict adjusts for it")
        return (f"host probe shared / alone {self.ratio:.3f}x [{self.lo:.3f}, {self.hi:.3f}], {state}")


def balance(host: Host, times: tuple[Sequence[float], Sequence[float]] | None = None,
            alone_runs: Sequence[np.ndarray] | None = None) -> Balance | None:
    """The host probe's balance between alone and shared blocks (``Balance``), or None where the blocks are not
    interleaved or too few have a probe. ``alone_runs``: the alone blocks, for the median's host slope among them."""
    from scipy.stats import t as t_law  # scipy: ~0.6 s to import, needed here only

    pos = order(len(host.shared), len(host.alone), times)
    if pos is None:
        return None
    pos_s, pos_a = pos
    c = np.array(host.alone + host.shared, np.float64)
    t = np.concatenate([pos_a, pos_s])
    s = np.concatenate([np.zeros(len(host.alone)), np.ones(len(host.shared))])
    ok = np.isfinite(c)
    if ok[len(host.alone):].sum() < MIN_SHARED_BLOCKS or ok[:len(host.alone)].sum() < MIN_SHARED_BLOCKS:
        return None
    t = (t[ok] - t[ok].mean()) / (t[ok].std() or 1.0)
    fit = _fit(c[ok], np.column_stack([np.ones(int(ok.sum())), t, s[ok]]))
    if fit is None:
        return None
    beta, cov, _sd, df = fit
    se = math.sqrt(max(float(cov[2, 2]), 0.0))
    p = float(2 * t_law.sf(abs(beta[2]) / se, df)) if se > 0 else float(beta[2] == 0)
    h = float(t_law.isf(0.025, df)) * se
    slope = math.nan
    if alone_runs is not None and len(alone_runs) == len(host.alone):
        ya = np.array([math.log(float(np.median(r))) if len(r) and np.median(r) > 0 else math.nan
                       for r in alone_runs])
        ca = np.array(host.alone)
        good = np.isfinite(ya) & np.isfinite(ca)
        if good.sum() >= 3 and float(np.ptp(ca[good])) > 0:
            slope = float(np.polyfit(ca[good], ya[good], 1)[0])
    return Balance(math.exp(beta[2]), math.exp(beta[2] - h), math.exp(beta[2] + h), p, int(df), slope)


@dataclass(frozen=True)
class BlockPair:
    """The block-paired tests of one tenant and clock: the median, the tail's shape, and the p95 (for "no
    change"); the host's speed as a covariate of the median and the p95 where it was measured and balanced."""

    median: BlockTest
    tail: BlockTest | None
    quantile: BlockTest | None
    local: BlockTest | None = None  # the median against its neighbours (``neighbours``)
    balance: Balance | None = None  # the host probe shared against alone (None: no probe)
    host_note: str = ""  # why the host's speed was not a covariate, where it was not

    @property
    def adjusted(self) -> bool:
        return self.median.adjusted

    def level_p(self) -> tuple[float, float]:
        """The median's one-sided p-values (slower, faster): the regression's and the local pairing's, Bonferroni
        over the two (each at half the level) -- the regression is the stronger under independent block levels,
        the pairing under a slow wander or a step."""
        ps = [(self.median.p_more(), self.median.p_less())]
        if self.local is not None:
            ps.append((self.local.p_more(), self.local.p_less()))
        k = len(ps)
        return min(1.0, k * min(p for p, _ in ps)), min(1.0, k * min(p for _, p in ps))

    def within(self, margin: float, confidence: float) -> tuple[bool, bool, str]:
        """Two one-sided tests that the block-paired median lies within ±margin of alone (its 1 - 2 alpha interval,
        alpha the one-sided (1 - confidence) / 2, inside [1 - margin, 1 + margin]), each side only where the tail's
        shape shows no change that way at alpha either. The p99 is asked by the caller (``verdict._within``): "no
        change" never stands beside a p99 or DF beyond the margin."""
        alpha = (1 - confidence) / 2
        lo, hi = (self.local or self.median).interval(1 - 2 * alpha)
        tail_up = self.tail is None or self.tail.p_more() > alpha
        tail_down = self.tail is None or self.tail.p_less() > alpha
        up, down = hi < 1 + margin and tail_up, lo > 1 - margin and tail_down
        shape = (f"; the tail's shape {self.tail.ratio:.3f}x (p = {self.tail.p_more():.2g} wider, "
                 f"{self.tail.p_less():.2g} narrower)" if self.tail is not None else "")
        which = self.local or self.median
        return up, down, (f"block-paired {which.what} {which.ratio:.3f}x [{lo:.3f}, {hi:.3f}] ({100 * (1 - 2 * alpha):.4g} % "
                          f"interval, inside ±{100 * margin:g} %: {'yes' if hi < 1 + margin and lo > 1 - margin else 'no'})"
                          f"{shape}")


def block_pair(shared_runs: Sequence[np.ndarray], alone_runs: Sequence[np.ndarray],
               times: tuple[Sequence[float], Sequence[float]] | None = None, host: Host | None = None,
               on_host: bool = False) -> BlockPair | None:
    """The tenant's block-paired tests, or None where the design has too few interleaved blocks.

    ``host``: each block's host speed (``host_levels``). It is a covariate of the median and the p95 where the
    probe is balanced between alone and shared blocks (``balance``), never where sharing moved it, and never where
    the host is the contended device itself (``on_host``: a CPU run). The tail's shape is not adjusted: each block
    is scaled to its own median, which carries the level the host sets."""
    med0 = paired(shared_runs, alone_runs, "median", times)
    if med0 is None:
        return None
    bal = balance(host, times, alone_runs) if host is not None else None
    note = ""
    use = None
    if on_host:
        note = "the host is the contended device (a CPU run): its speed is the effect, not a covariate"
    elif host is None:
        note = "no host probe in these blocks"
    elif bal is None:
        note = "too few blocks with a host probe"
    elif bal.moved:
        note = f"sharing moved the host's speed ({bal.words})"
    elif len(shared_runs) < MIN_HOST_BLOCKS:
        note = f"fewer than {MIN_HOST_BLOCKS} shared blocks"
    else:
        use = host
    med = paired(shared_runs, alone_runs, "median", times, use) if use is not None else med0
    return BlockPair(med, paired(shared_runs, alone_runs, "tail shape", times),
                     paired(shared_runs, alone_runs, "p95", times, use), neighbours(shared_runs, alone_runs, times, use),
                     bal, note)
