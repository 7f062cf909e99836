"""NVML sampler (against a fake pynvml and the real, driverless one), the time join, clock checks."""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest

from kts_helpers.analyse.telemetry import attach_telemetry, clock_report, expand_processes, load_telemetry
from kts_helpers.errors import KtsError
from kts_helpers.run.telemetry._store import TelemetryError, consolidated_path, part_paths, read_status
from kts_helpers.run.telemetry.nvml import TelemetrySampler, run_sampler

ROOT = Path(__file__).resolve().parents[1]
FAKE_DIR = ROOT / "tests" / "fixtures" / "telemetry_fake_pynvml"


@pytest.fixture
def fake_nvml(monkeypatch):
    """A fresh fake pynvml module in sys.modules (counters reset per test)."""
    spec = importlib.util.spec_from_file_location("pynvml", FAKE_DIR / "pynvml.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    mod.CONFIG.update(absent=False, gpm=True, fail=set())
    monkeypatch.setitem(sys.modules, "pynvml", mod)
    return mod


def _fake_env(**extra: str) -> dict[str, str]:
    return {"PYTHONPATH": str(FAKE_DIR), "KTS_FAKE_NVML_ABSENT": "0", "KTS_FAKE_NVML_GPM": "1",
            "KTS_FAKE_NVML_FAIL": "", **extra}


# ---------------------------------------------------------------- sampler, in-process


def test_sampler_with_gpm_records_every_column(tmp_path, fake_nvml):
    out = tmp_path / "tel.parquet"
    st = run_sampler(out, interval_ms=1, max_samples=6, flush_s=0)
    assert st["status"] == "complete" and st["samples"] == 6 and st["gpm"] is True
    assert st["gpu_name"] == "NVIDIA H100 80GB HBM3" and st["driver"] == "550.54.15"
    assert st["max_sm_clock_mhz"] == 1980.0 and st["column_errors"] == {}
    assert read_status(out) == st
    # parts were consolidated into PATH.parquet on the clean stop
    assert consolidated_path(out).is_file() and part_paths(out) == []
    df = load_telemetry(out)
    assert len(df) == 6 and df["ts_ns"].dtype == "int64" and df["ts_ns"].is_monotonic_increasing
    assert df["sm_clock_mhz"].tolist() == [1000.0 + k for k in range(6)]  # order kept, nothing lost
    assert (df["power_w"] == 250.5).all() and (df["mem_used_mib"] == 1536.0).all()
    assert (df["gpu_util_pct"] == 77).all() and (df["mem_util_pct"] == 33).all()
    assert (df["mem_clock_mhz"] == 2619).all() and (df["gpu_index"] == 0).all()
    # GPM needs two samples: the first row is null, the rest come from consecutive samples
    assert df["sm_util_pct"].isna().tolist() == [True] + [False] * 5
    assert df["sm_util_pct"].iloc[1:].eq(40.0).all()
    assert df["sm_occupancy_pct"].iloc[1:].eq(25.0).all() and df["dram_bw_util_pct"].iloc[1:].eq(60.0).all()
    procs = expand_processes(df)
    assert len(procs) == 12 and set(procs["pid"]) == {111, 222}
    assert procs.loc[procs["pid"] == 111, "used_mib"].eq(512.0).all()
    assert procs.loc[procs["pid"] == 222, "used_mib"].isna().all()
    # read-only: nothing but queries was ever called
    assert all(c.startswith(("nvmlDeviceGet", "nvmlSystemGet", "nvmlGpmQuery", "nvmlGpmSample", "nvmlGpmMetrics",
                             "nvmlInit", "nvmlShutdown")) for c in fake_nvml.CALLS)
    assert fake_nvml.CALLS.count("nvmlGpmSampleFree") == 2


def test_sampler_picks_the_tenants_gpu_by_uuid(tmp_path, fake_nvml):
    """NVML's indices ignore CUDA_VISIBLE_DEVICES: the GPU is chosen by the UUID CUDA gave the tenants."""
    out = tmp_path / "tel.parquet"
    st = run_sampler(out, interval_ms=1, max_samples=2, flush_s=0, gpu_uuid="GPU-11111111-1111-1111-1111-111111111111")
    assert st["status"] == "complete" and st["gpu_index"] == 1
    assert st["gpu_uuid"] == "GPU-11111111-1111-1111-1111-111111111111"
    assert (load_telemetry(out)["gpu_index"] == 1).all()
    assert "nvmlDeviceGetHandleByIndex" not in fake_nvml.CALLS
    missing = run_sampler(tmp_path / "x.parquet", interval_ms=1, max_samples=1, gpu_uuid="GPU-nope")
    assert missing["status"] == "absent" and "GPU-nope not found" in missing["reason"]


def test_sampler_without_gpm_leaves_gpm_columns_out(tmp_path, fake_nvml):
    fake_nvml.CONFIG["gpm"] = False
    out = tmp_path / "tel.parquet"
    st = run_sampler(out, interval_ms=1, max_samples=3, flush_s=0)
    assert st["status"] == "complete" and st["gpm"] is False and "Hopper" in st["gpm_reason"]
    names = pq.read_schema(consolidated_path(out)).names
    assert "sm_clock_mhz" in names and not {"sm_util_pct", "sm_occupancy_pct", "dram_bw_util_pct"} & set(names)
    assert load_telemetry(out)["sm_clock_mhz"].notna().all()


def test_a_failing_call_nulls_only_its_column(tmp_path, fake_nvml):
    fake_nvml.CONFIG["fail"] = {"nvmlDeviceGetPowerUsage", "gpm_dram"}
    out = tmp_path / "tel.parquet"
    st = run_sampler(out, interval_ms=1, max_samples=4, flush_s=0)
    assert st["status"] == "complete" and st["samples"] == 4
    assert "NotSupported" in st["column_errors"]["power_w"] and "dram_bw_util_pct" in st["column_errors"]["gpm"]
    df = load_telemetry(out)
    assert df["power_w"].isna().all()
    assert df["dram_bw_util_pct"].isna().all() and df["sm_util_pct"].iloc[1:].eq(40.0).all()
    assert df["sm_clock_mhz"].notna().all() and df["mem_used_mib"].notna().all()


def test_stop_file_stops_the_loop_and_parts_are_flushed_as_it_runs(tmp_path, fake_nvml):
    out, stop = tmp_path / "tel.parquet", tmp_path / "stop"
    seen_parts: list[int] = []
    orig = fake_nvml.nvmlDeviceGetPowerUsage

    def power(handle):  # the 5th sample creates the stop file; we also watch parts appear
        seen_parts.append(len(part_paths(out)))
        if len(seen_parts) == 5:
            stop.touch()
        return orig(handle)

    fake_nvml.nvmlDeviceGetPowerUsage = power
    st = run_sampler(out, interval_ms=1, stop_file=stop, flush_s=0)
    assert st["status"] == "complete" and st["samples"] == 5
    assert seen_parts == [0, 1, 2, 3, 4]  # flushed after every sample with flush_s=0


def test_refuses_to_overwrite_existing_output(tmp_path, fake_nvml):
    out = tmp_path / "tel.parquet"
    run_sampler(out, interval_ms=1, max_samples=1, flush_s=0)
    with pytest.raises(TelemetryError, match="already exists"):
        run_sampler(out, interval_ms=1, max_samples=1)
    with pytest.raises(TelemetryError, match="interval_ms"):
        run_sampler(tmp_path / "x.parquet", interval_ms=0)


@pytest.mark.parametrize("case", ["fake-absent", "no-module", "real-driverless", "bad-gpu"])
def test_nvml_absent_is_a_status_not_a_crash(tmp_path, monkeypatch, fake_nvml, case):
    if case == "fake-absent":
        fake_nvml.CONFIG["absent"] = True
    elif case == "no-module":
        monkeypatch.setitem(sys.modules, "pynvml", None)  # import pynvml -> ImportError
    elif case == "real-driverless":
        monkeypatch.delitem(sys.modules, "pynvml")
        import pynvml

        assert "site-packages" in pynvml.__file__
    out = tmp_path / "tel.parquet"
    st = run_sampler(out, interval_ms=1, max_samples=2, gpu_index=7 if case == "bad-gpu" else 0)
    assert st["status"] == "absent" and st["samples"] == 0 and st["reason"]
    assert read_status(out)["status"] == "absent"
    df = load_telemetry(out)
    assert df.empty and "sm_clock_mhz" in df.columns and df["ts_ns"].dtype == "int64"


# ---------------------------------------------------------------- sampler, as a process


def test_sampler_process_never_imports_pandas():
    code = ("import sys, kts_helpers.run.telemetry, kts_helpers.run.telemetry.__main__; "
            "print(sorted(m for m in ('pandas', 'numpy', 'pyarrow', 'prometheus_client') if m in sys.modules))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=30)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[]"


def test_real_pynvml_without_driver_is_absent_exit_0(tmp_path):
    out = tmp_path / "tel.parquet"
    r = subprocess.run([sys.executable, "-m", "kts_helpers.run.telemetry", "sample", "--out", str(out),
                        "--duration-s", "1"], capture_output=True, text=True, cwd=ROOT, timeout=30)
    assert r.returncode == 0, r.stderr
    st = json.loads(r.stdout)
    assert st["status"] == "absent" and "NVML" in st["reason"] and read_status(out) == st


def test_cli_refuses_to_overwrite_with_a_one_line_error(tmp_path):
    out = tmp_path / "tel.parquet"
    out.write_bytes(b"earlier run")
    r = subprocess.run([sys.executable, "-m", "kts_helpers.run.telemetry", "sample", "--out", str(out)],
                       capture_output=True, text=True, cwd=ROOT, timeout=30)
    assert r.returncode == 2 and r.stderr.startswith("error: ") and r.stderr.count("\n") == 1
    assert "already exists" in r.stderr and out.read_bytes() == b"earlier run"


def test_wrapper_runs_and_stops_the_sampler_process(tmp_path):
    out = tmp_path / "scenario" / "tel.parquet"
    with TelemetrySampler(out, interval_ms=10, flush_s=0.05, env=_fake_env()) as s:
        assert s.proc.poll() is None
        time.sleep(0.4)
    st = s.result
    assert s.proc.returncode == 0 and st["status"] == "complete" and st["gpm"] is True
    assert st["interval_ms"] == 10.0 and st["max_sm_clock_mhz"] == 1980.0
    df = load_telemetry(out)
    assert len(df) == st["samples"] >= 5
    assert df["sm_clock_mhz"].tolist() == [1000.0 + k for k in range(len(df))]
    assert not s.stop_file.exists() and s.stop() is st  # stop() is idempotent


def test_wrapper_reports_absent_when_nvml_is_absent(tmp_path):
    out = tmp_path / "tel.parquet"
    s = TelemetrySampler(out, interval_ms=10, env=_fake_env(KTS_FAKE_NVML_ABSENT="1")).start()
    st = s.stop()
    assert st["status"] == "absent" and "LibraryNotFound" in st["reason"] and s.proc.returncode == 0


def test_sigkilled_sampler_is_partial_and_flushed_rows_survive(tmp_path):
    out = tmp_path / "tel.parquet"
    s = TelemetrySampler(out, interval_ms=5, flush_s=0.05, env=_fake_env()).start()
    deadline = time.monotonic() + 15
    while len(part_paths(out)) < 3 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert len(part_paths(out)) >= 3
    os.kill(s.proc.pid, signal.SIGKILL)
    st = s.stop()
    assert st["status"] == "partial" and "signal 9" in st["reason"]
    df = load_telemetry(out)
    assert len(df) == st["samples"] > 0 and not consolidated_path(out).exists()
    # the parts concatenate in order, without holes
    assert df["sm_clock_mhz"].tolist() == [1000.0 + k for k in range(len(df))]
    assert read_status(out)["status"] == "partial"


def test_broken_pynvml_install_is_absent_not_a_crash(tmp_path):
    bad = tmp_path / "badpy"
    bad.mkdir()
    (bad / "pynvml.py").write_text("raise RuntimeError('broken install')\n")
    out = tmp_path / "tel.parquet"
    s = TelemetrySampler(out, interval_ms=10, env={"PYTHONPATH": str(bad)}).start()
    st = s.stop()
    assert s.proc.returncode == 0 and st["status"] == "absent" and "broken install" in st["reason"]


def test_sampler_process_that_dies_before_sampling_is_absent(tmp_path):
    fake_python = tmp_path / "python"
    fake_python.write_text("#!/bin/sh\necho 'cannot start: no such module' >&2\nexit 3\n")
    fake_python.chmod(0o755)
    out = tmp_path / "tel.parquet"
    s = TelemetrySampler(out, interval_ms=10, python=str(fake_python)).start()
    st = s.stop()
    assert s.proc.returncode == 3 and st["status"] == "absent" and st["samples"] == 0
    assert "exited with code 3" in st["reason"] and "no such module" in st["reason"]
    assert read_status(out) == st


# ---------------------------------------------------------------- join


def _tel(ts_ms: list[int], clocks: list[float], gpu: int = 0) -> pd.DataFrame:
    return pd.DataFrame({"ts_ns": [t * 1_000_000 for t in ts_ms], "gpu_index": gpu, "sm_clock_mhz": clocks,
                         "gpu_util_pct": [float(c) / 20 for c in clocks]})


def _iters(spans_ms: list[tuple[int, int]], **cols) -> pd.DataFrame:
    return pd.DataFrame({"start_ns": [a * 1_000_000 for a, _ in spans_ms],
                         "end_ns": [b * 1_000_000 for _, b in spans_ms], **cols})


def test_join_nearest_sample_to_midpoint_keeps_rows_and_order():
    tel = _tel([0, 100, 200, 300], [1000.0, 1100.0, 1200.0, 1300.0])
    # midpoints 190, 40, 260, 5000 (far), 160; deliberately unsorted, with a custom index
    it = _iters([(180, 200), (0, 80), (250, 270), (4990, 5010), (150, 170)],
                tenant=["a", "b", "a", "b", "a"], device_ms=[1.0, 2.0, 3.0, 4.0, 5.0])
    it.index = [10, 11, 12, 13, 14]
    out = attach_telemetry(it, tel, tolerance_ms=250)
    assert list(out.index) == [10, 11, 12, 13, 14]
    assert list(out.columns[: len(it.columns)]) == list(it.columns)
    assert out["device_ms"].tolist() == [1.0, 2.0, 3.0, 4.0, 5.0]
    clocks = out["tel_sm_clock_mhz"].tolist()
    assert clocks[:3] == [1200.0, 1000.0, 1300.0] and clocks[4] == 1200.0
    assert pd.isna(clocks[3])  # 4.7 s from the nearest sample: beyond the tolerance
    assert out.loc[10, "tel_ts_ns"] == 200_000_000 and pd.isna(out.loc[13, "tel_ts_ns"])
    assert out.loc[11, "tel_gpu_util_pct"] == 50.0


def test_join_tolerance_and_int64_midpoint():
    base = 1_760_000_000_000_000_000  # realistic epoch ns: start+end would be near int64 range in float
    tel = pd.DataFrame({"ts_ns": [base + 1_000_000_001], "gpu_index": [0], "sm_clock_mhz": [1500.0]})
    it = pd.DataFrame({"start_ns": [base + 1_000_000_000, base], "end_ns": [base + 1_000_000_003, base + 2]})
    out = attach_telemetry(it, tel, tolerance_ms=0.0)  # exact midpoint (..001) matches, other does not
    assert out["tel_sm_clock_mhz"].iloc[0] == 1500.0 and pd.isna(out["tel_sm_clock_mhz"].iloc[1])
    # epoch-ns survives exactly even though the column has a missing value (no float round-trip)
    assert out["tel_ts_ns"].iloc[0] == base + 1_000_000_001 and pd.isna(out["tel_ts_ns"].iloc[1])
    wide = attach_telemetry(it, tel, tolerance_ms=1000)
    assert wide["tel_sm_clock_mhz"].notna().all()


def test_join_with_empty_telemetry_adds_null_columns(tmp_path):
    it = _iters([(0, 10), (10, 20)], tenant=["a", "a"])
    out = attach_telemetry(it, load_telemetry(tmp_path / "never.parquet"))
    assert len(out) == 2 and out["tel_sm_clock_mhz"].isna().all() and "tel_power_w" in out.columns


def test_join_multi_gpu_and_dcgm_pod_duplicates():
    tel = pd.concat([_tel([0, 100], [1000.0, 1100.0], gpu=0), _tel([0, 100], [500.0, 600.0], gpu=1)])
    it = _iters([(90, 110)])
    with pytest.raises(TelemetryError, match="pass gpu="):
        attach_telemetry(it, tel)
    assert attach_telemetry(it, tel, gpu=1)["tel_sm_clock_mhz"].iloc[0] == 600.0
    with pytest.raises(TelemetryError, match="not GPU 3"):
        attach_telemetry(it, tel, gpu=3)
    dup = _tel([100, 100], [1100.0, 1100.0]).assign(pod=["p1", "p2"])
    out = attach_telemetry(it, dup)
    assert len(out) == 1 and "tel_pod" not in out.columns


@pytest.mark.parametrize("bad", ["no-start", "null-end", "already", "tolerance"])
def test_join_bad_input_is_a_clear_error(bad):
    tel = _tel([0], [1000.0])
    it = _iters([(0, 10)])
    kw = {}
    if bad == "no-start":
        it = it.drop(columns=["start_ns"])
    elif bad == "null-end":
        it["end_ns"] = [None]
    elif bad == "already":
        it = attach_telemetry(it, tel)
    else:
        kw = {"tolerance_ms": float("nan")}
    with pytest.raises(KtsError):
        attach_telemetry(it, tel, **kw)


# ---------------------------------------------------------------- clock awareness


def _clock_frame(rows: list[tuple[str, str, str, str, float | None]]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=["scenario", "kind", "workload", "tenant", "tel_sm_clock_mhz"])


def test_clock_report_10_percent_rule_and_75_percent_throttle():
    rows = (
        [("baseline-fft", "baseline", "fft", "fft", 1980.0)] * 4
        + [("shared", "shared", "fft", "fft", 1700.0)] * 3 + [("shared", "shared", "fft", "fft", 1400.0)]
        + [("baseline-gemm", "baseline", "gemm", "gemm", 1800.0)] * 3
        + [("shared", "shared", "gemm", "gemm", 1650.0)] * 3  # -8.3 %: within 10 %
        + [("shared", "shared", "gemm", "gemm", None)]  # no sample near it
    )
    rep = clock_report(_clock_frame(rows), 1980)
    assert rep.throttle_threshold_mhz == 1485.0
    ps = rep.per_scenario.set_index("scenario")
    assert ps.loc["shared", "median_sm_clock_mhz"] == 1650.0
    assert ps.loc["shared", "n"] == 8 and ps.loc["shared", "n_with_clock"] == 7
    assert ps.loc["baseline-fft", "median_sm_clock_mhz"] == 1980.0
    pw = rep.per_workload.set_index("workload")
    assert bool(pw.loc["fft", "clock_differs"]) and pw.loc["fft", "shared_median_sm_clock_mhz"] == 1700.0
    assert pw.loc["fft", "rel_diff"] == pytest.approx((1700 - 1980) / 1980)
    assert not bool(pw.loc["gemm", "clock_differs"]) and pw.loc["gemm", "rel_diff"] == pytest.approx(-150 / 1800)
    # 75 % rule: only the 1400 MHz iteration; the one without a sample is <NA>, not False
    t = rep.iterations["throttled"]
    assert str(t.dtype) == "boolean" and int(t.sum()) == 1 and int(t.isna().sum()) == 1
    assert rep.iterations.loc[t.fillna(False).astype(bool), "tel_sm_clock_mhz"].tolist() == [1400.0]
    tc = rep.throttle_counts.set_index(["scenario", "tenant"])
    assert tc.loc[("shared", "fft"), "n_throttled"] == 1 and tc.loc[("shared", "fft"), "throttled_frac"] == 0.25
    assert tc.loc[("shared", "gemm"), "n_throttled"] == 0 and tc.loc[("shared", "gemm"), "n_with_clock"] == 3
    assert any("'fft'" in f and "baseline" in f for f in rep.flags)
    assert any("'shared' tenant 'fft'" in f and "below 75%" in f for f in rep.flags)
    assert not any("'gemm'" in f for f in rep.flags)


def test_clock_report_boundaries_and_missing_side():
    rows = [("b", "baseline", "w", "w", 1000.0), ("s", "shared", "w", "w", 900.0),  # exactly -10 %: not flagged
            ("b2", "baseline", "x", "x", 1000.0), ("s2", "shared", "x", "x", 1101.0),  # +10.1 %: flagged
            ("b3", "baseline", "y", "y", 1000.0)]  # never shared
    rep = clock_report(_clock_frame(rows), 1200.0)
    pw = rep.per_workload.set_index("workload")
    assert not bool(pw.loc["w", "clock_differs"]) and bool(pw.loc["x", "clock_differs"])
    assert not bool(pw.loc["y", "clock_differs"]) and "shared" in pw.loc["y", "note"]
    # 900 = exactly 75 % of 1200: not below, so not throttled
    assert rep.iterations["throttled"].tolist() == [False] * 5


@pytest.mark.parametrize("bad", ["max0", "maxnan", "kind", "nocol"])
def test_clock_report_bad_input(bad):
    df = _clock_frame([("b", "baseline", "w", "w", 1000.0)])
    mx: object = 1980
    if bad == "max0":
        mx = 0
    elif bad == "maxnan":
        mx = float("nan")
    elif bad == "kind":
        df["kind"] = "solo"
    else:
        df = df.drop(columns=["tel_sm_clock_mhz"])
    with pytest.raises(TelemetryError):
        clock_report(df, mx)


def test_end_to_end_sampler_join_clock(tmp_path, fake_nvml):
    out = tmp_path / "tel.parquet"
    run_sampler(out, interval_ms=2, max_samples=20, flush_s=0)
    tel = load_telemetry(out)
    ts = tel["ts_ns"].to_numpy()
    # one iteration centred on each of samples 3 and 15
    it = pd.DataFrame({"start_ns": [ts[3] - 10, ts[15] - 10], "end_ns": [ts[3] + 10, ts[15] + 10],
                       "scenario": ["baseline-fft", "shared"], "kind": ["baseline", "shared"],
                       "workload": ["fft", "fft"], "tenant": ["fft", "fft"]})
    joined = attach_telemetry(it, tel, tolerance_ms=1)
    assert joined["tel_sm_clock_mhz"].tolist() == [1003.0, 1015.0]
    rep = clock_report(joined, read_status(out)["max_sm_clock_mhz"])
    assert rep.iterations["throttled"].tolist() == [True, True]  # 1003 < 0.75 * 1980


# --- processes on the GPU that are not the scenario's tenants ------------------------------------------------------

def _procs(samples: list[list[tuple]]) -> pd.DataFrame:
    """A telemetry frame whose ``procs_json`` lists (pid, used_mib, name) per sample."""
    blobs = [json.dumps([{"pid": p, "used_mib": m, **({"name": n} if n is not ... else {})} for p, m, n in s])
             for s in samples]
    return pd.DataFrame({"ts_ns": [1_000 + k for k in range(len(samples))], "gpu_index": 0, "procs_json": blobs})


def test_a_process_that_is_not_a_tenant_is_named_and_the_mps_server_is_not() -> None:
    from kts_helpers.analyse.telemetry import gpu_strangers

    tenants = {10, 11}
    clean = _procs([[(10, 784.0, "python3"), (11, 810.0, "python3")]] * 3)
    assert gpu_strangers(clean, tenant_pids=tenants, mps=False) == []
    late = _procs([[(10, 784.0, "python3"), (11, 810.0, "python3")]] * 2 + [[(10, 784.0, "python3"), (99, 612.0, "python3")]])
    assert gpu_strangers(late, tenant_pids=tenants, mps=False) == ["pid 99 (python3), up to 612 MiB, in 1 of 3 samples"]
    server = _procs([[(10, 782.0, "python3"), (11, 1384.0, "python3"), (7, 66.0, "nvidia-cuda-mps")]] * 2)
    assert gpu_strangers(server, tenant_pids=tenants, mps=True) == []
    # another user's MPS server in a time-slicing scenario is a stranger
    assert gpu_strangers(server, tenant_pids=tenants, mps=False) == ["pid 7 (nvidia-cuda-mps), up to 66 MiB, in 2 of 2 samples"]
    # runs recorded before names: the one small process of an MPS scenario is its server, a client-sized one is not
    old = _procs([[(10, 782.0, ...), (11, 1384.0, ...), (7, 66.0, ...)]] * 2)
    assert gpu_strangers(old, tenant_pids=tenants, mps=True) == []
    old_big = _procs([[(10, 782.0, ...), (11, 1384.0, ...), (7, 612.0, ...)]] * 2)
    assert gpu_strangers(old_big, tenant_pids=tenants, mps=True) == ["pid 7, up to 612 MiB, in 2 of 2 samples"]
    two = _procs([[(10, 782.0, ...), (7, 66.0, ...), (8, 66.0, ...)]])
    assert len(gpu_strangers(two, tenant_pids=tenants, mps=True)) == 2
    assert gpu_strangers(late, tenant_pids=set(), mps=False) == []  # no tenant PIDs (v1 logs): nothing to tell


def test_an_h200_run_beside_a_stranger_says_so_in_every_scenario() -> None:
    """Recorded on the H200 with a second process holding a CUDA context (pid 1362) for the whole run; the run's
    tenants and calibration are the only other processes NVML listed. The report's warnings carry it."""
    from kts_helpers.analyse.load import load_run

    data = load_run(Path(__file__).parent / "fixtures" / "h200-stranger-check")
    flagged = [p for p in data.problems if "not one of its tenants" in p]
    names = {s.name for s in data.manifest.scenarios}
    assert {p.split(":")[0] for p in flagged} == names and len(flagged) == len(names) == 8
    assert all("pid 1362 (python3), up to 612 MiB" in p for p in flagged)


def test_a_pod_dcgm_attributes_the_measured_gpu_to_that_is_not_the_jobs_is_named() -> None:
    """dcgm-exporter repeats a GPU's series once per pod holding a replica: the Job's own pods (tenants and
    placeholders, ``<job>-<index>-<suffix>``) are not strangers, another namespace's pod is, another GPU's is not."""
    from kts_helpers.analyse.telemetry import dcgm_strangers

    gpu, other = "GPU-aaaa", "GPU-bbbb"
    rows = [(1, gpu, "kts", "kts-shared-52597f-0-x1"), (1, gpu, "kts", "kts-shared-52597f-2-x3"),
            (1, other, "team-b", "trainer-0"), (2, gpu, "kts", "kts-shared-52597f-1-x2"),
            (2, gpu, "team-b", "trainer-1"), (3, gpu, "kts", "kts-shared-52597f-0-x1"), (3, gpu, None, None)]
    tel = pd.DataFrame(rows, columns=["ts_ns", "uuid", "namespace", "pod"])
    assert dcgm_strangers(tel, gpu_uuid=gpu, namespace="kts", job="kts-shared-52597f") == [
        "pod team-b/trainer-1 (dcgm-exporter's attribution), in 1 of 3 scrapes"]
    # the same name in another namespace is not the Job's; another run's Job in the namespace is a stranger too
    assert len(dcgm_strangers(tel, gpu_uuid=gpu, namespace="other", job="kts-shared-52597f")) == 4
    assert len(dcgm_strangers(tel, gpu_uuid=gpu, namespace="kts", job="kts-shared-000000")) == 4
    assert dcgm_strangers(tel, gpu_uuid=None, namespace="kts", job="kts-shared-52597f") == []  # which GPU: unknown
    assert dcgm_strangers(tel.drop(columns=["pod"]), gpu_uuid=gpu, namespace="kts", job="kts-shared-52597f") == []


def test_the_report_reads_dcgm_strangers_of_the_tenants_gpu_from_the_record(tmp_path: Path) -> None:
    """The wiring: the scenario's record gives the Job and namespace, its tenants' KTS_META the GPU."""
    from kts_helpers.analyse.load import strangers_on_the_gpu
    from kts_helpers.run.manifest import RunManifest

    src = json.loads((Path(__file__).parent / "fixtures" / "h200-stranger-check" / "manifest.json").read_text())
    src["scenarios"]["shared-r1"].update({"namespace": "kts", "job": "kts-shared-r1-abc"})
    manifest = RunManifest.from_dict(src)
    tel = pd.DataFrame({"ts_ns": [1, 1, 2], "uuid": ["GPU-x"] * 3, "namespace": ["kts", "ml", "kts"],
                        "pod": ["kts-shared-r1-abc-0-q", "bert-7", "kts-shared-r1-abc-1-r"], "scenario": "shared-r1"})
    metas = [{"scenario": "shared-r1", "tenant": t, "gpu_uuid": "GPU-x"} for t in ("fft", "gemm")]
    (line,) = strangers_on_the_gpu(manifest, tel, metas)
    assert line.startswith("shared-r1: a process that is not one of its tenants used the GPU during it (pod ml/bert-7")
    metas[1]["gpu_uuid"] = "GPU-y"  # tenants on two GPUs: refused elsewhere; nothing is judged here
    assert strangers_on_the_gpu(manifest, tel, metas) == []
