"""``KubernetesBackend``: where a scenario runs (a node, held through its Lease), and what is recorded about it.

* A scenario's tenants are one Indexed Job (``jobs``), its placeholders a second one, pinned to one node by its
  name (node affinity on ``metadata.name``; the scheduler still decides, so ``PodScheduled`` stays meaningful), the
  tenants' PriorityClass above the placeholders' (the scheduler places them first); with a Kueue queue each Job is
  admitted as one Workload, a gang.
* Two clients (or two users) never measure on one GPU node at once: the node's Lease (``lease``) is held
  while a scenario runs, and GPU pods of other runs still on the node are waited for, never deleted.
* The scheduler keeps strangers off the measured GPU: placeholder indexes of the scenario's Job hold every
  replica the tenants do not (``jobs``), and other GPU pods on the node are looked for again while the
  scenario runs and after it: any whose life overlaps the measurement fails it, by name (``strangers``).
* Least privilege: the namespaced Role is enough. Reading nodes (ClusterRole kts-node-reader) is optional:
  without it ``node_name`` and ``gpu_replicas`` say what the node is. Listing pods of every namespace
  (ClusterRole kts-cluster-pod-reader, opt-in ``cluster_pod_list``) returns every pod's whole spec, inline
  environment values included; without it the kit sees its own namespace's pods and relies on the
  placeholders (manifests/README.md says what each grant exposes).
* The Job carries everything it needs to finish without this process (deadlines, the workers' own
  padding limit), so ``kts run --resume <run_id>`` collects what completed while the client was away.
* Only this run's objects are ever deleted, always with foreground propagation, also after Ctrl-C; on SIGTERM
  the deletes are issued and the record written before the Lease goes, within 2 s (``_terminated``);
  ``cleanup_older_than`` (``k8s-smoke --cleanup``) removes kit objects older than a stated age.

Longer than 500 lines on purpose: the options, node choice, exclusivity, clean-up and the record of a
scenario (with every failure path out of it) are one class read top to bottom; the scenario's own
lifecycle, the Lease, names, API, nodes, Job manifest, object states and log streams are modules of
their own.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from kts_helpers.errors import BackendError, KtsError, SpecError, TenantFailed
from kts_helpers.fsutil import write_new
from kts_helpers.run.backends.base import ScenarioResult, TenantResult
from kts_helpers.run.backends.kubernetes.api import KubeApi, KubeForbidden, load_api_client
from kts_helpers.run.backends.kubernetes.clock import Clock, parse_time
from kts_helpers.run.backends.kubernetes.jobs import GPU_TOLERATION, PLACEHOLDER_REQUESTS
from kts_helpers.run.backends.kubernetes.lease import NodeBusy, NodeLease, client_identity
from kts_helpers.run.backends.kubernetes.lifecycle import Failure, ScenarioRun, scenario_selector, sleep_real
from kts_helpers.run.backends.kubernetes.logs import continuity_of
from kts_helpers.run.backends.kubernetes.names import (
    ANN_SCENARIO,
    GPU_RESOURCES,
    LABEL_RE,
    LABEL_RUN,
    MANAGED_BY,
    MANAGED_VALUE,
    RESOLUTION_S,
    is_kts_object,
    job_of,
    label_value,
    labels_match,
    parse_selector,
    selector_string,
)
from kts_helpers.run.backends.kubernetes.nodes import (
    PACKED_SINCE,
    NodeInfo,
    device_plugin_version,
    mode_mismatch,
    mps_caps,
    node_info,
    packed_capable,
    parse_tolerations,
    stated_node,
    untolerated,
)
from kts_helpers.run.backends.kubernetes.plugin_config import (
    CONFIG_LABEL,
    PluginConfigError,
    parse_reference,
    plugin_settings,
)
from kts_helpers.run.corun import Judge, gpu_mismatch
from kts_helpers.run.gpumem import check_block
from kts_helpers.run.interrupts import Terminated, interrupt_reason, sigterm_as_interrupt
from kts_helpers.run.runs import Run
from kts_helpers.run.spec import ScenarioSpec
from kts_helpers.run.telemetry import DcgmScraper, page_check, write_status

STRATEGY_OF = {"timeslice": "time-slicing", "mps": "mps"}



def qos_record(events: Mapping[str, Mapping[str, Any]], placeholders: int = 0) -> dict[str, Any]:
    """The tenants' QoS classes as the API server set them (each pod's ``status.qosClass``, read back), and what
    that means for the measured tail.

    The tenants ask for Guaranteed QoS (``jobs``: CPU and memory requests equal to limits, whole CPUs): other
    pods' CPU use on the node then cannot reach their share, and with the kubelet's static CPU manager they get
    exclusive cores. A class other than Guaranteed (a LimitRange or a mutating webhook changed the pod; an
    old API server) is stated with what it means. The placeholders' own minimal requests are recorded too."""
    classes = {t: ev.get("qos_class") for t, ev in events.items()}
    out: dict[str, Any] = {"tenants": classes, "source": "pod status.qosClass (set by the API server)",
                           "tenant_requests": "requests = limits, whole CPUs (Guaranteed asked)"}
    if placeholders:
        out["placeholder_requests"] = dict(PLACEHOLDER_REQUESTS)
    if any(c != "Guaranteed" for c in classes.values()):
        out["note"] = ("tenants are not Guaranteed QoS although they asked for it (a LimitRange or webhook changed "
                       "their resources, or the class was not read): other pods' CPU use on the node can enter the "
                       "measured tail")
    return out


PRIORITY_CLASSES = "kts-tenant,kts-placeholder"  # manifests/base/priorityclass.yaml


def parse_priority_classes(value: str | Sequence[str] | None) -> tuple[str | None, str | None]:
    """``"<tenants'>,<placeholders'>"`` -> (tenants', placeholders'); "none" (or empty) -> (None, None)."""
    names = _names(value)
    if not names or names in (("none",), ("false",)):
        return None, None
    if len(names) != 2 or not all(re.fullmatch(r"[a-z0-9]([-a-z0-9.]*[a-z0-9])?", n) for n in names):
        raise SpecError(f"priority_classes must be '<tenants' class>,<placeholders' class>' (manifests/base: "
                        f"{PRIORITY_CLASSES}) or 'none', got {value!r}")
    return names[0], names[1]


def _names(value: str | Sequence[str] | None) -> tuple[str, ...]:
    if not value:
        return ()
    items = value.split(",") if isinstance(value, str) else list(value)
    return tuple(str(s).strip() for s in items if str(s).strip())


def _flag(value: bool | str | None, what: str) -> bool:
    if isinstance(value, str):
        if value.strip().lower() not in ("", "0", "1", "true", "false", "yes", "no"):
            raise SpecError(f"{what} must be true or false, got {value!r}")
        return value.strip().lower() in ("1", "true", "yes")
    return bool(value)


class KubernetesBackend:
    """Runs each scenario as one Indexed Job on one GPU node and collects logs and layered waits.

    ``namespace``/``image``: where the Jobs go and what they run. ``kubeconfig``/``context``: which
    cluster (default: ``$KUBECONFIG`` or ``~/.kube/config``, else the in-cluster service account);
    ``api_client`` replaces both (tests, scale-out). ``node_selector`` (``"k=v,k2"`` or a mapping)
    narrows the GPU nodes, ``node_name`` pins one. ``queue_name``: a Kueue LocalQueue. ``ready_timeout_s``:
    how long every tenant may take to be admitted, placed, pulled and warmed up (the start barrier waits
    for all of them, ``barrier``). ``start_delay_s``: from the barrier's release to the start, long enough
    for the kubelet to write the go annotation into the pods' downwardAPI volume (it syncs a pod on an
    annotation change: about a second; 10 s by default).
    ``schedule_timeout_s``: how long a pod may stay unschedulable. ``gpu_resource``: force ``nvidia.com/gpu`` or ``nvidia.com/gpu.shared``
    (default: what the node advertises). ``runtime_class``: e.g. ``nvidia`` on K3s. ``service_account``:
    the pods' identity (``kts-worker`` from manifests/base). ``image_pull_secrets``: names of Secrets
    (a list or ``"a,b"``). ``read_only_root``: a read-only root filesystem for the worker (off: it is
    not needed for Pod Security "restricted" and breaks some CDI-mode GPU containers).
    ``dcgm_url``: a dcgm-exporter ``/metrics`` URL scraped every ``dcgm_interval_ms`` while a scenario
    runs, into ``logs/<scenario>/telemetry.parquet``; an unreachable exporter only leaves the telemetry
    status "absent" or "partial". ``allocation_policy``: the device plugin's ``sharedDevicesAllocationPolicy``;
    only ``packed`` keeps the tenants of a shared scenario on one GPU of a multi-GPU node, so such nodes
    are refused without it. ``lease_namespace``/``lease_duration_s``/``lease_wait_s``: the node Leases
    (default: the kit's namespace; every client sharing the GPU nodes must use the same one), how long one
    lasts without renewal, and how long to wait for a busy node. ``keep_finished_s``: how long a finished
    Job stays for ``--resume``. ``clock``: the time source (tests pass the emulator's).
    ``placeholders`` (on): hold the measured GPU's other replicas with sleeping pods of the same Job, so the
    scheduler keeps other pods off it. ``cluster_pod_list`` (off): look for other GPU pods on the node in
    every namespace (needs the opt-in ClusterRole kts-cluster-pod-reader); off, only the kit's namespace
    is seen. ``gpu_replicas``: the replicas of the pinned node's one GPU, for clusters where the kit may not
    read nodes (then ``node_name`` is needed too). ``tolerations``: taints of a GPU pool the pods may
    tolerate (``"key=value:NoSchedule,key2"`` or toleration objects); nodes with other taints are skipped.
    ``worker_device``: ``cuda``, or ``cpu`` on a cluster without GPUs (manifests/kind/run-kind.sh): everything
    but the GPU runs, and a shared scenario fails its one-GPU proof (no GPU UUID), as it must.
    ``device_plugin_config``: the NVIDIA device plugin's ConfigMap, ``<namespace>/<name>[/<default key>]``
    (needs the opt-in Role of manifests/components/device-plugin-config): its replicas, sharing strategy,
    renameByDefault and failRequestsGreaterThanOne are then verified from it (``plugin_config``); where it
    cannot be read they are recorded as stated or unverified.
    ``priority_classes``: ``"<tenants'>,<placeholders'>"`` PriorityClasses (manifests/base: ``kts-tenant`` above
    ``kts-placeholder``; kube-scheduler's queue then places the tenants first, and a preemptor takes a placeholder,
    never a tenant); ``"none"`` leaves the pods without one (K8S_PRIORITY_CLASSES).
    """

    name = "kubernetes"

    def __init__(self, namespace: str = "kts", image: str = "kts-worker:latest", *,
                 kubeconfig: str | os.PathLike | None = None, context: str | None = None,
                 node_selector: str | Mapping[str, str] | None = None, node_name: str | None = None,
                 queue_name: str | None = None, api_client: Any = None, gpu_resource: str | None = None,
                 service_account: str | None = "kts-worker", memory_limit: str = "8Gi", start_delay_s: float = 10.0,
                 schedule_timeout_s: float = 300.0, poll_s: float = 2.0, cleanup_timeout_s: float = 120.0,
                 image_pull_policy: str = "IfNotPresent", runtime_class: str | None = None,
                 dcgm_url: str | None = None, dcgm_interval_ms: float = 1000.0, allocation_policy: str | None = None,
                 image_pull_secrets: str | Sequence[str] | None = None, read_only_root: bool | str = False,
                 lease_namespace: str | None = None, lease_duration_s: int = 30, lease_wait_s: float = 300.0,
                 keep_finished_s: int = 86400, ready_timeout_s: float = 1800.0, clock: Clock | None = None,
                 placeholders: bool | str = True, cluster_pod_list: bool | str = False,
                 gpu_replicas: int | str | None = None,
                 tolerations: str | Sequence[Mapping[str, Any]] | None = None, worker_device: str = "cuda",
                 device_plugin_config: str | None = None,
                 priority_classes: str | Sequence[str] | None = PRIORITY_CLASSES):
        for what, ns in (("namespace", namespace), ("lease_namespace", lease_namespace or namespace)):
            if not re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", ns or "") or len(ns) > 63:
                raise SpecError(f"invalid Kubernetes {what} {ns!r}")
        if not image or any(c.isspace() for c in image):
            raise SpecError(f"invalid image reference {image!r}")
        if gpu_resource is not None and gpu_resource not in GPU_RESOURCES:
            raise SpecError(f"gpu_resource must be one of {', '.join(GPU_RESOURCES)}, got {gpu_resource!r}")
        if queue_name is not None and not LABEL_RE.match(queue_name):
            raise SpecError(f"invalid Kueue queue name {queue_name!r}")
        for key, value in (("start_delay_s", start_delay_s), ("schedule_timeout_s", schedule_timeout_s),
                           ("poll_s", poll_s), ("cleanup_timeout_s", cleanup_timeout_s),
                           ("lease_wait_s", lease_wait_s), ("keep_finished_s", keep_finished_s),
                           ("ready_timeout_s", ready_timeout_s)):
            if value < 0 or (key == "poll_s" and value == 0):
                raise SpecError(f"{key} must be > 0, got {value}")
        if not 3 <= int(lease_duration_s) <= 3600:
            raise SpecError(f"lease_duration_s must be between 3 and 3600 s, got {lease_duration_s}")
        if dcgm_url is not None and not re.match(r"^https?://[^\s/]+", str(dcgm_url)):
            raise SpecError(f"dcgm_url must be an http(s) URL such as http://dcgm-exporter:9400/metrics, "
                            f"got {dcgm_url!r}")
        if not float(dcgm_interval_ms) > 0:
            raise SpecError(f"dcgm_interval_ms must be > 0, got {dcgm_interval_ms}")
        if allocation_policy not in (None, "", "distributed", "packed"):
            raise SpecError(f"allocation_policy must be 'packed' or 'distributed' (the device plugin's "
                            f"sharedDevicesAllocationPolicy), got {allocation_policy!r}")
        self.image_pull_secrets = _names(image_pull_secrets)
        for secret in self.image_pull_secrets:
            if not re.fullmatch(r"[a-z0-9]([-a-z0-9.]*[a-z0-9])?", secret):
                raise SpecError(f"invalid image pull Secret name {secret!r}")
        self.read_only_root = _flag(read_only_root, "read_only_root")
        self.placeholders = _flag(placeholders, "placeholders")
        self.cluster_pod_list = _flag(cluster_pod_list, "cluster_pod_list")
        self.tolerations = parse_tolerations(tolerations)
        if worker_device not in ("cuda", "cpu"):
            raise SpecError(f"worker_device must be 'cuda' or 'cpu' (a cluster without GPUs, e.g. kind), got "
                            f"{worker_device!r}")
        self.worker_device = worker_device
        self.priority_classes = parse_priority_classes(priority_classes)
        self.device_plugin_config = parse_reference(device_plugin_config)
        self._plugin_checked: set[str] = set()
        if gpu_replicas in (None, ""):
            self.gpu_replicas: int | None = None
        elif not str(gpu_replicas).isdigit() or not 1 <= int(str(gpu_replicas)) <= 64:
            raise SpecError(f"gpu_replicas must be a whole number in 1..64, got {gpu_replicas!r}")
        else:
            self.gpu_replicas = int(str(gpu_replicas))
        self.nodes_readable = True  # False once RBAC refused reading nodes (the namespaced Role alone)
        self.allocation_policy = allocation_policy or "distributed"
        self.namespace, self.image, self.queue_name = namespace, image, queue_name or None
        self.node_selector = parse_selector(node_selector)
        self.node_name = node_name or None
        self.gpu_resource = gpu_resource
        self.service_account, self.memory_limit = service_account or None, memory_limit
        self.start_delay_s, self.schedule_timeout_s = float(start_delay_s), float(schedule_timeout_s)
        self.ready_timeout_s = float(ready_timeout_s)
        self.poll_s, self.cleanup_timeout_s = float(poll_s), float(cleanup_timeout_s)
        self.image_pull_policy, self.runtime_class = image_pull_policy, runtime_class or None
        self.dcgm_url, self.dcgm_interval_ms = dcgm_url or None, float(dcgm_interval_ms)
        self.lease_namespace = lease_namespace or namespace
        self.lease_duration_s, self.lease_wait_s = int(lease_duration_s), float(lease_wait_s)
        self.keep_finished_s = int(keep_finished_s)
        self.clock = clock or Clock()
        self.identity = client_identity()
        self._leases: dict[str, NodeLease] = {}
        self._run_nodes: dict[str, str] = {}  # run id -> the one node all its scenarios run on
        if api_client is None:
            api_client, ctx = load_api_client(kubeconfig, context)
        else:
            ctx = context or "(given ApiClient)"
        self.context = ctx
        self.api = KubeApi(api_client, namespace, context=ctx)

    # ---------------------------------------------------------------- nodes
    def gpu_nodes(self) -> list[NodeInfo]:
        """Schedulable nodes matching the selector that advertise an NVIDIA GPU resource, best for the
        measurement first: one physical GPU (every replica is that GPU); then several GPUs where the
        plugin's ``packed`` policy is set and its version knows it; then unknown; then the rest."""
        try:
            nodes = self.api.list_nodes(selector_string(self.node_selector))
        except KubeForbidden:
            if not (self.node_name and self.gpu_replicas):
                raise BackendError("RBAC lets this client not read nodes (no ClusterRole kts-node-reader): pass "
                                   "node_name (K8S_NODE) and gpu_replicas (K8S_GPU_REPLICAS, the replicas of its one "
                                   "GPU) to run with the namespaced Role alone, or grant kts-node-reader") from None
            self.nodes_readable = False
            return [stated_node(self.node_name, self.gpu_resource, self.gpu_replicas)]
        out = []
        for n in nodes:
            labels = (n.get("metadata") or {}).get("labels") or {}
            name = (n.get("metadata") or {}).get("name")
            if self.node_name and name != self.node_name:
                continue
            if not labels_match(labels, self.node_selector):
                continue
            info = node_info(n, self.gpu_resource)
            if info is not None and untolerated(info.taints, self.tolerations_all()):
                continue  # the pods would sit Pending there: a tainted pool (tolerations= to use it)
            if info is not None and info.allocatable > 0 and info.schedulable:
                if info.physical_known and info.physical > 1 and self.cluster_pod_list:
                    # the plugin's pod is in its own namespace: seen only with the cluster-wide pod list
                    info.plugin_version = device_plugin_version(self.api.list_pods_on_node(info.name,
                                                                                           cluster_wide=True))
                out.append(info)
        return sorted(out, key=lambda i: (self._rank(i), -i.allocatable, i.name))

    def tolerations_all(self) -> list[dict[str, Any]]:
        return [GPU_TOLERATION, *self.tolerations]

    def placeholder_count(self, node: NodeInfo, tenants: int) -> int:
        """The replicas of the measured GPU the tenants leave free: the placeholders hold them. One physical
        GPU (or packed replicas): ``replicas`` minus the tenants; without feature discovery the node's whole
        allocatable count (every replica is assumed to be on the one GPU: never fewer than needed)."""
        if not self.placeholders:
            return 0
        per_gpu = (node.replicas or 1) if node.physical_known and node.physical > 1 else node.allocatable
        return max(0, int(per_gpu) - tenants)

    def _rank(self, node: NodeInfo) -> int:
        if not node.physical_known:
            return 2
        if node.physical == 1:
            return 0
        return 1 if self.allocation_policy == "packed" and packed_capable(node.plugin_version) else 3

    def node_for(self, run: Run) -> NodeInfo:
        """The one node of an experiment: the node its run was set up on (``describe`` recorded it), else
        the one its first scenario took here, else the best now. Baseline and shared run on the same GPU."""
        name = str(run.read().environment.get("node") or "") or self._run_nodes.get(run.run_id)
        if not name:
            node = self.pick_node()
            self._run_nodes[run.run_id] = node.name
            return node
        node = next((n for n in self.gpu_nodes() if n.name == name), None)
        if node is None:
            raise BackendError(f"node {name}, on which run {run.run_id} measures, is no longer a schedulable GPU "
                               f"node matching selector {selector_string(self.node_selector) or '(none)'}; every "
                               "scenario of an experiment runs on one node: start a new run")
        self._run_nodes[run.run_id] = name
        return node

    def pick_node(self) -> NodeInfo:
        nodes = self.gpu_nodes()
        if not nodes:
            what = f"node {self.node_name!r}" if self.node_name else "no schedulable node"
            sel = selector_string(self.node_selector) or "(none)"
            tainted = self._tainted()
            if tainted:
                raise BackendError(f"every matching GPU node has a taint the kit's pods do not tolerate "
                                   f"({'; '.join(tainted)}); pass tolerations= (K8S_TOLERATIONS, e.g. "
                                   "'dedicated=ml:NoSchedule') to use that pool, or select another node")
            raise BackendError(f"{what} advertises {' or '.join(GPU_RESOURCES)} (selector {sel}, context "
                               f"{self.context!r}); is the NVIDIA device plugin running on the GPU node?")
        return nodes[0]

    def _tainted(self) -> list[str]:
        with contextlib.suppress(KtsError):
            out = []
            for n in self.api.list_nodes(selector_string(self.node_selector)):
                info = node_info(n, self.gpu_resource)
                if info is None or (self.node_name and info.name != self.node_name):
                    continue
                bad = untolerated(info.taints, self.tolerations_all())
                if bad:
                    out.append(f"{info.name}: {', '.join(bad)}")
            return out
        return []

    def describe(self) -> dict[str, Any]:
        """What the cluster offers, for the setup notebook ("Kubernetes sees N GPUs; the node has M")."""
        node = self.pick_node()
        nodes = self.gpu_nodes()
        warnings = []
        if node.strategy in (None, "none") and (node.replicas or 1) <= 1:
            warnings.append(f"time-slicing does not seem configured ({node.sharing_note()}); apply "
                            "manifests/overlays/device-plugin-timeslicing (see manifests/README.md)")
        if not node.physical_known:
            warnings.append(f"node {node.name} has no GPU feature discovery labels (nvidia.com/gpu.*): the GPU "
                            "model, the physical GPU count and the sharing strategy are unknown to kts; the "
                            "tenants' GPU UUIDs are still checked after every shared scenario (manifests/README.md)")
        return {
            "backend": self.name, "context": self.context, "server": self.api.host, "namespace": self.namespace,
            "image": self.image, "queue": self.queue_name, "node": node.name, "gpu_resource": node.resource,
            "kubernetes_gpus": node.allocatable, "physical_gpus": node.physical, "replicas": node.replicas,
            "sharing_strategy": node.strategy, "product": node.product, "summary": node.sentence,
            "nodes": [asdict(n) | {"sentence": n.sentence} for n in nodes],
            "other_gpu_pods": self.other_gpu_pods(node.name, None), "warnings": warnings,
            "resolution_s": RESOLUTION_S,
        }

    # ---------------------------------------------------------------- exclusivity
    def lease_for(self, node: str, *, progress: bool = True) -> NodeLease:
        lease = self._leases.get(node)
        if lease is None:
            lease = self._leases[node] = NodeLease(
                self.api, node, namespace=self.lease_namespace, identity=self.identity, clock=self.clock,
                duration_s=self.lease_duration_s, wait_s=self.lease_wait_s, progress=progress,
                poll_s=min(self.poll_s, 1.0))
        lease.progress = progress
        return lease

    @contextlib.contextmanager
    def session(self, wait_s: float | None = None, progress: bool = True) -> Iterator[str]:
        """Hold one free GPU node's Lease for a whole experiment, pinned to it meanwhile (scale-out).

        The candidates are the nodes the selector matches; the first whose Lease is free is taken, else
        this waits (up to ``wait_s``, default ``lease_wait_s``) until one is. The cluster's Leases are
        the queue: several clients, or several users, share the nodes without knowing of each other.
        """
        limit = self.lease_wait_s if wait_s is None else float(wait_s)
        start = self.clock.monotonic()
        said = False
        while True:
            reasons = []
            for info in self.gpu_nodes():
                lease = self.lease_for(info.name, progress=progress)
                why = lease.try_acquire()
                if why is None:
                    pinned, self.node_name = self.node_name, info.name
                    try:
                        with lease.held():
                            yield info.name
                    finally:
                        self.node_name = pinned
                    return
                reasons.append(f"{info.name}: {why}")
            if not reasons:
                self.pick_node()  # raises the explanatory error
            if self.clock.monotonic() - start >= limit:
                raise NodeBusy(f"no GPU node came free within {limit:.0f} s: {'; '.join(reasons)}")
            if progress and not said:
                print(f"[kts] every matching GPU node is in use ({'; '.join(reasons)}); waiting", file=sys.stderr)
                said = True
            sleep_real(self.poll_s)

    def other_gpu_pods(self, node: str, run_id: str | None, scenario: str | None = None) -> list[str]:
        """GPU pods on ``node``, in any namespace, other than this run's (scenario's) own; kts never deletes
        them. Another team's pod on the same time-sliced GPU would share it as much as a kit's own."""
        return sorted(self._describe_pod(p) for p in self.gpu_pods(node, run_id, scenario))

    def gpu_pods(self, node: str, run_id: str | None, scenario: str | None = None, *,
                 ended: bool = False) -> list[dict[str, Any]]:
        """The GPU pods on ``node`` that are not this run's (scenario's), seen as far as RBAC lets this client
        see (every namespace with ``cluster_pod_list``, else the kit's); ``ended`` keeps finished ones too."""
        out = []
        for p in self.api.list_pods_on_node(node, cluster_wide=self.cluster_pod_list):
            meta, spec = p.get("metadata") or {}, p.get("spec") or {}
            if spec.get("nodeName") != node or (not ended and (p.get("status") or {}).get("phase") in
                                                ("Succeeded", "Failed")):
                continue
            wants = [k for c in spec.get("containers") or [] for part in ("limits", "requests")
                     for k in ((c.get("resources") or {}).get(part) or {})]
            if not any(k in GPU_RESOURCES or k.startswith("nvidia.com/") for k in wants):
                continue
            ours = meta.get("namespace", self.namespace) == self.namespace
            if run_id is not None and ours and is_kts_object(p, run_id, scenario):
                continue
            out.append(p)
        return out

    def _describe_pod(self, p: Mapping[str, Any]) -> str:
        meta = p.get("metadata") or {}
        ours = meta.get("namespace", self.namespace) == self.namespace
        labels = meta.get("labels") or {}
        owner = f"Job {job_of(p)}" if job_of(p) else "no Job"
        whose = f"kts run {labels.get(LABEL_RUN)}" if ours and is_kts_object(p) else "not a kts pod"
        return f"{meta.get('namespace', self.namespace)}/{meta.get('name')} ({owner}, {whose})"

    def wait_node_free(self, node: str, run_id: str, scenario: str, progress: bool) -> float:
        """Wait until no other GPU pod is on ``node`` (another run whose client died, a user without a Lease,
        this run's other scenario left by a client that died); never deletes them. Returns the seconds
        waited; NodeBusy after ``lease_wait_s``."""
        start = self.clock.monotonic()
        said = False
        while True:
            others = self.other_gpu_pods(node, run_id, scenario)
            if not others:
                return self.clock.monotonic() - start
            waited = self.clock.monotonic() - start
            if waited >= self.lease_wait_s:
                raise NodeBusy(f"node {node} still runs GPU pods that are not this run's after {waited:.0f} s: "
                               f"{', '.join(others)}; kts never deletes other runs' objects (delete them yourself "
                               "if they are yours, or choose another node)")
            if progress and not said:
                print(f"[kts] node {node} runs other GPU pods ({', '.join(others)}); waiting for them to end",
                      file=sys.stderr)
                said = True
            sleep_real(self.poll_s)

    # ---------------------------------------------------------------- clean-up
    def cleanup(self, run_id: str, scenario: str | None = None, *, wait: bool = True) -> list[str]:
        """Delete this run's Jobs (optionally of one scenario) and orphaned pods; returns the Job names.

        Only objects whose labels and annotations say they are the kit's and this run's are touched;
        the server-side selector narrows the listing, the client-side check decides.
        """
        if not run_id:
            raise SpecError("cleanup needs a run id (cleanup_older_than removes old kit objects of any run)")
        sel = scenario_selector(run_id, scenario) if scenario else selector_string(
            {MANAGED_BY: MANAGED_VALUE, LABEL_RUN: label_value(run_id)})
        return self._delete(sel, lambda o: is_kts_object(o, run_id, scenario), wait=wait)

    def cleanup_older_than(self, age_s: float, *, wait: bool = True) -> list[str]:
        """Delete kit Jobs (and their orphaned pods) created more than ``age_s`` ago, of any run."""
        if not age_s > 0:
            raise SpecError(f"the age for a cleanup must be > 0 s, got {age_s}")
        now = self.clock.now_ns() / 1e9

        def old(obj: Mapping[str, Any]) -> bool:
            created = parse_time((obj.get("metadata") or {}).get("creationTimestamp"))
            return is_kts_object(obj) and created is not None and now - created > age_s

        return self._delete(f"{MANAGED_BY}={MANAGED_VALUE}", old, wait=wait)

    def submitted_scenarios(self, run_id: str) -> list[str]:
        """Scenarios of ``run_id`` whose Job is in the cluster (a client that went away left them)."""
        sel = selector_string({MANAGED_BY: MANAGED_VALUE, LABEL_RUN: label_value(run_id)})
        return sorted({str(((j.get("metadata") or {}).get("annotations") or {}).get(ANN_SCENARIO))
                       for j in self.api.list_jobs(sel) if is_kts_object(j, run_id)})

    def _delete(self, sel: str, mine: Any, *, wait: bool) -> list[str]:
        jobs = [j for j in self.api.list_jobs(sel) if mine(j)]
        names = [j["metadata"]["name"] for j in jobs]
        for name in names:
            self.api.delete_job(name)
        # Pods whose Job is gone (deleted with orphan propagation by someone) are the run's too.
        existing = {j["metadata"]["name"] for j in self.api.list_jobs(sel)} - set(names)
        for pod in self.api.list_pods(sel):
            if mine(pod) and job_of(pod) not in existing and (pod.get("metadata") or {}).get("deletionTimestamp") is None:
                self.api.delete_pod(pod["metadata"]["name"])
        if wait and names:
            self.wait_gone(names, sel)
        return names

    def wait_gone(self, names: Sequence[str], sel: str) -> None:
        """Jobs disappear only after their pods did (foreground deletion): wait for that."""
        deadline = time.monotonic() + self.cleanup_timeout_s
        while True:
            left = [j["metadata"]["name"] for j in self.api.list_jobs(sel) if j["metadata"]["name"] in names]
            if not left:
                return
            if time.monotonic() >= deadline:
                raise BackendError(f"Jobs {', '.join(left)} still exist {self.cleanup_timeout_s:.0f} s after "
                                   f"deletion (namespace {self.namespace}); check finalizers with kubectl")
            time.sleep(min(self.poll_s, 0.2))

    def hint(self, reason: str) -> str:
        if "PriorityClass" in reason:
            return ("; apply manifests/base (its PriorityClasses kts-tenant and kts-placeholder), or run without "
                    "them: priority_classes='none' (K8S_PRIORITY_CLASSES=none)")
        if "OOMKilled" in reason:
            return f"; the container's memory limit is {self.memory_limit}: raise memory_limit"
        if "Image" in reason:
            return (f"; can the node pull {self.image}? push it to a registry the node reaches (private: "
                    "image_pull_secrets), or import it into the node's runtime (manifests/README.md)")
        return ""

    # ---------------------------------------------------------------- a scenario
    def run_scenario(self, run: Run, scenario: ScenarioSpec, *, timeout_s: float,
                     progress: bool = True, pad_limit_s: float | None = None, judge: Judge | None = None) -> ScenarioResult:
        """Hold the node, submit (or attach to) the scenario's Job, watch it, collect, clean up, record.

        ``judge`` is not used: pods share no barrier directory to answer an interim look in, so a tenant with
        looks (``shared_max_factor`` > 1) times to its maximum, the fixed design its reading is set for."""
        if not timeout_s or timeout_s <= 0:
            raise SpecError(f"timeout_s must be > 0, got {timeout_s}")
        if not scenario.tenants:
            raise SpecError(f"scenario {scenario.name!r} has no tenants")
        node = self.node_for(run)
        self.verify_plugin(node)
        if node.allocatable < len(scenario.tenants):
            raise BackendError(f"scenario {scenario.name!r} needs {len(scenario.tenants)} GPUs on one node but "
                               f"{node.sharing_note()}; time-slicing may not be configured (replicas)")
        if scenario.kind == "shared":
            self._check_one_physical_gpu(scenario, node)
        run.claim_scenario(scenario.name)
        lease = self.lease_for(node.name, progress=progress)
        with sigterm_as_interrupt(), lease.held(run.run_id):
            waited = self.wait_node_free(node.name, run.run_id, scenario.name, progress)
            sr = ScenarioRun(self, run, scenario, node, timeout_s=float(timeout_s), progress=progress,
                             pad_limit_s=float(timeout_s if pad_limit_s is None else pad_limit_s), lease=lease,
                             placeholders=self.placeholder_count(node, len(scenario.tenants)))
            result = self._run(run, scenario, node, sr, lease, waited + lease.waited_s)
        if lease.lost and result.status == "complete":  # noticed only when the renewal thread stopped
            raise BackendError(f"scenario {scenario.name!r}: {lease.lost}")
        return result

    def verify_plugin(self, node: NodeInfo) -> None:
        """Where each sharing setting of ``node`` comes from, recorded in ``node.plugin``; the device plugin's own
        ConfigMap (``device_plugin_config``) where RBAC lets the kit read it: its values then replace what was
        stated (``gpu_replicas``, the resource name) and must agree with GPU feature discovery's labels. A config
        the kit reads and the node contradicts fails here, by name: the plugin did not load it (yet)."""
        if node.name in self._plugin_checked and node.plugin:
            return
        gfd = "verified from the node's GPU feature discovery labels"
        rec: dict[str, Any] = {
            "replicas": {"value": node.replicas, "source": (
                f"{gfd} (nvidia.com/gpu.replicas)" if node.readable and node.replicas is not None else
                "unverified (stated by K8S_GPU_REPLICAS)" if not node.readable else "unknown (no label)")},
            "strategy": {"value": node.strategy, "source": (
                f"{gfd} (nvidia.com/gpu.sharing-strategy)" if node.readable and node.strategy else "unknown")},
            "resource": {"value": node.resource, "source": "verified from the node's allocatable resources"
                         if node.readable else "unverified (stated by gpu_resource, else nvidia.com/gpu)"},
            "rename_by_default": {"value": None, "source": "unknown"},
            "fail_requests_greater_than_one": {"value": None, "source": "unknown"}}
        label = node.labels.get(CONFIG_LABEL) if node.readable else None
        rec["config_label"] = {"value": label, "source": f"node label {CONFIG_LABEL}" if node.readable else
                               "unknown (nodes not readable)"}
        node.plugin = rec
        self._plugin_checked.add(node.name)
        if self.device_plugin_config is None:
            rec["config"] = "not read (no device_plugin_config / K8S_DEVICE_PLUGIN_CONFIG)"
            return
        ns, name, default = self.device_plugin_config
        try:
            cm = self.api.read_configmap(name, ns)
        except KubeForbidden as exc:
            rec["config"] = (f"not read: {exc} (the Role of manifests/components/device-plugin-config must be in "
                             f"namespace {ns} and name {name} in its resourceNames: apply it as it is, or list it "
                             "under the components of manifests/base, never in a kustomization that sets "
                             "namespace:, which moves the Role out of the plugin's namespace)")
            print(f"[kts] warning: device_plugin_config {ns}/{name} was not read: {rec['config'][10:]}",
                  file=sys.stderr)
            return
        if cm is None:
            rec["config"] = f"not read: ConfigMap {ns}/{name} does not exist"
            return
        base = "nvidia.com/gpu"
        try:
            got, source = plugin_settings(cm, label, default, base, node.plugin_version)
        except PluginConfigError as exc:
            raise BackendError(f"the device plugin's ConfigMap {ns}/{name} is not a config the plugin loads: {exc} "
                               "(NVIDIA/k8s-device-plugin api/config/v1)") from None
        rec["config"] = source
        if got is None:
            return
        verified = f"verified from {source}"
        wrong = []
        if node.readable and node.replicas is not None and got.replicas is not None and node.replicas != got.replicas:
            wrong.append(f"replicas {got.replicas} in the config, {node.replicas} on the node's label")
        if not node.readable and got.replicas is not None and node.replicas != got.replicas:
            wrong.append(f"replicas {got.replicas} in the config, {node.replicas} stated by K8S_GPU_REPLICAS")
        if node.readable and node.strategy and node.strategy != got.strategy:
            wrong.append(f"sharing strategy {got.strategy} in the config, {node.strategy} on the node's label")
        if node.readable and node.resource != got.resource and node.allocatable:
            wrong.append(f"resource {got.resource} in the config, {node.resource} advertised by the node")
        if wrong:
            raise BackendError(f"node {node.name}: the device plugin's config and the node disagree ({'; '.join(wrong)}"
                               f"; config: {source}): the plugin has not loaded that config, or another one applies; "
                               "fix the plugin's config or the stated K8S_* values before measuring")
        rec["replicas"] = {"value": got.replicas, "source": verified}
        rec["strategy"] = {"value": got.strategy, "source": verified}
        rec["resource"] = {"value": got.resource, "source": verified}
        rec["rename_by_default"] = {"value": got.rename_by_default, "source": verified}
        rec["fail_requests_greater_than_one"] = {
            "value": got.fail_requests_greater_than_one,
            "source": f"unverified: {got.fail_requests_note}" if got.fail_requests_note and not node.plugin_version
            else f"{verified}; {got.fail_requests_note}" if got.fail_requests_note else verified}
        if got.rename_ignored:
            rec["rename_ignored"] = got.rename_ignored
        if got.allocation_policy:
            rec["allocation_policy"] = {"value": got.allocation_policy, "source": verified}
        if got.device_list_strategy or got.device_id_strategy:
            rec["device_list_strategy"] = {"value": got.device_list_strategy or None, "source": verified}
            rec["device_id_strategy"] = {"value": got.device_id_strategy, "source": verified}
        if got.replicas is not None:
            node.replicas = got.replicas
        node.strategy = node.strategy or got.strategy
        if not node.readable and self.gpu_resource is None:
            node.resource = got.resource  # renameByDefault: pods must ask for nvidia.com/gpu.shared

    def _check_one_physical_gpu(self, scenario: ScenarioSpec, node: NodeInfo) -> None:
        """A shared scenario's tenants must land on one physical GPU of the node, by a sharing strategy.

        The device plugin advertises each physical GPU ``replicas`` times, and its default allocation
        policy ("distributed") spreads replicas over physical GPUs: on a node with more than one, the
        "shared" tenants would each get a GPU of their own. Only the plugin's ``packed`` policy
        (``flags.plugin.sharedDevicesAllocationPolicy``, set in manifests/overlays/device-plugin-timeslicing)
        keeps them together; the workers' GPU UUIDs then prove it after the run.
        """
        want = STRATEGY_OF.get(scenario.sharing, scenario.sharing)
        if node.strategy == "none":
            raise BackendError(f"scenario {scenario.name!r} is shared but {node.sharing_note()}: with sharing "
                               "strategy 'none' every tenant gets a GPU of its own; apply manifests/overlays/"
                               "device-plugin-timeslicing (see manifests/README.md)")
        if node.strategy not in (None, "", want):
            raise BackendError(f"scenario {scenario.name!r} wants {want} sharing but {node.sharing_note()}; apply "
                               f"the matching manifests/overlays/device-plugin-* ConfigMap")
        if node.physical_known and node.physical > 1 and self.allocation_policy != "packed":
            raise BackendError(f"node {node.name} has {node.physical} physical GPUs and the device plugin's default "
                               "'distributed' allocation would give the tenants of scenario "
                               f"{scenario.name!r} different GPUs; set flags.plugin.sharedDevicesAllocationPolicy: "
                               "packed in the plugin config (manifests/overlays/device-plugin-timeslicing does) and "
                               "pass allocation_policy='packed' (K8S_ALLOCATION_POLICY=packed), or select a node "
                               "with one GPU")
        if node.physical_known and node.physical > 1 and packed_capable(node.plugin_version) is False:
            raise BackendError(f"node {node.name} has {node.physical} physical GPUs and runs device plugin "
                               f"v{node.plugin_version}, which predates sharedDevicesAllocationPolicy (v"
                               f"{'.'.join(map(str, PACKED_SINCE))}): it ignores 'packed' and gives the tenants of "
                               f"scenario {scenario.name!r} different GPUs; upgrade the plugin or select a node "
                               "with one GPU")

    def _run(self, run: Run, scenario: ScenarioSpec, node: NodeInfo, sr: ScenarioRun, lease: NodeLease,
             waited_s: float) -> ScenarioResult:
        started_ns = self.clock.now_ns()
        error: BaseException | None = None
        failure: Failure | None = None
        telemetry: dict[str, Any] = {}
        scraper = self._start_telemetry(run.log_dir(scenario.name), telemetry)
        try:
            sr.start()
            if sr.how != "collected":
                failure = sr.watch()
        except BaseException as exc:  # noqa: BLE001 - Ctrl-C included: collect, clean up, re-raise
            error = exc
        if isinstance(error, Terminated):
            self._terminated(run, scenario, node, sr, lease, waited_s, started_ns, scraper, error)
        self._stop_telemetry(scraper, telemetry)
        if (failure is not None or error is not None) and not sr.jobs_deleted:
            with contextlib.suppress(Exception):
                sr.stop()  # stop the other tenants first, so their log streams end
        tenants: list[TenantResult] = []
        events: dict[str, dict[str, Any]] = {}
        try:
            tenants, events = sr.collect(failure, error)
        except BaseException as exc:  # noqa: BLE001
            error = error or exc
        if isinstance(error, Terminated):
            self._terminated(run, scenario, node, sr, lease, waited_s, started_ns, None, error)
        warnings = self._check_telemetry(telemetry, sr, run.log_dir(scenario.name) / "telemetry.parquet")
        if error is None and failure is None:
            try:
                sr.look_after(self.clock.now_ns())
            except KtsError as exc:
                sr.strangers.setdefault("?", f"(the look after the run failed: {exc})")
            failure = self._verify(sr, lease, events)
        cleanup_error = ""
        try:
            self.cleanup(run.run_id, scenario.name)
        except Terminated as exc:
            self._terminated(run, scenario, node, sr, lease, waited_s, started_ns, None, exc)
        except BaseException as exc:  # noqa: BLE001
            cleanup_error = str(exc) or type(exc).__name__
            if error is None and not isinstance(exc, KtsError):
                error = exc
        ended_ns = self.clock.now_ns()
        reason = ""
        if error is not None:
            reason = interrupt_reason(error) if isinstance(error, KeyboardInterrupt) else \
                (str(error).splitlines()[0] if str(error) else type(error).__name__)
        elif failure is not None:
            reason = f"tenant {failure.tenant!r}: {failure.reason}" if failure.tenant else failure.reason
        elif cleanup_error:
            reason = f"cleanup failed: {cleanup_error}"
        status = "failed" if reason else "complete"
        info = {
            "status": status, "backend": self.name, "kind": scenario.kind, "sharing": scenario.sharing,
            "context": self.context, "namespace": self.namespace, "image": self.image, "node": node.name,
            "gpu_resource": node.resource, "kubernetes_gpus": node.allocatable, "physical_gpus": node.physical,
            "replicas": node.replicas, "sharing_strategy": node.strategy, "queue": sr.queue,
            "device_plugin": node.plugin_version, "device_plugin_settings": node.plugin, "job": sr.name, "how": sr.how, "barrier": sr.barrier.record(), "started_ns": started_ns,
            "ended_ns": ended_ns, "resolution_s": RESOLUTION_S, "tenants": events, "corun": sr.replay().summary(),
            "lease": {"name": f"{lease.namespace}/{lease.name}", "holder": lease.identity,
                      "waited_for_node_s": round(waited_s, 3)},
            **({"padding_stopped_ns": sr.live.stopped_ns} if sr.live.stopped_ns else {}), **telemetry,
            "exclusivity": {"placeholders": sr.placeholders, "placeholder_gpus": dict(sorted(
                                (str(k), v) for k, v in sr.holder_gpus.items())),
                            "strangers_looked_for_in": "all namespaces" if self.cluster_pod_list else
                            f"namespace {self.namespace}", "strangers": sorted(sr.strangers.values()),
                            "nodes_readable": self.nodes_readable, "replicas": sr.replicas_proof},
            "log_gaps": {t: c.gaps for t, c in sr.live.continuity.items() if c.gaps},
            "qos": qos_record(events, sr.placeholders),
            "gpu_memory": sr.gpu_memory or {"status": "unknown", "reason": "not checked (the scenario did not end "
                                                                          "cleanly)"},
        }
        if scenario.sharing == "mps" and node.replicas:
            info["mps_caps"] = mps_caps(node.replicas)
        if sr.workload is not None:
            info["workload"] = (sr.workload.get("metadata") or {}).get("name")
        if reason:
            info["reason"] = reason
        if failure is not None and failure.tenant:
            info["failed_tenant"] = failure.tenant
        elif failure is not None:
            info["failed_placeholders"] = sr.hold_name
        if cleanup_error:
            info["cleanup_error"] = cleanup_error
        late = {t: ev["late_start_s"] for t, ev in events.items() if ev.get("missed_start_barrier")}
        if late and len(sr.tenants) == 1:  # alone, a late start costs nothing; with neighbours it fails above
            warnings.append(f"tenant(s) {', '.join(f'{t} ({s:.2f} s)' for t, s in late.items())} began their "
                            "timed loop after their start: the go reached the pod late; raise start_delay_s")
        if warnings:
            info["warnings"] = warnings
            for line in warnings if sr.progress else ():
                print(f"[kts] {scenario.name}: warning: {line}", file=sys.stderr)
        run.record_scenario(scenario.name, info)
        if error is not None:
            raise error
        if failure is not None and not failure.tenant:  # the placeholders' side: no tenant to blame
            raise BackendError(f"scenario {scenario.name!r} failed on Kubernetes: {failure.reason}")
        if failure is not None:
            log_file = run.log_path(scenario.name, failure.tenant)
            tail = log_file.read_text(errors="replace")[-4000:] if log_file.exists() else ""
            if not tail.strip() or tail.strip().splitlines()[-1].startswith("KTS_"):
                tail = ""  # no error text in the pod log: the Job's or pod's reason above is the news
            raise TenantFailed(scenario.name, failure.tenant, failure.exit_code, tail,
                               reason=f"failed on Kubernetes: {failure.reason} (pod log and status in "
                                      f"{run.stderr_path(scenario.name, failure.tenant)})")
        if cleanup_error:
            raise BackendError(f"scenario {scenario.name!r} finished but cleanup failed: {cleanup_error}")
        return ScenarioResult(scenario.name, status, tenants, started_ns, ended_ns,
                              extra={"node": node.name, "namespace": self.namespace, "resolution_s": RESOLUTION_S,
                                     "job": sr.name, "how": sr.how})

    def _terminated(self, run: Run, scenario: ScenarioSpec, node: NodeInfo, sr: ScenarioRun, lease: NodeLease,
                    waited_s: float, started_ns: int, scraper: Any, error: Terminated) -> None:
        """SIGTERM: what a SIGKILL soon after must not undo, first and fast (Jupyter sends SIGKILL 2.5 s after its
        SIGTERM; a pod's grace period may be short): issue the deletes of this scenario's Jobs (not waited for),
        write the logs streamed so far and the record, then raise, so that ``NodeLease.held`` gives the node's Lease
        back (issue 50: the Lease and the record used to come after collecting and waits of 30 s or more)."""
        with contextlib.suppress(BaseException):
            self.cleanup(run.run_id, scenario.name, wait=False)
        tenants: dict[str, dict[str, Any]] = {}
        for t in scenario.tenant_names:
            stream = sr.live.streams.get(t)
            pod = (sr.live.last_pods.get(t) or {}).get("metadata", {}).get("name")
            log, err = run.log_path(scenario.name, t), run.stderr_path(scenario.name, t)
            with contextlib.suppress(Exception):
                if not log.exists():  # finish(0): what was streamed, and the stream ends with its connection
                    write_new(log, stream.finish(0.0) if stream is not None else b"")
                if not err.exists():
                    write_new(err, f"# kts kubernetes backend: scenario {scenario.name}, tenant {t}\npod: {pod}\n"
                                   "outcome: interrupted (SIGTERM): the Jobs' deletion was issued, not waited "
                                   "for; the log holds what was streamed\n".encode())
            tenants[t] = {"outcome": "interrupted", "pod": pod, "log": str(log.relative_to(run.path)),
                          "reason": "interrupted (SIGTERM)"}
        run.record_scenario(scenario.name, {
            "status": "failed", "backend": self.name, "kind": scenario.kind, "sharing": scenario.sharing,
            "context": self.context, "namespace": self.namespace, "image": self.image, "node": node.name,
            "job": sr.name, "how": sr.how, "barrier": sr.barrier.record(), "started_ns": started_ns,
            "ended_ns": self.clock.now_ns(), "resolution_s": RESOLUTION_S, "tenants": tenants,
            "lease": {"name": f"{lease.namespace}/{lease.name}", "holder": lease.identity,
                      "waited_for_node_s": round(waited_s, 3)},
            "reason": interrupt_reason(error), "interrupted": "SIGTERM: the deletes were issued and the record "
            "written before the node's Lease was given back; nothing was collected or waited for",
            "gpu_memory": {"status": "unknown", "reason": "not checked (interrupted by SIGTERM)"}})
        if scraper is not None:
            with contextlib.suppress(Exception):
                scraper.stop(timeout_s=0.2)
        raise error

    @staticmethod
    def _verify(sr: ScenarioRun, lease: NodeLease, events: Mapping[str, Mapping[str, Any]]) -> Failure | None:
        """After a clean end: the node stayed ours, the tenants started together, the shared ones shared one
        GPU and ran together."""
        first = sr.tenants[0]
        if lease.lost:
            return Failure(first, None, lease.lost)
        if sr.strangers:
            return Failure(first, None, sr.stranger_text())
        for t in sr.tenants:  # a Job collected on resume was never streamed: its logs are checked here
            check = continuity_of(sr.run.log_path(sr.scenario.name, t).read_bytes()
                                  if sr.run.log_path(sr.scenario.name, t).exists() else b"")
            if check.gaps:
                return Failure(t, None, check.text(t))
        # a stranger context on the GPU, from the device's used memory against the tenants' own (gpumem)
        ends = sr.replay()  # under MPS (any block on an MPS node: the workers say so) the server holds memory too
        sr.gpu_memory = check_block({t: ends.tenants[t].end.get("gpu_memory") for t in sr.tenants},
                                    mps=sr.scenario.sharing == "mps" or any(
                                        (ends.tenants[t].meta or {}).get("mps_client") for t in sr.tenants))
        if sr.gpu_memory["status"] == "stranger":
            return Failure(first, None, f"{sr.gpu_memory['text']}; the scenario must run again")
        late = next((t for t in sr.tenants if (events.get(t) or {}).get("missed_start_barrier")), None)
        if late is not None and len(sr.tenants) > 1:
            return Failure(late, None, f"began its timed loop {events[late]['late_start_s']:.2f} s after its start: "
                                       "the go reached its pod late (its kubelet was slow to sync the pod); the "
                                       "tenants did not start together and the scenario must run again (raise "
                                       "start_delay_s)")
        watch = sr.replay()
        # the placeholders hold the tenants' GPU, alone or shared: on a multi-GPU node a baseline's placeholders can
        # spill onto another GPU as a shared scenario's can (issue 50: baselines skipped this check)
        held = sr.holder_mismatch(str((watch.tenants[first].meta or {}).get("gpu_uuid") or ""))
        if held:
            return Failure(None, None, held)
        if sr.scenario.kind != "shared":
            return None
        mismatch = gpu_mismatch({t: watch.tenants[t].meta for t in sr.tenants}, require=True)  # pods run on CUDA
        if mismatch:
            return Failure(first, None, mismatch)
        mode = mode_mismatch({t: watch.tenants[t].meta for t in sr.tenants}, sr.scenario.sharing)
        if mode:
            return Failure(first, None, mode)
        if sr.live.pad and not watch.ready_to_stop():
            behind = next((t for t, p in watch.tenants.items() if not p.timed_done), first)
            return Failure(behind, None, "the tenants' padding does not cover every neighbour's timed iterations "
                                         "(the workers' own padding limit ended it while kts was away); the "
                                         "scenario must run again")
        return None

    @staticmethod
    def _check_telemetry(out: dict[str, Any], sr: ScenarioRun, path: Path) -> list[str]:
        """The scraped dcgm-exporter pages must describe the tenants' GPU (``page_check``): pages of another GPU
        or node are refused (status "absent", the reason says why; the analysis then joins nothing), and pages that
        attribute the GPU to one pod only are flagged. Returns the record's warnings."""
        st = out.get("telemetry") or {}
        if st.get("source") != "dcgm" or not st.get("samples"):
            return []
        watch = sr.replay()
        uuids = {str((watch.tenants[t].meta or {}).get("gpu_uuid") or "") for t in sr.tenants} - {""}
        refused, flag = page_check(st, node=sr.node.name, gpu_uuid=next(iter(uuids)) if len(uuids) == 1 else None,
                                   pods_on_gpu=len(sr.tenants) + sr.placeholders)
        warnings = []
        if refused:
            st.update(status="absent", reason=f"refused: {refused}", refused=True)
            warnings.append(f"DCGM telemetry refused: {refused}")
        if flag:
            st["attribution"] = flag
            warnings.append(f"DCGM {flag}")
        if refused or flag:
            with contextlib.suppress(Exception):
                write_status(path, st)
        return warnings

    def _start_telemetry(self, log_dir: Path, out: dict[str, Any]) -> Any:
        """Scrape dcgm-exporter in the background while the scenario runs; None when off or broken."""
        if not self.dcgm_url:
            out["telemetry"] = {"status": "absent", "reason": "no dcgm_url configured (KTS_DCGM_URL)"}
            return None
        try:
            return DcgmScraper(self.dcgm_url, log_dir / "telemetry.parquet",
                               interval_ms=self.dcgm_interval_ms).start()
        except Exception as exc:  # noqa: BLE001 - telemetry must never stop the experiment
            text = str(exc).splitlines()[0][:300] if str(exc) else type(exc).__name__
            out["telemetry"] = {"status": "absent", "reason": f"DCGM scraper did not start: {text}",
                                "source": "dcgm", "url": self.dcgm_url}
            return None

    @staticmethod
    def _stop_telemetry(scraper: Any, out: dict[str, Any]) -> None:
        if scraper is None:
            return
        try:
            out["telemetry"] = scraper.stop()
        except Exception as exc:  # noqa: BLE001
            text = str(exc).splitlines()[0][:300] if str(exc) else type(exc).__name__
            out["telemetry"] = {"status": "absent", "reason": f"DCGM scraper failed: {text}", "source": "dcgm",
                                "url": scraper.url}
