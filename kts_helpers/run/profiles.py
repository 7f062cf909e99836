"""The named profiles: each a complete set of run parameters, so that a profile name alone reproduces a run.

Their own module because each entry carries the measurement that chose it; ``run/spec.py`` applies them.
Imports only the standard library: the runner must work on a bare GPU host.
"""

from __future__ import annotations

from typing import Any

# The design (issue 30): each side's iterations in blocks, alone on both sides of every shared block (alone, shared,
# alone, shared, alone), so every run measures how far each tenant's speed moves between moments
# (``analyse.verdict.drift``); tiny and probe keep one block a side.
BLOCKS = 2
# The warm design (issue 43): warm tenants alternate alone and shared blocks without restarting, so a run affords
# many short blocks and the verdict's drift term has degrees of freedom from the block count, each block at least
# WARM_BLOCK_S seconds (and at least its share of the iterations). Since issue 52 the block count is "auto": 8
# shared blocks, then 4 more at a time until every verdict decides, within 24 blocks and 1.5x the first 8's time
# (``run.looks``, ``analyse.blockseq``): a fixed 8 left 34 of 44 real-model verdicts undecided on an H100 where a
# pair of warm blocks costs about 3 s; GPU-bound tenants decide at the first look and cost what 8 blocks did. The
# GPU profiles and cpu-quick take it; blocks=N still fixes the count.
WARM_BLOCKS = "auto"
WARM_BLOCK_S = 1.0

PROFILES: dict[str, dict[str, Any]] = {
    # The article's parameters (Kube-TimeSlice-Profiler): 800 iterations of 4096^2, sleeps 100/150 ms.
    "article": dict(workloads=("fft", "gemm"), iterations=800, fft_size=4096, gemm_size=4096,
                    sleep_ms_fft=100.0, sleep_ms_gemm=150.0, sleep_ms_llm=50.0, warmup=5, threads=1,
                    timeout_s=1800.0, calibrate_iterations=2000, blocks=BLOCKS, design="warm"),
    # A saturating neighbour: the GEMM never sleeps, so the FFT always finds the GPU busy.
    "saturating": dict(workloads=("fft", "gemm"), iterations=800, fft_size=4096, gemm_size=8192,
                       sleep_ms_fft=100.0, sleep_ms_gemm=0.0, sleep_ms_llm=50.0, warmup=5, threads=1,
                       timeout_s=1800.0, calibrate_iterations=2000, blocks=BLOCKS, design="warm"),
    # CPU stand-in: one thread per tenant (more threads than cores measured the OS scheduling a lone FFT's own
    # threads: 13.8 ms instead of 0.33), every tenant pinned to one core, so they time-share it as GPU tenants
    # time-share a GPU. Exponential think times: fixed sleeps lock two loops into a beat whose phase decided
    # the run (34 to 551 collisions of 2000 over six runs); 512^2: at 256^2 a collision cost less than the
    # host's own bursts of slowness (README, Known limits). 2000 iterations, ~15 s a scenario.
    "cpu-quick": dict(workloads=("fft", "gemm"), iterations=2000, fft_size=512, gemm_size=512,
                      sleep_ms_fft=6.0, sleep_ms_gemm=3.0, sleep_ms_llm=6.0, sleep_dist="exp", warmup=5, threads=1,
                      timeout_s=300.0, calibrate_iterations=300, cpu_core=-1, design="warm"),
    # The time-slice probe (run/probe.py): tiny kernels at random times next to tens-of-ms GEMMs, and the
    # reverse; the GEMM size is calibrated on the GPU (this one is the fallback), the hog's 400 timed kernels
    # cover the tick's 20 s window. GPU only.
    "probe": dict(workloads=("noop", "gemm"), iterations=400, fft_size=64, gemm_size=12288, sleep_ms_fft=0.0,
                  sleep_ms_gemm=0.0, sleep_ms_llm=0.0, warmup=3, threads=1, timeout_s=300.0,
                  calibrate_iterations=500),
    # For tests: seconds, not minutes.
    "tiny": dict(workloads=("fft", "gemm"), iterations=40, fft_size=64, gemm_size=64,
                 sleep_ms_fft=1.0, sleep_ms_gemm=1.0, sleep_ms_llm=1.0, warmup=2, threads=1,
                 timeout_s=120.0, calibrate_iterations=50),
}


def default_profile(device_type: str) -> str:
    return "article" if device_type == "cuda" else "cpu-quick"
