#!/usr/bin/env python3
"""kts worker: one tenant's process. Builds its workload, warms it up, then times it (one ``KTS_APP`` line per
operation) in one block, or, under the warm design (``--serve-dir``), in as many blocks as the orchestrator asks.

Imports only torch and the standard library (its siblings in ``workers/`` are standard library too), so the same
folder runs in a container, on a bare GPU host, or under the local backend. The parts, one job each:

* ``kts_api``: the workload API (``Workload``) and the log line format;
* ``kts_builtin``: the kit's own workloads (fft, gemm, noop, llm); ``kts_models``: real models (transformers);
* ``kts_workload``: which factory a name stands for, and the check of what it builds;
* ``kts_harness``: the clocks, the barrier, lead-in, padding, looks, the block's end and the timing loop;
* ``kts_autostop``: ``iterations=auto``, the p99 stopping rule;
* ``kts_serve``: the warm design: blocks on command, idle between them with the CUDA context resident;
* ``kts_profile``: torch.profiler's summary of a few iterations, before the first timed one;
* this file: the command line, the process's set-up (core pinning, device, warm-up, profile, KTS_META) and
  ``main``.

``--check`` builds the workload and checks it without timing anything (the runner's pre-flight).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the siblings, wherever the worker is started from

from kts_api import META_TAG, Workload, WorkloadError, record_line  # noqa: E402

# The documented import of a user's factory (docs/guide/workloads.md): ``from kts_worker import Workload``. The class
# lives in kts_api; this module names it too, so a factory written to the docs keeps working wherever the worker runs
# (its folder is on sys.path there).
__all__ = ["Workload", "WorkloadError", "main"]
from kts_autostop import StopRule  # noqa: E402
from kts_builtin import DEFAULT_SLEEP_MS  # noqa: E402
from kts_harness import (  # noqa: E402
    EXIT_PAD_LIMIT,
    EXIT_STOPPED_EARLY,
    HOST_PROBE_LOOP,
    Clock,
    StopRequest,
    host_probe_on,
    probe_adds_gap,
    run_loop,
    wait_for_start,
)
from kts_workload import EXIT_BAD_WORKLOAD, build_workload, workload_params  # noqa: E402


def _env(name: str, default):
    value = os.environ.get(name)
    return default if value in (None, "") else value


def own_tenant_env(environ=os.environ) -> None:
    """Kubernetes runs a scenario as one Indexed Job: ``KTS_TENANTS`` lists every tenant's settings and
    this pod takes the entry at its ``JOB_COMPLETION_INDEX`` (set by the Job controller)."""
    raw = environ.get("KTS_TENANTS")
    if not raw:
        return
    try:
        tenants = json.loads(raw)
        index = int(environ.get("JOB_COMPLETION_INDEX", ""))
        own = tenants[index]
    except (ValueError, IndexError, TypeError):
        raise SystemExit(f"kts_worker: KTS_TENANTS has no entry for JOB_COMPLETION_INDEX="
                         f"{environ.get('JOB_COMPLETION_INDEX')!r}") from None
    environ.update({str(k): str(v) for k, v in own.items()})


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description="kts worker: time one workload per iteration")
    p.add_argument("--workload", default=_env("WORKLOAD", None),
                   help="a built-in name, module:factory, or a kts.workloads entry point (see the module's API)")
    p.add_argument("--tenant", default=_env("TENANT", None))
    p.add_argument("--iterations", default=_env("ITERATIONS", "800"),
                   help="timed iterations, or 'auto': until the p99's interval is within --auto-rel-width")
    p.add_argument("--auto-rel-width", type=float, default=float(_env("KTS_AUTO_REL_WIDTH", 0.10)),
                   help="iterations=auto: stop when both 95 %% bounds of the p99 are within this fraction of it")
    p.add_argument("--auto-time-cap-s", type=float, default=float(_env("KTS_AUTO_TIME_CAP_S", 600)),
                   help="iterations=auto: stop the timed part after this many seconds whatever the width")
    p.add_argument("--auto-max-iterations", type=int, default=int(_env("KTS_AUTO_MAX_ITERATIONS", 100_000)),
                   help="iterations=auto: stop after this many timed iterations whatever the width")
    p.add_argument("--matrix-size", type=int, default=int(_env("MATRIX_SIZE", 4096)))
    p.add_argument("--sleep-ms", type=float, default=_env("SLEEP_MS", None))
    p.add_argument("--sleep-dist", default=_env("SLEEP_DIST", "fixed"), choices=["fixed", "exp"],
                   help="closed loop: sleep exactly --sleep-ms (the article), or an exponential think time of that "
                        "mean, so that two tenants' cadences never lock into a fixed beat")
    p.add_argument("--warmup", type=int, default=int(_env("WARMUP", 5)))
    p.add_argument("--device", default=_env("DEVICE", "auto"))
    p.add_argument("--threads", type=int, default=int(_env("THREADS", 1)))
    p.add_argument("--start-at", type=int, default=int(_env("START_AT", 0)),
                   help="epoch-ns at which the timed loop starts (a barrier shared by tenants)")
    p.add_argument("--barrier-dir", default=_env("KTS_BARRIER_DIR", None),
                   help="local barrier: write ready-<tenant>, wait for a 'go' file holding the start epoch-ns")
    p.add_argument("--go-file", default=_env("KTS_GO_FILE", None),
                   help="cluster barrier: print a ready line (stderr) with this host's clock, then wait for this "
                        "file (a ConfigMap key) to hold a JSON map tenant -> start epoch-ns on this host's clock")
    p.add_argument("--barrier-timeout-s", type=float, default=float(_env("KTS_BARRIER_TIMEOUT_S", 600)))
    p.add_argument("--arrival", default=_env("ARRIVAL", "closed"), choices=["closed", "poisson", "fixed"],
                   help="closed: sleep between iterations; poisson/fixed: open-loop arrivals at --rate-hz")
    p.add_argument("--rate-hz", type=float, default=float(_env("RATE_HZ", 0)))
    p.add_argument("--duration-s", type=float, default=float(_env("DURATION_S", 0)),
                   help="open loop: stop issuing new arrivals after this many seconds (0: no limit)")
    p.add_argument("--seed", type=int, default=int(_env("SEED", 0)))
    p.add_argument("--lead-in-s", type=float, default=float(_env("KTS_LEAD_IN_S", 0)),
                   help="seconds of padding (phase 'pad') after the barrier, before the timed iterations")
    p.add_argument("--pad", action=argparse.BooleanOptionalAction, default=_env("KTS_PAD", "0") == "1",
                   help="after the timed iterations, keep padding until SIGTERM (shared scenarios)")
    p.add_argument("--pad-limit-s", type=float, default=float(_env("KTS_PAD_LIMIT_S", 3600)),
                   help="safety limit: stop padding (exit 3) after this many seconds without a SIGTERM")
    p.add_argument("--pad-limit-exit", type=int, default=int(_env("KTS_PAD_LIMIT_EXIT", EXIT_PAD_LIMIT)),
                   help="exit code at the padding limit (Kubernetes: 0, so a Job can complete without its client)")
    p.add_argument("--start-delay-s", type=float, default=float(_env("KTS_START_DELAY_S", 0)),
                   help=argparse.SUPPRESS)  # tests: a tenant that wakes late after the barrier (a late pod)
    p.add_argument("--looks", default=_env("KTS_LOOKS", ""),
                   help="interim looks (shared scenario with a barrier directory): after this many timed iterations, "
                        "e.g. 800,1200, pad until the orchestrator answers stop (the verdict decided) or go")
    p.add_argument("--serve-dir", default=_env("KTS_SERVE_DIR", None),
                   help="the warm design: after set-up, run blocks on command (cmd-<tenant>-<n>.json in this folder) "
                        "and idle between them with the context resident, until quit-<tenant> (kts_serve.py)")
    p.add_argument("--block-s", type=float, default=float(_env("KTS_BLOCK_S", 0)),
                   help="a block's timed part lasts this many seconds (0: a count of --iterations); with a barrier "
                        "directory every tenant times until all have reached it (kts_harness.BlockEnd)")
    p.add_argument("--block-min-iterations", type=int, default=int(_env("KTS_BLOCK_MIN_ITERATIONS", 0)),
                   help="with --block-s: at least this many whole iterations (each phase) in the block")
    p.add_argument("--check", action="store_true",
                   help="build the workload, check its API and run one iteration; time nothing (pre-flight)")
    p.add_argument("--profile-iterations", type=int, default=int(_env("KTS_PROFILE_ITERATIONS", 0)),
                   help="profile this many iterations (torch.profiler) after the warm-up, before the barrier, "
                        "and store the summary in KTS_META (kts_profile.py); 0: no profile")
    p.add_argument("--host-probe", action=argparse.BooleanOptionalAction,
                   default=_env("KTS_HOST_PROBE", "1") not in ("0", "false", "no"),
                   help="after each iteration, time a fixed piece of interpreter work (host_probe) out of the sleep "
                        "and list it in KTS_END (host_probe_ms); closed loops with a fixed sleep (back to back: between iterations)")
    p.add_argument("--host-probe-loop", type=int, default=int(_env("KTS_HOST_PROBE_LOOP", HOST_PROBE_LOOP)),
                   help=argparse.SUPPRESS)  # tests: a probe long enough that its place in the sleep shows
    p.add_argument("--crash-after", type=int, default=int(_env("KTS_CRASH_AFTER", -1)), help=argparse.SUPPRESS)
    p.add_argument("--crash-after-pad", type=int, default=int(_env("KTS_CRASH_AFTER_PAD", -1)),
                   help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.workload is None:
        p.error("--workload (or WORKLOAD) is required")
    if a.sleep_ms is None:
        a.sleep_ms = DEFAULT_SLEEP_MS.get(a.workload, 0.0)
    a.sleep_ms = float(a.sleep_ms)
    a.tenant = a.tenant or a.workload
    try:
        a.looks = sorted({int(v) for v in str(a.looks).split(",") if v.strip()})
    except ValueError:
        p.error(f"--looks must be comma-separated iteration counts, got {a.looks!r}")
    a.auto = str(a.iterations).strip().lower() == "auto"
    try:
        a.iterations = a.auto_max_iterations if a.auto else int(a.iterations)
    except ValueError:
        p.error(f"--iterations must be a positive integer or 'auto', got {a.iterations!r}")
    if a.auto and not (0 < a.auto_rel_width < 1 and a.auto_time_cap_s > 0):
        p.error("--auto-rel-width must lie in (0, 1) and --auto-time-cap-s be positive")
    if a.iterations < 1 or a.matrix_size < 1 or a.warmup < 0 or a.sleep_ms < 0 or a.threads < 1:
        p.error("iterations, matrix size and threads must be positive; warmup and sleep not negative")
    if a.block_s < 0 or a.block_min_iterations < 0:
        p.error("--block-s and --block-min-iterations must not be negative")
    if a.lead_in_s < 0 or a.pad_limit_s <= 0:
        p.error("--lead-in-s must not be negative and --pad-limit-s must be positive")
    if a.arrival != "closed" and a.rate_hz <= 0:
        p.error("open-loop arrivals need --rate-hz > 0")
    return a


def resolve_device(torch, requested: str):
    if requested == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    dev = torch.device(requested)
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise SystemExit("kts_worker: DEVICE=cuda requested but torch sees no CUDA GPU")
    return dev


def gpu_identity(torch, device) -> dict:
    """Which physical GPU this process uses, as CUDA reports it to the process (under MPS too).

    Tenants of one shared scenario must report the same ``gpu_uuid``; on a multi-GPU node the device
    plugin may place replicas on different GPUs, and then they did not share anything.
    """
    if device.type != "cuda":
        return {"gpu_uuid": None}
    props = torch.cuda.get_device_properties(device)
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    raw = getattr(props, "uuid", None)
    prefix = "MIG-" if visible and visible.strip().startswith("MIG-") else "GPU-"
    bare = None if raw is None else re.sub(r"^(GPU|MIG)-", "", str(raw))  # torch gives the bare hex; a build may not
    out = {"gpu_uuid": f"{prefix}{bare}" if bare is not None else None, "cuda_visible_devices": visible,
           "mps_client": bool(os.environ.get("CUDA_MPS_PIPE_DIRECTORY"))}
    bus = [getattr(props, k, None) for k in ("pci_domain_id", "pci_bus_id", "pci_device_id")]
    if all(v is not None for v in bus):
        out["pci"] = "{:04x}:{:02x}:{:02x}.0".format(*bus)
    return out


def pin_to_core(environ=os.environ) -> None:
    """The CPU stand-in's time-slicing: ``KTS_CPU_CORE`` pins this tenant to one core (-1: the last it may
    use), as every tenant of the scenario is, so they take turns on it as GPU tenants take turns on a GPU."""
    raw = environ.get("KTS_CPU_CORE")
    if not raw or not hasattr(os, "sched_setaffinity"):
        return
    allowed = sorted(os.sched_getaffinity(0))
    core = allowed[-1] if int(raw) == -1 else int(raw)
    if core not in allowed:
        raise SystemExit(f"kts_worker: KTS_CPU_CORE={raw}: core {core} is not among this process's cores {allowed}")
    os.sched_setaffinity(0, {core})


def main(argv: list[str] | None = None) -> int:
    t_start = time.perf_counter()
    own_tenant_env()
    pin_to_core()
    args = parse_args(argv)
    stop = StopRequest()
    stop.install()
    if args.barrier_dir and not args.serve_dir:  # the orchestrator's word to stop padding (a SIGTERM alone is not)
        stop.file = Path(args.barrier_dir) / "stop"
    if args.go_file:  # on a cluster the word comes in the go file ("stop"), beside each tenant's start
        stop.go_file = Path(args.go_file)
    import torch

    torch.set_num_threads(args.threads)
    device = resolve_device(torch, args.device)
    torch.manual_seed(args.seed)
    setup_s = {"start": 0.0}  # what the process's set-up cost, by part (the warm design pays it once per mode)
    try:
        if device.type == "cuda":
            torch.cuda.init()
        setup_s["start"] = round(time.perf_counter() - t_start, 3)  # interpreter, torch import, CUDA context
        t_part = time.perf_counter()
        workload = build_workload(args.workload, torch, device, workload_params(args, device))
        setup_s["build"] = round(time.perf_counter() - t_part, 3)
        t_part = time.perf_counter()
        clock = Clock(torch, device)
        for _ in range(max(args.warmup, 1 if args.check else 0)):  # cuFFT plans, cuBLAS handles, first touches
            for _phase, fn in workload.step():
                clock.time(fn)
        setup_s["warmup"] = round(time.perf_counter() - t_part, 3)
    except WorkloadError as exc:
        print(f"kts_worker: tenant {args.tenant} (workload {args.workload}): {exc}", file=sys.stderr, flush=True)
        return EXIT_BAD_WORKLOAD
    if args.check:
        print(f"kts_worker: tenant {args.tenant} (workload {args.workload}): ok, {workload.name}, phases "
              f"{sorted({ph for ph, _ in workload.step()})}", flush=True)
        return 0
    workload_name = workload.name
    workload.name = args.workload  # the lines carry the name the run gave it, as its manifest does
    profile = None
    if args.profile_iterations > 0:  # outside the timed iterations: before the barrier
        try:
            import kts_profile
        except ImportError:  # an image built before the profile existed: the run goes on, the planner falls back
            print("kts_worker: kts_profile.py is not beside the worker; no profile recorded", file=sys.stderr)
        else:
            t_part = time.perf_counter()
            profile = kts_profile.profile_workload(torch, device, workload.step, args.profile_iterations)
            setup_s["profile"] = round(time.perf_counter() - t_part, 3)

    meta = {
        "workload": args.workload, "tenant": args.tenant, "iterations": args.iterations,
        "matrix_size": args.matrix_size, "sleep_ms": args.sleep_ms, "sleep_dist": args.sleep_dist,
        "warmup": args.warmup,
        "threads": args.threads, "arrival": args.arrival, "rate_hz": args.rate_hz,
        "device": str(device), "device_name": torch.cuda.get_device_name(device) if device.type == "cuda"
        else platform.processor() or platform.machine(), "torch": torch.__version__,
        "cuda": torch.version.cuda, "pid": os.getpid(), "host": platform.node(),
        "flops_per_op": workload.flops_per_op, "bytes_per_op": workload.bytes_per_op,
        "phases_per_iteration": len(workload.step()), "notes": workload.notes, "workload_name": workload_name,
        "mps_thread_percentage": os.environ.get("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"),
        # caps a sharing layer put on every client (the Kubernetes device plugin's MPS daemon), as the backend says
        "sharing_caps": json.loads(os.environ["KTS_SHARING_CAPS"]) if os.environ.get("KTS_SHARING_CAPS") else None,
        "lead_in_s": args.lead_in_s, "pad": args.pad, "pad_limit_s": args.pad_limit_s,
        "stopping": StopRule.from_args(args).describe(), "looks": args.looks, "seed": args.seed,
        "cpu_affinity": sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "host_probe": {"on": host_probe_on(args), "loop": args.host_probe_loop, "adds_gap": probe_adds_gap(args)},
        **gpu_identity(torch, device),
    }
    if profile is not None:
        meta["profile"] = profile
    meta["setup_s"] = setup_s
    if device.type == "cuda":  # the device's used memory at each block's end (kts_gpumem; "unknown" without NVML)
        try:
            from kts_gpumem import gpu_memory
        except ImportError:  # an image built before it: the stranger check is unknown, the run goes on
            clock.memory = lambda: {"status": "unknown", "reason": "kts_gpumem.py is not beside the worker"}
        else:
            clock.memory = lambda: gpu_memory(torch, device, meta.get("gpu_uuid"))
    if args.serve_dir:  # the warm design: blocks on command until told to quit
        from kts_serve import serve

        return serve(args, workload, clock, stop, meta)
    meta["barrier_reached_ns"] = time.time_ns()  # start-up (CUDA init, warm-up) ends, the barrier wait begins
    start_at = wait_for_start(args, stop)
    stop.sleep(args.start_delay_s)
    if stop.requested:  # stopped during set-up: nothing was timed
        return EXIT_STOPPED_EARLY
    meta["start_at_ns"] = start_at
    meta["loop_start_ns"] = time.time_ns()
    print(record_line(META_TAG, meta), flush=True)
    return run_loop(args, workload, clock, stop)


if __name__ == "__main__":
    sys.exit(main())
