"""Pod logs, followed live, so that no line is lost when a padding tenant is stopped and its pod is gone; and a
check that none was lost anyway (``Continuity``).

The logs API serves only the container's current log file. The kubelet rotates it at ``containerLogMaxSize``
(10 Mi by default) and keeps ``containerLogMaxFiles`` (5); a follow that is connected crosses a rotation,
but a reconnection (a dropped connection, an API server restart) starts at the new file's first byte, and
what the old file held after the last byte received is not served any more. So every streamed log is
checked for continuity: each tenant's iteration index, per phase, starts at 0 and never skips. A gap fails
the scenario, naming the tenant, phase and missing indexes, never appended over in silence. A worker
prints about 120 bytes a line: at 1000 iterations/s that is ~7 MiB a minute, so for long scenarios raise
``containerLogMaxSize`` (e.g. 100Mi) in the kubelet configuration (manifests/README.md).
"""

from __future__ import annotations

import atexit
import contextlib
import threading
import weakref
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kts_helpers.errors import KtsError
from kts_helpers.run.backends.kubernetes.api import KubeApi
from kts_helpers.run.backends.kubernetes.barrier import READY_RE, Ready
from kts_helpers.run.backends.kubernetes.clock import Clock
from kts_helpers.run.backends.kubernetes.state import PodState
from kts_helpers.run.corun import CoRunWatch
from kts_helpers.run.logformat import AppLine, parse_line

# --------------------------------------------------------------------------- pod logs, live

_LIVE: weakref.WeakSet[PodLogStream] = weakref.WeakSet()


@atexit.register
def _end_streams(timeout_s: float = 1.0) -> None:
    """At interpreter exit, every stream still following a pod stops with its connection: a daemon thread still
    inside urllib3 while the interpreter finalizes can abort the process (SIGABRT after a run's last line)."""
    live = list(_LIVE)
    for stream in live:
        stream._finishing.set()
    for stream in live:
        stream.done.wait(timeout_s / max(len(live), 1))

class PodLogStream:
    """Follows one pod's log while it runs (a thread), so no line is lost when the pod is stopped and gone.

    The API serves a followed log from the first byte of the container's *current* log file: the kubelet
    rotates it (``containerLogMaxSize``, 10 MiB by default; a live follow crosses a rotation, a new
    connection starts at the new file). So after a dropped connection the new stream is placed by its
    first line, found at a line start in what is held (no rotation: at byte 0), and only what follows the
    held bytes is appended; a first line not held at all means the stream starts after them. ``finish()`` says the
    container has ended or its Job was deleted: the stream then reads to the end once more and stops.
    The worker's ready lines (one a second while it waits at the barrier) are noted with this client's
    clock the moment they arrive; ``ready`` keeps the one that reached it fastest (the largest pod-minus-
    client offset: a delay only lowers it), from lines that arrived live (not in a connection's backlog).
    """

    def __init__(self, api: KubeApi, pod: str, retry_s: float = 0.2, clock: Clock | None = None) -> None:
        self.api, self.pod, self.retry_s, self.clock = api, pod, retry_s, clock or Clock()
        self.ready: Ready | None = None
        self.last_ready_ns: int | None = None  # the pod clock of the latest ready line, live or not
        self._scanned = 0  # the buffer is searched for ready lines up to here (a line boundary)
        self._buf = bytearray()
        self._taken = 0
        self._lock = threading.Lock()
        self._finishing = threading.Event()
        self.done = threading.Event()
        self.error = ""
        self._thread = threading.Thread(target=self._main, name=f"kts-log-{pod}", daemon=True)
        _LIVE.add(self)
        self._thread.start()

    def _main(self) -> None:
        try:
            while True:
                finishing = self._finishing.is_set()
                try:
                    resp = self.api.open_log_stream(self.pod)
                except KtsError as exc:
                    self.error = str(exc)
                    return
                if resp is not None:
                    self._read(resp)
                if finishing:  # the read that started after the container ended has everything
                    return
                self._finishing.wait(self.retry_s)
        finally:
            self.done.set()

    def _read(self, resp: Any) -> None:
        seen = 0  # where this connection's next byte sits in the held log
        backlog = True  # the first bytes of a connection were printed before it opened
        with self._lock:
            placing = len(self._buf) > 0  # a reconnection: where its first byte sits is not known yet
        head = b""
        try:
            for chunk in resp.stream(1 << 16, decode_content=False):
                if not chunk:
                    continue
                now_ns = self.clock.now_ns()
                if placing:
                    head += chunk
                    if b"\n" not in head and len(head) < 1 << 16:
                        continue  # place it by a whole first line
                    chunk, placing = head, False
                    with self._lock:
                        seen = self._start_of(chunk)
                with self._lock:
                    have = len(self._buf)
                    if seen + len(chunk) > have:
                        self._buf += chunk[max(0, have - seen):]
                    self._note_ready(now_ns, live=not backlog)
                seen += len(chunk)
                backlog = False
            if placing and head:  # it ended before a whole line: place what came
                with self._lock:
                    seen = self._start_of(head)
                    if seen + len(head) > len(self._buf):
                        self._buf += head[max(0, len(self._buf) - seen):]
        except Exception:  # noqa: BLE001 - a dropped connection: the caller opens the stream again
            pass
        finally:
            with contextlib.suppress(Exception):
                resp.release_conn()

    def _start_of(self, head: bytes) -> int:
        """Where a reconnected stream's first byte sits in the held log (called with the lock held)."""
        held = bytes(self._buf)
        first = head[:head.find(b"\n") + 1] or head
        if held.startswith(first):
            return 0  # the same file as before
        pos = held.rfind(b"\n" + first)
        while pos >= 0:  # the latest line start where the stream agrees with what is held
            start = pos + 1
            if held[start:start + len(head)] == head[:len(held) - start]:
                return start
            pos = held.rfind(b"\n" + first, 0, pos)
        return len(held)  # the new file begins after everything held

    def _note_ready(self, now_ns: int, *, live: bool) -> None:
        end = self._buf.rfind(b"\n") + 1
        if end <= self._scanned:
            return
        for m in READY_RE.finditer(bytes(self._buf[self._scanned:end])):
            sample = Ready(int(m.group(2)), now_ns)
            self.last_ready_ns = max(self.last_ready_ns or 0, sample.pod_ns)
            if live and (self.ready is None or sample.offset_ns > self.ready.offset_ns):
                self.ready = sample
        self._scanned = end

    def take(self) -> bytes:
        """The bytes that arrived since the last call."""
        with self._lock:
            out = bytes(self._buf[self._taken:])
            self._taken = len(self._buf)
        return out

    def data(self) -> bytes:
        with self._lock:
            return bytes(self._buf)

    @property
    def finishing(self) -> bool:
        return self._finishing.is_set()

    def finish(self, timeout_s: float) -> bytes:
        """The container has ended (or is being stopped): read to the end and return the whole log."""
        self._finishing.set()
        self.done.wait(timeout_s)
        return self.data()


class Continuity:
    """Whether a tenant's log holds every line it printed: per phase, iteration indexes start at 0 and grow by
    at most 1 from one line to the next (a multi-step iteration repeats its index). Fed in arbitrary chunks."""

    def __init__(self) -> None:
        self._rest = b""
        self.last: dict[str, int] = {}
        self.gaps: list[str] = []

    def feed(self, data: bytes) -> None:
        data = self._rest + data
        end = data.rfind(b"\n") + 1
        self._rest = data[end:]
        for raw in data[:end].splitlines():
            line = parse_line(raw)
            if isinstance(line, AppLine):
                self._index(line.phase, line.iteration)

    def _index(self, phase: str, index: int) -> None:
        prev = self.last.get(phase, -1)
        if index > prev + 1:
            missing = f"{prev + 1}" if index == prev + 2 else f"{prev + 1}-{index - 1}"
            self.gaps.append(f"phase {phase!r} iterations {missing} missing")
        self.last[phase] = max(prev, index)

    def text(self, tenant: str) -> str:
        return (f"tenant {tenant!r}: lines were lost from its log ({'; '.join(self.gaps[:3])}"
                f"{'; ...' if len(self.gaps) > 3 else ''}): a kubelet log rotation dropped bytes this client had "
                "not read (raise containerLogMaxSize, manifests/README.md); the scenario must run again")


def continuity_of(log: bytes) -> Continuity:
    check = Continuity()
    check.feed(log if log.endswith(b"\n") else log + b"\n")
    return check


@dataclass
class LiveScenario:
    """What a scenario's watch loop follows while it runs: the pods' logs and the co-running watch."""

    watch: CoRunWatch
    pad: bool  # shared: tenants pad until stopped
    streams: dict[str, PodLogStream] = field(default_factory=dict)
    continuity: dict[str, Continuity] = field(default_factory=dict)
    last_pods: dict[str, dict[str, Any]] = field(default_factory=dict)
    stopped_ns: int | None = None

    def follow(self, api: KubeApi, pods: Mapping[str, dict[str, Any]], states: Mapping[str, PodState],
               retry_s: float, clock: Clock | None = None) -> None:
        """Start a stream for each new pod, feed the watch what arrived, finish streams of ended containers."""
        for tenant, pod in pods.items():
            self.last_pods[tenant] = pod
            name = (pod.get("metadata") or {}).get("name")
            stream = self.streams.get(tenant)
            if name and (stream is None or stream.pod != name):
                self.streams[tenant] = stream = PodLogStream(api, name, retry_s=min(retry_s, 1.0), clock=clock)
                self.continuity[tenant] = Continuity()
            if stream is not None and states[tenant].done:
                stream.finish(0.0)
        for tenant, stream in self.streams.items():
            data = stream.take()
            self.watch.feed(tenant, data)
            self.continuity[tenant].feed(data)

    def gap(self) -> str:
        """The first tenant's lost lines, as a sentence; "" while every streamed log is whole."""
        return next((c.text(t) for t, c in self.continuity.items() if c.gaps), "")
