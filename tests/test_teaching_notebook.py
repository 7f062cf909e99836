"""The teaching notebook: committed clean, runs under papermill in seconds, renders offline (SVG)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import nbformat
import papermill as pm
import pytest
from nbconvert import HTMLExporter

from kts_helpers.teaching.model import SimTenant
from kts_helpers.teaching.synthetic import write_sim_run

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK = ROOT / "notebooks" / "10-teaching-timeslice-simulator.ipynb"
SMALL = {"duration_ms": 20_000.0, "seed": 1}
TRUE_QUANTUM = 4.0  # the quantum of the synthetic run; on the notebook's default candidate grid


def _execute(tmp: Path, name: str, notebook: Path, parameters: dict) -> nbformat.NotebookNode:
    out = tmp / f"{name}.ipynb"
    pm.execute_notebook(str(notebook), str(out), parameters=parameters, kernel_name="python3", cwd=str(ROOT),
                        progress_bar=False, execution_timeout=120)
    return nbformat.read(out, as_version=4)


def _outputs(nb: nbformat.NotebookNode) -> list[dict]:
    return [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]


def _markdown(nb: nbformat.NotebookNode) -> str:
    return "\n".join(o["data"]["text/markdown"] for o in _outputs(nb) if "text/markdown" in o.get("data", {}))


@pytest.fixture(scope="module")
def static_nb(tmp_path_factory: pytest.TempPathFactory) -> nbformat.NotebookNode:
    return _execute(tmp_path_factory.mktemp("nb"), "static", NOTEBOOK, SMALL)


@pytest.fixture(scope="module")
def run_nb(tmp_path_factory: pytest.TempPathFactory) -> nbformat.NotebookNode:
    tmp = tmp_path_factory.mktemp("nbrun")
    run = write_sim_run(tmp / "run", [SimTenant("fft", 1.0, 100.0, 5.0), SimTenant("gemm", 30.0, 150.0, 5.0)],
                        TRUE_QUANTUM, duration_ms=60_000, seed=5)
    return _execute(tmp, "with-run", NOTEBOOK, {**SMALL, "run_dir": str(run)})


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
    assert nb.metadata["kernelspec"]["name"] == "python3"
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert all(not c.outputs and c.execution_count is None for c in code)
    params = [c for c in code if "parameters" in c.metadata.get("tags", [])]
    assert len(params) == 1
    for name in ("quantum_ms", "fft_kernel_ms", "fft_period_ms", "gemm_kernel_ms", "gemm_period_ms",
                 "duration_ms", "seed", "run_dir", "interactive"):
        assert re.search(rf"^{name} = ", params[0].source, re.M), name


def test_static_run_has_no_error_and_svg_charts(static_nb: nbformat.NotebookNode) -> None:
    outs = _outputs(static_nb)
    assert not [o for o in outs if o["output_type"] == "error"]
    svgs = [o for o in outs if "image/svg+xml" in o.get("data", {})]
    assert len(svgs) >= 3  # timeline, latency curves, DF sweeps
    assert all(o["data"]["image/svg+xml"].lstrip().startswith("<svg") for o in svgs)
    assert not [o for o in outs if any("vegalite" in k or "vega" in k for k in o.get("data", {}))]
    text = _markdown(static_nb)
    assert "waited **" in text and "No `run_dir` given" in text
    assert "Fitted quantum" not in text


def test_html_export_loads_nothing_from_the_network(static_nb: nbformat.NotebookNode) -> None:
    # Offline report settings: the lab template's own require.js and MathJax loaders pointed nowhere.
    offline, _ = HTMLExporter(exclude_input=True, require_js_url="", mathjax_url="").from_notebook_node(static_nb)
    assert '<script src="http' not in offline
    assert offline.count('data-mime-type="image/svg+xml"') >= 3
    # With stock settings, the only remote scripts are those two template loaders: the notebook adds none.
    stock = HTMLExporter(exclude_input=True)
    html, _ = stock.from_notebook_node(static_nb)
    remote = set(re.findall(r'<script src="(http[^"]*)"', html))
    assert remote <= {stock.require_js_url, stock.mathjax_url}


def test_run_dir_puts_measured_next_to_simulated(run_nb: nbformat.NotebookNode) -> None:
    outs = _outputs(run_nb)
    assert not [o for o in outs if o["output_type"] == "error"]
    assert len([o for o in outs if "image/svg+xml" in o.get("data", {})]) >= 4  # + the comparison chart
    text = _markdown(run_nb)
    m = re.search(r"Fitted quantum: \*\*([0-9.]+) ms\*\*", text)
    assert m and float(m.group(1)) == TRUE_QUANTUM
    assert re.search(r"\*\*fft\*\*: measured DF [0-9.]+, simulated DF [0-9.]+", text)


def test_interactive_mode_builds_sliders_that_redraw(tmp_path: Path) -> None:
    nb = _execute(tmp_path, "interactive", NOTEBOOK, {**SMALL, "interactive": True})
    assert not [o for o in _outputs(nb) if o["output_type"] == "error"]
    state = nb.metadata["widgets"]["application/vnd.jupyter.widget-state+json"]["state"]
    sliders = [m for m in state.values() if m["model_name"] == "FloatSliderModel"]
    assert {s["state"]["description"] for s in sliders} >= {"quantum (ms)", "GEMM kernel (ms)", "GEMM sleep (ms)"}
    drawn = [o for m in state.values() if m["model_name"] == "OutputModel" for o in m["state"]["outputs"]]
    assert not [o for o in drawn if o["output_type"] == "error"]
    assert len(drawn) == 3  # timeline, latency curves, DF table: the first draw happened
