"""Local backend with real worker processes on CPU: a whole tiny run, crashes, time limits, Ctrl-C."""

from __future__ import annotations

import os
import signal
import sys
import textwrap
import time
from pathlib import Path

import pytest

from kts_helpers.analyse.logparse import parse_file
from kts_helpers.errors import DeviceError, RunError, TenantFailed
from kts_helpers.run import experiment
from kts_helpers.run.backends.local import WORKER, LocalBackend
from kts_helpers.run.runs import create_run
from kts_helpers.run.spec import ExperimentParams, resolve


def _make_run(root: Path, base, **params):
    spec = resolve(ExperimentParams.from_mapping({**base, **params}), "cpu")
    d = spec.to_dict()
    d["backend_options"] = {}
    return create_run(d, {"note": "test"}, root=root, run_id="r"), spec


def _pids(run, scenario):
    """Worker pids, from the KTS_META line each tenant printed before its loop."""
    out = {}
    for log in sorted(run.log_dir(scenario).glob("*.log")):
        meta = parse_file(log).meta
        if meta:
            out[log.stem] = meta[0]["pid"]
    return out


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def _app_lines(path: Path, *, pad: bool = False) -> list[bytes]:
    """The KTS_APP lines of a log: the timed ones, or (``pad=True``) the padding ones."""
    return [ln for ln in path.read_bytes().splitlines()
            if ln.startswith(b"KTS_APP,") and (ln.split(b",")[5] == b"pad") == pad]


def _timed(parsed):
    return parsed.frame[parsed.frame["phase"] != "pad"]


def _wrapper(tmp_path: Path, crash_tenant: str, after: int) -> Path:
    """A worker that is the real one, except that one named tenant crashes after iteration ``after``."""
    script = tmp_path / "crashing_worker.py"
    script.write_text(textwrap.dedent(f"""
        import os, sys
        if os.environ.get("TENANT") == {crash_tenant!r}:
            os.environ["KTS_CRASH_AFTER"] = "{after}"
        os.execv(sys.executable, [sys.executable, {str(WORKER)!r}])
    """))
    return script


# -- a whole tiny experiment --------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory, tiny_params):
    root = tmp_path_factory.mktemp("runs")
    run, spec, env = experiment.setup_run(dict(tiny_params), root=root, run_id="tiny", progress=False)
    assert run.manifest()["status"] == "running"  # calibrated, nothing else yet
    baseline = experiment.run_kind(run, "baseline", progress=False)
    shared = experiment.run_kind(run, "shared", progress=False)
    return run, spec, env, baseline + shared


def test_tiny_run_completes(tiny_run):
    run, spec, env, results = tiny_run
    m = run.manifest()
    assert m["status"] == "complete"
    assert spec.device == "cpu" and m["spec"]["device"] == "cpu" and env["cuda_available"] is False
    assert [r.scenario for r in results] == ["baseline-fft", "baseline-gemm", "shared"]
    assert all(r.status == "complete" for r in results)
    for s in spec.scenarios:
        rec = m["scenarios"][s.name]
        assert rec["status"] == "complete" and rec["backend"] == "local"
        assert {t: v["exit_code"] for t, v in rec["tenants"].items()} == {t: 0 for t in s.tenant_names}
        # the stranger check ran on the block (run.gpumem): unknown on CPU, where no worker reads NVML
        assert rec["gpu_memory"]["status"] == "unknown" and "no reading in its KTS_END" in rec["gpu_memory"]["reason"]


def test_tiny_run_calibration_floor_recorded(tiny_run):
    run, _, _, _ = tiny_run
    m = run.manifest()
    cal = m["calibration"]
    assert cal["floor_ms"] == 0.0 and "CPU" in cal["note"]
    assert cal["n"] == 20
    assert m["scenarios"]["calibration"]["status"] == "complete"
    assert len(_app_lines(run.log_path("calibration", "noop"))) == 20


def test_tiny_run_logs_layout(tiny_run, tiny_params):
    run, spec, _, _ = tiny_run
    n = tiny_params["iterations"]
    for s in spec.scenarios:
        for t in s.tenant_names:
            log = run.path / "logs" / s.name / f"{t}.log"
            assert log.is_file() and run.stderr_path(s.name, t).is_file()
            data = log.read_bytes()
            assert data.count(b"KTS_META,") == 1 and data.startswith(b"KTS_META,v2,")
            assert len(_app_lines(log)) == n
            parsed = parse_file(log)
            assert parsed.malformed == 0 and parsed.other == 0
            assert _timed(parsed)["iteration"].tolist() == list(range(n))
            assert set(parsed.frame["tenant"]) == {t}
            # a lead-in of padding after the barrier, alone and shared alike (the same conditions)
            lead = parsed.frame["start_ns"] < _timed(parsed)["start_ns"].min()
            assert lead.sum() > 0 and (parsed.frame.loc[lead, "phase"] == "pad").all()
    # the shared tenants were told the same start instant
    starts = {parse_file(run.log_path("shared", t)).meta[0]["start_at_ns"] for t in ("fft", "gemm")}
    assert len(starts) == 1 and starts.pop() > 0


def test_rerun_of_completed_scenario_refused_logs_untouched(tiny_run):
    run, spec, _, _ = tiny_run
    logs = sorted(run.log_dir("shared").iterdir())
    before = {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in logs}
    manifest_before = run.manifest()["scenarios"]["shared"]
    with pytest.raises(RunError, match="already has logs"):
        LocalBackend(device="cpu", telemetry=False).run_scenario(run, spec.scenario("shared"), timeout_s=30,
                                                                 progress=False)
    assert experiment.run_kind(run, "shared", progress=False) == []  # complete scenarios are skipped
    assert sorted(run.log_dir("shared").iterdir()) == logs
    assert {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in logs} == before
    assert run.manifest()["scenarios"]["shared"] == manifest_before
    assert run.manifest()["status"] == "complete"


def test_device_cuda_on_cpu_host_fails_before_creating_a_run(tmp_path):
    root = tmp_path / "runs"
    with pytest.raises(DeviceError) as exc:
        experiment.setup_run({"profile": "tiny", "device": "cuda"}, root=root)
    assert "no CUDA GPU" in str(exc.value) and "\n" not in str(exc.value)
    assert not root.exists() or list(root.iterdir()) == []


# -- failures -----------------------------------------------------------------------------------------------
def test_crashing_tenant_stops_the_other(tmp_path, tiny_params):
    run, spec = _make_run(tmp_path, tiny_params, iterations=3000, sleep_ms_fft=1.0)
    backend = LocalBackend(device="cpu", worker=_wrapper(tmp_path, "gemm", 3), telemetry=False)
    with pytest.raises(TenantFailed) as exc:
        backend.run_scenario(run, spec.scenario("shared"), timeout_s=60, progress=False)
    err = exc.value
    assert err.tenant == "gemm" and err.exit_code == 1 and err.scenario == "shared"
    msg = str(err)
    assert "'gemm'" in msg and "code 1" in msg and "injected crash after iteration 3" in msg
    assert "\n" not in msg
    m = run.manifest()
    assert m["status"] == "failed" and m["scenarios"]["shared"]["status"] == "failed"
    pids = _pids(run, "shared")
    assert set(pids) == {"fft", "gemm"}
    assert all(_gone(pid) for pid in pids.values())
    gemm = parse_file(run.log_path("shared", "gemm"))
    assert _timed(gemm)["iteration"].tolist() == [0, 1, 2, 3]
    fft_log = run.log_path("shared", "fft")
    fft = parse_file(fft_log)
    timed = _timed(fft)
    assert 0 < len(timed) < 3000  # stopped mid-run
    assert fft.n + fft.malformed == len(_app_lines(fft_log)) + len(_app_lines(fft_log, pad=True))  # every line kept
    assert timed["iteration"].tolist() == list(range(len(timed)))
    assert "injected crash" in run.stderr_path("shared", "gemm").read_text()


def test_time_limit(tmp_path, tiny_params):
    run, spec = _make_run(tmp_path, tiny_params, workloads="gemm", iterations=1_000_000, sleep_ms_gemm=1.0)
    with pytest.raises(TenantFailed, match="time limit") as exc:
        LocalBackend(device="cpu", telemetry=False).run_scenario(run, spec.scenario("baseline-gemm"),
                                                                 timeout_s=4, progress=False)
    assert exc.value.tenant == "gemm" and exc.value.exit_code is None
    assert run.manifest()["status"] == "failed"
    assert all(_gone(pid) for pid in _pids(run, "baseline-gemm").values())


def test_ctrl_c_stops_every_tenant(tmp_path, tiny_params):
    run, spec = _make_run(tmp_path, tiny_params, iterations=100_000, sleep_ms_fft=1.0, sleep_ms_gemm=1.0)
    give_up = time.monotonic() + 60

    def interrupt_once_running(signum, frame):
        # Ctrl-C once both tenants are inside their timed loops (past the lead-in: timed lines written)
        timing = [t for t in ("fft", "gemm") if run.log_path("shared", t).exists()
                  and _app_lines(run.log_path("shared", t))]
        if len(timing) == 2 or time.monotonic() > give_up:
            signal.setitimer(signal.ITIMER_REAL, 0)
            raise KeyboardInterrupt

    old = signal.signal(signal.SIGALRM, interrupt_once_running)
    signal.setitimer(signal.ITIMER_REAL, 0.2, 0.2)
    try:
        with pytest.raises(KeyboardInterrupt):
            LocalBackend(device="cpu", telemetry=False).run_scenario(run, spec.scenario("shared"), timeout_s=120,
                                                                     progress=False)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    pids = _pids(run, "shared")
    assert set(pids) == {"fft", "gemm"}
    assert all(_gone(pid) for pid in pids.values())
    m = run.manifest()
    assert m["status"] == "failed" and m["scenarios"]["shared"]["status"] == "failed"
    for t in ("fft", "gemm"):
        timed = _timed(parse_file(run.log_path("shared", t)))
        assert len(timed) > 0 and timed["iteration"].tolist() == list(range(len(timed)))


def test_missing_worker_script(tmp_path):
    from kts_helpers.errors import BackendError

    with pytest.raises(BackendError, match="not found"):
        LocalBackend(worker=tmp_path / "nope.py")


def test_describe_on_cpu():
    info = LocalBackend(device="auto", python=sys.executable, telemetry=False).describe()
    assert info["device"] == "cpu" and "CPU" in info["summary"]


def test_a_sigterm_to_kts_run_stops_its_tenants_and_records_why(tmp_path):
    """``kill`` or ``timeout`` around ``kts run`` sends SIGTERM, whose default action ended the runner at once and
    left its workers (each in its own session) running: on an H100 two tenants of a killed run held 8.5 GiB and the
    next run was refused as sharing the GPU with strangers. Now SIGTERM takes Ctrl-C's path (``run.interrupts``):
    every worker stopped, the block recorded as interrupted by SIGTERM."""
    import subprocess

    proc = subprocess.Popen([sys.executable, "-m", "kts_helpers", "run", "--device", "cpu", "--root", str(tmp_path),
                             "--run-id", "s", "--quiet", "--set", "iterations=100000"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    workers: set[int] = set()
    give_up = time.monotonic() + 90
    while time.monotonic() < give_up and proc.poll() is None:
        # -ww: piped, ps cuts its lines at 80 columns, and a worker's path in a deep clone is longer
        children = subprocess.run(["ps", "-ww", "-o", "pid=,args=", "--ppid", str(proc.pid)], capture_output=True,
                                  text=True).stdout.splitlines()
        workers = {int(ln.split()[0]) for ln in children if "kts_worker.py" in ln}
        logs = [p for p in (tmp_path / "s" / "logs").rglob("*.log") if p.parent.name != "calibration"
                and p.stem in ("fft", "gemm")] if (tmp_path / "s").exists() else []
        if len(workers) >= 2 and any(_app_lines(p) for p in logs):  # a block's tenants are timing
            break
        time.sleep(0.2)
    if len(workers) < 2:
        proc.kill()
        _out, err = proc.communicate(timeout=30)
        seen = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*") if p.is_file())
        raise AssertionError(f"the run's workers never started timing (exit {proc.returncode}); files {seen[:40]}; "
                             f"stderr {err[-2000:]}")
    proc.send_signal(signal.SIGTERM)
    _out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130 and "interrupted; tenants stopped" in err
    deadline = time.monotonic() + 10
    while not all(_gone(pid) for pid in workers) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert all(_gone(pid) for pid in workers)
    m = (tmp_path / "s" / "manifest.json").read_text()
    assert '"interrupted (SIGTERM)"' in m
