"""The Kubernetes path end to end on kmock's emulator: DCGM telemetry per scenario, and the four notebooks.

The emulator and its fake controllers (tests/k8s_fixtures.FakeCluster) run on their own event
loop in a background thread (``EmulatorThread``), so synchronous code can use them: the backend
here, and the papermill kernels, which are child processes that reach the emulator through a
kubeconfig and the K8S_* / IMAGE / KTS_DCGM_URL variables they inherit.
"""

from __future__ import annotations

import http.server
import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from k8s_fixtures import NS, EmulatorThread, FakeCluster, gpu_node, make_run

from kts_helpers.analyse.load import load_run_telemetry
from kts_helpers.analyse.telemetry import load_telemetry
from kts_helpers.analyse.waits import layered_waits
from kts_helpers.errors import SpecError
from kts_helpers.present.pipeline import build_report
from kts_helpers.run.backends.kubernetes.backend import KubernetesBackend
from kts_helpers.run.experiment import build_backend
from kts_helpers.run.runs import Run
from kts_helpers.run.spec import ExperimentParams
from kts_helpers.run.telemetry._store import read_status

REPO = Path(__file__).resolve().parent.parent
FIXTURE = Path(__file__).parent / "fixtures" / "dcgm_metrics.txt"

pytestmark = pytest.mark.timeout(120)


class _Metrics(http.server.BaseHTTPRequestHandler):
    """dcgm-exporter's /metrics page (the fixture), 404 elsewhere: the exporter of the emulated node gpu-1, its
    GPU 0 the one the emulator's workers report (a page of another node or GPU is refused: test_k8s_conditions)."""

    def do_GET(self) -> None:  # noqa: N802 - http.server's naming
        page = FIXTURE.read_bytes().replace(b"gpu-node-a", b"gpu-1").replace(
            b"GPU-0b6c8a1e-2f4d-4c1b-9a7e-1d2c3b4a5f60", b"GPU-fake-0")
        body, code = (page, 200) if self.path == "/metrics" else (b"not found", 404)
        self.send_response(code)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def exporter(http_server) -> str:
    return http_server(_Metrics) + "/metrics"


@pytest.fixture
def emulator() -> Iterator[EmulatorThread]:
    with EmulatorThread() as emu:
        emu.call(lambda fc: fc.add_node(gpu_node("gpu-1")))
        yield emu


# ------------------------------------------------------------------------------------------ DCGM


def _run_shared_with_dcgm(emulator: EmulatorThread, url: str, tmp_path: Path) -> Run:
    """The shared scenario on the emulated cluster, with the backend scraping ``url`` as dcgm-exporter."""
    backend = emulator.call(lambda fc: fc.backend(dcgm_url=url, dcgm_interval_ms=50))
    run, spec = make_run(tmp_path)
    result = backend.run_scenario(run, spec.scenario("shared"), timeout_s=10, progress=False)
    assert result.status == "complete"
    return run


def test_dcgm_exporter_is_scraped_while_a_scenario_runs(emulator: EmulatorThread, exporter: str,
                                                        tmp_path: Path) -> None:
    run = _run_shared_with_dcgm(emulator, exporter, tmp_path)
    out = run.log_dir("shared") / "telemetry.parquet"
    assert out.is_file()
    status = read_status(out)
    assert status["status"] == "complete" and status["source"] == "dcgm" and status["url"] == exporter
    assert status["scrapes"] >= 1 and status["samples"] == 3 * status["scrapes"]  # 3 rows per page
    info = run.manifest()["scenarios"]["shared"]
    assert info["status"] == "complete" and info["backend"] == "kubernetes"
    assert info["telemetry"] == status
    tel = load_telemetry(out)
    assert "sm_clock_mhz" in tel.columns and set(tel["sm_clock_mhz"]) == {1755.0, 345.0}
    assert tel["pod"].dropna().unique().tolist() == ["kts-fft-0", "kts-gemm-0"]
    # the analysis reads it like the NVML sampler's
    frame, statuses = load_run_telemetry(run, run.read())
    assert statuses["shared"]["status"] == "complete" and len(frame) == status["samples"]
    assert set(frame["scenario"]) == {"shared"}


def test_unreachable_dcgm_exporter_does_not_fail_the_run(emulator: EmulatorThread, closed_port: str,
                                                         tmp_path: Path) -> None:
    run = _run_shared_with_dcgm(emulator, closed_port, tmp_path)
    info = run.manifest()["scenarios"]["shared"]
    assert info["status"] == "complete" and run.manifest()["status"] != "failed"
    assert info["telemetry"]["status"] in ("absent", "partial") and info["telemetry"]["samples"] == 0
    assert "unreachable" in info["telemetry"]["reason"] and "\n" not in info["telemetry"]["reason"]
    assert load_telemetry(run.log_dir("shared") / "telemetry.parquet").empty
    # the tenants' logs are there all the same (as the pod printed them: its barrier's ready lines first)
    for t in ("fft", "gemm"):
        lines = run.log_path("shared", t).read_text().splitlines()
        assert lines[0].startswith(f"kts_worker: ready tenant={t} ")
        assert next(ln for ln in lines if ln.startswith("KTS_")).startswith("KTS_META")


def test_without_dcgm_url_telemetry_is_recorded_absent(emulator: EmulatorThread, tmp_path: Path) -> None:
    backend = emulator.call(lambda fc: fc.backend())
    run, spec = make_run(tmp_path)
    backend.run_scenario(run, spec.scenario("shared"), timeout_s=10, progress=False)
    tel = run.manifest()["scenarios"]["shared"]["telemetry"]
    assert tel["status"] == "absent" and "KTS_DCGM_URL" in tel["reason"]
    assert not (run.log_dir("shared") / "telemetry.status.json").exists()


def test_dcgm_url_comes_from_the_environment_unless_given(emulator: EmulatorThread, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KUBECONFIG", str(emulator.kubeconfig(tmp_path / "kubeconfig")))
    monkeypatch.setenv("K8S_CONTEXT", "kmock")
    monkeypatch.setenv("KTS_DCGM_URL", "http://dcgm-exporter.gpu-operator:9400/metrics")
    params = ExperimentParams(profile="tiny", backend="kubernetes")
    backend = build_backend(params, "cuda")
    assert isinstance(backend, KubernetesBackend) and backend.context == "kmock"
    assert backend.dcgm_url == "http://dcgm-exporter.gpu-operator:9400/metrics"
    assert build_backend(params, "cuda", {"dcgm_url": "http://127.0.0.1:9400/metrics"}).dcgm_url == \
        "http://127.0.0.1:9400/metrics"
    monkeypatch.delenv("KTS_DCGM_URL")
    assert build_backend(params, "cuda").dcgm_url is None


def test_bad_dcgm_options_fail_fast(emulator: EmulatorThread) -> None:
    with pytest.raises(SpecError, match="dcgm_url must be an http"):
        emulator.call(lambda fc: fc.backend(dcgm_url="dcgm-exporter:9400"))
    with pytest.raises(SpecError, match="dcgm_interval_ms must be > 0"):
        emulator.call(lambda fc: fc.backend(dcgm_url="http://x:9400/metrics", dcgm_interval_ms=0))


# ------------------------------------------------------------------------------------------ notebooks


@pytest.mark.e2e
def test_notebooks_run_on_kubernetes_and_report_layered_waits(emulator: EmulatorThread, closed_port: str,
                                                              tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def script(fc: FakeCluster) -> None:
        fc.log_iterations = 20
        fc.placement_delay_s = {"gemm": 3}  # gemm waits 5 s for a node, fft 2 s

    emulator.call(script)
    kubeconfig = emulator.kubeconfig(tmp_path / "kubeconfig")
    # The papermill kernels are child processes: they inherit these.
    monkeypatch.setenv("KUBECONFIG", str(kubeconfig))
    monkeypatch.setenv("K8S_CONTEXT", "kmock")
    monkeypatch.setenv("K8S_NAMESPACE", NS)
    monkeypatch.setenv("IMAGE", "kts-worker:e2e")
    monkeypatch.setenv("KTS_DCGM_URL", closed_port)  # an exporter that is down must not fail the run
    for var in ("K8S_NODE_SELECTOR", "K8S_QUEUE", "K8S_RUNTIME_CLASS", "KUBERNETES_SERVICE_HOST"):
        monkeypatch.delenv(var, raising=False)
    runs, reports = tmp_path / "runs", tmp_path / "report"

    html_path = build_report(
        {"backend": "kubernetes", "profile": "tiny", "iterations": 5, "calibrate_iterations": 0, "timeout_s": 60,
         "backend_options": {"start_delay_s": 3.0, "poll_s": 0.1, "schedule_timeout_s": 5.0,
                             "cleanup_timeout_s": 5.0, "dcgm_interval_ms": 100}},
        runs_root=runs, report_dir=reports, notebooks_dir=REPO / "notebooks", cwd=REPO)

    run_dir = next(p for p in runs.iterdir() if p.is_dir() and not p.name.startswith("."))
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["status"] == "complete"
    env = manifest["environment"]
    assert env["backend"] == "kubernetes" and env["context"] == "kmock" and env["node"] == "gpu-1"
    assert env["summary"] == "Kubernetes sees 4 GPUs; the node has 1"
    scenarios = manifest["scenarios"]
    assert set(scenarios) == {"baseline-fft", "baseline-gemm", "shared"}
    for name, info in scenarios.items():
        assert info["status"] == "complete" and info["backend"] == "kubernetes", name
        assert info["image"] == "kts-worker:e2e" and info["namespace"] == NS and info["node"] == "gpu-1"
        assert info["telemetry"]["status"] == "absent" and info["telemetry"]["url"] == closed_port
        assert info["how"] == "submitted" and info["lease"]["name"] == "kts/kts-node-gpu-1"
        for tenant, ev in info["tenants"].items():
            assert ev["outcome"] == "complete" and ev["node"] == "gpu-1", (name, tenant)
            assert ev["missed_start_barrier"] is False, (name, tenant)
            log = run_dir / "logs" / name / f"{tenant}.log"
            assert ev["log"] == f"logs/{name}/{tenant}.log"
            lines = [ln for ln in log.read_text().splitlines() if ln.startswith("KTS_")]  # not the ready lines
            assert lines[0].startswith("KTS_META,v2") and len(lines) >= 21 + (2 if name == "shared" else 0)
            assert all(f",{tenant}," in ln for ln in lines[1:])
    assert sorted(scenarios["shared"]["tenants"]) == ["fft", "gemm"]
    waits = layered_waits(Run(run_dir).read()).set_index(["scenario", "tenant"])
    assert waits.loc[("shared", "gemm"), "placement_wait_s"] >= 3  # gemm waited 3 s for its node
    assert (waits["startup_s"] >= 0).all() and (waits["barrier_wait_s"] > 0).all() and (waits["timed_loop_s"] > 0).all()
    assert waits["clock_skew"].eq("").all()
    (build,) = (reports / "build" / run_dir.name).iterdir()  # executed notebooks and tables: not in the run
    assert sorted(p.name for p in build.glob("*.ipynb")) == [
        "00-setup.ipynb", "01-baseline.ipynb", "02-shared.ipynb", "03-analysis.ipynb"]
    assert "Kubernetes sees 4 GPUs; the node has 1" in (build / "00-setup.ipynb").read_text()
    assert not (run_dir / "notebooks").exists() and not (run_dir / "summary.json").exists()
    # the cluster is left clean
    assert emulator.call(lambda fc: fc.live("batch/v1/jobs")) == {}
    assert emulator.call(lambda fc: fc.live("v1/pods")) == {}

    html = html_path.read_text()
    assert html_path.is_file() and manifest["run_id"] in html
    assert "Kubernetes sees 4 GPUs; the node has 1" in html  # describe()'s summary, in the environment table
    assert "Three kinds of waiting" in html and "placement" in html  # sections.kubernetes_waits ...
    table = html[html.index("Three kinds of waiting"):]
    table = table[:table.index("</table>")]
    assert "placement wait s" in table and "barrier wait s" in table and "kts-shared-" in table  # ... its table
    # the API's layers at their one-second resolution: whole seconds, never "3.000" (the worker-clock
    # layers are float seconds, and one of them may well round to "9.000": only the API columns are checked)
    cells = _table_cells(table + "</table>")
    placement = int(waits.loc[("shared", "gemm"), "placement_wait_s"])
    assert str(placement) in cells["placement wait s"]
    assert "placement wait s" in cells, sorted(cells)  # admission, start-up: empty here, so not shown
    for column in {"admission wait s", "placement wait s", "startup s"} & set(cells):
        assert all(re.fullmatch(r"\d*", v) for v in cells[column]), (column, cells[column])
    assert "unreachable" in html  # why there is no GPU telemetry
    summary = json.loads((build / "summary.json").read_text())
    assert {r["tenant"] for r in summary if r["kind"] == "shared"} == {"fft", "gemm"}


def _table_cells(html: str) -> dict[str, list[str]]:
    """The text of a rendered table's body cells, by column heading (stdlib parser: no lxml here)."""
    from html.parser import HTMLParser

    class Cells(HTMLParser):
        def __init__(self) -> None:
            super().__init__()
            self.rows: list[list[str]] = []
            self.cell: list[str] | None = None

        def handle_starttag(self, tag, attrs):
            if tag == "tr":
                self.rows.append([])
            elif tag in ("td", "th"):
                self.cell = []

        def handle_endtag(self, tag):
            if tag in ("td", "th") and self.cell is not None:
                self.rows[-1].append("".join(self.cell).strip())
                self.cell = None

        def handle_data(self, data):
            if self.cell is not None:
                self.cell.append(data)

    parser = Cells()
    parser.feed(html)
    heading, *body = [row for row in parser.rows if row]
    return {name: [row[i] for row in body if i < len(row)] for i, name in enumerate(heading) if name}
