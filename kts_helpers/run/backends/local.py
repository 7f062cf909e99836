"""Local backend: a scenario's tenants as OS processes on this host.

On one GPU, CUDA time-slices these processes exactly as it does for pods that the NVIDIA
device plugin's time-slicing puts on one GPU, so no cluster is needed to measure the effect.
Each tenant's stdout goes to its own log file, stderr is kept beside it; a failing tenant,
a time limit or Ctrl-C stops the other tenants of the scenario (only those processes).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from kts_helpers.errors import BackendError, KtsError, TenantFailed
from kts_helpers.fsutil import write_new
from kts_helpers.run.backends.autoblocks import AutoBlocks
from kts_helpers.run.backends.base import ScenarioResult, TenantResult
from kts_helpers.run.backends.procs import (
    EXIT_REASONS,
    Progress,
    check_same_gpu,
    gpu_memory_check,
    record_outcome,
    refuse_stranger,
    stop_all,
    tail,
)
from kts_helpers.run.backends.warm import WarmSession
from kts_helpers.run.corun import (
    DEFAULT_LEAD_IN_S,
    CoRunError,
    CoRunWatch,
    Judge,
    LogFollower,
    LookAnswer,
)
from kts_helpers.run.environment import WORKER, detect_environment, resolve_device
from kts_helpers.run.interrupts import interrupt_reason, sigterm_as_interrupt
from kts_helpers.run.looks import BlockJudge
from kts_helpers.run.mps import MpsDaemon
from kts_helpers.run.runs import Run
from kts_helpers.run.spec import ScenarioSpec, TenantSpec
from kts_helpers.run.telemetry import TelemetrySampler, read_status

POLL_S = 0.1
STOP_GRACE_S = 30.0  # SIGTERM -> the worker finishes its iteration; SIGKILL only if it hangs
STOP_WORD_S = 5.0  # after the stop file, how long the workers have to end on it before they get a SIGTERM


class LocalBackend:
    """Runs tenants as child processes of this Python, with a file barrier so they start together."""

    name = "local"

    def __init__(self, device: str = "auto", *, python: str = sys.executable, worker: Path = WORKER,
                 telemetry: bool = True, telemetry_interval_ms: int = 100, barrier_timeout_s: float = 300.0,
                 mps_control: str = "nvidia-cuda-mps-control", lead_in_s: float = DEFAULT_LEAD_IN_S,
                 gpu_uuid: str | None = None) -> None:
        self.device = device
        self.python = python
        self.worker = Path(worker)
        self.telemetry = telemetry
        self.telemetry_interval_ms = telemetry_interval_ms
        self.barrier_timeout_s = barrier_timeout_s
        self.mps_control = mps_control
        self.lead_in_s = float(lead_in_s)
        self.gpu_uuid = gpu_uuid  # the tenants' GPU, so telemetry samples that one (CUDA_VISIBLE_DEVICES)
        if not self.worker.exists():
            raise BackendError(f"worker script {self.worker} not found")

    def describe(self) -> dict[str, Any]:
        env = detect_environment(self.python)
        env["device"] = resolve_device(self.device, env)
        n = env.get("device_count", 0)
        env["summary"] = (f"local backend: {n} CUDA GPU(s) visible ({env.get('device_name')}); tenants share it "
                          "by CUDA time-slicing" if env["device"] == "cuda" else
                          f"local backend on CPU ({env.get('cpu_count')} cores): tenants share the cores; "
                          "wall time from when each operation was due, device time the operation alone")
        return env

    # -- running -------------------------------------------------------------------------------------------
    def run_scenario(self, run: Run, scenario: ScenarioSpec, *, timeout_s: float,
                     progress: bool = True, pad_limit_s: float | None = None,
                     judge: Judge | None = None) -> ScenarioResult:
        log_dir = run.claim_scenario(scenario.name)
        started = time.time_ns()
        results: list[TenantResult] = []
        extra: dict[str, Any] = {"sharing": scenario.sharing}
        status, reason = "failed", ""
        try:
            with sigterm_as_interrupt(), self._sharing(scenario, log_dir) as sharing_env, \
                    self._telemetry(log_dir, extra):
                results = self._run_tenants(run, scenario, sharing_env, timeout_s, progress,
                                            timeout_s if pad_limit_s is None else pad_limit_s, extra, judge)
            check_same_gpu(run, scenario)
            extra["gpu_memory"] = gpu_memory_check(run, scenario)  # a stranger context on the GPU (gpumem)
            refuse_stranger(scenario, extra["gpu_memory"])
            status = "complete"
            return ScenarioResult(scenario.name, status, results, started, time.time_ns(), extra)
        except KtsError as exc:
            reason = str(exc)
            raise
        except KeyboardInterrupt as exc:
            reason = interrupt_reason(exc)
            raise
        finally:
            record_outcome(run, scenario, self.name, status, started, results, reason, extra)

    def run_warm(self, run: Run, scenarios: list[ScenarioSpec], *, timeout_s: float, block_s: float,
                 progress: bool = True, pad_limit_s: float | None = None,
                 block_judge: BlockJudge | None = None) -> list[ScenarioResult]:
        """Run blocks of the warm design in order, one warm session per run of consecutive blocks of one sharing
        mode (``backends.warm``): each tenant's worker starts once per session and serves every block of it. Under
        ``blocks=auto`` the session looks after each look's alone round (``backends.autoblocks``; ``block_judge``
        reads the verdicts) and leaves out the blocks it no longer needs."""
        auto = run.read().spec.resolved.get("blocks_auto")
        results: list[ScenarioResult] = []
        i = 0
        while i < len(scenarios):
            mode = scenarios[i].sharing
            group = []
            while i < len(scenarios) and scenarios[i].sharing == mode:
                group.append(scenarios[i])
                i += 1
            tenants: dict[str, TenantSpec] = {}
            for s in sorted(group, key=lambda s: s.kind != "baseline"):  # alone specs first: they carry the profile
                for t in s.tenants:
                    tenants.setdefault(t.name, t)
            with sigterm_as_interrupt(), WarmSession(
                    self, run, mode, list(tenants.values()), timeout_s=timeout_s, block_s=block_s,
                    pad_limit_s=timeout_s if pad_limit_s is None else pad_limit_s, progress=progress) as session:
                looks = (AutoBlocks(run, mode, auto, block_judge, self.name, progress)
                         if auto and any(s.kind == "shared" for s in group) else None)
                for k, s in enumerate(group):
                    if looks is not None and looks.skips(s):
                        looks.skip(s)
                        continue
                    results.append(session.run_block(s))
                    if looks is not None:
                        looks.after(s, group[k + 1] if k + 1 < len(group) else None)
        return results

    def _tenant_env(self, tenant: TenantSpec, barrier: Path, sharing_env: dict[str, str | None], *, pad: bool,
                    pad_limit_s: float, lead_in_s: float) -> dict[str, str]:
        env = dict(os.environ)
        env.update(tenant.env())
        for key, value in sharing_env.items():  # None: must not be set (MPS clients and CUDA_VISIBLE_DEVICES)
            if value is None:
                env.pop(key, None)
            else:
                env[key] = value
        env.update({"DEVICE": self.device, "KTS_BARRIER_DIR": str(barrier), "PYTHONUNBUFFERED": "1",
                    "KTS_BARRIER_TIMEOUT_S": str(self.barrier_timeout_s), "KTS_LEAD_IN_S": repr(lead_in_s),
                    "KTS_PAD": "1" if pad else "0",
                    # the worker's own backstop, should this process die: later than ours, never sooner
                    "KTS_PAD_LIMIT_S": repr(pad_limit_s + 30.0)})
        return env

    def _run_tenants(self, run: Run, scenario: ScenarioSpec, sharing_env: dict[str, str | None], timeout_s: float,
                     progress: bool, pad_limit_s: float, extra: dict[str, Any],
                     judge: Judge | None = None) -> list[TenantResult]:
        barrier = Path(tempfile.mkdtemp(prefix="kts-barrier-"))
        procs: dict[str, subprocess.Popen] = {}
        handles = []
        bars = Progress(scenario, progress)
        deadline = time.monotonic() + timeout_s
        pad = scenario.kind == "shared" and len(scenario.tenants) > 1
        # the lead-in is the same for a tenant alone and shared; calibration measures the tool, not a tenant
        lead_in_s = 0.0 if scenario.kind == "calibration" else self.lead_in_s
        watch = CoRunWatch(scenario.tenant_names, pad_limit_s=pad_limit_s)
        looks = _Looks(run, scenario, barrier, judge)
        try:
            for t in scenario.tenants:
                out = open(run.log_path(scenario.name, t.name), "xb")  # noqa: SIM115 - "x": never overwrite; closed in finally
                err = open(run.stderr_path(scenario.name, t.name), "xb")  # noqa: SIM115
                handles += [out, err]
                procs[t.name] = subprocess.Popen(
                    [self.python, str(self.worker)], stdout=out, stderr=err, stdin=subprocess.DEVNULL,
                    env=self._tenant_env(t, barrier, sharing_env, pad=pad, pad_limit_s=pad_limit_s,
                                         lead_in_s=lead_in_s),
                    start_new_session=True)
                # its own session: a client killed now leaves it running, and its log may stay empty for seconds
                # (model load, profile); the pid on disk lets a resume see it (``experiment.workers_still_running``)
                write_new(run.pid_path(scenario.name, t.name), f"{procs[t.name].pid}\n".encode())
            self._release_barrier(run, scenario, procs, barrier, deadline)
            codes = self._wait(run, scenario, procs, deadline, bars, timeout_s, watch, pad, looks)
        except BaseException:
            stop_all(procs)
            raise
        finally:
            bars.close()
            for h in handles:
                h.close()
            shutil.rmtree(barrier, ignore_errors=True)
            extra["corun"] = watch.summary()
            if any(t.looks for t in scenario.tenants):
                extra["looks"] = looks.answered
        return [TenantResult(t, codes[t], str(run.log_path(scenario.name, t)), str(run.stderr_path(scenario.name, t)))
                for t in procs]

    def _release_barrier(self, run: Run, scenario: ScenarioSpec, procs: dict[str, subprocess.Popen],
                         barrier: Path, deadline: float) -> None:
        """Wait until every tenant has warmed up, then tell them all the same start instant."""
        limit = min(deadline, time.monotonic() + self.barrier_timeout_s)
        while not all((barrier / f"ready-{name}").exists() for name in procs):
            self._check_exits(run, scenario, procs)
            if time.monotonic() > limit:
                late = [n for n in procs if not (barrier / f"ready-{n}").exists()]
                raise TenantFailed(scenario.name, late[0], None, tail(run.stderr_path(scenario.name, late[0])),
                                   reason="did not finish set-up and warm-up before the time limit")
            time.sleep(0.01)
        tmp = barrier / ".go.tmp"
        tmp.write_text(str(time.time_ns() + 50_000_000))  # 50 ms ahead: every tenant sees it in time
        tmp.rename(barrier / "go")

    def _check_exits(self, run: Run, scenario: ScenarioSpec, procs: dict[str, subprocess.Popen]) -> None:
        for name, p in procs.items():
            code = p.poll()
            if code not in (None, 0):
                raise TenantFailed(scenario.name, name, code, tail(run.stderr_path(scenario.name, name)),
                                   reason=EXIT_REASONS.get(code, ""))

    def _wait(self, run: Run, scenario: ScenarioSpec, procs: dict[str, subprocess.Popen], deadline: float,
              bars: Progress, timeout_s: float, watch: CoRunWatch, pad: bool, looks: _Looks) -> dict[str, int]:
        """Follow the logs until every tenant is done; in a shared scenario, stop the padders when it is safe."""
        followers = {name: LogFollower(run.log_path(scenario.name, name)) for name in procs}
        while True:
            self._check_exits(run, scenario, procs)
            for name, follower in followers.items():
                watch.feed(name, follower.read())
                bars.update(name, watch.tenants[name])
            looks.answer(watch)
            if all(p.poll() is not None for p in procs.values()):
                return {n: p.returncode for n, p in procs.items()}
            if pad and watch.ready_to_stop():
                # the word (a ``stop`` file: the workers end padding with 0 on it, never on a SIGTERM alone), then
                # time to act on it: a SIGTERM that reaches a worker already exiting on the word (its handlers gone
                # with the interpreter) would kill it (-15); only a worker still running after that is signalled
                (looks.barrier / "stop").write_text("")
                end = time.monotonic() + STOP_WORD_S
                while any(p.poll() is None for p in procs.values()) and time.monotonic() < end:
                    time.sleep(0.01)
                stop_all(procs, grace_s=STOP_GRACE_S)
                for name, follower in followers.items():
                    watch.feed(name, follower.read())
                self._check_exits(run, scenario, procs)
                return {n: p.returncode for n, p in procs.items()}
            overrun = watch.overrun() if pad else None
            if overrun:
                stop_all(procs, grace_s=STOP_GRACE_S)
                raise CoRunError(f"scenario {scenario.name!r}: {overrun}")
            if time.monotonic() > deadline:
                slow = next(n for n, p in procs.items() if p.poll() is None)
                raise TenantFailed(scenario.name, slow, None, tail(run.stderr_path(scenario.name, slow)),
                                   reason=f"was still running at the {timeout_s:.0f}s time limit")
            time.sleep(POLL_S)

    # -- context: telemetry and sharing mode ---------------------------------------------------------------
    @contextlib.contextmanager
    def _telemetry(self, log_dir: Path, extra: dict[str, Any]) -> Iterator[None]:
        if not self.telemetry:
            extra["telemetry"] = {"status": "absent", "reason": "disabled"}
            yield
            return
        sampler = TelemetrySampler(log_dir / "telemetry.parquet", interval_ms=self.telemetry_interval_ms,
                                   gpu_uuid=self.gpu_uuid)
        sampler.start()
        try:
            yield
        finally:
            extra["telemetry"] = sampler.stop()

    @contextlib.contextmanager
    def _session_telemetry(self, folder: Path, run_root: Path) -> Iterator[dict[str, Any]]:
        """One sampler for a warm session (``folder/telemetry.parquet``); yields what each block records: the
        sampler's set-up (GPU, interval, GPM) and ``session_path``, the file whose window is the block's."""
        if not self.telemetry:
            yield {"status": "absent", "reason": "disabled"}
            return
        path = folder / "telemetry.parquet"
        sampler = TelemetrySampler(path, interval_ms=self.telemetry_interval_ms, gpu_uuid=self.gpu_uuid)
        sampler.start()
        first = read_status(path) or {"status": "absent", "reason": "the sampler did not start"}
        try:
            if first.get("status") == "absent":
                yield {k: v for k, v in first.items() if k != "pid"}
            else:
                yield {**{k: v for k, v in first.items() if k not in ("samples", "reason", "pid", "status")},
                       "status": "session", "session_path": str(path.relative_to(run_root))}
        finally:
            sampler.stop()

    @contextlib.contextmanager
    def _sharing(self, scenario: ScenarioSpec, log_dir: Path) -> Iterator[dict[str, str | None]]:
        if scenario.sharing == "timeslice":
            yield {}
            return
        if scenario.sharing not in ("mps", "mps-limited"):
            raise BackendError(f"unknown sharing mode {scenario.sharing!r}")
        with MpsDaemon(control=self.mps_control, log_parent=log_dir, gpu_uuid=self.gpu_uuid) as daemon:
            yield daemon.client_env()


class _Looks:
    """Answers each tenant's interim look once every neighbour is proven active past its n-th iteration."""

    def __init__(self, run: Run, scenario: ScenarioSpec, barrier: Path, judge: Judge | None) -> None:
        self.run, self.scenario, self.barrier, self.judge = run, scenario, barrier, judge
        self.answered: dict[str, list[dict[str, Any]]] = {}

    def answer(self, watch: CoRunWatch) -> None:
        for tenant, p in watch.tenants.items():
            done = {a["n"] for a in self.answered.get(tenant, [])}
            if p.look is None or p.look in done or not watch.corunning_through(tenant):
                continue
            said = (self.judge(self.run, self.scenario, tenant, p.look) if self.judge is not None
                    else LookAnswer(False, "not read", "no judge: the fixed design runs to its maximum"))
            word = "stop" if said.stop else "go"
            tmp = self.barrier / f".answer-{tenant}-{p.look}.tmp"
            tmp.write_text(word)
            tmp.rename(self.barrier / f"answer-{tenant}-{p.look}")
            self.answered.setdefault(tenant, []).append({"n": p.look, "answer": word, "reading": said.reading,
                                                         "why": said.why})
