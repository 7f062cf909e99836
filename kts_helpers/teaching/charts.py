"""Charts of the teaching notebook: who holds the GPU, both clocks by percentile, DF sweeps, measured vs
simulated, the fitted waits, the MPS model and the three kinds of waiting.

Altair only; the simulator itself (``teaching.model``) needs none.
"""

from __future__ import annotations

from collections.abc import Mapping

import altair as alt
import numpy as np
import pandas as pd

from kts_helpers.teaching.model import SimError


def worst_wait_window(kernels: pd.DataFrame, tenant: str, width_ms: float) -> tuple[float, float]:
    """A window of ``width_ms`` centred on ``tenant``'s longest wait: where the quantum is visible."""
    g = kernels[kernels["tenant"] == tenant]
    if g.empty:
        raise SimError(f"no kernel of tenant {tenant!r} in the simulation")
    row = g.loc[g["wait_ms"].idxmax()]
    mid = (float(row["arrival_ms"]) + float(row["end_ms"])) / 2
    return max(mid - width_ms / 2, 0.0), max(mid - width_ms / 2, 0.0) + width_ms


def timeline_chart(kernels: pd.DataFrame, segments: pd.DataFrame, window: tuple[float, float]) -> alt.Chart:
    """Gantt-like view: who holds the GPU (bars), when each kernel was issued (ticks)."""
    lo, hi = window
    seg = segments[(segments["end_ms"] > lo) & (segments["start_ms"] < hi)].copy()
    seg["start_ms"], seg["end_ms"] = seg["start_ms"].clip(lo, hi), seg["end_ms"].clip(lo, hi)
    arr = kernels[(kernels["arrival_ms"] >= lo) & (kernels["arrival_ms"] <= hi)][
        ["tenant", "iteration", "arrival_ms", "wait_ms"]]
    x = alt.X("start_ms:Q", title="time (ms)", scale=alt.Scale(domain=[lo, hi], nice=False))
    bars = alt.Chart(seg).mark_bar(height=18).encode(
        x=x, x2="end_ms:Q", y=alt.Y("tenant:N", title=None),
        color=alt.Color("tenant:N", title="holds the GPU"),
        opacity=alt.Opacity("what:N", scale=alt.Scale(domain=["run", "switch"], range=[0.9, 0.3]),
                            title="segment"),
        tooltip=["tenant", "what", alt.Tooltip("start_ms:Q", format=".3f"), alt.Tooltip("end_ms:Q", format=".3f")])
    ticks = alt.Chart(arr).mark_tick(color="black", thickness=2, size=26).encode(
        x=alt.X("arrival_ms:Q", scale=alt.Scale(domain=[lo, hi], nice=False)), y="tenant:N",
        tooltip=["tenant", "iteration", alt.Tooltip("wait_ms:Q", format=".3f")])
    return (bars + ticks).properties(width=640, height=110,
                                     title="Who holds the GPU (bars) and when kernels are issued (ticks)")


WALL_LABEL, DEVICE_LABEL = "wall (host)", "device (CUDA events)"
# room around a figure: vl-convert measures text a little narrower than a browser draws it
PADDING = {"left": 20, "top": 5, "right": 30, "bottom": 5}


def quantile_table(samples: Mapping[str, pd.DataFrame], tenant: str) -> pd.DataFrame:
    """Percentile curves (1..99, 99.5, 99.9) of wall and device time per scenario, for plotting."""
    ps = np.concatenate([np.arange(1, 100), [99.5, 99.9]])
    out = []
    for scenario, df in samples.items():
        g = df[df["tenant"] == tenant]
        if g.empty:
            raise SimError(f"no kernel of tenant {tenant!r} in scenario {scenario!r}")
        for col, label in (("wall_ms", WALL_LABEL), ("device_ms", DEVICE_LABEL)):
            out.append(pd.DataFrame({"scenario": scenario, "clock": label, "percentile": ps,
                                     "latency_ms": np.percentile(g[col].to_numpy(float), ps)}))
    return pd.concat(out, ignore_index=True)


def latency_chart(samples: Mapping[str, pd.DataFrame], tenant: str) -> alt.Chart:
    """Latency by percentile, alone vs shared, wall vs device: the median stays, the tail moves."""
    data = quantile_table(samples, tenant)
    return alt.Chart(data).mark_line(point=False).encode(
        x=alt.X("percentile:Q", title="percentile", scale=alt.Scale(domain=[0, 100])),
        y=alt.Y("latency_ms:Q", title="latency (ms)"),
        color=alt.Color("scenario:N"),
        strokeDash=alt.StrokeDash("clock:N", title="clock",
                                  scale=alt.Scale(domain=[WALL_LABEL, DEVICE_LABEL], range=[[1, 0], [5, 4]])),
        tooltip=["scenario", "clock", "percentile", alt.Tooltip("latency_ms:Q", format=".3f")],
    ).properties(width=520, height=260, title=f"{tenant}: latency by percentile")


def sweep_chart(sweep_df: pd.DataFrame, title: str | None = None, log_x: bool = False) -> alt.Chart:
    """DF per tenant against the swept parameter (the output of :func:`sweep`).

    ``log_x`` uses a symmetric-log axis, which keeps a 0 value (e.g. a back-to-back cadence) visible.
    """
    param = str(sweep_df["param"].iloc[0])
    scale = alt.Scale(type="symlog") if log_x else alt.Scale()
    axis = alt.Axis(values=sorted(sweep_df["value"].unique().tolist())) if log_x else alt.Axis()
    base = alt.Chart(sweep_df).encode(
        x=alt.X("value:Q", title=param, scale=scale, axis=axis), y=alt.Y("df:Q", title="DF = shared p99 / alone p99"),
        color=alt.Color("tenant:N"), tooltip=["tenant", "value", alt.Tooltip("df:Q", format=".3f")])
    return (base.mark_line() + base.mark_point()).properties(width=300, height=220,
                                                             title=title or f"DF vs {param}")


def clocks_chart(samples: Mapping[str, pd.DataFrame], tenants: list[str]) -> alt.HConcatChart:
    """Latency by percentile for every tenant side by side: both tenants' wall and device clocks."""
    return alt.hconcat(*(latency_chart(samples, t).properties(width=300, height=220) for t in tenants)
                       ).resolve_scale(y="independent").properties(padding=PADDING)


def comparison_chart(comparison: pd.DataFrame) -> alt.FacetChart:
    """Measured DF (bar, 95 % interval) vs simulated DF (black tick) per tenant and clock (``from_run``)."""
    data = comparison[["tenant", "clock", "measured_df", "measured_df_lo", "measured_df_hi", "sim_df"]].copy()
    base = alt.Chart().encode(x=alt.X("tenant:N", title=None))
    bars = base.mark_bar(opacity=0.6).encode(
        y=alt.Y("measured_df:Q", title="DF = shared p99 / alone p99"), color=alt.Color("tenant:N", legend=None),
        tooltip=["tenant", "clock", alt.Tooltip("measured_df:Q", format=".3f"), alt.Tooltip("sim_df:Q", format=".3f")])
    err = base.mark_rule().encode(y="measured_df_lo:Q", y2="measured_df_hi:Q")
    sim = base.mark_tick(color="black", thickness=3, size=30).encode(y="sim_df:Q")
    return alt.layer(bars, err, sim, data=data).properties(width=160, height=220).facet(
        column=alt.Column("clock:N", title="measured (bar, 95 % interval) vs simulated (black tick)")
    ).properties(padding=PADDING)


def wait_fit_chart(wait_quantiles: pd.DataFrame) -> alt.Chart:
    """Measured vs simulated wait quantiles at the fitted quantum: how well the model's shape fits."""
    data = wait_quantiles.melt(id_vars=["tenant", "quantile"], value_vars=["measured_ms", "simulated_ms"],
                               var_name="source", value_name="wait_ms")
    data["source"] = data["source"].str.replace("_ms", "", regex=False)
    return alt.Chart(data).mark_line(point=True).encode(
        x=alt.X("quantile:Q", title="quantile of the waits"), y=alt.Y("wait_ms:Q", title="wait (ms)"),
        color="tenant:N", strokeDash=alt.StrokeDash("source:N", title=None),
        tooltip=["tenant", "source", "quantile", alt.Tooltip("wait_ms:Q", format=".3f")],
    ).properties(width=360, height=220, title="Waits: measured vs the model at the fitted quantum")


def mps_chart(sweep_df: pd.DataFrame, timeslice: pd.DataFrame, victim: str, neighbour: str) -> alt.HConcatChart:
    """Model: the victim's p50 (both clocks) and the neighbour's wall DF against the neighbour's thread cap,
    with time-slicing's values as dashed rules (``mps.thread_sweep`` and ``model.degradation``)."""
    v = sweep_df[sweep_df["tenant"] == victim]
    lines = pd.concat([v.assign(clock="device (events)", ms=v["device_p50_shared_ms"]),
                       v.assign(clock="wall", ms=v["p50_shared_ms"])])
    ts_v = timeslice.set_index("tenant").loc[victim]
    rules = pd.DataFrame({"clock": ["device (events)", "wall"],
                          "ms": [ts_v["device_p50_shared_ms"], ts_v["p50_shared_ms"]]})
    x = alt.X("thread_pct:Q", title=f"{neighbour}'s CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", scale=alt.Scale(domain=[0, 100]))
    left = (alt.Chart(lines).mark_line(point=True).encode(
        x=x, y=alt.Y("ms:Q", title=f"{victim} p50 (ms)", scale=alt.Scale(type="log")), color="clock:N",
        tooltip=["thread_pct", "clock", alt.Tooltip("ms:Q", format=".3f")])
        + alt.Chart(rules).mark_rule(strokeDash=[4, 3]).encode(y="ms:Q", color="clock:N")
    ).properties(width=280, height=220, title=f"{victim} under MPS (model); dashed: time-slicing")
    nb = sweep_df[sweep_df["tenant"] == neighbour]
    ts_n = float(timeslice.set_index("tenant").loc[neighbour, "df"])
    right = (alt.Chart(nb).mark_line(point=True, color="darkorange").encode(
        x=x, y=alt.Y("df:Q", title=f"{neighbour} wall DF"), tooltip=["thread_pct", alt.Tooltip("df:Q", format=".3f")])
        + alt.Chart(pd.DataFrame({"df": [ts_n]})).mark_rule(strokeDash=[4, 3], color="darkorange").encode(y="df:Q")
    ).properties(width=280, height=220, title=f"What the cap costs the {neighbour} (model)")
    return alt.hconcat(left, right).properties(padding=PADDING)


def budget_chart(budget: pd.DataFrame, title: str) -> alt.LayerChart:
    """Seconds of each kind of waiting over one pod's life (``waiting.budget``), each bar labelled."""
    base = alt.Chart(budget).encode(y=alt.Y("kind:N", title=None, sort=None, axis=alt.Axis(labelPadding=6)),
                                    x=alt.X("seconds:Q", title="seconds of waiting"))
    bars = base.mark_bar().encode(color=alt.Color("kind:N", legend=None),
                                  tooltip=["kind", "what", alt.Tooltip("seconds:Q", format=".3f")])
    labels = base.mark_text(align="left", dx=4).encode(text=alt.Text("seconds:Q", format=".3~f"))
    return (bars + labels).properties(width=420, height=120, title=title, padding=PADDING)


def timers_chart(timers: pd.DataFrame) -> alt.Chart:
    """A probe's measured tick waits vs both slice timers' simulated ones, by quantile (``measured.slice_timers``)."""
    return alt.Chart(timers).mark_line(point=True).encode(
        x=alt.X("quantile:Q", title="quantile of the waits that found the GPU busy"),
        y=alt.Y("wait_ms:Q", title="wait before the first instruction (ms)"),
        color=alt.Color("source:N", title=None),
        strokeDash=alt.StrokeDash("source:N", title=None),
        tooltip=["source", "quantile", alt.Tooltip("wait_ms:Q", format=".3f")],
    ).properties(width=420, height=220, title="When does the slice start? Probe vs the two timers",
                 padding=PADDING)
