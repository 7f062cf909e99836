"""The verdict on series whose speed moves between phases: the drift grid (issue 30).

Why: alone and shared are measured at different moments, and a GPU's speed moves a little between them (the
committed H200 repeats: alone FFT medians 0.570, 0.531, 0.525 ms). A rule that assumes one steady process calls
that sharing. Here every pair is drawn as the kit's design runs it -- ``Design``: K alone blocks and J shared
blocks (the default, alone blocks on both sides of every shared block: K = J + 1), each block's level
multiplied by exp(N(0, drift_sd)), plus OS hiccups (a ``HICCUP_SHARE`` of iterations 5-20x slower) on both
sides, on the coverage grid's generators (``coverage.lognormal`` with AR bulk, ``coverage.collisions``), with
and without the neighbours' timestamps (collision flags: drawn apart from the values under no effect), for one
verdict and for a report of several tenants x two clocks read as one family (``verdict.family``). ``make bench``
writes the full grid (bench/bench_drift.py); the tests run a fast subset.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass

import numpy as np

from kts_helpers.analyse import verdict as V
from kts_helpers.analyse.coverage import Generator, collision_flags, collisions, lognormal

HICCUP_SHARE = 0.001  # 0.1 % of iterations ...
HICCUP_FACTOR = (5.0, 20.0)  # ... 5-20x slower (an OS hiccup)
FLAG_SHARE = 0.02  # launches flagged as collided where the flags cost nothing (no effect, timestamps known)


@dataclass(frozen=True)
class Design:
    """How a tenant's n iterations per side are laid out: ``alone`` blocks and ``shared`` blocks."""

    alone: int
    shared: int

    @property
    def name(self) -> str:
        return f"{self.alone} alone / {self.shared} shared blocks"


OLD_DESIGN = Design(1, 1)  # every baseline, then every shared scenario: one block a side
DEFAULT_DESIGN = Design(3, 2)  # alone, shared, alone, shared, alone (run.spec: blocks = 2)


# Drift with time structure (issue 43's audit): the blocks' log levels in run order, and each block's tail width.
SHAPES = ("level", "linear", "ou", "ar1", "step", "bursts", "tail")
OU_PHI, AR_PHI = 0.7, 0.95  # block-to-block correlation of the OU (fast) and AR(1) (slow) drifts
BURST_SHARE = 0.2  # bursts: this share of blocks 2 sd slower, on top of an independent sd / 2
TAIL_SD = 0.3  # tail: each block's log tail width moves by this log-sd (the median holds)


def levels(rng: np.random.Generator, shape: str, sd: float, n: int, tail_sd: float = TAIL_SD
           ) -> tuple[np.ndarray, np.ndarray]:
    """(log level, tail width) of n blocks in run order; sd is the drift's size, each shape's scale.

    level: independent N(0, sd); linear: a ramp whose spread over the run has sd ``sd`` (range sd * sqrt(12));
    ou / ar1: a stationary AR(1) across blocks with sd ``sd`` (lag-1 0.7 / 0.95); step: 0 before a random block,
    +-2 sd from it on; bursts: independent sd / 2 and 20 % of blocks 2 sd slower; tail: independent N(0, sd) levels
    and each block's log deviations from its median multiplied by exp(N(0, tail_sd)) (the median holds). Every
    shape but "tail" has width 1.
    """
    if shape not in SHAPES:
        raise ValueError(f"unknown drift shape {shape!r}; choose one of {', '.join(SHAPES)}")
    width = np.ones(n)
    if sd <= 0 and shape != "tail":
        return np.zeros(n), width
    if shape in ("level", "tail"):
        lv = rng.normal(0.0, sd, n) if sd > 0 else np.zeros(n)
        if shape == "tail":
            width = np.exp(rng.normal(0.0, tail_sd, n))
        return lv, width
    if shape == "linear":
        return sd * math.sqrt(12) * (np.arange(n) / max(n - 1, 1) - 0.5) * rng.choice((-1.0, 1.0)), width
    if shape in ("ou", "ar1"):
        phi = OU_PHI if shape == "ou" else AR_PHI
        lv = np.empty(n)
        lv[0] = rng.normal(0.0, sd)
        for i in range(1, n):
            lv[i] = phi * lv[i - 1] + rng.normal(0.0, sd * math.sqrt(1 - phi * phi))
        return lv, width
    if shape == "step":
        at = int(rng.integers(1, max(n, 2)))
        return np.where(np.arange(n) >= at, 2 * sd * rng.choice((-1.0, 1.0)), 0.0), width
    return rng.normal(0.0, sd / 2, n) + np.where(rng.random(n) < BURST_SHARE, 2 * sd, 0.0), width


def shaped(x: np.ndarray, level: float, width: float) -> np.ndarray:
    """One block moved to its drift: its level times exp(level), its log deviations from its median times width."""
    med = float(np.median(x))
    if med <= 0:
        return x * math.exp(level)
    return med * math.exp(level) * np.exp(width * np.log(np.maximum(x, 1e-300) / med))


def run_order(design: Design) -> tuple[np.ndarray, np.ndarray]:
    """Positions of (alone, shared) blocks in run order: alternating where alone = shared + 1 (the bracketed and
    the warm designs), else every alone block first."""
    if design.alone == design.shared + 1:
        return np.arange(design.alone) * 2, np.arange(design.shared) * 2 + 1
    return np.arange(design.alone), design.alone + np.arange(design.shared)


def _blocks(n: int, k: int) -> list[int]:
    return [n // k + (i < n % k) for i in range(k)]


def _drifted(rng: np.random.Generator, gen: Generator, n: int, blocks: int, sd: float, hiccups: bool,
             flags: str | None, own: bool, lv: np.ndarray | None = None, width: np.ndarray | None = None
             ) -> tuple[list[np.ndarray], list[np.ndarray] | None]:
    """One side: blocks of gen's series, each at its own level (``lv``/``width``: the drift's, in block order; else
    independent N(0, sd)), hiccups on top; flags as asked."""
    runs, hits = [], []
    for b, m in enumerate(_blocks(n, blocks)):
        if own and gen.flagged is not None:
            x, hit = gen.flagged(rng, 1, m)
            x, hit = x[0], hit[0]
        else:
            x = gen.draw(rng, 1, m)[0]
            hit = collision_flags(flags, rng, 1, m, share=FLAG_SHARE)[0][0] if flags else None
        if lv is not None:
            x = shaped(x, float(lv[b]), float(width[b]) if width is not None else 1.0)
        else:
            x = x * math.exp(rng.normal(0.0, sd)) if sd > 0 else x
        if hiccups:
            h = rng.random(m) < HICCUP_SHARE
            x = np.where(h, x * rng.uniform(*HICCUP_FACTOR, m), x)
        runs.append(x)
        hits.append(hit)
    return runs, (hits if all(h is not None for h in hits) else None)


def draw_pair(rng: np.random.Generator, alone: Generator, shared: Generator, n: int, design: Design, sd: float,
              hiccups: bool = True, flags: str | None = None, own: bool = False, shape: str | None = None
              ) -> tuple[list[np.ndarray], list[np.ndarray], list[np.ndarray] | None]:
    """(shared blocks, alone blocks, collided flags per shared block or None). ``shape``: the drift's time
    structure (``levels``), the blocks in run order (``run_order``); None: independent levels per block."""
    if shape is None:
        al, _ = _drifted(rng, alone, n, design.alone, sd, hiccups, None, False)
        sh, hit = _drifted(rng, shared, n, design.shared, sd, hiccups, flags, own)
        return sh, al, hit
    lv, width = levels(rng, shape, sd, design.alone + design.shared)
    pa, ps = run_order(design)
    al, _ = _drifted(rng, alone, n, design.alone, sd, hiccups, None, False, lv[pa], width[pa])
    sh, hit = _drifted(rng, shared, n, design.shared, sd, hiccups, flags, own, lv[ps], width[ps])
    return sh, al, hit


@dataclass(frozen=True)
class DriftRow:
    """How often one verdict (or one report) read what, on ``reps`` draws of one cell."""

    measures: str  # "false alarm", "power", "no change", "report (k tenants)"
    alone: str
    shared: str
    design: str
    n: int
    drift_sd: float
    hiccups: bool
    timestamps: bool
    reps: int
    degraded: int  # "degraded" (report: reports with at least one)
    small_slower: int
    faster: int  # "faster when shared" (report: reports with at least one)
    small_faster: int
    no_change: int
    inconclusive: int
    seconds: float
    shape: str = "independent"  # the drift's time structure (``levels``)

    def to_dict(self) -> dict:
        return asdict(self)


def _count(readings: Iterable[str], margin: float = V.DEFAULT_MARGIN) -> dict[str, int]:
    out = dict.fromkeys(("degraded", "small_slower", "faster", "small_faster", "no_change", "inconclusive"), 0)
    key = {V.DEGRADED: "degraded", V.small_slower(margin): "small_slower", V.FASTER: "faster",
           V.small_faster(margin): "small_faster", V.no_change(margin): "no_change", V.INCONCLUSIVE: "inconclusive"}
    for r in readings:
        out[key[r]] += 1
    return out


def verdict_row(measures: str, alone: Generator, shared: Generator, n: int, reps: int, *, sd: float,
                design: Design = DEFAULT_DESIGN, hiccups: bool = True, timestamps: bool = False,
                seed: int = 0, shape: str | None = None) -> DriftRow:
    """``reps`` verdicts of one cell. With ``timestamps``: the shared generator's own collisions are flagged where
    it has them (power), else random flags that cost nothing (no effect)."""
    rng = np.random.default_rng(seed)
    own = timestamps and shared.flagged is not None
    said = []
    t0 = time.perf_counter()
    for _ in range(reps):
        sh, al, hit = draw_pair(rng, alone, shared, n, design, sd, hiccups, "random" if timestamps and not own else None,
                                own, shape)
        said.append(V.decide(sh, al, collided=hit).reading)
    return DriftRow(measures, alone.name, shared.name, design.name, n, sd, hiccups, timestamps, reps, **_count(said),
                    seconds=round(time.perf_counter() - t0, 1), shape=shape or "independent")


def report_row(tenants: int, n: int, reps: int, *, sd: float, design: Design = DEFAULT_DESIGN,
               hiccups: bool = True, timestamps: bool = False, bulk: Generator | None = None,
               seed: int = 0, shape: str | None = None) -> DriftRow:
    """``reps`` no-effect reports of ``tenants`` tenants x two clocks (drawn independently: Holm's worst case),
    read as one family; a report counts once if any of its verdicts reads a slowdown (or a speed-up)."""
    gen = bulk or lognormal()
    rng = np.random.default_rng(seed)
    counts = dict.fromkeys(("degraded", "small_slower", "faster", "small_faster", "no_change", "inconclusive"), 0)
    t0 = time.perf_counter()
    for _ in range(reps):
        vs = []
        for _k in range(2 * tenants):
            sh, al, hit = draw_pair(rng, gen, gen, n, design, sd, hiccups, "random" if timestamps else None, shape=shape)
            vs.append(V.decide(sh, al, collided=hit))
        said = [v.reading for v in V.family(vs)]
        c = _count(said)
        for k in counts:
            counts[k] += c[k] > 0
    return DriftRow(f"report ({tenants} tenants x 2 clocks)", gen.name, gen.name, design.name, n, sd, hiccups,
                    timestamps, reps, **counts, seconds=round(time.perf_counter() - t0, 1), shape=shape or "independent")


def null_cells(ns: Iterable[int] = (800, 2000), sds: Iterable[float] = (0.0, 0.005, 0.01, 0.02),
               phis: Iterable[float] = (0.0, 0.9)) -> list[tuple[str, Generator, Generator, int, float, bool]]:
    """(measures, alone, shared, n, drift sd, timestamps): the no-effect cells of the grid."""
    return [("false alarm", lognormal(phi), lognormal(phi), n, sd, ts) for n in ns for sd in sds for phi in phis
            for ts in (False, True)]


def power_cells(n: int = 800) -> list[tuple[str, Generator, Generator, int, float, bool]]:
    """The power table: small and article-like collisions (timestamps known), bulk slowdowns, a true x1.3, each
    without drift and with sd 2 % (+ hiccups)."""
    iid = lognormal()
    out = []
    for sd in (0.0, 0.02):
        out += [("power", iid, collisions("random", share=0.02, wait=0.3), n, sd, True),
                ("power", iid, collisions("random"), n, sd, True),
                ("power", iid, lognormal(scale=1.15), n, sd, True),
                ("power", iid, lognormal(scale=1.05), n, sd, True),
                ("power", iid, lognormal(scale=1.3), n, sd, False),
                ("power (faster)", iid, lognormal(scale=0.85), n, sd, False)]
    return out


def no_change_cells(ns: Iterable[int] = (800, 2000)) -> list[tuple[str, Generator, Generator, int, float, bool]]:
    """A clean null (one steady process: i.i.d. bulk, no drift, no hiccups) at the kit's sizes."""
    return [("no change (clean null)", lognormal(), lognormal(), n, 0.0, False) for n in ns]


def specs(reps: int, *, report_reps: int | None = None, seed: int = 0, ns: Iterable[int] = (800, 2000),
          sds: Iterable[float] = (0.0, 0.005, 0.01, 0.02)) -> list[tuple[str, dict]]:
    """The full drift grid as (function name, keyword arguments) rows, each one process's work: every no-effect
    cell (both directions), the power table, "no change" under a clean null, no-effect reports of 2 and 4
    tenants (Holm), and the old design (one alone block) under sd 2 % drift."""
    ns, sds = tuple(ns), tuple(sds)
    out: list[tuple[str, dict]] = []
    for j, (kind, a, s, n, sd, ts) in enumerate(null_cells(ns, sds)):
        out.append(("verdict_row", dict(measures=kind, alone=a, shared=s, n=n, reps=reps, sd=sd, timestamps=ts,
                                        seed=seed + j)))
    for j, (kind, a, s, n, sd, ts) in enumerate(power_cells()):
        out.append(("verdict_row", dict(measures=kind, alone=a, shared=s, n=n, reps=reps, sd=sd, timestamps=ts,
                                        seed=seed + 500 + j)))
    for j, (kind, a, s, n, sd, ts) in enumerate(no_change_cells(ns)):
        out.append(("verdict_row", dict(measures=kind, alone=a, shared=s, n=n, reps=reps, sd=sd, hiccups=False,
                                        timestamps=ts, seed=seed + 600 + j)))
    for j, (tenants, sd) in enumerate((t, sd) for t in (2, 4) for sd in (0.0, 0.02)):
        out.append(("report_row", dict(tenants=tenants, n=800, reps=report_reps or reps, sd=sd, timestamps=True,
                                       seed=seed + 700 + j)))
    out.append(("verdict_row", dict(measures="false alarm (old design)", alone=lognormal(), shared=lognormal(), n=800,
                                    reps=reps, sd=0.02, design=OLD_DESIGN, seed=seed + 800)))
    for j, shape in enumerate(SHAPES):  # time structure (issue 43): each shape at sd 5 %, the bracketed design
        out.append(("verdict_row", dict(measures="false alarm", alone=lognormal(), shared=lognormal(), n=800,
                                        reps=reps, sd=0.05, shape=shape, seed=seed + 900 + j)))
    return out


def run_spec(spec: tuple[str, dict]) -> DriftRow:
    name, kw = spec
    kw = dict(kw)
    if name == "verdict_row":
        return verdict_row(kw.pop("measures"), kw.pop("alone"), kw.pop("shared"), kw.pop("n"), kw.pop("reps"), **kw)
    return report_row(kw.pop("tenants"), kw.pop("n"), kw.pop("reps"), **kw)


def grid(reps: int, **options: object) -> list[DriftRow]:
    return [run_spec(s) for s in specs(reps, **options)]  # type: ignore[arg-type]


def markdown(rows: Iterable[DriftRow]) -> str:
    lines = ["| measures | alone / shared | design | n | drift sd | drift shape | hiccups | timestamps | runs | degraded | "
             "small slowdown | faster | small speed-up | no change | inconclusive |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        f = [getattr(r, k) / r.reps for k in ("degraded", "small_slower", "faster", "small_faster", "no_change",
                                              "inconclusive")]
        lines.append(f"| {r.measures} | {r.alone} / {r.shared} | {r.design} | {r.n} | {100 * r.drift_sd:g} % | {r.shape} | "
                     f"{'yes' if r.hiccups else 'no'} | {'yes' if r.timestamps else 'no'} | {r.reps} | "
                     + " | ".join(f"{v:.3f}" for v in f) + " |")
    return "\n".join(lines)
