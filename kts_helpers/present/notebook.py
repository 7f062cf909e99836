"""What the notebooks call: the run and analysis entry points, and small display helpers.

Notebooks import only the present (and teaching) wing; this module is their door to the run wing
(set up a run, run its scenarios) and the analyse wing (load a run, the tables with intervals), so the
notebooks hold no logic of their own, just the story.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
from IPython.display import HTML, Markdown, display

from kts_helpers.analyse.blockseq import BlocksJudge
from kts_helpers.analyse.estimate import Estimate
from kts_helpers.analyse.intervals import trim_effect
from kts_helpers.analyse.load import RunData, clocks, load_run
from kts_helpers.analyse.sequential import VerdictJudge
from kts_helpers.analyse.summary import (
    efficiency,
    focus,
    most_affected,
    overlap_counts,
    summarize_frame,
    write_summary,
)
from kts_helpers.analyse.verdicts import verdict_table
from kts_helpers.errors import RunError
from kts_helpers.fsutil import atomic_write_json
from kts_helpers.present.html import ENTRY_FILE, headline_entry
from kts_helpers.present.tables import fmt_ci, forest_frame, headline
from kts_helpers.run import experiment
from kts_helpers.run.environment import REPO_ROOT
from kts_helpers.run.params import from_notebook
from kts_helpers.run.runs import DEFAULT_ROOT, Run, find_run

__all__ = ["Analysis", "analyse", "clocks", "compact", "efficiency", "first_look", "forest_frame", "headline", "md",
           "metrics", "open_run_dir", "overlap_counts", "repo_path", "run_scenarios", "setup", "show", "table", "victim"]


# -- the run wing, for notebooks 00-02 ------------------------------------------------------------------------
def setup(parameters: dict[str, Any], extra_params: dict[str, Any] | None = None, *, run_id: str | None = None,
          runs_root: str | os.PathLike = DEFAULT_ROOT,
          backend_options: dict[str, Any] | None = None) -> tuple[Run, Any, dict[str, Any], pd.DataFrame]:
    """Create the run (parameters checked first, host detected, tool calibrated); also the plan as a table."""
    run, spec, env = experiment.setup_run(from_notebook(parameters, extra_params), run_id=run_id,
                                          root=_runs_root(runs_root),
                                          backend_options=backend_options)
    return run, spec, env, pd.DataFrame(experiment.describe_plan(spec))


def repo_path(path: str | os.PathLike | None) -> Path | None:
    """A notebook's path parameter, from the current directory or else from the repository root.

    Why: a kernel in JupyterLab starts in the notebook's own folder (``notebooks/``), papermill and the CLI in
    the repository root; the defaults (``data/reference``, ``data/examples/...``) are written from the root and
    must mean the same folder in both. A path found in neither place is returned as given, for the caller's
    own error message. None stays None (an optional input left out).
    """
    if path is None or path == "":
        return None
    p = Path(path)
    if not p.is_absolute() and not p.exists() and (REPO_ROOT / p).exists():
        return REPO_ROOT / p
    return p


def open_run_dir(run_dir: str | os.PathLike | None, runs_root: str | os.PathLike = DEFAULT_ROOT) -> Run:
    """The run a notebook works on: a path (see ``repo_path``) or a run id under ``runs_root``."""
    if not run_dir:
        raise RunError("no run_dir given: pass run_dir= (papermill -p run_dir ...) or make report RUN=...")
    return find_run(str(repo_path(run_dir)), _runs_root(runs_root))


def _runs_root(runs_root: str | os.PathLike) -> Path:
    """Where a notebook's run ids live: a relative root is the repository's, so 00-setup in Lab (started in
    notebooks/) and 01-03 under papermill (in the root) create and find the same runs."""
    return Path(runs_root) if Path(runs_root).is_absolute() else REPO_ROOT / runs_root


def run_scenarios(run_dir: str | os.PathLike, kind: str) -> tuple[Run, list[Any]]:
    """Run every scenario of ``kind`` (baseline or shared) that has not run yet; a shared tenant's interim looks
    (``shared_max_factor`` > 1) are answered by its verdict (``analyse.sequential``)."""
    run = open_run_dir(run_dir)
    return run, experiment.run_kind(run, kind, judge=VerdictJudge() if kind == "shared" else None,
                                    block_judge=BlocksJudge())


def first_look(run: Run, kind: str) -> pd.DataFrame:
    """Wall-time percentiles of the scenarios of one kind (the analysis notebook adds intervals and figures)."""
    data = load_run(run)
    quick = summarize_frame(data.iterations[data.iterations["kind"] == kind], "wall")
    return quick[["tenant", "group", "n", "p50_ms", "p95_ms", "p99_ms", "mean_ms"]] if len(quick) else quick


# -- the analyse wing, for notebook 03 ------------------------------------------------------------------------
@dataclass
class Analysis:
    """One run analysed: its data, the summary table with intervals, and the rows the main figures use."""

    data: RunData
    table: pd.DataFrame
    main_table: pd.DataFrame
    main_iterations: pd.DataFrame
    trim_effect: pd.DataFrame | None = None  # DF with and without the warm-up cut (when one was made)


def analyse(run_dir: str | os.PathLike, *, clip: bool = True, trim: int = 0, warmup: str = "none",
            n_resamples: int = 2000, seed: int | None = 0, method: str = "order", margin: float = 0.10,
            slo_ms: dict[str, float] | None = None) -> Analysis:
    """Load a run and compute the summary with intervals and verdicts for wall, device and wait time.

    With a warm-up cut (``trim`` or ``warmup``), DF is also computed without it (``trim_effect``).
    """
    run = open_run_dir(run_dir)
    data = load_run(run, clip=clip, trim=trim, warmup=warmup)
    opts = {"n_resamples": n_resamples, "seed": seed, "method": method, "margin": margin, "slo_ms": slo_ms}
    table = verdict_table(data, ("wall", "device", "wait"), **opts)
    main_table, main_iterations = focus(table, data.iterations)
    effect = None
    if trim or warmup != "none":
        raw = load_run(run, clip=clip)
        untrimmed = verdict_table(raw, **opts)
        effect = trim_effect(table, untrimmed)
    return Analysis(data, table, main_table, main_iterations, effect)


def save_summary(a: Analysis, out_dir: str | os.PathLike) -> None:
    """The report build's summary tables (``summary.csv``/``.json``: wall and device) and the index's line for the
    run (``html.ENTRY_FILE``), from the verdicts this report shows: the index can never say other than the report,
    and ``pipeline.build_report`` does not parse the logs and compute the verdicts a second time."""
    out = Path(out_dir)
    table = a.table[a.table["metric"].isin(("wall", "device"))]
    write_summary(table, out)
    atomic_write_json(out / ENTRY_FILE, headline_entry(a.data, table))


def metrics(data: RunData) -> tuple[str, ...]:
    """The clocks worth a figure: wall and device time where they differ (``RunData.two_clocks``), else wall only."""
    return ("wall", "device") if data.two_clocks else ("wall",)


def victim(a: Analysis) -> tuple[str, str] | None:
    """(tenant, scenario group) of the most affected shared tenant: the one the report follows over time."""
    return most_affected(a.table)


# -- display --------------------------------------------------------------------------------------------------


def md(text: str) -> None:
    display(Markdown(text))


def table(df: pd.DataFrame, *, significant: int | None = None, caption: str | None = None) -> None:
    """Show a table (no index) that reads well in the rendered report. Values are HTML-escaped here, once;
    a missing value (a quantity that does not apply) shows as "—". Numbers get 3 decimals, or
    ``significant`` digits (for quantities that span orders of magnitude, e.g. CPU vs GPU TFLOP/s)."""
    df = df.rename(columns=lambda c: str(c).replace("_", " "))  # headers can wrap
    if significant:
        styled = df.style.hide(axis="index").format(lambda v: f"{v:.{significant}g}" if isinstance(v, float) else v,
                                                     na_rep="—", escape="html")
    else:
        styled = df.style.hide(axis="index").format(precision=3, na_rep="—", escape="html")
    if caption:
        styled = styled.set_caption(caption)
    display(HTML(styled.to_html()))


def compact(df: pd.DataFrame, max_columns: int = 9) -> pd.DataFrame:
    """Fit a wide table to a page: ``x, x_lo, x_hi`` become one "x [lo, hi]" column; constant columns go."""
    out = df.copy()
    for lo_col in [c for c in df.columns if c.endswith("_lo") and f"{c[:-3]}_hi" in df]:
        base = lo_col[:-3]
        col = base if base in df else f"{base}_ms" if f"{base}_ms" in df else None
        if col is None:
            continue
        out[col] = [fmt_ci(Estimate.from_row(r, base, col)) for _, r in df.iterrows()]
        out = out.drop(columns=[lo_col, f"{base}_hi"])
    if len(out.columns) > max_columns and len(out) > 1:
        constant = [c for c in out.columns if out[c].astype(str).nunique() <= 1]
        out = out.drop(columns=constant)
    return out


def show(item: Any) -> None:
    """A table as a (page-wide) table, anything else (a chart) through IPython's display."""
    if isinstance(item, pd.DataFrame):
        table(compact(item))
    else:
        display(item)
