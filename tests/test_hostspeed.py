"""Host speed between moments (analyse.hostspeed): the probe on each iteration, and the host-adjusted contrast."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from kts_helpers.analyse import hostspeed
from kts_helpers.analyse.load import load_run
from kts_helpers.present import sections
from kts_helpers.run.params import ExperimentParams
from kts_helpers.run.runs import create_run
from kts_helpers.run.spec import resolve

T0 = 1_700_000_000_000_000_000


def test_probe_column_puts_each_value_on_its_timed_iteration_and_none_on_padding():
    frame = pd.DataFrame({"iteration": [0, 1, 0, 0, 1, 1, 2, 2, 3],
                          "phase": ["pad", "pad", "prefill", "decode", "prefill", "decode", "prefill", "decode",
                                    "prefill"]})
    col = hostspeed.probe_column(frame, [{"n": 4, "host_probe_ms": [0.3, 0.5, 0.4]}])
    # both phases of an iteration share its probe; padding has none; iteration 3 is past the list
    assert col.tolist()[2:8] == [0.3, 0.3, 0.5, 0.5, 0.4, 0.4]
    assert col.iloc[:2].isna().all() and np.isnan(col.iloc[8])
    assert hostspeed.probe_column(frame, [{"n": 4}]).isna().all()  # a worker that did not probe
    assert hostspeed.probe_column(frame, []).isna().all()


def _block(rng, n, fast_share, factor, kind, scenario, tenant="llm", phase="decode"):
    """A launch-bound tenant: the host is fast (probe 0.3 ms) or slow (0.5 ms) in stretches, and the wall clock
    follows it (40 ms per probe-ms), times ``factor`` (what sharing costs), with 5 % noise."""
    fast = rng.random(n) < fast_share
    probe = np.where(fast, 0.3, 0.5) * rng.lognormal(0, 0.04, n)
    wall = 40.0 * probe * factor * rng.lognormal(0, 0.05, n)
    return pd.DataFrame({"tenant": tenant, "phase": phase, "kind": kind, "scenario": scenario,
                         "wall_ms": wall, hostspeed.COLUMN: probe})


def _run(alone_fast, shared_fast, factor, seed=1):
    rng = np.random.default_rng(seed)
    return pd.concat([_block(rng, 400, alone_fast, 1.0, "baseline", "baseline-llm-r1"),
                      _block(rng, 400, alone_fast, 1.0, "baseline", "baseline-llm-r2"),
                      _block(rng, 800, shared_fast, factor, "shared", "shared-r1")], ignore_index=True)


def test_a_host_that_was_faster_in_the_shared_block_is_not_read_as_sharing():
    """The shared block met the fast host 70 % of the time, the alone blocks 20 %; sharing cost nothing. The raw
    medians say 'faster when shared'; at equal host speed the ratio is 1 and the sentence says whose it is."""
    row = hostspeed.host_speed_table(_run(0.2, 0.7, 1.0), on_gpu=True).iloc[0]
    assert row["ratio_raw"] < 0.75
    assert row["ratio_host_adjusted"] == pytest.approx(1.0, abs=0.04)
    assert row["probe_change"] < -0.2 and row["rho_alone"] > 0.7 and row["slope"] == pytest.approx(1.0, abs=0.1)
    assert "faster (probe median)" in row["message"] and "part of the raw contrast is the host's" in row["message"]


@pytest.mark.parametrize("alone_fast, shared_fast", [(0.3, 0.3), (0.5, 0.5), (0.2, 0.7)])
def test_a_real_sharing_cost_survives_matching(alone_fast, shared_fast):
    """Sharing costs 1.3x at every host speed: matching keeps it whatever the host did between the moments."""
    row = hostspeed.host_speed_table(_run(alone_fast, shared_fast, 1.3, seed=2), on_gpu=True).iloc[0]
    assert row["ratio_host_adjusted"] == pytest.approx(1.3, rel=0.05)
    if alone_fast == shared_fast == 0.3:  # (at 0.5 the raw medians fall between the host's two states, either side)
        assert row["ratio_raw"] == pytest.approx(1.3, rel=0.06) and "about its alone speed" in row["message"]
        assert "host's, not sharing's" not in row["message"]


def test_no_table_on_a_cpu_run_or_without_a_probe():
    frame = _run(0.2, 0.7, 1.0)
    assert hostspeed.host_speed_table(frame, on_gpu=False).empty  # the host is the contended device there
    assert hostspeed.host_speed_table(frame.drop(columns=[hostspeed.COLUMN]), on_gpu=True).empty
    thin = pd.concat([frame[frame["kind"] == "baseline"].head(10), frame[frame["kind"] == "shared"]])
    assert hostspeed.host_speed_table(thin, on_gpu=True).empty  # too few alone iterations to compare


def _log(tenant, n, probes, rng):
    lines = ["KTS_META,v2," + json.dumps({"workload": tenant, "tenant": tenant, "pid": 1, "notes": {}})]
    t = T0
    for i in range(n):
        wall = 40.0 * probes[i] * float(rng.lognormal(0, 0.05))
        lines.append(f"KTS_APP,v2,{tenant},{tenant},{i},op,{t},{t},{t + int(wall * 1e6)},{wall!r},{wall!r}")
        t += int(wall * 1e6) + 2_000_000
    lines.append("KTS_END,v2," + json.dumps({"tenant": tenant, "n": n, "host_probe_ms": list(probes)}))
    return "\n".join(lines) + "\n"


def test_a_run_loads_the_probe_onto_its_iterations(tmp_path):
    """The loader reads KTS_END's list onto each timed iteration (after the warm-up is dropped, the rest keep
    theirs); a CPU run shows no host-speed section, the table still reads the iterations when asked."""
    spec = resolve(ExperimentParams.from_mapping({"profile": "tiny", "workloads": "fft,gemm"}), "cpu")
    run = create_run(spec.to_dict(), {}, root=tmp_path, run_id="probed")
    rng = np.random.default_rng(3)
    probes = {"baseline-fft": [0.5] * 30 + [0.3] * 10, "shared": [0.3] * 30 + [0.5] * 10}
    for scen in ("baseline-fft", "baseline-gemm", "shared"):
        d = run.claim_scenario(scen)
        for t in (["fft", "gemm"] if scen == "shared" else [scen.split("-")[1]]):
            p = probes.get(scen, [0.4] * 40) if t == "fft" else [0.4] * 40
            (d / f"{t}.log").write_text(_log(t, 40, [float(x) for x in p], rng))
        run.record_scenario(scen, {"status": "complete"})
    data = load_run(run.path)
    it = data.iterations
    assert it[hostspeed.COLUMN].notna().all()
    for scen, p in probes.items():
        rows = it[(it["scenario"] == scen) & (it["tenant"] == "fft")]
        assert len(rows) > 30
        assert rows[hostspeed.COLUMN].tolist() == [p[i] for i in rows["iteration"]]
    assert not data.on_gpu and sections.host_speed_section(data) is None
    assert not hostspeed.host_speed_table(it, on_gpu=True).empty


def test_issue_column_pairs_each_timed_line_with_its_issue_time_and_refuses_a_shifted_list():
    frame = pd.DataFrame({"iteration": [0, 0, 0, 1, 1, 1],
                          "phase": ["pad", "prefill", "decode", "prefill", "decode", "pad"]})
    col = hostspeed.issue_column(frame, [{"n": 2, "host_issue_ms": [4.0, 3.0, 5.0, 2.5]}])
    # one value per timed line in the log's order (each phase its own); padding has none
    assert col.tolist()[1:5] == [4.0, 3.0, 5.0, 2.5] and col.iloc[[0, 5]].isna().all()
    # a list that does not pair one to one (a rejected line) puts no value anywhere, rather than shifted ones
    assert hostspeed.issue_column(frame, [{"host_issue_ms": [4.0, 3.0, 5.0]}]).isna().all()
    assert hostspeed.issue_column(frame, [{"n": 2}]).isna().all()  # a CPU worker lists none


def test_the_loop_lists_the_hosts_issue_time_of_each_timed_line(worker_module, monkeypatch):
    """On a GPU the clock keeps how long the host took to issue each operation (before the wait for the device);
    the loop lists it once per timed line, every phase, in order, padding left out. On a CPU nothing is listed."""
    import io
    import time as _time

    import kts_api

    class IssuingClock:  # a GPU clock's contract without a GPU: the issue time a fixed part of each op's wall
        issue_ms = None

        def __init__(self):
            self.k = 0

        def time(self, fn, due=None):
            fn()
            self.k += 1
            now = _time.time_ns()
            self.issue_ms = 0.5 * self.k
            return now, now + 1_000_000, 1.0, 1.0 + self.k

    def run(clock):
        args = worker_module.parse_args(["--workload", "fft", "--tenant", "a", "--iterations", "3",
                                         "--sleep-ms", "1", "--lead-in-s", "0.02", "--device", "cpu"])
        out = io.StringIO()
        workload = kts_api.Workload("llm", lambda: [("prefill", lambda: None), ("decode", lambda: None)])
        assert worker_module.run_loop(args, workload, clock, out=out) == 0
        lines = out.getvalue().splitlines()
        app = [ln.split(",") for ln in lines if ln.startswith("KTS_APP,")]
        end = json.loads(next(ln for ln in lines if ln.startswith("KTS_END,")).split(",", 2)[2])
        return app, end

    clock = IssuingClock()
    app, end = run(clock)
    timed = [i for i, f in enumerate(app) if f[5] != "pad"]
    assert len(timed) == 6 and len(app) > 6 and app[0][5] == "pad"  # 3 iterations x 2 phases, after a lead-in
    # the k-th op the clock timed had issue 0.5 k and wall 1 + k: each listed value belongs to its own line
    walls = [float(app[i][-1]) for i in timed]
    assert end["host_issue_ms"] == [round(0.5 * (w - 1.0), 4) for w in walls]
    _, cpu_end = run(worker_module.Clock(None, pd.Series({"type": "cpu"})))
    assert "host_issue_ms" not in cpu_end


def test_the_gpu_clock_takes_the_issue_time_before_the_wait_for_the_device(worker_module):
    """The issue time ends when the operation's code returned, not after the synchronize: with a stand-in torch whose
    synchronize waits 60 ms (the device still busy) behind an operation that issues for 10 ms, the issue time is
    about 10 ms and the wall about 70."""
    import time as _time
    from types import SimpleNamespace

    class Event:
        def __init__(self, enable_timing=False):
            self.t = 0.0

        def record(self):
            self.t = _time.perf_counter()

        def elapsed_time(self, other):
            return (other.t - self.t) * 1e3

    fake_torch = SimpleNamespace(cuda=SimpleNamespace(Event=Event, synchronize=lambda: _time.sleep(0.06)))
    clock = worker_module.Clock(fake_torch, SimpleNamespace(type="cuda"))
    _start, _end, _device, wall = clock.time(lambda: _time.sleep(0.01))
    assert 9.0 <= clock.issue_ms < 40.0 and wall >= 65.0, (clock.issue_ms, wall)
