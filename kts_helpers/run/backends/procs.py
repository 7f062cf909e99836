"""What the local runners share about their worker processes: progress bars, stopping them, their exit reasons, the
tail of a stderr, and the checks of a block: one GPU for a shared block, no stranger context on it (``gpumem``). One
home for both the fresh design's scenarios (``backends.local``) and the warm design's sessions (``backends.warm``).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from kts_helpers.run.backends.base import TenantResult
from kts_helpers.run.corun import CoRunError, CoRunWatch, TenantProgress, gpu_mismatch, read_meta
from kts_helpers.run.gpumem import check_block
from kts_helpers.run.runs import Run
from kts_helpers.run.spec import ScenarioSpec

EXIT_REASONS = {3: "padded past its safety limit without being stopped (exit 3)",
                143: "was stopped by a SIGTERM the kit did not ask for, or before its timed iterations were complete "
                     "(exit 143)"}
MPS_MODES = ("mps", "mps-limited")


class StrangerContext(CoRunError):
    """Memory on the measured GPU that no process of the experiment holds: another process shared the GPU."""


class Progress:
    """Per-tenant progress bars (tqdm when installed, otherwise silent): timed KTS_APP lines as they land.

    The total is the tenant's iterations times the operations per iteration its worker reports in
    KTS_META (an llm iteration is one prefill and several decode steps); with iterations=auto there is
    none (the worker decides when to stop), the bar counts up.
    """

    def __init__(self, scenario: ScenarioSpec, enabled: bool) -> None:
        self.bars: dict[str, Any] = {}
        self.iterations = {t.name: None if t.auto else t.iterations for t in scenario.tenants}  # auto: no total
        self.sized: set[str] = set()
        if not enabled:
            return
        try:
            from tqdm.auto import tqdm  # optional: a bare GPU host runs without progress bars
        except ImportError:
            return
        for i, t in enumerate(scenario.tenants):
            self.bars[t.name] = tqdm(total=self.iterations[t.name], desc=f"{scenario.name}/{t.name}", position=i, leave=True,
                                     unit="op", mininterval=0.5)

    def update(self, tenant: str, watch: TenantProgress) -> None:
        bar = self.bars.get(tenant)
        if bar is None:
            return
        phases = watch.meta.get("phases_per_iteration")
        if tenant not in self.sized and phases and self.iterations[tenant]:
            bar.total = self.iterations[tenant] * int(phases)
            self.sized.add(tenant)
        if watch.timed > bar.n:
            bar.update(watch.timed - bar.n)

    def close(self) -> None:
        for bar in self.bars.values():
            bar.close()


def record_outcome(run: Run, scenario: ScenarioSpec, backend: str, status: str, started_ns: int,
                   results: list[TenantResult], reason: str, extra: dict[str, Any], **more: Any) -> None:
    """Write how a scenario (a fresh one or a warm block) ended into the run's record: the same fields for both,
    every tenant named (its exit code None where it never got one), the reason where it failed."""
    run.record_scenario(scenario.name, {
        "status": status, "kind": scenario.kind, "backend": backend, "sharing": scenario.sharing,
        "started_ns": started_ns, "ended_ns": time.time_ns(),
        "tenants": {r.tenant: asdict(r) for r in results} or {n: {"exit_code": None} for n in scenario.tenant_names},
        **more,
        **({"reason": reason} if reason else {}),
        **{k: v for k, v in extra.items() if k != "sharing"},
    })


def check_same_gpu(run: Run, scenario: ScenarioSpec) -> None:
    """Refuse a shared scenario whose tenants report different GPU UUIDs in their KTS_META lines."""
    if scenario.kind != "shared":
        return
    problem = gpu_mismatch({t: read_meta(run.log_path(scenario.name, t)) for t in scenario.tenant_names})
    if problem:
        raise CoRunError(f"scenario {scenario.name!r}: {problem}")


def gpu_memory_check(run: Run, scenario: ScenarioSpec, companions: dict[str, int] | None = None) -> dict[str, Any]:
    """The block's stranger check (``gpumem.check_block``) from its tenants' ``KTS_END`` readings, as the Kubernetes
    backend runs it per scenario: here on the host, where NVML lists every process by its host PID, the experiment's
    other resident processes (``companions``: the warm design's idle neighbours, name -> PID) and this orchestrator
    are counted as the experiment's own; under MPS the server is too (by its name, else an allowance)."""
    watch = CoRunWatch(scenario.tenant_names, pad_limit_s=1.0)
    for t in scenario.tenant_names:
        path = run.log_path(scenario.name, t)
        watch.feed(t, path.read_bytes() + b"\n" if path.exists() else b"")
    readings = {t: watch.tenants[t].end.get("gpu_memory") for t in scenario.tenant_names}
    mps = scenario.sharing in MPS_MODES or any(watch.tenants[t].meta.get("mps_client") for t in scenario.tenant_names)
    return check_block(readings, mps=mps,
                       companions={"kts (this orchestrator)": os.getpid(), **(companions or {})})


def refuse_stranger(scenario: ScenarioSpec, check: dict[str, Any]) -> None:
    """A block whose check found a stranger context fails, by its sentence: it must run again."""
    if check.get("status") == "stranger":
        raise StrangerContext(f"scenario {scenario.name!r}: {check['text']}; the block must run again")


def stop_all(procs: dict[str, subprocess.Popen], grace_s: float = 3.0) -> None:
    """Terminate the given tenants' process groups (and only those), escalating to SIGKILL.

    The worker ends its current iteration on SIGTERM and prints its line, so the grace period must
    cover one iteration (a large GEMM or an llm iteration can take a second).
    """
    for p in procs.values():
        if p.poll() is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(p.pid, signal.SIGTERM)
    end = time.monotonic() + grace_s
    for p in procs.values():
        try:
            p.wait(timeout=max(0.0, end - time.monotonic()))
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(p.pid, signal.SIGKILL)
            p.wait()


def tail(path: Path, lines: int = 20) -> str:
    try:
        text = Path(path).read_bytes()[-8192:].decode("utf-8", "replace")
    except FileNotFoundError:
        return ""
    return "\n".join(text.splitlines()[-lines:])
