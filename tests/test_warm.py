"""The warm design (issue 43): the layout of its blocks, the worker serving blocks on command, a whole warm run on
CPU (one process per tenant for every block, time-bounded shared blocks, the idle-neighbour control), resume block
by block, and the analysis' mode-matched alone blocks."""

from __future__ import annotations

import json
import math
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import fake_mps_control

from kts_helpers.analyse import design
from kts_helpers.analyse.load import load_run, load_run_telemetry
from kts_helpers.analyse.logparse import parse_file
from kts_helpers.analyse.rules import match_baseline
from kts_helpers.analyse.summary import summarize_run
from kts_helpers.analyse.telemetry import load_telemetry
from kts_helpers.errors import SpecError
from kts_helpers.run import experiment
from kts_helpers.run.backends import local as local_backend
from kts_helpers.run.backends import warm as warm_backend
from kts_helpers.run.backends.local import WORKER, LocalBackend
from kts_helpers.run.runs import create_run
from kts_helpers.run.spec import ExperimentParams, resolve
from kts_helpers.run.telemetry import CORE_COLUMNS, read_status, write_status
from kts_helpers.run.telemetry._store import PartWriter, count_rows

INDEPENDENT = Path(__file__).resolve().parent / "independent"  # ../shared/tools, copied (independent/README.md)
SHARED_TOOLS = Path(__file__).resolve().parents[2] / "shared" / "tools"
STRANGER_CHECKS: dict[str, list[tuple[str, dict[str, int]]]] = {}  # warm run -> each block's check and companions


def _spec(device: str = "cuda", **params):
    return resolve(ExperimentParams.from_mapping(params), device)


# -- the layout ------------------------------------------------------------------------------------------------
def test_the_gpu_profiles_alternate_many_blocks_per_mode_with_mps_alone_blocks_of_their_own():
    """blocks=auto (issue 52): the spec plans the most blocks the looks may reach (24 shared, 25 alone rounds per
    mode), each the size of the first look's 8; the run leaves out what it does not need (``backends.autoblocks``)."""
    spec = _spec(profile="article", sharing="timeslice,mps")
    names = [s.name for s in spec.scenarios]
    assert spec.resolved["design_kind"] == "warm" and spec.resolved["blocks"] == 24
    assert spec.resolved["blocks_auto"] == {"looks": [8, 12, 16, 20, 24], "budget_factor": 1.5, "first": 8}
    assert "blocks=auto" in spec.resolved["design"] and "at most 24" in spec.resolved["design"]
    ts = names[: names.index("control-fft-absent") + 1]
    assert ts[:6] == ["baseline-fft-r1", "baseline-gemm-r1", "shared-r1", "baseline-fft-r2", "baseline-gemm-r2",
                      "shared-r2"]
    assert ts[-3:] == ["baseline-fft-r25", "baseline-gemm-r25", "control-fft-absent"]
    mps = [s for s in spec.scenarios if s.sharing == "mps"]
    assert [s.name for s in mps][:3] == ["baseline-mps-fft-r1", "baseline-mps-gemm-r1", "shared-mps-r1"]
    assert sum(s.kind == "shared" for s in mps) == 24 and sum(s.kind == "baseline" for s in mps) == 50
    assert sum(s.kind == "control" for s in spec.scenarios) == 1  # once per run
    # each block holds at least the first look's share of the side's iterations: 800 alone over 9, shared over 8
    assert {t.iterations for s in spec.scenarios if s.kind == "baseline" for t in s.tenants} == {89}
    assert {t.iterations for s in spec.scenarios if s.kind == "shared" for t in s.tenants} == {100}
    assert [s.repeat for s in spec.scenarios if s.name.startswith("shared-r")] == list(range(24))
    fixed = _spec(profile="article", blocks=8)  # a fixed count still works, without looks
    assert fixed.resolved["blocks"] == 8 and "blocks_auto" not in fixed.resolved
    assert sum(s.kind == "shared" for s in fixed.scenarios) == 8
    with pytest.raises(SpecError, match="blocks=auto .* only the warm design"):
        _spec(profile="article", design="fresh", blocks="auto")


@pytest.mark.parametrize("extra, clash", [
    ({"repeats": 2}, "repeats=2"), ({"sharing": "mps-limited", "mps_thread_percentage": 50}, "mps-limited"), ({"iterations": "auto"}, "auto"),
    ({"backend": "kubernetes"}, "backend=kubernetes"), ({"matrix": True}, "matrix"),
])
def test_warm_asked_where_it_cannot_run_is_refused_and_the_profile_falls_back_saying_why(extra, clash):
    with pytest.raises(SpecError, match=clash):
        _spec(profile="article", design="warm", **extra)
    spec = _spec(profile="article", **extra)
    assert spec.resolved.get("design_kind") == "fresh" and not any(s.kind == "control" for s in spec.scenarios)


def test_the_preflight_builds_each_tenant_once_and_leaves_the_kits_models_to_the_warm_session():
    warm = _spec(profile="article", workloads="llama-decode,bert,fft,my_models:gpt2_serve")
    assert [t.name for t in experiment.preflight_tenants(warm)] == ["fft", "gpt2-serve"]
    fresh = _spec(profile="article", workloads="llama-decode,bert,fft,my_models:gpt2_serve", design="fresh")
    assert [t.name for t in experiment.preflight_tenants(fresh)] == ["llama-decode", "bert", "fft", "gpt2-serve"]


def test_design_and_block_s_are_checked():
    with pytest.raises(SpecError, match="design='tepid'"):
        _spec(profile="article", design="tepid")
    with pytest.raises(SpecError, match="block_s must be > 0"):
        _spec(profile="article", block_s=0)
    assert _spec(profile="article", block_s=3.5).resolved["block_s"] == 3.5
    assert _spec("cpu", profile="cpu-quick").resolved.get("design_kind") == "warm"  # the quickstart too (issue 52)
    assert _spec("cpu", profile="tiny").resolved.get("design_kind") != "warm"  # the tests' profile: asked for only


def test_a_tenant_has_one_name_for_its_sleep_and_parameters():
    by_table = _spec("cpu", profile="tiny", workloads="fft,my_models:make_gpt2_serve", sleep_ms={"gpt2-serve": 7.0},
                     backend="kubernetes")
    by_run = _spec("cpu", profile="tiny", workloads="fft,my_models:make_gpt2_serve",
                   sleep_ms={"my_models:make_gpt2_serve": 7.0}, backend="kubernetes")
    for spec in (by_table, by_run):
        assert spec.scenario("baseline-gpt2-serve").tenants[0].sleep_ms == 7.0
    with pytest.raises(SpecError, match="twice"):
        _spec("cpu", profile="tiny", workloads="fft,my_models:make_gpt2_serve", backend="kubernetes",
              sleep_ms={"gpt2-serve": 7.0, "my_models:make_gpt2_serve": 8.0})


# -- the worker serving blocks ----------------------------------------------------------------------------------
def _cmd(serve: Path, tmp: Path, tenant: str, k: int, block: str, **over) -> Path:
    barrier = tmp / f"barrier-{block}"
    barrier.mkdir()
    cmd = {"block": block, "kind": "baseline", "log": str(tmp / f"{block}.log"), "stderr": str(tmp / f"{block}.err"),
           "barrier": str(barrier), "block_s": 0.2, "min_iterations": 5, "iterations": 1_000_000, "lead_in_s": 0.0,
           "pad": False, **over}
    (serve / f".cmd-{tenant}-{k}.json.tmp").write_text(json.dumps(cmd))
    (serve / f".cmd-{tenant}-{k}.json.tmp").rename(serve / f"cmd-{tenant}-{k}.json")
    return barrier


def _wait(path: Path, timeout_s: float = 60.0) -> None:
    end = time.monotonic() + timeout_s
    while not path.exists():
        assert time.monotonic() < end, f"{path.name} never appeared"
        time.sleep(0.02)


def _go(barrier: Path, tenant: str) -> None:
    _wait(barrier / f"ready-{tenant}")
    (barrier / ".go.tmp").write_text(str(time.time_ns()))
    (barrier / ".go.tmp").rename(barrier / "go")  # written whole, as the backends do


def test_a_go_file_seen_before_its_instant_is_written_is_waited_for(tmp_path):
    """A barrier's go written by a writer that is not atomic (created empty, filled a moment later): the worker
    waits for the instant instead of failing the block on an empty file."""
    proc, serve = _serve(tmp_path)
    try:
        _wait(serve / "ready-a")
        barrier = _cmd(serve, tmp_path, "a", 1, "baseline-a-r1")
        _wait(barrier / "ready-a")
        (barrier / "go").write_text("")
        time.sleep(0.3)
        (barrier / "go").write_text(str(time.time_ns()))
        _wait(serve / "done-a-1")
        assert (serve / "done-a-1").read_text() == "0"
        (serve / "quit-a").write_text("")
        assert proc.wait(timeout=30) == 0
    finally:
        proc.kill()
    assert parse_file(tmp_path / "baseline-a-r1.log").ends[0]["n"] >= 5


def _serve(tmp_path: Path, **env) -> tuple[subprocess.Popen, Path]:
    serve = tmp_path / "serve"
    serve.mkdir()
    proc = subprocess.Popen([sys.executable, str(WORKER), "--workload", "noop", "--tenant", "a", "--device", "cpu",
                             "--sleep-ms", "2", "--warmup", "1", "--serve-dir", str(serve)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env={**__import__("os").environ, **env})
    return proc, serve


def test_one_worker_serves_blocks_on_command_each_in_its_own_log_and_quits(tmp_path):
    proc, serve = _serve(tmp_path)
    try:
        _wait(serve / "ready-a")
        for k, block in enumerate(("baseline-a-r1", "baseline-a-r2"), start=1):
            _go(_cmd(serve, tmp_path, "a", k, block), "a")
            _wait(serve / f"done-a-{k}")
            assert (serve / f"done-a-{k}").read_text() == "0"
        (serve / "quit-a").write_text("")
        assert proc.wait(timeout=30) == 0
    finally:
        proc.kill()
    logs = [parse_file(tmp_path / f"baseline-a-r{k}.log") for k in (1, 2)]
    metas = [p.meta[0] for p in logs]
    assert [m["block"] for m in metas] == ["baseline-a-r1", "baseline-a-r2"]
    assert metas[0]["pid"] == metas[1]["pid"] == proc.pid  # one process, both blocks: warm
    for p in logs:
        timed = p.frame[p.frame["phase"] != "pad"]
        span_s = (timed["end_ns"].max() - timed["start_ns"].min()) / 1e9
        assert len(timed) >= 5 and span_s >= 0.15  # bounded by time (0.2 s) and the minimum, not a count of 5
        assert len(p.ends) == 1 and p.ends[0]["n"] == len(timed)
    assert b"KTS_META" in proc.stdout.read()  # the process's own log: its set-up record


def test_a_shared_block_times_until_every_tenant_reached_its_share_then_pads_until_stopped(tmp_path):
    proc, serve = _serve(tmp_path)
    try:
        _wait(serve / "ready-a")
        barrier = _cmd(serve, tmp_path, "a", 1, "shared-r1", kind="shared", pad=True, block_s=0.1, min_iterations=3)
        (barrier / "ready-b").write_text("")  # a neighbour that printed its first line, not yet at its share
        (barrier / "started-b").write_text("")
        _go(barrier, "a")
        time.sleep(1.0)
        log = tmp_path / "shared-r1.log"
        assert (barrier / "reached-a").exists() and b"KTS_END" not in log.read_bytes()  # still timing for b
        (barrier / "reached-b").write_text("")
        _wait(tmp_path / "shared-r1.log")
        end = time.monotonic() + 20
        while b"KTS_END" not in log.read_bytes():
            assert time.monotonic() < end
            time.sleep(0.02)
        time.sleep(0.3)
        assert not (serve / "done-a-1").exists()  # padding: its load stays on until the block is stopped
        (barrier / "stop").write_text("")
        _wait(serve / "done-a-1")
        (serve / "quit-a").write_text("")
        assert proc.wait(timeout=30) == 0
    finally:
        proc.kill()
    lines = log.read_bytes().splitlines()
    end_at = next(i for i, ln in enumerate(lines) if ln.startswith(b"KTS_END"))
    timed = [ln for ln in lines[:end_at] if ln.startswith(b"KTS_APP") and b",pad," not in ln]
    assert len(timed) > 100  # it timed through the second it waited for b, far past its own 3
    assert all(b",pad," in ln for ln in lines[end_at + 1:] if ln.startswith(b"KTS_APP"))


def test_a_crash_mid_block_keeps_every_line_already_written(tmp_path):
    proc, serve = _serve(tmp_path, KTS_CRASH_AFTER="7")
    try:
        _wait(serve / "ready-a")
        _go(_cmd(serve, tmp_path, "a", 1, "baseline-a-r1", block_s=30, min_iterations=1000), "a")
        assert proc.wait(timeout=60) != 0
    finally:
        proc.kill()
    parsed = parse_file(tmp_path / "baseline-a-r1.log")
    assert list(parsed.frame["iteration"]) == list(range(8)) and not (serve / "done-a-1").exists()


# -- a whole warm run on CPU ------------------------------------------------------------------------------------
WARM_TINY = {"profile": "tiny", "design": "warm", "blocks": 2, "block_s": 0.4, "calibrate_iterations": 0,
             "iterations": 20, "sleep_ms_fft": 2.0, "sleep_ms_gemm": 6.0}


def _make(root: Path, **params):
    spec = resolve(ExperimentParams.from_mapping({**WARM_TINY, **params}), "cpu")
    d = spec.to_dict()
    d["backend_options"] = {}
    return create_run(d, {"note": "test"}, root=root, run_id="w"), spec


@pytest.fixture(scope="module")
def warm_run(tmp_path_factory):
    run, _spec = _make(tmp_path_factory.mktemp("warm"))
    backend = LocalBackend("cpu", telemetry=False)
    checks: list[tuple[str, dict[str, int]]] = []  # each block's stranger check: the block and its companions
    real = warm_backend.gpu_memory_check

    def spy(run_, scenario, companions=None):
        checks.append((scenario.name, dict(companions or {})))
        return real(run_, scenario, companions)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(warm_backend, "gpu_memory_check", spy)
        experiment.run_kind(run, "all", backend=backend, progress=False)
    STRANGER_CHECKS[str(run.path)] = checks
    return run


def test_every_block_of_a_warm_run_ran_in_one_process_per_tenant(warm_run):
    m = warm_run.read()
    assert [s.name for s in m.scenarios] == ["baseline-fft-r1", "baseline-gemm-r1", "shared-r1", "baseline-fft-r2",
                                             "baseline-gemm-r2", "shared-r2", "baseline-fft-r3", "baseline-gemm-r3",
                                             "control-fft-absent"]
    assert all(m.record(s.name).status == "complete" for s in m.scenarios)
    pids: dict[str, set[int]] = {}
    for s in m.scenarios:
        for t in s.tenant_names:
            meta = parse_file(warm_run.log_path(s.name, t)).meta[0]
            assert meta["block"] == s.name and meta["design"] == "warm"
            pids.setdefault(t, set()).add(meta["pid"])
        rec = m.record(s.name).extra  # the record says which session's process ran the block, as its log does
        assert rec["design"] == "warm" and rec["warm"]["session"] == "timeslice.1"
        assert rec["warm"]["pids"] == {t: parse_file(warm_run.log_path(s.name, t)).meta[0]["pid"]
                                       for t in s.tenant_names}
    assert all(len(p) == 1 for p in pids.values()), pids
    assert [p.name for p in (warm_run.path / "warm").iterdir()] == ["timeslice.1"]
    # every block ran the stranger check (run.gpumem; unknown on CPU), an alone block with its idle neighbour's
    # process as the run's own (by PID: NVML lists it on the host), a shared block or the control with none
    checks = STRANGER_CHECKS[str(warm_run.path)]
    assert [name for name, _ in checks] == [s.name for s in m.scenarios]
    for name, companions in checks:
        assert m.record(name).extra["gpu_memory"]["status"] == "unknown"
        idle = {t: next(iter(p)) for t, p in pids.items() if t not in m.scenario(name).tenant_names} \
            if not name.startswith("control") else {}
        assert companions == {f"{t} (idle, resident)": pid for t, pid in idle.items()}, (name, companions)


def _padded_while_a_neighbour_timed(frames: dict[str, pd.DataFrame], tenant: str) -> tuple[int, int]:
    """(timed, padded while a neighbour was still timing) for one tenant of a shared block: the waste a block
    bounded by a count makes (the fast tenant pads until the slowest is done). The padding after every tenant's
    end, until the orchestrator says stop, is not counted: its length is the orchestrator's reaction, which a
    loaded machine stretches (CI once saw 188 such lines after 183 timed) and which no design removes."""
    own = frames[tenant]
    timed = own[own["phase"] != "pad"]
    after = own[(own["phase"] == "pad") & (own["start_ns"] > timed["start_ns"].max())]
    neighbours_last = max(f.loc[f["phase"] != "pad", "start_ns"].max() for t, f in frames.items() if t != tenant)
    return len(timed), int((after["start_ns"] < neighbours_last).sum())


def test_a_warm_shared_block_wastes_no_co_running_iteration_and_every_timed_one_co_ran(warm_run):
    data = load_run(warm_run.path)
    shared = data.iterations[data.iterations["kind"] == "shared"]
    assert shared["in_overlap"].all() and len(shared) > 0
    for scen in ("shared-r1", "shared-r2"):
        frames = {t: parse_file(warm_run.log_path(scen, t)).frame for t in ("fft", "gemm")}
        for t in frames:
            timed, wasted = _padded_while_a_neighbour_timed(frames, t)
            # gemm's cadence is 3x fft's: bounded by a count, fft would pad most of the block while gemm timed
            assert timed >= 20 and wasted <= max(10, timed // 5), (scen, t, timed, wasted)
    # the project's own cross-check (independent/corunning.py): every timed iteration co-ran, from the raw logs
    out = subprocess.run([sys.executable, str(INDEPENDENT / "corunning.py"), str(warm_run.path)], capture_output=True,
                         text=True)
    assert out.returncode == 0 and "100.0%" in out.stdout and "(9" not in out.stdout


def test_a_stranger_beside_a_warm_block_fails_it_by_name_and_the_idle_neighbour_does_not(tmp_path):
    """The check the local and warm designs run after every block (``procs.gpu_memory_check`` then
    ``refuse_stranger``), on the readings the worker's own code makes from a model of the driver
    (tests/fake_nvml.py: the H200's reserve, a host's view of every process): an alone block of fft beside the idle
    resident gemm passes, gemm counted as the run's own by its PID; a process holding 1 GiB fails the block, named by
    PID, memory and name. Fails when a stranger is recorded without failing the block, or when companions are not
    counted (the idle gemm then reads as a stranger). The backends' calls are checked on a whole warm run
    (``test_every_block_of_a_warm_run_ran_in_one_process_per_tenant``)."""
    from fake_nvml import GIB, MIB, FakeGpu, reading

    from kts_helpers.run.backends.procs import StrangerContext, gpu_memory_check, refuse_stranger

    run, spec = _make(tmp_path)
    scen = spec.scenario("baseline-fft-r1")
    run.claim_scenario(scen.name)
    gpu = FakeGpu()
    gpu.hold(200, (2 << 30) + 400 * MIB)  # fft, timing
    gpu.hold(201, 3 << 30)  # gemm, idle between its blocks
    gpu.hold(202, 1 * GIB, "python3")  # someone else's

    def end(r: dict) -> str:
        return "KTS_END,v2," + json.dumps({"tenant": "fft", "timed": 20, "gpu_memory": r}) + "\n"

    run.log_path(scen.name, "fft").write_text(end(reading(gpu, 200, torch_reserved=2 << 30)))
    check = gpu_memory_check(run, scen, {"gemm (idle, resident)": 201})
    assert check["status"] == "stranger" and check["strangers"] == [{"pid": 202, "used_mib": 1024.0, "name": "python3"}]
    assert check["companions_mib"]["gemm (idle, resident)"] == 3072.0
    with pytest.raises(StrangerContext, match=r"scenario 'baseline-fft-r1': a stranger context on GPU GPU-fake-0: "
                                              r"1024 MiB .* pid 202 python3 \(1024.0 MiB\) \(host PIDs\)"):
        refuse_stranger(scen, check)
    gpu.release(202)
    run.log_path(scen.name, "fft").unlink()
    run.log_path(scen.name, "fft").write_text(end(reading(gpu, 200, torch_reserved=2 << 30)))
    clean = gpu_memory_check(run, scen, {"gemm (idle, resident)": 201})
    assert clean["status"] == "ok" and clean["unexplained_mib"] == 0
    refuse_stranger(scen, clean)


def test_the_control_block_ran_with_the_neighbours_gone_and_the_report_reads_it(warm_run):
    m = warm_run.read()
    ctrl = m.record("control-fft-absent")
    last_idle = m.record("baseline-gemm-r3")
    gemm_pid = parse_file(warm_run.log_path("baseline-gemm-r3", "gemm")).meta[0]["pid"]
    fft_meta = parse_file(warm_run.log_path("control-fft-absent", "fft")).meta[0]
    assert ctrl.started_ns >= last_idle.ended_ns and fft_meta["pid"] != gemm_pid
    assert not Path(f"/proc/{gemm_pid}").exists() or b"kts_worker" not in Path(f"/proc/{gemm_pid}/cmdline").read_bytes()
    data = load_run(warm_run.path)
    checks = design.controls(data)
    assert {(c.tenant, c.clock) for c in checks} == {("fft", "wall"), ("fft", "device")}
    cost = design.cost_table(data)
    assert set(cost["kind"]) == {"baseline", "shared", "control"} and cost.attrs["span_s"] > 0


def test_resume_reruns_only_the_blocks_without_a_record(tmp_path):
    run, spec = _make(tmp_path, blocks=1)
    backend = LocalBackend("cpu", telemetry=False)
    first = list(spec.scenarios[:2])
    backend.run_warm(run, first, timeout_s=60, block_s=0.4, progress=False)
    kept = {s.name: run.log_path(s.name, s.tenant_names[0]).read_bytes() for s in first}
    cut = spec.scenarios[2]  # a block the client's death cut off: logs, no record
    run.claim_scenario(cut.name)
    run.log_path(cut.name, "fft").write_bytes(b"KTS_APP,v2,fft,fft,0,op,1,1,2,0.1,0.1\n")
    experiment.resume_experiment(str(run.path), root=tmp_path, progress=False, backend=backend)
    m = run.read()
    assert all(m.record(s.name).status == "complete" for s in m.scenarios)
    assert {s.name: run.log_path(s.name, s.tenant_names[0]).read_bytes() for s in first} == kept
    assert any(i["scenario"] == cut.name for i in run.manifest()["interrupted"])


def test_a_run_of_mps_alone_measures_its_mps_client_blocks_against_plain_alone_once(tmp_path):
    fake, record = fake_mps_control(tmp_path)
    run, spec = _make(tmp_path, blocks=3, sharing="mps")
    assert [s.name for s in spec.scenarios][-2:] == ["baseline-fft-plain", "baseline-gemm-plain"]
    assert {s.sharing for s in spec.scenarios[-2:]} == {"timeslice"}
    experiment.run_kind(run, "all", backend=LocalBackend("cpu", telemetry=False, mps_control=str(fake)), progress=False)
    m = run.read()
    assert sorted(p.name for p in (run.path / "warm").iterdir()) == ["mps.1", "timeslice.1"]
    assert record.read_text().count("cmd=quit") == 1  # the plain blocks ran after the server had quit
    plain = m.record("baseline-fft-plain")
    assert plain.started_ns > max(m.record(s.name).ended_ns for s in m.scenarios if s.sharing == "mps")
    data = load_run(run.path)
    table = design.mps_alone_table(data)
    assert set(table["tenant"]) == {"fft", "gemm"} and set(table["plain_blocks"]) == {1}
    assert set(table["mps_client_blocks"]) == {4}
    shared = match_baseline(data.iterations[data.iterations["kind"] == "baseline"], "fft", "fft", "op", "mps")
    assert set(shared["sharing"]) == {"mps"}  # the verdicts still read MPS shared against MPS alone
    rows = summarize_run(data)
    assert set(rows.loc[rows["kind"] == "shared", "group"]) == {"shared-mps"}
    assert set(design.alone_against_alone(data)["sharing"]) == {"mps"}  # one plain block: no pair to read


class _SessionSampler:
    """Stands in for the NVML sampler on a CPU: a thread writing a sample every 20 ms, as the real one writes them."""

    started: list[Path] = []

    def __init__(self, out_path, interval_ms=100.0, gpu_uuid=None, **_):
        self.out_path, self.halt = Path(out_path), threading.Event()
        self.thread = threading.Thread(target=self._loop, daemon=True)

    def _loop(self) -> None:
        writer = PartWriter(self.out_path, CORE_COLUMNS)
        while not self.halt.wait(0.02):
            writer.add({"ts_ns": time.time_ns(), "gpu_index": 0, "gpu_util_pct": 50.0, "sm_clock_mhz": 1980.0})
            writer.flush()
        writer.consolidate()

    def start(self):
        type(self).started.append(self.out_path)
        write_status(self.out_path, {"status": "partial", "reason": "running", "gpm": False, "samples": 0,
                                     "interval_ms": 20.0, "gpu_index": 0, "gpu_name": "fake", "source": "nvml",
                                     "max_sm_clock_mhz": 1980.0, "pid": 1})
        self.thread.start()
        return self

    def stop(self):
        self.halt.set()
        self.thread.join()
        return write_status(self.out_path, {**read_status(self.out_path), "status": "complete", "reason": "",
                                            "samples": count_rows(self.out_path)})


def test_one_sampler_serves_the_whole_session_and_each_block_reads_its_own_window(tmp_path, monkeypatch):
    """A sampler per block cost about a second of each block's wall on the H200; one per session, sliced."""
    monkeypatch.setattr(local_backend, "TelemetrySampler", _SessionSampler)
    _SessionSampler.started = []
    run, spec = _make(tmp_path, blocks=2)
    experiment.run_kind(run, "all", backend=LocalBackend("cpu", telemetry=True), progress=False)
    assert _SessionSampler.started == [run.path / "warm" / "timeslice.1" / "telemetry.parquet"]
    m = run.read()
    assert not any((run.log_dir(s.name) / "telemetry.parquet").exists() for s in m.scenarios)
    tel, status = load_run_telemetry(run, m)
    whole = load_telemetry(_SessionSampler.started[0])
    for s in m.scenarios:
        rec, mine = m.record(s.name), tel[tel["scenario"] == s.name]
        inside = whole[(whole["ts_ns"] >= rec.started_ns) & (whole["ts_ns"] <= rec.ended_ns)]
        assert len(mine) == status[s.name]["samples"] == len(inside) > 0
        assert status[s.name]["status"] == "complete" and status[s.name]["session_path"] == "warm/timeslice.1/telemetry.parquet"
    assert len(tel) < len(whole)  # the idle time between blocks belongs to no block


# -- the analysis ----------------------------------------------------------------------------------------------
def test_an_mps_shared_series_is_paired_with_the_mps_alone_blocks_where_the_run_has_them():
    rows = pd.DataFrame({"tenant": ["fft"] * 3, "workload": ["fft"] * 3, "phase": ["op"] * 3,
                         "sharing": ["timeslice", "mps", "timeslice"], "x": [1, 2, 3]})
    assert list(match_baseline(rows, "fft", "fft", "op", "mps")["x"]) == [2]
    assert list(match_baseline(rows, "fft", "fft", "op", "timeslice")["x"]) == [1, 3]
    assert list(match_baseline(rows[rows["sharing"] != "mps"], "fft", "fft", "op", "mps")["x"]) == [1, 3]


def test_the_idle_neighbour_control_flags_only_a_change_beyond_5_percent_its_interval_and_the_runs_drift():
    base = dict(tenant="fft", phase="op", clock="wall", n_idle=500, n_absent=500, p99_idle=2.0, p99_absent=2.0,
                p50_idle=1.0)
    sure = dict(p50_ratio_lo=1.15, p50_ratio_hi=1.25)
    assert not design.Control(**base, p50_absent=1.04, drift=0.0, p50_ratio_lo=1.02, p50_ratio_hi=1.06).flagged
    assert design.Control(**base, p50_absent=1.20, drift=0.05, **sure).flagged
    assert not design.Control(**base, p50_absent=1.20, drift=float(np.log(1.3)), **sure).flagged  # drift covers it
    assert not design.Control(**base, p50_absent=1.20, drift=0.0, p50_ratio_lo=0.9, p50_ratio_hi=1.5).flagged
    tail = {**base, "p99_absent": 2.6}
    assert design.Control(**tail, p50_absent=1.0, drift=0.0, p50_ratio_lo=0.98, p50_ratio_hi=1.02).flagged
    few = {**tail, "n_idle": 89, "n_absent": 89}  # a p99 of 89 iterations is its largest one or two: not read
    assert not design.Control(**few, p50_absent=1.0, drift=0.0, p50_ratio_lo=0.98, p50_ratio_hi=1.02).flagged
    # an unbounded median interval (the H100 headline's FFT, 89 autocorrelated samples a side): the control shows
    # nothing, and its words say so instead of "no difference"
    blind = design.Control(**few, p50_absent=0.97, drift=0.0, p50_ratio_lo=0.0, p50_ratio_hi=math.inf)
    assert not blind.flagged and not blind.bounded
    assert "not shown either way" in blind.words and "no difference" not in blind.words
    seen = design.Control(**few, p50_absent=0.97, drift=0.0, p50_ratio_lo=0.95, p50_ratio_hi=0.99)
    assert seen.bounded and "no difference beyond 5 %" in seen.words


def test_alone_against_alone_reads_the_alternating_alone_blocks_through_the_verdict(tmp_path):
    run, _spec = _make(tmp_path, blocks=3)
    experiment.run_kind(run, "all", backend=LocalBackend("cpu", telemetry=False), progress=False)
    t = design.alone_against_alone(load_run(run.path))
    assert set(zip(t["tenant"], t["clock"], strict=True)) == {(x, c) for x in ("fft", "gemm") for c in ("wall", "device")}
    assert set(t["blocks"]) == {"2 vs 2"} and all(len(m.split()) == 4 for m in t["medians_ms"])
    assert set(t["loud"]) <= {False, True} and t["reading"].notna().all()


def test_the_independent_tools_are_the_projects_own():
    """The copies in tests/independent are the originals in ../shared/tools, where that folder sits beside the
    checkout (a clean clone has only the copies, which is why they are here)."""
    names = sorted(p.name for p in INDEPENDENT.glob("*.py"))
    assert names == ["alone_vs_alone.py", "corunning.py", "tailcount.py"]
    if SHARED_TOOLS.is_dir():
        for name in names:
            assert (INDEPENDENT / name).read_bytes() == (SHARED_TOOLS / name).read_bytes(), name
