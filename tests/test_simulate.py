"""The teaching simulator: hand-computable cases, the median/tail story, DF sweeps, the quantum fit,
and the real-run comparison on synthetic run directories."""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from kts_helpers.errors import KtsError, RunError
from kts_helpers.teaching.measured import from_run
from kts_helpers.teaching.model import (
    SimError,
    SimTenant,
    degradation,
    fit_distances,
    fit_quantum,
    simulate,
    summarize_sim,
    sweep,
    timeline,
)
from kts_helpers.teaching.synthetic import write_sim_run

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


def test_device_time_never_includes_waiting() -> None:
    ts = [SimTenant("a", 0.7, 3.0, 2.0), SimTenant("b", 6.0, 1.0, 0.5), SimTenant("c", 2.5, 0.0)]
    kernels, seg = timeline(ts, quantum_ms=1.5, context_switch_ms=0.2, duration_ms=3000, seed=4)
    lengths = kernels["tenant"].map({t.name: t.kernel_ms for t in ts})
    assert np.allclose(kernels["device_ms"], lengths)
    assert (kernels["wait_ms"] > 0).mean() > 0.5  # the wait is real and frequent here ...
    assert np.allclose(kernels["wall_ms"], kernels["device_ms"] + kernels["wait_ms"])
    assert (kernels["span_ms"] >= kernels["device_ms"] - 1e-9).all()
    # ... and the GPU's own accounting agrees: run segments per tenant add up to device time
    runs = seg[seg["what"] == "run"]
    in_flight = kernels["end_ms"].max()
    ran = runs[runs["end_ms"] <= in_flight].assign(d=lambda s: s["end_ms"] - s["start_ms"])
    assert ran.groupby("tenant")["d"].sum().to_dict() == pytest.approx(
        kernels.groupby("tenant")["device_ms"].sum().to_dict())
    # one context at a time: segments never overlap
    ordered = seg.sort_values("start_ms")
    assert (ordered["start_ms"].to_numpy()[1:] >= ordered["end_ms"].to_numpy()[:-1] - 1e-9).all()


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


def test_degradation_reports_alone_and_shared() -> None:
    d = degradation([FFT, GEMM], quantum_ms=2.0, duration_ms=30_000).set_index("tenant")
    assert d.loc["fft", "df"] == pytest.approx(d.loc["fft", "p99_shared_ms"] / d.loc["fft", "p99_alone_ms"])
    assert d.loc["gemm", "p99_alone_ms"] == pytest.approx(30.0)


def test_fit_quantum_recovers_a_known_quantum() -> None:
    truth = simulate([FFT, GEMM], quantum_ms=3.0, duration_ms=120_000, seed=7)
    waits = {n: (g["start_ms"] - g["arrival_ms"]).to_numpy() for n, g in truth.groupby("tenant")}
    cands = [0.5, 1.0, 2.0, 3.0, 4.0, 6.0, 8.0]
    assert fit_quantum(waits, [FFT, GEMM], cands, duration_ms=120_000, seed=0) == 3.0
    assert fit_quantum(waits["fft"], [FFT, GEMM], cands, duration_ms=120_000, seed=0) == 3.0
    d = fit_distances(waits, [FFT, GEMM], cands, duration_ms=120_000).set_index("quantum_ms")["distance_ms"]
    assert d.idxmin() == 3.0 and d[0.5] > d[2.0] > d[3.0] < d[4.0] < d[8.0]


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

def test_from_run_recovers_the_quantum_and_the_df(tmp_path: Path) -> None:
    run = write_sim_run(tmp_path / "run", [FFT, GEMM], 4.0, duration_ms=60_000, seed=3)
    out = from_run(run, candidates=[1.0, 2.0, 4.0, 8.0, 16.0], duration_ms=60_000)
    assert out["quantum_ms"] == 4.0
    cmp_ = out["comparison"].set_index("tenant")
    assert cmp_.loc["fft", "kernel_ms"] == pytest.approx(1.0)
    assert cmp_.loc["gemm", "period_ms"] == pytest.approx(150.0)
    assert cmp_.loc["fft", "measured_df"] == pytest.approx(5.0, rel=0.05)
    assert cmp_.loc["fft", "sim_df"] == pytest.approx(cmp_.loc["fft", "measured_df"], rel=0.1)
    assert set(out["measured_waits"]) == {"fft", "gemm"}


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


def test_from_run_on_a_hand_written_run(tmp_path: Path) -> None:
    out = from_run(_hand_written_run(tmp_path / "r"), candidates=[0.5, 1.0, 2.0, 4.0], duration_ms=60_000)
    assert out["quantum_ms"] == 2.0  # the measured waits are 0 or 2 ms once the 0.05 ms overhead is removed
    cmp_ = out["comparison"].set_index("tenant")
    assert cmp_.loc["fft", "measured_df"] == pytest.approx(3.05 / 1.05)
    assert cmp_.loc["gemm", "measured_df"] == pytest.approx(1.0)
    assert list(cmp_.columns) == ["kernel_ms", "period_ms", "measured_p99_alone_ms", "measured_p99_shared_ms",
                                  "measured_df", "sim_p99_alone_ms", "sim_p99_shared_ms", "sim_df"]


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
    lone = _hand_written_run(tmp_path / "lone")
    m = json.loads((lone / "manifest.json").read_text())
    m["spec"]["scenarios"] = m["spec"]["scenarios"][:2]
    (lone / "manifest.json").write_text(json.dumps(m))
    cases.append((lone, "no shared scenario"))
    for path, match in cases:
        with pytest.raises(RunError, match=match) as exc:
            from_run(path, candidates=[1.0], duration_ms=5_000)
        assert "\n" not in str(exc.value)


def test_write_sim_run_never_overwrites(tmp_path: Path) -> None:
    write_sim_run(tmp_path / "r", [FFT], 2.0, duration_ms=1_000)
    with pytest.raises(RunError, match="already exists"):
        write_sim_run(tmp_path / "r", [FFT], 2.0, duration_ms=1_000)
