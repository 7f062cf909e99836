"""One verdict per tenant and clock, from a stated rule over two estimands (DF and the tail's exceedance share)
and the launches that met a neighbour.

Why two: a p99 that sits where 1.7 % of iterations collide with a neighbour is not a stable number (its
interval from 800 samples reaches from the bulk into the collisions), but *how often* the shared series is
slower than the alone p99 is precise -- the article's FFT: 18 of 800 shared iterations beyond the alone
p99, where 8 are expected. The rule, at ``confidence`` (default 95 %, each direction one-sided 97.5 %):

1. Fewer than ``EXCEEDANCE_MIN_N`` (200) samples on either side: "inconclusive". Between that and
   ``rules.MIN_CORUNNING`` (368) DF has no two-sided interval and is not read; only the exceedance test can
   decide, at a quarter of its level (``SHORT_ALPHA_SHARE``).
2. **degraded** when DF's lower bound > 1 (the shared p99's lower bound above the alone p99's upper bound,
   combined by MOVER: ``rules.degradation``, the one DF) *or* the exceedance test finds the shared series
   slower than the alone tail more often than the alone series itself (``exceedance``) *or* that test on the
   launches that found a neighbour in flight says so (``collided``, below); **faster when
   shared** for the mirror image (DF's upper bound < 1, or fewer shared iterations than expected beyond the
   alone p99 itself). Where one p99 bound
   is open (no upper bound at this n) the other side still decides, and ``Verdict.open_sides`` says which.
   Evidence both ways (possible with an SLO threshold): "inconclusive".
3. **no change within ±10 %** only when DF's whole interval lies inside [1 - margin, 1 + margin].
4. Otherwise **inconclusive**, with what is missing and about how many iterations would decide.

The exceedance test (a precedence test, Nelson 1963) counts the K shared iterations slower than the
threshold. The default threshold is the alone p99 estimated from the alone series, so its uncertainty is part
of the test: with r alone samples beyond it, the alone tail probability there is Beta(r + 1, n - r)
(an order statistic's coverage), and K is binomial given it; dependence enters through each side's
effective size n / tau (clustered exceedances, ``orderstat.indicator_tau``), its uncertainty through the
t-widening over nu clusters (Welch-Satterthwaite over the two sides). Both sides take the larger of the two
taus: a series with few bursts shows little clustering by chance, and under "no change" both series come
from one process (measured on 300 pairs at n = 800: false alarms with bursty collisions on both sides
3.3 % with each side's own tau, 1.7 % with the larger). Collisions put the shared excess far beyond the alone p99, so the test also
asks at the alone p99.75 (the alone order statistic with r / 4 beyond) and takes the smaller p-value
times two (Bonferroni); it decides at p <= ``exceedance_alpha`` (2 % at 95 %), so that DF's rule or this
one together stay near (1 - confidence) / 2. A user's SLO
(``slo_ms``) is one fixed threshold and is asked alone.

A third way to "degraded", where the neighbours' timestamps are known (``collided``: the launches that found a
neighbour's operation in flight, ``rules.mark_collided``): the same exceedance test on those launches
alone. They are picked by the neighbours' clocks, not by the tenant's own time, so if sharing cost nothing
they would be slower than the alone tail as rarely as any alone iteration; the collisions are the physical
cause of a time-sliced tail, and the test is precise where a p99 is not (the article on three H200s: 11 of
14, 12 of 15 and 15 of 23 collided FFT launches beyond the alone p99, p < 1e-10, while the whole series'
tests read p = 0.004, 0.04 and 0.2). It decides at a tenth of the one-sided level (``collided_alpha``:
0.25 % at 95 %): measured (``coverage.collided_decisions``, 400 pairs a row) it adds at most 0.75 points to the
verdict's false alarms, whose worst row stays the whole-series test's own (2.75 % there, 1.9 % on the 700 pairs below).

Measured (``coverage.decisions``, ``make bench``; bench/reference/cpu-2026-11-30-issue19-decisions.md, 700
pairs a row): false "degraded" at most 1.9 % and false "faster" at most 0.9 % under DF = 1 (bursty, periodic
and random collisions on both sides, t3 tails, slow drift on either side; n = 800 and 2000); power 0.86 at
n = 800 on the article-like mixture (DF's rule alone 0.78, the exceedance test alone 0.80; 1.00 at 2000).
Known limit: collisions in Markov bursts of mean 3 at n = 800 are seen only 18 % of the time, and 1.6 % of
such shared series (those that happen to hold almost no burst) read "no change within ±10 %": no interval
can see bursts the sample does not contain.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from kts_helpers.analyse import orderstat, rules

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
EXCEEDANCE_ALPHA_SHARE = 0.8  # of the one-sided (1 - confidence) / 2 the exceedance test may spend (DF: all)
COLLIDED_ALPHA_SHARE = 0.1  # ... and the test on the collided launches (union bound: DF's rule or either test)
_QUAD = 400  # quadrature cells over the alone tail probability's Beta law


def exceedance_alpha(confidence: float = 0.95) -> float:
    """The one-sided p-value at which the exceedance test decides: 2 % at 95 %.

    "degraded" is DF's rule *or* this test, so the two false alarms add up in part; measured on 2,100 pairs
    (alone drifting with lag-1 0.9, shared independent, n = 2000) the full 2.5 % gave 2.7 % together; at 2 %
    the pair reads 2.1 % (700 pairs), and power on the article mixture at n = 800 drops by under one point.
    """
    return EXCEEDANCE_ALPHA_SHARE * (1 - confidence) / 2


def collided_alpha(confidence: float = 0.95) -> float:
    """The one-sided p-value at which the collided launches' exceedance test decides: 0.25 % at 95 %."""
    return COLLIDED_ALPHA_SHARE * (1 - confidence) / 2


def no_change(margin: float = DEFAULT_MARGIN) -> str:
    """The equivalence reading: "no change within ±10 %"."""
    return f"no change within ±{100 * margin:g} %"


def readings(margin: float = DEFAULT_MARGIN) -> tuple[str, ...]:
    """Every reading a Verdict can have, exactly these words."""
    return DEGRADED, FASTER, no_change(margin), INCONCLUSIVE


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

    ``ratio`` is shared share / alone share with its interval (test inversion of the same model, so
    ``lo > 1`` exactly when the test at this threshold alone rejects); ``p_more``/``p_less`` are the
    ladder-corrected one-sided p-values the verdict uses, ``steps`` what each threshold showed.
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
    open_sides: tuple[str, ...] = ()  # "shared p99 upper", "alone p99 upper", ...
    q: float = 0.99
    margin: float = DEFAULT_MARGIN
    confidence: float = 0.95
    collided: Exceedance | None = None  # the same test on the launches that found a neighbour in flight

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
               slo_ms: float | None = None, confidence: float = 0.95) -> Exceedance:
    """Shared vs alone share beyond the alone q-quantile (or ``slo_ms``), with intervals and the test.

    The alone series' own uncertainty about its q-quantile is part of the test (see the module's doc).
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
        a2 = (1 - orderstat.t_widened(confidence, _welch(k, m, tau_s, nu_s, r, n, tau_a, nu_a))) / 2
        ke, me = k / tau_s, m / tau_s
        # the alone tail probability at the threshold: Beta(r + 1, n - r) above, Beta(r, n - r + 1) below
        up, down = _beta_nodes((r + 1) / tau_a, (n - r) / tau_a), _beta_nodes(r / tau_a, (n - r + 1) / tau_a)
        pm, pl = _p_more(ke, me, up), _p_less(ke, me, down)
        steps.append(Step(label, thr, k, r, pm, pl))
        if first is None:
            lo = _solve(lambda R, ke=ke, me=me, up=up: _p_more(ke, me, up, ratio=R), a2, True)
            hi = _solve(lambda R, ke=ke, me=me, down=down: _p_less(ke, me, down, ratio=R), a2, False)
            first = (thr, _share(k, m, tau_s, a2), _share(r, n, tau_a, a2), lo, hi)
    thr, s_sh, s_al, lo, hi = first
    ratio = s_sh.estimate / s_al.estimate if s_al.count else (math.inf if s_sh.count else math.nan)
    p_more = min(1.0, len(steps) * min(s.p_more for s in steps))
    return Exceedance(thr, source, s_sh, s_al, ratio, lo, hi, p_more, steps[0].p_less, tuple(steps), confidence)


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
                alpha: float) -> int | None:
    """About how many iterations per side would decide, from how far each estimand is from deciding.

    Interval half-widths shrink as 1 / sqrt(n): n * (width now / width needed)^2, the smallest over the
    estimands that can decide; an open bound first needs the n at which a p99 has a bound at all.
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
        if abs(e) > 1e-9:  # decide the direction
            h, gap = (h_lo, e) if e > 0 else (h_hi, -e)
            cands.append(n * (h / gap) ** 2 if math.isfinite(h) else max(need_bound, 2 * n))
        room = math.log(1 + margin) - max(e, 0) if e >= 0 else -math.log(1 - margin) + e
        if room > 0:  # or show it lies within the margin
            h = max(h_lo, h_hi)
            cands.append(n * (h / room) ** 2 if math.isfinite(h) else max(need_bound, 2 * n))
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


def _collided_test(shared_runs: Sequence[np.ndarray], collided: Sequence[np.ndarray] | None, alone: list[np.ndarray],
                   q: float, slo_ms: float | None, confidence: float) -> Exceedance | None:
    """The exceedance test on the shared launches flagged as collided (None: no flags, or none flagged)."""
    if collided is None:
        return None
    picked = [np.asarray(r, np.float64)[np.asarray(c, bool)]
              for r, c in zip(shared_runs, collided, strict=True) if len(r)]
    picked = [x for x in picked if len(x)]
    return exceedance(picked, alone, q=q, slo_ms=slo_ms, confidence=confidence) if picked else None


def decide(shared_runs: Sequence[np.ndarray], alone_runs: Sequence[np.ndarray], *, q: float = 0.99,
           margin: float = DEFAULT_MARGIN, slo_ms: float | None = None, confidence: float = 0.95,
           method: str = "order", n_resamples: int = 2000, seed: int | None = 0,
           collided: Sequence[np.ndarray] | None = None) -> Verdict:
    """The verdict for one tenant and clock: shared runs against alone runs (each a list of repeats).

    ``collided``: per shared run, which of its iterations (same order) found a neighbour in flight; with it,
    those launches' own exceedance test is a third way to "degraded" (see the module's doc).

    ``method`` other than "order" (a bootstrap) still gives its DF interval, but a bootstrap's coverage fails
    at the kit's sizes, so the verdict then rests on the exceedance test and DF's equivalence margin only.
    """
    if not 0 < margin < 1:
        raise ValueError(f"margin must be in (0, 1), got {margin!r}")
    d = rules.degradation(shared_runs, alone_runs, q, method=method, confidence=confidence,
                          n_resamples=n_resamples, seed=seed)
    common: dict = {"q": q, "margin": margin, "confidence": confidence}
    need = rules.MIN_CORUNNING
    fewest = min(d.n_shared, d.n_alone)
    which = "shared" if d.n_shared <= d.n_alone else "alone"
    if fewest < EXCEEDANCE_MIN_N:
        return Verdict(INCONCLUSIVE, "too few samples", d, None,
                       f"{which}: n = {fewest} < {EXCEEDANCE_MIN_N} samples", need, **common)
    short = fewest < need  # DF's two-sided interval needs MIN_CORUNNING; the exceedance test still asks
    sh = [np.asarray(r, np.float64) for r in shared_runs if len(r)]
    al = [np.asarray(r, np.float64) for r in alone_runs if len(r)]
    ex = exceedance(sh, al, q=q, slo_ms=slo_ms, confidence=confidence)
    cx = _collided_test(shared_runs, collided, al, q, slo_ms, confidence)
    common["collided"] = cx
    alpha = exceedance_alpha(confidence)
    usable = method == "order" and not short and math.isfinite(d.estimate) and not math.isnan(d.lo)
    pname = f"p{100 * q:g}"
    more, less = [], []
    if usable and d.lo > 1:
        more.append(f"DF {d.estimate:.2f}: its lower bound {d.lo:.2f} > 1")
    if usable and d.hi < 1:
        less.append(f"DF {d.estimate:.2f}: its upper bound {d.hi:.2f} < 1")
    if ex.p_more <= (alpha * SHORT_ALPHA_SHARE if short else alpha):
        s = min(ex.steps, key=lambda t: t.p_more)
        more.append(f"{s.shared_count} of {d.n_shared} shared iterations slower than the {s.label} "
                    f"({s.threshold_ms:.3g} ms) vs {s.alone_count} of {d.n_alone} alone, p = {ex.p_more:.2g}")
    if cx is not None and cx.p_more <= collided_alpha(confidence):
        s = min(cx.steps, key=lambda t: t.p_more)
        more.append(f"{s.shared_count} of {cx.shared.n} launches that found a neighbour in flight slower than the "
                    f"{s.label} ({s.threshold_ms:.3g} ms) vs {s.alone_count} of {d.n_alone} alone, p = {cx.p_more:.2g}")
    if ex.p_less <= (alpha * SHORT_ALPHA_SHARE if short else alpha):
        s = ex.steps[0]
        less.append(f"{s.shared_count} of {d.n_shared} shared iterations slower than the {s.label} "
                    f"vs {s.alone_count} of {d.n_alone} alone, p = {ex.p_less:.2g}")
    opened = _open_sides(d, q) if usable else ()
    if more and less:
        return Verdict(INCONCLUSIVE, "the estimands disagree", d, ex,
                       f"slower by {more[0]} but faster by {less[0]}", None, opened, **common)
    if more or less:
        return Verdict(DEGRADED if more else FASTER, "; ".join(more or less), d, ex, open_sides=opened, **common)
    if usable and math.isfinite(d.lo) and math.isfinite(d.hi) and 1 - margin <= d.lo and d.hi <= 1 + margin:
        return Verdict(no_change(margin), f"DF {d.estimate:.2f} [{d.lo:.2f}, {d.hi:.2f}] inside "
                       f"[{1 - margin:g}, {1 + margin:g}]", d, ex, open_sides=opened, **common)
    nor = (f"; nor does the test on the {cx.shared.n} launches that found a neighbour in flight (p = "
           f"{cx.p_more:.2g})" if cx is not None else "")
    if short:
        return Verdict(INCONCLUSIVE, "too few samples", d, ex,
                       f"{which}: n = {fewest} < {need} samples for DF's two-sided interval, and the exceedance "
                       f"test (p = {ex.p_more:.2g}) does not decide{nor}", need, **common)
    if not usable:
        missing = f"DF's {method} interval is not used for a verdict and the exceedance test did not decide"
    elif opened:
        missing = (f"{' and '.join(opened)} bound open at n = {d.n_shared}/{d.n_alone}; DF {d.estimate:.2f} "
                   f"[{_fmt(d.lo)}, {_fmt(d.hi)}] and the {pname} exceedance test (p = {ex.p_more:.2g}) decide nothing")
    else:
        missing = (f"DF {d.estimate:.2f} [{d.lo:.2f}, {d.hi:.2f}] neither excludes 1 nor lies within "
                   f"±{100 * margin:g} %, and the exceedance test (p = {ex.p_more:.2g}) does not decide")
    return Verdict(INCONCLUSIVE, "nothing decides", d, ex, missing + nor,
                   _projection(d if usable else None, ex, min(d.n_shared, d.n_alone), margin, alpha), opened,
                   **common)


def _fmt(v: float) -> str:
    return "no bound" if not math.isfinite(v) else f"{v:.2f}"
