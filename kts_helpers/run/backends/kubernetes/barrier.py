"""The start barrier on a cluster: the timed loops begin together once every tenant is ready, on one clock.

A fixed start time chosen at submission is missed whenever image pulls (minutes for a CUDA image),
Kueue's queue or CUDA start-up take longer than guessed, and a client clock behind the nodes' shifts
it further. So the start is chosen only when it can be kept:

* each worker, warmed up, prints a ready line with its own clock (``kts_worker: ready tenant=<t>
  clock_ns=<ns>``, again every second while it waits) and waits for its start instant in a go file, a key of the scenario's ConfigMap
  mounted as a volume;
* the client notes when each ready line reached it (its own clock: the one clock of the barrier), so
  each pod's clock offset is known (pod minus client, from the line that arrived fastest: the log's
  delivery delay makes it read low by that delay, alike for every pod);
* once every tenant is ready the client writes each tenant's start, ``go + offset`` on that pod's
  clock, with ``go`` = now + ``start_delay_s``, which must cover the kubelet's refresh of ConfigMap
  volumes (its sync period, one minute by default, plus its cache);
* a tenant whose go arrived after its start began late: a scenario with more than one tenant then
  fails and must run again (``missed_start_barrier`` in its record), never counts as co-run.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

GO_KEY = "start_at"  # the ConfigMap key, and the file the workers read
GO_MOUNT = "/kts-go"
READY_RE = re.compile(rb"^kts_worker: ready tenant=(\S+) clock_ns=(\d+)\s*$", re.M)


def go_configmap_name(job: str) -> str:
    return f"{job}-go"


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
    """Which tenants are ready, and the start each one was given (on its own pod's clock)."""

    tenants: Sequence[str]
    delay_s: float
    ready: dict[str, Ready] = field(default_factory=dict)
    go_ns: int | None = None  # on the client's clock
    starts: dict[str, int] = field(default_factory=dict)

    def all_ready(self) -> bool:
        return all(t in self.ready for t in self.tenants)

    def release(self, now_ns: int) -> str:
        """Choose the start (now + delay on the client's clock); the go file's text (tenant -> pod-clock ns)."""
        self.go_ns = now_ns + int(self.delay_s * 1e9)
        self.starts = {t: self.go_ns + self.ready[t].offset_ns for t in self.tenants}
        return json.dumps(self.starts, separators=(",", ":"))

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
        """What the scenario's record says about the barrier: the clock, the go, each pod's offset."""
        tenants: dict[str, Any] = {}
        for t in self.tenants:
            r = self.ready.get(t)
            tenants[t] = {"start_at_ns": self.starts.get(t),
                          **({"ready_pod_ns": r.pod_ns, "ready_received_ns": r.received_ns,
                              "clock_offset_s": round(r.offset_ns / 1e9, 3)} if r else {})}
        return {"clock": "client", "go_ns": self.go_ns, "start_delay_s": self.delay_s, "tenants": tenants}


def configmap_body(name: str, namespace: str, labels: Mapping[str, str], annotations: Mapping[str, str],
                   go_text: str = "") -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": namespace, "labels": dict(labels),
                         "annotations": dict(annotations)},
            "data": {GO_KEY: go_text}}
