"""The teaching notebook: committed clean, runs under papermill in seconds, renders offline (SVG)."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import nbformat
import papermill as pm
import pytest
from nbconvert import HTMLExporter

from kts_helpers.present.pipeline import build_teaching
from kts_helpers.teaching.model import SimTenant
from kts_helpers.teaching.synthetic import write_sim_probe, write_sim_run

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK = ROOT / "notebooks" / "10-teaching-timeslice-simulator.ipynb"
SMALL = {"duration_ms": 20_000.0, "seed": 1, "reference_resamples": 100}
PROBE_QUANTUM, PROBE_SWITCH = 2.0, 0.1
FFT, GEMM = SimTenant("fft", 1.0, 100.0, 5.0), SimTenant("gemm", 30.0, 150.0, 5.0)


def _execute(tmp: Path, name: str, notebook: Path, parameters: dict) -> nbformat.NotebookNode:
    out = tmp / f"{name}.ipynb"
    pm.execute_notebook(str(notebook), str(out), parameters=parameters, kernel_name="python3", cwd=str(ROOT),
                        progress_bar=False, execution_timeout=180)
    return nbformat.read(out, as_version=4)


def _outputs(nb: nbformat.NotebookNode) -> list[dict]:
    return [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]


def _markdown(nb: nbformat.NotebookNode) -> str:
    return "\n".join(o["data"]["text/markdown"] for o in _outputs(nb) if "text/markdown" in o.get("data", {}))


def _svgs(nb: nbformat.NotebookNode) -> int:
    return len([o for o in _outputs(nb) if "image/svg+xml" in o.get("data", {})])


def _no_errors(nb: nbformat.NotebookNode) -> None:
    errors = [f"{o['ename']}: {o['evalue']}" for o in _outputs(nb) if o["output_type"] == "error"]
    assert errors == []


def _edit_manifest(run: Path, change) -> Path:
    m = json.loads((run / "manifest.json").read_text())
    change(m)
    (run / "manifest.json").write_text(json.dumps(m))
    return run


@pytest.fixture(scope="module")
def static_render(tmp_path_factory: pytest.TempPathFactory) -> tuple[nbformat.NotebookNode, Path]:
    """``make teach``'s own path (``build_teaching``: static charts, nbconvert): the executed notebook and its page."""
    report = tmp_path_factory.mktemp("nb")
    html = build_teaching(SMALL, report_dir=report, notebooks_dir=ROOT / "notebooks", cwd=ROOT)
    (executed,) = (report / "build" / "teaching").glob("*/" + NOTEBOOK.name)
    return nbformat.read(executed, as_version=4), html


@pytest.fixture(scope="module")
def static_nb(static_render: tuple[nbformat.NotebookNode, Path]) -> nbformat.NotebookNode:
    return static_render[0]


@pytest.fixture(scope="module")
def probe_nb(tmp_path_factory: pytest.TempPathFactory) -> nbformat.NotebookNode:
    """A time-slice probe run as ``run_dir`` (what ``make teach RUN=<probe run>`` does): fit and probe."""
    tmp = tmp_path_factory.mktemp("nbprobe")
    run = write_sim_probe(tmp / "probe", PROBE_QUANTUM, PROBE_SWITCH)
    return _execute(tmp, "probe", NOTEBOOK, {**SMALL, "run_dir": str(run)})


@pytest.fixture(scope="module")
def thin_nb(tmp_path_factory: pytest.TempPathFactory) -> nbformat.NotebookNode:
    """A GPU-like run with too few contended waits, and a probe run given as ``probe_dir``."""
    tmp = tmp_path_factory.mktemp("nbthin")
    run = write_sim_run(tmp / "run", [FFT, GEMM], 4.0, duration_ms=30_000, seed=5)
    probe = write_sim_probe(tmp / "probe", PROBE_QUANTUM, PROBE_SWITCH)
    return _execute(tmp, "thin", NOTEBOOK, {**SMALL, "run_dir": str(run), "probe_dir": str(probe)})


@pytest.fixture(scope="module")
def cpu_nb(tmp_path_factory: pytest.TempPathFactory) -> nbformat.NotebookNode:
    tmp = tmp_path_factory.mktemp("nbcpu")
    run = write_sim_run(tmp / "run", [FFT, GEMM], 4.0, duration_ms=30_000, seed=5)
    _edit_manifest(run, lambda m: m["spec"].update(device="cpu"))
    return _execute(tmp, "cpu", NOTEBOOK, {**SMALL, "run_dir": str(run)})


@pytest.fixture(scope="module")
def lone_nb(tmp_path_factory: pytest.TempPathFactory) -> nbformat.NotebookNode:
    """A run directory without a shared scenario."""
    tmp = tmp_path_factory.mktemp("nblone")
    run = write_sim_run(tmp / "run", [FFT, GEMM], 4.0, duration_ms=10_000, seed=5)
    _edit_manifest(run, lambda m: m["spec"].update(scenarios=m["spec"]["scenarios"][:2]))
    return _execute(tmp, "lone", NOTEBOOK, {**SMALL, "run_dir": str(run)})


def test_kernel_python3_is_this_venvs_python(tmp_path: Path) -> None:
    probe = nbformat.v4.new_notebook(metadata={"kernelspec": {"name": "python3", "display_name": "Python 3",
                                                              "language": "python"}})
    probe.cells = [nbformat.v4.new_code_cell("import sys; print(sys.prefix); print(sys.executable)")]
    src = tmp_path / "probe.ipynb"
    nbformat.write(probe, src)
    nb = _execute(tmp_path, "probe-out", src, {})
    prefix, executable = nb.cells[-1].outputs[0]["text"].split()
    assert prefix == sys.prefix
    assert Path(executable).resolve() == Path(sys.executable).resolve()


def test_committed_notebook_is_clean_and_parameterised() -> None:
    nb = nbformat.read(NOTEBOOK, as_version=4)
    nbformat.validate(nb)
    assert nb.metadata["kernelspec"]["name"] == "kts"
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert all(not c.outputs and c.execution_count is None for c in code)
    params = [c for c in code if "parameters" in c.metadata.get("tags", [])]
    assert len(params) == 1
    for name in ("quantum_ms", "fft_kernel_ms", "fft_period_ms", "gemm_kernel_ms", "gemm_period_ms",
                 "duration_ms", "seed", "run_dir", "probe_dir", "references_dir", "waits_example", "predict_p50",
                 "predict_p99", "predict_clock", "predict_wait", "requests_per_pod", "predict_replicas", "capacity_run",
                 "capacity_slo_ms", "interactive"):
        assert re.search(rf"^{name} = ", params[0].source, re.M), name


def test_static_run_teaches_every_section_with_svg_charts(static_nb: nbformat.NotebookNode) -> None:
    _no_errors(static_nb)
    outs = _outputs(static_nb)
    assert _svgs(static_nb) >= 7  # slice timers, timeline, latency, both clocks, sweeps, MPS model, waiting budget
    assert all(o["data"]["image/svg+xml"].lstrip().startswith("<svg") for o in outs if "image/svg+xml" in o["data"])
    assert not [o for o in outs if any("vegalite" in k or "vega" in k for k in o.get("data", {}))]
    text = _markdown(static_nb)
    # the event rule, stated for both tenants from the model's own numbers
    assert "*before its first instruction*: outside its events" in text
    assert re.search(r"its events span \*\*[0-9.]+ ms\*\* for [0-9.]+ ms of its own work", text)
    m = re.search(r"\*\*Short tenant \(FFT\)\*\*: .* device p99 ([0-9.]+) → ([0-9.]+) ms", text)
    assert m and m.group(1) == m.group(2)
    m = re.search(r"\*\*Long tenant \(GEMM\)\*\*: device p99 ([0-9.]+) → ([0-9.]+) ms", text)
    assert m and float(m.group(2)) > float(m.group(1))  # preempted mid-way: the slice is inside its events
    assert "device time stays the same" not in text and "CUDA events do not see the wait" not in text
    # MPS next to the measured references, the three kinds of waiting on the emulated example, the exercises
    assert "under MPS the FFT's p50 goes" in text and "a share of" in text
    assert re.search(r"\(`mps-limited`\) measured in: [^\n]*h200-2026-11-30-mps-limited\b", text) and "Predicted before measured" in text
    # which slice timer the H200 has, from the committed probe: computed, not typed
    assert re.search(r"Probe `h200-2026-11-30-probe`: measured waits p1 / p50 / p99 = [0-9.]+ / [0-9.]+ / [0-9.]+ ms", text)
    assert "The measured spread is the **switch-in** timer's" in text
    assert "**EMULATED**" in text and "31 s of image pull and start-up" in text  # a 30 s pull + 1 s init
    assert text.count("Your prediction: *") == 4
    assert "How many replicas can this mix (fft, gemm, filled in turn) take with fft: p99 ≤ 1 ms?" in text
    assert "No `run_dir` given" in text and "Fitted quantum" not in text


def test_html_export_loads_nothing_from_the_network(static_nb: nbformat.NotebookNode) -> None:
    # Offline report settings: the lab template's own require.js and MathJax loaders pointed nowhere.
    offline, _ = HTMLExporter(exclude_input=True, require_js_url="", mathjax_url="").from_notebook_node(static_nb)
    assert '<script src="http' not in offline
    assert offline.count('data-mime-type="image/svg+xml"') >= 6
    for heading in ("Which clock sees the neighbour", "MPS: sharing in space", "The three kinds of waiting",
                    "Exercise 1", "Exercise 2", "Exercise 3"):
        assert heading in offline, heading
    # With stock settings, the only remote scripts are those two template loaders: the notebook adds none.
    stock = HTMLExporter(exclude_input=True)
    html, _ = stock.from_notebook_node(static_nb)
    remote = set(re.findall(r'<script src="(http[^"]*)"', html))
    assert remote <= {stock.require_js_url, stock.mathjax_url}


def test_probe_run_fits_with_an_interval_and_shows_the_probe(probe_nb: nbformat.NotebookNode) -> None:
    _no_errors(probe_nb)
    text = _markdown(probe_nb)
    m = re.search(r"Fitted quantum: \*\*([0-9.]+) \[([0-9.]+), ([0-9.]+)\] ms\*\*", text)
    assert m and float(m.group(1)) == pytest.approx(PROBE_QUANTUM, abs=0.02)
    assert float(m.group(2)) <= float(m.group(1)) <= float(m.group(3))
    assert re.search(r"Probe `probe`: quantum 2\.0\d\d \[[0-9.]+, [0-9.]+\] ms, switch cost 0\.1\d\d", text)
    assert "they agree within their intervals" in text
    for tenant in ("tick", "hog"):
        for clock in ("wall", "device"):
            assert re.search(rf"\*\*{tenant}\*\*, {clock}: measured DF [0-9.]+ .*simulated DF [0-9.]+", text)
    # the hog's 2 % growth (51 ms against 50 ms) inside a one-block probe's drift allowance: the
    # text says the model expects it and the interval cannot separate it, never "too few preempted"
    assert "The long tenant (**hog**" in text and "cannot separate" in text and "too few of its" not in text
    assert _svgs(probe_nb) >= 8  # + the fitted waits and measured vs simulated


def test_thin_data_is_not_fitted_and_the_probes_quantum_is_used(thin_nb: nbformat.NotebookNode) -> None:
    _no_errors(thin_nb)
    text = _markdown(thin_nb)
    assert "Quantum fit skipped: too few contended waits" in text and "Fitted quantum" not in text
    assert re.search(r"uses a quantum of 2\.0\d\d ms \(measured by probe probe\)", text)
    assert "(no fit here to compare with)" in text
    assert re.search(r"\*\*gemm\*\*, device: measured DF [0-9.]+", text)


def test_cpu_run_skips_the_fit_and_says_why(cpu_nb: nbformat.NotebookNode, static_nb) -> None:
    _no_errors(cpu_nb)
    text = _markdown(cpu_nb)
    assert re.search(r"Quantum fit skipped: run run ran on the cpu, not a GPU: its waits are the OS scheduler's", text)
    assert "Fitted quantum" not in text and "measured DF" not in text
    assert _svgs(cpu_nb) == _svgs(static_nb)  # every simulator part still renders


def test_run_without_shared_scenario_renders_the_simulator_and_says_why(lone_nb, static_nb) -> None:
    _no_errors(lone_nb)
    text = _markdown(lone_nb)
    assert "Quantum fit skipped: run run has no shared scenario" in text
    assert _svgs(lone_nb) == _svgs(static_nb) and text.count("Your prediction: *") == 4


def test_interactive_mode_builds_sliders_that_redraw(tmp_path: Path) -> None:
    nb = _execute(tmp_path, "interactive", NOTEBOOK, {**SMALL, "interactive": True})
    _no_errors(nb)
    state = nb.metadata["widgets"]["application/vnd.jupyter.widget-state+json"]["state"]
    sliders = [m for m in state.values() if m["model_name"] == "FloatSliderModel"]
    assert {s["state"]["description"] for s in sliders} >= {"quantum (ms)", "GEMM kernel (ms)", "GEMM sleep (ms)"}
    drawn = [o for m in state.values() if m["model_name"] == "OutputModel" for o in m["state"]["outputs"]]
    assert not [o for o in drawn if o["output_type"] == "error"]
    assert len(drawn) == 3  # timeline, latency curves, DF table: the first draw happened


TEACHING_SECTIONS = ("Which clock sees the neighbour", "MPS: sharing in space", "The three kinds of waiting",
                     "EMULATED", "Exercise 1", "Exercise 2", "Exercise 3", "Your prediction:")


@pytest.mark.browser
def test_teaching_notebook_renders_offline_in_chromium(static_render: tuple[nbformat.NotebookNode, Path],
                                                       browser_path: str) -> None:
    """The page ``make teach`` writes, opened in Chromium with the network off."""
    from pagecheck import check_offline_page

    html = static_render[1]
    text = html.read_text()
    for needle in TEACHING_SECTIONS + ("outside its events", "preempted mid-way"):
        assert needle in text, needle
    check_offline_page(browser_path, html, min_charts=7)
