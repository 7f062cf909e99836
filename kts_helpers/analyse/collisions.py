"""Collision evidence: which shared iterations were launched while a neighbour's operation was in flight.

Why: a p99 needs hundreds of samples to say anything, but the physical cause of a time-sliced tail can be
counted directly from both tenants' raw timestamps: an iteration launched while the neighbour held the GPU
waits for the neighbour's slice to end. This module gives, per shared tenant (and phase) of a shared
scenario:

* **the collision share**: of the tenant's co-running timed iterations, the fraction *launched* while some
  neighbour's operation was in flight, with a 95 % interval that allows for collisions coming in bursts;
* **the wait** (``rules.add_clocks``: wall - device - overhead floor) of collided and other iterations:
  median and p95, each with the kit's order-statistic interval (``rules.quantile``), and how many collided
  launches waited longer than the others' p95 (a binomial test against the 5 % chance would give: decisive
  with a dozen collisions, where a median of a dozen samples has no bound);
* **the beat**: whether collisions recur with a period set by the tenants' cadences (the expected period
  from the measured cadences, and the period the collision indicator itself shows, or none).

**In flight** (the one rule, ``rules.in_flight``): an iteration collides when its ``start_ns`` lies inside
the closed interval ``[start_ns, end_ns]`` of any line a neighbour wrote in the same scenario, *padding lines
included* (padding runs the same operation at the same cadence: its load is as real as a timed one). Those
two host epoch stamps enclose the neighbour's launch and its ``cuda.synchronize()``, so the GPU work lies
inside them (CUDA events give a duration, no absolute GPU time); the window overstates the GPU's busy time by
the launch and sync overhead (tens of µs), which can only add borderline collisions. The same definition
as ``tests/independent/tailcount.py`` (the independent count), so the counts agree.

The interval for the share (:func:`share_interval`): Wilson's score interval at an effective sample size
n / tau, tau the larger of (a) Geyer's initial-positive-sequence sum of the indicator's autocorrelations and
(b) the long-run variance factor of a two-state Markov chain with the observed mean run lengths of
collisions and of gaps (about 2 x mean burst length - 1 when collisions are rare): a sparse indicator's
autocorrelation alone underestimates tau when there are few bursts, the burst length does not. The
quantile is Student's t with as many degrees of freedom as there are runs of the rarer kind (bursts, or
gaps between them), fewer where Geyer's lags leave fewer: with three bursts the data say little about how
long bursts are, and the interval says so. A series with no collision (or only collisions) gets the
widest such interval (one degree of freedom): nothing in it tells how long a burst would be. Measured
coverage (``tests/test_collisions.py``, more in its docstring): >= 0.95 at n = 300-2000 for i.i.d.,
Markov bursts (mean 3 and 8 long, 1.7-30 %) and periodic collisions.

The beat (:func:`expected_lag`): with the tenant's measured inter-launch period P and a neighbour's period
Pn and busy time d per cycle, the tenant's k-th launch falls at phase frac(k P / Pn) of the neighbour's
cycle, and it collides while that phase lies in a window of width w = d / Pn. A collision at launch i can
recur at i + q only if frac(q P / Pn) is within w of 0 or 1, so the smallest such q (a denominator of a
continued-fraction convergent of P / Pn) is the soonest collisions recur: for exact 100 and 150 ms cadences
q = 3 (every third 100 ms launch, 300 ms); for the H200 article's measured 100.8 and 153.4 ms, q = 35
(3.5 s). In closed loop a collided launch is delayed by its wait, which shifts its phase, so the observed
lag may exceed q by a few launches (``TenantCollisions.beat_matches`` allows 10 %). No beat where the
neighbour is busy half its cycle or more (collisions are continuous) or a cadence wanders by more than the
window from launch to launch (the phase is then a random walk). The observed
period (:func:`periodicity`) is the lag at which burst starts pair up most often, tested against burst starts
placed at random (the maximum over all lags, so testing many lags is paid for).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from statistics import NormalDist
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
from scipy.stats import binom
from scipy.stats import t as student_t

from kts_helpers.analyse import orderstat, rules, stats
from kts_helpers.analyse.logparse import parse_file
from kts_helpers.analyse.rules import in_flight  # noqa: F401 -- the one rule lives in rules; named here too

if TYPE_CHECKING:
    from kts_helpers.analyse.load import RunData

CONFIDENCE = 0.95
CONTINUOUS_BUSY = 0.5  # a neighbour in flight this fraction of its cycle or more: collisions are continuous
MIN_BURSTS = 3  # fewer bursts than this: no periodicity test
NULL_DRAWS = 500  # random placements of the burst starts for the periodicity test
PERIODIC_P = 0.05


# ----------------------------------------------------------------------------- typed results
@dataclass(frozen=True)
class Cadence:
    """How often a tenant launches (median inter-launch time), how steadily (its IQR) and how long it is busy."""

    period_ms: float
    spread_ms: float
    busy_ms: float

    @classmethod
    def of(cls, launch_ns: np.ndarray, end_ns: np.ndarray) -> Cadence:
        order = np.argsort(launch_ns, kind="stable")
        s, e = np.asarray(launch_ns, np.int64)[order], np.asarray(end_ns, np.int64)[order]
        if len(s) < 2:
            nan = float("nan")
            return cls(nan, nan, nan)
        gaps = np.diff(s) / 1e6
        q1, q3 = np.quantile(gaps, [0.25, 0.75])
        return cls(float(np.median(gaps)), float(q3 - q1), float(np.median(e - s)) / 1e6)


@dataclass(frozen=True)
class Share:
    """Collided launches out of n, with the dependence-aware interval."""

    collided: int
    n: int
    estimate: float
    lo: float
    hi: float
    tau: float  # long-run variance factor used (1: as if independent)
    bursts: int  # runs of consecutive collided iterations
    mean_burst: float

    @property
    def ess(self) -> float:
        return self.n / self.tau if self.tau > 0 else float("nan")

    def text(self) -> str:
        if self.n == 0:
            return "no co-running iterations"
        return (f"{self.collided}/{self.n} = {100 * self.estimate:.2f} % "
                f"[{100 * self.lo:.2f}, {100 * self.hi:.2f}] %")


@dataclass(frozen=True)
class WaitSplit:
    """The wait clock of collided and other iterations: median and p95 with their intervals."""

    n_with: int
    n_without: int
    median_with: stats.Interval
    median_without: stats.Interval
    p95_with: stats.Interval
    p95_without: stats.Interval
    beyond: int = 0  # collided launches that waited longer than the other launches' p95
    p_beyond: float = float("nan")  # P(at least ``beyond`` of n_with, were each beyond it 5 % of the time)


@dataclass(frozen=True)
class Beat:
    """The collision recurrence one neighbour's cadence predicts for this tenant."""

    neighbour: str
    own: Cadence
    theirs: Cadence
    lag: int | None  # iterations of this tenant between recurring collisions; None: no beat
    why: str  # "" where lag is set, else why there is none

    @property
    def period_ms(self) -> float | None:
        return None if self.lag is None else self.lag * self.own.period_ms

    @property
    def busy_fraction(self) -> float:
        return self.theirs.busy_ms / self.theirs.period_ms if self.theirs.period_ms > 0 else float("nan")


@dataclass(frozen=True)
class Periodicity:
    """What the collision indicator itself shows: the lag at which burst starts pair up, and its test."""

    lag: int | None  # None: not periodic (or not testable)
    period_ms: float | None
    pairs: int  # burst starts that recur exactly ``lag`` iterations later
    p_value: float | None
    verdict: str


@dataclass(frozen=True)
class TenantCollisions:
    """Collision evidence for one shared tenant's series (one phase) in one shared scenario."""

    scenario: str
    tenant: str
    phase: str
    neighbours: tuple[str, ...]
    share: Share
    expected_share: float  # 1 - prod(1 - busy fraction): launches phased at random would collide this often
    wait: WaitSplit
    beats: tuple[Beat, ...]
    periodicity: Periodicity
    collided: tuple[bool, ...] = field(default=(), repr=False)  # per launch, in time order (for charts)
    wait_ms: tuple[float, ...] = field(default=(), repr=False)

    @property
    def label(self) -> str:
        return rules.series_label(self.tenant, self.phase)

    @property
    def beat_matches(self) -> bool | None:
        """Whether the observed period is a predicted one (or a small multiple); None if either is missing."""
        lags = [b.lag for b in self.beats if b.lag is not None]
        seen = self.periodicity.lag
        if seen is None or not lags:
            return None
        return any(abs(seen - k * q) <= max(1.0, 0.1 * k * q) for q in lags for k in (1, 2, 3))

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: intervals as dicts (a missing bound None)."""
        d = asdict(self)
        del d["collided"], d["wait_ms"]
        d["wait"] = {k: (v.to_dict() if isinstance(v, stats.Interval) else v)
                     for k, v in ((f.name, getattr(self.wait, f.name)) for f in self.wait.__dataclass_fields__.values())}
        d["share"]["ess"] = self.share.ess
        d["beats"] = [{**asdict(b), "period_ms": b.period_ms} for b in self.beats]
        d["beat_matches"] = self.beat_matches
        return d


# ----------------------------------------------------------------------------- the share and its interval
def bursts(indicator: np.ndarray) -> np.ndarray:
    """Lengths of the runs of consecutive ones."""
    c = np.asarray(indicator, np.int8)
    edges = np.diff(np.r_[0, c, 0])
    return np.flatnonzero(edges == -1) - np.flatnonzero(edges == 1)


def markov_tau(mean_ones: float, mean_zeros: float) -> float:
    """Long-run variance factor (1 + lambda) / (1 - lambda) of a two-state Markov chain with these mean run
    lengths (lambda = 1 - 1/mean_ones - 1/mean_zeros); about 2 x mean_ones - 1 when ones are rare."""
    leave = 1.0 / mean_ones + 1.0 / mean_zeros
    return max(1.0, (2.0 - leave) / leave)


def share_interval(indicator: np.ndarray, confidence: float = CONFIDENCE) -> Share:
    """The share of ones in a time-ordered 0/1 series, with Wilson's interval at n / tau (see the module doc)."""
    c = np.asarray(indicator, bool)
    n, k = len(c), int(c.sum())
    if n == 0:
        nan = float("nan")
        return Share(0, 0, nan, nan, nan, nan, 0, nan)
    runs = bursts(c)
    mean_burst = float(runs.mean()) if len(runs) else 0.0
    tau, lags = 1.0, 0
    if 0 < k < n:
        tau, lags = orderstat.geyer(orderstat.acf(c.astype(np.float64)))
        tau = max(tau, markov_tau(mean_burst, float(bursts(~c).mean())))
    events = min(len(runs), len(bursts(~c)))  # independent pieces of evidence on the dependence: the runs
    nu = min(n / (2 * lags + 1), max(1.0, float(events)))
    z = float(student_t.ppf(0.5 + confidence / 2, nu)) if math.isfinite(nu) and nu < 1e6 else \
        NormalDist().inv_cdf(0.5 + confidence / 2)
    m = n / tau
    p = k / n
    centre = (p + z * z / (2 * m)) / (1 + z * z / m)
    half = z * math.sqrt(p * (1 - p) / m + z * z / (4 * m * m)) / (1 + z * z / m)
    return Share(k, n, p, max(0.0, centre - half), min(1.0, centre + half), tau, len(runs), mean_burst)


# ----------------------------------------------------------------------------- cadence and beat
def cadence(lines: pd.DataFrame) -> Cadence:
    """A neighbour's cadence from all its lines: an iteration (an llm's steps together) is a block of lines
    with one counter (timed or padding) and one iteration number, launched at its first start, busy until
    its last end."""
    if len(lines) < 2:
        return Cadence.of(np.zeros(0, np.int64), np.zeros(0, np.int64))
    blocks = lines.assign(_pad=lines["phase"].eq(rules.PAD_PHASE)).groupby(["_pad", "iteration"], sort=False).agg(
        start=("start_ns", "min"), end=("end_ns", "max"))
    return Cadence.of(blocks["start"].to_numpy(np.int64), blocks["end"].to_numpy(np.int64))


def expected_lag(own: Cadence, neighbour: Cadence, n_launches: int) -> tuple[int | None, str]:
    """The smallest q (at most a third of the series) with frac(q P / Pn) within the busy window d / Pn of
    0 or 1: the soonest a collision can recur (module doc).

    No beat where a cadence is unknown, where the neighbour is in flight half its cycle or more
    (collisions are continuous), or where either cadence wanders (inter-launch IQR) by more than the busy
    window from one launch to the next: then the phase is a random walk, not a beat.
    """
    max_lag = max(1, n_launches // 3)
    values = (own.period_ms, neighbour.period_ms, neighbour.busy_ms)
    if not all(map(math.isfinite, values)) or own.period_ms <= 0 or neighbour.period_ms <= 0:
        return None, "cadence unknown (fewer than two iterations)"
    w = neighbour.busy_ms / neighbour.period_ms
    if w >= CONTINUOUS_BUSY:
        return None, f"neighbour in flight {100 * min(w, 1.0):.0f} % of its cycle: collisions are continuous"
    wander = max(own.spread_ms, neighbour.spread_ms) / neighbour.period_ms
    if wander > w:
        return None, (f"irregular cadence: launches wander by {max(own.spread_ms, neighbour.spread_ms):.2f} ms "
                      f"(IQR), more than the neighbour's {neighbour.busy_ms:.2f} ms in flight")
    ratio = own.period_ms / neighbour.period_ms
    q = np.arange(1, max(1, max_lag) + 1)
    off = np.abs(q * ratio - np.round(q * ratio))
    hit = np.flatnonzero(off < w)  # a collision at launch i can recur at i + q only for these q
    if not hit.size:
        return None, f"no recurrence within {max_lag} iterations"
    return int(q[hit[0]]), ""


def _pair_counts(starts: np.ndarray, max_lag: int) -> np.ndarray:
    """m[L-1] = number of i with starts[i] and starts[i + L] both set, L = 1..max_lag; rows for a 2-D input."""
    x = np.atleast_2d(np.asarray(starts, np.float64))
    n = x.shape[1]
    f = np.fft.rfft(x, 2 * n, axis=1)
    ac = np.fft.irfft(f * np.conj(f), 2 * n, axis=1)[:, 1: max_lag + 1]
    return np.rint(ac).astype(np.int64)


def periodicity(indicator: np.ndarray, own_period_ms: float, *, seed: int = 0,
                draws: int = NULL_DRAWS) -> Periodicity:
    """The lag at which collision bursts recur, if the recurrence beats random placement (module doc)."""
    c = np.asarray(indicator, bool)
    n = len(c)
    k = int(c.sum())
    if n and k > CONTINUOUS_BUSY * n:
        return Periodicity(None, None, 0, None, f"collisions are continuous ({k} of {n}): no beat")
    starts = np.diff(np.r_[0, c.astype(np.int8)]) == 1
    n_bursts = int(starts.sum())
    if n_bursts < MIN_BURSTS:
        return Periodicity(None, None, 0, None, f"too few collision bursts to test ({n_bursts} < {MIN_BURSTS})")
    max_lag = max(1, n // 3)
    m = _pair_counts(starts, max_lag)[0]
    best = int(np.argmax(m))
    observed = int(m[best])
    rng = np.random.default_rng(seed)
    null = np.zeros((draws, n))
    picks = np.argsort(rng.random((draws, n)), axis=1)[:, :n_bursts]
    np.put_along_axis(null, picks, 1.0, axis=1)
    null_max = _pair_counts(null, max_lag).max(axis=1)
    p = float((1 + np.count_nonzero(null_max >= observed)) / (1 + draws))
    lag = best + 1
    if p >= PERIODIC_P or observed < 2:
        return Periodicity(None, None, observed, p, f"no beat: the most frequent recurrence ({observed} bursts "
                           f"{lag} iterations apart) is what random placement gives (p = {p:.2f})")
    period = lag * own_period_ms if math.isfinite(own_period_ms) else None
    return Periodicity(lag, period, observed, p, f"beat every {lag} iterations"
                       + (f" ({period:.0f} ms)" if period is not None else "")
                       + f": {observed} of {n_bursts} bursts recur exactly then (p = {p:.3f})")


# ----------------------------------------------------------------------------- one series, one run
def _wait_split(wait_ms: np.ndarray, collided: np.ndarray, confidence: float) -> WaitSplit:
    w, c = np.asarray(wait_ms, np.float64), np.asarray(collided, bool)

    def q(x: np.ndarray, level: float) -> stats.Interval:
        return rules.quantile([x], level, confidence=confidence)

    p95_without = q(w[~c], 0.95)
    beyond = int(np.count_nonzero(w[c] > p95_without.estimate)) if math.isfinite(p95_without.estimate) else 0
    p_beyond = float(binom.sf(beyond - 1, int(c.sum()), 0.05)) if c.any() and math.isfinite(p95_without.estimate) \
        else float("nan")
    return WaitSplit(int(c.sum()), int((~c).sum()), q(w[c], 0.5), q(w[~c], 0.5), q(w[c], 0.95), p95_without,
                     beyond, p_beyond)


def tenant_collisions(own: pd.DataFrame, neighbours: Mapping[str, pd.DataFrame], *, scenario: str = "shared",
                      confidence: float = CONFIDENCE, seed: int = 0) -> TenantCollisions:
    """Collision evidence for one series.

    ``own``: the tenant's co-running timed lines of one phase (``start_ns``, ``wait_ms``, ``tenant``,
    ``phase``; ``rules.add_clocks`` gives the wait). ``neighbours``: every valid line each neighbour wrote in
    the scenario, padding included (``start_ns``, ``end_ns``, ``phase``, ``iteration``).
    """
    own = own.sort_values("start_ns")
    launch = own["start_ns"].to_numpy(np.int64)
    ops = [nb for nb in neighbours.values() if len(nb)]
    if ops:
        op_start = np.concatenate([nb["start_ns"].to_numpy(np.int64) for nb in ops])
        op_end = np.concatenate([nb["end_ns"].to_numpy(np.int64) for nb in ops])
        collided = in_flight(launch, op_start, op_end)
    else:
        collided = np.zeros(len(launch), bool)
    mine = Cadence.of(launch, own["end_ns"].to_numpy(np.int64))
    beats = []
    for name, nb in neighbours.items():
        theirs = cadence(nb)
        lag, why = expected_lag(mine, theirs, len(launch))
        beats.append(Beat(name, mine, theirs, lag, why))
    busy = [b.busy_fraction for b in beats if math.isfinite(b.busy_fraction)]
    expected = 1.0 - float(np.prod([1.0 - min(f, 1.0) for f in busy])) if busy else float("nan")
    return TenantCollisions(
        scenario=scenario, tenant=str(own["tenant"].iloc[0]) if len(own) else "",
        phase=str(own["phase"].iloc[0]) if len(own) else "", neighbours=tuple(neighbours),
        share=share_interval(collided, confidence), expected_share=expected,
        wait=_wait_split(own["wait_ms"].to_numpy(np.float64), collided, confidence),
        beats=tuple(beats), periodicity=periodicity(collided, mine.period_ms, seed=seed),
        collided=tuple(bool(v) for v in collided), wait_ms=tuple(float(v) for v in own["wait_ms"]))


def run_collisions(data: RunData, *, confidence: float = CONFIDENCE, seed: int = 0) -> list[TenantCollisions]:
    """Collision evidence for every tenant and phase of every shared scenario with two or more tenants.

    The tenant's own series are the statistics' (``data.iterations``: co-running, timed, after any warm-up
    trim); the neighbours' operations are every valid line of their logs (``logparse.parse_file``), padding
    and trimmed iterations included: a trimmed iteration still held the GPU.
    """
    out: list[TenantCollisions] = []
    frame = data.iterations
    for scen in data.manifest.scenarios:
        if scen.kind != "shared" or len(scen.tenant_names) < 2:
            continue
        lines = {}
        for tenant in scen.tenant_names:
            path = data.run.log_path(scen.name, tenant)
            if path.exists():
                lines[tenant] = parse_file(path).frame
        mine = frame[frame["scenario"] == scen.name]
        if "in_overlap" in mine:
            mine = mine[mine["in_overlap"]]
        for (tenant, _phase), own in mine.groupby(["tenant", "phase"], sort=False):
            neighbours = {t: f for t, f in lines.items() if t != tenant}
            if neighbours:
                out.append(tenant_collisions(own, neighbours, scenario=scen.name, confidence=confidence, seed=seed))
    return out


def collisions_frame(found: list[TenantCollisions]) -> pd.DataFrame:
    """One row per launch: scenario, tenant (label), launch number, wait and whether it collided."""
    parts = [pd.DataFrame({"scenario": f.scenario, "tenant": f.label, "launch": np.arange(len(f.collided)),
                           "wait_ms": f.wait_ms, "collided": f.collided}) for f in found if f.collided]
    cols = ["scenario", "tenant", "launch", "wait_ms", "collided"]
    return pd.concat(parts, ignore_index=True)[cols] if parts else pd.DataFrame(columns=cols)


def summary_sentence(f: TenantCollisions) -> str:
    """One generated sentence per series: the share, the waits and the beat, from the results alone."""
    nb = ", ".join(f.neighbours)
    if f.share.n == 0:
        return f"{f.label}: no co-running iteration."
    s = (f"{f.label}: {f.share.collided} of {f.share.n} launches found {nb} in flight "
         f"({100 * f.share.estimate:.2f} %, 95 % interval {100 * f.share.lo:.2f}–{100 * f.share.hi:.2f} %)")
    if math.isfinite(f.expected_share):
        inside = f.share.lo <= f.expected_share <= f.share.hi
        s += (f"; launches at a random phase of {nb}'s cycle would collide {100 * f.expected_share:.2f} % of the time"
              + (" (inside the interval)" if inside else " (outside the interval)"))
    mw, mo = f.wait.median_with, f.wait.median_without
    if f.wait.n_with and f.wait.n_without and math.isfinite(mw.estimate) and math.isfinite(mo.estimate):
        s += f". Median wait {mw.estimate:.3f} ms with a collision, {mo.estimate:.3f} ms without"
        if math.isfinite(mw.lo) and math.isfinite(mo.hi) and mw.lo > mo.hi:
            s += " (the intervals do not overlap)"
        elif math.isfinite(mo.lo) and math.isfinite(mw.hi) and mw.hi < mo.lo:
            s += " (collided launches waited less: the intervals do not overlap)"
        else:
            s += " (the intervals overlap or lack a bound: too few collisions to separate them)"
    if f.wait.n_with and math.isfinite(f.wait.p_beyond):
        s += (f"; {f.wait.beyond} of the {f.wait.n_with} collided launches waited longer than the others' p95 "
              f"({f.wait.p95_without.estimate:.3f} ms), where 5 % would by chance (p = {f.wait.p_beyond:.2g})")
    s += f". {f.periodicity.verdict[0].upper()}{f.periodicity.verdict[1:]}"
    predicted = [b for b in f.beats if b.lag is not None]
    if predicted:
        s += "; the cadences predict " + ", ".join(f"{b.lag} launches ({b.period_ms:.0f} ms) with {b.neighbour}"
                                                   for b in predicted)
        if f.beat_matches is not None:
            s += " — it matches" if f.beat_matches else " — it does not match"
    return s + "."


def collisions_table(found: list[TenantCollisions]) -> pd.DataFrame:
    """One row per series: the share with its interval, the waits with and without, the beat."""

    def iv(i: stats.Interval) -> str:
        if not math.isfinite(i.estimate):
            return "n < 2"
        lo = f"{i.lo:.3f}" if math.isfinite(i.lo) else "no bound"
        hi = f"{i.hi:.3f}" if math.isfinite(i.hi) else "no bound"
        return f"{i.estimate:.3f} [{lo}, {hi}]"

    rows = []
    for f in found:
        expected = "; ".join(f"{b.neighbour}: {b.lag} it. ({b.period_ms:.0f} ms)" if b.lag is not None
                             else f"{b.neighbour}: none ({b.why})" for b in f.beats)
        rows.append({"scenario": f.scenario, "tenant": f.label, "neighbours": ", ".join(f.neighbours),
                     "collided": f.share.text(), "random_phase_share": f"{100 * f.expected_share:.2f} %",
                     "wait_p50_with_ms": iv(f.wait.median_with), "wait_p50_without_ms": iv(f.wait.median_without),
                     "wait_p95_with_ms": iv(f.wait.p95_with), "wait_p95_without_ms": iv(f.wait.p95_without),
                     "collided_beyond_p95": (f"{f.wait.beyond}/{f.wait.n_with} (p = {f.wait.p_beyond:.2g})"
                                             if math.isfinite(f.wait.p_beyond) else ""),
                     "expected_beat": expected, "observed_beat": f.periodicity.verdict})
    return pd.DataFrame(rows)
