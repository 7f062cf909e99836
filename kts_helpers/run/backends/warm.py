"""The warm design on this host: one worker process per tenant and sharing mode runs every block of that mode.

Why: blocks that start fresh processes pay for CUDA's start, the model's build, its warm-up and its profile each
time, so a run could afford only a few, and a verdict's drift term had a few degrees of freedom. Here the processes
start once per mode (``workers/kts_serve.py``), idle between blocks with their contexts resident, and the run
alternates alone and shared blocks cheaply. A block is still a scenario with its own logs, record and checks (the
same files as a fresh block's, its ``KTS_META`` naming the block), so the analysis, ``corunning.py`` and a resume
(block by block: a block without a record runs again, its cut-off logs set aside) read it as any other.

A session, per mode: start every tenant's worker (under MPS as clients of one daemon for the whole mode, so the
mode's alone blocks run as MPS clients with the server up), wait until each has built, warmed up and profiled,
then for each block hand its tenants a command and follow their logs as the fresh design does: the shared
block's tenants pad after their timed part until every one has finished and co-ran (``corun.CoRunWatch``), then
the block's ``stop`` file ends it. One telemetry sampler runs for the whole session (``warm/<mode>.<k>/telemetry``):
a sampler per block cost about a second of each block's wall (a process start, NVML's, and pyarrow's import at its
first write), 30-40 s of a three-tenant real-model run; a block's record names the session's file, and the analysis
reads the block's own window of it (``analyse.load.load_run_telemetry``). The idle-neighbour control
(``control-<t>-absent``) dismisses the other workers first, so that one tenant runs alone with its neighbours gone,
right after its last alone block with them idle.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from kts_helpers.errors import KtsError, TenantFailed
from kts_helpers.fsutil import atomic_write_text as _write
from kts_helpers.fsutil import write_new
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
from kts_helpers.run.corun import CoRunError, CoRunWatch, LogFollower
from kts_helpers.run.interrupts import interrupt_reason
from kts_helpers.run.runs import Run
from kts_helpers.run.spec import ScenarioSpec, TenantSpec

POLL_S = 0.02
ITERATION_CAP = 1_000_000  # a warm block ends by time; the count is only a backstop


class WarmSession:
    """The resident workers of one sharing mode, and the blocks they run. ``backend``: the ``LocalBackend`` that owns
    the session (its worker, python, lead-in, sharing and telemetry contexts; not imported here: it imports this)."""

    def __init__(self, backend: Any, run: Run, mode: str, tenants: list[TenantSpec], *, timeout_s: float,
                 pad_limit_s: float, block_s: float, progress: bool) -> None:
        self.backend, self.run, self.mode, self.tenants = backend, run, mode, tenants
        self.timeout_s, self.pad_limit_s, self.block_s, self.progress = timeout_s, pad_limit_s, block_s, progress
        self.procs: dict[str, subprocess.Popen] = {}
        self.seq: dict[str, int] = {t.name: 0 for t in tenants}
        self.handles: list[Any] = []
        self.serve_dir = Path(tempfile.mkdtemp(prefix="kts-serve-"))
        self.folder = self._claim_folder()
        self._stack = contextlib.ExitStack()
        self.telemetry: dict[str, Any] = {"status": "absent", "reason": "disabled"}

    def _claim_folder(self) -> Path:
        """``warm/<mode>.<k>/`` in the run: the processes' own stdout (their set-up ``KTS_META``) and stderr."""
        k = 1
        while True:
            folder = self.run.path / "warm" / f"{self.mode}.{k}"
            try:
                folder.mkdir(parents=True)
                return folder
            except FileExistsError:
                k += 1

    # -- the processes ------------------------------------------------------------------------------------------
    def __enter__(self) -> WarmSession:
        try:
            sharing_env = self._stack.enter_context(self.backend._sharing(
                ScenarioSpec(f"warm-{self.mode}", "warm", tuple(self.tenants), self.mode), self.folder))
            self.telemetry = self._stack.enter_context(self.backend._session_telemetry(self.folder, self.run.path))
            for t in self.tenants:
                out = open(self.folder / f"{t.name}.log", "xb")  # noqa: SIM115 - closed in __exit__
                err = open(self.folder / f"{t.name}.stderr", "xb")  # noqa: SIM115
                self.handles += [out, err]
                env = self.backend._tenant_env(t, self.serve_dir, sharing_env, pad=False,
                                               pad_limit_s=self.pad_limit_s, lead_in_s=self.backend.lead_in_s)
                env.update({"KTS_SERVE_DIR": str(self.serve_dir), "KTS_BLOCK_S": repr(self.block_s)})
                self.procs[t.name] = subprocess.Popen([self.backend.python, str(self.backend.worker)], stdout=out,
                                                      stderr=err, stdin=subprocess.DEVNULL, env=env,
                                                      start_new_session=True)
                (self.folder / f"{t.name}.pid").write_text(f"{self.procs[t.name].pid}\n")
            self._wait_ready()
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def _wait_ready(self) -> None:
        limit = time.monotonic() + min(self.timeout_s, self.backend.barrier_timeout_s)
        while not all((self.serve_dir / f"ready-{n}").exists() for n in self.procs):
            self._check_alive(None)
            if time.monotonic() > limit:
                late = next(n for n in self.procs if not (self.serve_dir / f"ready-{n}").exists())
                raise TenantFailed(f"warm-{self.mode}", late, None, tail(self.folder / f"{late}.stderr"),
                                   reason="did not finish set-up and warm-up before the time limit")
            time.sleep(POLL_S)

    def _check_alive(self, scenario: ScenarioSpec | None, names: list[str] | None = None) -> None:
        for name in names or list(self.procs):
            code = self.procs[name].poll()
            if code is not None:
                where = scenario.name if scenario is not None else f"warm-{self.mode}"
                stderr = (self.run.stderr_path(scenario.name, name) if scenario is not None
                          else self.folder / f"{name}.stderr")
                said = tail(stderr) or tail(self.folder / f"{name}.stderr")
                raise TenantFailed(where, name, code, said, reason=EXIT_REASONS.get(code, "left the warm session"))

    def dismiss(self, keep: list[str]) -> None:
        """Let every worker but ``keep`` quit (the idle-neighbour control needs them gone, not idle)."""
        gone = [n for n in self.procs if n not in keep]
        for n in gone:
            _write(self.serve_dir / f"quit-{n}", "")
        for n in gone:
            try:
                self.procs[n].wait(timeout=30)
            except subprocess.TimeoutExpired:
                stop_all({n: self.procs[n]})
            del self.procs[n]

    def __exit__(self, *exc: object) -> None:
        try:
            for n in self.procs:
                with contextlib.suppress(OSError):
                    _write(self.serve_dir / f"quit-{n}", "")
            end = time.monotonic() + 10
            while any(p.poll() is None for p in self.procs.values()) and time.monotonic() < end:
                time.sleep(POLL_S)
            stop_all(self.procs)
        finally:
            for h in self.handles:
                h.close()
            shutil.rmtree(self.serve_dir, ignore_errors=True)
            self._stack.close()  # MPS: the daemon quits after its clients

    # -- one block ----------------------------------------------------------------------------------------------
    def run_block(self, scenario: ScenarioSpec) -> ScenarioResult:
        run = self.run
        if scenario.kind == "control":
            self.dismiss([t.name for t in scenario.tenants])
        run.claim_scenario(scenario.name)
        started = time.time_ns()
        names = scenario.tenant_names
        extra: dict[str, Any] = {"sharing": scenario.sharing}
        status, reason, results = "failed", "", []
        barrier = Path(tempfile.mkdtemp(prefix="kts-block-"))
        pad = scenario.kind == "shared" and len(names) > 1
        watch = CoRunWatch(names, pad_limit_s=self.pad_limit_s)
        bars = Progress(scenario, self.progress)
        try:
            extra["telemetry"] = dict(self.telemetry)  # the session's sampler: this block's window of its samples
            for t in scenario.tenants:
                write_new(run.pid_path(scenario.name, t.name), f"{self.procs[t.name].pid}\n".encode())
                self.seq[t.name] += 1
                _write(self.serve_dir / f"cmd-{t.name}-{self.seq[t.name]}.json", json.dumps({
                    "block": scenario.name, "kind": scenario.kind, "log": str(run.log_path(scenario.name, t.name)),
                    "stderr": str(run.stderr_path(scenario.name, t.name)), "barrier": str(barrier),
                    "block_s": self.block_s, "min_iterations": t.iterations, "iterations": ITERATION_CAP,
                    "lead_in_s": self.backend.lead_in_s, "pad": pad}))
            self._release(scenario, barrier)
            self._follow(scenario, barrier, watch, bars, pad)
            check_same_gpu(run, scenario)
            # a stranger context on the GPU (gpumem): the session's idle workers hold memory and are the run's own
            extra["gpu_memory"] = gpu_memory_check(run, scenario, {f"{n} (idle, resident)": p.pid
                                                                   for n, p in self.procs.items() if n not in names})
            refuse_stranger(scenario, extra["gpu_memory"])
            results = [TenantResult(n, 0, str(run.log_path(scenario.name, n)), str(run.stderr_path(scenario.name, n)))
                       for n in names]
            status = "complete"
            return ScenarioResult(scenario.name, status, results, started, time.time_ns(), extra)
        except KtsError as exc:
            reason = str(exc)
            raise
        except KeyboardInterrupt as exc:
            reason = interrupt_reason(exc)
            raise
        finally:
            bars.close()
            if status != "complete":  # the block's tenants end it and go back to idle (or to their quit)
                with contextlib.suppress(OSError):
                    _write(barrier / "stop", "")
                time.sleep(0.2)
            shutil.rmtree(barrier, ignore_errors=True)
            extra["corun"] = watch.summary()
            record_outcome(run, scenario, self.backend.name, status, started, results, reason, extra, design="warm",
                           warm={"session": self.folder.name, "block_s": self.block_s,
                                 "block_seq": {n: self.seq[n] for n in names},
                                 "pids": {n: self.procs[n].pid for n in names}})

    def _release(self, scenario: ScenarioSpec, barrier: Path) -> None:
        """Every tenant of the block at its barrier, then one start instant for all (as a fresh block's)."""
        names = scenario.tenant_names
        limit = time.monotonic() + min(self.timeout_s, self.backend.barrier_timeout_s)
        while not all((barrier / f"ready-{n}").exists() for n in names):
            self._check_alive(scenario, names)
            if time.monotonic() > limit:
                late = next(n for n in names if not (barrier / f"ready-{n}").exists())
                raise TenantFailed(scenario.name, late, None, tail(self.folder / f"{late}.stderr"),
                                   reason="did not take its block's command in time")
            time.sleep(0.005)
        _write(barrier / "go", str(time.time_ns() + 50_000_000))

    def _follow(self, scenario: ScenarioSpec, barrier: Path, watch: CoRunWatch, bars: Any, pad: bool) -> None:
        """Follow the block's logs until every tenant has said it is done with it; stop the padders when safe."""
        names = scenario.tenant_names
        followers = {n: LogFollower(self.run.log_path(scenario.name, n)) for n in names}
        done = {n: self.serve_dir / f"done-{n}-{self.seq[n]}" for n in names}
        deadline = time.monotonic() + self.timeout_s
        stopped = False
        while True:
            for n, f in followers.items():
                watch.feed(n, f.read())
                bars.update(n, watch.tenants[n])
            if all(p.exists() for p in done.values()):
                codes = {n: int(p.read_text() or 0) for n, p in done.items()}
                bad = next((n for n, c in codes.items() if c != 0), None)
                if bad is not None:
                                raise TenantFailed(scenario.name, bad, codes[bad], tail(self.run.stderr_path(scenario.name, bad)),
                                       reason=EXIT_REASONS.get(codes[bad], ""))
                return
            self._check_alive(scenario, names)
            if pad and not stopped and watch.ready_to_stop():
                _write(barrier / "stop", "")
                stopped = True
            overrun = watch.overrun() if pad else None
            if overrun:
                _write(barrier / "stop", "")
                raise CoRunError(f"scenario {scenario.name!r}: {overrun}")
            if time.monotonic() > deadline:
                _write(barrier / "stop", "")
                slow = next(n for n in names if not done[n].exists())
                raise TenantFailed(scenario.name, slow, None, tail(self.run.stderr_path(scenario.name, slow)),
                                   reason=f"was still running its block at the {self.timeout_s:.0f}s time limit")
            time.sleep(POLL_S)
