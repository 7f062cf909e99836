"""The words of the report, written from the data: title, summary, environment, methods, caveats.

No number in the report is typed by hand: every figure in these sentences is computed from
the run, and every claim about what the figures show ("the tail moved more than the median") is made
only when the run's numbers bear it out. Text that goes into Markdown is HTML-escaped here (``esc``);
tables are escaped once, by ``present.notebook.table``, so their values stay raw here.
"""

from __future__ import annotations

import html
from typing import Any

import pandas as pd

from kts_helpers.analyse.blockseq import LOOKS, nominal_alphas
from kts_helpers.analyse.coverage import committed_p99_coverage
from kts_helpers.analyse.estimate import Estimate
from kts_helpers.analyse.load import RunData
from kts_helpers.analyse.rules import MIN_CORUNNING, SAMPLE_SIZE_RULE
from kts_helpers.analyse.summary import shared_pairs
from kts_helpers.analyse.verdict import (
    DEFAULT_MARGIN,
    EXCEEDANCE_MIN_N,
    PRIOR_DRIFT_SD,
    WEIGHTS_BY_DESIGN,
    collided_alpha,
    exceedance_alpha,
    faster_readings,
    no_change,
    slower_readings,
    small_faster,
    small_slower,
)
from kts_helpers.present import verdictline
from kts_helpers.present.tables import fmt_ci
from kts_helpers.run.workloads import KIT_WORKLOADS, REAL_MODELS

# The documentation's pages a report links to, relative to it: `make report` builds the site into <report dir>/docs.
METHODS_PAGE = "docs/methods/statistics.html"
VERDICT_PAGE = "docs/guide/reading-a-verdict.html"


def esc(value: Any) -> str:
    return html.escape(str(value), quote=True)


def title(data: RunData) -> str:
    m = data.manifest
    label = f" — {esc(m.label)}" if m.label else ""
    kind = "GPU" if m.on_gpu else "CPU"
    return (f"# What each tenant pays on a shared {kind}{label}\n\n"
            f"Run `{esc(data.run_id)}` · {esc(m.device_name or m.device)} · profile `{esc(m.profile)}` · "
            f"status **{esc(m.status)}** · created {esc(m.created_at or '?')}")


def _fmt(v: float, digits: int = 2) -> str:
    return "n/a" if v is None or v != v else f"{v:.{digits}f}"


def summary_paragraph(data: RunData, table: pd.DataFrame) -> str:
    """One paragraph: per tenant, median and tail alone vs shared, in wall and device time."""
    wall = table[table["metric"] == "wall"]
    dev = table[table["metric"] == "device"]
    sentences = []
    for tenant in wall["tenant"].unique():
        a = wall[(wall["tenant"] == tenant) & (wall["kind"] == "baseline")]
        s = wall[(wall["tenant"] == tenant) & (wall["kind"] == "shared")]
        if a.empty or s.empty:
            continue
        a, s = a.iloc[0], s.iloc[0]
        d = dev[(dev["tenant"] == tenant) & (dev["kind"] == "shared") & (dev["group"] == s["group"])]
        dev_df = d["df"].iloc[0] if not d.empty else float("nan")
        clock = "CUDA events" if data.on_gpu else "the operation's own time"
        device_part = (f"by device time ({clock}) DF {_fmt(dev_df)}{_verdict_words(d.iloc[0])}; "
                       if data.two_clocks and not d.empty else "")
        sentences.append(
            f"**{esc(tenant)}**: median wall latency {_fmt(a['p50_ms'])} ms alone vs {_fmt(s['p50_ms'])} ms shared, "
            f"p99 {_fmt(a['p99_ms'])} → {_fmt(s['p99_ms'])} ms, a wall-time degradation factor (DF) of "
            f"**{_fmt(s['df'])}×**{_verdict_words(s)}; {device_part}throughput changed by "
            f"{_fmt(100 * (s['throughput_per_s'] / a['throughput_per_s'] - 1), 1)} %.")
    n_tenants = wall[wall["kind"] == "shared"]["tenant"].nunique()
    if data.on_gpu:
        lead = (f"{n_tenants} tenants shared one GPU by time-slicing. The headline factor uses wall time (launch to "
                "completion), because that is what a caller waits for; device time is shown next to it because it "
                "misses the time a kernel waits for another context's time-slice. Device time is the GPU's time in "
                "the state the GPU was in, so a neighbour that keeps the GPU warm can shorten it.")
    else:
        lead = cpu_lead(data, n_tenants)
    if not sentences:
        return lead + "\n\nThis run has no pair of alone and shared measurements to compare yet."
    return lead + "\n\n" + "\n\n".join(f"- {s}" for s in sentences)


def _verdict_words(row: pd.Series) -> str:
    """", verdict *degraded* (collided 22 of 25 ...)": the word and the number that decided it
    (``verdictline.decided_by``), so a DF beside the word never stands in for the test that decided."""
    v = row.get("verdict")
    if v is not None:
        return f", verdict *{esc(v.reading)}* ({esc(verdictline.decided_by(v))})"
    reading = row.get("reading")
    return f" ({esc(reading)})" if isinstance(reading, str) else ""


def cpu_lead(data: RunData, n_tenants: int) -> str:
    """The first words of a CPU report: what it shows (the harness under CPU contention) and what it does not."""
    m = data.manifest
    threads = m.spec.resolved.get("threads")
    cores = m.environment.get("cpu_count")
    each = f", {threads} thread{'s' if threads != 1 else ''} each," if threads else ""
    pinned = m.spec.resolved.get("cpu_core") is not None
    on = (f"one core of this machine's {cores}" if pinned and cores else "one core" if pinned else
          f"this machine's {cores} CPU cores" if cores else "this machine's CPU cores")
    clocks = ("Wall time starts when an operation was due, device time when it started, so the wait for the core "
              "is their difference." if data.two_clocks else
              "This run's worker wrote one number for both clocks (before 2026-12-01), so only wall time is shown.")
    return (f"**This run used the CPU stand-in.** It demonstrates CPU contention of the same harness — the same "
            "workers, co-running rule, statistics and report — not GPU time-slicing: its numbers say nothing about "
            f"what a GPU's tenants pay. {n_tenants} tenants{each} shared {on} through the operating system's "
            f"scheduler. {clocks}")


def _pct(new: float, old: float) -> str:
    return "n/a" if not old or old != old or new != new else f"{100 * (new / old - 1):+.0f} %"


def at_a_glance(table: pd.DataFrame, metric: str = "wall") -> str:
    """What the alone-vs-shared figure shows, from its own numbers: each tenant's change in median, p99 and
    throughput, then the article's reading — the tail moves more than the median, throughput (a mean) hides
    it — only for the tenants for which it holds, and plainly when no tail moved."""
    pairs = shared_pairs(table, metric)
    if not pairs:
        return "No tenant has both an alone and a shared measurement."
    changes = "; ".join(f"**{esc(s['tenant'])}** median {_pct(s['p50_ms'], a['p50_ms'])}, p99 "
                        f"{_pct(s['p99_ms'], a['p99_ms'])}, throughput {_pct(s['throughput_per_s'], a['throughput_per_s'])}"
                        for a, s in pairs)
    out = [f"From alone to shared ({metric} time): {changes}."]
    worse = [(a, s) for a, s in pairs if _reading(s) in slower_readings()]
    better = [s["tenant"] for _, s in pairs if _reading(s) in faster_readings()]
    if worse:
        def rel(new: float, old: float) -> float:
            return abs(new / old - 1) if old else float("nan")

        tail = [s["tenant"] for a, s in worse if rel(s["p99_ms"], a["p99_ms"]) > 2 * rel(s["p50_ms"], a["p50_ms"])]
        whole = [s["tenant"] for a, s in worse if s["tenant"] not in tail]
        hidden = [s["tenant"] for a, s in worse
                  if rel(s["throughput_per_s"], a["throughput_per_s"]) < rel(s["p99_ms"], a["p99_ms"]) / 2]
        if tail:
            out.append(f"For {_names(tail)} the tail moved more than twice as much as the median.")
        if whole:
            out.append(f"For {_names(whole)} the whole distribution moved: the median about as much as the tail.")
        if hidden:
            out.append(f"Throughput, a mean, moved less than half as much as the p99 for {_names(hidden)}: it "
                       "hides the cost in the tail.")
    else:
        out.append("No tenant's verdict reads a slowdown (no test of DF, the medians, the tail's shape or the "
                   "collided launches decided against drift): in this run sharing cost no detectable latency.")
    if better:
        out.append(f"{_names(better)} ran faster when shared (by the verdict's rule); the clocks section says "
                   "whether an idle baseline ran at lower clocks.")
    return " ".join(out)


def _reading(row: pd.Series | dict) -> str | None:
    """A shared row's verdict (``reading``)."""
    return row.get("reading")


def sample_size(table: pd.DataFrame) -> str:
    """The sample-size notes of the wall-time rows, each note said once with the series it applies to."""
    notes = table[(table["metric"] == "wall") & table["sample_note"].notna()] if "sample_note" in table else table[:0]
    if notes.empty:
        return ""
    by_note: dict[str, list[str]] = {}
    for r in notes.itertuples():
        by_note.setdefault(str(r.sample_note), []).append(f"{r.tenant} ({r.group})")
    return f"**Sample size.** {esc(SAMPLE_SIZE_RULE)} " + " ".join(f"{esc(', '.join(who))}: {esc(note)}."
                                                                for note, who in by_note.items())


def _names(tenants: list[str]) -> str:
    names = [f"**{esc(t)}**" for t in dict.fromkeys(tenants)]
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def device_intro(data: RunData) -> str:
    """What the device-time table is; on a CPU, why there is none."""
    if data.on_gpu:
        return ("The same measurement by **device time** (CUDA events), the article's metric. Events are recorded "
                "inside the tenant's own context, so they do not see the time its work waits for another "
                "context's time-slice:")
    if data.two_clocks:
        return ("The same measurement by **device time**: on a CPU, the operation's own time from its start to "
                "its end. The wall clock starts earlier, when the operation was due, so device time does not "
                "see the wait for the core while the neighbour holds it:")
    return ("*This CPU run's worker wrote one number for both clocks (before 2026-12-01): a device-time table "
            "would repeat the one above and is left out.*")


def decomposition_text(data: RunData, table: pd.DataFrame) -> str:
    """Wall = device + wait + floor, and what this run's numbers say about it (on a CPU: nothing to split)."""
    if not data.two_clocks:
        return ("This CPU run's worker wrote one number for both clocks (before 2026-12-01): the wait is zero by "
                "construction, so there is nothing to split and the figure is left out.")
    out = ["Wall time = device time (the kernel running) + wait (everything else the caller waits for: launch, "
           "queueing, and on a shared GPU the other contexts' time-slices) + the tool's overhead floor." if data.on_gpu
           else "Wall time = device time (the operation running) + wait (from when it was due until it started: "
           "the sleep's overshoot and, shared, the neighbour holding the core) + the tool's overhead floor."]
    dev = {(s["tenant"], s["group"]): (a, s) for a, s in shared_pairs(table, "device")}
    grew = []
    for a, s in shared_pairs(table, "wait"):
        d = dev.get((s["tenant"], s["group"]))
        if d is None:
            continue
        da, ds = d
        out.append(f"**{esc(s['tenant'])}** ({esc(s['group'])}): p99 wait {_fmt(a['p99_ms'], 3)} → "
                   f"{_fmt(s['p99_ms'], 3)} ms, p99 device time {_fmt(da['p99_ms'], 3)} → {_fmt(ds['p99_ms'], 3)} ms.")
        if s["p99_ms"] - a["p99_ms"] > abs(ds["p99_ms"] - da["p99_ms"]):
            grew.append(s["tenant"])
    if grew:
        out.append(f"For {_names(grew)} the wait grew more than the device time changed: the cost of sharing lies "
                   "outside the kernel, where " + ("CUDA events" if data.on_gpu else "the operation's own timer")
                   + " cannot see it.")
    return " ".join(out)


def environment_table(data: RunData) -> pd.DataFrame:
    m = data.manifest
    env = m.environment
    git = env.get("git", {}) or {}
    rows: list[tuple[str, Any]] = [
        ("run id", data.run_id), ("label", m.label or "—"), ("status", m.status),
        ("created", m.created_at), ("backend", m.backend), ("profile", m.profile), ("device", m.device),
        ("GPU / CPU", m.device_name), ("GPU UUID", env.get("gpu_uuid")),
        ("GPU memory (GiB)", env.get("device_memory_gib")), ("driver", env.get("driver")),
        ("CUDA (torch build)", env.get("torch_cuda")), ("torch", env.get("torch")), ("python", env.get("python")),
        ("compute mode", env.get("compute_mode_name")), ("max SM clock (MHz)", env.get("max_sm_clock_mhz")),
        ("host", env.get("hostname")), ("git commit", f"{git.get('commit')}{' (dirty)' if git.get('dirty') else ''}"),
        ("overhead floor (ms)", m.calibration.get("floor_ms")),
    ]
    if env.get("backend") == "kubernetes":  # what setup's describe() saw on the cluster
        rows += [("Kubernetes", env.get("summary")), ("context", env.get("context")),
                 ("namespace", env.get("namespace")), ("node", env.get("node")), ("image", env.get("image")),
                 ("GPU resource", env.get("gpu_resource")), ("sharing strategy", env.get("sharing_strategy")),
                 ("replicas", env.get("replicas")), ("Kueue queue", env.get("queue"))]
    for key, value in sorted(m.spec.resolved.items()):
        rows.append((f"parameter: {key}", value))
    # raw text: the table is escaped once, where it is rendered (present.notebook.table)
    return pd.DataFrame([(k, _plain(v)) for k, v in rows if v is not None], columns=["item", "value"])


def _plain(value: Any) -> str:
    """A value as a reader writes it: lists as "a, b", not as Python's repr."""
    if isinstance(value, (list, tuple)):
        return ", ".join(str(v) for v in value)
    if isinstance(value, dict):
        return ", ".join(f"{k}: {v}" for k, v in value.items())
    return str(value)


def _coverage_text() -> str:
    """The committed grid's worst p99 cell at n = 800 per method (``analyse.coverage``), as one sentence."""
    rows = committed_p99_coverage(800)
    if not rows:
        return ""
    parts = [f"{'the order-statistic interval' if r.method == 'order' else f'the {r.method} bootstrap'} "
             f"{r.worst:.3f} ({esc(r.worst_series)}; its upper bound below the truth in {100 * r.worst_above:.1f} %)"
             for r in rows]
    return (f" On the committed coverage grid (`make bench`; {rows[0].cells} series types at n = 800, bursty, "
            f"periodic and random collisions, heavy tails, slow drift) the worst cell for a p99 covers: "
            f"{'; '.join(parts)}.")


def verdict_rule_text(margin: float = DEFAULT_MARGIN) -> str:
    """The verdict rule as the report states it (``analyse.verdict`` is its one home; this is its wording)."""
    blocks = WEIGHTS_BY_DESIGN["blocks"]
    bracketed = WEIGHTS_BY_DESIGN["bracketed"]
    one = WEIGHTS_BY_DESIGN["one block, timestamps"]
    schedule = LOOKS
    alphas = nominal_alphas(tuple(schedule), 0.025)

    def pct(v: float) -> str:
        return f"{100 * v:g} %"

    return (f"**Verdicts.** One per tenant and clock, from tests that share its one-sided 2.5 % by weight "
            f"(Bonferroni), the weights following what the design can measure, and all carry the drift between "
            f"moments. *Many blocks* (the warm design: alone and shared blocks alternating): each shared block's "
            f"median against its neighbouring alone blocks, by a regression on the blocks' instants and by the local "
            f"pairing ({pct(blocks['level'])} of the level); where the workers probed the host, each block's median "
            f"host probe enters both as a covariate (the effect then sharing's at equal host speed; the words name "
            f"the slope), unless the probe's balance check finds that sharing moved it -- then nothing is adjusted "
            f"and the host's part is reported apart; the tail's shape per block (log p95 / p50 in one window of the "
            f"shortest block's length, the blocks' scatter its between-block term: {pct(blocks['block tail'])}), the "
            f"pooled tail, DF and the same-moment control (the collided launches' tail and median) the rest. "
            f"*blocks=auto* (the default): the verdicts are read after {schedule[0]} shared blocks and every "
            f"{schedule[1] - schedule[0]} more, at most {schedule[-1]}, each look at its own level (alpha spending "
            f"alpha t: {', '.join(f'{100 * a:.2g} %' for a in alphas)} one-sided), and the run stops once every "
            f"verdict has decided or its budget ends (1.5x the first look's time); the report reads the look that "
            f"stopped it, each sharing mode at its share of the level. *Bracketed* (3 alone, 2 shared blocks): DF "
            f"widened by the blocks' own scatter of their p99 ({pct(bracketed['DF'])}), the blocks' medians "
            f"({pct(bracketed['level'])}), the tail's shape block by block, its scatter between blocks the test's "
            f"error term ({pct(bracketed['block tail'])}), and the same-moment control "
            f"({pct(bracketed['collided'] + bracketed['collided median'])}). *One alone block* (foreign logs, fresh "
            f"runs): nothing measures the drift, so DF and the medians carry the largest prior allowance "
            f"({pct(PRIOR_DRIFT_SD)} per block, whatever the tenant), the tail's shape the pooled test (each block "
            f"scaled to its median, slower than the alone p99 more often: p ≤ {exceedance_alpha():g}); with the "
            f"neighbours' timestamps the launches "
            f"that found a neighbour's operation in flight against the same block's clear ones -- drift-free -- get "
            f"{pct(one['collided'] + one['collided median'])} (p ≤ {collided_alpha(design='one block, timestamps'):g} "
            f"for their tail). A slowdown whose size is at least 1 + {margin:g} reads *degraded*, a smaller one "
            f"*{small_slower(margin)}*; the mirror images read *faster when shared* and *{small_faster(margin)}*, "
            f"never beside a p99 that rose; evidence both ways reads *inconclusive*; each table gives the number that decided (*decided by*). *{no_change(margin)}* when two "
            f"one-sided tests put the block-paired median within ±{100 * margin:g} % of alone, the tail's shape moved "
            f"neither way and the p99 stayed within the margin too (DF inside it, neither p99 tail test reading a "
            f"change) -- with one or three alone blocks, when the shared p99 itself is within the margin (tail "
            f"shares, drift allowed for). The report's verdicts are one family: each tenant's wall clock is its "
            f"primary verdict, the device clock a secondary (a graphical procedure: Holm among the wall clocks, each "
            f"holding 80 % of its tenant's share and its device clock 20 %, a decided wall clock handing its level to "
            f"its own device clock), so a report with no "
            f"effect shows a false slowdown in at most 2.5 % of runs, and a false speed-up in as few; the further "
            f"tables quote these words. A decided verdict is sized by DF, or by the medians' ratio where the medians "
            f"decided and moved further. Below {MIN_CORUNNING} co-running samples DF is not read and the tail tests "
            f"decide at a quarter of their weight; below {EXCEEDANCE_MIN_N} only the block-paired median decides, "
            "where there are blocks. Its false alarms and power are measured on the kit's generators, with drift, "
            "a two-state host and the looks (*Statistics* in the kit's documentation; `make bench`). What each word "
            f"means, with an example: [Reading a verdict]({VERDICT_PAGE}).")


def _intervals_text(n_resamples: int | None, method: str | None) -> str:
    if not n_resamples and not method:
        return "No confidence intervals were computed for this rendering."
    if method in (None, "order"):
        return ("Intervals are 95 % **order-statistic** intervals: the binomial ranks of the quantile (as "
                "`scipy.stats.quantile_test`), taken at the effective sample size n / τ (the upper one rounded out to "
                "whole effective samples), where τ and its degrees of freedom come from the exceedance indicator at and around the quantile — how often and in what "
                "clusters the series exceeds it — not from the bulk's drift; so they hold for autocorrelated, "
                f"bursty iterations. {SAMPLE_SIZE_RULE} Where the data hold no bound, the tables say \"≥ x; no upper "
                "bound at E effective of n = N\" (E the effective samples that decided) instead of printing one "
                "that is too tight. DF, jitter and the throughput change combine two such intervals (MOVER on "
                "the log scale; the throughput's from Student-t intervals of the means)." + _coverage_text() +
                " The bootstrap stays available (`make report SET=interval=bootstrap`).")
    return (f"Intervals are 95 % percentile **{method}** bootstrap intervals from {n_resamples:,} resamples, "
            "requested for comparison: a percentile bootstrap of a p99 cannot reach beyond the few largest "
            "samples, so its upper bound is too low where the true p99 lies beyond them." + _coverage_text() +
            " DF's bootstrap interval is therefore not read: the verdicts rest on the exceedance test and on DF's "
            "equivalence margin only.")


def _trim_text(trim_effect: pd.DataFrame | None) -> str:
    if trim_effect is None:
        return ""
    if trim_effect.empty:
        return " No shared row to compare with and without the cut."
    moved = trim_effect[trim_effect["differs"]]
    if moved.empty:
        return (" Undoing the cut moves no DF by more than its interval's half-width "
                f"({len(trim_effect)} shared rows compared).")
    items = "; ".join(f"{esc(r.tenant)} ({esc(r.metric)}, {esc(r.group)}): {fmt_ci(Estimate.from_row(r, 'df'), 2)} with the "
                      f"cut, {_fmt(r.df_untrimmed)} without" for r in moved.itertuples())
    return f" **The cut changes DF by more than its interval's half-width** for {items}."


def _projected(r: Any) -> str:
    n = getattr(r, "projected_n", None)
    return "" if n is None or pd.isna(n) else f" (≈ {int(n)} for the target)"


def stopping_text(stopping: pd.DataFrame) -> str:
    """The Methods paragraph on how many timed iterations ran: the rule, and (auto) n reached and why per tenant."""
    if stopping is None or stopping.empty:
        return ""
    auto = stopping[stopping["rule"] == "auto"]
    if auto.empty:
        ns = sorted({int(n) for n in stopping["n"].dropna()})
        shared = stopping[~stopping["scenario"].astype(str).str.startswith("baseline")]
        alone = stopping[stopping["scenario"].astype(str).str.startswith("baseline")]
        looked = [f"{r.tenant} {int(r.n)} ({r.reason})" for r in shared.itertuples()]
        if not alone.empty and (set(shared["n"].dropna().astype(int)) - set(alone["n"].dropna().astype(int)) or any(
                "look" in str(r) for r in shared["reason"])):
            return ("\n\n**Iterations (interim looks).** Alone, every tenant ran a fixed number of timed iterations "
                    f"({', '.join(map(str, sorted(set(alone['n'].dropna().astype(int)))))}); shared, a tenant could time "
                    "on to `shared_max_factor` times that while its verdict was undecided: at each look it kept its load "
                    "on while the verdict was read at 99.8 % (Haybittle-Peto), stopping if it decided; a tenant at its "
                    "maximum is read at 95 % like a fixed design. The shared and alone series therefore differ in "
                    f"length: {'; '.join(looked)}.")
        return ("\n\n**Iterations.** Every tenant ran a fixed number of timed iterations "
                f"({', '.join(map(str, ns))}).")
    target = float(auto["target"].dropna().iloc[0]) if auto["target"].notna().any() else float("nan")

    def bound(v: Any) -> str:
        return "none" if v is None or pd.isna(v) else _fmt(v, 3)

    rows = "\n".join(
        f"| {esc(r.scenario)} | {esc(r.tenant)} | {int(r.n)} | {esc(r.reason)} | {_fmt(r.elapsed_s, 1)} | "
        f"{_fmt(r.p99_ms, 3)} [{bound(r.p99_lo_ms)}, {bound(r.p99_hi_ms)}] | "
        f"{'—' if r.half_width is None or pd.isna(r.half_width) else f'±{100 * r.half_width:.1f} %'}"
        f"{_projected(r)} |" for r in stopping.itertuples())
    return f"""

**Iterations (stopping rule).** `iterations=auto`: each tenant, alone and shared alike, ran until the 95 % interval
of its p99 wall time (every phase; the order-statistic interval of *Statistics* below, computed by the worker
itself every 5 % of growth from 300 iterations on) lay within ±{100 * target:.0f} % of the estimate on both sides,
or its time or iteration cap was reached; its neighbours kept padding meanwhile. n reached and why it stopped:

| scenario | tenant | n | stopped because | timed s | p99 ms [95 % interval] at the stop | reached |
|---|---|---|---|---|---|---|
{rows}"""



def methods(data: RunData, *, trim: int, clip: bool, n_resamples: int | None, method: str | None,
            warmup: str = "none", trim_effect: pd.DataFrame | None = None, margin: float = DEFAULT_MARGIN) -> str:
    cal = data.manifest.calibration
    floor = cal.get("floor_ms")
    ci = _intervals_text(n_resamples, method)
    dropped = int(data.dropped["dropped"].sum()) if not data.dropped.empty else 0
    unsteady = int((data.dropped["mser5_point"].fillna(0) > 0).sum()) if "mser5_point" in data.dropped else 0
    if warmup == "mser5-paired":
        trimming = ("each tenant's alone and shared series lose the *same* number of leading iterations: the "
                    "largest MSER-5 truncation point over that tenant's series (MSER-5: the cut that minimises "
                    "the standard error of the remaining mean over batches of 5), at most 20 % of the shortest"
                    + (f", and at least the fixed {trim}" if trim else ""))
    else:
        trimming = (f"every series drops the same fixed number, its first {trim}" if trim else
                    "no timed iteration is dropped")
    corun = ("Shared scenarios count only iterations that ran while every neighbour was active: the window "
             "[latest first start, earliest last end] over the tenants' raw log lines, computed before any "
             "trimming. Each worker pads — runs the same operation at the same cadence, logged with phase "
             "`pad` and never counted — for a short lead-in after the start barrier and, once its own timed "
             "iterations are done, until every tenant has finished, so by construction every timed shared "
             "iteration co-runs; the table above counts them." if clip else
             "Overlap clipping was turned off: shared statistics include iterations that ran while a neighbour "
             "had not started or had finished.")
    return f"""
**Timing.** Each worker times every iteration three ways: CUDA events around the operation (*device* time, what
the GPU spent once the tenant's context ran), the host's monotonic clock from launch to `synchronize()` (*wall*
time, what the caller waited), and their difference less the tool's own overhead floor (*wait*). The floor is the
median wall − device gap of a one-element kernel timed by the same loop ({_fmt(floor, 4) if floor is not None else "n/a"} ms
here, {cal.get("n", 0)} samples). On a CPU the wall clock starts when the operation was due (the sleep before it
ended), since a CPU tenant waits for its core before it can start; device time is the operation's own time.

**Co-running.** {corun} A tenant's shared series with fewer than **{MIN_CORUNNING}** co-running samples gets
no DF reading: below that many samples no distribution-free two-sided 95 % interval of a p99 exists
(0.99^n > 0.025), so its p99 is little more than the sample maximum (the verdict may still come from the
exceedance test, below).

**Warm-up and trimming.** Untimed warm-up iterations run before the tenants' shared start barrier. Of the timed
iterations, {trimming}: {dropped} iterations in all (per series in the table below). A data-driven rule is never
applied to one series alone: it could cut away the contention being measured, and cut a tenant's alone and shared
series differently. MSER-5 is computed for every series as a diagnostic; {unsteady} series are not stationary by
it (column `diagnostic`).{_trim_text(trim_effect)}

**Statistics.** Percentiles use numpy's default linear interpolation. Jitter = p99 / p50. Throughput is the
article's proxy, 1000 / mean latency (iterations per second), not a served request rate. The degradation factor
is DF = shared p99 / alone p99 of the same tenant. {ci}

{verdict_rule_text(margin)}{stopping_text(data.stopping)}

The methods in full, with the coverage, power and false alarms measured for every rule above:
[Statistics]({METHODS_PAGE}) in the kit's documentation (`make report` builds it next to the report; `make docs`).
"""


def _workloads_caveat(workloads: tuple[str, ...]) -> str:
    """What the tenants stand for: the kit's synthetic kernels, real model definitions, or a user's own factories."""
    kit = [w for w in workloads if w in KIT_WORKLOADS]
    real = [w for w in workloads if w in REAL_MODELS]
    own = [w for w in workloads if w not in KIT_WORKLOADS and w not in REAL_MODELS]
    if not workloads or (kit and not real and not own):
        return ("Workloads are synthetic stand-ins (an FFT for a small latency-sensitive agent, a GEMM for a heavy "
                "one); real agents' kernels differ in length and cadence.")
    parts = []
    if real:
        parts.append(f"{', '.join(real)}: real model definitions (transformers configs, random weights, closed loop); "
                     "a served model's batching and arrivals differ")
    if own:
        parts.append(f"{', '.join(own)}: the user's own workloads")
    if kit:
        parts.append(f"{', '.join(kit)}: the kit's synthetic stand-ins")
    return "Workloads: " + "; ".join(parts) + "."


def caveats(data: RunData) -> str:
    m = data.manifest
    items = []
    if m.device == "cpu":
        clocks = ("its wait is for the core, not for a GPU" if data.two_clocks else
                  "device time equals wall time (a worker before 2026-12-01), so the wait is zero")
        items.append("This run used the **CPU** stand-in: tenants share cores through the OS scheduler, not a GPU's "
                     f"time-slices; {clocks}, and no GPU telemetry exists.")
    items.append(_workloads_caveat(tuple(m.spec.resolved.get("workloads") or ())))
    items.append("Throughput is a proxy (1000 / mean latency of a closed loop), not an arrival process.")
    if m.spec.repeats == 1:
        items.append("One run per scenario: run-to-run variation (clocks, neighbours, thermal state) is not "
                     "captured by the intervals, which describe iteration-level noise only.")
    if data.problems:
        items.extend(esc(p) for p in data.problems)
    return "\n".join(f"- {i}" for i in items)
