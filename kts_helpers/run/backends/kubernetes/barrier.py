"""The start barrier on a cluster: the timed loops begin together once every tenant is ready, on one clock.

A fixed start time chosen at submission is missed whenever image pulls (minutes for a CUDA image),
Kueue's queue or CUDA start-up take longer than guessed, and a client clock behind the nodes' shifts
it further. So the start is chosen only when it can be kept:

* each worker, warmed up, prints a ready line with its own clock (``kts_worker: ready tenant=<t>
  clock_ns=<ns>``, again every second while it waits) and waits for its start instant in a go file;
* the client notes when each ready line reached it (its own clock: the one clock of the barrier). Every
  tenant runs on one node (the Job is pinned to it), so the node has one clock and one offset to the
  client: the largest pod-minus-client reading over every tenant's live ready lines (the log's delivery
  delay only lowers a reading, so the largest is the least delayed). Per-pod offsets are recorded, never used;
* once every tenant (and every placeholder, ``jobs``) is ready the client writes each tenant's start,
  ``go + node offset``, with ``go`` = now + ``start_delay_s``;
* a tenant that begins its timed loop after its start, or is still saying "ready" past it, began late: the
  client sees that in the live log and stops a scenario with neighbours at once (``late_tenant``).

How the go reaches the pods (design choice, issue #32). The go used to be a ConfigMap mounted as a volume.
The kubelet rewrites such a volume only at the pod's periodic sync (``syncFrequency``, 60 s, with up to
50 % jitter) and, with the default ``Cache`` strategy, after the object's cache TTL (15-600 s on large
clusters): a go can take minutes, and a fixed delay that covers it is worst-case with no margin. Now the
go is a **pod annotation** (``ANN_START``, one ``patch`` per tenant pod) read through a **downwardAPI
volume**. The kubelet's pod config treats an annotation change as an update (``podsDifferSemantically``
in pkg/kubelet/config/config.go compares annotations), so the pod worker syncs the pod at once; that sync
calls ``WaitForAttachAndMount``, which re-processes the pod's volumes, and the downwardAPI plugin
``RequiresRemount``: the file is rewritten from the pod object itself, with no cache and no TTL. The go
then lands in about the watch latency plus one volume reconcile (sub-second to a few seconds on a busy
kubelet), and ``start_delay_s`` (default 10 s) covers that with margin; the rare go that is still late is
stopped within a second or two by the live check, not found after the run. It needs namespaced ``patch
pods``, nothing cluster-wide.

The alternative the issue offered, one pod per scenario with a container per tenant sharing an emptyDir
(the local backend's file barrier), was not taken: the NVIDIA device plugin allocates per container
(``Allocate`` loops over ``ContainerRequests``; ``failRequestsGreaterThanOne`` only refuses one container
asking for several replicas), so tenants in one pod get their replicas by the same allocation policy as
tenants in separate pods, with no stronger same-GPU guarantee; the local protocol needs an orchestrator
to write ``go``, which a pod does not have; and one pod would sum every tenant's CPU and memory requests,
end a scenario only when every container has, and lose the per-tenant pod status the failure reports read.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

GO_KEY = "start_at"  # the file the workers read in the go volume
STOP_KEY = "stop"  # the kit's word to stop padding, in the same file (workers/kts_harness.py reads it)
GO_MOUNT = "/kts-go"
READY_RE = re.compile(rb"^kts_worker: ready tenant=(\S+) clock_ns=(\d+)\s*$", re.M)
# A timed loop that began later than this after its start missed the shared start.
LATE_SLACK_S = 0.1


@dataclass
class Ready:
    """One tenant's ready line: its pod's clock then, and this client's clock when the line arrived."""

    pod_ns: int
    received_ns: int

    @property
    def offset_ns(self) -> int:
        """Pod clock minus client clock (low by the log's delivery delay)."""
        return self.pod_ns - self.received_ns


@dataclass
class StartBarrier:
    """Which tenants are ready, and the start each one was given (on its node's clock)."""

    tenants: Sequence[str]
    delay_s: float
    ready: dict[str, Ready] = field(default_factory=dict)
    go_ns: int | None = None  # on the client's clock
    node_offset_ns: int | None = None  # the node's clock minus the client's (one node, one clock)
    starts: dict[str, int] = field(default_factory=dict)

    def all_ready(self) -> bool:
        return all(t in self.ready for t in self.tenants)

    def release(self, now_ns: int) -> str:
        """Choose the start (now + delay on the client's clock); the go text (tenant -> node-clock ns)."""
        self.go_ns = now_ns + int(self.delay_s * 1e9)
        self.node_offset_ns = max(self.ready[t].offset_ns for t in self.tenants)
        self.starts = {t: self.go_ns + self.node_offset_ns for t in self.tenants}
        return self.text()

    def text(self) -> str:
        return json.dumps(self.starts, separators=(",", ":"))

    def stop_text(self) -> str:
        """The go text with the kit's word to stop padding (``"stop"``, workers/kts_harness.py ``STOP_KEY``): a
        worker ends with 0 on it, and with 143 on a SIGTERM alone (a preemption or a drain is never the kit's stop)."""
        return json.dumps({**self.starts, STOP_KEY: "1"}, separators=(",", ":"))

    def adopt(self, go_text: str) -> bool:
        """Take the starts an earlier client published (``--resume``); False when there are none yet."""
        try:
            starts = json.loads(go_text or "{}")
        except ValueError:
            return False
        if not isinstance(starts, dict) or not all(str(starts.get(t, "")).isdigit() for t in self.tenants):
            return False
        self.starts = {t: int(starts[t]) for t in self.tenants}
        return True

    def record(self) -> dict[str, Any]:
        """What the scenario's record says about the barrier: the clock, the go, the node's and each pod's offset."""
        tenants: dict[str, Any] = {}
        for t in self.tenants:
            r = self.ready.get(t)
            tenants[t] = {"start_at_ns": self.starts.get(t),
                          **({"ready_pod_ns": r.pod_ns, "ready_received_ns": r.received_ns,
                              "clock_offset_s": round(r.offset_ns / 1e9, 3)} if r else {})}
        return {"clock": "client", "go": "pod annotation (downwardAPI volume)", "go_ns": self.go_ns,
                "start_delay_s": self.delay_s,
                "node_clock_offset_s": None if self.node_offset_ns is None else round(self.node_offset_ns / 1e9, 3),
                "tenants": tenants}


def late_tenant(start_ns: int, meta: dict[str, Any] | None, last_ready_ns: int | None) -> float | None:
    """How late a tenant began, from what its live log shows already; None while nothing says it is late.

    Its ``KTS_META`` (printed as its loop begins) gives ``loop_start_ns``; before that, a ready line printed
    after its start (the worker says "ready" every second while it has no go) proves the go came late."""
    loop = (meta or {}).get("loop_start_ns")
    if loop is not None and str(loop).lstrip("-").isdigit():
        late = (int(loop) - start_ns) / 1e9
        return late if late > LATE_SLACK_S else None
    if last_ready_ns is not None and last_ready_ns > start_ns + LATE_SLACK_S * 1e9:
        return (last_ready_ns - start_ns) / 1e9
    return None
