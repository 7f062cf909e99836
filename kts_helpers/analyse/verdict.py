"""One verdict per tenant and clock, from tests that compare conditions, not moments (issue 30).

Why: alone and shared are measured at different moments, and a GPU's speed moves between moments (the committed
H200 repeats: the alone FFT's median 0.570, 0.531, 0.525 ms in three repeats of one run). A rule that assumed one
steady process read that drift as sharing: with a phase-to-phase difference of sd 2 % and no effect, 8.5-13 % of
verdicts read "degraded". Every test here carries a between-block term, estimated from the run's own blocks
(``drift``; the bracketed design, ``run.spec``: alone on both sides of every shared block) or, where a run has one
alone block, taken from a stated prior allowance by tenant kind (``prior.PRIORS``), which the verdict says. With
three or more shared blocks between alone ones (the warm design, issue 43) the medians and the tail's shape are
read block-paired (``blocks``: a regression on a time trend and each shared block against its neighbours).

The tests, sharing the verdict's one-sided (1 - confidence) / 2 by weight (``WEIGHTS_BY_DESIGN``: the weights
follow what the design can measure; Bonferroni: p = min over tests of p_i / w_i, so the verdict has one p-value
each way for the report's family):

1. **DF** = shared p99 / alone p99 (``rules.degradation``, the one DF), its interval widened in quadrature by the
   drift term; read only with ``rules.MIN_CORUNNING`` (368) samples and inside its tested range (``rules._untested``).
2. **Level**: the blocks' mean log medians, shared against alone, against the drift's standard error (a t with the
   blocks' degrees of freedom; normal with the prior).
3. **Tail shape**: each block scaled to its own median (drift moves a block's level, not its shape), then the
   exceedance test (``exceedance``, a precedence test, Nelson 1963): how many shared iterations lie beyond the alone
   p99 against the alone series' own count, the alone p99's uncertainty in the test (Beta(r + 1, n - r)), the
   clustering of exceedances through each side's effective size n / tau (the larger tau on both sides), asked at the
   alone p99 and p99.75 and Bonferroni-corrected, both directions alike. A user's SLO is asked of the raw series.
4. **Same-moment control** (with the neighbours' timestamps, ``rules.mark_collided``): the launches that found a
   neighbour in flight against the same blocks' launches that did not (``Contrast``: same moment, same drift, same
   host) -- the part of the slowdown sharing causes. The collided launches against the (scaled) alone tail are
   shown too, and decide only where no launch was clear.

Readings (``readings()``, used by every table): a slowdown whose DF is at least 1 + margin is **degraded**, a
smaller one **small slowdown (< 10 %)**; the mirror images **faster when shared** and **small speed-up (< 10 %)**;
evidence both ways **inconclusive**; **no change within ±10 %** when two one-sided share tests put the shared p99
within the margin of the alone one, drift allowed for (``_within``: shares are precise where a p99's upper bound is
open at n = 800); otherwise **inconclusive**, saying what is missing. A report's verdicts are one family
(``family``: each question's wall clock a primary, its device clock a secondary after it, each direction at
(1 - confidence) / 2). Below 368 samples DF
is not read and both tail tests decide at a quarter of their weight (``weights``); below ``EXCEEDANCE_MIN_N`` (200)
nothing decides.

Measured (``driftgrid``, ``make bench``: bench/reference/cpu-2026-12-03-issue30-drift.md, 400 runs a cell): under
drift sd 0-2 % with OS hiccups, i.i.d. and AR 0.9 bulk, n = 800 and 2000, with and without timestamps, no cell read
"degraded" or "faster when shared"; the small-effect words at most 1.8 %; no no-effect report of 2 or 4 tenants x 2
clocks read either. Power with timestamps at n = 800: a slowdown read in every run for collisions costing U[0, 0.3
ms] at 2 % and for the article-like mixture, a x1.15 bulk slowdown "degraded" in every run without drift (0.90 with
sd 2 %); "no change" under a clean null 0.98 at n = 800 and 2000. Longer than 500 lines: the
exceedance test, the drift term, the same-moment control and the reading share one set of p-values and words, and
splitting them would spread the rule over modules that each state half of it.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace

import numpy as np

from kts_helpers.analyse import blockplan as BP
from kts_helpers.analyse import blocks as B
from kts_helpers.analyse import orderstat, rules
from kts_helpers.analyse import prior as P

DEGRADED = "degraded"
FASTER = "faster when shared"  # the word stats.df_wording already uses
INCONCLUSIVE = "inconclusive"
DEFAULT_MARGIN = 0.10
# Below rules.MIN_CORUNNING (368) DF has no two-sided interval and is not read, but the exceedance test, which
# needs no p99 bound, still decides (its error rates at n = 300 are measured: coverage.decision_grid); below
# this many samples on either side the alone p99 has too few samples beyond it to be a threshold at all.
EXCEEDANCE_MIN_N = 200
# ... at a quarter of its level there: at n = 300 slow drift (lag-1 0.9-0.95) took the test's false alarms to
# 4 % at the full level, at most 2.5 % at a quarter (400 pairs a cell, every false-alarm generator; README).
SHORT_ALPHA_SHARE = 0.25
LADDER = (1.0, 0.25)  # the thresholds asked: the alone order statistics with r and r / 4 beyond
_QUAD = 400  # quadrature cells over the alone tail probability's Beta law


def exceedance_alpha(confidence: float = 0.95, design: str = "one block") -> float:
    """The one-sided p-value at which the (pooled, scaled) exceedance test decides alone in a verdict: its weight
    of the one-sided (1 - confidence) / 2 (``WEIGHTS_BY_DESIGN``), 0.5 % at 95 % with one alone block (none in the
    bracketed design, whose blocks read the tail's shape block by block)."""
    return weights(False, design)["tail"] * (1 - confidence) / 2


def collided_alpha(confidence: float = 0.95, design: str = "bracketed") -> float:
    """The one-sided p-value at which the same-moment contrast decides alone: its weight of (1 - confidence) / 2."""
    return weights(False, design)["collided"] * (1 - confidence) / 2


def no_change(margin: float = DEFAULT_MARGIN) -> str:
    """The equivalence reading: "no change within ±10 %"."""
    return f"no change within ±{100 * margin:g} %"


def readings(margin: float = DEFAULT_MARGIN) -> tuple[str, ...]:
    """Every reading a Verdict can have, exactly these words: a slowdown at least the margin, one below it, the
    mirror images, no change within the margin, inconclusive."""
    return DEGRADED, small_slower(margin), FASTER, small_faster(margin), no_change(margin), INCONCLUSIVE


def slower_readings(margin: float = DEFAULT_MARGIN) -> tuple[str, ...]:
    """The readings that say sharing made the tenant slower (large or small)."""
    return DEGRADED, small_slower(margin)


def faster_readings(margin: float = DEFAULT_MARGIN) -> tuple[str, ...]:
    return FASTER, small_faster(margin)


@dataclass(frozen=True)
class Share:
    """The share of one series' iterations slower than a threshold, with its interval."""

    count: int
    n: int
    lo: float
    hi: float
    tau: float  # variance factor of the count (clustered exceedances); n / tau effective samples

    @property
    def estimate(self) -> float:
        return self.count / self.n if self.n else math.nan


@dataclass(frozen=True)
class Step:
    """One threshold the exceedance test asked: K of the shared beyond it, r of the alone."""

    label: str  # "alone p99", "alone p99.5", "SLO 1 ms"
    threshold_ms: float
    shared_count: int
    alone_count: int
    p_more: float  # one-sided p-value: shared slower than it more often than the alone series
    p_less: float


@dataclass(frozen=True)
class Exceedance:
    """Shared vs alone share beyond one threshold (the alone p99 or an SLO), their ratio, and the test.

    ``ratio`` is shared share / alone share with its interval: the same model inverted, but at a level widened
    for tau's uncertainty (a t over the nu clusters) that the p-values do not carry -- so ``lo > 1`` and
    ``p_more <= (1 - confidence) / 2`` at the first threshold usually agree but not always (9 of 300 null pairs
    at n = 800 disagreed; the interval is then the stricter). ``p_more``/``p_less`` are the ladder-corrected
    one-sided p-values the verdict uses (both directions alike), ``steps`` what each threshold showed. Carrying
    the widening into the p-values was tried: with the 2-3 clusters of a collided launches' test it cut the
    power on small collisions by half, so the interval alone is widened.
    """

    threshold_ms: float
    source: str  # "alone p99" (estimated, its uncertainty in the test) or "SLO"
    shared: Share
    alone: Share
    ratio: float
    lo: float
    hi: float
    p_more: float
    p_less: float
    steps: tuple[Step, ...]
    confidence: float

    @property
    def decisive(self) -> Step:
        """The threshold whose evidence is strongest."""
        return min(self.steps, key=lambda s: min(s.p_more, s.p_less))

    @property
    def words(self) -> str:
        """"slow requests 2.3× as often (1.1–4.9×)": shared beyond the threshold, relative to alone."""
        def f(v: float) -> str:
            return "—" if math.isnan(v) else "∞" if not math.isfinite(v) else f"{v:.2g}"
        return (f"{self.shared.count} of {self.shared.n} shared iterations slower than {self.source} "
                f"{self.threshold_ms:.3g} ms vs {self.alone.count} of {self.alone.n} alone: "
                f"{f(self.ratio)}× as often ({f(self.lo)}–{f(self.hi)}×)")


@dataclass(frozen=True)
class Verdict:
    """The reading of one tenant and clock, and the evidence it rests on."""

    reading: str  # exactly one of readings(margin)
    rule: str  # which rule decided, in words
    df: rules.Degradation
    exceedance: Exceedance | None
    missing: str = ""  # inconclusive: what is missing
    iterations_needed: int | None = None  # inconclusive: about how many iterations (each side) would decide
    blocks_needed: int | None = None  # inconclusive, interleaved blocks: about how many shared blocks would decide
    open_sides: tuple[str, ...] = ()  # "shared p99 upper", "alone p99 upper", ...
    q: float = 0.99
    margin: float = DEFAULT_MARGIN
    confidence: float = 0.95
    collided: Exceedance | None = None  # the tail test on the launches that found a neighbour in flight
    contrast: Contrast | None = None  # ... against the same blocks' launches that found none (same moment)
    drift: Drift | None = None  # the between-block term the tests carry
    tail: Exceedance | None = None  # the tail test that decides: each block scaled to its median (or the SLO)
    level: float = math.nan  # shared / alone median (the blocks' mean log medians)
    p_slower: float = 1.0  # the verdict's own one-sided p-values (its tests combined by weight)
    p_faster: float = 1.0
    p_slower_adjusted: float = 1.0  # ... after the report's family correction (``family``)
    p_faster_adjusted: float = 1.0
    family: int = 1  # how many verdicts shared the level (``family``)
    slower_evidence: tuple[str, ...] = ()  # each test's words, strongest first
    faster_evidence: tuple[str, ...] = ()
    slower_by: str = ""  # the strongest test each way: "DF", "level", "tail" or "collided" (``effect_size``)
    faster_by: str = ""
    within: tuple[bool, bool] = (False, False)  # the two one-sided tests of "no change within ±margin"
    within_text: str = ""
    short: bool = False
    usable: bool = False  # DF's interval may decide (order method, n >= 368, inside its tested range)
    method: str = "order"
    design: str = "bracketed"  # which row of WEIGHTS_BY_DESIGN the tests' levels came from
    blocks: B.BlockPair | None = None  # the block-paired tests (the warm design's interleaved blocks)
    p_tests: tuple[tuple[str, float, float], ...] = ()  # (test, p slower, p faster): each test's own p-values
    shape_tests: tuple[str, ...] = ()  # the tests of the tail's shape (each block scaled to its median), not its level
    notes: tuple[str, ...] = ()  # what the design left out (an empty block), said beside the reading
    grouped_tail: B.BlockTest | None = None  # the bracketed design's tail shape, block by block (``blocks.grouped``)

    @property
    def decided(self) -> bool:
        return self.reading != INCONCLUSIVE

    @property
    def words(self) -> str:
        """The reading with its reason: what a table cell or a headline shows."""
        if self.decided:
            return f"{self.reading} ({self.rule})"
        need = f"; about {self.iterations_needed:,} iterations would decide" if self.iterations_needed else ""
        return f"{INCONCLUSIVE} ({self.missing}{need})"

    def p_of(self, test: str, slower: bool = True) -> float:
        """The named test's own one-sided p-value (before weights and the family); NaN where it did not run."""
        for name, ps, pf in self.p_tests:
            if name == test:
                return ps if slower else pf
        return math.nan


# ----------------------------------------------------------------------------- the exceedance test

def _effective(x: np.ndarray, beyond: np.ndarray, q: float) -> tuple[float, float]:
    """(tau, nu) of the exceedance count of x beyond a threshold, from the tail around that level."""
    n = len(x)
    k = int(beyond.sum())
    level = min(max(1.0 - max(k, 1) / n, 0.5), 1.0 - 1.0 / n) if n > 2 else q
    if n < 3 or np.ptp(x) == 0:
        return 1.0, math.inf
    return orderstat.indicator_tau(x, level)


def _beta_nodes(a: float, b: float) -> tuple[np.ndarray, np.ndarray]:
    """Nodes and weights for E[f(U)], U ~ Beta(a, b): narrow log-spaced cells with their exact probabilities.

    The p-values live in U's upper tail (a few extra alone exceedances move them a lot), where equal-
    probability midpoints are too coarse (8 % low at p = 0.006); log-spaced cells resolve it.
    """
    from scipy.special import (  # scipy: ~0.6 s to import, needed here only
        betainc,
        betaincinv,
    )

    if a <= 0 or b <= 0:  # no alone sample beyond the threshold, or every one: U is 0 or 1
        return np.full(1, 0.0 if a <= 0 else 1.0), np.ones(1)
    lo, hi = betaincinv(a, b, 1e-12), betaincinv(a, b, 1 - 1e-12)
    edges = np.geomspace(max(lo, 1e-300), hi, _QUAD + 1)
    w = np.diff(betainc(a, b, edges))
    return np.sqrt(edges[:-1] * edges[1:]), w / w.sum()


def _p_more(k: float, m: float, nodes: tuple[np.ndarray, np.ndarray], ratio: float = 1.0) -> float:
    """P(K >= k) for K ~ Binomial(m, min(1, ratio * U)), U over ``nodes``: continuous k and m (effective sizes)."""
    from scipy.special import betainc  # scipy: ~0.6 s to import, needed here only

    if k <= 0:
        return 1.0
    if k > m:
        return 0.0
    u, w = nodes
    return float(np.dot(w, betainc(k, m - k + 1.0, np.minimum(1.0, ratio * u))))


def _p_less(k: float, m: float, nodes: tuple[np.ndarray, np.ndarray], ratio: float = 1.0) -> float:
    """P(K <= k) in the same model."""
    from scipy.special import betainc  # scipy: ~0.6 s to import, needed here only

    u, w = nodes
    if k >= m or not u.any():
        return 1.0
    if k <= 0 and u.min() >= 1.0:
        return 0.0
    return float(np.dot(w, 1.0 - betainc(k + 1.0, m - k, np.minimum(1.0, ratio * u))))


def _solve(fn, target: float, increasing: bool) -> float:
    """The ratio where fn(ratio) = target, by bisection on the log scale over [1e-4, 1e4]; 0 or inf outside."""
    lo, hi = -4.0 * math.log(10), 4.0 * math.log(10)
    f_lo, f_hi = fn(math.exp(lo)), fn(math.exp(hi))
    if increasing and f_lo >= target:
        return 0.0
    if increasing and f_hi < target:
        return math.inf
    if not increasing and f_hi >= target:
        return math.inf
    if not increasing and f_lo < target:
        return 0.0
    for _ in range(40):
        mid = 0.5 * (lo + hi)
        if (fn(math.exp(mid)) < target) == increasing:
            lo = mid
        else:
            hi = mid
    return math.exp(0.5 * (lo + hi))


def _welch(k: int, m: int, tau_s: float, nu_s: float, r: int, n: int, tau_a: float, nu_a: float) -> float:
    """Welch-Satterthwaite degrees of freedom of the two shares' variance: each side's tau uncertainty
    (nu clusters) counts as much as that side contributes to the variance of the difference."""
    v_s = tau_s * (k + 0.5) / m**2
    v_a = tau_a * (r + 0.5) / n**2
    den = v_s**2 / nu_s + v_a**2 / nu_a
    return (v_s + v_a) ** 2 / den if den > 0 else math.inf


def _share(count: int, n: int, tau: float, a2: float) -> Share:
    """Clopper-Pearson at the effective size n / tau."""
    from scipy.stats import beta  # scipy: ~0.6 s to import, needed here only

    k, m = count / tau, n / tau
    lo = float(beta.ppf(a2, k, m - k + 1)) if count > 0 else 0.0
    hi = float(beta.ppf(1 - a2, k + 1, m - k)) if count < n else 1.0
    return Share(count, n, lo, hi, tau)


def exceedance(shared: Sequence[np.ndarray], alone: Sequence[np.ndarray], *, q: float = 0.99,
               slo_ms: float | None = None, confidence: float = 0.95, interval: bool = True) -> Exceedance:
    """Shared vs alone share beyond the alone q-quantile (or ``slo_ms``), with intervals and the test.

    The alone series' own uncertainty about its q-quantile is part of the test (see the module's doc).
    ``interval=False``: the p-values only (the ratio's interval NaN), for the tests the verdict runs inside.
    """
    xs = np.concatenate([np.asarray(r, np.float64) for r in shared])
    xa = np.concatenate([np.asarray(r, np.float64) for r in alone])
    m, n = len(xs), len(xa)
    if slo_ms is not None:
        ladder = [(f"SLO {slo_ms:g} ms", float(slo_ms))]
        source = "the SLO"
    else:
        base = float(np.quantile(xa, q))
        r0 = int(np.sum(xa > base))
        srt = np.sort(xa)
        ladder = [(f"alone p{100 * q:g}", base)]
        for f in LADDER[1:]:
            r = int(math.floor(r0 * f))
            if 1 <= r < r0:
                ladder.append((f"alone p{100 * (1 - r / n):.4g}", float(srt[n - r - 1])))
        source = f"the alone p{100 * q:g}"
    steps, first = [], None
    for label, thr in ladder:
        bs, ba = xs > thr, xa > thr
        k, r = int(bs.sum()), int(ba.sum())
        (tau_s, nu_s), (tau_a, nu_a) = _effective(xs, bs, q), _effective(xa, ba, q)
        tau_s = tau_a = max(tau_s, tau_a)  # the larger clustering on both sides (see the module's doc)
        nu = _welch(k, m, tau_s, nu_s, r, n, tau_a, nu_a)
        a2 = (1 - orderstat.t_widened(confidence, nu)) / 2
        ke, me = k / tau_s, m / tau_s
        # the alone tail probability at the threshold: Beta(r + 1, n - r) above, Beta(r, n - r + 1) below
        up, down = _beta_nodes((r + 1) / tau_a, (n - r) / tau_a), _beta_nodes(r / tau_a, (n - r + 1) / tau_a)
        # the p-values at tau alone: the t over nu clusters widens only the printed ratio interval (see Exceedance)
        pm, pl = _p_more(ke, me, up), _p_less(ke, me, down)
        steps.append(Step(label, thr, k, r, pm, pl))
        if first is None:
            lo = _solve(lambda R, ke=ke, me=me, up=up: _p_more(ke, me, up, ratio=R), a2, True) if interval else math.nan
            hi = (_solve(lambda R, ke=ke, me=me, down=down: _p_less(ke, me, down, ratio=R), a2, False) if interval
                  else math.nan)
            first = (thr, _share(k, m, tau_s, a2), _share(r, n, tau_a, a2), lo, hi)
    thr, s_sh, s_al, lo, hi = first
    ratio = s_sh.estimate / s_al.estimate if s_al.count else (math.inf if s_sh.count else math.nan)
    # both directions ladder-corrected alike (before: "more" took the better of two thresholds, "less" only one)
    p_more = min(1.0, len(steps) * min(s.p_more for s in steps))
    p_less = min(1.0, len(steps) * min(s.p_less for s in steps))
    return Exceedance(thr, source, s_sh, s_al, ratio, lo, hi, p_more, p_less, tuple(steps), confidence)


# ----------------------------------------------------------------------------- drift between blocks

@dataclass(frozen=True)
class Drift:
    """How far a tenant's speed moves between blocks (alone and shared phases), on the log scale.

    ``sd`` is one block's level sd; the difference of the two phases' mean levels then has ``se`` =
    sd * sqrt(1/K + 1/J) from drift alone. Estimated from the blocks' log medians (each phase's blocks around
    their own mean: the sharing effect, common to every shared block, does not enter; their own sampling noise
    does), with (K - 1) + (J - 1) degrees of freedom and the prior allowance pooled as ``PRIOR_DRIFT_DF`` more
    (0: the blocks alone; a prior of one degree of freedom at 4.5 % cut "no change" under a clean null at n = 800
    from 31 to 8 of 40 runs); with ONE alone block nothing is measured and the prior of the tenant's kind is used
    with the degrees of freedom it was measured with (``prior.PRIORS``), which the verdict says.
    """

    sd: float
    df: float  # degrees of freedom of sd (the prior's: those of the population it was measured on)
    alone_blocks: int
    shared_blocks: int
    observed: float | None  # the blocks' own sd (None: one block a side, nothing observed)
    sampling: float = 0.0  # with one block a side: the two medians' own variance (log scale), else in the scatter
    kind: str = "host"  # the prior's tenant kind (``prior.classify``), used where nothing is measured
    trend: bool = False  # the blocks' scatter is around a linear time trend (interleaved blocks, ``blocks.order``)

    @property
    def measured(self) -> bool:
        return self.alone_blocks >= 2

    @property
    def se(self) -> float:
        """sd of the shared-minus-alone mean log level under no effect: drift (and, one block a side, sampling)."""
        return math.sqrt(self.sd**2 * (1 / self.alone_blocks + 1 / self.shared_blocks) + self.sampling)

    def quantile(self, p: float) -> float:
        """The upper p-quantile of the standardised level difference (t with ``df``, normal when known)."""
        from scipy.stats import norm, t  # scipy: ~0.6 s to import, needed here only

        return float(norm.isf(p) if not math.isfinite(self.df) else t.isf(p, self.df))

    def sf(self, z: float) -> float:
        from scipy.stats import norm, t  # scipy: ~0.6 s to import, needed here only

        return float(norm.sf(z) if not math.isfinite(self.df) else t.sf(z, self.df))

    @property
    def words(self) -> str:
        if not self.measured:
            return f"one alone block: no drift measured, {P.one_block_prior().words} is used"
        prior = f" and the prior as {PRIOR_DRIFT_DF:g} more degrees of freedom" if PRIOR_DRIFT_DF else ""
        trend = ", around a linear time trend" if self.trend else ""
        return (f"drift between blocks sd {100 * self.sd:.1f} % ({self.df:g} degrees of freedom) from "
                f"{self.alone_blocks} alone and {self.shared_blocks} shared blocks{trend}{prior}")


# The prior allowance for drift between blocks (log-scale sd of one block's level), used where a run has one alone
# block (old references, foreign logs) and pooled as one degree of freedom with the blocks' own scatter otherwise.
# Measured on every committed H200 run with alone blocks (``python -m bench.bench_drift_prior``): the largest spread
# of a tenant's alone block medians. It was the FFT's wall clock in h200-2026-11-30-repeats (0.570, 0.531, 0.525 ms:
# sd of log 0.045) until the launch-bound LLM of h200-2026-12-03-four-tenants-blocks moved more (device medians
# 1.542, 1.593, 1.984 ms: 0.137; its host's launch speed drifts, as the real models' does: BERT's two alone blocks
# of h200-2026-12-03-rm-sealed-bert-vit-llama 0.132, llama-decode's 0.118), then to a real Llama server's three alone
# blocks with the profiler's CUPTI detached (h200-2026-12-03-rm-cupti-two-llama, llama-decode-2's wall medians 12.93,
# 17.05, 15.89 ms: 0.144; device 0.145): the host's launch speed, not the profiler, moves a launch-bound step that
# much between minutes. A run with one alone block cannot know which kind of tenant it holds, so it gets the largest;
# the bracketed design measures its own. Not covered: a launch-bound real model's host drift can exceed it (BERT in
# h200-2026-12-04-rm-cupti-bert-vit-train: 10.66, 10.70, 5.84 ms, its host probe 1.8x faster in the third block);
# as the one prior that 35 % would make a GEMM's 2.3x slowdown under an MPS thread cap inconclusive, so it is left
# out (docs/methods/statistics.md says so) until the prior follows the tenant's measured kind.
# Left out likewise: the real-model mix of h200-2026-12-04-rm-fresh-ts, h200-2026-12-04-rm-warm-ts and
# h200-2026-12-04-rm-warm-mps (BERT and ResNet-50 moved 5-10 ms between alone blocks with the host; the warm design
# measures its own drift from 9 alone blocks a mode), and the same mix in 24 shared blocks,
# h200-2026-12-06-rm-warm-ts-24; and the article profile at blocks=auto on an H100, h100-2026-12-06-article-headline
# (its FFT's alone medians 0.35-0.50 ms, sd of log 0.10: a block after a longer idle GPU runs the short op slower;
# above the GPU-bound kind's 4.5 %, which a one-block run of such a tenant on that card would then understate).
# Since issue 43 the allowance follows the tenant's kind (``prior.PRIORS``: GPU-bound 4.5 %, host-bound 14.5 %, each
# with the degrees of freedom of the population it was measured on); this is the host-bound one, the allowance of
# a tenant whose kind is not known.
PRIOR_DRIFT_SD = P.PRIORS["host"].sd
PRIOR_DRIFT_DF = 0.0


def _log_median_var(x: np.ndarray, confidence: float = 0.95) -> float:
    """The variance of log median(x), from its order-statistic interval (autocorrelation included)."""
    from scipy.stats import norm  # scipy: ~0.6 s to import, needed here only

    b = orderstat.quantile_bounds(x, 0.5, confidence)
    if not (b.lo > 0 and math.isfinite(b.hi)):
        return math.inf
    return ((math.log(b.hi) - math.log(b.lo)) / (2 * norm.isf((1 - confidence) / 2))) ** 2


def drift(shared_runs: Sequence[np.ndarray], alone_runs: Sequence[np.ndarray], *, kind: str | None = None,
          times: tuple[Sequence[float], Sequence[float]] | None = None) -> Drift:
    """The between-block drift of one tenant: the blocks are the repeats (``-rK`` scenarios) of each phase.

    Interleaved blocks (``blocks.order``: three or more shared blocks between alone ones) give the scatter around a
    linear time trend (``blocks.paired``'s residual, 2B - 2 degrees of freedom): a linear drift is then not read
    as scatter. The bracketed design's two shared blocks keep the scatter around each phase's mean: a trend would
    take one of its three degrees of freedom, and its balance (alone, shared, alone, shared, alone) keeps a linear
    drift out of the level difference, so the inflated scatter only errs towards "inconclusive". One alone block:
    the prior of the tenant's ``kind`` (``prior.prior``), with its degrees of freedom."""
    la = [math.log(float(np.median(r))) for r in alone_runs if len(r) and np.median(r) > 0]
    ls = [math.log(float(np.median(r))) for r in shared_runs if len(r) and np.median(r) > 0]
    k, j = max(len(la), 1), max(len(ls), 1)
    bt = B.paired(list(shared_runs), list(alone_runs), "median", times) if len(la) >= 2 else None
    if bt is not None and bt.resid_sd >= 0:
        sd = math.sqrt((PRIOR_DRIFT_DF * PRIOR_DRIFT_SD**2 + bt.df * bt.resid_sd**2) / (PRIOR_DRIFT_DF + bt.df))
        return Drift(sd, PRIOR_DRIFT_DF + bt.df, k, j, bt.resid_sd, kind=kind or "host", trend=True)
    ss = float(np.sum((np.array(la) - np.mean(la)) ** 2)) if len(la) > 1 else 0.0
    ss += float(np.sum((np.array(ls) - np.mean(ls)) ** 2)) if len(ls) > 1 else 0.0
    dfd = max(len(la) - 1, 0) + max(len(ls) - 1, 0)
    if len(la) < 2:  # nothing measured about the alone phase's moments: the prior, as known
        xa = np.concatenate([r for r in alone_runs if len(r)]) if la else np.zeros(0)
        xs = np.concatenate([r for r in shared_runs if len(r)]) if ls else np.zeros(0)
        samp = (_log_median_var(xa) + _log_median_var(xs)) if len(xa) > 2 and len(xs) > 2 else 0.0
        pr = P.one_block_prior()
        return Drift(pr.sd, pr.df, k, j, math.sqrt(ss / dfd) if dfd else None,
                     samp if math.isfinite(samp) else 0.0, kind=pr.kind)
    sd = math.sqrt((PRIOR_DRIFT_DF * PRIOR_DRIFT_SD**2 + ss) / (PRIOR_DRIFT_DF + dfd))
    return Drift(sd, PRIOR_DRIFT_DF + dfd, k, j, math.sqrt(ss / dfd), kind=kind or "host")


def _scaled(runs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """Each block divided by its own median: the tail's shape, free of the block's level (drift)."""
    out = []
    for r in runs:
        r = np.asarray(r, np.float64)
        med = float(np.median(r)) if len(r) else 0.0
        out.append(r / med if med > 0 else r)
    return out


# ----------------------------------------------------------------------------- the rule

def _open_sides(d: rules.Degradation, q: float) -> tuple[str, ...]:
    out = []
    for side, iv in (("shared", d.shared), ("alone", d.alone)):
        if iv is None:
            continue
        if not math.isfinite(iv.hi):
            out.append(f"{side} p{100 * q:g} upper")
        if not math.isfinite(iv.lo):
            out.append(f"{side} p{100 * q:g} lower")
    return tuple(out)


def _projection(d: rules.Degradation | None, ex: Exceedance | None, n: int, margin: float,
                alpha: float, dr: Drift | None = None, alpha_df: float | None = None) -> int | None:
    """About how many iterations per side would decide, from how far each estimand is from deciding; None where
    none can.

    DF's own half-width shrinks as 1 / sqrt(n), the drift term between blocks does not: with w the drift term
    at DF's level, DF decides at N = n h^2 / (gap^2 - w^2), and never where w >= gap (the audit's "about 83,000
    iterations would decide" where no number could). The tail test (each block scaled to its median: no drift
    term) shrinks as 1 / sqrt(n). An open bound first needs the n at which a p99 has a bound at all.
    """
    from scipy.stats import norm  # scipy: ~0.6 s to import, needed here only

    cands = []
    est = d.estimate if d is not None else math.nan
    if d is not None and math.isfinite(est) and est > 0:
        e = math.log(est)
        need_bound = rules.min_corunning_samples() * max(
            (iv.n if isinstance(iv.n, int) else sum(iv.n)) / (iv.ess if isinstance(iv.ess, float) and iv.ess else 1)
            for iv in (d.shared, d.alone) if iv is not None) if d.shared is not None else n
        h_lo = e - math.log(d.lo) if d.lo > 0 and math.isfinite(d.lo) else math.inf
        h_hi = math.log(d.hi) - e if math.isfinite(d.hi) else math.inf
        w = dr.quantile(alpha_df or alpha) * dr.se if dr is not None and dr.se > 0 else 0.0

        def needed(h: float, gap: float) -> float:
            if gap <= w:
                return math.inf  # the drift term alone is wider than the gap: no n decides
            return n * h**2 / (gap**2 - w**2) if math.isfinite(h) else max(need_bound, 2 * n)

        if abs(e) > 1e-9:  # decide the direction
            h, gap = (h_lo, e) if e > 0 else (h_hi, -e)
            cands.append(needed(h, gap))
        room = math.log(1 + margin) - max(e, 0) if e >= 0 else -math.log(1 - margin) + e
        if room > 0:  # or show it lies within the margin
            cands.append(needed(max(h_lo, h_hi), room))
    if ex is not None and ex.steps:
        p = min(s.p_more for s in ex.steps)
        z, z_need = norm.isf(max(p, 1e-300)), norm.isf(alpha / len(ex.steps))
        if z > 0.5:
            cands.append(n * (z_need / z) ** 2)
    finite = [c for c in cands if math.isfinite(c) and c > n]
    if not finite:
        return None
    v = min(finite)
    digits = 10 ** max(0, int(math.log10(v)) - 1)
    return int(math.ceil(v / digits) * digits)


def _split(shared_runs: Sequence[np.ndarray], collided: Sequence[np.ndarray] | None
           ) -> tuple[list[np.ndarray], list[np.ndarray]] | None:
    """(collided launches, the others), each block scaled to its own median; None: no flags, or none flagged."""
    if collided is None:
        return None
    hit, rest = [], []
    for r, c in zip(shared_runs, collided, strict=True):
        if not len(r):
            continue
        x, c = _scaled([r])[0], np.asarray(c, bool)
        hit.append(x[c])
        rest.append(x[~c])
    if not sum(len(x) for x in hit):
        return None
    return [x for x in hit if len(x)], [x for x in rest if len(x)]


@dataclass(frozen=True)
class Contrast:
    """The same-moment control: the launches that found a neighbour in flight against the same shared blocks'
    launches that did not (same moment, same drift, same host) -- the part of the slowdown sharing causes."""

    n_collided: int
    n_clear: int
    beyond: int  # collided launches beyond the clear launches' p99 (each block scaled to its median)
    clear_beyond: int
    p: float  # one-sided: more of the collided launches beyond the clear ones' p99 (the tail's test)
    median_ms: float  # median of the collided launches minus median of the clear ones (ms, raw)
    lo_ms: float
    hi_ms: float
    p_median: float = math.nan  # one-sided: the collided launches' median above the clear ones' (its own test)
    median_how: str = ""  # how the median's p was read ("t over 12 blocks", "order-statistic interval")
    median_ratio: tuple[float, float, float] | None = None  # t over blocks: collided / clear median, 95 % interval

    @property
    def words(self) -> str:
        def f(v: float) -> str:
            return "no bound" if not math.isfinite(v) else f"{v:+.3g}"
        med = f", p = {self.p_median:.2g} {self.median_how}" if math.isfinite(self.p_median) else ""
        return (f"{self.beyond} of {self.n_collided} launches that found a neighbour in flight beyond the p99 of the "
                f"{self.n_clear} that did not (same blocks), p = {self.p:.2g}; median {f(self.median_ms)} ms "
                f"[{f(self.lo_ms)}, {f(self.hi_ms)}]{med}")

    @property
    def median_words(self) -> str:
        def f(v: float) -> str:
            return "no bound" if not math.isfinite(v) else f"{v:+.3g}"
        if self.median_ratio is not None:  # the interval of the test that decides: the blocks' ratios
            r, lo, hi = self.median_ratio
            return (f"the {self.n_collided} launches that found a neighbour in flight {r:.3f}x [{lo:.3f}, {hi:.3f}] "
                    f"the median of the {self.n_clear} that did not, block by block (same blocks; "
                    f"{f(self.median_ms)} ms pooled), p = {self.p_median:.2g} {self.median_how}")
        return (f"the {self.n_collided} launches that found a neighbour in flight {f(self.median_ms)} ms [{f(self.lo_ms)}, "
                f"{f(self.hi_ms)}] slower at the median than the {self.n_clear} that did not (same blocks), p = "
                f"{self.p_median:.2g} {self.median_how}")


def _contrast(shared_runs: Sequence[np.ndarray], collided: Sequence[np.ndarray] | None, q: float,
              confidence: float) -> Contrast | None:
    parts = _split(shared_runs, collided)
    if parts is None or sum(len(x) for x in parts[1]) < MIN_CLEAR:
        return None  # too few clear launches to have a p99 to compare with: the alone tail decides instead
    hit, rest = parts
    ex = exceedance(hit, rest, q=q, confidence=confidence, interval=False)
    raw_hit = np.concatenate([np.asarray(r, np.float64)[np.asarray(c, bool)]
                              for r, c in zip(shared_runs, collided or [], strict=True) if len(r)])
    raw_rest = np.concatenate([np.asarray(r, np.float64)[~np.asarray(c, bool)]
                               for r, c in zip(shared_runs, collided or [], strict=True) if len(r)])
    m1, m0 = float(np.median(raw_hit)), float(np.median(raw_rest))
    lo = hi = math.nan
    if len(raw_hit) >= 2 and len(raw_rest) >= 2:  # MOVER for a difference of two independent medians
        b1, b0 = orderstat.quantile_bounds(raw_hit, 0.5, confidence), orderstat.quantile_bounds(raw_rest, 0.5, confidence)
        lo = m1 - m0 - math.hypot(m1 - b1.lo, b0.hi - m0)
        hi = m1 - m0 + math.hypot(b1.hi - m1, m0 - b0.lo)
    p_med, how, ratio = _median_shift_p(shared_runs, collided or [], m1 - m0, lo, hi, confidence)
    return Contrast(ex.shared.n, ex.alone.n, ex.decisive.shared_count, ex.decisive.alone_count, ex.p_more,
                    m1 - m0, lo, hi, p_med, how, ratio)


MIN_SPLIT = 3  # collided launches a block needs for its median to enter the median shift's test (and 3x as many clear)


def _median_shift_p(shared_runs: Sequence[np.ndarray], collided: Sequence[np.ndarray], diff: float, lo: float,
                    hi: float, confidence: float) -> tuple[float, str, tuple[float, float, float] | None]:
    """One-sided p that the collided launches' median lies above the clear launches' (same blocks): with three or
    more blocks holding both, a t over the blocks' differences of log medians (each block its own moment: drift
    and autocorrelation stay inside it); else from the order-statistic interval of the raw difference (normal).

    Why: the tail test alone missed a collision that costs every collided launch the same: on the CPU quickstart
    the collided FFT launches were +0.58 ms [+0.47, +0.71] at the median and the verdict ignored it."""
    from scipy.stats import norm, t  # scipy: ~0.6 s to import, needed here only

    d = []
    for r, c in zip(shared_runs, collided, strict=True):
        x, c = np.asarray(r, np.float64), np.asarray(c, bool)
        if c.sum() >= MIN_SPLIT and (~c).sum() >= 3 * MIN_SPLIT and np.all(x > 0):
            d.append(math.log(float(np.median(x[c]))) - math.log(float(np.median(x[~c]))))
    if len(d) >= 3 and np.std(d, ddof=1) > 0:
        mean, se = float(np.mean(d)), float(np.std(d, ddof=1)) / math.sqrt(len(d))
        h = float(t.isf((1 - confidence) / 2, len(d) - 1)) * se
        return (float(t.sf(mean / se, len(d) - 1)), f"(t over {len(d)} blocks)",
                (math.exp(mean), math.exp(mean - h), math.exp(mean + h)))
    if not (math.isfinite(lo) and math.isfinite(hi) and hi > lo):
        return math.nan, "", None
    se = (hi - lo) / (2 * float(norm.isf((1 - confidence) / 2)))
    return float(norm.sf(diff / se)), "(order-statistic interval)", None


MIN_CLEAR = 100  # clear launches the same-moment contrast needs: fewer have no p99 (one beyond it at 100)
SMALL_SLOWER = "small slowdown"
SMALL_FASTER = "small speed-up"
# Within a verdict the tests share its one-sided level by weight (Bonferroni: p = min over tests of p_i / w_i), and
# the weights follow what the design can measure (issue 43):
# - blocks (the warm design, 3+ shared blocks between alone ones): the block-paired median ("level") gets most of
#   it, the block-paired tail shape ("block tail") the next share; the pooled tail (no between-block term for the
#   tail's shape), DF and the same-moment contrast little. DF held 40 % of the level and decided 0-24 of 200
#   decided verdicts in the audit's grid.
# - bracketed (3 alone, 2 shared blocks): DF cut from 40 % to 20 %, the level test from 30 % to 40 %, the contrast
#   20 %.
# - one block: nothing measures the drift, so the level test and DF carry the prior's allowance; with the
#   neighbours' timestamps the same-moment contrast -- drift-free: its two groups share every block -- gets 45 %
#   (from 10 %), the medians keeping 30 % so that a bulk shift beyond the prior still decides, the pooled tail 20 %.
# - issue 52: the same-moment contrast also asks the collided launches' median against the clear ones' ("collided
#   median", its weight taken from the level test's share, or the contrast's with one block): a collision that
#   costs every collided launch the same (a CPU core's time slice) moves their median and little of their tail.
WEIGHTS_BY_DESIGN = {
    "blocks": {"DF": 0.05, "level": 0.5, "block tail": 0.2, "tail": 0.05, "collided": 0.1, "collided median": 0.1},
    "bracketed": {"DF": 0.2, "level": 0.35, "block tail": 0.2, "tail": 0.0, "collided": 0.2, "collided median": 0.05},
    "one block": {"DF": 0.4, "level": 0.4, "tail": 0.2, "collided": 0.0, "collided median": 0.0},
    "one block, timestamps": {"DF": 0.05, "level": 0.3, "tail": 0.2, "collided": 0.4, "collided median": 0.05},
    "blocks, few iterations": {"DF": 0.0, "level": 1.0, "block tail": 0.0, "tail": 0.0, "collided": 0.0,
                               "collided median": 0.0},
}
WEIGHTS = WEIGHTS_BY_DESIGN["bracketed"]


def design_of(n_shared: int, n_alone: int, interleaved: bool, timestamps: bool) -> str:
    """The row of ``WEIGHTS_BY_DESIGN`` a tenant's blocks fall in."""
    if interleaved:
        return "blocks"
    if n_alone >= 2:
        return "bracketed"
    return "one block, timestamps" if timestamps else "one block"


def weights(short: bool, design: str = "bracketed") -> dict[str, float]:
    """Each test's share of the verdict's level in its design; below ``rules.MIN_CORUNNING`` samples (``short``)
    the pooled tail tests -- the whole series' and the collided launches' alike -- decide at a quarter of theirs
    (``SHORT_ALPHA_SHARE``: at n = 300 slow drift took the tail test's false alarms to 4 % at the full level)."""
    cut = SHORT_ALPHA_SHARE if short else 1.0
    return {k: v * (cut if k in ("tail", "collided", "collided median") else 1.0)
            for k, v in WEIGHTS_BY_DESIGN[design].items()}


def small_slower(margin: float = DEFAULT_MARGIN) -> str:
    """A significant slowdown whose DF is below 1 + margin: "small slowdown (< 10 %)"."""
    return f"{SMALL_SLOWER} (< {100 * margin:g} %)"


def small_faster(margin: float = DEFAULT_MARGIN) -> str:
    return f"{SMALL_FASTER} (< {100 * margin:g} %)"


def level_test(shared_runs: Sequence[np.ndarray], alone_runs: Sequence[np.ndarray], dr: Drift
               ) -> tuple[float, float, float]:
    """(shared / alone level ratio, p slower, p faster): the blocks' mean log medians, against drift's se."""
    la = [math.log(float(np.median(r))) for r in alone_runs if len(r) and np.median(r) > 0]
    ls = [math.log(float(np.median(r))) for r in shared_runs if len(r) and np.median(r) > 0]
    if not la or not ls:
        return math.nan, 1.0, 1.0
    diff = float(np.mean(ls) - np.mean(la))
    se = dr.se
    if se <= 0:
        return math.exp(diff), (0.0 if diff > 0 else 1.0), (0.0 if diff < 0 else 1.0)
    return math.exp(diff), dr.sf(diff / se), dr.sf(-diff / se)


def _widened_p(e: float, h: float, z_ref: float, dr: Drift) -> float:
    """The one-sided p-value of a widened interval: the level a at which hypot(h * z(a) / z_ref, t_df(a) * se)
    -- DF's own half-width (normal, scaled to level a) and the drift term (a t with the drift's degrees of
    freedom) in quadrature -- just reaches e. Reading the sum as normal made the tail 6.5x nominal at Holm's
    first step with 3 degrees of freedom (the audit): the drift term's t tail is heavier than the normal's."""
    from scipy.special import ndtri, stdtrit  # scipy: ~0.6 s to import, needed here only (the fast forms)

    if not (math.isfinite(h) and e > 0):
        return 1.0

    def width(a: float) -> float:
        drift = -float(ndtri(a)) if not math.isfinite(dr.df) else -float(stdtrit(dr.df, a))
        return math.hypot(h * -float(ndtri(a)) / z_ref, drift * dr.se)

    lo, hi = math.log(1e-15), math.log(0.5)
    if width(0.5) >= e:
        return 0.5
    if width(1e-15) < e:
        return 1e-15
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        if width(math.exp(mid)) > e:
            lo = mid
        else:
            hi = mid
    return math.exp(0.5 * (lo + hi))


def _widened_df(d: rules.Degradation, dr: Drift, confidence: float) -> tuple[rules.Degradation, float, float]:
    """DF's interval with the between-block term added in quadrature (log scale), and its one-sided p-values
    (``_widened_p``: ``lo > 1`` exactly when ``p_more`` <= (1 - confidence) / 2)."""
    from scipy.stats import norm  # scipy: ~0.6 s to import, needed here only

    est = d.estimate
    if not (math.isfinite(est) and est > 0) or math.isnan(d.lo):
        return d, 1.0, 1.0
    a2 = (1 - confidence) / 2
    z = float(norm.isf(a2))
    w = dr.quantile(a2) * dr.se  # the drift term at the same level
    e = math.log(est)
    h_lo = e - math.log(d.lo) if d.lo > 0 and math.isfinite(d.lo) else math.inf
    h_hi = math.log(d.hi) - e if math.isfinite(d.hi) else math.inf
    H_lo, H_hi = math.hypot(h_lo, w), math.hypot(h_hi, w)
    lo = math.exp(e - H_lo) if math.isfinite(H_lo) else -math.inf
    hi = math.exp(e + H_hi) if math.isfinite(H_hi) else math.inf
    p_more = _widened_p(e, h_lo, z, dr) if math.isfinite(H_lo) and H_lo > 0 else 1.0
    p_less = _widened_p(-e, h_hi, z, dr) if math.isfinite(H_hi) and H_hi > 0 else 1.0
    return replace(d, lo=lo, hi=hi), p_more, p_less


def _within(sh: list[np.ndarray], al: list[np.ndarray], q: float, margin: float, dr: Drift,
            confidence: float) -> tuple[bool, bool, str]:
    """Two one-sided tests that the shared q-quantile lies within ±margin of the alone one, drift allowed for.

    Upper: fewer than 1 - q of the shared iterations (upper bound of their share) beyond (1 + margin) x the alone
    p99's lower bound, shrunk by the drift allowance; lower: fewer than 1 - q of the alone iterations beyond the
    shared p99's lower bound / (1 - margin), shrunk alike. Shares are precise where a p99's upper bound is open
    (800 samples of a drifting series), so "no change" is reachable at the kit's sizes.
    """
    a2 = (1 - confidence) / 2
    xs, xa = np.concatenate(sh), np.concatenate(al)
    if len(xs) < 2 or len(xa) < 2:
        return False, False, ""
    shrink = math.exp(-dr.quantile(a2) * dr.se)
    # each side's p99 lower bound from its blocks pooled as one series: the blocks' scatter in level is drift, which
    # the allowance below carries (the repeats' interval, with K - 1 degrees of freedom, often has no bound at all)
    lo_a = orderstat.quantile_bounds(xa, q, confidence).lo
    lo_s = orderstat.quantile_bounds(xs, q, confidence).lo

    def below(x: np.ndarray, thr: float) -> tuple[bool, int, float]:
        if not (math.isfinite(thr) and thr > 0):
            return False, 0, 1.0
        beyond = x > thr
        tau, _nu = _effective(x, beyond, q)
        s = _share(int(beyond.sum()), len(x), tau, a2)
        return s.hi < 1 - q, int(beyond.sum()), s.hi

    up, k_up, hi_up = below(xs, (1 + margin) * lo_a * shrink)
    down, k_down, hi_down = below(xa, lo_s / (1 - margin) * shrink)
    text = (f"{k_up} of {len(xs)} shared iterations beyond (1 + {margin:g}) x the alone p{100 * q:g}'s lower bound "
            f"(share up to {100 * hi_up:.2g} %), {k_down} of {len(xa)} alone beyond the shared one's / (1 - {margin:g}) "
            f"(up to {100 * hi_down:.2g} %), drift allowance {100 * (1 - shrink):.1f} %")
    return up, down, text


def _slo_exceedance(sh: list[np.ndarray], al: list[np.ndarray], slo_ms: float, dr: Drift,
                    confidence: float, q: float) -> Exceedance:
    """The SLO's exceedance test with the drift term: an SLO is a fixed threshold in ms, so a level drift between
    the alone and the shared blocks moves the shares beyond it as sharing would (6/100 false alarms where the same
    data without an SLO gave 2/100). The p-values are averaged over the drift's law (the alone blocks' level moved
    by exp(D), D a t with the drift's degrees of freedom times its se, at ``_SLO_NODES`` equal-probability nodes):
    the chance of the shared count given that the alone level at the shared moments is not known better."""
    from scipy.stats import t as t_law  # scipy: ~0.6 s to import, needed here only

    raw = exceedance(sh, al, q=q, slo_ms=slo_ms, confidence=confidence)
    if not dr.se > 0:
        return raw
    mids = (np.arange(_SLO_NODES) + 0.5) / _SLO_NODES
    df = dr.df if math.isfinite(dr.df) else 1e6
    shifts = dr.se * t_law.ppf(mids, df)
    pm = pl = 0.0
    for d in shifts:
        ex = exceedance(sh, [a * math.exp(d) for a in al], q=q, slo_ms=slo_ms, confidence=confidence, interval=False)
        pm += ex.p_more / _SLO_NODES
        pl += ex.p_less / _SLO_NODES
    return replace(raw, p_more=min(1.0, pm), p_less=min(1.0, pl))


_SLO_NODES = 16


def _in_ms(ex: Exceedance, al: list[np.ndarray]) -> Exceedance:
    """A scaled test (each block over its median) published in ms: its threshold times the alone blocks' median
    level, its source saying so -- the slow-share columns and ``Exceedance.words`` then show the test that decides."""
    meds = [float(np.median(a)) for a in al if len(a)]
    level = float(np.exp(np.mean(np.log(meds)))) if meds and min(meds) > 0 else math.nan
    return replace(ex, threshold_ms=ex.threshold_ms * level, source=f"{ex.source} (each block scaled to its median)")


def decide(shared_runs: Sequence[np.ndarray], alone_runs: Sequence[np.ndarray], *, q: float = 0.99,
           margin: float = DEFAULT_MARGIN, slo_ms: float | None = None, confidence: float = 0.95,
           method: str = "order", n_resamples: int = 2000, seed: int | None = 0,
           collided: Sequence[np.ndarray] | None = None, kind: str | None = None,
           times: tuple[Sequence[float], Sequence[float]] | None = None,
           host: tuple[Sequence[np.ndarray], Sequence[np.ndarray]] | None = None, on_host: bool = False) -> Verdict:
    """The verdict for one tenant and clock: shared runs against alone runs (each a list of blocks/repeats).

    ``collided``: per shared run, which of its iterations (same order) found a neighbour in flight; with it,
    those launches' test (against the same blocks' clear launches and the alone tail) is a fourth way to a
    slowdown (see the module's doc). ``kind``: "gpu" or "host" (``prior.classify``), the prior allowance where one
    alone block measures no drift (None: host, the larger). ``times``: each block's start (shared, alone), any clock
    (``blocks.order``); without them the warm design's alternation in name order is assumed where the counts fit it,
    and a block with no timed iteration keeps its place (it is left out, and the verdict says so). ``host``: each
    block's host probe per iteration (shared, alone; NaN or empty where none), the block-paired tests' covariate
    where it is balanced (``blocks.block_pair``); ``on_host``: the host is the contended device (a CPU run), never a
    covariate.

    ``method`` other than "order" (a bootstrap) still gives its DF interval, but a bootstrap's coverage fails
    at the kit's sizes, so the verdict then rests on the other tests and never reads "no change" (but from the
    block-paired tests).
    """
    if not 0 < margin < 1:
        raise ValueError(f"margin must be in (0, 1), got {margin!r}")
    d = rules.degradation(shared_runs, alone_runs, q, method=method, confidence=confidence,
                          n_resamples=n_resamples, seed=seed)
    common: dict = {"q": q, "margin": margin, "confidence": confidence}
    need = rules.MIN_CORUNNING
    fewest = min(d.n_shared, d.n_alone)
    which = "shared" if d.n_shared <= d.n_alone else "alone"
    short = fewest < need  # DF's two-sided interval needs MIN_CORUNNING; the other tests still ask, cut
    keep = [i for i, r in enumerate(shared_runs) if len(r)]
    keep_a = [i for i, r in enumerate(alone_runs) if len(r)]
    sh = [np.asarray(shared_runs[i], np.float64) for i in keep]
    al = [np.asarray(alone_runs[i], np.float64) for i in keep_a]
    if times is None and len(alone_runs) == len(shared_runs) + 1:  # the alternation, before any block is left out
        times = (np.arange(len(shared_runs)) * 2.0 + 1.0, np.arange(len(alone_runs)) * 2.0)
    empty = ([f"shared block {i + 1} of {len(shared_runs)}" for i in range(len(shared_runs)) if i not in keep]
             + [f"alone block {i + 1} of {len(alone_runs)}" for i in range(len(alone_runs)) if i not in keep_a])
    notes = (f"{', '.join(empty)} had no timed iteration and {'is' if len(empty) == 1 else 'are'} left out",
             ) if empty else ()
    if times is not None:
        times = ([times[0][i] for i in keep], [times[1][i] for i in keep_a])
    hb = (B.host_levels([host[0][i] for i in keep], [host[1][i] for i in keep_a]) if host is not None
          and len(host[0]) == len(shared_runs) and len(host[1]) == len(alone_runs) else None)
    bp = B.block_pair(sh, al, times, hb, on_host)
    dr = drift(sh, al, kind=kind, times=times)
    if fewest < EXCEEDANCE_MIN_N:
        if bp is None:
            return Verdict(INCONCLUSIVE, "too few samples", d, None,
                           f"{which}: n = {fewest} < {EXCEEDANCE_MIN_N} samples", need, drift=dr, notes=notes, **common)
        return _level_only(d, bp, dr, notes, common)
    design = design_of(len(sh), len(al), bp is not None, collided is not None)
    # the tail's shape: each block scaled to its own median (drift moves a block's level, not its shape); an SLO
    # is a fixed threshold in ms, asked of the raw series with the drift's law (``_slo_exceedance``)
    ex = (_slo_exceedance(sh, al, slo_ms, dr, confidence, q) if slo_ms is not None else
          _in_ms(exceedance(_scaled(sh), _scaled(al), q=q, confidence=confidence), al))
    split = _split(shared_runs, collided)
    cx = exceedance(split[0], _scaled(al), q=q, confidence=confidence, interval=False) if split is not None else None
    ct = _contrast(shared_runs, collided, q, confidence)
    sides = {k: iv for k, iv in (("shared", d.shared), ("alone", d.alone)) if iv is not None}
    untested = rules._untested(method, sides)  # a bootstrap, or lag-1 > 0.9: DF's coverage is not measured there
    usable = (method == "order" and not short and math.isfinite(d.estimate) and not math.isnan(d.lo)
              and untested is None)
    # the bracketed design: DF's between-block term is the blocks' scatter of their own p99 (a tail whose width moves
    # between blocks moves the p99, not the median), and the tail's shape is read block by block (``blocks.grouped``)
    gt = B.grouped(sh, al, "tail shape") if design == "bracketed" else None
    gq = B.grouped(sh, al, "p99") if design == "bracketed" else None
    df_drift = (Drift(gq.resid_sd, float(gq.df), len(al), len(sh), gq.resid_sd, kind=dr.kind)
                if gq is not None and gq.resid_sd > dr.sd else dr)
    dw, p_df_more, p_df_less = _widened_df(d, df_drift, confidence)
    if bp is not None:
        level = (bp.local or bp.median).ratio
        p_lv_more, p_lv_less = bp.level_p()
        local = (f"; against its neighbours {bp.local.ratio:.3f}x (p = {bp.local.p_more():.2g} slower, "
                 f"{bp.local.p_less():.2g} faster, t with {bp.local.df} df)" if bp.local is not None else "")
        lv_words = (f"{bp.median.words} (p = {bp.median.p_more():.2g} slower, {bp.median.p_less():.2g} faster){local}; "
                    f"the two at half the level each")
    else:
        level, p_lv_more, p_lv_less = level_test(sh, al, dr)
        lv_words = f"the median {level:.3f}x alone"
    w = weights(short, design)
    more: list[tuple[float, str, str]] = []  # (p / weight, which test, its words)
    less: list[tuple[float, str, str]] = []
    tests: list[tuple[str, float, float]] = []
    if usable and w["DF"] > 0:
        more.append((p_df_more / w["DF"], "DF", f"DF {dw.estimate:.2f}: its lower bound {dw.lo:.2f} (drift included), "
                     f"p = {p_df_more:.2g}"))
        less.append((p_df_less / w["DF"], "DF", f"DF {dw.estimate:.2f}: its upper bound {_fmt(dw.hi)} (drift included), "
                     f"p = {p_df_less:.2g}"))
        tests.append(("DF", p_df_more, p_df_less))
    if math.isfinite(level):
        against = "block-paired" if bp is not None else "against drift"
        more.append((p_lv_more / w["level"], "level", f"{lv_words}, p = {p_lv_more:.2g} ({against})"))
        less.append((p_lv_less / w["level"], "level", f"{lv_words}, p = {p_lv_less:.2g} ({against})"))
        tests.append(("level", p_lv_more, p_lv_less))
    slo_takes_shape = slo_ms is not None and bp is None and gt is not None  # bracketed: the SLO is the tail's question
    shape = bp.tail if bp is not None else (None if slo_takes_shape else gt)
    if shape is not None and w.get("block tail", 0) > 0:
        pt_more, pt_less = shape.p_more(), shape.p_less()
        more.append((pt_more / w["block tail"], "block tail", f"{shape.words}, p = {pt_more:.2g}"))
        less.append((pt_less / w["block tail"], "block tail", f"{shape.words}, p = {pt_less:.2g}"))
        tests.append(("block tail", pt_more, pt_less))
    s = min(ex.steps, key=lambda t: t.p_more)
    scaled = "" if slo_ms is not None else " (each block scaled to its median)"
    drifted = " (over the drift's law)" if slo_ms is not None and dr.se > 0 else ""
    w_tail = w["tail"] + (w.get("block tail", 0) if slo_takes_shape else 0.0)
    if w_tail > 0:
        more.append((ex.p_more / w_tail, "tail", f"{s.shared_count} of {d.n_shared} shared iterations slower than the "
                     f"{s.label}{scaled} vs {s.alone_count} of {d.n_alone} alone, p = {ex.p_more:.2g}{drifted}"))
        s2 = min(ex.steps, key=lambda t: t.p_less)
        less.append((ex.p_less / w_tail, "tail", f"{s2.shared_count} of {d.n_shared} shared iterations slower than the "
                     f"{s2.label}{scaled} vs {s2.alone_count} of {d.n_alone} alone, p = {ex.p_less:.2g}{drifted}"))
        tests.append(("tail", ex.p_more, ex.p_less))
    if cx is not None and w["collided"] > 0:
        # the same-moment control decides (same blocks, same drift, same shape); against the alone tail only where
        # every shared launch collided (nothing clear to compare with) -- the alone tail's words are shown either way
        pc = ct.p if ct is not None else cx.p_more
        c = min(cx.steps, key=lambda t: t.p_more)
        alone_tail = (f"{c.shared_count} of {cx.shared.n} launches that found a neighbour in flight slower than the "
                      f"{c.label}{scaled} vs {c.alone_count} of {d.n_alone} alone, p = {cx.p_more:.2g}")
        more.append((pc / w["collided"], "collided", f"{ct.words}; {alone_tail}" if ct is not None else alone_tail))
        tests.append(("collided", pc, 1.0))
        if ct is not None and math.isfinite(ct.p_median) and w.get("collided median", 0) > 0:
            more.append((ct.p_median / w["collided median"], "collided median", ct.median_words))
            tests.append(("collided median", ct.p_median, 1.0))
    more.sort()
    less.sort()
    p_slower = min(1.0, more[0][0])
    p_faster = min(1.0, less[0][0]) if less else 1.0
    if bp is not None:
        # "no change" holds the p99 to the margin too: the block-paired median within ±10 % next to a p99 2.6x
        # alone read "no change" in 45 of 100 runs (the audit). DF's point estimate within the margin and neither
        # p99 tail test reading a change: an equivalence test of the p99 itself (``_within``) needs more than a
        # bursty tail of 1,600 shared iterations gives (share bounds of 4-5 % against the 1 % it must show)
        b_up, b_down, b_text = bp.within(margin, confidence)
        a2 = (1 - confidence) / 2
        held = usable and 1 - margin < d.estimate < 1 + margin and ex.p_more > a2 and ex.p_less > a2
        p99 = (f"DF {d.estimate:.3f} {'inside' if held else 'not held inside'} ±{100 * margin:g} %"
               + (f", its tail tests p = {ex.p_more:.2g} slower, {ex.p_less:.2g} faster" if usable else
                  " (DF is not read here)"))
        up, down, within_text = b_up and held, b_down and held, f"{b_text}; the p{100 * q:g}: {p99}"
    else:
        up, down, within_text = _within(sh, al, q, margin, dr, confidence) if usable else (False, False, "")
    return _read(Verdict(INCONCLUSIVE, "", dw, ex, open_sides=_open_sides(d, q) if usable else (),
                         collided=cx, contrast=ct, drift=dr, tail=ex, level=level, p_slower=p_slower,
                         p_faster=p_faster, slower_evidence=tuple(t for _, _, t in more),
                         faster_evidence=tuple(t for _, _, t in less), slower_by=more[0][1],
                         faster_by=less[0][1] if less else "", within=(up, down), within_text=within_text,
                         short=short, usable=usable, method=method, design=design, blocks=bp, p_tests=tuple(tests),
                         shape_tests=("block tail",) + (("tail",) if slo_ms is None else ()), notes=notes,
                         grouped_tail=gt if shape is gt else None, **common),
                 p_slower, p_faster, 1)


def _level_only(d: rules.Degradation, bp: B.BlockPair, dr: Drift, notes: tuple[str, ...], common: dict) -> Verdict:
    """Fewer than ``EXCEEDANCE_MIN_N`` iterations a side but interleaved blocks (a prefill phase: about 9 steps a
    shared block): the block-paired median alone decides -- its t is over blocks and needs no tail -- at the
    verdict's whole level (``WEIGHTS_BY_DESIGN``'s "blocks, few iterations"). DF and the tail tests are not read
    (no p99 of a few hundred samples holds), so neither is "no change"."""
    p_more, p_less = bp.level_p()
    local = (f"; against its neighbours {bp.local.ratio:.3f}x (p = {bp.local.p_more():.2g} slower, "
             f"{bp.local.p_less():.2g} faster, t with {bp.local.df} df)" if bp.local is not None else "")
    words = (f"{bp.median.words} (p = {bp.median.p_more():.2g} slower, {bp.median.p_less():.2g} faster){local}; the "
             f"two at half the level each; too few iterations for a tail test (n = {min(d.n_shared, d.n_alone)})")
    v = Verdict(INCONCLUSIVE, "", d, None, drift=dr, level=(bp.local or bp.median).ratio, p_slower=p_more,
                p_faster=p_less, slower_evidence=(f"{words}, p = {p_more:.2g}",),
                faster_evidence=(f"{words}, p = {p_less:.2g}",), slower_by="level", faster_by="level",
                design="blocks, few iterations", blocks=bp, p_tests=(("level", p_more, p_less),), short=True,
                notes=notes, **common)
    return _read(v, p_more, p_less, 1)


def effect_size(v: Verdict, *, slower: bool) -> float:
    """The size a decided verdict is worded by: the further of DF's estimate (the headline estimand) and the
    medians' ratio (the block-paired median's, ``level``), whichever test decided the direction.

    Why: a bulk change is measured by the median, not by the p99. Worded by DF alone, an LLM's device median at
    0.843x alone (a 16 % change, the median test deciding) read "small speed-up (< 10 %)" because its p99 had
    moved less (h200-2026-12-03-four-tenants-blocks, one alone block read against another); and the CPU
    quickstart's GEMM, decided by its collided launches' median (+1.15 ms), read "small slowdown (< 10 %)" beside
    a median 3.82 -> 4.84 ms (1.27x) because its DF was 0.94 (issue 52).
    """
    d = v.df.estimate if v.usable else math.nan  # an unread DF (too few samples, an untested range) words nothing
    if not math.isfinite(v.level):
        return d
    if not math.isfinite(d):
        return v.level
    return max(d, v.level) if slower else min(d, v.level)


def _blocks_plan(bt: B.BlockPair, alpha: float, weight: float, family: int, margin: float,
                 p99_held: bool = True, df: float = math.nan) -> tuple[str, int | None]:
    """What an inconclusive block verdict asks for: more shared blocks, not longer ones, and about how many
    (``blockplan.blocks_to_decide`` for each median reading at the median test's level after its weight, the
    Bonferroni over the two readings and the family's first step, the fewer of the two; ``blocks_to_bound`` for "no
    change" where the effect measured is inside the margin), an assurance over what the run knows. A bound plan is
    offered only where the p99 is held to the margin (``p99_held``): "no change" needs it too, and more blocks of a
    median already inside the margin do not move DF (the warm article's GEMM: "about 3 blocks would decide" at 8,
    its median 1.000x and its DF 1.15). Returns (words, blocks or None)."""
    words = "; more shared blocks would decide, not longer ones"
    test = bt.local or bt.median  # "no change" reads the local pairing's interval where it exists (``within``)
    level = alpha * weight / (2 * family if bt.local is not None else family)
    each = [n for n in (BP.blocks_to_decide(x, level) for x in (bt.median, bt.local) if x is not None) if n]
    slower = min(each) if each else None  # the stronger of the two readings decides (``BlockPair.level_p``)
    same = BP.blocks_to_bound(test, margin, alpha) if p99_held else None
    sd = f"sd {100 * test.resid_sd:.0f} % per shared block against its neighbours"
    if slower is not None and (same is None or slower <= same):
        return (f"{words} (about {slower}: blocks={slower} decides a {test.ratio:.2f}x effect at this drift, {sd}, "
                f"4 runs in 5 over what the run knows of the effect and the drift)"), slower
    if same is not None:
        return (f"{words} (about {same}: blocks={same} puts a {test.ratio:.2f}x effect within ±{100 * margin:g} % "
                f"at this drift, {sd}, 4 runs in 5 over what the run knows of the effect and the drift)"), same
    if not p99_held and abs(math.log(test.ratio)) < math.log1p(margin):
        return (f"; the median is inside ±{100 * margin:g} %, but \"no change\" also needs the p99 there (DF "
                f"{df:.2f}), which more blocks of the same tail do not promise"), None
    return (f"{words}, though no practical number ({BP.MOST_BLOCKS} or fewer) decides an effect of the size measured "
            f"({test.ratio:.2f}x) at this drift ({sd})"), None


def _level_against_shape(v: Verdict) -> tuple[bool, str] | None:
    """Both sides decided: (True, words) for slower or (False, words) for faster where one side rests on a test of
    the level and the other only on the tail's shape, and the block-paired p95 itself moved the level's way at the
    verdict's one-sided level; None where the estimands really disagree, or the design has no block-paired p95.

    Why: the shape tests scale each block to its own median, so a fixed wait added to every iteration (a neighbour's
    time slice) raises the median more than the p95 and reads as a *narrower* tail. BERT in
    h200-2026-12-06-rm-warm-ts-24 went 1.80x alone by the block-paired median (p = 8e-24, 24 of 24 blocks above 1),
    its block-paired p95 1.51x, and read "inconclusive, the estimands disagree" because its p95/p50 fell to 0.84x.
    A narrower shape under a slower median and a slower p95 is no speed-up. The word needs both the level's test
    and the p95's (an intersection: its error rate is no larger than the level test's). Designs without interleaved
    blocks keep the disagreement: the article's FFT by device time (median 0.638x, 34 % of shared iterations beyond
    the scaled alone p99, DF 0.984 [0.840, 7.463]) stays inconclusive.
    """
    q = v.blocks.quantile if v.blocks is not None else None
    if q is None:
        return None
    alpha = (1 - v.confidence) / 2
    for side, by_own, by_other in ((True, v.slower_by, v.faster_by), (False, v.faster_by, v.slower_by)):
        p = q.p_more() if side else q.p_less()
        if by_own in v.shape_tests or by_other not in v.shape_tests or p > alpha:
            continue
        # a faster level never overrules a slower p99: a shape test (each block scaled to its median) may lose to
        # it only where the p99 itself did not rise (the audit: median x0.90 with 3 % of iterations x3, DF 2.4, read
        # "faster" in 50 of 100 runs when the scaled p99 exceedance test lost to the median and a p95 that fell)
        if not side and _p99_rose(v):
            continue
        return side, f"its block-paired p95 {q.ratio:.3f}x, p = {p:.2g}"
    return None


def _p99_rose(v: Verdict) -> bool:
    """Whether the shared p99 is above the alone one (DF's point estimate above 1): "faster" never stands beside it."""
    return math.isfinite(v.df.estimate) and v.df.estimate > 1


def _read(v: Verdict, p_slower: float, p_faster: float, family: int) -> Verdict:
    """The reading from the verdict's evidence at adjusted p-values (``family``: how many verdicts share the level)."""
    alpha = (1 - v.confidence) / 2
    m, d = v.margin, v.df
    fam = (f" (the report's family of {family} verdicts, wall clock first: p = {{p:.2g}})" if family > 1 else
           " (p = {p:.2g})")
    slower, faster = p_slower <= alpha, p_faster <= alpha
    base = {"family": family, "p_slower_adjusted": p_slower, "p_faster_adjusted": p_faster}
    shape = ""
    if slower and faster:
        level_wins = _level_against_shape(v)
        if level_wins is None:
            return replace(v, reading=INCONCLUSIVE, rule="the estimands disagree", missing=(
                f"slower by {v.slower_evidence[0]} but faster by {v.faster_evidence[0]}"), iterations_needed=None,
                **base)
        side, p95 = level_wins
        slower, faster = side, not side
        other = v.faster_evidence[0] if side else v.slower_evidence[0]
        shape = (f"; its tail's shape {'narrower' if side else 'wider'} relative to its median ({other}), {p95} "
                 f"{'slower' if side else 'faster'}")
    if (slower and v.slower_by in v.shape_tests and math.isfinite(effect_size(v, slower=True))
            and effect_size(v, slower=True) <= 1):
        # a slowdown only the tail's shape reads (each block scaled to a median that fell) while the median and the p99
        # both fell is no slowdown: the warm article's FFT by device time read "small slowdown" sized 0.95
        return replace(v, reading=INCONCLUSIVE, rule="the estimands disagree", missing=(
            f"slower by {v.slower_evidence[0]}, but faster by its median ({v.level:.3f}x) and its p{100 * v.q:g} "
            f"(DF {d.estimate:.2f}): the tail's shape widened around a faster median"), iterations_needed=None, **base)
    if slower:
        est = effect_size(v, slower=True)
        word = DEGRADED if not (math.isfinite(est) and est < 1 + m) else small_slower(m)
        return replace(v, reading=word, rule=v.slower_evidence[0] + fam.format(p=p_slower) + shape, **base)
    if faster and _p99_rose(v):
        return replace(v, reading=INCONCLUSIVE, rule="the estimands disagree", missing=(
            f"faster by {v.faster_evidence[0]}, but the shared p{100 * v.q:g} is above the alone one (DF "
            f"{d.estimate:.2f}): a slower p{100 * v.q:g} is never read as faster"), iterations_needed=None, **base)
    if faster:
        est = effect_size(v, slower=False)
        word = FASTER if not (math.isfinite(est) and est > 1 - m) else small_faster(m)
        return replace(v, reading=word, rule=v.faster_evidence[0] + fam.format(p=p_faster) + shape, **base)
    if (v.usable or v.blocks is not None) and all(v.within):
        return replace(v, reading=no_change(m), rule=f"within ±{100 * m:g} %: {v.within_text}", **base)
    pname = f"p{100 * v.q:g}"
    n = min(d.n_shared, d.n_alone)
    # the p printed is the deciding test's: the same-moment contrast where clear launches exist, else the collided
    # launches against the alone tail
    if v.contrast is not None:
        nor = (f"; nor does the same-moment contrast ({v.contrast.words})")
    elif v.collided is not None:
        nor = (f"; nor does the test on the {v.collided.shared.n} launches that found a neighbour in flight (p = "
               f"{v.collided.p_more:.2g})")
    else:
        nor = ""
    by = (f", strongest: the {v.slower_by} test at p = {v.p_of(v.slower_by):.2g} before its weight "
          f"{weights(v.short, v.design).get(v.slower_by, 1.0):g} and the family" if v.slower_by and v.p_tests else "")
    drift_words = f"; {v.drift.words}" if v.drift is not None else ""
    if v.blocks is not None:
        bt = v.blocks
        tail = f"; {bt.tail.words}, p = {bt.tail.p_more():.2g} slower" if bt.tail is not None else ""
        lp = bt.level_p()
        missing = (f"{bt.median.words}; with the local pairing the median test's p = {lp[0]:.2g} slower, {lp[1]:.2g} "
                   f"faster{tail}; "
                   f"no test decides at the report's level (p = {p_slower:.2g} slower, {p_faster:.2g} faster{by}) nor "
                   f"puts the median and p95 within ±{100 * m:g} % ({v.within_text})")
        held = v.usable and 1 - m < d.estimate < 1 + m
        plan, need = _blocks_plan(bt, alpha, weights(v.short, v.design).get("level", 1.0), family, m, held,
                                  d.estimate)
        return replace(v, reading=INCONCLUSIVE, rule="nothing decides", missing=missing + nor + drift_words + plan,
                       iterations_needed=None, blocks_needed=need, **base)
    if v.short:
        return replace(v, reading=INCONCLUSIVE, rule="too few samples", missing=(
            f"{'shared' if d.n_shared <= d.n_alone else 'alone'}: n = {n} < {rules.MIN_CORUNNING} samples for DF's "
            f"two-sided interval, and no test decides (p = {p_slower:.2g} slower){nor}{drift_words}"),
            iterations_needed=rules.MIN_CORUNNING, **base)
    if not v.usable:
        missing = (f"DF's {v.method} interval is not used for a verdict" if v.method != "order" else
                   f"DF is outside its tested range ({d.reading})") + f" and no other test decides (p = {p_slower:.2g}{by})"
    elif v.open_sides:
        missing = (f"{' and '.join(v.open_sides)} bound open at n = {d.n_shared}/{d.n_alone}; DF {d.estimate:.2f} "
                   f"[{_fmt(d.lo)}, {_fmt(d.hi)}] and the {pname} tests decide nothing (p = {p_slower:.2g} slower, "
                   f"{p_faster:.2g} faster{by})")
    else:
        missing = (f"DF {d.estimate:.2f} [{_fmt(d.lo)}, {_fmt(d.hi)}] excludes neither 1 nor a change beyond "
                   f"±{100 * m:g} % (p = {p_slower:.2g} slower, {p_faster:.2g} faster{by})")
    need = _projection(d if v.usable else None, v.tail, n, m, alpha * weights(v.short, v.design)["tail"], v.drift,
                       alpha * weights(v.short, v.design)["DF"])
    if need is None and v.drift is not None and v.drift.se > 0:
        missing += (f"; no number of iterations per block can decide: the drift between blocks (sd "
                    f"{100 * v.drift.sd:.1f} %) does not shrink with iterations -- more blocks can (alone and shared "
                    f"alternating, the warm design)")
    return replace(v, reading=INCONCLUSIVE, rule="nothing decides", missing=missing + nor + drift_words,
                   iterations_needed=need, **base)


PRIMARY_CLOCK = "wall"


def family(verdicts: Sequence[Verdict], questions: Sequence[tuple[object, str]] | None = None) -> list[Verdict]:
    """The report's verdicts as one family, each direction (slower, faster) at the one-sided (1 - confidence) / 2,
    so a report with no effect anywhere shows a false slowdown in at most that share of runs (and a false speed-up
    in as few), whatever the tests' dependence.

    ``questions[i]``: verdict i's question (a tenant, phase and sharing mode) and clock. A question's wall clock is
    its primary verdict, its device clock a secondary (Bretz et al. 2009's graphical procedure, ``_graph`` and
    ``_graph_adjusted``): the questions share the level, each wall clock holding 80 % of its question's share and
    its device clock 20 %; a wall clock that decides passes its whole weight to its own device clock, a device clock
    that decides passes half to its own wall clock and half to the other questions. Why: Holm over tenants x 2
    clocks x phases treated two near-identical clocks of one tenant as two questions, halving every tenant's level
    for a second reading of the same change; the device clock's own 20 % lets a strong device reading decide where
    the wall clock did not. Without ``questions`` every verdict is a primary (plain Holm)."""
    vs = list(verdicts)
    idx = [i for i, v in enumerate(vs) if v.p_tests]
    m = len(idx)
    if m <= 1:
        return vs
    w, g = _graph(questions and [questions[i] for i in idx], m)
    ps = _graph_adjusted([vs[i].p_slower for i in idx], w, g)
    pf = _graph_adjusted([vs[i].p_faster for i in idx], w, g)
    out = list(vs)
    for k, i in enumerate(idx):
        out[i] = _read(vs[i], ps[k], pf[k], m)
    return out


SECONDARY_SHARE = 0.2  # of each question's level, held by its device clock from the start (the rest by its wall clock)


def _graph(questions: Sequence[tuple[object, str]] | None, m: int) -> tuple[np.ndarray, np.ndarray]:
    """The initial weights and the transition matrix of the family's graph (``family``).

    Each question holds 1 / q of the level (q questions): ``1 - SECONDARY_SHARE`` of it on its wall clock, the rest
    on its device clock. A wall clock that decides hands all of its weight to its own device clock; a device clock
    that decides hands half to its own wall clock and half to the other questions' wall clocks. Why the device
    clock starts with a share: in a pure fixed sequence a device reading could never decide where its wall clock
    did not -- the warm article's GEMM by device time, 0.954x alone in 8 of 8 blocks (p ~ 1e-16), stayed
    "inconclusive" beside an undecided wall clock."""
    if not questions:
        return np.full(m, 1.0 / m), (np.ones((m, m)) - np.eye(m)) / (m - 1)
    keys = [q for q, _ in questions]
    primary = []
    for k, (q, _clock) in enumerate(questions):
        mine = [j for j, key in enumerate(keys) if key == q]
        walls = [j for j in mine if questions[j][1] == PRIMARY_CLOCK]
        primary.append(k == (walls[0] if walls else mine[0]))
    prim = [k for k in range(m) if primary[k]]
    n_q = len(prim)
    has_second = {keys[k] for k in range(m) if not primary[k]}
    w = np.array([(1.0 - SECONDARY_SHARE * (keys[k] in has_second)) / n_q if primary[k] else 0.0 for k in range(m)])
    for k in range(m):
        if not primary[k]:
            w[k] = SECONDARY_SHARE / n_q / sum(1 for j in range(m) if keys[j] == keys[k] and not primary[j])
    g = np.zeros((m, m))
    for k in range(m):
        own = [j for j in range(m) if keys[j] == keys[k] and j != k]
        others = [j for j in prim if keys[j] != keys[k]]
        if primary[k]:
            targets = {j: 1.0 / len(own) for j in own} if own else {j: 1.0 / len(others) for j in others}
        else:
            mine = [j for j in own if primary[j]]
            targets = ({**{j: 0.5 / len(mine) for j in mine}, **{j: 0.5 / len(others) for j in others}}
                       if others else {j: 1.0 / len(mine) for j in mine})
        for j, v in targets.items():
            g[k, j] = v
    return w, g


def graph_steps(p: Sequence[float], w: np.ndarray, g: np.ndarray) -> Iterator[tuple[int, float, float]]:
    """The sequentially rejective graphical procedure (Bretz, Maurer, Brannath and Posch 2009, Algorithm 1), step by
    step: set aside the hypothesis with the smallest p / weight, hand its weight along its edges, update the graph,
    repeat. Yields (its index, its adjusted p: the running maximum of those ratios, capped at 1, the weight it was
    read at). With equal weights and a complete graph it is Holm."""
    w, g = np.array(w, np.float64), np.array(g, np.float64)
    left = list(range(len(p)))
    floor = 0.0
    while left:
        ratio = [p[j] / w[j] if w[j] > 0 else math.inf for j in left]
        i = left[int(np.argmin(ratio))]
        floor = max(floor, min(1.0, min(ratio)))
        yield i, floor, float(w[i])
        left.remove(i)
        w2, g2 = w.copy(), np.zeros_like(g)
        for a in left:
            w2[a] = w[a] + w[i] * g[i, a]
            for b in left:
                den = 1.0 - g[a, i] * g[i, a]
                if a != b and den > 0:
                    g2[a, b] = (g[a, b] + g[a, i] * g[i, b]) / den
        w2[i] = 0.0
        w, g = w2, g2


def _graph_adjusted(p: Sequence[float], w: np.ndarray, g: np.ndarray) -> list[float]:
    """Adjusted p-values of the graphical procedure (``graph_steps``; the adjusted form of Bretz et al. 2011)."""
    adj = [1.0] * len(p)
    for i, adjusted, _ in graph_steps(p, w, g):
        adj[i] = adjusted
    return adj


def _fmt(v: float) -> str:
    return "no bound" if not math.isfinite(v) else f"{v:.2f}"
