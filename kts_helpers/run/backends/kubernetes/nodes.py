"""What the device plugin and GPU feature discovery say about a node: GPUs, replicas, sharing strategy.

Without GPU feature discovery (GKE's own device plugin, a bare K3s plugin) a node shows only its
allocatable count: the physical GPUs, the replica factor and the sharing strategy are then unknown,
and the kit says so instead of guessing; the workers' GPU UUIDs still prove what was shared.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kts_helpers.run.backends.kubernetes.names import (
    GPU_RESOURCES,
    NODE_COUNT,
    NODE_PRODUCT,
    NODE_REPLICAS,
    NODE_STRATEGY,
    as_int,
)

# --------------------------------------------------------------------------- nodes

@dataclass
class NodeInfo:
    """What the device plugin and GPU feature discovery say about one node."""

    name: str
    resource: str  # nvidia.com/gpu or nvidia.com/gpu.shared
    allocatable: int  # GPUs the scheduler sees (physical x replicas under time-slicing)
    physical: int  # GPUs the node really has
    replicas: int | None
    strategy: str | None
    product: str | None
    schedulable: bool = True
    labels: dict[str, str] = field(default_factory=dict)
    physical_known: bool = True  # False without the count and replicas labels of GPU feature discovery
    plugin_version: str | None = None  # the NVIDIA device plugin's, from its pod's image (multi-GPU nodes)

    @property
    def sentence(self) -> str:
        if not self.physical_known:
            return (f"Kubernetes sees {self.allocatable} GPUs; how many the node has is unknown "
                    "(no GPU feature discovery labels)")
        return f"Kubernetes sees {self.allocatable} GPUs; the node has {self.physical}"

    def sharing_note(self) -> str:
        return (f"node {self.name}: allocatable {self.resource}={self.allocatable}, "
                f"{NODE_REPLICAS}={self.replicas if self.replicas is not None else 'unset'}, "
                f"{NODE_STRATEGY}={self.strategy or 'unset'}")


def node_info(node: Mapping[str, Any], resource: str | None = None) -> NodeInfo | None:
    """Read a node's GPU state; None if it advertises no NVIDIA GPU."""
    meta = node.get("metadata") or {}
    labels = dict(meta.get("labels") or {})
    alloc = (node.get("status") or {}).get("allocatable") or {}
    candidates = [resource] if resource else [r for r in reversed(GPU_RESOURCES) if (as_int(alloc.get(r)) or 0) > 0]
    if not candidates:
        return None
    res = candidates[0]
    n = as_int(alloc.get(res)) or 0
    if n <= 0 and not resource:
        return None
    replicas = as_int(labels.get(NODE_REPLICAS))
    physical = as_int(labels.get(NODE_COUNT))
    known = physical is not None or replicas is not None
    if physical is None:
        physical = n // replicas if replicas and replicas > 0 and n >= replicas else n
    return NodeInfo(name=str(meta.get("name", "?")), resource=res, allocatable=n, physical=physical,
                    replicas=replicas, strategy=labels.get(NODE_STRATEGY), product=labels.get(NODE_PRODUCT),
                    schedulable=not (node.get("spec") or {}).get("unschedulable", False), labels=labels,
                    physical_known=known)


# ``flags.plugin.sharedDevicesAllocationPolicy: packed`` exists from k8s-device-plugin v0.20.0; older plugins
# parse their config leniently, ignore the field and stay "distributed" (replicas spread over the GPUs).
PACKED_SINCE = (0, 20, 0)
_VERSION = re.compile(r"k8s-device-plugin[^:@]*:v?(\d+)\.(\d+)\.(\d+)")


def device_plugin_version(pods: Iterable[Mapping[str, Any]]) -> str | None:
    """The NVIDIA device plugin's version on a node, from the image of its DaemonSet's pod there
    (``nvcr.io/nvidia/k8s-device-plugin:v0.17.0``, ``...:v0.20.0-ubi9``); None when none is seen."""
    for pod in pods:
        for c in (pod.get("spec") or {}).get("containers") or []:
            m = _VERSION.search(str(c.get("image") or ""))
            if m:
                return ".".join(m.groups())
    return None


def packed_capable(version: str | None) -> bool | None:
    """Whether that plugin version knows the ``packed`` policy; None when the version is unknown."""
    if not version:
        return None
    return tuple(int(x) for x in version.split(".")) >= PACKED_SINCE
