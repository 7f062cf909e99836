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
margin, and the tail's shape shows no change either way. The p95 itself (``quantile``) is shown beside them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

MIN_SHARED_BLOCKS = 3  # fewer: the regression has fewer than 4 residual degrees of freedom (bracketed: 2 shared)
TAIL_Q = 0.95
MIN_BLOCK_N = 20  # a block with fewer timed iterations has no p95 to speak of; it is left out of the tail test


def order(n_shared: int, n_alone: int, times: tuple[Sequence[float], Sequence[float]] | None = None
          ) -> tuple[np.ndarray, np.ndarray] | None:
    """The run-order positions of the shared and the alone blocks, or None where the design is not interleaved.

    ``times``: each block's start (shared, alone), any clock; without them the warm design's alternation is
    assumed where the counts fit it -- one more alone block than shared, at least ``MIN_SHARED_BLOCKS`` shared:
    alone r1 at 0, shared r1 at 1, alone r2 at 2, ... (blocks in the order of their names' r_k, as
    ``rules.runs_of`` gives them).
    """
    if n_shared < MIN_SHARED_BLOCKS or n_alone < MIN_SHARED_BLOCKS:
        return None
    if times is not None:
        ts, ta = (np.asarray(t, np.float64) for t in times)
        if len(ts) != n_shared or len(ta) != n_alone or not (np.all(np.isfinite(ts)) and np.all(np.isfinite(ta))):
            return None
        rank = np.argsort(np.argsort(np.concatenate([ta, ts]), kind="stable"), kind="stable").astype(np.float64)
        pos_a, pos_s = rank[:n_alone], rank[n_alone:]
        # interleaved: some alone block before the first shared block's end and after it (no all-alone-first design)
        if not (pos_a.min() < pos_s.min() and pos_a.max() > pos_s.max()):
            return None
        return pos_s, pos_a
    if n_alone != n_shared + 1:
        return None
    return np.arange(n_shared) * 2.0 + 1.0, np.arange(n_alone) * 2.0


@dataclass(frozen=True)
class BlockTest:
    """One statistic's block-paired test: the shared indicator's coefficient with trend removed."""

    what: str  # "median", "tail shape", "p95"
    effect: float  # log shared / alone, trend removed
    se: float
    df: int
    shared: tuple[float, ...]  # each block's statistic (ms for the median and the p95, ratio for the shape)
    alone: tuple[float, ...]
    ratios: tuple[float, ...]  # each shared block against its two neighbouring alone blocks (geometric mean)
    resid_sd: float = math.nan  # the residual sd around intercept + trend + sharing: one block's drift and noise

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
        return (f"the block-paired {self.what} {self.ratio:.3f}x alone ({len(self.shared)} shared blocks against "
                f"their neighbouring alone blocks: {rs}; {up} of {len(self.ratios)} above 1; trend removed, t with "
                f"{self.df} df)")


def _stat(x: np.ndarray, what: str) -> float:
    x = np.asarray(x, np.float64)
    if what == "median":
        return float(np.median(x))
    if what == "p95":
        return float(np.quantile(x, TAIL_Q))
    med = float(np.median(x))
    return float(np.quantile(x, TAIL_Q)) / med if med > 0 else math.nan


def paired(shared_runs: Sequence[np.ndarray], alone_runs: Sequence[np.ndarray], what: str = "median",
           times: tuple[Sequence[float], Sequence[float]] | None = None) -> BlockTest | None:
    """The block-paired test of one statistic ("median", "tail shape" or "p95"), or None where the blocks are not
    interleaved (``order``) or too few have the statistic."""
    pos = order(len(shared_runs), len(alone_runs), times)
    if pos is None:
        return None
    pos_s, pos_a = pos
    key = "shape" if what == "tail shape" else what
    least = MIN_BLOCK_N if key != "median" else 1
    ys = [_stat(r, key) if len(r) >= least else math.nan for r in shared_runs]
    ya = [_stat(r, key) if len(r) >= least else math.nan for r in alone_runs]
    y = np.log(np.clip(np.array(ya + ys, np.float64), 1e-300, None))
    y[~np.isfinite(np.array(ya + ys, np.float64))] = np.nan
    t = np.concatenate([pos_a, pos_s])
    s = np.concatenate([np.zeros(len(ya)), np.ones(len(ys))])
    ok = np.isfinite(y)
    if ok[len(ya):].sum() < MIN_SHARED_BLOCKS or ok[:len(ya)].sum() < MIN_SHARED_BLOCKS:
        return None
    y, t, s = y[ok], t[ok], s[ok]
    t = (t - t.mean()) / (t.std() or 1.0)
    X = np.column_stack([np.ones(len(y)), t, s])
    df = len(y) - X.shape[1]
    if df < 1:
        return None
    beta, *_ = np.linalg.lstsq(X, y, rcond=None)
    resid = y - X @ beta
    s2 = float(resid @ resid) / df
    cov = s2 * np.linalg.inv(X.T @ X)
    ratios = []
    for p, v in zip(pos_s, ys, strict=True):
        before = [a for q, a in zip(pos_a, ya, strict=True) if q < p and math.isfinite(a)]
        after = [a for q, a in zip(pos_a, ya, strict=True) if q > p and math.isfinite(a)]
        near = ([before[-1]] if before else []) + ([after[0]] if after else [])
        ok_v = math.isfinite(v) and near and all(a > 0 for a in near) and v > 0
        ratios.append(v / math.exp(np.mean(np.log(near))) if ok_v else math.nan)
    return BlockTest(what, float(beta[2]), math.sqrt(max(float(cov[2, 2]), 0.0)), int(df), tuple(ys), tuple(ya),
                     tuple(ratios), math.sqrt(s2))


def neighbours(shared_runs: Sequence[np.ndarray], alone_runs: Sequence[np.ndarray],
               times: tuple[Sequence[float], Sequence[float]] | None = None) -> BlockTest | None:
    """The local pairing: each shared block's log median against the mean log median of its two neighbouring alone
    blocks (d_k), their mean the effect; a drift of any slow shape (a random walk, a step, an OU wander) cancels
    within each triple, where the regression (``paired``) leaves it in its residual.

    The d_k of consecutive shared blocks share an alone block, so they are correlated: with each block's own noise
    white, cov(d_k, d_k+1) is at most var(d) / 2 (the shared alone block's noise / 4, against var(d) = the
    shared block's + half the alone blocks'). The se takes that bound -- var(mean d) = var(d) (2B - 1) / B^2 -- so
    the test is conservative where the blocks' noise is white and exact where the drift is a random walk; t with
    B - 1 degrees of freedom.
    """
    pos = order(len(shared_runs), len(alone_runs), times)
    if pos is None:
        return None
    pos_s, pos_a = pos
    ya = [float(np.median(r)) if len(r) else math.nan for r in alone_runs]
    ys = [float(np.median(r)) if len(r) else math.nan for r in shared_runs]
    d, ratios = [], []
    for p, v in zip(pos_s, ys, strict=True):
        before = [a for q, a in zip(pos_a, ya, strict=True) if q < p and math.isfinite(a) and a > 0]
        after = [a for q, a in zip(pos_a, ya, strict=True) if q > p and math.isfinite(a) and a > 0]
        near = ([before[-1]] if before else []) + ([after[0]] if after else [])
        if near and math.isfinite(v) and v > 0:
            d.append(math.log(v) - float(np.mean(np.log(near))))
        ratios.append(math.exp(d[-1]) if near and math.isfinite(v) and v > 0 else math.nan)
    b = len(d)
    if b < MIN_SHARED_BLOCKS:
        return None
    var = float(np.var(d, ddof=1))
    se = math.sqrt(var * (2 * b - 1)) / b
    return BlockTest("median against its neighbours", float(np.mean(d)), se, b - 1, tuple(ys), tuple(ya),
                     tuple(ratios), math.sqrt(var))


@dataclass(frozen=True)
class BlockPair:
    """The block-paired tests of one tenant and clock: the median, the tail's shape, and the p95 (for "no
    change")."""

    median: BlockTest
    tail: BlockTest | None
    quantile: BlockTest | None
    local: BlockTest | None = None  # the median against its neighbours (``neighbours``)

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
        shape shows no change that way at alpha either. The tail is not held to ±margin itself: a block's p95 moves
        with its bursts (8 blocks put a clean null's p95 ratio within ±8-15 %), so that test would almost never pass;
        "no change" in this design says: the median within the margin, and no sign that the tail's shape moved."""
        alpha = (1 - confidence) / 2
        lo, hi = (self.local or self.median).interval(1 - 2 * alpha)
        tail_up = self.tail is None or self.tail.p_more() > alpha
        tail_down = self.tail is None or self.tail.p_less() > alpha
        up, down = hi < 1 + margin and tail_up, lo > 1 - margin and tail_down
        shape = (f"; the tail's shape {self.tail.ratio:.3f}x (p = {self.tail.p_more():.2g} wider, "
                 f"{self.tail.p_less():.2g} narrower)" if self.tail is not None else "")
        which = self.local or self.median
        return up, down, (f"block-paired {which.what} {which.ratio:.3f}x [{lo:.3f}, {hi:.3f}] ({100 * (1 - 2 * alpha):g} % "
                          f"interval, inside ±{100 * margin:g} %: {'yes' if hi < 1 + margin and lo > 1 - margin else 'no'})"
                          f"{shape}")


def block_pair(shared_runs: Sequence[np.ndarray], alone_runs: Sequence[np.ndarray],
               times: tuple[Sequence[float], Sequence[float]] | None = None) -> BlockPair | None:
    """The tenant's block-paired tests, or None where the design has too few interleaved blocks."""
    med = paired(shared_runs, alone_runs, "median", times)
    if med is None:
        return None
    return BlockPair(med, paired(shared_runs, alone_runs, "tail shape", times),
                     paired(shared_runs, alone_runs, "p95", times), neighbours(shared_runs, alone_runs, times))


MOST_BLOCKS = 200  # a projection beyond this is no plan: the effect is small beside the drift between blocks


def _se_at(test: BlockTest, b: int) -> tuple[float, int]:
    """(se, df) of ``test``'s effect with b shared blocks between b + 1 alone ones, at its measured scatter: the
    local pairing's sd sqrt(2b - 1) / b with b - 1 df (``neighbours``), or the regression's from its design matrix
    (intercept, trend, shared indicator over 2b + 1 blocks in run order) with 2b - 2 df (``paired``)."""
    if test.what == "median against its neighbours":
        return test.resid_sd * math.sqrt(2 * b - 1) / b, b - 1
    pos_s, pos_a = order(b, b + 1)
    t = np.concatenate([pos_a, pos_s])
    t = (t - t.mean()) / t.std()
    x = np.column_stack([np.ones(2 * b + 1), t, np.concatenate([np.zeros(b + 1), np.ones(b)])])
    return test.resid_sd * math.sqrt(float(np.linalg.inv(x.T @ x)[2, 2])), 2 * b - 2


def blocks_to_decide(test: BlockTest, level: float, power: float = 0.8, most: int = MOST_BLOCKS) -> int | None:
    """About how many shared blocks (each between two alone blocks) ``test`` would need to decide an effect of the
    size it measured, at its measured scatter per block, with probability ``power``.

    Why a number of blocks and not of iterations: the drift between blocks is one sample per block, so only more
    blocks shrink it. The answer is the smallest B with |effect| / se(B) >= t(1 - level; df(B)) + z(power) (the
    normal approximation of the noncentral t; se and df by ``_se_at``). ``level``: the one-sided level the test
    must reach -- the verdict's, after its weight, the Bonferroni over the two median readings and Holm's first
    step. The effect measured is taken as true, so the number is a plan, not a promise; None where even ``most``
    blocks would not do, or no effect shows.
    """
    from scipy.stats import norm, t  # scipy: ~0.6 s to import, needed here only

    if not (math.isfinite(test.resid_sd) and test.resid_sd > 0 and math.isfinite(test.effect) and test.effect != 0):
        return None
    z = float(norm.ppf(power))
    for b in range(MIN_SHARED_BLOCKS, most + 1):
        se, df = _se_at(test, b)
        if abs(test.effect) / se >= float(t.isf(level, df)) + z:
            return b
    return None


def blocks_to_bound(test: BlockTest, margin: float, level: float, power: float = 0.8,
                    most: int = MOST_BLOCKS) -> int | None:
    """About how many shared blocks would put the block-paired median within ±``margin`` ("no change", the two
    one-sided tests of ``BlockPair.within`` at ``level`` each), for an effect of the size measured: the smallest B
    with |effect| + (t(1 - level; df(B)) + z(power)) se(B) <= log(1 + margin) (``_se_at``). None where the effect measured is
    itself beyond the margin, or ``most`` blocks would not do."""
    from scipy.stats import norm, t  # scipy: ~0.6 s to import, needed here only

    sd, bound = test.resid_sd, math.log1p(margin)
    if not (math.isfinite(sd) and sd > 0 and math.isfinite(test.effect)) or abs(test.effect) >= bound:
        return None
    z = float(norm.ppf(power))
    for b in range(MIN_SHARED_BLOCKS, most + 1):
        se, df = _se_at(test, b)
        if abs(test.effect) + (float(t.isf(level, df)) + z) * se <= bound:
            return b
    return None
