"""The kernel-by-kernel time-slicing model of ``bench/kernel_queue.py`` on cases checkable by hand."""

import numpy as np

from bench.kernel_queue import simulate
from kts_helpers.plan.timeslice import Op


def _tenant(name, kernel_ms, kernels=1, share=1.0, gap_ms=0.0):
    return (name, lambda: Op(kernel_ms, 0.0, gap_ms, "op", share), kernels, share)


def test_a_lone_tenant_never_waits_and_runs_its_kernels_back_to_back():
    d = simulate([_tenant("a", 1.0, kernels=20)], quantum=2.0, switch=0.2, duration=200.0, seed=0)
    assert len(d) > 50
    assert np.allclose(d["first"], d["arrival"])  # its first kernel runs at its launch
    assert (d["end"] - d["arrival"] > 0.3).all()


def test_two_saturating_tenants_wait_at_most_a_slice_and_a_switch():
    # each op one 10 ms kernel, 0.1 ms of host between ops: the holder's op ends, the other gets the GPU, and the
    # next op waits the rest of that slice: at most the quantum less the host gap, plus the switch back
    d = simulate([_tenant(x, 10.0, gap_ms=0.1) for x in "ab"], quantum=2.0, switch=0.2, duration=3000.0, seed=1)
    wait = (d["first"] - d["arrival"])[d["arrival"] > 50]
    assert len(wait) > 100 and wait.max() <= 2.1 + 1e-9 and wait.median() > 1.5


def test_with_three_saturating_tenants_round_robin_waits_for_both_others_and_newest_first_for_one():
    ts = [_tenant(x, 10.0, gap_ms=0.1) for x in "abc"]
    rr = simulate(ts, quantum=2.0, switch=0.2, duration=3000.0, seed=2, pick="rr")
    newest = simulate(ts, quantum=2.0, switch=0.2, duration=3000.0, seed=2, pick="newest")
    w_rr = (rr["first"] - rr["arrival"])[rr["arrival"] > 50]
    w_new = (newest["first"] - newest["arrival"])[newest["arrival"] > 50]
    assert abs(w_rr.median() - 4.1) < 1e-9 and w_rr.max() <= 4.1 + 1e-9  # both others' slices, two switches
    assert w_new.max() <= 2.1 + 1e-9  # the newest waiter goes next: one slice at most
