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
  consecutive kernels of one op), ``host_syncs`` and ``host_syncs_max`` (p50 and max per op of the host's waits
  for the device *followed by more launches of the same op*: ``SYNCS`` on a GPU, ``HOST_READ`` on CPU; the
  harness's own sync at the op's end is not one). Why: each such wait drains the op's queue mid-op, and under
  time-slicing a neighbour with work then takes the GPU for its slice, where an op whose kernels stay queued waits
  at most once;
* ``grid_blocks`` (p50 and max thread blocks per kernel), ``sm_share`` (kernel-time-weighted mean of
  min(1, blocks / SMs): the share of the SMs its grids can occupy), ``fill_share`` (the share of kernel time in
  kernels of at least ``FILL_WAVES`` waves: they keep every SM busy for their whole length);
* ``top_kernels``: the three with the most time (name shortened, calls, total ms);
* ``kernels`` (version 2, :func:`kernel_record`): the kernels one by one, as a neighbour under MPS meets them. The
  op-level numbers above cannot say how long one kernel holds the SMs: a training step is hundreds of kernels of well
  under a millisecond, and a small kernel of another client that arrives behind one waits the *rest of that kernel*,
  not the op (issue 51). So: ``n``; ``ms`` (count quantiles of one kernel's duration: p10, p50, p90, p99, max);
  ``tw_ms`` (time-weighted quantiles: the length of the kernel in flight at a random instant this tenant keeps the
  GPU busy); ``residual_ms`` (the mean rest of that kernel: sum d^2 / 2 sum d); on a GPU, from Kineto's own fields
  (``grid``, ``block``, ``blocks per SM``, ``est. achieved occupancy %``, ``registers per thread``, ``shared
  memory``), ``occupancy_pct`` (kernel-time-weighted mean of Kineto's estimate), ``waves`` (blocks per SM over the
  blocks one SM can hold: >= 1 leaves no SM room for another client's block until its last wave drains),
  ``full_share`` (the share of kernel time in kernels of at least one wave) and ``full_residual_ms`` (the mean rest
  of such a kernel in flight); ``hist``, log2 bins of duration ``[upper_ms, n, total_ms, occupancy_pct,
  full_share]`` (empty bins left out), so a reader can weigh any other way; and ``fields``: which of Kineto's
  fields the trace carried (a missing one is missing data, never a guessed zero).

Per tenant: ``sm_count``, ``sm_limits`` (one SM's thread, register and shared-memory limits, where torch gives them), ``memory`` (allocated / peak / reserved MiB on a GPU; the process's peak RSS on CPU),
``segment_s`` (the profiled iterations), ``cost_s`` (what profiling cost in run time: the timed iterations
before and after it, the profiler's start, a warm-up iteration, the segment and reading the trace),
``iterations`` profiled, ``cupti_teardown`` (CUPTI detached when the profiler stopped) and ``residue`` (each
phase's p50 wall just after the profile over just before it; a hint, see :func:`profile_workload`). Times under the
profiler run slower than timed ones (CUPTI adds to every launch): ``busy_ms`` is the device's own, but ``wall_ms`` and
``busy_share`` are the profiled op's; the planner divides ``busy_ms`` by the timed alone wall instead.
"""

from __future__ import annotations

import json
import math
import os
import statistics
import sys
import tempfile
import time
import warnings
from collections.abc import Callable, Sequence

PROFILE_VERSION = 3  # 2: the per-kernel record (``kernels``); 3: the host's waits mid-op (``host_syncs``)
FILL_WAVES = 2.0  # a kernel of at least two waves of thread blocks keeps every SM busy (cuBLAS' large GEMMs)
MARK = "kts_phase"
LAUNCHES = ("cudaLaunchKernel", "cuLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernelEx",
            "cudaLaunchCooperativeKernel", "cudaGraphLaunch")
# a launch is a runtime call (cudaLaunchKernel: PyTorch's own kernels) or a driver call (cuLaunchKernelEx: cuBLAS's
# GEMMs on CUDA 13, cuDNN's attention); reading the runtime's only missed every GEMM of BERT on the H200 (69 of 154
# kernels an op, 0.6 of 1.9 ms busy)
LAUNCH_CATEGORIES = ("cuda_runtime", "cuda_driver")
# the host waiting for the device inside an op: a runtime or driver call that blocks until the GPU's queue drains
# (``.item()``, a bool of a tensor, a copy to the host); on CPU, the operator that reads a device scalar on a GPU
SYNCS = ("cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaEventSynchronize", "cudaMemcpy",
         "cuStreamSynchronize", "cuCtxSynchronize", "cuEventSynchronize", "cuMemcpyDtoH_v2")
HOST_READ = "aten::_local_scalar_dense"
TEARDOWN_ENV = "TEARDOWN_CUPTI"  # Kineto detaches CUPTI when the profiler stops only if this is "1"
RESIDUE_S = 1.0  # seconds of timed iterations before and after the profile, to measure what it left behind


def _p50(xs: Sequence[float]) -> float | None:
    return round(float(statistics.median(xs)), 6) if xs else None


def _short(name: str, width: int = 60) -> str:
    return name if len(name) <= width else name[: width - 3] + "..."


# Kineto's names for a kernel's launch configuration in the chrome trace (libkineto CudaMetadataFields: "grid",
# "block", "blocks per SM" = grid blocks / SMs, "est. achieved occupancy %" = min(blocks per SM, the blocks one SM
# can hold) x threads per block / the SM's thread slots, from cudaOccMaxActiveBlocksPerMultiprocessor)
KINETO_FIELDS = ("grid", "block", "blocks per SM", "est. achieved occupancy %", "registers per thread",
                 "shared memory")
HIST_FIRST_MS = 0.004  # the first histogram bin's upper edge (4 us); each next one twice the last
HIST_BINS = 15  # up to 65.5 ms; longer kernels share one last bin whose upper edge is the longest
MAX_BLOCKS_PER_SM = 32  # resident blocks one SM may hold (compute capability 5.0 to 9.0), where the device says none


def _quantile(xs: Sequence[float], q: float, weights: Sequence[float] | None = None) -> float | None:
    """The lower q-quantile of ``xs`` (each weighted by ``weights``: the smallest x whose cumulative weight reaches q
    of the total)."""
    if not xs:
        return None
    pairs = sorted(zip(xs, weights if weights is not None else [1.0] * len(xs), strict=True))
    total = sum(w for _, w in pairs)
    if total <= 0:
        return None
    acc = 0.0
    for x, w in pairs:
        acc += w
        if acc >= q * total - 1e-12:
            return round(float(x), 6)
    return round(float(pairs[-1][0]), 6)


def resident_blocks(args: dict, limits: dict | None) -> float | None:
    """How many of this kernel's blocks one SM can hold at once, or None where the trace or the device do not say.

    From the SM's limits (``limits``: ``threads``, ``registers``, ``shared_memory`` per SM, ``blocks``) and the
    kernel's block size, registers per thread and shared memory per block, as the occupancy calculator does
    (allocation granularity left out). Where Kineto's occupancy shows the grid was held below that by the SM (its
    occupancy lower than the grid's blocks would give), the occupancy's own count is taken."""
    block = args.get("block")
    if not block or not limits or not limits.get("threads"):
        return None
    threads = 1
    for b in block:
        threads *= max(int(b), 1)
    caps = [limits["threads"] // threads, limits.get("blocks") or MAX_BLOCKS_PER_SM]
    regs, smem = args.get("registers per thread"), args.get("shared memory")
    if regs and limits.get("registers"):
        caps.append(limits["registers"] // (int(regs) * threads))
    if smem and limits.get("shared_memory"):
        caps.append(limits["shared_memory"] // int(smem))
    own = float(max(min(caps), 1))
    occ, bps = args.get("est. achieved occupancy %"), args.get("blocks per SM")
    if occ is not None and bps is not None and float(occ) >= 0:
        by_occ = float(occ) / 100.0 * limits["threads"] / threads  # min(blocks per SM, resident) from Kineto
        if by_occ + 0.5 < float(bps):  # the SM held fewer than the grid offered: that is the resident count
            return max(round(by_occ), 1.0)
    return own


def kernel_record(kernels: Sequence[tuple[float, dict]], sm_count: int | None, limits: dict | None = None) -> dict:
    """One phase's kernels (duration in ms, Kineto's args) as a neighbour meets them; the module docstring's
    ``kernels``. On CPU (top-level operators, no args) only the durations."""
    durs = [d for d, _ in kernels]
    total = sum(durs)
    out: dict = {"n": len(durs),
                 "ms": {q: _quantile(durs, v) for q, v in (("p10", 0.1), ("p50", 0.5), ("p90", 0.9), ("p99", 0.99))}
                 | {"max": round(max(durs), 6) if durs else None},
                 "tw_ms": {q: _quantile(durs, v, durs) for q, v in (("p50", 0.5), ("p90", 0.9), ("p99", 0.99))},
                 "residual_ms": round(sum(d * d for d in durs) / (2 * total), 6) if total > 0 else None}
    fields = [f for f in KINETO_FIELDS if any(f in a for _, a in kernels)]
    occ: list[tuple[float | None, float]] = []
    full: list[tuple[bool | None, float]] = []
    for d, a in kernels:
        o = a.get("est. achieved occupancy %")
        occ.append((float(o) if o is not None and float(o) >= 0 else None, d))
        bps = a.get("blocks per SM")
        if bps is None and a.get("grid") and sm_count:
            n = 1
            for g in a["grid"]:
                n *= max(int(g), 1)
            bps = n / sm_count
        res = resident_blocks(a, limits)
        full.append((float(bps) / res >= 1.0 if bps is not None and res else None, d))
    known_occ = [(o, d) for o, d in occ if o is not None]
    known_full = [(f, d) for f, d in full if f is not None]
    t_occ, t_full = sum(d for _, d in known_occ), sum(d for _, d in known_full)
    out["occupancy_pct"] = round(sum(o * d for o, d in known_occ) / t_occ, 3) if t_occ > 0 else None
    out["full_share"] = round(sum(d for f, d in known_full if f) / t_full, 6) if t_full > 0 else None
    full_d = [d for f, d in known_full if f]
    out["full_residual_ms"] = (round(sum(d * d for d in full_d) / (2 * sum(full_d)), 6) if sum(full_d) > 0
                               else None)
    waves = [(float(a["blocks per SM"]) / r, d) for d, a in kernels
             if a.get("blocks per SM") is not None and (r := resident_blocks(a, limits))]
    out["waves"] = ({"p50": _quantile([w for w, _ in waves], 0.5, [d for _, d in waves]),
                     "max": round(max(w for w, _ in waves), 3)} if waves else None)
    bins: dict[int, list] = {}
    for (d, _), (o, _), (f, _) in zip(kernels, occ, full, strict=True):
        k = 0
        while k < HIST_BINS and d > HIST_FIRST_MS * 2 ** k:
            k += 1
        b = bins.setdefault(k, [0, 0.0, 0.0, 0.0, 0.0, 0.0])  # n, ms, occ x ms, ms with occ, full ms, ms with full
        b[0] += 1
        b[1] += d
        if o is not None:
            b[2], b[3] = b[2] + o * d, b[3] + d
        if f is not None:
            b[4], b[5] = b[4] + d * f, b[5] + d
    out["hist"] = [[round(HIST_FIRST_MS * 2 ** k, 6) if k < HIST_BINS else round(max(durs), 6), b[0], round(b[1], 6),
                    round(b[2] / b[3], 3) if b[3] > 0 else None, round(b[4] / b[5], 6) if b[5] > 0 else None]
                   for k, b in sorted(bins.items())]
    out["fields"] = fields
    return out


def _guarded_record(kernels: Sequence[tuple[float, dict]], sm_count: int | None, limits: dict | None) -> dict:
    """:func:`kernel_record`, or ``{"error": ...}`` where a Kineto field is not what it should be (a torch whose
    trace writes it otherwise): the profile's other numbers and the timed run go on, and the planner says the
    kernel-level record is missing rather than guessing it."""
    try:
        return kernel_record(kernels, sm_count, limits)
    except (TypeError, ValueError, KeyError, ZeroDivisionError) as exc:
        return {"error": f"{type(exc).__name__}: {exc}"[:200]}


def summarize_trace(events: list[dict], calls: list[tuple[str, int]], sm_count: int | None,
                    limits: dict | None = None) -> dict:
    """The per-phase summary from a Kineto chrome trace's events and the profiled calls (phase, index).

    Kernels belong to the call whose annotation (``kts_phase:<phase>:<index>``) encloses their launch on the
    host (matched by the CUPTI correlation id); on CPU, the top-level operators inside the annotation. ``limits``:
    one SM's ``threads``, ``registers``, ``shared_memory`` and ``blocks`` (:func:`sm_limits`), for the kernels' waves.
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
    last_launch: dict[str, float] = {}  # per call: when its last launch began (host clock)
    sync_ends: dict[bool, dict[str, list[float]]] = {True: {}, False: {}}  # per device kind, per call: when each
    # of the host's waits for the device ended (a GPU trace has both a scalar read and its sync: one is counted)
    for e in events:
        if e.get("cat") in LAUNCH_CATEGORIES and e.get("name") in LAUNCHES:
            who = owner(float(e["ts"]))
            c = (e.get("args") or {}).get("correlation")
            if who is not None and c is not None:
                corr_owner[int(c)] = who
                last_launch[who] = max(last_launch.get(who, -math.inf), float(e["ts"]))
        elif (on_gpu := e.get("cat") in LAUNCH_CATEGORIES and e.get("name") in SYNCS) or (
                e.get("cat") == "cpu_op" and e.get("name") == HOST_READ):
            who = owner(float(e["ts"]))
            if who is not None:
                sync_ends[on_gpu].setdefault(who, []).append(float(e["ts"]) + float(e.get("dur", 0.0)))
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
            last_launch[who] = max(last_launch.get(who, -math.inf), float(e["ts"]))
    phases: dict[str, dict[str, list]] = {}
    for phase, index in calls:
        name = f"{MARK}:{phase}:{index}"
        if name not in marks:
            continue
        lo, hi = marks[name]
        got = sorted(per_call.get(name, []), key=lambda e: float(e["ts"]))
        kernels = [e for e in got if e.get("cat") in ("kernel", "cpu_op")]
        acc = phases.setdefault(phase, {k: [] for k in ("n", "busy", "wall", "share", "gap", "kms", "blocks",
                                                        "smw", "fill", "names", "each", "syncs")})
        acc["syncs"].append(sum(end <= last_launch.get(name, -math.inf) for end in sync_ends[gpu].get(name, [])))
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
            acc["each"].append((dur, dict(k.get("args") or {}) if k.get("cat") == "kernel" else {}))
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
            "launch_gap_ms": _p50(acc["gap"]), "host_syncs": _p50(acc["syncs"]), "host_syncs_max": max(acc["syncs"]),
            "grid_blocks": {"p50": _p50(acc["blocks"]), "max": max(acc["blocks"])} if acc["blocks"] else None,
            "sm_share": round(sum(s * d for s, d in acc["smw"]) / total, 6) if total > 0 else None,
            "fill_share": round(sum(d for f, d in acc["fill"] if f) / total, 6) if total > 0 else None,
            "top_kernels": [{"name": _short(n), "calls": len(ds), "total_ms": round(sum(ds), 6)} for n, ds in top],
            "kernels": _guarded_record(acc["each"], sm_count, limits),
        }
    return out


def sm_limits(props) -> dict:
    """One SM's limits from torch's device properties, each None where this torch does not give it (a kernel's waves
    are then left unknown rather than guessed)."""
    def get(*names):
        for n in names:
            v = getattr(props, n, None)
            if v:
                return int(v)
        return None

    return {"threads": get("max_threads_per_multi_processor"), "registers": get("regs_per_multiprocessor"),
            "shared_memory": get("shared_memory_per_multiprocessor"), "blocks": None}


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
    props = torch.cuda.get_device_properties(device) if cuda else None
    sm_count = props.multi_processor_count if cuda else None
    limits = sm_limits(props) if cuda else None
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
    phases = summarize_trace(events, calls, sm_count, limits)
    return {"version": PROFILE_VERSION, "tool": f"torch.profiler (torch {torch.__version__})",
            "device": device.type, "sm_count": sm_count, "sm_limits": limits, "iterations": done, "segment_s": round(segment_s, 4),
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
