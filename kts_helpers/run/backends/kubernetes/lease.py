"""One ``coordination.k8s.io/v1`` Lease per GPU node: who measures on it now, so two clients never do at once.

A client acquires the node's Lease (its holder identity and a duration), renews it in the background
while it measures and releases it afterwards; a Lease whose holder stopped renewing it (a client that
died) expires after its duration and is taken over. Another live holder means waiting (up to ``wait_s``)
or a one-line error. Every write carries the resourceVersion it was based on, so the API server's
optimistic concurrency decides when two clients race for one Lease: one wins, the other sees the change.
Expiry is judged as client-go's leader election judges it, never from the holder's ``renewTime`` against
this client's clock (a skewed clock would take a live Lease, or wait out a dead one): this client notes,
on its own monotonic clock, when it first saw the Lease's current record, and the Lease has expired once
that record stayed unchanged for its ``leaseDurationSeconds``. A new client therefore waits one duration
before taking over a Lease whose holder died. The backend's check for GPU pods on the node is the
second guard.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import socket
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

from kts_helpers.errors import BackendError, KtsError
from kts_helpers.run.backends.kubernetes.api import KubeApi
from kts_helpers.run.backends.kubernetes.clock import Clock, micro_time
from kts_helpers.run.backends.kubernetes.names import (
    ANN_NODE,
    ANN_RUN,
    LABEL_NODE,
    MANAGED_BY,
    MANAGED_VALUE,
    as_int,
    label_value,
    lease_name,
)


class NodeBusy(BackendError):
    """Another client holds the node's Lease and did not let go in time."""


def client_identity() -> str:
    """Who this client is, as Lease holders are named: host, process and a random part."""
    host = socket.gethostname().split(".")[0][:40] or "host"
    return f"kts@{host}/{os.getpid()}/{secrets.token_hex(3)}"


class NodeLease:
    """The Lease of one node, held by this client while it measures there (re-entrant: ``with lease.held():``)."""

    def __init__(self, api: KubeApi, node: str, *, namespace: str, identity: str, clock: Clock,
                 duration_s: int = 30, wait_s: float = 300.0, progress: bool = True, poll_s: float = 1.0) -> None:
        if duration_s < 3:
            raise BackendError(f"lease_duration_s must be at least 3 s, got {duration_s}")
        self.api, self.node, self.namespace, self.identity, self.clock = api, node, namespace, identity, clock
        self.name = lease_name(node)
        self.duration_s, self.wait_s = int(duration_s), float(wait_s)
        self._observed: tuple[tuple[str, ...], float] | None = None  # (a record, when this client first saw it)
        self.progress, self.poll_s = progress, poll_s
        self.run_id = ""
        self.lost = ""  # why the Lease was lost while held (another client took it over)
        self.waited_s = 0.0
        self._held: dict[str, Any] | None = None
        self._depth = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def where(self) -> str:
        return f"Lease {self.namespace}/{self.name}"

    # ------------------------------------------------------------------ reading
    def _expired(self, current: dict[str, Any]) -> tuple[bool, float]:
        """Whether the Lease's record stayed unchanged for its duration as this client watched it (client-go's
        ``observedTime``); and for how long it has."""
        spec = current.get("spec") or {}
        record = tuple(str(spec.get(k) or "") for k in ("holderIdentity", "renewTime", "acquireTime",
                                                        "leaseDurationSeconds", "leaseTransitions"))
        now = self.clock.monotonic()
        if self._observed is None or self._observed[0] != record:
            self._observed = (record, now)
        unchanged = now - self._observed[1]
        return unchanged > float(as_int(spec.get("leaseDurationSeconds")) or self.duration_s), unchanged

    def _body(self, current: dict[str, Any] | None, now: str, *, acquire: bool) -> dict[str, Any]:
        spec = dict((current or {}).get("spec") or {})
        meta = dict((current or {}).get("metadata") or {})
        meta.update(name=self.name, namespace=self.namespace)
        meta["labels"] = {**(meta.get("labels") or {}), MANAGED_BY: MANAGED_VALUE, LABEL_NODE: label_value(self.node)}
        meta["annotations"] = {**(meta.get("annotations") or {}), ANN_NODE: self.node, ANN_RUN: self.run_id}
        if acquire:
            if current is not None:
                spec["leaseTransitions"] = int(spec.get("leaseTransitions") or 0) + 1
            spec.update(holderIdentity=self.identity, acquireTime=now)
        spec.update(renewTime=now, leaseDurationSeconds=self.duration_s)
        return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": meta, "spec": spec}

    # ------------------------------------------------------------------ acquire, renew, release
    def try_acquire(self) -> str | None:
        """Take the Lease if it is free, expired or ours; None on success, else who holds it (one line)."""
        now = micro_time(self.clock.now_ns())
        current = self.api.read_lease(self.name, self.namespace)
        if current is None:
            created = self.api.create_lease(self._body(None, now, acquire=True), self.namespace)
            if created is None:
                return "another client created it at the same moment"
            self._held = created
            return None
        spec = current.get("spec") or {}
        holder = spec.get("holderIdentity") or ""
        expired, unchanged = self._expired(current)
        if holder and holder != self.identity and not expired:
            run = ((current.get("metadata") or {}).get("annotations") or {}).get(ANN_RUN)
            return (f"held by {holder}" + (f" (run {run})" if run else "") +
                    f", unchanged for {unchanged:.0f} s as this client saw it, lease {spec.get('leaseDurationSeconds')} s")
        taken = self.api.replace_lease(self.name, self._body(current, now, acquire=holder != self.identity),
                                       self.namespace)
        if taken is None:
            return "it changed while this client was taking it over"
        self._held = taken
        return None

    def acquire(self) -> None:
        """Take the Lease, waiting up to ``wait_s`` for another holder; NodeBusy if it never came free."""
        start = self.clock.monotonic()
        said = False
        while True:
            why = self.try_acquire()
            if why is None:
                self.waited_s = self.clock.monotonic() - start
                return
            waited = self.clock.monotonic() - start
            if waited >= self.wait_s:
                raise NodeBusy(f"node {self.node} is in use by another kts client: {why} ({self.where}); waited "
                               f"{waited:.0f} s (lease_wait_s). kts lets one client measure per GPU node at a "
                               "time: try later, raise lease_wait_s or choose another node")
            if self.progress and not said:
                print(f"[kts] node {self.node} is in use ({why}); waiting for its {self.where} "
                      f"(up to {self.wait_s:.0f} s)", file=sys.stderr)
                said = True
            time.sleep(min(self.poll_s, 0.5))

    def renew(self) -> bool:
        """Extend the Lease; False (and ``lost`` says why) when another client holds it now."""
        with self._lock:
            if self._held is None:
                return False
            for _ in range(3):
                body = self._body(self._held, micro_time(self.clock.now_ns()), acquire=False)
                renewed = self.api.replace_lease(self.name, body, self.namespace)
                if renewed is not None:
                    self._held = renewed
                    return True
                current = self.api.read_lease(self.name, self.namespace)
                holder = ((current or {}).get("spec") or {}).get("holderIdentity")
                if current is None or holder != self.identity:
                    self.lost = (f"the node's {self.where} was taken over by {holder or 'nobody (deleted)'} "
                                 "while this client measured; the measurement may have shared the GPU")
                    self._held = None
                    return False
                self._held = current
            return False

    def release(self) -> None:
        """Give the Lease back (delete it, if nobody else wrote it since): the next client need not wait."""
        with self._lock:
            held, self._held = self._held, None
        if held is None:
            return
        rv = str((held.get("metadata") or {}).get("resourceVersion") or "")
        with contextlib.suppress(KtsError):
            if not self.api.delete_lease(self.name, self.namespace, rv):
                current = self.api.read_lease(self.name, self.namespace)
                spec = (current or {}).get("spec") or {}
                if current is not None and spec.get("holderIdentity") == self.identity:
                    self.api.delete_lease(self.name, self.namespace,
                                          str((current.get("metadata") or {}).get("resourceVersion") or ""))

    def _renew_loop(self) -> None:
        interval = self.duration_s / 3.0
        last = self.clock.monotonic()
        while not self._stop.wait(0.05):  # cheap: it only compares clock readings until a renewal is due
            if self.clock.monotonic() - last < interval:
                continue
            try:
                if not self.renew():
                    return
                last = self.clock.monotonic()
            except KtsError as exc:  # the API is unreachable: keep trying while the Lease is still ours
                if self.clock.monotonic() - last > self.duration_s:
                    self.lost = f"the node's {self.where} could not be renewed for {self.duration_s} s: {exc}"
                    return

    @contextlib.contextmanager
    def held(self, run_id: str = "") -> Iterator[NodeLease]:
        """Hold the Lease for the block (acquire, renew in the background, release); nested blocks share it."""
        if self._depth == 0:
            self.run_id, self.lost = run_id, ""
            self.acquire()
            self._stop.clear()
            self._thread = threading.Thread(target=self._renew_loop, name=f"kts-lease-{self.node}", daemon=True)
            self._thread.start()
        self._depth += 1
        try:
            yield self
        finally:
            self._depth -= 1
            if self._depth == 0:
                self._stop.set()
                if self._thread is not None:
                    self._thread.join(10.0)
                self.release()
