"""The teaching simulator: hand-computable cases, the event rule for both tenants, the median/tail story, DF
sweeps, the quantum fit with its interval, and the real-run comparison on synthetic run directories."""

from __future__ import annotations

import json
import math
import re
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from kts_helpers.analyse.rules import min_corunning_samples
from kts_helpers.errors import KtsError, RunError
from kts_helpers.teaching.fit import fit_distances, fit_quantum, fit_with_interval
from kts_helpers.teaching.measured import COMPARISON_COLUMNS, from_run
from kts_helpers.teaching.model import (
    SimError,
    SimTenant,
    degradation,
    simulate,
    summarize_sim,
    sweep,
    timeline,
)
from kts_helpers.teaching.synthetic import write_sim_probe, write_sim_run

FFT = SimTenant("fft", 1.0, 100.0, 5.0)
GEMM = SimTenant("gemm", 30.0, 150.0, 5.0)


def _one(df: pd.DataFrame, tenant: str) -> pd.Series:
    rows = df[df["tenant"] == tenant]
    assert len(rows) == 1
    return rows.iloc[0]


def _pair(quantum: float, long_ms: float = 10.0, short_ms: float = 1.0, arrive: float = 3.0,
          switch: float = 0.0) -> pd.DataFrame:
    """A long kernel issued at 0 and a short one at ``arrive``; each issues once."""
    return simulate([SimTenant("long", long_ms, 1e9), SimTenant("short", short_ms, 1e9)], quantum_ms=quantum,
                    context_switch_ms=switch, duration_ms=arrive + 1e-6, offsets_ms=[0.0, arrive])


def test_lone_tenant_never_waits_even_with_a_tiny_quantum() -> None:
    df = simulate([SimTenant("solo", 10.0, 3.0, 1.0)], quantum_ms=0.5, context_switch_ms=1.0, duration_ms=2000)
    assert len(df) > 100
    assert (df["wait_ms"] == 0).all()
    assert np.allclose(df["wall_ms"], 10.0)
    assert (df["start_ms"] == df["arrival_ms"]).all()
    # closed loop: the next kernel is issued after the previous one completed and a sleep of 3 +/- 1 ms
    gaps = df["arrival_ms"].to_numpy()[1:] - df["end_ms"].to_numpy()[:-1]
    assert gaps.min() >= 2.0 - 1e-9 and gaps.max() <= 4.0 + 1e-9


@pytest.mark.parametrize(("quantum", "expected_wait"), [(2.0, 2.0), (4.0, 4.0), (20.0, 7.0), (7.0, 7.0)])
def test_short_kernel_waits_min_of_remaining_and_quantum(quantum: float, expected_wait: float) -> None:
    df = _pair(quantum)  # at t=3 the long kernel has 7 ms left
    short, long = _one(df, "short"), _one(df, "long")
    assert short["wait_ms"] == pytest.approx(expected_wait)
    assert short["start_ms"] == pytest.approx(3.0 + expected_wait)
    assert short["wall_ms"] == pytest.approx(1.0 + expected_wait)
    # the long kernel is pushed back by the short one's run time only if it was preempted
    assert long["end_ms"] == pytest.approx(11.0 if expected_wait < 7.0 else 10.0)


def test_switch_cost_is_paid_on_every_change_of_context() -> None:
    df = _pair(2.0, switch=0.5)
    short, long = _one(df, "short"), _one(df, "long")
    assert short["wait_ms"] == pytest.approx(2.5)  # quantum + one switch
    assert long["end_ms"] == pytest.approx(12.0)  # 10 of work + 1 of short + 2 switches
    _, seg = timeline([SimTenant("long", 10.0, 1e9), SimTenant("short", 1.0, 1e9)], quantum_ms=2.0,
                      context_switch_ms=0.5, duration_ms=3.1, offsets_ms=[0.0, 3.0])
    assert seg["what"].tolist() == ["run", "switch", "run", "switch", "run"]
    assert seg["tenant"].tolist() == ["long", "short", "short", "long", "long"]


def test_round_robin_order_among_three_tenants() -> None:
    ts = [SimTenant("a", 10.0, 1e9), SimTenant("b", 1.0, 1e9), SimTenant("c", 1.0, 1e9)]
    df = simulate(ts, quantum_ms=2.0, duration_ms=2.0, offsets_ms=[0.0, 1.0, 1.5])
    # a's quantum starts when b starts waiting (t=1) and expires at 3; then b (3-4), c (4-5), a resumes
    assert _one(df, "b")["start_ms"] == pytest.approx(3.0)
    assert _one(df, "c")["start_ms"] == pytest.approx(4.0)
    assert _one(df, "a")["end_ms"] == pytest.approx(12.0)


def test_quantum_expiry_alternates_two_busy_long_kernels() -> None:
    ts = [SimTenant("x", 5.0, 1e9), SimTenant("y", 5.0, 1e9)]
    _, seg = timeline(ts, quantum_ms=2.0, duration_ms=1.0, offsets_ms=[0.0, 0.0])
    assert seg["tenant"].tolist() == ["x", "y", "x", "y", "x", "y"]
    assert np.allclose(seg["end_ms"] - seg["start_ms"], [2, 2, 2, 2, 1, 1])


@pytest.mark.parametrize(("arrives", "contention_wait", "switch_in_wait"), [
    (1.5, 2.0, 0.5),  # mid-way through the long one's first slice: what is left of it
    (3.0, 2.0, 1.0),  # its second slice (slices follow each other while it holds the GPU alone)
    (0.1, 2.0, 1.9),
])
def test_the_slice_timer_decides_how_long_a_short_kernel_waits(arrives: float, contention_wait: float,
                                                               switch_in_wait: float) -> None:
    """``contention``: a whole quantum from when the short one starts waiting; ``switch-in`` (the H200 probe's
    finding): until the holder's current slice ends, slices counted from its switch-in."""
    long_, short = SimTenant("long", 10.0, 1e9), SimTenant("short", 0.5, 1e9)
    for timer, want in (("contention", contention_wait), ("switch-in", switch_in_wait)):
        df = simulate([long_, short], quantum_ms=2.0, duration_ms=arrives + 1e-6, offsets_ms=[0.0, arrives],
                      slice_timer=timer).set_index("tenant")
        assert df.loc["short", "wait_ms"] == pytest.approx(want), timer
        assert df.loc["long", "device_ms"] == pytest.approx(10.5)  # preempted mid-way either way


def test_switch_in_timer_spreads_waits_up_to_a_quantum_and_the_holder_pays_the_switch() -> None:
    tick, hog = SimTenant("tick", 0.05, 25.0, 25.0), SimTenant("hog", 50.0, 0.0)
    waits = {}
    for timer in ("contention", "switch-in"):
        df = simulate([tick, hog], quantum_ms=2.0, context_switch_ms=0.2, duration_ms=60_000, seed=2,
                      slice_timer=timer)
        w = df.loc[df["tenant"] == "tick", "wait_ms"].to_numpy()
        waits[timer] = w[w > 0]  # a tick issued at its own completion keeps the GPU: no wait
    # contention: every tick that finds the hog busy waits a whole quantum plus its switch-in
    assert np.quantile(waits["contention"], [0.05, 0.95]) == pytest.approx([2.2, 2.2])
    # switch-in: what is left of the hog's slice, which began with the hog's own switch-in (paid inside it)
    w = waits["switch-in"]
    assert w.min() >= 0.2 - 1e-9 and w.max() <= 2.2 + 1e-9
    assert np.median(w) == pytest.approx(1.2, abs=0.15) and np.quantile(w, 0.99) > 2.1
    seg = timeline([tick, hog], quantum_ms=2.0, context_switch_ms=0.2, duration_ms=20_000, seed=2,
                   slice_timer="switch-in")[1].reset_index(drop=True)
    # the hog between two ticks (its switch-in, its run, the tick's switch-in): whole slices, switch included
    full = [seg.loc[i + 1, "end_ms"] - seg.loc[i, "start_ms"] for i in range(len(seg) - 2)
            if (seg.loc[i, "tenant"], seg.loc[i, "what"]) == ("hog", "switch")
            and (seg.loc[i + 1, "tenant"], seg.loc[i + 1, "what"]) == ("hog", "run")
            and (seg.loc[i + 2, "tenant"], seg.loc[i + 2, "what"]) == ("tick", "switch")]
    full = np.asarray(full)
    whole = np.isclose(np.round(full / 2.0) * 2.0, full)  # the rest ended with a hog kernel, not a slice
    assert len(full) > 50 and whole.mean() > 0.9 and full.min() == pytest.approx(2.0)
    assert simulate([hog], quantum_ms=2.0, duration_ms=1_000, slice_timer="switch-in")["wait_ms"].eq(0).all()


def test_from_run_on_the_h200_probe_fits_the_probes_quantum() -> None:
    """The measured probe: with the switch-in timer the fitted quantum agrees with the probe's reading."""
    ref = Path(__file__).resolve().parents[1] / "data" / "reference" / "h200-2026-11-30-probe"
    out = from_run(ref, duration_ms=30_000, n_resamples=200)
    assert out.slice_timer == "switch-in" and out.fitted and list(out.fit.wait_quantiles["tenant"].unique()) == ["tick"]
    assert "they agree within their intervals" in out.probe_agreement(), out.probe_agreement()
    assert out.fit.residual_ms < 0.06
    with_contention = from_run(ref, duration_ms=30_000, n_resamples=200, slice_timer="contention")
    assert "they disagree" in with_contention.probe_agreement()  # the other timer cannot fit the waits' shape
    assert with_contention.fit.residual_ms > 2 * out.fit.residual_ms


def test_work_time_never_includes_waiting_and_events_never_include_the_wait_before_start() -> None:
    ts = [SimTenant("a", 0.7, 3.0, 2.0), SimTenant("b", 6.0, 1.0, 0.5), SimTenant("c", 2.5, 0.0)]
    kernels, seg = timeline(ts, quantum_ms=1.5, context_switch_ms=0.2, duration_ms=3000, seed=4)
    lengths = kernels["tenant"].map({t.name: t.kernel_ms for t in ts})
    assert np.allclose(kernels["work_ms"], lengths)
    assert (kernels["wait_ms"] > 0).mean() > 0.5  # the wait is real and frequent here ...
    # ... and it is the wait before the first instruction: outside the events, inside the wall clock
    assert np.allclose(kernels["wait_ms"], kernels["start_ms"] - kernels["arrival_ms"])
    assert np.allclose(kernels["wall_ms"], kernels["device_ms"] + kernels["wait_ms"])
    assert np.allclose(kernels["device_ms"], kernels["end_ms"] - kernels["start_ms"])
    assert (kernels["device_ms"] >= kernels["work_ms"] - 1e-9).all()
    # the 6 ms kernels (longer than the 1.5 ms quantum) get preempted mid-way; the 0.7 ms ones never do
    stretched = kernels["device_ms"] > kernels["work_ms"] + 1e-9
    assert stretched[kernels["tenant"] == "b"].mean() > 0.3
    assert not stretched[kernels["tenant"] == "a"].any()
    # ... and the GPU's own accounting agrees: run segments per tenant add up to work time
    runs = seg[seg["what"] == "run"]
    in_flight = kernels["end_ms"].max()
    ran = runs[runs["end_ms"] <= in_flight].assign(d=lambda s: s["end_ms"] - s["start_ms"])
    assert ran.groupby("tenant")["d"].sum().to_dict() == pytest.approx(
        kernels.groupby("tenant")["work_ms"].sum().to_dict())
    # one context at a time: segments never overlap
    ordered = seg.sort_values("start_ms")
    assert (ordered["start_ms"].to_numpy()[1:] >= ordered["end_ms"].to_numpy()[:-1] - 1e-9).all()


def test_a_kernel_preempted_mid_way_carries_the_neighbours_slice_inside_its_events() -> None:
    df = _pair(2.0, switch=0.5)  # long: 10 ms from t=0; short: 1 ms at t=3, waits one quantum + one switch
    short, long = _one(df, "short"), _one(df, "long")
    assert short["wait_ms"] == pytest.approx(2.5) and short["device_ms"] == pytest.approx(1.0)
    assert short["wall_ms"] == pytest.approx(3.5)
    # the long kernel never waited to start, but its events span the short slice and both switches
    assert long["wait_ms"] == 0 and long["work_ms"] == pytest.approx(10.0)
    assert long["device_ms"] == pytest.approx(12.0) and long["wall_ms"] == pytest.approx(12.0)


def test_long_tenants_device_p99_grows_while_the_short_tenants_does_not() -> None:
    """The event rule in the statistics: preempted mid-way (long tenant) vs waiting before the start (short)."""
    shared = summarize_sim(simulate([FFT, GEMM], quantum_ms=2.0, duration_ms=200_000, seed=1)).set_index("tenant")
    alone = {t.name: summarize_sim(simulate([t], quantum_ms=2.0, duration_ms=200_000, seed=1)).iloc[0]
             for t in (FFT, GEMM)}
    assert shared.loc["fft", "device_p99_ms"] == pytest.approx(alone["fft"]["device_p99_ms"])
    assert shared.loc["fft", "wall_p99_ms"] > alone["fft"]["wall_p99_ms"] + 1.5
    # a GEMM kernel preempted mid-way carries the FFT's 1 ms kernel inside its events
    assert shared.loc["gemm", "device_p99_ms"] == pytest.approx(alone["gemm"]["device_p99_ms"] + FFT.kernel_ms)
    d = degradation([FFT, GEMM], quantum_ms=2.0, duration_ms=200_000, seed=1).set_index("tenant")
    assert d.loc["fft", "device_df"] == pytest.approx(1.0)
    assert d.loc["gemm", "device_df"] == pytest.approx(31.0 / 30.0)
    # with a quantum longer than the GEMM's kernels nothing is preempted mid-way: the long tenant's events stay
    d = degradation([FFT, GEMM], quantum_ms=40.0, duration_ms=200_000, seed=1).set_index("tenant")
    assert d.loc["gemm", "device_df"] == pytest.approx(1.0)


def test_host_overhead_is_in_the_wall_clock_only() -> None:
    df = simulate([SimTenant("solo", 2.0, 5.0, overhead_ms=0.3)], quantum_ms=1.0, duration_ms=500)
    assert np.allclose(df["wall_ms"], 2.3) and np.allclose(df["device_ms"], 2.0) and (df["wait_ms"] == 0).all()


def test_short_tenant_median_stays_while_tail_grows_by_about_the_quantum() -> None:
    q = 3.0
    shared = summarize_sim(simulate([FFT, GEMM], quantum_ms=q, duration_ms=200_000, seed=1)).set_index("tenant")
    alone = summarize_sim(simulate([FFT], quantum_ms=q, duration_ms=200_000, seed=1)).set_index("tenant")
    assert abs(shared.loc["fft", "wall_p50_ms"] - alone.loc["fft", "wall_p50_ms"]) < 0.05 * q
    growth = shared.loc["fft", "wall_p99_ms"] - alone.loc["fft", "wall_p99_ms"]
    assert growth == pytest.approx(q, rel=0.15)
    assert shared.loc["fft", "device_p99_ms"] == pytest.approx(alone.loc["fft", "device_p99_ms"])


def test_df_grows_with_quantum() -> None:
    out = sweep([FFT, GEMM], "quantum_ms", [0.5, 1, 2, 4, 8], duration_ms=60_000, seed=2)
    fft = out[out["tenant"] == "fft"].sort_values("value")
    assert list(fft["param"].unique()) == ["quantum_ms"]
    assert np.all(np.diff(fft["df"].to_numpy()) >= -1e-9)
    assert fft["df"].iloc[-1] > 3 * fft["df"].iloc[0]
    assert np.allclose(fft["p99_alone_ms"], 1.0)


def test_sweep_over_a_tenants_kernel_and_cadence() -> None:
    k = sweep([FFT, GEMM], "gemm.kernel_ms", [0.5, 30.0], quantum_ms=4.0, duration_ms=60_000)
    fft = k[k["tenant"] == "fft"].set_index("value")["df"]
    assert fft[0.5] < 1.6 < fft[30.0]  # a short neighbour can delay by its own length only
    p = sweep([FFT, GEMM], "gemm.period_ms", [0.0, 100_000.0], quantum_ms=4.0, duration_ms=60_000)
    fft = p[p["tenant"] == "fft"].set_index("value")["df"]
    assert fft[0.0] == pytest.approx(5.0)  # always busy: every FFT kernel waits a full quantum
    assert fft[100_000.0] < 1.5  # rarely busy: the p99 does not notice


def test_degradation_reports_alone_and_shared_on_both_clocks() -> None:
    d = degradation([FFT, GEMM], quantum_ms=2.0, duration_ms=30_000).set_index("tenant")
    assert d.loc["fft", "df"] == pytest.approx(d.loc["fft", "p99_shared_ms"] / d.loc["fft", "p99_alone_ms"])
    assert d.loc["gemm", "device_df"] == pytest.approx(d.loc["gemm", "device_p99_shared_ms"]
                                                       / d.loc["gemm", "device_p99_alone_ms"])
    assert d.loc["gemm", "p99_alone_ms"] == pytest.approx(30.0)
    # each clock against its own alone clock: a host overhead is in the wall clock only
    d = degradation([FFT, SimTenant("gemm", 30.0, 150.0, 5.0, overhead_ms=0.5)], quantum_ms=2.0,
                    duration_ms=30_000).set_index("tenant")
    assert d.loc["gemm", "p99_alone_ms"] == pytest.approx(30.5)
    assert d.loc["gemm", "device_p99_alone_ms"] == pytest.approx(30.0)
    assert d.loc["gemm", "device_p50_shared_ms"] == pytest.approx(30.0)


def test_fit_quantum_recovers_a_known_quantum() -> None:
    truth = simulate([FFT, GEMM], quantum_ms=3.0, duration_ms=120_000, seed=7)
    waits = {n: (g["start_ms"] - g["arrival_ms"]).to_numpy() for n, g in truth.groupby("tenant")}
    cands = [0.5, 1.0, 2.0, 3.0, 4.0, 6.0, 8.0]
    assert fit_quantum(waits, [FFT, GEMM], cands, duration_ms=120_000, seed=0) == 3.0
    assert fit_quantum(waits["fft"], [FFT, GEMM], cands, duration_ms=120_000, seed=0) == 3.0
    d = fit_distances(waits, [FFT, GEMM], cands, duration_ms=120_000).set_index("quantum_ms")["distance_ms"]
    assert d.idxmin() == 3.0 and d[0.5] > d[2.0] > d[3.0] < d[4.0] < d[8.0]


def test_fit_with_interval_finds_a_quantum_between_grid_points_and_widens_with_fewer_waits() -> None:
    truth = simulate([FFT, GEMM], quantum_ms=2.7, duration_ms=150_000, seed=7)
    exact = {n: g["wait_ms"].to_numpy() for n, g in truth.groupby("tenant")}
    cands = [1.0, 2.0, 4.0, 8.0]
    fit = fit_with_interval(exact, [FFT, GEMM], cands, duration_ms=150_000, n_resamples=200)
    assert fit.quantum_ms == pytest.approx(2.7, abs=0.03)  # not a grid point: the fine grid and the parabola
    assert fit.lo - 1e-9 <= fit.quantum_ms <= fit.hi + 1e-9 and fit.residual_ms < 0.05
    assert set(fit.wait_quantiles["tenant"]) == {"fft", "gemm"}
    # the waits as a real timer reads them, with a little noise: the interval has a width, which grows when
    # there are fewer waits (the bootstrap sees the sample size), and the model's misfit shows in the residual
    rng = np.random.default_rng(0)
    noisy = {k: np.clip(v + rng.normal(0, 0.05, len(v)), 0, None) for k, v in exact.items()}
    many = fit_with_interval(noisy, [FFT, GEMM], cands, duration_ms=150_000, n_resamples=200)
    few = fit_with_interval({k: v[::10] for k, v in noisy.items()}, [FFT, GEMM], cands, duration_ms=150_000,
                            n_resamples=200)
    assert few.hi - few.lo > 1.2 * (many.hi - many.lo) > 0
    assert many.residual_ms > fit.residual_ms
    assert many.quantum_ms == pytest.approx(2.7, abs=0.1)


def test_hundred_thousand_kernels_in_seconds() -> None:
    ts = [SimTenant("a", 0.2, 0.0), SimTenant("b", 1.0, 0.5, 0.2)]
    t0 = time.perf_counter()
    df = simulate(ts, quantum_ms=0.5, duration_ms=40_000)
    assert len(df) > 100_000
    assert time.perf_counter() - t0 < 10.0


@pytest.mark.parametrize(("call", "match"), [
    (lambda: simulate([]), "at least one tenant"),
    (lambda: simulate([SimTenant("a", 0.0, 1.0)]), "kernel_ms must be > 0"),
    (lambda: simulate([SimTenant("a", 1.0, -1.0)]), "period_ms must be >= 0"),
    (lambda: simulate([FFT], quantum_ms=0.0), "quantum_ms must be > 0"),
    (lambda: simulate([FFT], slice_timer="sometimes"), "slice_timer must be one of"),
    (lambda: simulate([FFT], 1.0, 1.0, slice_timer="switch-in"), "must be < quantum_ms"),
    (lambda: simulate([FFT, FFT]), "unique"),
    (lambda: simulate([FFT, GEMM], offsets_ms=[0.0]), "offsets_ms needs 2"),
    (lambda: sweep([FFT, GEMM], "speed", [1.0]), "unknown sweep parameter"),
    (lambda: sweep([FFT, GEMM], "llm.kernel_ms", [1.0]), "unknown sweep parameter"),
    (lambda: fit_quantum({"nobody": [1.0]}, [FFT], [1.0]), "unknown tenant"),
    (lambda: fit_quantum([], [FFT], [1.0]), "non-empty"),
    (lambda: fit_quantum([0.0], [FFT], []), "candidates"),
    (lambda: summarize_sim(pd.DataFrame({"x": [1]})), "missing"),
])
def test_bad_input_is_a_one_line_kts_error(call, match: str) -> None:
    with pytest.raises(SimError, match=match) as exc:
        call()
    assert isinstance(exc.value, KtsError) and "\n" not in str(exc.value)


# --- real runs -----------------------------------------------------------------------------------

def test_from_run_fits_the_quantum_with_an_interval_and_compares_both_clocks(tmp_path: Path) -> None:
    # two blocks a side (the bracketed design): the drift is measured, not the prior's; >= 368 contended waits
    run = write_sim_run(tmp_path / "run", [FFT, GEMM], 4.0, duration_ms=130_000, seed=3, blocks=2)
    out = from_run(run, candidates=[1.0, 2.0, 4.0, 8.0, 16.0], duration_ms=100_000, n_resamples=300)
    assert out.fitted and out.why_not_fitted == "" and sum(out.n_contended.values()) >= min_corunning_samples()
    assert out.fit.quantum_ms == pytest.approx(4.0, abs=0.1) and out.fit.lo <= out.fit.quantum_ms <= out.fit.hi
    assert out.quantum_ms == out.fit.quantum_ms and out.quantum_source == "fitted to this run's waits"
    cmp_ = out.comparison.set_index(["tenant", "clock"])
    assert set(cmp_.index) == {("fft", "wall"), ("gemm", "wall"), ("fft", "device"), ("gemm", "device")}
    assert {t.name: t.kernel_ms for t in out.tenants} == pytest.approx({"fft": 1.0, "gemm": 30.0})
    assert cmp_.loc[("fft", "wall"), "measured_df"] == pytest.approx(5.0, rel=0.05)
    assert cmp_.loc[("fft", "wall"), "sim_df"] == pytest.approx(cmp_.loc[("fft", "wall"), "measured_df"], rel=0.1)
    # the event rule, measured and simulated: the short tenant's events see nothing, the long tenant's stretch
    assert cmp_.loc[("fft", "device"), "measured_df"] == pytest.approx(1.0)
    assert cmp_.loc[("fft", "device"), "sim_df"] == pytest.approx(1.0)
    assert cmp_.loc[("gemm", "device"), "measured_df"] == pytest.approx(31.0 / 30.0, rel=0.01)
    assert cmp_.loc[("gemm", "device"), "sim_df"] == pytest.approx(31.0 / 30.0, rel=0.01)
    assert cmp_.loc[("gemm", "device"), "sim_in_interval"]
    assert out.long_tenant() == "gemm" and "event rule predicts" in out.long_tenant_text()
    shown = [re.match(r"Fitted quantum: \*\*([0-9.]+) \[([0-9.]+), ([0-9.]+)\] ms\*\*", line) for line in out.lines()]
    (m,) = [x for x in shown if x]
    assert [float(v) for v in m.groups()] == pytest.approx([out.fit.quantum_ms, out.fit.lo, out.fit.hi], abs=5e-4)


def test_from_run_measures_what_the_report_measures(tmp_path: Path) -> None:
    """Both clocks' DFs and intervals come from the report's summary and interval code on the same rows."""
    from kts_helpers.analyse.intervals import add_intervals
    from kts_helpers.analyse.load import load_run
    from kts_helpers.analyse.summary import summarize_frame

    data = load_run(write_sim_run(tmp_path / "run", [FFT, GEMM], 2.0, duration_ms=30_000, seed=3))
    out = from_run(data, duration_ms=10_000).comparison.set_index(["tenant", "clock"])
    for clock in ("wall", "device"):
        report = add_intervals(summarize_frame(data.iterations, clock), data.iterations, clock)
        for r in report[report["kind"] == "shared"].itertuples():
            assert out.loc[(r.tenant, clock), "measured_df"] == r.df
            lo, hi = (r.df_lo, r.df_hi) if not math.isnan(r.df_lo) else (-math.inf, math.inf)  # NaN: no interval
            assert [out.loc[(r.tenant, clock), "measured_df_lo"], out.loc[(r.tenant, clock), "measured_df_hi"]] == [
                lo, hi]
            assert out.loc[(r.tenant, clock), "reading"] == r.reading


def test_from_run_says_why_it_does_not_fit(tmp_path: Path) -> None:
    base = write_sim_run(tmp_path / "cpu", [FFT, GEMM], 4.0, duration_ms=20_000, seed=3)
    m = json.loads((base / "manifest.json").read_text())
    m["spec"]["device"] = "cpu"
    (base / "manifest.json").write_text(json.dumps(m))
    cpu = from_run(base, duration_ms=5_000)
    assert not cpu.fitted and "ran on the cpu, not a GPU" in cpu.why_not_fitted and cpu.comparison.empty
    lone = write_sim_run(tmp_path / "lone", [FFT, GEMM], 4.0, duration_ms=20_000, seed=3)
    m = json.loads((lone / "manifest.json").read_text())
    m["spec"]["scenarios"] = m["spec"]["scenarios"][:2]
    (lone / "manifest.json").write_text(json.dumps(m))
    alone = from_run(lone, duration_ms=5_000)
    assert not alone.fitted and "no shared scenario" in alone.why_not_fitted and alone.comparison.empty
    for r in (cpu, alone):
        assert any(line.startswith("Quantum fit skipped: ") for line in r.lines())
        assert "\n" not in r.why_not_fitted


def test_a_probe_run_is_its_own_probe_and_the_fit_agrees_with_it(tmp_path: Path) -> None:
    probe = write_sim_probe(tmp_path / "probe", 2.0, 0.1)
    out = from_run(probe, duration_ms=20_000, n_resamples=200)
    assert out.probe is not None and out.probe.quantum.value == pytest.approx(2.0, abs=0.02)
    assert out.switch_ms == pytest.approx(0.1, abs=0.01) and "probe" in out.switch_source
    assert out.fitted and out.quantum_ms == pytest.approx(2.0, abs=0.05)
    assert "they agree within their intervals" in out.probe_agreement()
    assert set(out.comparison["tenant"]) == {"tick", "hog"} and out.long_tenant() == "hog"


def _hand_written_run(root: Path, status: str = "complete") -> Path:
    """A run directory as the runner writes it, with real-GPU-like overhead (wall = device + 0.05)."""
    fft = {"name": "fft", "workload": "fft", "sleep_ms": 100.0, "iterations": 60, "matrix_size": 4096}
    gemm = {"name": "gemm", "workload": "gemm", "sleep_ms": 150.0, "iterations": 60, "matrix_size": 4096}
    spec = {"profile": "article", "device": "cuda",
            "resolved": {"sleep_ms_fft": 100.0, "sleep_ms_gemm": 150.0, "iterations": 60},
            "scenarios": [{"name": "baseline-fft", "kind": "baseline", "tenants": [fft]},
                          {"name": "baseline-gemm", "kind": "baseline", "tenants": [gemm]},
                          {"name": "shared", "kind": "shared", "tenants": [fft, gemm]}]}
    (root).mkdir()
    (root / "manifest.json").write_text(json.dumps({"format_version": 2, "status": status, "spec": spec}))
    rng = np.random.default_rng(0)
    for scen, tenant, dev, sleep, waits in [
        ("baseline-fft", "fft", 1.0, 100.0, np.zeros(60)),
        ("baseline-gemm", "gemm", 30.0, 150.0, np.zeros(60)),
        ("shared", "fft", 1.0, 100.0, np.where(rng.random(60) < 0.2, 2.0, 0.0)),
        ("shared", "gemm", 30.0, 150.0, np.zeros(60)),
    ]:
        (root / "logs" / scen).mkdir(parents=True, exist_ok=True)
        t, lines = 1_700_000_000_000_000_000, ["some warning printed by torch"]
        for i, w in enumerate(waits):
            wall = dev + 0.05 + w
            end = t + int(wall * 1e6)
            lines.append(f"KTS_APP,v2,{tenant},{tenant},{i},op,{t},{t},{end},{dev:.6f},{wall:.6f}")
            t = end + int(sleep * 1e6)
        (root / "logs" / scen / f"{tenant}.log").write_text("\n".join(lines) + "\n")
    return root


def test_from_run_on_thin_data_uses_the_probe_or_the_lesson_quantum(tmp_path: Path) -> None:
    run = _hand_written_run(tmp_path / "r")
    out = from_run(run, candidates=[0.5, 1.0, 2.0, 4.0], duration_ms=60_000, lesson_quantum_ms=3.0)
    assert not out.fitted and out.fit is None
    assert "too few contended waits" in out.why_not_fitted and f"at least {min_corunning_samples()}" in out.why_not_fitted
    assert out.quantum_ms == 3.0 and out.quantum_source == "the lesson's, not fitted"
    cmp_ = out.comparison.set_index(["tenant", "clock"])
    assert cmp_.loc[("fft", "wall"), "measured_df"] == pytest.approx(3.05 / 1.05)
    assert cmp_.loc[("gemm", "wall"), "measured_df"] == pytest.approx(1.0)
    assert list(out.comparison.columns) == COMPARISON_COLUMNS
    # with a probe run, its measured quantum and switch cost drive the model instead
    probe = write_sim_probe(tmp_path / "probe", 1.5, 0.05)
    with_probe = from_run(run, probe=probe, duration_ms=20_000)
    assert with_probe.quantum_ms == pytest.approx(1.5, abs=0.02) and "probe" in with_probe.quantum_source
    assert "no fit here to compare with" in with_probe.probe_agreement()
    # a probe whose tick never found the GPU busy measures nothing: the lesson's quantum again, and why
    idle = write_sim_probe(tmp_path / "idle", 2.0, 0.0, hog_busy=False)
    with_idle = from_run(run, probe=idle, duration_ms=20_000, lesson_quantum_ms=3.0)
    assert with_idle.quantum_ms == 3.0 and "no contended samples" in with_idle.probe_agreement()


def test_from_run_refuses_bad_run_directories(tmp_path: Path) -> None:
    cases: list[tuple[Path, str]] = [(tmp_path / "nowhere", "does not exist")]
    empty = tmp_path / "empty"
    empty.mkdir()
    cases.append((empty, "not a run directory"))
    cases.append((_hand_written_run(tmp_path / "running", status="running"), "'running', not 'complete'"))
    cases.append((_hand_written_run(tmp_path / "failed", status="failed"), "'failed', not 'complete'"))
    no_log = _hand_written_run(tmp_path / "nolog")
    (no_log / "logs" / "shared" / "gemm.log").unlink()
    cases.append((no_log, "gemm.* no alone or no co-running shared iterations"))
    junk = _hand_written_run(tmp_path / "junk")
    (junk / "logs" / "baseline-fft" / "fft.log").write_text("Traceback (most recent call last):\n")
    cases.append((junk, "fft.* no alone or no co-running shared iterations"))
    for path, match in cases:
        with pytest.raises(RunError, match=match) as exc:
            from_run(path, candidates=[1.0], duration_ms=5_000)
        assert "\n" not in str(exc.value)


def test_write_sim_run_never_overwrites(tmp_path: Path) -> None:
    write_sim_run(tmp_path / "r", [FFT], 2.0, duration_ms=1_000)
    with pytest.raises(RunError, match="already exists"):
        write_sim_run(tmp_path / "r", [FFT], 2.0, duration_ms=1_000)
