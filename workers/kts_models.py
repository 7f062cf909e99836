"""kts models: real architectures as tenants, built from ``transformers`` configs with random weights.

Why these: an operator's question is about the pods they run (an LLM server next to a training job, an encoder
and a vision model next to an LLM), and the field's standard definitions of those models are the ``transformers``
classes. Nothing is downloaded: each model is built from its config (``from_config``-style, random weights), so
a node without internet runs it and its kernels are the real ones. On a GPU the sizes are the usual ones; on CPU
tiny configs, so CI exercises the same code. Every size can be set through ``workload_params`` (the factory's
``params``), e.g. ``workload_params={"llama-decode": {"layers": 8, "decode_tokens": 4}}``.

Built-in names (``kts_workload.REAL_MODELS``):

* ``llama-decode``: an LLM serving step with a KV cache: a prefill of ``prompt_tokens`` for a batch of
  ``batch`` requests (phase ``prefill``), then ``decode_tokens`` decode steps, each one token for every request
  against the cache (phase ``decode``). Llama-style, bf16; the GPU default (hidden 2048, 16 layers, 32 heads,
  8 KV heads, MLP 8192, vocabulary 32000) has about 1.1 B parameters.
* ``bert``: BERT-base encoder inference on a batch (32 x 128 tokens, fp16 on a GPU).
* ``vit``: ViT-B/16 inference on a batch (32 images of 224 x 224, fp16 on a GPU).
* ``resnet``: ResNet-50 inference on a batch (32 images of 224 x 224, fp16 on a GPU): a convolutional tenant.
* ``train-step``: a training step of a small Llama (forward, backward, AdamW; batch 8 x 256, bf16 autocast),
  the noisy neighbour.

This module is a sibling of ``kts_worker.py`` (it imports only ``kts_api``) rather than part of ``kts_helpers`` because the worker container
copies only ``workers/`` and installs torch (plus ``transformers`` for these models), never ``kts_helpers``' heavy
dependencies (pandas, altair, papermill). ``transformers`` is imported inside each factory, so the worker and the
kit's own workloads still run where it is absent; a real model there fails the run's pre-flight in one line.
"""

from __future__ import annotations

from typing import Any

from kts_api import Workload

DEFAULTS: dict[str, dict[str, dict[str, Any]]] = {
    "llama-decode": {
        "cuda": {"hidden": 2048, "layers": 16, "heads": 32, "kv_heads": 8, "intermediate": 8192, "vocab": 32000,
                 "batch": 4, "prompt_tokens": 128, "decode_tokens": 8, "dtype": "bfloat16"},
        "cpu": {"hidden": 64, "layers": 2, "heads": 4, "kv_heads": 2, "intermediate": 128, "vocab": 256,
                "batch": 1, "prompt_tokens": 16, "decode_tokens": 3, "dtype": "float32"},
    },
    "bert": {
        "cuda": {"hidden": 768, "layers": 12, "heads": 12, "intermediate": 3072, "vocab": 30522, "batch": 32,
                 "seq": 128, "dtype": "float16"},
        "cpu": {"hidden": 32, "layers": 2, "heads": 2, "intermediate": 64, "vocab": 512, "batch": 2, "seq": 16,
                "dtype": "float32"},
    },
    "vit": {
        "cuda": {"hidden": 768, "layers": 12, "heads": 12, "intermediate": 3072, "image": 224, "patch": 16,
                 "batch": 32, "dtype": "float16"},
        "cpu": {"hidden": 32, "layers": 2, "heads": 2, "intermediate": 64, "image": 32, "patch": 8, "batch": 2,
                "dtype": "float32"},
    },
    "resnet": {
        "cuda": {"depths": [3, 4, 6, 3], "widths": [256, 512, 1024, 2048], "stem": 64, "image": 224, "batch": 32,
                 "dtype": "float16"},
        "cpu": {"depths": [1, 1], "widths": [16, 32], "stem": 8, "image": 32, "batch": 2, "dtype": "float32"},
    },
    "train-step": {
        "cuda": {"hidden": 768, "layers": 8, "heads": 12, "kv_heads": 12, "intermediate": 2048, "vocab": 32000,
                 "batch": 8, "seq": 256, "lr": 1e-4},
        "cpu": {"hidden": 32, "layers": 2, "heads": 2, "kv_heads": 2, "intermediate": 64, "vocab": 256, "batch": 2,
                "seq": 16, "lr": 1e-4},
    },
}


def settings(kind: str, params: dict) -> dict[str, Any]:
    """The model's sizes: the device's defaults, overridden by ``params`` (unknown keys are refused)."""
    base = dict(DEFAULTS[kind]["cuda" if params.get("device_type") == "cuda" else "cpu"])
    harness = {"size", "seed", "device_type"}
    unknown = sorted(set(params) - set(base) - harness)
    if unknown:
        raise ValueError(f"unknown {kind} parameter(s) {', '.join(unknown)}; known: {', '.join(sorted(base))}")
    base.update({k: v for k, v in params.items() if k in base})
    return base


def _transformers():
    try:
        import transformers
    except ImportError:
        raise ImportError("the real-model workloads need the transformers package (pip install transformers)"
                          ) from None
    transformers.logging.set_verbosity_error()
    return transformers


def _n_params(model) -> int:
    return int(sum(p.numel() for p in model.parameters()))


def _llama_config(tf, s: dict, *, use_cache: bool):
    return tf.LlamaConfig(hidden_size=int(s["hidden"]), num_hidden_layers=int(s["layers"]),
                          num_attention_heads=int(s["heads"]), num_key_value_heads=int(s["kv_heads"]),
                          intermediate_size=int(s["intermediate"]), vocab_size=int(s["vocab"]),
                          max_position_embeddings=4096, use_cache=use_cache, attn_implementation="sdpa")


def make_llama_decode(torch, device, params: dict):
    """An LLM serving step: prefill a batch of prompts, then decode token by token against the KV cache."""
    tf = _transformers()
    s = settings("llama-decode", params)
    torch.manual_seed(int(params.get("seed", 0)))
    dtype = getattr(torch, str(s["dtype"]))
    with device:  # weights drawn where they will live (a 1 B model's random init on the host takes seconds)
        model = tf.LlamaForCausalLM(_llama_config(tf, s, use_cache=True)).to(dtype=dtype).eval()
    batch, prompt, decode = int(s["batch"]), int(s["prompt_tokens"]), int(s["decode_tokens"])
    ids = torch.randint(0, int(s["vocab"]), (batch, prompt), device=device)
    # the cache argument's name: "cache" from transformers 5.24 on, "past_key_values" before (the cache object is
    # updated in place, so the step keeps its own reference rather than reading it back from the output)
    import inspect

    key = "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"
    state: dict[str, Any] = {}

    def prefill():
        with torch.inference_mode():
            state["cache"] = tf.DynamicCache()
            out = model(input_ids=ids, use_cache=True, **{key: state["cache"]})
            state["next"] = out.logits[:, -1:].argmax(-1)

    def decode_one():
        with torch.inference_mode():
            out = model(input_ids=state["next"], use_cache=True, **{key: state["cache"]})
            state["next"] = out.logits[:, -1:].argmax(-1)

    n = _n_params(model)
    return Workload("llama-decode", lambda: [("prefill", prefill)] + [("decode", decode_one)] * decode,
                    flops_per_op=2.0 * n * batch * (prompt + decode),
                    notes={**s, "parameters": n, "architecture": "LlamaForCausalLM (transformers, random weights)",
                           "flops_model": "2 x parameters x tokens per iteration (attention not counted)"})


def make_bert(torch, device, params: dict):
    """BERT-base encoder inference on a batch of token sequences."""
    tf = _transformers()
    s = settings("bert", params)
    torch.manual_seed(int(params.get("seed", 0)))
    cfg = tf.BertConfig(hidden_size=int(s["hidden"]), num_hidden_layers=int(s["layers"]),
                        num_attention_heads=int(s["heads"]), intermediate_size=int(s["intermediate"]),
                        vocab_size=int(s["vocab"]), attn_implementation="sdpa")
    with device:
        model = tf.BertModel(cfg).to(dtype=getattr(torch, str(s["dtype"]))).eval()
    ids = torch.randint(0, int(s["vocab"]), (int(s["batch"]), int(s["seq"])), device=device)

    def op():
        with torch.inference_mode():
            return model(input_ids=ids).last_hidden_state

    n = _n_params(model)
    return Workload("bert", lambda: [("op", op)], flops_per_op=2.0 * n * int(s["batch"]) * int(s["seq"]),
                    notes={**s, "parameters": n, "architecture": "BertModel (transformers, random weights)"})


def make_vit(torch, device, params: dict):
    """ViT-B/16 inference on a batch of images."""
    tf = _transformers()
    s = settings("vit", params)
    torch.manual_seed(int(params.get("seed", 0)))
    cfg = tf.ViTConfig(hidden_size=int(s["hidden"]), num_hidden_layers=int(s["layers"]),
                       num_attention_heads=int(s["heads"]), intermediate_size=int(s["intermediate"]),
                       image_size=int(s["image"]), patch_size=int(s["patch"]), attn_implementation="sdpa")
    dtype = getattr(torch, str(s["dtype"]))
    with device:
        model = tf.ViTModel(cfg, add_pooling_layer=False).to(dtype=dtype).eval()
    images = torch.randn(int(s["batch"]), 3, int(s["image"]), int(s["image"]), device=device, dtype=dtype)

    def op():
        with torch.inference_mode():
            return model(pixel_values=images).last_hidden_state

    n = _n_params(model)
    tokens = (int(s["image"]) // int(s["patch"])) ** 2 + 1
    return Workload("vit", lambda: [("op", op)], flops_per_op=2.0 * n * int(s["batch"]) * tokens,
                    notes={**s, "parameters": n, "architecture": "ViTModel (transformers, random weights)"})


def make_resnet(torch, device, params: dict):
    """ResNet-50 inference on a batch of images (bottleneck blocks, transformers' ResNetModel)."""
    tf = _transformers()
    s = settings("resnet", params)
    torch.manual_seed(int(params.get("seed", 0)))
    cfg = tf.ResNetConfig(embedding_size=int(s["stem"]), hidden_sizes=[int(v) for v in s["widths"]],
                          depths=[int(v) for v in s["depths"]], layer_type="bottleneck")
    dtype = getattr(torch, str(s["dtype"]))
    with device:
        model = tf.ResNetModel(cfg).to(dtype=dtype).eval()
    images = torch.randn(int(s["batch"]), 3, int(s["image"]), int(s["image"]), device=device, dtype=dtype)

    def op():
        with torch.inference_mode():
            return model(pixel_values=images).pooler_output

    n = _n_params(model)
    return Workload("resnet", lambda: [("op", op)], flops_per_op=0.0,
                    notes={**s, "parameters": n, "architecture": "ResNetModel (transformers, random weights)",
                           "flops_model": "not modelled (convolutions)"})


def make_train_step(torch, device, params: dict):
    """A training step of a small Llama: forward, backward and AdamW (bf16 autocast on a GPU)."""
    tf = _transformers()
    s = settings("train-step", params)
    torch.manual_seed(int(params.get("seed", 0)))
    with device:
        model = tf.LlamaForCausalLM(_llama_config(tf, s, use_cache=False)).train()
    opt = torch.optim.AdamW(model.parameters(), lr=float(s["lr"]))
    ids = torch.randint(0, int(s["vocab"]), (int(s["batch"]), int(s["seq"])), device=device)
    cuda = device.type == "cuda"

    def step():
        with torch.autocast(device_type=device.type, dtype=torch.bfloat16, enabled=cuda):
            loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    n = _n_params(model)
    return Workload("train-step", lambda: [("step", step)], flops_per_op=6.0 * n * int(s["batch"]) * int(s["seq"]),
                    notes={**s, "parameters": n,
                           "architecture": "LlamaForCausalLM training step, AdamW (transformers, random weights)",
                           "flops_model": "6 x parameters x tokens (forward + backward)"})


FACTORIES = {"llama-decode": make_llama_decode, "bert": make_bert, "vit": make_vit, "resnet": make_resnet,
             "train-step": make_train_step}
