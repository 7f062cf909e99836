"""Altair figures of the report, with one palette for tenants and one for alone/shared.

Rendering: in the report pipeline (``KTS_STATIC_CHARTS=1``) charts become inline SVG via
vl-convert, so the HTML needs no JavaScript from a CDN and renders offline. In JupyterLab
the default renderer keeps them interactive (brush on the timeline filters the tail plot).
"""

from __future__ import annotations

import os

import altair as alt
import numpy as np
import pandas as pd

SCENARIO_COLORS = {"alone": "#4C78A8", "shared": "#E45756"}
TENANT_PALETTE = ["#4C78A8", "#F58518", "#54A24B", "#B279A2", "#9D755D", "#72B7B2"]
WIDTH = 560


def use_renderer(mode: str = "auto") -> str:
    """svg for static reports (offline), default (interactive) in JupyterLab."""
    alt.data_transformers.disable_max_rows()
    if mode == "auto":
        mode = "svg" if os.environ.get("KTS_STATIC_CHARTS") == "1" else "default"
    alt.renderers.enable(mode)
    return mode


def _scenario_scale() -> alt.Scale:
    return alt.Scale(domain=list(SCENARIO_COLORS), range=list(SCENARIO_COLORS.values()))


def _tenant_scale(tenants: list[str]) -> alt.Scale:
    return alt.Scale(domain=tenants, range=TENANT_PALETTE[: max(len(tenants), 1)])


def _label(kind: pd.Series) -> pd.Series:
    return kind.map({"baseline": "alone", "shared": "shared"}).fillna(kind)


def four_panel(table: pd.DataFrame, metric: str = "wall") -> alt.Chart:
    """The article's figure: p50 and p99 per tenant alone vs shared, and throughput alone vs shared."""
    t = table[table["metric"] == metric].copy()
    t["when"] = _label(t["scenario"])
    long = t.melt(id_vars=["tenant", "when"], value_vars=["p50_ms", "p99_ms", "throughput_per_s"],
                  var_name="stat", value_name="value")
    titles = {"p50_ms": f"p50 {metric} latency (ms)", "p99_ms": f"p99 {metric} latency (ms)",
              "throughput_per_s": "throughput (iterations/s = 1000/mean)"}
    charts = []
    for stat, title in titles.items():
        charts.append(alt.Chart(long[long["stat"] == stat], title=title).mark_bar().encode(
            x=alt.X("tenant:N", title=None), xOffset="when:N",
            y=alt.Y("value:Q", title=title.split(" (")[1].rstrip(")") if "(" in title else title),
            color=alt.Color("when:N", scale=_scenario_scale(), title="scenario"),
            tooltip=["tenant", "when", alt.Tooltip("value:Q", format=".3f")],
        ).properties(width=WIDTH // 3 - 20, height=180))
    return alt.hconcat(*charts).resolve_scale(y="independent")


def ccdf_frame(frame: pd.DataFrame, metric: str = "wall", max_points: int = 1500) -> pd.DataFrame:
    """Exceedance probability P(X > x) per tenant and alone/shared; thinned in the body, full in the tail."""
    rows = []
    col = f"{metric}_ms"
    for (tenant, kind), grp in frame.groupby(["tenant", "scenario_kind"]):
        x = np.sort(grp[col].to_numpy(np.float64))
        n = len(x)
        p = 1.0 - np.arange(1, n + 1) / n
        keep = np.unique(np.concatenate([np.linspace(0, n - 1, min(n, max_points)).astype(int),
                                         np.arange(max(0, n - 200), n)]))
        keep = keep[p[keep] > 0]
        rows.append(pd.DataFrame({"tenant": tenant, "when": _label(pd.Series([kind]))[0], "latency_ms": x[keep],
                                  "exceedance": p[keep]}))
    return pd.concat(rows, ignore_index=True) if rows else pd.DataFrame()


def ccdf(frame: pd.DataFrame, metric: str = "wall") -> alt.Chart:
    """Tail plot: log-scale exceedance, one panel per tenant, alone vs shared."""
    data = ccdf_frame(frame, metric)
    return alt.Chart(data).mark_line(interpolate="step-after").encode(
        x=alt.X("latency_ms:Q", scale=alt.Scale(type="log"), title=f"{metric} latency (ms, log scale)"),
        y=alt.Y("exceedance:Q", scale=alt.Scale(type="log"), title="P(latency > x) (log scale)"),
        color=alt.Color("when:N", scale=_scenario_scale(), title="scenario"),
    ).properties(width=WIDTH // 2 - 30, height=220).facet(
        column=alt.Column("tenant:N", title=None)).resolve_scale(x="independent")


def timeline(frame: pd.DataFrame, tenant: str, scenario: str = "shared", metric: str = "wall",
             max_shade: int = 4000) -> alt.LayerChart:
    """One tenant's per-iteration latency over time, with the other tenants' active periods shaded."""
    s = frame[frame["scenario"] == scenario]
    t0 = int(s["start_ns"].min())
    me = s[s["tenant"] == tenant].assign(t_s=lambda d: (d["start_ns"] - t0) / 1e9)
    others = s[s["tenant"] != tenant].assign(x0=lambda d: (d["start_ns"] - t0) / 1e9,
                                            x1=lambda d: (d["end_ns"] - t0) / 1e9)
    if len(others) > max_shade:
        others = others.iloc[np.linspace(0, len(others) - 1, max_shade).astype(int)]
    tenants = sorted(s["tenant"].unique())
    shade = alt.Chart(others).mark_rect(opacity=0.25).encode(
        x=alt.X("x0:Q", title="time since scenario start (s)"), x2="x1:Q",
        color=alt.Color("tenant:N", scale=_tenant_scale(tenants), title="active neighbour"))
    points = alt.Chart(me).mark_circle(size=12, color="#222").encode(
        x="t_s:Q", y=alt.Y(f"{metric}_ms:Q", title=f"{tenant} {metric} latency (ms)"),
        tooltip=["iteration", alt.Tooltip(f"{metric}_ms:Q", format=".3f")])
    return alt.layer(shade, points).properties(width=WIDTH, height=220,
                                               title=f"{tenant} in '{scenario}': latency per iteration")


def decomposition(table: pd.DataFrame) -> alt.Chart:
    """Wall time split into device time and wait, at p50 and p99, per tenant alone vs shared."""
    t = table[table["metric"].isin(["device", "wait"])].copy()
    t["when"] = _label(t["scenario"])
    long = t.melt(id_vars=["tenant", "when", "metric"], value_vars=["p50_ms", "p99_ms"], var_name="pct",
                  value_name="ms")
    long["pct"] = long["pct"].str.replace("_ms", "")
    return alt.Chart(long).mark_bar().encode(
        x=alt.X("when:N", title=None), y=alt.Y("ms:Q", title="milliseconds", stack="zero"),
        color=alt.Color("metric:N", scale=alt.Scale(domain=["device", "wait"], range=["#4C78A8", "#E45756"]),
                        title="component"),
        column=alt.Column("tenant:N", title=None), row=alt.Row("pct:N", title=None),
        tooltip=["tenant", "when", "metric", "pct", alt.Tooltip("ms:Q", format=".3f")],
    ).properties(width=90, height=140).resolve_scale(y="independent")


def telemetry_chart(tel: pd.DataFrame, columns: list[str] | None = None) -> alt.Chart:
    """Telemetry over time: SM clock, utilisation and (where sampled) GPM metrics, one row each."""
    cols = columns or [c for c in ("sm_clock_mhz", "gpu_util_pct", "sm_util_pct", "sm_occupancy_pct",
                                   "dram_bw_util_pct", "power_w") if c in tel and tel[c].notna().any()]
    t0 = int(tel["ts_ns"].min())
    long = tel.assign(t_s=(tel["ts_ns"] - t0) / 1e9)
    keep = ["t_s"] + (["scenario"] if "scenario" in long else [])
    long = long[keep + cols].melt(id_vars=keep, var_name="metric", value_name="value").dropna()
    enc = {"x": alt.X("t_s:Q", title="time since first sample (s)"),
           "y": alt.Y("value:Q", title=None)}
    if "scenario" in long:
        enc["color"] = alt.Color("scenario:N", title="scenario")
    return alt.Chart(long).mark_line(strokeWidth=1).encode(**enc).properties(width=WIDTH, height=90).facet(
        row=alt.Row("metric:N", title=None)).resolve_scale(y="independent")


def forest(intervals: pd.DataFrame) -> alt.LayerChart:
    """DF with its confidence interval per tenant and metric; the rule at 1 is 'sharing was free'."""
    d = intervals.copy()
    d["label"] = d["tenant"] + " (" + d["metric"] + ")"
    base = alt.Chart(d).encode(y=alt.Y("label:N", title=None, sort=None))
    bars = base.mark_rule(strokeWidth=2).encode(x=alt.X("df_lo:Q", title="degradation factor (shared p99 / alone "
                                                        "p99)", scale=alt.Scale(zero=False)), x2="df_hi:Q")
    pts = base.mark_point(filled=True, size=60).encode(x="df:Q", color=alt.Color("metric:N", title="metric"),
                                                       tooltip=["tenant", "metric",
                                                                alt.Tooltip("df:Q", format=".3f"),
                                                                alt.Tooltip("df_lo:Q", format=".3f"),
                                                                alt.Tooltip("df_hi:Q", format=".3f")])
    one = alt.Chart(pd.DataFrame({"x": [1.0]})).mark_rule(strokeDash=[4, 4], color="#888").encode(x="x:Q")
    return alt.layer(one, bars, pts).properties(width=WIDTH - 120, height=30 * max(len(d), 2),
                                                title="Degradation factor with 95% interval")


def explore(frame: pd.DataFrame, tenant: str, scenario: str = "shared", metric: str = "wall") -> alt.VConcatChart:
    """Interactive (JupyterLab): brush a time range on the timeline; the tail plot shows only those iterations."""
    s = frame[(frame["scenario"] == scenario) & (frame["tenant"] == tenant)].copy()
    t0 = int(s["start_ns"].min())
    s["t_s"] = (s["start_ns"] - t0) / 1e9
    brush = alt.selection_interval(encodings=["x"])
    top = alt.Chart(s).mark_circle(size=12).encode(
        x=alt.X("t_s:Q", title="time since scenario start (s)"),
        y=alt.Y(f"{metric}_ms:Q", title=f"{metric} latency (ms)"),
        color=alt.condition(brush, alt.value("#E45756"), alt.value("#bbb"))).add_params(brush).properties(
        width=WIDTH, height=200, title=f"{tenant}: drag to select a time window")
    bottom = alt.Chart(s).transform_filter(brush).transform_window(
        rank="rank()", sort=[alt.SortField(f"{metric}_ms", order="descending")]).transform_joinaggregate(
        n="count()").transform_calculate(exceedance="datum.rank / datum.n").mark_line(
        interpolate="step-after").encode(
        x=alt.X(f"{metric}_ms:Q", scale=alt.Scale(type="log"), title=f"{metric} latency (ms, log)"),
        y=alt.Y("exceedance:Q", scale=alt.Scale(type="log"), title="P(latency >= x)")).properties(
        width=WIDTH, height=200, title="tail of the selected window")
    return alt.vconcat(top, bottom)
