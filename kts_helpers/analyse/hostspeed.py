"""Host speed between moments: how fast the launching host was in each block, and the contrast at equal speed.

Why: a launch-bound tenant (an LLM's decode step, BERT or ViT at serving sizes: hundreds of kernels an operation,
the GPU busy a tenth of the time) is as fast as the host thread that launches it. On the H200 machine the same
interpreter loop took 6 to 15 ms from one second to the next while a device-side chain of kernels stayed at
0.80 ms, and a decode step moved with it (13.7 ms in the host's fast iterations, 20.7 ms in its slow ones, one
alone block). Alone and shared blocks are different moments, so a shared block that happened to meet the host in
its fast state more often reads "faster when shared" for a reason that has nothing to do with sharing.

The worker times a fixed piece of interpreter work after every iteration, on the tenant's own thread, out of the
sleep (``kts_worker.host_probe``; closed loops with a sleep only) and lists it in ``KTS_END``. This module puts
that value on each timed iteration (``host_probe_ms``, at load) and compares, per tenant and phase, the alone
blocks with each shared block:

* the probe's median in each (did the host run at another speed?), and how closely the probe and the wall clock
  move together in the alone blocks (Spearman's rho: does the host's speed matter to this tenant at all?);
* the raw median ratio, shared over alone, and the **host-adjusted** ratio: a line through the alone iterations'
  logs (wall against probe: the elasticity ``slope``, 1 when the step is all host) says what each shared
  iteration would have taken alone at its own host speed, and the ratio is the shared block's median excess over
  that line against the alone blocks' own (1: sharing cost nothing at equal host speed). A covariate adjustment,
  as in an observational study; coarse strata were tried first and failed on the H200's two-state host (a
  stratum holding both states compares different mixtures). Where most shared iterations met host speeds the
  alone blocks never saw, the line is extrapolated, and the sentence says so.

It is a diagnostic beside the verdict, never a replacement: where sharing itself slows the host (tenants that
compete for CPU cores), matching on host speed would remove part of what sharing costs, so the verdicts stay on
the raw iterations. On a CPU run the host *is* the contended device, and the table is not built.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from kts_helpers.run.logformat import PAD_PHASE

COLUMN = "host_probe_ms"
MIN_ITERATIONS = 30  # fewer alone or shared iterations with a probe: no row
OUTSIDE = 0.20  # this share of shared probes outside the alone blocks' central 95 %: the line is extrapolated
MOVED = 0.10  # a probe median or an adjusted ratio this far from the raw one is worth a sentence


def probe_column(frame: pd.DataFrame, ends: list[dict[str, Any]]) -> pd.Series:
    """The host probe of each line of one tenant's log: the ``KTS_END`` list's value at the line's timed
    iteration (every phase of an iteration shares it); NaN for padding and where the worker did not probe."""
    values = next((e.get(COLUMN) for e in ends if isinstance(e.get(COLUMN), list)), None)
    out = pd.Series(np.nan, index=frame.index, dtype="float64")
    if not values:
        return out
    probes = np.asarray(values, dtype="float64")
    timed = (frame["phase"] != PAD_PHASE).to_numpy()
    it = frame["iteration"].to_numpy()
    ok = timed & (it >= 0) & (it < len(probes))
    out.iloc[np.flatnonzero(ok)] = probes[it[ok]]
    return out


ISSUE_COLUMN = "host_issue_ms"


def issue_column(frame: pd.DataFrame, ends: list[dict[str, Any]]) -> pd.Series:
    """The host's issue time of each line of one tenant's log (``kts_harness.Clock``: from the operation's start
    until its code returned, before the wait for the device): the ``KTS_END`` list, one value per timed line in
    the log's order; NaN for padding, on a CPU, and wherever the list and the timed lines do not pair one to one
    (a rejected line would shift every later value onto the wrong operation)."""
    values = next((e.get(ISSUE_COLUMN) for e in ends if isinstance(e.get(ISSUE_COLUMN), list)), None)
    out = pd.Series(np.nan, index=frame.index, dtype="float64")
    timed = np.flatnonzero((frame["phase"] != PAD_PHASE).to_numpy())
    if values and len(values) == len(timed):
        out.iloc[timed] = np.asarray(values, dtype="float64")
    return out


def adjusted_ratio(alone: pd.DataFrame, shared: pd.DataFrame) -> tuple[float, float, float]:
    """(shared over alone at equal host speed, the alone line's slope, the share of shared probes outside the
    alone blocks' central 95 %). Logs: ``log wall = a + slope * log probe`` fitted on the alone iterations."""
    xa, ya = np.log(alone[COLUMN].to_numpy()), np.log(alone["wall_ms"].to_numpy())
    xs, ys = np.log(shared[COLUMN].to_numpy()), np.log(shared["wall_ms"].to_numpy())
    slope = float(np.polyfit(xa, ya, 1)[0]) if np.ptp(xa) > 0 else 0.0
    excess = float(np.median(ys - slope * xs) - np.median(ya - slope * xa))
    lo, hi = np.quantile(xa, [0.025, 0.975])
    return math.exp(excess), slope, float(np.mean((xs < lo) | (xs > hi)))


def _rho(x: pd.Series, y: pd.Series) -> float:
    if len(x) < 3 or x.nunique() < 2 or y.nunique() < 2:
        return float("nan")
    return float(x.rank().corr(y.rank()))


def host_speed_table(iterations: pd.DataFrame, on_gpu: bool) -> pd.DataFrame:
    """Per tenant, phase and shared block: the host probe alone and shared, and the raw and host-adjusted median
    ratios (see the module's docstring). Empty where the run has no probe, or runs on a CPU."""
    cols = ["tenant", "phase", "scenario", "n_alone", "n_shared", "probe_alone_ms", "probe_shared_ms",
            "probe_change", "rho_alone", "slope", "ratio_raw", "ratio_host_adjusted", "outside_alone", "message"]
    if not on_gpu or COLUMN not in iterations or iterations[COLUMN].notna().sum() == 0:
        return pd.DataFrame(columns=cols)
    f = iterations[iterations[COLUMN].notna() & (iterations[COLUMN] > 0) & (iterations["wall_ms"] > 0)]
    rows = []
    for (tenant, phase), g in f.groupby(["tenant", "phase"], sort=True):
        alone = g[g["kind"] == "baseline"]
        if len(alone) < MIN_ITERATIONS:
            continue
        for scen, s in g[g["kind"] == "shared"].groupby("scenario", sort=True):
            if len(s) < MIN_ITERATIONS:
                continue
            pa, ps = float(alone[COLUMN].median()), float(s[COLUMN].median())
            raw = float(s["wall_ms"].median()) / float(alone["wall_ms"].median())
            adjusted, slope, outside = adjusted_ratio(alone, s)
            rows.append({"tenant": tenant, "phase": phase, "scenario": scen, "n_alone": len(alone),
                         "n_shared": len(s), "probe_alone_ms": pa, "probe_shared_ms": ps, "probe_change": ps / pa - 1,
                         "rho_alone": _rho(alone[COLUMN], alone["wall_ms"]), "slope": slope, "ratio_raw": raw,
                         "ratio_host_adjusted": adjusted, "outside_alone": outside,
                         "message": sentence(tenant, phase, scen, ps / pa - 1, raw, adjusted, outside)})
    return pd.DataFrame(rows, columns=cols)


def sentence(tenant: str, phase: str, scenario: str, probe_change: float, raw: float, adjusted: float,
             outside: float) -> str:
    """One line: did the host move between the moments, and does the contrast change at equal host speed."""
    who = f"{tenant} ({phase}), {scenario}"
    host = (f"the host ran {abs(probe_change):.0%} {'slower' if probe_change > 0 else 'faster'} (probe median) "
            "than in the alone blocks" if abs(probe_change) >= MOVED else "the host ran at about its alone speed")
    tail = (f"; {outside:.0%} of the shared iterations met host speeds the alone blocks did not see, so the "
            "adjustment extrapolates" if outside >= OUTSIDE else "")
    if abs(math.log(adjusted / raw)) >= math.log1p(MOVED):
        return (f"{who}: {host}; at equal host speed the median ratio is {adjusted:.2f}x, not {raw:.2f}x: part of "
                f"the raw contrast is the host's, not sharing's{tail}")
    return f"{who}: {host}; at equal host speed the median ratio is {adjusted:.2f}x (raw {raw:.2f}x){tail}"
