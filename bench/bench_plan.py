"""The planner's speed goal: a capacity question for N <= 8 (time-slicing and MPS) in <= 10 s on 2 cores.

Asks ``kts plan --capacity`` the article's question (FFT + GEMM, the FFT's wall p99 under 1 ms), the same of the
three-type matrix mix, of the three real models (BERT + ViT + the Llama serving step, each at most 5 % of its
iterations above its alone p99; issue 31), from the committed H200 references and their probe, and of a serving
decode next to a training step whose profiles hold the kernel record (GPT-2 medium + ViT-B/16 training on the H100,
issue 51: MPS only, no probe of that GPU is committed; each at most 5 % above its alone p99), in this process
(the run loaded once, ``plan.inputs``), and records the wall time, the CPU time (this process and its forked
workers: on a shared machine the wall time also holds the neighbours' load) and the answer of each.

    python -m bench.bench_plan --out bench/results/plan.json
"""

from __future__ import annotations

import argparse
import json
import resource
import time
from pathlib import Path

from kts_helpers.plan import capacity as cap
from kts_helpers.plan.inputs import load_plan_input, mix_of

REF = Path(__file__).resolve().parent.parent / "data" / "reference"
# the article's pair, and the three-type mix (FFT + GEMM + LLM), the slowest question the references ask
QUESTIONS = {"article FFT + GEMM": (REF / "h200-2026-11-30-article", {"fft": 1.0}, None),
             "matrix FFT + GEMM + LLM": (REF / "h200-2026-11-30-matrix", {"fft": 1.0}, None),
             "real models BERT + ViT + llama-decode": (REF / "h200-2026-12-02-rm-bert-vit-llama", None, 0.05),
             "kernel record GPT-2 decode + ViT training": (REF.parent / "validation" / "h100-2026-12-06-sealed-mps-gpt2-vit",
                                                           None, 0.05)}
GOAL_S = 10.0


def _cpu_seconds() -> float:
    """User and system CPU time of this process and of its workers that have ended."""
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--out", default="bench/results/plan.json")
    args = p.parse_args()
    results = []
    for name, (run, slo, share) in QUESTIONS.items():
        t0, c0 = time.perf_counter(), _cpu_seconds()
        inp = load_plan_input(run)
        mix = mix_of(inp)
        answer = cap.capacity(mix, cap.parse_goals(slo, share, [m.workload for m in mix]), inp.gpu)
        seconds, cpu = time.perf_counter() - t0, _cpu_seconds() - c0
        goal = "FFT wall p99 <= 1 ms" if slo else f"<= {share:.0%} of iterations above the alone p99"
        modes = " and ".join({"timeslice": "time-slicing", "mps": "MPS"}[m] for m in answer.modes)
        results.append({"question": f"{name}, {goal}, N = 1..8, {modes}",
                        "seconds": seconds, "cpu_seconds": cpu, "goal_s": GOAL_S, "met": seconds <= GOAL_S,
                        "largest_n": answer.largest, "breaks_first": answer.breaks_first})
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(results, indent=2))
    print(json.dumps(results))


if __name__ == "__main__":
    main()
