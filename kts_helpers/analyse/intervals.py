"""Confidence intervals for every number of the summary table, and the table views that show them.

Each row's samples come from ``rules.series_groups`` (so the intervals describe exactly the numbers in
the table); quantiles and DF get their intervals from ``rules.quantile`` and ``rules.degradation`` (one
run: stationary block bootstrap; repeats: two-level), jitter from ``stats.jitter_ci`` (both quantiles
from one resample).
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd

from kts_helpers.analyse import stats
from kts_helpers.analyse.rules import degradation, df_reading, quantile, series_groups
from kts_helpers.analyse.summary import baseline_row

CI_COLUMNS = ("p50_ci", "p95_ci", "p99_ci", "jitter_ci", "df_ci", "block_length", "ess", "sample_note", "ci_note")


def _pair(iv: stats.Interval) -> list[float] | None:
    return [float(iv.lo), float(iv.hi)] if np.isfinite(iv.lo) and np.isfinite(iv.hi) else None


def add_intervals(table: pd.DataFrame, frame: pd.DataFrame, metric: str, *, n_resamples: int = 2000,
                  seed: int | None = 0, method: str = "stationary", confidence: float = 0.95) -> pd.DataFrame:
    """Add p50_ci/p95_ci/p99_ci/jitter_ci/df_ci (two-element lists), the DF reading and sample-size notes."""
    out = table.copy()
    samples = {(k["kind"], k["group"], k["sharing"], k["tenant"], k["phase"]): runs
               for k, runs in series_groups(frame, metric)}
    for col in CI_COLUMNS + ("df_reading",):
        if col not in out:
            out[col] = None
    opts = {"n_resamples": n_resamples, "seed": seed, "method": method, "confidence": confidence}
    for i, row in out.iterrows():
        if row["metric"] != metric:
            continue
        runs = [r for r in samples[(row["kind"], row["group"], row["sharing"], row["tenant"], row["phase"])] if len(r)]
        x = np.concatenate(runs) if runs else np.zeros(0)
        shared_ratio = row["kind"] == "shared" and metric != "wait"  # a wait is often 0: no ratio interval
        if len(x) < 2:  # nothing to resample: the row stays, saying why
            if shared_ratio:
                out.at[i, "df_reading"] = df_reading(len(x), None)
            continue
        for q, col in ((0.50, "p50_ci"), (0.95, "p95_ci"), (0.99, "p99_ci")):
            iv = quantile(runs, q, **opts)
            out.at[i, col] = _pair(iv)
            if q == 0.99:
                out.at[i, "block_length"] = iv.block_length
                out.at[i, "ci_note"] = iv.note or None
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", stats.ShortSeriesWarning)
            out.at[i, "jitter_ci"] = _pair(stats.jitter_ci(x, **opts)) if x.min() > 0 else None
        ess = stats.effective_sample_size(x) if len(x) >= 3 else float(len(x))
        out.at[i, "ess"] = ess
        out.at[i, "sample_note"] = stats.sample_size_warning(len(x), 0.99, ess=ess)
        if shared_ratio:
            base = baseline_row(out, row)
            alone = (samples[(base["kind"], base["group"], base["sharing"], base["tenant"], base["phase"])]
                     if base is not None else [])
            d = degradation(runs, alone, 0.99, **opts)
            out.at[i, "df_ci"] = d.ci
            out.at[i, "df_reading"] = d.reading
    return out


def add_all_intervals(table: pd.DataFrame, frame: pd.DataFrame, metrics: tuple[str, ...] = ("wall", "device"),
                      **options: object) -> pd.DataFrame:
    for metric in metrics:
        table = add_intervals(table, frame, metric, **options)  # type: ignore[arg-type]
    return table


def fmt_ci(v: float, ci: list[float] | None, digits: int = 3) -> str:
    """"v [lo, hi]" (or "v" without an interval, "—" without a value): how every table shows a number."""
    if v is None or v != v:
        return "—"
    return f"{v:.{digits}f} [{ci[0]:.{digits}f}, {ci[1]:.{digits}f}]" if ci else f"{v:.{digits}f}"


def headline(table: pd.DataFrame, metric: str = "wall") -> pd.DataFrame:
    """The report's headline table: one row per tenant and scenario group, numbers with their intervals."""
    t = table[table["metric"] == metric]
    rows = []
    for _, r in t.iterrows():
        base = baseline_row(table, r) if r["kind"] == "shared" else None
        change = (100 * (r["throughput_per_s"] / base["throughput_per_s"] - 1) if base is not None
                  else float("nan"))
        shared = r["kind"] == "shared"
        rows.append({
            "tenant": r["tenant"] + ("" if r["phase"] in ("op", "") else f" ({r['phase']})"),
            "scenario group": r["group"], "sharing": r["sharing"], "n": r["n"],
            "p50 ms [95% CI]": fmt_ci(r["p50_ms"], r.get("p50_ci")),
            "p95 ms [95% CI]": fmt_ci(r["p95_ms"], r.get("p95_ci")),
            "p99 ms [95% CI]": fmt_ci(r["p99_ms"], r.get("p99_ci")),
            "jitter p99/p50": fmt_ci(r["jitter"], r.get("jitter_ci")),
            "throughput change": f"{change:+.1f} %" if change == change else "—",
            "DF [95% CI]": fmt_ci(r["df"], r.get("df_ci")) if shared else "—",
            "reading": (r.get("df_reading") or "—") if shared else "—",
        })
    return pd.DataFrame(rows)


def forest_frame(table: pd.DataFrame, metrics: tuple[str, ...] = ("wall", "device")) -> pd.DataFrame:
    """DF and its interval per shared tenant and metric, for the forest plot."""
    rows = []
    for _, r in table[(table["kind"] == "shared") & table["metric"].isin(metrics)].iterrows():
        ci = r.get("df_ci")
        if r["df"] == r["df"] and ci:
            label = r["tenant"] + ("" if r["phase"] in ("op", "") else f" {r['phase']}")
            scen = "" if r["group"] == "shared" else f" · {r['group']}"
            rows.append({"tenant": label + scen, "metric": r["metric"], "df": r["df"], "df_lo": ci[0],
                         "df_hi": ci[1], "reading": r.get("df_reading")})
    return pd.DataFrame(rows)
