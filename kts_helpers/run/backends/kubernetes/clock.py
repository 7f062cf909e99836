"""Time as the backend sees it: wall-clock epoch nanoseconds and a monotonic clock, in one object.

``START_AT`` and the node Leases' renew times are wall-clock instants; deadlines are monotonic. The
tests' emulator hands the backend a fake clock that moves with its controllers, so timestamps in
its objects, in the fake workers' logs and in the backend's own records agree as on a real cluster.
"""

from __future__ import annotations

import re
import time
from datetime import datetime, timezone


class Clock:
    """The real clock: ``time.time_ns`` and ``time.monotonic``."""

    def now_ns(self) -> int:
        return time.time_ns()

    def monotonic(self) -> float:
        return time.monotonic()


_RFC3339 = re.compile(r"^(\d{4})-(\d\d)-(\d\d)[Tt ](\d\d):(\d\d):(\d\d)(?:\.(\d+))?(Z|z|[+-]\d\d:?\d\d)?$")


def parse_time(value: str | None) -> float | None:
    """RFC 3339 (``2024-05-01T12:00:00Z``, with any number of fraction digits, as Go writes them) to
    epoch seconds; None for None or text that is not one. Parsed by hand: ``datetime.fromisoformat``
    takes neither nine fraction digits nor "Z" before Python 3.11. Callers treat None as unknown, never
    as "long ago"."""
    m = _RFC3339.match(str(value or "").strip())
    if not m:
        return None
    year, month, day, hour, minute, second = (int(g) for g in m.groups()[:6])
    frac, zone = m.group(7) or "", m.group(8) or "Z"
    offset = 0
    if zone not in ("Z", "z"):
        sign = -1 if zone[0] == "-" else 1
        digits = zone[1:].replace(":", "")
        offset = sign * (int(digits[:2]) * 3600 + int(digits[2:]) * 60)
    try:
        base = datetime(year, month, day, hour, minute, second, tzinfo=timezone.utc).timestamp()
    except ValueError:
        return None
    return base + (int(frac) / 10 ** len(frac) if frac else 0.0) - offset


def micro_time(ns: int) -> str:
    """Epoch ns as a Kubernetes MicroTime (``2024-05-01T12:00:00.123456Z``, what a Lease holds)."""
    return datetime.fromtimestamp(ns / 1e9, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
