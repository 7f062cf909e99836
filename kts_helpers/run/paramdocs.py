"""What each run parameter does, in one line: the one place the docs' parameter reference takes its words from.

Why a dict beside ``run.spec.ExperimentParams`` and not a page: the reference (docs/reference/parameters.md,
``present.docref``) takes each parameter's name, type and default from the dataclass itself and its value in
every profile from ``run.profiles``; only the sentence below is written by hand. A parameter added to
``ExperimentParams`` without a line here fails ``tests/test_docs.py``, so a new parameter needs one line here and
nothing else. Standard library only, like the rest of the run wing.
"""

from __future__ import annotations

# ExperimentParams field -> what it does (one or two sentences; Markdown allowed).
PARAMS: dict[str, str] = {
    "profile": "The named set of defaults the run starts from: `article`, `saturating`, `cpu-quick`, `probe` or "
               "`tiny` (the table below lists each one's values). Default: `article` on a CUDA GPU, `cpu-quick` "
               "without one.",
    "device": "Where the tenants run: `auto` (a CUDA GPU when torch sees one, else the CPU), `cpu`, `cuda` or "
              "`cuda:N`.",
    "backend": "How tenants are started: `local` (processes on this host) or `kubernetes` (one Indexed Job per "
               "scenario on a GPU node; see the Kubernetes guide).",
    "workloads": "The tenants, comma-separated, 1 to 4: `fft`, `gemm`, `llm`, `llama-decode`, `bert`, `vit`, "
                 "`resnet`, `train-step`, a factory `package.module:function`, or a `kts.workloads` entry point. A "
                 "name given twice becomes two tenants (`fft-1`, `fft-2`).",
    "iterations": "Timed iterations per tenant in each scenario, or `auto`: time until the p99's 95 % interval lies "
                  "within ±`auto_rel_width`, or a cap is reached.",
    "matrix_size": "Sets `fft_size` and `gemm_size` at once (an explicit `fft_size` or `gemm_size` still wins).",
    "fft_size": "N of the FFT tenant's N × N complex64 transform (and of the `llm` stand-in).",
    "gemm_size": "N of the GEMM tenant's N × N matrix product.",
    "sleep_ms_fft": "The FFT tenant's sleep between iterations, in ms (the article: 100).",
    "sleep_ms_gemm": "The GEMM tenant's sleep between iterations, in ms (the article: 150; 0 saturates the GPU).",
    "sleep_ms_llm": "The `llm` stand-in's sleep between iterations, in ms.",
    "sleep_dist": "Closed loop: `fixed` sleeps (the article's) or `exp`, exponential think times of that mean. "
                  "Fixed sleeps can lock two tenants into a beat whose phase decides the run.",
    "warmup": "Untimed iterations each tenant runs before the shared start barrier.",
    "threads": "torch threads per tenant process (CPU work; one per tenant keeps a lone tenant from competing with "
               "itself).",
    "timeout_s": "The most seconds one scenario may take before it is stopped and marked timed out.",
    "pad_limit_s": "How long a tenant that has finished its timed iterations keeps padding for slower neighbours, "
                   "in s (default: `timeout_s`).",
    "repeats": "How many times the whole alone-then-shared sequence runs; a tenant's repeats are pooled into one "
               "verdict.",
    "blocks": "The design: shared in this many blocks, with an alone block before, between and after them, so the "
              "run measures its own drift. 0: one alone block, then one shared block. The warm design's default "
              "is 8 per sharing mode, the fresh design's 2.",
    "design": "`warm` (the GPU profiles' default): one worker per tenant and sharing mode starts once, then runs "
              "every block on command and idles between them with its context resident, so a run affords many "
              "short blocks; `fresh`: new worker processes for every block. CPU profiles use `fresh` unless asked.",
    "block_s": "The warm design: each block's timed part lasts at least this many seconds (default 1), and at least "
               "its share of `iterations`; a shared block ends when every tenant has both.",
    "sharing": "Sharing modes, comma-separated: `timeslice` (the device plugin's time-slicing), `mps`, "
               "`mps-limited` (MPS with `mps_thread_percentage`). One shared scenario per mode.",
    "mps_thread_percentage": "`mps-limited`: the share of the GPU's threads each client may use, one number for all "
                             "or per workload (`{\"gemm\": 50}`).",
    "matrix": "The contention matrix: a shared scenario for every pair of tenants (and one with all of them when "
              "there are more than two), instead of one with all.",
    "arrival": "The FFT tenant's arrivals: `closed` (sleep, then the next iteration), `poisson` or `fixed` "
               "(open loop at `rate_hz`: requests queue when the GPU is slow).",
    "rate_hz": "Open-loop arrivals (and the probe's tick): requests per second.",
    "duration_s": "Open-loop arrivals (and the probe): how long the arrivals last, in s.",
    "iterations_fft": "The FFT tenant's own iteration count (or `auto`), instead of `iterations`.",
    "iterations_gemm": "The GEMM tenant's own iteration count (or `auto`), instead of `iterations`.",
    "iterations_llm": "The `llm` stand-in's own iteration count (or `auto`), instead of `iterations`.",
    "auto_rel_width": "`iterations=auto`: stop when the p99's 95 % bounds lie within ± this share of it "
                      "(0.10 = ±10 %).",
    "auto_time_cap_s": "`iterations=auto`: stop after this many seconds of timed iterations (at most half of "
                       "`timeout_s`).",
    "auto_max_iterations": "`iterations=auto`: stop after this many timed iterations.",
    "shared_max_factor": "Interim looks: a shared tenant whose verdict is still open at n keeps timing up to this "
                         "× n iterations (1: the fixed design).",
    "calibrate_iterations": "Iterations of the one-element kernel that measures the tool's own overhead floor "
                            "(the *wait* clock subtracts it).",
    "cpu_core": "CPU only: pin every tenant to this core (-1: the last core this process may use), so CPU tenants "
                "time-share one core as GPU tenants time-share a GPU.",
    "probe_mode": "The time-slice probe: `pair` (the quantum and the switch cost) or `multi` (the tick next to "
                  "k = 1, 2, 3 neighbours).",
    "sleep_ms": "Per workload, any workload (a real model, a factory): its sleep between iterations in ms, e.g. "
                "`{\"bert\": 20}`.",
    "workload_params": "Per workload: the parameters passed to its factory (model sizes, batch, ...), e.g. "
                       "`{\"llama-decode\": {\"layers\": 8}}`.",
    "profile_iterations": "Alone scenarios: iterations profiled before the barrier, for the planner's traits "
                          "(0: none).",
    "label": "A free-text label, shown in the report and part of the run's directory name.",
}

# Analysis options: also given with --set / SET=, they change how a run is read, never the run itself
# (``run.params.split_analysis``).
ANALYSIS: dict[str, str] = {
    "interval": "How intervals are computed: `order` (order statistics at the effective sample size, the default), "
                "`bootstrap`, `stationary`, `circular` or `iid`.",
    "margin": "The verdicts' margin: *no change within ±margin* and the line between *degraded* and *small "
              "slowdown* (default 0.1, ±10 %).",
    "slo_ms": "A latency goal per tenant in ms, e.g. `{\"fft\": 1.0}`: the report counts iterations beyond it.",
}
