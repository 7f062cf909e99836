"""The report pipeline: papermill runs the numbered notebooks, nbconvert renders the analysis.

``build_report`` is what ``make report`` calls. A new run executes 00-setup -> 01-baseline -> 02-shared
-> 03-analysis with the same parameters; ``run_dir=...`` re-analyses an existing (e.g. committed
reference) run without re-running it. Executed notebooks and derived tables (summary.csv/json) go to
``report/build/<run>/<time>/``: nothing is written into a run directory by the analysis. The index entry
comes from the verdicts the report itself shows: 03-analysis writes it into this build's own fresh folder
(``summary_dir``, ``notebook.save_summary``), so it cannot be stale or another run's, and the logs are not parsed a
second time for it.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from pathlib import Path
from typing import Any

from jupyter_client.manager import AsyncKernelManager
from traitlets.config import Config

from kts_helpers.errors import KtsError
from kts_helpers.fsutil import atomic_write_json
from kts_helpers.present import progress
from kts_helpers.present.html import ENTRY_FILE, render_html, write_index
from kts_helpers.run.environment import probe_torch, resolve_device
from kts_helpers.run.params import split_analysis, split_for_notebook
from kts_helpers.run.runs import DEFAULT_ROOT, new_run_id, open_run
from kts_helpers.run.spec import ExperimentParams, resolve

NOTEBOOKS = ("00-setup.ipynb", "01-baseline.ipynb", "02-shared.ipynb", "03-analysis.ipynb")
TEACHING = "10-teaching-timeslice-simulator.ipynb"


class NotebookFailed(KtsError):
    """A notebook raised; the message carries the notebook's own one-line error."""


def kernel_options(kernel_log: Path | None = None) -> dict[str, Any]:
    """papermill's options for a quiet kernel: CurveZMQ-encrypted sockets (``transport_encryption="auto"``:
    the kernelspec declares ``curve`` support, so ipykernel does not warn that it runs over TCP in plain
    text), no SIGINT at shutdown, and the kernel process's own stderr in ``kernel_log`` (see
    ``_kernel_manager``). The kernel is this Python ("python3")."""
    return {"kernel_name": "python3", "kernel_manager_class": _kernel_manager(kernel_log),
            "config": Config({"KernelManager": {"transport_encryption": "auto"}})}


def _kernel_manager(kernel_log: Path | None = None) -> type:
    class QuietShutdownKernelManager(AsyncKernelManager):
        """jupyter_client interrupts (SIGINT to the kernel's process group) every kernel it shuts down. papermill
        shuts a kernel down only after its last cell has finished, so there is nothing to interrupt; the signal
        only makes ipykernel log "ERROR | KeyboardInterrupt caught in kernel." when it lands while a message is
        being handled. Interrupts outside a shutdown (a cell's timeout) are sent as usual.

        The kernel process writes to its own stderr only outside the cells (a cell's output goes to the notebook):
        ipykernel's shutdown can race its I/O thread on a loaded machine and log a ZMQ traceback there. That goes
        to ``kernel_log`` (kept only when not empty), not to the user's terminal."""

        async def _async_interrupt_kernel(self) -> None:
            if not self.shutting_down:
                await super()._async_interrupt_kernel()

        async def _async_launch_kernel(self, kernel_cmd: list[str], **kw: Any) -> None:
            if kernel_log is None:
                return await super()._async_launch_kernel(kernel_cmd, **kw)
            with kernel_log.open("ab") as log:  # the child holds its own copy of the descriptor
                await super()._async_launch_kernel(kernel_cmd, **{**kw, "stderr": log})

    return QuietShutdownKernelManager


def _execute(src: Path, dst: Path, parameters: dict[str, Any], cwd: Path) -> None:
    import papermill as pm  # papermill: ~1.4 s to import, only executing notebooks needs it
    from papermill.exceptions import PapermillExecutionError  # with papermill above

    dst.parent.mkdir(parents=True, exist_ok=True)
    kernel_log = dst.with_name(dst.stem + ".kernel.log")
    try:
        pm.execute_notebook(str(src), str(dst), parameters=parameters, cwd=str(cwd), progress_bar=False,
                            log_output=False, request_save_on_cell_execute=True, **kernel_options(kernel_log))
    except PapermillExecutionError as exc:
        raise NotebookFailed(f"{src.name} failed: {exc.ename}: {exc.evalue} (executed copy: {dst})") from None
    finally:
        with contextlib.suppress(OSError):
            if kernel_log.stat().st_size == 0:
                kernel_log.unlink()


def _probe_profile(params: dict[str, Any]) -> str:
    """Pick the default profile by device before any notebook runs (and fail fast on bad values)."""
    p = ExperimentParams.from_mapping({**params.get("extra_params", {}),  # unknown names fail here, in one line
                                       **{k: v for k, v in params.items() if k not in ("backend_options",
                                                                                      "extra_params")}})
    device = "cuda" if p.backend == "kubernetes" else resolve_device(p.device, probe_torch())
    return resolve(p, device).profile


def build_report(params: dict[str, Any], *, run_dir: str | os.PathLike | None = None,
                 runs_root: str | os.PathLike = DEFAULT_ROOT, report_dir: str | os.PathLike = "report",
                 notebooks_dir: str | os.PathLike = "notebooks", cwd: str | os.PathLike | None = None) -> Path:
    """Run (or re-analyse) and render; returns the path of the HTML report.

    Analysis options among ``params`` (``interval``, ``margin``, ``slo_ms``: ``run.params.split_analysis``) go to
    03-analysis and to the index entry, never to the run.
    """
    import papermill as pm  # papermill: ~1.4 s to import, only executing notebooks needs it

    params, analysis = split_analysis(params)
    nb_dir = Path(notebooks_dir).resolve()
    report_dir = Path(report_dir).resolve()
    workdir = Path(cwd).resolve() if cwd else Path.cwd()
    stamp = time.strftime("%Y%m%dT%H%M%S")
    if run_dir is not None:
        run = open_run(run_dir)
        run_id, run_path = run.run_id, run.path.resolve()
        build = report_dir / "build" / run_id / stamp
    else:
        run_id = new_run_id(_probe_profile(params), str(params.get("label", "")))
        root = Path(runs_root).resolve()
        run_path = root / run_id
        build = report_dir / "build" / run_id / stamp
        setup = {**split_for_notebook(params, pm.inspect_notebook(str(nb_dir / NOTEBOOKS[0]))),
                 "run_id": run_id, "runs_root": str(root)}
        with progress.watch(run_path):  # the notebooks' kernel prints nothing here: one line from the run dir
            _execute(nb_dir / NOTEBOOKS[0], build / NOTEBOOKS[0], setup, workdir)
            for name in NOTEBOOKS[1:3]:
                _execute(nb_dir / name, build / name, {"run_dir": str(run_path)}, workdir)
    _execute(nb_dir / NOTEBOOKS[3], build / NOTEBOOKS[3],
             {"run_dir": str(run_path), "static_charts": True, "summary_dir": str(build), **analysis}, workdir)
    html_path = render_html(build / NOTEBOOKS[3], report_dir / f"{run_id}.html", title=f"kts report: {run_id}")
    write_entry(report_dir, html_path, build)
    write_index(report_dir)
    return html_path


def build_teaching(parameters: dict[str, Any] | None = None, *, report_dir: str | os.PathLike = "report",
                   notebooks_dir: str | os.PathLike = "notebooks", cwd: str | os.PathLike | None = None) -> Path:
    """Execute the teaching notebook (optionally against a run: ``run_dir``) and render it offline."""
    report_dir = Path(report_dir).resolve()
    executed = report_dir / "build" / "teaching" / time.strftime("%Y%m%dT%H%M%S") / TEACHING
    _execute(Path(notebooks_dir).resolve() / TEACHING, executed, {"static_charts": True, **(parameters or {})},
             Path(cwd).resolve() if cwd else Path.cwd())
    return render_html(executed, report_dir / "teaching-timeslice.html", title="kts lesson: time-slicing, MPS, waiting")


def write_entry(report_dir: Path, html_path: Path, build: Path) -> dict[str, Any]:
    """The index's line for a run, as the analysis notebook left it in ``build`` (``notebook.save_summary``: the
    very verdicts the report shows), with the page's name and the time it was rendered."""
    saved = build / ENTRY_FILE
    if not saved.exists():
        raise KtsError(f"{build / NOTEBOOKS[3]} left no index line ({ENTRY_FILE}): a notebook without the "
                       "summary_dir parameter; render with the kit's own notebooks/")
    entry = {**json.loads(saved.read_text()), "html": html_path.name,
             "rendered_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    atomic_write_json(report_dir / f"{entry['run_id']}.json", entry)
    return entry
