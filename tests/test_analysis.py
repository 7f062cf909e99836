"""analysis: clocks, overlap windows, DF matching, summaries, loading runs (also failed ones), efficiency."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from kts_helpers.analyse.load import load_logs, load_run
from kts_helpers.analyse.rules import add_clocks, mark_overlap, trim_leading
from kts_helpers.analyse.summary import (
    efficiency,
    overlap_counts,
    summarize_frame,
    summarize_run,
    summary_records,
    write_summary,
)
from kts_helpers.errors import LogParseError, RunError
from kts_helpers.run.experiment import calibration_floor
from kts_helpers.run.runs import create_run
from kts_helpers.run.spec import ExperimentParams, resolve

T0 = 1_795_974_308_654_992_882


def _series(n, *, start, period_ns, dev_scale, seed, tenant, workload, kind="shared", scenario="shared",
            phase="op"):
    rng = np.random.default_rng(seed)
    device = rng.gamma(4.0, dev_scale, n)
    wall = device + rng.uniform(-0.05, 0.8, n)  # sometimes below device: wait clips at 0
    start_ns = start + np.arange(n, dtype=np.int64) * period_ns
    end_ns = start_ns + (np.maximum(wall, 0) * 1e6).astype(np.int64)
    return pd.DataFrame({
        "workload": workload, "tenant": tenant, "iteration": np.arange(n), "phase": phase,
        "intended_ns": start_ns - rng.integers(0, 3_000_000, n), "start_ns": start_ns, "end_ns": end_ns,
        "device_ms": device, "wall_ms": wall, "version": "v2", "scenario": scenario, "kind": kind,
        "sharing": "timeslice",
    })


def test_add_clocks_wait_and_response():
    f = _series(200, start=T0, period_ns=10_000_000, dev_scale=1.0, seed=1, tenant="a", workload="fft")
    floor = 0.125
    out = add_clocks(f, floor)
    expected_wait = np.maximum(f["wall_ms"].to_numpy() - f["device_ms"].to_numpy() - floor, 0.0)
    np.testing.assert_array_equal(out["wait_ms"].to_numpy(), expected_wait)
    assert (out["wait_ms"] == 0).any() and (out["wait_ms"] > 0).any()
    expected_resp = (f["end_ns"].to_numpy(np.int64) - f["intended_ns"].to_numpy(np.int64)) / 1e6
    np.testing.assert_array_equal(out["response_ms"].to_numpy(), expected_resp)
    assert "wait_ms" not in f  # input untouched


def test_mark_overlap_window():
    a = _series(100, start=T0, period_ns=10_000_000, dev_scale=1, seed=1, tenant="a", workload="fft")
    b = _series(80, start=T0 + 250_000_000, period_ns=10_000_000, dev_scale=1, seed=2, tenant="b",
                workload="gemm")
    base = _series(50, start=T0 - 10**10, period_ns=10_000_000, dev_scale=1, seed=3, tenant="a",
                   workload="fft", kind="baseline", scenario="baseline-a")
    # a second shared scenario with its own window, and a one-tenant "shared" scenario (no window)
    c = _series(30, start=T0 + 10**11, period_ns=5_000_000, dev_scale=1, seed=4, tenant="a", workload="fft",
                scenario="shared-2")
    d = _series(40, start=T0 + 10**11 + 20_000_000, period_ns=5_000_000, dev_scale=1, seed=5, tenant="b",
                workload="gemm", scenario="shared-2")
    solo = _series(10, start=T0, period_ns=5_000_000, dev_scale=1, seed=6, tenant="a", workload="fft",
                   scenario="shared-solo")
    frame = pd.concat([a, b, base, c, d, solo], ignore_index=True)
    out = mark_overlap(frame)
    for scen, parts in (("shared", (a, b)), ("shared-2", (c, d))):
        lo = max(int(p["start_ns"].min()) for p in parts)
        hi = min(int(p["end_ns"].max()) for p in parts)
        sel = out["scenario"] == scen
        expected = (out.loc[sel, "start_ns"] >= lo) & (out.loc[sel, "end_ns"] <= hi)
        assert out.loc[sel, "in_overlap"].tolist() == expected.tolist()
        assert 0 < expected.sum() < sel.sum()
    assert out.loc[out["scenario"] == "baseline-a", "in_overlap"].all()
    assert out.loc[out["scenario"] == "shared-solo", "in_overlap"].all()
    assert mark_overlap(frame, clip=False)["in_overlap"].all()
    counts = overlap_counts(out).set_index(["scenario", "tenant"])
    assert counts.loc[("shared", "a"), "timed"] == 100
    assert counts.loc[("shared", "a"), "co_running"] + counts.loc[("shared", "a"), "outside"] == 100


def _stats(x):
    p50, p95, p99 = np.quantile(x, [0.5, 0.95, 0.99])
    return p50, p95, p99


def test_summarize_frame_numbers_and_df_matching():
    parts = [
        # baselines: tenant fft-1 (fft), tenant x (gemm)
        _series(120, start=T0, period_ns=10**7, dev_scale=1.0, seed=1, tenant="fft-1", workload="fft",
                kind="baseline", scenario="baseline-fft-1"),
        _series(120, start=T0, period_ns=10**7, dev_scale=3.0, seed=2, tenant="x", workload="gemm",
                kind="baseline", scenario="baseline-x"),
        # shared: fft-1 matches its own baseline; fft-2 and gemm-b fall back to their workload; llm has none
        _series(150, start=T0, period_ns=10**7, dev_scale=2.0, seed=3, tenant="fft-1", workload="fft"),
        _series(150, start=T0, period_ns=10**7, dev_scale=2.5, seed=4, tenant="fft-2", workload="fft"),
        _series(150, start=T0, period_ns=10**7, dev_scale=4.0, seed=5, tenant="gemm-b", workload="gemm"),
        _series(150, start=T0, period_ns=10**7, dev_scale=4.0, seed=6, tenant="llm", workload="llm"),
    ]
    frame = add_clocks(pd.concat(parts, ignore_index=True), 0.0)
    for metric in ("device", "wall", "wait"):
        table = summarize_frame(frame, metric).set_index(["kind", "tenant"])
        for p in parts:
            key = (p["kind"].iloc[0], p["tenant"].iloc[0])
            x = add_clocks(p, 0.0)[f"{metric}_ms"].to_numpy()
            row = table.loc[key]
            assert row["metric"] == metric and row["n"] == len(x)
            assert (row["p50_ms"], row["p95_ms"], row["p99_ms"]) == _stats(x)
            assert row["mean_ms"] == np.mean(x)
        p99 = table["p99_ms"]
        assert table.loc[("shared", "fft-1"), "df"] == p99[("shared", "fft-1")] / p99[("baseline", "fft-1")]
        assert table.loc[("shared", "fft-2"), "df"] == p99[("shared", "fft-2")] / p99[("baseline", "fft-1")]
        assert table.loc[("shared", "gemm-b"), "df"] == p99[("shared", "gemm-b")] / p99[("baseline", "x")]
        assert np.isnan(table.loc[("shared", "llm"), "df"])
        assert table.loc[("baseline", slice(None)), "df"].isna().all()
    recs = {(r["kind"], r["tenant"]): r for r in summary_records(summarize_frame(frame, "wall"))}
    assert "df" not in recs[("baseline", "x")] and recs[("shared", "llm")]["df"] is None
    json.dumps(list(recs.values()))  # JSON-ready


def test_df_matched_per_phase():
    parts = []
    for kind, scale in (("baseline", 1.0), ("shared", 3.0)):
        for phase, s in (("prefill", 5.0), ("decode", 1.0)):
            parts.append(_series(60, start=T0, period_ns=10**7, dev_scale=s * scale, seed=int(s * scale * 10),
                                 tenant="llm", workload="llm", kind=kind, scenario=kind, phase=phase))
    table = summarize_frame(pd.concat(parts, ignore_index=True), "device").set_index(["kind", "phase"])
    for phase in ("prefill", "decode"):
        assert table.loc[("shared", phase), "df"] == \
            table.loc[("shared", phase), "p99_ms"] / table.loc[("baseline", phase), "p99_ms"]


def test_summarize_frame_unknown_metric_and_missing_column():
    f = _series(10, start=T0, period_ns=10**7, dev_scale=1, seed=1, tenant="a", workload="fft")
    with pytest.raises(ValueError, match="unknown metric 'latency'"):
        summarize_frame(f, "latency")
    with pytest.raises(LogParseError, match="add_clocks"):
        summarize_frame(f, "wait")


def test_summarize_frame_respects_overlap_flag():
    f = _series(50, start=T0, period_ns=10**7, dev_scale=1, seed=1, tenant="a", workload="fft")
    f["in_overlap"] = np.arange(50) >= 20
    row = summarize_frame(f, "device").iloc[0]
    assert row["n"] == 30 and row["p99_ms"] == np.quantile(f["device_ms"].to_numpy()[20:], 0.99)


def test_trim_leading_per_series():
    a = _series(10, start=T0, period_ns=10**7, dev_scale=1, seed=1, tenant="a", workload="fft")
    b = _series(6, start=T0, period_ns=10**7, dev_scale=1, seed=2, tenant="b", workload="gemm")
    frame = pd.concat([a, b], ignore_index=True).sample(frac=1.0, random_state=0)  # order within series kept
    frame = frame.sort_values(["tenant", "iteration"], kind="stable")
    out = trim_leading(frame, 4)
    assert sorted(out.loc[out["tenant"] == "a", "iteration"]) == list(range(4, 10))
    assert sorted(out.loc[out["tenant"] == "b", "iteration"]) == [4, 5]
    assert trim_leading(frame, 0) is frame


def test_calibration_floor(tmp_path):
    """The overhead floor, computed with the standard library alone (the runner's host may lack numpy)."""
    cpu = tmp_path / "cpu.log"
    cpu.write_bytes(b"".join(f"KTS_APP,v2,noop,noop,{i},op,{T0},{T0},{T0 + 5000},0.005,0.005\n".encode()
                             for i in range(30)) + b"KTS_APP,v2,noop,noop,0,pad,1,1,2,9.0,1.0\n")
    assert calibration_floor(cpu) == {"floor_ms": 0.0, "n": 30,
                                      "note": "CPU: device time = wall time, no separate floor"}
    rng = np.random.default_rng(0)
    dev = rng.uniform(0.002, 0.004, 40)
    wall = dev + rng.uniform(0.01, 0.05, 40)
    gpu = tmp_path / "gpu.log"
    gpu.write_bytes(b"".join(
        f"KTS_APP,v2,noop,noop,{i},op,{T0},{T0},{T0 + 5000},{float(d)!r},{float(w)!r}\n".encode()
        for i, (d, w) in enumerate(zip(dev, wall, strict=True))) + b"garbage\n")
    cal = calibration_floor(gpu)
    gap = wall - dev
    assert cal["floor_ms"] == pytest.approx(np.median(gap), abs=1e-15) and cal["n"] == 40
    assert cal["p99_ms"] == pytest.approx(np.quantile(gap, 0.99), abs=1e-15)
    empty = tmp_path / "empty.log"
    empty.write_bytes(b"")
    assert calibration_floor(empty)["n"] == 0


def test_load_logs_v2_and_wait_metric(make_log):
    base = make_log("b.log", [make_log.v2("gemm", "g", i, T0 + i * 10**7, T0 + i * 10**7 + 3 * 10**6, 2.0 + i / 100,
                                          3.0) for i in range(30)])
    frame, parsed = load_logs([base], [], floor_ms=0.5)
    assert parsed.n == 30 and set(frame["scenario"]) == {"baseline-g"}
    np.testing.assert_array_equal(frame["wait_ms"].to_numpy(),
                                  np.maximum(3.0 - (2.0 + np.arange(30) / 100) - 0.5, 0.0))
    with pytest.raises(LogParseError, match="no log files"):
        load_logs([], [])


# -- runs ---------------------------------------------------------------------------------------------------
def _meta(tenant, workload, flops, nbytes, pid):
    return "KTS_META,v2," + json.dumps({"workload": workload, "tenant": tenant, "flops_per_op": flops,
                                        "bytes_per_op": nbytes, "pid": pid, "notes": {"x": 1}},
                                       separators=(",", ":"))


def _log(tenant, workload, n, seed, start, phases=("op",)):
    rng = np.random.default_rng(seed)
    lines = []
    t = start
    for i in range(n):
        for ph in phases:
            dev = float(rng.uniform(1.0, 4.0))
            lines.append(f"KTS_APP,v2,{workload},{tenant},{i},{ph},{t},{t},{t + int(dev * 1e6) + 1000},"
                         f"{dev!r},{dev + 0.001!r}")
            t += int(dev * 1e6) + 2_000_000
    return lines


@pytest.fixture
def crafted_run(tmp_path):
    spec = resolve(ExperimentParams.from_mapping({"profile": "tiny", "workloads": "fft,gemm"}), "cpu")
    run = create_run(spec.to_dict(), {}, root=tmp_path, run_id="crafted")
    work = {"fft": (1.0e9, 2.0e8), "gemm": (4.0e9, 1.0e8)}
    for scen in ("baseline-fft", "baseline-gemm", "shared"):
        d = run.claim_scenario(scen)
        tenants = ["fft", "gemm"] if scen == "shared" else [scen.split("-")[1]]
        for k, t in enumerate(tenants):
            if scen == "shared" and t == "gemm":
                continue  # the gemm tenant of the shared scenario never wrote a log
            lines = [_meta(t, t, *work[t], pid=1000 + k)] + _log(t, t, 40, seed=k + len(scen), start=T0)
            lines.insert(5, "Traceback (most recent call last):")
            (d / f"{t}.log").write_text("\n".join(lines) + "\n")
        run.record_scenario(scen, {"status": "failed" if scen == "shared" else "complete"})
    return run, work


def test_load_run_failed_scenario_reports_and_loads_what_exists(crafted_run):
    run, _ = crafted_run
    assert run.manifest()["status"] == "failed"
    data = load_run(run.path)
    assert any("marked failed" in p and "shared" in p for p in data.problems)
    assert "no log for shared/gemm" in data.problems
    got = data.iterations.groupby(["scenario", "tenant"]).size().to_dict()
    assert got == {("baseline-fft", "fft"): 40, ("baseline-gemm", "gemm"): 40, ("shared", "fft"): 40}
    issues = data.parse_issues.set_index(["scenario", "tenant"])
    assert issues.loc[("shared", "fft"), "other"] == 1 and issues.loc[("shared", "fft"), "valid"] == 40
    assert {"wait_ms", "response_ms", "in_overlap"} <= set(data.iterations.columns)
    assert data.floor_ms == 0.0 and data.run_id == "crafted"
    table = summarize_run(data)
    assert set(table["metric"]) == {"device", "wall", "wait"}


def test_load_run_incomplete_and_empty(tmp_path):
    spec = resolve(ExperimentParams.from_mapping({"profile": "tiny"}), "cpu")
    run = create_run(spec.to_dict(), {}, root=tmp_path, run_id="empty")
    with pytest.raises(RunError, match="no usable iterations") as exc:
        load_run(run)
    assert "\n" not in str(exc.value)
    run.claim_scenario("baseline-fft")
    run.log_path("baseline-fft", "fft").write_text("\n".join(_log("fft", "fft", 5, 1, T0)) + "\n")
    data = load_run(run)
    assert any("'running', not complete" in p for p in data.problems)
    assert len(data.iterations) == 5


def test_efficiency_uses_meta_work(crafted_run):
    run, work = crafted_run
    data = load_run(run)
    eff = efficiency(data).set_index(["scenario", "tenant"])
    assert set(eff.index) == {("baseline-fft", "fft"), ("baseline-gemm", "gemm"), ("shared", "fft")}
    for (scen, tenant), row in eff.iterrows():
        grp = data.iterations[(data.iterations["scenario"] == scen) & (data.iterations["tenant"] == tenant)]
        per_op = grp.groupby("iteration")["device_ms"].sum().median() / 1e3
        flops, nbytes = work[tenant]
        assert row["device_ms_per_op_p50"] == per_op * 1e3
        if tenant == "gemm":  # compute-bound: TFLOP/s; its GB/s does not apply
            assert row["tflops"] == flops / per_op / 1e12 and np.isnan(row["gb_per_s"])
        else:  # the FFT is memory-bound: GB/s; its TFLOP/s does not apply ("—", not 0.000)
            assert row["gb_per_s"] == nbytes / per_op / 1e9 and np.isnan(row["tflops"])


def test_efficiency_sums_phases_per_iteration(tmp_path):
    spec = resolve(ExperimentParams.from_mapping({"profile": "tiny", "workloads": "llm"}), "cpu")
    run = create_run(spec.to_dict(), {}, root=tmp_path, run_id="llm")
    run.claim_scenario("baseline-llm")
    lines = [_meta("llm", "llm", 3.0e9, 0.0, 1)] + _log("llm", "llm", 10, 3, T0, phases=("prefill", "decode"))
    run.log_path("baseline-llm", "llm").write_text("\n".join(lines) + "\n")
    data = load_run(run)
    row = efficiency(data).iloc[0]
    per_op = data.iterations.groupby("iteration")["device_ms"].sum().median() / 1e3
    assert row["tflops"] == 3.0e9 / per_op / 1e12
    assert np.isnan(row["gb_per_s"])  # no bandwidth model for the LLM: unknown, not zero


def test_write_summary(tmp_path, crafted_run):
    run, _ = crafted_run
    table = summarize_frame(load_run(run).iterations, "wall")
    csv, js = write_summary(table, tmp_path / "out")
    assert pd.read_csv(csv).shape[0] == len(table)
    recs = json.loads(js.read_text())
    assert all(("df" in r) == (r["kind"] == "shared") for r in recs)
    assert not [p for p in (tmp_path / "out").iterdir() if p.name.startswith(".")]


# -- co-running: the window from raw lines, padding, too little data, split GPUs -------------------------------
def _raw(tenant, workload, rows, *, meta=None):
    """Log lines from (phase, start_ms, dur_ms) rows; timed iterations and padding numbered separately."""
    lines = [] if meta is None else ["KTS_META,v2," + json.dumps(meta)]
    counters: dict[str, int] = {}
    for phase, start_ms, dur_ms in rows:
        key = "pad" if phase == "pad" else "timed"
        i = counters[key] = counters.get(key, -1) + 1
        s = T0 + int(start_ms * 1e6)
        lines.append(f"KTS_APP,v2,{workload},{tenant},{i},{phase},{s},{s},{s + int(dur_ms * 1e6)},{dur_ms},{dur_ms}")
    return lines


def test_overlap_window_uses_raw_lines_with_padding_before_trimming(make_log):
    # a: timed every 10 ms from 0 to 100 ms, then pads to 130 ms; b: starts late (pad at 30 ms), timed to 125 ms
    a = _raw("a", "fft", [("op", 10 * i, 1) for i in range(10)] + [("pad", 100 + 10 * i, 1) for i in range(4)])
    b = _raw("b", "gemm", [("pad", 30, 1)] + [("op", 35 + 10 * i, 1) for i in range(9)])
    frame, _ = load_logs([], [make_log("a.log", a), make_log("b.log", b)], trim=5)
    assert (frame["phase"] != "pad").all()  # padding never reaches the statistics
    fa = frame[frame["tenant"] == "a"].set_index("iteration")
    # the window is [30 ms (b's first, padding) line, 124 ms]: a's iterations from 30 ms on co-ran -- also the
    # ones a window computed after trimming (b's first kept line at 85 ms) would have thrown away
    assert fa["in_overlap"].to_dict() == {5: True, 6: True, 7: True, 8: True, 9: True}
    fb = frame[frame["tenant"] == "b"]
    assert fb["in_overlap"].all() and len(fb) == 4  # b ran to 124 ms: inside because a padded until 131 ms


def test_df_reading_needs_enough_corunning_samples(make_log, capsys):
    from kts_helpers.analyse.rules import MIN_CORUNNING
    from kts_helpers.cli import main

    assert MIN_CORUNNING == 368  # 0.99 ** 367 > 0.025 >= 0.99 ** 368: two-sided 95 %
    alone = make_log("alone.log", _raw("v", "fft", [("op", 5 * i, 1.0 + (i % 7) / 10) for i in range(400)]))
    few = make_log("few.log", _raw("v", "fft", [("op", 5 * i, 2.0 + (i % 5) / 10) for i in range(50)]))
    nbr = make_log("nbr.log", _raw("n", "gemm", [("op", 5 * i, 1.0) for i in range(51)]))
    assert main(["summarize", "--baseline", str(alone), "--shared", str(few), str(nbr), "--metric", "wall",
                 "--format", "json", "--ci", "--resamples", "200", "--seed", "1"]) == 0
    rows = {(r["kind"], r["tenant"]): r for r in json.loads(capsys.readouterr().out)}
    assert rows[("shared", "v")]["df"] > 1.4  # the number is shown ...
    assert rows[("shared", "v")]["reading"] == rows[("shared", "v")]["df_reading"] == "inconclusive"  # ... not read
    assert "n = 50 < 200" in rows[("shared", "v")]["reading_detail"]
    assert "df_reading" not in rows[("baseline", "v")]
    # enough samples: the interval decides
    many = make_log("many.log", _raw("v", "fft", [("op", 5 * i, 2.0 + (i % 5) / 10) for i in range(400)]))
    nbr2 = make_log("nbr2.log", _raw("n", "gemm", [("op", 5 * i, 1.0) for i in range(401)]))
    assert main(["summarize", "--baseline", str(alone), "--shared", str(many), str(nbr2), "--metric", "wall",
                 "--format", "json", "--ci", "--resamples", "200", "--seed", "1"]) == 0
    rows = {(r["kind"], r["tenant"]): r for r in json.loads(capsys.readouterr().out)}
    assert rows[("shared", "v")]["df_reading"] == "degraded"


def test_a_tenant_with_no_corunning_sample_keeps_its_row(make_log):
    from kts_helpers.analyse.intervals import add_intervals

    alone = make_log("alone.log", _raw("v", "fft", [("op", 5 * i, 1.0) for i in range(50)]))
    early = make_log("early.log", _raw("v", "fft", [("op", 5 * i, 2.0) for i in range(50)]))
    late = make_log("late.log", _raw("n", "gemm", [("op", 1000 + 5 * i, 1.0) for i in range(50)]))  # never together
    frame, _ = load_logs([alone], [early, late])
    table = add_intervals(summarize_frame(frame, "wall"), frame, "wall", n_resamples=50, seed=0)
    row = table[(table["kind"] == "shared") & (table["tenant"] == "v")].iloc[0]
    assert row["n"] == 0 and np.isnan(row["p99_ms"]) and np.isnan(row["df"])
    assert row["reading"] == "no co-running samples"


def test_split_gpus_refused_in_summarize_and_runs(make_log, capsys, tmp_path):
    from kts_helpers.cli import main
    from kts_helpers.run.corun import CoRunError

    a = make_log("a.log", _raw("a", "fft", [("op", i, 0.5) for i in range(10)], meta={"tenant": "a",
                                                                                          "gpu_uuid": "GPU-aaa"}))
    b = make_log("b.log", _raw("b", "gemm", [("op", i, 0.5) for i in range(10)], meta={"tenant": "b",
                                                                                           "gpu_uuid": "GPU-bbb"}))
    assert main(["summarize", "--shared", str(a), str(b)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("kts: error:") and "a on GPU-aaa" in err and "b on GPU-bbb" in err and "\n" not in err
    # a foreign v1 log carries no KTS_META: nothing to compare, accepted
    v1 = make_log("v1.log", [make_log.v1("GEMM", i, T0 + i * 10**6, T0 + i * 10**6 + 5 * 10**5, 0.5)
                             for i in range(10)])
    frame, _ = load_logs([], [a, v1])
    assert set(frame["tenant"]) == {"a", "gemm"}
    # the same refusal for a run directory
    spec = resolve(ExperimentParams.from_mapping({"profile": "tiny", "workloads": "fft,gemm"}), "cpu")
    run = create_run(spec.to_dict(), {}, root=tmp_path, run_id="split")
    run.claim_scenario("shared")
    run.log_path("shared", "fft").write_bytes(a.read_bytes().replace(b",a,", b",fft,"))
    run.log_path("shared", "gemm").write_bytes(b.read_bytes().replace(b",b,", b",gemm,"))
    with pytest.raises(CoRunError, match="GPU-aaa.*GPU-bbb"):
        load_run(run)


# -- warm-up: never a data-driven cut by default; paired when asked ----------------------------------------
def _two_tenant_frame(alone_ms, shared_ms):
    def series(x, kind, scenario):
        n = len(x)
        start = T0 + np.arange(n, dtype=np.int64) * 10_000_000
        return pd.DataFrame({"workload": "fft", "tenant": "v", "iteration": np.arange(n), "phase": "op",
                             "intended_ns": start, "start_ns": start, "end_ns": start + (x * 1e6).astype(np.int64),
                             "device_ms": x, "wall_ms": x, "version": "v2", "scenario": scenario,
                             "kind": kind, "sharing": "timeslice", "in_overlap": True})
    return pd.concat([series(alone_ms, "baseline", "baseline-v"), series(shared_ms, "shared", "shared")],
                     ignore_index=True)


def test_default_keeps_contention_that_a_per_series_warmup_rule_would_cut():
    """The neighbour's burst at the start of the shared series is the effect, not a warm-up."""
    from kts_helpers.analyse.rules import apply_warmup
    from kts_helpers.analyse.stats import steady_state_start

    rng = np.random.default_rng(4)
    alone = rng.lognormal(0.0, 0.05, 800)
    shared = rng.lognormal(0.0, 0.05, 800)
    shared[:100] *= 3.0  # the neighbour was busiest while the victim's first 100 iterations ran
    frame = _two_tenant_frame(alone, shared)
    kept, dropped = apply_warmup(frame)
    assert (dropped["dropped"] == 0).all() and len(kept) == 1600
    assert dropped.set_index("scenario").loc["shared", "diagnostic"].startswith("not stationary by MSER-5")
    df = summarize_frame(add_clocks(kept, 0.0), "wall").set_index("kind").loc["shared", "df"]
    assert df > 2.5  # the p99 comes from the contended iterations
    # the old per-series rule would have cut the contention away and called sharing almost free
    cut = steady_state_start(shared, detect=True, max_fraction=0.2)[0]
    assert cut >= 100 and np.quantile(shared[cut:], 0.99) / np.quantile(alone, 0.99) < 1.2


def test_paired_warmup_cuts_alone_and_shared_alike_and_keeps_df_unbiased():
    from kts_helpers.analyse.rules import apply_warmup

    rng = np.random.default_rng(5)
    log_dfs = []
    for _ in range(60):  # the same process alone and shared (true DF = 1), each with a warm-up ramp
        series = []
        for _k in range(2):
            x = rng.lognormal(0.0, 0.1, 800)
            x[:60] *= np.linspace(2.0, 1.0, 60)  # clocks ramping up
            series.append(x)
        kept, dropped = apply_warmup(_two_tenant_frame(*series), rule="mser5-paired")
        assert dropped["dropped"].nunique() == 1 and 0 < dropped["dropped"].iloc[0] <= 160
        t = summarize_frame(add_clocks(kept, 0.0), "wall").set_index("kind")
        log_dfs.append(np.log(t.loc["shared", "df"]))
    assert abs(np.median(log_dfs)) < 0.02  # within 2 % of the true DF = 1


def test_the_json_edge_turns_bounds_into_the_public_lists():
    """Inside the kit an interval is <stat>_lo/<stat>_hi (±inf: no bound, NaN: none); ``kts summarize --format
    json`` keeps its public form: one <stat>_ci list where _lo stood, None for a missing bound or no interval, and
    ``df_reading`` (the alias of ``reading``) just before ``reading``."""
    from kts_helpers.analyse.summary import summary_records

    inf, nan = float("inf"), float("nan")
    table = pd.DataFrame([{"kind": "shared", "tenant": "v", "df": 1.5, "reading": "degraded", "p99_ms": 2.0,
                           "p99_lo": 1.8, "p99_hi": inf, "df_lo": 1.2, "df_hi": 1.9, "jitter": 1.1,
                           "jitter_lo": -inf, "jitter_hi": inf, "slow_ratio_lo": nan, "slow_ratio_hi": nan}])
    (rec,) = summary_records(table)
    assert list(rec) == ["kind", "tenant", "df", "df_reading", "reading", "p99_ms", "p99_ci", "df_ci", "jitter",
                         "jitter_ci", "slow_ratio_ci"]
    assert rec["p99_ci"] == [1.8, None] and rec["df_ci"] == [1.2, 1.9]
    assert rec["jitter_ci"] is None and rec["slow_ratio_ci"] is None and rec["df_reading"] == "degraded"
