"""One replica more than the kit believes free: without reading the node, prove that no replica is left over.

Why: with the namespaced Role alone the kit cannot read the node, so the replicas of its GPU are what the user
stated (``gpu_replicas``, K8S_GPU_REPLICAS). Placeholders hold ``replicas - tenants`` of them; if the statement
is too low, replicas stay free and a stranger can be placed beside the tenants, unseen from the kit's
namespace. So once every tenant and placeholder runs, and before the start, the kit asks the scheduler for one
more replica on the node (a one-pod Job of the scenario, asleep, minimal CPU and memory): kube-scheduler's
answer is the proof. "Insufficient nvidia.com/gpu" (NodeResourcesFit) means no replica was free: the
statement held, and no stranger can be placed during the scenario. Placed means a replica was free: the
scenario fails, naming it. No decision within ``PROBE_DECIDE_S`` (a queue holding the Job, a slow scheduler)
leaves the replicas stated and unverified, and the record says so.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from typing import Any

from kts_helpers.run.backends.kubernetes.jobs import PLACEHOLDER_GRACE_S, PLACEHOLDER_REQUESTS
from kts_helpers.run.backends.kubernetes.names import QUEUE_LABEL
from kts_helpers.run.backends.kubernetes.state import condition

PROBE_SUFFIX = "-probe"
PROBE_DECIDE_S = 30.0
PROBE_REQUESTS = PLACEHOLDER_REQUESTS  # a sleeping interpreter; the GPU replica is what is asked


def probe_job(job: Mapping[str, Any], gpu_resource: str, priority_class: str | None = None) -> dict[str, Any]:
    """The probe: the scenario's Job reduced to one sleeping pod that asks for one replica, same node, same
    identity and security context (Pod Security "restricted"), same labels (clean-up takes it with the run), the
    placeholders' PriorityClass (it must never be placed before a tenant) and a 1 s grace period."""
    body = {k: copy.deepcopy(v) for k, v in job.items() if k in ("apiVersion", "kind", "metadata", "spec")}
    meta = body["metadata"]
    body["metadata"] = {"name": f"{meta['name']}{PROBE_SUFFIX}", "namespace": meta.get("namespace"),
                        "labels": {k: v for k, v in (meta.get("labels") or {}).items() if k != QUEUE_LABEL},
                        "annotations": {**(meta.get("annotations") or {}), "kts/tenants": "[]",
                                        "kts/placeholders": "1"}}
    spec = body["spec"]
    for key in ("successPolicy", "suspend", "podFailurePolicy"):
        spec.pop(key, None)
    spec.update(completions=1, parallelism=1, backoffLimit=0, activeDeadlineSeconds=int(PROBE_DECIDE_S * 4))
    pod = spec["template"]["spec"]
    pod.pop("nodeName", None)
    pod["terminationGracePeriodSeconds"] = PLACEHOLDER_GRACE_S
    pod.pop("priorityClassName", None)
    if priority_class:
        pod["priorityClassName"] = priority_class
    for c in pod["containers"]:
        env = [e for e in c.get("env") or [] if e.get("name") not in ("KTS_TENANTS", "KTS_HOLD_S",
                                                                      "KTS_HOLD_INDEX_BASE")]
        c["env"] = [*env, {"name": "KTS_TENANTS", "value": json.dumps([])},
                    {"name": "KTS_HOLD_S", "value": repr(PROBE_DECIDE_S * 4)}]
        c["resources"] = {"requests": dict(PROBE_REQUESTS), "limits": {"memory": PROBE_REQUESTS["memory"],
                                                                      gpu_resource: "1"}}
    return body


def probe_verdict(pod: Mapping[str, Any] | None) -> tuple[str, str]:
    """("held", the scheduler's words) when no replica was free; ("free", the node) when the probe was placed;
    ("", "") while the scheduler has not decided."""
    if pod is None:
        return "", ""
    node = (pod.get("spec") or {}).get("nodeName")
    if node:
        return "free", str(node)
    sched = condition(pod, "PodScheduled")
    message = str(sched.get("message") or "")
    if sched.get("status") == "False" and "nvidia.com/" in message:
        return "held", message.splitlines()[0][:300]
    return "", ""
