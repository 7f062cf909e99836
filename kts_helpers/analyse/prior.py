"""The drift prior by tenant kind: how far a tenant's speed may move between blocks where a run cannot measure it.

Why: a run with one alone block (foreign logs through ``summarize``, fresh runs, open loop, old references) has no
second moment to measure drift from, so the verdict takes an allowance. One allowance for every tenant was the
largest ever seen (a launch-bound Llama, 14.5 %), about three times what the kit's GPU-bound kernels drift (FFT and
GEMM 0.1-4.5 % on every committed H200 run); with it no one-block run could say "no change" and a ×1.5 slowdown
of an FFT read "inconclusive". A tenant whose time is its kernels' drifts with the GPU's clocks; one whose time is
the host's launches drifts with the host's speed, several times more. So the allowance follows the kind:

- **gpu**: the device clock resolves the kernels apart from the host's gaps (device / wall median at most
  ``GPU_DEVICE_SHARE``: the FFT 0.70-0.72), or the profile's kernels fill most of the step (busy share at least
  ``GPU_BUSY_SHARE``: the GEMM 0.87-0.88);
- **host**: anything else, and any tenant not known (a launch-bound model's device clock spans its host gaps:
  device / wall 0.98-0.996, busy share 0.11-0.62).

Each kind's value is the largest sd of log alone block medians among its tenants on the committed runs
(``bench.bench_drift_prior``: the runs and the tenants it took are listed there), and its degrees of freedom are
those of the pooled population it was checked against (sum of blocks - 1 over its tenants and clocks), so the
verdict reads the allowance as an estimate (a t), not as known.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

GPU_DEVICE_SHARE = 0.8
GPU_BUSY_SHARE = 0.8


@dataclass(frozen=True)
class Prior:
    kind: str
    sd: float  # log-scale sd of one block's level
    df: float  # degrees of freedom of the population it was measured on

    @property
    def words(self) -> str:
        return f"the {self.kind}-bound prior allowance sd {100 * self.sd:.1f} % per block ({self.df:g} df)"


# Measured by ``python -m bench.bench_drift_prior`` (its ``kind_table``); tests/test_verdict.py checks they agree.
PRIORS = {"gpu": Prior("gpu", 0.045, 70.0), "host": Prior("host", 0.145, 50.0)}


def classify(device_share: float | None = None, busy_share: float | None = None) -> str:
    """"gpu" or "host" from the alone blocks' median device / wall ratio and the profile's busy share (either may
    be unknown: NaN or None); unknown reads as host, the larger allowance."""
    if device_share is not None and math.isfinite(device_share) and 0 < device_share <= GPU_DEVICE_SHARE:
        return "gpu"
    if busy_share is not None and math.isfinite(busy_share) and busy_share >= GPU_BUSY_SHARE:
        return "gpu"
    return "host"


def kind_of(frame, tenant: str) -> str:
    """A tenant's kind from a run's iterations (``kind`` baseline rows: the alone blocks' median device / wall)."""
    need = {"kind", "tenant", "device_ms", "wall_ms"}
    if not need <= set(frame.columns):
        return "host"
    alone = frame[(frame["kind"] == "baseline") & (frame["tenant"] == tenant)]
    wall = alone["wall_ms"].to_numpy(float)
    dev = alone["device_ms"].to_numpy(float)
    ok = (wall > 0) & (dev == dev)
    if not ok.any():
        return "host"
    return classify(float(np.median(dev[ok] / wall[ok])))


def prior(kind: str | None) -> Prior:
    return PRIORS.get(kind or "host", PRIORS["host"])


def one_block_prior() -> Prior:
    """The allowance a run of ONE alone block reads, whatever its tenant's kind: the largest (host-bound).

    Why not the kind's: a GPU-bound tenant's 4.5 % was the largest drift among the committed runs' GPU-bound
    tenants, not a bound on the next run's -- the audit's 10 % drift between blocks made 14 % of one-block verdicts
    and 25 of 100 reports false with it (0.08 % at the last audit, whose drift was smaller). One alone block
    measures nothing of its own drift, so it takes the allowance that covers every kind seen; the warm design
    measures its own."""
    return PRIORS["host"]
