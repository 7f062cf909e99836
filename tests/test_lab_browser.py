"""JupyterLab, offline, in a real browser: the analysis and teaching notebooks run every cell against a tiny run
in headless Chromium with every request that is not to the local Lab server blocked. No cell errs, every chart
draws (SVG through Altair's offline ``jupyter`` renderer, no script from a CDN) with its labels whole, the brush
on the "Exploring a run" timeline filters the tail plot, and the run directory is not touched.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import nbformat
import pytest
from conftest import CHROMIUM_ARGS
from pagecheck import SVG_TEXT_PROBLEMS

from kts_helpers.run.experiment import run_experiment

REPO = Path(__file__).resolve().parent.parent
TOKEN = "kts-lab-test"
ANALYSIS, TEACHING = "03-analysis.ipynb", "10-teaching-timeslice-simulator.ipynb"

pytestmark = [pytest.mark.browser, pytest.mark.e2e]


def _digest(run_dir: Path) -> dict[str, str]:
    return {f"{p.relative_to(run_dir)} {oct(p.stat().st_mode)}": hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(run_dir.rglob("*")) if p.is_file() and p.name != ".lock"}


def _with_parameters(src: Path, dst: Path, parameters: dict) -> None:
    """The committed notebook with a cell of parameters after its parameters cell, as a reader would edit it."""
    nb = nbformat.read(src, as_version=4)
    at = next(i for i, c in enumerate(nb.cells) if "parameters" in c.metadata.get("tags", []))
    nb.cells.insert(at + 1, nbformat.v4.new_code_cell("\n".join(f"{k} = {v!r}" for k, v in parameters.items())))
    nbformat.write(nb, dst)


def _free_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory, tiny_params) -> Iterator[dict]:
    """A tiny run, the two notebooks pointed at it, and JupyterLab serving them on a loopback port."""
    base = tmp_path_factory.mktemp("lab")
    run = run_experiment({**tiny_params, "iterations": 40}, root=base / "runs", progress=False)
    root = base / "root"
    root.mkdir()
    _with_parameters(REPO / "notebooks" / ANALYSIS, root / ANALYSIS, {"run_dir": str(run.path), "n_resamples": 300})
    _with_parameters(REPO / "notebooks" / TEACHING, root / TEACHING,
                     {"run_dir": str(run.path), "duration_ms": 20000.0, "interactive": True,
                      "reference_resamples": 100})  # the other teaching renders' count: their stored tables serve
    # Jupyter's own directories in the test's tmp; the notebooks' kernel ("kts") is this Python.
    jdir = base / "jupyter"
    kernel = jdir / "data" / "kernels" / "kts"
    kernel.mkdir(parents=True)
    (kernel / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "Python (kts)", "language": "python", "metadata": {"supported_encryption": ["curve"]}}))
    settings = jdir / "settings" / "@jupyterlab"
    (settings / "notebook-extension").mkdir(parents=True)
    # every cell in the page (not only those scrolled into view), and no news fetched from the internet
    (settings / "notebook-extension" / "tracker.jupyterlab-settings").write_text('{"windowingMode": "none"}')
    (settings / "apputils-extension").mkdir(parents=True)
    (settings / "apputils-extension" / "notification.jupyterlab-settings").write_text('{"fetchNews": "false"}')
    env = {**os.environ, "JUPYTER_DATA_DIR": str(jdir / "data"), "JUPYTER_CONFIG_DIR": str(jdir / "config"),
           "JUPYTER_RUNTIME_DIR": str(jdir / "runtime"), "JUPYTER_PATH": str(jdir / "data")}
    port = _free_port()
    log = (base / "lab.log").open("w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "jupyterlab", "--no-browser", f"--port={port}", "--ServerApp.ip=127.0.0.1",
         f"--IdentityProvider.token={TOKEN}", f"--ServerApp.root_dir={root}",
         f"--LabApp.user_settings_dir={jdir / 'settings'}", f"--LabApp.workspaces_dir={jdir / 'workspaces'}",
         "--KernelManager.transport_encryption=auto", *(["--allow-root"] if os.geteuid() == 0 else [])],
        cwd=root, env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(240):
            try:
                urllib.request.urlopen(f"{url}/api/status?token={TOKEN}", timeout=2)
                break
            except OSError:
                if proc.poll() is not None:
                    break
                time.sleep(0.25)
        else:
            pytest.fail("JupyterLab did not start")
        assert proc.poll() is None, (base / "lab.log").read_text()[-2000:]
        yield {"url": url, "root": root, "run": run.path, "log": base / "lab.log", "before": _digest(run.path)}
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


def _run_all(browser_path: str, lab: dict, name: str, *, inspect=None) -> tuple[list[str], list[dict]]:
    """Open ``name`` in Lab, run all cells, save; returns (requests blocked, chart reports from the page)."""
    from playwright.sync_api import sync_playwright

    blocked: list[str] = []

    def route(r) -> None:
        u = r.request.url
        if u.startswith((lab["url"] + "/", "data:", "blob:")):
            r.continue_()
        else:
            blocked.append(u)
            r.abort()

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=browser_path, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.route("**/*", route)
            # a workspace of its own per notebook: Lab would otherwise reopen the previous test's notebook next to
            # this one, and its kernel start could race this one's "Run All"
            page.goto(f"{lab['url']}/lab/workspaces/{Path(name).stem}/tree/{name}?token={TOKEN}")
            page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=120_000)
            page.wait_for_selector("text=| Idle", timeout=120_000)  # the kernel is up
            page.locator(".lm-MenuBar-itemLabel", has_text="Run").first.click()
            page.locator(".lm-Menu-itemLabel", has_text="Run All Cells").first.click()
            prompts = ".jp-CodeCell .jp-InputArea-prompt"
            deadline = time.monotonic() + 600  # a loaded 2-core machine runs the teaching fit for minutes
            while time.monotonic() < deadline:
                texts = page.evaluate(f"[...document.querySelectorAll('{prompts}')].map(e => e.textContent.trim())")
                if texts and all(t not in ("[ ]:", "[*]:", "") for t in texts):
                    break
                if "[*]:" not in texts and "[ ]:" in texts and any(t[1:-2].isdigit() for t in texts):
                    # Lab stops "Run All" at a cell that raised: say which error rather than wait for the deadline
                    errors = page.evaluate("""[...document.querySelectorAll(
                        '.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stderr"]')]
                        .map(e => e.textContent.slice(0, 600))""")
                    pytest.fail(f"{name}: Run All stopped after {texts}: {errors}")
                time.sleep(1)
            else:
                pytest.fail(f"{name}: cells did not finish: {texts}")
            page.wait_for_timeout(3000)  # widgets draw after their cell has finished
            charts = page.evaluate("""() => [...document.querySelectorAll('.jp-OutputArea-output')]
                .filter(o => o.querySelector('.vega-embed, svg.marks, img[src^="data:image/svg"]'))
                .map(o => ({svg: o.querySelectorAll('svg.marks').length, canvas: o.querySelectorAll('canvas').length,
                            img: o.querySelectorAll('img[src^="data:image/svg"]').length,
                            text: o.textContent.slice(0, 200)}))""")
            clipped = []
            for svg in page.query_selector_all(".jp-OutputArea-output svg.marks"):
                if not svg.is_visible():  # a chart a slider is redrawing, or one no reader can see
                    continue
                svg.scroll_into_view_if_needed()
                clipped += svg.evaluate(SVG_TEXT_PROBLEMS)
            assert clipped == [], f"{name}: labels not drawn whole in Lab: {clipped[:5]}"
            if inspect:
                inspect(page)
            page.keyboard.press("Control+s")
            page.wait_for_timeout(2000)
        finally:
            browser.close()
    return blocked, charts


def _saved_errors(path: Path) -> list[str]:
    nb = nbformat.read(path, as_version=4)
    return [f"{o.get('ename')}: {o.get('evalue')}" if o["output_type"] == "error" else o.get("text", "")[:200]
            for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])
            if o["output_type"] == "error" or (o["output_type"] == "stream" and o.get("name") == "stderr")]


def _brush(page) -> None:
    """Drag across the explore chart's timeline: the tail plot below must redraw for the selected window."""
    out = page.locator(".jp-OutputArea-output", has_text="drag to select a time window").last
    out.scroll_into_view_if_needed()
    top = out.locator("svg.marks g.role-scope path.background").first.bounding_box()  # the timeline's plot
    tail = "e => [...e.querySelectorAll('g.concat_1_group path')].map(p => p.getAttribute('d') || '').join('|')"
    before = out.evaluate(tail)
    y = top["y"] + top["height"] / 2
    page.mouse.move(top["x"] + 0.3 * top["width"], y)
    page.mouse.down()
    page.mouse.move(top["x"] + 0.55 * top["width"], y, steps=8)
    page.mouse.up()
    page.wait_for_timeout(1000)
    assert out.evaluate(tail) != before, "brushing the timeline did not filter the tail plot"


def test_analysis_notebook_runs_offline_in_lab(lab: dict, browser_path: str) -> None:
    blocked, charts = _run_all(browser_path, lab, ANALYSIS, inspect=_brush)
    assert blocked == [], f"requests that left the machine: {blocked[:3]}"
    assert _saved_errors(lab["root"] / ANALYSIS) == []
    # forest, four panels, tail, timeline, explore (a CPU run has no device/wait decomposition)
    assert len(charts) >= 5 and all(c["svg"] or c["canvas"] for c in charts), charts
    assert not [c for c in charts if "Error loading script" in c["text"]]
    assert _digest(lab["run"]) == lab["before"]  # an interactive analysis writes nothing into the run
    _quiet_kernel_log(lab)


def test_teaching_notebook_runs_offline_in_lab(lab: dict, browser_path: str) -> None:
    blocked, charts = _run_all(browser_path, lab, TEACHING)
    assert blocked == [], f"requests that left the machine: {blocked[:3]}"
    assert _saved_errors(lab["root"] / TEACHING) == []
    # timeline, latency curves, DF sweeps, measured vs simulated, and the sliders' first draw
    assert len(charts) >= 6 and all(c["svg"] or c["canvas"] or c["img"] for c in charts), charts
    assert _digest(lab["run"]) == lab["before"]
    _quiet_kernel_log(lab)


def _quiet_kernel_log(lab: dict) -> None:
    """The kernels Lab started ran on encrypted sockets (no plain-TCP warning) and were not interrupted."""
    text = lab["log"].read_text()
    assert "Kernel started" in text
    assert "running over TCP without encryption" not in text and "KeyboardInterrupt" not in text
