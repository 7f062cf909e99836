"""The shared-timeline reader (``bench/bench_shared_timeline.py``): turns and how each ended, on a hand-made timeline."""

import numpy as np

from bench.bench_shared_timeline import summary, turns


def test_a_turn_cut_with_work_queued_is_told_from_a_yield_with_the_queue_dry():
    # a: 25 kernels of 0.1 ms all launched at 0: it holds 0-2 ms, is cut (b waits since 0.5 ms) with work left, and
    # ends with its last 5 kernels after b. b: two kernels, then nothing until after a's end: its turn ends dry.
    a = np.array([[0.0, 100 * k, 100 * k + 100] for k in range(20)] + [[0.0, 2200 + 100 * k, 2300 + 100 * k]
                                                                         for k in range(5)])
    b = np.array([[500.0, 2000, 2100], [2050, 2100, 2150], [3000, 3000, 3050]])
    t = turns({"a": a, "b": b})
    assert list(t["tenant"]) == ["a", "b", "a"]  # b's kernel at 3 ms is after a's last: outside the window
    first = t.iloc[0]
    assert bool(first["queued"]) and first["others_waiting"] == 1 and abs(first["length_ms"] - 1.5) < 1e-9
    second = t.iloc[1]
    assert not bool(second["queued"]) and second["others_waiting"] == 1 and abs(second["gap_ms"] - 0.05) < 1e-9
    s = summary(t).set_index("tenant")
    assert s.loc["a", "cut_with_work"] == 1 and s.loc["a", "yielded_dry"] == 0
    assert s.loc["b", "cut_with_work"] == 0 and s.loc["b", "yielded_dry"] == 1


def test_a_dry_moment_is_counted_and_so_is_a_holder_that_kept_the_gpu_through_it():
    from bench.bench_shared_timeline import dry_holds, hand_overs
    # a runs dry at 1.0 ms (its next launch at 1.2 ms) while b waits (launched at 0.5 ms): b runs next, as the model;
    # dry again at 1.4 ms with nobody waiting: not a moment that counts
    a = np.array([[0.0, 600, 1000], [1200, 1300, 1400], [2000, 2000, 2100]])
    b = np.array([[500.0, 1000, 1300]])
    held = dry_holds({"a": a, "b": b}).set_index("tenant")
    assert held.loc["a", "dry_while_others_waited"] == 1 and held.loc["a", "kept_the_gpu"] == 0
    # a GPU that let a keep it through the same gap: b starts only after a's next kernel (and then waits at 1.4 ms)
    b_late = np.array([[500.0, 1400, 1500]])
    held = dry_holds({"a": a, "b": b_late}).set_index("tenant")
    assert held.loc["a", "dry_while_others_waited"] == 2 and held.loc["a", "kept_the_gpu"] == 1
    order = hand_overs(turns({"a": a, "b": b}))
    assert order.loc[("a", "b")] == 1


def test_a_kernel_counts_as_queued_when_its_launch_call_returned(tmp_path):
    import json

    import pandas as pd

    from bench.bench_shared_timeline import LAUNCH_SLACK_US, read_kernels
    (tmp_path / "meta.json").write_text(json.dumps({"tenants": ["a", "b"]}))
    pd.DataFrame({"launch_us": [0.0], "start_us": [50.0], "end_us": [60.0], "name": ["k"],
                  "launch_end_us": [12.0]}).to_csv(tmp_path / "a.kernels.csv.gz", index=False)
    pd.DataFrame({"launch_us": [0.0], "start_us": [50.0], "end_us": [60.0],  # a timeline without the calls' ends
                  "name": ["k"]}).to_csv(tmp_path / "b.kernels.csv.gz", index=False)
    k = read_kernels(tmp_path)
    assert list(k["a"][0]) == [0.0, 50.0, 60.0, 12.0]
    assert list(k["b"][0]) == [0.0, 50.0, 60.0, LAUNCH_SLACK_US]


def test_a_kernel_launched_through_the_driver_api_gets_its_launch_time():
    """cuBLAS launches through the driver (cuLaunchKernelEx): the first timeline read the runtime's calls only and
    left those kernels without a launch time."""
    from bench.bench_shared_timeline import read_trace
    trace = {"baseTimeNanoseconds": 1_000_000, "traceEvents": [
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": 10, "dur": 4, "args": {"correlation": 1}},
        {"ph": "X", "cat": "cuda_driver", "name": "cuLaunchKernelEx", "ts": 20, "dur": 6, "args": {"correlation": 2}},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaMemsetAsync", "ts": 30, "dur": 2, "args": {"correlation": 3}},
        {"ph": "X", "cat": "kernel", "name": "elementwise", "ts": 15, "dur": 3, "args": {"correlation": 1}},
        {"ph": "X", "cat": "kernel", "name": "gemm", "ts": 27, "dur": 9, "args": {"correlation": 2}},
        {"ph": "X", "cat": "user_annotation", "name": "kts_op", "ts": 5, "dur": 40}]}
    kernels, launches, marks = read_trace(trace)
    assert [(c, s, e) for c, s, e, _ in kernels] == [(1, 1015.0, 1018.0), (2, 1027.0, 1036.0)]
    assert launches == {1: (1010.0, 1014.0), 2: (1020.0, 1026.0)}  # not the memset
    assert marks == [(1005.0, 1045.0)]


def test_a_turn_after_a_dry_hand_over_is_told_from_one_after_a_cut():
    from bench.bench_shared_timeline import slice_after
    # a holds 0-2 ms and is cut with work queued (b waits from 0.5 ms); b runs 2-2.5 ms and runs dry (a waits);
    # a runs 2.5-4.5 ms, cut again with work queued (b launched at 3 ms), then b (a's kernel at 5 ms ends after b's
    # last: outside the window)
    a = np.array([[0.0, 100 * k, 100 * k + 100] for k in range(20)] + [[0.0, 2500 + 100 * k, 2600 + 100 * k]
                                                                         for k in range(20)] + [[0.0, 5000, 5100]])
    b = np.array([[500.0, 2000, 2500], [3000, 4500, 4600]])
    t = turns({"a": a, "b": b})
    assert list(t["tenant"]) == ["a", "b", "a", "b"]
    s = slice_after(t).set_index("before")
    assert s.loc["dry", "turns"] == 1 and abs(s.loc["dry", "length_p50_ms"] - 2.0) < 1e-9
    assert "cut with work" not in s.index  # the first turn has no turn before it; b's second ran dry
