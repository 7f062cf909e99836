"""Fit the simulator's quantum to measured waits, with a bootstrap interval.

Why: the driver's time slice is not published in milliseconds, so the lesson *fits* it: the quantum
whose simulated waits look most like the measured ones. A fitted number without an interval would
claim more than the data can say, so the fit comes with one.

* **Distance**: for each candidate quantum the tenants are simulated once; the distance is the mean
  absolute difference between measured and simulated wait quantiles at ``FIT_QUANTILES`` (the upper
  part of the wait distribution, where the quantum shows: most short kernels find the GPU free and
  wait ~0, so the median alone cannot see it), averaged over tenants. Ties go to the smaller quantum.
* **Grid**: a coarse geometric grid, then a fine one between the best coarse candidate's neighbours;
  the minimum is then placed between grid points by the parabola through the best point and its two
  neighbours, so neither the estimate nor its interval is just the grid's step.
* **Interval**: the measured waits are resampled with the stationary block bootstrap (block length by
  Politis-White, the analysis's choice for one run, since consecutive waits are correlated) and every
  resample is re-fitted against the *same* simulated quantiles; the interval is the percentile interval
  of the re-fitted quanta. It covers the measurement's sampling error; the simulator's own noise is kept
  small by a long simulated duration and is not in it.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from kts_helpers.analyse import stats
from kts_helpers.analyse.resample import naive_positions, pct_interval
from kts_helpers.teaching.model import DEFAULT_DURATION_MS, DEFAULT_SLICE_TIMER, SimError, SimTenant, simulate

FIT_QUANTILES = (0.5, 0.75, 0.9, 0.95, 0.99)
DEFAULT_CANDIDATES = tuple(float(x) for x in np.round(np.geomspace(0.25, 64.0, 25), 3))


@dataclass(frozen=True)
class QuantumFit:
    """The fitted quantum, its bootstrap interval, and the distance of every candidate tried."""

    quantum_ms: float
    lo: float
    hi: float
    distances: pd.DataFrame = field(repr=False)
    n_resamples: int = 0
    confidence: float = 0.95
    note: str = ""
    residual_ms: float = math.nan  # the distance left at the fitted quantum: how well the model's shape fits
    wait_quantiles: pd.DataFrame = field(repr=False, default_factory=pd.DataFrame)  # measured vs simulated

    def text(self) -> str:
        ci = f" [{self.lo:.3f}, {self.hi:.3f}]" if math.isfinite(self.lo) and math.isfinite(self.hi) else ""
        return f"{self.quantum_ms:.3f}{ci} ms"


def _measured(measured_waits_ms: Mapping[str, Sequence[float]] | Sequence[float],
              names: list[str]) -> dict[str, np.ndarray]:
    if isinstance(measured_waits_ms, Mapping):
        measured = {k: np.asarray(v, float) for k, v in measured_waits_ms.items()}
    else:
        measured = {names[0] if names else "": np.asarray(measured_waits_ms, float)}
    unknown = sorted(set(measured) - set(names))
    if unknown:
        raise SimError(f"measured waits for unknown tenant(s) {unknown}; tenants are {names}")
    for k, v in measured.items():
        if v.ndim != 1 or not len(v) or not np.isfinite(v).all():
            raise SimError(f"measured waits of {k!r} must be a non-empty list of finite numbers")
    return measured


def _candidates(candidates: Iterable[float]) -> list[float]:
    cands = sorted({float(c) for c in candidates})
    if not cands or any(not math.isfinite(c) or c <= 0 for c in cands):
        raise SimError(f"candidates must be non-empty and > 0, got {cands}")
    return cands


def simulated_quantiles(tenants: Sequence[SimTenant], candidates: Sequence[float], who: Sequence[str], *,
                        context_switch_ms: float, duration_ms: float, seed: int,
                        quantiles: Sequence[float], slice_timer: str = DEFAULT_SLICE_TIMER
                        ) -> dict[float, dict[str, np.ndarray]]:
    """Per candidate quantum, per tenant in ``who``: the simulated wait quantiles (one simulation each)."""
    out: dict[float, dict[str, np.ndarray]] = {}
    for c in candidates:
        sim = simulate(tenants, c, context_switch_ms, duration_ms, seed, slice_timer=slice_timer)
        out[c] = {}
        for name in who:
            w = sim.loc[sim["tenant"] == name, "wait_ms"].to_numpy(float)
            if not len(w):
                raise SimError(f"tenant {name!r} completed no kernel in {duration_ms} ms; lengthen duration_ms")
            out[c][name] = np.quantile(w, quantiles)
    return out


def _distance(meas_q: Mapping[str, np.ndarray], sim_q: Mapping[str, np.ndarray]) -> np.ndarray:
    """Mean |measured - simulated| quantile difference, averaged over tenants (vectorised over resamples)."""
    d = []
    for k, meas in meas_q.items():
        sim = sim_q[k][:, None] if meas.ndim == 2 else sim_q[k]  # (quantiles, resamples) or (quantiles,)
        d.append(np.abs(meas - sim).mean(axis=0))
    return np.mean(d, axis=0)


def fit_distances(measured_waits_ms: Mapping[str, Sequence[float]] | Sequence[float],
                  tenants: Sequence[SimTenant], candidates: Iterable[float], *, context_switch_ms: float = 0.0,
                  duration_ms: float = DEFAULT_DURATION_MS, seed: int = 0,
                  quantiles: Sequence[float] = FIT_QUANTILES, slice_timer: str = DEFAULT_SLICE_TIMER) -> pd.DataFrame:
    """The distance of each candidate quantum's simulated waits to the measured ones (see the module doc)."""
    tenants = list(tenants)
    measured = _measured(measured_waits_ms, [t.name for t in tenants])
    cands = _candidates(candidates)
    qs = np.asarray(quantiles, float)
    sims = simulated_quantiles(tenants, cands, list(measured), context_switch_ms=context_switch_ms,
                               duration_ms=duration_ms, seed=seed, quantiles=qs, slice_timer=slice_timer)
    meas_q = {k: np.quantile(v, qs) for k, v in measured.items()}
    return pd.DataFrame({"quantum_ms": cands, "distance_ms": [float(_distance(meas_q, sims[c])) for c in cands]})


def fit_quantum(measured_waits_ms: Mapping[str, Sequence[float]] | Sequence[float],
                tenants: Sequence[SimTenant], candidates: Iterable[float], *, context_switch_ms: float = 0.0,
                duration_ms: float = DEFAULT_DURATION_MS, seed: int = 0,
                quantiles: Sequence[float] = FIT_QUANTILES) -> float:
    """The candidate quantum whose simulated waits best match the measured ones (no interval).

    ``measured_waits_ms``: per tenant name, the measured waits (host wall - CUDA-event time: the wait
    before a kernel's first instruction, the simulator's ``wait_ms``); a bare sequence means the first
    tenant's.
    """
    d = fit_distances(measured_waits_ms, tenants, candidates, context_switch_ms=context_switch_ms,
                      duration_ms=duration_ms, seed=seed, quantiles=quantiles)
    return float(d.loc[d["distance_ms"].idxmin(), "quantum_ms"])


def _resampled_quantiles(x: np.ndarray, qs: np.ndarray, r: int, rng: np.random.Generator) -> np.ndarray:
    """(len(qs), r) quantiles of r stationary-bootstrap resamples of ``x``."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", stats.ShortSeriesWarning)
        b, _ = stats.resolve_block_length(x, "stationary")
    out = np.empty((len(qs), r))
    step = max(1, 2_000_000 // max(len(x), 1))
    for i in range(0, r, step):
        c = min(step, r - i)
        out[:, i:i + c] = np.quantile(x[naive_positions(len(x), c, "stationary", b, rng)], qs, axis=1)
    return out


def _vertex(grid: np.ndarray, dist: np.ndarray) -> np.ndarray:
    """Per column of ``dist`` (candidates x resamples): the parabola vertex around its grid minimum.

    A minimum on the grid's edge, or a neighbourhood that is not convex, keeps the grid point.
    """
    i = np.argmin(dist, axis=0)
    best = grid[i].astype(float)
    inner = (i > 0) & (i < len(grid) - 1)
    if not inner.any():
        return best
    cols = np.nonzero(inner)[0]
    k = i[cols]
    x0, x1, x2 = grid[k - 1], grid[k], grid[k + 1]
    d0, d1, d2 = dist[k - 1, cols], dist[k, cols], dist[k + 1, cols]
    denom = (x0 - x1) * (x0 - x2) * (x1 - x2)
    a = (x2 * (d1 - d0) + x1 * (d0 - d2) + x0 * (d2 - d1)) / denom
    b = (x2 ** 2 * (d0 - d1) + x1 ** 2 * (d2 - d0) + x0 ** 2 * (d1 - d2)) / denom
    with np.errstate(divide="ignore", invalid="ignore"):
        v = np.where(a > 0, -b / (2 * a), x1)
    best[cols] = np.clip(v, x0, x2)
    return best


def fit_with_interval(measured_waits_ms: Mapping[str, Sequence[float]], tenants: Sequence[SimTenant],
                      candidates: Iterable[float] = DEFAULT_CANDIDATES, *, context_switch_ms: float = 0.0,
                      duration_ms: float = 60_000.0, seed: int = 0, n_resamples: int = 1000,
                      confidence: float = 0.95, refine: int = 32, boot_seed: int = 0,
                      quantiles: Sequence[float] = FIT_QUANTILES, slice_timer: str = DEFAULT_SLICE_TIMER) -> QuantumFit:
    """The fitted quantum with a stationary-bootstrap percentile interval (see the module doc)."""
    tenants = list(tenants)
    measured = _measured(measured_waits_ms, [t.name for t in tenants])
    coarse = _candidates(candidates)
    qs = np.asarray(quantiles, float)
    opts = {"context_switch_ms": context_switch_ms, "duration_ms": duration_ms, "seed": seed, "quantiles": qs,
            "slice_timer": slice_timer}
    sims = simulated_quantiles(tenants, coarse, list(measured), **opts)
    meas_q = {k: np.quantile(v, qs) for k, v in measured.items()}
    best = int(np.argmin([_distance(meas_q, sims[c]) for c in coarse]))
    lo_c, hi_c = coarse[max(best - 1, 0)], coarse[min(best + 1, len(coarse) - 1)]
    fine = [c for c in np.linspace(lo_c, hi_c, refine + 1).round(6).tolist() if c not in sims] if refine else []
    sims.update(simulated_quantiles(tenants, fine, list(measured), **opts))
    grid = np.asarray(sorted(sims))
    dist = np.array([float(_distance(meas_q, sims[c])) for c in grid])
    quantum = float(_vertex(grid, dist[:, None])[0])
    rng = np.random.default_rng(boot_seed)
    boot_q = {k: _resampled_quantiles(v, qs, n_resamples, rng) for k, v in measured.items()}
    boot_d = np.stack([_distance(boot_q, sims[c]) for c in grid])  # (candidates, resamples)
    lo, hi = pct_interval(_vertex(grid, boot_d), confidence)
    note = ""
    if lo <= grid[0] or hi >= grid[-1]:
        note = f"the interval reaches the candidate grid's edge ({grid[0]:g}-{grid[-1]:g} ms): it may be wider"
    at_fit = simulated_quantiles(tenants, [quantum], list(measured), **opts)[quantum]
    rows = [{"tenant": k, "quantile": float(q), "measured_ms": float(meas_q[k][j]), "simulated_ms": float(at_fit[k][j])}
            for k in measured for j, q in enumerate(qs)]
    return QuantumFit(quantum, float(lo), float(hi), pd.DataFrame({"quantum_ms": grid, "distance_ms": dist}),
                      n_resamples, confidence, note, float(_distance(meas_q, at_fit)), pd.DataFrame(rows))
