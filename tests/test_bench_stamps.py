"""The GPU-clock stamps' reader (``bench/stamps_read.py``) on hand-made stamps (the stamp kernel itself runs on a GPU
only: ``bench/bench_stamps.py``), and the first-wait comparison's split by the neighbours' state
(``bench/first_waits.py``)."""

import json

import pandas as pd

from bench.stamps_read import handovers, interruptions, per_op, report


def _stamps(rows):
    return pd.DataFrame(rows, columns=["tenant", "phase", "op", "step", "k", "tag", "host_us", "gpu_us"])


def test_an_ops_wait_span_and_the_turns_inside_it_come_from_its_stamps():
    # a: launched at 0, its first stamp ran at 500 us (waited 0.5 ms), blocks at 600 and 2600, end at 3000: b's two
    # stamps at 1000 and 2000 ran inside it (one turn of b), and b's stamp at 300 ran before a's first one.
    st = _stamps([
        ("a", "s", 0, "op", 0, "start", 0.0, 500.0), ("a", "s", 0, "op", 1, "block", 10.0, 600.0),
        ("a", "s", 0, "op", 2, "block", 20.0, 2600.0), ("a", "s", 0, "op", 3, "end", 30.0, 3000.0),
        ("b", "s", 0, "op", 0, "start", 200.0, 300.0), ("b", "s", 0, "op", 1, "block", 210.0, 1000.0),
        ("b", "s", 0, "op", 2, "end", 220.0, 2000.0),
    ])
    o = per_op(st).set_index("tenant")
    assert o.loc["a", "wait_ms"] == 0.5 and o.loc["a", "span_ms"] == 2.5 and o.loc["a", "issue_ms"] == 0.03
    assert o.loc["b", "wait_ms"] == 0.1 and o.loc["b", "span_ms"] == 1.7
    inter = interruptions(st, per_op(st)).set_index("tenant")
    assert inter.loc["a", "others_inside"] == 1 and inter.loc["a", "before"] == "b"
    # b's span (300-2000) holds a's stamps at 500 and 600: one run of a inside it
    assert inter.loc["b", "others_inside"] == 1 and inter.loc["b", "before"] == ""
    h = handovers(st, "s")
    assert h["b -> a"] == 2 and h["a -> b"] == 1  # b a a b b a a in GPU order


def test_an_alone_phase_counts_no_turns_and_the_report_names_every_phase(tmp_path):
    st = _stamps([("a", "alone", k, "op", 2 * k + j, tag, 1000.0 * k + 5 * j, 1000.0 * k + 40 + 400 * j)
                  for k in range(3) for j, tag in enumerate(("start", "end"))])
    assert interruptions(st, per_op(st)).empty  # one tenant: nothing to count
    for n, d in st.groupby("tenant"):
        d.drop(columns="tenant").to_csv(tmp_path / f"{n}.stamps.csv", index=False)
        pd.DataFrame({"phase": "alone", "op": range(3), "step": "op", "start_us": [0.0, 1e3, 2e3],
                      "end_us": [450.0, 1450.0, 2450.0], "event_ms": 0.4}).to_csv(tmp_path / f"{n}.ops.csv",
                                                                                index=False)
    (tmp_path / "meta.json").write_text(json.dumps({"tenants": ["a"], "gpu": "hand-made", "clocks": {}}))
    text = report(tmp_path)
    assert "alone" in text and "0.04" in text and "0.45" in text  # the wait 40 us, the wall 450 us


def test_an_op_counts_as_arriving_among_busy_neighbours_only_when_every_one_is_mid_operation():
    from bench.first_waits import all_neighbours_mid

    ops = {"a": pd.DataFrame({"start": [10, 20, 30], "end": [12, 22, 32]}),
           # b: in flight 5-15 and 25-40; c: 0-50, then nothing
           "b": pd.DataFrame({"start": [25, 5], "end": [40, 15]}),  # out of order on purpose
           "c": pd.DataFrame({"start": [0], "end": [50]})}
    # a's op at 20: b is between its ops (ended 15, next at 25); at 10 and 30 both are mid-operation
    assert list(all_neighbours_mid(ops, "a")) == [True, False, True]
    # c's op over by 29: a's op at 30 finds it idle
    ops["c"] = pd.DataFrame({"start": [0], "end": [29]})
    assert list(all_neighbours_mid(ops, "a")) == [True, False, False]


def test_an_alone_stretch_is_gpu_bound_where_its_gpu_time_outlasts_its_launches():
    from bench.stamps_read import blocks_alone

    # two alone ops of a: start -> block (launched 0.1 ms apart, ran 0.5 ms apart: GPU-bound), block -> end
    # (launched 0.3 ms apart, ran 0.05 ms apart: launch-bound); a shared phase's stamps are left out
    rows = []
    for k in range(2):
        t = 10_000.0 * k
        rows += [("a", "alone", k, "op", 3 * k, "start", t, t + 10), ("a", "alone", k, "op", 3 * k + 1, "block",
                 t + 100, t + 510), ("a", "alone", k, "op", 3 * k + 2, "end", t + 400, t + 560)]
    for k in range(2):  # two shared ops, which would move both medians
        t = 50_000.0 + 1_000 * k
        rows += [("a", "shared", k, "op", 9 + 2 * k, "start", t, t + 900), ("a", "shared", k, "op", 10 + 2 * k, "end",
                                                                            t + 10, t + 910)]
    b = blocks_alone(_stamps(rows)).set_index("pos")
    assert list(b.index) == [0, 1]
    assert b.loc[0, "host_ms"] == 0.1 and b.loc[0, "gpu_ms"] == 0.5 and bool(b.loc[0, "gpu_bound"])
    assert b.loc[1, "host_ms"] == 0.3 and abs(b.loc[1, "gpu_ms"] - 0.05) < 1e-12 and not bool(b.loc[1, "gpu_bound"])


def test_a_turn_reads_queued_only_where_its_next_stamp_was_launched_before_its_last_one_ran():
    from bench.stamps_read import turns

    # GPU order: a a b b a. a's second stamp ran at 200 and its next (k=2) was launched at 150: queued when cut.
    # b's last stamp ran at 400, its next launched at 900 (after): dry. a's last turn has no next stamp: not queued.
    st = _stamps([("a", "s", 0, "op", 0, "start", 0.0, 100.0), ("a", "s", 0, "op", 1, "block", 50.0, 200.0),
                  ("a", "s", 0, "op", 2, "end", 150.0, 500.0),
                  ("b", "s", 0, "op", 0, "start", 60.0, 300.0), ("b", "s", 0, "op", 1, "block", 70.0, 400.0),
                  ("b", "s", 1, "op", 2, "start", 900.0, 1000.0)])
    t = turns(st, "s")
    assert list(t["tenant"]) == ["a", "b", "a", "b"] and list(t["stamps"]) == [2, 2, 1, 1]
    assert list(t["queued"]) == [True, False, False, False]
    assert t["span_ms"].iloc[0] == 0.1 and t["lag_ms"].iloc[1] == 0.24  # b's head waited 300 - 60 us
    assert list(t["stretch"]) == ["0-1", "0-1", "2-2", "0-0"]  # b's second op restarts its count


def test_a_wait_window_holds_a_neighbours_op_end_only_where_one_ends_inside_it():
    import numpy as np

    from bench.first_waits import neighbour_ended_in_wait

    ms = 1_000_000
    ops = {"a": pd.DataFrame({"start": [10 * ms, 20 * ms, 30 * ms], "end": [12 * ms, 25 * ms, 33 * ms]}),
           "b": pd.DataFrame({"start": [0, 15 * ms], "end": [11 * ms, 31 * ms]})}
    # a waits 0.5 ms at 10 (b ends at 11: outside), 2 ms at 20 (nothing ends in 20-22), 1.5 ms at 30 (b ends at 31)
    hit = neighbour_ended_in_wait(ops, "a", np.array([0.5, 2.0, 1.5]))
    assert list(hit) == [False, False, True]
    assert list(neighbour_ended_in_wait(ops, "a", np.array([1.0, 2.0, 0.5]))) == [True, False, False]  # 11 in 10-11
    ops["b"] = ops["b"].iloc[::-1]  # a log's rows out of order: the same answer
    assert list(neighbour_ended_in_wait(ops, "a", np.array([0.5, 2.0, 1.5]))) == [False, False, True]


def test_each_timed_step_of_an_op_reads_as_its_own_row():
    # one op of a decoder: a prefill, then two decode steps (start/end stamps each); the decode steps must not merge
    rows, k = [], 0
    for step, t0 in (("prefill", 0.0), ("decode", 1000.0), ("decode", 2000.0)):
        for tag, dt in (("start", 0.0), ("end", 500.0)):
            rows.append(("a", "alone", 0, step, k, tag, t0 + dt, t0 + dt + 20.0))
            k += 1
    o = per_op(_stamps(rows))
    assert len(o) == 3 and list(o["sub"]) == [0, 1, 2]
    assert list(o["span_ms"]) == [0.5, 0.5, 0.5]  # merged, the two decode steps would span 1.5 ms
