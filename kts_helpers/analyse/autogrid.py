"""The verdict on generated ``blocks=auto`` runs: a two-state host, blocks of unequal length, looks (issue 52).

Why: the verdicts are only as good as the runs they were tried on. A GPU host's vCPUs switch between two speeds
(the same interpreter work 0.29-0.30 or 0.48-0.53 ms), and a launch-bound tenant's step follows; its state can
hold for a block or change within one (the audit redrew it every 150 iterations); shared blocks run 3-5x longer
than alone ones; and ``blocks=auto`` reads the verdicts at several looks. Here a run is drawn as the warm design
runs it (``Warm``-like: up to ``blockseq.LOOKS[-1]`` shared blocks between alone rounds), each iteration GPU-like
(``blockgrid.gpu_block``) times the host's state raised to the tenant's elasticity, with a drift between blocks of
any ``driftgrid.levels`` shape, and the worker's probe per iteration (the state's probe time, its own noise). A
report is ``tenants`` x 2 clocks (the device clock follows the host less), read as the report reads it: each look
at its nominal level (``blockseq.nominal_alphas``), the family's graph (``verdict.family``), the run stopping
when every verdict has decided and its report reading that look (``blockseq.run_confidence``). ``bench/bench_blocks.py --auto`` runs the grid
(docs/methods/blocks.md); tests/test_autogrid.py a small version.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np

from kts_helpers.analyse import blockgrid as BG
from kts_helpers.analyse import blockseq as S
from kts_helpers.analyse import driftgrid as G
from kts_helpers.analyse import verdict as V


@dataclass(frozen=True)
class HostModel:
    """A host of two speeds: the probe's time in each, how often the slow one holds, whether the state is drawn
    once a block (``within`` None) or every ``within`` iterations, and how far a tenant's step follows it
    (``elasticity``: log step per log probe; the device clock follows ``device_share`` of that)."""

    fast_ms: float = 0.30
    slow_ms: float = 0.50
    p_slow: float = 0.4
    within: int | None = None
    elasticity: float = 0.6
    device_share: float = 0.3
    probe_sd: float = 0.08
    moved_by_sharing: float = 1.0  # > 1: sharing itself slows the host (the balance check must refuse)

    @property
    def name(self) -> str:
        every = f"every {self.within} iterations" if self.within else "once a block"
        return f"two-state host drawn {every}, elasticity {self.elasticity:g}"


@dataclass
class Drawn:
    """One tenant and clock's blocks, up to the design's most: shared and alone series, probes, mid-times."""

    shared: list[np.ndarray]
    alone: list[np.ndarray]
    shared_probe: list[np.ndarray]
    alone_probe: list[np.ndarray]
    shared_t: list[float]
    alone_t: list[float]

    def upto(self, blocks: int) -> tuple:
        """(shared, alone, times, host) of the first ``blocks`` shared blocks and the alone rounds around them."""
        b = blocks
        return (self.shared[:b], self.alone[:b + 1], (self.shared_t[:b], self.alone_t[:b + 1]),
                (self.shared_probe[:b], self.alone_probe[:b + 1]))


def draw(rng: np.random.Generator, blocks: int, shape: str, sd: float, *, effect: float = 1.0,
         host: HostModel | None = None, clock: str = "wall", size: tuple[int, int] = (100, 300),
         shared_length: float = 1.0, slow_share: float = 0.0, slow_factor: float = 3.0,
         host_states: tuple[np.ndarray, np.ndarray] | None = None) -> Drawn:
    """One tenant and clock: ``blocks`` shared blocks between ``blocks + 1`` alone ones. ``effect``: the shared
    median x this; ``slow_share``: that share of shared iterations x ``slow_factor`` (a tail that sharing grows,
    median unmoved); ``shared_length``: shared blocks this many times the alone ones' iterations; ``host_states``:
    the two clocks of one tenant share the host's states (per block, per iteration)."""
    lv, width = G.levels(rng, shape, sd, 2 * blocks + 1)
    pa, ps = G.run_order(G.Design(blocks + 1, blocks))
    el = 0.0 if host is None else host.elasticity * (1.0 if clock == "wall" else host.device_share)
    out = Drawn([], [], [], [], [], [])
    t = 0.0
    states = iter(host_states[0]) if host_states is not None else None
    for pos in range(2 * blocks + 1):
        shared = pos in set(ps.tolist())
        n = int(rng.integers(size[0], size[1] + 1) * (shared_length if shared else 1.0))
        x = BG.gpu_block(rng, n)
        x = G.shaped(x, float(lv[pos]), float(width[pos]))
        probe = np.full(n, np.nan)
        if host is not None:
            state = next(states) if states is not None else _states(rng, host, n)
            state = state[:n] if len(state) >= n else np.resize(state, n)
            ms = np.where(state, host.slow_ms, host.fast_ms) * (host.moved_by_sharing if shared else 1.0)
            x = x * (ms / host.fast_ms) ** el
            probe = ms * np.exp(rng.normal(0.0, host.probe_sd, n))
        if shared:
            x = x * effect
            if slow_share > 0:
                x = np.where(rng.random(n) < slow_share, x * slow_factor, x)
        mid = t + 0.5 * float(np.sum(x))
        t += float(np.sum(x)) + 1.0
        if shared:
            out.shared.append(x), out.shared_probe.append(probe), out.shared_t.append(mid)
        else:
            out.alone.append(x), out.alone_probe.append(probe), out.alone_t.append(mid)
    return out


def _states(rng: np.random.Generator, host: HostModel, n: int) -> np.ndarray:
    """The host's state per iteration (True: slow), drawn once a block or every ``host.within`` iterations."""
    if not host.within:
        return np.full(n, rng.random() < host.p_slow)
    every = host.within
    lead = int(rng.integers(1, every + 1))  # the host's state does not change at a block's start: a random phase
    k = math.ceil((n + every - lead) / every)
    return np.repeat(rng.random(k) < host.p_slow, every)[every - lead:every - lead + n]


@dataclass
class AutoRow:
    """What ``reps`` reports (or single verdicts) of one cell read under ``blocks=auto``."""

    measures: str
    shape: str
    sd: float
    host: str
    tenants: int
    effect: float
    reps: int
    false_verdicts: int = 0  # verdicts reading what is not so (a change where none, the wrong way, "no change" past it)
    verdicts: int = 0
    false_reports: int = 0  # reports with at least one false verdict
    found: int = 0  # the effect's tenant (wall clock) read the right way
    no_change: int = 0  # verdicts reading "no change" where nothing changed
    blocks: list[int] = field(default_factory=list)  # shared blocks each run took
    seconds: float = 0.0

    def to_dict(self) -> dict:
        return {k: getattr(self, k) for k in ("measures", "shape", "sd", "host", "tenants", "effect", "reps",
                                              "false_verdicts", "verdicts", "false_reports", "found", "no_change",
                                              "seconds")} | {"mean_blocks": float(np.mean(self.blocks or [0]))}


def _false(reading: str, effect: float, margin: float = V.DEFAULT_MARGIN) -> bool:
    if effect == 1.0:
        return reading in V.slower_readings(margin) + V.faster_readings(margin)
    if effect > 1.0:
        return reading in V.faster_readings(margin) or (reading == V.no_change(margin) and effect >= 1 + margin)
    return reading in V.slower_readings(margin) or (reading == V.no_change(margin) and effect <= 1 - margin)


def auto_cell(measures: str, shape: str, sd: float, reps: int, *, tenants: int = 4, effect: float = 1.0,
              host: HostModel | None = None, schedule: tuple[int, ...] = S.LOOKS, seed: int = 0,
              covariate: bool = True, fixed: bool = False, **drawn) -> AutoRow:
    """``reps`` reports of ``tenants`` x 2 clocks read under ``blocks=auto`` (``fixed``: read once, at the last
    look, at the full level -- a fixed design of that many blocks). The first tenant carries ``effect`` (both
    clocks); ``covariate`` False reads without the host probe."""
    rng = np.random.default_rng(seed)
    row = AutoRow(measures, shape, sd, host.name if host else "none", tenants, effect, reps)
    t0 = time.perf_counter()
    most = schedule[-1]
    for _ in range(reps):
        runs, questions = [], []
        for k in range(tenants):
            eff = effect if k == 0 else 1.0
            states = None
            if host is not None:
                states = ([_states(rng, host, 100_000) for _ in range(2 * most + 1)], None)
            for clock in ("wall", "device"):
                d = draw(rng, most, shape, sd, effect=eff, host=host, clock=clock,
                         host_states=(states[0], None) if states else None, **drawn)
                runs.append((d, eff))
                questions.append((k, clock))
        looks = (most,) if fixed else schedule
        said: list[str] = []
        used = most
        for b in looks:
            conf = 0.95 if fixed else S.confidence_at(schedule, b)
            vs = []
            for d, _eff in runs:
                sh, al, times, probes = d.upto(b)
                vs.append(V.decide(sh, al, times=times, host=probes if covariate and host else None,
                                   confidence=conf))
            said = [v.reading for v in V.family(vs, questions)]  # the report reads the look that stopped the run
            if all(r != V.INCONCLUSIVE for r in said):
                used = b
                break
        wrong = [_false(r, eff) for r, (_d, eff) in zip(said, runs, strict=True)]
        row.false_verdicts += sum(wrong)
        row.verdicts += len(said)
        row.false_reports += any(wrong)
        if effect != 1.0:
            row.found += said[0] in (V.slower_readings() if effect > 1 else V.faster_readings())
        row.no_change += sum(r == V.no_change() for r, (_d, eff) in zip(said, runs, strict=True) if eff == 1.0)
        row.blocks.append(used)
    row.seconds = round(time.perf_counter() - t0, 1)
    return row


def markdown(rows: list[AutoRow]) -> str:
    lines = ["| measures | drift | drift sd | host | report | effect | reports | false per verdict | false per report "
             "| effect found | no change (null verdicts) | mean shared blocks |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        nulls = r.verdicts - (2 * r.reps if r.effect != 1.0 else 0)
        lines.append(f"| {r.measures} | {r.shape} | {100 * r.sd:g} % | {r.host} | {r.tenants} x 2 clocks | "
                     f"x{r.effect:g} | {r.reps} | {r.false_verdicts / max(r.verdicts, 1):.3f} | "
                     f"{r.false_reports / max(r.reps, 1):.3f} | "
                     f"{(f'{r.found / r.reps:.2f}' if r.effect != 1.0 else '—')} | "
                     f"{r.no_change / max(nulls, 1):.2f} | {np.mean(r.blocks or [0]):.1f} |")
    return "\n".join(lines)
