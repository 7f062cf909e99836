"""Timing-tool benchmark: the overhead floor and wall - device for a back-to-back FFT alone.

Runs the real worker (the same timing loop as every experiment) in a child process and reads its
KTS_APP lines, so what is measured is exactly what a run records. On a machine without a GPU
device time *is* wall time, and the JSON says so instead of reporting a meaningless zero.

    python -m bench.bench_timing --out bench/results/timing.json [--device auto|cpu|cuda]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

from kts_helpers.analyse.logparse import parse_bytes

WORKER = Path(__file__).resolve().parent.parent / "workers" / "kts_worker.py"


def _measure(workload: str, iterations: int, size: int, device: str) -> dict:
    env = dict(os.environ, WORKLOAD=workload, ITERATIONS=str(iterations), MATRIX_SIZE=str(size), SLEEP_MS="0",
               WARMUP="20", DEVICE=device, PYTHONUNBUFFERED="1")
    out = subprocess.run([sys.executable, str(WORKER)], env=env, capture_output=True, check=True, timeout=600)
    parsed = parse_bytes(out.stdout)
    f = parsed.frame
    gap = (f["wall_ms"] - f["device_ms"]).to_numpy()
    meta = parsed.meta[0] if parsed.meta else {}
    return {"workload": workload, "iterations": int(len(f)), "matrix_size": size, "device": meta.get("device"),
            "device_name": meta.get("device_name"),
            "device_ms": {"p50": float(np.median(f["device_ms"])), "p99": float(np.quantile(f["device_ms"], 0.99))},
            "wall_ms": {"p50": float(np.median(f["wall_ms"])), "p99": float(np.quantile(f["wall_ms"], 0.99))},
            "wall_minus_device_ms": {"p50": float(np.median(gap)), "p99": float(np.quantile(gap, 0.99)),
                                     "iqr": float(np.subtract(*np.quantile(gap, [0.75, 0.25])))}}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="bench/results/timing.json")
    ap.add_argument("--device", default="auto")
    ap.add_argument("--iterations", type=int, default=2000)
    ap.add_argument("--fft-size", type=int, default=0, help="default: 4096 on a GPU (the article's), 256 on a CPU")
    args = ap.parse_args(argv)
    if not args.fft_size:
        from kts_helpers.run.environment import probe_torch, resolve_device

        args.fft_size = 4096 if resolve_device(args.device, probe_torch()) == "cuda" else 256
    floor = _measure("noop", args.iterations, 1, args.device)
    fft = _measure("fft", args.iterations, args.fft_size, args.device)
    on_gpu = (floor["device"] or "").startswith("cuda")
    result = {"overhead_floor": floor, "fft_back_to_back": fft, "gpu": on_gpu,
              "note": ("floor = median wall - device of a 1-element kernel; the FFT's wall - device beyond the floor "
                       "is launch + synchronize cost with no neighbour") if on_gpu else
              "no GPU: device time is wall time here, so the floor and wall - device are 0 by construction"}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
    print(f"overhead floor p50 {floor['wall_minus_device_ms']['p50']:.4f} ms; back-to-back FFT {args.fft_size}^2: "
          f"device p50 {fft['device_ms']['p50']:.4f} ms, wall - device p50 {fft['wall_minus_device_ms']['p50']:.4f} ms"
          f" ({'GPU' if on_gpu else 'CPU: 0 by construction'}) -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
