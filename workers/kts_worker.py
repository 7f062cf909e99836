#!/usr/bin/env python3
"""kts worker: one timing loop for every workload, printing one KTS_APP line per iteration.

Imports only torch and the standard library, so the same file runs in a container,
on a bare GPU host, or under the local backend.

Line format (documented in README.md):

    KTS_APP,v2,<workload>,<tenant>,<iteration>,<phase>,<intended_ns>,<start_ns>,<end_ns>,<device_ms>,<wall_ms>

* ``intended_ns``: when the operation was due (open-loop arrivals); equals ``start_ns`` in closed loop.
* ``start_ns``/``end_ns``: host epoch clock (``time.time_ns``) just before launch and just after completion.
* ``device_ms``: CUDA-event time on the GPU (on CPU: the operation's own time, launch to completion).
* ``wall_ms``: host monotonic clock from launch to completion (``perf_counter_ns``).

On CPU in closed loop, "launch" is when the operation was due (the sleep before it ended): a CPU tenant waits
for its core before it can start, where a GPU tenant waits after launch, so the CPU's wall clock and
``start_ns`` begin at the due time and wall - device is the wait for the core, as it is the wait for the GPU.

One ``KTS_META,v2,<json>`` line precedes the iterations: parameters, device (with the GPU's UUID, so a
shared scenario can prove its tenants shared one physical GPU), work per op.

Co-running by construction: a shared scenario's statistics may only use iterations that ran while every
neighbour was active. So after the start barrier a worker first runs ``--lead-in-s`` of *padding* (the
same operation at the same cadence, printed with phase ``pad``) and, with a barrier directory, goes on
padding until every neighbour has printed its first line (``LeadIn``: however late a neighbour wakes, no
timed iteration falls before the co-running window, so n timed iterations are n co-running samples),
then its timed iterations, then, with
``--pad``, padding again until the orchestrator stops it with SIGTERM once every tenant has finished its
timed iterations. Padding lines are never timed statistics; they prove in the log that the tenant's load
was on the GPU. SIGTERM ends the current iteration cleanly (its line is printed), so no line is lost.
Exit codes: 0 done (or stopped while padding), 3 padding hit ``--pad-limit-s`` (nobody stopped it; set by
``--pad-limit-exit``, 0 on Kubernetes, where the logs then show whether the padding covered the neighbours),
143 stopped by SIGTERM before its timed iterations were complete.

``--iterations auto`` (the stopping rule, nvbench-style): the timed part runs until the p99 of every phase's
wall time has a 95 % interval within ``--auto-rel-width`` (default ±10 %) of the estimate on both sides, or
``--auto-time-cap-s`` or ``--auto-max-iterations`` is reached. The interval is the analysis' own
(``kts_helpers/analyse/orderstat.py``: order statistics at the exceedance indicator's effective sample size),
written again here in pure Python because the worker imports only torch and the standard library; a test
holds the two equal. When the timed part ends the worker prints ``KTS_END,v2,<json>``: n reached and why.

Longer than 500 lines because it is one file on purpose: the container copies just this file.
"""

from __future__ import annotations

import argparse
import importlib
import json
import math
import operator
import os
import platform
import random
import signal
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

LINE_VERSION = "v2"  # the line's layout: a copy of kts_helpers/run/logformat.py (a test round-trips the two)
APP_TAG, META_TAG, END_TAG, LOOK_TAG = "KTS_APP", "KTS_META", "KTS_END", "KTS_LOOK"
PAD_PHASE = "pad"
EXIT_PAD_LIMIT = 3
EXIT_STOPPED_EARLY = 128 + signal.SIGTERM
DEFAULT_SLEEP_MS = {"fft": 100.0, "gemm": 150.0, "noop": 0.0, "llm": 50.0}


# ----------------------------------------------------------------------------- the workload API
# A tenant's workload is built once per worker by a *factory*: ``factory(torch, device, params) -> Workload``.
# This API is stable (documented in README.md, "Bring your own workload"; examples/ holds a factory):
#
# * ``torch``: the imported torch module; ``device``: the ``torch.device`` the worker runs on (cuda or cpu);
# * ``params``: a dict: ``size`` (the run's matrix size), ``seed``, ``device_type`` ("cuda"/"cpu"), and the run's
#   ``workload_params`` for this workload (``KTS_WORKLOAD_PARAMS``, a JSON object) on top;
# * it returns a :class:`Workload` (or any object with its attributes: ``name`` and ``step``, optionally
#   ``flops_per_op``, ``bytes_per_op``, ``notes``). ``step()`` returns one iteration's operations in order, as a
#   list of ``(phase, callable)`` pairs; the kit times each callable (on CUDA between two events and a
#   synchronize) and prints one line per pair. Allocate in the factory, not in the callables.
#
# A workload is named in ``workloads=`` as a built-in name (``fft``, ``gemm``, ``llm``, ``noop``; the real
# architectures ``llama-decode``, ``bert``, ``vit``, ``train-step`` from ``kts_models.py``), as
# ``package.module:factory`` (imported from the worker's ``PYTHONPATH``), or as the name of an entry point in
# the group ``kts.workloads``. The kit keeps the harness: barrier, lead-in, padding, three clocks, looks, GPU
# identity, MPS. ``--check`` builds the workload and checks it without timing anything (the runner's pre-flight).

ENTRY_POINT_GROUP = "kts.workloads"
EXIT_BAD_WORKLOAD = 4


@dataclass
class Workload:
    """What one iteration runs, and how much work it does (for TFLOP/s and GB/s)."""

    name: str
    step: Callable[[], list[tuple[str, Callable[[], object]]]]
    flops_per_op: float = 0.0
    bytes_per_op: float = 0.0
    notes: dict = field(default_factory=dict)


class WorkloadError(Exception):
    """A workload that cannot be built or does not keep the API: one line, naming what went wrong."""


def _single(phase: str, fn: Callable[[], object]) -> Callable[[], list[tuple[str, Callable[[], object]]]]:
    return lambda: [(phase, fn)]


def make_fft(torch, device, params: dict) -> Workload:
    n = int(params.get("size", 4096))
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


def make_gemm(torch, device, params: dict) -> Workload:
    n = int(params.get("size", 4096))
    a = torch.randn(n, n, device=device)
    b = torch.randn(n, n, device=device)
    return Workload(
        "gemm",
        _single("op", lambda: torch.matmul(a, b)),
        flops_per_op=2.0 * n**3,
        bytes_per_op=3.0 * n * n * 4,
        notes={"flops_model": "2 N^3 fp32"},
    )


def make_noop(torch, device, params: dict) -> Workload:
    # A one-element add: the smallest kernel, timed the same way, gives the tool's overhead floor.
    x = torch.zeros(1, device=device)
    return Workload("noop", _single("op", lambda: x.add_(1.0)))


def make_llm(torch, device, params: dict) -> Workload:
    """A small decoder-only transformer with random weights: one prefill, then token-by-token decode (no KV
    cache: each decode step re-runs the prefix; ``llama-decode`` is the serving step with a KV cache)."""
    def knob(key: str, env: str, default: str) -> int:
        return int(params.get(key, os.environ.get(env, default)))

    d_model = knob("d_model", "LLM_D_MODEL", "512")
    n_layers = knob("layers", "LLM_LAYERS", "4")
    n_heads = knob("heads", "LLM_HEADS", "8")
    prompt = knob("prompt_tokens", "LLM_PROMPT_TOKENS", "128")
    decode = knob("decode_tokens", "LLM_DECODE_TOKENS", "16")
    vocab = knob("vocab", "LLM_VOCAB", "4096")
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

    n_params = sum(p.numel() for p in model.parameters())
    return Workload(
        "llm",
        steps,
        flops_per_op=2.0 * n_params * (prompt + decode),
        notes={"d_model": d_model, "layers": n_layers, "heads": n_heads, "prompt_tokens": prompt,
               "decode_tokens": decode, "vocab": vocab, "parameters": n_params,
               "flops_model": "2 x parameters x tokens (no KV cache: each decode step re-runs the prefix)"},
    )


WORKLOADS: dict[str, Callable] = {"fft": make_fft, "gemm": make_gemm, "noop": make_noop, "llm": make_llm}
REAL_MODELS = ("llama-decode", "bert", "vit", "train-step")  # kts_models.py (transformers, imported lazily)


def find_factory(name: str) -> Callable:
    """The factory a workload name stands for: built in, ``module:factory``, or a ``kts.workloads`` entry point."""
    if name in WORKLOADS:
        return WORKLOADS[name]
    if name in REAL_MODELS:
        sys.path.insert(0, str(Path(__file__).resolve().parent))  # kts_models.py sits beside this file
        try:
            import kts_models
        except ImportError as exc:
            raise WorkloadError(f"the real-model workloads need kts_models.py beside the worker ({exc})") from None
        return kts_models.FACTORIES[name]
    if ":" in name:
        module, _, attr = name.partition(":")
        try:
            obj = importlib.import_module(module)
        except Exception as exc:  # noqa: BLE001 - any import failure is the user's, reported in one line
            raise WorkloadError(f"cannot import {module!r} ({type(exc).__name__}: {exc}); is it on PYTHONPATH "
                                "(or in the image)?") from None
        for part in attr.split("."):
            if not hasattr(obj, part):
                raise WorkloadError(f"module {module!r} has no {attr!r}")
            obj = getattr(obj, part)
        if not callable(obj):
            raise WorkloadError(f"{name} is not callable (a factory takes torch, device, params)")
        return obj
    from importlib.metadata import entry_points

    found = [ep for ep in entry_points(group=ENTRY_POINT_GROUP) if ep.name == name]
    if found:
        try:
            return found[0].load()
        except Exception as exc:  # noqa: BLE001
            raise WorkloadError(f"entry point {name!r} ({found[0].value}) fails to load ({type(exc).__name__}: "
                                f"{exc})") from None
    raise WorkloadError(f"unknown workload {name!r}: not built in ({', '.join([*WORKLOADS, *REAL_MODELS])}), not "
                        f"module:factory, and no entry point of that name in the group {ENTRY_POINT_GROUP!r}")


def checked_workload(obj: object) -> Workload:
    """The factory's result as a :class:`Workload`, once its ``step()`` is seen to give (phase, callable) pairs."""
    name, step = getattr(obj, "name", None), getattr(obj, "step", None)
    if not isinstance(name, str) or not callable(step):
        raise WorkloadError(f"the factory returned {type(obj).__name__}, not a Workload (name: str, step: callable)")
    w = obj if isinstance(obj, Workload) else Workload(
        name, step, float(getattr(obj, "flops_per_op", 0.0) or 0.0), float(getattr(obj, "bytes_per_op", 0.0) or 0.0),
        dict(getattr(obj, "notes", None) or {}))
    try:
        ops = list(w.step())
    except Exception as exc:  # noqa: BLE001
        raise WorkloadError(f"its step() raised {type(exc).__name__}: {exc}") from None
    bad = [op for op in ops if not (isinstance(op, tuple) and len(op) == 2 and isinstance(op[0], str) and op[0]
                                    and op[0] != PAD_PHASE and "," not in op[0] and callable(op[1]))]
    if not ops or bad:
        what = "nothing" if not ops else repr(bad[0])[:80]
        raise WorkloadError(f"its step() must return (phase, callable) pairs (phase: a name without commas, not "
                            f"{PAD_PHASE!r}); it gave {what}")
    return w


def build_workload(name: str, torch, device, params: dict) -> Workload:
    """Find the factory, call it, check what it returns (each failure a :class:`WorkloadError`, one line)."""
    factory = find_factory(name)
    try:
        made = factory(torch, device, dict(params))
    except WorkloadError:
        raise
    except Exception as exc:  # noqa: BLE001
        raise WorkloadError(f"its factory raised {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
                            ) from None
    return checked_workload(made)


def workload_params(args: argparse.Namespace, device) -> dict:
    """What a factory gets: the run's size and seed, the device type, and ``KTS_WORKLOAD_PARAMS`` on top."""
    raw = os.environ.get("KTS_WORKLOAD_PARAMS") or "{}"
    try:
        extra = json.loads(raw)
    except ValueError:
        extra = None
    if not isinstance(extra, dict):
        raise WorkloadError(f"KTS_WORKLOAD_PARAMS must be a JSON object, got {raw[:60]!r}")
    return {"size": args.matrix_size, "seed": args.seed, "device_type": device.type, **extra}


class Clock:
    """Times one operation: device time (CUDA events) and host wall time (launch -> completion)."""

    def __init__(self, torch, device) -> None:
        self.torch = torch
        self.cuda = device.type == "cuda"
        if self.cuda:
            self.ev_start = torch.cuda.Event(enable_timing=True)
            self.ev_end = torch.cuda.Event(enable_timing=True)

    def time(self, fn: Callable[[], object], due: tuple[int, int] | None = None) -> tuple[int, int, float, float]:
        """``due`` (CPU, closed loop): when the sleep before this operation ended, as (epoch ns, perf ns). A CPU
        tenant waits for its core *before* it can launch (the OS runs it when the core is free), a GPU tenant
        after (its kernels queue on the GPU): on CPU the wall clock starts when the operation was due, so that
        wait is inside it as it is on a GPU, and device time is the operation alone."""
        start_ns = time.time_ns()
        t0 = time.perf_counter_ns()
        t_op = t0
        if due is not None and not self.cuda and due[1] <= t0:
            start_ns, t0 = due
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
        device_ms = float(self.ev_start.elapsed_time(self.ev_end)) if self.cuda else (t1 - t_op) / 1e6
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
    p.add_argument("--check", action="store_true",
                   help="build the workload, check its API and run one iteration; time nothing (pre-flight)")
    p.add_argument("--profile-iterations", type=int, default=int(_env("KTS_PROFILE_ITERATIONS", 0)),
                   help="profile this many iterations (torch.profiler) after the warm-up, before the barrier, "
                        "and store the summary in KTS_META (kts_profile.py); 0: no profile")
    p.add_argument("--host-probe", action=argparse.BooleanOptionalAction,
                   default=_env("KTS_HOST_PROBE", "1") not in ("0", "false", "no"),
                   help="after each iteration, time a fixed piece of interpreter work (host_probe) out of the sleep "
                        "and list it in KTS_END (host_probe_ms); closed loop with a fixed sleep of at least 2 ms only")
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
    elif args.go_file:
        start_at = wait_for_go_file(args, stop)
        if stop.requested:
            return 0
    delay = (start_at - time.time_ns()) / 1e9
    if start_at and delay < -0.5:
        print(f"kts_worker: tenant {args.tenant} reached the barrier {-delay:.2f}s late", file=sys.stderr)
    stop.sleep(delay)
    return start_at


READY_PREFIX = "kts_worker: ready"  # the line the Kubernetes backend waits for (tests/test_worker.py checks it)


def wait_for_go_file(args: argparse.Namespace, stop: StopRequest) -> int:
    """The cluster barrier: say "ready" with this host's clock (again every second, so the backend reads the
    clock from a line that reached it live), then read this tenant's start instant (already on this host's
    clock) from the go file the backend publishes once every tenant is ready."""
    path = Path(args.go_file)
    deadline = time.monotonic() + args.barrier_timeout_s
    said = 0.0
    while not stop.requested:
        if time.monotonic() - said >= 1.0:
            print(f"{READY_PREFIX} tenant={args.tenant} clock_ns={time.time_ns()}", file=sys.stderr, flush=True)
            said = time.monotonic()
        try:
            go = json.loads(path.read_text() or "{}")
        except (OSError, ValueError):
            go = {}
        if isinstance(go, dict) and str(go.get(args.tenant, "")).isdigit():
            return int(go[args.tenant])
        if time.monotonic() > deadline:
            raise SystemExit(f"kts_worker: no start time for tenant {args.tenant} in {path} after "
                             f"{args.barrier_timeout_s:.0f}s")
        stop.sleep(0.05)
    return 0


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
    own_tenant_env()
    pin_to_core()
    args = parse_args(argv)
    stop = StopRequest()
    stop.install()
    import torch

    torch.set_num_threads(args.threads)
    device = resolve_device(torch, args.device)
    torch.manual_seed(args.seed)
    try:
        workload = build_workload(args.workload, torch, device, workload_params(args, device))
        clock = Clock(torch, device)
        for _ in range(max(args.warmup, 1 if args.check else 0)):  # cuFFT plans, cuBLAS handles, first touches
            for _phase, fn in workload.step():
                clock.time(fn)
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
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        try:
            import kts_profile
        except ImportError:  # an image built before the profile existed: the run goes on, the planner falls back
            print("kts_worker: kts_profile.py is not beside the worker; no profile recorded", file=sys.stderr)
        else:
            profile = kts_profile.profile_workload(torch, device, workload.step, args.profile_iterations)

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
        "host_probe": {"on": host_probe_on(args), "loop": args.host_probe_loop, "min_sleep_ms": HOST_PROBE_MIN_SLEEP_MS},
        **gpu_identity(torch, device),
    }
    if profile is not None:
        meta["profile"] = profile
    meta["barrier_reached_ns"] = time.time_ns()  # start-up (CUDA init, warm-up) ends, the barrier wait begins
    start_at = wait_for_start(args, stop)
    stop.sleep(args.start_delay_s)
    if stop.requested:  # stopped during set-up: nothing was timed
        return EXIT_STOPPED_EARLY
    meta["start_at_ns"] = start_at
    meta["loop_start_ns"] = time.time_ns()
    print(record_line(META_TAG, meta), flush=True)
    return run_loop(args, workload, clock, stop)


def app_line(workload: str, tenant: str, iteration: int, phase: str, intended_ns: int, start_ns: int, end_ns: int,
             device_ms: float, wall_ms: float) -> str:
    """One ``KTS_APP`` line (no newline): the fields in the contract's order, times to the nanosecond."""
    return (f"{APP_TAG},{LINE_VERSION},{workload},{tenant},{iteration},{phase},{intended_ns},{start_ns},{end_ns},"
            f"{device_ms:.6f},{wall_ms:.6f}")


def record_line(tag: str, record: dict) -> str:
    """A ``KTS_META``/``KTS_END`` line (no newline): compact JSON."""
    return f"{tag},{LINE_VERSION},{json.dumps(record, separators=(',', ':'))}"


class Arrivals:
    """When the next operation is due: closed loop (after the previous one and its sleep) or open loop."""

    def __init__(self, args: argparse.Namespace, stop: StopRequest) -> None:
        self.args, self.stop = args, stop
        self.rng = random.Random(args.seed)
        self.next_due = time.time_ns()
        self.closed_due: tuple[int, int] | None = None  # when the closed loop's last sleep ended (epoch, perf ns)

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

    def after(self, spent_s: float = 0.0) -> None:
        """The closed loop's sleep, less ``spent_s`` already spent since the operation (the stopping check)."""
        if self.args.arrival == "closed" and self.args.sleep_ms > 0:
            mean_s = self.args.sleep_ms / 1000.0
            left_s = max(0.0, (self.rng.expovariate(1 / mean_s) if self.args.sleep_dist == "exp" else mean_s) - spent_s)
            self.closed_due = (time.time_ns() + int(left_s * 1e9), time.perf_counter_ns() + int(left_s * 1e9))
            self.stop.sleep(left_s)


class LeadIn:
    """When the lead-in padding ends: after ``--lead-in-s`` and, with a barrier directory, once every tenant
    that reached the barrier has printed its first line.

    Each tenant marks its first printed line with ``started-<tenant>`` in the barrier directory (the
    ``ready-*`` files name every tenant: the orchestrator wrote ``go`` only when all were there). A tenant
    starts timing only when all are marked, so its first timed iteration starts after every neighbour's first
    line: the co-running window's lower edge (the latest first start) never cuts a timed iteration, however
    late a neighbour woke, and a design of n iterations yields n co-running samples. Without a barrier
    directory (Kubernetes: pods share no files) the lead-in is the time alone.
    """

    def __init__(self, args: argparse.Namespace) -> None:
        self.until = time.time_ns() + int(args.lead_in_s * 1e9)
        self.dir = Path(args.barrier_dir) if args.barrier_dir else None
        self.tenant = args.tenant
        self.limit_s = args.barrier_timeout_s
        self.deadline = time.monotonic() + args.barrier_timeout_s
        self.marked = False

    def mark_started(self) -> None:
        """Say this tenant's first line is out (call after flushing it)."""
        if self.dir is None or self.marked:
            return
        tmp = self.dir / f".started-{self.tenant}.tmp"
        tmp.write_text(str(os.getpid()))
        tmp.rename(self.dir / f"started-{self.tenant}")
        self.marked = True

    def over(self, now_ns: int) -> bool:
        if now_ns < self.until:
            return False
        if self.dir is None:
            return True
        neighbours = [p.name.removeprefix("ready-") for p in self.dir.glob("ready-*")]
        waiting = [t for t in neighbours if t != self.tenant and not (self.dir / f"started-{t}").exists()]
        if not waiting:
            return True
        if time.monotonic() > self.deadline:
            raise SystemExit(f"kts_worker: tenant(s) {', '.join(sorted(waiting))} printed no line within "
                             f"{self.limit_s:.0f}s of the barrier; no timed iteration was run")
        return False


class Looks:
    """Interim looks: at each look count the tenant pads (its load stays on) until the orchestrator answers.

    The orchestrator reads the ``KTS_LOOK`` line, reads the verdict from the first n timed iterations and writes
    ``answer-<tenant>-<n>`` in the barrier directory: ``stop`` (the verdict decided: the timed part ends at n)
    or ``go`` (time on, to the next look or ``--iterations``). No answer within ``--barrier-timeout-s`` is a go,
    and without a barrier directory (Kubernetes) there are no looks: the design then runs to ``--iterations``,
    which is the fixed design the final reading's level is set for.
    """

    def __init__(self, args: argparse.Namespace) -> None:
        self.dir = Path(args.barrier_dir) if args.barrier_dir else None
        self.counts = [n for n in args.looks if n < args.iterations] if self.dir is not None else []
        self.tenant, self.limit_s = args.tenant, args.barrier_timeout_s
        self.waiting: int | None = None  # the look n the tenant pads at
        self.deadline = 0.0
        self.stopped_at: int | None = None

    def reached(self, timed: int) -> str | None:
        """The KTS_LOOK line to print when ``timed`` is a look count (the tenant then pads until answered)."""
        if timed not in self.counts:
            return None
        self.waiting, self.deadline = timed, time.monotonic() + self.limit_s
        return record_line(LOOK_TAG, {"tenant": self.tenant, "n": timed})

    def answer(self) -> str | None:
        """``stop``, ``go`` or None (not yet); a look unanswered past the time limit goes on."""
        assert self.dir is not None and self.waiting is not None
        path = self.dir / f"answer-{self.tenant}-{self.waiting}"
        word = path.read_text().strip() if path.exists() else None
        if word is None and time.monotonic() > self.deadline:
            print(f"kts_worker: no answer at look {self.waiting} within {self.limit_s:.0f}s; timing on",
                  file=sys.stderr, flush=True)
            word = "go"
        if word == "stop":
            self.stopped_at = self.waiting
        if word is not None:
            self.waiting = None
        return word


def run_loop(args: argparse.Namespace, workload: Workload, clock: Clock, stop: StopRequest | None = None) -> int:
    """The one timing loop: lead-in padding, the timed iterations, then padding until stopped.

    Every iteration, padded or timed, runs the same operation at the same cadence; only its phase
    (``pad``) and its own counter differ, so a neighbour's load is identical while it pads.
    """
    stop = stop or StopRequest()
    arrivals = Arrivals(args, stop)
    rule = StopRule.from_args(args)
    out = sys.stdout
    lead_in = LeadIn(args)
    looks = Looks(args)
    timed_from: int | None = None
    timed_since: tuple[int, int] | None = None  # when the lead-in ended (epoch, perf ns): no timed op is due sooner
    timed = pads = tail = 0
    pad_deadline: float | None = None
    probing, probes = host_probe_on(args), []
    while True:
        if stop.requested:
            return 0 if pad_deadline is not None else EXIT_STOPPED_EARLY
        now = time.time_ns()
        if timed_from is None and lead_in.over(now):
            timed_from = now
            timed_since = (now, time.perf_counter_ns())
        if looks.waiting is not None and looks.answer() == "go":
            timed_since = (now, time.perf_counter_ns())  # timed again from here: no operation is due sooner
        if timed_from is not None and pad_deadline is None and looks.waiting is None and (
                looks.stopped_at is not None or rule.done(timed, timed_from, now)
                or _timed_done(args, timed, timed_from, arrivals)):
            reason = f"verdict decided at look {looks.stopped_at}" if looks.stopped_at is not None else None
            end = rule.end_record(args, timed, timed_from, now, reason)
            if probing:  # one value per timed iteration, in order: the host's speed right after it
                end["host_probe_ms"] = [round(ms, 4) for ms in probes]
            out.write(record_line(END_TAG, end) + "\n")
            out.flush()
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
        padding = timed_from is None or pad_deadline is not None or looks.waiting is not None
        index = pads if padding else timed
        sleep_end = arrivals.closed_due
        if not padding and sleep_end is not None and timed_since is not None and sleep_end[0] < timed_since[0]:
            # the sleep ended while the lead-in still waited for a neighbour: the operation became due as a
            # timed one only when the lead-in ended, so its clock (and the co-running window) starts there
            sleep_end = timed_since
        for phase, fn in workload.step():
            start_ns, end_ns, device_ms, wall_ms = clock.time(fn, sleep_end)
            sleep_end = None  # a later phase (an llm's decode step) follows the last one at once
            due = start_ns if intended is None else intended
            out.write(app_line(workload.name, args.tenant, index, PAD_PHASE if padding else phase, due, start_ns,
                               end_ns, device_ms, wall_ms) + "\n")
            if not padding:
                rule.record(phase, wall_ms)
            intended = None if args.arrival == "closed" else end_ns  # later phases are due when the last ended
        out.flush()
        lead_in.mark_started()
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
            look = looks.reached(timed)
            if look is not None:
                out.write(look + "\n")
                out.flush()
        # the probe and the stopping check take their time out of the sleep, not the GPU's work; padded
        # iterations probe too, so a neighbour's load is the same while this tenant pads
        t0 = time.monotonic()
        if probing:
            ms = host_probe(args.host_probe_loop)
            if not padding:
                probes.append(ms)
        if not padding and rule.due(timed):
            rule.check(timed)
        arrivals.after(time.monotonic() - t0)


HOST_PROBE_LOOP = 10_000  # interpreter additions: about 0.3-0.8 ms on the H200 host, 1-2 ms on a CI core
HOST_PROBE_MIN_SLEEP_MS = 2.0  # probe only where the closed loop's sleep can hold it (it comes out of the sleep)


def host_probe(loop: int = HOST_PROBE_LOOP) -> float:
    """Milliseconds for a fixed piece of interpreter work: the host's speed at this moment, on this thread.

    Why: a launch-bound step (an LLM decode, BERT or ViT at serving sizes) is as fast as the host that launches
    its hundreds of kernels, and on the H200 machine the same loop took 6 to 15 ms from one second to the next
    (a device-side chain of kernels stayed at 0.80 ms), so a step's time moved about 2x with the host alone.
    Alone and shared blocks are different moments; this series says how fast the host was in each, per
    iteration, on the tenant's own thread, so a verdict can tell what the host changed from what sharing did.
    """
    t0 = time.perf_counter_ns()
    s = 0
    for i in range(loop):
        s += i
    return (time.perf_counter_ns() - t0) / 1e6


def host_probe_on(args: argparse.Namespace) -> bool:
    """Whether this tenant probes: a closed loop whose every sleep can absorb the probe, so the cadence is the
    one asked for (a fixed sleep of at least 2 ms; never back to back, never an exponential think time, whose
    short draws the probe would lengthen)."""
    return (args.host_probe and args.arrival == "closed" and args.sleep_dist == "fixed"
            and args.sleep_ms >= HOST_PROBE_MIN_SLEEP_MS)


def _timed_done(args: argparse.Namespace, timed: int, timed_from: int, arrivals: Arrivals) -> bool:
    """Whether the timed part is over: the iteration count, or (open loop) no arrival left in the duration."""
    if timed >= args.iterations:
        return True
    return (args.arrival != "closed" and args.duration_s > 0
            and arrivals.next_due > timed_from + int(args.duration_s * 1e9))


# ----------------------------------------------------------------------------- iterations=auto

K_BEYOND = 40  # as analyse/orderstat.K_BEYOND: tau is also estimated where >= 40 samples lie beyond
CLUSTER_GAP = 2  # as analyse/orderstat.CLUSTER_GAP
RARE = 0.05  # as analyse/orderstat.RARE
MIN_NU = 2.0  # as analyse/orderstat.MIN_NU
AUTO_MIN_N = 300  # no check before: a p99 has no 95 % upper bound below ~370 samples anyway
AUTO_GROWTH = 1.05  # check again when n has grown by 5 % (the check costs O(n log n), spent in the sleep)
_NORMAL = statistics.NormalDist()


def _betainc(a: float, b: float, x: float) -> float:
    """Regularized incomplete beta I_x(a, b) (continued fraction, Numerical Recipes 6.4)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    if x > (a + 1.0) / (a + b + 2.0):
        return 1.0 - _betainc(b, a, 1.0 - x)
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)) / a
    tiny = 1e-300
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1.0)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    f = d
    for m in range(1, 100_000):
        for num in (m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
                    -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1))):
            d = 1.0 + num * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + num / c
            c = c if abs(c) > tiny else tiny
            f *= c * d
        if abs(c * d - 1.0) < 1e-15:
            break
    return front * f


def _bisect(fn: Callable[[float], float], target: float, lo: float, hi: float) -> float:
    """x in [lo, hi] with fn(x) = target, fn increasing."""
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if fn(mid) < target:
            lo = mid
        else:
            hi = mid
        if hi - lo <= 1e-12 * max(1.0, abs(hi)):
            break
    return 0.5 * (lo + hi)


def bdtrik(y: float, n: float, p: float) -> float:
    """scipy.special.bdtrik: the k (continuous) with binomial CDF I_{1-p}(n - k, k + 1) = y; nan if none."""
    if y <= (1.0 - p) ** n:
        return math.nan
    return _bisect(lambda k: _betainc(n - k, k + 1.0, 1.0 - p) if k < n else 1.0, y, 0.0, n)


def t_widened(confidence: float, nu: float) -> float:
    """As orderstat.t_widened: the confidence a z-based rule needs to act like a Student t with nu d.o.f."""
    if not math.isfinite(nu) or nu > 1e6:
        return confidence
    nu = max(nu, 1.0)
    tq = _bisect(lambda t: 1.0 - 0.5 * _betainc(nu / 2.0, 0.5, nu / (nu + t * t)), 0.5 + confidence / 2, 0.0, 1e4)
    return 1.0 - 2.0 * (1.0 - _NORMAL.cdf(tq))


def geyer(y: list[float]) -> tuple[float, int]:
    """As orderstat.geyer(acf(y)): (tau, lags) over Geyer's initial positive sequence, autocorrelations on demand."""
    n = len(y)
    if n < 2:
        return 1.0, 0
    mean = math.fsum(y) / n
    c = [v - mean for v in y]
    c0 = math.fsum(v * v for v in c)
    if c0 <= 0:
        return 1.0, 0
    total, k = 0.0, 0
    for j in range(n // 2):
        pair = (math.fsum(map(operator.mul, c[: n - 2 * j], c[2 * j:]))
                + math.fsum(map(operator.mul, c[: n - 2 * j - 1], c[2 * j + 1:]))) / c0
        if pair <= 0:
            break
        total += pair
        k += 1
    return max(1.0, -1.0 + 2.0 * total), max(0, 2 * k - 1)


def _quantile(s: list[float], q: float) -> float:
    """numpy's default (linear) quantile of a sorted list."""
    h = (len(s) - 1) * q
    i = int(h)
    return s[i] if i + 1 >= len(s) else s[i] + (h - i) * (s[i + 1] - s[i])


def _cluster_sizes(y: list[float]) -> list[int]:
    """As orderstat.cluster_sizes: runs of exceedances at most CLUSTER_GAP iterations apart."""
    idx = [j for j, v in enumerate(y) if v]
    sizes: list[int] = []
    for j, i in enumerate(idx):
        if j and i - idx[j - 1] <= CLUSTER_GAP + 1:
            sizes[-1] += 1
        else:
            sizes.append(1)
    return sizes


def p99_bounds(x: list[float], q: float = 0.99, confidence: float = 0.95) -> tuple[float, float, float, float]:
    """(estimate, lo, hi, tau) as analyse/orderstat.quantile_bounds for one series; lo/hi +-inf: no bound."""
    n = len(x)
    s = sorted(x)
    est = _quantile(s, q)
    beyond = n * (1 - q)
    top = max(0.5, 1 - max(2.0, beyond / 2) / n)
    levels = (q, min(q, max(0.5, 1 - 2 * beyond / n)), min(q, max(0.5, 1 - K_BEYOND / n)), top)
    tau, nu = 1.0, math.inf  # as orderstat.indicator_tau
    for level in dict.fromkeys(levels):
        thr = _quantile(s, level)
        y = [1.0 if v > thr else 0.0 for v in x]
        k = sum(y)
        if 0 < k < n:
            g_tau, lags = geyer(y)
            tau = max(tau, g_tau)
            if k <= RARE * n:
                sizes = _cluster_sizes(y)
                tau = max(tau, sum(z * z for z in sizes) / k - 2 * (CLUSTER_GAP + 1) * k / n)
                if math.isinf(nu):
                    nu = max(MIN_NU, n * (1 - level) * len(sizes) / k - 1.0)
            elif math.isinf(nu):
                nu = n / (2 * lags + 1)
    conf = t_widened(confidence, nu)
    a2 = (1 - conf) / 2
    m = n / tau

    def at_rank(r: float) -> float:
        pos = min(max(r - 1.0, 0.0), n - 1.0)
        i = int(pos)
        return s[i] if i + 1 >= n else s[i] + (pos - i) * (s[i + 1] - s[i])

    lo, hi = -math.inf, math.inf
    if (1 - q) ** m < a2:
        j = bdtrik(a2, m, q)
        if math.isfinite(j):
            lo = at_rank(tau * j + 1)
    j = bdtrik(1 - a2, m, q)
    if math.isfinite(j) and j + 1 <= m:  # a whole count of effective samples, then a whole sample (orderstat)
        hi = at_rank(min(n, math.ceil(tau * math.ceil(j - 1e-9) + 1 - 1e-9)))
    return est, min(lo, est), max(hi, est), tau


class StopRule:
    """When the timed part ends: a fixed count, or (``auto``) when every phase's p99 is known to ±width."""

    def __init__(self, auto: bool, rel_width: float, time_cap_s: float, max_iterations: int) -> None:
        self.auto, self.rel_width, self.time_cap_s, self.max_iterations = auto, rel_width, time_cap_s, max_iterations
        self.series: dict[str, list[float]] = {}
        self.next_check = AUTO_MIN_N
        self.last: dict[str, dict] = {}
        self.reached = False

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> StopRule:
        return cls(args.auto, args.auto_rel_width, args.auto_time_cap_s, args.iterations)

    def describe(self) -> dict:
        if not self.auto:
            return {"rule": "fixed"}
        return {"rule": "auto", "statistic": "p99 of wall_ms, every phase", "confidence": 0.95,
                "method": "order statistics at the exceedance indicator's effective sample size",
                "rel_width": self.rel_width, "time_cap_s": self.time_cap_s, "max_iterations": self.max_iterations,
                "min_n": AUTO_MIN_N, "check_every": f"{AUTO_GROWTH - 1:.0%} growth"}

    def record(self, phase: str, wall_ms: float) -> None:
        if self.auto:
            self.series.setdefault(phase, []).append(wall_ms)

    def due(self, timed: int) -> bool:
        return self.auto and not self.reached and timed >= self.next_check

    def check(self, timed: int) -> bool:
        """Compute every phase's p99 interval; the target is reached when all lie within ±rel_width."""
        self.next_check = max(timed + 1, math.ceil(timed * AUTO_GROWTH))
        ok = True
        for phase, x in self.series.items():
            est, lo, hi, tau = p99_bounds(x)
            rel = max(hi - est, est - lo) / est if est > 0 else math.inf
            self.last[phase] = {"n": len(x), "estimate": est, "lo": lo if math.isfinite(lo) else None,
                                "hi": hi if math.isfinite(hi) else None, "ess": len(x) / tau,
                                "rel_half_width": rel if math.isfinite(rel) else None}
            ok &= rel <= self.rel_width
        self.reached = ok and bool(self.series)
        return self.reached

    def done(self, timed: int, timed_from: int, now_ns: int) -> bool:
        if not self.auto:
            return False
        return self.reached or timed >= self.max_iterations or (now_ns - timed_from) / 1e9 >= self.time_cap_s

    def end_record(self, args: argparse.Namespace, timed: int, timed_from: int, now_ns: int,
                   reason: str | None = None) -> dict:
        """The KTS_END record: n reached, why the timed part stopped (``reason``: an interim look's verdict),
        the last p99 intervals."""
        if reason is None and not self.auto:
            reason = "fixed count" if timed >= args.iterations else "duration"
        elif reason is None:
            reason = ("target reached" if self.reached else "iteration cap" if timed >= self.max_iterations
                      else "time cap")
        if self.auto and not self.reached and self.series:
            self.check(timed)  # the interval at the n actually reached
            reason += " (target reached at the last check)" if self.reached else ""
        out = {"tenant": args.tenant, "n": timed, "reason": reason, "elapsed_s": round((now_ns - timed_from) / 1e9, 3),
               "rule": self.describe(), "p99": self.last}
        widths = [v["rel_half_width"] for v in self.last.values()]
        if self.auto and not self.reached and widths and None not in widths:
            # a width shrinks about as 1 / sqrt(n): a rough n for the target, to plan the next run (not a promise)
            out["projected_n"] = math.ceil(timed * (max(widths) / self.rel_width) ** 2)
        return out


if __name__ == "__main__":
    sys.exit(main())
