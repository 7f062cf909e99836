"""kts profile: what each tenant's operations do on the device, measured once, outside the timed iterations.

Why: the planner needs, per tenant, how many kernels one operation launches, how long they keep the GPU busy
against the operation's own time (a launch-bound step leaves the GPU idle between its kernels), how many of the
GPU's SMs its kernels' grids can fill, and how much memory it holds. Naming the workload ("llm", "fft") says none
of that for a workload the kit has never seen; measuring it does. The alone scenario's worker runs a short
segment of whole iterations under ``torch.profiler`` (Kineto, CUPTI on a GPU) after its warm-up and before the
barrier, so no timed iteration is profiled, and stores the summary in its ``KTS_META`` line (``profile``), which
the run keeps with its log. On CPU the same code records the CPU operators (no grids), so CI exercises it.

Imports only torch and the standard library, like ``kts_worker.py`` beside it (the container copies all three).

Per phase the summary holds (times in ms, p50 over the profiled calls unless named otherwise):

* ``calls``, ``kernels_per_op`` (device kernels; on CPU top-level operators), ``kernel_ms`` (one kernel's
  duration), ``busy_ms`` (the op's kernel time), ``wall_ms`` (launch to completion, synchronised),
  ``busy_share`` (busy / wall: 1 = the GPU never idles during the op), ``launch_gap_ms`` (idle time between two
  consecutive kernels of one op);
* ``grid_blocks`` (p50 and max thread blocks per kernel), ``sm_share`` (kernel-time-weighted mean of
  min(1, blocks / SMs): the share of the SMs its grids can occupy), ``fill_share`` (the share of kernel time in
  kernels of at least ``FILL_WAVES`` waves: they keep every SM busy for their whole length);
* ``top_kernels``: the three with the most time (name shortened, calls, total ms).

Per tenant: ``sm_count``, ``memory`` (allocated / peak / reserved MiB on a GPU; the process's peak RSS on CPU),
``segment_s`` (the profiled iterations), ``cost_s`` (what profiling cost in run time: the timed iterations
before and after it, the profiler's start, a warm-up iteration, the segment and reading the trace),
``iterations`` profiled, ``cupti_teardown`` (CUPTI detached when the profiler stopped) and ``residue`` (each
phase's p50 wall just after the profile over just before it; a hint, see :func:`profile_workload`). Times under the
profiler run slower than timed ones (CUPTI adds to every launch): ``busy_ms`` is the device's own, but ``wall_ms`` and
``busy_share`` are the profiled op's; the planner divides ``busy_ms`` by the timed alone wall instead.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import tempfile
import time
import warnings
from collections.abc import Callable, Sequence

PROFILE_VERSION = 1
FILL_WAVES = 2.0  # a kernel of at least two waves of thread blocks keeps every SM busy (cuBLAS' large GEMMs)
MARK = "kts_phase"
LAUNCHES = ("cudaLaunchKernel", "cuLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernelEx",
            "cudaLaunchCooperativeKernel", "cudaGraphLaunch")
# a launch is a runtime call (cudaLaunchKernel: PyTorch's own kernels) or a driver call (cuLaunchKernelEx: cuBLAS's
# GEMMs on CUDA 13, cuDNN's attention); reading the runtime's only missed every GEMM of BERT on the H200 (69 of 154
# kernels an op, 0.6 of 1.9 ms busy)
LAUNCH_CATEGORIES = ("cuda_runtime", "cuda_driver")
TEARDOWN_ENV = "TEARDOWN_CUPTI"  # Kineto detaches CUPTI when the profiler stops only if this is "1"
RESIDUE_S = 1.0  # seconds of timed iterations before and after the profile, to measure what it left behind


def _p50(xs: Sequence[float]) -> float | None:
    return round(float(statistics.median(xs)), 6) if xs else None


def _short(name: str, width: int = 60) -> str:
    return name if len(name) <= width else name[: width - 3] + "..."


def summarize_trace(events: list[dict], calls: list[tuple[str, int]], sm_count: int | None) -> dict:
    """The per-phase summary from a Kineto chrome trace's events and the profiled calls (phase, index).

    Kernels belong to the call whose annotation (``kts_phase:<phase>:<index>``) encloses their launch on the
    host (matched by the CUPTI correlation id); on CPU, the top-level operators inside the annotation.
    """
    marks = {}
    for e in events:
        if e.get("cat") == "user_annotation" and str(e.get("name", "")).startswith(MARK + ":"):
            marks[e["name"]] = (float(e["ts"]), float(e["ts"]) + float(e.get("dur", 0.0)))
    spans = sorted((lo, hi, name) for name, (lo, hi) in marks.items())
    starts = [s[0] for s in spans]

    def owner(ts: float) -> str | None:
        import bisect

        i = bisect.bisect_right(starts, ts) - 1
        if i >= 0 and spans[i][0] <= ts <= spans[i][1]:
            return spans[i][2]
        return None

    corr_owner: dict[int, str] = {}
    for e in events:
        if e.get("cat") in LAUNCH_CATEGORIES and e.get("name") in LAUNCHES:
            who = owner(float(e["ts"]))
            c = (e.get("args") or {}).get("correlation")
            if who is not None and c is not None:
                corr_owner[int(c)] = who
    per_call: dict[str, list[dict]] = {name: [] for name in marks}
    gpu = False
    for e in events:
        if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset"):
            gpu = True
            who = corr_owner.get(int((e.get("args") or {}).get("correlation", -1)))
            if who is not None:
                per_call[who].append(e)
    if not gpu:  # CPU: the top-level operators inside each annotation
        ops = sorted((e for e in events if e.get("cat") == "cpu_op"), key=lambda e: (float(e["ts"]), -float(e.get("dur", 0))))
        end_of_top: dict[str, float] = {}
        for e in ops:
            who = owner(float(e["ts"]))
            if who is None or float(e["ts"]) < end_of_top.get(who, -1.0):
                continue  # nested in an operator already counted
            end_of_top[who] = float(e["ts"]) + float(e.get("dur", 0.0))
            per_call[who].append(e)
    phases: dict[str, dict[str, list]] = {}
    for phase, index in calls:
        name = f"{MARK}:{phase}:{index}"
        if name not in marks:
            continue
        lo, hi = marks[name]
        got = sorted(per_call.get(name, []), key=lambda e: float(e["ts"]))
        kernels = [e for e in got if e.get("cat") in ("kernel", "cpu_op")]
        acc = phases.setdefault(phase, {k: [] for k in ("n", "busy", "wall", "share", "gap", "kms", "blocks",
                                                        "smw", "fill", "names")})
        busy = sum(float(e.get("dur", 0.0)) for e in got) / 1e3
        wall = (hi - lo) / 1e3
        acc["n"].append(len(kernels))
        acc["busy"].append(busy)
        acc["wall"].append(wall)
        acc["share"].append(min(busy / wall, 1.0) if wall > 0 else 0.0)
        acc["gap"].extend(max(float(b["ts"]) - float(a["ts"]) - float(a.get("dur", 0.0)), 0.0) / 1e3
                          for a, b in zip(got, got[1:], strict=False))
        for k in kernels:
            dur = float(k.get("dur", 0.0)) / 1e3
            acc["kms"].append(dur)
            acc["names"].append((str(k.get("name", "?")), dur))
            grid = (k.get("args") or {}).get("grid")
            if grid and sm_count:
                blocks = 1
                for g in grid:
                    blocks *= max(int(g), 1)
                acc["blocks"].append(blocks)
                acc["smw"].append((min(1.0, blocks / sm_count), dur))
                acc["fill"].append((blocks / sm_count >= FILL_WAVES, dur))
    out = {}
    for phase, acc in phases.items():
        total = sum(d for _, d in acc["smw"])
        by_name: dict[str, list[float]] = {}
        for n, d in acc["names"]:
            by_name.setdefault(n, []).append(d)
        top = sorted(by_name.items(), key=lambda kv: -sum(kv[1]))[:3]
        out[phase] = {
            "calls": len(acc["n"]), "kernels_per_op": _p50(acc["n"]), "kernel_ms": _p50(acc["kms"]),
            "busy_ms": _p50(acc["busy"]), "wall_ms": _p50(acc["wall"]), "busy_share": _p50(acc["share"]),
            "launch_gap_ms": _p50(acc["gap"]),
            "grid_blocks": {"p50": _p50(acc["blocks"]), "max": max(acc["blocks"])} if acc["blocks"] else None,
            "sm_share": round(sum(s * d for s, d in acc["smw"]) / total, 6) if total > 0 else None,
            "fill_share": round(sum(d for f, d in acc["fill"] if f) / total, 6) if total > 0 else None,
            "top_kernels": [{"name": _short(n), "calls": len(ds), "total_ms": round(sum(ds), 6)} for n, ds in top],
        }
    return out


def memory(torch, device) -> dict:
    """The tenant's memory footprint after its warm-up: what a neighbour cannot have."""
    if device.type == "cuda":
        mib = 1024.0 * 1024.0
        return {"allocated_mib": round(torch.cuda.memory_allocated(device) / mib, 3),
                "peak_mib": round(torch.cuda.max_memory_allocated(device) / mib, 3),
                "reserved_mib": round(torch.cuda.memory_reserved(device) / mib, 3)}
    try:
        import resource

        kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # Linux: KiB
        return {"rss_peak_mib": round(kib / 1024.0, 3)}
    except (ImportError, OSError):
        return {}


def timed_p50(step: Callable[[], list], sync: Callable[[], None], iterations: int, max_s: float) -> dict[str, float]:
    """Each phase's p50 wall (ms, synchronised) over up to ``iterations`` whole iterations or ``max_s`` seconds."""
    walls: dict[str, list[float]] = {}
    t0 = time.perf_counter()
    for _ in range(max(iterations, 1)):
        for phase, fn in step():
            t = time.perf_counter()
            fn()
            sync()
            walls.setdefault(phase, []).append((time.perf_counter() - t) * 1e3)
        if time.perf_counter() - t0 > max_s:
            break
    return {phase: float(statistics.median(v)) for phase, v in walls.items()}


def profile_workload(torch, device, step: Callable[[], list], iterations: int, max_s: float = 2.0) -> dict:
    """Run up to ``iterations`` whole iterations (at least one; stop after ``max_s``) under the profiler and
    summarise them. Each operation is synchronised, as the timing loop does, so its wall is launch to completion.

    The profiler must leave the process as it found it, since the timed alone iterations follow in the same
    process: Kineto keeps CUPTI attached after the profiler stops unless ``TEARDOWN_CUPTI=1`` (pytorch#144455), and
    every later launch then pays CUPTI's callbacks -- on the H200 the launch-bound real models' alone steps ran
    slower than the same steps in an unprofiled process, which read as "faster when shared". So the variable is set
    here (unless the user set it: ``cupti_teardown`` records which), and ``residue`` measures what is left: each
    phase's p50 wall just after the profile over just before it (1 = nothing left; a hint only: two ~1 s windows of
    a host that drifts read 0.6-1.8 on the H200 with CUPTI detached)."""
    from torch.profiler import ProfilerActivity, profile, record_function

    cuda = device.type == "cuda"
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    os.environ.setdefault(TEARDOWN_ENV, "1")
    t_start = time.perf_counter()
    before = timed_p50(step, sync, iterations, RESIDUE_S)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    sm_count = torch.cuda.get_device_properties(device).multi_processor_count if cuda else None
    calls: list[tuple[str, int]] = []
    done = 0
    # torch's "Profiler clears events at the end of each cycle" concerns schedules of several cycles; this profile
    # is one, and the warning filled every alone worker's stderr
    warnings.filterwarnings("ignore", message=".*Profiler clears events at the end of each cycle.*")
    with profile(activities=activities) as prof:
        # one iteration first, not summarised: the profiler's own start (CUPTI's, about 3 s on an H200) falls in it,
        # and kernels launched while it starts were missed (an FFT's first profiled call showed none)
        for _phase, fn in step():
            with record_function("kts_profiler_warmup"):
                fn()
                sync()
        t0 = time.perf_counter()
        while done < max(iterations, 1):
            for phase, fn in step():
                index = len(calls)
                with record_function(f"{MARK}:{phase}:{index}"):
                    fn()
                    sync()
                calls.append((phase, index))
            done += 1
            if time.perf_counter() - t0 > max_s:
                break
    segment_s = time.perf_counter() - t0
    teardown = os.environ.get(TEARDOWN_ENV) == "1"  # read after the stop: torch sets "0" itself for CUDA graphs
    for _phase, fn in step():  # untimed: the first calls after the stop run CUPTI's teardown (cuptiFinalize)
        fn()
        sync()
    after = timed_p50(step, sync, iterations, RESIDUE_S)
    fd, path = tempfile.mkstemp(suffix=".json", prefix="kts-profile-")
    os.close(fd)
    try:
        prof.export_chrome_trace(path)
        with open(path) as fh:
            events = json.load(fh).get("traceEvents", [])
    finally:
        os.unlink(path)
    phases = summarize_trace(events, calls, sm_count)
    return {"version": PROFILE_VERSION, "tool": f"torch.profiler (torch {torch.__version__})",
            "device": device.type, "sm_count": sm_count, "iterations": done, "segment_s": round(segment_s, 4),
            "cost_s": round(time.perf_counter() - t_start, 4), "phases": phases, "memory": memory(torch, device),
            "cupti_teardown": teardown if cuda else None, "residue": residue(before, after)}


def residue(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    """Each phase's p50 wall after the profile over before it: what profiling left on the timed iterations."""
    return {ph: round(after[ph] / before[ph], 4) for ph in before if ph in after and before[ph] > 0}


if __name__ == "__main__":  # pragma: no cover - a quick look: python kts_profile.py (the worker's fft on this host)
    import torch as _torch

    _dev = _torch.device("cuda" if _torch.cuda.is_available() else "cpu")
    _x = _torch.randn(512, 512, device=_dev, dtype=_torch.complex64)
    print(json.dumps(profile_workload(_torch, _dev, lambda: [("op", lambda: _torch.fft.fft2(_x))], 5), indent=1),
          file=sys.stdout)
