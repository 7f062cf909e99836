"""Comparisons beyond the article: sharing modes, contention matrix, open loop, LLM phases, and their charts."""

from __future__ import annotations

import json
from pathlib import Path

import altair as alt
import numpy as np
import pandas as pd
import pytest
import vl_convert

from kts_helpers.analyse import compare, openloop
from kts_helpers.analyse import verdict as V
from kts_helpers.analyse.load import RunData, load_run
from kts_helpers.analyse.rules import MIN_CORUNNING
from kts_helpers.present import charts
from kts_helpers.run.runs import create_run
from kts_helpers.run.spec import ExperimentParams, resolve

REF = Path(__file__).resolve().parent.parent / "data" / "reference"
NR = 400  # resamples: enough for structure, fast enough for the suite
T0 = 1_795_975_700_000_000_000


def _spread(tenant: str, workload: str, n: int, scale: float, seed: int, start: int, span_ns: int = 10**10,
            phases: tuple[str, ...] = ("op",)) -> list[str]:
    """n iterations evenly over ``span_ns`` (so every tenant of a scenario is active over the same window);
    each phase's wall time uniform in [scale, 2 x scale] ms, device time 0.9 x wall."""
    rng = np.random.default_rng(seed)
    lines = []
    for i in range(n):
        t = start + i * (span_ns // n)
        for ph in phases:
            wall = float(rng.uniform(1.0, 2.0)) * scale
            lines.append(f"KTS_APP,v2,{workload},{tenant},{i},{ph},{t},{t},{t + int(wall * 1e6)},{wall * 0.9!r},"
                         f"{wall!r}")
            t += int(wall * 1e6) + 100_000
    return lines


# Each victim's wall-time scale alone and next to each set of neighbours: the DFs the matrix must find.
MATRIX_SCALES = {"fft": {"": 1.0, "gemm": 3.0, "llm": 1.2, "all": 3.6},
                 "gemm": {"": 2.0, "fft": 2.2, "llm": 2.6, "all": 2.8},
                 "llm": {"": 0.5, "fft": 0.6, "gemm": 1.0, "all": 1.1}}
LLM_PHASES = ("prefill", "decode", "decode", "decode")
MATRIX_N = 1000  # iterations per series: enough for a 95 % upper bound of every p99 (i.i.d. needs 367)


def _consistent(reading: str, n_shared: int, lo: float, hi: float) -> bool:
    """A row's reading is the tenant's verdict (one of its four words, never a DF interval worded its own way),
    and DF's own rule holds in it: an interval above 1 reads degraded, below 1 faster -- or inconclusive when the
    exceedance test says the opposite; "no change" only inside the margin."""
    if reading not in V.readings():
        return False
    if n_shared >= MIN_CORUNNING and lo > 1:
        return reading in (V.DEGRADED, V.INCONCLUSIVE)
    if n_shared >= MIN_CORUNNING and hi < 1:
        return reading in (V.FASTER, V.INCONCLUSIVE)
    return reading != V.no_change() or (lo >= 1 - V.DEFAULT_MARGIN and hi <= 1 + V.DEFAULT_MARGIN)


def _crafted_run(root: Path, run_id: str, params: dict, scenarios: dict[str, dict[str, list[str]]]) -> RunData:
    spec = resolve(ExperimentParams.from_mapping({"profile": "tiny", **params}), "cpu")
    run = create_run(spec.to_dict(), {}, root=root, run_id=run_id)
    for scen, logs in scenarios.items():
        d = run.claim_scenario(scen)
        for tenant, lines in logs.items():
            (d / f"{tenant}.log").write_text("\n".join(lines) + "\n")
        run.record_scenario(scen, {"status": "complete"})
    return load_run(run.path)


@pytest.fixture(scope="module")
def modes_run() -> RunData:
    """The H200 reference: FFT next to a saturating GEMM, time-slicing and MPS."""
    return load_run(REF / "h200-2026-11-30-saturating")


@pytest.fixture(scope="module")
def matrix_run(tmp_path_factory: pytest.TempPathFactory) -> RunData:
    """fft, gemm and llm alone, in every pair and all together, with known effects (MATRIX_SCALES)."""
    kinds = {"fft": "fft", "gemm": "gemm", "llm": "llm"}
    scenarios: dict[str, dict[str, list[str]]] = {}
    for k, (t, w) in enumerate(kinds.items()):
        scenarios[f"baseline-{t}"] = {t: _spread(t, w, MATRIX_N, MATRIX_SCALES[t][""], k, T0,
                                                  phases=LLM_PHASES if w == "llm" else ("op",))}
    for j, (name, members) in enumerate([("shared-fft+gemm", ("fft", "gemm")), ("shared-fft+llm", ("fft", "llm")),
                                         ("shared-gemm+llm", ("gemm", "llm")), ("shared-all", ("fft", "gemm", "llm"))]):
        scenarios[name] = {}
        for k, t in enumerate(members):
            others = [m for m in members if m != t]
            scale = MATRIX_SCALES[t]["all" if len(others) > 1 else others[0]]
            scenarios[name][t] = _spread(t, t, MATRIX_N, scale, 10 * j + k, T0 + (j + 1) * 10**11,
                                         phases=LLM_PHASES if t == "llm" else ("op",))
    return _crafted_run(tmp_path_factory.mktemp("matrix"), "matrix", {"workloads": "fft,gemm,llm", "matrix": True},
                        scenarios)


@pytest.fixture(scope="module")
def open_run(tmp_path_factory: pytest.TempPathFactory) -> RunData:
    """An open-loop FFT at 40/s that keeps up alone (10 ms per op) and shared (14 ms), next to a GEMM."""
    scenarios = {
        "baseline-fft": {"fft": _open_lines("fft", 400, 40.0, 10.0, meta=True, start=T0)},
        "baseline-gemm": {"gemm": _spread("gemm", "gemm", 400, 2.0, 1, T0)},
        "shared": {"fft": _open_lines("fft", 400, 40.0, 14.0, meta=True, start=T0 + 10**11),
                   "gemm": _spread("gemm", "gemm", 420, 2.0, 2, T0 + 10**11, span_ns=10_500_000_000)},
    }
    return _crafted_run(tmp_path_factory.mktemp("open"), "open",
                        {"workloads": "fft,gemm", "arrival": "poisson", "rate_hz": 40.0}, scenarios)


@pytest.fixture(scope="module")
def four_run(tmp_path_factory: pytest.TempPathFactory) -> RunData:
    tenants = {"fft-1": "fft", "fft-2": "fft", "gemm": "gemm", "llm": "llm"}
    scenarios: dict[str, dict[str, list[str]]] = {"shared": {}}
    for k, (t, w) in enumerate(tenants.items()):
        phases = LLM_PHASES if w == "llm" else ("op",)
        scenarios[f"baseline-{t}"] = {t: _spread(t, w, 300, 1.0, k, T0, phases=phases)}
        scenarios["shared"][t] = _spread(t, w, 300, 2.0, 10 + k, T0 + 10**11, phases=phases)
    return _crafted_run(tmp_path_factory.mktemp("four"), "four", {"workloads": "fft,fft,gemm,llm"}, scenarios)


@pytest.fixture(scope="module")
def article_run() -> RunData:
    return load_run(REF / "h200-2026-11-30-article")


@pytest.fixture(scope="module")
def modes(modes_run: RunData) -> pd.DataFrame:
    return compare.modes_table(modes_run, n_resamples=NR, seed=1)


@pytest.fixture(scope="module")
def matrix(matrix_run: RunData) -> pd.DataFrame:
    return compare.contention_matrix(matrix_run, n_resamples=NR, seed=1)


def _clipped(data: RunData, scenario: str, tenant: str, phase: str = "op", col: str = "wall_ms") -> np.ndarray:
    it = data.iterations
    sel = (it["scenario"] == scenario) & (it["tenant"] == tenant) & (it["phase"] == phase) & it["in_overlap"]
    return it.loc[sel, col].to_numpy(np.float64)


def _check_intervals(t: pd.DataFrame, prefixes: tuple[str, ...]) -> None:
    for p in prefixes:
        est, lo, hi = (t[c] for c in ((p, f"{p}_lo", f"{p}_hi") if p == "df" else
                                      (f"{p}_ms", f"{p}_lo", f"{p}_hi")))
        ok = est.notna()
        assert ((lo[ok] <= est[ok]) & (est[ok] <= hi[ok])).all(), p


# -- detection ----------------------------------------------------------------------------------------------
def test_what_each_run_holds(modes_run, matrix_run, open_run, four_run, article_run):
    flags = {name: (compare.has_modes(d), compare.has_matrix(d), openloop.has_open_loop(d), compare.has_phases(d))
             for name, d in [("modes", modes_run), ("matrix", matrix_run), ("open", open_run),
                             ("four", four_run), ("article", article_run)]}
    assert flags == {"modes": (True, False, False, False), "matrix": (False, True, False, True),
                     "open": (False, False, True, False), "four": (False, False, False, True),
                     "article": (False, False, False, False)}


# -- 1. sharing modes ---------------------------------------------------------------------------------------
def test_modes_table_has_every_mode_for_both_tenants(modes, modes_run):
    assert set(map(tuple, modes[["tenant", "mode"]].to_numpy())) == {
        (t, m) for t in ("fft", "gemm") for m in ("alone", "timeslice", "mps")}
    _check_intervals(modes, ("p50", "p99", "df"))
    shared = modes[modes["mode"] != "alone"]
    assert shared["df"].notna().all() and modes.loc[modes["mode"] == "alone", "df"].isna().all()
    for _, r in shared.iterrows():
        assert _consistent(r["reading"], r["n"], r["df_lo"], r["df_hi"])
    # numbers are the overlap-clipped quantiles of the logs
    x = _clipped(modes_run, "shared-mps", "fft")
    a = _clipped(modes_run, "baseline-fft", "fft")
    row = modes[(modes["tenant"] == "fft") & (modes["mode"] == "mps")].iloc[0]
    assert row["n"] == len(x) == 800 and row["p99_ms"] == pytest.approx(np.quantile(x, 0.99))
    assert row["df"] == pytest.approx(np.quantile(x, 0.99) / np.quantile(a, 0.99))
    assert row["device_p50_ms"] == pytest.approx(np.median(_clipped(modes_run, "shared-mps", "fft", col="device_ms")))
    assert np.isnan(modes.set_index(["tenant", "mode"]).loc[("gemm", "mps"), "thread_pct"])  # no thread limit


def test_modes_where_the_fft_waits(modes):
    """The H200 reference (FFT every 100 ms next to a GEMM that never sleeps): under MPS the kernels run at once on
    shared SMs, so the FFT's wait lands inside its CUDA events; under time-slicing it waits for a slice outside them."""
    f = modes[modes["tenant"] == "fft"].set_index("mode")
    assert f.loc["timeslice", "reading"] == f.loc["mps", "reading"] == "degraded"
    assert f.loc["mps", "df"] > f.loc["timeslice", "df_hi"]
    assert f.loc["mps", "device_p50_ms"] > 10 * f.loc["timeslice", "device_p50_ms"]
    # the GEMM barely notices either way
    g = modes[modes["tenant"] == "gemm"].set_index("mode")
    # (DF's interval now carries the drift between moments -- a prior allowance on this one-block run -- so its
    # upper bound is no longer the claim: the GEMM's slowdown, if any, reads small, never "degraded")
    assert g.loc["timeslice", "df"] < 1.05 and g.loc["mps", "df"] < 1.05
    assert g.loc["timeslice", "reading"] not in ("degraded", "faster when shared")
    assert np.isinf(g.loc["mps", "df_hi"])  # its shared series (lag-1 0.8): ~80 effective samples, no p99 upper bound


def test_modes_table_single_mode_run(article_run):
    t = compare.modes_table(article_run, n_resamples=NR)
    assert set(t["mode"]) == {"alone", "timeslice"} and len(t) == 4


# -- 2. contention matrix -----------------------------------------------------------------------------------
def test_matrix_has_a_row_per_victim_and_neighbours(matrix, matrix_run):
    prim = matrix[matrix["primary"]]
    assert sorted(map(tuple, prim[["victim", "neighbours"]].to_numpy())) == sorted(
        [("fft", "gemm"), ("fft", "llm"), ("fft", "all others"), ("gemm", "fft"), ("gemm", "llm"),
         ("gemm", "all others"), ("llm", "fft"), ("llm", "gemm"), ("llm", "all others")])
    assert set(matrix.loc[matrix["victim"] == "llm", "phase"]) == {"prefill", "decode"}
    assert (prim.loc[prim["victim"] == "llm", "phase"] == "decode").all()
    assert not matrix.loc[matrix["phase"] == "prefill", "primary"].any()
    _check_intervals(matrix, ("df",))
    for _, r in matrix.iterrows():
        assert _consistent(r["reading"], r["n_shared"], r["df_lo"], r["df_hi"])
    r = matrix[(matrix["victim"] == "llm") & (matrix["neighbours"] == "gemm") & (matrix["phase"] == "decode")].iloc[0]
    x, a = _clipped(matrix_run, "shared-gemm+llm", "llm", "decode"), _clipped(matrix_run, "baseline-llm", "llm",
                                                                              "decode")
    assert r["df"] == pytest.approx(np.quantile(x, 0.99) / np.quantile(a, 0.99))
    assert (r["n_shared"], r["n_alone"]) == (len(x), len(a))


def test_matrix_finds_each_neighbours_effect(matrix):
    f = matrix[matrix["victim"] == "fft"].set_index("neighbours")
    assert f.loc["llm", "df_hi"] < f.loc["gemm", "df_lo"]
    assert f.loc["all others", "df"] > f.loc["gemm", "df"]
    for victim, effects in MATRIX_SCALES.items():
        rows = matrix[(matrix["victim"] == victim) & matrix["primary"]].set_index("neighbours")
        for nb, scale in effects.items():
            if nb:
                got = rows.loc["all others" if nb == "all" else nb, "df"]
                assert got == pytest.approx(scale / effects[""], rel=0.15), (victim, nb)


def test_matrix_of_a_plain_pair(article_run):
    m = compare.contention_matrix(article_run, n_resamples=NR)
    assert list(map(tuple, m[["victim", "neighbours"]].to_numpy())) == [("fft", "gemm"), ("gemm", "fft")]
    assert not compare.has_matrix(article_run)


def test_four_tenants_share_is_all_others(four_run):
    m = compare.contention_matrix(four_run, n_resamples=NR)
    assert set(m["neighbours"]) == {"all others"}
    assert set(m["victim"]) == {"fft-1", "fft-2", "gemm", "llm"}
    fft = m[m["victim"] == "fft-1"].iloc[0]
    assert fft["n_alone"] == 300 and fft["n_shared"] >= 299 and 1.6 < fft["df"] < 2.4  # scale 2.0 vs 1.0


def _matrix_lines(tenant: str, workload: str, n: int, scale: float, seed: int, start: int,
                  phases: tuple[str, ...] = ("op",)) -> list[str]:
    rng = np.random.default_rng(seed)
    lines, t = [], start
    for i in range(n):
        for ph in phases:
            wall = float(rng.uniform(1.0, 2.0)) * scale
            lines.append(f"KTS_APP,v2,{workload},{tenant},{i},{ph},{t},{t},{t + int(wall * 1e6)},{wall * 0.9!r},"
                         f"{wall!r}")
            t += int(wall * 1e6) + 500_000
    return lines


def test_matrix_with_repeats_pools_runs_and_matches_numpy(tmp_path):
    spec = resolve(ExperimentParams.from_mapping({"profile": "tiny", "workloads": "fft,gemm,llm", "matrix": True,
                                                  "repeats": 2}), "cpu")
    run = create_run(spec.to_dict(), {}, root=tmp_path, run_id="synthetic-matrix")
    factor = {("fft", "gemm"): 3.0, ("fft", "llm"): 1.5, ("gemm", "fft"): 1.2, ("gemm", "llm"): 1.1,
              ("llm", "fft"): 1.3, ("llm", "gemm"): 2.0}
    for k, scen in enumerate(spec.scenarios):
        d = run.claim_scenario(scen.name)
        for j, t in enumerate(scen.tenants):
            others = [o.name for o in scen.tenants if o.name != t.name]
            scale = 1.0 if not others else float(np.prod([factor[(t.name, o)] for o in others]))
            n = 60 if t.workload != "llm" else 40
            phases = ("prefill", "decode") if t.workload == "llm" else ("op",)
            lines = _matrix_lines(t.name, t.workload, n, scale, seed=10 * k + j, start=T0, phases=phases)
            (d / f"{t.name}.log").write_text("\n".join(lines) + "\n")
        run.record_scenario(scen.name, {"status": "complete"})
    data = load_run(run.path)
    assert compare.has_matrix(data) and not compare.has_modes(data)
    m = compare.contention_matrix(data, n_resamples=NR, seed=3)
    prim = m[m["primary"]]
    assert len(prim) == 9 and set(prim["scenario"]) == {"shared-fft+gemm", "shared-fft+llm", "shared-gemm+llm",
                                                         "shared-all"}
    r = prim[(prim["victim"] == "fft") & (prim["neighbours"] == "gemm")].iloc[0]
    it = data.iterations
    sel = it["scenario"].str.startswith("shared-fft+gemm-r") & (it["tenant"] == "fft") & it["in_overlap"]
    x = it.loc[sel, "wall_ms"].to_numpy()
    a = it.loc[it["scenario"].str.startswith("baseline-fft-r"), "wall_ms"].to_numpy()
    assert r["n_shared"] == len(x) and r["n_alone"] == 120
    assert r["df"] == pytest.approx(np.quantile(x, 0.99) / np.quantile(a, 0.99))
    assert 2.4 < r["df"] < 3.6 and np.isinf(r["df_lo"]) and r["df_hi"] > r["df"]  # 120 + 120 samples: one-sided
    assert r["reading"] == V.INCONCLUSIVE  # too few to read it (n < 200 on a side: not even the exceedance test)
    allr = prim[(prim["victim"] == "fft") & (prim["neighbours"] == "all others")].iloc[0]
    assert allr["df"] > r["df"]  # effects multiply in this synthetic run: 3.0 x 1.5
    table = compare.phase_table(data, n_resamples=NR)
    assert set(table["scenario"]) == {"baseline-llm", "shared-fft+llm", "shared-gemm+llm", "shared-all"}


# -- 3. open loop -------------------------------------------------------------------------------------------
def test_open_loop_that_keeps_up_is_not_overloaded(open_run):
    t = openloop.open_loop_table(open_run)
    assert list(t["when"]) == ["alone", "shared"] and (t["tenant"] == "fft").all()
    assert not t["overloaded"].any() and (t["message"] == "").all()
    assert (t["offered_hz"] == 40).all()
    assert (t["achieved_hz"] / t["offered_measured_hz"]).between(0.95, 1.05).all()
    assert (t["response_p99_ms"] >= t["service_p99_ms"]).all()
    assert (t["response_p50_ms"] >= t["service_p50_ms"]).all()
    s = t.set_index("when")
    assert s.loc["shared", "response_p99_ms"] == pytest.approx(14.05)  # service + 50 us of wake-up, no queue
    assert s.loc["alone", "response_p99_ms"] == pytest.approx(10.05)
    q = openloop.queue_growth(open_run)
    assert set(q["when"]) == {"alone", "shared"} and len(q) == t["n"].sum()
    f = openloop.open_closed_frame(open_run)
    assert set(f["clock"]) == {openloop.RESPONSE_LABEL, openloop.SERVICE_LABEL}
    assert f["exceedance"].between(0, 1, inclusive="neither").all()


def test_closed_loop_run_has_no_open_loop_rows(article_run):
    assert openloop.open_loop_table(article_run).empty
    assert openloop.queue_growth(article_run).empty and openloop.open_closed_frame(article_run).empty


def _open_lines(tenant: str, n: int, rate_hz: float, service_ms: float, *, meta: bool, start: int) -> list[str]:
    """A single-server FIFO fed at a fixed rate: each start = max(arrival, previous end) + 50 us of wake-up."""
    lines = []
    if meta:
        lines.append("KTS_META,v2," + json.dumps({"workload": "fft", "tenant": tenant, "arrival": "fixed",
                                                  "rate_hz": rate_hz}, separators=(",", ":")))
    period, svc, prev_end = int(1e9 / rate_hz), int(service_ms * 1e6), 0
    for i in range(n):
        due = start + i * period
        s = max(due, prev_end) + 50_000
        prev_end = s + svc
        lines.append(f"KTS_APP,v2,fft,{tenant},{i},op,{due},{s},{prev_end},{service_ms * 0.95!r},{service_ms!r}")
    return lines


@pytest.fixture
def overloaded_run(tmp_path) -> RunData:
    spec = resolve(ExperimentParams.from_mapping({"profile": "tiny", "workloads": "fft,gemm", "arrival": "fixed",
                                                  "rate_hz": 40.0}), "cpu")
    run = create_run(spec.to_dict(), {}, root=tmp_path, run_id="overloaded")
    for scen in ("baseline-fft", "baseline-gemm", "shared"):
        d = run.claim_scenario(scen)
        if scen != "baseline-gemm":  # alone: 10 ms per op at 40/s keeps up; shared: 35 ms per op cannot
            svc = 10.0 if scen == "baseline-fft" else 35.0
            (d / "fft.log").write_text("\n".join(_open_lines("fft", 200, 40.0, svc, meta=scen == "shared",
                                                             start=T0)) + "\n")
        if scen != "baseline-fft":
            (d / "gemm.log").write_text("\n".join(_matrix_lines("gemm", "gemm", 800, 5.0, 1, T0)) + "\n")
        run.record_scenario(scen, {"status": "complete"})
    return load_run(run.path)


def test_overloaded_open_loop_is_flagged(overloaded_run):
    assert openloop.has_open_loop(overloaded_run)
    t = openloop.open_loop_table(overloaded_run).set_index("when")
    assert list(t.index) == ["alone", "shared"]  # the alone log has no KTS_META: found from intended != start
    assert not t.loc["alone", "overloaded"] and t.loc["alone", "message"] == ""
    assert t.loc["alone", "arrival"] == "open" and t.loc["alone", "offered_hz"] == pytest.approx(40.0)
    sh = t.loc["shared"]
    assert sh["overloaded"] and "overloaded" in sh["message"] and "\n" not in sh["message"]
    assert "achieved" in sh["message"] and "queue delay grew" in sh["message"]
    assert sh["achieved_hz"] == pytest.approx(1000 / 35.05, rel=1e-6)  # one completion per service (+ wake-up)
    assert sh["offered_measured_hz"] == pytest.approx(40.0, rel=1e-6)
    assert sh["utilisation"] == pytest.approx(40 * 0.035, rel=1e-6)
    # queue delay of request i = 0.05 + i x (35.05 - 25) ms: 10.05 ms more per 25 ms of arrivals = 402 ms/s
    assert sh["queue_slope_ms_per_s"] == pytest.approx(402.0, rel=1e-6)
    q = openloop.queue_growth(overloaded_run)
    last = q[q["when"] == "shared"].iloc[-1]
    assert last["queue_ms"] == pytest.approx(0.05 + 199 * 10.05, rel=1e-9)


def test_open_closed_frame_uses_a_closed_run_when_given(overloaded_run, article_run):
    f = openloop.open_closed_frame(overloaded_run, closed=article_run)
    assert set(f["clock"]) == {openloop.RESPONSE_LABEL, openloop.CLOSED_LABEL}
    g = f[(f["when"] == "shared") & (f["clock"] == openloop.RESPONSE_LABEL)]
    assert g["latency_ms"].max() > 1000  # the backlog shows in the response time


# -- 4. LLM phases ------------------------------------------------------------------------------------------
def test_phase_table_matrix(matrix_run):
    t = compare.phase_table(matrix_run, n_resamples=NR)
    assert set(t["phase"]) == {"prefill", "decode"}
    assert set(t["stat"]) == {"time to first token", "per-token decode"}
    assert set(t["scenario"]) == {"baseline-llm", "shared-fft+llm", "shared-gemm+llm", "shared-all"}
    assert len(t) == 8
    _check_intervals(t, ("p50", "p99", "df"))
    assert t.loc[t["when"] == "alone", "df"].isna().all() and t.loc[t["when"] == "shared", "df"].notna().all()
    for _, r in t[t["when"] == "shared"].iterrows():
        assert _consistent(r["reading"], r["n"], r["df_lo"], r["df_hi"])
    ttft = t[(t["scenario"] == "baseline-llm") & (t["phase"] == "prefill")].iloc[0]
    assert ttft["p50_ms"] == pytest.approx(np.median(_clipped(matrix_run, "baseline-llm", "llm", "prefill",
                                                              "response_ms")))
    dec = t[(t["scenario"] == "shared-all") & (t["phase"] == "decode")].iloc[0]
    assert dec["n"] == len(_clipped(matrix_run, "shared-all", "llm", "decode"))


# -- charts -------------------------------------------------------------------------------------------------
def _renders(chart: alt.TopLevelMixin) -> None:
    assert isinstance(chart.to_dict(), dict)
    svg = vl_convert.vegalite_to_svg(chart.to_json())
    assert svg.lstrip().startswith("<svg")


def test_charts_build_and_render(modes, matrix, matrix_run, open_run, overloaded_run):
    _renders(charts.modes_chart(modes))
    _renders(charts.modes_chart(modes, log=True))
    _renders(charts.df_heatmap(matrix))
    _renders(charts.df_heatmap(matrix, all_phases=True))
    _renders(charts.phase_chart(compare.phase_table(matrix_run, n_resamples=NR)))
    _renders(charts.queue_chart(openloop.queue_growth(overloaded_run)))
    _renders(charts.open_closed_tails(open_run))
    _renders(charts.open_closed_tails(openloop.open_closed_frame(overloaded_run)))


def test_heatmap_cells_carry_the_interval_text(matrix):
    spec = charts.df_heatmap(matrix).to_dict()
    values = next(iter(spec["datasets"].values()))
    texts = {(v["victim"], v["neighbours"]): v["text"] for v in values}
    r = matrix[(matrix["victim"] == "fft") & (matrix["neighbours"] == "gemm")].iloc[0]
    assert texts[("fft", "gemm")] == f"{r['df']:.2f} [{r['df_lo']:.2f}, {r['df_hi']:.2f}]"
    assert len(texts) == 9  # primary rows only by default


def test_forest_keeps_a_df_without_bounds():
    """At n = 300 no DF has a bound; the forest plot still shows it (open both ways) instead of no chart at all."""
    import numpy as np
    import pandas as pd

    from kts_helpers.present import charts
    from kts_helpers.present.tables import forest_frame

    table = pd.DataFrame([
        {"kind": "shared", "metric": "wall", "tenant": "fft", "phase": "op", "group": "shared", "df": 1.1,
         "df_lo": float("nan"), "df_hi": float("nan"), "reading": "insufficient data"},
        {"kind": "shared", "metric": "wall", "tenant": "gemm", "phase": "op", "group": "shared", "df": 2.3,
         "df_lo": 2.1, "df_hi": float("inf"), "reading": "insufficient data"},
        {"kind": "baseline", "metric": "wall", "tenant": "fft", "phase": "op", "group": "baseline-fft",
         "df": float("nan"), "df_lo": float("nan"), "df_hi": float("nan"), "reading": None}])
    fd = forest_frame(table)
    assert fd["tenant"].tolist() == ["fft", "gemm"]
    assert fd["df_lo"].tolist() == [-np.inf, 2.1] and np.isinf(fd["df_hi"]).all()
    spec = str(charts.forest(fd).to_dict())
    assert "'fft (wall)'" in spec and "2.300 [≥ 2.100; no upper bound]" in spec


def test_every_table_and_the_index_name_an_llm_phase():
    """An llm tenant has a prefill and a decode row; the index, the headline and the forest plot must tell them
    apart (the index once read 'llm: 0.95x; llm: 0.90x')."""
    from types import SimpleNamespace

    import pandas as pd

    from kts_helpers.present.html import headline_entry
    from kts_helpers.present.tables import forest_frame, headline

    rows = [{"kind": "shared", "metric": "wall", "tenant": "llm", "workload": "llm", "phase": ph, "group": "shared-all", "df": df,
             "df_lo": df - 0.1, "df_hi": df + 0.1, "reading": "degraded", "n": 900, "sharing": "timeslice",
             "p50_ms": 1.0, "p95_ms": 2.0, "p99_ms": 3.0, "jitter": 3.0, "throughput_per_s": 1.0}
            for ph, df in (("prefill", 1.2), ("decode", 1.3))]
    table = pd.DataFrame(rows)
    data = SimpleNamespace(run=SimpleNamespace(run_id="r"), manifest=SimpleNamespace(
        created_at="t", device="cuda", device_name="H200", profile="article", label="", status="complete"))
    assert headline_entry(data, table)["headline"] == ("llm (prefill) · shared-all: degraded; "
                                                       "llm (decode) · shared-all: degraded")
    assert forest_frame(table)["tenant"].tolist() == ["llm (prefill) · shared-all", "llm (decode) · shared-all"]
    assert headline(table)["tenant"].tolist() == ["llm (prefill)", "llm (decode)"]


def test_the_tables_are_members_of_the_reports_family(matrix_run, monkeypatch) -> None:
    """A report's verdicts are one family: a table quotes the report's word for each series the report reads,
    and reads the rest together by Holm, never one verdict at its own level."""
    from kts_helpers.analyse import verdict
    from kts_helpers.analyse.intervals import add_all_intervals
    from kts_helpers.analyse.summary import family_readings, summarize_run

    table = add_all_intervals(summarize_run(matrix_run), matrix_run.iterations, n_resamples=NR, seed=1)
    report = family_readings(table)
    m = compare.contention_matrix(matrix_run, n_resamples=NR, seed=1, report=report)
    for r in m.itertuples():
        assert r.reading == report[(r.scenario, r.victim, r.phase, "wall")]
    key = next(iter(k for k in report if k[3] == "wall"))
    quoted = compare.contention_matrix(matrix_run, n_resamples=NR, seed=1, report={**report, key: "the report's"})
    assert (quoted["reading"] == "the report's").sum() == 1
    seen: list[int] = []
    real = verdict.family
    monkeypatch.setattr(compare, "family", lambda vs: seen.append(len(vs)) or real(vs))
    own = compare.contention_matrix(matrix_run, n_resamples=NR, seed=1)  # no report: the table is the family
    assert seen == [len(own)]
    other_q = compare.contention_matrix(matrix_run, q=0.95, n_resamples=NR, seed=1, report=report)
    assert seen[-1] == len(other_q)  # another quantile than the report's p99: a family of its own
