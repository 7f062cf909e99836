"""The kit's own workloads: the article's FFT and GEMM, a one-element add (the tool's floor), a small LLM.

Each is a factory ``make_x(torch, device, params) -> Workload`` (``kts_api``), the same API a user's workload
keeps. ``DEFAULT_SLEEP_MS`` is each one's closed-loop sleep when the run names none; any other workload (a real
model, a user's factory) sleeps 0 ms by default: it runs back to back, a saturating tenant, unless the run sets
``sleep_ms`` for it.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable

from kts_api import Workload

DEFAULT_SLEEP_MS = {"fft": 100.0, "gemm": 150.0, "noop": 0.0, "llm": 50.0}


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
