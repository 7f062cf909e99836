"""The time-slice probe: refused on a CPU, its reading recovers a known quantum and switch cost, and says
"no contended samples" (no estimate) when the tick never found the GPU busy."""

from __future__ import annotations

import math
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from kts_helpers.analyse.load import load_run
from kts_helpers.analyse.probe import is_probe, read_probe
from kts_helpers.errors import RunError, SpecError
from kts_helpers.present import sections
from kts_helpers.run.probe import HOG, HOG_POISSON, TICK, TICK_BB, size_hog, with_hog_size
from kts_helpers.run.spec import ExperimentParams, resolve
from kts_helpers.teaching.model import SimTenant
from kts_helpers.teaching.synthetic import write_sim_probe, write_sim_run

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def probes(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("probes")
    return {"q2s01": write_sim_probe(root / "q2s01", 2.0, 0.1, seed=1),
            "q6s03": write_sim_probe(root / "q6s03", 6.0, 0.3, seed=2),
            "idle": write_sim_probe(root / "idle", 2.0, 0.0, hog_busy=False, reverse_duration_ms=2_000)}


def _within(est: object, truth: float, tol: float) -> bool:
    return abs(est.value - truth) <= tol and est.lo - tol <= truth <= est.hi + tol


@pytest.mark.parametrize("name,quantum,switch", [("q2s01", 2.0, 0.1), ("q6s03", 6.0, 0.3)])
def test_reading_recovers_the_simulated_quantum_and_switch(probes: dict[str, Path], name: str, quantum: float,
                                                           switch: float) -> None:
    r = read_probe(probes[name], n_resamples=500)
    assert r.n_contended >= 368 and r.n_contended <= r.n_ticks
    assert _within(r.upper_edge, quantum + switch, 0.02)
    assert _within(r.quantum, quantum, 0.05 * quantum)
    assert _within(r.switch, switch, 0.15 * switch)
    # the hog's cost per tick is two switches plus the tick's kernel (0.05 ms)
    assert _within(r.per_preemption, 2 * switch + 0.05, 0.1 * (2 * switch + 0.05))
    # the reverse roles: the simulator pays the switch on top of the slice, so the hog runs a whole quantum per
    # slice (read high by at most quantum / hog kernel)
    assert abs(r.slice_run.value - quantum) <= quantum * (quantum / 50.0 + 0.05)
    # at 2 ms (bias 4 %) the data tell the two ways apart; at 6 ms (bias 12.5 %) they may not, but never the wrong way
    assert ("switch is paid on top of the slice" in r.agreement if quantum == 2.0 else
            "holder pays" not in r.agreement and "disagree" not in r.agreement), r.agreement
    # the lower edge is well below the upper one: ticks also land on a slice already running
    assert r.lower_edge.value < r.upper_edge.value


def test_two_quanta_are_told_apart(probes: dict[str, Path]) -> None:
    a, b = read_probe(probes["q2s01"], n_resamples=300), read_probe(probes["q6s03"], n_resamples=300)
    assert a.quantum.hi < b.quantum.lo
    assert a.switch.hi < b.switch.lo


def test_no_contended_samples_gives_no_estimate(probes: dict[str, Path]) -> None:
    r = read_probe(probes["idle"], n_resamples=300)
    assert r.n_ticks > 300 and r.n_contended == 0
    for est in (r.quantum, r.switch, r.upper_edge, r.lower_edge, r.per_preemption, r.slice_run):
        assert not est.has_value and est.note == "no contended samples"
    assert "effective quantum: no contended samples" in r.lines()
    assert "nothing to compare" in r.agreement


def test_thin_contention_is_insufficient_not_an_estimate(tmp_path: Path) -> None:
    """Fewer contended ticks than a p99 needs (368): 'insufficient data', never an edge from a handful."""
    run = write_sim_probe(tmp_path / "short", 2.0, 0.1, duration_ms=3_000, reverse_duration_ms=2_000)
    r = read_probe(run, n_resamples=200)
    assert 0 < r.n_contended < 368
    assert not r.quantum.has_value and r.quantum.note.startswith("insufficient data (n = ")


def test_a_run_that_is_not_a_probe_is_refused_in_one_line(tmp_path: Path) -> None:
    run = write_sim_run(tmp_path / "r", [SimTenant("fft", 1.0, 50.0), SimTenant("gemm", 20.0, 50.0)], 2.0,
                        duration_ms=2_000)
    assert not is_probe(load_run(run))
    with pytest.raises(RunError, match="not a time-slice probe"):
        read_probe(run)
    res = subprocess.run([sys.executable, "-m", "kts_helpers", "probe", "--run", str(run)], capture_output=True,
                         text=True, cwd=REPO)
    assert res.returncode == 2 and res.stderr.count("\n") == 1 and "not a time-slice probe" in res.stderr


@pytest.mark.parametrize("argv", [["--device", "cpu"], []])
def test_probe_on_a_cpu_is_refused_in_one_line(tmp_path: Path, argv: list[str]) -> None:
    res = subprocess.run([sys.executable, "-m", "kts_helpers", "probe", "--root", str(tmp_path / "runs"), *argv],
                         capture_output=True, text=True, cwd=REPO)
    assert res.returncode == 2, res.stderr
    assert res.stderr.count("\n") == 1 and res.stderr.startswith("kts: error:")
    assert "no GPU time slice to measure" in res.stderr
    assert not (tmp_path / "runs").exists()  # nothing half-made
    with pytest.raises(SpecError, match="no GPU time slice"):
        resolve(ExperimentParams.from_mapping({"profile": "probe"}), "cpu")


def test_probe_scenarios_pair_a_random_tick_with_a_long_hog_and_the_reverse() -> None:
    spec = resolve(ExperimentParams.from_mapping({"profile": "probe", "device": "cuda", "gemm_size": 8192}), "cuda")
    by = {s.name: s for s in spec.scenarios}
    assert [t.name for t in by["shared"].tenants] == [TICK, HOG]
    assert [t.name for t in by["shared-reverse"].tenants] == [HOG_POISSON, TICK_BB]
    tick, hog = by["shared"].tenants
    assert tick.arrival == "poisson" and tick.workload == "noop" and tick.rate_hz > 0
    assert hog.workload == "gemm" and hog.matrix_size == 8192 and hog.sleep_ms == 0
    rev_hog, rev_tick = by["shared-reverse"].tenants
    assert rev_hog.arrival == "poisson" and rev_tick.arrival == "closed" and rev_tick.sleep_ms == 0
    # the back-to-back short kernel: the hog's size scaled by the cube law to ~1/100 of its time (0.5 ms)
    assert rev_tick.workload == "gemm" and rev_tick.matrix_size == 1792
    assert {f"baseline-{n}" for n in (TICK, HOG, TICK_BB, HOG_POISSON)} <= set(by)
    assert all(s.sharing == "timeslice" for s in spec.scenarios)


def test_hog_size_is_calibrated_to_the_target_kernel_length(tmp_path: Path) -> None:
    """A fake worker whose 4096^2 GEMM takes 5 ms: 50 ms needs about 4096 * 10^(1/3) = 8825 -> 8704 or 8960."""
    worker = tmp_path / "fake_worker.py"
    worker.write_text(textwrap.dedent("""
        import os
        assert os.environ["WORKLOAD"] == "gemm" and os.environ["MATRIX_SIZE"] == "4096"
        print('KTS_META,v2,{"workload":"gemm","tenant":"sizing"}')
        for i in range(10):  # lead-in padding on a GPU still warming up: never a timing
            print(f"KTS_APP,v2,gemm,sizing,{i},pad,1,1,50000002,50.0,50.2")
        for i in range(int(os.environ["ITERATIONS"])):
            print(f"KTS_APP,v2,gemm,sizing,{i},op,1,1,2,{5.0 + 0.01 * i},5.2")
    """))
    sizing = size_hog(python=sys.executable, worker=worker, device="cuda")
    assert sizing["matrix_size"] in (8704, 8960)
    assert math.isclose(sizing["predicted_kernel_ms"], 50.0, rel_tol=0.1)
    params = ExperimentParams.from_mapping({"profile": "probe"})
    assert with_hog_size(params, sizing).gemm_size == sizing["matrix_size"]
    explicit = ExperimentParams.from_mapping({"profile": "probe", "gemm_size": 4096})
    assert with_hog_size(explicit, sizing).gemm_size == 4096
    with pytest.raises(SpecError, match="no GPU time slice"):
        size_hog(python=sys.executable, worker=worker, device="cpu")


def test_a_failing_gemm_timing_is_one_clear_error(tmp_path: Path) -> None:
    worker = tmp_path / "broken.py"
    worker.write_text("import sys\nprint('CUDA error: out of memory', file=sys.stderr)\nsys.exit(1)\n")
    with pytest.raises(Exception, match="probe's GEMM timing failed.*out of memory"):
        size_hog(python=sys.executable, worker=worker, device="cuda")


def test_the_report_shows_the_probe_section(probes: dict[str, Path]) -> None:
    secs = sections.build(load_run(probes["q2s01"]), n_resamples=200)
    probe = [s for s in secs if s.markdown.startswith("### The GPU's time slice (probe)")]
    assert len(probe) == 1
    table = probe[0].items[0]
    quantum = table.loc[table["reading"] == "effective quantum", "value"].iloc[0]
    assert quantum.startswith(("1.9", "2.0")) and quantum.endswith("ms") and "[" in quantum
    assert len(probe[0].items) == 2  # the waits histogram
    idle = [s for s in sections.build(load_run(probes["idle"]), n_resamples=200)
            if s.markdown.startswith("### The GPU's time slice")][0]
    assert "no contended samples" in idle.items[0]["value"].tolist() and len(idle.items) == 1


def test_the_run_per_slice_tells_how_the_switch_is_paid() -> None:
    """Quantum 2.2, switch 0.16: a run of 2.2 per slice = switch on top; 2.04 = the holder pays the switch-in;
    the run per slice may read high by run / kernel (here 4 %); far from both = not round robin."""
    from kts_helpers.analyse.probe import Estimate, agreement

    q, s = Estimate(2.2, 2.17, 2.23), Estimate(0.16, 0.15, 0.17)
    assert "paid on top" in agreement(q, s, Estimate(2.21, 2.18, 2.25), 50.0)
    assert "holder pays" in agreement(q, s, Estimate(2.04, 2.01, 2.07), 50.0)
    assert "holder pays" in agreement(q, s, Estimate(2.12, 2.09, 2.14), 50.0)  # 2.09 * 0.96 = 2.01 <= 2.08
    assert "holder pays" not in agreement(q, s, Estimate(2.12, 2.09, 2.14), 500.0)  # bias 0.4 %: apart from both
    assert "disagree" in agreement(q, s, Estimate(2.6, 2.5, 2.7), 50.0)
    assert "disagree" in agreement(q, s, Estimate(1.5, 1.45, 1.55), 50.0)
    assert "too short to tell" in agreement(q, Estimate(0.01, 0.0, 0.02), Estimate(2.2, 2.17, 2.23), 50.0)
    assert "paid on top" in agreement(q, s, Estimate(2.3, 2.2, math.nan), 50.0)  # no upper bound: open
    assert "nothing to compare" in agreement(q, s, Estimate(math.nan, note="no contended samples"), 50.0)


# -- the multi-context mode (kts probe --multi) ----------------------------------------------------------------
def test_multi_probe_scenarios_put_the_tick_next_to_one_two_three_short_and_long_neighbours() -> None:
    from kts_helpers.run.probe import HOG_LONG, HOG_SHORT, MULTI, multi_name

    spec = resolve(ExperimentParams.from_mapping({"profile": "probe", "probe_mode": "multi", "gemm_size": 10752}),
                   "cuda")
    by = {s.name: s for s in spec.scenarios}
    assert {f"baseline-{TICK}", f"baseline-{HOG_SHORT}", f"baseline-{HOG_LONG}"} <= set(by)
    assert MULTI["contexts"] == (1, 2, 3)
    for length, size in (("short", 2944), ("long", 10752)):  # 10752 takes ~50 ms on the H200: 1 ms is 2944
        for k in (1, 2, 3):
            s = by[multi_name(length, k)]
            tick, *hogs = s.tenants
            assert s.kind == "shared" and tick.name == TICK and tick.arrival == "poisson"
            assert len(hogs) == k and len({h.name for h in hogs}) == k
            assert all(h.workload == "gemm" and h.sleep_ms == 0 and h.matrix_size == size for h in hogs)
    assert spec.resolved["duration_s"] == MULTI["duration_s"]
    with pytest.raises(SpecError, match="probe_mode"):
        resolve(ExperimentParams.from_mapping({"profile": "probe", "probe_mode": "many"}), "cuda")


def test_multi_reading_recovers_a_round_robin_gpu(tmp_path: Path) -> None:
    """On a simulated round-robin GPU (quantum 2, switch 0.1) the tick waits at most k slices next to k long
    neighbours and at most k short kernels next to k short ones: the reading shows it, per configuration."""
    from kts_helpers.analyse.probe import is_multi_probe, read_multi
    from kts_helpers.teaching.synthetic import write_sim_multi_probe

    run = write_sim_multi_probe(tmp_path / "m", 2.0, 0.1, short_kernel_ms=1.0)
    assert is_multi_probe(load_run(run)) and not is_probe(load_run(run))
    r = read_multi(run)
    assert [(c.length, c.k) for c in r.configs] == [(s, k) for s in ("short", "long") for k in (1, 2, 3)]
    for c in r.configs:
        per = (2.0 if c.length == "long" else 1.0) + 0.1
        assert c.n_ticks > 350 and c.contended_share > 0.95
        assert abs(c.max_ms - c.k * per) < 0.15, (c.length, c.k, c.max_ms)
        assert c.quantiles_ms[0.99] <= c.max_ms and len(c.waits_ms) == c.n_ticks
    assert abs(r.config("long", 1).neighbour_kernel_ms - 50.0) < 1e-6
    res = subprocess.run([sys.executable, "-m", "kts_helpers", "probe", "--run", str(run), "--json"],
                         capture_output=True, text=True, cwd=REPO)
    assert res.returncode == 0, res.stderr
    import json

    out = json.loads(res.stdout)
    assert [c["k"] for c in out["configs"]] == [1, 2, 3, 1, 2, 3] and "p99" in out["configs"][0]["quantiles_ms"]


def test_multi_probe_runs_through_the_real_run_path_on_a_cpu(tmp_path: Path) -> None:
    """The multi-context scenarios, laid out for a GPU, run by the local backend's workers on a CPU with tiny
    sizes: every scenario completes, the tick co-ran with all k neighbours, and the reading has six rows."""
    from dataclasses import replace

    from kts_helpers.analyse.probe import read_multi
    from kts_helpers.run.backends.local import LocalBackend
    from kts_helpers.run.runs import create_run

    spec = resolve(ExperimentParams.from_mapping({"profile": "probe", "probe_mode": "multi", "gemm_size": 64,
                                                  "duration_s": 0.6, "rate_hz": 100.0, "warmup": 1}), "cuda")
    d = replace(spec, device="cpu").to_dict()
    run = create_run(d, {"note": "test"}, root=tmp_path, run_id="multi")
    backend = LocalBackend(device="cpu", telemetry=False)
    for s in spec.scenarios:
        assert backend.run_scenario(run, s, timeout_s=60, progress=False).status == "complete"
    r = read_multi(run.path)
    assert [(c.length, c.k) for c in r.configs] == [(s, k) for s in ("short", "long") for k in (1, 2, 3)]
    assert all(c.n_ticks > 20 for c in r.configs)


def test_the_report_shows_the_multi_context_table(tmp_path: Path) -> None:
    from kts_helpers.teaching.synthetic import write_sim_multi_probe

    run = write_sim_multi_probe(tmp_path / "m", 2.0, 0.1)
    secs = [s for s in sections.build(load_run(run), n_resamples=100) if s.markdown.startswith("### Several contexts")]
    assert len(secs) == 1 and len(secs[0].items[0]) == 6 and "wait p99 ms" in secs[0].items[0].columns
