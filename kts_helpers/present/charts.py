"""Altair figures of the report, with one palette for tenants and one for alone/shared.

Rendering: the report pipeline passes ``static_charts=True`` to the analysis notebook, which asks for
``use_renderer("svg")``: charts become inline SVG via vl-convert, so the HTML needs no JavaScript from a
CDN and renders offline. In JupyterLab, ``use_renderer("auto")`` picks Altair's ``jupyter`` renderer in
offline mode: an anywidget whose JavaScript (Vega, Vega-Lite, vega-embed) comes bundled by vl-convert from
the installed packages, so charts draw with no network and stay interactive (the brush on the timeline
filters the tail plot).

Layout: the ``kts`` theme sets the font the SVG is measured with (vl-convert lays text out with the fonts it
finds; a browser that drew a wider font than the one measured would clip labels at the figure's edge) and
explicit label and title limits; log axes get decade ticks (``log_axis``) so their labels never collide.
"""

from __future__ import annotations

import math

import altair as alt
import numpy as np
import pandas as pd

from kts_helpers.analyse import openloop, rules
from kts_helpers.analyse.estimate import Estimate
from kts_helpers.present.tables import fmt_ci

SCENARIO_COLORS = {"alone": "#4C78A8", "shared": "#E45756"}
TENANT_PALETTE = ["#4C78A8", "#F58518", "#54A24B", "#B279A2", "#9D755D", "#72B7B2"]
WIDTH = 560
# The first family is measured and drawn alike where it is installed (most Linux desktops); elsewhere both
# vl-convert and the browser fall back to a narrower sans-serif, which never overflows what was measured.
FONT = "DejaVu Sans, sans-serif"
LIMITS = {"axis": {"labelLimit": 360, "titleLimit": 520}, "legend": {"labelLimit": 320, "titleLimit": 320},
          "header": {"labelLimit": 360, "titleLimit": 520}}


@alt.theme.register("kts", enable=False)
def _theme() -> alt.theme.ThemeConfig:
    return alt.theme.ThemeConfig({"config": {"font": FONT, **LIMITS},  # type: ignore[typeddict-item]
                                  "padding": {"left": 8, "right": 12, "top": 5, "bottom": 5}})


# The top-level chart class of a Vega-Lite specification, by its composition key (plain Chart otherwise).
_TOP_LEVEL = (("facet", alt.FacetChart), ("layer", alt.LayerChart), ("vconcat", alt.VConcatChart),
              ("hconcat", alt.HConcatChart), ("concat", alt.ConcatChart), ("repeat", alt.RepeatChart))


def jupyter_widget(spec: dict, embed_options: object = None) -> alt.JupyterChart:
    """The widget Altair's ``jupyter`` renderer builds for ``spec``, without its second validation.

    Why: Altair's renderer rebuilds the chart with ``Chart.from_dict(spec)``, which validates the whole
    specification, inline data row by row, against the schema again, although ``to_dict`` has just validated it.
    For the report's telemetry chart (20,522 rows) that took 16 s of a JupyterLab kernel; this takes 6. The class
    is picked by the composition key, and the already-valid specification is not checked twice.
    """
    cls = next((c for key, c in _TOP_LEVEL if key in spec), alt.Chart)
    return alt.JupyterChart(chart=cls.from_dict(spec, validate=False), embed_options=embed_options)


def _jupyter_renderer(spec: dict, **metadata: object) -> object:
    alt.JupyterChart.enable_offline(offline=bool(metadata.get("offline", False)))
    return jupyter_widget(spec, metadata.get("embed_options"))._repr_mimebundle_()


alt.renderers.register("kts-jupyter", _jupyter_renderer)


def use_renderer(mode: str = "auto") -> str:
    """svg for static reports (offline); "auto": Altair's jupyter renderer, offline (JupyterLab), without its second
    validation (``jupyter_widget``)."""
    alt.data_transformers.disable_max_rows()
    alt.theme.enable("kts")
    if mode == "auto":
        alt.renderers.enable("kts-jupyter", offline=True)
        return "jupyter"
    alt.renderers.enable(mode)
    return mode


def log_ticks(values: object) -> list[float]:
    """Tick values for a log axis over ``values``: every decade, with 2 and 5 between them when the data
    span at most two decades. Explicit values, because Vega's own log ticks crowd into each other."""
    x = np.asarray(values, dtype=np.float64)
    x = x[np.isfinite(x) & (x > 0)]
    if not len(x):
        return [1.0]
    k0, k1 = math.floor(math.log10(x.min())), math.ceil(math.log10(x.max()))
    mults = (1, 2, 5) if k1 - k0 <= 2 else (1,)
    return [float(f"{m}e{k}") for k in range(k0, k1 + 1) for m in mults]


def log_axis(values: object, title: str) -> dict[str, object]:
    """``scale`` and ``axis`` of a log-scaled position channel with readable ticks."""
    return {"scale": alt.Scale(type="log"), "title": title, "axis": alt.Axis(values=log_ticks(values), format="~g")}


def _scenario_scale() -> alt.Scale:
    return alt.Scale(domain=list(SCENARIO_COLORS), range=list(SCENARIO_COLORS.values()))


def _tenant_scale(tenants: list[str]) -> alt.Scale:
    return alt.Scale(domain=tenants, range=TENANT_PALETTE[: max(len(tenants), 1)])


def _open_ends(d: pd.DataFrame, lo: str, hi: str, value: str) -> pd.DataFrame:
    """Draw a bound the data do not hold (-inf / inf) to the edge of the plot, and say so in ``bounds``.

    The interval text comes from ``tables.fmt_ci`` ("≥ lo; no upper bound"), the same as the tables.
    """
    d = d.copy()
    finite = pd.concat([d[lo], d[hi], d[value]]).astype(float).replace([np.inf, -np.inf], np.nan)
    top, bottom = finite.max(), finite.min()
    d["bounds"] = [fmt_ci(Estimate(v, a, b)) for v, a, b in zip(d[value], d[lo], d[hi], strict=True)]
    d[hi] = d[hi].astype(float).where(np.isfinite(d[hi].astype(float)), top * 1.15 if top == top else np.nan)
    d[lo] = d[lo].astype(float).where(np.isfinite(d[lo].astype(float)), bottom / 1.15 if bottom == bottom else np.nan)
    return d


def _label(kind: pd.Series) -> pd.Series:
    return kind.map({"baseline": "alone", "shared": "shared"}).fillna(kind)


def four_panel(table: pd.DataFrame, metric: str = "wall") -> alt.Chart:
    """The article's figure: p50 and p99 per tenant alone vs shared, and throughput alone vs shared."""
    t = table[table["metric"] == metric].copy()
    t["when"] = _label(t["kind"])
    long = t.melt(id_vars=["tenant", "when"], value_vars=["p50_ms", "p99_ms", "throughput_per_s"],
                  var_name="stat", value_name="value")
    titles = {"p50_ms": f"p50 {metric} latency (ms)", "p99_ms": f"p99 {metric} latency (ms)",
              "throughput_per_s": "throughput (iterations/s = 1000/mean)"}
    charts = []
    for stat, title in titles.items():
        charts.append(alt.Chart(long[long["stat"] == stat], title=title).mark_bar().encode(
            x=alt.X("tenant:N", title=None, axis=alt.Axis(labelAngle=0)), xOffset="when:N",
            y=alt.Y("value:Q", title=title.split(" (")[1].rstrip(")") if "(" in title else title),
            color=alt.Color("when:N", scale=_scenario_scale(), title="scenario"),
            tooltip=["tenant", "when", alt.Tooltip("value:Q", format=".3f")],
        ).properties(width=WIDTH // 3 - 20, height=180))
    return alt.hconcat(*charts).resolve_scale(y="independent")


def ccdf_frame(frame: pd.DataFrame, metric: str = "wall", max_points: int = 1500) -> pd.DataFrame:
    """Exceedance probability P(X > x) per tenant and alone/shared (``rules.ccdf``: thinned body, full tail)."""
    rows = []
    col = f"{metric}_ms"
    for (tenant, kind), grp in frame.groupby(["tenant", "kind"]):
        x, p = rules.ccdf(grp[col].to_numpy(np.float64), max_points)
        rows.append(pd.DataFrame({"tenant": tenant, "when": _label(pd.Series([kind]))[0], "latency_ms": x,
                                  "exceedance": p}))
    return pd.concat(rows, ignore_index=True) if rows else pd.DataFrame()


def ccdf(frame: pd.DataFrame, metric: str = "wall") -> alt.Chart:
    """Tail plot: log-scale exceedance, one panel per tenant, alone vs shared."""
    data = ccdf_frame(frame, metric)
    return alt.Chart(data).mark_line(interpolate="step-after").encode(
        x=alt.X("latency_ms:Q", **log_axis(data["latency_ms"], f"{metric} latency (ms, log scale)")),
        y=alt.Y("exceedance:Q", **log_axis(data["exceedance"], "P(latency > x) (log scale)")),
        color=alt.Color("when:N", scale=_scenario_scale(), title="scenario"),
    ).properties(width=WIDTH // 2 - 30, height=220).facet(
        column=alt.Column("tenant:N", title=None)).resolve_scale(x="independent")


def pick_scenario(frame: pd.DataFrame, scenario: str) -> str:
    """The scenario itself, or for a repeat group ("shared" of "shared-r1", "shared-r2"...) its first repeat."""
    names = list(dict.fromkeys(frame["scenario"].astype(str)))
    if scenario in names:
        return scenario
    group = [n for n in names if rules.scenario_group(n) == scenario]
    if not group:
        raise KeyError(f"no scenario {scenario!r} in these iterations; they have: {', '.join(names)}")
    return sorted(group, key=lambda n: int(n.rsplit("-r", 1)[1]))[0]


def timeline(frame: pd.DataFrame, tenant: str, scenario: str = "shared", metric: str = "wall",
             max_shade: int = 4000, padding: pd.DataFrame | None = None) -> alt.LayerChart:
    """One tenant's per-iteration latency over time, with the other tenants' active periods shaded.

    ``scenario`` may name a repeat group (the first repeat is drawn); ``padding`` (the run's pad lines)
    shades the neighbours' padding too: their load was on the GPU then as well.
    """
    name = pick_scenario(frame, scenario)
    s = frame[frame["scenario"] == name]
    if padding is not None and len(padding):
        s = pd.concat([s, padding[padding["scenario"] == name]], ignore_index=True)
    t0 = int(s["start_ns"].min())
    me = s[(s["tenant"] == tenant) & (s["phase"] != "pad")].assign(t_s=lambda d: (d["start_ns"] - t0) / 1e9)
    others = s[s["tenant"] != tenant].assign(x0=lambda d: (d["start_ns"] - t0) / 1e9,
                                            x1=lambda d: (d["end_ns"] - t0) / 1e9)
    if len(others) > max_shade:
        others = others.iloc[np.linspace(0, len(others) - 1, max_shade).astype(int)]
    tenants = sorted(s["tenant"].unique())
    shade = alt.Chart(others).mark_rect(opacity=0.25).encode(
        x=alt.X("x0:Q", title="time since scenario start (s)"), x2="x1:Q",
        color=alt.Color("tenant:N", scale=_tenant_scale(tenants), title="active neighbour",
                        legend=alt.Legend(values=[t for t in tenants if t != tenant])))
    points = alt.Chart(me).mark_circle(size=12, color="#222").encode(
        x="t_s:Q", y=alt.Y(f"{metric}_ms:Q", title=f"{tenant} {metric} latency (ms)"),
        tooltip=["iteration", alt.Tooltip(f"{metric}_ms:Q", format=".3f")])
    return alt.layer(shade, points).properties(width=WIDTH, height=220,
                                               title=f"{tenant} in '{name}': latency per iteration")


def decomposition(table: pd.DataFrame) -> alt.Chart:
    """Wall time split into device time and wait, at p50 and p99, per tenant alone vs shared."""
    t = table[table["metric"].isin(["device", "wait"])].copy()
    t["when"] = _label(t["kind"])
    long = t.melt(id_vars=["tenant", "when", "metric"], value_vars=["p50_ms", "p99_ms"], var_name="pct",
                  value_name="ms")
    long["pct"] = long["pct"].str.replace("_ms", "")
    return alt.Chart(long).mark_bar().encode(
        x=alt.X("when:N", title=None, axis=alt.Axis(labelAngle=0)), y=alt.Y("ms:Q", title="milliseconds", stack="zero"),
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
    d = _open_ends(intervals, "df_lo", "df_hi", "df")
    d["label"] = d["tenant"] + " (" + d["metric"] + ")"
    base = alt.Chart(d).encode(y=alt.Y("label:N", title=None, sort=None))
    bars = base.mark_rule(strokeWidth=2).encode(x=alt.X("df_lo:Q", title="degradation factor (shared p99 / alone "
                                                        "p99)", scale=alt.Scale(zero=False)), x2="df_hi:Q")
    pts = base.mark_point(filled=True, size=60).encode(x="df:Q", color=alt.Color("metric:N", title="metric"),
                                                       tooltip=["tenant", "metric",
                                                                alt.Tooltip("df:Q", format=".3f"), "bounds",
                                                                "reading"])
    one = alt.Chart(pd.DataFrame({"x": [1.0]})).mark_rule(strokeDash=[4, 4], color="#888").encode(x="x:Q")
    return alt.layer(one, bars, pts).properties(width=WIDTH - 120, height=30 * max(len(d), 2),
                                                title="Degradation factor with 95% interval (a bound the data "
                                                      "do not hold runs to the edge)")


def explore(frame: pd.DataFrame, tenant: str, scenario: str = "shared", metric: str = "wall") -> alt.VConcatChart:
    """Interactive (JupyterLab): brush a time range on the timeline; the tail plot shows only those iterations."""
    s = frame[(frame["scenario"] == pick_scenario(frame, scenario)) & (frame["tenant"] == tenant)].copy()
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
        x=alt.X(f"{metric}_ms:Q", **log_axis(s[f"{metric}_ms"], f"{metric} latency (ms, log)")),
        y=alt.Y("exceedance:Q", **log_axis([1.0 / max(len(s), 1), 1.0], "P(latency >= x)"))).properties(
        width=WIDTH, height=200, title="tail of the selected window")
    return alt.vconcat(top, bottom)


# -- comparisons (beyond the article) --
MODE_COLORS = {"alone": "#4C78A8", "timeslice": "#E45756", "mps": "#F58518", "mps-limited": "#54A24B"}


def _mode_scale(modes: list[str]) -> alt.Scale:
    extra = [m for m in modes if m not in MODE_COLORS]
    domain = [m for m in MODE_COLORS if m in modes] + extra
    palette = [MODE_COLORS.get(m, TENANT_PALETTE[(i + 3) % len(TENANT_PALETTE)]) for i, m in enumerate(domain)]
    return alt.Scale(domain=domain, range=palette)


def modes_chart(table: pd.DataFrame, *, log: bool = False, stat: str = "p99") -> alt.FacetChart:
    """p99 wall latency with its 95 % interval per tenant, one row per sharing mode (alone first)."""
    d = table.copy()
    d["value"], d["lo"], d["hi"] = d[f"{stat}_ms"], d[f"{stat}_lo"], d[f"{stat}_hi"]
    d["df_text"] = [("" if df != df else "DF " + fmt_ci(Estimate(df, lo, hi), 2))
                    for df, lo, hi in zip(d["df"], d["df_lo"], d["df_hi"], strict=True)]
    d = _open_ends(d, "lo", "hi", "value")
    modes = list(dict.fromkeys(d["mode"]))
    order = [m for m in MODE_COLORS if m in modes] + [m for m in modes if m not in MODE_COLORS]
    xscale = alt.Scale(type="log") if log else alt.Scale(zero=False)
    xaxis = alt.Axis(values=log_ticks(pd.concat([d["lo"], d["hi"], d["value"]])), format="~g") if log else alt.Axis()
    base = alt.Chart(d).encode(y=alt.Y("mode:N", sort=order, title=None))
    ranges = base.mark_rule(strokeWidth=2).encode(
        x=alt.X("lo:Q", scale=xscale, axis=xaxis, title=f"{stat} wall latency (ms{', log scale' if log else ''}) with 95% "
                "interval"), x2="hi:Q", color=alt.Color("mode:N", scale=_mode_scale(order), title="sharing"))
    points = base.mark_point(filled=True, size=70).encode(
        x="value:Q", color=alt.Color("mode:N", scale=_mode_scale(order), title="sharing"),
        tooltip=["label", "mode", "scenario", "n", alt.Tooltip("value:Q", format=".3f", title=stat),
                 "bounds", "df_text", "reading"])
    return alt.layer(ranges, points).properties(width=WIDTH // 2 - 40, height=28 * max(len(order), 2)).facet(
        column=alt.Column("label:N", title=None, sort=list(dict.fromkeys(d["label"])))).resolve_scale(
        x="independent").properties(title=f"{stat} wall latency by sharing mode (alone = no neighbour)")


def df_heatmap(matrix: pd.DataFrame, *, all_phases: bool = False) -> alt.Chart:
    """Contention matrix: rows = victim, columns = neighbour(s), colour = DF (diverging at 1), interval as text."""
    d = matrix.copy()
    if not all_phases and "primary" in d:
        d = d[d["primary"].astype(bool)]
    if all_phases or "primary" not in d:
        d["victim"] = d.apply(lambda r: rules.series_label(r["victim"], r["phase"]), axis=1)
    d = d[np.isfinite(d["df"].astype(float))].copy()
    d["text"] = [fmt_ci(Estimate(df, lo, hi), 2) for df, lo, hi in zip(d["df"], d["df_lo"], d["df_hi"], strict=True)]
    d["df_lo"], d["df_hi"] = d["df_lo"].replace(-np.inf, np.nan), d["df_hi"].replace(np.inf, np.nan)
    span = float(np.nanmax(np.abs(np.log(d["df"].clip(lower=1e-6))))) if len(d) else 1.0
    span = max(span, np.log(1.25))
    d["dark"] = np.abs(np.log(d["df"].clip(lower=1e-6))) > 0.6 * span
    lo, hi = float(np.exp(-span)), float(np.exp(span))
    rows = list(dict.fromkeys(d["victim"]))
    names = list(dict.fromkeys(str(v).split(" (")[0] for v in d["victim"]))
    rank = {n: i for i, n in enumerate(names)}
    cols = sorted(dict.fromkeys(d["neighbours"]), key=lambda c: (
        c == "all others", c.count("+"), [rank.get(t, len(rank)) for t in str(c).split("+")]))
    ticks = [v for v in (0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, 8.0, 16.0) if lo <= v <= hi]
    base = alt.Chart(d).encode(x=alt.X("neighbours:N", sort=cols, title="neighbour(s)", axis=alt.Axis(labelAngle=0)),
                               y=alt.Y("victim:N", sort=rows, title="victim"))
    cells = base.mark_rect().encode(
        color=alt.Color("df:Q", title="DF", scale=alt.Scale(type="log", scheme="redblue", reverse=True, domain=[lo, hi],
                                                            domainMid=1.0, clamp=True),
                        legend=alt.Legend(values=ticks)),
        tooltip=["victim", "neighbours", "sharing", "phase", alt.Tooltip("df:Q", format=".3f"),
                 alt.Tooltip("df_lo:Q", format=".3f"), alt.Tooltip("df_hi:Q", format=".3f"), "reading"])
    text = base.mark_text(fontSize=11).encode(
        text="text:N", color=alt.condition("datum.dark", alt.value("white"), alt.value("black")))
    chart = alt.layer(cells, text).properties(width=max(140 * len(cols), 200), height=max(40 * len(rows), 80))
    if d["sharing"].nunique() > 1:
        return chart.facet(column=alt.Column("sharing:N", title=None)).properties(
            title="Contention matrix: victim's DF (p99 shared / p99 alone) [95% interval]")
    return chart.properties(title="Contention matrix: victim's DF (p99 shared / p99 alone) [95% interval]")


def queue_chart(frame: pd.DataFrame, max_points: int = 4000) -> alt.Chart:
    """Open loop: queue delay (start - intended arrival) over the run; a climbing line means overload."""
    d = frame
    if len(d) > max_points:
        d = d.iloc[np.linspace(0, len(d) - 1, max_points).astype(int)]
    return alt.Chart(d).mark_line(strokeWidth=1, interpolate="step-after").encode(
        x=alt.X("t_s:Q", title="arrival time since first arrival (s)"),
        y=alt.Y("queue_ms:Q", title="queue delay (ms)"),
        color=alt.Color("when:N", scale=_scenario_scale(), title="scenario"),
        tooltip=["tenant", "scenario", alt.Tooltip("t_s:Q", format=".2f"), alt.Tooltip("queue_ms:Q", format=".3f")],
    ).properties(width=WIDTH // 2 - 30, height=180).facet(column=alt.Column("tenant:N", title=None)).properties(
        title="Queue delay of each arrival: flat = keeping up, climbing = overloaded")


def open_closed_tails(data: object, closed: object = None) -> alt.Chart:
    """CCDF of open-loop response time next to service (or a closed-loop run's) time: coordinated omission.

    ``data``: a RunData (the frame is built with ``openloop.open_closed_frame``) or that frame itself.
    """
    frame = data if isinstance(data, pd.DataFrame) else openloop.open_closed_frame(data, closed)  # type: ignore[arg-type]
    clocks = list(dict.fromkeys(frame["clock"]))
    return alt.Chart(frame).mark_line(interpolate="step-after").encode(
        x=alt.X("latency_ms:Q", **log_axis(frame["latency_ms"], "latency (ms, log scale)")),
        y=alt.Y("exceedance:Q", **log_axis(frame["exceedance"], "P(latency > x) (log scale)")),
        color=alt.Color("clock:N", sort=clocks, scale=alt.Scale(domain=clocks, range=["#E45756", "#4C78A8",
                                                                                     "#54A24B"][: len(clocks)]),
                        title=None, legend=alt.Legend(orient="bottom", direction="vertical", labelLimit=0)),
    ).properties(width=WIDTH // 2 - 30, height=200).facet(
        column=alt.Column("when:N", title=None, sort=["alone", "shared"]),
        row=alt.Row("tenant:N", title=None)).properties(
        title="Open loop: response time (from arrival) vs service time (from launch)")


def phase_chart(table: pd.DataFrame) -> alt.FacetChart:
    """LLM phases: p50 (hollow circle) and p99 (square), each with its 95 % interval, per scenario."""
    long = pd.concat([table.assign(quantile=q, value=table[f"{q}_ms"], lo=table[f"{q}_lo"], hi=table[f"{q}_hi"])
                      for q in ("p50", "p99")], ignore_index=True)
    long = _open_ends(long, "lo", "hi", "value")
    long["panel"] = long["tenant"] + ": " + long["stat"]
    order = list(dict.fromkeys(table["scenario"]))
    base = alt.Chart(long).encode(y=alt.Y("scenario:N", sort=order, title=None))
    ranges = base.mark_rule(strokeWidth=2).encode(
        x=alt.X("lo:Q", scale=alt.Scale(zero=False), title="latency (ms) with 95% interval"), x2="hi:Q",
        color=alt.Color("when:N", scale=_scenario_scale(), title="scenario"))
    tip = ["tenant", "stat", "scenario", "quantile", "n", alt.Tooltip("value:Q", format=".3f"), "bounds", "reading"]
    color = alt.Color("when:N", scale=_scenario_scale(), title="scenario")
    p50 = base.transform_filter("datum.quantile == 'p50'").mark_point(size=60, filled=False, shape="circle").encode(
        x="value:Q", color=color, tooltip=tip)
    p99 = base.transform_filter("datum.quantile == 'p99'").mark_point(size=60, filled=True, shape="square").encode(
        x="value:Q", color=color, tooltip=tip)
    points = alt.layer(p50, p99)
    return alt.layer(ranges, points).properties(width=WIDTH // 2 - 40, height=26 * max(len(order), 2)).facet(
        column=alt.Column("panel:N", title=None, sort=list(dict.fromkeys(long["panel"])))).resolve_scale(
        x="independent").properties(title="Time to first token and per-token decode latency "
                                     "(circle: p50, square: p99)")


def probe_waits(reading: object) -> alt.LayerChart:
    """The tick's contended waits (histogram) with the probe's upper and lower edges marked."""
    waits = np.asarray(reading.waits_ms, float)
    data = pd.DataFrame({"wait_ms": waits})
    hist = alt.Chart(data).mark_bar(opacity=0.8).encode(
        x=alt.X("wait_ms:Q", bin=alt.Bin(maxbins=60), title="tick wait when the GPU was busy (ms, wall - device - "
                "own overhead)"),
        y=alt.Y("count():Q", title="ticks"))
    edges = pd.DataFrame([{"edge": name, "ms": est.value} for name, est in
                          (("upper edge (quantum + switch)", reading.upper_edge), ("lower edge", reading.lower_edge))
                          if est.has_value])
    rules = alt.Chart(edges).mark_rule(strokeDash=[4, 3], color="black").encode(
        x="ms:Q", tooltip=["edge", alt.Tooltip("ms:Q", format=".3f")])
    return (hist + rules).properties(width=WIDTH - 40, height=220, title="Time-slice probe: how long a tick waited")


def collision_chart(frame: pd.DataFrame) -> alt.Chart:
    """Each launch's wait against its launch number, collided launches (a neighbour in flight) marked:
    one row per tenant (``analyse.collisions.collisions_frame``)."""
    d = frame.assign(launched=np.where(frame["collided"], "while a neighbour was in flight", "GPU free"))
    return alt.Chart(d).mark_circle(size=14, opacity=0.7).encode(
        x=alt.X("launch:Q", title="launch (co-running timed iterations, in time order)"),
        y=alt.Y("wait_ms:Q", title="wait (ms)"),
        color=alt.Color("launched:N", title="launched", scale=alt.Scale(
            domain=["GPU free", "while a neighbour was in flight"],
            range=[SCENARIO_COLORS["alone"], SCENARIO_COLORS["shared"]])),
        tooltip=["tenant", "launch", alt.Tooltip("wait_ms:Q", format=".3f"), "launched"],
    ).properties(width=WIDTH - 120, height=140).facet(
        row=alt.Row("tenant:N", title=None)).properties(title="Collisions: wait of each launch")
