"""The warm design's own checks: what its blocks cost, whether a resident idle neighbour changes "alone", how an
MPS client alone differs from a plain process alone, and alone against alone (a real null on the run's own data).

Why here and not in the verdict: these are the conditions the verdicts rest on. The warm design measures "alone"
with the neighbours' processes resident and idle (their contexts and memory held, no work); that is "alone" only
if an idle neighbour costs nothing, which was measured once on the H200 and which every warm run checks again on
its own data (``control-<t>-absent``: the first tenant alone with its neighbours gone, right after its last alone
block with them idle). Under MPS the mode's alone blocks are MPS clients with the server up; the run says how far
that moves a tenant from a plain process alone (its time-slicing alone blocks), where it has both.

The rule for a flag: the two blocks of the control differ by more than 5 % in median (or p99) *and* by more than
any two consecutive alone blocks of the same tenant differ (the drift between moments that the run itself shows,
which the control's two moments are subject to as well).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from kts_helpers.analyse import blocks, verdict
from kts_helpers.analyse.load import RunData
from kts_helpers.analyse.rules import runs_of
from kts_helpers.run.logformat import PAD_PHASE

MARGIN = 0.05  # a control difference below 5 % is not flagged, whatever the blocks say
TAIL_MIN_N = 368  # as rules.MIN_CORUNNING: the fewest samples whose p99 has a 95 % upper bound


@dataclass(frozen=True)
class Control:
    """One tenant's idle-neighbour control, one phase and clock: absent against idle."""

    tenant: str
    phase: str
    clock: str
    n_idle: int
    n_absent: int
    p50_idle: float
    p50_absent: float
    p99_idle: float
    p99_absent: float
    drift: float  # the largest change of the block median between consecutive alone blocks (log scale)

    @property
    def p50_ratio(self) -> float:
        return self.p50_absent / self.p50_idle if self.p50_idle > 0 else math.nan

    @property
    def p99_ratio(self) -> float:
        return self.p99_absent / self.p99_idle if self.p99_idle > 0 else math.nan

    p50_ratio_lo: float = math.nan  # the median ratio's 95 % interval (order statistics, autocorrelation included)
    p50_ratio_hi: float = math.nan

    @property
    def flagged(self) -> bool:
        """Beyond 5 % and beyond the run's own drift, and (the median) outside its interval's reach of 1; the p99
        only where both blocks hold 368 iterations or more (below that a p99 has no upper bound: one slow
        iteration is all it is)."""
        beyond = [abs(math.log(self.p50_ratio))] if self.p50_ratio > 0 and not (
            self.p50_ratio_lo <= 1 <= self.p50_ratio_hi) else []
        if min(self.n_idle, self.n_absent) >= TAIL_MIN_N and self.p99_ratio > 0:
            beyond.append(abs(math.log(self.p99_ratio)))
        return any(c > math.log1p(MARGIN) and c > self.drift for c in beyond)

    @property
    def bounded(self) -> bool:
        """Whether the median ratio's interval is bounded both ways: an autocorrelated series of a few dozen samples
        gives its median no order-statistic bound, and then the control cannot show a change of the median."""
        return self.p50_ratio_lo > 0 and math.isfinite(self.p50_ratio_hi)

    @property
    def words(self) -> str:
        if self.flagged:
            what = ("**differs**: a resident idle neighbour changed this tenant's alone time beyond the run's own "
                    "drift; read its alone blocks with care")
        elif self.bounded:
            what = "no difference beyond 5 % and the run's drift"
        else:  # the point ratio is all there is: say so rather than claim what no interval holds
            what = ("not shown either way: the median ratio's interval is unbounded at this size (autocorrelated "
                    "samples), and the p99 is not read below "
                    f"{TAIL_MIN_N} a side" if min(self.n_idle, self.n_absent) < TAIL_MIN_N else
                    "no difference beyond 5 % at the p99; the median ratio's interval is unbounded at this size")
        return (f"{self.tenant} ({self.phase}, {self.clock}): neighbours idle p50 {self.p50_idle:.3f} / p99 "
                f"{self.p99_idle:.3f} ms (n = {self.n_idle}), absent {self.p50_absent:.3f} / {self.p99_absent:.3f} ms "
                f"(n = {self.n_absent}): {self.p50_ratio:.3f}x / {self.p99_ratio:.3f}x; consecutive alone blocks "
                f"moved up to {math.expm1(self.drift):.1%}: {what}")


def _timed(data: RunData) -> pd.DataFrame:
    it = data.iterations
    it = it[it["phase"] != PAD_PHASE]
    return it[it["in_overlap"].astype(bool)] if "in_overlap" in it else it


def _block_medians(rows: pd.DataFrame, col: str) -> list[float]:
    return [float(np.median(g[col])) for _, g in sorted(rows.groupby("repeat"), key=lambda kv: kv[0]) if len(g)]


def _median_ratio_bounds(idle: np.ndarray, absent: np.ndarray) -> tuple[float, float]:
    """The 95 % interval of median(absent) / median(idle): each log median's variance from its order-statistic
    interval (``verdict._log_median_var``), added."""
    from scipy.stats import norm  # scipy: ~0.6 s to import, needed here only

    var = verdict._log_median_var(idle) + verdict._log_median_var(absent)
    if not math.isfinite(var):
        return 0.0, math.inf
    mid = math.log(float(np.median(absent)) / float(np.median(idle)))
    half = norm.isf(0.025) * math.sqrt(var)
    return math.exp(mid - half), math.exp(mid + half)


def controls(data: RunData) -> list[Control]:
    """Every idle-neighbour control of the run (``control*-<t>-absent`` against the tenant's last alone block)."""
    it = _timed(data)
    out: list[Control] = []
    for scen in data.manifest.scenarios:
        if scen.kind != "control":
            continue
        tenant = scen.tenant_names[0]
        absent = it[it["scenario"] == scen.name]
        alone = it[(it["kind"] == "baseline") & (it["tenant"] == tenant) & (it["sharing"] == scen.sharing)]
        if absent.empty or alone.empty:
            continue
        idle = alone[alone["repeat"] == alone["repeat"].max()]
        for phase in dict.fromkeys(absent["phase"].astype(str)):
            for clock, col in (("wall", "wall_ms"), ("device", "device_ms")):
                a, i = absent[absent["phase"] == phase][col], idle[idle["phase"] == phase][col]
                meds = _block_medians(alone[alone["phase"] == phase], col)
                steps = [abs(math.log(b / a_)) for a_, b in zip(meds, meds[1:], strict=False) if a_ > 0 and b > 0]
                if len(a) < 2 or len(i) < 2:
                    continue
                lo, hi = _median_ratio_bounds(i.to_numpy(np.float64), a.to_numpy(np.float64))
                out.append(Control(tenant, phase, clock, len(i), len(a), float(np.median(i)), float(np.median(a)),
                                   float(np.quantile(i, 0.99)), float(np.quantile(a, 0.99)),
                                   max(steps) if steps else 0.0, lo, hi))
    return out


def mps_alone_table(data: RunData) -> pd.DataFrame:
    """Per tenant and phase: its alone blocks as an MPS client against its plain alone blocks (block medians)."""
    it = _timed(data)
    alone = it[it["kind"] == "baseline"]
    if not {"timeslice", "mps"} <= set(alone["sharing"].astype(str)):
        return pd.DataFrame()
    rows = []
    for (tenant, phase), g in alone.groupby(["tenant", "phase"], sort=False):
        plain = _block_medians(g[g["sharing"] == "timeslice"], "wall_ms")
        client = _block_medians(g[g["sharing"] == "mps"], "wall_ms")
        if not plain or not client:
            continue
        ratio = float(np.median(client) / np.median(plain))
        rows.append({"tenant": tenant, "phase": phase, "plain_blocks": len(plain), "mps_client_blocks": len(client),
                     "plain_p50_ms": float(np.median(plain)), "mps_client_p50_ms": float(np.median(client)),
                     "ratio": ratio, "plain_block_range": f"{min(plain):.3f}-{max(plain):.3f}",
                     "mps_client_block_range": f"{min(client):.3f}-{max(client):.3f}"})
    return pd.DataFrame(rows)


def cost_table(data: RunData) -> pd.DataFrame:
    """What the design cost: per sharing mode and kind of block, the blocks, their wall time and timed iterations,
    and the run's time outside blocks (processes starting, models building, profiling)."""
    recs = data.manifest.records
    it = _timed(data)
    rows = []
    for scen in data.manifest.scenarios:
        rec = recs.get(scen.name)
        if rec is None or rec.status == "skipped" or scen.kind not in ("baseline", "shared", "control"):
            continue  # a block blocks=auto did not need never ran
        mine = it[it["scenario"] == scen.name]
        rows.append({"sharing": scen.sharing, "kind": scen.kind, "scenario": scen.name,
                     "seconds": (rec.ended_ns - rec.started_ns) / 1e9 if rec.ended_ns and rec.started_ns else math.nan,
                     "timed": int(len(mine)), "started_ns": rec.started_ns, "ended_ns": rec.ended_ns})
    frame = pd.DataFrame(rows)
    if frame.empty:
        return frame
    out = frame.groupby(["sharing", "kind"], sort=False).agg(blocks=("scenario", "size"), seconds=("seconds", "sum"),
                                                             timed_lines=("timed", "sum")).reset_index()
    span = (frame["ended_ns"].max() - frame["started_ns"].min()) / 1e9
    out.attrs["span_s"] = float(span)
    out.attrs["outside_s"] = float(span - frame["seconds"].sum())
    return out


def host_balance(data: RunData) -> pd.DataFrame:
    """The host covariate's balance check, per sharing mode, tenant and phase (``blocks.balance``, the verdict's own):
    the host probe's block medians alone and shared, their ratio with its 95 % interval (trend removed), whether
    sharing moved it, and so whether the verdicts adjusted for it; the most the adjustment could move the wall
    clock's median were the imbalance sharing's (``bias_bound``); where it moved, what the host's change accounts
    for on the wall clock's median (the alone blocks' slope). Empty where no tenant probed or the blocks do not
    alternate; on a CPU run every row says the host is the contended device."""
    it = _timed(data)
    cols = ["sharing", "tenant", "phase", "probe_alone_ms", "probe_shared_ms", "ratio", "ratio_lo", "ratio_hi", "p",
            "adjusted", "wall_slope", "bias_bound", "host_cost", "why"]
    if "host_probe_ms" not in it or not it["host_probe_ms"].notna().any():
        return pd.DataFrame(columns=cols)
    rows = []
    for (sharing, tenant, phase), g in it.groupby(["sharing", "tenant", "phase"], sort=False):
        sh, al = g[g["kind"] == "shared"], g[g["kind"] == "baseline"]
        if sh.empty or al.empty or not g["host_probe_ms"].notna().any():
            continue
        host = blocks.host_levels(runs_of(sh, "host_probe_ms"), runs_of(al, "host_probe_ms"))
        times = ([float(r.min()) for r in runs_of(sh, "start_ns")], [float(r.min()) for r in runs_of(al, "start_ns")])
        bal = blocks.balance(host, times, runs_of(al, "wall_ms")) if host is not None else None
        if bal is None:
            continue
        why = ("the host is the contended device (a CPU run)" if not data.on_gpu else
               "sharing moved it: not adjusted for" if bal.moved else "balanced: the verdicts adjust for it")
        rows.append({"sharing": sharing, "tenant": tenant, "phase": phase,
                     "probe_alone_ms": float(al["host_probe_ms"].median()),
                     "probe_shared_ms": float(sh["host_probe_ms"].median()), "ratio": bal.ratio, "ratio_lo": bal.lo,
                     "ratio_hi": bal.hi, "p": bal.p, "adjusted": data.on_gpu and not bal.moved,
                     "wall_slope": bal.slope, "bias_bound": bal.bias_bound,
                     "host_cost": bal.host_cost if bal.moved else float("nan"), "why": why})
    return pd.DataFrame(rows, columns=cols)


def alone_against_alone(data: RunData, clocks: tuple[str, ...] = ("wall", "device")) -> pd.DataFrame:
    """Each tenant's alone blocks of each mode split by the alternation: blocks 1, 3, 5, ... read as "alone" and
    blocks 2, 4, ... as "shared", through the report's own verdict (``verdict.decide`` with the blocks' instants and
    host probes, then the run's family of such readings, ``verdict.family``). Sharing cannot have caused any
    difference between them, so no reading may say sharing made a tenant slower or faster (``loud``, the small
    words too): a real null, the run's drift and tails as they were. Rows: sharing,
    tenant, phase, clock, the blocks' medians, the reading and its words (``loud``: a false alarm)."""
    it = _timed(data)
    alone = it[it["kind"] == "baseline"]
    rows, verdicts, questions = [], [], []
    for (sharing, tenant, phase), g in alone.groupby(["sharing", "tenant", "phase"], sort=False):
        for clock in clocks:
            runs = runs_of(g, f"{clock}_ms")
            if len(runs) < 4:  # two blocks a side at least: the alternation needs them
                continue
            odd, even = runs[0::2], runs[1::2]
            starts = [float(r.min()) for r in runs_of(g, "start_ns")]
            probes = runs_of(g, "host_probe_ms") if "host_probe_ms" in g else None
            v = verdict.decide(even, odd, times=(starts[1::2], starts[0::2]), on_host=not data.on_gpu,
                               host=(probes[1::2], probes[0::2]) if probes is not None else None)
            verdicts.append(v)
            questions.append(((sharing, tenant, phase), clock))
            rows.append({"sharing": sharing, "tenant": tenant, "phase": phase, "clock": clock,
                         "blocks": f"{len(odd)} vs {len(even)}",
                         "medians_ms": " ".join(f"{np.median(r):.3f}" for r in runs)})
    for row, v in zip(rows, verdict.family(verdicts, questions), strict=True):
        row.update(reading=v.reading, loud=v.reading in verdict.slower_readings() + verdict.faster_readings(),
                   words=v.words)
    return pd.DataFrame(rows)


def is_warm(data: RunData) -> bool:
    return data.manifest.spec.resolved.get("design_kind") == "warm"
