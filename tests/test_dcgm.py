"""DCGM-exporter scraping: the parser on a realistic page, the HTTP faults, the polling loop."""

from __future__ import annotations

import http.server
import time
import urllib.request
from pathlib import Path

import pandas as pd
import pytest

from kts_helpers.analyse.telemetry import attach_telemetry, load_telemetry
from kts_helpers.errors import KtsError
from kts_helpers.run.telemetry._store import TelemetryError, read_status
from kts_helpers.run.telemetry.dcgm import COLUMNS, DcgmScraper, parse_dcgm_text, scrape_dcgm

FIXTURE = Path(__file__).parent / "fixtures" / "dcgm_metrics.txt"
UUID0 = "GPU-0b6c8a1e-2f4d-4c1b-9a7e-1d2c3b4a5f60"


def test_parse_fixture_maps_fields_units_and_labels():
    rows = parse_dcgm_text(FIXTURE.read_text(), ts_ns=123)
    # GPU 0 is time-sliced between two pods (one row each), GPU 1 is idle (no pod labels)
    assert [(r["gpu_index"], r["pod"]) for r in rows] == [(0, "kts-fft-0"), (0, "kts-gemm-0"), (1, None)]
    assert all(set(r) == set(COLUMNS) for r in rows) and all(r["ts_ns"] == 123 for r in rows)
    g0, _, g1 = rows
    assert g0["sm_clock_mhz"] == 1755.0 and g1["sm_clock_mhz"] == 345.0
    assert g0["mem_clock_mhz"] == 2619.0 and g0["gpu_util_pct"] == 98.0 and g0["mem_util_pct"] == 41.0
    assert g0["power_w"] == pytest.approx(412.337) and g0["mem_used_mib"] == 20866.0
    # PROF ratios become percent
    assert g0["sm_util_pct"] == pytest.approx(87.1234) and g0["sm_occupancy_pct"] == pytest.approx(31.25)
    assert g0["dram_bw_util_pct"] == pytest.approx(56.21) and g1["dram_bw_util_pct"] == pytest.approx(0.01)
    assert g0["uuid"] == UUID0 and g0["model_name"] == "NVIDIA H100 80GB HBM3" and g0["hostname"] == "gpu-node-a"
    assert (g0["namespace"], g0["container"]) == ("kts", "fft") and g1["namespace"] is None
    assert g0["procs_json"] is None  # DCGM has no per-process memory


def test_parse_nan_is_null_and_unmapped_metrics_are_ignored():
    text = ("# TYPE DCGM_FI_DEV_SM_CLOCK gauge\nDCGM_FI_DEV_SM_CLOCK{gpu=\"0\",UUID=\"u\"} NaN\n"
            "# TYPE DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION counter\n"
            "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{gpu=\"0\",UUID=\"u\"} 5\n")
    (row,) = parse_dcgm_text(text)
    assert row["sm_clock_mhz"] is None and row["uuid"] == "u" and row["ts_ns"] > 0


@pytest.mark.parametrize("text,match", [
    ("<html><body>502 Bad Gateway</body></html>", "not Prometheus"),
    ("hello world", "not Prometheus"),
    ("", "no DCGM_FI_"),
    ("# TYPE go_goroutines gauge\ngo_goroutines 12\n", "no DCGM_FI_"),
    ("DCGM_FI_DEV_SM_CLOCK{gpu=\"zero\"} 1\n", "not an integer"),
])
def test_parse_garbage_is_a_one_line_error(text, match):
    with pytest.raises(TelemetryError, match=match) as ei:
        parse_dcgm_text(text)
    assert isinstance(ei.value, KtsError) and "\n" not in str(ei.value)


class _Handler(http.server.BaseHTTPRequestHandler):
    """Serves the fixture on /metrics, junk on /garbage, 500 on /boom; /flaky fails every other time."""

    hits = 0
    page: bytes | None = None  # what /metrics serves (None: the fixture)

    def do_GET(self):  # noqa: N802 - http.server's naming
        type(self).hits += 1
        if self.path == "/metrics" or (self.path == "/flaky" and self.hits % 2):
            body, code = self.page or FIXTURE.read_bytes(), 200
        elif self.path == "/garbage":
            body, code = b"\x00\x01 this is { not : prometheus", 200
        else:
            body, code = b"internal error", 500
        self.send_response(code)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def server(http_server):
    _Handler.hits = 0
    return http_server(_Handler)


def test_scrape_over_http(server):
    before = time.time_ns()
    rows = scrape_dcgm(server + "/metrics", timeout_s=2)
    assert len(rows) == 3 and rows[0]["sm_clock_mhz"] == 1755.0
    assert before <= rows[0]["ts_ns"] <= time.time_ns()


def test_scrape_faults_are_one_line_errors(server, closed_port):
    for url, match in [(server + "/garbage", "not Prometheus"), (server + "/boom", "HTTP 500"),
                       (closed_port, "unreachable"), ("not-a-url", "failed")]:
        with pytest.raises(TelemetryError, match=match) as ei:
            scrape_dcgm(url, timeout_s=1)
        assert "\n" not in str(ei.value)


def test_scraper_loop_writes_parts_and_complete_status(server, tmp_path):
    out = tmp_path / "dcgm.parquet"
    st = DcgmScraper(server + "/metrics", out, interval_ms=10, flush_s=0).run(max_scrapes=4)
    assert st["status"] == "complete" and st["samples"] == 12 and st["scrapes"] == 4 and st["gpm"] is True
    assert st["gpu_name"] == "NVIDIA H100 80GB HBM3" and read_status(out) == st
    df = load_telemetry(out)
    # one page served four times is one exporter collection: every repeat keeps the scrape that first showed it
    assert len(df) == 12 and df["ts_ns"].nunique() == 1 and set(df["gpu_index"]) == {0, 1}
    assert df["pod"].dropna().unique().tolist() == ["kts-fft-0", "kts-gemm-0"]
    # the shared schema feeds the same join as NVML telemetry
    t = int(df["ts_ns"].iloc[0])
    it = pd.DataFrame({"start_ns": [t - 1000], "end_ns": [t + 1000]})
    assert attach_telemetry(it, df, gpu=0, tolerance_ms=1)["tel_sm_clock_mhz"].iloc[0] == 1755.0


def test_scraper_loop_records_partial_and_absent_without_raising(server, closed_port, tmp_path):
    st = DcgmScraper(server + "/flaky", tmp_path / "a.parquet", interval_ms=5, flush_s=0).run(max_scrapes=4)
    assert st["status"] == "partial" and st["failures"] == 2 and st["samples"] == 6 and "HTTP 500" in st["reason"]
    st = DcgmScraper(closed_port, tmp_path / "b.parquet", interval_ms=5, timeout_s=0.5).run(max_scrapes=2)
    assert st["status"] == "absent" and st["samples"] == 0 and "unreachable" in st["reason"]
    assert load_telemetry(tmp_path / "b.parquet").empty


def test_scraper_thread_start_stop(server, tmp_path):
    out = tmp_path / "dcgm.parquet"
    with DcgmScraper(server + "/metrics", out, interval_ms=10, flush_s=0.02) as sc:
        time.sleep(0.3)
    st = sc.result
    assert st["status"] == "complete" and st["scrapes"] >= 3 and st["samples"] == 3 * st["scrapes"]
    assert len(load_telemetry(out)) == st["samples"]
    with pytest.raises(TelemetryError, match="already exists"):
        DcgmScraper(server + "/metrics", out, interval_ms=10).start()


def test_cli_scrape_dcgm_absent_is_exit_0(closed_port, tmp_path):
    import json
    import subprocess
    import sys

    out = tmp_path / "d.parquet"
    r = subprocess.run([sys.executable, "-m", "kts_helpers.run.telemetry", "scrape-dcgm", "--out", str(out),
                        "--url", closed_port, "--interval-ms", "50", "--duration-s", "0.2", "--timeout-s", "0.5"],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["status"] == "absent" and read_status(out)["status"] == "absent"


# ------------------------------------------------------------------------------ whose node (page_check)

NODE_UUID_UNKNOWN = dict(gpu_uuid=None, pods_on_gpu=1)  # one pod: no attribution flag to mix in


def _scraped(server_url, tmp_path, name):
    """One scrape of ``server_url`` into a final status (what the backend hands page_check)."""
    return DcgmScraper(server_url, tmp_path / f"{name}.parquet", interval_ms=10, flush_s=0).run(max_scrapes=1)


def _serving(http_server, text):
    """The test server with ``text`` as its /metrics page."""
    return http_server(type("Page", (_Handler,), {"page": text.encode()})) + "/metrics"


def test_without_the_tenants_uuid_pages_of_another_node_are_refused_naming_both(server, tmp_path):
    """The tenants' GPU UUID is unknown (no worker reported one): the page's ``Hostname`` is the only check left.
    The fixture's pages come from gpu-node-a; for tenants on gpu-node-b they are refused, the reason naming the
    page's node and the tenants'; on gpu-node-a they are accepted. Fails when the node-name fallback is dropped
    (another node's GPU would be read as the tenants')."""
    from kts_helpers.run.telemetry.dcgm import page_check

    st = _scraped(server + "/metrics", tmp_path, "fixture")
    assert st["status"] == "complete" and st["page"]["hostnames"] == ["gpu-node-a"]
    why, flag = page_check(st, node="gpu-node-b", **NODE_UUID_UNKNOWN)
    assert why == ("the dcgm-exporter pages come from gpu-node-a, not node gpu-node-b, and the tenants' GPU UUID is "
                   "unknown: they may describe another GPU; scrape the exporter pod on the tenants' node") and flag == ""
    assert page_check(st, node="gpu-node-a", **NODE_UUID_UNKNOWN) == ("", "")
    # several pods on the GPU but no UUID to find it on the page: attribution is flagged as unchecked, not as
    # "at most 0 pod per page" (a count read for no GPU at all)
    assert page_check(st, node="gpu-node-a", gpu_uuid=None, pods_on_gpu=2) == ("", (
        "attribution unchecked: the tenants' GPU UUID is unknown, so which of the page's GPUs is theirs, and how many "
        "pods the exporter attributes to it, cannot be told"))
    # no Hostname label at all: nothing proves the node, refused as such
    no_host = {**st, "page": {**st["page"], "hostnames": []}}
    assert page_check(no_host, node="gpu-node-a", **NODE_UUID_UNKNOWN)[0].startswith(
        "the dcgm-exporter pages come from (no Hostname label), not node gpu-node-a")


def test_the_lowercase_hostname_label_is_read_and_checked(http_server, tmp_path):
    """dcgm-exporter's HEAD renders the node as ``hostname`` (commit d5e5f51 "Rename Hostname label to hostname");
    releases up to 4.5.3-4.8.2 as ``Hostname``. The same page with the lowercase label parses to the same node,
    and the node check (tenants' UUID unknown) refuses another node and accepts its own. Fails when only
    ``Hostname`` is mapped (the page would have no node: refused even on the right node)."""
    from kts_helpers.run.telemetry.dcgm import page_check

    text = FIXTURE.read_text()
    assert text.count('Hostname="gpu-node-a"') > 0
    lower = text.replace('Hostname="', 'hostname="')
    assert "Hostname=" not in lower
    rows = parse_dcgm_text(lower, ts_ns=1)
    assert [r["hostname"] for r in rows] == ["gpu-node-a"] * 3
    assert [(r["gpu_index"], r["pod"]) for r in rows] == [(0, "kts-fft-0"), (0, "kts-gemm-0"), (1, None)]
    url = _serving(http_server, lower)
    with urllib.request.urlopen(url, timeout=5) as resp:
        assert resp.read().decode() == lower  # the scraper reads the lowercase page, not the fixture
    st = _scraped(url, tmp_path, "lower")
    assert st["page"]["hostnames"] == ["gpu-node-a"]
    assert page_check(st, node="gpu-node-a", **NODE_UUID_UNKNOWN) == ("", "")
    assert page_check(st, node="gpu-node-b", **NODE_UUID_UNKNOWN)[0].startswith(
        "the dcgm-exporter pages come from gpu-node-a, not node gpu-node-b")


def test_the_old_namespace_pages_lowercase_uuid_is_read_and_checked(http_server, tmp_path):
    """With ``--use-old-namespace`` dcgm-exporter names the GPU's label ``uuid`` (internal/pkg/collector/
    gpu_collector.go ``toMetric``: ``uuid := "UUID"; if useOld { uuid = "uuid" }``; render_metrics.go prints the label
    by that name) and the pods ``pod_name``, ``pod_namespace``, ``container_name`` (transformation/const.go). Such a
    page parses to the same GPUs and pods, and the tenants' UUID check accepts it. Fails when only ``UUID`` is mapped
    (the page then has no UUID: refused as "the pages show GPU(s) (no UUID label)", issue 50)."""
    from kts_helpers.run.telemetry.dcgm import page_check

    old = FIXTURE.read_text().replace('UUID="', 'uuid="').replace('pod="', 'pod_name="').replace(
        'namespace="', 'pod_namespace="').replace('container="', 'container_name="')
    assert "UUID=" not in old and 'uuid="' + UUID0 in old
    rows = parse_dcgm_text(old, ts_ns=1)
    assert [(r["gpu_index"], r["uuid"] == UUID0, r["pod"]) for r in rows][:2] == [(0, True, "kts-fft-0"),
                                                                                    (0, True, "kts-gemm-0")]
    st = _scraped(_serving(http_server, old), tmp_path, "old")
    assert UUID0 in st["page"]["uuids"]
    assert page_check(st, node="gpu-node-a", gpu_uuid=UUID0, pods_on_gpu=2)[0] == ""
