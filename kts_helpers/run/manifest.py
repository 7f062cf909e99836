"""The run's manifest, read once into typed objects: what ran (the spec), where, and how each scenario ended.

``manifest.json`` is the run's record (``runs.Run`` writes it); everything downstream reads it through
:class:`RunManifest` instead of digging through nested dicts, so a field has one name and one meaning.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kts_helpers.run.spec import ExperimentSpec, ScenarioSpec


@dataclass(frozen=True)
class ScenarioRecord:
    """How one scenario ended, as the backend recorded it."""

    name: str
    status: str | None
    backend: str | None = None
    reason: str = ""
    started_ns: int | None = None
    ended_ns: int | None = None
    tenants: dict[str, dict[str, Any]] = field(default_factory=dict)  # per tenant: exit code, pod timestamps...
    telemetry: dict[str, Any] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)  # the rest (node, namespace, corun counts, ...)

    @classmethod
    def from_dict(cls, name: str, d: dict[str, Any]) -> ScenarioRecord:
        own = {"status", "backend", "reason", "started_ns", "ended_ns", "tenants", "telemetry"}
        return cls(name=name, status=d.get("status"), backend=d.get("backend"), reason=str(d.get("reason") or ""),
                   started_ns=d.get("started_ns"), ended_ns=d.get("ended_ns"), tenants=dict(d.get("tenants") or {}),
                   telemetry=dict(d.get("telemetry") or {}), extra={k: v for k, v in d.items() if k not in own})

    @property
    def duration_s(self) -> float | None:
        if self.started_ns is None or self.ended_ns is None:
            return None
        return (self.ended_ns - self.started_ns) / 1e9


@dataclass(frozen=True)
class RunManifest:
    """A run's manifest, typed."""

    run_id: str
    status: str
    spec: ExperimentSpec
    label: str = ""
    created_at: str = ""
    format_version: int = 1
    environment: dict[str, Any] = field(default_factory=dict)
    calibration: dict[str, Any] = field(default_factory=dict)
    records: dict[str, ScenarioRecord] = field(default_factory=dict)
    error: str = ""
    looks: tuple[dict[str, Any], ...] = ()  # blocks=auto: each look, in order (``runs.Run.record_look``)

    @classmethod
    def from_dict(cls, d: dict[str, Any], *, run_id: str = "") -> RunManifest:
        return cls(run_id=str(d.get("run_id") or run_id), status=str(d.get("status") or "unknown"),
                   spec=ExperimentSpec.from_dict(d.get("spec") or {}), label=str(d.get("label") or ""),
                   created_at=str(d.get("created_at") or ""), format_version=int(d.get("format_version", 1)),
                   environment=dict(d.get("environment") or {}), calibration=dict(d.get("calibration") or {}),
                   records={n: ScenarioRecord.from_dict(n, r) for n, r in (d.get("scenarios") or {}).items()},
                   error=str(d.get("error") or ""), looks=tuple(d.get("looks") or ()))

    # -- what ran
    @property
    def device(self) -> str:
        return self.spec.device

    @property
    def on_gpu(self) -> bool:
        return self.spec.device == "cuda"

    @property
    def profile(self) -> str:
        return self.spec.profile

    @property
    def backend(self) -> str:
        return self.spec.params.backend

    @property
    def device_name(self) -> str | None:
        env = self.environment
        return (env.get("device_name") or env.get("gpu_name") or env.get("processor") or env.get("product")
                or None)

    @property
    def floor_ms(self) -> float:
        """The tool's own overhead (calibration): median wall - device of a one-element kernel."""
        return float(self.calibration.get("floor_ms", 0.0) or 0.0)

    @property
    def scenarios(self) -> tuple[ScenarioSpec, ...]:
        return self.spec.scenarios

    def scenario(self, name: str) -> ScenarioSpec:
        return self.spec.scenario(name)

    def record(self, name: str) -> ScenarioRecord | None:
        return self.records.get(name)

    @property
    def failed_scenarios(self) -> list[str]:
        return [n for n, r in self.records.items() if r.status == "failed"]

    def backends(self) -> set[str]:
        return {r.backend for r in self.records.values() if r.backend}
