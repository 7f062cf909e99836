"""A neighbour keeps the GPU warm: a tenant's device time split by how long the GPU had been idle (issue 52).

Why: on the H100 and on the H200 the article's FFT reads faster when shared by device time -- 0.39 -> 0.25 ms in 8
of 8 blocks -- while its wall time is unchanged. Split by the time since any neighbour's last operation ended, one
shared block shows the mechanism: the FFT's device time is 0.23-0.24 ms where the GEMM ended less than 100 ms
before it, and 0.38 ms, its alone value, where the GEMM ended longer ago (h200-2026-12-04-article-warm: 795 and 402
launches); the SM clock read 1980 MHz throughout. A GPU idle for about 100 ms runs the next short operation slower
(its own clocks and caches settle back); a neighbour that ran recently keeps it warm, and alone the FFT's own 100 ms
sleep lets the GPU cool before each launch. So "faster when shared" by device time is no speed-up sharing gives;
the report names the mechanism where the run shows it (``mechanism``), and device time is "the GPU's time for the
operation in the state the GPU was in", not the operation's own time.

A launch with a neighbour's operation in flight at its start (``rules.mark_collided``) has an idle gap of 0.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from kts_helpers.analyse import orderstat
from kts_helpers.analyse.load import RunData

WARM_MS = 100.0  # a neighbour's operation ended at most this long before the launch: the GPU is warm
MIN_EACH = 20  # launches each side of the split needs


def idle_gaps(data: RunData) -> pd.DataFrame:
    """Every timed shared launch with its ``idle_ms``: the time since any neighbour's operation (timed or padding)
    last ended, 0 where one was in flight at its start."""
    it = data.iterations
    timed = it[(it["kind"] == "shared") & it["in_overlap"].astype(bool)] if "in_overlap" in it else \
        it[it["kind"] == "shared"]
    pads = data.padding
    out = []
    for scen, g in timed.groupby("scenario", sort=False):
        ops = pd.concat([g[["tenant", "start_ns", "end_ns"]],
                         pads[pads["scenario"] == scen][["tenant", "start_ns", "end_ns"]] if len(pads) else None])
        for tenant, mine in g.groupby("tenant", sort=False):
            other = ops[ops["tenant"] != tenant]
            if other.empty:
                continue
            ends = np.sort(other["end_ns"].to_numpy(np.int64))
            starts_o = other["start_ns"].to_numpy(np.int64)
            ends_o = other["end_ns"].to_numpy(np.int64)
            s = mine["start_ns"].to_numpy(np.int64)
            k = np.searchsorted(ends, s) - 1
            gap = np.where(k >= 0, (s - ends[np.clip(k, 0, None)]) / 1e6, np.inf)
            order = np.argsort(starts_o)
            st, en = starts_o[order], np.maximum.accumulate(ends_o[order])
            j = np.searchsorted(st, s, side="right") - 1
            in_flight = (j >= 0) & (en[np.clip(j, 0, None)] > s)
            out.append(mine.assign(idle_ms=np.where(in_flight, 0.0, gap)))
    return pd.concat(out, ignore_index=True) if out else timed.assign(idle_ms=np.nan).iloc[:0]


@dataclass(frozen=True)
class WarmSplit:
    """One tenant's device time with the GPU warm (a neighbour ran within ``WARM_MS``) and idle, against alone."""

    sharing: str
    tenant: str
    phase: str
    n_warm: int
    n_idle: int
    warm_ms: float  # median device time, GPU warm
    warm_lo: float
    warm_hi: float
    idle_ms: float  # median device time, the GPU idle at least WARM_MS
    idle_lo: float
    idle_hi: float
    alone_ms: float  # median device time alone

    @property
    def shows_warm_gpu(self) -> bool:
        """The mechanism: warm launches faster than idle ones (intervals apart), idle ones about the alone value."""
        return self.warm_hi < self.idle_lo and abs(math.log(self.idle_ms / self.alone_ms)) < math.log(1.1)

    @property
    def words(self) -> str:
        return (f"{self.tenant}'s device time {self.warm_ms:.3f} ms [{self.warm_lo:.3f}, {self.warm_hi:.3f}] in the "
                f"{self.n_warm} shared launches a neighbour's operation had ended less than {WARM_MS:g} ms before (or "
                f"was in flight), {self.idle_ms:.3f} ms [{self.idle_lo:.3f}, {self.idle_hi:.3f}] in the {self.n_idle} "
                f"after a longer idle GPU, {self.alone_ms:.3f} ms alone")


def split(data: RunData, phase_rows: pd.DataFrame | None = None) -> list[WarmSplit]:
    """Each shared tenant and phase whose launches fall on both sides of ``WARM_MS`` (GPU runs only)."""
    if not data.on_gpu:
        return []
    gaps = idle_gaps(data) if phase_rows is None else phase_rows
    it = data.iterations
    out = []
    for (sharing, tenant, phase), g in gaps.groupby(["sharing", "tenant", "phase"], sort=False):
        warm = g[g["idle_ms"] < WARM_MS]["device_ms"].to_numpy(np.float64)
        idle = g[g["idle_ms"] >= WARM_MS]["device_ms"].to_numpy(np.float64)
        alone = it[(it["kind"] == "baseline") & (it["tenant"] == tenant) & (it["phase"] == phase)
                   & (it["sharing"] == sharing)]["device_ms"].to_numpy(np.float64)
        if len(warm) < MIN_EACH or len(idle) < MIN_EACH or len(alone) < MIN_EACH:
            continue
        bw, bi = orderstat.quantile_bounds(warm, 0.5), orderstat.quantile_bounds(idle, 0.5)
        out.append(WarmSplit(str(sharing), str(tenant), str(phase), len(warm), len(idle), float(np.median(warm)),
                             bw.lo, bw.hi, float(np.median(idle)), bi.lo, bi.hi, float(np.median(alone))))
    return out


def table(splits: list[WarmSplit]) -> pd.DataFrame:
    return pd.DataFrame([{"sharing": s.sharing, "tenant": s.tenant, "phase": s.phase,
                          f"device p50, neighbour < {WARM_MS:g} ms ago (ms)": f"{s.warm_ms:.3f} [{s.warm_lo:.3f}, "
                                                                              f"{s.warm_hi:.3f}] (n = {s.n_warm})",
                          f"device p50, GPU idle >= {WARM_MS:g} ms (ms)": f"{s.idle_ms:.3f} [{s.idle_lo:.3f}, "
                                                                         f"{s.idle_hi:.3f}] (n = {s.n_idle})",
                          "device p50 alone (ms)": f"{s.alone_ms:.3f}",
                          "a warm GPU": "yes" if s.shows_warm_gpu else "no"} for s in splits])


def mechanism(splits: list[WarmSplit], tenant: str, phase: str, sharing: str) -> str:
    """The words a device-time speed-up carries where the run shows the warm-GPU mechanism, else ""."""
    for s in splits:
        if (s.tenant, s.phase, s.sharing) == (tenant, phase, sharing) and s.shows_warm_gpu:
            return (f"a warm GPU, not a faster operation: {s.words} -- a neighbour that ran recently keeps the GPU "
                    "out of the slower state it falls into after about 100 ms idle")
    return ""
