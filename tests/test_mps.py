"""MpsDaemon and the local backend's MPS mode, with a stand-in nvidia-cuda-mps-control."""

from __future__ import annotations

import sys
import tempfile
import textwrap
from pathlib import Path

import pytest
from conftest import fake_mps_control as _fake_control

from kts_helpers.analyse.logparse import parse_file
from kts_helpers.errors import BackendError
from kts_helpers.run.backends.local import WORKER, LocalBackend
from kts_helpers.run.mps import MpsDaemon
from kts_helpers.run.runs import create_run
from kts_helpers.run.spec import ExperimentParams, resolve


@pytest.fixture
def private_tmp(tmp_path, monkeypatch):
    """Point tempfile at an empty directory of our own, to see exactly what the daemon leaves behind."""
    d = tmp_path / "tmp"
    d.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(d))
    return d


def _records(record: Path) -> list[str]:
    return record.read_text().splitlines() if record.exists() else []


def test_start_client_env_and_quit(tmp_path, private_tmp):
    fake, record = _fake_control(tmp_path)
    logs = tmp_path / "logs"
    logs.mkdir()
    with MpsDaemon(control=str(fake), log_parent=logs) as d:
        env = d.client_env()
        pipe, log = Path(env["CUDA_MPS_PIPE_DIRECTORY"]), Path(env["CUDA_MPS_LOG_DIRECTORY"])
        assert pipe.parent == private_tmp and pipe.name.startswith("kts-mps-pipe-")  # private, never /tmp/nvidia-mps
        assert log.parent == logs
        assert (pipe / "control").exists()
        assert _records(record) == [f"args=-d pipe={pipe} log={log}"]
    assert not (pipe / "control").exists() and not pipe.exists()
    assert _records(record)[1:] == [f"args= pipe={pipe} log={log}", "cmd=quit"]
    assert list(private_tmp.iterdir()) == []


def test_quit_also_when_body_raises(tmp_path, private_tmp):
    fake, record = _fake_control(tmp_path)
    with pytest.raises(RuntimeError, match="body failed"), MpsDaemon(control=str(fake)) as d:
        pipe = d.pipe_dir
        raise RuntimeError("body failed")
    assert "cmd=quit" in _records(record)
    assert not pipe.exists()
    assert list(private_tmp.iterdir()) == []


def test_missing_binary_fails_before_anything_starts(tmp_path, private_tmp):
    daemon = MpsDaemon(control=str(tmp_path / "no-such-mps-control"))
    with pytest.raises(BackendError, match="not on PATH") as exc, daemon:
        raise AssertionError("body must not run")
    assert "\n" not in str(exc.value)
    assert list(private_tmp.iterdir()) == []


def test_daemon_that_fails_to_start(tmp_path, private_tmp):
    fake, record = _fake_control(tmp_path, "fail")
    logs = tmp_path / "logs"
    logs.mkdir()
    with pytest.raises(BackendError) as exc, MpsDaemon(control=str(fake), log_parent=logs):
        raise AssertionError("body must not run")
    msg = str(exc.value)
    assert "exit 1" in msg and "An MPS control daemon is already running" in msg and "\n" not in msg
    assert [r.split()[0] for r in _records(record)] == ["args=-d"]  # nothing to quit
    assert list(private_tmp.iterdir()) == [] and list(logs.iterdir()) == []


def test_daemon_without_control_pipe(tmp_path, private_tmp):
    fake, record = _fake_control(tmp_path, "nopipe")
    with pytest.raises(BackendError, match="no control pipe"), MpsDaemon(control=str(fake), start_timeout_s=0.3):
        raise AssertionError("body must not run")
    assert _records(record)[-1] == "cmd=quit"  # it was started, so it is told to quit
    assert list(private_tmp.iterdir()) == []


# -- the local backend in MPS mode (on CPU the fake daemon stands in; tenants only see the env) ------------
def _env_checking_worker(tmp_path: Path) -> Path:
    """A worker that reports its MPS client env (and whether the control pipe exists) on stderr first."""
    script = tmp_path / "mps_client_worker.py"
    script.write_text(textwrap.dedent(f"""
        import os, sys
        pipe = os.environ.get("CUDA_MPS_PIPE_DIRECTORY", "")
        ok = bool(pipe) and os.path.exists(os.path.join(pipe, "control"))
        print(f"mps-client pipe={{pipe}} log={{os.environ.get('CUDA_MPS_LOG_DIRECTORY', '')}} "
              f"visible={{os.environ.get('CUDA_VISIBLE_DEVICES', '(unset)')}} control={{ok}}",
              file=sys.stderr, flush=True)
        os.execv(sys.executable, [sys.executable, {str(WORKER)!r}])
    """))
    return script


def _mps_run(root: Path, tiny_params):
    spec = resolve(ExperimentParams.from_mapping({**tiny_params, "iterations": 5, "sharing": "mps"}), "cpu")
    return create_run(spec.to_dict(), {}, root=root, run_id="mps"), spec.scenario("shared-mps")


def test_local_backend_mps_scenario(tmp_path, private_tmp, tiny_params, monkeypatch):
    # a multi-GPU host where the kit was pointed at GPU 1: the daemon must get that GPU, the clients "0" (the
    # server renumbers its GPU as 0, "1" would be no device for them; unset, torch's NVML count sees every GPU)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    fake, record = _fake_control(tmp_path)
    run, scen = _mps_run(tmp_path / "runs", tiny_params)
    backend = LocalBackend(device="cpu", python=sys.executable, worker=_env_checking_worker(tmp_path),
                           mps_control=str(fake), telemetry=False, gpu_uuid="GPU-8be0f050")
    result = backend.run_scenario(run, scen, timeout_s=60, progress=False)
    assert result.status == "complete"
    recs = _records(record)
    assert recs[0].startswith("args=-d pipe=") and recs[-1] == "cmd=quit"
    assert recs[0].endswith("visible=GPU-8be0f050")
    pipe = recs[0].split()[1].removeprefix("pipe=")
    for t in scen.tenant_names:
        first = run.stderr_path(scen.name, t).read_text().splitlines()[0]
        assert first.startswith(f"mps-client pipe={pipe} log=") and first.endswith("visible=0 control=True")
        frame = parse_file(run.log_path(scen.name, t)).frame
        assert (frame["phase"] != "pad").sum() == 5 and (frame["phase"] == "pad").sum() > 0
    m = run.manifest()
    assert m["scenarios"]["shared-mps"]["status"] == "complete"
    assert m["scenarios"]["shared-mps"]["sharing"] == "mps"
    assert not Path(pipe).exists()


def test_local_backend_mps_daemon_fails_no_tenant_starts(tmp_path, private_tmp, tiny_params):
    fake, record = _fake_control(tmp_path, "fail")
    run, scen = _mps_run(tmp_path / "runs", tiny_params)
    backend = LocalBackend(device="cpu", mps_control=str(fake), telemetry=False)
    with pytest.raises(BackendError, match="already running"):
        backend.run_scenario(run, scen, timeout_s=60, progress=False)
    assert not any(run.log_dir(scen.name).glob("*.log"))
    assert not any(run.log_dir(scen.name).glob("*.stderr"))
    m = run.manifest()
    assert m["scenarios"]["shared-mps"]["status"] == "failed" and m["status"] == "failed"
    assert all(v["exit_code"] is None for v in m["scenarios"]["shared-mps"]["tenants"].values())
    assert list(private_tmp.iterdir()) == []
