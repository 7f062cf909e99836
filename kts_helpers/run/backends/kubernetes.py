"""Kubernetes backend: every tenant of a scenario is a Job; logs land where the local backend puts them.

What a tenant pays on a cluster is more than the GPU time-slice: before its first kernel a
pod may wait for *admission* (quota, e.g. Kueue), for *placement* (a node with a free GPU
replica) and for *start-up* (image pull, container creation). The API server timestamps each
step (one-second resolution), so this backend records them per pod and ``layered_waits``
turns them into a table the report shows next to the worker's own time-slice waits.

Design:

* ``KubeApi`` is the only code that talks to the API server (plain dicts in and out, one-line
  errors), so tests drive it against ``kmock``'s emulator and nothing else needs a cluster.
* Every object the kit creates carries ``app.kubernetes.io/managed-by=kts`` plus run, scenario
  and tenant labels; the kit deletes only objects whose labels it verifies itself (it never
  trusts a server-side selector alone), always with foreground propagation, also after Ctrl-C.
* All tenants of a scenario are pinned to one node (a ``kubernetes.io/hostname`` node selector,
  so the scheduler still decides and ``PodScheduled`` stays meaningful) and share one
  ``START_AT`` barrier, so they begin together on the same time-sliced GPU.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import queue
import re
import sys
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kts_helpers.errors import BackendError, KtsError, SpecError, TenantFailed
from kts_helpers.fsutil import write_new
from kts_helpers.run.backends.base import ScenarioResult, TenantResult
from kts_helpers.run.corun import DEFAULT_LEAD_IN_S, CoRunWatch, gpu_mismatch
from kts_helpers.run.runs import DEFAULT_ROOT, Run, create_run
from kts_helpers.run.spec import ExperimentParams, ExperimentSpec, ScenarioSpec, TenantSpec, resolve

if TYPE_CHECKING:
    import pandas as pd

MANAGED_BY = "app.kubernetes.io/managed-by"
MANAGED_VALUE = "kts"
LABEL_RUN = "kts.run-id"
LABEL_SCENARIO = "kts.scenario"
LABEL_TENANT = "kts.tenant"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
# Annotations keep the exact (unsanitised) values; labels are for selection only.
ANN_RUN, ANN_SCENARIO, ANN_TENANT, ANN_NODE = "kts/run-id", "kts/scenario", "kts/tenant", "kts/node"
GPU_RESOURCES = ("nvidia.com/gpu", "nvidia.com/gpu.shared")
NODE_REPLICAS = "nvidia.com/gpu.replicas"
NODE_STRATEGY = "nvidia.com/gpu.sharing-strategy"
NODE_PRODUCT = "nvidia.com/gpu.product"
NODE_COUNT = "nvidia.com/gpu.count"
CONTAINER = "worker"
STOP_GRACE_S = 30
RESOLUTION_S = 1  # API timestamps are RFC 3339 with whole seconds
# Waiting reasons after which the kubelet will not get the container running by itself.
FATAL_WAITING = {"ImagePullBackOff", "ErrImageNeverPull", "InvalidImageName", "CreateContainerConfigError",
                 "CreateContainerError", "RunContainerError", "CrashLoopBackOff"}
STRATEGY_OF = {"timeslice": "time-slicing", "mps": "mps"}

_ACTIVE_LOCK = threading.Lock()
_ACTIVE_RUNS: set[str] = set()  # run ids executing in this process (scale-out siblings are not leftovers)

_LABEL_OK = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$")


# --------------------------------------------------------------------------- names and labels

def label_value(value: str) -> str:
    """A valid label value for ``value``: invalid characters become '-', long values keep a hash."""
    clean = re.sub(r"[^A-Za-z0-9_.-]", "-", str(value))
    if len(clean) > 63 or clean != value:
        digest = hashlib.sha1(str(value).encode()).hexdigest()[:8]
        clean = clean[:54] if len(clean) > 54 else clean
        clean = f"{clean.strip('-_.')}-{digest}" if clean.strip("-_.") else digest
    clean = clean.strip("-_.")
    if not _LABEL_OK.match(clean):  # pragma: no cover - defensive, the rules above guarantee it
        raise SpecError(f"cannot turn {value!r} into a Kubernetes label value")
    return clean


def job_name(run_id: str, scenario: str, tenant: str) -> str:
    """A DNS-1123 name, unique per (run, scenario, tenant), short enough for the pod-name suffix."""
    slug = re.sub(r"[^a-z0-9]+", "-", f"{scenario}-{tenant}".lower()).strip("-")
    digest = hashlib.sha1(f"{run_id}\0{scenario}\0{tenant}".encode()).hexdigest()[:6]
    return f"kts-{slug[:40].strip('-')}-{digest}"


def parse_selector(selector: str | Mapping[str, str] | None) -> dict[str, str | None]:
    """Parse ``k=v,k2,!k3`` (or a mapping) into {key: value | None (exists) | '!' (absent)}."""
    if not selector:
        return {}
    if isinstance(selector, Mapping):
        return {str(k): str(v) for k, v in selector.items()}
    out: dict[str, str | None] = {}
    for part in (p.strip() for p in str(selector).split(",")):
        if not part:
            continue
        if re.search(r"\s(in|notin)\s*\(", part) or "!=" in part:
            raise SpecError(f"node selector {selector!r}: only k=v, k and !k terms are supported")
        if part.startswith("!"):
            out[part[1:].strip()] = "!"
        elif "=" in part:
            k, v = part.replace("==", "=").split("=", 1)
            out[k.strip()] = v.strip()
        else:
            out[part] = None
    for k in out:
        if not k or " " in k:
            raise SpecError(f"node selector {selector!r}: invalid term {k!r}")
    return out


def selector_string(terms: Mapping[str, str | None]) -> str:
    return ",".join(f"!{k}" if v == "!" else k if v is None else f"{k}={v}" for k, v in terms.items())


def labels_match(labels: Mapping[str, str], terms: Mapping[str, str | None]) -> bool:
    """Client-side check of a selector: the kit never relies on the server having applied it."""
    for k, v in terms.items():
        if v == "!":
            if k in labels:
                return False
        elif v is None:
            if k not in labels:
                return False
        elif labels.get(k) != v:
            return False
    return True


def is_kts_object(obj: Mapping[str, Any], run_id: str | None = None, scenario: str | None = None) -> bool:
    """True only for objects the kit labelled itself (and, if given, of that run / scenario)."""
    meta = obj.get("metadata") or {}
    labels = meta.get("labels") or {}
    ann = meta.get("annotations") or {}
    if labels.get(MANAGED_BY) != MANAGED_VALUE or LABEL_RUN not in labels:
        return False
    if run_id is not None and (labels.get(LABEL_RUN) != label_value(run_id) or ann.get(ANN_RUN, run_id) != run_id):
        return False
    return scenario is None or (labels.get(LABEL_SCENARIO) == label_value(scenario)
                                and ann.get(ANN_SCENARIO, scenario) == scenario)


# --------------------------------------------------------------------------- time stamps

def parse_time(value: str | None) -> float | None:
    """RFC 3339 (``2024-05-01T12:00:00Z``) to epoch seconds; None stays None."""
    if not value:
        return None
    text = str(value).strip().replace("Z", "+00:00")
    try:
        dt = datetime.fromisoformat(text)
    except ValueError:
        return None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=timezone.utc)
    return dt.timestamp()


def _diff(later: float | None, earlier: float | None) -> float | None:
    return None if later is None or earlier is None else max(0.0, later - earlier)


def waits_from_events(ev: Mapping[str, Any]) -> dict[str, float | None]:
    """The four layers of waiting for one tenant, from its recorded API timestamps (seconds)."""
    t = {k: parse_time(ev.get(k)) for k in ("job_created", "admitted", "pod_created", "scheduled",
                                             "container_started", "container_finished")}
    return {
        "admission_wait_s": _diff(t["admitted"], t["job_created"]) if ev.get("queue") else None,
        "placement_wait_s": _diff(t["scheduled"], t["pod_created"]),
        "startup_s": _diff(t["container_started"], t["scheduled"]),
        "run_s": _diff(t["container_finished"], t["container_started"]),
    }


# --------------------------------------------------------------------------- the API layer

class KubeForbidden(BackendError):
    """RBAC refused a request; names the verb and resource so the Role can be fixed."""

    def __init__(self, verb: str, resource: str, namespace: str | None, detail: str):
        self.verb, self.resource, self.namespace = verb, resource, namespace
        where = f" in namespace {namespace!r}" if namespace else " (cluster-wide)"
        super().__init__(f"Kubernetes RBAC forbids {verb!r} on {resource!r}{where}: {detail}; "
                         "apply manifests/base (Role kts-runner, ClusterRole kts-node-reader) or ask an admin")


class KubeApiError(BackendError):
    """Any other API error; keeps the HTTP status so callers can tolerate e.g. 400 on logs."""

    def __init__(self, status: int, message: str):
        self.status = status
        super().__init__(message)


def _status_message(body: Any) -> str:
    try:
        data = json.loads(body)
        return str(data.get("message") or data.get("reason") or "").splitlines()[0][:300]
    except (TypeError, ValueError, AttributeError, IndexError):
        return str(body or "").strip().splitlines()[0][:300] if body else ""


class KubeApi:
    """The only place that calls the API server: JSON dicts in and out, one-line errors."""

    def __init__(self, api_client: Any, namespace: str, *, context: str = "",
                 request_timeout: tuple[float, float] = (5.0, 30.0)):
        from kubernetes import client

        self.api_client = api_client
        self.namespace = namespace
        self.context = context
        self.timeout = request_timeout
        self.core = client.CoreV1Api(api_client)
        self.batch = client.BatchV1Api(api_client)
        self.custom = client.CustomObjectsApi(api_client)

    @property
    def host(self) -> str:
        return str(getattr(self.api_client.configuration, "host", "?"))

    def _call(self, verb: str, resource: str, fn: Callable[..., Any], *args: Any, namespaced: bool = True,
              missing_ok: bool = False, **kwargs: Any) -> bytes | None:
        import urllib3
        from kubernetes.client.exceptions import ApiException

        kwargs.setdefault("_request_timeout", self.timeout)
        try:
            resp = fn(*args, _preload_content=False, **kwargs)
            return bytes(resp.data)
        except ApiException as exc:
            if exc.status == 404 and missing_ok:
                return None
            detail = _status_message(exc.body) or str(exc.reason)
            ns = self.namespace if namespaced else None
            if exc.status == 403:
                raise KubeForbidden(verb, resource, ns, detail) from None
            if exc.status == 401:
                raise BackendError(f"the Kubernetes API at {self.host} (context {self.context!r}) rejected the "
                                   f"credentials (401): {detail}") from None
            raise KubeApiError(exc.status, f"Kubernetes API error {exc.status} on {verb} {resource}: {detail}") from None
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            reason = getattr(exc, "reason", None) or exc
            raise BackendError(f"cannot reach the Kubernetes API at {self.host} (context {self.context!r}): "
                               f"{str(reason).splitlines()[0][:200]}") from None

    def _json(self, data: bytes | None) -> dict[str, Any]:
        return json.loads(data) if data else {}

    def _items(self, data: bytes | None) -> list[dict[str, Any]]:
        return list(self._json(data).get("items") or [])

    # --- nodes
    def list_nodes(self, label_selector: str = "") -> list[dict[str, Any]]:
        return self._items(self._call("list", "nodes", self.core.list_node, namespaced=False,
                                      label_selector=label_selector))

    def read_node(self, name: str) -> dict[str, Any]:
        return self._json(self._call("get", "nodes", self.core.read_node, name, namespaced=False))

    # --- jobs
    def create_job(self, body: dict[str, Any]) -> dict[str, Any]:
        return self._json(self._call("create", "jobs.batch", self.batch.create_namespaced_job, self.namespace, body))

    def list_jobs(self, label_selector: str) -> list[dict[str, Any]]:
        return self._items(self._call("list", "jobs.batch", self.batch.list_namespaced_job, self.namespace,
                                      label_selector=label_selector))

    def delete_job(self, name: str, grace_s: int = 5) -> bool:
        """Delete with foreground propagation: the Job disappears only after its pods are gone.

        Its pods get SIGTERM and ``grace_s`` to end; deleting the Job (not its pod) means the Job
        controller creates no replacement pod.
        """
        data = self._call("delete", "jobs.batch", self.batch.delete_namespaced_job, name, self.namespace,
                          missing_ok=True, propagation_policy="Foreground", grace_period_seconds=grace_s)
        return data is not None

    # --- pods
    def list_pods(self, label_selector: str) -> list[dict[str, Any]]:
        return self._items(self._call("list", "pods", self.core.list_namespaced_pod, self.namespace,
                                      label_selector=label_selector))

    def delete_pod(self, name: str) -> bool:
        data = self._call("delete", "pods", self.core.delete_namespaced_pod, name, self.namespace,
                          missing_ok=True, grace_period_seconds=5)
        return data is not None

    def read_pod_log(self, name: str) -> bytes | None:
        """The container's merged stdout/stderr; None when there is none (never started, gone)."""
        try:
            return self._call("get", "pods/log", self.core.read_namespaced_pod_log, name, self.namespace,
                              container=CONTAINER, missing_ok=True)
        except KubeApiError as exc:
            if exc.status == 400:  # "container ... is waiting to start": there is no log yet
                return None
            raise

    def open_log_stream(self, name: str, read_timeout_s: float = 60.0) -> Any | None:
        """A ``follow=true`` stream of the container's log (an urllib3 response, from the first byte on);
        None while there is none yet (container waiting to start) or any more (pod gone)."""
        try:
            return self.core.read_namespaced_pod_log(name, self.namespace, container=CONTAINER, follow=True,
                                                     _preload_content=False,
                                                     _request_timeout=(self.timeout[0], read_timeout_s))
        except Exception as exc:  # noqa: BLE001 - ApiException, connection errors: the caller retries
            status = getattr(exc, "status", None)
            if status == 403:
                raise KubeForbidden("get", "pods/log", self.namespace,
                                    _status_message(getattr(exc, "body", ""))) from None
            return None

    def list_events(self, kind: str, name: str) -> list[dict[str, Any]]:
        """Events of one object (optional: an empty list when RBAC does not allow it)."""
        try:
            items = self._items(self._call("list", "events", self.core.list_namespaced_event, self.namespace,
                                           field_selector=f"involvedObject.name={name}"))
        except KubeForbidden:
            return []
        return [e for e in items if (e.get("involvedObject") or {}).get("name") == name
                and (e.get("involvedObject") or {}).get("kind", kind) == kind]

    def list_workloads(self) -> list[dict[str, Any]]:
        """Kueue Workloads of the namespace (v1beta1, then v1beta2); [] without Kueue or RBAC."""
        for version in ("v1beta1", "v1beta2"):
            try:
                data = self._call("list", "workloads.kueue.x-k8s.io", self.custom.list_namespaced_custom_object,
                                  "kueue.x-k8s.io", version, self.namespace, "workloads", missing_ok=True)
            except KubeForbidden:
                return []
            if data is not None:
                return self._items(data)
        return []

    def wait_pods_changed(self, label_selector: str, known: Mapping[str, str], timeout_s: float,
                          relevant: Callable[[Mapping[str, Any]], bool] = lambda obj: True) -> bool:
        """Watch the scenario's pods until one differs from ``known`` (name -> fingerprint) or time out.

        Used as a wake-up only: the caller re-lists afterwards, so a watch that expires,
        is cut by a proxy or replays old objects (410, emulators) costs nothing but a loop.
        """
        from kubernetes import watch

        if timeout_s <= 0:
            return False
        w = watch.Watch()
        deadline = time.monotonic() + timeout_s
        try:
            for ev in w.stream(self.core.list_namespaced_pod, self.namespace, label_selector=label_selector,
                               timeout_seconds=max(1, int(timeout_s + 0.999)), deserialize=False,
                               _request_timeout=(self.timeout[0], timeout_s)):
                obj = ev.get("raw_object") or ev.get("object") or {}
                name = (obj.get("metadata") or {}).get("name", "")
                if not relevant(obj):
                    pass
                elif ev.get("type") == "DELETED" or known.get(name) != fingerprint(obj):
                    return True
                if time.monotonic() >= deadline:
                    return False
        except Exception:  # noqa: BLE001 - a broken watch only means "look again"
            remaining = deadline - time.monotonic()
            if remaining > 0:
                time.sleep(min(remaining, 0.5))
        finally:
            w.stop()
        return False


def fingerprint(obj: Mapping[str, Any]) -> str:
    rv = (obj.get("metadata") or {}).get("resourceVersion")
    if rv and rv != "...":
        return str(rv)
    return hashlib.sha1(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()


def load_api_client(kubeconfig: str | os.PathLike | None = None, context: str | None = None) -> tuple[Any, str]:
    """An ApiClient from a kubeconfig (or the in-cluster service account) and the context's name."""
    from kubernetes import config

    in_cluster = bool(os.environ.get("KUBERNETES_SERVICE_HOST")) and kubeconfig is None and context is None
    paths = [Path(p).expanduser() for p in (str(kubeconfig) if kubeconfig else
                                             os.environ.get("KUBECONFIG", "~/.kube/config")).split(os.pathsep) if p]
    have_file = any(p.is_file() for p in paths)
    if in_cluster and not have_file:
        try:
            config.load_incluster_config()
        except config.ConfigException as exc:
            raise BackendError(f"cannot load the in-cluster Kubernetes config: {exc}") from None
        from kubernetes import client

        return client.ApiClient(), "in-cluster"
    shown = os.pathsep.join(str(p) for p in paths) or "~/.kube/config"
    if not have_file:
        raise BackendError(f"no kubeconfig found at {shown} (context {context or '(current)'!r}) and not running "
                           "inside a cluster; set KUBECONFIG or pass kubeconfig=...")
    cfg_file = os.pathsep.join(str(p) for p in paths if p.is_file())
    try:
        contexts, active = config.list_kube_config_contexts(cfg_file)
        name = context or (active or {}).get("name", "")
        if context and context not in [c.get("name") for c in contexts or []]:
            known = ", ".join(sorted(str(c.get("name")) for c in contexts or [])) or "none"
            raise BackendError(f"context {context!r} is not in kubeconfig {shown}; it has: {known}")
        api_client = config.new_client_from_config(config_file=cfg_file, context=context)
    except BackendError:
        raise
    except Exception as exc:  # ConfigException, YAML errors, missing cert files ...
        raise BackendError(f"cannot load context {context or '(current)'!r} from kubeconfig {shown}: "
                           f"{str(exc).splitlines()[0] if str(exc) else type(exc).__name__}") from None
    return api_client, name or "(current)"


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

    @property
    def sentence(self) -> str:
        return f"Kubernetes sees {self.allocatable} GPUs; the node has {self.physical}"

    def sharing_note(self) -> str:
        return (f"node {self.name}: allocatable {self.resource}={self.allocatable}, "
                f"{NODE_REPLICAS}={self.replicas if self.replicas is not None else 'unset'}, "
                f"{NODE_STRATEGY}={self.strategy or 'unset'}")


def _int(value: Any) -> int | None:
    try:
        return int(str(value))
    except (TypeError, ValueError):
        return None


def node_info(node: Mapping[str, Any], resource: str | None = None) -> NodeInfo | None:
    """Read a node's GPU state; None if it advertises no NVIDIA GPU."""
    meta = node.get("metadata") or {}
    labels = dict(meta.get("labels") or {})
    alloc = (node.get("status") or {}).get("allocatable") or {}
    candidates = [resource] if resource else [r for r in reversed(GPU_RESOURCES) if (_int(alloc.get(r)) or 0) > 0]
    if not candidates:
        return None
    res = candidates[0]
    n = _int(alloc.get(res)) or 0
    if n <= 0 and not resource:
        return None
    replicas = _int(labels.get(NODE_REPLICAS))
    physical = _int(labels.get(NODE_COUNT))
    if physical is None:
        physical = n // replicas if replicas and replicas > 0 and n >= replicas else n
    return NodeInfo(name=str(meta.get("name", "?")), resource=res, allocatable=n, physical=physical,
                    replicas=replicas, strategy=labels.get(NODE_STRATEGY), product=labels.get(NODE_PRODUCT),
                    schedulable=not (node.get("spec") or {}).get("unschedulable", False), labels=labels)


# --------------------------------------------------------------------------- Job manifests

def build_job(*, run_id: str, scenario: ScenarioSpec, tenant: TenantSpec, namespace: str, image: str,
              node: str, start_at_ns: int, gpu_resource: str = "nvidia.com/gpu",
              node_selector: Mapping[str, str | None] | None = None, queue_name: str | None = None,
              service_account: str | None = None, memory_limit: str = "8Gi", active_deadline_s: int = 3600,
              image_pull_policy: str = "IfNotPresent", ttl_s: int = 3600,
              runtime_class: str | None = None, lead_in_s: float = DEFAULT_LEAD_IN_S,
              pad_limit_s: float = 3600.0) -> dict[str, Any]:
    """The Job for one tenant: hardened like manifests/components/hardened-worker, pinned to ``node``.

    Tenants of a shared scenario pad (``KTS_PAD``) until the backend deletes the Jobs, once every tenant
    has finished its timed iterations; ``KTS_PAD_LIMIT_S`` is the worker's own backstop.
    """
    labels = {MANAGED_BY: MANAGED_VALUE, "app.kubernetes.io/name": "kts-worker",
              LABEL_RUN: label_value(run_id), LABEL_SCENARIO: label_value(scenario.name),
              LABEL_TENANT: label_value(tenant.name)}
    annotations = {ANN_RUN: run_id, ANN_SCENARIO: scenario.name, ANN_TENANT: tenant.name, ANN_NODE: node}
    env = dict(tenant.env())
    env.update({"START_AT": str(int(start_at_ns)), "DEVICE": "cuda", "HOME": "/scratch", "TMPDIR": "/scratch",
                "CUDA_CACHE_PATH": "/scratch/.nv", "PYTHONUNBUFFERED": "1",
                "KTS_LEAD_IN_S": repr(float(lead_in_s) if scenario.kind != "calibration" else 0.0),
                "KTS_PAD": "1" if scenario.kind == "shared" and len(scenario.tenants) > 1 else "0",
                "KTS_PAD_LIMIT_S": repr(float(pad_limit_s))})
    selector = {k: v for k, v in (node_selector or {}).items() if v not in (None, "!")}
    selector["kubernetes.io/hostname"] = node
    job_labels = dict(labels)
    if queue_name:
        job_labels[QUEUE_LABEL] = queue_name
    pod_spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
        "terminationGracePeriodSeconds": STOP_GRACE_S,  # SIGTERM: the worker finishes its iteration and exits
        "nodeSelector": selector,
        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
        "securityContext": {"runAsNonRoot": True, "runAsUser": 10001, "runAsGroup": 10001, "fsGroup": 10001,
                            "seccompProfile": {"type": "RuntimeDefault"}},
        "containers": [{
            "name": CONTAINER,
            "image": image,
            "imagePullPolicy": image_pull_policy,
            "env": [{"name": k, "value": v} for k, v in env.items()],
            "resources": {"requests": {"cpu": str(max(1, tenant.threads)), "memory": "1Gi"},
                          "limits": {"memory": memory_limit, gpu_resource: "1"}},
            "securityContext": {"runAsNonRoot": True, "allowPrivilegeEscalation": False, "privileged": False,
                                "readOnlyRootFilesystem": True, "capabilities": {"drop": ["ALL"]},
                                "seccompProfile": {"type": "RuntimeDefault"}},
            "volumeMounts": [{"name": "scratch", "mountPath": "/scratch"}],
        }],
        "volumes": [{"name": "scratch", "emptyDir": {"sizeLimit": "1Gi"}}],
    }
    if service_account:
        pod_spec["serviceAccountName"] = service_account
    if runtime_class:
        pod_spec["runtimeClassName"] = runtime_class  # e.g. "nvidia" on K3s without the GPU Operator
    spec: dict[str, Any] = {
        "backoffLimit": 0,  # a failed tenant is a failed measurement: never retry silently
        "completions": 1,
        "parallelism": 1,
        "activeDeadlineSeconds": int(active_deadline_s),  # server-side guard if the client dies
        "ttlSecondsAfterFinished": int(ttl_s),  # ... and garbage collection if cleanup never ran
        "template": {"metadata": {"labels": dict(labels), "annotations": dict(annotations)}, "spec": pod_spec},
    }
    if queue_name:
        spec["suspend"] = True  # Kueue un-suspends it on admission
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": job_name(run_id, scenario.name, tenant.name), "namespace": namespace,
                         "labels": job_labels, "annotations": annotations},
            "spec": spec}


# --------------------------------------------------------------------------- pod state

@dataclass
class PodState:
    """The part of a pod's status that decides what the backend does next."""

    phase: str = "NoPod"
    done: bool = False
    failed: bool = False
    exit_code: int | None = None
    reason: str = ""
    unschedulable: str = ""  # the scheduler's message while the pod cannot be placed
    summary: str = "waiting for a pod"


def _condition(obj: Mapping[str, Any], kind: str) -> dict[str, Any]:
    for c in (obj.get("status") or {}).get("conditions") or []:
        if c.get("type") == kind:
            return dict(c)
    return {}


def _container_status(pod: Mapping[str, Any]) -> dict[str, Any]:
    for cs in (pod.get("status") or {}).get("containerStatuses") or []:
        if cs.get("name") == CONTAINER:
            return dict(cs)
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    return dict(statuses[0]) if statuses else {}


def pod_state(job: Mapping[str, Any] | None, pod: Mapping[str, Any] | None) -> PodState:
    """Classify a tenant from its Job and pod: still waiting, done, or failed (and why)."""
    if job is not None:
        failed = _condition(job, "Failed")
        if failed.get("status") == "True":
            why = failed.get("reason") or "JobFailed"
            return PodState("Failed", True, True, None, f"Job failed: {why}: {failed.get('message', '')}".strip(": "),
                            summary=f"job failed ({why})")
        if _condition(job, "Complete").get("status") == "True" and pod is None:
            return PodState("Succeeded", True, False, 0, "", summary="completed (pod already gone)")
        if (job.get("spec") or {}).get("suspend") and pod is None:
            return PodState("Queued", summary="waiting for admission (Job suspended)")
    if pod is None:
        return PodState()
    status = pod.get("status") or {}
    phase = status.get("phase") or "Pending"
    cs = _container_status(pod)
    state = cs.get("state") or {}
    term = state.get("terminated")
    if term:
        code = _int(term.get("exitCode"))
        why = term.get("reason") or ("Completed" if code == 0 else "Error")
        if code == 0:
            return PodState(phase, True, False, 0, "", summary="completed")
        msg = f"{why} (exit code {code})" + (f": {term['message'].strip()[:200]}" if term.get("message") else "")
        return PodState(phase, True, True, code, msg, summary=f"terminated: {why}")
    if phase == "Succeeded":
        return PodState(phase, True, False, 0, "", summary="completed")
    if phase == "Failed":
        why = status.get("reason") or "Failed"
        return PodState(phase, True, True, None, f"{why}: {status.get('message', '')}".strip(": "),
                        summary=f"failed: {why}")
    waiting = state.get("waiting")
    if waiting and waiting.get("reason") in FATAL_WAITING:
        why = waiting["reason"]
        msg = (waiting.get("message") or "").strip().splitlines()
        return PodState(phase, True, True, None, f"{why}: {msg[0][:200]}" if msg else why, summary=why)
    sched = _condition(pod, "PodScheduled")
    if sched.get("status") == "False":
        msg = sched.get("message") or sched.get("reason") or "unschedulable"
        return PodState(phase, unschedulable=msg, summary=f"Pending: {msg[:120]}")
    if state.get("running"):
        return PodState(phase, summary="running")
    if waiting:
        return PodState(phase, summary=f"waiting: {waiting.get('reason', '')}")
    return PodState(phase, summary=phase.lower())


# --------------------------------------------------------------------------- pod logs, live

class PodLogStream:
    """Follows one pod's log while it runs (a thread), so no line is lost when the pod is stopped and gone.

    The API serves a followed log from its first byte; after a dropped connection the stream is
    opened again and the bytes already held are skipped (the log only grows). ``finish()`` says the
    container has ended or its Job was deleted: the stream then reads to the end once more and stops.
    """

    def __init__(self, api: KubeApi, pod: str, retry_s: float = 0.2) -> None:
        self.api, self.pod, self.retry_s = api, pod, retry_s
        self._buf = bytearray()
        self._taken = 0
        self._lock = threading.Lock()
        self._finishing = threading.Event()
        self.done = threading.Event()
        self.error = ""
        self._thread = threading.Thread(target=self._main, name=f"kts-log-{pod}", daemon=True)
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
        seen = 0
        try:
            for chunk in resp.stream(1 << 16, decode_content=False):
                with self._lock:
                    have = len(self._buf)
                    if seen + len(chunk) > have:
                        self._buf += chunk[max(0, have - seen):]
                seen += len(chunk)
        except Exception:  # noqa: BLE001 - a dropped connection: the caller opens the stream again
            pass
        finally:
            with contextlib.suppress(Exception):
                resp.release_conn()

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


# --------------------------------------------------------------------------- the backend

@dataclass
class _Live:
    """What a scenario's watch loop follows while it runs: the pods' logs and the co-running watch."""

    watch: CoRunWatch
    pad: bool  # shared: tenants pad until stopped
    streams: dict[str, PodLogStream] = field(default_factory=dict)
    last_pods: dict[str, dict[str, Any]] = field(default_factory=dict)
    stopped_ns: int | None = None

    def follow(self, api: KubeApi, pods: Mapping[str, dict[str, Any]], states: Mapping[str, PodState],
               retry_s: float) -> None:
        """Start a stream for each new pod, feed the watch what arrived, finish streams of ended containers."""
        for tenant, pod in pods.items():
            self.last_pods[tenant] = pod
            name = (pod.get("metadata") or {}).get("name")
            stream = self.streams.get(tenant)
            if name and (stream is None or stream.pod != name):
                self.streams[tenant] = stream = PodLogStream(api, name, retry_s=min(retry_s, 1.0))
            if stream is not None and states[tenant].done:
                stream.finish(0.0)
        for tenant, stream in self.streams.items():
            self.watch.feed(tenant, stream.take())


@dataclass
class _Failure:
    tenant: str
    exit_code: int | None
    reason: str


class KubernetesBackend:
    """Runs each tenant of a scenario as a Job on one GPU node and collects logs and layered waits.

    ``namespace``/``image``: where the Jobs go and what they run. ``kubeconfig``/``context``: which
    cluster (default: ``$KUBECONFIG`` or ``~/.kube/config``, else the in-cluster service account);
    ``api_client`` replaces both (tests, scale-out). ``node_selector`` (``"k=v,k2"`` or a mapping)
    narrows the GPU nodes, ``node_name`` pins one. ``queue_name``: a Kueue LocalQueue. ``start_delay_s``:
    START_AT = creation + this, long enough for image pulls. ``schedule_timeout_s``: how long a pod
    may stay unschedulable. ``gpu_resource``: force ``nvidia.com/gpu`` or ``nvidia.com/gpu.shared``
    (default: what the node advertises). ``runtime_class``: e.g. ``nvidia`` on K3s. ``dcgm_url``: a
    dcgm-exporter ``/metrics`` URL scraped every ``dcgm_interval_ms`` while a scenario runs, into
    ``logs/<scenario>/telemetry.parquet`` (the NVML sampler's schema); an unreachable exporter only
    leaves the telemetry status "absent" or "partial" in the scenario record. ``allocation_policy``:
    the device plugin's ``sharedDevicesAllocationPolicy`` on the node; only ``packed`` keeps the tenants
    of a shared scenario on one GPU of a multi-GPU node, so such nodes are refused without it.
    """

    name = "kubernetes"

    def __init__(self, namespace: str = "kts", image: str = "kts-worker:latest", *,
                 kubeconfig: str | os.PathLike | None = None, context: str | None = None,
                 node_selector: str | Mapping[str, str] | None = None, node_name: str | None = None,
                 queue_name: str | None = None, api_client: Any = None, gpu_resource: str | None = None,
                 service_account: str | None = None, memory_limit: str = "8Gi", start_delay_s: float = 30.0,
                 schedule_timeout_s: float = 300.0, poll_s: float = 2.0, cleanup_timeout_s: float = 120.0,
                 image_pull_policy: str = "IfNotPresent", clean_leftovers: bool = True,
                 runtime_class: str | None = None, dcgm_url: str | None = None,
                 dcgm_interval_ms: float = 1000.0, allocation_policy: str | None = None):
        if not re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", namespace or "") or len(namespace) > 63:
            raise SpecError(f"invalid Kubernetes namespace {namespace!r}")
        if not image or any(c.isspace() for c in image):
            raise SpecError(f"invalid image reference {image!r}")
        if gpu_resource is not None and gpu_resource not in GPU_RESOURCES:
            raise SpecError(f"gpu_resource must be one of {', '.join(GPU_RESOURCES)}, got {gpu_resource!r}")
        if queue_name is not None and not _LABEL_OK.match(queue_name):
            raise SpecError(f"invalid Kueue queue name {queue_name!r}")
        for key, value in (("start_delay_s", start_delay_s), ("schedule_timeout_s", schedule_timeout_s),
                           ("poll_s", poll_s), ("cleanup_timeout_s", cleanup_timeout_s)):
            if value < 0 or (key == "poll_s" and value == 0):
                raise SpecError(f"{key} must be > 0, got {value}")
        if dcgm_url is not None and not re.match(r"^https?://[^\s/]+", str(dcgm_url)):
            raise SpecError(f"dcgm_url must be an http(s) URL such as http://dcgm-exporter:9400/metrics, "
                            f"got {dcgm_url!r}")
        if not float(dcgm_interval_ms) > 0:
            raise SpecError(f"dcgm_interval_ms must be > 0, got {dcgm_interval_ms}")
        if allocation_policy not in (None, "", "distributed", "packed"):
            raise SpecError(f"allocation_policy must be 'packed' or 'distributed' (the device plugin's "
                            f"sharedDevicesAllocationPolicy), got {allocation_policy!r}")
        self.allocation_policy = allocation_policy or "distributed"
        self.namespace, self.image, self.queue_name = namespace, image, queue_name or None
        self.node_selector = parse_selector(node_selector)
        self.node_name = node_name
        self.gpu_resource = gpu_resource
        self.service_account, self.memory_limit = service_account, memory_limit
        self.start_delay_s, self.schedule_timeout_s = float(start_delay_s), float(schedule_timeout_s)
        self.poll_s, self.cleanup_timeout_s = float(poll_s), float(cleanup_timeout_s)
        self.image_pull_policy, self.clean_leftovers = image_pull_policy, clean_leftovers
        self.runtime_class = runtime_class or None
        self.dcgm_url, self.dcgm_interval_ms = dcgm_url or None, float(dcgm_interval_ms)
        if api_client is None:
            api_client, ctx = load_api_client(kubeconfig, context)
        else:
            ctx = context or "(given ApiClient)"
        self.context = ctx
        self.api = KubeApi(api_client, namespace, context=ctx)

    # ---------------------------------------------------------------- nodes
    def gpu_nodes(self) -> list[NodeInfo]:
        """Schedulable nodes matching the selector that advertise an NVIDIA GPU resource."""
        terms = dict(self.node_selector)
        if self.node_name:
            terms["kubernetes.io/hostname"] = self.node_name
        nodes = self.api.list_nodes(selector_string(terms))
        out = []
        for n in nodes:
            labels = (n.get("metadata") or {}).get("labels") or {}
            name = (n.get("metadata") or {}).get("name")
            if self.node_name and name != self.node_name:
                continue
            if not labels_match(labels, self.node_selector):
                continue
            info = node_info(n, self.gpu_resource)
            if info is not None and info.allocatable > 0 and info.schedulable:
                out.append(info)
        return sorted(out, key=lambda i: (-i.allocatable, i.name))

    def pick_node(self) -> NodeInfo:
        nodes = self.gpu_nodes()
        if not nodes:
            what = f"node {self.node_name!r}" if self.node_name else "no schedulable node"
            sel = selector_string(self.node_selector) or "(none)"
            raise BackendError(f"{what} advertises {' or '.join(GPU_RESOURCES)} (selector {sel}, context "
                               f"{self.context!r}); is the NVIDIA device plugin running on the GPU node?")
        return nodes[0]

    def describe(self) -> dict[str, Any]:
        """What the cluster offers, for the setup notebook ("Kubernetes sees N GPUs; the node has M")."""
        nodes = self.gpu_nodes()
        if not nodes:
            self.pick_node()  # raises the explanatory error
        node = nodes[0]
        warnings = []
        if node.strategy in (None, "none") and (node.replicas or 1) <= 1:
            warnings.append(f"time-slicing does not seem configured ({node.sharing_note()}); apply "
                            "manifests/overlays/device-plugin-timeslicing (see manifests/README.md)")
        leftovers = [j["metadata"]["name"] for j in self._kts_jobs() if self._is_leftover(j, node.name)]
        return {
            "backend": self.name, "context": self.context, "server": self.api.host, "namespace": self.namespace,
            "image": self.image, "queue": self.queue_name, "node": node.name, "gpu_resource": node.resource,
            "kubernetes_gpus": node.allocatable, "physical_gpus": node.physical, "replicas": node.replicas,
            "sharing_strategy": node.strategy, "product": node.product, "summary": node.sentence,
            "nodes": [asdict(n) | {"sentence": n.sentence} for n in nodes], "leftover_jobs": leftovers,
            "warnings": warnings, "resolution_s": RESOLUTION_S,
        }

    # ---------------------------------------------------------------- leftovers and cleanup
    def _kts_jobs(self) -> list[dict[str, Any]]:
        return [j for j in self.api.list_jobs(f"{MANAGED_BY}={MANAGED_VALUE}") if is_kts_object(j)]

    @staticmethod
    def _is_leftover(job: Mapping[str, Any], node: str) -> bool:
        """A kit Job of a run not active in this process that would compete for ``node``'s GPU."""
        meta = job.get("metadata") or {}
        run_id = (meta.get("annotations") or {}).get(ANN_RUN) or (meta.get("labels") or {}).get(LABEL_RUN)
        target = (meta.get("annotations") or {}).get(ANN_NODE)
        with _ACTIVE_LOCK:
            active = run_id in _ACTIVE_RUNS
        return not active and target in (None, "", node)

    def cleanup(self, run_id: str | None = None, scenario: str | None = None, *, wait: bool = True,
                only: Callable[[Mapping[str, Any]], bool] | None = None) -> list[str]:
        """Delete the kit's Jobs (optionally of one run / scenario) and their pods; returns Job names.

        Only objects whose labels say ``managed-by=kts`` (and the run / scenario asked for) are
        touched; the server-side selector narrows the listing, the client-side check decides.
        """
        terms = {MANAGED_BY: MANAGED_VALUE}
        if run_id is not None:
            terms[LABEL_RUN] = label_value(run_id)
        if scenario is not None:
            terms[LABEL_SCENARIO] = label_value(scenario)
        sel = selector_string(terms)
        jobs = [j for j in self.api.list_jobs(sel) if is_kts_object(j, run_id, scenario) and (only is None or only(j))]
        names = [j["metadata"]["name"] for j in jobs]
        for name in names:
            self.api.delete_job(name)
        # Orphaned pods (their Job deleted with orphan propagation by someone else) are ours too.
        existing = {j["metadata"]["name"] for j in self.api.list_jobs(sel)} - set(names)
        for pod in self.api.list_pods(sel):
            labels = (pod.get("metadata") or {}).get("labels") or {}
            owner = labels.get("batch.kubernetes.io/job-name") or labels.get("job-name")
            if not is_kts_object(pod, run_id, scenario) or owner in existing:
                continue
            if owner in names or only is None or only(pod):
                self.api.delete_pod(pod["metadata"]["name"])
        if wait and names:
            deadline = time.monotonic() + self.cleanup_timeout_s
            while True:
                left = [j["metadata"]["name"] for j in self.api.list_jobs(sel) if j["metadata"]["name"] in names]
                if not left:
                    break
                if time.monotonic() >= deadline:
                    raise BackendError(f"Jobs {', '.join(left)} still exist {self.cleanup_timeout_s:.0f} s after "
                                       f"deletion (namespace {self.namespace}); check finalizers with kubectl")
                time.sleep(min(self.poll_s, 1.0))
        return names

    def clean_leftovers_for(self, node: str) -> list[str]:
        """Remove kit Jobs of interrupted runs that would share ``node``'s GPU with this run."""
        return self.cleanup(only=lambda j: self._is_leftover(j, node))

    # ---------------------------------------------------------------- a scenario
    def run_scenario(self, run: Run, scenario: ScenarioSpec, *, timeout_s: float,
                     progress: bool = True, pad_limit_s: float | None = None) -> ScenarioResult:
        """Create one Job per tenant, watch them to the end, collect logs and waits, always clean up."""
        if not timeout_s or timeout_s <= 0:
            raise SpecError(f"timeout_s must be > 0, got {timeout_s}")
        if not scenario.tenants:
            raise SpecError(f"scenario {scenario.name!r} has no tenants")
        node = self.pick_node()
        if node.allocatable < len(scenario.tenants):
            raise BackendError(f"scenario {scenario.name!r} needs {len(scenario.tenants)} GPUs on one node but "
                               f"{node.sharing_note()}; time-slicing may not be configured (replicas)")
        if scenario.kind == "shared":
            self._check_one_physical_gpu(scenario, node)
        run.claim_scenario(scenario.name)
        with _ACTIVE_LOCK:
            _ACTIVE_RUNS.add(run.run_id)
        try:
            if self.clean_leftovers:
                gone = self.clean_leftovers_for(node.name)
                if gone and progress:
                    print(f"[kts] removed leftover Jobs on {node.name}: {', '.join(gone)}", file=sys.stderr)
            return self._run(run, scenario, node, float(timeout_s), progress,
                             float(timeout_s if pad_limit_s is None else pad_limit_s))
        finally:
            with _ACTIVE_LOCK:
                _ACTIVE_RUNS.discard(run.run_id)

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
        if node.physical > 1 and self.allocation_policy != "packed":
            raise BackendError(f"node {node.name} has {node.physical} physical GPUs and the device plugin's default "
                               "'distributed' allocation would give the tenants of scenario "
                               f"{scenario.name!r} different GPUs; set flags.plugin.sharedDevicesAllocationPolicy: "
                               "packed in the plugin config (manifests/overlays/device-plugin-timeslicing does) and "
                               "pass allocation_policy='packed' (K8S_ALLOCATION_POLICY=packed), or select a node "
                               "with one GPU")

    def _run(self, run: Run, scenario: ScenarioSpec, node: NodeInfo, timeout_s: float,
             progress: bool, pad_limit_s: float) -> ScenarioResult:
        started_ns = time.time_ns()
        start_at_ns = started_ns + int(self.start_delay_s * 1e9)
        bodies = {t.name: build_job(
            run_id=run.run_id, scenario=scenario, tenant=t, namespace=self.namespace, image=self.image,
            node=node.name, start_at_ns=start_at_ns, gpu_resource=node.resource, node_selector=self.node_selector,
            queue_name=self.queue_name, service_account=self.service_account, memory_limit=self.memory_limit,
            active_deadline_s=int(timeout_s + self.start_delay_s + self.schedule_timeout_s) + 60,
            image_pull_policy=self.image_pull_policy, runtime_class=self.runtime_class,
            pad_limit_s=pad_limit_s + 60.0)  # the worker's backstop: later than this client's limit
            for t in scenario.tenants}
        error: BaseException | None = None
        failure: _Failure | None = None
        created: dict[str, dict[str, Any]] = {}
        telemetry: dict[str, Any] = {}
        live = _Live(CoRunWatch(scenario.tenant_names, pad_limit_s=pad_limit_s),
                     scenario.kind == "shared" and len(scenario.tenants) > 1)
        scraper = self._start_telemetry(run.log_dir(scenario.name), telemetry)
        try:
            for tenant, body in bodies.items():
                created[tenant] = self.api.create_job(body) or body
            failure = self._watch(run, scenario, bodies, node, timeout_s, progress, live)
        except BaseException as exc:  # noqa: BLE001 - Ctrl-C included: collect, clean up, re-raise
            error = exc
        self._stop_telemetry(scraper, telemetry)
        if (failure is not None or error is not None) and live.stopped_ns is None:
            # stop the other tenants first, so their log streams end; ended containers' logs are read first
            for stream in live.streams.values():
                if stream.finishing:
                    stream.finish(10.0)
            with contextlib.suppress(Exception):
                for body in bodies.values():
                    self.api.delete_job(body["metadata"]["name"])
        tenants: list[TenantResult] = []
        events: dict[str, dict[str, Any]] = {}
        try:
            tenants, events = self._collect(run, scenario, bodies, created, node, start_at_ns, failure, error, live)
        except BaseException as exc:  # noqa: BLE001
            error = error or exc
        if error is None and failure is None and scenario.kind == "shared":
            metas = {t: live.watch.tenants[t].meta for t in bodies}
            mismatch = gpu_mismatch(metas)
            if mismatch:
                failure = _Failure(next(iter(bodies)), None, mismatch)
        cleanup_error = ""
        try:
            self.cleanup(run.run_id, scenario.name)
        except BaseException as exc:  # noqa: BLE001
            cleanup_error = str(exc) or type(exc).__name__
            if error is None and not isinstance(exc, KtsError):
                error = exc
        ended_ns = time.time_ns()
        reason = ""
        if error is not None:
            reason = "interrupted (KeyboardInterrupt)" if isinstance(error, KeyboardInterrupt) else \
                (str(error).splitlines()[0] if str(error) else type(error).__name__)
        elif failure is not None:
            reason = f"tenant {failure.tenant!r}: {failure.reason}"
        elif cleanup_error:
            reason = f"cleanup failed: {cleanup_error}"
        status = "failed" if reason else "complete"
        info = {
            "status": status, "backend": self.name, "kind": scenario.kind, "sharing": scenario.sharing,
            "context": self.context, "namespace": self.namespace, "image": self.image, "node": node.name,
            "gpu_resource": node.resource, "kubernetes_gpus": node.allocatable, "physical_gpus": node.physical,
            "replicas": node.replicas, "sharing_strategy": node.strategy, "queue": self.queue_name,
            "start_at_ns": start_at_ns, "started_ns": started_ns, "ended_ns": ended_ns,
            "resolution_s": RESOLUTION_S, "tenants": events, "corun": live.watch.summary(),
            **({"padding_stopped_ns": live.stopped_ns} if live.stopped_ns else {}), **telemetry,
        }
        if reason:
            info["reason"] = reason
        if failure is not None:
            info["failed_tenant"] = failure.tenant
        if cleanup_error:
            info["cleanup_error"] = cleanup_error
        late = [t for t, ev in events.items() if ev.get("missed_start_barrier")]
        if late:
            info["warnings"] = [f"tenant(s) {', '.join(late)} started after START_AT; raise start_delay_s"]
        run.record_scenario(scenario.name, info)
        if error is not None:
            raise error
        if failure is not None:
            log_file = run.log_path(scenario.name, failure.tenant)
            tail = log_file.read_text(errors="replace")[-4000:] if log_file.exists() else ""
            if not tail.strip() or tail.strip().splitlines()[-1].startswith("KTS_"):
                tail = ""  # no error text in the pod log: the pod's reason above is the news
            raise TenantFailed(scenario.name, failure.tenant, failure.exit_code, tail,
                               reason=f"failed on Kubernetes: {failure.reason} (pod log and status in "
                                      f"{run.stderr_path(scenario.name, failure.tenant)})")
        if cleanup_error:
            raise BackendError(f"scenario {scenario.name!r} finished but cleanup failed: {cleanup_error}")
        return ScenarioResult(scenario.name, status, tenants, started_ns, ended_ns,
                              extra={"node": node.name, "namespace": self.namespace, "resolution_s": RESOLUTION_S,
                                     "jobs": {t: b["metadata"]["name"] for t, b in bodies.items()}})

    def _start_telemetry(self, log_dir: Path, out: dict[str, Any]) -> Any:
        """Scrape dcgm-exporter in the background while the scenario runs; None when off or broken."""
        if not self.dcgm_url:
            out["telemetry"] = {"status": "absent", "reason": "no dcgm_url configured (KTS_DCGM_URL)"}
            return None
        try:
            from kts_helpers.run.telemetry import DcgmScraper

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

    def _selector(self, run: Run, scenario: ScenarioSpec) -> str:
        return selector_string({MANAGED_BY: MANAGED_VALUE, LABEL_RUN: label_value(run.run_id),
                                LABEL_SCENARIO: label_value(scenario.name)})

    def _snapshot(self, run: Run, scenario: ScenarioSpec, bodies: Mapping[str, dict[str, Any]]
                  ) -> tuple[dict[str, dict[str, Any]], dict[str, dict[str, Any]], list[dict[str, Any]]]:
        sel = self._selector(run, scenario)
        by_job = {b["metadata"]["name"]: t for t, b in bodies.items()}
        jobs = {by_job[j["metadata"]["name"]]: j for j in self.api.list_jobs(sel)
                if is_kts_object(j, run.run_id, scenario.name) and j["metadata"]["name"] in by_job}
        raw_pods = [p for p in self.api.list_pods(sel) if is_kts_object(p, run.run_id, scenario.name)]
        pods: dict[str, dict[str, Any]] = {}
        for p in sorted(raw_pods, key=lambda p: str((p.get("metadata") or {}).get("creationTimestamp") or "")):
            meta = p.get("metadata") or {}
            tenant = (meta.get("annotations") or {}).get(ANN_TENANT)
            owner = (meta.get("labels") or {}).get("batch.kubernetes.io/job-name") or \
                (meta.get("labels") or {}).get("job-name")
            tenant = tenant if tenant in bodies else by_job.get(owner or "")
            if tenant is not None:
                pods[tenant] = p  # the newest pod of the tenant wins
        return jobs, pods, raw_pods

    def _watch(self, run: Run, scenario: ScenarioSpec, bodies: Mapping[str, dict[str, Any]], node: NodeInfo,
               timeout_s: float, progress: bool, live: _Live) -> _Failure | None:
        t0 = time.monotonic()
        deadline = t0 + self.start_delay_s + timeout_s
        pending_since: dict[str, float] = {}
        no_pod_since: dict[str, float] = {}
        shown: dict[str, str] = {}
        sel = self._selector(run, scenario)
        while True:
            jobs, pods, raw = self._snapshot(run, scenario, bodies)
            now = time.monotonic()
            states = {t: pod_state(jobs.get(t), pods.get(t)) for t in bodies}
            live.follow(self.api, pods, states, self.poll_s)
            if live.pad and live.watch.ready_to_stop():
                self._stop_padding(bodies, live, progress, scenario)
                return None
            overrun = live.watch.overrun() if live.pad else None
            if overrun:
                self._stop_padding(bodies, live, progress, scenario)
                return _Failure(next(t for t, p in live.watch.tenants.items() if not p.timed_done), None, overrun)
            for t, st in states.items():
                if progress and shown.get(t) != st.summary:
                    print(f"[kts] {scenario.name}/{t}: {st.summary}", file=sys.stderr)
                shown[t] = st.summary
            for t, st in states.items():
                if st.failed:
                    pod = (pods.get(t) or {}).get("metadata", {}).get("name") or bodies[t]["metadata"]["name"]
                    return _Failure(t, st.exit_code, f"pod {pod}: {st.reason}{self._hint(st.reason)}")
            if all(st.done for st in states.values()):
                return None
            for t, st in states.items():
                if st.unschedulable:
                    pending_since.setdefault(t, now)
                    if now - pending_since[t] >= min(self.schedule_timeout_s, deadline - t0):
                        return _Failure(t, None, self._unschedulable_reason(pods[t], st, now - pending_since[t]))
                else:
                    pending_since.pop(t, None)
                if st.phase == "NoPod" and t in jobs:
                    no_pod_since.setdefault(t, now)
                    if now - no_pod_since[t] >= 2 * self.poll_s:
                        why = self._job_create_failure(bodies[t]["metadata"]["name"])
                        if why:
                            return _Failure(t, None, f"Job {bodies[t]['metadata']['name']} cannot create its pod: {why}")
                else:
                    no_pod_since.pop(t, None)
            if now >= deadline:
                t = next(t for t, st in states.items() if not st.done)
                return _Failure(t, None, f"did not finish within {deadline - t0:.0f} s (start delay "
                                         f"{self.start_delay_s:.0f} s + timeout {timeout_s:.0f} s); last state: "
                                         f"{states[t].summary}")
            known = {(p.get("metadata") or {}).get("name", ""): fingerprint(p) for p in raw}
            self.api.wait_pods_changed(sel, known, min(self.poll_s, max(0.0, deadline - now)),
                                       relevant=lambda o: is_kts_object(o, run.run_id, scenario.name))

    def _stop_padding(self, bodies: Mapping[str, dict[str, Any]], live: _Live, progress: bool,
                      scenario: ScenarioSpec) -> None:
        """Every tenant is past its timed iterations: delete the Jobs (SIGTERM; no replacement pods)."""
        live.stopped_ns = time.time_ns()
        if progress:
            print(f"[kts] {scenario.name}: every tenant finished its timed iterations; stopping the padding",
                  file=sys.stderr)
        for body in bodies.values():
            self.api.delete_job(body["metadata"]["name"], grace_s=STOP_GRACE_S)

    def _hint(self, reason: str) -> str:
        if "OOMKilled" in reason:
            return f"; the container's memory limit is {self.memory_limit}: raise memory_limit"
        if "Image" in reason:
            return (f"; can the node pull {self.image}? push it to a registry the node reaches, or import it "
                    "into the node's runtime (manifests/README.md)")
        return ""

    def _job_create_failure(self, job: str) -> str:
        for ev in self.api.list_events("Job", job):
            if ev.get("reason") == "FailedCreate":
                return str(ev.get("message") or "FailedCreate").splitlines()[0][:300]
        return ""

    def _unschedulable_reason(self, pod: Mapping[str, Any], st: PodState, waited: float) -> str:
        name = (pod.get("metadata") or {}).get("name", "?")
        msg = f"pod {name} stayed Pending for {waited:.0f} s: {st.unschedulable.strip()}"
        if "Insufficient nvidia.com/gpu" in st.unschedulable:
            target = ((pod.get("spec") or {}).get("nodeSelector") or {}).get("kubernetes.io/hostname")
            try:
                info = node_info(self.api.read_node(target or self.pick_node().name), self.gpu_resource)
            except KtsError:
                info = None
            note = info.sharing_note() if info else "node state unavailable"
            msg += (f"; time-slicing may not be configured ({note}); apply manifests/overlays/"
                    "device-plugin-timeslicing and check the device plugin's config (manifests/README.md)")
        return msg

    # ---------------------------------------------------------------- collection
    def _collect(self, run: Run, scenario: ScenarioSpec, bodies: Mapping[str, dict[str, Any]],
                 created: Mapping[str, dict[str, Any]], node: NodeInfo, start_at_ns: int,
                 failure: _Failure | None, error: BaseException | None, live: _Live
                 ) -> tuple[list[TenantResult], dict[str, dict[str, Any]]]:
        """Write each tenant's pod log and status into the run directory; return results and events.

        The log is what the live stream received (it outlives a stopped pod) or, where the pod can
        still be read, the whole log read once more, whichever is longer.
        """
        try:
            jobs, pods, _ = self._snapshot(run, scenario, bodies)
        except KtsError:
            jobs, pods = {}, {}
        pods = {**live.last_pods, **pods}  # a stopped pod may be gone: its last seen state stays
        streamed = {t: stream.finish(STOP_GRACE_S + 10.0) for t, stream in live.streams.items()}
        workloads: list[dict[str, Any]] = []
        if self.queue_name:
            try:
                workloads = self.api.list_workloads()
            except KtsError:
                workloads = []
        results, events = [], {}
        for t in bodies:
            job = jobs.get(t) or created.get(t) or bodies[t]
            pod = pods.get(t)
            ev = self._events(job, pod, workloads, start_at_ns)
            st = pod_state(jobs.get(t), pod)
            if failure is not None and failure.tenant == t:
                ev["outcome"], ev["reason"] = "failed", failure.reason
            elif st.failed:
                ev["outcome"], ev["reason"] = "failed", st.reason
            elif st.done:
                ev["outcome"] = "complete"
            elif live.stopped_ns and failure is None and error is None:
                ev["outcome"] = "complete"  # padding, stopped by kts once every tenant had finished
            else:
                ev["outcome"] = "interrupted" if error is not None or failure is not None else "unknown"
            ev["exit_code"] = st.exit_code
            log = b""
            pod_events: list[dict[str, Any]] = []
            if pod is not None:
                try:
                    log = self.api.read_pod_log(pod["metadata"]["name"]) or b""
                except KtsError as exc:
                    ev["log_error"] = str(exc)
            if len(streamed.get(t, b"")) > len(log):
                log = streamed[t]
            if pod is not None:
                try:
                    pod_events = self.api.list_events("Pod", pod["metadata"]["name"])
                except KtsError:
                    pod_events = []
            log_path, err_path = run.log_path(scenario.name, t), run.stderr_path(scenario.name, t)
            write_new(log_path, log)
            write_new(err_path, _status_text(scenario.name, t, job, pod, pod_events, ev).encode())
            ev["log"], ev["stderr"] = str(log_path.relative_to(run.path)), str(err_path.relative_to(run.path))
            events[t] = ev
            started = parse_time(ev.get("container_started"))
            ended = parse_time(ev.get("container_finished"))
            results.append(TenantResult(
                tenant=t, exit_code=st.exit_code, log_path=str(log_path), stderr_path=str(err_path),
                started_ns=int(started * 1e9) if started is not None else None,
                ended_ns=int(ended * 1e9) if ended is not None else None,
                reason=ev.get("reason", ""), events=ev))
        return results, events

    def _events(self, job: Mapping[str, Any], pod: Mapping[str, Any] | None, workloads: Sequence[Mapping[str, Any]],
                start_at_ns: int) -> dict[str, Any]:
        """The layered timestamps of one tenant (ISO strings, whole seconds) plus where it ran."""
        jmeta = job.get("metadata") or {}
        ev: dict[str, Any] = {"job": jmeta.get("name"), "job_created": jmeta.get("creationTimestamp"),
                              "queue": self.queue_name, "admitted": None, "pod": None, "node": None,
                              "pod_created": None, "scheduled": None, "container_started": None,
                              "container_finished": None, "start_at_ns": start_at_ns, "resolution_s": RESOLUTION_S}
        if self.queue_name:
            for wl in workloads:
                owners = (wl.get("metadata") or {}).get("ownerReferences") or []
                if any((o.get("uid") and o.get("uid") == jmeta.get("uid")) or
                       (o.get("kind") == "Job" and o.get("name") == jmeta.get("name")) for o in owners):
                    adm = _condition(wl, "Admitted")
                    if adm.get("status") == "True":
                        ev["admitted"] = adm.get("lastTransitionTime")
                    ev["workload"] = (wl.get("metadata") or {}).get("name")
        if pod is not None:
            meta, spec = pod.get("metadata") or {}, pod.get("spec") or {}
            ev.update(pod=meta.get("name"), node=spec.get("nodeName"), pod_created=meta.get("creationTimestamp"))
            sched = _condition(pod, "PodScheduled")
            if sched.get("status") == "True":
                ev["scheduled"] = sched.get("lastTransitionTime")
            state = _container_status(pod).get("state") or {}
            running, term = state.get("running") or {}, state.get("terminated") or {}
            ev["container_started"] = running.get("startedAt") or term.get("startedAt")
            ev["container_finished"] = term.get("finishedAt")
            started = parse_time(ev["container_started"])
            # With 1 s resolution, only a start clearly after the barrier means the tenants did not begin together.
            ev["missed_start_barrier"] = bool(started is not None and started - start_at_ns / 1e9 > RESOLUTION_S)
        ev["waits"] = waits_from_events(ev)
        return ev


def _status_text(scenario: str, tenant: str, job: Mapping[str, Any], pod: Mapping[str, Any] | None,
                 events: Sequence[Mapping[str, Any]], ev: Mapping[str, Any]) -> str:
    """The .stderr file of a Kubernetes tenant: pod status, reason and events, for humans."""
    lines = [f"# kts kubernetes backend: scenario {scenario}, tenant {tenant}",
             f"job: {(job.get('metadata') or {}).get('name')}"]
    if pod is None:
        lines.append("pod: (none was created)")
    else:
        status = pod.get("status") or {}
        lines.append(f"pod: {pod['metadata'].get('name')}  node: {(pod.get('spec') or {}).get('nodeName') or '-'}"
                     f"  phase: {status.get('phase') or '-'}")
        if status.get("reason") or status.get("message"):
            lines.append(f"pod reason: {status.get('reason', '')} {status.get('message', '')}".rstrip())
        for c in status.get("conditions") or []:
            lines.append(f"condition {c.get('type')}={c.get('status')} at {c.get('lastTransitionTime') or '-'}"
                         + (f": {c.get('reason', '')} {c.get('message', '')}".rstrip() if c.get("status") != "True"
                            else ""))
        for kind, st in ((_container_status(pod).get("state") or {}).items()):
            detail = ", ".join(f"{k}={v}" for k, v in (st or {}).items())
            lines.append(f"container {CONTAINER}: {kind} {detail}")
    for e in events:
        lines.append(f"event {e.get('type', '')} {e.get('reason', '')} x{e.get('count', 1)} "
                     f"at {e.get('lastTimestamp') or e.get('eventTime') or '-'}: {e.get('message', '')}")
    for key in ("job_created", "admitted", "pod_created", "scheduled", "container_started", "container_finished"):
        lines.append(f"{key}: {ev.get(key) or '-'}")
    lines.append(f"outcome: {ev.get('outcome')}" + (f": {ev['reason']}" if ev.get("reason") else ""))
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------- analysis

WAIT_COLUMNS = ["scenario", "tenant", "admission_wait_s", "placement_wait_s", "startup_s", "run_s", "node", "pod",
                "resolution_s"]


def layered_waits(run: Run) -> pd.DataFrame:
    """Admission, placement, start-up and run time per (scenario, tenant), from the run manifest.

    Scenarios run by another backend (no pod timestamps) are left out; values are seconds with
    the API's one-second resolution (``resolution_s``), NaN where a layer did not apply.
    """
    import pandas as pd  # noqa: F811 - imported here so the backend loads without pandas

    rows = []
    for scenario, info in (run.manifest().get("scenarios") or {}).items():
        if info.get("backend") != "kubernetes":
            continue
        for tenant, ev in (info.get("tenants") or {}).items():
            w = waits_from_events(ev)
            rows.append({"scenario": scenario, "tenant": tenant, **w, "node": ev.get("node"), "pod": ev.get("pod"),
                         "resolution_s": ev.get("resolution_s", info.get("resolution_s", RESOLUTION_S))})
    frame = pd.DataFrame(rows, columns=WAIT_COLUMNS)
    for col in ("admission_wait_s", "placement_wait_s", "startup_s", "run_s"):
        frame[col] = pd.to_numeric(frame[col], errors="coerce").astype("float64")
    return frame


# --------------------------------------------------------------------------- scale out

@dataclass
class ScaleOutResult:
    """One experiment of a scale-out: where it ran and how it ended."""

    index: int
    node: str
    run_path: str | None
    status: str  # "complete" | "failed"
    error: str = ""


def run_experiment(spec: ExperimentSpec, backend: KubernetesBackend, *, root: str | os.PathLike = DEFAULT_ROOT,
                   progress: bool = True) -> Run:
    """Run every scenario of ``spec`` on ``backend`` into a new run directory.

    Stops at the first failed scenario and records the error in the manifest (status
    ``failed``) instead of raising, so one bad cell does not hide the others of a scale-out.
    """
    environment = {"backend": backend.describe()}
    run = create_run(spec.to_dict(), environment, root=root, label=spec.params.label)
    timeout_s = float(spec.resolved.get("timeout_s") or 1800.0)
    try:
        for scenario in spec.scenarios:
            backend.run_scenario(run, scenario, timeout_s=timeout_s, progress=progress)
    except KtsError as exc:
        run.update(status="failed", error=str(exc))
    return run


def scale_out(experiments: Sequence[ExperimentSpec | ExperimentParams], *,
              node_selector: str | Mapping[str, str] | None = None, root: str | os.PathLike = DEFAULT_ROOT,
              runner: Callable[[ExperimentSpec, KubernetesBackend], Run] | None = None, progress: bool = True,
              api_client: Any = None, kubeconfig: str | os.PathLike | None = None, context: str | None = None,
              **backend_kwargs: Any) -> list[ScaleOutResult]:
    """Run experiments in parallel, one per GPU node (matching ``node_selector``), each into its own run.

    With more experiments than nodes, each node takes the next experiment when it is free, so
    the matrix finishes in about the time of its slowest cells rather than their sum.
    """
    if not experiments:
        raise SpecError("scale_out needs at least one experiment")
    specs = [e if isinstance(e, ExperimentSpec) else resolve(e, "cuda") for e in experiments]
    for s in specs:
        if not s.scenarios:
            raise SpecError(f"experiment {s.params.label or s.profile!r} has no scenarios to run")
    if api_client is None:
        api_client, ctx = load_api_client(kubeconfig, context)
        backend_kwargs.setdefault("context", ctx)
    probe = KubernetesBackend(api_client=api_client, node_selector=node_selector, **backend_kwargs)
    nodes = [n.name for n in probe.gpu_nodes()]
    if not nodes:
        probe.pick_node()  # raises the explanatory error
    free: queue.Queue[str] = queue.Queue()
    for n in nodes:
        free.put(n)

    def one(index: int, spec: ExperimentSpec) -> ScaleOutResult:
        node = free.get()
        try:
            backend = KubernetesBackend(api_client=api_client, node_selector=node_selector, node_name=node,
                                        **backend_kwargs)
            if runner is not None:
                run = runner(spec, backend)
            else:
                run = run_experiment(spec, backend, root=root, progress=progress)
            m = run.manifest()
            status = "complete" if m.get("status") == "complete" else "failed"
            return ScaleOutResult(index, node, str(run.path), status, "" if status == "complete" else
                                  str(m.get("error") or m.get("status")))
        except KtsError as exc:
            return ScaleOutResult(index, node, None, "failed", str(exc))
        finally:
            free.put(node)

    with ThreadPoolExecutor(max_workers=len(nodes), thread_name_prefix="kts-node") as pool:
        futures = [pool.submit(one, i, s) for i, s in enumerate(specs)]
        return [f.result() for f in futures]


def nodes_summary(results: Iterable[ScaleOutResult]) -> str:
    """One line per experiment, for the notebook."""
    return "\n".join(f"#{r.index} on {r.node}: {r.status} {r.run_path or ''} {r.error}".rstrip() for r in results)
