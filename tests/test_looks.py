"""Interim looks (shared_max_factor > 1): the worker pads at a look until answered, the watch does not take that
padding for the end of its timed part, the spec lays the looks out, and a real run stops on its verdict."""

from __future__ import annotations

import io
import json
from types import SimpleNamespace

import kts_api
import pytest
from conftest import corunning_fractions

from kts_helpers.errors import SpecError
from kts_helpers.run.corun import CoRunWatch
from kts_helpers.run.logformat import END_TAG, LOOK_TAG, format_record
from kts_helpers.run.looks import look_counts
from kts_helpers.run.spec import ExperimentParams, ExperimentSpec, resolve

T0 = 1_795_974_308_654_992_882


def _loop(worker_module, monkeypatch, barrier, answer: str | None, iterations: int = 6, looks: str = "3"):
    (barrier / "ready-a").write_text("1")
    if answer is not None:
        (barrier / "answer-a-3").write_text(answer)
    args = worker_module.parse_args(["--workload", "fft", "--tenant", "a", "--iterations", str(iterations),
                                     "--sleep-ms", "1", "--barrier-dir", str(barrier), "--lead-in-s", "0",
                                     "--device", "cpu", "--looks", looks, "--barrier-timeout-s", "0.2"])
    out = io.StringIO()
    monkeypatch.setattr(worker_module.sys, "stdout", out)
    workload = kts_api.Workload("fft", lambda: [("op", lambda: None)])
    assert worker_module.run_loop(args, workload, worker_module.Clock(None, SimpleNamespace(type="cpu"))) == 0
    lines = out.getvalue().splitlines()
    app = [ln.split(",") for ln in lines if ln.startswith("KTS_APP,")]
    end = json.loads(next(ln for ln in lines if ln.startswith(END_TAG)).split(",", 2)[2])
    return lines, app, end


def test_a_stop_answer_ends_the_timed_part_at_the_look(tmp_path, worker_module, monkeypatch):
    lines, app, end = _loop(worker_module, monkeypatch, tmp_path, "stop")
    assert [f[5] for f in app if f[5] != "pad"] == ["op"] * 3
    assert any(ln.startswith(f"{LOOK_TAG},v2,") and '"n":3' in ln for ln in lines)
    assert end["n"] == 3 and end["reason"] == "verdict decided at look 3"


def test_a_go_answer_times_on_to_the_maximum_padding_only_while_it_waited(tmp_path, worker_module, monkeypatch):
    lines, app, end = _loop(worker_module, monkeypatch, tmp_path, "go")
    phases = [f[5] for f in app]
    timed = [int(f[4]) for f in app if f[5] != "pad"]
    assert timed == list(range(6)) and end["n"] == 6 and end["reason"] == "fixed count"
    look_at = lines.index(next(ln for ln in lines if ln.startswith(LOOK_TAG)))
    assert all(not ln.startswith("KTS_APP") or ",op," in ln for ln in lines[:look_at])  # no pad before the look
    assert "pad" not in phases[-3:]  # timed again after the answer


def test_an_unanswered_look_times_on_after_the_limit(tmp_path, worker_module, monkeypatch):
    lines, app, end = _loop(worker_module, monkeypatch, tmp_path, None)
    assert end["n"] == 6 and sum(f[5] == "pad" for f in app) >= 1


def _app(tenant, i, start_ms, phase="op"):
    s = T0 + int(start_ms * 1e6)
    return f"KTS_APP,v2,fft,{tenant},{i},{phase},{s},{s},{s + 1_000_000},1.0,1.0\n".encode()


def test_padding_at_a_look_is_not_the_end_of_the_timed_part():
    w = CoRunWatch(["a", "b"], pad_limit_s=60)
    w.feed("b", _app("b", 0, 0))
    w.feed("a", _app("a", 0, 1) + (format_record(LOOK_TAG, {"tenant": "a", "n": 1}) + "\n").encode()
           + _app("a", 0, 5, "pad"))
    assert w.tenants["a"].look == 1 and not w.tenants["a"].timed_done
    assert not w.corunning_through("a")  # b's last line ended before a's first iteration did
    w.feed("b", _app("b", 1, 3))
    assert w.corunning_through("a")
    w.feed("a", (format_record(END_TAG, {"n": 1}) + "\n").encode() + _app("a", 1, 9, "pad"))
    assert w.tenants["a"].timed_done and w.tenants["a"].looks == [1]


def test_the_spec_lays_out_looks_on_shared_tenants_only():
    assert look_counts(800, 2.0) == ((800, 1200), 1600)
    assert look_counts(300, 1.5) == ((300,), 450)
    spec = resolve(ExperimentParams.from_mapping({"profile": "article", "shared_max_factor": 2.0}), "cuda")
    shared = spec.scenario("shared")
    assert [(t.iterations, t.looks) for t in shared.tenants] == [(1600, (800, 1200))] * 2
    assert shared.tenants[0].env()["KTS_LOOKS"] == "800,1200"
    again = ExperimentSpec.from_dict(json.loads(json.dumps(spec.to_dict())))  # the manifest keeps the looks
    assert again.scenario("shared").tenants == shared.tenants
    assert all(not t.looks and t.iterations == 800 for s in spec.scenarios_of("baseline") for t in s.tenants)
    plain = resolve(ExperimentParams.from_mapping({"profile": "article"}), "cuda")
    assert "KTS_LOOKS" not in plain.scenario("shared-r1").tenants[0].env()
    with pytest.raises(SpecError, match="repeats"):
        resolve(ExperimentParams.from_mapping({"profile": "article", "shared_max_factor": 2.0, "repeats": 2}), "cuda")
    with pytest.raises(SpecError, match="auto"):
        resolve(ExperimentParams.from_mapping({"profile": "article", "shared_max_factor": 2.0,
                                               "iterations": "auto"}), "cuda")
    with pytest.raises(SpecError, match="shared_max_factor"):
        resolve(ExperimentParams.from_mapping({"profile": "article", "shared_max_factor": 0.5}), "cuda")


@pytest.mark.e2e
def test_a_judged_run_answers_each_look_by_its_reading_and_every_iteration_co_ran(tmp_path):
    """The real judge (the verdict at 99.8 %) on a CPU run: whatever it reads -- a live CPU measurement, so the
    test does not fix which look decides -- every answer follows its reading, the timed part ends where the answers
    say, and every timed iteration co-ran; without a judge the same design times to its maximum."""
    from kts_helpers.analyse.load import load_run
    from kts_helpers.analyse.sequential import VerdictJudge
    from kts_helpers.run import experiment

    params = {"profile": "cpu-quick", "device": "cpu", "iterations": 400, "shared_max_factor": 2.0}
    # calibrate=False: the tool's overhead floor is read by no assertion here (nor by the judge), one worker less
    run, _spec, _ = experiment.setup_run(params, root=tmp_path, run_id="judged", progress=False, calibrate=False)
    for kind in ("baseline", "shared"):
        experiment.run_kind(run, kind, progress=False, judge=VerdictJudge())
    looks = run.manifest()["scenarios"]["shared"]["looks"]
    got = corunning_fractions(run.path)
    stopping = load_run(run.path).stopping.set_index(["scenario", "tenant"])
    assert set(looks) == {"fft", "gemm"}
    for tenant, said in looks.items():  # every answer follows its reading; the timed part ends where it says
        assert [a["answer"] for a in said] == ["go" if a["reading"] == "inconclusive" else "stop" for a in said]
        assert all(a["answer"] == "go" for a in said[:-1]) and [a["n"] for a in said] == [400, 600][:len(said)]
        n = said[-1]["n"] if said[-1]["answer"] == "stop" else 800
        assert got[f"shared/{tenant}"][:2] == (n, n)  # every timed iteration co-ran
        reason = stopping.loc[("shared", tenant), "reason"]
        assert reason == (f"verdict decided at look {n}" if n < 800 else "fixed count")

    tiny = {"profile": "tiny", "device": "cpu", "iterations": 30, "shared_max_factor": 2.0}
    # no judge reads an alone scenario, so only the shared ones run (the looks are laid out all the same)
    run2, _spec, _ = experiment.setup_run(tiny, root=tmp_path, run_id="unjudged", progress=False, calibrate=False)
    experiment.run_kind(run2, "shared", progress=False)
    looks2 = run2.manifest()["scenarios"]["shared"]["looks"]
    assert {a["answer"] for v in looks2.values() for a in v} == {"go"}
    assert corunning_fractions(run2.path)["shared/fft"][:2] == (60, 60)


@pytest.mark.e2e
def test_a_stop_at_the_first_look_ends_that_tenant_there_while_its_neighbour_pads_on_co_running(tmp_path):
    """The runner and workers end to end with a judge whose answers are fixed (the statistics behind a real one
    are tested above and in test_verdict): the GEMM told "stop" at its first look times 30 iterations and pads,
    the FFT told "go" times all 60, and every timed iteration of both co-ran."""
    from kts_helpers.analyse.load import load_run
    from kts_helpers.run import experiment
    from kts_helpers.run.corun import LookAnswer

    asked = []

    def judge(run, scenario, tenant, n):
        asked.append((tenant, n))
        return LookAnswer(tenant == "gemm", "degraded" if tenant == "gemm" else "inconclusive")

    tiny = {"profile": "tiny", "device": "cpu", "iterations": 30, "shared_max_factor": 2.0}
    run, _spec, _ = experiment.setup_run(tiny, root=tmp_path, run_id="scripted", progress=False, calibrate=False)
    for kind in ("baseline", "shared"):
        experiment.run_kind(run, kind, progress=False, judge=judge)
    looks = run.manifest()["scenarios"]["shared"]["looks"]
    assert [(a["n"], a["answer"]) for a in looks["gemm"]] == [(30, "stop")]
    assert [(a["n"], a["answer"]) for a in looks["fft"]] == [(30, "go"), (45, "go")]
    assert sorted(asked) == [("fft", 30), ("fft", 45), ("gemm", 30)]
    got = corunning_fractions(run.path)
    assert got["shared/gemm"][:2] == (30, 30) and got["shared/fft"][:2] == (60, 60)
    stopping = load_run(run.path).stopping.set_index(["scenario", "tenant"])
    assert stopping.loc[("shared", "gemm"), "reason"] == "verdict decided at look 30"
    assert stopping.loc[("shared", "fft"), "reason"] == "fixed count"


def test_the_design_simulator_stops_where_the_verdict_decides_and_grows_only_what_it_says():
    """``sequential.design_decisions`` (make bench: bench/results/sequential.md) on small samples: a 2.5x shift
    decides at the first look (one alone block: a shift must stand out of the prior drift, 14.5 % a block; a 2x one
    only at the last look, 1600, where the interim looks' spending leaves the most; a 30 % one never); collisions
    at 1.7 % without the neighbours' timestamps usually need more shared iterations (with them, as the live judge
    reads them, the first look decides); the alone series grows only in the design that says so."""
    from dataclasses import replace

    from kts_helpers.analyse import coverage
    from kts_helpers.analyse.sequential import design_decisions

    iid = coverage.lognormal()
    shift = design_decisions(iid, coverage.lognormal(scale=2.5), 20, seed=3)
    assert shift.degraded == 1.0 and shift.mean_shared_n == shift.mean_alone_n == 800
    late = design_decisions(iid, coverage.lognormal(scale=2.0), 20, seed=3)
    assert late.degraded == 1.0 and late.mean_shared_n == 1600 and late.mean_alone_n == 800
    assert design_decisions(iid, coverage.lognormal(scale=1.3), 20, seed=3).degraded == 0.0
    timed = design_decisions(iid, coverage.collisions("random"), 20, seed=4)
    assert timed.degraded == 1.0 and timed.mean_shared_n == 800
    blind = replace(coverage.collisions("random"), flagged=None)  # no timestamps: the whole series' tests only
    built = design_decisions(iid, blind, 30, seed=4)
    both = design_decisions(iid, blind, 30, seed=4, grow_alone=True)
    fixed = design_decisions(iid, blind, 30, seed=4, factor=1.0)
    assert built.mean_alone_n == 800 and 800 < built.mean_shared_n <= 1600
    assert both.mean_alone_n == both.mean_shared_n > 800
    assert fixed.mean_shared_n == fixed.mean_alone_n == 800 and fixed.design == "fixed 800"
    assert built.degraded >= fixed.degraded  # the same draws, read later where undecided


def test_the_judge_reads_only_the_first_n_co_running_iterations(tmp_path, tiny_params):
    """A look at n reads iterations 0..n-1 only: the shared FFT matches its alone series for its first 400
    iterations, then one in four is slower than its slowest alone one, so the look at 400 must not read "degraded"
    and the one at 800 must. 400, not 300: below 368 the test runs at a quarter of its level, and a live alone tail
    that came in one burst (a clustered tau) could then leave the late look short of it."""
    import numpy as np

    from kts_helpers.analyse.sequential import VerdictJudge
    from kts_helpers.run import experiment
    from kts_helpers.run.logformat import AppLine, format_line

    run, spec, _ = experiment.setup_run({**tiny_params, "iterations": 400}, root=tmp_path, run_id="j", progress=False,
                                        calibrate=False)
    experiment.run_kind(run, "baseline", progress=False)
    rng = np.random.default_rng(5)
    # The alone logs keep the real run's meta line, their values are drawn here: what this test asks (which
    # iterations a look reads) must not hang on how loaded the machine was when the CPU baseline ran (an alone
    # tail that follows the load made the late look's verdict open in one fresh-clone CI run).
    for tenant, median in (("fft", 0.5), ("gemm", 2.0)):
        log = run.log_path(f"baseline-{tenant}", tenant)
        meta = [ln for ln in log.read_text().splitlines() if not ln.startswith("KTS_APP")]
        walls = median * rng.lognormal(0.0, 0.05, 400)
        t0 = 1_799_999_000_000_000_000
        lines = [AppLine(tenant, tenant, i, "op", t0 + i * 10_000_000, t0 + i * 10_000_000,
                         t0 + i * 10_000_000 + int(x * 1e6), x, x) for i, x in enumerate(walls)]
        log.write_text("\n".join(meta) + "\n" + "".join(format_line(a) + "\n" for a in lines))

    def alone(tenant):  # the tenant's own alone walls, in a new order
        rows = [ln.split(",") for ln in run.log_path(f"baseline-{tenant}", tenant).read_text().splitlines()]
        return rng.permutation([float(f[10]) for f in rows if f[0] == "KTS_APP" and f[5] != "pad"])

    fft, later = alone("fft"), alone("fft")
    later[::4] += 2 * fft.max()  # one in four slower than any alone iteration, spread out (not one long burst)
    walls = {"fft": np.r_[fft, later], "gemm": np.r_[alone("gemm"), alone("gemm")]}
    run.claim_scenario("shared")
    for tenant, w in walls.items():
        t0 = 1_800_000_000_000_000_000 + (5_000_000 if tenant == "gemm" else 0)  # interleaved, 5 ms apart
        lines = [AppLine(tenant, tenant, i, "op", t0 + i * 10_000_000, t0 + i * 10_000_000,
                         t0 + i * 10_000_000 + int(x * 1e6), x, x) for i, x in enumerate(w)]
        run.log_path("shared", tenant).write_text("".join(format_line(a) + "\n" for a in lines))
    judge = VerdictJudge()
    early, late = judge(run, spec.scenario("shared"), "fft", 400), judge(run, spec.scenario("shared"), "fft", 800)
    assert "degraded" not in early.reading and late.stop and late.reading == "degraded", (early, late)


def test_a_look_is_answered_once_and_only_after_every_neighbour_ran_past_it(tmp_path):
    """The runner asks the judge at a look only when the neighbours' logs prove they were active through the
    tenant's n-th iteration (else the verdict could rest on fewer than n co-running iterations), and once."""
    from kts_helpers.run.backends.local import _Looks
    from kts_helpers.run.corun import LookAnswer

    asked = []

    def judge(run, scenario, tenant, n):
        asked.append((tenant, n))
        return LookAnswer(True, "degraded")

    looks = _Looks(None, None, tmp_path, judge)
    w = CoRunWatch(["a", "b"], pad_limit_s=60)
    w.feed("b", _app("b", 0, 0))
    w.feed("a", _app("a", 0, 1) + (format_record(LOOK_TAG, {"tenant": "a", "n": 1}) + "\n").encode()
           + _app("a", 0, 5, "pad"))
    looks.answer(w)
    assert asked == [] and not list(tmp_path.glob("answer-*"))  # b's last line ended before a's iteration did
    w.feed("b", _app("b", 1, 3))
    looks.answer(w)
    looks.answer(w)
    assert asked == [("a", 1)] and (tmp_path / "answer-a-1").read_text() == "stop"
    assert looks.answered["a"] == [{"n": 1, "answer": "stop", "reading": "degraded", "why": ""}]
