"""The summary table and the run-level views built on it: per tenant and scenario group, n, percentiles,
jitter, throughput and DF; co-running counts; achieved TFLOP/s and GB/s; which rows the main figures use.

Column names keep three things apart: ``kind`` (baseline or shared), ``group`` (a scenario and its
repeats: ``shared`` for ``shared-r1``...) and, in the iterations, ``scenario`` (one scenario as run).
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from kts_helpers.analyse import verdict
from kts_helpers.analyse.estimate import Estimate
from kts_helpers.analyse.load import RunData
from kts_helpers.analyse.rules import (
    METRICS,
    PERCENTILES,
    degradation,
    df_reading,
    match_baseline,
    scenario_groups,
    series_groups,
)
from kts_helpers.fsutil import atomic_write_text

# The verdict of a shared row (``analyse.verdict``): the reading, its reason, and the tail-exceedance estimand.
VERDICT_COLUMNS = ("reading", "reading_detail", "iterations_needed", "blocks_needed", "slow_threshold_ms", "slow_threshold_source",
                   "slow_shared", "slow_shared_lo", "slow_shared_hi", "slow_alone", "slow_alone_lo", "slow_alone_hi",
                   "slow_ratio", "slow_ratio_lo", "slow_ratio_hi", "collided_n", "collided_slow", "collided_p",
                   "contrast_n", "contrast_clear_n", "contrast_slow", "contrast_p", "contrast_ms", "contrast_ms_lo",
                   "contrast_ms_hi", "drift_sd", "drift_blocks", "p_slower", "p_faster", "family")
# The shared rows' ``verdict.Verdict`` itself, kept in the table for present/'s words (``present.verdictline``: the
# number that decided it); an object, not a value, so ``public_table`` leaves it out of every file.
VERDICT_OBJECT = "verdict"


def verdict_columns(v: verdict.Verdict) -> dict[str, object]:
    """A verdict as the summary table keeps it (intervals as ``<stat>_lo``/``<stat>_hi``, ``estimate.Estimate``)."""
    out: dict[str, object] = {"reading": v.reading, "reading_detail": v.words,
                              "iterations_needed": v.iterations_needed, "blocks_needed": v.blocks_needed}
    ex = v.exceedance
    if ex is not None:
        out.update(slow_threshold_ms=ex.threshold_ms, slow_threshold_source=ex.source,
                   slow_shared=ex.shared.estimate, **Estimate(ex.shared.estimate, ex.shared.lo, ex.shared.hi)
                   .columns("slow_shared"),
                   slow_alone=ex.alone.estimate, **Estimate(ex.alone.estimate, ex.alone.lo, ex.alone.hi)
                   .columns("slow_alone"),
                   slow_ratio=ex.ratio, **Estimate(ex.ratio, ex.lo, ex.hi).columns("slow_ratio"))
    cx = v.collided
    if cx is not None:  # the launches that found a neighbour in flight: how many, how many beyond, the p-value
        out.update(collided_n=cx.shared.n, collided_slow=cx.decisive.shared_count, collided_p=cx.p_more)
    ct = v.contrast
    if ct is not None:  # the same-moment control: collided launches against the same blocks' clear ones
        out.update(contrast_n=ct.n_collided, contrast_clear_n=ct.n_clear, contrast_slow=ct.beyond, contrast_p=ct.p,
                   contrast_ms=ct.median_ms, **Estimate(ct.median_ms, ct.lo_ms, ct.hi_ms).columns("contrast_ms"))
    if v.drift is not None:
        out.update(drift_sd=v.drift.sd, drift_blocks=v.drift.alone_blocks)
    out.update(p_slower=v.p_slower_adjusted, p_faster=v.p_faster_adjusted, family=v.family)
    return out



def series_stats(x: np.ndarray) -> dict[str, float]:
    """n, p50/p95/p99 (numpy's linear interpolation), mean, jitter p99/p50, throughput 1000/mean."""
    if len(x) == 0:
        nan = float("nan")
        return {"n": 0, "p50_ms": nan, "p95_ms": nan, "p99_ms": nan, "mean_ms": nan, "jitter": nan,
                "throughput_per_s": nan}
    p50, p95, p99 = (float(v) for v in np.quantile(x, PERCENTILES))
    mean = float(np.mean(x))
    return {"n": int(len(x)), "p50_ms": p50, "p95_ms": p95, "p99_ms": p99, "mean_ms": mean,
            "jitter": p99 / p50 if p50 > 0 else float("nan"),
            "throughput_per_s": 1000.0 / mean if mean > 0 else float("nan")}


def baseline_row(table: pd.DataFrame, row: pd.Series) -> pd.Series | None:
    """The alone row (same metric) a shared summary row is compared with (``rules.match_baseline``)."""
    base = table[(table["kind"] == "baseline") & (table["metric"] == row["metric"])]
    match = match_baseline(base, row["tenant"], row["workload"], row["phase"], row.get("sharing"))
    return None if match.empty else match.iloc[0]


def shared_pairs(table: pd.DataFrame, metric: str) -> list[tuple[pd.Series, pd.Series]]:
    """(alone row, shared row) per shared tenant and scenario group of one clock, matched by ``baseline_row``."""
    t = table[table["metric"] == metric]
    out = []
    for _, s in t[t["kind"] == "shared"].iterrows():
        a = baseline_row(table, s)
        if a is not None:
            out.append((a, s))
    return out


def summarize_frame(frame: pd.DataFrame, metric: str = "wall") -> pd.DataFrame:
    """Per kind x group x tenant (x phase): n, p50/p95/p99, mean, jitter, throughput, and DF on shared rows.

    Repeats of a scenario are pooled; only co-running iterations count. ``reading`` says "insufficient
    co-running data" below ``rules.MIN_CORUNNING`` shared samples; the interval's reading replaces it once
    ``intervals.add_intervals`` has run.
    """
    rows, samples = [], []
    for key, runs in series_groups(frame, metric):
        rows.append({**key, "metric": metric, **series_stats(np.concatenate(runs)), "repeats": len(runs)})
        samples.append(runs)
    table = pd.DataFrame(rows)
    if table.empty:
        return table
    table["df"] = np.nan
    table["reading"] = None
    for i, row in table[table["kind"] == "shared"].iterrows():
        base = baseline_row(table, row)
        alone = samples[table.index.get_loc(base.name)] if base is not None else []
        d = degradation(samples[table.index.get_loc(i)], alone, 0.99, interval=False)
        table.loc[i, "df"] = d.estimate
        table.loc[i, "reading"] = d.reading
    return table


def summarize_run(data: RunData, metrics: tuple[str, ...] = METRICS) -> pd.DataFrame:
    return pd.concat([summarize_frame(data.iterations, m) for m in metrics], ignore_index=True)


def public_table(table: pd.DataFrame) -> pd.DataFrame:
    """The summary table as ``kts summarize --format json`` and summary.csv/json give it, a public interface:
    each interval (``<stat>_lo``/``<stat>_hi`` inside the kit) becomes one ``<stat>_ci`` list where its
    ``_lo`` stood (``Estimate.pair``: None for a missing bound, None for none at all), and ``df_reading``, the
    verdicts issue's alias of ``reading``, comes just before it. The one place the two forms meet."""
    cols: dict[str, object] = {}
    for c in table.columns:
        if c == VERDICT_OBJECT:
            continue
        stat = c[:-3]
        if c.endswith("_hi") and f"{stat}_lo" in table:
            continue
        if c.endswith("_lo") and f"{stat}_hi" in table:
            cols[f"{stat}_ci"] = [Estimate(math.nan, math.nan if lo is None else float(lo),
                                           math.nan if hi is None else float(hi)).pair()
                                  for lo, hi in zip(table[c], table[f"{stat}_hi"], strict=True)]
            continue
        if c == "reading":
            cols["df_reading"] = table[c]
        cols[c] = table[c]
    return pd.DataFrame(cols, index=table.index)


def summary_records(table: pd.DataFrame) -> list[dict[str, Any]]:
    """JSON-ready rows (``public_table``); ``df``, the verdict (``reading``, its alias ``df_reading``, and the
    slow-iteration estimand) only on shared rows; NaN becomes null."""
    shared_only = ("df", *public_table(pd.DataFrame(columns=VERDICT_COLUMNS)).columns)
    out = []
    for rec in public_table(table).to_dict(orient="records"):
        clean = {k: (None if isinstance(v, float) and np.isnan(v) else v) for k, v in rec.items()}
        if clean.get("kind") != "shared":
            for col in shared_only:
                clean.pop(col, None)
        out.append(clean)
    return out


def write_summary(table: pd.DataFrame, out_dir: str | os.PathLike) -> tuple[Path, Path]:
    """summary.csv and summary.json, written atomically (into a report's build directory, not the run)."""
    out = Path(out_dir)
    csv = atomic_write_text(out / "summary.csv", public_table(table).to_csv(index=False))
    js = atomic_write_text(out / "summary.json", json.dumps(summary_records(table), indent=2) + "\n")
    return csv, js


def overlap_counts(data_or_frame: RunData | pd.DataFrame) -> pd.DataFrame:
    """Per shared tenant: timed iterations, how many co-ran with every neighbour, and padding lines.

    Every timed iteration of a shared scenario should co-run (the workers pad until all are done);
    ``outside`` > 0 means a tenant started late or stopped early, and those iterations are left out.
    """
    frame = data_or_frame.iterations if isinstance(data_or_frame, RunData) else data_or_frame
    pads = data_or_frame.padding if isinstance(data_or_frame, RunData) else pd.DataFrame()
    cols = ["scenario", "tenant", "timed", "co_running", "outside", "padding"]
    shared = frame[frame["kind"] == "shared"]
    if shared.empty:
        return pd.DataFrame(columns=cols)
    g = shared.groupby(["scenario", "tenant"])["in_overlap"].agg(timed="size", co_running="sum").reset_index()
    g["outside"] = g["timed"] - g["co_running"]
    n_pad = pads.groupby(["scenario", "tenant"]).size() if len(pads) else pd.Series(dtype=int)
    g["padding"] = [int(n_pad.get((s, t), 0)) for s, t in zip(g["scenario"], g["tenant"], strict=True)]
    return g[cols]


# Each workload's figure of merit: the GEMM and the LLM are compute-bound (TFLOP/s), the FFT memory-bound
# (GB/s). The other quantity says nothing about how well they ran, so it is left empty ("—" in the report).
FIGURE_OF_MERIT = {"gemm": "tflops", "llm": "tflops", "fft": "gb_per_s"}


def efficiency(data: RunData) -> pd.DataFrame:
    """Achieved TFLOP/s and GB/s per tenant and scenario, from the work per op each worker reported.

    NaN where a quantity does not apply: the one that is not the workload's figure of merit, or one the worker
    has no model for (a workload without a bandwidth model has no GB/s).
    """
    if data.meta.empty:
        return pd.DataFrame()
    work = data.meta.drop_duplicates(["scenario", "tenant"]).set_index(["scenario", "tenant"])
    rows = []
    for (scen, tenant), grp in data.iterations.groupby(["scenario", "tenant"]):
        if (scen, tenant) not in work.index:
            continue
        w = work.loc[(scen, tenant)]
        per_op = grp.groupby("iteration")["device_ms"].sum().median() / 1e3  # seconds per op, device clock
        flops, nbytes = w.get("flops_per_op") or np.nan, w.get("bytes_per_op") or np.nan
        workload = grp["workload"].iloc[0]
        merit = FIGURE_OF_MERIT.get(workload)
        row = {"scenario": scen, "tenant": tenant, "workload": workload, "device_ms_per_op_p50": per_op * 1e3,
               "tflops": flops / per_op / 1e12 if per_op > 0 else np.nan,
               "gb_per_s": nbytes / per_op / 1e9 if per_op > 0 else np.nan}
        for key in ("tflops", "gb_per_s"):
            if merit is not None and key != merit:
                row[key] = np.nan
        rows.append(row)
    return pd.DataFrame(rows)


def primary_shared(groups: list[str]) -> str | None:
    """The shared group the article's figures use: "shared", else "shared-all", else the first one."""
    for want in ("shared", "shared-all"):
        if want in groups:
            return want
    return groups[0] if groups else None


def focus(table: pd.DataFrame, frame: pd.DataFrame | None = None) -> tuple[pd.DataFrame, pd.DataFrame | None]:
    """Alone rows plus the primary shared group, one phase per tenant (LLM: decode), for the main figures.

    Runs with several shared scenarios (modes, matrix) get their own comparison sections; pooling them
    in the alone-vs-shared figures would mix different neighbours.
    """
    main = primary_shared(list(dict.fromkeys(table.loc[table["kind"] == "shared", "group"])))
    keep_t = ((table["kind"] == "baseline") | (table["group"] == main)) & ~table["phase"].isin(["prefill"])
    out_f = None
    if frame is not None:
        keep_f = (frame["kind"] == "baseline") | (scenario_groups(frame["scenario"]) == main)
        out_f = frame[keep_f & ~frame["phase"].isin(["prefill"])]
    return table[keep_t], out_f


def most_affected(table: pd.DataFrame, metric: str = "wall") -> tuple[str, str] | None:
    """(tenant, group) of the shared row with the largest DF: the tenant the report follows over time."""
    shared = table[(table["kind"] == "shared") & (table["metric"] == metric) & table["df"].notna()]
    if shared.empty:
        return None
    row = shared.loc[shared["df"].idxmax()]
    return str(row["tenant"]), str(row["group"])


def family_readings(table: pd.DataFrame) -> dict[tuple[str, str, str, str], str]:
    """{(group, tenant, phase, clock): reading} of every shared row with a verdict: the report's family (Holm over
    tenants x scenarios x clocks, ``intervals.add_all_intervals``), which the comparison tables quote rather than
    read again (``compare``), so one series has one word in one report."""
    shared = table[(table["kind"] == "shared") & table["reading"].notna() & (table["reading"] != "")]
    return {(str(r.group), str(r.tenant), str(r.phase), str(r.metric)): str(r.reading) for r in shared.itertuples()}


def readings(table: pd.DataFrame, metric: str = "wall") -> dict[tuple[str, str], str]:
    """{(tenant, group): reading} of the shared rows: what the summary, the index and the CLI say."""
    shared = table[(table["kind"] == "shared") & (table["metric"] == metric)]
    return {(r.tenant, r.group): (r.reading or df_reading(int(r.n), None)) for r in shared.itertuples()}
