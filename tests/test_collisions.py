"""Collision evidence (analyse/collisions): the in-flight rule, the share's interval, the waits, the beat.

Judges that are not the code under test: hand-placed timestamps, a brute-force count written here, the
independent ``shared/tools/tailcount.py`` on the committed H200 references, and simulated runs
(``teaching.synthetic``) whose cadences are known. The share's coverage is measured on generators with
bursts and periods (a fast subset; 1000 replicates of each at n = 300, 800, 2000 gave >= 0.955 with each
side's miss <= 2.8 %).
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from kts_helpers.analyse import collisions as col
from kts_helpers.analyse.load import load_run
from kts_helpers.analyse.logparse import parse_bytes
from kts_helpers.teaching.model import SimTenant
from kts_helpers.teaching.synthetic import write_sim_run

REPO = Path(__file__).resolve().parents[1]
REFERENCES = REPO / "data" / "reference"
ARTICLE = REFERENCES / "h200-2026-11-30-article"
TAILCOUNT = REPO / "tests" / "independent" / "tailcount.py"  # the independent count (../shared/tools, copied)
T0 = 1_795_974_308_654_992_882


def _lines(tenant: str, spans: list[tuple[float, float, str]], workload: str = "fft", wait: float = 0.0) -> str:
    """KTS_APP v2 lines at (start ms, duration ms, phase) after T0; wall = duration, device = duration - wait."""
    out, counters = [], {"pad": 0, "op": 0}
    for start_ms, dur_ms, phase in spans:
        s = T0 + int(round(start_ms * 1e6))
        e = s + int(round(dur_ms * 1e6))
        i = counters["pad" if phase == "pad" else "op"]
        counters["pad" if phase == "pad" else "op"] += 1
        out.append(f"KTS_APP,v2,{workload},{tenant},{i},{phase},{s},{s},{e},{dur_ms - wait:.6f},{dur_ms:.6f}")
    return "\n".join(out) + "\n"


def _frame(text: str) -> pd.DataFrame:
    return parse_bytes(text.encode(), source="test").frame


def _own(text: str, floor_ms: float = 0.0) -> pd.DataFrame:
    f = _frame(text)
    f = f[f["phase"] != "pad"]
    return f.assign(wait_ms=np.maximum(f["wall_ms"] - f["device_ms"] - floor_ms, 0.0))


# -- the rule -------------------------------------------------------------------------------------------------
def test_in_flight_is_launch_inside_a_closed_neighbour_window_including_a_long_earlier_one():
    ms = 1_000_000
    op_start = np.array([0, 10, 12]) * ms  # a long op 0..30 covers launches after the short 10..11 ended
    op_end = np.array([30, 11, 13]) * ms
    launches = np.array([-1, 0, 5, 11, 11.5, 30, 31]) * ms
    got = col.in_flight(launches.astype(np.int64), op_start, op_end)
    assert got.tolist() == [False, True, True, True, True, True, False]
    lone = col.in_flight(np.array([10 * ms, 11 * ms, 11 * ms + 1]), np.array([10 * ms]), np.array([11 * ms]))
    assert lone.tolist() == [True, True, False]  # both ends of the window count, nothing past them


def test_neighbour_padding_counts_as_in_flight():
    own = _own(_lines("fft", [(5.0, 1.0, "op"), (25.0, 1.0, "op"), (45.0, 1.0, "op")]))
    # the neighbour is timed at 0-10 ms, pads at 20-30 ms (its lead-in or tail), nothing at 45 ms
    nb = _frame(_lines("gemm", [(0.0, 10.0, "op"), (20.0, 10.0, "pad")], workload="gemm"))
    found = col.tenant_collisions(own, {"gemm": nb})
    assert (found.share.collided, found.share.n) == (2, 3)


def test_collided_iterations_and_waits_match_a_brute_force_count():
    rng = np.random.default_rng(3)
    own_spans = [(100.0 * k + rng.uniform(0, 5), 0.5, "op") for k in range(300)]
    nb_spans = [(37.0 * k, 4.0, "op" if 10 <= k < 800 else "pad") for k in range(820)]
    own = _frame(_lines("fft", own_spans))
    nb = _frame(_lines("gemm", nb_spans, workload="gemm"))
    hit = [any(s0 <= s <= e0 for s0, e0 in zip(nb["start_ns"], nb["end_ns"], strict=True)) for s in own["start_ns"]]
    # give collided launches a real wait, so the split is visible in the wait clock
    own = own.assign(wait_ms=np.where(hit, 1.5, 0.0) + rng.uniform(0, 0.1, len(own)))
    found = col.tenant_collisions(own, {"gemm": nb})
    assert found.share.collided == sum(hit) > 10
    w = own["wait_ms"].to_numpy()
    assert found.wait.median_with.estimate == pytest.approx(np.quantile(w[hit], 0.5))
    assert found.wait.median_without.estimate == pytest.approx(np.quantile(w[~np.array(hit)], 0.5))
    assert found.wait.n_with == sum(hit) and found.wait.n_without == 300 - sum(hit)
    assert found.wait.median_with.estimate > 1.4 > 0.2 > found.wait.median_without.estimate


# -- the interval ---------------------------------------------------------------------------------------------
def _markov(rng: np.random.Generator, n: int, p: float, burst: float) -> np.ndarray:
    leave = 1.0 / burst
    enter = p * leave / (1 - p)
    x = np.zeros(n, bool)
    state = rng.random() < p
    u = rng.random(n)
    for i in range(n):
        x[i] = state
        state = (u[i] >= leave) if state else (u[i] < enter)
    return x


@pytest.mark.parametrize("burst", [1.0, 3.0])
def test_share_interval_covers_bursty_collisions_at_n_800(burst):
    """The audit's generator: 1.7 % of iterations, in Markov bursts (mean 3), n = 800."""
    rng = np.random.default_rng(11)
    reps, truth = 300, 0.017
    lo_miss = hi_miss = 0
    for _ in range(reps):
        s = col.share_interval(_markov(rng, 800, truth, burst))
        lo_miss += s.lo > truth
        hi_miss += s.hi < truth
    assert (lo_miss + hi_miss) / reps <= 0.07 and max(lo_miss, hi_miss) / reps <= 0.035


def test_bursts_widen_the_interval_beyond_the_independent_one():
    iid = np.zeros(800, bool)
    iid[np.arange(10, 800, 57)] = True  # 14 single collisions
    bursty = np.zeros(800, bool)
    for s in (50, 300, 550):
        bursty[s: s + 5] = True  # 15 collisions in 3 bursts
    a, b = col.share_interval(iid), col.share_interval(bursty)
    assert a.tau == pytest.approx(1.0, abs=0.3) and b.tau > 4
    assert b.hi - b.lo > 2 * (a.hi - a.lo)
    assert a.lo < a.estimate < a.hi and b.lo < b.estimate < b.hi


def test_no_collision_seen_still_has_an_upper_bound_above_zero():
    s = col.share_interval(np.zeros(800, bool))
    assert s.collided == 0 and s.lo == 0 and 0.01 < s.hi < 1


# -- the beat -------------------------------------------------------------------------------------------------
def _cadence(period: float, busy: float, spread: float = 0.0) -> col.Cadence:
    return col.Cadence(period, spread, busy)


def test_expected_lag_from_the_cadences():
    assert col.expected_lag(_cadence(100.0, 0.5), _cadence(150.0, 3.0), 800) == (3, "")  # 300 ms
    assert col.expected_lag(_cadence(100.775, 0.5), _cadence(153.358, 3.1), 800) == (35, "")  # the H200 article
    assert col.expected_lag(_cadence(150.0, 3.0), _cadence(100.0, 0.5), 800) == (2, "")
    lag, why = col.expected_lag(_cadence(100.0, 0.5), _cadence(22.0, 21.9), 800)
    assert lag is None and "continuous" in why
    lag, why = col.expected_lag(_cadence(100.0, 0.5), _cadence(150.0, 3.0, spread=20.0), 800)
    assert lag is None and "irregular" in why


def test_periodicity_names_a_real_period_and_not_a_random_one():
    n = 800
    periodic = np.zeros(n, bool)
    periodic[[i for i in range(20, n, 35)]] = True
    periodic[[55, 90]] = False  # a few missed recurrences
    got = col.periodicity(periodic, 100.0)
    assert got.lag == 35 and got.period_ms == pytest.approx(3500.0) and got.p_value < 0.01
    flagged = 0
    for seed in range(20):
        rng = np.random.default_rng(seed)
        random = np.zeros(n, bool)
        random[rng.choice(n, 20, replace=False)] = True
        flagged += col.periodicity(random, 100.0, seed=seed).lag is not None
    assert flagged <= 3  # about 5 % expected
    assert col.periodicity(np.ones(n, bool), 100.0).lag is None
    few = np.zeros(n, bool)
    few[[10, 45]] = True
    assert "too few" in col.periodicity(few, 100.0).verdict


@pytest.mark.parametrize(("fft_ms", "gemm_ms", "jitter"), [(100.0, 150.0, 0.0), (100.0, 153.0, 0.3)])
def test_simulated_run_collisions_follow_the_predicted_beat(tmp_path, fft_ms, gemm_ms, jitter):
    run = write_sim_run(tmp_path / "sim", [SimTenant("fft", 0.5, fft_ms, jitter), SimTenant("gemm", 3.0, gemm_ms, jitter)],
                        duration_ms=80_000)
    found = {f.tenant: f for f in col.run_collisions(load_run(run))}
    fft = found["fft"]
    assert fft.neighbours == ("gemm",) and fft.share.n > 700 and fft.share.collided > 5
    assert fft.periodicity.lag is not None and fft.beat_matches
    # collided launches wait for the GEMM's kernel (3 ms long); the others do not wait at all
    assert fft.wait.median_with.estimate > 0.5 > fft.wait.median_without.estimate


# -- the committed H200 references ----------------------------------------------------------------------------
def _tailcount(run: Path) -> dict[str, tuple[int, int, float, float]]:
    out = subprocess.run([sys.executable, str(TAILCOUNT), str(run)], capture_output=True, text=True, check=True).stdout
    got = {}
    for m in re.finditer(r"^(\S+): launched during a neighbour's operation (\d+)/(\d+); median wall-device "
                         r"(\S+) ms with, (\S+) ms without", out, re.M):
        got[m.group(1)] = (int(m.group(2)), int(m.group(3)), float(m.group(4)), float(m.group(5)))
    return got


# tailcount reads the scenarios named shared*; the multi-context probe's (multi-*) are read in test_probe
@pytest.mark.parametrize("ref", sorted(p.name for p in REFERENCES.iterdir() if (p / "logs").is_dir()
                                       and any(s.name.startswith("shared") for s in (p / "logs").iterdir())))
def test_counts_and_waits_agree_with_the_independent_tailcount(ref):
    data = load_run(REFERENCES / ref)
    phases: dict[str, list] = {}  # tailcount counts a tenant's lines of every phase (an llm's prefill and decode)
    for f in col.run_collisions(data):
        phases.setdefault(f"{f.scenario}/{f.tenant}", []).append(f)
    theirs = _tailcount(REFERENCES / ref)
    assert phases and set(phases) == set(theirs)
    for key, (k, n, with_ms, without_ms) in theirs.items():
        found = phases[key]
        assert (sum(f.share.collided for f in found), sum(f.share.n for f in found)) == (k, n), key
        if len(found) > 1:  # tailcount's medians pool the phases; the kit's are per phase
            continue
        f = found[0]
        # tailcount's wait is wall - device; the kit's wait clock also subtracts the overhead floor (>= 0)
        for iv, raw in ((f.wait.median_with, with_ms), (f.wait.median_without, without_ms)):
            if np.isfinite(raw) and raw > 3 * data.floor_ms and iv.n and np.isfinite(iv.estimate):
                assert iv.estimate == pytest.approx(raw - data.floor_ms, abs=2e-4), key


def test_article_reference_fft_collisions_beat_every_35_launches():
    """The issue's numbers: 14 of 800 shared FFT iterations launched while the GEMM ran; 0.65 vs 0.28 ms."""
    fft = next(f for f in col.run_collisions(load_run(ARTICLE)) if f.tenant == "fft")
    assert (fft.share.collided, fft.share.n) == (14, 800)
    assert fft.share.lo < fft.expected_share < fft.share.hi  # as often as launches at a random phase would
    assert fft.wait.median_with.estimate > 2 * fft.wait.median_without.estimate
    assert fft.wait.median_without.hi < fft.wait.p95_with.lo  # collided waits beyond the others' bulk
    assert [b.lag for b in fft.beats] == [35] and fft.periodicity.lag == 35 and fft.beat_matches
    row = col.collisions_table([fft]).iloc[0]
    assert row["collided"].startswith("14/800 = 1.75 %") and "35 it." in row["expected_beat"]


def test_only_co_running_iterations_are_counted(tmp_path):
    """A tenant's iterations after its neighbour stopped are no shared statistic, collided or not."""
    run = write_sim_run(tmp_path / "sim", [SimTenant("fft", 0.5, 100.0), SimTenant("gemm", 3.0, 150.0)],
                        duration_ms=40_000)
    log = run / "logs" / "shared" / "fft.log"
    frame = parse_bytes(log.read_bytes(), source="fft").frame
    last = int(frame["end_ns"].max())
    after = [f"KTS_APP,v2,fft,fft,{len(frame) + k},op,{s},{s},{s + 500_000},0.5,0.5"
             for k, s in enumerate(range(last + 10**9, last + 50 * 10**9, 10**9))]
    with open(log, "a") as fh:
        fh.write("\n".join(after) + "\n")
    data = load_run(run)
    fft = next(f for f in col.run_collisions(data) if f.tenant == "fft")
    inside = data.iterations.query("scenario == 'shared' and tenant == 'fft'")["in_overlap"]
    assert len(inside) == len(frame) + len(after)
    assert fft.share.n == int(inside.sum()) <= len(frame)  # none of the lines written after the window


# -- the report section ---------------------------------------------------------------------------------------
def test_report_section_on_the_article_reference_agrees_with_its_table_and_draws_offline():
    import vl_convert

    from kts_helpers.present import sections

    data = load_run(ARTICLE)
    sec = sections.collisions_section(data)
    assert sec is not None and sec.markdown.startswith("### Collisions: the physical cause of the tail")
    assert [s.markdown for s in sections.build(data, n_resamples=200)].count(sec.markdown) == 1
    table, chart = sec.items
    assert table["tenant"].tolist() == ["fft", "gemm"]
    for found in col.run_collisions(data):  # every sentence is generated from the same results as its row
        assert f"* {col.summary_sentence(found)}" in sec.markdown
        row = table[table["tenant"] == found.label].iloc[0]
        assert row["collided"] == found.share.text()
    fft = table[table["tenant"] == "fft"].iloc[0]
    assert fft["collided_beyond_p95"].startswith("12/14")
    assert "fft: 14 of 800 launches found gemm in flight" in sec.markdown and "it matches" in sec.markdown
    spec = chart.to_dict()
    assert sum(len(v) for v in spec["datasets"].values()) == 1600  # every co-running launch of both tenants
    assert vl_convert.vegalite_to_svg(chart.to_json()).lstrip().startswith("<svg")  # no network needed


def test_no_rows_and_no_section_without_co_running_shared_iterations(tmp_path):
    run = write_sim_run(tmp_path / "sim", [SimTenant("fft", 0.5, 100.0), SimTenant("gemm", 3.0, 150.0)],
                        duration_ms=5_000)
    from kts_helpers.present import sections

    data = load_run(run)
    assert sections.collisions_section(data) is not None
    data.iterations = data.iterations[data.iterations["kind"] != "shared"]
    assert col.run_collisions(data) == [] and sections.collisions_section(data) is None
