"""Time as the backend sees it: wall-clock epoch nanoseconds and a monotonic clock, in one object.

``START_AT`` and the node Leases' renew times are wall-clock instants; deadlines are monotonic. The
tests' emulator hands the backend a fake clock that moves with its controllers, so timestamps in
its objects, in the fake workers' logs and in the backend's own records agree as on a real cluster.
"""

from __future__ import annotations

import time
from datetime import datetime, timezone


class Clock:
    """The real clock: ``time.time_ns`` and ``time.monotonic``."""

    def now_ns(self) -> int:
        return time.time_ns()

    def monotonic(self) -> float:
        return time.monotonic()


def parse_time(value: str | None) -> float | None:
    """RFC 3339 (``2024-05-01T12:00:00Z``, with or without fractions) to epoch seconds; None stays None."""
    if not value:
        return None
    text = str(value).strip().replace("Z", "+00:00")
    try:
        dt = datetime.fromisoformat(text)
    except ValueError:
        return None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=timezone.utc)
    return dt.timestamp()


def micro_time(ns: int) -> str:
    """Epoch ns as a Kubernetes MicroTime (``2024-05-01T12:00:00.123456Z``, what a Lease holds)."""
    return datetime.fromtimestamp(ns / 1e9, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
