"""The Jobs of a scenario: the tenants' Indexed Job, one completion index per tenant, pinned to one node, and the
placeholders' (``build_hold_job``).

One Job for the tenants means Kueue admits them together as one Workload (a gang: never one tenant now and its
neighbour minutes later), one deletion stops every tenant, and the tenants' state is one Job's conditions. Each pod finds its own tenant's settings in ``KTS_TENANTS`` (a JSON list)
at its ``JOB_COMPLETION_INDEX``, which the Job controller sets. The pod is hardened like
manifests/components/hardened-worker and runs as the ``kts-worker`` ServiceAccount.

**Placeholders** (issue #32, sized in #45): a second Indexed Job of the scenario, ``<job>-hold``
(``build_hold_job``), holds every remaining replica of the measured GPU for the whole scenario, so the
scheduler itself keeps other pods off it (a stranger asking for a replica mid-run stays Pending with
"Insufficient nvidia.com/gpu"). A placeholder is the kit's own image, asleep: the launcher prints
``kts_placeholder: holding ... gpu=<its GPU's UUID from NVML>`` and sleeps. Its pod template is its own, with
minimal requests (``PLACEHOLDER_REQUESTS``: 10m CPU, 64Mi), so 46 of them fit on a node where 46 tenant-sized pods
would not; its completion indexes continue the tenants' (``KTS_HOLD_INDEX_BASE``). With a Kueue queue it is a
Workload of its own (Kueue admits each Job as one gang); the client deletes it with the tenants' Job.

**Tenants are Guaranteed QoS** (pkg/apis/core/v1/helper/qos, ``GetPodQOS``): CPU and memory requests equal
their limits, in whole CPUs (``threads``), so the kubelet's static CPU manager may give them exclusive cores and
other pods' CPU bursts do not enter the measured tail; the class the API server set is read back from each pod's
``status.qosClass`` and recorded.

**podFailurePolicy**: a pod that a preemption, a drain (Eviction API) or a taint manager stops gets the
condition ``DisruptionTarget``; the rule fails the Job at once (reason ``PodFailurePolicy``) and the backend
names the pod's condition (``state.disruption``), instead of "BackoffLimitExceeded ... exit 143".
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping, Sequence
from typing import Any

from kts_helpers.run.backends.kubernetes.barrier import GO_KEY, GO_MOUNT
from kts_helpers.run.backends.kubernetes.names import (
    ANN_NODE,
    ANN_PLACEHOLDERS,
    ANN_RUN,
    ANN_SCENARIO,
    ANN_START,
    ANN_TENANTS,
    CONTAINER,
    LABEL_NODE,
    LABEL_RUN,
    LABEL_SCENARIO,
    MANAGED_BY,
    MANAGED_VALUE,
    QUEUE_LABEL,
    STOP_GRACE_S,
    job_name,
    label_value,
)
from kts_helpers.run.corun import DEFAULT_LEAD_IN_S
from kts_helpers.run.spec import ScenarioSpec

# A sleeping placeholder (or replica probe): a Python interpreter that loads libnvidia-ml and sleeps; the GPU
# replica is what it holds. Requests only (no CPU limit): Burstable, and never throttled while it sleeps.
PLACEHOLDER_REQUESTS = {"cpu": "10m", "memory": "64Mi"}
PLACEHOLDER_GRACE_S = 1  # a sleeping placeholder or probe has nothing to finish: SIGKILL 1 s after SIGTERM at worst
HOLD_SUFFIX = "-hold"
WORKER_SERVICE_ACCOUNT = "kts-worker"
WORKER_PATH = "/opt/kts/kts_worker.py"  # where workers/Containerfile puts the worker (its ENTRYPOINT runs it)
GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
# The container's command: a tenant index execs the worker as the image's ENTRYPOINT would; a placeholder
# index says which GPU it holds and sleeps until stopped. Which GPU is asked of NVML (libnvidia-ml, which the
# NVIDIA container toolkit mounts into every GPU container, CDI included: index 0 is the container's one
# device), not of the environment: the device plugin sets NVIDIA_VISIBLE_DEVICES to a UUID only with
# deviceIDStrategy=uuid and a non-CDI device list strategy (internal/plugin/server.go, getAllocateResponse
# returns before updateResponseForDeviceListEnvVar when every strategy is CDI; the GPU Operator's default
# from v25.10). No CUDA context is made: a sleeping placeholder must not become an MPS client or hold memory.
# A placeholder is PID 1 of its container: Linux delivers it no signal whose action is the default, so without a
# handler it ignores SIGTERM and the kubelet SIGKILLs it (137) only after the grace period (issue 50): it handles
# SIGTERM (exit 143 at once), and its pod's grace period is 1 s besides (``build_hold_job``, the probe's too).
LAUNCHER = (
    "import ctypes, json, os, signal, sys, time\n"
    "i = int(os.environ.get('JOB_COMPLETION_INDEX', '0')) + int(os.environ.get('KTS_HOLD_INDEX_BASE', '0'))\n"
    "if i < len(json.loads(os.environ['KTS_TENANTS'])):\n"
    f"    os.execvp(sys.executable, [sys.executable, '-u', '{WORKER_PATH}'])\n"
    "signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))\n"
    "def nvml_uuid():\n"
    "    try:\n"
    "        nvml = ctypes.CDLL('libnvidia-ml.so.1')\n"
    "        handle, buf = ctypes.c_void_p(), ctypes.create_string_buffer(96)\n"
    "        if nvml.nvmlInit_v2() or nvml.nvmlDeviceGetHandleByIndex_v2(0, ctypes.byref(handle)):\n"
    "            return None\n"
    "        return buf.value.decode() if nvml.nvmlDeviceGetUUID(handle, buf, 96) == 0 else None\n"
    "    except Exception:\n"
    "        return None\n"
    "gpu = nvml_uuid()\n"
    "print('kts_placeholder: holding index=%d gpu=%s source=%s' % (i, gpu or os.environ.get('NVIDIA_VISIBLE_DEVICES', "
    "'?'), 'nvml' if gpu else 'env'), flush=True)\n"
    "time.sleep(float(os.environ.get('KTS_HOLD_S', '3600')))\n")


def scenario_env(scenario: ScenarioSpec, *, lead_in_s: float, pad_limit_s: float, barrier_timeout_s: float,
                 sharing_caps: Mapping[str, Any] | None = None, device: str = "cuda") -> dict[str, str]:
    """The environment every pod of the scenario shares; the tenants' own settings are in ``KTS_TENANTS``.

    The start is not in it: each worker reads its own from the go file (``barrier``) once every tenant
    is ready, and gives up after ``barrier_timeout_s``."""
    caps = {"KTS_SHARING_CAPS": json.dumps(dict(sharing_caps), separators=(",", ":"))} if sharing_caps else {}
    return {**caps, "KTS_HOLD_S": repr(float(barrier_timeout_s + pad_limit_s)),"KTS_GO_FILE": f"{GO_MOUNT}/{GO_KEY}", "KTS_BARRIER_TIMEOUT_S": repr(float(barrier_timeout_s)),
            "DEVICE": device, "HOME": "/scratch", "TMPDIR": "/scratch",
            "CUDA_CACHE_PATH": "/scratch/.nv", "PYTHONUNBUFFERED": "1",
            "KTS_LEAD_IN_S": repr(float(lead_in_s) if scenario.kind != "calibration" else 0.0),
            "KTS_PAD": "1" if scenario.kind == "shared" and len(scenario.tenants) > 1 else "0",
            "KTS_PAD_LIMIT_S": repr(float(pad_limit_s)),
            # Padding that nobody stopped (the client is gone) ends the pod successfully, so the Job can
            # complete by itself and ``--resume`` collects it; whether the padding covered every
            # neighbour is then checked from the logs.
            "KTS_PAD_LIMIT_EXIT": "0",
            "KTS_TENANTS": json.dumps([t.env() for t in scenario.tenants], separators=(",", ":"))}


def build_scenario_job(*, run_id: str, scenario: ScenarioSpec, namespace: str, image: str, node: str,
                       barrier_timeout_s: float = 3600.0, gpu_resource: str = "nvidia.com/gpu",
                       node_selector: Mapping[str, str | None] | None = None, queue_name: str | None = None,
                       service_account: str | None = WORKER_SERVICE_ACCOUNT, memory_limit: str = "8Gi",
                       active_deadline_s: int = 3600, image_pull_policy: str = "IfNotPresent",
                       ttl_s: int = 86400, runtime_class: str | None = None, lead_in_s: float = DEFAULT_LEAD_IN_S,
                       pad_limit_s: float = 3600.0, image_pull_secrets: Sequence[str] = (),
                       read_only_root: bool = False, placeholders: int = 0,
                       sharing_caps: Mapping[str, Any] | None = None,
                       tolerations: Sequence[Mapping[str, Any]] = (), device: str = "cuda",
                       priority_class: str | None = None) -> dict[str, Any]:
    """The Indexed Job running every tenant of ``scenario`` on ``node``.

    ``read_only_root`` (off by default): a read-only root filesystem is not required by Pod Security
    "restricted" and is reported to break GPU containers under CDI-mode container toolkits, so it is an
    option; the writable paths the worker needs are on the ``/scratch`` emptyDir either way.
    ``ttl_s`` keeps a finished Job (and its pods' logs) long enough for ``kts run --resume``.
    ``placeholders``: how many the scenario's hold Job has (``build_hold_job``), recorded in an annotation.
    ``tolerations``: the user's, added to the GPU one (a tainted GPU pool). ``sharing_caps``: the MPS caps
    the device plugin puts on every client (``nodes.mps_caps``), handed to the workers for their KTS_META.
    ``device``: the workers' torch device, ``cuda`` except on a cluster without GPUs (manifests/kind: a fake
    ``nvidia.com/gpu`` resource), where a shared scenario then fails its one-GPU proof, as it must.
    ``priority_class``: the tenants' PriorityClass (``kts-tenant`` of manifests/base, above the placeholders'), so
    that kube-scheduler's queue places them first and a preemptor takes a placeholder, not a tenant.
    """
    labels = {MANAGED_BY: MANAGED_VALUE, "app.kubernetes.io/name": "kts-worker",
              LABEL_RUN: label_value(run_id), LABEL_SCENARIO: label_value(scenario.name),
              LABEL_NODE: label_value(node)}
    annotations = {ANN_RUN: run_id, ANN_SCENARIO: scenario.name, ANN_NODE: node,
                   ANN_TENANTS: json.dumps(scenario.tenant_names), ANN_PLACEHOLDERS: str(int(placeholders))}
    env = scenario_env(scenario, lead_in_s=lead_in_s, pad_limit_s=pad_limit_s, barrier_timeout_s=barrier_timeout_s,
                       sharing_caps=sharing_caps, device=device)
    selector = {k: v for k, v in (node_selector or {}).items() if v not in (None, "!")}
    job_labels = dict(labels)
    if queue_name:
        job_labels[QUEUE_LABEL] = queue_name
    threads = max(t.threads for t in scenario.tenants)
    pod_spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
        "terminationGracePeriodSeconds": STOP_GRACE_S,  # SIGTERM: the worker finishes its iteration and exits
        "nodeSelector": selector,
        "affinity": node_affinity(node),
        "tolerations": [dict(GPU_TOLERATION), *(dict(t) for t in tolerations)],
        "securityContext": {"runAsNonRoot": True, "runAsUser": 10001, "runAsGroup": 10001, "fsGroup": 10001,
                            "seccompProfile": {"type": "RuntimeDefault"}},
        "containers": [{
            "name": CONTAINER,
            "image": image,
            "command": ["python", "-u", "-c", LAUNCHER],
            "imagePullPolicy": image_pull_policy,
            "env": [{"name": k, "value": v} for k, v in env.items()],
            # Guaranteed QoS: requests = limits, whole CPUs (the API server defaults requests to limits)
            "resources": {"requests": {"cpu": str(max(1, threads)), "memory": memory_limit},
                          "limits": {"cpu": str(max(1, threads)), "memory": memory_limit, gpu_resource: "1"}},
            "securityContext": {"runAsNonRoot": True, "allowPrivilegeEscalation": False, "privileged": False,
                                "readOnlyRootFilesystem": bool(read_only_root), "capabilities": {"drop": ["ALL"]},
                                "seccompProfile": {"type": "RuntimeDefault"}},
            "volumeMounts": [{"name": "scratch", "mountPath": "/scratch"},
                             {"name": "go", "mountPath": GO_MOUNT, "readOnly": True}],
        }],
        # the go: this pod's own annotation, which the kubelet writes into the volume as soon as it changes
        "volumes": [{"name": "scratch", "emptyDir": {"sizeLimit": "1Gi"}},
                    {"name": "go", "downwardAPI": {"items": [{
                        "path": GO_KEY, "fieldRef": {"fieldPath": f"metadata.annotations['{ANN_START}']"}}]}}],
    }
    if service_account:
        pod_spec["serviceAccountName"] = service_account
    if image_pull_secrets:
        pod_spec["imagePullSecrets"] = [{"name": s} for s in image_pull_secrets]
    if runtime_class:
        pod_spec["runtimeClassName"] = runtime_class  # e.g. "nvidia" on K3s without the GPU Operator
    if priority_class:
        pod_spec["priorityClassName"] = priority_class
    n = len(scenario.tenants)
    spec: dict[str, Any] = {
        "completionMode": "Indexed",
        "completions": n,
        "parallelism": n,  # every tenant at once: one pod per index (the placeholders are ``build_hold_job``'s)
        "backoffLimit": 0,  # a failed tenant is a failed measurement: never retry silently
        # a preemption, a drain or a taint eviction fails the Job at once, named by the pod's condition
        "podFailurePolicy": {"rules": [{"action": "FailJob", "onPodConditions": [
            {"type": "DisruptionTarget", "status": "True"}]}]},
        "activeDeadlineSeconds": int(active_deadline_s),  # server-side guard if the client dies
        "ttlSecondsAfterFinished": int(ttl_s),  # ... and garbage collection if nobody collects it
        "template": {"metadata": {"labels": dict(labels), "annotations": dict(annotations)}, "spec": pod_spec},
    }
    if queue_name:
        spec["suspend"] = True  # Kueue un-suspends it on admission: the whole gang at once
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": job_name(run_id, scenario.name), "namespace": namespace,
                         "labels": job_labels, "annotations": annotations},
            "spec": spec}


def hold_job_name(job: str) -> str:
    return f"{job}{HOLD_SUFFIX}"


def build_hold_job(tenant_job: Mapping[str, Any], placeholders: int, first_index: int,
                   gpu_resource: str = "nvidia.com/gpu", priority_class: str | None = None) -> dict[str, Any]:
    """The placeholders of a scenario: an Indexed Job of ``placeholders`` sleeping pods, each holding one replica
    of the measured GPU, made from the tenants' Job (same node pin, tolerations, identity, security context,
    labels, queue, deadlines) with a pod template of its own: minimal requests (``PLACEHOLDER_REQUESTS``), no
    tenant settings, the placeholders' PriorityClass (below the tenants': ``kts-placeholder``), a 1 s grace period
    (``PLACEHOLDER_GRACE_S``). Its index ``i`` is placeholder ``first_index + i`` (the tenants' Job has indexes
    below)."""
    body = {k: copy.deepcopy(v) for k, v in tenant_job.items() if k in ("apiVersion", "kind", "metadata", "spec")}
    meta = body["metadata"]
    body["metadata"] = {"name": hold_job_name(meta["name"]), "namespace": meta.get("namespace"),
                        "labels": dict(meta.get("labels") or {}),
                        "annotations": {**(meta.get("annotations") or {}), ANN_TENANTS: "[]",
                                        ANN_PLACEHOLDERS: str(int(placeholders))}}
    spec = body["spec"]
    spec.pop("successPolicy", None)
    spec.update(completions=int(placeholders), parallelism=int(placeholders))
    tmpl = spec["template"]
    tmpl["metadata"]["annotations"] = {**(tmpl["metadata"].get("annotations") or {}), ANN_TENANTS: "[]"}
    pod = tmpl["spec"]
    keep = ("KTS_HOLD_S", "HOME", "TMPDIR", "PYTHONUNBUFFERED")
    for c in pod["containers"]:
        env = [e for e in c.get("env") or [] if e.get("name") in keep]
        c["env"] = [*env, {"name": "KTS_TENANTS", "value": "[]"},
                    {"name": "KTS_HOLD_INDEX_BASE", "value": str(int(first_index))}]
        c["resources"] = {"requests": dict(PLACEHOLDER_REQUESTS),
                          "limits": {"memory": PLACEHOLDER_REQUESTS["memory"], gpu_resource: "1"}}
        c["volumeMounts"] = [m for m in c.get("volumeMounts") or [] if m.get("name") == "scratch"]
    pod["volumes"] = [v for v in pod.get("volumes") or [] if v.get("name") == "scratch"]
    pod["terminationGracePeriodSeconds"] = PLACEHOLDER_GRACE_S
    pod.pop("priorityClassName", None)
    if priority_class:
        pod["priorityClassName"] = priority_class
    return body


def node_affinity(node: str) -> dict[str, Any]:
    """Pin to the node by its name (``metadata.name``), which is what the kit lists: the
    ``kubernetes.io/hostname`` label may differ (FQDN vs short name, ``--hostname-override``)."""
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}]}}}


def pinned_node(pod_spec: Mapping[str, Any]) -> str | None:
    """The node a pod template is pinned to by ``node_affinity``; None when it is not pinned by name."""
    terms = ((((pod_spec.get("affinity") or {}).get("nodeAffinity") or {})
              .get("requiredDuringSchedulingIgnoredDuringExecution") or {}).get("nodeSelectorTerms") or [])
    for term in terms:
        for f in term.get("matchFields") or []:
            if f.get("key") == "metadata.name" and f.get("operator") == "In" and len(f.get("values") or []) == 1:
                return str(f["values"][0])
    return None


def job_tenants(job: Mapping[str, Any]) -> list[str]:
    """The tenant of each completion index, as the Job recorded it."""
    ann = ((job.get("metadata") or {}).get("annotations") or {}).get(ANN_TENANTS)
    try:
        names = json.loads(ann) if ann else []
    except ValueError:
        names = []
    return [str(n) for n in names] if isinstance(names, list) else []


def job_env(job: Mapping[str, Any]) -> dict[str, str]:
    """The plain environment of the Job's worker container (e.g. its START_AT, when re-attaching)."""
    containers = (((job.get("spec") or {}).get("template") or {}).get("spec") or {}).get("containers") or []
    worker = next((c for c in containers if c.get("name") == CONTAINER), containers[0] if containers else {})
    return {e["name"]: str(e.get("value", "")) for e in worker.get("env") or [] if "value" in e}


def job_placeholders(job: Mapping[str, Any]) -> int:
    """How many placeholder indexes the Job holds after its tenants' (0 for Jobs from before them)."""
    value = ((job.get("metadata") or {}).get("annotations") or {}).get(ANN_PLACEHOLDERS)
    return int(value) if str(value or "").isdigit() else 0
