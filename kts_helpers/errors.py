"""The kit's exceptions: one class per kind of failure, each with a one-line message."""

from __future__ import annotations

import sys
from collections.abc import Callable


class KtsError(Exception):
    """Base class: anything the kit reports to a user as a clear one-line error."""

    def _render_traceback_(self) -> list[str]:
        # IPython shows this instead of a traceback: a notebook failure reads as one clear line.
        return [f"{type(self).__name__}: {self}"]


class SpecError(KtsError, ValueError):
    """A parameter, profile or scenario is invalid; raised before any work starts."""


class DeviceError(KtsError):
    """The requested device is not available (e.g. DEVICE=cuda without a GPU)."""


class RunError(KtsError):
    """A run directory is missing, incomplete, or would be overwritten."""


class TenantFailed(KtsError):
    """A tenant process exited non-zero or timed out; names the tenant, exit code and stderr tail."""

    def __init__(self, scenario: str, tenant: str, exit_code: int | None, stderr_tail: str, reason: str = ""):
        self.scenario, self.tenant, self.exit_code, self.stderr_tail = scenario, tenant, exit_code, stderr_tail
        what = reason or f"exited with code {exit_code}"
        tail = stderr_tail.strip().splitlines()[-1] if stderr_tail.strip() else "(no stderr)"
        super().__init__(f"tenant {tenant!r} in scenario {scenario!r} {what}; last stderr line: {tail}")


class LogParseError(KtsError):
    """A log holds no KTS_APP line at all (partial garbage is counted, not raised)."""


class BackendError(KtsError):
    """The execution backend (local processes, Kubernetes API, MPS daemon) failed."""


def run_command(body: Callable[[], int], *, prog: str, interrupted: str) -> int:
    """Run a command line's body: a KtsError becomes one ``<prog>: error: ...`` line and exit 2, Ctrl-C exit 130."""
    try:
        return int(body())
    except KtsError as exc:
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"{prog}: {interrupted}", file=sys.stderr)
        return 130
