"""The words of the report, written from the data: title, summary, environment, methods, caveats.

No number in the report is typed by hand: every figure in these sentences is computed from
the run. Anything user-supplied (the run label) is HTML-escaped before it reaches the page.
"""

from __future__ import annotations

import html
from typing import Any

import pandas as pd

from kts_helpers.analyse.load import RunData


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
        verdict = f" ({s['df_reading']})" if isinstance(s.get("df_reading"), str) else ""
        on_gpu = data.on_gpu
        device_part = (f"measured by device time (CUDA events) alone the factor would be {_fmt(dev_df)}×, and "
                       if on_gpu else "")
        sentences.append(
            f"**{esc(tenant)}**: median wall latency {_fmt(a['p50_ms'])} ms alone vs {_fmt(s['p50_ms'])} ms shared, "
            f"p99 {_fmt(a['p99_ms'])} → {_fmt(s['p99_ms'])} ms, a wall-time degradation factor of "
            f"**{_fmt(s['df'])}×**{verdict}; {device_part}throughput changed by "
            f"{_fmt(100 * (s['throughput_per_s'] / a['throughput_per_s'] - 1), 1)} %.")
    if not sentences:
        return "This run has no pair of alone and shared measurements to compare yet."
    n_tenants = wall[wall["kind"] == "shared"]["tenant"].nunique()
    if data.on_gpu:
        lead = (f"{n_tenants} tenants shared one GPU by time-slicing. The headline factor uses wall time (launch to "
                "completion), because that is what a caller waits for; device time is shown next to it because it "
                "misses the time a kernel waits for another context's time-slice.")
    else:
        lead = (f"{n_tenants} tenants shared this machine's CPU cores through the operating system's scheduler (the "
                "CPU stand-in for a GPU's time-slices). There are no CUDA events on a CPU: device time equals wall "
                "time, so only wall time is discussed.")
    return lead + "\n\n" + "\n\n".join(f"- {s}" for s in sentences)


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
    return pd.DataFrame([(k, esc(v)) for k, v in rows if v is not None], columns=["item", "value"])


def _intervals_text(n_resamples: int | None, method: str | None) -> str:
    from kts_helpers.analyse.orderstat import TESTED_MAX_LAG1, TESTED_MIN_N

    if not n_resamples and not method:
        return "No confidence intervals were computed for this rendering."
    if method in (None, "order"):
        return ("Intervals are 95 % **order-statistic** intervals: the binomial ranks of the quantile (as "
                "`scipy.stats.quantile_test`), taken at the effective sample size of the exceedance indicator — its "
                "autocorrelation summed by Geyer's initial positive sequence, with a Student-t allowance for "
                "estimating it — so they hold for autocorrelated iterations. Where the data hold no bound at 95 % "
                "(an upper bound of a p99 needs about 367 effective samples), the tables say \"≥ x; no upper "
                "bound\" instead of printing one that is too tight. DF, jitter and the throughput change combine "
                "two such intervals (MOVER on the log scale; the throughput's from Student-t intervals of the "
                f"means). Their coverage was measured on autocorrelated series at n = 300, 800 and 5000 (README, "
                f"`make bench`); a DF reading needs both series inside the measured range (n ≥ {TESTED_MIN_N}, "
                f"lag-1 autocorrelation ≤ {TESTED_MAX_LAG1}) and an interval bounded on the side that decides, "
                "else it reads \"insufficient data\" and says why.")
    return (f"Intervals are 95 % percentile **{method}** bootstrap intervals from {n_resamples:,} resamples, "
            "requested for comparison: their coverage of a p99 fails at the kit's sizes (README), so no DF "
            "reading rests on them (\"insufficient data\").")


def _trim_text(trim_effect: pd.DataFrame | None) -> str:
    if trim_effect is None:
        return ""
    if trim_effect.empty:
        return " No shared row to compare with and without the cut."
    from kts_helpers.analyse.intervals import fmt_ci

    moved = trim_effect[trim_effect["differs"]]
    if moved.empty:
        return (" Undoing the cut moves no DF by more than its interval's half-width "
                f"({len(trim_effect)} shared rows compared).")
    items = "; ".join(f"{esc(r.tenant)} ({esc(r.metric)}, {esc(r.group)}): {fmt_ci(r.df, r.df_ci, 2)} with the "
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
            warmup: str = "none", trim_effect: pd.DataFrame | None = None) -> str:
    from kts_helpers.analyse.rules import MIN_CORUNNING

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
here, {cal.get("n", 0)} samples). On a CPU, device time is wall time and the wait is zero by construction.

**Co-running.** {corun} A tenant's shared series with fewer than **{MIN_CORUNNING}** co-running samples gets
no DF reading ("insufficient co-running data"): below that many samples no distribution-free 95 % upper bound of
a p99 exists (0.99^n > 0.05), so its p99 is little more than the sample maximum.

**Warm-up and trimming.** Untimed warm-up iterations run before the tenants' shared start barrier. Of the timed
iterations, {trimming}: {dropped} iterations in all (per series in the table below). A data-driven rule is never
applied to one series alone: it could cut away the contention being measured, and cut a tenant's alone and shared
series differently. MSER-5 is computed for every series as a diagnostic; {unsteady} series are not stationary by
it (column `diagnostic`).{_trim_text(trim_effect)}

**Statistics.** Percentiles use numpy's default linear interpolation. Jitter = p99 / p50. Throughput is the
article's proxy, 1000 / mean latency (iterations per second), not a served request rate. The degradation factor
is DF = shared p99 / alone p99 of the same tenant. {ci}{stopping_text(data.stopping)}
"""


def caveats(data: RunData) -> str:
    m = data.manifest
    items = []
    if m.device == "cpu":
        items.append("This run used the **CPU** stand-in: tenants share cores through the OS scheduler, not a GPU's "
                     "time-slices; device time equals wall time, so the wait is zero and no GPU telemetry exists.")
    items.append("Workloads are synthetic stand-ins (an FFT for a small latency-sensitive agent, a GEMM for a heavy "
                 "one); real agents' kernels differ in length and cadence.")
    items.append("Throughput is a proxy (1000 / mean latency of a closed loop), not an arrival process.")
    if m.spec.repeats == 1:
        items.append("One run per scenario: run-to-run variation (clocks, neighbours, thermal state) is not "
                     "captured by the intervals, which describe iteration-level noise only.")
    if data.problems:
        items.extend(esc(p) for p in data.problems)
    return "\n".join(f"- {i}" for i in items)
