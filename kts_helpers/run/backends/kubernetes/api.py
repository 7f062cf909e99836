"""The only code that talks to the API server: JSON dicts in and out, one-line errors.

Tests drive it against ``kmock``'s emulator, so nothing else in the kit needs a cluster.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from kts_helpers.errors import BackendError
from kts_helpers.run.backends.kubernetes.names import CONTAINER

# --------------------------------------------------------------------------- the API layer

class KubeForbidden(BackendError):
    """RBAC refused a request; names the verb and resource so the Role can be fixed."""

    def __init__(self, verb: str, resource: str, namespace: str | None, detail: str):
        self.verb, self.resource, self.namespace = verb, resource, namespace
        where = f" in namespace {namespace!r}" if namespace else " (cluster-wide)"
        super().__init__(f"Kubernetes RBAC forbids {verb!r} on {resource!r}{where}: {detail}; "
                         "apply manifests/base (Role kts-runner; ClusterRole kts-node-reader, optional) or ask an admin")


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
        from kubernetes import client  # heavy optional client: imported only when a cluster is used

        self.api_client = api_client
        self.namespace = namespace
        self.context = context
        self.timeout = request_timeout
        self.core = client.CoreV1Api(api_client)
        self.batch = client.BatchV1Api(api_client)
        self.custom = client.CustomObjectsApi(api_client)
        self.coordination = client.CoordinationV1Api(api_client)
        self.kueue_version: str | None = None  # the Workload API version that answered last

    @property
    def host(self) -> str:
        return str(getattr(self.api_client.configuration, "host", "?"))

    def _call(self, verb: str, resource: str, fn: Callable[..., Any], *args: Any, namespaced: bool = True,
              missing_ok: bool = False, in_namespace: str | None = None, **kwargs: Any) -> bytes | None:
        """``in_namespace``: the request's namespace when it is not the kit's (the Leases' may differ), so that a 403
        names the namespace the Role was missing in."""
        import urllib3  # the kubernetes client's transport: heavy, optional, only when a cluster is used
        from kubernetes.client.exceptions import ApiException  # likewise

        kwargs.setdefault("_request_timeout", self.timeout)
        try:
            resp = fn(*args, _preload_content=False, **kwargs)
            return bytes(resp.data)
        except ApiException as exc:
            if exc.status == 404 and missing_ok:
                return None
            detail = _status_message(exc.body) or str(exc.reason)
            ns = (in_namespace or self.namespace) if namespaced else None
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

    def read_configmap(self, name: str, namespace: str) -> dict[str, Any] | None:
        """A ConfigMap of another namespace (the device plugin's config: the opt-in Role of
        manifests/components/device-plugin-config); None when it does not exist."""
        data = self._call("get", "configmaps", self.core.read_namespaced_config_map, name, namespace,
                          missing_ok=True, in_namespace=namespace)
        return self._json(data) if data else None

    # --- jobs
    def create_job(self, body: dict[str, Any]) -> dict[str, Any]:
        return self._json(self._call("create", "jobs.batch", self.batch.create_namespaced_job, self.namespace, body))

    def list_jobs(self, label_selector: str) -> list[dict[str, Any]]:
        return self._items(self._call("list", "jobs.batch", self.batch.list_namespaced_job, self.namespace,
                                      label_selector=label_selector))

    def delete_job(self, name: str, grace_s: int = 5) -> bool:
        """Delete with foreground propagation: the Job disappears only after its pods are gone.

        ``grace_s`` is the Job object's own grace period; it does not reach the pods: the garbage
        collector deletes them with their own ``terminationGracePeriodSeconds`` (the Job template sets
        ``STOP_GRACE_S``), so each gets SIGTERM and that long to end. Deleting the Job (not its pod)
        means the Job controller creates no replacement pod.
        """
        data = self._call("delete", "jobs.batch", self.batch.delete_namespaced_job, name, self.namespace,
                          missing_ok=True, propagation_policy="Foreground", grace_period_seconds=grace_s)
        return data is not None

    # --- pods
    def list_pods(self, label_selector: str = "", field_selector: str = "") -> list[dict[str, Any]]:
        return self._items(self._call("list", "pods", self.core.list_namespaced_pod, self.namespace,
                                      label_selector=label_selector, field_selector=field_selector))

    def list_pods_on_node(self, node: str, *, cluster_wide: bool) -> list[dict[str, Any]]:
        """Pods bound to ``node``: in any namespace with ``cluster_wide`` (a cluster-scoped list, the opt-in
        ClusterRole kts-cluster-pod-reader: it returns every pod's whole spec, inline env values included),
        else in the kit's namespace only (the Role)."""
        if cluster_wide:
            data = self._call("list", "pods", self.core.list_pod_for_all_namespaces, namespaced=False,
                              field_selector=f"spec.nodeName={node}")
        else:
            data = self._call("list", "pods", self.core.list_namespaced_pod, self.namespace,
                              field_selector=f"spec.nodeName={node}")
        return [p for p in self._items(data) if (p.get("spec") or {}).get("nodeName") == node]  # checked here too

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

    def annotate_pod(self, name: str, annotations: Mapping[str, str]) -> dict[str, Any]:
        """Set annotations on one of the namespace's pods (a JSON merge patch: the start barrier's go, which the
        pod reads through its downwardAPI volume). Needs namespaced ``patch pods``."""
        return self._json(self._call("patch", "pods", self.core.patch_namespaced_pod, name, self.namespace,
                                     {"metadata": {"annotations": dict(annotations)}}))

    def list_events(self, kind: str, name: str) -> list[dict[str, Any]]:
        """Events of one object (FailedCreate on a Job is how Pod Security and quota rejections show)."""
        items = self._items(self._call("list", "events", self.core.list_namespaced_event, self.namespace,
                                       field_selector=f"involvedObject.name={name}"))
        return [e for e in items if (e.get("involvedObject") or {}).get("name") == name
                and (e.get("involvedObject") or {}).get("kind", kind) == kind]

    def list_workloads(self) -> list[dict[str, Any]]:
        """Kueue Workloads of the namespace: ``v1beta2`` (served since Kueue 0.15, the storage version since
        0.16.0), else ``v1beta1``;
        [] without Kueue. RBAC refusing it is an error: an admission that cannot be read cannot be waited for."""
        versions = ("v1beta2", "v1beta1")
        if self.kueue_version in versions:
            versions = (self.kueue_version, *(v for v in versions if v != self.kueue_version))
        for version in versions:
            data = self._call("list", "workloads.kueue.x-k8s.io", self.custom.list_namespaced_custom_object,
                              "kueue.x-k8s.io", version, self.namespace, "workloads", missing_ok=True)
            if data is not None:
                self.kueue_version = version
                return self._items(data)
        self.kueue_version = ""  # the cluster serves no Kueue Workloads
        return []

    # --- leases (coordination.k8s.io/v1): who measures on a node
    def read_lease(self, name: str, namespace: str) -> dict[str, Any] | None:
        data = self._call("get", "leases.coordination.k8s.io", self.coordination.read_namespaced_lease, name,
                          namespace, missing_ok=True, in_namespace=namespace)
        return self._json(data) if data is not None else None

    def create_lease(self, body: dict[str, Any], namespace: str) -> dict[str, Any] | None:
        """The created Lease, or None when one of that name exists already (someone was faster)."""
        try:
            return self._json(self._call("create", "leases.coordination.k8s.io",
                                         self.coordination.create_namespaced_lease, namespace, body,
                                         in_namespace=namespace))
        except KubeApiError as exc:
            if exc.status == 409:
                return None
            raise

    def replace_lease(self, name: str, body: dict[str, Any], namespace: str) -> dict[str, Any] | None:
        """Write the Lease if it is still at ``body``'s resourceVersion; None when it changed meanwhile."""
        try:
            return self._json(self._call("update", "leases.coordination.k8s.io",
                                         self.coordination.replace_namespaced_lease, name, namespace, body,
                                         in_namespace=namespace))
        except KubeApiError as exc:
            if exc.status in (404, 409):
                return None
            raise

    def delete_lease(self, name: str, namespace: str, resource_version: str) -> bool:
        """Delete the Lease only if nobody wrote it since ``resource_version`` (a precondition)."""
        try:
            data = self._call("delete", "leases.coordination.k8s.io", self.coordination.delete_namespaced_lease,
                              name, namespace, missing_ok=True, in_namespace=namespace,
                              body={"preconditions": {"resourceVersion": resource_version}})
        except KubeApiError as exc:
            if exc.status == 409:
                return False
            raise
        return data is not None

    def wait_pods_changed(self, label_selector: str, known: Mapping[str, str], timeout_s: float,
                          relevant: Callable[[Mapping[str, Any]], bool] = lambda obj: True) -> bool:
        """Watch the scenario's pods until one differs from ``known`` (name -> fingerprint) or time out.

        Used as a wake-up only: the caller re-lists afterwards, so a watch that expires,
        is cut by a proxy or replays old objects (410, emulators) costs nothing but a loop.
        """
        from kubernetes import watch  # heavy optional client: imported only when a cluster is used

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
    from kubernetes import config  # heavy optional client: imported only when a cluster is used

    in_cluster = bool(os.environ.get("KUBERNETES_SERVICE_HOST")) and kubeconfig is None and context is None
    paths = [Path(p).expanduser() for p in (str(kubeconfig) if kubeconfig else
                                             os.environ.get("KUBECONFIG", "~/.kube/config")).split(os.pathsep) if p]
    have_file = any(p.is_file() for p in paths)
    if in_cluster and not have_file:
        try:
            config.load_incluster_config()
        except config.ConfigException as exc:
            raise BackendError(f"cannot load the in-cluster Kubernetes config: {exc}") from None
        from kubernetes import client  # heavy optional client: imported only when a cluster is used

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
