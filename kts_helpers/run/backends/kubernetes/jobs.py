"""The Job for one tenant: hardened like manifests/components/hardened-worker, pinned to one node."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kts_helpers.run.backends.kubernetes.names import (
    ANN_NODE,
    ANN_RUN,
    ANN_SCENARIO,
    ANN_TENANT,
    CONTAINER,
    LABEL_RUN,
    LABEL_SCENARIO,
    LABEL_TENANT,
    MANAGED_BY,
    MANAGED_VALUE,
    QUEUE_LABEL,
    STOP_GRACE_S,
    job_name,
    label_value,
)
from kts_helpers.run.corun import DEFAULT_LEAD_IN_S
from kts_helpers.run.spec import ScenarioSpec, TenantSpec

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
