"""Helpers for the Kubernetes backend tests: a fake control plane on top of kmock's emulator.

kmock stores objects and serves list/watch, but runs no controllers, ignores label and field selectors
and knows no resourceVersion. ``ClusterEmulator`` adds what the API server itself does (uid,
creationTimestamp, resourceVersion with optimistic concurrency on writes, delete preconditions,
foreground deletion through a finalizer) plus injectable faults (dropped watch streams). ``FakeCluster``
plays the controllers, always through the HTTP API so that watches see every change:

* the Job controller: Indexed Jobs (one pod per completion index, ``JOB_COMPLETION_INDEX`` from the
  index label), ``startTime``, ``FailureTarget`` then ``Failed`` (``BackoffLimitExceeded``,
  ``DeadlineExceeded``) with the remaining pods deleted, ``SuccessCriteriaMet`` then ``Complete``,
  ``FailedCreate`` events when pod creation is refused (Pod Security, quota);
* the scheduler (binding sets ``PodScheduled`` with the API server's time), the kubelet with a fake
  worker that prints what ``workers/kts_worker.py`` prints (META with its barrier times, lead-in
  padding, timed iterations, padding until SIGTERM or its own limit), logs served and followed;
* Kueue (one Workload per Job: ``QuotaReserved``/``Admitted``, "LocalQueue ... doesn't exist" when
  the queue is missing, ``Finished``), the garbage collector, a node that can be lost.

Every timestamp comes from one ``FakeClock`` that moves one second per controller tick. The clocks are
independent: each node's (container runtime, worker) can be skewed against the API server's
(``node_skew_s``), and the client's too (``SkewedClock``). Image pulls can take minutes per tenant
(``pull_s_of``), a ConfigMap update reaches a pod's volume after the kubelet's refresh
(``configmap_sync_s``), GPU pods of other namespaces run on the nodes (``add_foreign_pod``), a node's
hostname label may differ from its name, Kueue can refuse a gang over its capacity and preempt an
admitted one (``kueue_capacity``, ``preempt``), and the kubelet rotates a container's log (``rotate``).

What a real cluster did that the kit missed (issue #32), modelled here:

* the go of the start barrier is a pod annotation read through a downwardAPI volume: the kubelet syncs the
  pod on the annotation change, and the file shows it after ``go_delay`` (``kubelet_go_delay``: up to the sum of the
  kubelet's own periods on that path, with a margin; tests may force a late one);
* the scheduler counts GPU replicas (the kit's placeholders fill the GPU) and honours taints; a stranger pod
  asks for a replica mid-run (``schedule_stranger``) and lands only where one is free;
* RBAC is enforced (``rbac``: the rules of manifests/base, ``resourceNames`` included, 403 with the API
  server's message otherwise);
* a log rotation drops bytes the client had not read (mode ``rotate-drop``);
* Kueue defaults an unlabelled Job into a LocalQueue named ``default`` (``default_local_queue``), a flavor
  puts its node labels on the pods (``flavor_node_labels``), re-admission sets ``Evicted`` back to False
  (``readmit_after_s``) keeping the count in ``schedulingStats.evictions``, and it reports
  ``NoMatchingFlavor`` (``kueue_inadmissible``);
* the Job controller applies ``podFailurePolicy`` (``DisruptionTarget``) and ``successPolicy``; a pod can be
  disrupted (``disrupt``: a preemption or a drain).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import secrets
import threading
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, TypeVar

import aiohttp.web
import attrs
import kmock
from kmock._internal import enums
from kts_harness import STOP_KEY, stop_exit_code

from kts_helpers.run.runs import Run, create_run
from kts_helpers.run.spec import ExperimentParams, ExperimentSpec, resolve

NS = "kts"
T = TypeVar("T")
BASE = datetime(2025, 1, 1, 12, 0, 0, tzinfo=timezone.utc)
INDEX = "batch.kubernetes.io/job-completion-index"
INSUFFICIENT = ("0/1 nodes are available: 1 Insufficient nvidia.com/gpu. preemption: 0/1 nodes are available: "
                "1 No preemption victims found for incoming pod.")
POD_SECURITY = ('pods "{pod}" is forbidden: violates PodSecurity "restricted:latest": allowPrivilegeEscalation != '
                'false (container "worker" must set securityContext.allowPrivilegeEscalation=false)')
QUOTA = ('pods "{pod}" is forbidden: exceeded quota: gpu-quota, requested: nvidia.com/gpu=1, used: '
         'nvidia.com/gpu=4, limited: nvidia.com/gpu=4')
ANN_START = "kts/start-at"
GPU_KEYS = ("nvidia.com/gpu", "nvidia.com/gpu.shared")
RBAC_FILE = Path(__file__).resolve().parents[1] / "manifests" / "base" / "rbac.yaml"
RBAC_OPT_IN = Path(__file__).resolve().parents[1] / "manifests" / "components" / "cluster-pod-list" / "rbac.yaml"
RBAC_PLUGIN_CONFIG = Path(__file__).resolve().parents[1] / "manifests" / "components" / "device-plugin-config" / \
    "rbac.yaml"
PRIORITY_FILE = Path(__file__).resolve().parents[1] / "manifests" / "base" / "priorityclass.yaml"
VERB = {"POST": "create", "PUT": "update", "PATCH": "patch"}
KUBELET_FINALIZER = "kts.test/kubelet"  # the emulator's stand-in for a terminating pod's kubelet


# How long after the API server stores a pod's new annotation its downwardAPI file shows it: not a model fitted to
# anything, but the kubelet's own periods, each taken whole, plus a margin. The annotation change reaches the kubelet
# by its pod watch (config source -> HandlePodUpdates -> the pod worker's syncPod); syncPod -> WaitForAttachAndMount,
# which polls every podAttachAndMountRetryInterval = 300 ms (pkg/kubelet/volumemanager/volume_manager.go), while the
# desired-state populator (desiredStateOfWorldPopulatorLoopSleepPeriod = 100 ms) and the reconciler
# (reconcilerLoopSleepPeriod = 100 ms) rewrite the volume's files. A pod worker busy with a sync finishes it first:
# taken as the kubelet's housekeeping period, 2 s (pkg/kubelet/kubelet.go housekeepingPeriod), and the watch's
# delivery as 1 s. The emulator draws uniformly up to that sum times ``GO_MARGIN``; the kit's default start delay
# (10 s) must exceed it. If the update event were lost, the documented fallback is the periodic sync, up to
# ``syncFrequency`` (1 m by default, KubeletConfiguration) later: the kit then sees the late start live and fails
# the scenario (test_k8s_guard's forced 70 s go).
KUBELET_PERIODS_S = {"podAttachAndMountRetryInterval": 0.3, "desiredStateOfWorldPopulatorLoopSleepPeriod": 0.1,
                     "reconcilerLoopSleepPeriod": 0.1, "housekeepingPeriod (an in-flight sync)": 2.0,
                     "watch delivery": 1.0}
GO_MARGIN = 1.5
GO_BOUND_S = sum(KUBELET_PERIODS_S.values()) * GO_MARGIN  # 5.25 s
SYNC_FREQUENCY_S = 60.0  # KubeletConfiguration syncFrequency default: the fallback when an update is missed


def shipped_priority_classes() -> dict[str, tuple[int, str]]:
    """The PriorityClasses manifests/base applies: name -> (value, preemptionPolicy)."""
    import yaml

    return {d["metadata"]["name"]: (int(d["value"]), str(d.get("preemptionPolicy") or "PreemptLowerPriority"))
            for d in yaml.safe_load_all(PRIORITY_FILE.read_text()) if d and d["kind"] == "PriorityClass"}


def kubelet_go_delay(rng: random.Random) -> float:
    """A go delay anywhere inside the kubelet's documented event path with its margin (``GO_BOUND_S``)."""
    return rng.uniform(0.05, GO_BOUND_S)


def configmap_go_delay(rng: random.Random, *, sync_s: float = 60.0, ttl_s: float = 0.0) -> float:
    """The old mechanism's delay, for comparison: a ConfigMap volume is refreshed only at the pod's periodic
    sync (``syncFrequency`` x (1 + up to 0.5 jitter) after the last one: a uniform phase), and with the Cache
    strategy a cached object younger than its TTL is served stale (15-600 s on clusters above 100 nodes)."""
    period = sync_s * (1 + rng.uniform(0.0, 0.5))
    return rng.uniform(0.0, period) + rng.uniform(0.0, ttl_s)


def rbac_rules(*paths: Path) -> dict[str, set[tuple[str, ...]]]:
    """(API group, resource, verb) granted by the Roles and by the ClusterRoles of manifests ``paths``: "Role" holds
    the rules of Roles in the kit's namespace, "Role:<namespace>" those of Roles elsewhere (the device plugin's
    ConfigMap reader). A rule with ``resourceNames`` grants (API group, resource, verb, name) for each name instead:
    only a request naming one of them matches it (``rbac_allows``)."""
    import yaml

    out: dict[str, set[tuple[str, ...]]] = {"Role": set(), "ClusterRole": set()}
    for path in paths:
        for d in yaml.safe_load_all(path.read_text()):
            if d and d["kind"] in ("Role", "ClusterRole"):
                ns = (d.get("metadata") or {}).get("namespace") or NS
                key = d["kind"] if d["kind"] == "ClusterRole" or ns == NS else f"Role:{ns}"
                out.setdefault(key, set())
                out[key] |= {(g, r, v, *((n,) if n is not None else ())) for rule in d["rules"]
                             for g in rule["apiGroups"] for r in rule["resources"] for v in rule["verbs"]
                             for n in (rule.get("resourceNames") or [None])}
    return out


def rbac_allows(granted: set[tuple[str, ...]], key: tuple[str, str, str], name: str | None) -> bool:
    """Whether ``granted`` (``rbac_rules``) allows the request (API group, resource, verb) ``key`` on object ``name``,
    as kubernetes plugin/pkg/auth/authorizer/rbac/rbac.go ``RuleAllows`` decides it: verb, group and resource match,
    and ``ResourceNameMatches`` (pkg/apis/rbac/v1/evaluation_helpers.go): a rule without resourceNames matches any
    name, a rule with them only a request whose name is one of them. A list, watch, create or deletecollection
    carries no name (a list or watch takes one only from a ``metadata.name`` field selector: ``request_name``), so
    a rule with resourceNames never allows it."""
    return key in granted or (bool(name) and (*key, name) in granted)


def request_name(request: Any) -> str | None:
    """The object name RBAC sees (staging/src/k8s.io/apiserver/pkg/endpoints/request/requestinfo.go
    ``NewRequestInfo``): the URL's name, or for a list or watch an exact ``metadata.name`` in its field selector."""
    if request.name:
        return str(request.name)
    if request.method != "GET":
        return None
    for term in str(request.params.get("fieldSelector", "") or "").split(","):
        field, op, value = term.partition("==") if "==" in term else term.partition("=")
        if op and not field.endswith("!") and field.strip() == "metadata.name" and value.strip():
            return value.strip()
    return None


def request_verb(request: Any) -> str:
    """The RBAC verb of a request, as the API server derives it."""
    if request.method == "GET":
        if str(request.params.get("watch", "")).lower() in ("true", "1"):
            return "watch"
        return "get" if request.name else "list"
    if request.method == "DELETE":
        return "delete" if request.name else "deletecollection"
    return VERB[request.method]


def ts(seconds: float) -> str:
    """An API timestamp: RFC 3339, whole seconds (truncated, as the API server stores them)."""
    return datetime.fromtimestamp(int(seconds // 1), tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


class SkewedClock:
    """Another clock reading of the same time: ``base`` plus ``skew_s`` (a client whose clock is off)."""

    def __init__(self, base: FakeClock, skew_s: float) -> None:
        self.base, self.skew_s = base, skew_s

    def now_ns(self) -> int:
        return self.base.now_ns() + int(self.skew_s * 1e9)

    def monotonic(self) -> float:
        return self.base.monotonic()


class FakeClock:
    """The cluster's (and the backend's) time: epoch seconds that the controllers move, one step per tick.

    ``realtime=True`` follows the real clock instead, for backends that cannot be handed this one (the
    papermill kernels of the notebook tests build theirs from the environment).
    """

    def __init__(self, start: datetime = BASE, realtime: bool = False) -> None:
        self.realtime = realtime
        self._t = start.timestamp()

    @property
    def t(self) -> float:
        return time.time() if self.realtime else self._t

    def now_ns(self) -> int:
        return time.time_ns() if self.realtime else int(round(self._t * 1e9))

    def monotonic(self) -> float:
        return time.monotonic() if self.realtime else self._t

    def advance(self, seconds: float) -> None:
        if not self.realtime:
            self._t += seconds


def gpu_node(name: str, allocatable: int = 4, *, replicas: int | None = 4, strategy: str | None = "time-slicing",
             resource: str = "nvidia.com/gpu", extra_labels: dict[str, str] | None = None, count: int = 1,
             hostname: str | None = None) -> dict[str, Any]:
    """A GPU node; ``hostname``: its ``kubernetes.io/hostname`` label when that differs from its name."""
    labels = {"kubernetes.io/hostname": hostname or name, "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
              "nvidia.com/gpu.count": str(count), **(extra_labels or {})}
    if replicas is not None:
        labels["nvidia.com/gpu.replicas"] = str(replicas)
    if strategy is not None:
        labels["nvidia.com/gpu.sharing-strategy"] = strategy
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels},
            "status": {"allocatable": {"cpu": "16", "memory": "64Gi", resource: str(allocatable)},
                       "capacity": {resource: str(allocatable)},
                       "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                                       "message": "kubelet is posting ready status"}]}}


# ------------------------------------------------------------------------------------------ the API server

@attrs.define(kw_only=True)
class ClusterEmulator(kmock.KubernetesEmulator):
    """kmock's emulator with what the API server adds: identity, versions, conflicts, foreground deletion."""

    clock: FakeClock = attrs.field(factory=FakeClock)
    drop_watches: int = 0  # the next N pod watches end right after their initial events (a dropped stream)
    watches_dropped: int = 0
    log: list[Any] = attrs.field(factory=list)  # every request, for the tests' assertions
    # RBAC for the kit's requests (not kmock's, which play the controllers): None lets everything through
    rbac: dict[str, set[tuple[str, ...]]] | None = None
    # the namespace the Role is bound in (manifests/base: kts); a Role's rules hold there only, as the API server's
    # RBAC authorizer visits only the RoleBindings of the request's namespace (kubernetes
    # plugin/pkg/auth/authorizer/rbac/rbac.go, RBACAuthorizer.Authorize -> VisitRulesFor(user, namespace))
    rbac_namespace: str = NS
    forbidden: list[tuple[str, str, str, str | None]] = attrs.field(factory=list)  # what RBAC refused
    default_local_queue: bool = False  # Kueue's LocalQueueDefaulting with a LocalQueue named "default"
    # PriorityClass name -> value (those of manifests/base are there, as if it was applied); the Priority admission
    # plugin (plugin/pkg/admission/priority/admission.go, admitPod) sets a new pod's spec.priority and
    # spec.preemptionPolicy from its priorityClassName (0 without one and without a global default) and refuses a
    # pod naming a class that does not exist ("no PriorityClass with name %v was found", Forbidden)
    priority_classes: dict[str, int] = attrs.field(factory=lambda: {n: v for n, (v, _) in
                                                                    shipped_priority_classes().items()})
    preemption_policies: dict[str, str] = attrs.field(factory=lambda: {n: p for n, (_, p) in
                                                                       shipped_priority_classes().items()})
    # a pod DELETE from the kit is graceful, as the API server's is: the pod gets deletionTimestamp and stays until
    # the kubelet has stopped its container (FakeCluster._kill, on its next tick); the controllers' own DELETE (kmock's
    # user agent) is the kubelet's final removal
    graceful_deletes: list[str] = attrs.field(factory=list)
    # manifests/components/narrow-pod-patch applied: its ValidatingAdmissionPolicy, mirrored (``pod_patch_denied``)
    pod_patch_policy: bool = False
    _rv: int = 0

    def _next_rv(self) -> str:
        self._rv += 1
        return str(self._rv)

    def stored(self, request: Any) -> dict[str, Any] | None:
        key = (request.resource, request.namespace, request.name)
        if key in self.objects and not self.objects[key].deleted:
            return self.objects[key].raw
        return None

    async def _handle(self, request: Any) -> aiohttp.web.StreamResponse:
        # kmock finds a request's reaction by scanning every request it has kept, which makes a long test
        # quadratic: keep only the one being served there, and the whole record in ``log``.
        self.log.append(request)
        del self._requests[:-1]
        if self.rbac is not None and request.resource is not None and not str(
                request.headers.get("User-Agent", "")).startswith("kmock/"):
            resource = request.resource.plural + (f"/{request.subresource}" if request.subresource else "")
            key = (request.resource.group, resource, request_verb(request))
            name = request_name(request)
            allowed = rbac_allows(self.rbac["ClusterRole"], key, name) or (
                request.namespace == self.rbac_namespace and rbac_allows(self.rbac["Role"], key, name)) or (
                rbac_allows(self.rbac.get(f"Role:{request.namespace}", set()), key, name))
            if not allowed:
                self.forbidden.append((*key, request.namespace))
                where = f'in the namespace "{request.namespace}"' if request.namespace else "at the cluster scope"
                # apimachinery errors.NewForbidden: 'resource "name" is forbidden: ...' when the request names one
                named = f' "{name}"' if name else ""
                return await self._render_error(kmock.KubernetesError(
                    403, "Forbidden", f'{resource}{named} is forbidden: User "system:serviceaccount:{NS}:kts-runner" '
                                      f'cannot {key[2]} resource "{request.resource.plural}" in API group "{key[0]}" '
                                      f'{where}'))
        if request.action == enums.action.LIST and str(request.params.get("watch", "")).lower() in ("true", "1"):
            # the Python client sends watch=True; the API server parses it as Go's ParseBool does, kmock not
            object.__setattr__(request, "action", enums.action.WATCH)
        action, data = request.action, request.data
        if request.resource is not None and request.method == enums.method.PUT and request.name:
            return await self._replace(request)  # kmock serves no PUT: a replace, with optimistic concurrency
        if (self.pod_patch_policy and request.method == enums.method.PATCH and request.resource is not None
                and request.resource.plural == "pods" and request.name and isinstance(request.data, dict)
                and not str(request.headers.get("User-Agent", "")).startswith("kmock/")):
            current = self.stored(request)
            denied = pod_patch_denied(current, merge_patch(current, request.data)) if current is not None else ""
            if denied:
                return await self._render_error(kmock.KubernetesError(
                    403, "Forbidden", f"ValidatingAdmissionPolicy 'kts-runner-pod-patch' with binding "
                                      f"'kts-runner-pod-patch' denied request: {denied}"))
        if request.resource is not None and action is not None:
            if action == enums.action.CREATE and isinstance(data, dict):
                meta = data.setdefault("metadata", {})
                if (self.default_local_queue and request.resource.plural == "jobs"
                        and "kueue.x-k8s.io/queue-name" not in (meta.get("labels") or {})):
                    # Kueue's webhook: an unlabelled Job goes into the namespace's LocalQueue "default", suspended
                    meta.setdefault("labels", {})["kueue.x-k8s.io/queue-name"] = "default"
                    data.setdefault("spec", {})["suspend"] = True
                meta.setdefault("uid", str(uuid.uuid4()))
                meta["creationTimestamp"] = ts(self.clock.t)
                meta["resourceVersion"] = self._next_rv()
                if request.resource.plural == "pods":  # the API server sets the QoS class on create
                    data.setdefault("status", {})["qosClass"] = qos_class(data.get("spec") or {})
                    pod_spec = data.setdefault("spec", {})
                    cls = str(pod_spec.get("priorityClassName") or "")
                    if cls and cls not in self.priority_classes:
                        return await self._render_error(kmock.KubernetesError(
                            403, "Forbidden", f'pods "{meta.get("name")}" is forbidden: no PriorityClass with name '
                                              f'{cls} was found'))
                    pod_spec["priority"] = self.priority_classes.get(cls, 0)
                    pod_spec["preemptionPolicy"] = self.preemption_policies.get(cls, "PreemptLowerPriority")
            elif action == enums.action.UPDATE and request.name and isinstance(data, dict):
                data.setdefault("metadata", {})["resourceVersion"] = self._next_rv()
            elif (action == enums.action.DELETE and request.name and request.resource.plural == "pods"
                  and not str(request.headers.get("User-Agent", "")).startswith("kmock/")
                  and self.stored(request) is not None):
                key = (request.resource, request.namespace, request.name)
                if not self.objects[key].raw["metadata"].get("deletionTimestamp"):
                    self.objects[key].patch({"metadata": {"deletionTimestamp": ts(self.clock.t),
                                                          "finalizers": [KUBELET_FINALIZER]}})
                    self.graceful_deletes.append(request.name)
                return aiohttp.web.json_response(self.objects[key].raw)
            elif action == enums.action.DELETE and request.name:
                current = self.stored(request)
                body = data if isinstance(data, dict) else {}
                pre = body.get("preconditions") or {}
                if current is not None and any(pre.get(k) and pre[k] != current["metadata"].get(k)
                                               for k in ("resourceVersion", "uid")):
                    return await self._render_error(kmock.KubernetesError(
                        409, "Conflict", f"Precondition failed: {pre}"))
                policy = request.params.get("propagationPolicy") or body.get("propagationPolicy")
                if current is not None and policy == "Foreground" and request.resource.plural == "jobs":
                    # the garbage collector deletes the dependents first, then the Job (FakeCluster._gc)
                    self.objects[(request.resource, request.namespace, request.name)].patch(
                        {"metadata": {"finalizers": ["foregroundDeletion"]}})
            elif (action == enums.action.WATCH and self.drop_watches > 0 and request.resource.plural == "pods"
                  and request._raw_request is not None):
                self.drop_watches -= 1
                self.watches_dropped += 1
                resp = aiohttp.web.StreamResponse()
                await resp.prepare(request._raw_request)
                for key, obj in list(self.objects.items()):
                    if key[0] == request.resource and not obj.deleted:
                        await resp.write(json.dumps({"type": "ADDED", "object": obj.raw}).encode() + b"\n")
                await resp.write_eof()  # the connection ends: a proxy cut it, the API server restarted ...
                return resp
        return await super()._handle(request)


    async def _replace(self, request: Any) -> aiohttp.web.StreamResponse:
        data = request.data if isinstance(request.data, dict) else {}
        async with self._lock:
            current = self.stored(request)
            if current is None:
                return await self._render_error(kmock.KubernetesError(
                    404, "NotFound", f'{request.resource.plural} "{request.name}" not found'))
            sent = (data.get("metadata") or {}).get("resourceVersion")
            if sent and sent != current["metadata"].get("resourceVersion"):
                return await self._render_error(kmock.KubernetesError(
                    409, "Conflict", f'Operation cannot be fulfilled on {request.resource.plural} "{request.name}": '
                                     "the object has been modified; please apply your changes to the latest "
                                     "version and try again"))
            new = json.loads(json.dumps(data))
            meta = new.setdefault("metadata", {})
            for key in ("uid", "creationTimestamp"):
                meta[key] = current["metadata"].get(key)
            meta["resourceVersion"] = self._next_rv()
            self.objects[(request.resource, request.namespace, request.name)].create(new)
            await self._buses[request.resource].put({"type": "MODIFIED", "object": new})
        return aiohttp.web.json_response(new)


# ------------------------------------------------------------------------------------------ a fake worker

@dataclass
class FakeWorker:
    """What one pod's worker prints, on its node's clock: META after the barrier, lead-in padding, timed
    iterations, then (shared scenarios) padding until SIGTERM or its own padding limit."""

    workload: str
    tenant: str
    iterations: int
    start_at: float  # seconds (0: no barrier)
    reached: float  # when it reached the barrier (start-up done)
    lead_in_s: float
    pad: bool
    pad_limit_s: float
    period_s: float
    gpu_uuid: str
    hang: bool = False
    mps_client: bool = False  # the device plugin's MPS daemon serves it (its CUDA_MPS_PIPE_DIRECTORY is set)
    go_file: bool = False  # the cluster barrier: a ready line, then the start from the go ConfigMap
    go_seen: float = 0.0  # when the go reached this pod (its node's clock)
    said: float = 0.0  # the next ready line is due at this node-clock time (0: at ``reached``)
    lines: list[str] = field(default_factory=list)
    i: int = 0  # the next line's number
    # the device's NVML reading at its timed part's end (workers/kts_gpumem.py), in a KTS_END; None: no KTS_END
    memory: Callable[[], dict] | None = None
    ended: bool = False
    asked: bool = False  # its go file showed the kit's "stop" (it then ends its padding with 0)

    @property
    def loop_start(self) -> float:
        return max(self.start_at, self.reached, self.go_seen) + 0.001

    @property
    def waiting_for_go(self) -> bool:
        return self.go_file and not self.start_at

    def meta(self) -> str:
        ns = lambda s: int(round(s * 1e9))  # noqa: E731
        meta = {"workload": self.workload, "tenant": self.tenant, "iterations": self.iterations, "device": "cuda",
                "device_name": "fake", "start_at_ns": ns(self.start_at) if self.start_at else 0,
                "barrier_reached_ns": ns(self.reached), "loop_start_ns": ns(self.loop_start),
                "flops_per_op": 1.0e9, "bytes_per_op": 1.0e6, "gpu_uuid": self.gpu_uuid, "phases_per_iteration": 1,
                "lead_in_s": self.lead_in_s, "pad": self.pad, "mps_client": self.mps_client}
        return f"KTS_META,v2,{json.dumps(meta, separators=(',', ':'))}"

    def _line(self) -> tuple[str, float]:
        """The next line and when it ends (node-clock seconds)."""
        start = self.loop_start + self.i * self.period_s
        lead = int(self.lead_in_s / self.period_s + 0.999999) if self.lead_in_s > 0 else 0
        timed_index = self.i - lead
        if timed_index < 0:
            phase, index = "pad", self.i
        elif timed_index < self.iterations:
            phase, index = "op", timed_index
        else:
            phase, index = "pad", lead + timed_index - self.iterations
        ms = 5.0 + 0.5 * (self.i % 3)
        s = int(round(start * 1e9))
        return (f"KTS_APP,v2,{self.workload},{self.tenant},{index},{phase},{s},{s},{s + int(ms * 1e6)},{ms},{ms}",
                start + ms / 1e3)

    def timed_end(self) -> float:
        lead = int(self.lead_in_s / self.period_s + 0.999999) if self.lead_in_s > 0 else 0
        return self.loop_start + (lead + self.iterations - 1) * self.period_s + 0.006

    def print_until(self, now: float) -> None:
        """Print every line that has ended by ``now``."""
        t = self.said or self.reached
        while self.go_file and t <= now and (not self.go_seen or t < self.go_seen):  # one a second while it waits
            self.lines.append(f"kts_worker: ready tenant={self.tenant} clock_ns={int(round(t * 1e9))}")
            t = self.said = t + 1.0
        if self.waiting_for_go or now < self.loop_start:
            return
        if not any(ln.startswith("KTS_META,") for ln in self.lines):
            self.lines.append(self.meta())
        lead = int(self.lead_in_s / self.period_s + 0.999999) if self.lead_in_s > 0 else 0
        while True:
            if self.hang and self.i >= lead + 1:
                return  # stuck in its second timed iteration
            if self.memory is not None and not self.ended and self.i >= lead + self.iterations:
                self.ended = True  # the timed part ended: the block's KTS_END, with the device's reading
                end = {"timed": self.iterations, "gpu_memory": self.memory()}
                self.lines.append(f"KTS_END,v2,{json.dumps(end, separators=(',', ':'))}")
            if not self.pad and self.i >= lead + self.iterations:
                return
            if self.pad and self.i >= lead + self.iterations and now - self.timed_end() > self.pad_limit_s:
                return
            line, end = self._line()
            if end > now:
                return
            self.lines.append(line)
            self.i += 1

    def timed_lines(self) -> int:
        return sum(1 for ln in self.lines if ln.startswith("KTS_APP,"))

    def done_timed(self) -> bool:
        lead = int(self.lead_in_s / self.period_s + 0.999999) if self.lead_in_s > 0 else 0
        return self.i >= lead + self.iterations

    def text(self) -> bytes:
        return ("\n".join(self.lines) + "\n").encode() if self.lines else b""


# ------------------------------------------------------------------------------------------ the controllers

class FakeCluster:
    """Plays the controllers of a one-namespace cluster on top of a ``ClusterEmulator``."""

    def __init__(self, km: Any, namespace: str = NS, *, kueue_version: str | None = "v1beta2"):
        self.km = km
        self.clock: FakeClock = km.clock
        self.ns = namespace
        # tenant -> ok | unschedulable | imagepull | oom | exit1 | hang | othergpu (reports another GPU UUID)
        # | slow (10x longer between iterations) | late (the go reaches it 3 s after its start)
        # | nouuid (prints no gpu_uuid) | rotate (the kubelet rotates its log mid-run, the stream drops)
        self.behaviour: dict[str, str] = {}
        self.tick_s = 0.02  # real seconds between controller ticks
        self.step_s = 1.0  # fake seconds per tick
        self.log_iterations = 3  # timed lines a fake worker prints
        self.placement_delay_s: dict[str, int] = {}  # tenant -> extra seconds before PodScheduled
        fast = self.clock.realtime  # real seconds pass slowly: shorter steps
        self.seen_s = 0.1 if fast else 1.0  # a controller sees a new object this long after its creation
        self.pull_s = 0.3 if fast else 2.0  # scheduled -> container started (image pull, container creation)
        self.pull_s_of: dict[str, float] = {}  # tenant -> its own image pull (60-300 s on a real first run)
        self.configmap_sync_s = 0.2 if fast else 3.0  # a ConfigMap update -> the pod's volume shows it
        self._go_written: dict[str, tuple[str, float]] = {}  # go ConfigMap -> (its text, when the API had it)
        self.rotated: dict[str, int] = {}  # pod -> bytes of its log in rotated files (the API serves the rest)
        self.cut_follows: set[str] = set()  # pods whose followed log streams drop once
        self.foreign_pods: dict[tuple[str, str], float | None] = {}  # (namespace, pod) -> when it ends
        self.init_s = 0.3 if fast else 1.0  # container started -> barrier reached (torch import, CUDA init, warm-up)
        self.deadline_cap_s: float | None = None  # a policy caps activeDeadlineSeconds (as some clusters do)
        self.node_skew_s: dict[str, float] = {}  # node -> its clock minus the API server's
        self.lost_nodes: set[str] = set()
        self.create_error = ""  # the Job controller's pod creations are refused with this (POD_SECURITY, QUOTA)
        self.create_errors: dict[str, str] = {}  # "tenants" | "placeholders" | "probe" -> that Job's refusal only
        # extra seconds before the Job controller sees a Job of this kind: which Job's pods exist (and are
        # scheduled) first is not ordered upstream (two Jobs, one controller syncing each on its own)
        self.job_seen_s: dict[str, float] = {}
        self.kueue_quota: int | None = None  # the ClusterQueue's GPU quota, counted over every admitted Workload
        self.terminating: dict[str, tuple[float, bool]] = {}  # pod -> (when its grace period ends, delete then)
        self.sigterm_at: dict[str, float] = {}  # pod -> when the kubelet sent it SIGTERM (its deletion)
        self.exited_at: dict[str, float] = {}  # pod -> when its container ended
        self.exit_codes: dict[str, int] = {}  # pod -> its container's exit code
        self.local_queues: set[str] | None = None  # None: any queue exists; else only these LocalQueues do
        self.kueue_hold = False  # quota is exhausted: Workloads stay pending
        self.kueue_capacity: int | None = None  # the queue's whole GPU quota: a bigger gang never fits
        self.preempted: dict[str, float] = {}  # Job -> when Kueue evicted it (re-admitted 30 s later)
        self.admit_after = 2  # seconds a queued Job waits before Kueue admits it
        self.foreign_duration_s: dict[str, float | None] = {}  # foreign Job -> how long its pod runs (None: ever)
        self.logs: dict[str, bytes] = {}  # pod name -> what its container printed so far
        self.workers: dict[str, FakeWorker] = {}
        self.pod_job: dict[str, str] = {}
        self.terminated: set[str] = set()
        self.max_runs_at_once = 0  # distinct kts runs with running pods at the same time (anywhere)
        self.max_runs_per_node = 0  # ... on one node: must never exceed 1
        self.kueue_version = kueue_version
        self.rng = random.Random(32)
        # the go's delay: the kubelet's bound (fake seconds); real seconds pass slowly, so compressed like the rest
        self.go_delay: Callable[[random.Random], float] = (lambda rng: 0.1 * kubelet_go_delay(rng)) if fast else \
            kubelet_go_delay
        self.go_delays: dict[str, float] = {}  # pod -> the delay its go took (drawn once per pod)
        self.go_delay_of: dict[str, float] = {}  # tenant -> a forced go delay (a kubelet that is very late)
        self.log_lag_s: dict[str, float] = {}  # tenant -> its log lines reach a follower this much later
        self._log_history: dict[str, list[tuple[float, int]]] = {}  # pod -> (when, log length then)
        self.holder_gpu = "GPU-fake-0"  # the GPU the placeholders' replicas are on
        self._go_seen_api: dict[str, tuple[str, float]] = {}  # pod -> (annotation, when the API had it)
        self._go_shown: dict[str, str] = {}  # pod -> what its go file shows
        self.disrupted_holders = 0  # placeholders to preempt (DisruptionTarget, SIGTERM), the next that run
        self.strangers: dict[str, str] = {}  # stranger pod -> its namespace (placed by the scheduler)
        self.unfit = INSUFFICIENT  # the scheduler's last reason for leaving a pod Pending
        self.stranger_pending_at: dict[str, float] = {}  # stranger -> when the scheduler first found no room
        self.stranger_bound_at: dict[str, float] = {}  # stranger -> when the scheduler placed it
        self.stalled: dict[str, int] = {}  # pod -> followed streams deliver no byte past this (rotate-drop)
        self._stall_lines: dict[str, int] = {}
        self.flavor_node_labels: dict[str, str] = {}  # Kueue puts these on the admitted Job's pods
        self.readmit_after_s = 30.0  # an evicted Workload is admitted again after this
        self.kueue_inadmissible: tuple[str, str] | None = None  # (reason, message) of QuotaReserved=False
        self.disrupted: dict[str, tuple[str, str]] = {}  # tenant -> (DisruptionTarget reason, message), due
        self.preempted_pods: list[str] = []  # pods the scheduler preempted (``_preempt``)
        # NVML as a worker sees it (workers/kts_gpumem.py, reading tests/fake_nvml.py's driver): on, each tenant's
        # KTS_END carries the device's reading: the driver's reserve, one compute process per running kts worker (its
        # 2 GiB reserved and a 400 MiB context), the MPS server on an MPS node, plus ``gpu_strangers`` (host PID ->
        # bytes: another pod's or the host's context, invisible to the API)
        self.nvml = False
        self.gpu_strangers: dict[int, int] = {}
        self.gpus: dict[str, Any] = {}  # GPU UUID -> fake_nvml.FakeGpu: what its driver reserved and who holds the rest
        self.host_pids: dict[str, int] = {}  # pod -> its worker's host PID
        self.mps_server_pid = 3999
        self._task: asyncio.Task[None] | None = None
        self.stopping = False
        resources = [("v1/pods", "Pod", True), ("batch/v1/jobs", "Job", True), ("v1/nodes", "Node", False),
                     ("v1/configmaps", "ConfigMap", True),
                     ("v1/events", "Event", True), ("coordination.k8s.io/v1/leases", "Lease", True)]
        if kueue_version:  # None: a cluster without Kueue
            resources.append((f"kueue.x-k8s.io/{kueue_version}/workloads", "Workload", True))
        for res, kind, namespaced in resources:
            km.resources[res] = kmock.ResourceInfo(kind=kind, namespaced=namespaced,
                                                   verbs={"get", "list", "watch", "create", "delete", "patch",
                                                          "update"})
        km["get", kmock.subresource("log")] << self._serve_log

    # ------------------------------------------------------------------ setup helpers
    def add_node(self, node: dict[str, Any]) -> None:
        self.km.objects["v1/nodes", None, node["metadata"]["name"]] = node

    def add_configmap(self, namespace: str, name: str, data: dict[str, str]) -> None:
        """A ConfigMap of another namespace (the device plugin's config)."""
        self.km.objects["v1/configmaps", namespace, name] = {
            "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": namespace},
            "data": dict(data)}

    def add_job(self, name: str, labels: dict[str, str], annotations: dict[str, str] | None = None,
                age_s: float = 0.0) -> None:
        """A finished Job that is already there (someone else's, or an old one of the kit)."""
        self.km.objects["batch/v1/jobs", self.ns, name] = {
            "apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "namespace": self.ns, "labels": labels, "annotations": annotations or {},
                         "uid": f"uid-{name}", "creationTimestamp": ts(self.clock.t - age_s)},
            "spec": {"template": {"metadata": {"labels": labels}, "spec": {"containers": []}}},
            "status": {"conditions": [{"type": "Complete", "status": "True"}]}}

    async def add_running_job(self, name: str, labels: dict[str, str], node: str, *,
                              run_for_s: float | None = None) -> None:
        """Another GPU Job on ``node`` (another user's, or a kts run whose client died): its pod runs
        ``run_for_s`` seconds (None: until deleted)."""
        self.foreign_duration_s[name] = run_for_s
        await self._http("post", f"/apis/batch/v1/namespaces/{self.ns}/jobs", {
            "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name, "namespace": self.ns, "labels": labels},
            "spec": {"completions": 1, "parallelism": 1, "backoffLimit": 0, "template": {
                "metadata": {"labels": labels},
                "spec": {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                             "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In",
                                                                     "values": [node]}]}]}}},
                         "restartPolicy": "Never",
                         "containers": [{"name": "main", "image": "someone/else:1",
                                         "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}}})

    async def add_foreign_pod(self, namespace: str, name: str, node: str, *, run_for_s: float | None = None,
                              gpu: bool = True, image: str = "them/train:1") -> None:
        """Another team's pod in another namespace, bound to ``node`` and running (a GPU one by default);
        it ends after ``run_for_s`` seconds (None: never)."""
        limits = {"nvidia.com/gpu": "1"} if gpu else {"cpu": "1"}
        await self._http("post", f"/api/v1/namespaces/{namespace}/pods", {
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace,
                                                            "labels": {"app": "their-training"}},
            "spec": {"nodeName": node, "containers": [{"name": "main", "image": image,
                                                       "resources": {"limits": limits}}]},
            "status": {"phase": "Running"}})
        self.foreign_pods[(namespace, name)] = None if run_for_s is None else self.clock.t + run_for_s

    async def schedule_stranger(self, namespace: str, name: str, *, gpus: int = 1,
                                priority_class: str | None = None) -> None:
        """Another team's pod asking for ``gpus`` replicas, unbound: the scheduler places it where replicas are
        free (then it runs until deleted), or leaves it Pending (Unschedulable), or, with a ``priority_class``
        of a higher value than pods on the node, preempts them (``_preempt``)."""
        spec: dict[str, Any] = {"containers": [{"name": "main", "image": "them/train:1",
                                                "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}],
                                "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists",
                                                 "effect": "NoSchedule"}],
                                "schedulerName": "default-scheduler"}
        if priority_class:
            spec["priorityClassName"] = priority_class
        await self._http("post", f"/api/v1/namespaces/{namespace}/pods", {
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace,
                                                            "labels": {"app": "their-training"}},
            "spec": spec, "status": {"phase": "Pending"}})
        self.strangers[name] = namespace

    def pods_in(self, namespace: str) -> dict[str, dict[str, Any]]:
        return {key[2]: obj.raw for key, obj in list(self.km.objects.items())
                if is_resource(key[0], "v1/pods") and key[1] == namespace and not obj.deleted}

    async def add_device_plugin(self, node: str, version: str) -> None:
        """The NVIDIA device plugin's DaemonSet pod on ``node`` (its image carries the version)."""
        await self.add_foreign_pod("nvidia-device-plugin", f"nvidia-device-plugin-daemonset-{node}", node,
                                   gpu=False, image=f"nvcr.io/nvidia/k8s-device-plugin:{version}")

    def add_event(self, kind: str, name: str, reason: str, message: str, type_: str = "Warning") -> None:
        ev_name = f"{name}.{secrets.token_hex(3)}"
        self.km.objects["v1/events", self.ns, ev_name] = {
            "apiVersion": "v1", "kind": "Event", "metadata": {"name": ev_name, "namespace": self.ns},
            "involvedObject": {"kind": kind, "name": name, "namespace": self.ns}, "reason": reason,
            "message": message, "type": type_, "count": 1, "lastTimestamp": ts(self.clock.t)}

    async def put_lease(self, node: str, holder: str, renewed_ago_s: float, duration_s: int = 30) -> None:
        """A node Lease held by ``holder`` (another kts client), last renewed ``renewed_ago_s`` ago."""
        from kts_helpers.run.backends.kubernetes.clock import micro_time
        from kts_helpers.run.backends.kubernetes.names import lease_name

        when = micro_time(int((self.clock.t - renewed_ago_s) * 1e9))
        await self._http("post", f"/apis/coordination.k8s.io/v1/namespaces/{self.ns}/leases", {
            "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": lease_name(node), "namespace": self.ns,
                         "labels": {"app.kubernetes.io/managed-by": "kts"}, "annotations": {"kts/run-id": "theirs"}},
            "spec": {"holderIdentity": holder, "leaseDurationSeconds": duration_s, "acquireTime": when,
                     "renewTime": when, "leaseTransitions": 0}})

    async def renew_lease(self, node: str) -> None:
        """The Lease's holder renews it now (another client that is alive)."""
        from kts_helpers.run.backends.kubernetes.clock import micro_time
        from kts_helpers.run.backends.kubernetes.names import lease_name

        await self._http("patch", f"/apis/coordination.k8s.io/v1/namespaces/{self.ns}/leases/{lease_name(node)}",
                         {"spec": {"renewTime": micro_time(int(self.clock.t * 1e9))}})

    async def lose_node(self, name: str) -> None:
        """The node's kubelet stops reporting: the node controller marks it Ready=Unknown."""
        self.lost_nodes.add(name)
        await self._http("patch", f"/api/v1/nodes/{name}", {"status": {"conditions": [
            {"type": "Ready", "status": "Unknown", "reason": "NodeStatusUnknown",
             "message": "Kubelet stopped posting node status.", "lastTransitionTime": ts(self.clock.t)}]}})

    def live(self, resource: str) -> dict[str, dict[str, Any]]:
        return {key[2]: obj.raw for key, obj in list(self.km.objects.items())
                if is_resource(key[0], resource) and not obj.deleted}

    def deleted(self, resource: str) -> set[str]:
        return {key[2] for key, obj in list(self.km.objects.items()) if is_resource(key[0], resource) and obj.deleted}

    def requests(self, method: str, resource: str) -> list[Any]:
        return [r for r in list(self.km.log) if r.method == method.upper() and r.resource == resource]

    def backend(self, **kwargs: Any) -> Any:
        from kubernetes import client

        from kts_helpers.run.backends.kubernetes import KubernetesBackend

        cfg = client.Configuration(host=str(self.km.url).rstrip("/"))
        # the start delay covers the go's delay (``go_delay``: up to 5.25 fake s, or 0.53 real s on a real-time clock,
        # where every second of it is a second of the test)
        opts: dict[str, Any] = {"namespace": self.ns, "image": "kts-worker:test",
                                "start_delay_s": 3.0 if self.clock.realtime else 8.0,
                                "poll_s": 0.1, "schedule_timeout_s": 3.0, "cleanup_timeout_s": 10.0,
                                "lease_wait_s": 20.0, "clock": self.clock}
        opts.update(kwargs)
        return KubernetesBackend(api_client=client.ApiClient(cfg), context="kmock", **opts)

    # ------------------------------------------------------------------ the control loop
    async def __aenter__(self) -> FakeCluster:
        self._task = asyncio.create_task(self._loop())
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._task is not None
        self.stopping = True  # followed logs end: the kubelets are gone
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task

    async def _loop(self) -> None:
        while True:
            await self._tick()
            await asyncio.sleep(self.tick_s)
            self.clock.advance(self.step_s)

    async def _http(self, method: str, path: str, body: Any = None) -> None:
        resp = await self.km.request(method, path, json=body) if body is not None else \
            await self.km.request(method, path)
        resp.release()

    def _node_now(self, node: str) -> float:
        return self.clock.t + self.node_skew_s.get(node, 0.0)

    async def _tick(self) -> None:
        while self.km.graceful_deletes:  # the kit's pod deletes: SIGTERM to their containers
            await self._kill(self.km.graceful_deletes.pop(0))
        await self._gc()
        await self._grace_periods()
        jobs = self.live("batch/v1/jobs")
        queued = [(n, j) for n, j in jobs.items()
                  if self.kueue_version and (j["metadata"].get("labels") or {}).get("kueue.x-k8s.io/queue-name")]
        # Kueue's queue: higher Workload priority first (the pods' PriorityClass), then the earlier one
        queued.sort(key=lambda nj: (-self._template_priority(nj[1]), nj[1]["metadata"].get("creationTimestamp", "")))
        for name, job in queued:
            await self._kueue(name, job)
        for name, job in self.live("batch/v1/jobs").items():
            await self._job_controller(name, job)
        # kube-scheduler: every pod not yet bound, in its queue's order (queuesort/priority_sort.go, Less: the
        # higher priority first, then the earlier one queued), strangers of other namespaces included
        for kind, ns, name, pod in self._scheduling_queue():
            if kind == "kts":
                await self._schedule(name, pod)
            else:
                await self._schedule_stranger(ns, name, pod)
        for pod_name, pod in self.live("v1/pods").items():
            if pod_name in self.pod_job and pod["spec"].get("nodeName"):
                await self._run_pod(pod_name, pod)
        for (ns, name), until in list(self.foreign_pods.items()):
            if until is not None and self.clock.t >= until:
                del self.foreign_pods[(ns, name)]
                await self._http("patch", f"/api/v1/namespaces/{ns}/pods/{name}", {"status": {"phase": "Succeeded"}})
        self._count_runs()

    def _scheduling_queue(self) -> list[tuple[str, str, str, dict[str, Any]]]:
        """Unbound pods as kube-scheduler's active queue orders them: ``spec.priority`` descending, then the time
        they were queued (their creation, whole seconds here; ties in creation order)."""
        out = []
        for seq, (key, obj) in enumerate(list(self.km.objects.items())):
            if not is_resource(key[0], "v1/pods") or obj.deleted or (obj.raw.get("spec") or {}).get("nodeName"):
                continue
            ns, name, pod = key[1], key[2], obj.raw
            if name in self.terminated or name in self.terminating:
                continue
            if ns == self.ns and name in self.pod_job:
                out.append(("kts", ns, name, pod, seq))
            elif self.strangers.get(name) == ns:
                out.append(("stranger", ns, name, pod, seq))
        out.sort(key=lambda v: (-int(v[3]["spec"].get("priority") or 0), v[3]["metadata"].get("creationTimestamp", ""),
                                v[4]))
        return [v[:4] for v in out]

    def _template_priority(self, job: dict[str, Any]) -> int:
        cls = ((job["spec"].get("template") or {}).get("spec") or {}).get("priorityClassName")
        return int(self.km.priority_classes.get(str(cls or ""), 0))

    async def _schedule_stranger(self, ns: str, name: str, pod: dict[str, Any]) -> None:
        path = f"/api/v1/namespaces/{ns}/pods/{name}"
        node = self._place(pod["spec"])
        if node is None and int(pod["spec"].get("priority") or 0) > 0 and await self._preempt(pod):
            return  # its victims are going; it is placed on a later tick
        if node is None:
            self.stranger_pending_at.setdefault(name, self.clock.t)
            if not pod.get("status", {}).get("conditions"):
                await self._http("patch", path, {"status": {"conditions": [{
                    "type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": self.unfit,
                    "lastTransitionTime": ts(self.clock.t)}]}})
            return
        now = ts(self.clock.t)
        self.stranger_bound_at[name] = self.clock.t
        await self._http("patch", path, {"spec": {"nodeName": node}, "status": {
            "phase": "Running", "startTime": now, "conditions": [{"type": "PodScheduled", "status": "True",
                                                                   "lastTransitionTime": now}],
            "containerStatuses": [{"name": "main", "ready": True, "state": {"running": {"startedAt": now}}}]}})

    async def _preempt(self, pod: dict[str, Any]) -> bool:
        """kube-scheduler's default preemption for a pod that fits nowhere: on a node where removing lower-priority
        pods makes room (pkg/scheduler/framework/plugins/defaultpreemption/default_preemption.go
        ``SelectVictimsOnNode``: every lower-priority pod is removed, then reprieved one by one, the most important
        first, ``MoreImportantPod``: higher priority, then the earlier start, while the preemptor still fits), each
        victim gets ``DisruptionTarget`` (reason ``PreemptionByScheduler``, message "<schedulerName>: preempting to
        accommodate a higher priority pod": pkg/scheduler/framework/preemption/preemption.go ``prepareCandidate``)
        and is deleted, its containers SIGTERMed (exit 143). The preemptor is nominated to the node. GPU replicas
        only (the resource the kit's pods and strangers compete for). True when victims were chosen."""
        prio = int(pod["spec"].get("priority") or 0)
        want = sum(int(v) for c in pod["spec"].get("containers") or []
                   for k, v in ((c.get("resources") or {}).get("limits") or {}).items() if k == "nvidia.com/gpu")
        for name, node in sorted(self.live("v1/nodes").items()):
            have = int(node["status"]["allocatable"].get("nvidia.com/gpu", 0))
            lower = []
            for key, obj in list(self.km.objects.items()):
                p = obj.raw
                if not is_resource(key[0], "v1/pods") or obj.deleted or key[2] in self.terminated or o_phase(p) in (
                        "Succeeded", "Failed") or p.get("spec", {}).get("nodeName") != name:
                    continue
                gpus = sum(int(v) for c in p["spec"].get("containers") or []
                           for k, v in ((c.get("resources") or {}).get("limits") or {}).items() if k == "nvidia.com/gpu")
                if gpus and int(p["spec"].get("priority") or 0) < prio:
                    lower.append((key[1], key[2], p, gpus))
            free = have - self.gpus_used(name, "nvidia.com/gpu") + sum(g for *_, g in lower)
            if free < want:
                continue
            # reprieve the most important first: higher priority, then the earlier start (MoreImportantPod)
            lower.sort(key=lambda v: (-int(v[2]["spec"].get("priority") or 0), _start_of(v[2])))
            victims = []
            for ns, pname, p, gpus in lower:
                if free - gpus >= want:
                    free -= gpus  # reprieved: it stays
                else:
                    victims.append((ns, pname, p))
            victims = [v for v in lower if (v[0], v[1]) in {(a, b) for a, b, _ in victims}]
            if not victims:
                continue
            message = f"{pod['spec'].get('schedulerName') or 'default-scheduler'}: preempting to accommodate a " \
                      "higher priority pod"
            for ns, pname, p, _ in victims:
                conds = [*(p.get("status") or {}).get("conditions", []), {
                    "type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler",
                    "message": message, "lastTransitionTime": ts(self.clock.t)}]
                await self._http("patch", f"/api/v1/namespaces/{ns}/pods/{pname}", {"status": {"conditions": conds}})
                self.preempted_pods.append(pname)
                if ns == self.ns and pname in self.pod_job:
                    await self._kill(pname, delete=False)  # SIGTERM: its exit is its process's (``_kill``)
                else:
                    self.terminated.add(pname)
                    await self._http("patch", f"/api/v1/namespaces/{ns}/pods/{pname}", {"status": {"phase": "Failed"}})
            await self._http("patch", f"/api/v1/namespaces/{pod['metadata']['namespace']}/pods/"
                                      f"{pod['metadata']['name']}", {"status": {"nominatedNodeName": name}})
            return True
        return False

    def _count_runs(self) -> None:
        by_node: dict[str, set[str]] = {}
        for name, pod in self.live("v1/pods").items():
            run = (pod["metadata"].get("labels") or {}).get("kts.run-id")
            node = pod["spec"].get("nodeName")
            if run and node and name not in self.terminated:
                by_node.setdefault(node, set()).add(run)
        self.max_runs_per_node = max([self.max_runs_per_node, *(len(r) for r in by_node.values())])
        self.max_runs_at_once = max(self.max_runs_at_once, len(set().union(*by_node.values())) if by_node else 0)

    # --- garbage collector: foreground deletion, orphans
    async def _gc(self) -> None:
        jobs = self.live("batch/v1/jobs")
        for pod_name in self.live("v1/pods"):
            if pod_name not in self.pod_job:
                continue  # not a Job's pod: the garbage collector has no owner to follow
            job = jobs.get(self.pod_job[pod_name])
            if job is None or job["metadata"].get("deletionTimestamp"):
                await self._kill(pod_name)
        for name, job in jobs.items():
            if job["metadata"].get("deletionTimestamp") and not any(
                    self.pod_job.get(p) == name for p in self.live("v1/pods")):
                await self._patch_job(name, {"metadata": {"finalizers": []}})

    async def _kill(self, pod_name: str, *, delete: bool = True) -> None:
        """A pod's deletion as the kubelet carries it out: ``deletionTimestamp``, then SIGTERM to its container.

        A kts worker finishes the iteration in progress (its line is printed) and exits as workers/kts_harness.py
        decides (``stop_exit_code``: 0 only when it padded and the kit had asked it to stop, else 143). Another
        container exits on SIGTERM only if its process handles it: the kit's placeholder and probe are PID 1 of
        their containers, which Linux gives no default-action signal, so without a handler they run on until the
        grace period (``terminationGracePeriodSeconds``) ends and the kubelet's SIGKILL ends them with 137
        (``_grace_periods``). ``delete=False``: the pod stays, terminated (a preemption's or a drain's victim keeps
        its status for the Job controller's pod failure policy until its Job goes)."""
        if pod_name in self.terminating:
            return
        pod = self.live("v1/pods").get(pod_name)
        if pod is None:
            return
        if pod_name in self.terminated:  # its container ended already: the object goes
            if delete:
                await self._http("patch", f"/api/v1/namespaces/{self.ns}/pods/{pod_name}",
                                 {"metadata": {"finalizers": []}})
                await self._http("delete", f"/api/v1/namespaces/{self.ns}/pods/{pod_name}")
            return
        self.sigterm_at.setdefault(pod_name, self.clock.t)
        node = pod.get("spec", {}).get("nodeName", "")
        status = pod.get("status") or {}
        running = (((status.get("containerStatuses") or [{}])[0].get("state") or {}).get("running") or {})
        if not node or not running or node in self.lost_nodes:  # no container to stop
            self.terminated.add(pod_name)
            await self._http("patch", f"/api/v1/namespaces/{self.ns}/pods/{pod_name}", {"metadata": {"finalizers": []}})
            await self._http("delete", f"/api/v1/namespaces/{self.ns}/pods/{pod_name}")
            return
        if delete:  # terminating: kept (a finalizer stands for the kubelet) until its container has stopped
            await self._http("patch", f"/api/v1/namespaces/{self.ns}/pods/{pod_name}", {"metadata": {
                "deletionTimestamp": ts(self.clock.t), "finalizers": [KUBELET_FINALIZER]}})
        now = ts(self._node_now(node))
        worker = self.workers.get(pod_name)
        if worker is not None and worker.hang and worker.i > 0:  # stuck in an iteration: SIGTERM waits for it
            grace = float(pod["spec"].get("terminationGracePeriodSeconds", 30))
            self.terminating[pod_name] = (self.clock.t + grace, delete)
        elif worker is not None:
            padding = worker.pad and worker.done_timed()
            if worker.lines and not worker.waiting_for_go:
                line, _ = worker._line()
                worker.lines.append(line)
                worker.i += 1
                self.logs[pod_name] = worker.text()
            code = stop_exit_code(padding, worker.asked)
            await self._exit(pod_name, code, "Completed" if code == 0 else "Error", running.get("startedAt"), now,
                             delete)
        elif handles_sigterm(pod):
            await self._exit(pod_name, 143, "Error", running.get("startedAt"), now, delete)
        else:  # PID 1 without a handler: SIGTERM is ignored
            grace = float(pod["spec"].get("terminationGracePeriodSeconds", 30))
            self.terminating[pod_name] = (self.clock.t + grace, delete)

    async def _grace_periods(self) -> None:
        """The kubelet's SIGKILL at the end of a grace period: exit code 137."""
        for pod_name, (until, delete) in list(self.terminating.items()):
            if self.clock.t < until:
                continue
            del self.terminating[pod_name]
            pod = self.live("v1/pods").get(pod_name) or {}
            running = ((((pod.get("status") or {}).get("containerStatuses") or [{}])[0].get("state") or {})
                       .get("running") or {})
            await self._exit(pod_name, 137, "Error", running.get("startedAt"),
                             ts(self._node_now(pod.get("spec", {}).get("nodeName", ""))), delete)

    async def _exit(self, pod_name: str, code: int, reason: str, started: str | None, finished: str,
                    delete: bool) -> None:
        await self._terminate(pod_name, code, reason, started, finished)
        if delete:
            await self._http("patch", f"/api/v1/namespaces/{self.ns}/pods/{pod_name}", {"metadata": {"finalizers": []}})
            await self._http("delete", f"/api/v1/namespaces/{self.ns}/pods/{pod_name}")

    # --- Kueue
    async def _kueue(self, name: str, job: dict[str, Any]) -> None:
        queue = job["metadata"]["labels"]["kueue.x-k8s.io/queue-name"]
        wl_name = f"job-{name}-{job['metadata']['uid'][:5]}"
        path = f"/apis/kueue.x-k8s.io/{self.kueue_version}/namespaces/{self.ns}/workloads"
        wl = self.live(f"kueue.x-k8s.io/{self.kueue_version}/workloads").get(wl_name)
        now = ts(self.clock.t)
        if wl is None:
            await self._http("post", path, {
                "apiVersion": f"kueue.x-k8s.io/{self.kueue_version}", "kind": "Workload",
                "metadata": {"name": wl_name, "namespace": self.ns,
                             "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": name,
                                                  "uid": job["metadata"]["uid"]}]},
                "spec": {"queueName": queue, "podSets": [{"name": "main", "count": job["spec"].get("parallelism", 1)}]},
                "status": {"conditions": [
                    {"type": "QuotaReserved", "status": "False", "reason": "Pending",
                     "message": "Workload is pending evaluation in the scheduling queue", "lastTransitionTime": now},
                    {"type": "Admitted", "status": "False", "reason": "NoReservation",
                     "message": "The workload has no reservation", "lastTransitionTime": now}]}})
            return
        conds = {c["type"]: c for c in wl.get("status", {}).get("conditions", [])}
        if self._finished(job) and conds.get("Finished", {}).get("status") != "True":
            await self._http("patch", f"{path}/{wl_name}", {"status": {"conditions": [
                *conds.values(), {"type": "Finished", "status": "True", "reason": "Succeeded",
                                  "message": "Job finished", "lastTransitionTime": now}]}})
            return
        if conds.get("Admitted", {}).get("status") == "True" or not job["spec"].get("suspend"):
            return
        if self.kueue_inadmissible is not None:
            quota = {"type": "QuotaReserved", "status": "False", "reason": self.kueue_inadmissible[0],
                     "message": self.kueue_inadmissible[1], "lastTransitionTime": now}
        elif self.local_queues is not None and queue not in self.local_queues:
            quota = {"type": "QuotaReserved", "status": "False", "reason": "Inadmissible",
                     "message": f"LocalQueue {queue} doesn't exist", "lastTransitionTime": now}
        elif self.kueue_capacity is not None and job["spec"].get("parallelism", 1) > self.kueue_capacity:
            quota = {"type": "QuotaReserved", "status": "False", "reason": "Pending",
                     "message": "couldn't assign flavors to pod set main: insufficient quota for nvidia.com/gpu in "
                                "flavor gpu, previously considered podsets requests (0) + current podset request "
                                f"({job['spec'].get('parallelism', 1)}) > maximum capacity ({self.kueue_capacity})",
                     "lastTransitionTime": now}
        elif name in self.preempted and self.clock.t < self.preempted[name] + self.readmit_after_s:
            return  # requeued: admitted again after a backoff
        elif self.kueue_hold:
            quota = {"type": "QuotaReserved", "status": "False", "reason": "Pending",
                     "message": "couldn't assign flavors to pod set main: insufficient unused quota for "
                                "nvidia.com/gpu in flavor gpu, 2 more needed", "lastTransitionTime": now}
        elif self.clock.t < _t(job["metadata"]["creationTimestamp"]) + self.admit_after:
            return
        elif self.kueue_quota is not None and self._kueue_used() + int(job["spec"].get("parallelism", 1)) > \
                self.kueue_quota:  # quota counts every admitted Workload: this one must fit beside them
            more = self._kueue_used() + int(job["spec"].get("parallelism", 1)) - self.kueue_quota
            quota = {"type": "QuotaReserved", "status": "False", "reason": "Pending",
                     "message": "couldn't assign flavors to pod set main: insufficient unused quota for "
                                f"nvidia.com/gpu in flavor gpu, {more} more needed", "lastTransitionTime": now}
        else:
            quota = {"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved",
                     "message": "Quota reserved in ClusterQueue kts", "lastTransitionTime": now}
            kept = [c for c in conds.values() if c["type"] in ("Preempted", "Requeued")]
            if "Evicted" in conds:  # re-admission: Evicted goes back to False, the reason is gone from it
                kept.append({"type": "Evicted", "status": "False", "reason": "QuotaReserved",
                             "message": "Previously: Preempted", "lastTransitionTime": now})
                kept = [{**c, "status": "False"} if c["type"] == "Preempted" else c for c in kept]
            await self._http("patch", f"{path}/{wl_name}", {"status": {"conditions": [quota, *kept, {
                "type": "Admitted", "status": "True", "reason": "Admitted",
                "message": "The workload is admitted", "lastTransitionTime": now}]}})
            patch: dict[str, Any] = {"spec": {"suspend": False}}  # the whole gang at once
            if self.flavor_node_labels:  # the flavor's node labels go onto the pods (Kueue's podSetInfo)
                sel = dict(job["spec"]["template"]["spec"].get("nodeSelector") or {}, **self.flavor_node_labels)
                patch["spec"]["template"] = {"spec": {"nodeSelector": sel}}
            await self._patch_job(name, patch)
            return
        if conds.get("QuotaReserved", {}).get("message") != quota["message"]:
            await self._http("patch", f"{path}/{wl_name}", {"status": {"conditions": [quota, conds["Admitted"]]}})

    def _kueue_used(self) -> int:
        """GPUs of every admitted, unfinished Workload (one per pod): the ClusterQueue's usage
        (pkg/cache ClusterQueue usage, summed over admitted Workloads; Kueue's flavor assigner checks a new one's
        request against the quota minus it: flavorassigner.go ``fitsResourceQuota``)."""
        used = 0
        jobs = self.live("batch/v1/jobs")
        for wl in self.live(f"kueue.x-k8s.io/{self.kueue_version}/workloads").values():
            conds = {c["type"]: c.get("status") for c in (wl.get("status") or {}).get("conditions", [])}
            job = jobs.get(wl["metadata"]["ownerReferences"][0]["name"])
            if job is not None and conds.get("Admitted") == "True" and conds.get("Finished") != "True":
                used += int(job["spec"].get("parallelism", 1))
        return used

    async def preempt(self, name: str, *, readmitted: bool = False) -> None:
        """Kueue preempts the admitted Job ``name`` for a higher-priority Workload: Evicted and Preempted on
        its Workload, the Job suspended again, its pods stopped (SIGTERM: exit 143) and deleted.
        ``readmitted``: what a client that looked away finds: the Workload admitted again already (``Evicted``
        back to False, the eviction only in ``schedulingStats`` and ``Requeued``), the Job running new pods."""
        if readmitted:
            path = f"/apis/kueue.x-k8s.io/{self.kueue_version}/namespaces/{self.ns}/workloads"
            wl_name, wl = next((n, w) for n, w in self.live(f"kueue.x-k8s.io/{self.kueue_version}/workloads").items()
                               if w["metadata"]["ownerReferences"][0]["name"] == name)
            now = ts(self.clock.t)
            msg = "Preempted to accommodate a workload (UID: 5f3c) due to prioritization in the ClusterQueue"
            conds = [c for c in wl.get("status", {}).get("conditions", []) if c["type"] not in ("Evicted",)]
            await self._http("patch", f"{path}/{wl_name}", {"status": {"conditions": [
                *conds, {"type": "Evicted", "status": "False", "reason": "QuotaReserved", "message": "Previously: "
                         "Preempted", "lastTransitionTime": now},
                {"type": "Requeued", "status": "True", "reason": "Preempted", "message": msg,
                 "lastTransitionTime": now}],
                "schedulingStats": {"evictions": [{"reason": "Preempted", "underlyingCause": "InClusterQueue",
                                                   "count": 1}]}}})
            for pod_name in list(self.live("v1/pods")):
                if self.pod_job.get(pod_name) == name and pod_name not in self.terminated:
                    await self._kill(pod_name)
            return
        path = f"/apis/kueue.x-k8s.io/{self.kueue_version}/namespaces/{self.ns}/workloads"
        wl_name, wl = next((n, w) for n, w in self.live(f"kueue.x-k8s.io/{self.kueue_version}/workloads").items()
                           if w["metadata"]["ownerReferences"][0]["name"] == name)
        now = ts(self.clock.t)
        msg = ("Preempted to accommodate a workload (UID: 5f3c, JobUID: 9a1e) due to prioritization in the "
               "ClusterQueue")
        conds = [c for c in wl.get("status", {}).get("conditions", []) if c["type"] not in ("QuotaReserved", "Admitted")]
        await self._http("patch", f"{path}/{wl_name}", {"status": {"conditions": [
            *conds, {"type": "Evicted", "status": "True", "reason": "Preempted", "message": msg,
                     "lastTransitionTime": now},
            {"type": "Preempted", "status": "True", "reason": "InClusterQueue", "message": msg,
             "lastTransitionTime": now},
            {"type": "QuotaReserved", "status": "False", "reason": "Pending", "message": "Preempted",
             "lastTransitionTime": now},
            {"type": "Admitted", "status": "False", "reason": "NoReservation", "message": "The workload has no "
             "reservation", "lastTransitionTime": now},
            {"type": "Requeued", "status": "True", "reason": "Preempted", "message": msg, "lastTransitionTime": now}],
            "schedulingStats": {"evictions": [{"reason": "Preempted", "underlyingCause": "InClusterQueue",
                                               "count": 1}]}}})
        self.preempted[name] = self.clock.t
        await self._patch_job(name, {"spec": {"suspend": True}})
        for pod_name in list(self.live("v1/pods")):
            if self.pod_job.get(pod_name) == name and pod_name not in self.terminated:
                await self._kill(pod_name)  # the Job controller deletes a suspended Job's pods: SIGTERM

    # --- the Job controller
    @staticmethod
    def _finished(job: dict[str, Any]) -> bool:
        return any(c.get("type") in ("Complete", "Failed") and c.get("status") == "True"
                   for c in job.get("status", {}).get("conditions", []))

    async def _patch_job(self, name: str, patch: dict[str, Any]) -> None:
        await self._http("patch", f"/apis/batch/v1/namespaces/{self.ns}/jobs/{name}", patch)

    async def _add_conditions(self, name: str, job: dict[str, Any], *conds: dict[str, Any]) -> None:
        now = ts(self.clock.t)
        new = [{"status": "True", "lastTransitionTime": now, "lastProbeTime": now, **c} for c in conds]
        await self._patch_job(name, {"status": {"conditions": [*job.get("status", {}).get("conditions", []), *new]}})

    async def _job_controller(self, name: str, job: dict[str, Any]) -> None:
        spec, status = job["spec"], job.get("status", {})
        if self._finished(job) or spec.get("suspend") or job["metadata"].get("deletionTimestamp"):
            return
        if not spec.get("template", {}).get("spec", {}).get("containers"):
            return  # a pre-made finished Job
        pods = {p: o for p, o in self.live("v1/pods").items() if self.pod_job.get(p) == name}
        active = [p for p in pods if p not in self.terminated and o_phase(pods[p]) not in ("Succeeded", "Failed")]
        target = next((c for c in status.get("conditions", []) if c["type"] == "FailureTarget"), None)
        if target is not None:  # pods are being stopped; Failed once none is left
            if not active:
                await self._add_conditions(name, job, {"type": "Failed", "reason": target["reason"],
                                                       "message": target["message"]})
            return
        if "startTime" not in status:
            if self.clock.t < _t(job["metadata"]["creationTimestamp"]) + self.seen_s + self.job_seen_s.get(
                    job_kind(name), 0.0):
                return  # the controller sees a Job a moment after it was created
            status["startTime"] = ts(self.clock.t)
            await self._patch_job(name, {"status": {"startTime": status["startTime"]}})
        failed = [p for p, o in pods.items() if o_phase(o) == "Failed"]
        why = None
        disrupted = [p for p in failed if any(c.get("type") == "DisruptionTarget" and c.get("status") == "True"
                                              for c in pods[p].get("status", {}).get("conditions", []))]
        rules = (spec.get("podFailurePolicy") or {}).get("rules") or []
        fail_job = next((i for i, r in enumerate(rules) if r.get("action") == "FailJob" and any(
            c.get("type") == "DisruptionTarget" for c in r.get("onPodConditions") or [])), None)
        if disrupted and fail_job is not None:
            why = ("PodFailurePolicy", f"Pod {self.ns}/{disrupted[0]} has condition DisruptionTarget matching FailJob "
                                       f"rule at index {fail_job}")
        elif failed:
            why = ("BackoffLimitExceeded", "Job has reached the specified backoff limit")
        elif self._deadline(spec) is not None and self.clock.t - _t(status["startTime"]) >= self._deadline(spec):
            why = ("DeadlineExceeded", "Job was active longer than specified deadline")
        if why is not None:
            await self._add_conditions(name, job, {"type": "FailureTarget", "reason": why[0], "message": why[1]})
            for p in active:
                await self._kill(p)
            return
        n = int(spec.get("completions") or 1)
        done = {int(o["metadata"]["labels"][INDEX]) for o in pods.values() if o_phase(o) == "Succeeded"}
        for rule in (spec.get("successPolicy") or {}).get("rules") or []:
            lo, _, hi = str(rule.get("succeededIndexes", "")).partition("-")
            want = set(range(int(lo), int(hi or lo) + 1))
            if want <= done:  # the success policy is met: the lingering pods (placeholders) are terminated
                await self._add_conditions(name, job, {"type": "SuccessCriteriaMet", "reason": "SuccessPolicy",
                                                       "message": "Matched rules at index 0"})
                for p in active:
                    await self._kill(p)
                job = self.live("batch/v1/jobs")[name]
                await self._add_conditions(name, job, {"type": "Complete", "reason": "SuccessPolicy",
                                                       "message": "Matched rules at index 0"})
                return
        if len(done) >= n:
            await self._add_conditions(name, job, {"type": "SuccessCriteriaMet", "reason": "CompletionsReached",
                                                   "message": "Reached expected number of succeeded pods"},
                                       {"type": "Complete", "reason": "CompletionsReached",
                                        "message": "Reached expected number of succeeded pods"})
            return
        have = {int(o["metadata"]["labels"][INDEX]) for p, o in pods.items() if p not in self.terminated}
        for index in range(n):
            if index not in have and index not in done:
                await self._create_pod(name, job, index)

    def _deadline(self, spec: dict[str, Any]) -> float | None:
        limits = [v for v in (spec.get("activeDeadlineSeconds"), self.deadline_cap_s) if v is not None]
        return min(limits) if limits else None

    async def _create_pod(self, job_name: str, job: dict[str, Any], index: int) -> None:
        tmpl = job["spec"]["template"]
        pod_name = f"{job_name}-{index}-{secrets.token_hex(3)[:5]}"
        refused = self.create_errors.get(job_kind(job_name)) or self.create_error
        cls = str(tmpl["spec"].get("priorityClassName") or "")
        if cls and cls not in self.km.priority_classes:  # the Priority admission plugin refuses the pod
            refused = 'pods "{pod}" is forbidden: no PriorityClass with name ' + cls + " was found"
        if refused:
            for ev in self.live("v1/events").values():
                if ev["involvedObject"]["name"] == job_name and ev["reason"] == "FailedCreate":
                    return
            self.add_event("Job", job_name, "FailedCreate", f"Error creating: {refused.format(pod=pod_name)}")
            return
        labels = dict(tmpl["metadata"].get("labels", {}), **{"batch.kubernetes.io/job-name": job_name,
                                                              "job-name": job_name, INDEX: str(index),
                                                              "batch.kubernetes.io/controller-uid": job["metadata"]["uid"]})
        spec = json.loads(json.dumps(tmpl["spec"]))
        for c in spec["containers"]:
            c.setdefault("env", []).append({"name": "JOB_COMPLETION_INDEX", "valueFrom": {
                "fieldRef": {"fieldPath": f"metadata.labels['{INDEX}']"}}})
        body = {"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": pod_name, "namespace": self.ns, "labels": labels,
                             "annotations": dict(tmpl["metadata"].get("annotations", {}), **{INDEX: str(index)}),
                             "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": job_name,
                                                  "uid": job["metadata"]["uid"], "controller": True}]},
                "spec": spec, "status": {"phase": "Pending"}}
        self.pod_job[pod_name] = job_name
        await self._http("post", f"/api/v1/namespaces/{self.ns}/pods", body)

    # --- the scheduler and the kubelet
    def _worker(self, pod: dict[str, Any], node: str, started: float) -> FakeWorker | None:
        env = {e["name"]: e.get("value", "") for e in pod["spec"]["containers"][0].get("env", []) if "value" in e}
        if "KTS_TENANTS" in env:
            tenants = json.loads(env["KTS_TENANTS"])
            index = int(pod["metadata"]["labels"][INDEX])
            if index >= len(tenants):
                return None  # a placeholder: it holds its replica and sleeps
            env.update(tenants[index])
        if "WORKLOAD" not in env:
            return None  # not a kts worker
        tenant = env.get("TENANT", env["WORKLOAD"])
        mode = self.behaviour.get(tenant, "ok")
        start_at = int(env.get("START_AT") or 0) / 1e9
        reached = started + self.init_s
        if mode == "late" and start_at:
            reached = max(reached, start_at + 3.0)
        uuid_ = {"othergpu": "GPU-fake-1", "nouuid": None}.get(mode, "GPU-fake-0")
        # the device plugin on an MPS node hands every container its daemon's CUDA_MPS_PIPE_DIRECTORY
        # (k8s-device-plugin internal/plugin/server.go, getAllocateResponse -> updateResponseForMPS): an MPS client
        labels = (self.live("v1/nodes").get(node, {}).get("metadata") or {}).get("labels") or {}
        mps = labels.get("nvidia.com/gpu.sharing-strategy") == "mps"
        return FakeWorker(go_file=bool(env.get("KTS_GO_FILE")),workload=env["WORKLOAD"], tenant=tenant, iterations=self.log_iterations, start_at=start_at,
                          reached=reached, lead_in_s=float(env.get("KTS_LEAD_IN_S") or 0),
                          pad=env.get("KTS_PAD") == "1" and mode not in ("oom", "exit1"),  # they die first
                          pad_limit_s=float(env.get("KTS_PAD_LIMIT_S") or 3600),
                          period_s=1.0 if mode == "slow" else 0.1,
                          gpu_uuid=uuid_, hang=mode == "hang", mps_client=mps,  # type: ignore[arg-type]
                          memory=(lambda name=pod["metadata"]["name"]: self._nvml_reading(uuid_, name))
                          if self.nvml else None)

    def _tenant_of(self, pod: dict[str, Any]) -> tuple[str, dict[str, str], list[dict[str, Any]], int]:
        """(the pod's tenant, "" for a placeholder; its plain env; the scenario's tenants; its completion index)."""
        env = {e["name"]: e.get("value", "") for e in pod["spec"]["containers"][0].get("env", []) if "value" in e}
        tenants = json.loads(env["KTS_TENANTS"]) if "KTS_TENANTS" in env else []
        index = int(pod["metadata"]["labels"].get(INDEX, 0))
        tenant = tenants[index].get("TENANT", "") if index < len(tenants) else env.get("TENANT", "")
        return tenant, env, tenants, index

    async def _schedule(self, pod_name: str, pod: dict[str, Any]) -> None:
        """kube-scheduler for one of the kit's pods: the node filter (``_place``), else Unschedulable; a pod whose
        PriorityClass allows it (not ``preemptionPolicy: Never``) preempts lower-priority pods (``_preempt``)."""
        path = f"/api/v1/namespaces/{self.ns}/pods/{pod_name}"
        spec, status = pod["spec"], pod.get("status", {})
        tenant = self._tenant_of(pod)[0]
        mode = self.behaviour.get(tenant, "ok")
        if self.clock.t - _t(pod["metadata"]["creationTimestamp"]) < self.seen_s + self.placement_delay_s.get(tenant, 0):
            return
        node = self._place(spec)
        if node is None and mode != "unschedulable" and spec.get("preemptionPolicy") != "Never" and \
                int(spec.get("priority") or 0) > 0 and await self._preempt(pod):
            return  # its victims are going; it is placed on a later tick
        if mode == "unschedulable" or node is None:
            if not status.get("conditions"):
                await self._http("patch", path, {"status": {"conditions": [{
                    "type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                    "message": INSUFFICIENT if mode == "unschedulable" else self.unfit,
                    "lastTransitionTime": ts(self.clock.t)}]}})
            return
        await self._http("patch", path, {"spec": {"nodeName": node}, "status": {"conditions": [{
            "type": "PodScheduled", "status": "True", "lastTransitionTime": ts(self.clock.t)}]}})

    async def _run_pod(self, pod_name: str, pod: dict[str, Any]) -> None:
        """The kubelet for one of the kit's bound pods: pull, start, the worker's lines, its exit."""
        path = f"/api/v1/namespaces/{self.ns}/pods/{pod_name}"
        if pod_name in self.terminated or pod_name in self.terminating:
            return
        spec, status = pod["spec"], pod.get("status", {})
        tenant, env, tenants, index = self._tenant_of(pod)
        mode = self.behaviour.get(tenant, "ok")
        node = spec["nodeName"]
        if node in self.lost_nodes:
            return  # its kubelet is gone: nothing changes any more
        now = self._node_now(node)
        sched_t = _t(next(c for c in status["conditions"] if c["type"] == "PodScheduled")["lastTransitionTime"])
        worker = self.workers.get(pod_name)
        if status.get("phase") == "Pending":
            if self.clock.t < sched_t + self.pull_s_of.get(tenant, self.pull_s):
                if not status.get("containerStatuses"):
                    await self._http("patch", path, {"status": {"containerStatuses": [{"name": spec["containers"][0][
                        "name"], "ready": False, "state": {"waiting": {"reason": "ContainerCreating"}}}]}})
                return
            if mode == "imagepull":
                await self._http("patch", path, {"status": {"containerStatuses": [{"name": "worker", "ready": False,
                    "state": {"waiting": {"reason": "ImagePullBackOff",
                                          "message": 'Back-off pulling image "kts-worker:test"'}}}]}})
                return
            worker = self._worker(pod, node, now)
            if worker is not None:
                self.workers[pod_name] = worker
            self.logs[pod_name] = b""
            if worker is None and "KTS_TENANTS" in env and index >= len(tenants):  # the launcher's placeholder line
                index += int(env.get("KTS_HOLD_INDEX_BASE") or 0)  # a hold Job's indexes continue the tenants'
                self.logs[pod_name] = (f"kts_placeholder: holding index={index} gpu={self.holder_gpu} "
                                       f"source={'nvml' if self.holder_gpu.startswith('GPU-') else 'env'}\n").encode()
            await self._http("patch", path, {"status": {"phase": "Running", "containerStatuses": [{
                "name": spec["containers"][0]["name"], "ready": True, "state": {"running": {"startedAt": ts(now)}}}]}})
            return
        started = status["containerStatuses"][0]["state"].get("running", {}).get("startedAt")
        if worker is None:  # a placeholder, or someone else's GPU pod
            if tenant == "" and self.disrupted_holders and pod_name not in self.preempted_pods:
                self.disrupted_holders -= 1
                await self._disrupt_pod(pod_name, status, "PreemptionByScheduler",
                                        "default-scheduler: preempting to accommodate a higher priority pod")
                return
            limit = self.foreign_duration_s.get(self.pod_job[pod_name])
            if limit is not None and self.clock.t - sched_t >= limit:
                await self._terminate(pod_name, 0, "Completed", started, ts(now))
            return
        if worker.waiting_for_go:
            self._read_go(pod, worker, now, mode)
        if tenant in self.disrupted:  # a preemption or a drain: the condition first, then SIGTERM
            reason, message = self.disrupted.pop(tenant)
            worker.print_until(now)
            self.logs[pod_name] = worker.text()
            await self._disrupt_pod(pod_name, status, reason, message)
            return
        worker.print_until(now)
        self.logs[pod_name] = worker.text()
        self._log_history.setdefault(pod_name, []).append((self.clock.t, len(self.logs[pod_name])))
        if mode == "rotate" and pod_name not in self.rotated and worker.timed_lines() >= 2:
            self.rotated[pod_name] = len(self.logs[pod_name])  # the kubelet starts a new file here
            self.cut_follows.add(pod_name)
        if mode == "rotate-drop" and pod_name not in self.stalled and worker.timed_lines() >= 2:
            self.stalled[pod_name] = len(self.logs[pod_name])  # the client's connection stops receiving here
            self._stall_lines[pod_name] = worker.timed_lines()
        if (mode == "rotate-drop" and pod_name in self.stalled and pod_name not in self.rotated
                and worker.timed_lines() >= self._stall_lines[pod_name] + 3):  # lines the client never got
            self.rotated[pod_name] = len(self.logs[pod_name])  # rotated with unread bytes; the connection drops
            self.cut_follows.add(pod_name)
        if worker.pad and worker.done_timed() and not worker.asked:  # the kit's word, in its go file
            worker.asked = STOP_KEY in json.loads(self._go_visible(pod, worker) or "{}")
        code = None
        if mode in ("oom", "exit1") and worker.done_timed():
            code = 137 if mode == "oom" else 1
            if mode == "exit1":
                self.logs[pod_name] += b"Traceback (most recent call last):\nRuntimeError: CUDA error: out of memory\n"
        elif not worker.pad and worker.done_timed():
            code = 0
        elif worker.pad and worker.done_timed() and worker.asked:
            code = stop_exit_code(True, True)  # it stops padding on the word, by itself
        elif worker.pad and worker.done_timed() and now - worker.timed_end() > worker.pad_limit_s:
            code = int(env.get("KTS_PAD_LIMIT_EXIT") or 3)  # padded to its own limit: nobody stopped it
        if code is not None:
            await self._terminate(pod_name, code, {0: "Completed", 137: "OOMKilled"}.get(code, "Error"), started,
                                  ts(now))

    async def _disrupt_pod(self, pod_name: str, status: dict[str, Any], reason: str, message: str) -> None:
        """``DisruptionTarget`` on the pod, then its SIGTERM (the pod stays, terminated, for the Job controller)."""
        conds = [*status.get("conditions", []), {"type": "DisruptionTarget", "status": "True", "reason": reason,
                                                 "message": message, "lastTransitionTime": ts(self.clock.t)}]
        await self._http("patch", f"/api/v1/namespaces/{self.ns}/pods/{pod_name}", {"status": {"conditions": conds}})
        self.preempted_pods.append(pod_name)
        await self._kill(pod_name, delete=False)

    def _nvml_reading(self, gpu: str | None, pod: str) -> dict:
        """What ``workers/kts_gpumem.py`` reads in ``pod`` (its real code, ``fake_nvml``'s driver): the device's memory
        as NVML reports it (the driver's own reserve, ``fake_nvml.H200_RESERVED``, counted as used by version 1 and
        apart by version 2; every context on the GPU, the strangers' and, on an MPS node, the MPS server's too) and,
        from NVML's process list, its own process only (a PID namespace of its own)."""
        import fake_nvml

        device = self.gpus.setdefault(gpu or "GPU-fake-0", fake_nvml.FakeGpu(uuid=gpu or "GPU-fake-0"))
        device.contexts.clear()
        live = [p for p, w in self.workers.items() if p not in self.terminated and w.gpu_uuid == gpu]
        for p in live:  # each kts worker: its caching allocator's 2 GiB and a 400 MiB context
            device.hold(self._host_pid(p), (2 << 30) + (400 << 20))
        if any(self.workers[p].mps_client for p in live):  # the device plugin's MPS server, in its own pod
            device.hold(self.mps_server_pid, fake_nvml.MPS_SERVER_FOOTPRINT, fake_nvml.MPS_SERVER)
        for pid, used in self.gpu_strangers.items():
            device.hold(pid, used)
        return fake_nvml.reading(device, self._host_pid(pod), own_only=True, torch_reserved=2 << 30, ns_pid=1)

    def _host_pid(self, pod: str) -> int:
        return self.host_pids.setdefault(pod, 4000 + len(self.host_pids))

    def gpus_used(self, node: str, resource: str | None = None) -> int:
        """GPU replicas held on ``node`` by pods bound there that have not ended (any namespace); ``key``: of that
        extended resource only (``nvidia.com/gpu`` and ``nvidia.com/gpu.shared`` are counted apart, as the
        scheduler counts every extended resource by its name)."""
        used = 0
        for key, obj in list(self.km.objects.items()):
            if not is_resource(key[0], "v1/pods") or obj.deleted:
                continue
            pod = obj.raw
            if pod.get("spec", {}).get("nodeName") != node:
                continue
            if key[2] in self.terminated or o_phase(pod) in ("Succeeded", "Failed"):
                continue
            for c in pod["spec"].get("containers") or []:
                used += sum(int(v) for k, v in ((c.get("resources") or {}).get("limits") or {}).items()
                            if k in GPU_KEYS and (resource is None or k == resource))
        return used

    def requested(self, node: str) -> dict[str, float]:
        """CPU (cores), memory (bytes) and pods requested on ``node`` by pods bound there that have not ended."""
        out = {"cpu": 0.0, "memory": 0.0, "pods": 0.0}
        for key, obj in list(self.km.objects.items()):
            if not is_resource(key[0], "v1/pods") or obj.deleted:
                continue
            pod = obj.raw
            if pod.get("spec", {}).get("nodeName") != node:
                continue
            if key[2] in self.terminated or o_phase(pod) in ("Succeeded", "Failed"):
                continue
            want = pod_requests(pod["spec"])
            for k in out:
                out[k] += want[k]
        return out

    def _place(self, spec: dict[str, Any]) -> str | None:
        """The scheduler's node filter: ``nodeSelector`` on labels, node affinity ``matchFields`` on the name,
        taints the pod does not tolerate (NoSchedule, NoExecute), free GPU replicas, and, as kube-scheduler's
        NodeResourcesFit plugin (pkg/scheduler/framework/plugins/noderesources/fit.go, ``fitsRequest``) does,
        the node's allocatable CPU, memory and pods against what its pods request ("Insufficient cpu",
        "Insufficient memory", "Too many pods"). ``unfit`` keeps the last reason, for the pod's condition."""
        self.unfit = INSUFFICIENT
        names = None
        terms = (((spec.get("affinity") or {}).get("nodeAffinity") or {})
                 .get("requiredDuringSchedulingIgnoredDuringExecution") or {}).get("nodeSelectorTerms") or []
        for term in terms:
            for f in term.get("matchFields") or []:
                if f["key"] == "metadata.name" and f["operator"] == "In":
                    names = set(f["values"])
        for name, node in sorted(self.live("v1/nodes").items()):
            labels = node["metadata"].get("labels") or {}
            if names is not None and name not in names:
                continue
            if not all(labels.get(k) == v for k, v in (spec.get("nodeSelector") or {}).items()):
                continue
            tols = spec.get("tolerations") or []
            if any(t.get("effect") in ("NoSchedule", "NoExecute") and not any(
                    (not tol.get("effect") or tol["effect"] == t["effect"])
                    and ((not tol.get("key") and tol.get("operator") == "Exists") or (
                        tol.get("key") == t.get("key") and (tol.get("operator") == "Exists"
                                                            or tol.get("value") == t.get("value"))))
                    for tol in tols) for t in node.get("spec", {}).get("taints") or []):
                continue
            alloc = node["status"]["allocatable"]
            short_gpu = False
            for key in GPU_KEYS:  # each extended resource by its own name (NodeResourcesFit: "Insufficient <name>")
                want = sum(int(v) for c in spec.get("containers") or []
                           for k, v in ((c.get("resources") or {}).get("limits") or {}).items() if k == key)
                if want and self.gpus_used(name, key) + want > int(alloc.get(key, 0)):
                    short_gpu = True
                    self.unfit = INSUFFICIENT.replace("nvidia.com/gpu", key)
            if short_gpu:
                continue
            asks, used = pod_requests(spec), self.requested(name)
            room = {k: alloc.get(k, "110" if k == "pods" else None) for k in ("pods", "cpu", "memory")}
            short = [what for what, key in (("Too many pods", "pods"), ("Insufficient cpu", "cpu"),
                                            ("Insufficient memory", "memory"))
                     if room[key] is not None and used[key] + asks[key] > quantity(room[key])]
            if short:
                self.unfit = (f"0/1 nodes are available: 1 {short[0]}. preemption: 0/1 nodes are available: 1 No "
                              "preemption victims found for incoming pod.")
                continue
            return name
        return None

    def _go_visible(self, pod: dict[str, Any], worker: FakeWorker) -> str:
        """What the pod's go file (a downwardAPI volume of its ``kts/start-at`` annotation) shows now: each change of
        the annotation reaches it ``go_delay`` after the API server stored it (the kubelet syncs the pod on it)."""
        vol = next((v for v in pod["spec"].get("volumes", []) if v.get("downwardAPI")), None)
        if vol is None:
            return ""
        name = pod["metadata"]["name"]
        text = (pod["metadata"].get("annotations") or {}).get(ANN_START, "")
        if not text:
            return ""
        if self._go_seen_api.get(name, ("",))[0] != text:
            self._go_seen_api[name] = (text, self.clock.t)
            self.go_delays[name] = self.go_delay_of.get(worker.tenant, self.go_delay(self.rng))
        if self.clock.t >= self._go_seen_api[name][1] + self.go_delays[name]:
            self._go_shown[name] = text
        return self._go_shown.get(name, "")

    def _read_go(self, pod: dict[str, Any], worker: FakeWorker, now: float, mode: str) -> None:
        """The worker's start, once its go file shows it."""
        text = self._go_visible(pod, worker)
        if not text:
            return
        start = int(json.loads(text)[worker.tenant]) / 1e9
        if mode == "late" and now < start + 3.0:
            return  # the go reaches this pod 3 s after its start
        worker.start_at, worker.go_seen = start, now

    def disrupt(self, tenant: str, reason: str = "PreemptionByScheduler",
                message: str = "Preempted by pod 1a2b on node gpu-1") -> None:
        """The tenant's running pod gets ``DisruptionTarget`` (a preemption, or ``EvictionByEvictionAPI``: a
        drain) and is stopped (exit 143)."""
        self.disrupted[tenant] = (reason, message)

    async def _terminate(self, pod_name: str, code: int, reason: str, started: str | None, finished: str) -> None:
        self.terminated.add(pod_name)
        self.exited_at.setdefault(pod_name, self.clock.t)
        self.exit_codes.setdefault(pod_name, code)
        await self._http("patch", f"/api/v1/namespaces/{self.ns}/pods/{pod_name}", {"status": {
            "phase": "Succeeded" if code == 0 else "Failed", "containerStatuses": [{
                "name": "worker", "ready": False, "state": {"terminated": {
                    "exitCode": code, "reason": reason, "startedAt": started, "finishedAt": finished}}}]}})

    # --- logs, as the kubelet serves them through the API server
    async def _serve_log(self, request: Any) -> Any:
        name = request.name
        pod = self.live("v1/pods").get(name)
        if pod is None:
            # a deleted pod's log is gone (as on a real cluster): only what was streamed before remains
            raise kmock.KubernetesError(404, "NotFound", f'pods "{name}" not found')
        if pod["spec"].get("nodeName") in self.lost_nodes:
            raise kmock.KubernetesError(500, "InternalError", f'Get "https://{pod["spec"]["nodeName"]}:10250/'
                                                              f'containerLogs/{self.ns}/{name}/worker": dial tcp: '
                                                              "i/o timeout")
        if name not in self.logs:
            raise kmock.KubernetesError(400, "BadRequest", f'container "worker" in pod "{name}" is waiting '
                                                           "to start: ContainerCreating")
        if str(request.params.get("follow", "")).lower() != "true":
            return self.logs[name][self.rotated.get(name, 0):]  # the current file only, as the kubelet serves it
        return self._follow(name)

    async def _follow(self, name: str) -> Any:
        """A followed log: the current file from its start, then each new line as it is printed (across a
        rotation, as the kubelet follows one), until the container ends or the connection drops."""
        sent = self.rotated.get(name, 0)
        yield b""
        while not self.stopping:
            if name in self.cut_follows and sent > self.rotated.get(name, 0):
                self.cut_follows.discard(name)
                return  # past the rotation the connection drops: the client reconnects to the new file
            stall = self.stalled.get(name)
            if stall is not None and sent >= stall:
                rot = self.rotated.get(name)
                if rot is not None and sent < rot:  # rotated while this connection hung: it drops, the tail unread
                    self.cut_follows.discard(name)
                    return
                if rot is None:  # hung: nothing more arrives on this connection
                    if self.live("v1/pods").get(name) is None or name in self.terminated:
                        return
                    await asyncio.sleep(self.tick_s)
                    continue
            data = self.logs.get(name, b"")
            if name in self.stalled and name not in self.rotated:
                data = data[:self.stalled[name]]
            lag = self.log_lag_s.get(getattr(self.workers.get(name), "tenant", ""), 0.0)
            if lag and name not in self.terminated:  # only what was printed ``lag`` ago has arrived
                data = data[:max([0, *(n for t, n in self._log_history.get(name, []) if t <= self.clock.t - lag)])]
            if len(data) > sent:
                yield data[sent:]
                sent = len(data)
            pod = self.live("v1/pods").get(name)
            if pod is None or name in self.terminated or pod["spec"].get("nodeName") in self.lost_nodes:
                if len(self.logs.get(name, b"")) == sent:
                    return
                continue
            await asyncio.sleep(self.tick_s)


class FakeExporter:
    """dcgm-exporter on one node, its ``/metrics`` page rendered as upstream renders it
    (internal/pkg/rendermetrics/render_metrics.go: ``gpu``, ``UUID``, ``pci_bus_id``, ``device``, ``modelName``,
    ``Hostname``, then the pod attributes) from the emulated cluster's pods on ``node``.

    * ``virtual_gpus`` is KUBERNETES_VIRTUAL_GPUS (default false in pkg/cmd/app.go): false maps the device to ONE
      pod, the last one listed (internal/pkg/transformation/kubernetes.go, ``toDeviceToPod``: a
      ``map[string]PodInfo`` overwritten per pod); true gives every pod holding a replica its own series with a
      ``vgpu`` label (``toDeviceToSharingPods``).
    * ``collect_s`` is DCGM_EXPORTER_INTERVAL (default 30000 ms): between two collections the page repeats the
      last one (its values change only at a collection), real seconds here (the scraper runs on the real clock).
    * ``hostname``/``uuid``: what the page says (a Service may answer from another node's exporter).
    """

    def __init__(self, cluster: FakeCluster, node: str, *, hostname: str | None = None, uuid: str = "GPU-fake-0",
                 virtual_gpus: bool = True, collect_s: float = 0.2) -> None:
        self.cluster, self.node, self.hostname, self.uuid = cluster, node, hostname or node, uuid
        self.virtual_gpus, self.collect_s = virtual_gpus, collect_s
        self.t0 = time.monotonic()

    def pods(self) -> list[tuple[str, str]]:
        """(namespace, pod) of every running pod on the node holding a GPU replica, in the kubelet's order."""
        out = []
        for key, obj in sorted(list(self.cluster.km.objects.items()), key=lambda kv: str(kv[0][1:])):
            if not is_resource(key[0], "v1/pods") or obj.deleted:
                continue
            pod = obj.raw
            if pod.get("spec", {}).get("nodeName") != self.node:
                continue
            if key[2] in self.cluster.terminated or o_phase(pod) in ("Succeeded", "Failed"):
                continue
            if any(k in GPU_KEYS for c in pod["spec"].get("containers") or []
                   for k in ((c.get("resources") or {}).get("limits") or {})):
                out.append((key[1], key[2]))
        return out

    def page(self) -> str:
        n = int((time.monotonic() - self.t0) / self.collect_s)  # the collection being served
        base = (f'gpu="0",UUID="{self.uuid}",pci_bus_id="00000000:18:00.0",device="nvidia0",'
                f'modelName="NVIDIA H100 80GB HBM3",Hostname="{self.hostname}"')
        pods = self.pods()
        if not self.virtual_gpus:
            pods = pods[-1:]  # the last pod listed wins
        series = [base + (f',container="worker",namespace="{ns}",pod="{name}"'
                          + (f',vgpu="{i}"' if self.virtual_gpus else "")) for i, (ns, name) in enumerate(pods)]
        lines = []
        for metric, value in (("DCGM_FI_DEV_SM_CLOCK", 1980.0), ("DCGM_FI_DEV_POWER_USAGE", 400.0 + n % 50)):
            lines.append(f"# TYPE {metric} gauge")
            lines += [f"{metric}{{{labels}}} {value}" for labels in series or [base]]
        return "\n".join(lines) + "\n"

    def handler(self) -> type:
        import http.server

        exporter = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - http.server's naming
                body = exporter.page().encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        return Handler


def quantity(text: Any) -> float:
    """A Kubernetes quantity as a number: "500m" -> 0.5, "2Gi" -> 2**31, "64" -> 64."""
    units = {"m": 1e-3, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40}
    text = str(text)
    for unit in sorted(units, key=len, reverse=True):
        if text.endswith(unit):
            return float(text[:-len(unit)]) * units[unit]
    return float(text or 0)


def pod_requests(spec: dict[str, Any]) -> dict[str, float]:
    """What a pod asks the scheduler for: each container's requests (a limit stands in for a missing request, as
    the API server defaults it), summed; one pod."""
    out = {"cpu": 0.0, "memory": 0.0, "pods": 1.0}
    for c in spec.get("containers") or []:
        res = c.get("resources") or {}
        for k in ("cpu", "memory"):
            value = (res.get("requests") or {}).get(k, (res.get("limits") or {}).get(k))
            out[k] += quantity(value) if value is not None else 0.0
    return out


def qos_class(spec: dict[str, Any]) -> str:
    """The pod's QoS class as the API server sets ``status.qosClass``: kubernetes pkg/apis/core/v1/helper/qos/qos.go,
    ``GetPodQOS``, after defaulting (pkg/apis/core/v1/defaults.go: a container's missing request defaults to its
    limit). Only cpu and memory count; quantities that are not positive are skipped; containers and init containers
    are summed; a container without both a cpu and a memory limit makes the pod not Guaranteed; BestEffort with
    no request and no limit; Guaranteed when the summed requests equal the summed limits, resource by resource,
    and as many resources have requests as have limits; Burstable otherwise."""
    requests: dict[str, float] = {}
    limits: dict[str, float] = {}
    guaranteed = True
    for c in [*(spec.get("containers") or []), *(spec.get("initContainers") or [])]:
        res = c.get("resources") or {}
        lim = {k: quantity(v) for k, v in (res.get("limits") or {}).items() if k in ("cpu", "memory")}
        req = {**lim, **{k: quantity(v) for k, v in (res.get("requests") or {}).items() if k in ("cpu", "memory")}}
        for k, v in req.items():
            if v > 0:
                requests[k] = requests.get(k, 0.0) + v
        found = set()
        for k, v in lim.items():
            if v > 0:
                found.add(k)
                limits[k] = limits.get(k, 0.0) + v
        if not {"cpu", "memory"} <= found:
            guaranteed = False
    if not requests and not limits:
        return "BestEffort"
    if guaranteed and any(k not in limits or limits[k] != v for k, v in requests.items()):
        guaranteed = False
    return "Guaranteed" if guaranteed and len(requests) == len(limits) else "Burstable"


_RESOURCE_IS: dict[tuple[int, str], tuple[Any, bool]] = {}


def is_resource(ref: Any, resource: str) -> bool:
    """``ref == resource`` for a key of kmock's object store, remembered per reference object: kmock's reference
    compares with a string through typing-protocol ``isinstance`` checks (about 0.1 ms each), which made listing the
    store the emulator's main cost (the reference is kept beside its answer, so its id is never reused)."""
    k = (id(ref), resource)
    hit = _RESOURCE_IS.get(k)
    if hit is None:
        hit = _RESOURCE_IS[k] = (ref, ref == resource)
    return hit[1]


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch (what the Python client sends for a dict body)."""
    if not isinstance(patch, dict):
        return patch
    out = dict(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = merge_patch(out.get(k), v)
    return out


def pod_patch_denied(old: dict[str, Any], new: dict[str, Any]) -> str:
    """manifests/components/narrow-pod-patch/policy.yaml's validations, in order, in Python (the emulator runs no
    CEL): the message of the first that fails, "" when the update is allowed."""
    om, nm = old.get("metadata") or {}, new.get("metadata") or {}
    if (om.get("labels") or {}).get("app.kubernetes.io/managed-by") != "kts":
        return "kts-runner may patch only the kit's own pods (app.kubernetes.io/managed-by=kts)"
    if (new.get("spec") or {}) != (old.get("spec") or {}):
        return "kts-runner may not change a pod's spec"
    if any((nm.get(k) or ({} if k == "labels" else [])) != (om.get(k) or ({} if k == "labels" else []))
           for k in ("labels", "finalizers", "ownerReferences")):
        return "kts-runner may not change a pod's labels, finalizers or owner references"
    na, oa = nm.get("annotations") or {}, om.get("annotations") or {}
    if {k: v for k, v in na.items() if k != ANN_START} != {k: v for k, v in oa.items() if k != ANN_START}:
        return "kts-runner may change one annotation of a pod only: kts/start-at (the start barrier's go)"
    return ""


def handles_sigterm(pod: dict[str, Any]) -> bool:
    """Whether the pod's process ends on SIGTERM: the kit's launcher (``python -c``, PID 1 of its container) only if
    its code installs a handler (Linux gives PID 1 no default-action signal: a placeholder without one ignores it);
    any other image is taken to handle it."""
    command = ((pod.get("spec") or {}).get("containers") or [{}])[0].get("command") or []
    launcher = next((c for c in command if "kts_placeholder" in c), None)
    return launcher is None or "signal.SIGTERM" in launcher


def _start_of(pod: dict[str, Any]) -> str:
    """``GetPodStartTime``: the pod's ``status.startTime`` (the emulated kubelet: its container's start)."""
    status = pod.get("status") or {}
    running = (((status.get("containerStatuses") or [{}])[0].get("state") or {}).get("running") or {})
    return str(status.get("startTime") or running.get("startedAt") or "9999")


def _t(stamp: str) -> float:
    return datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc).timestamp()


def job_kind(name: str) -> str:
    """A kit Job's part of the scenario, from its name: "placeholders" (``-hold``), "probe", or "tenants"."""
    return "placeholders" if name.endswith("-hold") else "probe" if name.endswith("-probe") else "tenants"


def o_phase(pod: dict[str, Any]) -> str:
    return str(pod.get("status", {}).get("phase") or "")


async def run_scenario(backend: Any, run: Run, scenario: Any, timeout_s: float = 60.0, **kw: Any) -> Any:
    """The backend's (synchronous) ``run_scenario`` in a thread, while the emulator runs on this loop."""
    return await asyncio.to_thread(backend.run_scenario, run, scenario, timeout_s=timeout_s, progress=False, **kw)


async def until(predicate: Callable[[], Any], timeout_s: float = 60.0) -> None:
    """Wait (real time, letting the emulator run) until ``predicate()`` holds."""
    for _ in range(int(timeout_s / 0.02)):
        if predicate():
            return
        await asyncio.sleep(0.02)
    raise AssertionError("the emulated cluster never got there")


def make_run(root: Path, workloads: tuple[str, ...] = ("fft", "gemm"), label: str = "") -> tuple[Run, ExperimentSpec]:
    spec = resolve(ExperimentParams(profile="tiny", workloads=workloads, backend="kubernetes", label=label), "cuda")
    return create_run(spec.to_dict(), {"test": True}, root=root, label=label), spec


@contextlib.asynccontextmanager
async def emulated_cluster(namespace: str = NS, *, realtime: bool = False, **kwargs: Any) -> Any:
    """An API server with a fake control plane, on the running event loop."""
    clock = FakeClock(datetime.now(timezone.utc).replace(microsecond=0), realtime=True) if realtime else FakeClock()
    async with ClusterEmulator(clock=clock) as km, kmock.Server(km), FakeCluster(km, namespace, **kwargs) as fc:
        yield fc


class EmulatorThread:
    """The emulated cluster on its own event loop in a daemon thread, for synchronous callers.

    For code that cannot share the test's loop (papermill kernels in another process, plain
    synchronous tests): ``with EmulatorThread() as emu: emu.url, emu.call(lambda fc: ...)``.
    """

    def __init__(self, namespace: str = NS, start_timeout_s: float = 30.0) -> None:
        self.namespace = namespace
        self.start_timeout_s = start_timeout_s
        self.url = ""
        self.cluster: FakeCluster | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._main, name="kmock-emulator", daemon=True)

    def _main(self) -> None:
        try:
            asyncio.run(self._serve())
        except BaseException as exc:  # noqa: BLE001 - reported to the starting thread
            self._error = exc
            self._ready.set()

    async def _serve(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        async with emulated_cluster(self.namespace, realtime=True) as fc:
            self.cluster, self.url = fc, str(fc.km.url).rstrip("/")
            self._ready.set()
            await self._stop.wait()

    def call(self, fn: Callable[[FakeCluster], T | Awaitable[T]], timeout_s: float = 10.0) -> T:
        """Run ``fn(cluster)`` on the emulator's loop (so it never races the controllers); its result."""
        assert self._loop is not None and self.cluster is not None, "emulator not started"
        cluster = self.cluster

        async def _do() -> T:
            out = fn(cluster)
            return await out if asyncio.iscoroutine(out) else out  # type: ignore[return-value]

        return asyncio.run_coroutine_threadsafe(_do(), self._loop).result(timeout_s)

    def __enter__(self) -> EmulatorThread:
        self._thread.start()
        if not self._ready.wait(self.start_timeout_s):
            raise RuntimeError(f"kmock emulator did not start within {self.start_timeout_s:.0f} s")
        if self._error is not None:
            raise RuntimeError(f"kmock emulator failed to start: {self._error!r}")
        return self

    def __exit__(self, *exc: object) -> None:
        if self._loop is not None and self._stop is not None and not self._loop.is_closed():
            with contextlib.suppress(RuntimeError):
                self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(10.0)

    def kubeconfig(self, path: Path, context: str = "kmock") -> Path:
        """A kubeconfig whose ``context`` points at the emulator."""
        return kubeconfig_file(path, self.url, context, namespace=self.namespace)


def kubeconfig_file(path: Path, server: str, context: str = "lab", namespace: str | None = None) -> Path:
    """A kubeconfig with one context for ``server`` (a dummy token: the emulator wants no credentials)."""
    import yaml

    ctx: dict[str, Any] = {"cluster": "c", "user": "u"}
    if namespace:
        ctx["namespace"] = namespace
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": context,
        "clusters": [{"name": "c", "cluster": {"server": server}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": context, "context": ctx}]}))
    return path
