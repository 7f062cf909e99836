"""Each tenant's wait before its first kernel under time-slicing, measured against the model's, run by run (CPU only).

Why: in the H100's three-tenant runs the model's BERT is too fast (issue 52's mix) while its waits look too long. A
run's logs hold, per operation, its start and end on the host's clock and its CUDA events: wall - device is the wait
before its first kernel ran (plus the ~0.04 ms a synchronize takes to return, its alone median). This sets that
wait, the events and the wall against one simulated run of each time-slicing shared block (the planner's engine, the
block's own scenario, a seed per block), pooled over the run's blocks like the measured ones, and splits each side by
whether every neighbour was mid-operation when the operation arrived (a neighbour between two operations has nothing
queued).

    python -m bench.first_waits h100-2026-12-07-issue-rm-auto-f56a761c h100-2026-12-07-sealed-timeslice-llama-resnet
"""

from __future__ import annotations

import sys

import numpy as np
import pandas as pd

from kts_helpers.analyse.logparse import parse_file
from kts_helpers.analyse.rules import in_flight
from kts_helpers.plan.engine import simulate_once
from kts_helpers.plan.inputs import load_plan_input, scenarios_of
from kts_helpers.plan.validation import run_dir_of

SEEDS = (0, 1)  # simulated runs of each block
# a wait this short is about two context switches (the H100 probe's switch: 0.18-0.22 ms) and a launch: the holder
# handed the GPU over at once, no neighbour's turn in between
SHORT_MS = 0.75


def all_neighbours_mid(ops: dict[str, pd.DataFrame], me: str) -> np.ndarray:
    """Per operation of ``me`` (frames with ``start`` and ``end`` in ns, one per tenant, one clock): whether every
    other tenant had an operation in flight at its start (the kit's one rule for that, ``rules.in_flight``)."""
    starts = ops[me]["start"].to_numpy(np.int64)
    mid = np.ones(len(starts), bool)
    for name, o in ops.items():
        if name != me:
            mid &= in_flight(starts, o["start"].to_numpy(np.int64), o["end"].to_numpy(np.int64))
    return mid


def neighbour_ended_in_wait(ops: dict[str, pd.DataFrame], me: str, wait_ms: np.ndarray) -> np.ndarray:
    """Per operation of ``me``: whether some other tenant's operation ended between its arrival and its first
    kernel (its wait window, ``start`` .. ``start`` + ``wait_ms``; ns clocks as :func:`all_neighbours_mid`).

    Why: in the H100's three-tenant runs many waits are as short as two switches; this says whether a short wait
    came with a neighbour's op ending (the GPU handed on at an op's end: two thirds of BERT's in issue 52's last run)
    or while every neighbour stayed mid-operation (most of ResNet-50's), which the model's full queues never allow."""
    starts = ops[me]["start"].to_numpy(np.int64)
    stops = starts + (np.asarray(wait_ms, float) * 1e6).astype(np.int64)
    hit = np.zeros(len(starts), bool)
    for name, o in ops.items():
        if name != me:
            ends = np.sort(o["end"].to_numpy(np.int64))
            hit |= np.searchsorted(ends, stops, side="right") > np.searchsorted(ends, starts, side="left")
    return hit


def block_frames(run_dir, block: str, tenants: list[str]) -> dict[str, pd.DataFrame]:
    """Per tenant of one block: each op's host start and end (ns, one clock) and its wall and events (ms), its log's."""
    out = {}
    for t in tenants:
        f = parse_file(run_dir / "logs" / block / f"{t}.log").frame
        out[t] = pd.DataFrame({"start": f["start_ns"], "end": f["end_ns"], "wall": f["wall_ms"],
                               "device": f["device_ms"]})
    return out


def _sim_frames(sim: pd.DataFrame) -> dict[str, pd.DataFrame]:
    return {t: pd.DataFrame({"start": (g["arrival_ms"] * 1e6).round(), "end": (g["end_ms"] * 1e6).round(),
                             "wall": g["wall_ms"], "device": g["device_ms"]}) for t, g in sim.groupby("tenant", sort=False)}


def _rows(frames: dict[str, pd.DataFrame], source: str) -> list[pd.DataFrame]:
    return [f.assign(tenant=t, source=source, all_mid=all_neighbours_mid(frames, t),
                     end_in_wait=neighbour_ended_in_wait(frames, t, (f["wall"] - f["device"]).to_numpy()))
            for t, f in frames.items()]


def compare(name: str) -> pd.DataFrame:
    """Per tenant of one run: medians measured and simulated (wait = wall - device, events, wall), the share of its
    operations that arrived with every neighbour mid-operation, and the wait of those."""
    run_dir = run_dir_of(name)
    if run_dir is None:
        raise SystemExit(f"first_waits: no committed run {name!r}")
    inp = load_plan_input(run_dir)
    parts = []
    for b, sc in enumerate(s for s in scenarios_of(inp) if s.sharing == "timeslice"):
        names = [t.name for t in sc.tenants]
        parts += _rows(block_frames(run_dir, sc.name, names), "measured")
        for seed in SEEDS:
            parts += _rows(_sim_frames(simulate_once(sc, inp.gpu, 1000 * b + seed, vary=True)), "model")
    d = pd.concat(parts, ignore_index=True)
    d["wait"] = d["wall"] - d["device"]
    g = d.groupby(["tenant", "source"], sort=False)
    out = g[["wait", "device", "wall"]].median()
    out["all_mid"] = g["all_mid"].mean()
    out["wait_all_mid"] = d[d["all_mid"]].groupby(["tenant", "source"], sort=False)["wait"].median()
    out["wait_p25"] = g["wait"].quantile(0.25)
    out["wait_p75"] = g["wait"].quantile(0.75)
    d["short"] = d["wait"] < SHORT_MS
    out["short"] = d.groupby(["tenant", "source"], sort=False)["short"].mean()
    # of the short waits, the share whose window held a neighbour's op end
    out["short_at_end"] = d[d["short"]].groupby(["tenant", "source"], sort=False)["end_in_wait"].mean()
    out = out.unstack("source")
    out.columns = [f"{c}_{s}" for c, s in out.columns]
    return out.reset_index().assign(run=name)


def main(names: list[str]) -> int:
    cols = ["wait", "wait_p25", "wait_p75", "device", "wall", "all_mid", "wait_all_mid", "short", "short_at_end"]
    for name in names:
        t = compare(name)
        print(name)
        for r in t.itertuples():
            print(f"  {r.tenant:15s} " + "  ".join(
                f"{c} {getattr(r, c + '_measured'):6.2f}/{getattr(r, c + '_model'):6.2f}" for c in cols))
    print("(measured/model medians, ms; all_mid: the share of ops that arrived with every neighbour mid-operation; "
          f"short: the share of waits under {SHORT_MS} ms; short_at_end: of those, the share whose wait held a "
          "neighbour's op end)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
