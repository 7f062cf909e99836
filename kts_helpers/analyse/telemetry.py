"""Join telemetry to iterations in time, and say whether the GPU clock confounds a comparison.

Why clock awareness: a shared scenario that runs hotter may run at a lower SM clock, and a
DF computed against a baseline that ran at full clock then mixes contention with throttling.
``clock_report`` flags that (median SM clock differs > 10 % between a workload's baseline
and shared scenarios) and marks iterations below 75 % of the maximum SM clock (nvbench's
throttle rule). The store is read through ``run.telemetry``'s public functions (the sampler,
in the run wing, never imports pandas).
"""

from __future__ import annotations

import json
import math
import numbers
import os
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from kts_helpers.run.telemetry import (
    DCGM_LABEL_COLUMNS,
    SCHEMA_COLUMNS,
    TelemetryError,
    read_status,
    read_table,
)

PREFIX = "tel_"
THROTTLE_FRACTION = 0.75  # nvbench: a sample below 75 % of the max SM clock is throttled
CLOCK_DIFF_FRACTION = 0.10


def _empty_frame() -> pd.DataFrame:
    dtypes = {"int64": "int64", "float64": "float64", "string": "object"}
    return pd.DataFrame({c: pd.Series(dtype=dtypes[t]) for c, t in SCHEMA_COLUMNS.items()})


def load_telemetry(path: str | os.PathLike) -> pd.DataFrame:
    """All samples under ``path`` (consolidated file or parts), sorted by time.

    An empty frame with the schema when nothing was recorded (NVML absent, sampler never ran).
    Columns that were never sampled (GPM on pre-Hopper GPUs) are absent, not null.
    """
    table = read_table(path)
    if table is None or table.num_rows == 0:
        return _empty_frame()
    df = table.to_pandas()
    if "ts_ns" not in df.columns:
        raise TelemetryError(f"telemetry under {path} has no ts_ns column")
    return df.sort_values("ts_ns", kind="stable").reset_index(drop=True)


def load_telemetry_status(path: str | os.PathLike) -> dict[str, Any] | None:
    """The sampler's status JSON (status, reason, gpm, max_sm_clock_mhz, ...), None if never written."""
    return read_status(path)


def expand_processes(telemetry: pd.DataFrame) -> pd.DataFrame:
    """The ``procs_json`` column as a long table: ts_ns, gpu_index, pid, used_mib, name (None: not recorded)."""
    out = []
    if "procs_json" in telemetry.columns:
        for ts, gpu, blob in zip(telemetry["ts_ns"], telemetry["gpu_index"], telemetry["procs_json"], strict=True):
            if blob is None or (isinstance(blob, float) and math.isnan(blob)):
                continue
            for p in json.loads(blob):
                out.append({"ts_ns": int(ts), "gpu_index": gpu, "pid": int(p["pid"]), "used_mib": p["used_mib"],
                            "name": p.get("name")})
    frame = pd.DataFrame(out, columns=["ts_ns", "gpu_index", "pid", "used_mib", "name"])
    return frame.astype({"ts_ns": "int64", "pid": "int64", "used_mib": "float64", "name": "object"})


MPS_SERVER = "nvidia-cuda-mps"  # /proc/<pid>/comm of nvidia-cuda-mps-server (comm keeps 15 characters)
MPS_SERVER_MAX_MIB = 128.0  # the server's own context (66 MiB on the H200); any CUDA client's is >= 600 MiB


def gpu_strangers(telemetry: pd.DataFrame, *, tenant_pids: set[int], mps: bool) -> list[str]:
    """The processes on the measured GPU during a scenario that are not its tenants, from the GPU's own process
    list (the NVML sampler's ``procs_json``): one description each; empty when there were none.

    Why: a process of another user (or a leftover of this one) on the GPU competes with the tenants, and nothing in
    the tenants' own logs shows it; the kit then calls the other process's cost "sharing" (or, in an alone block,
    drift). The check needs no grant: the sampler runs beside the tenants, in their PID namespace, where NVML
    lists every process (on the H200: exactly the tenants' PIDs from their KTS_META lines; NVML lists only the
    caller's PID namespace, so inside a container it sees none of the others, and on Kubernetes the placeholders
    and the pod look-ups guard instead). Under MPS the kit's own server is one more process: it is recognised by
    its name, or, in runs recorded before names were, as the one small process (<= 128 MiB: no CUDA client's
    context is that small). Without tenant PIDs (v1 logs) nothing can be told, and nothing is said.
    """
    procs = expand_processes(telemetry)
    if procs.empty or not tenant_pids:
        return []
    others = procs[~procs["pid"].isin(list(tenant_pids))]
    if mps and len(others):
        named = others["name"].fillna("").str.startswith(MPS_SERVER)
        size = others.groupby("pid")["used_mib"].transform("max")
        unnamed_server = others["name"].isna() & (size <= MPS_SERVER_MAX_MIB) & (others["pid"].nunique() == 1)
        others = others[~(named | unnamed_server)]
    out = []
    for pid, g in others.groupby("pid", sort=True):
        name = next((n for n in g["name"] if isinstance(n, str)), None)
        out.append(f"pid {pid}{f' ({name})' if name else ''}, up to {g['used_mib'].max():.0f} MiB, in "
                   f"{g['ts_ns'].nunique()} of {telemetry['ts_ns'].nunique()} samples")
    return out


def dcgm_strangers(telemetry: pd.DataFrame, *, gpu_uuid: str | None, namespace: str | None,
                   job: str | None) -> list[str]:
    """The pods dcgm-exporter attributes the measured GPU to during a scenario that are not the scenario's own:
    one description each; empty when there were none, or when it cannot be told.

    Why: on Kubernetes this is the GPU's own view that needs no grant of the kit's (dcgm-exporter maps devices to
    pods through the kubelet's PodResources API, and with time-slicing repeats a GPU's series once per pod holding
    a replica). The scenario's own pods are its Job's (``<job>-<index>-<suffix>``: tenants and placeholders) in its
    namespace. Only rows of the GPU the tenants reported (``gpu_uuid`` from KTS_META) are read: without it, or on
    a page without pod labels, nothing is said.
    """
    need = {"pod", "uuid", "ts_ns"}
    if not gpu_uuid or not job or telemetry.empty or not need <= set(telemetry.columns):
        return []
    rows = telemetry[(telemetry["uuid"] == gpu_uuid) & telemetry["pod"].notna()]
    ns = rows["namespace"] if "namespace" in rows else pd.Series(None, index=rows.index, dtype=object)
    ours = (ns == namespace) & rows["pod"].astype(str).str.startswith(f"{job}-")
    others = rows[~ours].assign(namespace=ns[~ours].fillna("?"))
    scrapes = telemetry.loc[telemetry["uuid"] == gpu_uuid, "ts_ns"].nunique()
    return [f"pod {space}/{pod} (dcgm-exporter's attribution), in {g['ts_ns'].nunique()} of {scrapes} scrapes"
            for (space, pod), g in others.groupby(["namespace", "pod"], sort=True)]


def attach_telemetry(iterations: pd.DataFrame, telemetry: pd.DataFrame, *, tolerance_ms: float = 250,
                     gpu: int | None = None) -> pd.DataFrame:
    """Each iteration gets the telemetry sample nearest its midpoint, as ``tel_*`` columns.

    Key: ``(start_ns + end_ns) // 2`` (int64) against ``ts_ns``, ``merge_asof(direction="nearest")``
    within ``tolerance_ms``; iterations with no sample that close get nulls. The original rows,
    their order, index and columns are preserved. Telemetry of several GPUs needs ``gpu=``;
    DCGM's per-pod duplicates of one sample are collapsed to one.
    """
    for c in ("start_ns", "end_ns"):
        if c not in iterations.columns:
            raise TelemetryError(f"iterations lack column {c!r}; cannot place them in time")
        if iterations[c].isna().any():
            raise TelemetryError(f"iterations have null {c!r}; cannot place them in time")
    if "ts_ns" not in telemetry.columns:
        raise TelemetryError("telemetry lacks column 'ts_ns'")
    if not (isinstance(tolerance_ms, numbers.Real) and not isinstance(tolerance_ms, bool) and math.isfinite(tolerance_ms) and tolerance_ms >= 0):
        raise TelemetryError(f"tolerance_ms must be a finite number >= 0, got {tolerance_ms!r}")
    clash = [c for c in iterations.columns if str(c).startswith(PREFIX)]
    if clash:
        raise TelemetryError(f"iterations already carry telemetry columns {clash[:3]}; attach once")

    tel = telemetry
    if "gpu_index" in tel.columns and len(tel):
        gpus = sorted(int(g) for g in tel["gpu_index"].dropna().unique())
        if gpu is not None:
            if gpu not in gpus:
                raise TelemetryError(f"telemetry holds GPUs {gpus}, not GPU {gpu}")
            tel = tel[tel["gpu_index"] == gpu]
        elif len(gpus) > 1:
            raise TelemetryError(f"telemetry holds GPUs {gpus}; pass gpu= to choose one")
    drop = [c for c in DCGM_LABEL_COLUMNS if c in ("pod", "namespace", "container", "vgpu") and c in tel.columns]
    tel = tel.drop(columns=drop).drop_duplicates(subset=["ts_ns"], keep="first")
    if tel["ts_ns"].isna().any():
        raise TelemetryError("telemetry has null ts_ns")
    tel = tel.astype({"ts_ns": "int64"}).sort_values("ts_ns", kind="stable").reset_index(drop=True)
    right = pd.DataFrame({"_key": tel["ts_ns"].to_numpy(np.int64), "_row": np.arange(len(tel), dtype=np.int64)})

    start = iterations["start_ns"].to_numpy(np.int64)
    end = iterations["end_ns"].to_numpy(np.int64)
    left = pd.DataFrame({"_key": start // 2 + end // 2 + (start % 2 + end % 2) // 2,  # no int64 overflow
                         "_pos": np.arange(len(iterations), dtype=np.int64)})
    left = left.sort_values("_key", kind="stable")
    m = pd.merge_asof(left, right, on="_key", direction="nearest", tolerance=int(round(tolerance_ms * 1e6)))
    row = m.sort_values("_pos")["_row"].to_numpy()  # float with NaN where nothing was close enough
    hit = ~np.isnan(row)
    take = np.where(hit, row, 0).astype(np.int64)
    # Only row numbers went through merge_asof: values are taken from the telemetry itself, so
    # int64 columns (epoch ns) never pass through float; missing ones become <NA>.
    added = {}
    for c in tel.columns:
        col = tel[c]
        if pd.api.types.is_integer_dtype(col.dtype):
            col = col.astype("Int64")
        vals = col.take(take).reset_index(drop=True) if len(tel) else col.reindex(range(len(iterations)))
        added[PREFIX + c] = vals.where(pd.Series(hit)).set_axis(iterations.index)
    merged = pd.DataFrame(added, index=iterations.index)
    return pd.concat([iterations, merged], axis=1)


@dataclass
class ClockReport:
    """What the SM clock did per scenario and workload, and which iterations were throttled."""

    max_sm_clock_mhz: float
    throttle_threshold_mhz: float
    per_scenario: pd.DataFrame  # scenario, kind, n, n_with_clock, median_sm_clock_mhz
    per_workload: pd.DataFrame  # workload, baseline/shared medians, rel_diff, clock_differs, note
    throttle_counts: pd.DataFrame  # scenario, tenant, n, n_with_clock, n_throttled, throttled_frac
    iterations: pd.DataFrame  # the input plus a nullable-boolean ``throttled`` column
    flags: list[str] = field(default_factory=list)  # one readable line per problem found


def clock_report(iterations_with_tel: pd.DataFrame, max_sm_clock_mhz: float, *,
                 clock_col: str = PREFIX + "sm_clock_mhz", diff_fraction: float = CLOCK_DIFF_FRACTION,
                 throttle_fraction: float = THROTTLE_FRACTION) -> ClockReport:
    """Median SM clock per scenario; per workload a flag when baseline and shared medians differ
    by more than ``diff_fraction`` (of the baseline); per iteration ``throttled`` when its SM
    clock is below ``throttle_fraction`` of the maximum. Iterations without a clock sample are
    counted (``n_with_clock``) and left ``<NA>``, never guessed.
    """
    df = iterations_with_tel
    need = ["scenario", "kind", "workload", "tenant", clock_col]
    missing = [c for c in need if c not in df.columns]
    if missing:
        raise TelemetryError(f"clock_report needs columns {missing} (attach_telemetry first?)")
    try:
        mx = float(max_sm_clock_mhz)
    except (TypeError, ValueError):
        raise TelemetryError(f"max_sm_clock_mhz must be a number, got {max_sm_clock_mhz!r}") from None
    if not math.isfinite(mx) or mx <= 0:
        raise TelemetryError(f"max_sm_clock_mhz must be > 0, got {max_sm_clock_mhz!r}")
    kinds = set(df["kind"].dropna().unique())
    bad = kinds - {"baseline", "shared", "control"}  # control: the warm design's alone block, neighbours gone
    if bad or df["kind"].isna().any():
        raise TelemetryError(f"kind must be 'baseline', 'shared' or 'control', got {sorted(map(str, bad)) or [None]}")

    clock = pd.to_numeric(df[clock_col], errors="coerce").astype("float64")
    threshold = throttle_fraction * mx
    throttled = pd.array(clock < threshold, dtype="boolean")
    throttled[clock.isna().to_numpy()] = pd.NA
    out = df.copy()
    out["throttled"] = throttled

    work = pd.DataFrame({"scenario": df["scenario"].to_numpy(), "kind": df["kind"].to_numpy(),
                         "workload": df["workload"].to_numpy(), "tenant": df["tenant"].to_numpy(),
                         "clock": clock.to_numpy(), "throttled": throttled})
    per_scenario = (work.groupby(["scenario", "kind"], sort=True, dropna=False)
                    .agg(n=("clock", "size"), n_with_clock=("clock", "count"), median_sm_clock_mhz=("clock", "median"))
                    .reset_index())
    throttle_counts = (work.assign(t=work["throttled"].fillna(False).astype(bool))
                       .groupby(["scenario", "tenant"], sort=True, dropna=False)
                       .agg(n=("clock", "size"), n_with_clock=("clock", "count"), n_throttled=("t", "sum"))
                       .reset_index())
    throttle_counts["n_throttled"] = throttle_counts["n_throttled"].astype("int64")
    denom = throttle_counts["n_with_clock"].where(throttle_counts["n_with_clock"] > 0)
    throttle_counts["throttled_frac"] = throttle_counts["n_throttled"] / denom

    flags: list[str] = []
    rows = []
    for wl, g in work.groupby("workload", sort=True):
        base = g.loc[g["kind"] == "baseline", "clock"].dropna()
        shared = g.loc[g["kind"] == "shared", "clock"].dropna()
        bmed = float(base.median()) if len(base) else math.nan
        smed = float(shared.median()) if len(shared) else math.nan
        note = ""
        if not len(base) or not len(shared):
            note = "no clock samples in " + ("baseline" if not len(base) else "shared") + " scenarios"
            rel, differs = math.nan, False
        else:
            rel = (smed - bmed) / bmed
            differs = abs(rel) > diff_fraction
            if differs:
                flags.append(f"workload {wl!r}: median SM clock {bmed:.0f} MHz in baseline vs {smed:.0f} MHz shared "
                             f"({rel:+.1%}); DF mixes contention with clock change")
        rows.append({"workload": wl, "baseline_median_sm_clock_mhz": bmed, "shared_median_sm_clock_mhz": smed,
                     "rel_diff": rel, "clock_differs": bool(differs), "note": note})
    per_workload = pd.DataFrame(rows, columns=["workload", "baseline_median_sm_clock_mhz",
                                               "shared_median_sm_clock_mhz", "rel_diff", "clock_differs", "note"])
    for r in throttle_counts.itertuples():
        if r.n_throttled:
            flags.append(f"scenario {r.scenario!r} tenant {r.tenant!r}: {r.n_throttled} of {r.n_with_clock} "
                         f"iterations below {throttle_fraction:.0%} of max SM clock ({threshold:.0f} MHz)")
    return ClockReport(max_sm_clock_mhz=mx, throttle_threshold_mhz=threshold, per_scenario=per_scenario,
                       per_workload=per_workload, throttle_counts=throttle_counts, iterations=out, flags=flags)
