"""The planner's fast paths give the slow paths' answers to the bit (issue 31: the capacity question's speed).

``timeslice._run``'s ``handovers`` (a run of round-robin handovers on local variables) against the general event
loop (``fast=False``), and the capacity question's replicates (in chunks, the first ones reused when a scenario is
asked again) against ``engine.predict`` in turn. The fault this catches (checked by breaking the code in a scratch
copy): a fast path that drifts from the model the general loop states, e.g. a handover that forgets the switch or
a kernel boundary computed from the wrong remaining work. The compiled loops the planner runs where numba is
installed are held to the same general loops in ``tests/test_plan_compiled.py``.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from kts_helpers.plan import capacity as cap
from kts_helpers.plan import engine, timeslice
from kts_helpers.plan.inputs import load_plan_input, mix_of
from kts_helpers.plan.timeslice import SimTenant, simulate

REF = Path(__file__).resolve().parents[1] / "data" / "reference"
REAL_MODELS = REF / "h200-2026-12-02-rm-bert-vit-llama"

# launch-bound chains (the real models' kind), a GPU-bound chain, one-kernel tenants, jitter: every branch of
# ``handovers`` (busy share below and at 1, one and many kernels, a holder handed the GPU again)
CASES = {
    "launch-bound chains": [SimTenant("llm", 11.0, 0.05, kernels=547, busy_share=0.09),
                            SimTenant("bert", 9.0, 10.0, 1.0, kernels=69, busy_share=0.065),
                            SimTenant("vit", 6.5, 10.0, 2.0, kernels=68, busy_share=0.19)],
    "gpu-bound chain and singles": [SimTenant("chain", 3.0, 0.5, 0.4, kernels=12),
                                    SimTenant("gemm", 4.0, 1.0), SimTenant("fft", 0.4, 2.0, 1.5)],
    "mixed": [SimTenant("llm", 2.4, 0.0, kernels=60, busy_share=0.2), SimTenant("gemm", 21.6, 0.0),
              SimTenant("fft", 0.36, 5.0, 1.0, busy_share=0.6), SimTenant("chain", 1.5, 0.3, kernels=5)],
}


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("timer", timeslice.SLICE_TIMERS)
@pytest.mark.parametrize("idle_resets", [False, True])
def test_handovers_are_the_general_loop_to_the_bit(case: str, timer: str, idle_resets: bool) -> None:
    kw = dict(quantum_ms=2.2, context_switch_ms=0.16, duration_ms=3_000.0, seed=3, slice_timer=timer,
              idle_resets_slice=idle_resets, switch_after_idle=not idle_resets)
    fast = simulate(CASES[case], **kw)  # type: ignore[arg-type]
    slow = simulate(CASES[case], fast=False, **kw)  # type: ignore[arg-type]
    assert len(fast) > 300
    pd.testing.assert_frame_equal(fast, slow, check_exact=True)


@pytest.fixture(scope="module")
def real_models() -> tuple[list[engine.AloneProfile], engine.GpuModel]:
    inp = load_plan_input(REAL_MODELS)
    return mix_of(inp), inp.gpu


def test_real_model_replicate_is_the_general_loop_to_the_bit(real_models, monkeypatch: pytest.MonkeyPatch) -> None:
    """The capacity question's own case: BERT + ViT + the Llama step drawn from their alone runs, with the probe's
    quantum and switch (the handovers that were 397 s of CPU)."""
    mix, gpu = real_models
    sc = engine.Scenario("rm-n4", cap.pods(mix, 4), (40,) * 4, "timeslice")
    fast = engine.simulate_once(sc, gpu, 7, duration_ms=4_000.0)
    monkeypatch.setattr(engine, "simulate", lambda *a, **k: simulate(*a, fast=False, **k))
    slow = engine.simulate_once(sc, gpu, 7, duration_ms=4_000.0)
    assert len(fast) > 500
    pd.testing.assert_frame_equal(fast, slow, check_exact=True)


def test_replicates_in_chunks_and_reused_predict_as_in_turn(real_models) -> None:
    """Chunked on two workers, with the first replicates known (settle's reuse): the predictions of
    ``engine.predict`` in turn, every field equal."""
    mix, gpu = real_models
    sc = engine.Scenario("rm-n2", cap.pods(mix, 2), (60, 60), "timeslice")
    in_turn = engine.predict(sc, gpu, replicates=5, seed=2)
    known = {id(sc): engine.replicate_stats(sc, gpu, 2, range(2))}
    chunked = cap.predict_all([sc], gpu, replicates=5, seed=2, workers=2, known=known)
    assert chunked == [in_turn]
    assert len(known[id(sc)]) == 5 and cap.predict_all([sc], gpu, replicates=5, seed=2, known=known) == [in_turn]


@pytest.mark.parametrize("case", sorted(CASES))
def test_handovers_leave_the_multi_context_rule_to_the_general_loop(case: str) -> None:
    """With the measured rule for several busy contexts (an arrival may preempt the holder), still to the bit."""
    def rule(busy: int, holder_ms: float) -> float | None:
        return None if holder_ms < 0.5 else 0.3 * busy

    kw = dict(quantum_ms=2.2, context_switch_ms=0.16, duration_ms=3_000.0, seed=5, slice_timer="switch-in",
              multi_wait=rule, idle_resets_slice=True, switch_after_idle=False)
    pd.testing.assert_frame_equal(simulate(CASES[case], **kw), simulate(CASES[case], fast=False, **kw),  # type: ignore[arg-type]
                                  check_exact=True)
