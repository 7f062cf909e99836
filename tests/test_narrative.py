"""The report's sentences say only what the numbers show; run paths resolve from notebooks/ and the repo root."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from kts_helpers.analyse.load import RunData
from kts_helpers.present import narrative
from kts_helpers.present.notebook import metrics, open_run_dir

REPO = Path(__file__).resolve().parent.parent
REFERENCE = "data/reference/h200-2026-11-30-article"


def _table(rows: dict[str, tuple[float, float, float, float, float, float, str]], metric: str = "wall") -> pd.DataFrame:
    """{tenant: (p50 alone, p99 alone, thr alone, p50 shared, p99 shared, thr shared, reading)} as summary rows."""
    out = []
    for tenant, (a50, a99, athr, s50, s99, sthr, reading) in rows.items():
        base = {"tenant": tenant, "workload": tenant, "phase": "op", "metric": metric}
        out.append({**base, "kind": "baseline", "group": f"baseline-{tenant}", "p50_ms": a50, "p99_ms": a99,
                    "throughput_per_s": athr, "reading": None})
        out.append({**base, "kind": "shared", "group": "shared", "p50_ms": s50, "p99_ms": s99,
                    "throughput_per_s": sthr, "reading": reading})
    return pd.DataFrame(out)


def test_the_article_reading_only_where_the_tail_moved() -> None:
    text = narrative.at_a_glance(_table({"fft": (1.0, 2.0, 100, 1.02, 3.6, 99, "degraded"),
                                         "gemm": (3.0, 4.0, 50, 3.0, 4.1, 50, "no detectable change")}))
    assert "**fft** median +2 %, p99 +80 %, throughput -1 %" in text and "**gemm** median +0 %, p99 +2 %" in text
    assert "For **fft** the tail moved more than twice as much as the median." in text
    assert "Throughput, a mean, moved less than half as much as the p99 for **fft**" in text
    assert "gemm** the tail" not in text and "No tenant's verdict" not in text


def test_no_tail_claim_when_nothing_moved() -> None:
    text = narrative.at_a_glance(_table({"fft": (1.0, 2.0, 100, 0.4, 1.9, 101, "no detectable change"),
                                         "gemm": (3.0, 4.0, 50, 3.1, 4.2, 49, "no detectable change")}))
    assert "No tenant's verdict reads a slowdown" in text
    assert "tail moved" not in text and "hides" not in text
    small = narrative.at_a_glance(_table({"fft": (1.0, 2.0, 100, 1.0, 2.1, 100, "small slowdown (< 10 %)"),
                                          "gemm": (3.0, 4.0, 50, 3.0, 4.0, 50, "no detectable change")}))
    assert "No tenant's verdict reads a slowdown" not in small  # a small slowdown is a slowdown, in its own words


def test_a_shifted_distribution_is_not_called_a_tail_effect() -> None:
    text = narrative.at_a_glance(_table({"fft": (1.0, 2.0, 100, 1.6, 3.2, 63, "degraded"),
                                         "gemm": (3.0, 4.0, 50, 2.0, 2.0, 60, "faster when shared")}))
    assert "For **fft** the whole distribution moved" in text and "tail moved more" not in text
    assert "hides" not in text  # throughput fell as much as the p99 rose
    assert "**gemm** ran faster when shared" in text


def test_decomposition_claims_follow_the_numbers() -> None:
    class Gpu:
        on_gpu = two_clocks = True

    dev = _table({"fft": (0.4, 0.45, 0, 0.25, 0.44, 0, "no detectable change")}, "device")
    wait = _table({"fft": (0.1, 0.2, 0, 0.3, 1.2, 0, "degraded")}, "wait")
    text = narrative.decomposition_text(Gpu(), pd.concat([dev, wait]))
    assert "p99 wait 0.200 → 1.200 ms, p99 device time 0.450 → 0.440 ms" in text
    assert "For **fft** the wait grew more than the device time changed" in text
    flat = _table({"fft": (0.1, 0.2, 0, 0.1, 0.2, 0, "no detectable change")}, "wait")
    assert "wait grew" not in narrative.decomposition_text(Gpu(), pd.concat([dev, flat]))
    assert "waiting for the GPU" not in text

    class OldCpu:  # a worker before 2026-12-01 wrote one number for both clocks
        on_gpu = two_clocks = False

    old = narrative.decomposition_text(OldCpu(), pd.concat([dev, wait]))
    assert "nothing to split" in old and "p99 wait" not in old

    class Cpu:  # wall from the due time, device the operation alone
        on_gpu, two_clocks = False, True

    cpu = narrative.decomposition_text(Cpu(), pd.concat([dev, wait]))
    assert "p99 wait 0.200 → 1.200 ms" in cpu and "nothing to split" not in cpu
    assert "the neighbour holding the core" in cpu and "time-slices" not in cpu and "CUDA events" not in cpu


@pytest.mark.parametrize(("on_gpu", "waits", "shown"), [
    (True, [0.0, 0.0], ("wall", "device")),  # CUDA events: a clock of its own even where it reads the same
    (False, [0.0, 0.0], ("wall",)),  # a CPU worker before 2026-12-01 wrote one number twice: one figure
    (False, [0.0, 0.3], ("wall", "device")),  # wall from the due time: the wait for the core between them
])
def test_device_figures_only_where_device_time_is_a_clock_of_its_own(on_gpu, waits, shown) -> None:
    class Manifest:
        pass

    m = Manifest()
    m.on_gpu = on_gpu
    device = pd.Series([1.0, 2.0])
    frame = pd.DataFrame({"device_ms": device, "wall_ms": device + waits})
    data = RunData(run=None, manifest=m, iterations=frame, meta=pd.DataFrame(), parse_issues=pd.DataFrame())
    assert data.two_clocks == (len(shown) == 2) and metrics(data) == shown


@pytest.mark.parametrize("where", ["repo", "notebooks"])
def test_run_paths_resolve_from_the_repo_root_and_from_notebooks(where: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO if where == "repo" else REPO / "notebooks")
    assert open_run_dir(REFERENCE).path.resolve() == (REPO / REFERENCE).resolve()


@pytest.mark.parametrize("where", ["repo", "notebooks"])
def test_path_parameters_mean_the_same_folder_from_the_repo_root_and_from_notebooks(
        where: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Lab starts a kernel in notebooks/, papermill in the root: the teaching defaults and a runs root must not
    change meaning with it (the waits example was not found in Lab once)."""
    from kts_helpers.present.notebook import _runs_root, repo_path

    monkeypatch.chdir(REPO if where == "repo" else REPO / "notebooks")
    for default in ("data/reference", "data/examples/k8s-emulated-waits"):
        assert repo_path(default).resolve() == (REPO / default).resolve()
        assert repo_path(default).is_dir()
    assert repo_path(None) is None and repo_path("") is None
    assert repo_path("no/such/dir") == Path("no/such/dir")  # left as given, for the caller's own error
    assert _runs_root("data/runs") == REPO / "data" / "runs"
    assert _runs_root("/abs/runs") == Path("/abs/runs")


def test_a_path_in_the_current_directory_wins_over_the_repo_root(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    from kts_helpers.present.notebook import repo_path

    (tmp_path / "data" / "reference").mkdir(parents=True)
    monkeypatch.chdir(tmp_path)
    assert repo_path("data/reference") == Path("data/reference")
    assert repo_path("data/examples/k8s-emulated-waits").resolve() == (REPO / "data/examples/k8s-emulated-waits")


def test_the_stated_verdict_rule_names_each_way_to_degraded_at_its_own_level() -> None:
    """Methods states the rule ``analyse.verdict`` applies: the collided launches' test with its own level."""
    from kts_helpers.analyse.verdict import collided_alpha, exceedance_alpha

    text = narrative.verdict_rule_text()
    assert f"p ≤ {exceedance_alpha():g}" in text and f"p ≤ {collided_alpha(design='one block, timestamps'):g}" in text
    assert "local pairing" in text and "whatever the tenant" in text  # the design's weights; one prior (issue 52)
    assert "launches that found a neighbour's operation in flight" in text
    assert "same-moment control" in text and "Holm among the wall clocks" in text and "small slowdown (< 10 %)" in text
    # issue 52: the host covariate and its balance, blocks=auto's looks at their levels, "no change" holding the p99
    from kts_helpers.analyse.blockseq import LOOKS, nominal_alphas

    assert "covariate" in text and "balance check" in text and "the look that stopped it" in text
    assert f"{100 * nominal_alphas(LOOKS, 0.025)[0]:.2g} %" in text and "the p99 stayed within the margin" in text


def test_the_workloads_caveat_names_what_the_tenants_stand_for() -> None:
    """A real-model run's report said its tenants were "synthetic stand-ins (an FFT …, a GEMM …)" (the caveat was
    one fixed sentence). The caveat follows the run's workloads: the kit's kernels, real models, a user's own."""
    from kts_helpers.present.narrative import _workloads_caveat

    kit = _workloads_caveat(("fft", "gemm"))
    assert kit.startswith("Workloads are synthetic stand-ins (an FFT")
    real = _workloads_caveat(("llama-decode", "bert", "resnet"))
    assert real.startswith("Workloads: llama-decode, bert, resnet: real model definitions") and "FFT" not in real
    mixed = _workloads_caveat(("fft", "bert", "my_pkg.tenants:make_thing"))
    assert mixed == ("Workloads: bert: real model definitions (transformers configs, random weights, closed loop); a "
                     "served model's batching and arrivals differ; my_pkg.tenants:make_thing: the user's own workloads; "
                     "fft: the kit's synthetic stand-ins.")
