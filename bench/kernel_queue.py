"""The three-tenant first wait with every kernel queued one by one: is the planner's fluid queue what misses it?  (CPU)

Why: in the H100's three-tenant runs about half of the measured waits before an operation's first kernel are as
short as two context switches, and the planner's engine gives almost none (``bench.first_waits``). The engine keeps a
launch-bound tenant's queue as a fluid: its host runs ahead at one rate and the GPU drains the backlog. Real queues
are kernels: a run of short kernels can empty a queue the fluid says is full, and the GPU passes on at once. This
simulates each tenant's operations kernel by kernel instead: each op (drawn from the tenant's alone run, as the
planner draws it) is ``kernels`` launches spread evenly over its alone events, each kernel's length exponential
around the op's GPU time / kernels (``uneven``: the same lengths sorted longest first, so the queue builds early and
empties late in each op); a holder keeps the GPU until its queue is empty or its slice (counted from its switch-in,
every quantum) ends with another waiting, and pays the probe's switch at every hand-over between two contexts with
work. The hand-over goes round the tenants in order (``rr``) or to the waiter whose oldest queued kernel is newest
(``newest``: a context that has just been given work goes first).

    python -m bench.kernel_queue h100-2026-12-07-issue-rm-auto-f56a761c [rr|newest] [even|uneven]

Prints per tenant the median wait, the share of waits under ``first_waits.SHORT_MS``, the events and the wall: the
kernel-level model's against the measured ones (one simulated run per time-slicing block, pooled).
"""

from __future__ import annotations

import random
import sys
from dataclasses import dataclass

import numpy as np
import pandas as pd

from bench.first_waits import SHORT_MS, block_frames
from kts_helpers.plan.inputs import load_plan_input, scenarios_of
from kts_helpers.plan.traits import fallback_traits
from kts_helpers.plan.validation import run_dir_of


@dataclass
class _Op:
    arrival: float
    launch: np.ndarray  # host launch time of each kernel
    left: np.ndarray  # GPU time still to run, each kernel
    done: int = 0  # kernels completed
    first: float = -1.0
    gap: float = 0.0
    phase: str = "op"


def simulate(tenants: list, quantum: float, switch: float, duration: float, seed: int, pick: str = "rr",
             uneven: bool = False) -> pd.DataFrame:
    """``tenants``: (name, draw, kernels, fallback share) per tenant, ``draw()`` giving the next ``timeslice.Op``.
    One row per completed op: tenant, phase, arrival, first kernel, end (ms)."""
    rng = np.random.default_rng(seed)
    n = len(tenants)

    def new_op(i: int, t: float) -> _Op:
        name, draw, k, share0 = tenants[i]
        o = draw()
        share = o.busy_share or share0
        lengths = rng.exponential(o.kernel_ms * share / k, k)
        if uneven:
            lengths = np.sort(lengths)[::-1]
        return _Op(t, t + np.arange(k) * o.kernel_ms / k, lengths, gap=o.gap_ms, phase=o.phase)

    ops: list[_Op | None] = [new_op(i, float(rng.uniform(0.0, 5.0))) for i in range(n)]
    nxt = [np.inf] * n  # next op's arrival of a tenant between ops
    rows = []
    now, hold, origin = 0.0, 0, 0.0

    def queued_at(i: int) -> float:
        """When tenant ``i``'s next kernel was (or will be) launched; inf between its ops."""
        o = ops[i]
        return o.launch[o.done] if o is not None and o.done < len(o.left) else np.inf

    def ready(i: int, t: float) -> bool:
        return queued_at(i) <= t + 1e-12

    def arrive(t: float) -> None:
        """Tenants whose host gap after their last op has passed by ``t`` issue their next op."""
        for i in range(n):
            if ops[i] is None and nxt[i] <= t + 1e-12:
                ops[i], nxt[i] = new_op(i, nxt[i]), np.inf

    def chosen(t: float) -> int:
        waiting = [(hold + k) % n for k in range(1, n) if ready((hold + k) % n, t)]
        return max(waiting, key=queued_at) if pick == "newest" else waiting[0]

    while now < duration:
        arrive(now)
        others = any(ready(i, now) for i in range(n) if i != hold)
        o = ops[hold]
        if o is not None and ready(hold, now):
            if o.first < 0:
                o.first = now
            end = now + o.left[o.done]
            slice_end = origin + (np.floor((now - origin) / quantum) + 1) * quantum
            # a neighbour's launch before this kernel's end makes the slice end count (checked at each kernel)
            contested = any(queued_at(i) < end for i in range(n) if i != hold)
            if contested and slice_end < end:
                o.left[o.done] -= slice_end - now
                now = slice_end
                if any(ready(i, now) for i in range(n) if i != hold):
                    hold, now = chosen(now), now + switch
                    origin = now - switch
                continue
            now = end
            o.left[o.done] = 0.0
            o.done += 1
            if o.done == len(o.left):
                rows.append((tenants[hold][0], o.phase, o.arrival, o.first, now))
                ops[hold], nxt[hold] = None, now + max(o.gap, 0.0)
            continue
        if others:  # the holder ran dry while another waits: the GPU passes on at once
            hold, now = chosen(now), now + switch
            origin = now - switch
            continue
        now = max(now, min([queued_at(i) for i in range(n)] + nxt))
        arrive(now)
        if not ready(hold, now):  # an idle GPU goes to whoever has work, its slice starting now
            waiting = [i for i in range(n) if ready(i, now)]
            if waiting:
                hold, origin = waiting[0], now
    return pd.DataFrame(rows, columns=["tenant", "phase", "arrival", "first", "end"])


def compare(name: str, pick: str = "rr", uneven: bool = False) -> pd.DataFrame:
    """Per tenant of one run: the kernel-level model's waits, short-wait share, events and walls against measured."""
    run_dir = run_dir_of(name)
    if run_dir is None:
        raise SystemExit(f"kernel_queue: no committed run {name!r}")
    inp = load_plan_input(run_dir)
    q, s = float(inp.gpu.quantum_ms.value), float(inp.gpu.switch_ms.value)
    parts = []
    for b, sc in enumerate(x for x in scenarios_of(inp) if x.sharing == "timeslice"):
        names = [t.name for t in sc.tenants]
        for t, f in block_frames(run_dir, sc.name, names).items():
            parts.append(pd.DataFrame({"tenant": t, "source": "measured", "wait": f["wall"] - f["device"],
                                       "device": f["device"], "wall": f["wall"]}))
        traits = [t.traits or fallback_traits(t.workload, inp.gpu.busy_share) for t in sc.tenants]
        rng = random.Random(b)
        tenants = [(t.name, t.drawer(random.Random(rng.random())), max(int(tr.kernels), 1), tr.busy_share)
                   for t, tr in zip(sc.tenants, traits, strict=True)]
        duration = 1.25 * max(n * t.cycle_ms() for n, t in zip(sc.n, sc.tenants, strict=True)) + 50.0
        sim = simulate(tenants, q, s, duration, b, pick, uneven)
        sim = sim[sim["arrival"] > 50.0]
        overhead = {t.name: float(np.median([op.overhead_ms for it in t.iterations for op in it])) for t in sc.tenants}
        parts.append(pd.DataFrame({"tenant": sim["tenant"], "source": "kernels", "wait": sim["first"] - sim["arrival"],
                                   "device": sim["end"] - sim["first"],
                                   "wall": sim["end"] - sim["arrival"] + sim["tenant"].map(overhead)}))
    d = pd.concat(parts, ignore_index=True)
    d["short"] = d["wait"] < SHORT_MS
    out = d.groupby(["tenant", "source"], sort=False).agg(wait=("wait", "median"), short=("short", "mean"),
                                                          device=("device", "median"), wall=("wall", "median"))
    return out.unstack("source")


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__)
        return 2
    pick = argv[1] if len(argv) > 1 else "rr"
    uneven = len(argv) > 2 and argv[2] == "uneven"
    t = compare(argv[0], pick, uneven)
    print(f"{argv[0]}: hand-over {pick}, kernel lengths {'sorted longest first' if uneven else 'even'} "
          f"(measured / kernel-level model; medians in ms, short: the share of waits under {SHORT_MS} ms)")
    for name in t.index:
        print(f"  {name:15s} " + "  ".join(f"{c} {t.loc[name, (c, 'measured')]:6.2f}/{t.loc[name, (c, 'kernels')]:6.2f}"
                                         for c in ("wait", "short", "device", "wall")))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
