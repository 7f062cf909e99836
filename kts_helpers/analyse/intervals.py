"""Confidence intervals for every number of the summary table, and the table views that show them.

Each row's samples come from ``rules.series_groups`` (so the intervals describe exactly the numbers in
the table); quantiles, DF, jitter and throughput change get their intervals from ``rules`` (``quantile``,
``degradation``, ``jitter``, ``throughput_change``: the order-statistic interval at the effective sample
size, ratios by MOVER). A bound the data do not hold is None in the table ("≥ lo, no upper bound").
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from kts_helpers.analyse import stats
from kts_helpers.analyse.rules import (
    ci_pair,
    degradation,
    df_reading,
    jitter,
    quantile,
    series_groups,
    series_label,
    throughput_change,
)
from kts_helpers.analyse.summary import baseline_row

CI_COLUMNS = ("p50_ci", "p95_ci", "p99_ci", "jitter_ci", "df_ci", "throughput_change", "throughput_change_ci",
              "block_length", "ess", "lag1", "sample_note", "ci_note")


def _pair(iv: stats.Interval | None) -> list[float | None] | None:
    return None if iv is None else ci_pair(iv.lo, iv.hi)


def add_intervals(table: pd.DataFrame, frame: pd.DataFrame, metric: str, *, n_resamples: int = 2000,
                  seed: int | None = 0, method: str = "order", confidence: float = 0.95) -> pd.DataFrame:
    """Add p50_ci/p95_ci/p99_ci/jitter_ci/df_ci/throughput_change_ci (two-element lists, None for a bound
    the data do not hold), the DF reading and sample-size notes; ``ess`` and ``lag1`` are the p99's."""
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
                ess = float(iv.ess) if isinstance(iv.ess, float) else stats.effective_sample_size(x) \
                    if len(x) >= 3 else float(len(x))
                out.at[i, "ess"] = ess
                out.at[i, "lag1"] = iv.lag1
        out.at[i, "jitter_ci"] = _pair(jitter(runs, **opts))
        out.at[i, "sample_note"] = stats.sample_size_warning(len(x), 0.99, ess=ess)
        if shared_ratio:
            base = baseline_row(out, row)
            alone = (samples[(base["kind"], base["group"], base["sharing"], base["tenant"], base["phase"])]
                     if base is not None else [])
            d = degradation(runs, alone, 0.99, **opts)
            out.at[i, "df_ci"] = d.ci
            out.at[i, "df_reading"] = d.reading
            change = throughput_change(runs, alone, **opts)
            if change is not None:
                out.at[i, "throughput_change"] = change.estimate
                out.at[i, "throughput_change_ci"] = _pair(change)
    return out


def add_all_intervals(table: pd.DataFrame, frame: pd.DataFrame, metrics: tuple[str, ...] = ("wall", "device"),
                      **options: object) -> pd.DataFrame:
    for metric in metrics:
        table = add_intervals(table, frame, metric, **options)  # type: ignore[arg-type]
    return table


def fmt_ci(v: float, ci: list[float | None] | None, digits: int = 3, *, n: int | None = None,
           scale: float = 1.0, unit: str = "") -> str:
    """"v [lo, hi]", or "v [≥ lo; no upper bound at n = N]" where the data hold no upper bound (and the
    mirror for a lower one), "v" without an interval, "—" without a value: how every table shows a number."""
    if v is None or v != v:
        return "—"

    def f(x: float) -> str:
        return f"{scale * x:{'+' if unit else ''}.{digits}f}{unit}"

    if not ci:
        return f(v)
    lo, hi = ci
    at = f" at n = {n}" if n else ""
    if lo is not None and hi is not None:
        return f"{f(v)} [{f(lo)}, {f(hi)}]"
    if lo is not None:
        return f"{f(v)} [≥ {f(lo)}; no upper bound{at}]"
    return f"{f(v)} [≤ {f(hi)}; no lower bound{at}]"


def headline(table: pd.DataFrame, metric: str = "wall") -> pd.DataFrame:
    """The report's headline table: one row per tenant and scenario group, numbers with their intervals."""
    t = table[table["metric"] == metric]
    rows = []
    for _, r in t.iterrows():
        base = baseline_row(table, r) if r["kind"] == "shared" else None
        change = (r["throughput_per_s"] / base["throughput_per_s"] - 1 if base is not None else float("nan"))
        shared = r["kind"] == "shared"
        n = int(r["n"])
        rows.append({
            "tenant": series_label(r["tenant"], r["phase"]),
            "scenario group": r["group"], "sharing": r["sharing"], "n": r["n"],
            "p50 ms [95% CI]": fmt_ci(r["p50_ms"], r.get("p50_ci"), n=n),
            "p95 ms [95% CI]": fmt_ci(r["p95_ms"], r.get("p95_ci"), n=n),
            "p99 ms [95% CI]": fmt_ci(r["p99_ms"], r.get("p99_ci"), n=n),
            "jitter p99/p50": fmt_ci(r["jitter"], r.get("jitter_ci"), n=n),
            "throughput change [95% CI]": fmt_ci(change, r.get("throughput_change_ci"), 1, scale=100, unit=" %"),
            "DF [95% CI]": fmt_ci(r["df"], r.get("df_ci")) if shared else "—",
            "reading": (r.get("df_reading") or "—") if shared else "—",
        })
    return pd.DataFrame(rows)


def forest_frame(table: pd.DataFrame, metrics: tuple[str, ...] = ("wall", "device")) -> pd.DataFrame:
    """DF and its interval per shared tenant and metric, for the forest plot; a DF whose data hold no bound on a
    side (or none at all, at n = 300) is drawn with that side open, not left out."""
    rows = []
    for _, r in table[(table["kind"] == "shared") & table["metric"].isin(metrics)].iterrows():
        ci = r.get("df_ci")
        ci = ci if isinstance(ci, (list, tuple)) and len(ci) == 2 else (None, None)
        if r["df"] == r["df"]:
            label = series_label(r["tenant"], r["phase"])
            scen = "" if r["group"] == "shared" else f" · {r['group']}"
            rows.append({"tenant": label + scen, "metric": r["metric"], "df": r["df"],
                         "df_lo": -np.inf if ci[0] is None else ci[0], "df_hi": np.inf if ci[1] is None else ci[1],
                         "reading": r.get("df_reading")})
    return pd.DataFrame(rows)


def trim_effect(trimmed: pd.DataFrame, untrimmed: pd.DataFrame,
                metrics: tuple[str, ...] = ("wall", "device")) -> pd.DataFrame:
    """DF with and without the warm-up cut, per shared row; ``differs`` where the two are further apart than
    the trimmed DF interval's half-width (the Methods section then shows both).

    A missing bound makes that side's half-width the distance to the other bound; no bound at all: inf.
    """
    key = ["kind", "group", "sharing", "tenant", "phase", "metric"]
    other = untrimmed.set_index(key)
    rows = []
    for _, r in trimmed[(trimmed["kind"] == "shared") & trimmed["metric"].isin(metrics)].iterrows():
        k = tuple(r[c] for c in key)
        if k not in other.index or r["df"] != r["df"]:
            continue
        ci = r.get("df_ci") or [None, None]
        ends = [abs(b - r["df"]) for b in ci if b is not None]
        half = (ci[1] - ci[0]) / 2 if len(ends) == 2 else ends[0] if ends else np.inf
        untrim = float(other.loc[k, "df"]) if not isinstance(other.loc[k, "df"], pd.Series) else float(
            other.loc[k, "df"].iloc[0])
        rows.append({"tenant": r["tenant"], "group": r["group"], "metric": r["metric"], "df": r["df"],
                     "df_ci": r.get("df_ci"), "df_untrimmed": untrim, "half_width": half,
                     "differs": bool(abs(r["df"] - untrim) > half)})
    return pd.DataFrame(rows, columns=["tenant", "group", "metric", "df", "df_ci", "df_untrimmed", "half_width",
                                       "differs"])
