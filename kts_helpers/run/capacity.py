"""Will the tenants of each scenario fit in GPU memory? A rough model, checked before any work starts.

Time-slicing shares compute, not memory: every tenant keeps its whole allocation for the whole
run, and a scenario whose tenants together want more than the GPU holds fails with an
out-of-memory error minutes into the run (or, with unified memory, silently pages). This
module estimates each tenant's footprint from its spec and refuses such a scenario up front.

Memory model (MiB = 2**20 bytes), deliberately on the generous side:

* every process: a CUDA context of ~``CONTEXT_MIB`` = 700 MiB (driver state, module images of
  torch's kernels, cuBLAS/cuFFT handles). Often quoted as ~500 MiB; on the committed H200 reference
  runs (torch 2.11, CUDA 13) each extra tenant process added 790-820 MiB to NVML's used memory, of
  which its tensors were 64-400 MiB, so 700 MiB is what this driver stack actually costs;
* ``fft`` (N x N complex64, 8 bytes an element): input + output + cuFFT workspace ~ 3 x N^2 x 8;
* ``gemm`` (N x N fp32, 4 bytes): A, B and the product ~ 3 x N^2 x 4;
* ``llm``: parameters x 4 bytes (fp32) + activations. Parameters of the worker's transformer
  (``workers/kts_worker.py``: embedding, L encoder layers of 12 d^2 + 13 d, output head) and its
  activations for S = prompt + decode tokens: per layer the residual stream and feed-forward
  (~10 x S x d floats) and the attention scores (heads x S^2), plus the logits (S x vocab),
  doubled for the caching allocator's slack. Sizes are the worker's defaults unless given;
* ``noop``: nothing beyond the context.

The PyTorch caching allocator rounds blocks up and keeps freed ones, so real use runs a few
per cent above the tensor sizes; the ``headroom`` of :func:`check_capacity` (default 90 % of
the GPU) covers that and what other processes hold.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from kts_helpers.errors import SpecError
from kts_helpers.run.spec import ScenarioSpec, TenantSpec, scenario_from_dict

__all__ = ["CONTEXT_MIB", "LLM_DEFAULTS", "check_capacity", "estimate_scenario_memory_mib",
           "estimate_tenant_memory_mib", "llm_parameters"]

MIB = 2**20
CONTEXT_MIB = 700.0
# The worker's defaults (env LLM_D_MODEL, LLM_LAYERS, LLM_HEADS, LLM_PROMPT_TOKENS, LLM_DECODE_TOKENS, LLM_VOCAB).
LLM_DEFAULTS = {"d_model": 512, "layers": 4, "heads": 8, "prompt_tokens": 128, "decode_tokens": 16, "vocab": 4096}


def llm_parameters(d_model: int, layers: int, vocab: int) -> int:
    """Parameters of the worker's model: embedding + encoder layers (attention, 4d feed-forward, 2 norms) + head."""
    per_layer = 4 * d_model * d_model + 4 * d_model + 8 * d_model * d_model + 5 * d_model + 4 * d_model
    return vocab * d_model + layers * per_layer + d_model * vocab + vocab


def _llm_bytes(cfg: Mapping[str, int]) -> float:
    d, layers, heads, vocab = cfg["d_model"], cfg["layers"], cfg["heads"], cfg["vocab"]
    seq = cfg["prompt_tokens"] + cfg["decode_tokens"]
    params = llm_parameters(d, layers, vocab) * 4.0
    activations = 4.0 * (layers * (10 * seq * d + heads * seq * seq) + seq * vocab)
    return params + 2.0 * activations


def estimate_tenant_memory_mib(tenant: TenantSpec, *, context_mib: float = CONTEXT_MIB,
                               llm: Mapping[str, int] | None = None) -> float:
    """Estimated GPU memory of one tenant process in MiB (CUDA context + its workload's tensors).

    ``llm`` overrides the LLM worker's sizes (keys of ``LLM_DEFAULTS``) where the run set them.
    """
    n = float(tenant.matrix_size)
    if tenant.workload == "fft":
        work = 3.0 * n * n * 8.0
    elif tenant.workload == "gemm":
        work = 3.0 * n * n * 4.0
    elif tenant.workload == "llm":
        cfg = {**LLM_DEFAULTS, **(llm or {})}
        work = _llm_bytes(cfg)
    elif tenant.workload == "noop":
        work = 0.0
    else:  # a real model or a user's factory: no a-priori model; its measured footprint is in its alone profile
        work = 0.0
    return context_mib + work / MIB


def estimate_scenario_memory_mib(scenario: ScenarioSpec | Mapping[str, Any], **options: Any) -> float:
    """Sum of the tenants' estimates: time-sliced tenants all hold their memory at once."""
    scen = scenario if isinstance(scenario, ScenarioSpec) else scenario_from_dict(dict(scenario))
    return sum(estimate_tenant_memory_mib(t, **options) for t in scen.tenants)


def check_capacity(scenarios: Iterable[ScenarioSpec | Mapping[str, Any]], gpu_memory_mib: float | None, *,
                   headroom: float = 0.9, **options: Any) -> dict[str, float]:
    """Raise SpecError when a scenario's tenants together need more than ``headroom`` x the GPU's memory.

    Returns each scenario's estimate (MiB). ``gpu_memory_mib`` None (a CPU run, memory unknown)
    checks nothing. Every scenario is checked (a baseline of one huge tenant fails too); the
    message names the largest offender, e.g. "scenario shared needs ~150000 MiB for 2 tenants;
    the GPU has 143155 MiB (the limit is 90 % = 128840 MiB): lower matrix sizes or run fewer tenants".
    """
    if not 0 < headroom <= 1:
        raise SpecError(f"headroom must be in (0, 1], got {headroom!r}")
    if gpu_memory_mib is not None and not gpu_memory_mib > 0:
        raise SpecError(f"gpu_memory_mib must be positive, got {gpu_memory_mib!r}")
    estimates: dict[str, float] = {}
    sizes: dict[str, int] = {}
    for s in scenarios:
        scen = s if isinstance(s, ScenarioSpec) else scenario_from_dict(dict(s))
        if scen.kind == "calibration":
            continue
        estimates[scen.name] = estimate_scenario_memory_mib(scen, **options)
        sizes[scen.name] = len(scen.tenants)
    if gpu_memory_mib is None:
        return estimates
    limit = headroom * float(gpu_memory_mib)
    over = {k: v for k, v in estimates.items() if v > limit}
    if over:
        name = max(over, key=lambda k: over[k])
        k = sizes[name]
        raise SpecError(f"scenario {name} needs ~{over[name]:.0f} MiB for {k} tenant{'s' if k != 1 else ''}; "
                        f"the GPU has {gpu_memory_mib:.0f} MiB (the limit is {100 * headroom:.0f} % = {limit:.0f} "
                        f"MiB): lower matrix sizes or run fewer tenants"
                        + (f" ({len(over) - 1} more scenario(s) over the limit)" if len(over) > 1 else ""))
    return estimates
