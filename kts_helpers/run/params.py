"""Where parameters come in: command-line ``--set key=value``, notebook parameters, and the Kubernetes
settings ``make`` passes through the environment. Each is turned into experiment parameters (or backend
options) here and nowhere else, so a name means the same thing on every path.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import fields
from typing import Any

from kts_helpers.errors import SpecError
from kts_helpers.run.spec import ExperimentParams

# Backend option -> environment variable (what `make report BACKEND=kubernetes K8S_NAMESPACE=...` sets).
K8S_ENV = {"namespace": "K8S_NAMESPACE", "image": "IMAGE", "context": "K8S_CONTEXT",
           "node_selector": "K8S_NODE_SELECTOR", "queue_name": "K8S_QUEUE", "runtime_class": "K8S_RUNTIME_CLASS",
           "dcgm_url": "KTS_DCGM_URL", "allocation_policy": "K8S_ALLOCATION_POLICY",
           "image_pull_secrets": "K8S_IMAGE_PULL_SECRETS", "read_only_root": "K8S_READ_ONLY_ROOT",
           "node_name": "K8S_NODE", "gpu_replicas": "K8S_GPU_REPLICAS", "tolerations": "K8S_TOLERATIONS",
           "placeholders": "K8S_PLACEHOLDERS", "cluster_pod_list": "K8S_CLUSTER_POD_LIST",
           "worker_device": "K8S_WORKER_DEVICE", "device_plugin_config": "K8S_DEVICE_PLUGIN_CONFIG",
           "priority_classes": "K8S_PRIORITY_CLASSES"}
EXPERIMENT_KEYS = frozenset(f.name for f in fields(ExperimentParams))


def parse_value(text: str) -> Any:
    """A ``--set`` value: JSON where it parses (numbers, lists, objects), else the plain string."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def parse_sets(pairs: Iterable[str] | None) -> dict[str, Any]:
    """``["iterations=300", "sharing=timeslice,mps"]`` -> {"iterations": 300, "sharing": "timeslice,mps"}."""
    out: dict[str, Any] = {}
    for pair in pairs or ():
        if "=" not in pair:
            raise SpecError(f"--set expects key=value, got {pair!r}")
        key, _, val = pair.partition("=")
        out[key.strip()] = parse_value(val.strip())
    return out


def from_notebook(values: Mapping[str, Any], extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Notebook parameters -> experiment parameters: ``None`` means "use the profile's value"."""
    out = {k: v for k, v in values.items() if v is not None and k in EXPERIMENT_KEYS}
    out.update(extra or {})
    return out


def split_for_notebook(params: Mapping[str, Any], declared: Iterable[str]) -> dict[str, Any]:
    """Parameters a notebook declares go in by name; every other experiment parameter via ``extra_params``."""
    declared = set(declared)
    named = {k: v for k, v in params.items() if k in declared and k != "extra_params"}
    extra = {**dict(params.get("extra_params") or {}),
             **{k: v for k, v in params.items() if k not in declared and k != "extra_params"}}
    return {**named, "extra_params": extra}


def backend_options_from_env(backend: str, options: Mapping[str, Any] | None = None,
                             environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Options given explicitly win; for Kubernetes the rest come from K8S_* / IMAGE when they are set."""
    out = dict(options or {})
    if backend == "kubernetes":
        env = os.environ if environ is None else environ
        for key, var in K8S_ENV.items():
            if env.get(var):
                out.setdefault(key, env[var])
    return out


# Analysis options: how a run is *read* (03-analysis), never how it is run; ``make report SET='interval=bootstrap'``.
INTERVALS = {"order": "order", "bootstrap": "stationary", "stationary": "stationary", "circular": "circular",
             "iid": "iid"}
ANALYSIS_KEYS = frozenset({"interval", "margin", "slo_ms"})


def split_analysis(params: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(run parameters, analysis options as 03-analysis takes them: ci_method, margin, slo_ms), checked here.

    Why here: ``--set`` carries both, and an analysis option that reached the experiment's spec would be
    refused there as an unknown parameter (or, worse, a run would be made to change how it is read).
    """
    run = {k: v for k, v in params.items() if k not in ANALYSIS_KEYS}
    out: dict[str, Any] = {}
    if "interval" in params:
        name = str(params["interval"])
        if name not in INTERVALS:
            raise SpecError(f"interval={name!r}: choose one of {', '.join(INTERVALS)}")
        out["ci_method"] = INTERVALS[name]
    if "margin" in params:
        m = params["margin"]
        if isinstance(m, bool) or not isinstance(m, (int, float)) or not 0 < m < 1:
            raise SpecError(f"margin={m!r}: expected a number between 0 and 1 (0.1 for ±10 %)")
        out["margin"] = float(m)
    if "slo_ms" in params:
        slo = params["slo_ms"]
        if not isinstance(slo, Mapping) or not all(
                isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0 for v in slo.values()):
            raise SpecError(f"slo_ms={slo!r}: expected an object of tenant -> milliseconds > 0, e.g. "
                            "slo_ms={\"fft\": 1.0}")
        out["slo_ms"] = {str(k): float(v) for k, v in slo.items()}
    return run, out
