"""Execution backends. ``get_backend`` builds one by name; both implement ``Backend``."""

from __future__ import annotations

from typing import Any

from kts_helpers.errors import SpecError
from kts_helpers.run.backends.base import Backend, ScenarioResult, TenantResult
from kts_helpers.run.backends.kubernetes import KubernetesBackend  # standard library only until it is used

__all__ = ["Backend", "ScenarioResult", "TenantResult", "get_backend"]


def get_backend(name: str, **options: Any) -> Backend:
    if name == "local":
        from kts_helpers.run.backends.local import LocalBackend

        return LocalBackend(**options)
    if name == "kubernetes":
        return KubernetesBackend(**options)
    raise SpecError(f"unknown backend {name!r}; choose local or kubernetes")
