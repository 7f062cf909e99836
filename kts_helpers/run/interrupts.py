"""SIGTERM handled as Ctrl-C while a scenario runs: stop the tenants, collect, clean up (on Kubernetes, release the
Lease).

Why: a notebook kernel that is shut down or killed from outside, ``kill <pid>``, ``timeout`` around ``kts run``, a
notebook pod deleted (its container's SIGTERM) all send SIGTERM, whose default action ends the process at once.
Locally the tenants' workers, each in its own session, then run on and hold the GPU: the next run on it finds
their contexts and is refused (``run.gpumem``; seen on an H100, 2026-12-07: a ``timeout`` around a batch killed
``kts run`` and its two tenants held 8.5 GiB). On Kubernetes the scenario's Job and its placeholders keep every
replica of the GPU until the Job's ``activeDeadlineSeconds`` (about 31 minutes for the default ready timeout),
and the node's Lease until it expires. Raised as ``Terminated`` -- a ``KeyboardInterrupt`` -- the signal takes
the path Ctrl-C takes (each backend's scenario catches it, stops its tenants and records the scenario as
interrupted; ``KubernetesBackend._run`` deletes this run's Job, ``NodeLease.held`` gives the Lease back) and is
then re-raised. Python delivers signals to the main thread only: elsewhere (a scale-out worker thread) nothing is
installed and the process's own handling stands.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from typing import Any


class Terminated(KeyboardInterrupt):
    """SIGTERM arrived while a scenario ran; handled as Ctrl-C is."""

    def __str__(self) -> str:
        return "SIGTERM"


def _raise(signum: int, frame: Any) -> None:
    raise Terminated()


@contextlib.contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """While the block runs (in the main thread), SIGTERM raises ``Terminated``; the previous handler after it."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _raise)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def interrupt_reason(error: BaseException) -> str:
    """The record's words for an interrupt: which signal stopped the scenario."""
    return "interrupted (SIGTERM)" if isinstance(error, Terminated) else "interrupted (KeyboardInterrupt)"
