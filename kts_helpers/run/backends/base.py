"""The Backend protocol: how a scenario's tenants are started, watched and collected.

Both backends write the same thing into the run directory: for each tenant of a
scenario, ``logs/<scenario>/<tenant>.log`` (its stdout: KTS_META and KTS_APP lines)
and ``logs/<scenario>/<tenant>.stderr``, and they record the outcome with
``Run.record_scenario``. Analysis never needs to know which backend ran.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from kts_helpers.run.corun import Judge
from kts_helpers.run.runs import Run
from kts_helpers.run.spec import ScenarioSpec


@dataclass
class TenantResult:
    tenant: str
    exit_code: int | None
    log_path: str
    stderr_path: str
    started_ns: int | None = None
    ended_ns: int | None = None
    reason: str = ""
    events: dict[str, Any] = field(default_factory=dict)  # e.g. Kubernetes pod timestamps


@dataclass
class ScenarioResult:
    scenario: str
    status: str  # "complete" | "failed"
    tenants: list[TenantResult]
    started_ns: int
    ended_ns: int
    extra: dict[str, Any] = field(default_factory=dict)


@runtime_checkable
class Backend(Protocol):
    """Runs one scenario of a run and leaves its logs in the run directory."""

    name: str

    def describe(self) -> dict[str, Any]:
        """What this backend sees (device, GPUs, sharing state) for the setup notebook and manifest."""
        ...

    def run_scenario(self, run: Run, scenario: ScenarioSpec, *, timeout_s: float,
                     progress: bool = True, pad_limit_s: float | None = None,
                     judge: Judge | None = None) -> ScenarioResult:
        """Run every tenant of ``scenario`` together; raise TenantFailed on the first failure.

        In a shared scenario every tenant pads after its timed iterations until all have finished them
        (``kts_helpers.corun``); padding longer than ``pad_limit_s`` (default: ``timeout_s``) fails it.
        ``judge`` answers a tenant's interim looks (``corun.Judge``); a backend that cannot let it times on.
        """
        ...
