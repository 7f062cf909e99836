"""Optional report sections: shown only when the run holds what they need.

Each section is Markdown plus tables/charts; the analysis notebook renders them in order.
Sharing modes, contention matrix and LLM phases come from ``compare``, open-loop arrivals from ``openloop``;
Kubernetes runs add the layered waits (admission, placement, start-up) next to the GPU wait; a
time-slice probe run adds the GPU's quantum and switch cost (``analyse.probe``); a GPU run whose GPU model
has a committed probe adds "Capacity" (``plan.capacity``: how many replicas of its workloads would meet a goal).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from kts_helpers.analyse import collisions, compare, design, hostspeed, openloop, profiles, summary, warmgpu
from kts_helpers.analyse.load import RunData
from kts_helpers.analyse.probe import is_multi_probe, is_probe, read_multi, read_probe
from kts_helpers.analyse.waits import layered_waits
from kts_helpers.errors import KtsError
from kts_helpers.plan.capacity import DEFAULT_SLOW_SHARE, capacity_frame, capacity_of_run
from kts_helpers.present import charts


@dataclass
class Section:
    markdown: str
    items: list[Any] = field(default_factory=list)


def build(data: RunData, *, n_resamples: int = 2000, seed: int | None = 0,
          table: pd.DataFrame | None = None) -> list[Section]:
    """The report's further sections. ``table``: the report's summary with its verdicts (one family), which the
    comparison tables quote for the series it reads (``compare``)."""
    out: list[Section] = []
    warm = design_section(data)
    if warm is not None:
        out.append(warm)
    probe = probe_section(data, n_resamples=n_resamples, seed=seed)
    if probe is not None:
        out.append(probe)
    found = collisions_section(data)
    if found is not None:
        out.append(found)
    warm_gpu = warm_gpu_section(data)
    if warm_gpu is not None:
        out.append(warm_gpu)
    host = host_speed_section(data)
    if host is not None:
        out.append(host)
    measured = profiles_section(data)
    if measured is not None:
        out.append(measured)
    report = summary.family_readings(table) if table is not None and "reading" in table else None
    out.extend(_compare_sections(data, n_resamples=n_resamples, seed=seed, report=report))
    waits = kubernetes_waits(data)
    if waits is not None:
        out.append(waits)
    capacity = capacity_section(data)
    if capacity is not None:
        out.append(capacity)
    if not out:
        out.append(Section("This run holds one sharing mode, one pair of tenants and closed-loop workers only: "
                           "no further comparison to show."))
    return out


def _compare_sections(data: RunData, *, n_resamples: int, seed: int | None,
                      report: dict | None = None) -> list[Section]:
    out = []
    if compare.has_modes(data):
        t = compare.modes_table(data, n_resamples=n_resamples, seed=seed, report=report)
        out.append(Section("### Sharing modes side by side\n\nThe same tenants and parameters under CUDA time-slicing "
                           "(contexts take turns), MPS (kernels of different tenants run at the same time on "
                           "shared SMs) and MPS with a thread limit (`CUDA_MPS_ACTIVE_THREAD_PERCENTAGE`)."
                           + (f" **{compare.plugin_mps_text(caps)}**"
                              if (caps := compare.plugin_mps_caps(data.manifest)) else ""),
                           [t, charts.modes_chart(t)]))
    if compare.has_matrix(data):
        m = compare.contention_matrix(data, n_resamples=n_resamples, seed=seed, report=report)
        out.append(Section("### Contention matrix\n\nRows: the tenant that suffers (victim); columns: who it "
                           "shares the GPU with. Each cell is the victim's wall-time DF (p99 shared / p99 alone) "
                           "with its 95 % interval.", [charts.df_heatmap(m), m]))
    if openloop.has_open_loop(data):
        t = openloop.open_loop_table(data)
        who = ["tenant", "scenario"]  # two tables a page wide: the rates, then where the latency went
        rates = t[who + ["arrival", "n", "offered_hz", "offered_measured_hz", "achieved_hz", "utilisation",
                         "overloaded", "message"]]
        latency = t[who + [c for c in t.columns if c.startswith(("response_", "service_", "queue_"))]]
        out.append(Section("### Open-loop arrivals\n\nOperations arrive on their own schedule (a Poisson process), "
                           "not when the previous one finishes. Latency is measured from the *intended* arrival, "
                           "so time spent queued behind a slow iteration counts (no coordinated omission). First the "
                           "rates (offered, measured, achieved), then response = queue + service time.",
                           [rates, latency, charts.open_closed_tails(data),
                            charts.queue_chart(openloop.queue_growth(data))]))
    if compare.has_phases(data):
        t = compare.phase_table(data, n_resamples=n_resamples, seed=seed, report=report)
        out.append(Section("### LLM-like workload: time to first token and per-token latency\n\nA small decoder-only "
                           "transformer with random weights: one prefill over the prompt (time to first token), then "
                           "token-by-token decode.", [t, charts.phase_chart(t)]))
    return out


def design_section(data: RunData) -> Section | None:
    """The warm design (``analyse.design``): its blocks and what they cost, the idle-neighbour control, and MPS
    clients alone against plain processes alone."""
    if not design.is_warm(data):
        return None
    r = data.manifest.spec.resolved
    cost = design.cost_table(data)
    text = [f"### Design: warm tenants and many blocks\n\n{str(r.get('design', '')).capitalize()}. "
            "Each tenant's worker starts once per sharing mode, builds, warms up and profiles its workload, then runs "
            "every block of that mode on command and idles between them with its context resident; alone and shared "
            "blocks alternate, so each shared block sits between two alone blocks of every tenant, and the verdicts "
            "read the drift between moments from the blocks themselves. A shared block lasts until every tenant has "
            "timed at least the block's seconds and its share of the iterations; every co-running iteration in it "
            "is timed."]
    if len(cost):
        text.append(f"The blocks took {cost['seconds'].sum():.0f} s of the run's {cost.attrs['span_s']:.0f} s; "
                    f"{cost.attrs['outside_s']:.0f} s went to starting the workers (building, warming up and "
                    "profiling each workload) and between blocks.")
    if any(s.sharing.startswith("mps") for s in data.manifest.scenarios if s.kind == "baseline"):
        text.append("Under MPS the mode's alone blocks run as MPS clients with the server up (the same processes "
                    "as its shared blocks); MPS verdicts compare with those, time-slicing verdicts with plain "
                    "processes alone.")
    checks = design.controls(data)
    if checks:
        text.append("**Idle-neighbour control.** The first tenant ran one more alone block with its neighbours' "
                    "processes gone, right after its last alone block with them resident and idle:\n\n"
                    + "\n".join(f"* {c.words}" for c in checks))
    else:
        text.append("**Idle-neighbour control:** not in this run's data (its control block did not run).")
    items: list = [cost] if len(cost) else []
    looks = [lk for lk in data.manifest.looks]
    if looks:
        text.append("**Blocks until the answer is known** (`blocks=auto`): "
                    + "; ".join(f"{lk['sharing']}: after {lk['blocks']} shared blocks ({lk['elapsed_s']:.0f} s into the "
                                f"mode) {lk.get('decided')} of {lk.get('verdicts')} verdicts decided at a one-sided "
                                f"{100 * float(lk['alpha'] or 0):.2g} %"
                                + (f", so the run stopped: {lk['why']}" if lk.get("stop") else "") for lk in looks)
                    + ". The verdicts below are read at the level of the look that stopped each mode.")
    balance = design.host_balance(data)
    if len(balance):
        moved = balance[~balance["adjusted"] & data.on_gpu]
        text.append("**The host's speed** (each worker times a fixed piece of interpreter work after every iteration; "
                    "the verdicts take each block's median as a covariate where sharing did not move it): "
                    + (f"sharing moved it for {', '.join(sorted(set(moved['tenant'])))}, so those verdicts are not "
                       "adjusted and the table gives what the host's change alone accounts for."
                       if len(moved) else "balanced for every tenant (no shared/alone ratio significant at 5 %), so the "
                       "verdicts adjust for it." if data.on_gpu else
                       "on a CPU run the host is the contended device: its speed is part of the effect, never a "
                       "covariate."))
        items.append(balance)
    null = design.alone_against_alone(data)
    if len(null):
        loud = int(null["loud"].sum())
        text.append("**Alone against alone** (a real null from this run: each tenant's alone blocks 1, 3, 5, ... read as "
                    "alone and 2, 4, ... as shared, through the same verdicts, host covariate and family): "
                    + (f"**{loud} of {len(null)} readings say sharing made a tenant slower or faster**: the run's "
                       "drift between moments is larger than its verdicts allow for; read them with care." if loud else
                       f"none of {len(null)} readings says sharing made a tenant slower or faster."))
        items.append(null.drop(columns=["loud", "words"]))
    mps = design.mps_alone_table(data)
    if len(mps):
        text.append("**MPS client alone against plain alone** (block medians of the wall clock; different moments, so "
                    "the blocks' own spread is shown beside the ratio):")
        items.append(mps)
    return Section("\n\n".join(text), items)


def collisions_section(data: RunData) -> Section | None:
    """Which shared launches found a neighbour in flight, what they waited, and whether collisions follow a beat
    of the cadences (``analyse.collisions``); for every shared scenario with two or more tenants."""
    found = collisions.run_collisions(data)
    if not found:
        return None
    where = ("" if data.on_gpu else " On a CPU the tenants share cores, not a GPU: a collision is a launch while "
             "the neighbour was computing.")
    if any(scen.sharing.startswith("mps") for scen in data.manifest.scenarios if scen.kind == "shared"):
        where += (" Under MPS kernels of different tenants run at the same time, so a collision there need not "
                  "mean a wait.")
    sentences = "\n".join(f"* {collisions.summary_sentence(f)}" for f in found)
    frame = collisions.collisions_frame([f for f in found if 0 < f.share.collided < f.share.n])
    items: list[Any] = [collisions.collisions_table(found)]
    if len(frame) and frame["scenario"].nunique() == 1:
        items.append(charts.collision_chart(frame))
    return Section("### Collisions: the physical cause of the tail\n\nA shared launch *collides* when it starts "
                   "while a neighbour's operation is in flight: inside the neighbour's [start, end] host window "
                   "(launch to synchronize), padding lines included. Counted from both tenants' raw timestamps, "
                   "only over the co-running timed iterations the statistics use. The share's interval allows "
                   "for collisions coming in bursts; the waits are the wait clock (wall - device - floor) with "
                   "the kit's order-statistic intervals; the beat is the period, in launches, after which the "
                   "two cadences line up again (predicted from the measured cadences, and tested on the "
                   "collisions themselves against random placement)." + where + "\n\n" + sentences, items)


def warm_gpu_section(data: RunData) -> Section | None:
    """Device time split by how long the GPU had been idle before each shared launch (``analyse.warmgpu``): where a
    neighbour keeps the GPU warm, a tenant's device time falls though its operation did not get faster."""
    splits = warmgpu.split(data)
    if not splits:
        return None
    warm = [s for s in splits if s.shows_warm_gpu]
    lines = "\n".join(f"* {s.words}" + ("." if not s.shows_warm_gpu else ": a warm GPU.") for s in splits)
    return Section("### Device time and the GPU's idle state\n\nDevice time (CUDA events) is the GPU's time for an "
                   "operation in the state the GPU was in, not the operation's own time: a GPU idle for about "
                   f"{warmgpu.WARM_MS:g} ms runs the next short operation slower, and a neighbour that ran recently keeps "
                   "it warm. Each shared launch is split by the time since any neighbour's last operation ended (0 "
                   "where one was in flight)" + (", and for " + ", ".join(sorted({s.tenant for s in warm})) +
                                                  " the split shows it: a device-time speed-up there is the warm GPU, "
                                                  "not sharing making the operation faster" if warm else "") +
                   ".\n\n" + lines, [warmgpu.table(splits)])


def host_speed_section(data: RunData) -> Section | None:
    """How fast the launching host was in the alone and the shared blocks, and the contrast at equal host speed
    (``analyse.hostspeed``): GPU runs whose workers probed the host."""
    t = hostspeed.host_speed_table(data.iterations, data.on_gpu)
    if t.empty:
        return None
    sentences = "\n".join(f"* {m}" for m in t["message"])
    return Section("### Host speed between moments\n\nA launch-bound tenant is as fast as the host thread that "
                   "launches its kernels, and the host's speed drifts: each worker timed a fixed piece of interpreter "
                   "work after every iteration (the *probe*). The table gives the probe's median alone and shared, how "
                   "closely it moves with the tenant's wall clock alone (Spearman's rho; the slope of a line through "
                   "their logs), and the median ratio, shared over alone, raw and *host-adjusted* (against what the "
                   "alone line says each shared iteration would have taken at its host speed). This is the iterations' "
                   "view; the verdicts take each block's median probe as a covariate where sharing left it alone (the "
                   "balance check in the Design section), and never where sharing itself slowed the host: there the "
                   "adjustment would hide part of its cost.\n\n" + sentences,
                   [t.drop(columns=["message"])])


def profiles_section(data: RunData) -> Section | None:
    """What each tenant's kernels do on the GPU, from the profile its alone run recorded (``analyse.profiles``),
    and whether the profile left its mark on the timed iterations after it: GPU runs with profiles."""
    t = profiles.profiles_table(data.meta, data.iterations) if data.on_gpu else pd.DataFrame()
    if t.empty:
        return None
    notes = "\n".join(f"* {w}" for w in profiles.warnings(t))
    shown = t.rename(columns={"wall_p50_ms": "timed p50 (ms)", "wall_p99_ms": "timed p99 (ms)",
                              "kernels_per_op": "kernels per op", "busy_ms": "kernel time per op (ms)",
                              "busy_share": "GPU-busy share", "sm_share": "SM share",
                              "host_syncs": "host waits mid-op", "peak_mib": "peak MiB",
                              "cost_s": "profiling cost (s)", "cupti_detached": "CUPTI detached",
                              "residue": "after / before profile"})
    return Section("### Each tenant measured alone (its profile)\n\nBefore its timed iterations each alone worker "
                   "ran a few iterations under `torch.profiler` (Kineto/CUPTI): per operation the kernels it "
                   "launches, their time on the device, the share of the SMs their grids occupy and the memory it "
                   "holds. The GPU-busy share is the kernels' time over the *timed* p50: a launch-bound tenant (a "
                   "small share) is as fast as the host that launches it, and the planner splits each operation "
                   "into host and GPU time by it. The host's waits mid-op count how often an operation waited for "
                   "the device and then launched more (a `.item()`, a copy to the host; the p50 per operation, n/a "
                   "for a profile older than this count): each drains its queue, and under time-slicing a neighbour "
                   "with work then holds the GPU for its slice. The last two columns say whether the profile left anything on the "
                   "timed iterations that followed it in the same process: CUPTI detached after it (a profile that left "
                   "it attached slowed every later launch), and the p50 just after the profile over just before it, a "
                   "hint only: two ~1 s windows of a host that drifts (0.6-1.8 on the H200 with CUPTI detached)." + (f"\n\n{notes}" if notes else ""),
                   [shown])


def probe_section(data: RunData, *, n_resamples: int, seed: int | None) -> Section | None:
    """The GPU's effective time slice and switch cost, when the run is a time-slice probe (``kts probe``)."""
    if is_multi_probe(data):
        multi = read_multi(data)
        return Section("### Several contexts (multi-context probe)\n\nThe same tick at random times next to k = 1, 2, "
                       "3 busy neighbours whose kernels are shorter or longer than the quantum: its wait (wall - "
                       f"device - {multi.overhead_ms:.3f} ms launch overhead of an awake GPU) per configuration. A "
                       "round robin predicts waits up to k slices (long neighbours) or k kernels (short ones); "
                       "`kts plan` checks that per configuration and draws the measured waits where it misses.",
                       [multi.table()])
    if not is_probe(data):
        return None
    reading = read_probe(data, n_resamples=n_resamples, seed=seed)
    table = pd.DataFrame([{"reading": name, "value": est.text()} for name, est in reading.rows()])
    items: list[Any] = [table]
    if reading.n_contended:
        items.append(charts.probe_waits(reading))
    return Section("### The GPU's time slice (probe)\n\n"
                   f"A tick tenant issued a tiny kernel at random times next to a hog whose kernels each ran "
                   f"{reading.hog_kernel_ms:.1f} ms; {reading.n_contended} of its {reading.n_ticks} co-running "
                   "ticks found the GPU busy. A tick that waits for the hog's slice to end shows the slice plus one "
                   "switch as the upper edge of its waits (less the launch overhead of an awake GPU); the hog pays "
                   "two switches and the tick's kernel per tick, inside its CUDA events when it was preempted "
                   "mid-kernel, which gives the switch cost; effective quantum = upper edge - switch. With the roles "
                   "reversed, the hog is preempted after every slice, which gives how long it ran per slice from "
                   "its own clock. "
                   f"Cross-check: {reading.agreement}. Intervals: 95 %, bootstrap (see Methods). No GPU setting was "
                   "changed to measure this.", items)


def kubernetes_waits(data: RunData) -> Section | None:
    """Admission (Kueue), placement, start-up, barrier wait and timed loop per pod, next to the GPU wait."""
    if "kubernetes" not in data.manifest.backends():
        return None
    waits = layered_waits(data.manifest)
    gpu = (data.iterations.groupby(["scenario", "tenant"])["wait_ms"].quantile(0.99).rename("gpu_wait_p99_ms")
           .reset_index())
    table = waits.merge(gpu, on=["scenario", "tenant"], how="left").drop(columns=["resolution_s"],
                                                                         errors="ignore")
    if table["clock_skew"].eq("").all():
        table = table.drop(columns=["clock_skew"])
    return Section("### Three kinds of waiting (Kubernetes)\n\nAdmission (quota, Kueue), placement (a node) and "
                   "start-up (image pull, container start, CUDA init, warm-up) happen before the first "
                   "iteration and are read from the API's timestamps, in whole seconds (its resolution); the "
                   "barrier wait and the timed loop come from the worker's own clock; the GPU time-slice wait "
                   "happens inside every iteration, in milliseconds. ``late_start_s``: how long after the "
                   "shared start a tenant's timed loop began. Where two clocks disagree (an interval would be "
                   "negative) the layer is left empty and ``clock_skew`` names both clocks.", [table])


def capacity_section(data: RunData) -> Section | None:
    """How many replicas of the run's workloads would meet the default goal, predicted from its alone runs
    (``plan.capacity.capacity_of_run``, the lesson's exercise asks the same): when the run is on a GPU whose
    model has a committed probe, and is not itself a probe."""

    if not data.on_gpu or is_probe(data) or is_multi_probe(data) or data.manifest.profile == "simulated":
        return None
    try:
        answer = capacity_of_run(data.run.path)
    except KtsError:
        return None  # no committed probe for this GPU, no alone baseline: nothing to plan from
    best = ", ".join(f"{mode}: {n}" for mode, n in answer.largest.items())
    return Section("### Capacity\n\nHow many pods of this run's workloads (filled in turn) could share the GPU "
                   f"with at most {DEFAULT_SLOW_SHARE:.0%} of each pod's iterations slower than its alone p99 — "
                   "predicted from the alone baselines and the GPU's probe by `kts plan` (the shared logs are not "
                   f"used). Largest N meeting the goal: {best}; recommended: {answer.recommendation}. "
                   f"Multi-context rule: {answer.gpu_rule}.", [capacity_frame(answer)])
