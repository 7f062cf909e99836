"""The README's reference tables, from the committed runs' data by the report's own computation.

A test compares each table in README.md with what this produces from ``data/reference/<run>``, so the
numbers quoted in the README are the data's.
"""

from __future__ import annotations

import os

import pandas as pd

from kts_helpers.analyse.estimate import Estimate
from kts_helpers.analyse.load import RunData, load_run
from kts_helpers.analyse.probe import is_probe, read_probe
from kts_helpers.analyse.rules import series_label
from kts_helpers.analyse.summary import shared_pairs
from kts_helpers.analyse.verdicts import verdict_table
from kts_helpers.present.tables import fmt_ci, fmt_slow


def reference_markdown(run_dir: str | os.PathLike, *, n_resamples: int = 2000, seed: int = 0) -> str:
    """One Markdown row per shared tenant, scenario and metric (p50, p99 with intervals, DF, the slow-iteration
    estimand and the verdict), then one generated sentence per tenant: the README's words about a result."""
    data = load_run(run_dir)
    if is_probe(data):
        return probe_markdown(data, n_resamples=n_resamples, seed=seed)
    table = verdict_table(data, n_resamples=n_resamples, seed=seed)
    lines = ["| tenant | metric | sharing | p50 alone → shared (ms) | p99 alone [95% CI] (ms) "
             "| p99 shared [95% CI] (ms) | DF [95% CI] | slow iterations [95% CI] | verdict |",
             "|---|---|---|---|---|---|---|---|---|"]
    for metric in ("wall", "device"):
        for a, r in shared_pairs(table, metric):
            lines.append(f"| {_label(r)} | {metric} | {r['sharing']} "
                         f"| {a['p50_ms']:.3f} → {r['p50_ms']:.3f} "
                         f"| {fmt_ci(Estimate.from_row(a, 'p99', 'p99_ms'), n=int(a['n']))} "
                         f"| {fmt_ci(Estimate.from_row(r, 'p99', 'p99_ms'), n=int(r['n']))} "
                         f"| {fmt_ci(Estimate.from_row(r, 'df'))} | {fmt_slow(r)} | **{r['reading']}** |")
    return "\n".join(lines + ["", *verdict_sentences(table, on_gpu=data.on_gpu)])


def _label(r: pd.Series) -> str:
    """A shared row's name: tenant (and llm phase), and its scenario where a run has several of one sharing mode
    (the contention matrix's pairs)."""
    plain = r["group"] in ("shared", f"shared-{r['sharing']}")
    return series_label(r["tenant"], r["phase"]) + ("" if plain else f" · {r['group']}")


def verdict_sentences(table: pd.DataFrame, *, on_gpu: bool = True) -> list[str]:
    """Per shared tenant and sharing mode: its wall-time verdict and its device-time verdict, with the evidence
    that decided each (``Verdict.words``). Generated, so the README's prose cannot contradict its table; a CPU
    run's device time is the operation's own time, not CUDA events."""
    clock = "CUDA events" if on_gpu else "the operation's own time"
    device = {(r["tenant"], r["phase"], r["group"]): r for _, r in shared_pairs(table, "device")}
    out = []
    for _, r in shared_pairs(table, "wall"):
        d = device.get((r["tenant"], r["phase"], r["group"]))
        dev = f"; by device time ({clock}): {d['reading_detail']}" if d is not None else ""
        out.append(f"- **{_label(r)}** ({r['sharing']}), by wall time: "
                   f"{r['reading_detail']}{dev}.")
    return out


def probe_markdown(data: RunData, *, n_resamples: int = 2000, seed: int = 0) -> str:
    """The time-slice probe's readings as a Markdown table (the report's probe section, same numbers)."""
    r = read_probe(data, n_resamples=n_resamples, seed=seed)
    lines = ["| reading [95% CI] | value |", "|---|---|", *(f"| {name} | {est.text()} |" for name, est in r.rows()),
             f"| ticks that found the GPU busy | {r.n_contended} of {r.n_ticks} co-running |",
             f"| hog kernel alone (median) | {r.hog_kernel_ms:.2f} ms |", f"| cross-check | {r.agreement} |"]
    return "\n".join(lines)
