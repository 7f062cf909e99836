"""The experiment as the notebooks run it: set up a run, calibrate, run scenarios by kind.

The one runner: the notebooks, ``kts run``, ``kts k8s-smoke`` and the Kubernetes scale-out all go
through :func:`setup_run` / :func:`run_kind` (same calibration, capacity check, time limits and failure
handling). Kept to the standard library and the run wing, so ``python -m kts_helpers run`` works on a
bare GPU host that has only torch (and nvidia-ml-py for telemetry).
"""

from __future__ import annotations

import contextlib
import os
import statistics
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

from kts_helpers.errors import RunError, SpecError
from kts_helpers.run.backends import Backend, ScenarioResult, get_backend
from kts_helpers.run.capacity import check_capacity
from kts_helpers.run.corun import Judge
from kts_helpers.run.environment import detect_environment, resolve_device
from kts_helpers.run.logformat import AppLine, parse_line
from kts_helpers.run.looks import BlockJudge
from kts_helpers.run.params import backend_options_from_env
from kts_helpers.run.probe import CPU_REFUSAL, PROBE_PROFILE, size_hog, with_hog_size
from kts_helpers.run.runs import DEFAULT_ROOT, Run, create_run, find_run
from kts_helpers.run.spec import (
    ExperimentParams,
    ExperimentSpec,
    ScenarioSpec,
    TenantSpec,
    calibration_scenario,
    resolve,
)
from kts_helpers.run.workloads import REAL_MODELS, preflight


def build_backend(params: ExperimentParams, device: str, options: dict[str, Any] | None = None) -> Backend:
    """Local: on this host. Kubernetes: options from the notebook, else from K8S_* / IMAGE (what make passes)."""
    options = backend_options_from_env(params.backend, options)
    if params.backend == "local":
        options.setdefault("device", device)
    return get_backend(params.backend, **options)


def plan(params: dict[str, Any] | ExperimentParams, device_type: str) -> ExperimentSpec:
    """Validate parameters and lay out scenarios, without touching any device."""
    p = params if isinstance(params, ExperimentParams) else ExperimentParams.from_mapping(params)
    return resolve(p, device_type)


def setup_run(params: dict[str, Any] | ExperimentParams, *, run_id: str | None = None,
              root: str | os.PathLike = DEFAULT_ROOT, backend_options: dict[str, Any] | None = None,
              calibrate: bool = True, python: str = sys.executable, progress: bool = True,
              backend: Backend | None = None) -> tuple[Run, ExperimentSpec, dict[str, Any]]:
    """Create a run: check parameters first (so typos fail before any work), detect the host, calibrate.

    ``backend`` (an already built one, e.g. one Kubernetes node of a scale-out) replaces building it from
    ``backend_options``.
    """
    p = params if isinstance(params, ExperimentParams) else ExperimentParams.from_mapping(params)
    plan(p, "cpu" if p.device == "cpu" and p.profile != "probe" else "cuda")  # fail fast on bad parameters
    if backend is not None and p.backend != "local":
        env, device = backend.describe(), "cuda"
    elif p.backend == "local":
        env = detect_environment(python)
        if p.profile == PROBE_PROFILE and not env.get("cuda_available"):
            raise SpecError(f"{CPU_REFUSAL.split(' (run it')[0]}; this host has none (torch {env.get('torch')})")
        device = resolve_device(p.device, env)
    else:  # the cluster's nodes have the GPUs; the notebook host may have none
        env = build_backend(p, "cuda", backend_options).describe()
        device = "cuda"
    if p.profile == PROBE_PROFILE and device == "cuda" and p.backend == "local":
        sizing = size_hog(python=python, device=p.device if p.device.startswith("cuda") else "cuda")
        env["probe_sizing"] = sizing  # the hog's GEMM size, calibrated on this GPU (recorded with the run)
        p = with_hog_size(p, sizing)
    spec = replace(resolve(p, device), backend_options=dict(backend_options or {}))
    if p.backend == "local" and backend is None:  # every tenant's own workload builds, before any scenario runs
        preflight(preflight_tenants(spec), p.device if p.device != "auto" else device, python=python)
    if device == "cuda" and env.get("device_memory_gib"):  # refuse up front what cannot fit, with the estimate
        check_capacity(spec.scenarios, float(env["device_memory_gib"]) * 1024)
    run = create_run(spec.to_dict(), env, root=root, run_id=run_id, label=p.label)
    if calibrate and spec.resolved.get("calibrate_iterations"):
        run_calibration(run, progress=progress, backend=backend)
    return run, spec, env


def preflight_tenants(spec: ExperimentSpec) -> list[TenantSpec]:
    """The tenants whose workload the pre-flight builds: each once (a design of many blocks names a tenant in each
    of them: 27 concurrent builds of three models on one GPU, before this), and under the warm design none of the
    kit's own real models, whose one build is the warm session's start (a failure there names the tenant and its
    error, before any block runs): a second build cost 20-25 s of a real-model run on the H200."""
    warm = spec.resolved.get("design_kind") == "warm"
    seen: dict[str, TenantSpec] = {}
    for s in spec.scenarios_of("baseline"):
        for t in s.tenants:
            if not (warm and t.workload in REAL_MODELS):
                seen.setdefault(t.name, t)
    return list(seen.values())


def backend_for_run(run: Run) -> Backend:
    """The backend this run was set up with (its options are in the spec)."""
    m = run.read()
    options = dict(m.spec.backend_options)
    if m.backend == "local" and m.environment.get("gpu_uuid"):
        options.setdefault("gpu_uuid", m.environment["gpu_uuid"])  # telemetry samples the tenants' GPU
    if m.backend == "kubernetes" and m.environment.get("node"):
        options.setdefault("node_name", m.environment["node"])  # every scenario on the node it was set up on
    return build_backend(m.spec.params, m.device, options)


def calibration_floor(log: str | os.PathLike) -> dict[str, Any]:
    """The tool's own overhead: median (wall - device) of a one-element kernel timed like the workloads."""
    walls, devices = [], []
    with open(log, "rb") as fh:
        for raw in fh:
            rec = parse_line(raw)
            if isinstance(rec, AppLine) and rec.version == "v2" and not rec.padding:
                devices.append(rec.device_ms)
                walls.append(rec.wall_ms)
    if not walls:
        return {"floor_ms": 0.0, "n": 0, "note": "no calibration samples"}
    gaps = sorted(w - d for w, d in zip(walls, devices, strict=True))
    if all(abs(g) < 1e-9 for g in gaps):
        return {"floor_ms": 0.0, "n": len(gaps), "note": "CPU: device time = wall time, no separate floor"}
    k = (len(gaps) - 1) * 0.99  # numpy's linear quantile
    lo = int(k)
    p99 = gaps[lo] + (gaps[min(lo + 1, len(gaps) - 1)] - gaps[lo]) * (k - lo)
    return {"floor_ms": statistics.median(gaps), "p99_ms": p99, "device_p50_ms": statistics.median(devices),
            "wall_p50_ms": statistics.median(walls), "n": len(gaps),
            "note": "median of wall - device for a 1-element add, same timing loop"}


def run_calibration(run: Run, *, progress: bool = True, backend: Backend | None = None) -> dict[str, Any]:
    """Time a one-element kernel with the workers' own loop; record the overhead floor in the manifest."""
    spec = run.read().spec
    scen = calibration_scenario(spec.resolved)
    (backend or backend_for_run(run)).run_scenario(run, scen, timeout_s=spec.timeout_s, progress=progress)
    cal = calibration_floor(run.log_path(scen.name, "noop"))
    run.update(calibration=cal)
    return cal


def run_kind(run: Run, kind: str, *, progress: bool = True, backend: Backend | None = None,
             skip_failed: bool = False, judge: Judge | None = None,
             block_judge: BlockJudge | None = None) -> list[ScenarioResult]:
    """Run the scenarios of one notebook that have not run yet, in spec order: "baseline" the alone scenarios
    before the first shared one, "shared" everything from there on -- the shared blocks and the alone blocks
    between and after them (the bracketed design, ``spec._bracketed``; repeats likewise alternate), so alone is
    measured on both sides of every shared block ("all": every scenario, in one pass: the warm design's ``kts run``,
    one set of warm workers per mode). A run of one block a side runs as before: every alone scenario,
    then every shared one. ``skip_failed``: also leave out those that failed; their logs stay as they are.
    ``judge`` answers the interim looks of a shared scenario (``analyse.sequential.VerdictJudge``; none: every
    tenant times on); ``block_judge`` the looks of ``blocks=auto`` (``analyse.blockseq.BlocksJudge``; none: the
    run takes its whole budget)."""
    if kind not in ("baseline", "shared", "all"):
        raise SpecError(f"unknown scenario kind {kind!r}; choose baseline or shared (or all)")
    m = run.read()
    backend = backend or backend_for_run(run)
    results = []
    done = ("complete", "failed") if skip_failed else ("complete",)
    first = next((i for i, s in enumerate(m.scenarios) if s.kind == "shared"), len(m.scenarios))
    mine = (m.scenarios[:first] if kind == "baseline" else m.scenarios[first:] if kind == "shared"
            else m.scenarios)
    if m.spec.resolved.get("design_kind") == "warm":  # warm tenants: the blocks of a mode in one session
        pending = [s for s in mine if s.kind in ("baseline", "shared", "control")
                   and (m.record(s.name) is None or m.record(s.name).status not in done + ("skipped",))]
        if not hasattr(backend, "run_warm"):
            raise SpecError(f"run {run.run_id} has the warm design, which the {backend.name} backend cannot run")
        return backend.run_warm(run, pending, timeout_s=m.spec.timeout_s, block_s=float(m.spec.resolved["block_s"]),
                                progress=progress, pad_limit_s=m.spec.pad_limit_s, block_judge=block_judge)
    for scenario in mine:
        record = m.record(scenario.name)
        if scenario.kind not in ("baseline", "shared") or (record is not None and record.status in done):
            continue
        results.append(backend.run_scenario(run, scenario, timeout_s=m.spec.timeout_s, progress=progress,
                                            pad_limit_s=m.spec.pad_limit_s, judge=judge))
    return results


def run_experiment(params: dict[str, Any] | ExperimentParams, **kwargs: Any) -> Run:
    """Everything the three run notebooks do, in one call (the CLI's ``run``, the smoke test, each scale-out cell)."""
    progress = kwargs.get("progress", True)
    judge = kwargs.pop("judge", None)
    block_judge = kwargs.pop("block_judge", None)
    run, spec, _env = setup_run(params, **kwargs)
    # the warm design in one pass: one set of warm workers per sharing mode, not one more for the first alone round
    kinds = ("all",) if spec.resolved.get("design_kind") == "warm" else ("baseline", "shared")
    for kind in kinds:
        run_kind(run, kind, progress=progress, backend=kwargs.get("backend"), judge=judge, block_judge=block_judge)
    return run


def resume_experiment(run_id_or_path: str, *, root: str | os.PathLike = DEFAULT_ROOT, progress: bool = True,
                      backend: Backend | None = None) -> Run:
    """Continue a run whose client went away (``kts run --resume``): every scenario without a record runs now.

    On Kubernetes a scenario whose Job this run submitted before is not started again: a Job that
    completed meanwhile is collected, a running one is followed, a failed one is replaced; those come
    first, since they may still hold the GPU. Scenarios recorded as failed keep their logs and are left
    out (runs are immutable). A scenario the client's death cut off before its outcome was recorded left partial
    logs; they are set aside (``Run.set_aside_interrupted``, kept, not deleted) and the scenario runs again.
    """
    run = find_run(run_id_or_path, root)
    m = run.read()
    backend = backend or backend_for_run(run)
    cal = calibration_scenario(m.spec.resolved) if m.spec.resolved.get("calibrate_iterations") else None
    submitted = set(getattr(backend, "submitted_scenarios", lambda _run_id: [])(run.run_id))
    for scenario in ([cal] if cal is not None else []) + list(m.scenarios):
        if scenario.name not in submitted and m.record(scenario.name) is None:
            alive = workers_still_running(run, scenario)
            if alive:  # re-running now would share the GPU with them, and move logs they still write
                raise RunError(f"the interrupted attempt of {scenario.name} in run {run.run_id} still runs "
                               f"(worker pid {', '.join(map(str, alive))}): let it finish or stop it, then resume")
            set_aside = run.set_aside_interrupted(scenario.name)  # a local attempt the client's death cut off
            if set_aside is not None:
                print(f"kts: the interrupted attempt of {scenario.name} is kept in {set_aside}", file=sys.stderr)
    for scenario in ([cal] if cal is not None else []) + list(m.scenarios):
        if scenario.name in submitted and m.record(scenario.name) is None:
            if scenario is cal:
                run_calibration(run, progress=progress, backend=backend)
            else:
                backend.run_scenario(run, scenario, timeout_s=m.spec.timeout_s, progress=progress,
                                     pad_limit_s=m.spec.pad_limit_s)
    m = run.read()
    if cal is not None and not m.calibration:
        record = m.record(cal.name)
        if record is not None and record.status == "complete":  # the client died before the floor was stored
            run.update(calibration=calibration_floor(run.log_path(cal.name, "noop")))
        elif record is None:
            run_calibration(run, progress=progress, backend=backend)
    kinds = ("all",) if m.spec.resolved.get("design_kind") == "warm" else ("baseline", "shared")
    for kind in kinds:
        run_kind(run, kind, progress=progress, backend=backend, skip_failed=True)
    return run


def workers_still_running(run: Run, scenario: ScenarioSpec) -> list[int]:
    """The pids of ``scenario``'s workers still alive on this host, from the local backend's ``Run.pid_path`` files.

    Why: the local backend starts each worker in its own session (so Ctrl-C reaches the client, which stops them in
    order), so a client killed mid-scenario leaves its workers running: on the H200 one stayed four minutes, its log
    still empty (a worker writes ``KTS_META`` only after loading its model and profiling it). A resume that started
    the scenario again beside them would time tenants next to strangers on the GPU. A pid counts only while its
    command line names the worker (``/proc``: Linux; a pid reused by another program is not a worker).
    """
    alive = []
    for t in scenario.tenants:
        with contextlib.suppress(OSError, ValueError):  # no pid file (never started, another backend), gone, no /proc
            pid = int(run.pid_path(scenario.name, t.name).read_text())
            if b"kts_worker" in Path(f"/proc/{pid}/cmdline").read_bytes():
                alive.append(pid)
    return alive


def describe_plan(spec: ExperimentSpec) -> list[dict[str, Any]]:
    """One row per scenario for the set-up notebook: what will run, with which tenants."""
    return [{"scenario": s.name, "kind": s.kind, "sharing": s.sharing,
             "tenants": ", ".join(f"{t.name} ({t.workload} N={t.matrix_size}, {t.iterations_text} it, sleep {t.sleep_ms} ms)"
                                  for t in s.tenants)} for s in spec.scenarios]
