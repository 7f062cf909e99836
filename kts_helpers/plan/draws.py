"""A tenant's operations for one simulated run, drawn from its alone run: one at a time, or all ahead as arrays.

The rule (``engine.AloneProfile.drawer``): whole alone iterations drawn at random (from a bootstrap ``pool`` of
them), their operations in order, so an LLM's prefill and decode steps stay together; a replicate's lock phase
moves every sleep (``engine._phase_shifted``, :class:`PhaseShifted`).

Why two ways: the general event loops take one operation when a tenant issues (a call), the compiled loops
(``plan.compiled``) take them ahead as arrays (:meth:`IterationDraws.ahead`). Each tenant's draws come from its
own generator, whatever the others do, so drawing them ahead changes nothing: the same sequence, the iterations
picked by the same Mersenne Twister words (``random.Random.randrange``'s rejection rule, replayed on numpy's copy
of the generator's state). ``tests/test_plan_compiled.py`` holds the arrays equal to the calls.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import replace

import numpy as np

from kts_helpers.plan.timeslice import Op, OpArrays, busy_ms

_MEMO: dict[tuple[int, str], tuple[tuple, object]] = {}  # (id(iterations), what) -> (iterations, its value)


def of_iterations(iterations: tuple[tuple[Op, ...], ...], what: str, compute: Callable[[], object]) -> object:
    """``compute()``, once per alone profile's iterations (``what`` names it): pods of one type, and every replicate
    of every scenario, share their iterations, and their constants need not be computed again for each run."""
    key = (id(iterations), what)
    hit = _MEMO.get(key)
    if hit is not None and hit[0] is iterations:
        return hit[1]
    value = compute()
    if len(_MEMO) >= 256:
        _MEMO.clear()
    _MEMO[key] = (iterations, value)
    return value


def _flat(iterations: tuple[tuple[Op, ...], ...]) -> tuple[np.ndarray, ...]:
    """The alone iterations' operations as flat arrays (GPU ms, overhead, gap, phase, busy share), with each
    iteration's first index, its length, and its GPU time and gaps (the least time it takes)."""
    def compute() -> tuple[np.ndarray, ...]:
        ops = [op for it in iterations for op in it]
        lens = np.array([len(it) for it in iterations], np.int64)
        starts = np.concatenate([[0], np.cumsum(lens)[:-1]]).astype(np.int64)
        kernel, gap = np.array([o.kernel_ms for o in ops], float), np.array([o.gap_ms for o in ops], float)
        per_it = np.add.reduceat(kernel + np.maximum(gap, 0.0), starts)  # every iteration has an operation
        return (kernel, np.array([o.overhead_ms for o in ops], float), gap, np.array([o.phase for o in ops], object),
                np.array([o.busy_share for o in ops], float), starts, lens, per_it)

    return of_iterations(iterations, "flat", compute)  # type: ignore[return-value]


class IterationDraws:
    """One tenant's draws for one run (``rng`` its own generator, not yet used): a call gives the next operation."""

    def __init__(self, iterations: tuple[tuple[Op, ...], ...], rng: random.Random, pool: Sequence[int] | None):
        self.iterations = iterations
        self.idx = list(pool if pool is not None else range(len(iterations)))
        self.rng = rng
        self.state = rng.getstate()  # where the draws begin, for ``ahead``
        self.queue: list[Op] = []

    def __call__(self) -> Op:
        if not self.queue:
            self.queue.extend(reversed(self.iterations[self.idx[self.rng.randrange(len(self.idx))]]))
        return self.queue.pop()

    def ahead(self, horizon_ms: float) -> OpArrays:
        """The operations the calls give from the first one on, as arrays: whole iterations, at least until their
        GPU time and gaps add up to ``horizon_ms``."""
        kernel, overhead, gap, phase, share, starts, lens, per_it = _flat(self.iterations)
        m = len(self.idx)
        k = m.bit_length()  # randrange(m): k-bit words (the top k bits of one 32-bit output), below m accepted
        mt = np.random.MT19937()
        mt.state = {"bit_generator": "MT19937",
                    "state": {"key": np.array(self.state[1][:624], np.uint32), "pos": int(self.state[1][624])}}
        idx = np.asarray(self.idx, np.int64)
        picked: list[np.ndarray] = []
        total, chunk = 0.0, max(16, int(2 * horizon_ms / max(float(np.mean(per_it)), 1e-9)) + 8)
        while total < horizon_ms:
            r = (mt.random_raw(chunk) >> np.uint64(32 - k)).astype(np.int64)
            sel = idx[r[r < m]]
            picked.append(sel)
            total += float(np.sum(per_it[sel]))
        sel = np.concatenate(picked)
        n_ops = lens[sel]
        first = np.repeat(starts[sel] - np.concatenate([[0], np.cumsum(n_ops)[:-1]]), n_ops)
        at = first + np.arange(int(np.sum(n_ops)))
        return OpArrays(kernel[at], overhead[at], gap[at], phase[at], share[at])


class PhaseShifted:
    """Draws with every sleep (gap >= ``min_gap_ms``) moved by ``shift_ms`` (``engine._phase_shifted``)."""

    def __init__(self, draw: Callable[[], Op], shift_ms: float, min_gap_ms: float):
        self.draw, self.shift_ms, self.min_gap_ms = draw, shift_ms, min_gap_ms

    def __call__(self) -> Op:
        op = self.draw()
        return replace(op, gap_ms=max(op.gap_ms + self.shift_ms, 0.0)) if op.gap_ms >= self.min_gap_ms else op

    def ahead(self, horizon_ms: float) -> OpArrays:
        """The shifted operations as arrays (the inner draws' ``ahead``), at least ``horizon_ms`` of them."""
        h = horizon_ms
        while True:
            ops = self.draw.ahead(h)  # type: ignore[attr-defined]
            moved = ops.gap_ms + self.shift_ms
            gap = np.where(ops.gap_ms >= self.min_gap_ms, np.where(moved < 0.0, 0.0, moved), ops.gap_ms)
            out = OpArrays(ops.kernel_ms, ops.overhead_ms, gap, ops.phase, ops.busy_share)
            if busy_ms(out) >= horizon_ms:
                return out
            h *= 2.0

