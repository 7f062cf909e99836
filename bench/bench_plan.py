"""The planner's speed goal: a capacity question for N <= 8 (time-slicing and MPS) in <= 10 s on 2 cores.

Asks ``kts plan --capacity`` the article's question (FFT + GEMM, the FFT's wall p99 under 1 ms) from the
committed H200 reference and its probe, in this process, and records the wall time and the answer.

    python -m bench.bench_plan --out bench/results/plan.json
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from kts_helpers.plan import capacity as cap
from kts_helpers.plan.engine import gpu_model_for

RUN = Path(__file__).resolve().parent.parent / "data" / "reference" / "h200-2026-11-30-article"
GOAL_S = 10.0


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--out", default="bench/results/plan.json")
    args = p.parse_args()
    t0 = time.perf_counter()
    mix = cap.profiles_of_run(RUN)
    answer = cap.capacity(mix, cap.parse_goals({"fft": 1.0}, None, [m.workload for m in mix]), gpu_model_for(RUN))
    seconds = time.perf_counter() - t0
    result = {"question": "article FFT + GEMM, FFT wall p99 <= 1 ms, N = 1..8, time-slicing and MPS",
              "seconds": seconds, "goal_s": GOAL_S, "met": seconds <= GOAL_S, "largest_n": answer.largest}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=2))
    print(json.dumps(result))


if __name__ == "__main__":
    main()
