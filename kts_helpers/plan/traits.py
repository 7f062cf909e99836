"""What the simulator needs to know about a tenant's kernels: measured from its alone profile, or a documented fallback.

Why its own module: the planner's mechanisms (a launch-bound step's kernel boundaries and busy share under
time-slicing; under MPS a tenant's claim on the SMs, the share of the SMs at which it reaches its alone speed, and
whether its kernels fill the GPU) used to be constants keyed by workload name, so a tenant named anything else had
no model and a 4096^2 FFT's number was used for any FFT. Now each tenant carries :class:`TenantTraits`, taken from
the profile its alone run recorded (``workers/kts_profile.py``, in the baseline log's ``KTS_META``):

* ``kernels``: kernels per operation (calls-weighted over its phases) -- a waiting context gets the GPU at the
  kernel boundary where a launch-bound op has caught up with its launches, not at its slice end (a GPU-bound op's
  queue never empties: its quantum ends its turn);
* ``busy_share``: the op's kernel time over its *timed* alone wall (the profiled wall is slowed by the profiler):
  queued kernels make up a neighbour's slice at 1 / share speed, and under MPS a launch-bound op claims SMs only
  while its kernels are in flight;
* ``sm_need``: the kernel-time-weighted share of the SMs its grids occupy (min(1, blocks / SMs)): on that share it
  reaches its alone speed;
* ``mps_weight``: its claim on the SMs next to a neighbour that claims them all (weight 1): ``sm_need x
  busy_share``;
* ``fills_gpu``: an op of **one** kernel (``kernels`` 1: the op is the kernel, cuBLAS' large GEMMs) that fills the
  SMs with at least half its time, busy at least half the op: uncapped under MPS, a neighbour's kernel waits for
  its op's end, simulated exactly (``plan.mps``'s kernel-boundary queue). An op of many kernels is no such filler;
* ``blocking`` (issue 51): its kernels that fill the SMs, as a neighbour under MPS meets them -- (length, how many
  per ms of its op) per length bin of its profile's kernel record (``workers/kts_profile.kernel_record``: the
  kernels of at least one wave leave no SM room for another client's block). A neighbour's kernel that arrives
  during one waits the rest of it (``plan.mps.kernel_waits``), not the op. Why: a training step is ~1000 kernels of
  a few to a few hundred us; taken as one filler kernel of the step's length, a serving decode next to ViT-B/16's
  step waited a whole step per op and was predicted 3x too slow on the H100 (issue 51's table);
* ``kernel_record``: whether the profile held that record (True), lacked it (False: every profile made before
  ``kts_profile`` version 2, or one whose Kineto fields could not be read) -- then how long its kernels hold the
  SMs is unknown, the prediction says so and widens its neighbours' intervals up to the bound its op-level numbers
  allow (``unknown_block_share``), and guesses nothing -- or None (no profile).

These rules are stated, not fitted: the first real-model batch was measured before they were written and scored
once after (``plan.validation``, its own block). A run without profiles (the committed fft/gemm/llm references,
foreign logs) gets the **documented fallbacks** below, keyed by the kit's own workload names -- the only
name-keyed constants in ``plan/`` (``FALLBACK_CONSTANTS``; ``tests/test_plan_inputs.py`` checks it) -- and a
workload they do not name gets a generic tenant: one kernel per op that keeps the GPU busy and needs every SM.
The planner says which tenants fell back (``TenantTraits.source``).

**The host-time term** (issue 31, 2026-12-03). A profiled op's time is a host part (``host_share`` = 1 - busy share:
the Python launch work between its kernels) and a GPU part (``busy_share``). Why: the real models on the H200 are
host-bound (their kernels keep the GPU busy 4-19 % of the op), and a GPU neighbour slows only the GPU part. Under
MPS the fluid share stretches only the GPU part (``plan.mps.MpsTenant.host_share``): the old model stretched the
whole of llama-decode's step by its small SM share and said 90-100 ms where the H200 measured 19-21 ms. Under
time-slicing the waits already fall at the tenant's kernel arrivals (``plan.timeslice``: a launch-bound op keeps
launching while it waits, its queued kernels then run back to back, and it cannot end before its last launch).
The host's own speed drifts between processes: the same llama-decode step alone had p50 24.7, 11.3, 14.9 and 15.7
ms in four baselines of one hour (log-sd 0.32 decode, 0.35 prefill; 0.37 per unit of host share, pooled; the
p99's 0.28), and several tenants measured faster shared than alone. :func:`host_drift` turns that into a spread the
prediction interval carries (``plan.engine.widened``): measured between a tenant's own alone blocks (the
bracketed design, issue 30) and shrunk towards the prior with one degree of freedom (two blocks agreeing within 3 %
are no proof the shared block sat with them: rm-two-llama's two alone blocks agreed within 4 % and its shared block
ran 20 % faster); with one block the prior alone, scaled by the host share. A tenant without a profile has no
measured split (``host_share`` 0): its validated behaviour (the fft/gemm/llm table) is unchanged.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

# -- the documented fallbacks (runs without profiles): measured on the kit's own workloads ---------------------
# How hard a workload's kernels claim SMs under MPS next to a GEMM (weight 1): the FFT's share next to the
# saturating GEMM on the H200 (device p50 0.36 ms alone -> 7.9 ms under MPS: a share of 4.6 %; tuned on
# data/reference/h200-2026-11-30-saturating). The LLM's small launch-bound kernels are taken to claim like
# the FFT's (not measured: a prediction to check), and claim only while their kernels are in flight: the LLM's
# weight is scaled by its BUSY_SHARE (next to the LLM and another FFT the H200's FFT ran at about its alone speed
# under MPS, hold-llm-2fft: p50 0.48 vs 0.51 ms alone, where the full weight held it at 0.69; flagged tuned).
# Next to an uncapped GEMM these weights no longer decide (the kernel-boundary queue, FILLS_GPU, does); they share
# the SMs among the others, and among everyone next to a GEMM capped by its thread percentage.
MPS_WEIGHTS = {"gemm": 1.0, "fft": 0.028, "llm": 0.048, "noop": 0.048}
MPS_WEIGHTS_TUNED_ON = "h200-2026-11-30-saturating"  # the lesson calibrates its MPS model on the same run
# The share of the SMs on which a workload's kernels reach their alone speed (``plan.mps.MpsTenant.sm_need``; 1
# where not listed). The FFT is bandwidth-bound: 60 % of the SMs give it its alone speed (fitted on the two
# mps-limited runs: next to a GEMM capped at 50 % it ran at about 0.8 of its alone speed, 0.62-0.65 ms against
# 0.50-0.56 ms), so its weight above is the one that, at this need, keeps its 4.6 % speed next to the saturating
# GEMM (a share of 2.7 %).
# The LLM's kernels (a few thread blocks each) reach their alone speed on a quarter of the SMs: capped at 33 and
# 25 % (plan-validate-matrix-n3/-n4) it kept (beat) its alone step time, and two LLMs under MPS ran at about their
# alone speed (hold3-2llm); set after reading those runs (flagged tuned).
SM_NEED = {"fft": 0.6, "llm": 0.25}
# Workloads whose kernels fill every SM for many waves (cuBLAS GEMMs): uncapped under MPS, another client's kernel
# waits for their kernel boundary (``plan.mps``, the kernel-boundary queue). Found on the saturating runs at four
# FFT cadences (saturating, repeats-mps, hold-sat-fft60, hold3-sat-fft2k) and the LLM next to the saturating GEMM
# (val-llm-gemm-mps), all flagged tuned; it replaces the FFT's fitted MPS weight next to a GEMM.
FILLS_GPU = frozenset({"gemm"})
# How many kernels one operation launches (workers/kts_worker.py), where more than one: an LLM step is a chain
# of launch-bound kernels (embedding, mask, 4 encoder layers of about a dozen kernels each, head, argmax, cat:
# about 60), so under time-slicing a waiting context gets the GPU at the step's next kernel boundary, not at
# its slice end. A GEMM is one cuBLAS kernel; the FFT (cuFFT, 0.36 ms, far below the quantum) is taken as one.
KERNELS_PER_OP = {"llm": 60}
# The share of a launch-bound step's time its kernels keep the GPU busy (not measured: the alone logs time the
# step, not its kernels): the LLM's kernels (128 tokens, d_model 512) last a few us against 30-50 us per launch
# (a 1.9-2.9 ms step over about 60 launches). Its queued kernels make up a neighbour's slice at 1 / share speed.
BUSY_SHARE = {"llm": 0.2}
# Measured per GPU model (the probe's gpu_name; ``GpuModel.busy_share``): the FFT (torch.fft.fft2: a few cuFFT
# kernels) is partly launch-bound too: alone its events span 0.32-0.36 ms, queued behind a busy neighbour its
# kernels run back to back in 0.213-0.216 ms (device p50 in every time-sliced hold-* run; share 0.6), while its wall
# stays its alone wall (0.46-0.49 ms shared against 0.44-0.51 alone): a wait shorter than its launches (about 0.14
# ms) hides inside them. Not a faster (warm) clock: that would shorten the wall as well. Under MPS (no wait) it
# keeps its alone device time (hold-llm-2fft: 0.35 against 0.36 ms).
GPU_BUSY_SHARE = {"NVIDIA H200": {"fft": 0.6}}

# The documented fallbacks: the only constants of plan/ keyed by workload name (a test holds this list).
FALLBACK_CONSTANTS = ("MPS_WEIGHTS", "SM_NEED", "FILLS_GPU", "KERNELS_PER_OP", "BUSY_SHARE", "GPU_BUSY_SHARE")
FILL_SHARE = 0.5  # ``fills_gpu``: this share of kernel time in kernels of >= 2 waves (workers/kts_profile.FILL_WAVES;
# with a kernel record, of >= 1 wave: the record's own ``full_share``) ...
BUSY_FILLS = 0.5  # ... and busy at least this share of the op
MIN_BUSY = 0.01  # a share below this is a profile that saw almost nothing; it is held here
# The host's drift between processes, log-sd per unit of host share, (p50, p99): the four llama-decode baselines of
# the 2026-12-02 real-model batch (rm-llama-train, rm-bert-vit-llama, rm-two-llama x 2; decode and prefill pooled,
# host share 0.86-0.96): p50 0.37, p99 0.28. The kit's own GPU-bound tenants drift far less between blocks (the
# repeats and *-blocks runs: FFT 0.01-0.05, GEMM < 0.01), as the host share predicts.
HOST_DRIFT_PRIOR = (0.37, 0.28)
PRIOR_DF = 1  # the prior's weight against the measured blocks' spread, in degrees of freedom


@dataclass(frozen=True)
class TenantTraits:
    """A tenant's kernels as the simulators need them, and where the numbers came from."""

    kernels: int = 1
    busy_share: float = 1.0
    mps_weight: float = 1.0
    sm_need: float = 1.0
    fills_gpu: bool = False
    source: str = "generic"  # "profile", "fallback" (the documented constants) or "generic"
    # its kernels that fill the SMs: (length ms, how many per ms of its op at its alone pace), from the kernel record
    blocking: tuple[tuple[float, float], ...] = ()
    kernel_record: bool | None = None  # the profile held the kernel-level record (None: no profile)
    # each phase's own busy share (its kernel time over its timed alone wall): an encode of long kernels and a decode
    # of short ones in one op loop have different host shares, which ``busy_share`` (calls-weighted) averages away;
    # MPS reads them as ``phase_host_shares``, time-slicing as each op's own share (``timeslice.Op.busy_share``)
    phase_busy: tuple[tuple[str, float], ...] = ()
    # each phase's host waits for the device mid-op (the profile's ``host_syncs``, p50 per op; version 3); None where
    # the profile did not count them (made before version 3)
    phase_syncs: tuple[tuple[str, float], ...] | None = None
    # its kernels' time over its timed alone wall before ``busy_share`` holds it to 1 (nan without a profile): above 1
    # the profiled kernels outlast the timed op (timed under the profiler, or on concurrent streams), said, not hidden
    busy_measured: float = math.nan

    def syncs_of(self, phase: str) -> float:
        """The host's waits for the device in the middle of one op of ``phase`` (0 where none were counted)."""
        return dict(self.phase_syncs or ()).get(phase, 0.0)

    @property
    def host_share(self) -> float:
        """The op's share that is host time, which no GPU neighbour slows: measured (1 - busy share) for a
        profiled tenant; 0 without a profile (no measured split: the fallbacks' validated behaviour)."""
        return 1.0 - self.busy_share if self.source == "profile" else 0.0

    @property
    def phase_host_shares(self) -> tuple[tuple[str, float], ...]:
        """Each profiled phase's host share (1 - its busy share); empty without a profile (``host_share``)."""
        return tuple((ph, 1.0 - b) for ph, b in self.phase_busy) if self.source == "profile" else ()

    @property
    def unknown_block_share(self) -> float:
        """Where its kernel lengths are unknown (a profile of many kernels per op without the kernel record): the
        most of a neighbour's time its kernels can hold the SMs -- its busy share times its SM share (a kernel fills
        the SMs only if its grid has a block for each: ``sm_need`` is the kernel-time-weighted min(1, blocks / SMs),
        at least the share of its kernel time in kernels that fill them), which is its MPS weight. 0 where known."""
        if self.kernel_record is not False or self.kernels <= 1 or self.fills_gpu:
            return 0.0
        return self.mps_weight


def fallback_traits(workload: str, gpu_busy_share: Mapping[str, float] | None = None) -> TenantTraits:
    """The documented fallbacks for a tenant without a profile (``gpu_busy_share``: this GPU model's entries of
    :data:`GPU_BUSY_SHARE`). Exactly the numbers the planner used before profiles existed."""
    gpu = dict(gpu_busy_share or {})
    named = workload in MPS_WEIGHTS or workload in SM_NEED or workload in KERNELS_PER_OP or workload in gpu
    return TenantTraits(kernels=KERNELS_PER_OP.get(workload, 1),
                        busy_share=gpu.get(workload, BUSY_SHARE.get(workload, 1.0)),
                        mps_weight=MPS_WEIGHTS.get(workload, 1.0) * BUSY_SHARE.get(workload, 1.0),
                        sm_need=SM_NEED.get(workload, 1.0), fills_gpu=workload in FILLS_GPU,
                        source="fallback" if named else "generic")


def traits_from_profile(profile: Mapping[str, Any], alone_wall_p50: Mapping[str, float]) -> TenantTraits | None:
    """A tenant's traits from its recorded profile (``KTS_META.profile``) and its timed alone wall p50 per phase;
    None where the profile holds no kernel (a failed profile is no evidence)."""
    phases = {ph: v for ph, v in (profile.get("phases") or {}).items()
              if v.get("calls") and v.get("kernels_per_op") and ph in alone_wall_p50}
    if not phases:
        return None
    calls = {ph: float(v["calls"]) for ph, v in phases.items()}
    total = sum(calls.values())
    kernels = sum(calls[ph] * float(v["kernels_per_op"]) for ph, v in phases.items()) / total
    busy = sum(calls[ph] * float(v.get("busy_ms") or 0.0) for ph, v in phases.items())
    wall = sum(calls[ph] * float(alone_wall_p50[ph]) for ph in phases)
    busy_share = min(max(busy / wall if wall > 0 else 1.0, MIN_BUSY), 1.0)
    phase_busy = tuple((ph, min(max(float(v.get("busy_ms") or 0.0) / float(alone_wall_p50[ph]), MIN_BUSY), 1.0))
                       for ph, v in phases.items() if float(alone_wall_p50[ph]) > 0)
    weighted = [(float(v["sm_share"]), float(v.get("busy_ms") or 0.0) * calls[ph]) for ph, v in phases.items()
                if v.get("sm_share") is not None]
    kt = sum(w for _, w in weighted)
    sm_need = sum(s * w for s, w in weighted) / kt if kt > 0 else 1.0
    blocking, full_share = kernel_blocking(phases, alone_wall_p50)
    if full_share is None:  # no kernel record: the op-level share of >= 2-wave kernels, as before the record
        fills = [(float(v["fill_share"]), float(v.get("busy_ms") or 0.0) * calls[ph]) for ph, v in phases.items()
                 if v.get("fill_share") is not None]
        ft = sum(w for _, w in fills)
        full_share = sum(f * w for f, w in fills) / ft if ft > 0 else 0.0
    sm_need = min(max(sm_need, 0.01), 1.0)
    n = max(1, round(kernels))
    # an op of one kernel that fills the SMs queues its neighbours at its end (simulated exactly); an op of many
    # kernels holds the SMs one kernel at a time (``blocking``)
    fills_gpu = n == 1 and full_share >= FILL_SHARE and busy_share >= BUSY_FILLS
    syncs = tuple((ph, float(v["host_syncs"])) for ph, v in phases.items() if v.get("host_syncs") is not None)
    return TenantTraits(kernels=n, busy_share=busy_share, mps_weight=sm_need * busy_share, sm_need=sm_need,
                        fills_gpu=fills_gpu, source="profile",
                        blocking=() if fills_gpu or blocking is None else blocking,
                        kernel_record=blocking is not None, phase_busy=phase_busy,
                        phase_syncs=syncs if len(syncs) == len(phases) else None,
                        busy_measured=busy / wall if wall > 0 else math.nan)


def kernel_blocking(phases: Mapping[str, Mapping[str, Any]], alone_wall_p50: Mapping[str, float]
                    ) -> tuple[tuple[tuple[float, float], ...] | None, float | None]:
    """(its kernels that fill the SMs as (length ms, how many per ms of its op), the share of its kernel time in
    them) from each phase's kernel record; (None, None) where a phase lacks the record or a bin its fill.

    Per log2 length bin of the record's ``hist`` ([upper ms, n, total ms, occupancy, full share]): n x full share
    kernels (the bin's time share in kernels of >= 1 wave; within one bin, whose lengths differ by at most 2x, the
    count share) of the bin's mean length, over the op time the profiled calls take at the *timed* alone pace (the
    phase's calls x its timed alone wall p50; the profiler slows the host, not the kernels)."""
    time = sum(float(v["calls"]) * float(alone_wall_p50[ph]) for ph, v in phases.items())
    out: list[tuple[float, float]] = []
    full = total = 0.0
    for v in phases.values():
        record = v.get("kernels")
        if not isinstance(record, Mapping) or not isinstance(record.get("hist"), list) or time <= 0:
            return None, None
        for row in record["hist"]:
            _upper, n, ms, _occ, share = row
            if not n:
                continue
            if share is None:  # a bin whose kernels' waves the trace could not say: not known, not guessed
                return None, None
            total += float(ms)
            full += float(ms) * float(share)
            if share > 0 and ms > 0:
                out.append((float(ms) / float(n), float(n) * float(share) / time))
    return tuple(out), (full / total if total > 0 else 0.0)


def host_drift(blocks: Sequence[Mapping[str, tuple[float, float]]], host_share: float
               ) -> dict[str, tuple[float, float]]:
    """Per phase, the log-sd (p50, p99) by which a shared block's host speed may sit off its alone blocks.

    ``blocks``: each alone block's {phase: (p50, p99)} wall, in ms. Measured: the sd of the blocks' log p50 and log
    p99 (k - 1 degrees of freedom), pooled with the prior (``HOST_DRIFT_PRIOR`` x ``host_share``, ``PRIOR_DF``
    degrees of freedom); one block: the prior alone. Without a prior (``host_share`` 0: no profile) the measured
    spread alone, and nothing from one block.
    """
    prior = (HOST_DRIFT_PRIOR[0] * host_share, HOST_DRIFT_PRIOR[1] * host_share)
    out: dict[str, tuple[float, float]] = {}
    for phase in dict.fromkeys(ph for b in blocks for ph in b):
        vals = [b[phase] for b in blocks if phase in b and min(b[phase]) > 0]
        k = len(vals)
        sds = []
        for q in (0, 1):
            logs = [math.log(v[q]) for v in vals]
            ss = sum((x - sum(logs) / k) ** 2 for x in logs) if k else 0.0
            df = (k - 1 if k > 1 else 0) + (PRIOR_DF if prior[q] > 0 else 0)
            sds.append(math.sqrt((ss + PRIOR_DF * prior[q] ** 2 * (prior[q] > 0)) / df) if df else 0.0)
        if any(sds):
            out[phase] = (sds[0], sds[1])
    return out
