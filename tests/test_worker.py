"""The worker as a real process: line format, barrier, open loop, bad arguments, the llm workload.

The workers start all at once (one module fixture) so that their torch imports overlap.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass

import numpy as np
import pytest

from kts_helpers.analyse.logparse import parse_bytes

LLM = {"WORKLOAD": "llm", "ITERATIONS": "2", "LLM_D_MODEL": "32", "LLM_LAYERS": "1", "LLM_HEADS": "2",
       "LLM_PROMPT_TOKENS": "8", "LLM_DECODE_TOKENS": "3", "LLM_VOCAB": "64"}
GO_DELAY_NS = int(1e9)


@dataclass
class Done:
    returncode: int
    stdout: str
    stderr: str
    env: dict


@pytest.fixture(scope="module")
def runs(start_worker, tmp_path_factory):
    """Start every worker at once; release the barrier one as soon as it is ready; collect all."""
    barrier = tmp_path_factory.mktemp("barrier")
    configs = {
        "closed": {"WORKLOAD": "gemm", "TENANT": "g1", "ITERATIONS": "12", "SLEEP_MS": "60",
                   "START_AT": str(time.time_ns() - int(5e9)),  # in the past: warn, then run at once
                   # a probe of 2-3 ms on an idle core, up to ~20 on a loaded CI core (150 000 took 28 there): it
                   # must come out of the 60 ms sleep, and stay above the gaps' 1 ms tolerance below
                   "KTS_HOST_PROBE_LOOP": "100000"},
        "barrier": {"ITERATIONS": "3", "TENANT": "b", "KTS_BARRIER_DIR": str(barrier)},
        "fixed": {"WORKLOAD": "noop", "ITERATIONS": "1000", "ARRIVAL": "fixed", "RATE_HZ": "200",
                  "DURATION_S": "0.07"},
        "cuda": {"DEVICE": "cuda", "ITERATIONS": "2"},
        "llm": LLM,
        # a pod of a Kubernetes Indexed Job: its own settings are the KTS_TENANTS entry at its index
        "indexed": {"WORKLOAD": "gemm", "TENANT": "job-level", "JOB_COMPLETION_INDEX": "1",
                    "KTS_TENANTS": json.dumps([{"WORKLOAD": "gemm", "TENANT": "first", "ITERATIONS": "7"},
                                               {"WORKLOAD": "noop", "TENANT": "second", "ITERATIONS": "4"}]),
                    "KTS_PAD": "1", "KTS_PAD_LIMIT_S": "0.1", "KTS_PAD_LIMIT_EXIT": "0"},
        "bad-index": {"JOB_COMPLETION_INDEX": "2", "KTS_TENANTS": json.dumps([{"WORKLOAD": "noop"}])},
        # the CPU stand-in: every tenant on one core (-1: the last this process may use)
        "pinned": {"WORKLOAD": "noop", "ITERATIONS": "2", "KTS_CPU_CORE": "-1"},
        "think": {"WORKLOAD": "noop", "ITERATIONS": "60", "SLEEP_MS": "4", "SLEEP_DIST": "exp"},
        "bad-core": {"WORKLOAD": "noop", "ITERATIONS": "2", "KTS_CPU_CORE": "100000"},
        # pads after its timed iterations until nobody stops it: the host probe lists the timed ones only
        "padded": {"WORKLOAD": "noop", "ITERATIONS": "5", "SLEEP_MS": "3", "KTS_PAD": "1", "KTS_PAD_LIMIT_S": "0.2",
                   "KTS_PAD_LIMIT_EXIT": "0", "KTS_LEAD_IN_S": "0.1"},
    }
    procs = {k: start_worker(env) for k, env in configs.items()}
    out = {}
    try:
        deadline = time.monotonic() + 120
        while not (barrier / "ready-b").exists() and procs["barrier"].poll() is None:
            assert time.monotonic() < deadline, "the barrier worker never got ready"
            time.sleep(0.01)
        ready_ns = time.time_ns()
        go_at = ready_ns + GO_DELAY_NS
        (barrier / ".go.tmp").write_text(str(go_at))
        (barrier / ".go.tmp").rename(barrier / "go")
        configs["barrier"] = {**configs["barrier"], "go_at": go_at, "ready_ns": ready_ns}
        for k, proc in procs.items():
            stdout, stderr = proc.communicate(timeout=120)
            out[k] = Done(proc.returncode, stdout, stderr, configs[k])
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    return out


def _parse(stdout: str):
    return parse_bytes(stdout.encode())


def test_closed_loop_lines(runs):
    res = runs["closed"]
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert lines[0].startswith("KTS_META,v2,")
    assert sum(ln.startswith("KTS_META,") for ln in lines) == 1
    app = [ln for ln in lines if ln.startswith("KTS_APP,")]
    assert len(app) == 12 == len(lines) - 2
    assert lines[-1].startswith("KTS_END,v2,") and json.loads(lines[-1].split(",", 2)[2])["reason"] == "fixed count"
    assert all(ln.startswith("KTS_APP,v2,gemm,g1,") for ln in app)
    meta = json.loads(lines[0].split(",", 2)[2])
    assert meta["tenant"] == "g1" and meta["iterations"] == 12 and meta["device"] == "cpu"
    assert meta["flops_per_op"] == 2.0 * 32**3 and meta["pid"] > 0
    p = _parse(res.stdout)
    assert p.n == 12 and p.malformed == 0 and p.other == 0
    f = p.frame
    assert f["iteration"].tolist() == list(range(12))
    assert (f["start_ns"] <= f["end_ns"]).all()
    assert (f["intended_ns"] == f["start_ns"]).all()  # closed loop
    assert (f["wall_ms"] >= 0).all()
    # CPU: the wall clock starts when the operation was due (its sleep ended), so the wait for the core (here
    # the sleep's overshoot) is inside it and outside the operation's own time; the first had no sleep before it
    waited = (f["wall_ms"] - f["device_ms"]).to_numpy()
    assert waited[0] == 0 and (waited[1:] > 0).all(), waited
    gaps_ms = (f["start_ns"].to_numpy()[1:] - f["end_ns"].to_numpy()[:-1]) / 1e6
    # due = when the sleep of 60 ms, begun just after the last operation, was to end: never before 60 ms after
    # it; later only by the worker writing its line (a loaded host's stall shows there, not in the wall clock).
    # The host probe of a few ms after each operation is inside those 60 ms, not added to them
    assert gaps_ms.min() > 59.9 and abs(np.median(gaps_ms) - 60.0) < 1.0, gaps_ms
    assert (f["start_ns"].diff().dropna() > 0).all()
    assert int(f["start_ns"].iloc[0]) >= meta["loop_start_ns"]
    # the probe is larger than the gaps' 1 ms tolerance, so a probe added to the sleep would have shown above
    assert np.median(p.ends[0]["host_probe_ms"]) > 1.0, p.ends[0]["host_probe_ms"]


def test_exponential_think_times_vary_around_their_mean(runs):
    """sleep_dist=exp: the sleeps scatter like an exponential (sd = mean), so two cadences cannot lock."""
    res = runs["think"]
    assert res.returncode == 0, res.stderr
    p = _parse(res.stdout)
    assert p.meta[0]["sleep_dist"] == "exp" and p.meta[0]["sleep_ms"] == 4.0
    f = p.frame
    gaps_ms = (f["start_ns"].to_numpy()[1:] - f["end_ns"].to_numpy()[:-1]) / 1e6  # start = when it was due
    assert 2.0 < gaps_ms.mean() < 6.5 and gaps_ms.std() > 0.5 * gaps_ms.mean(), gaps_ms
    assert gaps_ms.min() < 1.5  # an exponential's short draws; a fixed 4 ms sleep never gives one


def test_host_probe_lists_the_hosts_speed_once_per_timed_iteration(runs):
    """Every closed loop with a fixed sleep probes the host after every iteration (padding too, unrecorded) and lists
    one value per timed iteration in KTS_END, in order: a sleeping one out of its sleep, a back-to-back one between
    its iterations (``adds_gap``, said in KTS_META). An open loop, or an exponential think time (whose short draws
    it would lengthen), does not probe, and says so."""
    for name, n, gap in (("closed", 12, False), ("indexed", 4, True)):  # a 60 ms sleep; noop back to back
        p = _parse(runs[name].stdout)
        assert p.meta[0]["host_probe"]["on"] is True and p.meta[0]["host_probe"]["loop"] > 0, name
        assert p.meta[0]["host_probe"]["adds_gap"] is gap, name
        probes = p.ends[0]["host_probe_ms"]
        assert len(probes) == n == (p.frame["phase"] != "pad").sum() and all(v > 0 for v in probes), (name, probes)
    for name in ("fixed", "think"):  # open loop; exponential think times
        p = _parse(runs[name].stdout)
        assert p.meta[0]["host_probe"]["on"] is False and "host_probe_ms" not in p.ends[0], name
    # padded iterations before (the lead-in) and after the timed ones probe too (the same cadence), unlisted
    padded = _parse(runs["padded"].stdout)
    pads = padded.frame["phase"] == "pad"
    assert pads.sum() > 5 and bool(pads.iloc[0]) and padded.meta[0]["host_probe"]["on"] is True
    assert len(padded.ends[0]["host_probe_ms"]) == (padded.frame["phase"] != "pad").sum() == 5


def test_start_at_in_the_past_warns_and_runs(runs):
    res = runs["closed"]
    assert res.returncode == 0
    assert "tenant g1 reached the barrier" in res.stderr and "late" in res.stderr
    assert _parse(res.stdout).meta[0]["start_at_ns"] == int(res.env["START_AT"])


def test_barrier_delays_first_iteration_until_start_at(runs):
    res = runs["barrier"]
    assert res.returncode == 0, res.stderr
    go_at = res.env["go_at"]
    p = _parse(res.stdout)
    assert p.n == 3
    assert p.meta[0]["start_at_ns"] == go_at
    assert int(p.frame["start_ns"].min()) >= go_at
    # it was ready (waiting) before the start instant was even announced, and started only at it
    assert p.meta[0]["loop_start_ns"] >= go_at > res.env["ready_ns"]
    # start-up ended when it reached the barrier: the wait there is the loop start minus that instant
    assert p.meta[0]["barrier_reached_ns"] <= res.env["ready_ns"] < p.meta[0]["loop_start_ns"]


def test_indexed_job_pod_takes_its_own_tenant_and_pads_to_a_clean_exit(runs):
    res = runs["indexed"]
    assert res.returncode == 0, res.stderr  # KTS_PAD_LIMIT_EXIT=0: nobody stopped it, and that is no failure
    p = _parse(res.stdout)
    assert p.meta[0]["tenant"] == "second" and p.meta[0]["workload"] == "noop" and p.meta[0]["iterations"] == 4
    assert (p.frame["phase"] == "op").sum() == 4 and (p.frame["phase"] == "pad").sum() > 0
    assert "was never stopped" in res.stderr


def test_indexed_job_without_an_entry_for_its_index_fails_clearly(runs):
    res = runs["bad-index"]
    assert res.returncode != 0 and "KTS_TENANTS has no entry for JOB_COMPLETION_INDEX='2'" in res.stderr
    assert "Traceback" not in res.stderr and "KTS_APP" not in res.stdout


def test_cpu_stand_in_pins_the_tenant_to_one_core(runs):
    import os

    res = runs["pinned"]
    assert res.returncode == 0, res.stderr
    assert _parse(res.stdout).meta[0]["cpu_affinity"] == [max(os.sched_getaffinity(0))]
    bad = runs["bad-core"]
    assert bad.returncode != 0 and "KTS_CPU_CORE=100000: core 100000 is not among" in bad.stderr
    assert "Traceback" not in bad.stderr and "KTS_APP" not in bad.stdout


def test_open_loop_fixed_rate(runs):
    res = runs["fixed"]
    assert res.returncode == 0, res.stderr
    f = _parse(res.stdout).frame
    rate, duration = float(res.env["RATE_HZ"]), float(res.env["DURATION_S"])
    # DURATION_S stops new arrivals: the schedule, not the machine's speed, decides how many
    assert len(f) == int(duration * rate) + 1
    intended = f["intended_ns"].to_numpy(np.int64)
    assert (np.diff(intended) == int(1e9 / rate)).all()  # 5 ms apart
    assert (f["end_ns"].to_numpy(np.int64) >= intended).all()  # latency counts from the intended arrival
    assert (f["start_ns"].to_numpy(np.int64) >= intended).all()
    assert json.loads(res.stdout.splitlines()[0].split(",", 2)[2])["arrival"] == "fixed"


@pytest.mark.parametrize("env, args, needle", [
    ({"WORKLOAD": ""}, [], "--workload (or WORKLOAD) is required"),
    ({"ITERATIONS": "0"}, [], "must be positive"),
    ({"SLEEP_MS": "-1"}, [], "not negative"),
    ({"ARRIVAL": "poisson"}, [], "rate-hz"),
])
def test_bad_args_exit_2_with_usage(start_worker, env, args, needle):
    proc = start_worker(env, args=args)
    stdout, stderr = proc.communicate(timeout=60)
    res = Done(proc.returncode, stdout, stderr, env)
    assert res.returncode == 2
    assert res.stderr.startswith("usage:")
    assert needle in res.stderr
    assert "KTS_APP" not in res.stdout and "Traceback" not in res.stderr


def test_device_cuda_without_gpu_fails_clearly(runs):
    res = runs["cuda"]
    assert res.returncode != 0
    assert "DEVICE=cuda requested but torch sees no CUDA GPU" in res.stderr
    assert "KTS_APP" not in res.stdout


def test_llm_prefill_and_decode_phases(runs):
    res = runs["llm"]
    assert res.returncode == 0, res.stderr
    p = _parse(res.stdout)
    assert p.n == 2 * (1 + 3) and p.malformed == 0
    for _, grp in p.frame.groupby("iteration"):
        assert grp["phase"].tolist() == ["prefill", "decode", "decode", "decode"]
        assert (grp["start_ns"].diff().dropna() > 0).all()
    assert p.meta[0]["notes"]["decode_tokens"] == 3 and p.meta[0]["flops_per_op"] > 0


def test_go_file_barrier_says_ready_then_waits_for_its_own_start(tmp_path, capsys):
    """The cluster barrier: a ready line with the worker's clock, then this tenant's start from the go file."""
    import importlib.util
    import threading
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "workers" / "kts_worker.py"
    spec = importlib.util.spec_from_file_location("kts_worker_go", path)
    worker = importlib.util.module_from_spec(spec)
    import sys

    sys.modules[spec.name] = worker  # its dataclasses look their module up
    spec.loader.exec_module(worker)
    go = tmp_path / "start_at"
    go.write_text("")  # the ConfigMap exists from the start, empty until every tenant is ready
    args = worker.parse_args(["--workload", "noop", "--tenant", "b", "--go-file", str(go), "--barrier-timeout-s", "20"])
    start = time.time_ns() + int(0.3e9)

    def publish() -> None:
        time.sleep(0.15)
        go.write_text(json.dumps({"a": 1, "b": start}))

    threading.Thread(target=publish, daemon=True).start()
    before = time.time_ns()
    assert worker.wait_for_start(args) == start
    assert time.time_ns() >= start
    from kts_harness import READY_PREFIX

    ready = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith(READY_PREFIX)]
    assert 1 <= len(ready) <= 2 and ready[0].startswith(f"{READY_PREFIX} tenant=b clock_ns=")
    assert before <= int(ready[0].rsplit("=", 1)[1]) <= start


def test_the_workers_gpu_memory_reading_uses_nvml_and_degrades_to_unknown(monkeypatch: pytest.MonkeyPatch) -> None:
    """workers/kts_gpumem.py: NVML's device-wide used memory and compute processes (host PIDs) beside the tenant's
    own reservation; without nvidia-ml-py (optional) the reading is "unknown" with why, never an error."""
    import sys
    from types import SimpleNamespace

    import kts_gpumem

    torch = SimpleNamespace(cuda=SimpleNamespace(memory_reserved=lambda d: 2 << 30))
    cuda = SimpleNamespace(type="cuda")
    fake = SimpleNamespace(
        nvmlInit=lambda: None, nvmlShutdown=lambda: None,
        nvmlDeviceGetHandleByUUID=lambda u: ("h", u), nvmlDeviceGetHandleByIndex=lambda i: ("h", i),
        nvmlDeviceGetMemoryInfo=lambda h: SimpleNamespace(used=7 << 30, total=80 << 30),
        nvmlDeviceGetComputeRunningProcesses=lambda h: [SimpleNamespace(pid=11, usedGpuMemory=3 << 30),
                                                         SimpleNamespace(pid=12, usedGpuMemory=None)])
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    monkeypatch.setattr(kts_gpumem.os, "getpid", lambda: 11)
    got = kts_gpumem.gpu_memory(torch, cuda, "GPU-a")
    assert got == {"source": "nvml", "gpu_uuid": "GPU-a", "device_used_bytes": 7 << 30, "device_total_bytes": 80 << 30,
                   "own_reserved_bytes": 2 << 30, "own_pid": 11, "own_process_bytes": 3 << 30,
                   "processes": [{"pid": 11, "used_bytes": 3 << 30}, {"pid": 12, "used_bytes": None}]}
    monkeypatch.setitem(sys.modules, "pynvml", None)  # not installed: import fails
    assert kts_gpumem.gpu_memory(torch, cuda)["status"] == "unknown"
    assert kts_gpumem.gpu_memory(torch, SimpleNamespace(type="cpu")) == {"status": "unknown", "reason": "not on CUDA"}


UUID_HEX = "0b6c8a1e-2f4d-4c1b-9a7e-1d2c3b4a5f60"


def _props(**kw):
    from types import SimpleNamespace

    return SimpleNamespace(name="NVIDIA H100 80GB HBM3", **kw)


def _fake_torch(props):
    from types import SimpleNamespace

    seen = []

    def get_device_properties(device):
        seen.append(device)
        return props

    return SimpleNamespace(cuda=SimpleNamespace(get_device_properties=get_device_properties)), seen


@pytest.mark.parametrize("raw,expected", [
    pytest.param("uuid", f"GPU-{UUID_HEX}", id="uuid-object"),  # torch's _CUuuid prints as the bare hex form
    pytest.param(UUID_HEX, f"GPU-{UUID_HEX}", id="bare-string"),
    # a build whose uuid already reads GPU-...: once prefixed, not GPU-GPU-... (which would match neither the
    # placeholders' NVML UUID nor dcgm-exporter's label)
    pytest.param(f"GPU-{UUID_HEX}", f"GPU-{UUID_HEX}", id="prefixed-string"),
    pytest.param("missing", None, id="missing"),
    pytest.param(None, None, id="none"),
])
@pytest.mark.parametrize("pipe", [None, "", "/tmp/nvidia-mps"], ids=["mps-unset", "mps-empty", "mps-set"])
def test_gpu_identity_reports_the_uuid_and_the_mps_client(worker_module, monkeypatch: pytest.MonkeyPatch, raw,
                                                          expected, pipe) -> None:
    """workers/kts_worker.py ``gpu_identity``: the GPU as CUDA reports it to the process, in NVML's form
    (``GPU-<uuid>``: what the backend compares between tenants, with the placeholders' NVML UUID and with
    dcgm-exporter's ``UUID`` label), ``CUDA_VISIBLE_DEVICES`` as given, and ``mps_client`` true exactly when the
    device plugin set a non-empty ``CUDA_MPS_PIPE_DIRECTORY``. Exact fields: a dropped, renamed or mis-typed one
    fails (``mps_client`` must be a bool, not the directory)."""
    import uuid

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", f"GPU-{UUID_HEX}")
    if pipe is None:
        monkeypatch.delenv("CUDA_MPS_PIPE_DIRECTORY", raising=False)
    else:
        monkeypatch.setenv("CUDA_MPS_PIPE_DIRECTORY", pipe)
    props = _props() if raw == "missing" else _props(uuid=uuid.UUID(UUID_HEX) if raw == "uuid" else raw)
    torch, seen = _fake_torch(props)
    device = type("Device", (), {"type": "cuda"})()
    got = worker_module.gpu_identity(torch, device)
    assert got == {"gpu_uuid": expected, "cuda_visible_devices": f"GPU-{UUID_HEX}", "mps_client": bool(pipe)}
    assert type(got["mps_client"]) is bool and seen == [device]


def test_gpu_identity_names_a_mig_device_the_pci_address_and_nothing_off_cuda(worker_module,
                                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """Under a MIG instance (``CUDA_VISIBLE_DEVICES=MIG-...``) the UUID takes NVML's ``MIG-`` prefix; the PCI address
    is added where CUDA gives domain, bus and device; a CPU device reports no GPU and reads no CUDA property."""
    import uuid

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", f"MIG-{UUID_HEX}")
    monkeypatch.delenv("CUDA_MPS_PIPE_DIRECTORY", raising=False)
    torch, _ = _fake_torch(_props(uuid=uuid.UUID(UUID_HEX), pci_domain_id=0, pci_bus_id=0x18, pci_device_id=0))
    assert worker_module.gpu_identity(torch, type("Device", (), {"type": "cuda"})()) == {
        "gpu_uuid": f"MIG-{UUID_HEX}", "cuda_visible_devices": f"MIG-{UUID_HEX}", "mps_client": False,
        "pci": "0000:18:00.0"}
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    torch, seen = _fake_torch(_props(uuid=UUID_HEX, pci_domain_id=0, pci_bus_id=None, pci_device_id=0))
    assert worker_module.gpu_identity(torch, type("Device", (), {"type": "cuda"})()) == {
        "gpu_uuid": f"GPU-{UUID_HEX}", "cuda_visible_devices": None, "mps_client": False}  # no bus: no pci
    assert worker_module.gpu_identity(torch, type("Device", (), {"type": "cpu"})()) == {"gpu_uuid": None}
    assert len(seen) == 1  # the CPU device asked CUDA nothing
