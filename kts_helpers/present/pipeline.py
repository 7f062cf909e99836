"""The report pipeline: papermill runs the numbered notebooks, nbconvert renders the analysis.

``build_report`` is what ``make report`` calls. A new run executes 00-setup -> 01-baseline ->
02-shared -> 03-analysis with the same parameters (executed copies kept in the run directory);
``run_dir=...`` re-analyses an existing (e.g. committed reference) run without re-running it.
The HTML is written with code hidden, charts as inline SVG and no external script, so it
renders with no network; ``report/index.html`` lists every report, newest first.
"""

from __future__ import annotations

import html
import json
import os
import re
import sys
import time
from pathlib import Path
from typing import Any

from kts_helpers.errors import KtsError, RunError
from kts_helpers.fsutil import atomic_write_json, atomic_write_text
from kts_helpers.run.runs import DEFAULT_ROOT, new_run_id, open_run

NOTEBOOKS = ("00-setup.ipynb", "01-baseline.ipynb", "02-shared.ipynb", "03-analysis.ipynb")
STATIC_CHARTS_ENV = "KTS_STATIC_CHARTS"
_EXTERNAL = re.compile(r"<script[^>]+src=\"https?://[^\"]*\"[^>]*>\s*</script>|<link[^>]+href=\"https?://[^\"]*\"[^>]*>",
                       re.I)


class NotebookFailed(KtsError):
    """A notebook raised; the message carries the notebook's own one-line error."""


def _execute(src: Path, dst: Path, parameters: dict[str, Any], cwd: Path) -> None:
    import papermill as pm
    from papermill.exceptions import PapermillExecutionError

    dst.parent.mkdir(parents=True, exist_ok=True)
    try:
        pm.execute_notebook(str(src), str(dst), parameters=parameters, cwd=str(cwd), progress_bar=False,
                            kernel_name="python3", log_output=False, request_save_on_cell_execute=True)
    except PapermillExecutionError as exc:
        raise NotebookFailed(f"{src.name} failed: {exc.ename}: {exc.evalue} (executed copy: {dst})") from None


def _probe_profile(params: dict[str, Any]) -> str:
    """Pick the default profile by device before any notebook runs (and fail fast on bad values)."""
    from kts_helpers.run.environment import probe_torch, resolve_device
    from kts_helpers.run.spec import ExperimentParams, resolve

    notebook_only = {"backend_options", "extra_params", "run_id", "runs_root", "run_dir", "out_dir"}
    p = ExperimentParams.from_mapping({**params.get("extra_params", {}),
                                       **{k: v for k, v in params.items() if k not in notebook_only}})
    device = "cuda" if p.backend == "kubernetes" else resolve_device(p.device, probe_torch())
    return resolve(p, device).profile


def _route_params(setup_notebook: Path, params: dict[str, Any]) -> dict[str, Any]:
    """Parameters the set-up notebook declares go in by name; every other one through ``extra_params``."""
    import papermill as pm

    declared = set(pm.inspect_notebook(str(setup_notebook)))
    named = {k: v for k, v in params.items() if k in declared and k != "extra_params"}
    extra = {**params.get("extra_params", {}), **{k: v for k, v in params.items() if k not in declared}}
    return {**named, "extra_params": extra}


def build_report(params: dict[str, Any], *, run_dir: str | os.PathLike | None = None,
                 runs_root: str | os.PathLike = DEFAULT_ROOT, report_dir: str | os.PathLike = "report",
                 notebooks_dir: str | os.PathLike = "notebooks", cwd: str | os.PathLike | None = None) -> Path:
    """Run (or re-analyse) and render; returns the path of the HTML report."""
    os.environ[STATIC_CHARTS_ENV] = "1"
    nb_dir = Path(notebooks_dir).resolve()
    report_dir = Path(report_dir).resolve()
    workdir = Path(cwd).resolve() if cwd else Path.cwd()
    if run_dir is not None:
        run = open_run(run_dir)
        run_id = run.run_id
        out_dir = report_dir / "build" / run_id / time.strftime("%Y%m%dT%H%M%S")
        base = {"run_dir": str(run.path.resolve()), "out_dir": str(out_dir)}
        executed = out_dir / NOTEBOOKS[3]
        _execute(nb_dir / NOTEBOOKS[3], executed, base, workdir)
    else:
        profile = _probe_profile(params)
        run_id = new_run_id(profile, str(params.get("label", "")))
        root = Path(runs_root).resolve()
        run_path = root / run_id
        out_dir = run_path
        base = {**_route_params(nb_dir / NOTEBOOKS[0], params), "run_id": run_id, "runs_root": str(root),
                "run_dir": str(run_path), "out_dir": str(run_path)}
        staging = root / f".{run_id}.notebooks"  # 00-setup creates the run: keep copies aside until then
        try:
            for name in NOTEBOOKS:
                _execute(nb_dir / name, staging / name, base, workdir)
        finally:
            _move_into_run(staging, run_path)
        executed = run_path / "notebooks" / NOTEBOOKS[3]
    html_path = render_html(executed, report_dir / f"{run_id}.html")
    _write_entry(report_dir, run_id, out_dir, html_path)
    write_index(report_dir)
    return html_path


TEACHING = "10-teaching-timeslice-simulator.ipynb"


def build_teaching(parameters: dict[str, Any] | None = None, *, report_dir: str | os.PathLike = "report",
                   notebooks_dir: str | os.PathLike = "notebooks", cwd: str | os.PathLike | None = None) -> Path:
    """Execute the teaching notebook (optionally against a run: ``run_dir``) and render it offline."""
    os.environ[STATIC_CHARTS_ENV] = "1"
    report_dir = Path(report_dir).resolve()
    executed = report_dir / "build" / "teaching" / time.strftime("%Y%m%dT%H%M%S") / TEACHING
    _execute(Path(notebooks_dir).resolve() / TEACHING, executed, dict(parameters or {}),
             Path(cwd).resolve() if cwd else Path.cwd())
    return render_html(executed, report_dir / "teaching-timeslice.html")


def _move_into_run(staging: Path, run_path: Path) -> None:
    """Executed notebooks go into the run directory (also a failed one: its error is evidence)."""
    if not staging.exists() or not run_path.exists():
        return
    dest = run_path / "notebooks"
    dest.mkdir(exist_ok=True)
    for f in staging.iterdir():
        os.replace(f, dest / f.name)
    staging.rmdir()


# Readable at the width of a page: charts scale down, wide tables wrap inside their cells.
PAGE_CSS = """<style>
body { max-width: 70rem; margin: 0 auto; }
.jp-OutputArea-output img, .jp-RenderedImage img { max-width: 100%; height: auto; }
.jp-RenderedHTMLCommon table { max-width: 100%; font-size: 0.85em; }
.jp-RenderedHTMLCommon th, .jp-RenderedHTMLCommon td { overflow-wrap: break-word; padding: 0.3em 0.4em; }
</style>
"""


def render_html(notebook: Path, out: Path) -> Path:
    """nbconvert with code hidden; external scripts/styles dropped so the page is self-contained."""
    import nbformat
    from nbconvert import HTMLExporter

    nb = nbformat.read(str(notebook), as_version=4)
    exporter = HTMLExporter(template_name="lab")
    exporter.exclude_input = True
    exporter.exclude_input_prompt = True
    exporter.exclude_output_prompt = True
    body, _ = exporter.from_notebook_node(nb)
    body = _EXTERNAL.sub("", body).replace("</head>", PAGE_CSS + "</head>", 1)
    return atomic_write_text(out, body)


def _write_entry(report_dir: Path, run_id: str, out_dir: Path, html_path: Path) -> None:
    headline_path = Path(out_dir) / "headline.json"
    try:
        headline = json.loads(headline_path.read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        headline = {}
    entry = {"run_id": run_id, "html": html_path.name, "rendered_at": time.strftime("%Y-%m-%dT%H:%M:%SZ",
                                                                                       time.gmtime()),
             **headline}
    atomic_write_json(report_dir / f"{run_id}.json", entry)


def write_index(report_dir: str | os.PathLike = "report") -> Path:
    """report/index.html: one row per rendered report (run id, date, device, profile, headline DF), newest first."""
    report_dir = Path(report_dir)
    entries = []
    for p in report_dir.glob("*.json"):
        try:
            e = json.loads(p.read_text())
        except json.JSONDecodeError:
            continue
        if isinstance(e, dict) and "run_id" in e and (report_dir / e.get("html", "")).exists():
            entries.append(e)
    entries.sort(key=lambda e: (e.get("created_at") or e.get("rendered_at") or "", e["run_id"]), reverse=True)
    esc = html.escape
    rows = "\n".join(
        f"<tr><td><a href=\"{esc(e['html'])}\">{esc(e['run_id'])}</a></td><td>{esc(str(e.get('created_at', '')))}"
        f"</td><td>{esc(str(e.get('device_name', e.get('device', ''))))}</td><td>{esc(str(e.get('profile', '')))}"
        f"</td><td>{esc(str(e.get('label', '')))}</td><td>{esc(str(e.get('headline', '')))}</td></tr>"
        for e in entries)
    newest = (f"<p>Newest: <a href=\"{esc(entries[0]['html'])}\">{esc(entries[0]['run_id'])}</a></p>"
              if entries else "<p>No reports yet: run <code>make report</code>.</p>")
    page = f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>kts reports</title>
<style>body{{font-family:system-ui,sans-serif;max-width:60rem;margin:2rem auto;padding:0 1rem;color:#222}}
table{{border-collapse:collapse;width:100%}}td,th{{border-bottom:1px solid #ddd;padding:.4rem;text-align:left;
vertical-align:top;overflow-wrap:anywhere}}th{{background:#f4f4f4}}</style></head>
<body><h1>kts: GPU time-slicing contention reports</h1>{newest}
<table><thead><tr><th>run</th><th>created</th><th>device</th><th>profile</th><th>label</th>
<th>headline (wall-time DF, p99)</th></tr></thead><tbody>
{rows}
</tbody></table></body></html>
"""
    return atomic_write_text(report_dir / "index.html", page)


def headline_entry(data: Any, table: Any) -> dict[str, Any]:
    """What the index shows for a run: id, date, device, profile, the headline wall-time DFs."""
    m = data.manifest
    env = m.get("environment", {})
    shared = table[(table["scenario"] == "shared") & (table["metric"] == "wall")]
    parts = [f"{r.tenant}: {r.df:.2f}x" for r in shared.itertuples() if r.df == r.df]
    return {"run_id": m.get("run_id"), "created_at": m.get("created_at"), "device": m["spec"].get("device"),
            "device_name": env.get("device_name") or env.get("gpu_name") or env.get("processor"),
            "profile": m["spec"].get("profile"), "label": m.get("label", ""), "status": m.get("status"),
            "headline": ", ".join(parts) or "no shared scenario"}


def check_run_dir(run_dir: str | None) -> Path:
    if not run_dir:
        raise RunError("no run_dir given: pass run_dir= (papermill -p run_dir ...) or make report RUN=...")
    return Path(run_dir)


if __name__ == "__main__":  # pragma: no cover - convenience
    print(write_index(sys.argv[1] if len(sys.argv) > 1 else "report"))


def reference_markdown(run_dir: str | os.PathLike, *, n_resamples: int = 2000, seed: int = 0) -> str:
    """The README's reference table, computed exactly as the analysis notebook computes the report."""
    from kts_helpers.analyse.intervals import add_all_intervals
    from kts_helpers.analyse.load import load_run, summarize_run

    data = load_run(run_dir)
    table = add_all_intervals(summarize_run(data), data.iterations, n_resamples=n_resamples, seed=seed)
    lines = ["| tenant | metric | sharing | p50 alone → shared (ms) | p99 alone [95% CI] (ms) "
             "| p99 shared [95% CI] (ms) | DF [95% CI] | reading |", "|---|---|---|---|---|---|---|---|"]

    def cell(v: float, ci: list[float] | None) -> str:
        return f"{v:.3f} [{ci[0]:.3f}, {ci[1]:.3f}]" if ci else f"{v:.3f}"

    for metric in ("wall", "device"):
        t = table[table["metric"] == metric]
        for tenant in dict.fromkeys(t["tenant"]):
            alone = t[(t["tenant"] == tenant) & (t["scenario"] == "baseline")]
            if alone.empty:
                continue
            a = alone.iloc[0]
            for _, r in t[(t["tenant"] == tenant) & (t["scenario"] == "shared")].iterrows():
                lines.append(f"| {tenant} | {metric} | {r['sharing']} | {a['p50_ms']:.3f} → {r['p50_ms']:.3f} "
                             f"| {cell(a['p99_ms'], a['p99_ci'])} | {cell(r['p99_ms'], r['p99_ci'])} "
                             f"| {cell(r['df'], r['df_ci'])} | {r['verdict']} |")
    return "\n".join(lines)
