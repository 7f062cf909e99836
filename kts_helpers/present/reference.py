"""The README's reference tables, from the committed runs' data by the report's own computation.

A test compares each table in README.md with what this produces from ``data/reference/<run>``, so the
numbers quoted in the README are the data's.
"""

from __future__ import annotations

import os

from kts_helpers.analyse.intervals import add_all_intervals
from kts_helpers.analyse.load import RunData, load_run
from kts_helpers.analyse.probe import is_probe, read_probe
from kts_helpers.analyse.summary import summarize_run
from kts_helpers.present.tables import fmt_ci


def reference_markdown(run_dir: str | os.PathLike, *, n_resamples: int = 2000, seed: int = 0) -> str:
    """One Markdown row per shared tenant, scenario and metric: p50, p99 with intervals, DF and its reading."""
    data = load_run(run_dir)
    if is_probe(data):
        return probe_markdown(data, n_resamples=n_resamples, seed=seed)
    table = add_all_intervals(summarize_run(data), data.iterations, n_resamples=n_resamples, seed=seed)
    lines = ["| tenant | metric | sharing | p50 alone → shared (ms) | p99 alone [95% CI] (ms) "
             "| p99 shared [95% CI] (ms) | DF [95% CI] | reading |", "|---|---|---|---|---|---|---|---|"]
    for metric in ("wall", "device"):
        t = table[table["metric"] == metric]
        for tenant in dict.fromkeys(t["tenant"]):
            alone = t[(t["tenant"] == tenant) & (t["kind"] == "baseline")]
            if alone.empty:
                continue
            a = alone.iloc[0]
            for _, r in t[(t["tenant"] == tenant) & (t["kind"] == "shared")].iterrows():
                lines.append(f"| {tenant} | {metric} | {r['sharing']} | {a['p50_ms']:.3f} → {r['p50_ms']:.3f} "
                             f"| {fmt_ci(a['p99_ms'], a['p99_ci'], n=int(a['n']))} "
                             f"| {fmt_ci(r['p99_ms'], r['p99_ci'], n=int(r['n']))} "
                             f"| {fmt_ci(r['df'], r['df_ci'])} | {r['df_reading']} |")
    return "\n".join(lines)


def probe_markdown(data: RunData, *, n_resamples: int = 2000, seed: int = 0) -> str:
    """The time-slice probe's readings as a Markdown table (the report's probe section, same numbers)."""
    r = read_probe(data, n_resamples=n_resamples, seed=seed)
    lines = ["| reading [95% CI] | value |", "|---|---|", *(f"| {name} | {est.text()} |" for name, est in r.rows()),
             f"| ticks that found the GPU busy | {r.n_contended} of {r.n_ticks} co-running |",
             f"| hog kernel alone (median) | {r.hog_kernel_ms:.2f} ms |", f"| cross-check | {r.agreement} |"]
    return "\n".join(lines)
