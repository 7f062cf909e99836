"""The lesson's other models and readers: MPS (fluid model), the H200 references, the three kinds of waiting
(on the emulated example run) and the predict-then-check exercises."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from kts_helpers.errors import KtsError, RunError
from kts_helpers.teaching import exercises, measured, reference, waiting
from kts_helpers.teaching.model import SimError, SimTenant, simulate
from kts_helpers.teaching.mps import (
    MpsTenant,
    mps_degradation,
    shares,
    simulate_mps,
    thread_sweep,
    weight_for_share,
)

REPO = Path(__file__).resolve().parent.parent
EXAMPLE = REPO / waiting.EXAMPLE_DIR
FFT_MPS = MpsTenant("fft", 0.4, 100.0, 5.0, weight=weight_for_share(0.05), overhead_ms=0.1)
GEMM_MPS = MpsTenant("gemm", 20.0, 0.0)
FFT = SimTenant("fft", 1.0, 100.0, 5.0)
GEMM = SimTenant("gemm", 30.0, 150.0, 5.0)


# --- MPS -----------------------------------------------------------------------------------------

def test_shares_split_by_weight_and_respect_the_thread_caps() -> None:
    assert shares([1.0, 1.0], [1.0, 1.0]) == pytest.approx([0.5, 0.5])
    assert shares([1.0, 3.0], [1.0, 1.0]) == pytest.approx([0.25, 0.75])
    assert shares([0.05, 1.0], [1.0, 0.5]) == pytest.approx([0.5, 0.5])  # the cap frees SMs for the small one
    assert shares([1.0, 1.0, 1.0], [0.2, 0.2, 1.0]) == pytest.approx([0.2, 0.2, 0.6])
    assert sum(shares([1.0, 1.0], [0.3, 0.3])) == pytest.approx(0.6)  # capacity nobody may use stays idle


def test_mps_puts_the_interference_inside_the_events_not_before_the_start() -> None:
    shared = simulate_mps([FFT_MPS, GEMM_MPS], duration_ms=30_000, seed=1)
    fft = shared[shared["tenant"] == "fft"]
    assert (fft["wait_ms"] == 0).all() and np.allclose(fft["start_ms"], fft["arrival_ms"])  # nobody waits to start
    assert np.allclose(fft["wall_ms"] - fft["device_ms"], 0.1)  # the host overhead, nothing else
    # next to an always-busy GEMM the FFT gets 5 % of the GPU: its events stretch 20-fold
    assert fft["device_ms"].median() == pytest.approx(0.4 / 0.05, rel=1e-6)
    d = mps_degradation([FFT_MPS, GEMM_MPS], duration_ms=30_000, seed=1).set_index("tenant")
    assert d.loc["fft", "device_df"] == pytest.approx(20.0, rel=1e-3)
    assert d.loc["fft", "df"] == pytest.approx((8.0 + 0.1) / (0.4 + 0.1), rel=1e-3)
    # the same pair under time-slicing: the short tenant's events see nothing, its wall clock does
    ts = simulate([SimTenant("fft", 0.4, 100.0, 5.0), SimTenant("gemm", 20.0, 0.0)], 2.0, duration_ms=30_000, seed=1)
    ts_fft = ts[ts["tenant"] == "fft"]
    assert np.allclose(ts_fft["device_ms"], 0.4) and ts_fft["wait_ms"].max() > 1.5


def test_the_thread_percentage_caps_a_tenant_and_buys_the_neighbour_back() -> None:
    sweep = thread_sweep([FFT_MPS, GEMM_MPS], "gemm", [100, 50, 25], duration_ms=30_000, seed=1)
    by = sweep.set_index(["thread_pct", "tenant"])
    fft = [by.loc[(p, "fft"), "device_p50_shared_ms"] for p in (100, 50, 25)]
    assert fft == pytest.approx([8.0, 0.8, 0.4 / 0.75], rel=1e-3)  # the FFT gets what the cap leaves
    # the capped GEMM runs at its share even when the FFT sleeps: alone (no MPS) it had the whole GPU
    assert by.loc[(50, "gemm"), "device_p50_shared_ms"] == pytest.approx(40.0, rel=1e-6)
    assert by.loc[(25, "gemm"), "df"] == pytest.approx(4.0, rel=0.01)
    # a lone capped tenant is slower by its cap
    lone = simulate_mps([MpsTenant("g", 10.0, 5.0, thread_pct=40.0)], duration_ms=1_000)
    assert np.allclose(lone["device_ms"], 25.0)


@pytest.mark.parametrize(("tenant", "match"), [
    (MpsTenant("a", 1.0, 1.0, thread_pct=0.0), "thread_pct"),
    (MpsTenant("a", 1.0, 1.0, thread_pct=120.0), "thread_pct"),
    (MpsTenant("a", 1.0, 1.0, weight=0.0), "weight"),
    (MpsTenant("a", -1.0, 1.0), "kernel_ms must be > 0"),
    (MpsTenant("a", 1.0, float("nan")), "period_ms"),
    (MpsTenant("a", 1.0, 1.0, jitter_ms=-1.0), "jitter_ms must be >= 0"),
    (MpsTenant("a", 1.0, 1.0, overhead_ms=-0.5), "overhead_ms"),
    (SimTenant("a", 1.0, 1.0), "tenants must be MpsTenant, got SimTenant"),
])
def test_bad_mps_tenants_are_one_line_errors(tenant: MpsTenant, match: str) -> None:
    with pytest.raises(SimError, match=match) as exc:
        simulate_mps([tenant])
    assert "\n" not in str(exc.value)


# --- the H200 references -------------------------------------------------------------------------

@pytest.fixture(scope="module")
def refs() -> tuple[list[Path], pd.DataFrame]:
    dirs = reference.mode_references(REPO / "data" / "reference")
    return dirs, reference.sharing_modes(dirs, n_resamples=100)


def test_the_lesson_compares_the_references_that_measured_mps(refs) -> None:
    """Read from the manifests' own JSON: every reference with an MPS scenario is in, none of time-slicing alone."""
    dirs, modes = refs
    both = set()
    for d in reference.reference_dirs(REPO / "data" / "reference"):
        spec = json.loads((d / "manifest.json").read_text())["spec"]
        if {s["sharing"] for s in spec["scenarios"] if s["kind"] == "shared"} - {"timeslice"}:
            both.add(d.name)
    assert {d.name for d in dirs} == both and "h200-2026-11-30-article" not in both
    assert "h200-2026-11-30-mps-limited" in both
    assert set(modes["reference"]) == both


def test_reference_numbers_come_from_the_reports_own_comparison(refs) -> None:
    from kts_helpers.analyse.compare import modes_table
    from kts_helpers.analyse.load import load_run

    dirs, modes = refs
    assert "h200-2026-11-30-saturating" in {d.name for d in dirs}
    sat = next(d for d in dirs if d.name.endswith("saturating"))
    for clock in ("wall", "device"):
        table = modes_table(load_run(sat), metric=clock, n_resamples=100)
        for r in table[table["mode"] != "alone"].itertuples():
            mine = modes[(modes["reference"] == sat.name) & (modes["tenant"] == r.tenant) & (modes["mode"] == r.mode)
                         & (modes["clock"] == clock)]
            assert mine["df"].iloc[0] == r.df and mine["p50_ms"].iloc[0] == r.p50_ms
    shown = reference.display_table(modes)
    assert set(shown["mode"]) >= {"timeslice", "mps"}


def test_mps_calibration_is_the_measured_share(refs) -> None:
    dirs, modes = refs
    cal = reference.calibrate_mps(dirs, modes)
    assert cal.reference == "h200-2026-11-30-saturating"  # the run the planner's MPS weights were tuned on
    others = [d for d in dirs if d.name != "h200-2026-11-30-saturating"]
    assert reference.read_manifest(others[0]) and reference.calibrate_mps(others, modes).neighbour_sleep_ms == 0.0
    dev = modes[(modes["reference"] == cal.reference) & (modes["tenant"] == "fft") & (modes["clock"] == "device")
                & (modes["mode"] == "mps")].iloc[0]
    assert cal.share == pytest.approx(dev["p50_alone_ms"] / dev["p50_ms"])
    assert cal.weight == pytest.approx(cal.share / (1 - cal.share))
    assert cal.neighbour_sleep_ms == 0.0 and cal.victim_overhead_ms > 0
    with pytest.raises(RunError, match="no reference measured"):
        reference.calibrate_mps(dirs, modes[modes["mode"] != "mps"])


def test_mps_limited_is_shown_when_measured_and_said_missing_otherwise(refs) -> None:
    _dirs, modes = refs
    assert "not measured yet" in reference.mps_limited_note(modes[modes["mode"] != "mps-limited"])
    note = reference.mps_limited_note(modes)  # committed since
    assert note.startswith("MPS with a thread limit (`mps-limited`) measured in: ")
    assert "h200-2026-11-30-mps-limited" in note.split(": ", 1)[1].split(", ")
    limited = modes.iloc[:1].assign(mode="mps-limited", reference="h200-some-mps-limited")
    unlimited = modes[modes["mode"] != "mps-limited"]
    assert reference.mps_limited_note(pd.concat([unlimited, limited])).endswith("measured in: h200-some-mps-limited")


def test_a_run_finds_the_committed_probe_of_its_gpu_and_the_probe_says_which_slice_timer() -> None:
    root = REPO / "data" / "reference"
    assert reference.matching_probe(root / "h200-2026-11-30-article", root).name == "h200-2026-11-30-probe"
    assert reference.matching_probe(root / "h200-2026-11-30-probe", root) is None  # a probe is its own probe
    assert reference.matching_probe(EXAMPLE, root) is None  # no GPU named: nothing to match
    # a card no reference probed keeps its probe beside the validation runs: the H100's, for the H100's reference
    h100 = reference.matching_probe(root / "h100-2026-12-06-article-headline", root)
    assert h100 == REPO / "data" / "validation" / "h100-2026-12-06-probe"
    timers = measured.slice_timers(root / "h200-2026-11-30-probe", duration_ms=30_000)
    by = timers.pivot(index="quantile", columns="source", values="wait_ms")
    gap = {s: (by[s] - by["measured"]).abs().mean() for s in ("simulated, switch-in", "simulated, contention")}
    assert gap["simulated, switch-in"] < 0.1 < gap["simulated, contention"]
    assert by.loc[0.5, "simulated, contention"] > 1.5 * by.loc[0.5, "simulated, switch-in"]  # a whole quantum vs half


# --- the three kinds of waiting ------------------------------------------------------------------

def test_the_emulated_example_has_layered_waits_from_the_api_timestamps() -> None:
    table, manifest = waiting.layers(EXAMPLE)
    assert waiting.is_emulated(manifest) and (EXAMPLE / "README.md").read_text().count("EMULATED") >= 1
    assert set(table["scenario"]) == {"baseline-fft", "baseline-gemm", "shared"}
    row = waiting.example_row(table, "fft")
    assert row["scenario"] == "baseline-fft"  # the pod with every layer recorded
    # the image pull, admission and scheduling are what the emulator's timestamps say, not text
    sys.path.insert(0, str(Path(__file__).parent))
    try:
        from make_k8s_example import ADMIT_S, IMAGE_PULL_S, INIT_S
    finally:
        sys.path.remove(str(Path(__file__).parent))
    assert (row["startup_s"], row["admission_wait_s"]) == (IMAGE_PULL_S + INIT_S, ADMIT_S)
    assert waiting.example_row(table, "gemm")["placement_wait_s"] == row["placement_wait_s"] + 3  # waits for a node
    assert row["placement_s"] == row["placement_wait_s"] + IMAGE_PULL_S + INIT_S and row["admission_s"] == ADMIT_S
    assert (table["barrier_wait_s"] > 0).all() and table["clock_skew"].eq("").all()  # all met the shared start


def _example_maker():  # noqa: ANN202
    sys.path.insert(0, str(Path(__file__).parent))
    try:
        from make_k8s_example import make
    finally:
        sys.path.remove(str(Path(__file__).parent))
    return make


@pytest.mark.all_references  # the emulator waits out its made-up image pulls in real time: 2-3 minutes; make test-all
def test_example_regenerates_identically(tmp_path: Path) -> None:
    fresh = _example_maker()(tmp_path / "again")
    cols = ["scenario", "tenant", "admission_wait_s", "placement_wait_s", "startup_s"]
    a, b = waiting.layers(fresh)[0][cols], waiting.layers(EXAMPLE)[0][cols]
    pd.testing.assert_frame_equal(a.sort_values(cols[:2]).reset_index(drop=True),
                                  b.sort_values(cols[:2]).reset_index(drop=True))


def test_the_example_is_never_written_over(tmp_path: Path) -> None:
    target = tmp_path / "taken"
    target.mkdir()
    (target / "keep.txt").write_text("mine")
    with pytest.raises(SystemExit, match="already exists"):
        _example_maker()(target)
    assert [p.name for p in target.iterdir()] == ["keep.txt"] and (target / "keep.txt").read_text() == "mine"


def test_the_budget_says_which_kind_dominates() -> None:
    row = waiting.example_row(waiting.layers(EXAMPLE)[0], "fft")
    few = waiting.budget(row, 0.5, 1000)
    assert waiting.dominant(few) == "placement" and few["share"].sum() == pytest.approx(1.0)
    assert few.set_index("kind").loc["in service", "seconds"] == pytest.approx(0.5)
    many = waiting.budget(row, 0.5, 10_000_000)
    assert waiting.dominant(many) == "in service"
    once = row["admission_s"] + row["placement_s"]  # checked against the emulator's timestamps above
    assert once > 30 and waiting.break_even_requests(row, 0.5) == pytest.approx(once * 1000 / 0.5)
    with pytest.raises(RunError, match="requests must be"):
        waiting.budget(row, 0.5, -1)


def test_a_run_without_kubernetes_records_has_no_layered_waits() -> None:
    with pytest.raises(RunError, match="no Kubernetes records"):
        waiting.layers(REPO / "data" / "reference" / "h200-2026-11-30-article")


# --- the exercises: answers come from the model ---------------------------------------------------

def test_exercise_1_answer_follows_the_model() -> None:
    ex = exercises.quantum_doubles([FFT, GEMM], 2.0, predict_p50="unchanged", predict_p99="doubles",
                                   duration_ms=60_000)
    assert ex.answer == "p50 unchanged, p99 grows" and not ex.correct
    assert ex.evidence["quantum_ms"].tolist() == [2.0, 4.0]
    # a neighbour that is rarely busy: the p99 does not move either, and the answer says so
    rare = exercises.quantum_doubles([FFT, SimTenant("gemm", 30.0, 100_000.0)], 2.0, predict_p50="unchanged",
                                     predict_p99="unchanged", duration_ms=60_000)
    assert rare.answer == "p50 unchanged, p99 unchanged" and rare.correct
    # an always-busy neighbour and a kernel shorter than the quantum: now even the median moves
    busy = exercises.quantum_doubles([SimTenant("fft", 0.1, 10.0), SimTenant("gemm", 30.0, 0.0)], 2.0,
                                     duration_ms=60_000)
    assert busy.answer.startswith("p50 doubles") or busy.answer.startswith("p50 grows")


def test_exercise_2_answer_follows_the_sharing_mode() -> None:
    ts = [SimTenant("fft", 0.4, 100.0, 5.0), SimTenant("gemm", 20.0, 0.0)]
    mps_ex = exercises.which_clock(ts, [FFT_MPS, GEMM_MPS], quantum_ms=2.0, mode="mps", predict="wall only",
                                   duration_ms=30_000)
    assert mps_ex.answer == "device and wall" and not mps_ex.correct
    ts_ex = exercises.which_clock(ts, [FFT_MPS, GEMM_MPS], quantum_ms=2.0, mode="timeslice", predict="wall only",
                                  duration_ms=30_000)
    assert ts_ex.answer == "wall only" and ts_ex.correct
    assert set(ts_ex.evidence["mode"]) == {"timeslice", "mps"}


def test_exercise_3_answer_follows_the_number_of_requests() -> None:
    row = waiting.example_row(waiting.layers(EXAMPLE)[0], "fft")
    assert exercises.dominant_wait(row, 0.3, 1000, predict="placement").correct
    assert exercises.dominant_wait(row, 0.3, 10_000_000, predict="placement").answer == "in service"
    assert f"{row['placement_s']:g} s" in exercises.dominant_wait(row, 0.3, 1000).question


@pytest.mark.parametrize("call", [
    lambda: exercises.quantum_doubles([FFT, GEMM], 2.0, predict_p50="bigger", duration_ms=5_000),
    lambda: exercises.which_clock([FFT, GEMM], [FFT_MPS, GEMM_MPS], quantum_ms=2.0, predict="both",
                                  duration_ms=5_000),
    lambda: exercises.dominant_wait(pd.Series(dtype=float), 0.3, 10, predict="queue"),
])
def test_a_prediction_outside_the_choices_is_a_one_line_error(call) -> None:
    with pytest.raises(KtsError, match="must be one of") as exc:
        call()
    assert "\n" not in str(exc.value)


def test_change_words() -> None:
    assert [exercises.change(1.0, x) for x in (1.04, 1.5, 2.0, 0.5)] == ["unchanged", "grows", "doubles", "shrinks"]
    assert not math.isnan(exercises.TOLERANCE)


def test_a_missing_references_folder_is_an_error_not_an_empty_lesson(tmp_path: Path) -> None:
    with pytest.raises(RunError, match="references folder .*no-such does not exist"):
        reference.reference_dirs(tmp_path / "no-such")
    with pytest.raises(RunError, match="does not exist"):
        reference.lesson_references(tmp_path / "no-such")
    with pytest.raises(RunError, match="references folder .*no-such does not exist"):  # the lesson's probe search too
        reference.matching_probe(REPO / "data" / "reference" / "h200-2026-11-30-article", tmp_path / "no-such")
    assert reference.reference_dirs(tmp_path) == []  # an existing folder without runs: really none


def test_the_lesson_words_an_interval_as_the_report_does() -> None:
    """A half-open DF reads "≥ lo; no upper bound" in the lesson too (present.tables.fmt_ci, the one format):
    the lesson once dropped such an interval, or printed its -inf."""
    import math

    import pandas as pd

    from kts_helpers.teaching.measured import display_comparison

    comparison = pd.DataFrame([
        {"tenant": "fft", "clock": "wall", "measured_p99_alone_ms": 0.6, "measured_p99_shared_ms": 1.2,
         "measured_df": 2.0, "measured_df_lo": 1.4, "measured_df_hi": math.inf, "reading": "degraded",
         "sim_p99_alone_ms": 0.6, "sim_p99_shared_ms": 1.1, "sim_df": 1.8, "sim_in_interval": True},
        {"tenant": "gemm", "clock": "wall", "measured_p99_alone_ms": 3.0, "measured_p99_shared_ms": 3.1,
         "measured_df": 1.03, "measured_df_lo": 0.98, "measured_df_hi": 1.07, "reading": "no change within ±10 %",
         "sim_p99_alone_ms": 3.0, "sim_p99_shared_ms": 3.0, "sim_df": 1.0, "sim_in_interval": True}])
    shown = display_comparison(comparison).set_index("tenant")["measured DF [95% CI]"]
    assert shown["fft"] == "2.000 [≥ 1.400; no upper bound]"
    assert shown["gemm"] == "1.030 [0.980, 1.070]"
    modes = pd.DataFrame([{"reference": "r", "tenant": "fft", "mode": "timeslice", "clock": "wall", "p50_alone_ms": 0.5,
                           "p50_ms": 0.6, "df": 2.0, "df_lo": -math.inf, "df_hi": 2.5}])
    row = reference.display_table(modes).iloc[0]
    assert "2.00 [≤ 2.50; no lower bound]" in " ".join(str(v) for v in row.values)


def test_an_exercise_asks_first_and_keeps_its_answer_closed() -> None:
    """Nothing is pre-filled: without a prediction the check says so and names where to write one; the model's
    answer sits in a closed <details> under the question, with or without a prediction (issue 44)."""
    row = waiting.example_row(waiting.layers(EXAMPLE)[0], "fft")
    blank = exercises.dominant_wait(row, 0.3, 1000)
    assert blank.prediction is None and blank.correct is None
    text = blank.markdown()
    assert "Your prediction: *none yet*" in text and "`predict_wait`" in text and "✔" not in text and "✘" not in text
    question, answer = text.split("<details>", 1)
    assert blank.answer not in question and f"**{blank.answer}**" in answer and answer.rstrip().endswith("</details>")
    said = exercises.dominant_wait(row, 0.3, 1000, predict="placement").markdown()
    assert "Your prediction: *placement*." in said.split("<details>", 1)[0] and "✔" in said.split("<details>", 1)[1]
