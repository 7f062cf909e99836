"""Confidence intervals for every number of the summary table, and the words that go with them.

Each row's samples come from ``analysis.series_groups`` (so the intervals describe exactly the
numbers in the table). One run per scenario: stationary block bootstrap over iterations; with
repeats: a two-level bootstrap (runs, then iterations within runs). DF resamples the alone and
shared series independently; jitter takes both quantiles from the same resample.
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd

from kts_helpers.analyse import stats
from kts_helpers.analyse.load import baseline_row, df_reading, series_groups


def _pair(iv: stats.Interval) -> list[float]:
    return [float(iv.lo), float(iv.hi)]


def add_intervals(table: pd.DataFrame, frame: pd.DataFrame, metric: str, *, n_resamples: int = 2000,
                  seed: int | None = 0, method: str = "stationary", confidence: float = 0.95) -> pd.DataFrame:
    """Add p50_ci/p95_ci/p99_ci/jitter_ci/df_ci (two-element lists), DF wording and sample-size checks."""
    out = table.copy()
    samples = {(k["scenario_kind"], k["scenario_group"], k["sharing"], k["tenant"], k["phase"]): runs
               for k, runs in series_groups(frame, metric)}
    for col in ("p50_ci", "p95_ci", "p99_ci", "jitter_ci", "df_ci", "block_length", "ess", "sample_note",
                "verdict", "ci_note", "df_reading"):
        if col not in out:
            out[col] = None
    opts = {"n_resamples": n_resamples, "seed": seed, "method": method, "confidence": confidence}
    for i, row in out.iterrows():
        if row["metric"] != metric:
            continue
        runs = [r for r in samples[(row["scenario"], row["scenario_name"], row["sharing"], row["tenant"],
                                    row["phase"])] if len(r)]
        x = np.concatenate(runs) if runs else np.zeros(0)
        shared_ratio = row["scenario"] == "shared" and metric != "wait"  # a wait is often 0: no ratio interval
        if len(x) < 2:  # nothing to resample: the row stays, saying why
            if shared_ratio:
                out.at[i, "verdict"] = out.at[i, "df_reading"] = df_reading(len(x), None)
            continue
        runs = [r for r in runs if len(r) >= 2] if len(runs) > 1 else runs
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", stats.ShortSeriesWarning)
            for q, col in ((0.50, "p50_ci"), (0.95, "p95_ci"), (0.99, "p99_ci")):
                iv = (stats.quantile_ci_runs(runs, q, **opts) if len(runs) > 1
                      else stats.quantile_interval(x, q, **opts))
                out.at[i, col] = _pair(iv)
                if q == 0.99:
                    out.at[i, "block_length"] = iv.block_length
                    out.at[i, "ci_note"] = iv.note or None
            out.at[i, "jitter_ci"] = _pair(stats.jitter_ci(x, **opts)) if x.min() > 0 else None
            ess = stats.effective_sample_size(x) if len(x) >= 3 else float(len(x))
            out.at[i, "ess"] = ess
            out.at[i, "sample_note"] = stats.sample_size_warning(len(x), 0.99, ess=ess)
            if shared_ratio:
                base = baseline_row(out, row)
                wording = None
                if base is not None:
                    bruns = [r for r in samples[(base["scenario"], base["scenario_name"], base["sharing"],
                                                 base["tenant"], base["phase"])] if len(r) >= 2]
                    if bruns:
                        iv = (stats.ratio_ci_runs(runs, bruns, 0.99, **opts) if len(runs) > 1 and len(bruns) > 1
                              else stats.ratio_ci(x, np.concatenate(bruns), 0.99, **opts))
                        out.at[i, "df_ci"] = _pair(iv)
                        wording = stats.df_wording(iv.lo, iv.hi)
                out.at[i, "verdict"] = out.at[i, "df_reading"] = df_reading(len(x), wording)
    return out


def add_all_intervals(table: pd.DataFrame, frame: pd.DataFrame, metrics: tuple[str, ...] = ("wall", "device"),
                      **options: object) -> pd.DataFrame:
    for metric in metrics:
        table = add_intervals(table, frame, metric, **options)  # type: ignore[arg-type]
    return table


def headline(table: pd.DataFrame, metric: str = "wall") -> pd.DataFrame:
    """The report's headline table: one row per tenant and scenario, numbers with their intervals."""
    t = table[table["metric"] == metric]

    def fmt(v: float, ci: list[float] | None) -> str:
        if v != v:
            return "—"
        return f"{v:.3f} [{ci[0]:.3f}, {ci[1]:.3f}]" if ci else f"{v:.3f}"

    rows = []
    for _, r in t.iterrows():
        base = baseline_row(table, r) if r["scenario"] == "shared" else None
        thr = (f"{100 * (r['throughput_per_s'] / base['throughput_per_s'] - 1):+.1f} %" if base is not None
               else "—")
        rows.append({
            "tenant": r["tenant"] + ("" if r["phase"] in ("op", "") else f" ({r['phase']})"),
            "scenario": r["scenario_name"], "sharing": r["sharing"], "n": r["n"],
            "p50 ms [95% CI]": fmt(r["p50_ms"], r.get("p50_ci")), "p95 ms [95% CI]": fmt(r["p95_ms"], r.get("p95_ci")),
            "p99 ms [95% CI]": fmt(r["p99_ms"], r.get("p99_ci")), "jitter p99/p50": fmt(r["jitter"], r.get("jitter_ci")),
            "throughput change": thr, "DF [95% CI]": fmt(r["df"], r.get("df_ci")) if r["scenario"] == "shared" else "—",
            "reading": r.get("verdict") or "—",
        })
    return pd.DataFrame(rows)


def forest_frame(table: pd.DataFrame, metrics: tuple[str, ...] = ("wall", "device")) -> pd.DataFrame:
    """DF and its interval per shared tenant and metric, for the forest plot."""
    rows = []
    for _, r in table[(table["scenario"] == "shared") & table["metric"].isin(metrics)].iterrows():
        ci = r.get("df_ci")
        if r["df"] == r["df"] and ci:
            label = r["tenant"] + ("" if r["phase"] in ("op", "") else f" {r['phase']}")
            scen = "" if r["scenario_name"] == "shared" else f" · {r['scenario_name']}"
            rows.append({"tenant": label + scen, "metric": r["metric"], "df": r["df"], "df_lo": ci[0],
                         "df_hi": ci[1], "verdict": r.get("verdict")})
    return pd.DataFrame(rows)
