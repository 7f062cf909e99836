"""Names and labels of the objects the kit creates, and the checks that an object is one of them.

Every object carries ``app.kubernetes.io/managed-by=kts`` plus run and scenario labels; the kit deletes
only objects whose labels it verifies itself (never trusting a server-side selector alone), and only
those of the run it is working on (or, for ``k8s-smoke --cleanup``, kit objects older than a stated age).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from typing import Any

from kts_helpers.errors import SpecError

MANAGED_BY = "app.kubernetes.io/managed-by"
MANAGED_VALUE = "kts"
LABEL_RUN = "kts.run-id"
LABEL_SCENARIO = "kts.scenario"
LABEL_TENANT = "kts.tenant"
LABEL_NODE = "kts.node"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
# Set by the Job controller on every pod of an Indexed Job (label since Kubernetes 1.28, annotation before).
INDEX_KEY = "batch.kubernetes.io/job-completion-index"
JOB_NAME_KEYS = ("batch.kubernetes.io/job-name", "job-name")
# Annotations keep the exact (unsanitised) values; labels are for selection only.
ANN_RUN, ANN_SCENARIO, ANN_TENANT, ANN_NODE = "kts/run-id", "kts/scenario", "kts/tenant", "kts/node"
ANN_TENANTS = "kts/tenants"  # JSON list: the tenant of each completion index
# The start barrier's go: each tenant pod's start (JSON tenant -> epoch ns on the node's clock), written by the
# client as a pod annotation and read by the worker through a downwardAPI volume (``barrier``).
ANN_START = "kts/start-at"
ANN_PLACEHOLDERS = "kts/placeholders"  # how many completion indexes after the tenants' hold the GPU's replicas
GPU_RESOURCES = ("nvidia.com/gpu", "nvidia.com/gpu.shared")
NODE_REPLICAS = "nvidia.com/gpu.replicas"
NODE_STRATEGY = "nvidia.com/gpu.sharing-strategy"
NODE_PRODUCT = "nvidia.com/gpu.product"
NODE_COUNT = "nvidia.com/gpu.count"
CONTAINER = "worker"
STOP_GRACE_S = 30
RESOLUTION_S = 1  # API timestamps are RFC 3339 with whole seconds
LABEL_RE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$")


# --------------------------------------------------------------------------- names and labels

def as_int(value: Any) -> int | None:
    try:
        return int(str(value))
    except (TypeError, ValueError):
        return None


def label_value(value: str) -> str:
    """A valid label value for ``value``: invalid characters become '-', long values keep a hash."""
    clean = re.sub(r"[^A-Za-z0-9_.-]", "-", str(value))
    if len(clean) > 63 or clean != value:
        digest = hashlib.sha1(str(value).encode()).hexdigest()[:8]
        clean = clean[:54] if len(clean) > 54 else clean
        clean = f"{clean.strip('-_.')}-{digest}" if clean.strip("-_.") else digest
    clean = clean.strip("-_.")
    if not LABEL_RE.match(clean):  # pragma: no cover - defensive, the rules above guarantee it
        raise SpecError(f"cannot turn {value!r} into a Kubernetes label value")
    return clean


def job_name(run_id: str, scenario: str) -> str:
    """A DNS-1123 name, unique per (run, scenario); short enough that ``<job>-<index>`` (the pods'
    hostname) and the pod names stay within 63 characters."""
    slug = re.sub(r"[^a-z0-9]+", "-", scenario.lower()).strip("-")
    digest = hashlib.sha1(f"{run_id}\0{scenario}".encode()).hexdigest()[:6]
    return f"kts-{slug[:40].strip('-')}-{digest}"


def lease_name(node: str) -> str:
    """The Lease that says who measures on ``node`` (one per node, shared by every kts client)."""
    slug = re.sub(r"[^a-z0-9.-]+", "-", node.lower()).strip("-.")
    if len(slug) > 48 or slug != node:
        slug = f"{slug[:40].strip('-.')}-{hashlib.sha1(node.encode()).hexdigest()[:6]}"
    return f"kts-node-{slug}"


def job_of(obj: Mapping[str, Any]) -> str | None:
    """The Job a pod belongs to (the Job controller's label)."""
    labels = (obj.get("metadata") or {}).get("labels") or {}
    return next((labels[k] for k in JOB_NAME_KEYS if labels.get(k)), None)


def completion_index(pod: Mapping[str, Any]) -> int | None:
    """A pod's completion index in its Indexed Job (label, or the annotation of older clusters)."""
    meta = pod.get("metadata") or {}
    return as_int((meta.get("labels") or {}).get(INDEX_KEY, (meta.get("annotations") or {}).get(INDEX_KEY)))


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
