"""The README's reference tables, from the committed runs' data by the report's own computation.

A test compares each table in README.md with what this produces from ``data/reference/<run>``, so the
numbers quoted in the README are the data's. Each verdict reads in one line in its table (``verdictline``: the word,
then what decided it); the derivation of every verdict follows the table, folded (``<details>``).

``HEADLINE_RUN`` is the committed run the README's GPU table and every "as `make report` runs it" claim come from:
a run of the ``article`` profile in the design that profile runs now. ``headline_mismatch`` says when the profile has
moved on (a test fails on it), and what to do: measure the profile again on a GPU, commit the run, name it here and
regenerate (``python -m bench.regen_reference_tables``).
"""

from __future__ import annotations

import functools
import json
import os
from pathlib import Path

import pandas as pd

from kts_helpers.analyse.estimate import Estimate
from kts_helpers.analyse.load import RunData, load_run
from kts_helpers.analyse.probe import is_probe, read_probe
from kts_helpers.analyse.rules import series_label
from kts_helpers.analyse.summary import shared_pairs
from kts_helpers.analyse.verdicts import verdict_table
from kts_helpers.present import verdictline
from kts_helpers.present.tables import fmt_ci, fmt_slow
from kts_helpers.run.spec import ExperimentParams, resolve

REFERENCE_ROOT = Path(__file__).resolve().parents[2] / "data" / "reference"
# The article profile in the design `make report` runs now (warm tenants, blocks=auto: 8 shared blocks, then 4 more
# at a time within 1.5x the first 8's time; this run went to 12), measured on an H100 (2026-12-06).
HEADLINE_RUN = "h100-2026-12-06-article-headline"
HEADLINE_PROFILE = "article"
# Where the article profile moved on and no GPU run of it exists yet: what differs and why, said beside the headline
# table (``docblocks.headline_markdown``) and held to the one difference by tests/test_readme.py; None once current.
HEADLINE_PENDING: str | None = None
# What a design is named by, in the docs' headings and the one-screen summaries (``design_name``).
DESIGN_NAMES = {"warm": "warm design", "bracketed": "bracketed design", "repeats": "repeats",
                "one block": "one alone block"}


def reference_markdown(run_dir: str | os.PathLike, *, n_resamples: int = 2000, seed: int = 0) -> str:
    """One Markdown row per shared tenant, scenario and metric (p50, p99 with intervals, DF, the slow-iteration
    estimand and the verdict), then one generated sentence per tenant: the README's words about a result."""
    data, table = analysed(run_dir, n_resamples=n_resamples, seed=seed)
    if table is None:
        return probe_markdown(data, n_resamples=n_resamples, seed=seed)
    lines = ["| tenant | metric | sharing | p50 alone → shared (ms) | p99 alone [95% CI] (ms) "
             "| p99 shared [95% CI] (ms) | DF [95% CI] | slow iterations [95% CI] | verdict | decided by |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for metric in ("wall", "device"):
        for a, r in shared_pairs(table, metric):
            lines.append(f"| {_label(r)} | {metric} | {r['sharing']} "
                         f"| {a['p50_ms']:.3f} → {r['p50_ms']:.3f} "
                         f"| {fmt_ci(Estimate.from_row(a, 'p99', 'p99_ms'), n=int(a['n']), ess=a.get('ess'))} "
                         f"| {fmt_ci(Estimate.from_row(r, 'p99', 'p99_ms'), n=int(r['n']), ess=r.get('ess'))} "
                         f"| {fmt_ci(Estimate.from_row(r, 'df'))} | {fmt_slow(r)} | **{r['reading']}** "
                         f"| {_decided(r)} |")
    why = verdict_sentences(table, on_gpu=data.on_gpu)
    return "\n".join(lines + ["", "<details markdown=\"1\"><summary>Why: how each verdict was decided</summary>", "",
                              *why, "", "</details>"])


@functools.lru_cache(maxsize=32)
def _analysed(run_dir: str, n_resamples: int, seed: int) -> tuple[RunData, pd.DataFrame | None]:
    data = load_run(run_dir)
    if is_probe(data):
        return data, None
    return data, verdict_table(data, n_resamples=n_resamples, seed=seed)


def analysed(run_dir: str | os.PathLike, *, n_resamples: int = 2000, seed: int = 0
             ) -> tuple[RunData, pd.DataFrame | None]:
    """A committed run and its summary table with intervals and verdicts (None for a probe), computed once per
    process: the docs' generated blocks read several of them from the same runs (``present.docblocks``). Callers
    must not change the table."""
    return _analysed(str(Path(run_dir).resolve()), n_resamples, seed)


def _decided(r: pd.Series) -> str:
    """The "decided by" cell: the number that decided the row's verdict (``verdictline.decided_by``)."""
    v = r.get("verdict")
    if v is None:
        return "—"
    warm = "; a warm GPU" if "its mechanism: a warm GPU" in str(r.get("reading_detail")) else ""
    return verdictline.decided_by(v) + warm


def _label(r: pd.Series) -> str:
    """A shared row's name: tenant (and llm phase), and its scenario where a run has several of one sharing mode
    (the contention matrix's pairs)."""
    plain = r["group"] in ("shared", f"shared-{r['sharing']}")
    return series_label(r["tenant"], r["phase"]) + ("" if plain else f" · {r['group']}")


def verdict_sentences(table: pd.DataFrame, *, on_gpu: bool = True) -> list[str]:
    """Per shared tenant and sharing mode: its wall-time verdict and its device-time verdict, each with its full
    derivation (``verdictline.why``: every test, weight, Holm and the drift term). Generated, so the README's prose
    cannot contradict its table; a CPU run's device time is the operation's own time, not CUDA events."""
    clock = "CUDA events" if on_gpu else "the operation's own time"
    device = {(r["tenant"], r["phase"], r["group"]): r for _, r in shared_pairs(table, "device")}
    out = []
    for _, r in shared_pairs(table, "wall"):
        d = device.get((r["tenant"], r["phase"], r["group"]))
        dev = f"; by device time ({clock}): {d['reading_detail']}" if d is not None else ""
        out.append(f"- **{_label(r)}** ({r['sharing']}), by wall time: "
                   f"{r['reading_detail']}{dev}.")
    return out


def design_name(run_dir: str | os.PathLike) -> str:
    """A committed run's design, as the docs' headings name it (``DESIGN_NAMES``), from its manifest."""
    r = json.loads((Path(run_dir) / "manifest.json").read_text())["spec"]["resolved"]
    if r.get("design_kind") == "warm":
        return DESIGN_NAMES["warm"]
    if r.get("blocks"):
        return DESIGN_NAMES["bracketed"]
    return DESIGN_NAMES["repeats"] if (r.get("repeats") or 1) > 1 else DESIGN_NAMES["one block"]


def _design_of(resolved: dict) -> dict[str, object]:
    """What a run's design is, as the parameters name it: warm or fresh, its blocks (``auto`` where the run adds
    blocks until its verdicts decide) and the least length of a block."""
    return {"design": resolved.get("design_kind") or "fresh",
            "blocks": "auto" if resolved.get("blocks_auto") else resolved.get("blocks"),
            "block_s": resolved.get("block_s")}


def headline_mismatch(run: str = HEADLINE_RUN, root: Path = REFERENCE_ROOT) -> str | None:
    """None where ``run`` is the ``article`` profile in the design `make report` runs today on a GPU; else one
    paragraph saying what differs and the steps that make the headline current again."""
    now = _design_of(resolve(ExperimentParams(profile=HEADLINE_PROFILE), "cuda").resolved)
    manifest = json.loads((root / run / "manifest.json").read_text())
    then = _design_of(manifest["spec"]["resolved"])
    profile = manifest["spec"].get("profile") or manifest["spec"].get("params", {}).get("profile")
    if profile == HEADLINE_PROFILE and now == then:
        return None
    said = ", ".join(f"{k}={v}" for k, v in now.items())
    ran = ", ".join(f"{k}={v}" for k, v in then.items())
    return (f"The headline run {run} (profile {profile}: {ran}) is not what `make report` runs on a GPU now "
            f"(profile {HEADLINE_PROFILE}: {said}). To make it current: on a GPU host run `bash "
            f"bench/h200/warm_batch.sh headline` (the {HEADLINE_PROFILE} profile at its defaults, into $OUT); commit "
            f"the run under data/reference/; set HEADLINE_RUN in kts_helpers/present/reference.py to its name (the "
            f"README's headline block follows it); add its table to docs/results/reference.md under a heading that "
            f"names its design (a reference-table:<run> block; {run} keeps its table under its own design's name); "
            f"then run `python -m bench.regen_reference_tables`, which rewrites every generated table, the verdict "
            f"page's examples and the family example.")


def probe_markdown(data: RunData, *, n_resamples: int = 2000, seed: int = 0) -> str:
    """The time-slice probe's readings as a Markdown table (the report's probe section, same numbers)."""
    r = read_probe(data, n_resamples=n_resamples, seed=seed)
    lines = ["| reading [95% CI] | value |", "|---|---|", *(f"| {name} | {est.text()} |" for name, est in r.rows()),
             f"| ticks that found the GPU busy | {r.n_contended} of {r.n_ticks} co-running |",
             f"| hog kernel alone (median) | {r.hog_kernel_ms:.2f} ms |", f"| cross-check | {r.agreement} |"]
    return "\n".join(lines)
