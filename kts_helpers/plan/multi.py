"""The multi-context rule checked: does the round robin explain the tick's waits next to k busy neighbours?

Why its own module: the engine asks it one question (does the round robin hold for a configuration of the
multi-context probe, ``kts probe --multi``? if not, the engine draws the measured waits) and the README's finding
(``plan.validation``) shows the same comparison, number for number. On the H200 (``h200-2026-11-30-probe-multi``)
it holds for k = 1..3 with 1.28 ms and 49.42 ms neighbour kernels: the tick's p99 wait is k x (kernel + switch)
below the quantum (1.43 / 2.93 / 4.25 ms) and k x (quantum + switch) above it (2.34 / 4.79 / 6.96 ms).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import numpy as np

from kts_helpers.analyse.probe import read_multi
from kts_helpers.plan.timeslice import SimTenant, simulate

RR_TOLERANCE = 0.20  # measured wait quantiles within this (relative, or 0.2 ms) of the round robin's: it holds


def round_robin_waits(config: Any, quantum_ms: float, switch_ms: float, slice_timer: str) -> np.ndarray:
    """The probe's tick next to ``config.k`` back-to-back neighbours, simulated by the round robin with the
    measured quantum and switch: the tick's waits (ms)."""
    tick = SimTenant("tick", 0.005, 25.0, 25.0)
    hogs = [SimTenant(f"hog-{i}", max(config.neighbour_kernel_ms, 0.01), 0.0) for i in range(config.k)]
    rows = simulate([tick, *hogs], quantum_ms, min(switch_ms, 0.5 * quantum_ms), 12_000.0, 0,
                    slice_timer=slice_timer)
    return rows[rows["tenant"] == "tick"]["wait_ms"].to_numpy(float)


def round_robin_holds(config: Any, quantum_ms: float, switch_ms: float, slice_timer: str) -> bool:
    """Whether the round robin reproduces one multi-context configuration's measured waits (p50 and p95).

    Where the simulated waits match the measured ones the rule is the round robin; where not, the planner draws
    the measured waits (empirical).
    """
    sim = round_robin_waits(config, quantum_ms, switch_ms, slice_timer)
    meas = np.asarray(config.waits_ms, float)
    for q in (0.5, 0.95):
        a, b = float(np.quantile(sim, q)), float(np.quantile(meas, q))
        if abs(a - b) > max(RR_TOLERANCE * abs(b), 0.2):
            return False
    return True


@dataclass(frozen=True)
class MultiCheck:
    """One multi-context configuration: the tick's measured waits against the round robin's, and the bound.

    ``bound_ms``: the longest wait the rule allows: k x (neighbour kernel + switch) when the neighbours' kernels
    are shorter than the quantum (the holder yields at its kernel boundary when another context waits), else
    k x (quantum + switch) (the holder keeps the GPU to the end of its slice).
    """

    length: str
    k: int
    kernel_ms: float
    measured_ms: tuple[float, float, float]  # p50, p95, p99
    round_robin_ms: tuple[float, float, float]
    bound_ms: float
    holds: bool


def multi_context_checks(multi_dir: str | os.PathLike, quantum_ms: float, switch_ms: float,
                         slice_timer: str) -> list[MultiCheck]:
    """The multi-context probe read against the round robin with the pair probe's quantum and switch."""
    q, cs = quantum_ms, switch_ms
    out = []
    for c in read_multi(multi_dir).configs:
        if not c.n_ticks:
            continue
        meas = np.asarray(c.waits_ms, float)
        sim = round_robin_waits(c, q, cs, slice_timer)
        per_turn = min(c.neighbour_kernel_ms, q) + cs
        out.append(MultiCheck(c.length, c.k, c.neighbour_kernel_ms,
                              tuple(float(np.quantile(meas, p)) for p in (0.5, 0.95, 0.99)),  # type: ignore[arg-type]
                              tuple(float(np.quantile(sim, p)) for p in (0.5, 0.95, 0.99)),  # type: ignore[arg-type]
                              c.k * per_turn, round_robin_holds(c, q, cs, slice_timer)))
    return out
