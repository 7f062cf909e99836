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
from kts_helpers.run.logformat import AppLine, parse_line

PROBE_PROFILE = "probe"
TICK, HOG, TICK_BB, HOG_POISSON = "tick", "hog", "tick-bb", "hog-poisson"
DEFAULTS = {"rate_hz": 40.0, "duration_s": 20.0, "reverse_rate_hz": 8.0, "reverse_duration_s": 10.0,
            "hog_kernel_ms": 50.0, "tick_bb_kernel_ms": 0.5, "tick_bb_iterations": 3000,
            "sizing_size": 4096, "sizing_iterations": 6}
CPU_REFUSAL = ("the time-slice probe needs a CUDA GPU: on a CPU the operating system schedules threads and "
               "there is no GPU time slice to measure (run it on a GPU host: kts probe --device cuda)")


def probe_scenarios(r: dict[str, Any], params: Any) -> tuple[Any, ...]:
    """The probe's scenarios: tick and hog alone, tick (Poisson) next to hog, hog (Poisson) next to tick."""
    from kts_helpers.run.spec import ScenarioSpec, TenantSpec

    rate = float(params.rate_hz or DEFAULTS["rate_hz"])
    duration = float(params.duration_s or DEFAULTS["duration_s"])
    hog_n = int(r["gemm_size"])
    # enough timed iterations to cover the tick's window; the tenant that finishes first pads (co-running)
    hog_iterations = int(r.get("iterations_gemm") or r["iterations"])
    common = {"warmup": r["warmup"], "threads": r["threads"]}
    tick = TenantSpec(TICK, "noop", iterations=1_000_000, matrix_size=1, sleep_ms=0.0, arrival="poisson",
                      rate_hz=rate, duration_s=duration, **common)
    hog = TenantSpec(HOG, "gemm", iterations=hog_iterations, matrix_size=hog_n, sleep_ms=0.0, **common)
    # the back-to-back tick of the reverse roles: a GEMM of ~0.5 ms (the hog's size scaled by the cube law),
    # short against any plausible quantum but long enough that its log stays small (a noop back to back would
    # write a million lines in 20 s)
    bb_n = max(256, int(round(hog_n * (DEFAULTS["tick_bb_kernel_ms"] / DEFAULTS["hog_kernel_ms"]) ** (1 / 3) / 128)) * 128)
    tick_bb = TenantSpec(TICK_BB, "gemm", iterations=int(DEFAULTS["tick_bb_iterations"]), matrix_size=bb_n,
                         sleep_ms=0.0, **common)
    hog_poisson = TenantSpec(HOG_POISSON, "gemm", iterations=1_000_000, matrix_size=hog_n, sleep_ms=0.0,
                             arrival="poisson", rate_hz=float(DEFAULTS["reverse_rate_hz"]),
                             duration_s=float(DEFAULTS["reverse_duration_s"]), **common)
    return (ScenarioSpec(f"baseline-{TICK}", "baseline", (tick,)),
            ScenarioSpec(f"baseline-{HOG}", "baseline", (hog,)),
            ScenarioSpec("shared", "shared", (tick, hog)),
            ScenarioSpec(f"baseline-{TICK_BB}", "baseline", (tick_bb,)),
            ScenarioSpec(f"baseline-{HOG_POISSON}", "baseline", (hog_poisson,)),
            ScenarioSpec("shared-reverse", "shared", (hog_poisson, tick_bb)))


def size_hog(*, python: str = sys.executable, worker: Path | None = None, target_ms: float = DEFAULTS["hog_kernel_ms"],
             device: str = "cuda", timeout_s: float = 300.0) -> dict[str, Any]:
    """Time a GEMM on this GPU and pick the size whose kernel runs ``target_ms`` (GEMM time grows as N^3).

    Runs the kit's own worker (same timing loop) for a few iterations of a 4096^2 GEMM, alone.
    """
    if not device.startswith("cuda"):
        raise SpecError(CPU_REFUSAL)
    from kts_helpers.run.backends.local import WORKER

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
