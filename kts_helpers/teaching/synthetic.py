"""Run directories written by the simulator: the kit's own log format, with a known quantum behind them.

Why: to try the analysis, the notebook's real-run section and the probe's reading without a GPU, and to
test that they recover the quantum and switch cost the simulator was given. Logged device_ms is the
simulator's ``device_ms`` (what a pair of CUDA events records, so a kernel preempted mid-way carries the
neighbour's slice); wall_ms is issue to completion. Such a run says ``"source": "kts_helpers.simulate"`` in every log and
``profile`` "simulated" (or "probe" for :func:`write_sim_probe`, with ``device`` "simulated") in its
manifest. Neither function ever writes over an existing directory.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from kts_helpers.analyse.probe import (
    HOG,
    HOG_LONG,
    HOG_POISSON,
    HOG_SHORT,
    LENGTHS,
    MULTI,
    TICK,
    TICK_BB,
    multi_name,
)
from kts_helpers.errors import RunError
from kts_helpers.plan.timeslice import SimError
from kts_helpers.run.logformat import META_TAG, AppLine, format_line, format_record
from kts_helpers.teaching.model import (
    DEFAULT_DURATION_MS,
    DEFAULT_SLICE_TIMER,
    SimTenant,
    check_params,
    simulate,
)

SYNTHETIC_EPOCH_NS = 1_700_000_000_000_000_000
SIMULATED_DEVICE = "simulated"  # the manifest's device of a simulated run: a time-sliced GPU, not a CPU


def _log_lines(kernels: pd.DataFrame, workload: str, tenant: str) -> str:
    lines = [format_record(META_TAG, {"workload": workload, "tenant": tenant, "source": "kts_helpers.simulate"})]
    for r in kernels.itertuples(index=False):
        start = SYNTHETIC_EPOCH_NS + round(r.arrival_ms * 1e6)
        end = SYNTHETIC_EPOCH_NS + round(r.end_ms * 1e6)
        lines.append(format_line(AppLine(workload=workload, tenant=tenant, iteration=r.iteration, phase="op",
                                         intended_ns=start, start_ns=start, end_ns=end, device_ms=r.device_ms,
                                         wall_ms=r.wall_ms)))
    return "\n".join(lines) + "\n"


def _tenant_dict(t: SimTenant, workload: str) -> dict[str, Any]:
    return {"name": t.name, "workload": workload, "sleep_ms": t.period_ms, "iterations": 0, "matrix_size": 0}


def _write(root: Path, scenarios: Sequence[tuple[Any, ...]],
           workloads: dict[str, str], *, quantum_ms: float, context_switch_ms: float, seed: int, status: str,
           profile: str, device: str, resolved: dict[str, Any]) -> Path:
    """Simulate each (name, kind, tenants, duration) scenario and write its logs, then the manifest last."""
    if root.exists():
        raise RunError(f"{root} already exists; a synthetic run is never written over another")
    spec_scenarios = []
    for name, kind, tenants, duration, *block in scenarios:
        repeat = block[0] if block else 0  # a block of a bracketed design: its own draw of the same process
        kernels = simulate(tenants, quantum_ms, context_switch_ms, duration, seed + 1000 * repeat)
        (root / "logs" / name).mkdir(parents=True)
        for t in tenants:
            mine = kernels[kernels["tenant"] == t.name]
            if len(mine):
                (root / "logs" / name / f"{t.name}.log").write_text(_log_lines(mine, workloads[t.name], t.name))
        spec_scenarios.append({"name": name, "kind": kind, "sharing": "timeslice", "repeat": repeat,
                               "tenants": [_tenant_dict(t, workloads[t.name]) for t in tenants]})
    manifest = {"format_version": 2, "run_id": root.name, "label": "simulated", "status": status,
                "spec": {"profile": profile, "device": device,
                         "resolved": {**resolved, "quantum_ms": quantum_ms, "context_switch_ms": context_switch_ms,
                                      "seed": seed, "slice_timer": DEFAULT_SLICE_TIMER},
                         "scenarios": spec_scenarios},
                "environment": {"gpu_name": f"simulated GPU (quantum {quantum_ms:g} ms, switch {context_switch_ms:g} ms)"},
                "scenarios": {s["name"]: {"status": status} for s in spec_scenarios}}
    (root / "manifest.json").write_text(json.dumps(manifest, indent=1))
    return root


def write_sim_run(path: str | os.PathLike, tenants: Sequence[SimTenant], quantum_ms: float = 2.0, *,
                  context_switch_ms: float = 0.0, duration_ms: float = DEFAULT_DURATION_MS, seed: int = 0,
                  status: str = "complete", blocks: int = 1) -> Path:
    """A run directory like the experiment's: ``baseline-<t>`` (each tenant alone), then ``shared``.

    ``blocks`` > 1: the bracketed design the experiment runs on a GPU (``run.spec``): alone, shared, ..., alone,
    ``-rK`` scenarios, each block its own draw, ``duration_ms`` each. The simulated GPU does not drift, so such a
    run's verdicts measure (near) zero drift where a one-block run carries the prior allowance for hardware.
    The workload of each tenant is its name.
    """
    tenants = check_params(tenants, quantum_ms, context_switch_ms, duration_ms)
    if blocks < 1:
        raise SimError(f"blocks must be >= 1, got {blocks}")
    if blocks == 1:
        scenarios = [(f"baseline-{t.name}", "baseline", [t], duration_ms) for t in tenants]
        scenarios.append(("shared", "shared", tenants, duration_ms))
    else:
        scenarios = []
        for b in range(blocks + 1):
            scenarios += [(f"baseline-{t.name}-r{b + 1}", "baseline", [t], duration_ms, b) for t in tenants]
            if b < blocks:
                scenarios.append((f"shared-r{b + 1}", "shared", tenants, duration_ms, b))
    return _write(Path(path), scenarios, {t.name: t.name for t in tenants}, quantum_ms=quantum_ms,
                  context_switch_ms=context_switch_ms, seed=seed, status=status, profile="simulated",
                  device=SIMULATED_DEVICE, resolved={"sleep_ms": {t.name: t.period_ms for t in tenants},
                                                "duration_ms": duration_ms})


def write_sim_probe(path: str | os.PathLike, quantum_ms: float, context_switch_ms: float = 0.0, *,
                    hog_kernel_ms: float = 50.0, tick_kernel_ms: float = 0.05, tick_gap_ms: float = 25.0,
                    bb_kernel_ms: float = 0.5, duration_ms: float = 20_000.0, reverse_duration_ms: float = 10_000.0,
                    seed: int = 0,
                    hog_busy: bool = True) -> Path:
    """A simulated time-slice probe (``run/probe.py``'s scenarios) on a GPU of known quantum and switch cost.

    The tick arrives at random (a closed loop whose sleep is uniform in [0, 2 x ``tick_gap_ms``]); the hog
    runs back to back, or, with ``hog_busy=False``, a 0.01 ms kernel every 100 ms (with a switch cost under
    0.04 ms no tick waits above its own noise: the "no contended samples" case). The reverse scenario pairs a hog arriving about
    every 200 ms with a back-to-back tick.
    """
    tick = SimTenant(TICK, tick_kernel_ms, tick_gap_ms, tick_gap_ms)
    hog = SimTenant(HOG, hog_kernel_ms, 0.0) if hog_busy else SimTenant(HOG, 0.01, 100.0)
    tick_bb = SimTenant(TICK_BB, bb_kernel_ms, 0.0)
    hog_p = SimTenant(HOG_POISSON, hog_kernel_ms, 75.0, 60.0)
    check_params([tick, hog, tick_bb, hog_p], quantum_ms, context_switch_ms, duration_ms)
    scenarios = [(f"baseline-{TICK}", "baseline", [tick], duration_ms),
                 (f"baseline-{HOG}", "baseline", [hog], duration_ms),
                 ("shared", "shared", [tick, hog], duration_ms),
                 (f"baseline-{TICK_BB}", "baseline", [tick_bb], min(reverse_duration_ms, 1_500.0)),
                 (f"baseline-{HOG_POISSON}", "baseline", [hog_p], reverse_duration_ms),
                 ("shared-reverse", "shared", [hog_p, tick_bb], reverse_duration_ms)]
    workloads = {TICK: "noop", TICK_BB: "gemm", HOG: "gemm", HOG_POISSON: "gemm"}
    return _write(Path(path), scenarios, workloads, quantum_ms=quantum_ms, context_switch_ms=context_switch_ms,
                  seed=seed, status="complete", profile="probe", device=SIMULATED_DEVICE,
                  resolved={"hog_kernel_ms": hog_kernel_ms, "tick_kernel_ms": tick_kernel_ms})


def write_sim_multi_probe(path: str | os.PathLike, quantum_ms: float, context_switch_ms: float = 0.0, *,
                          long_kernel_ms: float = 50.0, short_kernel_ms: float = 1.0, tick_kernel_ms: float = 0.05,
                          tick_gap_ms: float = 25.0, duration_ms: float = 12_000.0, seed: int = 0) -> Path:
    """A simulated multi-context probe (``run/probe.py``'s ``multi-*`` scenarios) on a round-robin GPU.

    What a GPU that follows the simulator's round robin would log: the tick next to k = 1, 2, 3 back-to-back
    neighbours of ``short_kernel_ms`` and of ``long_kernel_ms``, plus the neighbours alone.
    """

    tick = SimTenant(TICK, tick_kernel_ms, tick_gap_ms, tick_gap_ms)
    kernel = {"short": short_kernel_ms, "long": long_kernel_ms}
    check_params([tick, SimTenant(HOG_LONG, long_kernel_ms, 0.0)], quantum_ms, context_switch_ms, duration_ms)
    scenarios: list[tuple[str, str, Sequence[SimTenant], float]] = [
        (f"baseline-{TICK}", "baseline", [tick], duration_ms),
        (f"baseline-{HOG_SHORT}", "baseline", [SimTenant(HOG_SHORT, short_kernel_ms, 0.0)], 500 * short_kernel_ms),
        (f"baseline-{HOG_LONG}", "baseline", [SimTenant(HOG_LONG, long_kernel_ms, 0.0)], 20 * long_kernel_ms)]
    workloads = {TICK: "noop", HOG_SHORT: "gemm", HOG_LONG: "gemm"}
    for length in LENGTHS:
        for k in MULTI["contexts"]:
            hogs = [SimTenant(f"hog-{length}-{i + 1}", kernel[length], 0.0) for i in range(k)]
            workloads.update({h.name: "gemm" for h in hogs})
            scenarios.append((multi_name(length, k), "shared", [tick, *hogs], duration_ms))
    return _write(Path(path), scenarios, workloads, quantum_ms=quantum_ms, context_switch_ms=context_switch_ms,
                  seed=seed, status="complete", profile="probe", device=SIMULATED_DEVICE,
                  resolved={"probe_mode": "multi", "long_kernel_ms": long_kernel_ms,
                            "short_kernel_ms": short_kernel_ms})
