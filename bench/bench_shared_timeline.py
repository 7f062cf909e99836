"""Who holds the GPU when several tenants time-slice it: every kernel of every tenant on one clock.  (GPU only.)

Why: the planner's time-slicing model says how long a holder keeps the GPU at each turn (a launch-bound chain yields
once its queued kernels have run, a GPU-bound one at its quantum). In the H100's three-tenant runs (issue 52's mix)
the measured waits were shorter and the events longer than the model's, and what decides a turn's end cannot be read
from wall and event clocks. This profiles every tenant at once (one process each, released by one barrier) and
keeps, per kernel, its launch on the host and its run on the GPU, both on the host's clock (CUPTI converts), so that
turns, switches and each turn's end (its queue empty, or kernels still queued) can be read.

CUPTI's callbacks slow each launch (about 1.7-1.9x on the H200, ``bench/bench_profile_residue.py``): launch-bound
tenants are more launch-bound here than in a timed run. Read turn structure from it, not times.

    KTS_TENANTS=llama-decode,bert,resnet SECONDS=1.0 OUT=/tmp/tl python -m bench.bench_shared_timeline
    KTS_SLEEP_S='{"bert": 0.010}' ...                        # BERT sleeps 10 ms after each op
    STAGGER_S=3 ...                                           # the tenants started 3 s apart (contexts in order)
    python -m bench.bench_shared_timeline --read /tmp/tl     # the turns of a timeline made before (no GPU needed)

Writes ``$OUT/<tenant>.kernels.csv.gz`` (launch_us, start_us, end_us, name, launch_end_us: one row per kernel; the
launch call's start and end), ``$OUT/<tenant>.ops.csv``
(start_us, end_us of each op on the host's ``time.time_ns`` clock; trace_start_us, trace_end_us on the
trace's), ``$OUT/<tenant>.context.json`` (when its CUDA context was made) and ``$OUT/meta.json`` (GPU, tenants, torch).
"""

from __future__ import annotations

import csv
import gzip
import json
import multiprocessing as mp
import os
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

WORKERS = Path(__file__).resolve().parents[1] / "workers"
if str(WORKERS) not in sys.path:  # the workers' modules, as a worker imports them
    sys.path.insert(0, str(WORKERS))
from kts_profile import LAUNCH_CATEGORIES, LAUNCHES, TEARDOWN_ENV  # noqa: E402  the profile's own launch calls

# every tenant back to back, as the sealed runs and issue 52's mix ran (sleep_ms 0); KTS_SLEEP_S, a JSON object
# (tenant -> seconds), sleeps some after each op


def read_trace(data: dict) -> tuple[list[tuple], dict, list[tuple[float, float]]]:
    """From a Kineto chrome trace: its kernels (correlation id, start, end, name), each launch call's (start, end) by
    correlation id, and the ``kts_op`` marks (start, end), all in us on the host's clock. Launch calls are the
    profile's own list (``workers/kts_profile.LAUNCHES``: the runtime's and the driver's, as cuBLAS uses)."""
    base = float(data.get("baseTimeNanoseconds", 0)) / 1e3
    launches, kernels, marks = {}, [], []
    for e in data.get("traceEvents", []):
        if e.get("ph") != "X":
            continue
        corr = (e.get("args") or {}).get("correlation")
        start, end = float(e["ts"]) + base, float(e["ts"]) + base + float(e.get("dur", 0))
        if e.get("name") == "kts_op":
            marks.append((start, end))
        elif e.get("cat") in LAUNCH_CATEGORIES and e.get("name") in LAUNCHES:
            launches[corr] = (start, end)
        elif e.get("cat") == "kernel":
            kernels.append((corr, start, end, e.get("name", "")[:60]))
    return kernels, launches, marks


def tenant(name: str, out: Path, barrier, seconds: float, warm_s: float) -> None:
    """One tenant's process: build, warm for ``warm_s``, wait at the barrier, profile ``seconds`` of its closed loop,
    write its kernels and ops (the ops last, by rename: the parent's sign that it is done)."""
    from kts_workload import build_workload  # noqa: PLC0415

    os.environ[TEARDOWN_ENV] = "1"
    import torch

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    torch.zeros(1, device=device)  # the context made now, its moment kept: the hand-over order may follow it
    (out / f"{name}.context.json").write_text(json.dumps({"context_us": time.time_ns() / 1e3}))
    w = build_workload(name, torch, device, {"size": 4096, "seed": 1, "device_type": device.type})
    sleep = float(json.loads(os.environ.get("KTS_SLEEP_S") or "{}").get(name, 0.0))

    def one_op() -> tuple[float, float]:
        t0 = time.time_ns() / 1e3
        with torch.profiler.record_function("kts_op"):
            for _phase, fn in w.step():
                fn()
                if device.type == "cuda":
                    torch.cuda.synchronize()
        return t0, time.time_ns() / 1e3

    t_end = time.monotonic() + warm_s
    while time.monotonic() < t_end:
        one_op()
        time.sleep(sleep)
    acts = [torch.profiler.ProfilerActivity.CPU] + ([torch.profiler.ProfilerActivity.CUDA]
                                                    if device.type == "cuda" else [])
    ops = []
    barrier.wait()
    with torch.profiler.profile(activities=acts) as prof:
        t_end = time.monotonic() + seconds
        while time.monotonic() < t_end:
            ops.append(one_op())
            time.sleep(sleep)
    trace = out / f"{name}.trace.json"
    prof.export_chrome_trace(str(trace))
    data = json.loads(trace.read_text())
    trace.unlink()
    kernels, launches, marks = read_trace(data)
    with gzip.open(out / f"{name}.kernels.csv.gz", "wt", newline="") as f:
        wr = csv.writer(f)
        wr.writerow(["launch_us", "start_us", "end_us", "name", "launch_end_us"])
        for corr, s, e, nm in sorted(kernels, key=lambda k: k[1]):
            call = launches.get(corr, (float("nan"), float("nan")))
            wr.writerow([f"{call[0]:.3f}", f"{s:.3f}", f"{e:.3f}", nm, f"{call[1]:.3f}"])
    part = out / f"{name}.ops.csv.part"
    with open(part, "w", newline="") as f:
        wr = csv.writer(f)
        wr.writerow(["start_us", "end_us", "trace_start_us", "trace_end_us"])
        marks.sort()
        nan = (float("nan"), float("nan"))
        wr.writerows([f"{x:.3f}" for x in (a, b, *(marks[k] if k < len(marks) else nan))] for k, (a, b) in enumerate(ops))
    part.replace(out / f"{name}.ops.csv")


LAUNCH_SLACK_US = 30.0  # a timeline without the launch calls' ends: a kernel counts as queued this long after its call began


def read_kernels(out: Path) -> dict[str, np.ndarray]:
    """Each tenant's kernels as rows (launch_us, start_us, end_us, queued_us), in start order: ``launch_us`` is when
    its launch call began, ``queued_us`` when it returned (the kernel on the GPU's queue), or where a timeline lacks
    that, the call's start + LAUNCH_SLACK_US.

    Why both: with CUPTI attached a launch call takes microseconds to tens of them. A kernel surely queued at a
    moment had its call returned by then; a queue surely dry at a moment had its next call not yet begun (the first
    timelines: in the turns that ended with the holder's next call begun before their end, it had begun a median
    4-12 us before it, mostly a call still in flight)."""
    names = json.loads((out / "meta.json").read_text())["tenants"]
    out_rows = {}
    for n in names:
        k = pd.read_csv(out / f"{n}.kernels.csv.gz")
        queued = k["launch_end_us"] if "launch_end_us" in k else k["launch_us"] + LAUNCH_SLACK_US
        out_rows[n] = np.column_stack([k["launch_us"], k["start_us"], k["end_us"], queued]).astype(float)
    return out_rows


def turns(kernels: dict[str, np.ndarray]) -> pd.DataFrame:
    """The GPU's turns while every tenant ran: maximal runs of one tenant's kernels in start order.

    Per turn: its tenant, length (its first kernel's start to its last one's end, or to the next tenant's first
    kernel where that came first), the idle gap before the next tenant's first kernel (ms: a switch, or nobody had
    work), ``preempted`` (its last kernel was switched out mid-way: its events end after the next tenant's start,
    as time-slicing does at a quantum), ``queued`` (preempted, or its next kernel was launched before the turn
    ended: switched out with work left) and ``others_waiting`` (how many other tenants had a
    kernel launched and not started when it ended)."""
    names = list(kernels)
    lo = max(np.nanmin(k[:, 0]) for k in kernels.values())  # every tenant has launched
    hi = min(k[:, 2].max() for k in kernels.values())
    rows = [np.column_stack([k[:, :3], np.full(len(k), i)]) for i, k in enumerate(kernels.values())]
    every = np.concatenate(rows)
    every = every[(every[:, 1] >= lo) & (every[:, 2] <= hi)]
    every = every[np.argsort(every[:, 1], kind="stable")]
    who = every[:, 3].astype(int)
    cut = np.flatnonzero(who[1:] != who[:-1]) + 1
    out = []
    for s, e in zip(np.r_[0, cut], np.r_[cut, len(every)], strict=True):
        i = who[s]
        end = every[e - 1, 2]
        preempted = e < len(every) and end > every[e, 1]  # its last kernel was switched out mid-way (and resumed later)
        end = min(end, every[e, 1]) if e < len(every) else end
        own = kernels[names[i]]
        later = own[own[:, 1] > end]
        queued = bool(len(later)) and queued_at(later)[0] < end
        waiting = sum(int(np.any((queued_at(k) < end) & (k[:, 1] >= end))) for j, k in enumerate(kernels.values())
                      if j != i)
        gap = (every[e, 1] - end) / 1e3 if e < len(every) else np.nan
        after = names[who[e]] if e < len(every) else ""
        out.append((names[i], (end - every[s, 1]) / 1e3, gap, queued or preempted, preempted, waiting, e - s, after))
    return pd.DataFrame(out, columns=["tenant", "length_ms", "gap_ms", "queued", "preempted", "others_waiting",
                                      "kernels", "next"])


def hand_overs(t: pd.DataFrame) -> pd.Series:
    """How often each tenant handed the GPU to each other one while every other tenant waited: the round robin's
    order (a fixed cycle puts all of a holder's hand-overs on one successor)."""
    every_other = t["others_waiting"] == t["tenant"].nunique() - 1
    return t[every_other & (t["next"] != "")].groupby(["tenant", "next"]).size()


def queued_at(k: np.ndarray) -> np.ndarray:
    """When each kernel was surely on the GPU's queue (``read_kernels``' fourth column; a hand-made timeline of
    three columns: its launch)."""
    return k[:, 3] if k.shape[1] > 3 else k[:, 0]


def waiting_at(k: np.ndarray, t: np.ndarray) -> np.ndarray:
    """Whether a tenant (its kernels ``k`` in start order, one stream) had a kernel launched and not started at
    each time ``t``: its first kernel starting at or after t was launched before it."""
    m = np.searchsorted(k[:, 1], t, side="left")
    launched = np.where(m < len(k), queued_at(k)[np.minimum(m, len(k) - 1)], np.inf)
    return launched < t


def dry_holds(kernels: dict[str, np.ndarray]) -> pd.DataFrame:
    """Per tenant: the moments its queue ran dry (its next kernel launched after its kernel in flight ended) while
    another tenant waited, and how many of them it kept the GPU through (no other tenant's kernel before its next).

    Why: the model hands the GPU over the moment a launch-bound holder has nothing queued and another waits; a GPU
    that kept it for a while through such gaps would lengthen every turn."""
    starts = {n: k[:, 1] for n, k in kernels.items()}
    rows = []
    for name, k in kernels.items():
        ends, nxt_launch, nxt_start = k[:-1, 2], k[1:, 0], k[1:, 1]
        dry = nxt_launch > ends
        others = [m for m in kernels if m != name]
        waited = np.zeros(len(ends), bool)
        between = np.zeros(len(ends), bool)
        for m in others:
            waited |= waiting_at(kernels[m], ends)
            s = starts[m]
            between |= np.searchsorted(s, nxt_start, "left") > np.searchsorted(s, ends, "left")
        sel = dry & waited
        gaps = (nxt_launch - ends)[sel]
        rows.append({"tenant": name, "dry_while_others_waited": int(sel.sum()), "kept_the_gpu": int((sel & ~between).sum()),
                     "dry_gap_p10_us": float(np.percentile(gaps, 10)) if len(gaps) else np.nan})
    return pd.DataFrame(rows)


def summary(t: pd.DataFrame) -> pd.DataFrame:
    """Per tenant: turns, their length p50/p90, and how they ended while another tenant waited (its queue left
    with work, as at a quantum, or empty: a yield at a kernel boundary), with those turns' median lengths."""
    rows = []
    for name, g in t.groupby("tenant", sort=False):
        contested = g[g["others_waiting"] > 0]
        cut, dry = contested[contested["queued"]], contested[~contested["queued"]]
        rows.append({"tenant": name, "turns": len(g), "length_p50_ms": g["length_ms"].median(),
                     "length_p90_ms": g["length_ms"].quantile(0.9), "contested": len(contested),
                     "cut_with_work": len(cut), "cut_length_p50_ms": cut["length_ms"].median(),
                     "yielded_dry": len(dry), "dry_length_p50_ms": dry["length_ms"].median(),
                     "preempted": int(g["preempted"].sum()), "gap_p50_ms": g["gap_ms"].median()})
    return pd.DataFrame(rows)


def slice_after(t: pd.DataFrame) -> pd.DataFrame:
    """The turns cut with work queued while another waited, by how the turn before them ended (cut with work, or its
    queue dry): how many and their median length.

    Why: whether a holder's quantum starts at its switch-in (the model's slice timer) or it gets the rest of a slice
    its dry predecessor did not use. With the first, a cut turn lasts the quantum whatever came before it."""
    before = t["queued"].shift(1)
    cut = (t["queued"] & (t["others_waiting"] > 0) & before.notna()).to_numpy(bool)
    g = t[cut].assign(before=np.where(before[cut].astype(bool), "cut with work", "dry"))
    return g.groupby("before")["length_ms"].agg(turns="size", length_p50_ms="median").reset_index()


def report(out: Path) -> None:
    """What the timeline in ``out`` says, printed: the turns, the hand-over order, the dry moments, and the order
    in which the tenants made their CUDA contexts (where recorded)."""
    kernels = read_kernels(out)
    made = {n: json.loads((out / f"{n}.context.json").read_text())["context_us"] for n in kernels
            if (out / f"{n}.context.json").exists()}
    if made:
        print("contexts made in the order:", " -> ".join(sorted(made, key=made.get)))
    t = turns(kernels)
    print(summary(t).round(3).to_string(index=False))
    print("hand-overs while every other tenant waited (holder -> next):")
    print(hand_overs(t).to_string())
    print(dry_holds(kernels).round(1).to_string(index=False))
    print("turns cut with work queued, by how the turn before them ended:")
    print(slice_after(t).round(3).to_string(index=False))


def main() -> int:
    if sys.argv[1:2] == ["--read"]:
        report(Path(sys.argv[2]))
        return 0
    names = [n for n in os.environ.get("KTS_TENANTS", "llama-decode,bert,resnet").split(",") if n]
    out = Path(os.environ.get("OUT", "/tmp/kts-timeline"))
    out.mkdir(parents=True, exist_ok=True)
    seconds, warm = float(os.environ.get("SECONDS", "1.0")), float(os.environ.get("WARM_S", "5"))
    sleeps = json.loads(os.environ.get("KTS_SLEEP_S") or "{}")
    (out / "meta.json").write_text(json.dumps({"tenants": names, "seconds": seconds, "sleep_s": sleeps}, indent=1))
    ctx = mp.get_context("spawn")
    barrier = ctx.Barrier(len(names))
    procs = [ctx.Process(target=tenant, args=(n, out, barrier, seconds, warm)) for n in names]
    stagger = float(os.environ.get("STAGGER_S", "0"))  # seconds between the tenants' starts: their contexts in order
    for p in procs:
        p.start()
        time.sleep(stagger)
    while any(p.is_alive() and not (out / f"{n}.ops.csv").exists() for n, p in zip(names, procs, strict=True)):
        time.sleep(0.5)  # each child writes its ops last
    for p in procs:
        p.join(timeout=10)
        if p.exitcode is None:  # it wrote its files, then hung in its teardown (the first three timelines' children)
            p.kill()
            p.join()
    import torch
    meta = {"tenants": names, "seconds": seconds, "sleep_s": sleeps, "stagger_s": stagger, "torch": torch.__version__,
            "gpu": torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu",
            "exit": [p.exitcode for p in procs], "files": [(out / f"{n}.ops.csv").exists() for n in names]}
    (out / "meta.json").write_text(json.dumps(meta, indent=1))
    print(json.dumps(meta))
    if all(meta["files"]) and meta["gpu"] != "cpu":
        report(out)
    return 0 if all(meta["files"]) else 1


if __name__ == "__main__":
    raise SystemExit(main())
