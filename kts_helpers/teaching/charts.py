"""Charts of the teaching notebook: who holds the GPU, latency by percentile, DF sweeps, measured vs simulated.

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


def comparison_chart(comparison: pd.DataFrame) -> alt.Chart:
    """Measured vs simulated DF per tenant, side by side (the output of :func:`from_run`)."""
    data = comparison.melt(id_vars=["tenant"], value_vars=["measured_df", "sim_df"], var_name="source",
                           value_name="df")
    data["source"] = data["source"].map({"measured_df": "measured", "sim_df": "simulated"})
    return alt.Chart(data).mark_bar().encode(
        x=alt.X("source:N", title=None), y=alt.Y("df:Q", title="DF (wall time)"),
        color="source:N", column=alt.Column("tenant:N", title=None),
        tooltip=["tenant", "source", alt.Tooltip("df:Q", format=".3f")],
    ).properties(width=120, height=220, title="Measured vs simulated DF")
