"""Co-running by construction: the padding watch, real workers that pad until stopped, the GPU-UUID check.

The independent judge of "every timed shared iteration co-ran" is ``corunning_fractions`` below: it reads
the raw logs only (the same rule as shared/tools/corunning.py), never the kit's analysis.
"""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

import kts_api
import pytest
from conftest import corunning_fractions

from kts_helpers.errors import TenantFailed
from kts_helpers.run import experiment
from kts_helpers.run.backends.local import WORKER, LocalBackend
from kts_helpers.run.corun import CoRunError, CoRunWatch, gpu_mismatch
from kts_helpers.run.runs import create_run
from kts_helpers.run.spec import ExperimentParams, resolve

T0 = 1_795_974_308_654_992_882


def _line(tenant, i, start_ms, dur_ms=1.0, phase="op"):
    s = T0 + int(start_ms * 1e6)
    return f"KTS_APP,v2,fft,{tenant},{i},{phase},{s},{s},{s + int(dur_ms * 1e6)},{dur_ms},{dur_ms}\n".encode()


# -- the watch ----------------------------------------------------------------------------------------------
def test_watch_stops_only_when_every_tenant_is_done_and_active_past_the_last_timed_end():
    w = CoRunWatch(["a", "b"], pad_limit_s=60)
    w.feed("a", _line("a", 0, 0, phase="pad") + _line("a", 0, 10) + _line("a", 1, 20))
    w.feed("b", _line("b", 0, 1, phase="pad") + _line("b", 0, 11))
    assert not w.ready_to_stop()  # nobody padded after a timed line yet
    blob = _line("a", 1, 30, phase="pad")
    w.feed("a", blob[:17])  # half a line: waits for the rest
    assert not w.tenants["a"].timed_done
    w.feed("a", blob[17:])
    assert w.tenants["a"].timed_done and not w.ready_to_stop()  # b is still timing
    w.feed("b", _line("b", 1, 40))  # b's last timed iteration ends at 41 ms, after a's last line (31 ms)
    w.feed("b", _line("b", 2, 50, phase="pad"))
    assert w.all_timed_done and not w.ready_to_stop()  # a was not active until 41 ms
    w.feed("a", _line("a", 2, 42, phase="pad"))
    assert w.ready_to_stop()
    assert w.summary() == {"a": {"timed_lines": 2, "pad_lines": 3}, "b": {"timed_lines": 2, "pad_lines": 2}}


def test_watch_overrun_names_the_slow_tenant():
    w = CoRunWatch(["fast", "slow"], pad_limit_s=5)
    w.feed("fast", _line("fast", 0, 0) + _line("fast", 0, 2, phase="pad"))
    w.feed("slow", _line("slow", 0, 0))
    since = w.tenants["fast"].tail_since
    assert w.overrun(since + 4.9) is None
    msg = w.overrun(since + 5.1)
    assert msg and "slow (1 timed lines so far)" in msg and "5 s" in msg and "\n" not in msg
    assert "fast" not in msg.split("while")[1]


def test_gpu_mismatch():
    assert gpu_mismatch({"a": {"gpu_uuid": "GPU-1"}, "b": {"gpu_uuid": "GPU-1"}}) is None
    assert gpu_mismatch({"a": {"gpu_uuid": None}, "b": {}}) is None  # CPU, v1: nothing to compare
    # a silent tenant next to one that reports is never skipped; on a GPU backend silence alone fails
    assert "tenant b reported no GPU UUID" in gpu_mismatch({"a": {"gpu_uuid": "GPU-1"}, "b": {}})
    assert "tenant a reported no GPU UUID" in gpu_mismatch({"a": {"gpu_uuid": None}, "b": {}}, require=True)
    msg = gpu_mismatch({"a": {"gpu_uuid": "GPU-1"}, "b": {"gpu_uuid": "GPU-1"}, "c": {"gpu_uuid": "MIG-2"}})
    assert msg and "a on GPU-1" in msg and "c on MIG-2" in msg


# -- real workers -------------------------------------------------------------------------------------------
def _run(root: Path, base, run_id="r", **params):
    spec = resolve(ExperimentParams.from_mapping({**base, **params}), "cpu")
    d = spec.to_dict()
    d["backend_options"] = {}
    return create_run(d, {"note": "test"}, root=root, run_id=run_id), spec


def _wrapper(tmp_path: Path, body: str) -> Path:
    script = tmp_path / "wrapped_worker.py"
    script.write_text(textwrap.dedent(body).replace("WORKER", repr(str(WORKER))))
    return script


def test_fast_tenant_pads_until_the_slow_one_is_done(tmp_path, tiny_params):
    """The issue's case: a GEMM that never sleeps next to an FFT that sleeps: the GEMM must keep its load on."""
    run, spec, _ = experiment.setup_run({**tiny_params, "iterations": 20, "sleep_ms_fft": 20.0,
                                         "sleep_ms_gemm": 0.0}, root=tmp_path, run_id="asym", progress=False,
                                        calibrate=False)
    experiment.run_kind(run, "shared", progress=False)
    m = run.manifest()
    assert m["scenarios"]["shared"]["status"] == "complete"
    assert {t: v["exit_code"] for t, v in m["scenarios"]["shared"]["tenants"].items()} == {"fft": 0, "gemm": 0}
    got = corunning_fractions(run.path)
    assert got["shared/fft"][:2] == (20, 20) and got["shared/gemm"][:2] == (20, 20)
    # the GEMM (done in a few ms) padded for the FFT's ~400 ms; the FFT padded only briefly
    assert got["shared/gemm"][2] > 10 * got["shared/fft"][2] > 0
    assert m["scenarios"]["shared"]["corun"]["gemm"]["pad_lines"] == got["shared/gemm"][2]


@pytest.mark.parametrize("late", ["gemm", "fft"])
def test_a_design_of_n_iterations_yields_n_co_running_samples_when_a_neighbour_wakes_late(tmp_path, tiny_params, late):
    """Issue 19 item 6: no clipping. One tenant wakes 1.5 s after the barrier (far past the 0.25 s lead-in, as a
    late pod would); the other pads until it has printed its first line, so all 300 timed iterations co-ran."""
    run, spec = _run(tmp_path, tiny_params, iterations=300, sleep_ms_fft=1.0, sleep_ms_gemm=1.0)
    wrapper = _wrapper(tmp_path, f"""
        import os, sys
        if os.environ.get("TENANT") == {late!r}:
            os.environ["KTS_START_DELAY_S"] = "1.5"
        os.execv(sys.executable, [sys.executable, WORKER])
    """)
    LocalBackend(device="cpu", worker=wrapper, telemetry=False).run_scenario(
        run, spec.scenario("shared"), timeout_s=120, progress=False)
    got = corunning_fractions(run.path)  # the independent judge: raw logs only
    assert got["shared/fft"][:2] == (300, 300) and got["shared/gemm"][:2] == (300, 300)
    early = "fft" if late == "gemm" else "gemm"
    lines = (run.path / "logs" / "shared" / f"{early}.log").read_text().splitlines()
    app = [ln.split(",") for ln in lines if ln.startswith("KTS_APP,")]
    first_timed = next(i for i, f in enumerate(app) if f[5] != "pad")
    lead_s = (int(app[first_timed][7]) - int(app[0][7])) / 1e9
    assert lead_s > 1.0  # it padded while its neighbour was late
    from kts_helpers.analyse.load import load_run

    data = load_run(run.path)  # the analysis: the same 300 each, and no padding line among the statistics
    shared = data.iterations[data.iterations["scenario"] == "shared"]
    assert shared.groupby("tenant")["in_overlap"].sum().to_dict() == {"fft": 300, "gemm": 300}
    assert not shared["phase"].eq("pad").any() and data.padding["phase"].eq("pad").all()
    assert len(data.padding[data.padding["scenario"] == "shared"]) == got["shared/fft"][2] + got["shared/gemm"][2]


def test_a_timed_operation_is_never_due_before_the_lead_in_ended(tmp_path, worker_module, monkeypatch):
    """The CPU wall clock starts when an operation was due (its sleep's end). A host that wakes a tenant late from
    its last lead-in sleep lets a neighbour print its first line meanwhile: the first timed operation, due at the
    sleep's end, must still start its clock only when the lead-in ended, after that line (CI saw 299 of 300)."""
    import io
    import time
    from types import SimpleNamespace

    (tmp_path / "ready-a").write_text("1")
    (tmp_path / "ready-b").write_text("2")
    marked: list[int] = []
    real_sleep = worker_module.StopRequest.sleep

    def late_wake(self, seconds):  # the first lead-in sleep: the neighbour starts and marks, we wake 30 ms late
        real_sleep(self, seconds)
        if not marked:
            marked.append(time.time_ns())
            (tmp_path / "started-b").write_text("2")
            time.sleep(0.03)

    monkeypatch.setattr(worker_module.StopRequest, "sleep", late_wake)
    args = worker_module.parse_args(["--workload", "fft", "--tenant", "a", "--iterations", "3", "--sleep-ms", "1",
                                     "--barrier-dir", str(tmp_path), "--lead-in-s", "0", "--device", "cpu"])
    out = io.StringIO()
    monkeypatch.setattr(worker_module.sys, "stdout", out)
    workload = kts_api.Workload("fft", lambda: [("op", lambda: None)])
    clock = worker_module.Clock(None, SimpleNamespace(type="cpu"))
    assert worker_module.run_loop(args, workload, clock) == 0
    app = [ln.split(",") for ln in out.getvalue().splitlines() if ln.startswith("KTS_APP,")]
    timed = [f for f in app if f[5] != "pad"]
    assert app[0][5] == "pad" and len(timed) == 3
    assert int(timed[0][7]) >= marked[0], "the first timed operation's clock starts before the neighbour's line"


def test_neighbour_crash_during_padding_fails_the_scenario_and_keeps_timed_lines(tmp_path, tiny_params):
    # the fft needs 8 s for its 400 iterations, the gemm 40 ms for its 40: it crashes long before the fft is
    # done even when a loaded machine starts the two seconds apart
    run, spec = _run(tmp_path, tiny_params, iterations=40, iterations_fft=400, sleep_ms_fft=20.0, sleep_ms_gemm=1.0)
    wrapper = _wrapper(tmp_path, """
        import os, sys
        if os.environ.get("TENANT") == "gemm":
            os.environ["KTS_CRASH_AFTER_PAD"] = "5"
        os.execv(sys.executable, [sys.executable, WORKER])
    """)
    with pytest.raises(TenantFailed) as exc:
        LocalBackend(device="cpu", worker=wrapper, telemetry=False).run_scenario(
            run, spec.scenario("shared"), timeout_s=60, progress=False)
    assert exc.value.tenant == "gemm" and exc.value.exit_code == 1
    assert "injected crash after padding iteration 5" in str(exc.value)
    rec = run.manifest()["scenarios"]["shared"]
    assert rec["status"] == "failed" and "'gemm'" in rec["reason"] and "code 1" in rec["reason"]
    got = corunning_fractions(run.path)
    assert got["shared/gemm"][0] == 40  # the crashed tenant's timed lines are all there
    assert 0 < got["shared/fft"][0] < 400  # the survivor was stopped; its timed lines so far are kept


def test_padding_past_the_safety_limit_fails_the_scenario(tmp_path, tiny_params):
    run, spec = _run(tmp_path, tiny_params, iterations=200, iterations_gemm=5, sleep_ms_fft=20.0,
                     sleep_ms_gemm=1.0)
    backend = LocalBackend(device="cpu", telemetry=False)
    with pytest.raises(CoRunError, match=r"padding went on for more than 0.5 s .*fft \(\d+ timed lines so far\)"):
        backend.run_scenario(run, spec.scenario("shared"), timeout_s=60, progress=False, pad_limit_s=0.5)
    rec = run.manifest()["scenarios"]["shared"]
    assert rec["status"] == "failed" and "pad_limit_s" in rec["reason"]
    got = corunning_fractions(run.path)
    assert got["shared/gemm"][0] == 5 and 0 < got["shared/fft"][0] < 200


def test_tenants_on_different_gpus_are_refused(tmp_path, tiny_params):
    """A worker that reports another GPU UUID (what a spread placement looks like in the logs)."""
    run, spec = _run(tmp_path, tiny_params)
    wrapper = _wrapper(tmp_path, """
        import json, os, signal, subprocess, sys
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # the worker (same process group) handles it
        p = subprocess.Popen([sys.executable, WORKER], stdout=subprocess.PIPE)
        for line in p.stdout:
            if line.startswith(b"KTS_META,"):
                meta = json.loads(line.split(b",", 2)[2])
                meta["gpu_uuid"] = "GPU-" + os.environ["TENANT"]
                line = b"KTS_META,v2," + json.dumps(meta).encode() + b"\\n"
            sys.stdout.buffer.write(line)
            sys.stdout.buffer.flush()
        sys.exit(p.wait())
    """)
    with pytest.raises(CoRunError) as exc:
        LocalBackend(device="cpu", worker=wrapper, telemetry=False).run_scenario(
            run, spec.scenario("shared"), timeout_s=60, progress=False)
    msg = str(exc.value)
    assert "fft on GPU-fft" in msg and "gemm on GPU-gemm" in msg and "\n" not in msg
    rec = run.manifest()["scenarios"]["shared"]
    assert rec["status"] == "failed" and "GPU-fft" in rec["reason"] and "GPU-gemm" in rec["reason"]


def test_worker_stops_cleanly_on_sigterm_while_padding(start_worker):
    """A SIGTERM while padding ends the iteration in progress, printed; the orchestrator never asked (no ``stop``
    file, no ``"stop"`` in a go file), so the exit is 143, not 0: a kubelet's SIGTERM after a preemption or a drain
    must leave the pod Failed (issue 50; ``kts_harness.stop_exit_code``)."""
    import signal
    import time

    proc = start_worker({"WORKLOAD": "fft", "ITERATIONS": "3", "SLEEP_MS": "200", "KTS_PAD": "1"})
    deadline = time.monotonic() + 60
    lines = []
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        lines.append(line)
        if ",pad," in line:
            break
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=30)
    lines += out.splitlines(keepends=True)
    assert proc.returncode == 143, err
    app = [ln for ln in lines if ln.startswith("KTS_APP,")]
    assert [ln.split(",")[5] for ln in app[:3]] == ["op"] * 3 and all(",pad," in ln for ln in app[3:])
    assert all(ln.endswith("\n") for ln in app)  # the iteration in progress was finished and printed
    meta = json.loads(lines[0].split(",", 2)[2])
    assert meta["pad"] is True and meta["gpu_uuid"] is None and meta["phases_per_iteration"] == 1


def test_worker_stopped_before_its_timed_iterations_exits_143(start_worker):
    import signal
    import time

    proc = start_worker({"WORKLOAD": "fft", "ITERATIONS": "1000", "SLEEP_MS": "50"})
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and ",op," not in proc.stdout.readline():
        pass
    proc.send_signal(signal.SIGTERM)
    proc.communicate(timeout=30)
    assert proc.returncode == 143


def test_worker_pad_limit_exit_3(start_worker):
    proc = start_worker({"WORKLOAD": "fft", "ITERATIONS": "2", "SLEEP_MS": "5", "KTS_PAD": "1",
                         "KTS_PAD_LIMIT_S": "0.2"})
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 3 and "was never stopped" in err
    assert out.count(",pad,") > 3


if __name__ == "__main__":  # pragma: no cover
    sys.exit(pytest.main([__file__]))


def test_lead_in_waits_for_a_neighbour_that_never_starts_then_says_so(start_worker, tmp_path):
    """A neighbour that reached the barrier but never printed a line: no timed iteration, one clear line."""
    import time

    (tmp_path / "ready-b").write_text("1")
    (tmp_path / "go").write_text(str(time.time_ns()))
    proc = start_worker({"WORKLOAD": "fft", "TENANT": "a", "ITERATIONS": "3", "SLEEP_MS": "5",
                         "KTS_BARRIER_DIR": str(tmp_path), "KTS_BARRIER_TIMEOUT_S": "1", "KTS_LEAD_IN_S": "0"})
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 1
    assert "tenant(s) b printed no line within 1s of the barrier" in err and "no timed iteration" in err
    phases = [ln.split(",")[5] for ln in out.splitlines() if ln.startswith("KTS_APP,")]
    assert phases and set(phases) == {"pad"}  # it padded (its load was on) but timed nothing
    assert (tmp_path / "started-a").exists()
