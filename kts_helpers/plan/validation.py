"""Predicted against measured: the planner checked on committed H200 runs, and the README's validation table.

Why: a prediction counts only when it is checked against runs that did not tune it. Each committed run is
listed in :data:`VALIDATION_RUNS` with whether it was used to build or tune the model (the probe, the
calibration target, the MPS weights); the table says so per row, and the score counts both kinds apart.
The measured numbers are the report's (``analyse.summary``: co-running iterations only); the predicted ones
come from ``plan.engine`` reading the run's manifest and alone logs only.

A tenant row is a **hit** when the measured p99 lies inside the prediction interval or within ±20 % of the
predicted p99, *and* the measured p50 lies within ±25 % of the predicted p50 (the issue's target: at least
80 % of tenant rows).

Longer than 500 lines: every validation run list and every miss's reason sit beside the one rule that scores them,
so a reader checks a row's flag, its reason and the rule in one place (a test holds the reasons equal to the misses).
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from kts_helpers.analyse.design import host_balance  # the verdict's balance check: one rule for both
from kts_helpers.analyse.load import RunData, load_run
from kts_helpers.analyse.logparse import parse_file
from kts_helpers.analyse.profiles import profile_rows
from kts_helpers.analyse.rules import scenario_group
from kts_helpers.analyse.summary import summarize_frame
from kts_helpers.fsutil import atomic_write_text
from kts_helpers.plan.engine import (
    DEFAULT_REPLICATES,
    REFERENCE_ROOT,
    VALIDATION_ROOT,  # also the verdict's fresh GPU runs (present.docblocks.AUTO_RUNS)
    Prediction,
    gpu_model_from_probe,
)
from kts_helpers.plan.inputs import is_bracketed, load_plan_input, predict_input
from kts_helpers.plan.multi import MultiCheck, multi_context_checks
from kts_helpers.run.logformat import PAD_PHASE
from kts_helpers.run.runs import open_run

P99_TOLERANCE, P50_TOLERANCE = 0.20, 0.25
START, END = "<!-- plan-validation:start -->", "<!-- plan-validation:end -->"
# (run directory under data/reference, used to build or tune the model)
VALIDATION_RUNS: tuple[tuple[str, bool], ...] = (
    ("h200-2026-11-30-article", True),
    ("h200-2026-11-30-saturating", True),
    ("h200-2026-11-30-repeats", False),
    ("h200-2026-11-30-mps-limited", True),  # the FFT's SM need under thread caps (engine.SM_NEED)
    ("h200-2026-11-30-probe-multi", True),
    ("h200-2026-11-30-val-fft-2gemm", True),
    ("h200-2026-11-30-four-tenants", False),
    ("h200-2026-11-30-val-llm-gemm-mps", True),  # the kernel-boundary queue (engine.FILLS_GPU)
    # the common start is kept to time-slicing after reading its MPS rows (engine.common_start)
    ("h200-2026-11-30-val-fft-2gemm-sleepy", True),
    # measured after the model was frozen (third and fourth H200 batches), never used to tune it
    ("h200-2026-11-30-article-rerun", False),
    # its collisions (an FFT behind the LLM waits 0.26 ms, not a slice) showed the LLM's kernel boundaries
    # (engine.KERNELS_PER_OP): no number was fitted to it, but the mechanism was built from it
    ("h200-2026-11-30-matrix", True),
    ("h200-2026-11-30-openloop", False),
    ("h200-2026-11-30-repeats-mps", True),  # the kernel-boundary queue: the FFT's cadence at 40 ms
    ("h200-2026-11-30-mps-limited-800", True),  # with mps-limited: the FFT's SM need
    ("h200-2026-11-30-plan-validate-n2", False),
    # the sealed holdout: measured on the H200 before the kernel-boundary, common-start and SM-need mechanisms
    # were written, kept unread until the model was frozen (commit a39a98e), then scored once as they are; the
    # time-sliced ones then tuned the FFT's launch-bound share (engine.GPU_BUSY_SHARE, 0.6)
    ("h200-2026-11-30-hold-fft-llm", True),  # the FFT's launch-bound share (engine.GPU_BUSY_SHARE)
    ("h200-2026-11-30-hold-four-mixed", True),  # the FFT's launch-bound share (engine.GPU_BUSY_SHARE)
    ("h200-2026-11-30-hold-llm-2fft", True),  # GPU_BUSY_SHARE; its MPS rows: the LLM's busy share under MPS
    ("h200-2026-11-30-hold-gemm6k-fft", True),  # the FFT's launch-bound share (engine.GPU_BUSY_SHARE)
    ("h200-2026-11-30-hold-mps-cap30", False),
    ("h200-2026-11-30-hold-sat-fft60", True),  # the FFT's launch-bound share (engine.GPU_BUSY_SHARE)
    # kts plan --validate of the frozen model's new answer (the article mix under MPS, N = 2 and 3), run after it
    ("h200-2026-12-01-plan-validate-mps-n2", False),
    ("h200-2026-12-01-plan-validate-mps-n3", False),
    # the second sealed holdout: measured on the H200 after the first holdout was scored and before the launch-gap
    # and MPS busy-share mechanisms were written, kept unread until the model was frozen (commit ca3ca2f), then
    # scored once as they are
    ("h200-2026-12-01-hold2-fft-gemm-fast", True),  # the queue behind a GEMM kernel launched mid-op
    ("h200-2026-12-01-hold2-gemm-llm", False),
    ("h200-2026-12-01-hold2-llm-2gemm", False),
    ("h200-2026-12-01-hold2-mps-cap70", False),
    # the third sealed holdout: designed and measured on the H200 with the mechanisms frozen (ca3ca2f), unread until
    # the prediction interval's repair was committed (957dbb5), then scored once as they are; its fifth run
    # (mps-cap50), cut by the GPU call's time limit, measured again in the next call, after that commit
    ("h200-2026-12-01-hold3-3fft-gemm", False),
    ("h200-2026-12-01-hold3-fft-llm-gemm", False),
    ("h200-2026-12-01-hold3-2llm", True),  # the LLM's SM need; the block bootstrap (its llm-2 spell)
    ("h200-2026-12-01-hold3-sat-fft2k", True),  # the kernel-boundary queue: the FFT's cadence at 80 ms
    ("h200-2026-12-01-hold3-mps-cap50", False),
    # kts plan --validate of the three-type matrix mix (FFT + GEMM + LLM, FFT p99 <= 1 ms): the answer, MPS N = 3,
    # and N + 1, run with the model unchanged since the interval's repair (957dbb5)
    ("h200-2026-12-01-plan-validate-matrix-n3", True),  # the LLM's SM need (engine.SM_NEED)
    ("h200-2026-12-01-plan-validate-matrix-n4", True),  # the LLM's SM need (engine.SM_NEED)
    # The runs flagged above in this last round (the kernel-boundary queue, the LLM's SM need and the block
    # bootstrap were built from them after they had been scored untuned) count as tuned from then on; picking the
    # model's misses out of the untuned set flatters what is left, so the round's own test is the fourth sealed
    # holdout below: measured on the H200 before the round was frozen, unread until then, scored once.
    # The fourth sealed holdout: four runs designed before that round (LLM and FFT + LLM next to the saturating GEMM,
    # a four-tenant mix, a capped LLM), measured on the H200 before it was frozen (83eaa16), unread until then,
    # scored once as they are. The GPU call's time limit cut the four-tenant mix during its shared scenario and left
    # the capped run unmeasured; the two that completed are these.
    ("h200-2026-12-01-hold4-llm-sat", False),
    ("h200-2026-12-01-hold4-fft-llm-sat", False),
    # measured for another purpose after that freeze (iterations=auto at full size with whole-count p99 bounds: the
    # article pair every 20 / 30 ms; the FFT every 20 ms next to the saturating GEMM, time-slicing and MPS), never
    # used to tune the model, scored once as they are
    ("h200-2026-12-01-auto-article", False),
    ("h200-2026-12-01-auto-saturating", False),
    # the article profile at 1200 iterations on a third H200 (2026-12-02, issue 19's defaults), scored once as it is
    ("h200-2026-12-02-article", False),
)
# The runs scored after the model's last change and nothing else: the honest test of the model as it stands (the
# cumulative untuned rows hold earlier holdouts whose misses later rounds were built from, and lost those runs).
LATEST_HOLDOUT = ("h200-2026-12-01-hold4-llm-sat", "h200-2026-12-01-hold4-fft-llm-sat")
# The real-model batch (issue 31): transformers architectures with random weights on the H200 (llama-decode, bert,
# vit, train-step), each tenant's traits measured by the profile its alone run recorded (plan.traits), no name-keyed
# number. Flag: seen before the traits rules were frozen. The llama-train and plugin runs were read while the
# profiler's warm-up was fixed (their alone profiles and shared numbers; no number was fitted to them); the other two
# were measured in the same hour, before the rules were written, kept unread, and scored once when they were frozen.
# All four were then read to build the host-time term (2026-12-03, plan.traits): all seen, tuning data now.
REAL_MODEL_RUNS: tuple[tuple[str, bool], ...] = (
    ("h200-2026-12-02-rm-llama-train", True),
    ("h200-2026-12-02-rm-plugin", True),
    ("h200-2026-12-02-rm-bert-vit-llama", True),
    ("h200-2026-12-02-rm-two-llama", True),
    # The sealed batch (2026-12-03): the three configurations again, each under time-slicing and MPS, in the bracketed
    # design (alone, shared, alone; 400 iterations), measured on the H200 before the host-time term was frozen
    # (1957063), kept unread, and scored once after it.
    ("h200-2026-12-03-rm-sealed-llama-train", False),
    ("h200-2026-12-03-rm-sealed-two-llama", False),
    ("h200-2026-12-03-rm-sealed-bert-vit-llama", False),
    # BERT + ViT + llama-decode once more (2026-12-03, later): the first run whose alone profiles count the kernels
    # launched through the driver API (cuBLAS's GEMMs; kts_profile.LAUNCH_CATEGORIES) and whose workers probed the
    # host's speed (analyse.hostspeed). Measured with the model frozen; its logs were read for the host-speed
    # analysis before it was scored, and no model number moved after.
    ("h200-2026-12-03-rm-host-bert-vit-llama", False),
    # After the CUPTI teardown (workers/kts_profile.py, 2026-12-03): every run above profiled its alone tenants and
    # left CUPTI attached, so their alone times carry CUPTI's per-launch callbacks (the launch-bound steps ran 9-64 %
    # slower after a profile than before it in a fresh process; see docs/methods/planner.md), which is why every
    # real-model tenant read faster shared than alone. Measured with the model frozen as it stands (no model number
    # moved since 1957063), unread until scored once. llama-train was cut by the GPU call's time limit during its
    # last alone block (train-step r2, no record, empty logs): train-step is predicted from its r1 block alone.
    ("h200-2026-12-03-rm-cupti-llama-train", False),
    # BERT + ViT + llama-decode after the teardown, the same way (300 iterations a tenant, to fit the session's last
    # GPU time), complete; measured after the llama-train run was scored, with nothing changed in between.
    ("h200-2026-12-03-rm-cupti-bert-vit-llama", False),
    # The two Llama servers after the teardown (2026-12-03, the next session): the same way, 300 iterations a tenant,
    # complete; the article profile's design at that size gave 3 alone blocks around 2 shared ones per sharing.
    # Measured after the two runs above were scored, with nothing changed in between; unread until scored once.
    ("h200-2026-12-03-rm-cupti-two-llama", False),
    # Two inference services next to the training step (BERT + ViT + train-step, 2026-12-04, the next session): a
    # configuration no developer run had, the same way (300 iterations a tenant; 3 alone blocks around 2 shared ones
    # per sharing), complete; measured and scored once with the model as it was for the runs above.
    ("h200-2026-12-04-rm-cupti-bert-vit-train", False),
    # Issue 51's sealed runs (2026-12-06, one NVIDIA H100 80GB HBM3, under MPS only, in the warm design: 9 alone blocks
    # under the MPS server around 8 shared blocks, 200 iterations a tenant): a serving decode next to a training
    # step, the pair whose MPS rows the model had over-predicted about 3x. Measured before the MPS model read kernel
    # lengths, with the profiler's kernel record (kts_profile version 2); committed unread (data/validation, deffd3e),
    # their alone profiles read only to check the record parsed, scored once after the model was frozen (45962a8).
    # Seen from issue 51's third round on: the host's slack, the phases' own host shares and the host-speed scoring
    # were built from these four runs' rows (they were scored once each with the model of their time: 6 of 6 and 3
    # of 6 pooled; docs/methods/planner.md keeps those scores).
    ("h100-2026-12-06-sealed-mps-gpt2-vit", True),
    ("h100-2026-12-06-sealed-mps-whisper-convnext", True),
    # Issue 51's second seal (2026-12-06, a later session, another H100): the two pairs crossed (GPT-2 decode next to
    # ConvNeXt-T training, the Whisper-style decode next to ViT-B/16 training), the same way (warm design, MPS, 200
    # iterations a tenant). Measured with the model unchanged since its freeze (45962a8) and after the first seal was
    # scored, unread until scored once as they are (``KERNEL_SEALED_2``).
    ("h100-2026-12-06-sealed-mps-gpt2-convnext", True),
    ("h100-2026-12-06-sealed-mps-whisper-vit", True),
    # Issue 51's third seal (2026-12-06, a third H100, GPU-9aa03655): the kit's own Llama server (llama-decode) next to
    # a user's ViT-B/16 and ConvNeXt-T training steps, and a user's GPT-2-medium server next to the kit's Llama
    # training step (train-step); the same way (warm design, MPS, 200 iterations a tenant). Measured after the third
    # round's model was frozen (be30337), committed unread, scored once (``KERNEL_SEALED_3``).
    ("h100-2026-12-06-sealed-mps-llama-vit", False),
    ("h100-2026-12-06-sealed-mps-gpt2-train", False),
    ("h100-2026-12-06-sealed-mps-llama-convnext", False),
    # The H100's time-slicing check (``TS_CHECK_H100``): issue 52's three-tenant mix (llama-decode + BERT + ResNet-50,
    # time-slicing, blocks=auto: 8 shared blocks) on an H100 (GPU-1570c1e0, 2026-12-06), never used to tune the
    # model; scored once (2026-12-07) with the H100 probe committed then (data/validation/h100-2026-12-06-probe,
    # another physical H100, GPU-5c780f8d: quantum 2.181 ms, switch 0.180 ms).
    ("h100-2026-12-06-rm-auto", False),
    # The same mix again on a second H100 (GPU-a88b5c0d, 2026-12-07), blocks=auto (8 shared blocks), and shorter (100
    # iterations, 2 blocks: rm-syncs, made to read the tenants' host waits mid-op, ``host_syncs``: 0 for all three);
    # measured with the model as of a090384 and scored once then (2 of 4 each), before the change below: seen.
    ("h100-2026-12-07-rm-auto", True),
    ("h100-2026-12-07-rm-syncs", True),
    # Time-slicing's first seal (2026-12-07, the same H100): five of issue 51's serving-decode-next-to-training pairs
    # under time-slicing, the warm design (9 alone blocks around 8 shared, 200 iterations a tenant; 12 shared blocks
    # for two of them), profiles v3. Measured with the model as of a090384 and scored once (13 of 15 pooled, 125 of
    # 156 block by block): both misses were the Whisper-style encode (+54 %, +61 %), from which the ops' own busy
    # share was built (``timeslice.Op``, 198670d): seen (``TS_SEALED``).
    ("h100-2026-12-07-sealed-timeslice-gpt2-vit", True),
    ("h100-2026-12-07-sealed-timeslice-whisper-convnext", True),
    ("h100-2026-12-07-sealed-timeslice-llama-vit", True),
    ("h100-2026-12-07-sealed-timeslice-gpt2-convnext", True),
    ("h100-2026-12-07-sealed-timeslice-whisper-vit", True),
    # Time-slicing's second seal (2026-12-07, a third H100, GPU-6bff8daf): the Whisper-style server next to the kit's
    # Llama training step (a pair no run had), the GPT-2 server next to it, the kit's Llama server next to ConvNeXt-T
    # training; the same way. Measured after the ops' own busy share was frozen (198670d), scored once
    # (``TS_SEALED_2``).
    ("h100-2026-12-07-sealed-timeslice-whisper-train", False),
    ("h100-2026-12-07-sealed-timeslice-gpt2-train", False),
    ("h100-2026-12-07-sealed-timeslice-llama-convnext", False),
    # Time-slicing's third seal (2026-12-07, later, a fourth H100, GPU-25ac8416): a GPU-bound chain (ResNet-50
    # inference at batch 128: 350 kernels, 14.5 ms, its queue never empties) next to the kit's Llama server and a
    # user's GPT-2 server, the same way. Measured after a GPU-bound chain was made to keep its quantum (f335510: it
    # used to yield at every kernel boundary, and starved at a measured share of 1.0, which the GPT-2 run's ResNet
    # profiled at: 110 %, held to 1), scored once (``TS_SEALED_3``).
    ("h100-2026-12-07-sealed-timeslice-llama-resnet", False),
    ("h100-2026-12-07-sealed-timeslice-gpt2-resnet", False),
    # Issue 52's three-tenant mix once more on that H100 (blocks=auto: 12 shared blocks; its host ran the tenants
    # slower, llama-decode's step 17-19 ms against about 9 on the other cards). Its run id is the script's
    # (h100-2026-12-07-rm-auto, as the run of GPU-a88b5c0d above); the directory carries the card's id, the run's
    # files are as measured. Measured with the model as of f335510, scored once.
    ("h100-2026-12-07-rm-auto-25ac8416", False),
    # Time-slicing's fourth seal (2026-12-07, the next session, a fifth H100, GPU-f56a761c): the GPU-bound chain
    # (ResNet-50 at batch 128) next to the Whisper-style server and next to BERT, and a three-tenant mix no run had
    # (a user's GPT-2 server, BERT, ResNet-50 at its default batch); the same way (warm design, 200 iterations a
    # tenant, blocks=auto). Measured with the model as of f335510 (nothing in it moved since), scored once before any
    # other reading (``TS_SEALED_4``). With them the H100's multi-context probe (h100-2026-12-07-probe-multi-f56a761c,
    # which agrees with the round robin, so the model is unchanged by it).
    ("h100-2026-12-07-sealed-timeslice-whisper-resnet-f56a761c", False),
    ("h100-2026-12-07-sealed-timeslice-bert-resnet-f56a761c", False),
    ("h100-2026-12-07-sealed-timeslice-gpt2-bert-resnet-f56a761c", False),
    # On the same card, to read the host issue time each GPU worker now lists (b52c494): the third seal's llama-resnet
    # pair again, and issue 52's three-tenant mix (llama-decode + BERT + ResNet-50, 6 blocks). Each scored once
    # before its logs were read; the issue-time scoring tried on them was left out (docs/methods/statistics.md),
    # nothing in the model moved.
    ("h100-2026-12-07-sealed-timeslice-llama-resnet-f56a761c", False),
    ("h100-2026-12-07-issue-rm-auto-f56a761c", False),
)
# time-slicing on the H100 with real models: issue 52's three-tenant mix, with the card model's own probe
TS_CHECK_H100 = ("h100-2026-12-06-rm-auto", "h100-2026-12-07-rm-auto", "h100-2026-12-07-rm-syncs",
                 "h100-2026-12-07-rm-auto-25ac8416", "h100-2026-12-07-issue-rm-auto-f56a761c")
# time-slicing's first seal: a serving decode next to a training step (scored once, then built on: seen)
TS_SEALED = ("h100-2026-12-07-sealed-timeslice-gpt2-vit", "h100-2026-12-07-sealed-timeslice-whisper-convnext",
             "h100-2026-12-07-sealed-timeslice-llama-vit", "h100-2026-12-07-sealed-timeslice-gpt2-convnext",
             "h100-2026-12-07-sealed-timeslice-whisper-vit")
# ... and its second, scored once after the ops' own busy share was frozen (198670d)
TS_SEALED_2 = ("h100-2026-12-07-sealed-timeslice-whisper-train", "h100-2026-12-07-sealed-timeslice-gpt2-train",
               "h100-2026-12-07-sealed-timeslice-llama-convnext")
# ... and its third: a GPU-bound chain next to a launch-bound server, scored once after such a chain kept its quantum
# (f335510)
TS_SEALED_3 = ("h100-2026-12-07-sealed-timeslice-llama-resnet", "h100-2026-12-07-sealed-timeslice-gpt2-resnet")
# ... and its fourth (another H100, the model as of f335510): the chain next to two more servers, a three-tenant mix,
# and the llama-resnet pair again
TS_SEALED_4 = ("h100-2026-12-07-sealed-timeslice-whisper-resnet-f56a761c",
               "h100-2026-12-07-sealed-timeslice-bert-resnet-f56a761c",
               "h100-2026-12-07-sealed-timeslice-gpt2-bert-resnet-f56a761c",
               "h100-2026-12-07-sealed-timeslice-llama-resnet-f56a761c")
# issue 51's sealed H100 runs: the kernel-length MPS model's own test (scored once, after its freeze at 45962a8)
KERNEL_SEALED = ("h100-2026-12-06-sealed-mps-gpt2-vit", "h100-2026-12-06-sealed-mps-whisper-convnext")
# ... and its second seal: the same model, scored once on the pairs crossed
KERNEL_SEALED_2 = ("h100-2026-12-06-sealed-mps-gpt2-convnext", "h100-2026-12-06-sealed-mps-whisper-vit")
# ... and the third, the test of the host's slack (issue 51's third round, frozen at be30337): scored once
KERNEL_SEALED_3 = ("h100-2026-12-06-sealed-mps-llama-vit", "h100-2026-12-06-sealed-mps-gpt2-train",
                   "h100-2026-12-06-sealed-mps-llama-convnext")
# where validation runs live that are not reference runs: committed for the table, outside what every test of the
# suite reads (data/reference: each reference runs through the report's analysis in make test)
# The real-model runs whose alone baselines are free of the profiler (CUPTI detached after it): the honest test of
# the model on real models, scored apart from the sealed runs before them.
REAL_AFTER_TEARDOWN = ("h200-2026-12-03-rm-cupti-llama-train", "h200-2026-12-03-rm-cupti-bert-vit-llama",
                       "h200-2026-12-03-rm-cupti-two-llama", "h200-2026-12-04-rm-cupti-bert-vit-train")
REAL_START, REAL_END = "<!-- plan-validation-real:start -->", "<!-- plan-validation-real:end -->"
# the H200 probes behind the multi-context finding (pair probe: quantum and switch; multi: k = 1..3 neighbours)
PROBE_RUNS = ("h200-2026-11-30-probe", "h200-2026-11-30-probe-multi")
# the H100's: its pair probe (2026-12-06) and a multi-context probe on another card (2026-12-07, GPU-f56a761c)
H100_PROBE_RUNS = ("h100-2026-12-06-probe", "h100-2026-12-07-probe-multi-f56a761c")
# Why each miss misses, one line each, written after reading the rows (a test holds these keys equal to the
# misses: a new miss, or a miss that became a hit, fails it). Explanations, not fits: nothing was tuned on the
# untuned runs (the matrix run's collision evidence was read to find the launch-bound LLM mechanism; no number
# of the model came from it).
MISS_REASONS: dict[tuple[str, str, str, str], str] = {
    ("h200-2026-11-30-probe-multi", "multi-short-k1", "hog-short-1", "op"):
        "the short hog's tail: the model charges it two switches around each 5 us tick (p99 1.7 ms), the H200 "
        "hardly any (p99 1.29 vs 1.28 ms kernel): a switch around a tiny kernel costs less than the probe's",
    ("h200-2026-11-30-four-tenants", "shared", "gemm", "op"):
        "p99 under-predicted by a hair (4.12 vs 5.00 ms, +21 %; before the FFT's launch-bound share 4.23, a hit): "
        "the 2.9 ms GEMM outlasts the quantum and its events stretch with three neighbours' slices inside them "
        "more often than the model preempts it (as in hold-four-mixed); the FFTs' queued kernels now take less of "
        "it",
    ("h200-2026-11-30-matrix", "shared-fft+llm", "fft", "op"):
        "p99 under-predicted (0.75 vs 1.07 ms): the FFT's own events stretch next to the LLM (device p99 0.78 vs "
        "0.41 ms next to the GEMM), as if the LLM's kernels ran between cuFFT's; the model has the FFT as one "
        "kernel (as two, it would also yield to the saturating GEMM mid-op, which the saturating reference "
        "refutes)",
    ("h200-2026-11-30-hold-llm-2fft", "shared", "fft-1", "op"):
        "p99 under-predicted (0.59 vs 0.79 ms): with its launches hiding a short wait (engine.GPU_BUSY_SHARE) the "
        "model has the FFT's tail at its alone tail; on the H200 about 1 in 50 launches waited longer behind the "
        "LLM and the other FFT (as in the matrix run's FFT + LLM pair); cause not established",
    ("h200-2026-12-01-hold2-llm-2gemm", "shared", "gemm-1", "op"):
        "the two GEMMs of one 60 ms cadence ran locked (within 2 ms of each other) for the first 46 of 300 cycles, "
        "wall p50 6.0 ms there as the model's 5.85; then the lock broke (at cycle 37 gemm-1 ran 1.5 ms longer than "
        "gemm-2 and their order swapped) and never formed again: p50 3.9 ms after, the GEMMs apart (the model's "
        "own apart state, started 3 ms apart, gives 3.6). The model starts them together and never leaves the lock",
    ("h200-2026-12-01-hold2-llm-2gemm", "shared", "gemm-2", "op"):
        "as gemm-1: locked for the first 46 cycles (p50 6.0 ms), apart after (3.9 ms); the model keeps the lock "
        "(p50 4.1 measured, 5.8 predicted)",
    ("h200-2026-11-30-val-fft-2gemm", "shared", "fft", "op"):
        "the FFT locked at the worst phase (measured p50 3.63 ~ p99 3.71: a full slice and switches behind both "
        "GEMMs); the model draws the lock phase, so its p50 (2.52) sits mid-slice, the measured one far above",
    ("h200-2026-11-30-val-fft-2gemm", "shared-mps", "fft", "op"):
        "next to two saturating GEMMs under MPS the FFT waited more than a whole GEMM kernel (p50 47.9 ms; the "
        "GEMMs' kernels last 43.5 ms when they share): the kernel-boundary queue has it wait only for the kernels "
        "in flight when it arrives (p50 21.5, p99 43.4 ms); how the block scheduler orders two fillers' kernels "
        "and a third client's is not modelled",
    ("h200-2026-11-30-val-llm-gemm-mps", "shared-mps", "llm", "prefill"):
        "p99 by a hair outside its interval (23.04 against [2.86, 22.15] ms): about 1-2 % of the prefills waited "
        "a whole 21.6 ms GEMM kernel (the decode steps' wait), which only some replicates give (point p99 3.30); "
        "the p50 hits (2.13 vs 2.27 ms)",
    ("h200-2026-11-30-hold-four-mixed", "shared", "gemm", "op"):
        "p99 under-predicted (4.78 vs 6.20 ms): the 2.9 ms GEMM outlasts the 2.2 ms quantum and its own events "
        "stretched to 4.8 ms (device p99; 2.9 alone) with three neighbours' slices inside them, more often than "
        "the model preempts it; cause not established in detail",
    ("h200-2026-11-30-hold-llm-2fft", "shared", "fft-2", "op"):
        "as fft-1: p99 0.92 measured against 0.61 predicted (before the FFT's launch-bound share: 0.81, a hit)",
    ("h200-2026-12-01-hold2-fft-gemm-fast", "shared-mps", "fft", "op"):
        "p99 under-predicted (1.36 vs 2.78 ms): under MPS 1-2 % of the FFT's launches waited a whole 2.9 ms GEMM "
        "kernel (device p99 2.64 ms: the wait sits inside its events); the kernel-boundary queue holds an op only "
        "when a GEMM kernel is in flight at its arrival or arrives within its 0.36 ms of launches, rarer than on "
        "the H200",
    ("h200-2026-12-01-hold2-llm-2gemm", "shared", "llm", "decode"):
        "p99 over-predicted (5.66 vs 3.82 ms): the model keeps the two GEMMs locked (the gemm-1 row) and a decode "
        "step that meets them waits both slices; on the H200 the 83 steps that met them while they were locked "
        "reached that wait (p99 5.80 ms), but the lock held for 46 of the 300 cycles",
    ("h200-2026-12-01-hold2-llm-2gemm", "shared", "llm", "prefill"):
        "as decode: the GEMMs the model keeps locked put the prefill's p99 at 6.19 ms (interval [5.14, 6.80]); "
        "measured 4.32, with the lock held for 46 of the 300 cycles",
    ("h200-2026-11-30-repeats", "shared-r1", "fft", "op"):
        "p50 1.47 vs 1.98 ms (-26 %), inside its own interval [0.78, 2.66]: next to the saturating GEMM the FFT's "
        "median is its lock phase against the 2.2 ms slices, which each replicate draws; the point (the "
        "replicates' median) moved with the block bootstrap's draws from 1.68 (a hit) to 1.98",
    ("h200-2026-11-30-hold-sat-fft60", "shared", "fft", "op"):
        "as repeats: p50 1.20 vs 1.60 ms (-25 %), inside its interval [0.69, 2.56]: the median of a drawn lock "
        "phase",
    ("h200-2026-12-01-hold4-llm-sat", "shared", "llm", "decode"):
        "p99 under-predicted (3.96 vs 5.43 ms, +37 %): 2.8 % of the decode steps waited two GEMM slices (wall "
        "above 4.8 ms = 2 x (quantum + switch)), the model's at most one: a 60-kernel step still launching when "
        "its slice ends waits the saturating GEMM's next slice; the model queues its kernels and finishes it "
        "inside one",
    ("h200-2026-12-01-hold4-llm-sat", "shared", "llm", "prefill"):
        "as decode: p99 6.87 measured (120 prefills: their second largest), 5.41 predicted (+27 %); 12 % of the "
        "prefills took more than 4.8 ms, two slices",
}


# Why each real-model miss misses (a test holds the keys equal to the misses). Scored first at the traits' freeze
# (b42d473: 9 of 21), then used to build the host-time term (2026-12-03: an op is host time + GPU time, under MPS
# only the GPU part shares the SMs; the host's drift between moments widens the interval, plan.traits): they are
# tuning data now, not a holdout. What remains are p50 misses the ±25 % rule cannot forgive and no GPU model can
# fix: (1) the alone baseline ran at another host speed than the shared scenario (llama-decode's alone p50 was 24.7,
# 11.3, 14.9 and 15.7 ms in four baselines of one hour); (2) llama-decode next to BERT and ViT ran 52-70 % slower
# than alone under time-slicing *and* under MPS, which has no context switches: not the time-slicing waits at its
# kernel arrivals, something both modes share (the three Python hosts, or the launch path: llama-decode launches a
# kernel about every 20 us, BERT and ViT every 100-135 us), not separable with these runs.
_HOST_DRIFT = ("host-bound step (GPU busy ~{busy} of it): measured faster shared than its own alone run (alone p50 "
               "{alone}); the alone baseline ran at a slower host speed, which a one-block run cannot tell (the "
               "interval carries the drift, the p50 rule is ±25 % of the point)")
_BESIDE_BERT_VIT = ("slower shared ({pct}) next to BERT and ViT, under time-slicing and under MPS alike (MPS: "
                    "{other}); MPS has no context switches, so not the waits at its ~550 kernel arrivals: host or "
                    "launch-path contention between the three processes, or host drift; not separable by this run")
_FASTER_SHARED = ("measured faster shared than both alone blocks around it (alone p50 {alone} ms, shared {shared} ms), "
                  "as every tenant of the batch was (22 of 22 rows, 7-32 %). Found since: each alone block ran "
                  "after its worker's profile, which left CUPTI attached (Kineto's default), so every later launch "
                  "paid CUPTI's callbacks; shared workers do not profile. In fresh processes on the H200 a step ran "
                  "9-64 % slower after such a profile than before it (8 of 8 windows), 0.72-1.06x after one that "
                  "detached CUPTI (12); the first run with CUPTI detached measured llama-decode alone at 10.5 and 12.3 ms "
                  "(20.1-23.7 ms in this batch), every tenant slower or no faster shared. A measurement fault of the "
                  "alone baselines, not a sharing effect; the p50 rule is ±25 % of the point")
_TS_WAITS = ("slower shared under time-slicing than predicted ({pct}; under MPS the same step hit, {mps}): with an "
             "alone baseline the profiler no longer slows, the cost of the training step's slices shows at the "
             "decode step's ~680 kernel arrivals, and the model's waits there fall short; how much is the slices "
             "and how much the host between moments one run cannot tell (its prefill, {prefill}, hit)")
_BERT_TWO_TURNS = ("measured, it waits about one neighbour's turn before its first kernel (wall - device p50 2.52 "
                   "ms; the probe's quantum + switch 2.36 ms) and its events stretch from 3.60 to 5.59 ms: a second "
                   "turn inside the op, after it has run its queued kernels and caught up with its host. The "
                   "simulated op waits 3.45-3.56 ms first (the turns of both neighbours), by when its host has "
                   "launched nearly all of its 3.6 ms of kernels, runs them back to back (1.94 ms) and meets no "
                   "second turn. Why the first wait differs (the round robin's order among three contexts, or how "
                   "long ResNet-50, GPU-busy 89 %, keeps a slice) these runs do not separate; not tuned on them")
REAL_MISS_REASONS: dict[tuple[str, str, str, str], str] = {
    ("h200-2026-12-02-rm-llama-train", "shared", "llama-decode", "prefill"):
        _HOST_DRIFT.format(busy="6 %", alone="29.0 ms"),
    ("h200-2026-12-02-rm-llama-train", "shared", "llama-decode", "decode"):
        _HOST_DRIFT.format(busy="4 %", alone="24.7 ms"),
    ("h200-2026-12-02-rm-llama-train", "shared-mps", "llama-decode", "prefill"):
        _HOST_DRIFT.format(busy="6 %", alone="29.0 ms") + "; the model predicts about its alone time (a step whose GPU work is a few % of it)",
    ("h200-2026-12-02-rm-bert-vit-llama", "shared", "llama-decode", "prefill"):
        _BESIDE_BERT_VIT.format(pct="+69 %", other="+52 %"),
    ("h200-2026-12-02-rm-bert-vit-llama", "shared", "llama-decode", "decode"):
        _BESIDE_BERT_VIT.format(pct="+70 %", other="+53 %"),
    ("h200-2026-12-02-rm-bert-vit-llama", "shared-mps", "llama-decode", "prefill"):
        "as under time-slicing (+52 % here, +69 % there): the model predicts about its alone time (a step whose GPU work is a few % of it)",
    ("h200-2026-12-02-rm-bert-vit-llama", "shared-mps", "llama-decode", "decode"):
        "as under time-slicing (+53 % here, +70 % there): the model predicts about its alone time (a step whose GPU work is a few % of it)",
    ("h200-2026-12-03-rm-sealed-llama-train", "shared", "llama-decode", "decode"):
        _FASTER_SHARED.format(alone="20.07 and 23.69", shared="16.28"),
    ("h200-2026-12-03-rm-sealed-two-llama", "shared-mps", "llama-decode-2", "prefill"):
        _FASTER_SHARED.format(alone="21.58 and 22.72", shared="16.43"),
    ("h200-2026-12-03-rm-sealed-two-llama", "shared-mps", "llama-decode-2", "decode"):
        _FASTER_SHARED.format(alone="19.64 and 20.81", shared="14.69"),
    ("h200-2026-12-03-rm-sealed-bert-vit-llama", "shared", "bert", "op"):
        _FASTER_SHARED.format(alone="9.84 and 11.83", shared="8.40"),
    ("h200-2026-12-03-rm-sealed-bert-vit-llama", "shared", "vit", "op"):
        _FASTER_SHARED.format(alone="10.00 and 10.05", shared="7.18"),
    ("h200-2026-12-03-rm-sealed-bert-vit-llama", "shared", "llama-decode", "prefill"):
        _FASTER_SHARED.format(alone="21.42 and 21.25", shared="15.90"),
    ("h200-2026-12-03-rm-sealed-bert-vit-llama", "shared", "llama-decode", "decode"):
        _FASTER_SHARED.format(alone="19.91 and 19.45", shared="13.73"),
    ("h200-2026-12-03-rm-sealed-bert-vit-llama", "shared-mps", "bert", "op"):
        _FASTER_SHARED.format(alone="9.84 and 11.83", shared="7.72") + "; its p99 (8.31 ms) below the interval too",
    ("h200-2026-12-03-rm-sealed-bert-vit-llama", "shared-mps", "vit", "op"):
        _FASTER_SHARED.format(alone="10.00 and 10.05", shared="7.16") + "; its p99 (8.73 ms) below the interval too",
    ("h100-2026-12-06-rm-auto", "shared", "bert", "op"):
        "slower shared than predicted (p50 10.47 against 6.39 ms, +64 %; alone 3.88 ms): the three tenants lock to one "
        "~10.5 ms cycle (BERT 10.5, ResNet-50 10.7, llama-decode 10.8 ms; those two hit) on a GPU ResNet-50 keeps "
        "98 % busy, and BERT's own events stretched from 3.85 to 10.10 ms: its op was switched out mid-way, both "
        "neighbours' turns inside it. The model splits the op into host and GPU time (GPU-busy 50 %) and its GPU "
        "part (1.9 ms) fits one 2.18 ms quantum, so it waits at most once; measured, its kernels trickle over its "
        "3.9 ms of launches and it waited about two turns. Not host waits mid-op: the mix's second H100 run "
        "(h100-2026-12-07-rm-auto, profile version 3) counts none in BERT's op (``host_syncs`` 0); "
        + _BERT_TWO_TURNS,
    ("h100-2026-12-07-rm-auto", "shared", "bert", "op"):
        "slower shared than predicted (p50 7.97 against 6.27 ms, +27 %; alone 3.63 ms, GPU-busy 56 % of it; 6 of "
        "its 8 blocks missed, +33-40 %), as on the first H100 (+64 %). Its profile (version 3) counts no host wait mid-op "
        "(``host_syncs`` 0), so the bound for those adds nothing; " + _BERT_TWO_TURNS,
    ("h100-2026-12-07-rm-syncs", "shared", "llama-decode", "prefill"):
        "p99 22.65 ms, 4 % above the interval (to 21.68 ms) and +44 % from its point: a short run (2 shared blocks, "
        "100 iterations in all: 100 prefills), whose p99 is its second-largest prefill; its p50 hit, and in the "
        "same mix's 8-block run (h100-2026-12-07-rm-auto) this row's p99 hit",
    ("h100-2026-12-07-rm-syncs", "shared", "llama-decode", "decode"):
        "p99 21.17 ms, 10 % above the interval (to 19.33 ms) and +47 % from its point: the same short run (800 decode "
        "steps in 2 shared blocks); its p50 hit, and in the 8-block run this row's p99 hit",
    ("h100-2026-12-07-issue-rm-auto-f56a761c", "shared", "bert", "op"):
        "slower shared than predicted (p50 8.92 against 6.01 ms, +48 %; alone 5.01 ms), as in the mix's first two H100 "
        "runs (+64 %, +27 %), on a fifth card, scored once. Its clocks show the mechanism: with both neighbours "
        "mid-operation at its arrival (79 % of its ops) it waited 1.34 ms before its first kernel (median; the model "
        "2.85 ms) and its events then ran 6.16 ms (the model 4.03): it starts sooner than the model says and is "
        "switched out inside its op, where the model waits longer and then runs its queued kernels back to back. "
        "Not the host: its issue time did not move (4.95 ms alone, 5.01 shared). The H100's multi-context probe "
        "(this card) holds the round robin next to saturating neighbours, so what the model misses is how long "
        "launch-bound neighbours hold a turn; not tuned on this run",
    ("h100-2026-12-07-issue-rm-auto-f56a761c", "shared", "resnet", "op"):
        "slower shared than predicted (p50 10.20 against 8.07 ms, +26 %, one point past the ±25 % rule; alone 4.78 "
        "ms, at its default batch): as BERT's row, it waited less (0.48 ms median with both neighbours mid-operation, "
        "the model 1.97) and its events ran longer (9.30 ms, the model 8.66); its issue time did not move (4.72 ms "
        "alone, 4.66 shared)",
    ("h200-2026-12-03-rm-cupti-llama-train", "shared", "llama-decode", "decode"):
        _TS_WAITS.format(pct="14.67 against 11.38 ms, +29 %", mps="10.74 against 11.14 ms",
                         prefill="16.35 against 13.64 ms, +20 %"),
}


def agrees(predicted: Any, measured_p50: float, measured_p99: float) -> tuple[bool, bool]:
    """(p50 agrees, p99 agrees): the one rule by which a prediction meets a measured run, in the README's table
    and in ``kts plan --validate``. p99: inside the prediction interval or within ``P99_TOLERANCE``; p50: within
    ``P50_TOLERANCE`` (``predicted``: anything with ``p50_ms``, ``p99_ms``, ``p99_lo``, ``p99_hi``)."""
    p = predicted
    p99_ok = p.p99_lo <= measured_p99 <= p.p99_hi or abs(measured_p99 - p.p99_ms) <= P99_TOLERANCE * p.p99_ms
    return abs(measured_p50 - p.p50_ms) <= P50_TOLERANCE * p.p50_ms, p99_ok


@dataclass(frozen=True)
class Check:
    """One tenant's wall clock in one shared scenario: predicted (with interval) against measured."""

    run: str
    tuned: bool
    scenario: str
    sharing: str
    tenant: str
    n_tenants: int
    predicted: Prediction
    measured_p50: float
    measured_p99: float

    @property
    def p99_ok(self) -> bool:
        return agrees(self.predicted, self.measured_p50, self.measured_p99)[1]

    @property
    def p50_ok(self) -> bool:
        return agrees(self.predicted, self.measured_p50, self.measured_p99)[0]

    @property
    def hit(self) -> bool:
        return self.p99_ok and self.p50_ok

    def why(self) -> str:
        p = self.predicted
        parts = []
        if not self.p50_ok:
            parts.append(f"p50 {self.measured_p50:.3f} vs {p.p50_ms:.3f} ms ({self.measured_p50 / p.p50_ms - 1:+.0%})")
        if not self.p99_ok:
            parts.append(f"p99 {self.measured_p99:.3f} outside [{p.p99_lo:.3f}, {p.p99_hi:.3f}] and "
                         f"{self.measured_p99 / p.p99_ms - 1:+.0%} from {p.p99_ms:.3f} ms")
        return "; ".join(parts)


def measured_wall(run: str | os.PathLike | RunData) -> pd.DataFrame:
    """The report's wall-clock p50/p99 per shared scenario, tenant and phase (co-running iterations only); ``run``:
    its directory, or the run already loaded."""

    table = summarize_frame((run if isinstance(run, RunData) else load_run(run)).iterations, "wall")
    return table[table["kind"] == "shared"][["group", "tenant", "phase", "n", "p50_ms", "p99_ms"]]


def host_speed_factors(data: RunData) -> dict[tuple[str, str, str], float]:
    """Per shared block, tenant and phase: the host speed that block met against the alone blocks its prediction is
    drawn from (``plan.inputs.alone_for``: the same tenant's blocks rK and rK+1 of its mode), as a factor on the wall
    clock -- exp(slope x (log probe shared - mean log probe alone)), the slope the alone blocks' own (wall median per
    host probe, ``analyse.blocks.balance``), held to [0, 1] (a wall cannot follow the host more than in proportion).

    Why: a launch-bound tenant is as fast as the host thread that launches it, and the H100 hosts switch between two
    speeds from one block to the next (a GPT-2 decode step 8.7 ms alone at probe 0.060 ms, 14.3 ms in a shared block
    at 0.076-0.102 ms). A prediction drawn from alone blocks at one speed, scored against a shared block at another,
    charges the host's change to the GPU model. Only where the run's balance check finds the probe balanced between
    alone and shared blocks (sharing did not move it): the verdict's own rule, so no part of sharing's effect is
    adjusted away (``analyse.design.host_balance``). Empty where no tenant probed, or the blocks do not alternate."""
    bal = host_balance(data)
    if bal.empty:
        return {}
    it = data.iterations
    it = it[(it["phase"] != PAD_PHASE) & (it["host_probe_ms"] > 0)]
    out: dict[tuple[str, str, str], float] = {}
    for row in bal.itertuples():
        if not row.adjusted or not math.isfinite(row.wall_slope):
            continue
        slope = min(max(float(row.wall_slope), 0.0), 1.0)
        mine = it[(it["sharing"] == row.sharing) & (it["tenant"] == row.tenant) & (it["phase"] == row.phase)]
        level = {rep: math.log(float(g["host_probe_ms"].median()))
                 for rep, g in mine[mine["kind"] == "baseline"].groupby("repeat")}
        for (scenario, rep), g in mine[mine["kind"] == "shared"].groupby(["scenario", "repeat"]):
            near = [level[r] for r in (rep, rep + 1) if r in level]
            if near:
                out[(str(scenario), str(row.tenant), str(row.phase))] = math.exp(
                    slope * (math.log(float(g["host_probe_ms"].median())) - float(np.mean(near))))
    return out


def at_host_speed(predictions: list[Prediction], factors: dict[tuple[str, str, str], float]) -> list[Prediction]:
    """Each shared block's wall-clock prediction at the host speed that block met (:func:`host_speed_factors`)."""
    out = []
    for p in predictions:
        f = factors.get((p.scenario, p.tenant, p.phase), 1.0)
        out.append(p if f == 1.0 else replace(p, p50_ms=p.p50_ms * f, p50_lo=p.p50_lo * f, p50_hi=p.p50_hi * f,
                                              p99_ms=p.p99_ms * f, p99_lo=p.p99_lo * f, p99_hi=p.p99_hi * f))
    return out


def check_run(run_dir: str | os.PathLike, tuned: bool, *, replicates: int = DEFAULT_REPLICATES) -> list[Check]:
    """Every shared tenant's wall clock of a run: predicted (from alone logs, each block at the host speed it met:
    :func:`host_speed_factors`) against measured."""
    run_dir = Path(run_dir)
    inp = load_plan_input(run_dir)
    data = load_run(run_dir)  # once: the host's speed per block and the measured side
    predictions = [p for p in predict_input(inp, replicates=replicates) if p.metric == "wall"]
    if is_bracketed(inp.manifest):
        predictions = pooled_blocks(at_host_speed(predictions, host_speed_factors(data)))
    measured = measured_wall(data).set_index(["group", "tenant", "phase"])
    sizes: dict[str, set[str]] = {}
    for p in predictions:
        sizes.setdefault(p.scenario, set()).add(p.tenant)
    out = []
    for p in predictions:
        key = (scenario_group(p.scenario), p.tenant, p.phase)
        if key not in measured.index:
            continue
        row = measured.loc[key]
        if isinstance(row, pd.DataFrame):
            row = row.iloc[0]
        out.append(Check(run_dir.name, tuned, p.scenario, p.sharing, p.tenant, len(sizes[p.scenario]), p,
                         float(row["p50_ms"]), float(row["p99_ms"])))
    return out


def block_checks(run_dir: str | os.PathLike, tuned: bool, *, replicates: int = DEFAULT_REPLICATES) -> list[Check]:
    """Every shared block of a run on its own: each block's prediction (from the alone blocks on its two sides)
    against that block's measured wall (co-running iterations), where :func:`check_run` pools the blocks as the
    report does. Why both: issue 51 scored its runs block by block, and a block's measurement holds the host's speed
    of that minute, which the pooled one averages out."""
    run_dir = Path(run_dir)
    inp = load_plan_input(run_dir)
    data = load_run(run_dir)
    its = data.iterations
    out = []
    tables: dict[str, pd.DataFrame] = {}
    wall = [p for p in predict_input(inp, replicates=replicates) if p.metric == "wall"]
    for p in at_host_speed(wall, host_speed_factors(data)) if is_bracketed(inp.manifest) else wall:
        if p.scenario not in tables:  # this block's shared iterations, as the report would measure a one-block run
            t = summarize_frame(its[(its["scenario"] == p.scenario) | (its["kind"] != "shared")], "wall")
            tables[p.scenario] = t[t["kind"] == "shared"]
        row = tables[p.scenario]
        row = row[(row["tenant"] == p.tenant) & (row["phase"] == p.phase)]
        if len(row) == 1:
            size = len(next(s for s in inp.manifest.scenarios if s.name == p.scenario).tenants)
            out.append(Check(run_dir.name, tuned, p.scenario, p.sharing, p.tenant, size, p,
                             float(row["p50_ms"].iloc[0]), float(row["p99_ms"].iloc[0])))
    return out


def block_lines(runs: tuple[str, ...], root: Path = REFERENCE_ROOT) -> list[str]:
    """One line per run, its shared blocks scored one by one (:func:`block_checks`), its misses named."""
    lines = []
    for name in runs:
        where = run_dir_of(name, root)
        if where is None:
            continue
        checks = block_checks(where, False)
        hits = sum(c.hit for c in checks)
        p50 = sum(c.p50_ok for c in checks)
        blocks = len({c.scenario for c in checks})
        misses = "; ".join(f"{c.scenario} {c.tenant} ({c.predicted.phase}): {c.why()}" for c in checks if not c.hit)
        lines.append(f"- {name}, its {blocks} shared blocks one by one: {hits} of {len(checks)} tenant rows hit "
                     f"({hits / len(checks):.0%}), the p50 within 25 % in {p50}" + (f". Misses: {misses}" if misses
                                                                                   else ""))
    return lines


def pooled_blocks(predictions: list[Prediction]) -> list[Prediction]:
    """The bracketed design's shared blocks as the one configuration the report pools: per group, tenant and phase
    the blocks' predictions together (points averaged, the interval from the lowest bound to the highest).

    Why: the measured side pools every shared block (``analyse.summary``), and each block is predicted from its own
    alone neighbours (``plan.inputs.alone_for``); the first block's prediction alone would stand for the run's first
    half while the measurement holds both."""
    groups: dict[tuple[str, str, str], list[Prediction]] = {}
    for p in predictions:
        groups.setdefault((scenario_group(p.scenario), p.tenant, p.phase), []).append(p)
    out = []
    for (group, _tenant, _phase), ps in groups.items():
        out.append(replace(ps[0], scenario=group, n=sum(p.n for p in ps),
                           p50_ms=float(np.mean([p.p50_ms for p in ps])), p50_lo=min(p.p50_lo for p in ps),
                           p50_hi=max(p.p50_hi for p in ps), p99_ms=float(np.mean([p.p99_ms for p in ps])),
                           p99_lo=min(p.p99_lo for p in ps), p99_hi=max(p.p99_hi for p in ps)))
    return out


def _pooled(checks: list[Check]) -> list[Check]:
    """Repeats of one scenario group are one configuration: keep the first repeat's prediction per tenant."""
    seen, out = set(), []
    for c in checks:
        key = (c.run, scenario_group(c.scenario), c.tenant, c.predicted.phase)
        if key not in seen:
            seen.add(key)
            out.append(c)
    return out


def validation_checks(runs: tuple[tuple[str, bool], ...] = VALIDATION_RUNS, root: Path = REFERENCE_ROOT,
                      *, replicates: int = DEFAULT_REPLICATES) -> list[Check]:
    """The checks of every listed run that exists (the integrator adds new H200 runs to ``runs``)."""
    out: list[Check] = []
    for name, tuned in runs:
        run = run_dir_of(name, root)
        if run is not None:
            out += _pooled(check_run(run, tuned, replicates=replicates))
    return out


def run_dir_of(name: str, root: Path = REFERENCE_ROOT) -> Path | None:
    """A validation run's directory: under ``root`` (the references), else under :data:`VALIDATION_ROOT`; None if
    neither holds it."""
    for base in (root, VALIDATION_ROOT):
        if (base / name / "manifest.json").exists():
            return base / name
    return None


def _iv(lo: float, hi: float) -> str:
    return f"[{lo:.2f}, {hi:.2f}]" if math.isfinite(lo) and math.isfinite(hi) else "(no bound)"


def validation_markdown(checks: list[Check], *, reasons: dict[tuple[str, str, str, str], str] | None = None,
                        latest: tuple[str, ...] = LATEST_HOLDOUT, flag: str = "tuned on it?",
                        flagged: str = "runs used to tune", unflagged: str = "runs not used to tune",
                        latest_label: str = "the latest sealed holdout alone (scored after the model's last change)",
                        more: tuple[tuple[str, tuple[str, ...]], ...] = (), heading: str = "###") -> str:
    """The README's validation table, the score against the target, and the misses with their reasons (``more``:
    further (label, runs) whose score is given apart), each under a ``heading`` of its own (the page's table of
    contents and search land on them)."""
    reasons = MISS_REASONS if reasons is None else reasons
    lines = [f"{heading} Every tenant row", "", f"| run (config) | {flag} | sharing | tenants | tenant | phase | predicted p50 [PI] (ms) | "
             "predicted p99 [PI] (ms) | measured p50 / p99 (ms) | hit? |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for c in checks:
        p = c.predicted
        lines.append(f"| {c.run} ({c.scenario}) | {'yes' if c.tuned else 'no'} | {c.sharing} | {c.n_tenants} | "
                     f"{c.tenant} | {p.phase} | {p.p50_ms:.2f} {_iv(p.p50_lo, p.p50_hi)} | "
                     f"{p.p99_ms:.2f} {_iv(p.p99_lo, p.p99_hi)} | {c.measured_p50:.2f} / {c.measured_p99:.2f} | "
                     f"{'hit' if c.hit else 'miss'} |")
    lines += ["", f"{heading} Hit rates", ""]
    unseen = [c for c in checks if not c.tuned]
    by_mode = [(f"{unflagged}, {mode}", [c for c in unseen if c.sharing == mode])
               for mode in dict.fromkeys(c.sharing for c in unseen)]
    held = [c for c in unseen if c.run in latest]
    for label, group in (("all rows", checks), (unflagged, unseen), *by_mode,
                         (latest_label, held),
                         *((label, [c for c in checks if c.run in names]) for label, names in more),
                         (flagged, [c for c in checks if c.tuned])):
        hits = sum(c.hit for c in group)
        share = f"{hits / len(group):.0%}" if group else "n/a"
        lines.append(f"- {label}: {hits} of {len(group)} tenant rows hit ({share}; target ≥ 80 %)")
    misses = [c for c in checks if not c.hit]
    if misses:
        lines += ["", f"{heading} Misses, each with its reason", ""]
        for c in misses:
            why = reasons.get(miss_key(c), "not yet explained")
            lines.append(f"- {c.run} {c.scenario} {c.tenant} ({c.predicted.phase}): {c.why()}. Why: {why}")
    return "\n".join(lines)


def miss_key(c: Check) -> tuple[str, str, str, str]:
    return (c.run, c.scenario, c.tenant, c.predicted.phase)


def multi_context_markdown(checks: list[MultiCheck]) -> str:
    """The multi-context probe against the round robin (measured quantum and switch): the finding, from the data."""
    lines = ["| neighbours | measured wait p50 / p95 / p99 (ms) | round robin p50 / p95 / p99 (ms) | "
             "bound k x (min(kernel, quantum) + switch) (ms) | round robin holds? |", "|---|---|---|---|---|"]
    for c in checks:
        m, r = c.measured_ms, c.round_robin_ms
        lines.append(f"| {c.k} x {c.length} ({c.kernel_ms:.2f} ms) | {m[0]:.2f} / {m[1]:.2f} / {m[2]:.2f} | "
                     f"{r[0]:.2f} / {r[1]:.2f} / {r[2]:.2f} | {c.bound_ms:.2f} | {'yes' if c.holds else 'no'} |")
    held = sum(c.holds for c in checks)
    lines.append("")
    lines.append(f"Finding: the round robin with the measured quantum and switch reproduces {held} of {len(checks)} "
                 "configurations (p50 and p95 within 20 % or 0.2 ms). A holder whose kernels are shorter than the "
                 "quantum yields at its kernel boundary when another context waits (waits up to k x (kernel + "
                 "switch)); a longer one keeps the GPU to the end of its slice (up to k x (quantum + switch)). "
                 + ("The engine keeps the round robin (no measured waits drawn)." if held == len(checks) else
                    "The engine draws the measured waits where it does not hold."))
    return "\n".join(lines)


def readme_block(readme: str | os.PathLike, start: str = START, end: str = END) -> str:
    """The text between the README's validation markers."""
    text = Path(readme).read_text()
    if start not in text or end not in text:
        raise ValueError(f"{readme} has no {start} ... {end} block")
    return text.split(start, 1)[1].split(end, 1)[0].strip()


def readme_markdown(runs: tuple[tuple[str, bool], ...] = VALIDATION_RUNS, root: Path = REFERENCE_ROOT) -> str:
    """What belongs between the README's validation markers (``VALIDATION_RUNS`` that exist, fixed seeds), and
    the multi-context probe's finding when both probes are committed."""
    text = validation_markdown(validation_checks(runs, root))
    pair, multi = (root / name for name in PROBE_RUNS)
    if (pair / "manifest.json").exists() and (multi / "manifest.json").exists():
        text += ("\n\n### The multi-context probe against the round robin\n\nThe multi-context probe (" + multi.name
                 + ") against the round robin:\n\n" + probe_against_round_robin(pair, multi))
    return text


def probe_against_round_robin(pair: Path, multi: Path) -> str:
    """A multi-context probe read against the round robin with its card model's pair probe (quantum and switch): the
    table and the finding (the H200's under the validation table, the H100's in the real-model block)."""
    gpu = gpu_model_from_probe(str(pair), "")
    return multi_context_markdown(multi_context_checks(multi, gpu.quantum_ms.value, gpu.switch_ms.value,
                                                       gpu.slice_timer))


def write_readme_block(readme: str | os.PathLike, markdown: str, start: str = START, end: str = END) -> None:
    """Replace the README's validation block with ``markdown`` (atomically; the markers must exist)."""

    text = Path(readme).read_text()
    readme_block(readme, start, end)  # the markers exist
    head, rest = text.split(start, 1)
    tail = rest.split(end, 1)[1]
    atomic_write_text(Path(readme), f"{head}{start}\n{markdown}\n{end}{tail}")


def real_model_markdown(runs: tuple[tuple[str, bool], ...] = REAL_MODEL_RUNS, root: Path = REFERENCE_ROOT, *,
                        checks: list[Check] | None = None) -> str:
    """The real-model block: the same rule and table, its own runs, reasons and score (``checks``: already made)."""
    sealed = tuple(name for name, seen in runs if not seen)
    checks = validation_checks(runs, root) if checks is None else checks
    table = validation_markdown(checks, reasons=REAL_MISS_REASONS, latest=tuple(r for r in REAL_AFTER_TEARDOWN
                                                                                if r in sealed),
                                flag="seen before the freeze?", flagged="runs seen before the freeze",
                                unflagged="sealed runs",
                                latest_label="sealed runs measured after the CUPTI teardown (alone baselines the "
                                             "profiler no longer slows)",
                                more=(("time-slicing's fourth seal (ResNet-50 at batch 128 next to two more "
                                       "servers, a three-tenant mix, the llama-resnet pair again, a fifth H100; "
                                       "scored once, the model as of f335510)", tuple(r for r in TS_SEALED_4
                                                                                    if r in sealed)),
                                      ("[issue 51](../changelog.md#issue-51)'s third seal (a serving decode next to "
                                       "a training step under MPS, a third H100; scored once, after the host's slack "
                                       "was frozen at be30337)", tuple(r for r in KERNEL_SEALED_3 if r in sealed)),
                                      ("its first two seals, now seen (the third round was built from them; each was "
                                       "scored once with the model of its time, 6 of 6 and 3 of 6)",
                                       KERNEL_SEALED + KERNEL_SEALED_2),
                                      ("time-slicing's third seal (a GPU-bound chain, ResNet-50 at batch 128, next "
                                       "to a serving decode, an H100; scored once, after such a chain kept its "
                                       "quantum at f335510)", tuple(r for r in TS_SEALED_3 if r in sealed)),
                                      ("time-slicing's second seal (a serving decode next to a training step, an "
                                       "H100; scored once, after the ops' own busy share was frozen at 198670d)",
                                       tuple(r for r in TS_SEALED_2 if r in sealed)),
                                      ("time-slicing's first seal, now seen (the ops' own busy share was built from "
                                       "its two misses; scored once before it, 13 of 15)", TS_SEALED),
                                      ("time-slicing on the H100 ([issue 52](../changelog.md#issue-52)'s three-tenant "
                                       "mix, with the card model's probe)", TS_CHECK_H100)),
                                heading="####")
    third = "\n".join(block_lines(tuple(r for r in KERNEL_SEALED_3 if r in sealed), root))
    seen = "\n".join(block_lines(KERNEL_SEALED + KERNEL_SEALED_2, root))
    ts_fourth = "\n".join(block_lines(tuple(r for r in TS_SEALED_4 if r in sealed), root))
    ts_third = "\n".join(block_lines(tuple(r for r in TS_SEALED_3 if r in sealed), root))
    ts_second = "\n".join(block_lines(tuple(r for r in TS_SEALED_2 if r in sealed), root))
    ts_first = "\n".join(block_lines(TS_SEALED, root))
    h100_ts = "\n".join(block_lines(TS_CHECK_H100, root))
    return (f"{table}\n\n[Issue 51](../changelog.md#issue-51)'s sealed runs block by block (the issue's unit), the "
            f"third seal (scored once):\n\n{third}\n\nThe first two seals, seen (the third round was built from "
            f"them):\n\n{seen}\n\nTime-slicing's fourth seal, block by block (scored once):\n\n{ts_fourth}\n\n"
            f"Time-slicing's third seal, block by block (scored once):\n\n{ts_third}\n\n"
            f"Time-slicing's second seal, block by block (scored once):\n\n{ts_second}\n\n"
            f"Time-slicing's first seal, block by block (seen: the ops' own busy share was built from it):\n\n"
            f"{ts_first}\n\nTime-slicing on the H100, the three-tenant mix, block by block:\n\n{h100_ts}\n\n"
            f"{h100_multi_markdown()}{alone_profiles_markdown(runs, root)}")


def h100_multi_markdown() -> str:
    """The H100's multi-context probe against the round robin (its pair probe's quantum and switch), as the H200's
    below the validation table; empty where either probe is not committed."""
    pair, multi = (run_dir_of(name) for name in H100_PROBE_RUNS)
    if pair is None or multi is None:
        return ""
    return (f"#### The H100's multi-context probe against the round robin\n\n{multi.name} (quantum and switch from "
            f"{pair.name}, another physical H100):\n\n{probe_against_round_robin(pair, multi)}\n\n")


def alone_profiles_markdown(runs: tuple[tuple[str, bool], ...] = REAL_MODEL_RUNS, root: Path = REFERENCE_ROOT) -> str:
    """Each real-model run's tenants alone: wall p50/p99 of the timed iterations and what their profile measured
    (``analyse.profiles.profile_rows``: kernels per op, the kernels' time over the timed wall, the SM share of their
    grids, peak memory, the profiling's cost in run time, whether CUPTI was detached after it and the p50 just after
    it over just before)."""
    lines = ["| run | tenant | phase | n | wall p50 / p99 (ms) | kernels per op | GPU-busy share | SM share | "
             "peak memory (MiB) | profiling cost (s) | CUPTI detached | after / before profile |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]

    def num(v: float, fmt: str) -> str:
        return format(v, fmt) if np.isfinite(v) else "n/a"

    for name, _seen in runs:
        where = run_dir_of(name, root)
        if where is None:
            continue
        run = open_run(where)
        for sc in run.read().scenarios:
            if sc.kind != "baseline":
                continue
            for t in sc.tenants:
                parsed = parse_file(run.log_path(sc.name, t.name))
                frame = parsed.frame[parsed.frame["phase"] != PAD_PHASE]
                prof = next((m["profile"] for m in parsed.meta if isinstance(m.get("profile"), dict)), {})
                walls = {str(ph): g["wall_ms"].to_numpy(float) for ph, g in frame.groupby("phase", sort=False)}
                for r in profile_rows(prof, walls):
                    detached = {True: "yes", False: "no"}.get(r["cupti_detached"], "n/a") if prof else "n/a"
                    lines.append(f"| {name} | {t.name} | {r['phase']} | {r['n']} | {r['wall_p50_ms']:.2f} / "
                                 f"{r['wall_p99_ms']:.2f} | {num(r['kernels_per_op'], '.0f')} | "
                                 f"{num(r['busy_share'], '.1%')} | {num(r['sm_share'], '.2f')} | "
                                 f"{num(r['peak_mib'], '.0f')} | {num(r['cost_s'], '.1f')} | {detached} | "
                                 f"{num(r['residue'], '.2f')} |")
    return "\n".join(lines)
