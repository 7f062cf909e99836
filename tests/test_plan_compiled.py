"""The compiled loops (``plan.compiled``) and the draws taken ahead (``plan.draws``) give the general loops' answers
to the bit (the capacity question's speed: the real models' question in <= 10 s on 2 cores, ``bench/bench_plan.py``).

Each test runs one case twice: as the planner does (the draws taken ahead as arrays, the compiled loop), and through
the general loop, the reference, which a draw without ``ahead`` (a plain function) gets. The faults these catch
(each checked by breaking the code on purpose): a compiled loop that drifts from the model the general loop
states (a switch not paid, a kernel boundary from the wrong remaining work, a filler's boundary forgotten), draws
ahead that are not the calls' sequence (a word's bits misread), and a replicate read from the wrong operations.
"""

from __future__ import annotations

import math
import random
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from kts_helpers.plan import capacity as cap
from kts_helpers.plan import compiled, engine, mps, timeslice
from kts_helpers.plan.draws import IterationDraws, PhaseShifted
from kts_helpers.plan.inputs import load_plan_input, mix_of
from kts_helpers.plan.mps import MpsTenant, simulate_mps
from kts_helpers.plan.timeslice import Op, SimOps, SimTenant, simulate

REF = Path(__file__).resolve().parents[1] / "data" / "reference"
RUNS = {"real models": REF / "h200-2026-12-02-rm-bert-vit-llama", "matrix": REF / "h200-2026-11-30-matrix"}



def test_numba_is_there_to_compile_the_loops() -> None:
    """numba is a declared dependency (pyproject.toml): a machine without it runs the Python loops, slowly, and
    the capacity question misses its 10 s; this fails there rather than the tests below passing on the fallback."""
    assert compiled.load() is not None


def plain(draws):
    """The same draws as plain functions: no ``ahead``, so the general loop runs (the reference)."""
    return [lambda d=d: d() for d in draws]


def iterations(seed: int, n: int, kernel_ms: float, gap_ms: float, ops: int = 1,
               shares: tuple[float, float] = (0.0, 0.0)) -> tuple[tuple[Op, ...], ...]:
    """n made-up alone iterations of ``ops`` operations each (two phases where more than one; ``shares``: the
    first op's and the others' own busy shares, 0: the tenant's)."""
    rng = random.Random(seed)
    return tuple(tuple(Op(kernel_ms * rng.uniform(0.5, 1.5), rng.uniform(0.0, 0.2),
                          gap_ms * rng.uniform(0.0, 2.0) if k == ops - 1 else rng.uniform(0.0, 0.1),
                          "prefill" if ops > 1 and k == 0 else "decode" if ops > 1 else "op", shares[k > 0])
                       for k in range(ops)) for _ in range(n))


# launch-bound chains (the real models' kind), GPU-bound chains, one-kernel tenants, a sleep the phase shift moves
TS_CASES = {
    "launch-bound chains": [(SimTenant("llm", 11.0, 0.05, kernels=547, busy_share=0.09), iterations(1, 40, 11.0, 1.0, 9)),
                            (SimTenant("bert", 9.0, 10.0, kernels=69, busy_share=0.065), iterations(2, 50, 9.0, 10.0)),
                            (SimTenant("vit", 6.5, 10.0, kernels=68, busy_share=0.19), iterations(3, 50, 6.5, 10.0))],
    "gpu-bound and singles": [(SimTenant("chain", 3.0, 0.5, kernels=12), iterations(4, 32, 3.0, 0.5)),  # 32: a power of two
                              (SimTenant("gemm", 4.0, 1.0), iterations(5, 30, 4.0, 1.0)),
                              (SimTenant("fft", 0.4, 2.0, busy_share=0.6), iterations(6, 30, 0.4, 12.0))],
    # an encode and decode steps each at its own share (``Op.busy_share``), a training step at its tenant's
    "ops at their own shares": [(SimTenant("speech", 7.0, 0.5, kernels=300, busy_share=0.28),
                                 iterations(7, 40, 7.0, 1.0, 9, shares=(0.7, 0.17))),
                                (SimTenant("train", 20.0, 0.0, kernels=1000, busy_share=0.5),
                                 iterations(8, 30, 20.0, 0.2))],
    # a GPU-bound chain (busy share 1: its quantum ends its turn) beside a launch-bound decode server
    "gpu-bound chain beside launch-bound": [(SimTenant("resnet", 12.0, 0.0, kernels=350), iterations(9, 30, 12.0, 0.05)),
                                            (SimTenant("llm", 9.0, 0.05, kernels=680, busy_share=0.25),
                                             iterations(10, 40, 9.0, 0.05, 9))],
}


def ts_draws(case: str, seed: int, shift: float | None) -> list:
    rng = random.Random(seed)
    draws = [IterationDraws(its, random.Random(rng.random()), engine.block_resample(len(its), rng))
             for _, its in TS_CASES[case]]
    return draws if shift is None else [PhaseShifted(d, shift, 5.0) for d in draws]


@pytest.mark.parametrize("shift", [None, -0.7])
def test_draws_ahead_are_the_calls(shift: float | None) -> None:
    """The arrays a draw gives ahead are the operations its calls give, in order (every field, every phase)."""
    for case in TS_CASES:
        for ahead, calls in zip(ts_draws(case, 9, shift), ts_draws(case, 9, shift), strict=True):
            ops = ahead.ahead(2_000.0)
            got = [Op(float(k), float(o), float(g), str(p), float(b))
                   for k, o, g, p, b in zip(ops.kernel_ms, ops.overhead_ms, ops.gap_ms, ops.phase, ops.busy_share,
                                            strict=True)]
            assert len(got) > 20 and got == [calls() for _ in got]
            assert timeslice.busy_ms(ops) >= 2_000.0


@pytest.mark.parametrize("case", sorted(TS_CASES))
@pytest.mark.parametrize("timer", timeslice.SLICE_TIMERS)
@pytest.mark.parametrize("idle_resets", [False, True])
def test_compiled_timeslice_is_the_general_loop_to_the_bit(case: str, timer: str, idle_resets: bool) -> None:
    tenants = [t for t, _ in TS_CASES[case]]
    kw = dict(quantum_ms=2.2, context_switch_ms=0.16, duration_ms=3_000.0, seed=3, slice_timer=timer,
              idle_resets_slice=idle_resets, switch_after_idle=not idle_resets)
    fast = simulate(tenants, draws=ts_draws(case, 4, -0.3), **kw)  # type: ignore[arg-type]
    slow = simulate(tenants, draws=plain(ts_draws(case, 4, -0.3)), **kw)  # type: ignore[arg-type]
    assert len(fast) > 300
    pd.testing.assert_frame_equal(fast, slow, check_exact=True)
    ops = simulate(tenants, draws=ts_draws(case, 4, -0.3), ops=True, **kw)  # type: ignore[arg-type]
    pd.testing.assert_frame_equal(ops.frame(), slow, check_exact=True)


def test_compiled_mps_is_the_general_loop_to_the_bit() -> None:
    """A filler (its boundary queues the others), a capped tenant, host shares and SM needs: every rule of the model."""
    tenants = [MpsTenant("gemm", 4.0, 1.0, weight=3.0, fills_gpu=True),
               MpsTenant("llm", 11.0, 0.05, weight=0.2, sm_need=0.4, busy_share=0.09, host_share=0.9),
               MpsTenant("fft", 0.4, 2.0, weight=0.5, thread_pct=40.0, sm_need=0.5, busy_share=0.6),
               MpsTenant("bert", 9.0, 10.0, weight=0.06, host_share=0.5)]
    its = [iterations(5, 30, 4.0, 1.0), iterations(1, 40, 11.0, 1.0, 9), iterations(6, 30, 0.4, 12.0),
           iterations(2, 50, 9.0, 10.0)]

    def draws() -> list:
        rng = random.Random(8)
        return [IterationDraws(it, random.Random(rng.random()), None) for it in its]

    fast = simulate_mps(tenants, 3_000.0, 2, draws=draws())
    slow = simulate_mps(tenants, 3_000.0, 2, draws=plain(draws()))
    assert len(fast) > 300
    pd.testing.assert_frame_equal(fast, slow, check_exact=True)


@pytest.fixture(scope="module", params=sorted(RUNS))
def mix_gpu(request) -> tuple[list[engine.AloneProfile], engine.GpuModel]:
    inp = load_plan_input(RUNS[request.param])
    return mix_of(inp), inp.gpu


def scenario(mix: list[engine.AloneProfile], n: int, sharing: str) -> engine.Scenario:
    group = cap.pods(mix, n)
    if sharing == "mps-limited":
        group = tuple(replace(p, thread_pct=100.0 / n) for p in group)
    return engine.Scenario(f"{sharing}-{n}", group, (40,) * n, sharing)


@pytest.mark.parametrize("sharing", ["timeslice", "mps", "mps-limited"])
def test_a_replicate_is_the_general_loop_to_the_bit(mix_gpu, sharing: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The capacity question's own cases (the references' alone runs, the probe's quantum and switch), N = 5."""
    mix, gpu = mix_gpu
    sc = scenario(mix, 5, sharing)
    fast = engine.simulate_once(sc, gpu, 7, duration_ms=3_000.0)
    monkeypatch.setattr(engine, "simulate", lambda *a, draws, **k: simulate(*a, draws=plain(draws), **k))
    monkeypatch.setattr(engine, "simulate_mps", lambda *a, draws, **k: simulate_mps(*a, draws=plain(draws), **k))
    slow = engine.simulate_once(sc, gpu, 7, duration_ms=3_000.0)
    assert len(fast) > 200
    pd.testing.assert_frame_equal(fast, slow, check_exact=True)


def table_stats(sc: engine.Scenario, rows: pd.DataFrame) -> engine.ReplicateStats:
    """One replicate's statistics read from its table (the reading ``replicate_stats`` did before it read arrays)."""
    per = {}
    for t, n in zip(sc.tenants, sc.n, strict=True):
        mine = rows[rows["tenant"] == t.name]
        for phase in t.phases:
            per_it = max(1, sum(1 for op in t.iterations[0] if op.phase == phase))
            ph = mine[mine["phase"] == phase].iloc[: n * per_it]
            wall = ph["wall_ms"].to_numpy(float)
            thr = sc.thresholds_ms.get(t.name, float(np.quantile(t.column("wall_ms", phase), 0.99)))
            wait = (ph["wall_ms"] - ph["device_ms"] - ph["overhead_ms"]).to_numpy(float)
            share = float(np.mean(wall > thr)) if len(wall) else math.nan
            for metric, values in (("wall", wall), ("device", ph["device_ms"].to_numpy(float))):
                p50, p99 = engine._quantiles(values)
                per[(t.name, phase, metric)] = (p50, p99, share, float(np.median(wait)) if len(wait) else math.nan)
    return per


@pytest.mark.parametrize("sharing", ["timeslice", "mps-limited"])
def test_replicate_stats_read_the_operations_as_the_table(mix_gpu, sharing: str) -> None:
    """``replicate_stats`` reads arrays (``SimOps``); the same numbers as reading the run's table, and the arrays
    make the table back, to the bit."""
    mix, gpu = mix_gpu
    sc = scenario(mix, 4, sharing)
    sc = replace(sc, thresholds_ms={sc.tenants[0].name: 1.0})
    rows = engine.simulate_once(sc, gpu, engine.replicate_seed(3, 1))
    assert repr(engine.replicate_stats(sc, gpu, 3, [1])) == repr([table_stats(sc, rows)])
    pd.testing.assert_frame_equal(SimOps.of_frame(rows, [t.name for t in sc.tenants]).frame(), rows, check_exact=True)


def test_without_numba_the_python_loops_answer_the_same(mix_gpu, monkeypatch: pytest.MonkeyPatch) -> None:
    """A machine without numba (``compiled_loops`` None): the Python loops run, the same replicate statistics."""
    mix, gpu = mix_gpu
    sc = scenario(mix, 3, "timeslice")
    sc_mps = scenario(mix, 3, "mps-limited")
    want = engine.replicate_stats(sc, gpu, 0, [0]), engine.replicate_stats(sc_mps, gpu, 0, [0])
    monkeypatch.setattr(timeslice, "compiled_loops", lambda: None)
    monkeypatch.setattr(mps, "compiled_loops", lambda: None)
    assert repr((engine.replicate_stats(sc, gpu, 0, [0]), engine.replicate_stats(sc_mps, gpu, 0, [0]))) == repr(want)


def test_the_loops_run_as_plain_python() -> None:
    """The compiled loops' source is plain Python (what runs where numba is missing): the same rows uncompiled."""
    case = "launch-bound chains"
    tenants = [t for t, _ in TS_CASES[case]]
    kw = dict(quantum_ms=2.2, context_switch_ms=0.16, duration_ms=300.0, seed=3, slice_timer="switch-in")
    fast = simulate(tenants, draws=ts_draws(case, 4, None), **kw)  # type: ignore[arg-type]

    class Plain:
        OUT_OF_OPS = compiled.OUT_OF_OPS
        timeslice_loop = staticmethod(compiled.timeslice_loop.py_func)

    with pytest.MonkeyPatch.context() as m:
        m.setattr(timeslice, "compiled_loops", lambda: Plain)
        pd.testing.assert_frame_equal(simulate(tenants, draws=ts_draws(case, 4, None), **kw), fast, check_exact=True)


def test_a_tenant_out_of_drawn_operations_is_drawn_further(monkeypatch: pytest.MonkeyPatch) -> None:
    """Draws ahead that fall short (here: a tenth of the run) are drawn again further: the same rows."""
    case = "gpu-bound and singles"
    tenants = [t for t, _ in TS_CASES[case]]
    kw = dict(quantum_ms=2.2, context_switch_ms=0.16, duration_ms=2_000.0, seed=3)
    want = simulate(tenants, draws=ts_draws(case, 4, None), **kw)  # type: ignore[arg-type]
    real = timeslice.drawn_ahead
    monkeypatch.setattr(timeslice, "drawn_ahead", lambda d, h: real(d, h / 10))
    pd.testing.assert_frame_equal(simulate(tenants, draws=ts_draws(case, 4, None), **kw), want,  # type: ignore[arg-type]
                                  check_exact=True)
