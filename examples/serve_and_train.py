"""Bring your own models: a serving decode and a training step, the pair an operator puts on one GPU under MPS.

Four factories ``(torch, device, params) -> workload``, each duck-typed (``name``, ``step``, ``notes``) and
importing only torch and ``transformers`` (inside the factory), as ``examples/my_tenants.py`` explains. Nothing is
downloaded: every model is built from its config with random weights. On a GPU the sizes are the usual ones; on
CPU tiny ones, so the same code runs in CI. Any size can be set through ``workload_params``; a key the factory
does not know is refused in one line.

* ``make_gpt2_decode`` (tenant ``gpt2-decode``): GPT-2 medium (24 layers, 1024 wide, 16 heads) serving a batch of
  requests: a prefill of the prompts (phase ``prefill``), then ``decode_tokens`` steps of one token each against
  the KV cache (phase ``decode``); fp16.
* ``make_whisper_decode`` (``whisper-decode``): a Whisper-small-sized speech model (12 + 12 layers, 768 wide) as a
  transcription server: the encoder over 30 s of log-mel frames and the decoder's first pass over the start
  tokens (phase ``encode``), then ``decode_tokens`` decoder steps against the self- and cross-attention caches
  (phase ``decode``); fp16.
* ``make_vit_train`` (``vit-train``): a ViT-B/16 classifier's training step on 32 images of 224 x 224: forward and
  backward under bf16 autocast, AdamW (phase ``step``).
* ``make_convnext_train`` (``convnext-train``): the same for ConvNeXt-T (depths 3, 3, 9, 3; widths 96-768).

Run a pair as tenants under MPS (the folder holding this file on ``PYTHONPATH``)::

    PYTHONPATH=examples kts run --set sharing=mps \\
        --set workloads=serve_and_train:make_gpt2_decode,serve_and_train:make_vit_train

``bench/h200/mps_sealed.sh`` runs both pairs on a GPU host (issue 51's sealed runs).
"""

from __future__ import annotations

import inspect
from types import SimpleNamespace
from typing import Any

SIZES: dict[str, dict[str, dict[str, Any]]] = {
    "gpt2-decode": {
        "cuda": {"layers": 24, "hidden": 1024, "heads": 16, "vocab": 50257, "positions": 1024, "batch": 8,
                 "prompt_tokens": 128, "decode_tokens": 8, "dtype": "float16"},
        "cpu": {"layers": 2, "hidden": 32, "heads": 2, "vocab": 256, "positions": 64, "batch": 1,
                "prompt_tokens": 8, "decode_tokens": 3, "dtype": "float32"},
    },
    "whisper-decode": {
        "cuda": {"layers": 12, "hidden": 768, "heads": 12, "ffn": 3072, "vocab": 51865, "mel_bins": 80,
                 "frames": 3000, "batch": 4, "start_tokens": 4, "decode_tokens": 8, "dtype": "float16"},
        "cpu": {"layers": 2, "hidden": 32, "heads": 2, "ffn": 64, "vocab": 256, "mel_bins": 16, "frames": 64,
                "batch": 1, "start_tokens": 2, "decode_tokens": 3, "dtype": "float32"},
    },
    "vit-train": {
        "cuda": {"layers": 12, "hidden": 768, "heads": 12, "intermediate": 3072, "image": 224, "patch": 16,
                 "classes": 1000, "batch": 32, "lr": 1e-4},
        "cpu": {"layers": 2, "hidden": 32, "heads": 2, "intermediate": 64, "image": 32, "patch": 8, "classes": 10,
                "batch": 2, "lr": 1e-4},
    },
    "convnext-train": {
        "cuda": {"depths": [3, 3, 9, 3], "widths": [96, 192, 384, 768], "image": 224, "classes": 1000, "batch": 32,
                 "lr": 1e-4},
        "cpu": {"depths": [1, 1], "widths": [8, 16], "image": 32, "classes": 10, "batch": 2, "lr": 1e-4},
    },
}
HARNESS = {"size", "seed", "device_type"}  # what the kit adds to every factory's params


def sizes(kind: str, params: dict) -> dict[str, Any]:
    """The model's sizes for this device, ``params`` on top; an unknown key is refused in one line."""
    base = dict(SIZES[kind]["cuda" if params.get("device_type") == "cuda" else "cpu"])
    unknown = sorted(set(params) - set(base) - HARNESS)
    if unknown:
        raise ValueError(f"unknown {kind} parameter(s) {', '.join(unknown)}; known: {', '.join(sorted(base))}")
    base.update({k: v for k, v in params.items() if k in base})
    return base


def _transformers():
    import transformers  # imported here: the worker runs without it until a model is asked for

    transformers.logging.set_verbosity_error()
    return transformers


def _cache_key(model) -> str:
    """The cache argument's name: ``cache`` from transformers 5.24 on, ``past_key_values`` before."""
    return "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"


def _n(model) -> int:
    return int(sum(p.numel() for p in model.parameters()))


def make_gpt2_decode(torch, device, params):
    """GPT-2 medium serving a batch: prefill the prompts, then decode token by token against the KV cache."""
    tf = _transformers()
    s = sizes("gpt2-decode", params)
    torch.manual_seed(int(params.get("seed", 0)))
    cfg = tf.GPT2Config(n_layer=int(s["layers"]), n_embd=int(s["hidden"]), n_head=int(s["heads"]),
                        vocab_size=int(s["vocab"]), n_positions=int(s["positions"]), use_cache=True,
                        attn_implementation="sdpa")
    with device:
        model = tf.GPT2LMHeadModel(cfg).to(dtype=getattr(torch, str(s["dtype"]))).eval()
    batch, prompt, decode = int(s["batch"]), int(s["prompt_tokens"]), int(s["decode_tokens"])
    if prompt + decode > int(s["positions"]):
        raise ValueError(f"gpt2-decode: prompt_tokens + decode_tokens ({prompt + decode}) exceed positions "
                         f"({s['positions']})")
    ids = torch.randint(0, int(s["vocab"]), (batch, prompt), device=device)
    key = _cache_key(model)
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

    return SimpleNamespace(name="gpt2-decode", step=lambda: [("prefill", prefill)] + [("decode", decode_one)] * decode,
                           flops_per_op=2.0 * _n(model) * batch * (prompt + decode),
                           notes={**s, "parameters": _n(model),
                                  "architecture": "GPT2LMHeadModel (transformers, random weights)"})


def make_whisper_decode(torch, device, params):
    """A Whisper-style transcription server: encode 30 s of audio features, then decode against both caches."""
    tf = _transformers()
    s = sizes("whisper-decode", params)
    torch.manual_seed(int(params.get("seed", 0)))
    layers, heads = int(s["layers"]), int(s["heads"])
    frames = int(s["frames"])
    cfg = tf.WhisperConfig(d_model=int(s["hidden"]), encoder_layers=layers, decoder_layers=layers,
                           encoder_attention_heads=heads, decoder_attention_heads=heads,
                           encoder_ffn_dim=int(s["ffn"]), decoder_ffn_dim=int(s["ffn"]), vocab_size=int(s["vocab"]),
                           num_mel_bins=int(s["mel_bins"]), max_source_positions=frames // 2,
                           max_target_positions=448, use_cache=True, attn_implementation="sdpa",
                           pad_token_id=0, bos_token_id=1, eos_token_id=2, decoder_start_token_id=1)
    dtype = getattr(torch, str(s["dtype"]))
    with device:
        model = tf.WhisperForConditionalGeneration(cfg).to(dtype=dtype).eval()
    batch, start, decode = int(s["batch"]), int(s["start_tokens"]), int(s["decode_tokens"])
    features = torch.randn(batch, int(s["mel_bins"]), frames, device=device, dtype=dtype)
    prompt = torch.randint(0, int(s["vocab"]), (batch, start), device=device)
    key = _cache_key(model)
    state: dict[str, Any] = {}

    def encode():
        with torch.inference_mode():
            state["enc"] = model.model.encoder(input_features=features)
            state["cache"] = tf.EncoderDecoderCache(tf.DynamicCache(), tf.DynamicCache())
            out = model(encoder_outputs=state["enc"], decoder_input_ids=prompt, use_cache=True,
                        **{key: state["cache"]})
            state["next"] = out.logits[:, -1:].argmax(-1)

    def decode_one():
        with torch.inference_mode():
            out = model(encoder_outputs=state["enc"], decoder_input_ids=state["next"], use_cache=True,
                        **{key: state["cache"]})
            state["next"] = out.logits[:, -1:].argmax(-1)

    return SimpleNamespace(name="whisper-decode",
                           step=lambda: [("encode", encode)] + [("decode", decode_one)] * decode,
                           notes={**s, "parameters": _n(model),
                                  "architecture": "WhisperForConditionalGeneration (transformers, random weights)"})


def _train_step(torch, device, model, inputs, labels, lr: float):
    """forward and backward under bf16 autocast on a GPU, then AdamW; the optimizer's state is made on the first."""
    opt = torch.optim.AdamW(model.parameters(), lr=lr)
    cuda = device.type == "cuda"

    def step():
        with torch.autocast(device_type=device.type, dtype=torch.bfloat16, enabled=cuda):
            loss = model(pixel_values=inputs, labels=labels).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    return step


def make_vit_train(torch, device, params):
    """A ViT-B/16 classifier's training step (bf16 autocast, AdamW) on a batch of images."""
    tf = _transformers()
    s = sizes("vit-train", params)
    torch.manual_seed(int(params.get("seed", 0)))
    cfg = tf.ViTConfig(hidden_size=int(s["hidden"]), num_hidden_layers=int(s["layers"]),
                       num_attention_heads=int(s["heads"]), intermediate_size=int(s["intermediate"]),
                       image_size=int(s["image"]), patch_size=int(s["patch"]), num_labels=int(s["classes"]),
                       attn_implementation="sdpa")
    with device:
        model = tf.ViTForImageClassification(cfg).train()
        images = torch.randn(int(s["batch"]), 3, int(s["image"]), int(s["image"]))
        labels = torch.randint(0, int(s["classes"]), (int(s["batch"]),))
    step = _train_step(torch, device, model, images, labels, float(s["lr"]))
    tokens = (int(s["image"]) // int(s["patch"])) ** 2 + 1
    return SimpleNamespace(name="vit-train", step=lambda: [("step", step)],
                           flops_per_op=6.0 * _n(model) * int(s["batch"]) * tokens,
                           notes={**s, "parameters": _n(model),
                                  "architecture": "ViTForImageClassification training step, AdamW (transformers, "
                                                  "random weights)"})


def make_convnext_train(torch, device, params):
    """A ConvNeXt-T classifier's training step (bf16 autocast, AdamW) on a batch of images."""
    tf = _transformers()
    s = sizes("convnext-train", params)
    torch.manual_seed(int(params.get("seed", 0)))
    cfg = tf.ConvNextConfig(num_stages=len(s["depths"]), depths=[int(v) for v in s["depths"]],
                            hidden_sizes=[int(v) for v in s["widths"]],
                            num_labels=int(s["classes"]), image_size=int(s["image"]))
    with device:
        model = tf.ConvNextForImageClassification(cfg).train()
        images = torch.randn(int(s["batch"]), 3, int(s["image"]), int(s["image"]))
        labels = torch.randint(0, int(s["classes"]), (int(s["batch"]),))
    step = _train_step(torch, device, model, images, labels, float(s["lr"]))
    return SimpleNamespace(name="convnext-train", step=lambda: [("step", step)],
                           notes={**s, "parameters": _n(model),
                                  "architecture": "ConvNextForImageClassification training step, AdamW "
                                                  "(transformers, random weights)"})
