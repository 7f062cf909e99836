#!/usr/bin/env python3
"""kts worker: one timing loop for every workload, printing one KTS_APP line per iteration.

Imports only torch and the standard library, so the same file runs in a container,
on a bare GPU host, or under the local backend.

Line format (documented in README.md):

    KTS_APP,v2,<workload>,<tenant>,<iteration>,<phase>,<intended_ns>,<start_ns>,<end_ns>,<device_ms>,<wall_ms>

* ``intended_ns``: when the operation was due (open-loop arrivals); equals ``start_ns`` in closed loop.
* ``start_ns``/``end_ns``: host epoch clock (``time.time_ns``) just before launch and just after completion.
* ``device_ms``: CUDA-event time on the GPU (on CPU: the wall time, there is no separate device clock).
* ``wall_ms``: host monotonic clock from launch to completion (``perf_counter_ns``).

One ``KTS_META,v2,<json>`` line precedes the iterations: parameters, device (with the GPU's UUID, so a
shared scenario can prove its tenants shared one physical GPU), work per op.

Co-running by construction: a shared scenario's statistics may only use iterations that ran while every
neighbour was active. So after the start barrier a worker first runs ``--lead-in-s`` of *padding* (the
same operation at the same cadence, printed with phase ``pad``), then its timed iterations, then, with
``--pad``, padding again until the orchestrator stops it with SIGTERM once every tenant has finished its
timed iterations. Padding lines are never timed statistics; they prove in the log that the tenant's load
was on the GPU. SIGTERM ends the current iteration cleanly (its line is printed), so no line is lost.
Exit codes: 0 done (or stopped while padding), 3 padding hit ``--pad-limit-s`` (nobody stopped it; set by
``--pad-limit-exit``, 0 on Kubernetes, where the logs then show whether the padding covered the neighbours),
143 stopped by SIGTERM before its timed iterations were complete.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import random
import signal
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

LINE_VERSION = "v2"
PAD_PHASE = "pad"
EXIT_PAD_LIMIT = 3
EXIT_STOPPED_EARLY = 128 + signal.SIGTERM
DEFAULT_SLEEP_MS = {"fft": 100.0, "gemm": 150.0, "noop": 0.0, "llm": 50.0}


@dataclass
class Workload:
    """What one iteration runs, and how much work it does (for TFLOP/s and GB/s)."""

    name: str
    step: Callable[[], list[tuple[str, Callable[[], object]]]]
    flops_per_op: float = 0.0
    bytes_per_op: float = 0.0
    notes: dict = field(default_factory=dict)


def _single(phase: str, fn: Callable[[], object]) -> Callable[[], list[tuple[str, Callable[[], object]]]]:
    return lambda: [(phase, fn)]


def make_fft(torch, n: int, device) -> Workload:
    # complex64 like the article; allocated once so allocator/plan creation stay out of the timed window.
    data = torch.randn(n, n, device=device, dtype=torch.complex64)
    # Bandwidth model: one read and one write of the N x N complex64 array per fft2 (a lower bound;
    # cuFFT may make more passes, so the reported GB/s is an effective, not a physical, figure).
    return Workload(
        "fft",
        _single("op", lambda: torch.fft.fft2(data)),
        flops_per_op=5.0 * n * n * math.log2(max(n * n, 2)),
        bytes_per_op=2.0 * n * n * 8,
        notes={"bytes_model": "read + write of the N^2 complex64 array (lower bound)"},
    )


def make_gemm(torch, n: int, device) -> Workload:
    a = torch.randn(n, n, device=device)
    b = torch.randn(n, n, device=device)
    return Workload(
        "gemm",
        _single("op", lambda: torch.matmul(a, b)),
        flops_per_op=2.0 * n**3,
        bytes_per_op=3.0 * n * n * 4,
        notes={"flops_model": "2 N^3 fp32"},
    )


def make_noop(torch, n: int, device) -> Workload:
    # A one-element add: the smallest kernel, timed the same way, gives the tool's overhead floor.
    x = torch.zeros(1, device=device)
    return Workload("noop", _single("op", lambda: x.add_(1.0)))


def make_llm(torch, n: int, device) -> Workload:
    """A small decoder-only transformer with random weights: one prefill, then token-by-token decode."""
    d_model = int(os.environ.get("LLM_D_MODEL", "512"))
    n_layers = int(os.environ.get("LLM_LAYERS", "4"))
    n_heads = int(os.environ.get("LLM_HEADS", "8"))
    prompt = int(os.environ.get("LLM_PROMPT_TOKENS", "128"))
    decode = int(os.environ.get("LLM_DECODE_TOKENS", "16"))
    vocab = int(os.environ.get("LLM_VOCAB", "4096"))
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(d_model, n_heads, 4 * d_model, dropout=0.0, batch_first=True)
    model = torch.nn.ModuleDict(
        {
            "emb": torch.nn.Embedding(vocab, d_model),
            "blocks": torch.nn.TransformerEncoder(layer, n_layers, enable_nested_tensor=False),
            "head": torch.nn.Linear(d_model, vocab),
        }
    ).to(device).eval()
    tokens = torch.randint(0, vocab, (1, prompt), device=device)
    state: dict = {}

    def forward(ids):
        seq = ids.shape[1]
        mask = torch.nn.Transformer.generate_square_subsequent_mask(seq, device=device)
        with torch.inference_mode():
            h = model["blocks"](model["emb"](ids), mask=mask, is_causal=True)
            return model["head"](h[:, -1]).argmax(-1, keepdim=True)

    def prefill():
        state["ids"] = torch.cat([tokens, forward(tokens)], dim=1)

    def decode_one():
        state["ids"] = torch.cat([state["ids"], forward(state["ids"])], dim=1)

    def steps():
        return [("prefill", prefill)] + [("decode", decode_one)] * decode

    params = sum(p.numel() for p in model.parameters())
    return Workload(
        "llm",
        steps,
        flops_per_op=2.0 * params * (prompt + decode),
        notes={"d_model": d_model, "layers": n_layers, "heads": n_heads, "prompt_tokens": prompt,
               "decode_tokens": decode, "vocab": vocab, "parameters": params,
               "flops_model": "2 x parameters x tokens (no KV cache: each decode step re-runs the prefix)"},
    )


WORKLOADS: dict[str, Callable] = {"fft": make_fft, "gemm": make_gemm, "noop": make_noop, "llm": make_llm}


class Clock:
    """Times one operation: device time (CUDA events) and host wall time (launch -> completion)."""

    def __init__(self, torch, device) -> None:
        self.torch = torch
        self.cuda = device.type == "cuda"
        if self.cuda:
            self.ev_start = torch.cuda.Event(enable_timing=True)
            self.ev_end = torch.cuda.Event(enable_timing=True)

    def time(self, fn: Callable[[], object]) -> tuple[int, int, float, float]:
        start_ns = time.time_ns()
        t0 = time.perf_counter_ns()
        if self.cuda:
            self.ev_start.record()
            fn()
            self.ev_end.record()
            self.torch.cuda.synchronize()
        else:
            fn()
        t1 = time.perf_counter_ns()
        end_ns = time.time_ns()
        wall_ms = (t1 - t0) / 1e6
        device_ms = float(self.ev_start.elapsed_time(self.ev_end)) if self.cuda else wall_ms
        return start_ns, end_ns, device_ms, wall_ms


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
    p.add_argument("--workload", default=_env("WORKLOAD", None), choices=sorted(WORKLOADS))
    p.add_argument("--tenant", default=_env("TENANT", None))
    p.add_argument("--iterations", type=int, default=int(_env("ITERATIONS", 800)))
    p.add_argument("--matrix-size", type=int, default=int(_env("MATRIX_SIZE", 4096)))
    p.add_argument("--sleep-ms", type=float, default=_env("SLEEP_MS", None))
    p.add_argument("--warmup", type=int, default=int(_env("WARMUP", 5)))
    p.add_argument("--device", default=_env("DEVICE", "auto"))
    p.add_argument("--threads", type=int, default=int(_env("THREADS", 1)))
    p.add_argument("--start-at", type=int, default=int(_env("START_AT", 0)),
                   help="epoch-ns at which the timed loop starts (a barrier shared by tenants)")
    p.add_argument("--barrier-dir", default=_env("KTS_BARRIER_DIR", None),
                   help="local barrier: write ready-<tenant>, wait for a 'go' file holding the start epoch-ns")
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
    p.add_argument("--crash-after", type=int, default=int(_env("KTS_CRASH_AFTER", -1)), help=argparse.SUPPRESS)
    p.add_argument("--crash-after-pad", type=int, default=int(_env("KTS_CRASH_AFTER_PAD", -1)),
                   help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.workload is None:
        p.error("--workload (or WORKLOAD) is required")
    if a.sleep_ms is None:
        a.sleep_ms = DEFAULT_SLEEP_MS[a.workload]
    a.sleep_ms = float(a.sleep_ms)
    a.tenant = a.tenant or a.workload
    if a.iterations < 1 or a.matrix_size < 1 or a.warmup < 0 or a.sleep_ms < 0 or a.threads < 1:
        p.error("iterations, matrix size and threads must be positive; warmup and sleep not negative")
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


class StopRequest:
    """Set by SIGTERM: the loop finishes the iteration in progress, prints it and ends.

    The handler only sets a flag: anything that takes a lock (threading.Event.set) can deadlock when
    the signal lands while the same thread holds that lock. Sleeps are cut into short slices that
    look at the flag, so a stop is seen within ``SLICE_S``.
    """

    SLICE_S = 0.02

    def __init__(self) -> None:
        self.requested = False

    def install(self) -> None:
        signal.signal(signal.SIGTERM, self._handle)

    def _handle(self, _signum: int, _frame: object) -> None:
        self.requested = True

    def sleep(self, seconds: float) -> None:
        """Sleep, but wake within a slice when a stop is requested."""
        end = time.monotonic() + seconds
        while not self.requested:
            left = end - time.monotonic()
            if left <= 0:
                return
            time.sleep(min(left, self.SLICE_S))


def wait_for_start(args: argparse.Namespace, stop: StopRequest | None = None) -> int:
    """Block until the shared start instant, so tenants enter their timed loops together."""
    stop = stop or StopRequest()
    start_at = args.start_at
    if args.barrier_dir:
        bdir = Path(args.barrier_dir)
        tmp = bdir / f".ready-{args.tenant}.tmp"
        tmp.write_text(str(os.getpid()))
        tmp.rename(bdir / f"ready-{args.tenant}")
        go = bdir / "go"
        deadline = time.monotonic() + args.barrier_timeout_s
        while not go.exists() and not stop.requested:
            if time.monotonic() > deadline:
                raise SystemExit(f"kts_worker: no 'go' in {bdir} after {args.barrier_timeout_s:.0f}s")
            time.sleep(0.002)
        if stop.requested:
            return 0
        start_at = int(go.read_text().strip())
    delay = (start_at - time.time_ns()) / 1e9
    if start_at and delay < -0.5:
        print(f"kts_worker: tenant {args.tenant} reached the barrier {-delay:.2f}s late", file=sys.stderr)
    stop.sleep(delay)
    return start_at


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
    out = {"gpu_uuid": f"{prefix}{raw}" if raw is not None else None, "cuda_visible_devices": visible,
           "mps_client": bool(os.environ.get("CUDA_MPS_PIPE_DIRECTORY"))}
    bus = [getattr(props, k, None) for k in ("pci_domain_id", "pci_bus_id", "pci_device_id")]
    if all(v is not None for v in bus):
        out["pci"] = "{:04x}:{:02x}:{:02x}.0".format(*bus)
    return out


def main(argv: list[str] | None = None) -> int:
    own_tenant_env()
    args = parse_args(argv)
    stop = StopRequest()
    stop.install()
    import torch

    torch.set_num_threads(args.threads)
    device = resolve_device(torch, args.device)
    torch.manual_seed(args.seed)
    workload = WORKLOADS[args.workload](torch, args.matrix_size, device)
    clock = Clock(torch, device)

    for _ in range(args.warmup):  # cuFFT plans, cuBLAS handles, first-touch allocations
        for _phase, fn in workload.step():
            clock.time(fn)

    meta = {
        "workload": args.workload, "tenant": args.tenant, "iterations": args.iterations,
        "matrix_size": args.matrix_size, "sleep_ms": args.sleep_ms, "warmup": args.warmup,
        "threads": args.threads, "arrival": args.arrival, "rate_hz": args.rate_hz,
        "device": str(device), "device_name": torch.cuda.get_device_name(device) if device.type == "cuda"
        else platform.processor() or platform.machine(), "torch": torch.__version__,
        "cuda": torch.version.cuda, "pid": os.getpid(), "host": platform.node(),
        "flops_per_op": workload.flops_per_op, "bytes_per_op": workload.bytes_per_op,
        "phases_per_iteration": len(workload.step()), "notes": workload.notes,
        "mps_thread_percentage": os.environ.get("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"),
        "lead_in_s": args.lead_in_s, "pad": args.pad, "pad_limit_s": args.pad_limit_s,
        **gpu_identity(torch, device),
    }
    meta["barrier_reached_ns"] = time.time_ns()  # start-up (CUDA init, warm-up) ends, the barrier wait begins
    start_at = wait_for_start(args, stop)
    if stop.requested:  # stopped during set-up: nothing was timed
        return EXIT_STOPPED_EARLY
    meta["start_at_ns"] = start_at
    meta["loop_start_ns"] = time.time_ns()
    print(f"KTS_META,{LINE_VERSION},{json.dumps(meta, separators=(',', ':'))}", flush=True)
    return run_loop(args, workload, clock, stop)


class Arrivals:
    """When the next operation is due: closed loop (after the previous one and its sleep) or open loop."""

    def __init__(self, args: argparse.Namespace, stop: StopRequest) -> None:
        self.args, self.stop = args, stop
        self.rng = random.Random(args.seed)
        self.next_due = time.time_ns()

    def wait(self) -> int | None:
        """Block until the next operation is due; its intended start (None in closed loop)."""
        if self.args.arrival == "closed":
            return None
        now = time.time_ns()
        if self.next_due > now:
            self.stop.sleep((self.next_due - now) / 1e9)
        due = self.next_due
        gap_s = self.rng.expovariate(self.args.rate_hz) if self.args.arrival == "poisson" else 1.0 / self.args.rate_hz
        self.next_due += int(gap_s * 1e9)
        return due

    def after(self) -> None:
        if self.args.arrival == "closed" and self.args.sleep_ms > 0:
            self.stop.sleep(self.args.sleep_ms / 1000.0)


def run_loop(args: argparse.Namespace, workload: Workload, clock: Clock, stop: StopRequest | None = None) -> int:
    """The one timing loop: lead-in padding, the timed iterations, then padding until stopped.

    Every iteration, padded or timed, runs the same operation at the same cadence; only its phase
    (``pad``) and its own counter differ, so a neighbour's load is identical while it pads.
    """
    stop = stop or StopRequest()
    arrivals = Arrivals(args, stop)
    out = sys.stdout
    lead_until = time.time_ns() + int(args.lead_in_s * 1e9)
    timed_from: int | None = None
    timed = pads = tail = 0
    pad_deadline: float | None = None
    while True:
        if stop.requested:
            return 0 if pad_deadline is not None else EXIT_STOPPED_EARLY
        now = time.time_ns()
        if timed_from is None and now >= lead_until:
            timed_from = now
        if timed_from is not None and pad_deadline is None and _timed_done(args, timed, timed_from, arrivals):
            if not args.pad:
                return 0
            pad_deadline = time.monotonic() + args.pad_limit_s
        if pad_deadline is not None and time.monotonic() > pad_deadline:
            print(f"kts_worker: tenant {args.tenant} padded for {args.pad_limit_s:g} s (--pad-limit-s) and was "
                  "never stopped; ending", file=sys.stderr, flush=True)
            return args.pad_limit_exit
        intended = arrivals.wait()
        if stop.requested:
            continue
        padding = timed_from is None or pad_deadline is not None
        index = pads if padding else timed
        for phase, fn in workload.step():
            start_ns, end_ns, device_ms, wall_ms = clock.time(fn)
            due = start_ns if intended is None else intended
            out.write(f"KTS_APP,{LINE_VERSION},{workload.name},{args.tenant},{index},"
                      f"{PAD_PHASE if padding else phase},{due},{start_ns},{end_ns},{device_ms:.6f},{wall_ms:.6f}\n")
            intended = None if args.arrival == "closed" else end_ns  # later phases are due when the last ended
        out.flush()
        if padding:
            pads += 1
            if pad_deadline is not None:
                if tail == args.crash_after_pad:
                    raise RuntimeError(f"injected crash after padding iteration {tail} (KTS_CRASH_AFTER_PAD)")
                tail += 1
        else:
            timed += 1
            if index == args.crash_after:
                raise RuntimeError(f"injected crash after iteration {index} (KTS_CRASH_AFTER)")
        arrivals.after()


def _timed_done(args: argparse.Namespace, timed: int, timed_from: int, arrivals: Arrivals) -> bool:
    """Whether the timed part is over: the iteration count, or (open loop) no arrival left in the duration."""
    if timed >= args.iterations:
        return True
    return (args.arrival != "closed" and args.duration_s > 0
            and arrivals.next_due > timed_from + int(args.duration_s * 1e9))


if __name__ == "__main__":
    sys.exit(main())
