"""Every profile option runs and reports, and every shared timed iteration co-runs: the tiny profile, once per option.

One option goes through ``make report``'s whole path (papermill: setup -> baseline -> shared -> analysis, then
nbconvert): ``mps``, whose backend options also cross papermill's parameters. The others run through the call the
run notebooks make (``run_experiment``) and the analysis notebook's own cells in this process (``analysis_cells``):
the notebooks and their rendering are the same for every option and are rendered in full once per kind of run
(test_e2e_references, from the H200's data), so a full render per option only repeated ~20 s of kernels and
nbconvert. The co-running judge reads the raw logs only (``conftest.corunning_fractions``), never the kit's analysis.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from analysis_cells import empty_charts, run_analysis
from conftest import corunning_fractions, fake_mps_control

from kts_helpers.present.pipeline import build_report
from kts_helpers.run.experiment import run_experiment

REPO = Path(__file__).resolve().parent.parent
# A victim that sleeps next to a neighbour that never does: the neighbour is done long before the victim.
BASE = {"profile": "tiny", "device": "cpu", "iterations": 20, "matrix_size": 32, "sleep_ms_fft": 20.0,
        "sleep_ms_gemm": 0.0, "sleep_ms_llm": 1.0, "calibrate_iterations": 0}
LLM_ENV = {"LLM_D_MODEL": "32", "LLM_LAYERS": "1", "LLM_HEADS": "2", "LLM_PROMPT_TOKENS": "8",
           "LLM_DECODE_TOKENS": "3", "LLM_VOCAB": "64"}
OPTIONS = {
    "repeats": ({"repeats": 2}, {"shared-r1", "shared-r2"}),
    "mps": ({"sharing": "timeslice,mps"}, {"shared", "shared-mps"}),
    "matrix": ({"workloads": "fft,gemm,llm", "matrix": True},
               {"shared-fft+gemm", "shared-fft+llm", "shared-gemm+llm", "shared-all"}),
    "four-tenants": ({"workloads": "fft,fft,gemm,llm"}, {"shared"}),
    "open-loop": ({"arrival": "poisson", "rate_hz": 50.0, "duration_s": 0.4}, {"shared"}),
    "llm": ({"workloads": "fft,llm"}, {"shared"}),
}

FULL_RENDER = "mps"

pytestmark = pytest.mark.e2e


# make test-all's only: "llm" (fft,llm), whose checks are the four-tenants run's (fft,fft,gemm,llm: a closed-loop LLM
# in a plain shared scenario, the same assertions); "matrix" and "open-loop", whose runs test_beyond makes in make
# test through the same run_experiment call (its matrix and its Poisson arrivals), with their sections and co-running
# checked there; the options' own report cells are the same code for every option (``analysis_cells``).
ALL_ONLY = {"llm", "matrix", "open-loop"}


@pytest.mark.parametrize("option", [pytest.param(o, marks=pytest.mark.all_references if o in ALL_ONLY else ())
                                    for o in OPTIONS])
def test_option_reports_and_every_shared_iteration_coruns(option: str, tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    extra, shared = OPTIONS[option]
    for k, v in LLM_ENV.items():
        monkeypatch.setenv(k, v)  # inherited by the notebooks' kernel and then by the workers
    params = {**BASE, **extra, "label": option}
    if option == "mps":
        fake, record = fake_mps_control(tmp_path)
        params["backend_options"] = {"mps_control": str(fake)}
    if option == FULL_RENDER:
        html = build_report(params, runs_root=tmp_path / "runs", report_dir=tmp_path / "report",
                            notebooks_dir=REPO / "notebooks", cwd=REPO)
        text = html.read_text()
        assert "Headline table" in text and "Overlap window" in text and "data:image/svg+xml" in text
        run_dir = next(p for p in (tmp_path / "runs").iterdir() if not p.name.startswith("."))
    else:
        run_dir = run_experiment(params, root=tmp_path / "runs", progress=False).path
        shown = run_analysis(run_dir)
        assert "Headline table" in shown.text and "Overlap window" in shown.text
        assert shown.charts and empty_charts(shown) == []
        assert shown.namespace["data"].problems == []
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["status"] == "complete"
    got = corunning_fractions(run_dir)
    assert {k.split("/")[0] for k in got} == shared
    for series, (timed, corunning, _pads) in got.items():
        assert timed > 0 and corunning == timed, f"{series}: {corunning}/{timed} timed iterations co-ran"
    # the neighbour that never sleeps padded while the victim finished (padding is what made it co-run)
    if "gemm" in (extra.get("workloads") or "fft,gemm"):
        assert any(pads > 0 for key, (_t, _c, pads) in got.items() if key.endswith("/gemm"))
    if option == "mps":
        assert "cmd=quit" in record.read_text()
