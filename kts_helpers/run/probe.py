"""The time-slice probe: two shared scenarios whose logs show the GPU's effective time slice and switch cost.

The whole teaching story rests on one quantity no tool states: how long a context keeps a time-sliced GPU
while another waits (the quantum), and what a change of context costs. The probe measures both from the
workers' own clocks, never changing a GPU setting:

* ``shared`` — a *tick* tenant issues a one-element kernel at random (Poisson) times next to a *hog*
  tenant whose back-to-back GEMMs each run tens of milliseconds, far longer than any plausible quantum.
  A tick that arrives while the hog holds the GPU waits (wall - device) until the hog's slice ends: the
  upper edge of those waits is the effective quantum (plus a switch), the lower edge about one switch.
* ``shared-reverse`` — the roles swapped: the hog's kernels arrive at random times (8 Hz, 10 s) next to a
  tenant that issues ~0.5 ms GEMMs back to back. Every time a slice ends the other context runs one short
  kernel, so the hog's CUDA events (recorded inside its own context) stretch by that kernel and two switches
  per preemption: a preempted kernel's event interval includes the neighbour's slice.

The hog's GEMM size is found by a short calibration on the GPU at hand (``size_hog``): the size whose
kernel takes ``hog_kernel_ms`` (default 50 ms). On a CPU there is no time slice to measure: refused.

**Multi-context mode** (``probe_mode=multi``, ``kts probe --multi``): what the driver does with three or more
contexts. The same Poisson tick next to k = 1, 2, 3 busy neighbours (back-to-back GEMMs, each its own
process), once with neighbours whose kernels are *longer* than any plausible quantum (the calibrated hog,
~50 ms) and once with kernels *shorter* than it (~1 ms, the cube law from the hog's size): scenarios
``multi-long-k1`` ... ``multi-short-k3``. The tick's wait distribution per configuration is the reading
(``analyse.probe.read_multi``): a round-robin scheduler predicts waits up to k slices (long neighbours) or
k short kernels (short ones); the data say whether the GPU does that. The short neighbour alone
(``baseline-hog-short``) is the awake-GPU overhead taken off the waits; both neighbours alone give their
kernel lengths. About 2.5 minutes on an H200.

The scenarios themselves are resolved in ``run.spec`` like every profile's, from the names and defaults here.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

from kts_helpers.errors import DeviceError, SpecError
from kts_helpers.run.environment import WORKER
from kts_helpers.run.logformat import AppLine, parse_line

PROBE_PROFILE = "probe"
TICK, HOG, TICK_BB, HOG_POISSON = "tick", "hog", "tick-bb", "hog-poisson"
DEFAULTS = {"rate_hz": 40.0, "duration_s": 20.0, "reverse_rate_hz": 8.0, "reverse_duration_s": 10.0,
            "hog_kernel_ms": 50.0, "tick_bb_kernel_ms": 0.5, "tick_bb_iterations": 3000,
            "sizing_size": 4096, "sizing_iterations": 6}
PROBE_MODES = ("pair", "multi")
MULTI = {"contexts": (1, 2, 3), "short_kernel_ms": 1.0, "duration_s": 12.0, "hog_iterations": 20}
MULTI_PREFIX = "multi-"
LENGTHS = ("short", "long")
HOG_SHORT, HOG_LONG = "hog-short", "hog-long"
CPU_REFUSAL = ("the time-slice probe needs a CUDA GPU: on a CPU the operating system schedules threads and "
               "there is no GPU time slice to measure (run it on a GPU host: kts probe --device cuda)")


def cube_law_size(hog_n: int, target_ms: float, hog_ms: float = DEFAULTS["hog_kernel_ms"]) -> int:
    """The GEMM size whose kernel takes ``target_ms`` when ``hog_n`` takes ``hog_ms`` (time grows as N^3)."""
    return max(256, int(round(hog_n * (target_ms / hog_ms) ** (1 / 3) / 128)) * 128)


def multi_name(length: str, k: int) -> str:
    """The scenario of the tick next to ``k`` neighbours of kernel ``length`` ("short" or "long")."""
    return f"{MULTI_PREFIX}{length}-k{k}"


def size_hog(*, python: str = sys.executable, worker: Path | None = None, target_ms: float = DEFAULTS["hog_kernel_ms"],
             device: str = "cuda", timeout_s: float = 300.0) -> dict[str, Any]:
    """Time a GEMM on this GPU and pick the size whose kernel runs ``target_ms`` (GEMM time grows as N^3).

    Runs the kit's own worker (same timing loop) for a few iterations of a 4096^2 GEMM, alone.
    """
    if not device.startswith("cuda"):
        raise SpecError(CPU_REFUSAL)
    n0, iters = int(DEFAULTS["sizing_size"]), int(DEFAULTS["sizing_iterations"])
    env = {**os.environ, "WORKLOAD": "gemm", "MATRIX_SIZE": str(n0), "ITERATIONS": str(iters), "SLEEP_MS": "0",
           "WARMUP": "2", "DEVICE": device, "TENANT": "sizing"}
    try:
        res = subprocess.run([python, str(worker or WORKER)], env=env, capture_output=True, text=True,
                             timeout=timeout_s)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise DeviceError(f"could not time a GEMM for the probe: {exc}") from None
    if res.returncode != 0:
        tail = (res.stderr.strip().splitlines() or ["(no stderr)"])[-1]
        raise DeviceError(f"the probe's GEMM timing failed (exit {res.returncode}): {tail}")
    lines = [parse_line(raw) for raw in res.stdout.splitlines()]
    device_ms = [r.device_ms for r in lines if isinstance(r, AppLine) and r.version == "v2" and r.phase == "op"]
    if not device_ms:
        raise DeviceError("the probe's GEMM timing printed no iteration")
    t0 = statistics.median(device_ms)
    n = int(round(n0 * (target_ms / t0) ** (1 / 3) / 256)) * 256
    n = max(1024, min(n, 32768))
    return {"matrix_size": n, "target_kernel_ms": target_ms, "timed_size": n0, "timed_kernel_ms": t0,
            "predicted_kernel_ms": t0 * (n / n0) ** 3}


def with_hog_size(params: Any, sizing: dict[str, Any]) -> Any:
    """The parameters with the calibrated hog size (an explicit gemm_size always wins)."""
    return params if params.gemm_size is not None else replace(params, gemm_size=int(sizing["matrix_size"]))
