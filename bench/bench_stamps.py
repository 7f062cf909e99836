"""When each tenant's work really runs on a time-sliced GPU, without CUPTI: GPU clock stamps at every block.  (GPU only.)

Why: the planner's time-slicing model misses BERT in the H100's three-tenant runs (issue 52's mix: llama-decode,
BERT, ResNet-50, every tenant back to back): measured, its CUDA events say it waited 0.7 ms before its first kernel
(the model 2.85) and then ran 6.7 ms (the model 4.0). CUPTI (``bench_shared_timeline``) reads every kernel but slows
every launch, so its turns are not a timed run's. This reads a timed run's turns coarsely and cheaply: a one-thread
kernel that writes the GPU's ``%globaltimer`` (loaded from PTX through the driver, no compiler) is launched at each
operation's start and end and before every transformer or bottleneck block (``STAMP_BLOCKS``: 12-16 a model), with
the host's clock at each launch. Per stamp: when the host launched it and when the GPU ran it, on one clock (each
process aligns the GPU's timer to ``time.time_ns`` with stamps on an idle GPU). CUDA events around each operation, as
the kit's worker records them, say whether the events' clock agrees with the stamps'.

    KTS_TENANTS=llama-decode,bert,resnet OUT=/tmp/st python -m bench.bench_stamps
    PHASES='alone:llama-decode:3,alone:bert:3,alone:resnet:3,shared:*:6,shared:bert+resnet:3' ...
    KTS_SLEEP_S='{"bert": 0.010}' ...               # BERT sleeps 10 ms after each op (as bench_shared_timeline)
    python -m bench.bench_stamps --read /tmp/st      # what the stamps say (no GPU needed)

Writes ``$OUT/<tenant>.stamps.csv`` (phase, op, step, k, tag, host_us, gpu_us: one row per stamp),
``$OUT/<tenant>.ops.csv`` (phase, op, step, start_us, end_us, event_ms) and ``$OUT/meta.json`` (GPU, tenants, each process's
clock offset and context time, phases).
"""

from __future__ import annotations

import csv
import ctypes
import json
import multiprocessing as mp
import os
import sys
import time
from pathlib import Path

WORKERS = Path(__file__).resolve().parents[1] / "workers"
if str(WORKERS) not in sys.path:
    sys.path.insert(0, str(WORKERS))

# the repeated blocks of the kit's real models (transformers' classes): a stamp before each
STAMP_BLOCKS = ("BertLayer", "LlamaDecoderLayer", "ResNetBottleNeckLayer", "ViTLayer", "GPT2Block")
DEFAULT_PHASES = "alone:llama-decode:3,alone:bert:3,alone:resnet:3,shared:*:8,shared:bert+resnet:4,alone:bert:2"
SLOTS = 1 << 21  # stamps a process can hold (16 MiB of GPU memory)

PTX = b"""
.version 7.8
.target sm_90
.address_size 64
.visible .entry stamp(.param .u64 buf, .param .u32 idx)
{
  .reg .b64 %rd<6>;
  .reg .b32 %r<2>;
  ld.param.u64 %rd1, [buf];
  ld.param.u32 %r1, [idx];
  cvta.to.global.u64 %rd2, %rd1;
  mov.u64 %rd3, %globaltimer;
  mul.wide.u32 %rd4, %r1, 8;
  add.s64 %rd5, %rd2, %rd4;
  st.global.u64 [%rd5], %rd3;
  ret;
}
"""


class Stamper:
    """Launches the stamp kernel on torch's current stream and keeps (slot, host ns, tag) of each launch."""

    def __init__(self, torch) -> None:
        self.torch = torch
        cu = ctypes.CDLL("libcuda.so.1")
        cu.cuLaunchKernel.argtypes = [ctypes.c_void_p] + [ctypes.c_uint] * 7 + [ctypes.c_void_p,
                                                                                ctypes.POINTER(ctypes.c_void_p),
                                                                                ctypes.c_void_p]
        ctx = ctypes.c_void_p()
        self._check(cu.cuCtxGetCurrent(ctypes.byref(ctx)), "cuCtxGetCurrent")
        if not ctx.value:
            raise RuntimeError("no current CUDA context (make torch's first)")
        self.mod, self.fn = ctypes.c_void_p(), ctypes.c_void_p()
        self._check(cu.cuModuleLoadData(ctypes.byref(self.mod), PTX), "cuModuleLoadData")
        self._check(cu.cuModuleGetFunction(ctypes.byref(self.fn), self.mod, b"stamp"), "cuModuleGetFunction")
        self.cu = cu
        self.buf = torch.zeros(SLOTS, dtype=torch.int64, device="cuda")
        self._ptr = ctypes.c_uint64(self.buf.data_ptr())
        self._idx = ctypes.c_uint32(0)
        self._args = (ctypes.c_void_p * 2)(ctypes.cast(ctypes.byref(self._ptr), ctypes.c_void_p),
                                           ctypes.cast(ctypes.byref(self._idx), ctypes.c_void_p))
        self.rows: list[tuple[int, int, str]] = []

    @staticmethod
    def _check(rc: int, what: str) -> None:
        if rc != 0:
            raise RuntimeError(f"{what} failed: CUresult {rc}")

    def __call__(self, tag: str) -> None:
        n = len(self.rows)
        if n >= SLOTS:
            return
        self._idx.value = n
        stream = self.torch.cuda.current_stream().cuda_stream
        host = time.time_ns()
        rc = self.cu.cuLaunchKernel(self.fn, 1, 1, 1, 1, 1, 1, 0, ctypes.c_void_p(stream), self._args, None)
        if rc != 0:
            raise RuntimeError(f"cuLaunchKernel failed: CUresult {rc}")
        self.rows.append((n, host, tag))

    def offset_ns(self, samples: int = 300) -> float:
        """GPU timer - host clock, from stamps on an idle GPU: the least (gpu - host launch) (a launch's latency is
        never negative, so the least is the offset plus the shortest latency, a few us)."""
        first = len(self.rows)
        for _ in range(samples):
            self("calibrate")
            self.torch.cuda.synchronize()
            time.sleep(0.0005)
        gpu = self.buf[first:len(self.rows)].cpu().tolist()
        return float(min(g - h for g, (_n, h, _t) in zip(gpu, self.rows[first:], strict=True)))


def _phases(spec: str, tenants: list[str]) -> list[tuple[str, list[str], float]]:
    out = []
    for i, part in enumerate(spec.split(",")):
        kind, who, secs = part.split(":")
        names = tenants if who == "*" else who.split("+")
        out.append((f"{i}:{kind}:{'+'.join(names)}", names, float(secs)))
    return out


def tenant(name: str, out: Path, barrier, phases: list, warm_s: float) -> None:
    """One tenant's process: build, stamp hooks, calibrate, then each phase it is in (barrier-released). A failure
    breaks the barrier, so that the other tenants stop too instead of waiting for it."""
    try:
        _tenant(name, out, barrier, phases, warm_s)
    except BaseException:
        barrier.abort()
        raise


def _tenant(name: str, out: Path, barrier, phases: list, warm_s: float) -> None:
    import torch
    from kts_workload import build_workload  # noqa: PLC0415

    torch.zeros(1, device="cuda")
    context_us = time.time_ns() / 1e3
    w = build_workload(name, torch, torch.device("cuda"), {"size": 4096, "seed": 1, "device_type": "cuda"})
    st = Stamper(torch)
    import gc

    blocks = [m for m in gc.get_objects() if isinstance(m, torch.nn.Module) and type(m).__name__ in STAMP_BLOCKS]
    for m in blocks:
        m.register_forward_pre_hook(lambda _m, _a: st("block"))
    offset0 = st.offset_ns()
    ops: list[tuple] = []
    sleep = float(json.loads(os.environ.get("KTS_SLEEP_S") or "{}").get(name, 0.0))
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)

    def one_op(phase: str, k: int) -> None:
        for ph, fn in w.step():  # as the kit's worker: each callable between two events and a synchronize
            t0 = time.time_ns()
            e0.record()
            st("start")
            fn()
            st("end")
            e1.record()
            torch.cuda.synchronize()
            ops.append((phase, k, ph, t0 / 1e3, time.time_ns() / 1e3, e0.elapsed_time(e1), len(st.rows)))
        if sleep:
            time.sleep(sleep)

    t_end = time.monotonic() + warm_s
    while time.monotonic() < t_end:
        one_op("warm", -1)
    for label, names, secs in phases:
        barrier.wait()
        if name not in names:
            continue
        t_end, k = time.monotonic() + secs, 0
        while time.monotonic() < t_end:
            one_op(label, k)
            k += 1
    barrier.wait()
    offset1 = st.offset_ns()
    torch.cuda.synchronize()
    gpu = st.buf[:len(st.rows)].cpu().tolist()
    offset = min(offset0, offset1)
    # which op (and phase) each stamp belongs to: the ops' stamp counts in order
    owner, j = [], 0
    for n, _h, _t in st.rows:
        while j < len(ops) and n >= ops[j][6]:
            j += 1
        owner.append(ops[j][:3] if j < len(ops) else ("calibrate", -1, ""))
    with open(out / f"{name}.stamps.csv", "w", newline="") as f:
        wr = csv.writer(f)
        wr.writerow(["phase", "op", "step", "k", "tag", "host_us", "gpu_us"])
        for (n, h, tag), g, (ph, k, step) in zip(st.rows, gpu, owner, strict=True):
            if ph in ("warm", "calibrate"):
                continue
            wr.writerow([ph, k, step, n, tag, f"{h / 1e3:.3f}", f"{(g - offset) / 1e3:.3f}"])
    with open(out / f"{name}.ops.csv", "w", newline="") as f:
        wr = csv.writer(f)
        wr.writerow(["phase", "op", "step", "start_us", "end_us", "event_ms"])
        wr.writerows([ph, k, s, f"{a:.3f}", f"{b:.3f}", f"{e:.4f}"] for ph, k, s, a, b, e, _n in ops if ph != "warm")
    (out / f"{name}.clock.json").write_text(json.dumps({"context_us": context_us, "offset0_ns": offset0,
                                                        "offset1_ns": offset1, "blocks": len(blocks)}))


def main() -> int:
    if sys.argv[1:2] == ["--read"]:
        from bench.stamps_read import report  # noqa: PLC0415

        print(report(Path(sys.argv[2])))
        return 0
    import torch

    names = os.environ.get("KTS_TENANTS", "llama-decode,bert,resnet").split(",")
    out = Path(os.environ.get("OUT", "/tmp/kts-stamps"))
    out.mkdir(parents=True, exist_ok=True)
    phases = _phases(os.environ.get("PHASES", DEFAULT_PHASES), names)
    warm_s = float(os.environ.get("WARM_S", "2"))
    ctx = mp.get_context("spawn")
    barrier = ctx.Barrier(len(names))
    procs = [ctx.Process(target=tenant, args=(n, out, barrier, phases, warm_s)) for n in names]
    for p in procs:
        p.start()
    limit = time.monotonic() + float(os.environ.get("LIMIT_S", "400"))
    for p, n in zip(procs, names, strict=True):
        while p.is_alive() and not (out / f"{n}.clock.json").exists() and time.monotonic() < limit:
            p.join(1.0)
        p.join(20.0)
        if p.is_alive():
            p.kill()
    (out / "meta.json").write_text(json.dumps({
        "tenants": names, "phases": [[lbl, ns, s] for lbl, ns, s in phases], "warm_s": warm_s,
        "gpu": f"{torch.cuda.get_device_name(0)}", "torch": torch.__version__,
        "clocks": {n: json.loads((out / f"{n}.clock.json").read_text()) for n in names
                   if (out / f"{n}.clock.json").exists()}}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
