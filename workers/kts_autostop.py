"""``iterations=auto``, nvbench-style: when the timed part may stop because every phase's p99 is known.

The timed part runs until the p99 of every phase's wall time has a 95 % interval within ``--auto-rel-width``
(default ±10 %) of the estimate on both sides, or ``--auto-time-cap-s`` or ``--auto-max-iterations`` is reached.
The interval is the analysis' own (``kts_helpers/analyse/orderstat.py``: order statistics at the exceedance
indicator's effective sample size), written again here in pure Python because the worker imports only torch and
the standard library; a test holds the two equal.
"""

from __future__ import annotations

import argparse
import math
import operator
import statistics
from collections.abc import Callable

K_BEYOND = 40  # as analyse/orderstat.K_BEYOND: tau is also estimated where >= 40 samples lie beyond
CLUSTER_GAP = 2  # as analyse/orderstat.CLUSTER_GAP
RARE = 0.05  # as analyse/orderstat.RARE
MIN_NU = 2.0  # as analyse/orderstat.MIN_NU
AUTO_MIN_N = 300  # no check before: a p99 has no 95 % upper bound below ~370 samples anyway
AUTO_GROWTH = 1.05  # check again when n has grown by 5 % (the check costs O(n log n), spent in the sleep)
_NORMAL = statistics.NormalDist()


def _betainc(a: float, b: float, x: float) -> float:
    """Regularized incomplete beta I_x(a, b) (continued fraction, Numerical Recipes 6.4)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    if x > (a + 1.0) / (a + b + 2.0):
        return 1.0 - _betainc(b, a, 1.0 - x)
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)) / a
    tiny = 1e-300
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1.0)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    f = d
    for m in range(1, 100_000):
        for num in (m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
                    -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1))):
            d = 1.0 + num * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + num / c
            c = c if abs(c) > tiny else tiny
            f *= c * d
        if abs(c * d - 1.0) < 1e-15:
            break
    return front * f


def _bisect(fn: Callable[[float], float], target: float, lo: float, hi: float) -> float:
    """x in [lo, hi] with fn(x) = target, fn increasing."""
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if fn(mid) < target:
            lo = mid
        else:
            hi = mid
        if hi - lo <= 1e-12 * max(1.0, abs(hi)):
            break
    return 0.5 * (lo + hi)


def bdtrik(y: float, n: float, p: float) -> float:
    """scipy.special.bdtrik: the k (continuous) with binomial CDF I_{1-p}(n - k, k + 1) = y; nan if none."""
    if y <= (1.0 - p) ** n:
        return math.nan
    return _bisect(lambda k: _betainc(n - k, k + 1.0, 1.0 - p) if k < n else 1.0, y, 0.0, n)


def t_widened(confidence: float, nu: float) -> float:
    """As orderstat.t_widened: the confidence a z-based rule needs to act like a Student t with nu d.o.f."""
    if not math.isfinite(nu) or nu > 1e6:
        return confidence
    nu = max(nu, 1.0)
    tq = _bisect(lambda t: 1.0 - 0.5 * _betainc(nu / 2.0, 0.5, nu / (nu + t * t)), 0.5 + confidence / 2, 0.0, 1e4)
    return 1.0 - 2.0 * (1.0 - _NORMAL.cdf(tq))


def geyer(y: list[float]) -> tuple[float, int]:
    """As orderstat.geyer(acf(y)): (tau, lags) over Geyer's initial positive sequence, autocorrelations on demand."""
    n = len(y)
    if n < 2:
        return 1.0, 0
    mean = math.fsum(y) / n
    c = [v - mean for v in y]
    c0 = math.fsum(v * v for v in c)
    if c0 <= 0:
        return 1.0, 0
    total, k = 0.0, 0
    for j in range(n // 2):
        pair = (math.fsum(map(operator.mul, c[: n - 2 * j], c[2 * j:]))
                + math.fsum(map(operator.mul, c[: n - 2 * j - 1], c[2 * j + 1:]))) / c0
        if pair <= 0:
            break
        total += pair
        k += 1
    return max(1.0, -1.0 + 2.0 * total), max(0, 2 * k - 1)


def _quantile(s: list[float], q: float) -> float:
    """numpy's default (linear) quantile of a sorted list."""
    h = (len(s) - 1) * q
    i = int(h)
    return s[i] if i + 1 >= len(s) else s[i] + (h - i) * (s[i + 1] - s[i])


def _cluster_sizes(y: list[float]) -> list[int]:
    """As orderstat.cluster_sizes: runs of exceedances at most CLUSTER_GAP iterations apart."""
    idx = [j for j, v in enumerate(y) if v]
    sizes: list[int] = []
    for j, i in enumerate(idx):
        if j and i - idx[j - 1] <= CLUSTER_GAP + 1:
            sizes[-1] += 1
        else:
            sizes.append(1)
    return sizes


def p99_bounds(x: list[float], q: float = 0.99, confidence: float = 0.95) -> tuple[float, float, float, float]:
    """(estimate, lo, hi, tau) as analyse/orderstat.quantile_bounds for one series; lo/hi +-inf: no bound."""
    n = len(x)
    s = sorted(x)
    est = _quantile(s, q)
    beyond = n * (1 - q)
    top = max(0.5, 1 - max(2.0, beyond / 2) / n)
    levels = (q, min(q, max(0.5, 1 - 2 * beyond / n)), min(q, max(0.5, 1 - K_BEYOND / n)), top)
    tau, nu = 1.0, math.inf  # as orderstat.indicator_tau
    for level in dict.fromkeys(levels):
        thr = _quantile(s, level)
        y = [1.0 if v > thr else 0.0 for v in x]
        k = sum(y)
        if 0 < k < n:
            g_tau, lags = geyer(y)
            tau = max(tau, g_tau)
            if k <= RARE * n:
                sizes = _cluster_sizes(y)
                tau = max(tau, sum(z * z for z in sizes) / k - 2 * (CLUSTER_GAP + 1) * k / n)
                if math.isinf(nu):
                    nu = max(MIN_NU, n * (1 - level) * len(sizes) / k - 1.0)
            elif math.isinf(nu):
                nu = n / (2 * lags + 1)
    conf = t_widened(confidence, nu)
    a2 = (1 - conf) / 2
    m = n / tau

    def at_rank(r: float) -> float:
        pos = min(max(r - 1.0, 0.0), n - 1.0)
        i = int(pos)
        return s[i] if i + 1 >= n else s[i] + (pos - i) * (s[i + 1] - s[i])

    lo, hi = -math.inf, math.inf
    if (1 - q) ** m < a2:
        j = bdtrik(a2, m, q)
        if math.isfinite(j):
            lo = at_rank(tau * j + 1)
    j = bdtrik(1 - a2, m, q)
    if math.isfinite(j) and j + 1 <= m:  # a whole count of effective samples, then a whole sample (orderstat)
        hi = at_rank(min(n, math.ceil(tau * math.ceil(j - 1e-9) + 1 - 1e-9)))
    return est, min(lo, est), max(hi, est), tau


class StopRule:
    """When the timed part ends: a fixed count, or (``auto``) when every phase's p99 is known to ±width."""

    def __init__(self, auto: bool, rel_width: float, time_cap_s: float, max_iterations: int) -> None:
        self.auto, self.rel_width, self.time_cap_s, self.max_iterations = auto, rel_width, time_cap_s, max_iterations
        self.series: dict[str, list[float]] = {}
        self.next_check = AUTO_MIN_N
        self.last: dict[str, dict] = {}
        self.reached = False

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> StopRule:
        return cls(args.auto, args.auto_rel_width, args.auto_time_cap_s, args.iterations)

    def describe(self) -> dict:
        if not self.auto:
            return {"rule": "fixed"}
        return {"rule": "auto", "statistic": "p99 of wall_ms, every phase", "confidence": 0.95,
                "method": "order statistics at the exceedance indicator's effective sample size",
                "rel_width": self.rel_width, "time_cap_s": self.time_cap_s, "max_iterations": self.max_iterations,
                "min_n": AUTO_MIN_N, "check_every": f"{AUTO_GROWTH - 1:.0%} growth"}

    def record(self, phase: str, wall_ms: float) -> None:
        if self.auto:
            self.series.setdefault(phase, []).append(wall_ms)

    def due(self, timed: int) -> bool:
        return self.auto and not self.reached and timed >= self.next_check

    def check(self, timed: int) -> bool:
        """Compute every phase's p99 interval; the target is reached when all lie within ±rel_width."""
        self.next_check = max(timed + 1, math.ceil(timed * AUTO_GROWTH))
        ok = True
        for phase, x in self.series.items():
            est, lo, hi, tau = p99_bounds(x)
            rel = max(hi - est, est - lo) / est if est > 0 else math.inf
            self.last[phase] = {"n": len(x), "estimate": est, "lo": lo if math.isfinite(lo) else None,
                                "hi": hi if math.isfinite(hi) else None, "ess": len(x) / tau,
                                "rel_half_width": rel if math.isfinite(rel) else None}
            ok &= rel <= self.rel_width
        self.reached = ok and bool(self.series)
        return self.reached

    def done(self, timed: int, timed_from: int, now_ns: int) -> bool:
        if not self.auto:
            return False
        return self.reached or timed >= self.max_iterations or (now_ns - timed_from) / 1e9 >= self.time_cap_s

    def end_record(self, args: argparse.Namespace, timed: int, timed_from: int, now_ns: int,
                   reason: str | None = None) -> dict:
        """The KTS_END record: n reached, why the timed part stopped (``reason``: an interim look's verdict),
        the last p99 intervals."""
        if reason is None and not self.auto:
            reason = "fixed count" if timed >= args.iterations else "duration"
        elif reason is None:
            reason = ("target reached" if self.reached else "iteration cap" if timed >= self.max_iterations
                      else "time cap")
        if self.auto and not self.reached and self.series:
            self.check(timed)  # the interval at the n actually reached
            reason += " (target reached at the last check)" if self.reached else ""
        out = {"tenant": args.tenant, "n": timed, "reason": reason, "elapsed_s": round((now_ns - timed_from) / 1e9, 3),
               "rule": self.describe(), "p99": self.last}
        widths = [v["rel_half_width"] for v in self.last.values()]
        if self.auto and not self.reached and widths and None not in widths:
            # a width shrinks about as 1 / sqrt(n): a rough n for the target, to plan the next run (not a promise)
            out["projected_n"] = math.ceil(timed * (max(widths) / self.rel_width) ** 2)
        return out
