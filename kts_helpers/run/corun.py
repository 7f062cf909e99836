"""Co-running by construction: when may padders stop, and did the tenants share one physical GPU?

A shared scenario's statistics count only iterations that ran while every neighbour was active.
Tenants finish their timed iterations at different times (a GEMM that never sleeps is done long
before an FFT that sleeps 100 ms), so each worker pads — the same operation at the same cadence,
printed with phase ``pad`` — until the orchestrator stops it. :class:`CoRunWatch` reads the tenants'
logs as they grow and says when that is safe: every tenant has finished its timed iterations *and*
has a line that ends after the last timed iteration of any tenant. Then the window in which all were
active, [latest first start, earliest last end], holds every timed iteration (the lead-in padding
covers the start: locally a worker pads until every neighbour has printed a line, see the worker's
``LeadIn``; on Kubernetes, where pods share no files, for ``lead_in_s``). Both backends use it: the local one feeds it the log files, the Kubernetes one
the streamed pod logs. Imports only the standard library (the runner works on a bare GPU host).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from kts_helpers.errors import KtsError
from kts_helpers.run.logformat import APP_TAG, END_TAG, LOOK_TAG, META_TAG, AppLine, LogRecord, parse_line

DEFAULT_LEAD_IN_S = 0.25  # padding before the timed iterations: far longer than the barrier skew (~ms) locally


@dataclass(frozen=True)
class LookAnswer:
    """What an interim look's judge said of one tenant: stop timing (its verdict decided) or go on."""

    stop: bool
    reading: str
    why: str = ""


# judge(run, scenario, tenant, n) -> LookAnswer: built above the run wing (analyse.sequential.VerdictJudge) and
# handed down, so the runner reads no statistics itself; without one every look is answered "go"
Judge = Callable[..., LookAnswer]


class CoRunError(KtsError):
    """A shared scenario's tenants did not (provably) share one GPU: different GPU UUIDs, padding overrun."""


@dataclass
class TenantProgress:
    """What one tenant's log shows so far."""

    timed: int = 0  # timed lines (every phase counts, e.g. an llm iteration's 17 steps)
    pads: int = 0
    first_start_ns: int | None = None
    last_end_ns: int = 0
    last_timed_end_ns: int = 0
    tail_since: float | None = None  # monotonic time of its first pad line after a timed line
    meta: dict = field(default_factory=dict)
    look: int | None = None  # the interim look it pads at (KTS_LOOK), until its next timed line or KTS_END
    looks: list[int] = field(default_factory=list)  # every look it reached
    end: dict = field(default_factory=dict)  # its KTS_END record (the block's end: stopping, gpu_memory, ...)

    @property
    def timed_done(self) -> bool:
        return self.tail_since is not None


class CoRunWatch:
    """Incremental reader of a shared scenario's logs that decides when padding may stop."""

    def __init__(self, tenants: list[str], *, pad_limit_s: float) -> None:
        self.tenants = {t: TenantProgress() for t in tenants}
        self.pad_limit_s = float(pad_limit_s)
        self._rest: dict[str, bytes] = {t: b"" for t in tenants}

    def feed(self, tenant: str, data: bytes) -> None:
        """Take the next bytes of a tenant's log (any split; an incomplete last line waits)."""
        if not data:
            return
        buf = self._rest[tenant] + data
        cut = buf.rfind(b"\n") + 1
        self._rest[tenant] = buf[cut:]
        p = self.tenants[tenant]
        for raw in buf[:cut].split(b"\n"):
            rec = parse_line(raw)
            if isinstance(rec, LogRecord) and rec.tag == META_TAG:
                p.meta = rec.data
                continue
            if isinstance(rec, LogRecord) and rec.tag == LOOK_TAG:  # pads from here wait for an answer
                p.look = int(rec.data.get("n", p.timed))
                p.looks.append(p.look)
                continue
            if isinstance(rec, LogRecord) and rec.tag == END_TAG:
                p.look = None
                p.end = dict(rec.data or {})
                continue
            if not isinstance(rec, AppLine) or rec.version != "v2":
                continue
            if p.first_start_ns is None:
                p.first_start_ns = rec.start_ns
            p.last_end_ns = max(p.last_end_ns, rec.end_ns)
            if rec.padding:
                p.pads += 1
                if p.timed and p.tail_since is None and p.look is None:
                    p.tail_since = time.monotonic()
            else:
                p.look = None
                p.timed += 1
                p.last_timed_end_ns = max(p.last_timed_end_ns, rec.end_ns)

    @property
    def all_timed_done(self) -> bool:
        return all(p.timed_done for p in self.tenants.values())

    @property
    def last_timed_end_ns(self) -> int:
        return max(p.last_timed_end_ns for p in self.tenants.values())

    def corunning_through(self, tenant: str) -> bool:
        """Every neighbour has a line that ends after this tenant's last timed iteration: all of them co-ran."""
        t_last = self.tenants[tenant].last_timed_end_ns
        return all(p.last_end_ns >= t_last for name, p in self.tenants.items() if name != tenant)

    def ready_to_stop(self) -> bool:
        """Every tenant is past its timed iterations and active until the last timed iteration ended."""
        if not self.all_timed_done:
            return False
        t_last = self.last_timed_end_ns
        return all(p.last_end_ns >= t_last for p in self.tenants.values())

    def padding_for_s(self, now: float | None = None) -> float:
        """How long the first tenant that finished has been padding (0 if none has)."""
        since = [p.tail_since for p in self.tenants.values() if p.tail_since is not None]
        return (now if now is not None else time.monotonic()) - min(since) if since else 0.0

    def overrun(self, now: float | None = None) -> str | None:
        """A one-line reason when padding has gone on past the safety limit, else None."""
        if self.ready_to_stop() or self.padding_for_s(now) <= self.pad_limit_s:
            return None
        behind = ", ".join(f"{t} ({p.timed} timed lines so far)" for t, p in self.tenants.items()
                           if not p.timed_done)
        return (f"padding went on for more than {self.pad_limit_s:g} s (pad_limit_s) while {behind} had not "
                "finished its timed iterations; the neighbours were stopped")

    def summary(self) -> dict[str, dict[str, int]]:
        """Per tenant: timed and padding lines seen (recorded in the manifest)."""
        return {t: {"timed_lines": p.timed, "pad_lines": p.pads} for t, p in self.tenants.items()}


class LogFollower:
    """Reads what was appended to a growing file since the last call (only complete bytes on disk)."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.offset = 0

    def read(self) -> bytes:
        try:
            with open(self.path, "rb") as fh:
                fh.seek(self.offset)
                data = fh.read()
        except FileNotFoundError:
            return b""
        self.offset += len(data)
        return data


def read_meta(path: Path) -> dict:
    """The first KTS_META record of a log ({} when there is none, e.g. a v1 log)."""
    try:
        with open(path, "rb") as fh:
            for raw in fh:
                if raw.startswith(f"{APP_TAG},".encode()):
                    return {}
                if raw.startswith(f"{META_TAG},".encode()):
                    rec = parse_line(raw)
                    return rec.data if isinstance(rec, LogRecord) else {}
    except FileNotFoundError:
        return {}
    return {}


def gpu_mismatch(metas: Mapping[str, Mapping], *, require: bool = False) -> str | None:
    """One line naming two tenants that report different GPU UUIDs, or a tenant that reports none while
    a neighbour does (or, with ``require``: on a GPU backend, at all); None when all share one GPU, or
    when none can say (CPU, v1 logs). A silent tenant is never skipped: it proves nothing."""
    silent = [t for t, meta in metas.items() if not (meta or {}).get("gpu_uuid")]
    if silent and (require or len(silent) < len(metas)):
        return (f"tenant {silent[0]} reported no GPU UUID (gpu_uuid in its KTS_META line), so the scenario "
                "cannot show that its tenants shared one physical GPU")
    seen: dict[str, str] = {}
    for tenant, meta in metas.items():
        uuid = (meta or {}).get("gpu_uuid")
        if not uuid:
            continue
        for other, other_uuid in seen.items():
            if other_uuid != uuid:
                return (f"tenants ran on different GPUs: {other} on {other_uuid}, {tenant} on {uuid}; "
                        "a shared scenario needs all its tenants on one physical GPU")
        seen[tenant] = uuid
    return None
