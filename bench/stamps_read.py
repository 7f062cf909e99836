"""What ``bench_stamps`` recorded, read: per tenant and phase, each operation's wait before its first stamp ran, its
span on the GPU's clock against its CUDA events', and in shared phases how often other tenants ran inside it.

Kept apart from the GPU script so that it reads with numpy and pandas alone (no torch)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd


def load(out: Path) -> tuple[dict, pd.DataFrame, pd.DataFrame]:
    """(meta, every stamp with its tenant, every op with its tenant)."""
    meta = json.loads((out / "meta.json").read_text())
    st, ops = [], []
    for n in meta["tenants"]:
        for ext in (".csv", ".csv.gz"):  # as written, or compressed where committed (bench/reference)
            if (out / f"{n}.stamps{ext}").exists():
                st.append(pd.read_csv(out / f"{n}.stamps{ext}").assign(tenant=n))
                ops.append(pd.read_csv(out / f"{n}.ops{ext}").assign(tenant=n))
    return meta, pd.concat(st, ignore_index=True), pd.concat(ops, ignore_index=True)


def with_sub(st: pd.DataFrame) -> pd.DataFrame:
    """The stamps with ``sub``: which timed step of its op each belongs to (0, 1, ...: the count of start stamps
    before it in its op, in launch order). Why: an op of llama-decode times a prefill and then several decode steps,
    each its own row in the worker's log; without it every decode step of an op would read as one."""
    if "sub" in st.columns:
        return st
    st = st.sort_values(["tenant", "k"], kind="stable")
    is_start = (st["tag"] == "start").astype(int)
    return st.assign(sub=is_start.groupby([st["tenant"], st["phase"], st["op"]]).cumsum() - 1)


def per_op(st: pd.DataFrame) -> pd.DataFrame:
    """One row per timed step (tenant, phase, op, step, sub) with both its start and end stamps: the host launch of
    its start stamp, GPU times of its start and end stamps, the wait before its start stamp ran (ms), its span on
    the GPU (ms) and the host's time from the start stamp's launch to the end stamp's (its issue time, ms)."""
    keys = ["tenant", "phase", "op", "step", "sub"]
    st = with_sub(st)
    first = st[st["tag"] == "start"].groupby(keys, sort=False).first()
    last = st[st["tag"] == "end"].groupby(keys, sort=False).last()
    out = pd.DataFrame({"launch_us": first["host_us"], "gpu0_us": first["gpu_us"], "gpu1_us": last["gpu_us"],
                        "launch_end_us": last["host_us"]}).dropna()
    out["wait_ms"] = (out["gpu0_us"] - out["launch_us"]) / 1e3
    out["span_ms"] = (out["gpu1_us"] - out["gpu0_us"]) / 1e3
    out["issue_ms"] = (out["launch_end_us"] - out["launch_us"]) / 1e3
    return out.reset_index()


def interruptions(st: pd.DataFrame, ops: pd.DataFrame) -> pd.DataFrame:
    """Shared phases: per op, how many runs of other tenants' stamps fell between its first and last stamps on the
    GPU (each a turn of another tenant inside it, or more) and which tenants ran between its launch and first stamp."""
    rows = []
    for phase, s in st.groupby("phase"):
        if s["tenant"].nunique() < 2:
            continue
        s = s.sort_values("gpu_us", kind="stable")
        gpu, who = s["gpu_us"].to_numpy(), s["tenant"].to_numpy()
        for r in ops[ops["phase"] == phase].itertuples():
            i0, i1 = np.searchsorted(gpu, [r.gpu0_us, r.gpu1_us])
            inside = who[i0:i1 + 1]
            other = inside != r.tenant
            runs = int(np.sum(other[1:] & ~other[:-1])) if len(other) > 1 else 0
            j0 = np.searchsorted(gpu, r.launch_us)
            before = sorted(set(who[j0:i0]) - {r.tenant})
            rows.append((r.tenant, phase, r.op, r.step, runs, "+".join(before)))
    return pd.DataFrame(rows, columns=["tenant", "phase", "op", "step", "others_inside", "before"])


def blocks_alone(st: pd.DataFrame) -> pd.DataFrame:
    """Alone phases: per tenant, step and stamp position within an op (0: the op's start, then one per block), the
    median host time from that stamp's launch to the next one's (the host's launch span of that stretch) and GPU
    time from its run to the next one's: where the GPU's is longer the stretch is GPU-bound (its queue builds),
    where shorter launch-bound (its queue runs dry, and under time-slicing a waiting neighbour gets the GPU at once).

    Why: the planner's model spreads an op's GPU time evenly over its launches (one busy share per op); whether an
    op's queue empties part-way is the first of the two candidates for the three-tenant miss (docs/methods/planner.md,
    "Two contexts against three")."""
    a = with_sub(st[st["phase"].str.contains("alone")]).sort_values(["tenant", "phase", "op", "sub", "k"],
                                                                      kind="stable")
    g = a.groupby(["tenant", "phase", "op", "sub"], sort=False)
    a = a.assign(pos=g.cumcount(), host_ms=(g["host_us"].shift(-1) - a["host_us"]) / 1e3,
                 gpu_ms=(g["gpu_us"].shift(-1) - a["gpu_us"]) / 1e3).dropna(subset=["host_ms"])
    out = a.groupby(["tenant", "step", "pos"])[["host_ms", "gpu_ms"]].median()
    out["gpu_bound"] = out["gpu_ms"] > out["host_ms"]
    return out.reset_index()


def turns(st: pd.DataFrame, phase: str) -> pd.DataFrame:
    """One shared phase's turns as the stamps see them: a run of one tenant's stamps in GPU order, its first and last
    stamp's GPU times and places in their step (``stretch``: "0-6", the start stamp to the sixth block's), and
    whether its queue held work when the turn ended: its next stamp had been launched before its last one ran
    (``queued``; at a block's resolution, so a turn that ran dry inside its last block reads queued only if the host
    was a whole block ahead). ``lag_ms``: at the turn's first stamp, GPU time - host launch (how far
    its queue's head had waited).

    Why: the model keeps a launch-bound holder's queue full for as long as its host's backlog lasts (ResNet-50 at 89 %
    busy: nearly a whole quantum at every turn); a turn that ends dry long before the quantum says its queue emptied."""
    s = with_sub(st[st["phase"] == phase]).sort_values(["tenant", "k"], kind="stable")
    s = s.assign(pos=s.groupby(["tenant", "op", "sub"]).cumcount())  # the stamp's place in its step (0: start)
    s = s.sort_values("gpu_us", kind="stable").reset_index(drop=True)
    who = s["tenant"].to_numpy()
    # each stamp's tenant's next stamp launch (host clock), in that tenant's own launch order
    nxt = s.sort_values(["tenant", "k"]).groupby("tenant")["host_us"].shift(-1)
    s["next_host_us"] = nxt
    start = np.r_[0, np.flatnonzero(who[1:] != who[:-1]) + 1]
    end = np.r_[start[1:] - 1, len(s) - 1]
    rows = []
    for a, b in zip(start, end, strict=True):
        last = s.iloc[b]
        queued = bool(pd.notna(last["next_host_us"]) and last["next_host_us"] < last["gpu_us"])
        rows.append((who[a], s["gpu_us"].iat[a], last["gpu_us"], b - a + 1, queued,
                     (s["gpu_us"].iat[a] - s["host_us"].iat[a]) / 1e3, f"{s['pos'].iat[a]}-{last['pos']}"))
    out = pd.DataFrame(rows, columns=["tenant", "gpu0_us", "gpu1_us", "stamps", "queued", "lag_ms", "stretch"])
    out["span_ms"] = (out["gpu1_us"] - out["gpu0_us"]) / 1e3
    return out


def handovers(st: pd.DataFrame, phase: str) -> pd.Series:
    """Counts of tenant-to-tenant changes in GPU order of one phase's stamps (a coarse hand-over order)."""
    s = st[st["phase"] == phase].sort_values("gpu_us", kind="stable")["tenant"].to_numpy()
    change = s[1:] != s[:-1]
    return pd.Series([f"{a} -> {b}" for a, b in zip(s[:-1][change], s[1:][change], strict=True)]).value_counts()


def report(out: Path) -> str:
    meta, st, op_rows = load(out)
    o = per_op(st)
    op_rows = op_rows.assign(sub=op_rows.groupby(["tenant", "phase", "op"]).cumcount())  # its log's order
    o = o.merge(op_rows[["tenant", "phase", "op", "sub", "step", "start_us", "end_us", "event_ms"]],
                on=["tenant", "phase", "op", "sub", "step"], how="left")
    o["wall_ms"] = (o["end_us"] - o["start_us"]) / 1e3
    lines = [f"{meta.get('gpu', '')}; clocks: " + ", ".join(
        f"{n} offset {c['offset0_ns'] / 1e3:.1f}/{c['offset1_ns'] / 1e3:.1f} us, {c['blocks']} blocks, context at "
        f"{c['context_us'] / 1e6:.3f} s" for n, c in meta.get("clocks", {}).items())]
    q = ["wall_ms", "event_ms", "wait_ms", "span_ms", "issue_ms"]
    table = o.groupby(["phase", "tenant", "step"])[q].median().round(2)
    table.insert(0, "n", o.groupby(["phase", "tenant", "step"]).size())
    table["wait_p90"] = o.groupby(["phase", "tenant", "step"])["wait_ms"].quantile(0.9).round(2)
    lines += ["medians per phase, tenant and step (ms):", table.to_string()]
    b = blocks_alone(st)
    if len(b):
        lines += ["alone, stretch by stretch (stamp to next stamp; medians, ms):",
                  b.round(3).to_string(index=False)]
    inter = interruptions(st, o)
    if len(inter):
        s = inter.groupby(["phase", "tenant", "step"]).agg(n=("op", "size"), inside_mean=("others_inside", "mean"))
        lines += ["other tenants' turns inside an op (runs of their stamps between its first and last):",
                  s.round(2).to_string(),
                  "who ran between an op's launch and its first stamp:",
                  inter.groupby(["phase", "tenant"])["before"].value_counts().to_string()]
        for phase in inter["phase"].unique():
            lines += [f"hand-overs seen in {phase}:", handovers(st, phase).head(8).to_string()]
            t = turns(st, phase).iloc[1:-1]  # the phase's first and last turns are cut by its start and end
            lines += [f"turns in {phase} (a run of one tenant's stamps; span first to last stamp, ms):",
                      t.groupby(["tenant", "queued"]).agg(n=("span_ms", "size"), span_p50=("span_ms", "median"),
                                                          span_p90=("span_ms", lambda x: x.quantile(0.9)),
                                                          lag_p50=("lag_ms", "median")).round(3).to_string(),
                      "the stretches its turns ran most often (first-last stamp in the step, turns):",
                      t.groupby("tenant")["stretch"].apply(lambda x: ", ".join(
                          f"{k} {v}" for k, v in x.value_counts().head(4).items())).to_string()]
    return "\n".join(lines)
