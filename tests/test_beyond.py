"""Beyond the article, on the CPU: a contention matrix with the LLM-like tenant and open-loop arrivals run
end to end through the real workers, and the report sections and `summarize --ci` come out of them."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from kts_helpers.analyse import compare
from kts_helpers.analyse.load import load_run
from kts_helpers.cli import main
from kts_helpers.present import sections
from kts_helpers.run.experiment import run_experiment

LLM_ENV = {"LLM_D_MODEL": "32", "LLM_LAYERS": "1", "LLM_HEADS": "2", "LLM_PROMPT_TOKENS": "8",
           "LLM_DECODE_TOKENS": "3", "LLM_VOCAB": "64"}


@pytest.fixture(scope="module")
def matrix_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    mp = pytest.MonkeyPatch()
    for k, v in LLM_ENV.items():
        mp.setenv(k, v)
    try:
        run = run_experiment({"profile": "tiny", "device": "cpu", "workloads": "fft,gemm,llm", "matrix": True,
                              "iterations": 25, "matrix_size": 32, "arrival": "poisson", "rate_hz": 200.0,
                              "calibrate_iterations": 0}, root=tmp_path_factory.mktemp("beyond"), progress=False)
    finally:
        mp.undo()
    return run.path


def test_matrix_scenarios_and_sections(matrix_run: Path) -> None:
    manifest = json.loads((matrix_run / "manifest.json").read_text())
    assert manifest["status"] == "complete"
    assert set(manifest["scenarios"]) == {"baseline-fft", "baseline-gemm", "baseline-llm", "shared-fft+gemm",
                                          "shared-fft+llm", "shared-gemm+llm", "shared-all"}
    data = load_run(matrix_run)
    assert set(data.iterations.loc[data.iterations["workload"] == "llm", "phase"]) == {"prefill", "decode"}
    m = compare.contention_matrix(data, n_resamples=200, seed=1)
    assert {("fft", "gemm"), ("gemm", "fft"), ("llm", "all others")} <= set(zip(m["victim"], m["neighbours"], strict=True))
    assert (m["df_lo"] <= m["df"]).all() and (m["df"] <= m["df_hi"]).all()
    titles = [s.markdown.splitlines()[0] for s in sections.build(data, n_resamples=200, seed=1)]
    assert any("Contention matrix" in t for t in titles)
    assert any("Open-loop" in t for t in titles)
    assert any("LLM-like" in t for t in titles)


def test_every_timed_iteration_of_every_pair_and_of_the_open_loop_co_ran(matrix_run: Path) -> None:
    """The matrix's four shared scenarios, open-loop arrivals in each: every timed iteration co-ran with every
    neighbour, judged from the raw logs only (``conftest.corunning_fractions``, not the kit's analysis)."""
    from conftest import corunning_fractions

    got = corunning_fractions(matrix_run)
    assert {k.split("/")[0] for k in got} == {"shared-fft+gemm", "shared-fft+llm", "shared-gemm+llm", "shared-all"}
    for series, (timed, corunning, _pads) in got.items():
        assert timed > 0 and corunning == timed, f"{series}: {corunning}/{timed} timed iterations co-ran"


def test_open_loop_latency_counts_from_intended_arrival(matrix_run: Path) -> None:
    data = load_run(matrix_run)
    fft = data.iterations[data.iterations["workload"] == "fft"]
    assert (fft["intended_ns"] <= fft["start_ns"]).all()
    assert (fft["response_ms"] >= fft["wall_ms"] - 1e-9).all()  # response = queueing + service
    gaps = np.diff(np.sort(fft[fft["scenario"] == "baseline-fft"]["intended_ns"].to_numpy())) / 1e6
    assert 1.0 < np.mean(gaps) < 20.0  # Poisson at 200/s: mean gap 5 ms


def test_summarize_ci_adds_intervals(matrix_run: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = [matrix_run / "logs/baseline-fft/fft.log", matrix_run / "logs/baseline-gemm/gemm.log"]
    shared = [matrix_run / "logs/shared-fft+gemm/fft.log", matrix_run / "logs/shared-fft+gemm/gemm.log"]
    code = main(["summarize", "--baseline", *map(str, base), "--shared", *map(str, shared), "--metric", "wall",
                 "--format", "json", "--ci", "--resamples", "300", "--seed", "3"])
    assert code == 0
    rows = json.loads(capsys.readouterr().out)
    for r in rows:
        for key, est in (("p50_ci", "p50_ms"), ("p95_ci", "p95_ms"), ("p99_ci", "p99_ms"), ("jitter_ci", "jitter")):
            if r[key] is None:  # no bound at all: too few effective samples even for a median (0.5^m > 0.025)
                assert r["n"] < 50, (key, r)
                continue
            lo, hi = r[key]  # None: a bound these few samples do not hold
            assert (lo is None or lo <= r[est]) and (hi is None or r[est] <= hi)
            if key == "p99_ci":
                assert r["n"] < 367 and hi is None  # no 95 % upper bound for a p99 below 367 samples
            if key == "p50_ci" and r["n"] >= 9:
                assert lo <= r["p50_ms"] <= hi
        if r["kind"] == "shared":
            assert r["df_ci"] is None  # neither p99 has an upper bound: DF has no bound on either side
            assert r["reading"] == "inconclusive" and " < 200" in r["reading_detail"]  # too few to read
        else:
            assert "df" not in r and r.get("df_ci") is None
