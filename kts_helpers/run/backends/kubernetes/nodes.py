"""What the device plugin and GPU feature discovery say about a node: GPUs, replicas, sharing strategy.

Without GPU feature discovery (GKE's own device plugin, a bare K3s plugin) a node shows only its
allocatable count: the physical GPUs, the replica factor and the sharing strategy are then unknown,
and the kit says so instead of guessing; the workers' GPU UUIDs still prove what was shared.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kts_helpers.errors import SpecError
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
    taints: list[dict[str, Any]] = field(default_factory=list)
    readable: bool = True  # False: RBAC lets the kit not read nodes; this one is what the user stated
    # what each of replicas, strategy, renameByDefault, failRequestsGreaterThanOne is and where it came from
    # ("verified from <source>" or "unverified (stated by K8S_*)"): ``backend.KubernetesBackend.verify_plugin``
    plugin: dict[str, Any] = field(default_factory=dict)

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
                    physical_known=known, taints=list((node.get("spec") or {}).get("taints") or []))


def stated_node(name: str, resource: str | None, replicas: int) -> NodeInfo:
    """A node the kit may not read (the namespaced Role alone): what the user stated about it (its name, one
    physical GPU advertised ``replicas`` times). The scheduler still refuses a pod that does not fit, and the
    workers' GPU UUIDs still prove what was shared."""
    return NodeInfo(name=name, resource=resource or "nvidia.com/gpu", allocatable=replicas, physical=1,
                    replicas=replicas, strategy=None, product=None, physical_known=False, readable=False)


def mps_caps(replicas: int) -> dict[str, Any]:
    """What the NVIDIA device plugin's MPS daemon gives each client on a node with ``replicas``, as the plugin
    sets it (cmd/mps-control-daemon/mps/daemon.go): ``set_default_active_thread_percentage`` with
    ``fmt.Sprintf("%d", 100/replicasPerDevice)`` -- Go's integer division, so 3 replicas give 33 %, not 33.333 --
    and ``set_default_device_pinned_mem_limit <index> <totalMemory/replicas/1024/1024>M`` (whole MiB), for every
    client, the tenants' alone baselines included. That is not local MPS (no caps unless set), so a Kubernetes
    MPS run carries these caps in its record and its workers' KTS_META (``KTS_SHARING_CAPS``) and is never
    compared with a local MPS run without them."""
    replicas = int(replicas)
    return {"source": "k8s-device-plugin MPS daemon", "replicas": replicas,
            "active_thread_percentage": 100 // replicas, "pinned_memory_fraction": round(1.0 / replicas, 6)}


def mode_mismatch(metas: Mapping[str, Mapping[str, Any] | None], sharing: str) -> str:
    """A tenant whose worker was not served the way the scenario says it measures: under MPS the device plugin
    hands every client the daemon's ``CUDA_MPS_PIPE_DIRECTORY`` (internal/plugin/server.go,
    ``getAllocateResponse`` -> ``updateResponseForMPS``), which the worker echoes as ``mps_client`` in its
    KTS_META; under time-slicing no container gets it. Without node reads the node's sharing strategy is
    unknown, and a time-slicing run on an MPS node (or the reverse) would be labelled wrong in silence; ""
    when every tenant agrees with ``sharing``."""
    want = sharing == "mps"
    for tenant, meta in metas.items():
        got = (meta or {}).get("mps_client")
        if got is None:
            return (f"tenant {tenant!r} reported no mps_client in its KTS_META: whether the device plugin served it "
                    f"through MPS is unknown, so the scenario's mode ({sharing}) is not proven")
        if bool(got) != want:
            what = "an MPS client (the device plugin set CUDA_MPS_PIPE_DIRECTORY)" if got else \
                "not an MPS client (no CUDA_MPS_PIPE_DIRECTORY from the device plugin)"
            return (f"tenant {tenant!r} ran as {what}, but the scenario measures {sharing}: the node's device plugin "
                    "shares its GPU the other way; the scenario is not what its label says (select a node of the "
                    "right sharing strategy, or the matching sharing=)")
    return ""

# --------------------------------------------------------------------------- taints and tolerations

_TOLERATION = re.compile(r"^([A-Za-z0-9./_-]*)(?:=([A-Za-z0-9._-]*))?(?::(NoSchedule|PreferNoSchedule|NoExecute))?$")


def parse_tolerations(value: str | Sequence[Mapping[str, Any]] | None) -> list[dict[str, Any]]:
    """The user's tolerations: a list of Kubernetes toleration objects, or ``"key=value:Effect,key:Effect"``
    (``key`` alone, or an empty key, tolerates with ``Exists``; no effect tolerates every effect)."""
    if not value:
        return []
    if not isinstance(value, str):
        out = [dict(t) for t in value]
        for t in out:
            if t.get("operator", "Equal") not in ("Equal", "Exists") or t.get("effect", "") not in (
                    "", "NoSchedule", "PreferNoSchedule", "NoExecute"):
                raise SpecError(f"invalid toleration {t!r}")
        return out
    out = []
    for item in (s.strip() for s in value.split(",")):
        m = _TOLERATION.match(item)
        if not item or not m:
            raise SpecError(f"invalid toleration {item!r}: write key=value:Effect, key:Effect or key "
                            "(Effect: NoSchedule, PreferNoSchedule or NoExecute)")
        key, val, effect = m.groups()
        tol: dict[str, Any] = {"key": key, "operator": "Equal" if val is not None else "Exists"}
        if val is not None:
            tol["value"] = val
        if effect:
            tol["effect"] = effect
        out.append(tol)
    return out


def tolerates(toleration: Mapping[str, Any], taint: Mapping[str, Any]) -> bool:
    """Kubernetes' rule (``Toleration.ToleratesTaint``): effect, key and value (or Exists) match."""
    if toleration.get("effect") and toleration["effect"] != taint.get("effect"):
        return False
    op = toleration.get("operator") or "Equal"
    if not toleration.get("key"):
        return op == "Exists"
    if toleration["key"] != taint.get("key"):
        return False
    return op == "Exists" or str(toleration.get("value") or "") == str(taint.get("value") or "")


def untolerated(taints: Iterable[Mapping[str, Any]], tolerations: Iterable[Mapping[str, Any]]) -> list[str]:
    """The taints that keep the kit's pods off a node (NoSchedule, NoExecute), as ``key=value:Effect``."""
    tols = list(tolerations)
    return [f"{t.get('key')}{'=' + str(t['value']) if t.get('value') else ''}:{t.get('effect')}"
            for t in taints if t.get("effect") in ("NoSchedule", "NoExecute")
            and not any(tolerates(tol, t) for tol in tols)]


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
