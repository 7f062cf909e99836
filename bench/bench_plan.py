"""The planner's speed goal: a capacity question for N <= 8 (time-slicing and MPS) in <= 10 s on 2 cores.

Asks ``kts plan --capacity`` the article's question (FFT + GEMM, the FFT's wall p99 under 1 ms), and the same of
the three-type matrix mix, from the committed H200 references and their probe, in this process, and records the
wall time and the answer of each.

    python -m bench.bench_plan --out bench/results/plan.json
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from kts_helpers.plan import capacity as cap
from kts_helpers.plan.engine import gpu_model_for

REF = Path(__file__).resolve().parent.parent / "data" / "reference"
# the article's pair, and the three-type mix (FFT + GEMM + LLM), the slowest question the references ask
QUESTIONS = {"article FFT + GEMM": REF / "h200-2026-11-30-article",
             "matrix FFT + GEMM + LLM": REF / "h200-2026-11-30-matrix"}
GOAL_S = 10.0


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--out", default="bench/results/plan.json")
    args = p.parse_args()
    results = []
    for name, run in QUESTIONS.items():
        t0 = time.perf_counter()
        mix = cap.profiles_of_run(run)
        answer = cap.capacity(mix, cap.parse_goals({"fft": 1.0}, None, [m.workload for m in mix]), gpu_model_for(run))
        seconds = time.perf_counter() - t0
        results.append({"question": f"{name}, FFT wall p99 <= 1 ms, N = 1..8, time-slicing and MPS",
                        "seconds": seconds, "goal_s": GOAL_S, "met": seconds <= GOAL_S, "largest_n": answer.largest})
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(results, indent=2))
    print(json.dumps(results))


if __name__ == "__main__":
    main()
