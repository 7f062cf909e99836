"""The experiment as the notebooks run it: set up a run, calibrate, run scenarios by kind.

Kept free of notebook and plotting imports so that ``python -m kts_helpers run`` works on a
bare GPU host that has only torch, numpy and pandas.
"""

from __future__ import annotations

import os
import sys
from dataclasses import asdict
from typing import Any

from kts_helpers.analyse.load import calibration_floor
from kts_helpers.analyse.logparse import parse_file
from kts_helpers.errors import SpecError
from kts_helpers.run.backends import Backend, ScenarioResult, get_backend
from kts_helpers.run.runs import DEFAULT_ROOT, Run, create_run, find_run
from kts_helpers.run.spec import (
    ExperimentParams,
    ExperimentSpec,
    calibration_scenario,
    resolve,
    scenario_from_dict,
)

K8S_ENV = {"namespace": "K8S_NAMESPACE", "image": "IMAGE", "context": "K8S_CONTEXT",
           "node_selector": "K8S_NODE_SELECTOR", "queue_name": "K8S_QUEUE", "runtime_class": "K8S_RUNTIME_CLASS",
           "dcgm_url": "KTS_DCGM_URL", "allocation_policy": "K8S_ALLOCATION_POLICY"}


def build_backend(params: ExperimentParams, device: str, options: dict[str, Any] | None = None) -> Backend:
    """Local: on this host. Kubernetes: options from the notebook, else from K8S_* / IMAGE (what make passes)."""
    options = dict(options or {})
    if params.backend == "local":
        options.setdefault("device", device)
    else:
        for key, var in K8S_ENV.items():
            if os.environ.get(var):
                options.setdefault(key, os.environ[var])
    return get_backend(params.backend, **options)


def plan(params: dict[str, Any] | ExperimentParams, device_type: str) -> ExperimentSpec:
    """Validate parameters and lay out scenarios, without touching any device."""
    p = params if isinstance(params, ExperimentParams) else ExperimentParams.from_mapping(params)
    return resolve(p, device_type)


def setup_run(params: dict[str, Any], *, run_id: str | None = None, root: str | os.PathLike = DEFAULT_ROOT,
              backend_options: dict[str, Any] | None = None, calibrate: bool = True,
              python: str = sys.executable, progress: bool = True) -> tuple[Run, ExperimentSpec, dict[str, Any]]:
    """Create a run: check parameters first (so typos fail before any work), detect the host, calibrate."""
    p = ExperimentParams.from_mapping(params)
    plan(p, "cuda" if p.device.startswith("cuda") else "cpu")  # fail fast on bad parameters
    from kts_helpers.run.environment import detect_environment, resolve_device

    if p.backend == "local":
        env = detect_environment(python)
        device = resolve_device(p.device, env)
    else:  # the cluster's nodes have the GPUs; the notebook host may have none
        backend = build_backend(p, "cuda", backend_options)
        env = backend.describe()
        device = "cuda"
    spec = resolve(p, device)
    if device == "cuda" and env.get("device_memory_gib"):  # refuse up front what cannot fit, with the estimate
        from kts_helpers.run.capacity import check_capacity

        check_capacity(spec.scenarios, float(env["device_memory_gib"]) * 1024)
    spec_dict = spec.to_dict()
    spec_dict["backend_options"] = backend_options or {}
    run = create_run(spec_dict, env, root=root, run_id=run_id, label=p.label)
    if calibrate and spec.resolved.get("calibrate_iterations"):
        run_calibration(run, progress=progress)
    return run, spec, env


def backend_for_run(run: Run) -> Backend:
    m = run.manifest()
    p = ExperimentParams.from_mapping(m["spec"]["params"])
    options = dict(m["spec"].get("backend_options") or {})
    if p.backend == "local" and m.get("environment", {}).get("gpu_uuid"):
        options.setdefault("gpu_uuid", m["environment"]["gpu_uuid"])  # telemetry samples the tenants' GPU
    return build_backend(p, m["spec"]["device"], options)


def run_calibration(run: Run, *, progress: bool = True) -> dict[str, Any]:
    """Time a one-element kernel with the workers' own loop; record the overhead floor in the manifest."""
    m = run.manifest()
    scen = calibration_scenario(m["spec"]["resolved"])
    backend = backend_for_run(run)
    backend.run_scenario(run, scen, timeout_s=float(m["spec"]["resolved"].get("timeout_s") or 600),
                         progress=progress)
    cal = calibration_floor(parse_file(run.log_path(scen.name, "noop")))
    run.update(calibration=cal)
    return cal


def run_kind(run: Run, kind: str, *, progress: bool = True) -> list[ScenarioResult]:
    """Run every scenario of ``kind`` ("baseline" or "shared") that has not run yet, in spec order."""
    if kind not in ("baseline", "shared"):
        raise SpecError(f"unknown scenario kind {kind!r}; choose baseline or shared")
    m = run.manifest()
    resolved = m["spec"]["resolved"]
    timeout_s = float(resolved.get("timeout_s") or 600)
    pad_limit_s = float(resolved["pad_limit_s"]) if resolved.get("pad_limit_s") else None
    backend = backend_for_run(run)
    results = []
    for d in m["spec"]["scenarios"]:
        if d["kind"] != kind or m.get("scenarios", {}).get(d["name"], {}).get("status") == "complete":
            continue
        results.append(backend.run_scenario(run, scenario_from_dict(d), timeout_s=timeout_s, progress=progress,
                                            pad_limit_s=pad_limit_s))
    return results


def run_experiment(params: dict[str, Any], **kwargs: Any) -> Run:
    """Everything the three run notebooks do, in one call (the CLI's ``run``)."""
    progress = kwargs.get("progress", True)
    run, _spec, _env = setup_run(params, **kwargs)
    for kind in ("baseline", "shared"):
        run_kind(run, kind, progress=progress)
    return run


def open_for_notebook(run_id: str, root: str | os.PathLike = DEFAULT_ROOT) -> Run:
    return find_run(run_id, root)


__all__ = ["setup_run", "run_kind", "run_calibration", "run_experiment", "plan", "asdict"]
