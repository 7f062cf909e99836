"""From raw logs to the tables of the report: iterations, clocks, overlap windows, summaries.

Three clocks per iteration:
* ``device_ms``: CUDA-event time, what the GPU spent on the tenant's kernels once its context ran;
* ``wall_ms``: host time from launch to completion, what the tenant actually waited for;
* ``wait_ms`` = wall - device - overhead floor (clipped at 0): time the tenant's work sat
  waiting, mostly for the GPU to come back from another context's time-slice.
The headline degradation factor uses wall time: it is what a latency SLO sees.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from kts_helpers.analyse.logparse import ParsedLog, parse_file, parse_files
from kts_helpers.errors import LogParseError, RunError
from kts_helpers.run.corun import PAD_PHASE, CoRunError, gpu_mismatch
from kts_helpers.run.runs import Run, open_run

METRICS = ("device", "wall", "wait")
PERCENTILES = (0.50, 0.95, 0.99)
WARMUP_RULES = ("none", "mser5-paired")
NO_CORUNNING = "no co-running samples"
INSUFFICIENT_CORUNNING = "insufficient co-running data"


def min_corunning_samples(q: float = 0.99, confidence: float = 0.95) -> int:
    """The fewest co-running samples from which a shared series' q-quantile gets a DF reading.

    Below n = ln(1 - confidence) / ln(q) samples (299 for a p99 at 95 %) the chance that *no* sample
    lies above the true quantile exceeds 1 - confidence, so no distribution-free upper bound exists
    and the sample p99 is little more than the maximum; a bootstrap interval then only resamples the
    few largest values. Such a series gets "insufficient co-running data" instead of a reading.
    (The stricter 662-sample rule for a two-sample 99 % bound stays a warning in the sample notes.)
    """
    return int(np.ceil(np.log(1.0 - confidence) / np.log(q)))


MIN_CORUNNING = min_corunning_samples()


def df_reading(n_shared: int, wording: str | None) -> str:
    """The words for a shared row's DF: too little co-running data first, then the interval's wording."""
    if n_shared == 0:
        return NO_CORUNNING
    if n_shared < MIN_CORUNNING:
        return f"{INSUFFICIENT_CORUNNING} (n = {n_shared} < {MIN_CORUNNING})"
    return wording or "no interval computed"


@dataclass
class RunData:
    """Everything analysis needs from one run directory, loaded once."""

    run: Run
    manifest: dict[str, Any]
    iterations: pd.DataFrame
    meta: pd.DataFrame
    parse_issues: pd.DataFrame
    floor_ms: float
    problems: list[str] = field(default_factory=list)
    dropped: pd.DataFrame = field(default_factory=pd.DataFrame)
    padding: pd.DataFrame = field(default_factory=pd.DataFrame)  # pad lines: neighbours' load, never timed
    telemetry: pd.DataFrame = field(default_factory=pd.DataFrame)
    telemetry_status: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def max_sm_clock_mhz(self) -> float | None:
        for st in self.telemetry_status.values():
            if st.get("max_sm_clock_mhz"):
                return float(st["max_sm_clock_mhz"])
        v = self.manifest.get("environment", {}).get("max_sm_clock_mhz")
        return float(v) if v else None

    @property
    def run_id(self) -> str:
        return self.manifest.get("run_id", self.run.path.name)


def calibration_floor(logs: ParsedLog) -> dict[str, Any]:
    """The tool's own overhead: median (wall - device) of a one-element kernel timed like the workloads."""
    df = logs.frame
    gap = (df["wall_ms"] - df["device_ms"]).to_numpy()
    if len(gap) == 0:
        return {"floor_ms": 0.0, "n": 0, "note": "no calibration samples"}
    if np.allclose(gap, 0.0):
        return {"floor_ms": 0.0, "n": int(len(gap)), "note": "CPU: device time = wall time, no separate floor"}
    return {"floor_ms": float(np.median(gap)), "p99_ms": float(np.quantile(gap, 0.99)),
            "device_p50_ms": float(df["device_ms"].median()), "wall_p50_ms": float(df["wall_ms"].median()),
            "n": int(len(gap)), "note": "median of wall - device for a 1-element add, same timing loop"}


def add_clocks(frame: pd.DataFrame, floor_ms: float) -> pd.DataFrame:
    """Add ``wait_ms`` and ``response_ms`` (from the intended arrival: open-loop latency)."""
    out = frame.copy()
    out["wait_ms"] = np.maximum(out["wall_ms"] - out["device_ms"] - floor_ms, 0.0)
    out["response_ms"] = (out["end_ns"] - out["intended_ns"]).to_numpy(np.int64) / 1e6
    return out


def mark_overlap(frame: pd.DataFrame, *, clip: bool = True) -> pd.DataFrame:
    """Flag iterations that ran while every tenant of their shared scenario was active.

    Computed from the raw logs, padding lines included and before any trimming: a shared scenario's
    window is [latest first start, earliest last end] over its tenants' lines, and only iterations
    entirely inside it count as shared. Baseline scenarios are all "inside". (The same rule as
    ``shared/tools/corunning.py``, the independent check.)
    """
    out = frame.copy()
    out["in_overlap"] = True
    if not clip:
        return out
    for _scen, grp in out[out["scenario_kind"] == "shared"].groupby("scenario", sort=False):
        spans = grp.groupby("tenant")[["start_ns", "end_ns"]].agg({"start_ns": "min", "end_ns": "max"})
        if len(spans) < 2:
            continue
        lo, hi = int(spans["start_ns"].max()), int(spans["end_ns"].min())
        idx = grp.index
        out.loc[idx, "in_overlap"] = (grp["start_ns"] >= lo) & (grp["end_ns"] <= hi)
    return out


def split_padding(frame: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(timed iterations, padding lines): padding proves a neighbour was busy and is never a statistic."""
    pad = frame["phase"] == PAD_PHASE
    return frame[~pad], frame[pad]


def trim_leading(frame: pd.DataFrame, n: int) -> pd.DataFrame:
    """Drop the first ``n`` timed iterations of each (scenario, tenant, phase) series."""
    if n <= 0:
        return frame
    keys = [c for c in ("source", "scenario", "tenant", "phase") if c in frame]
    rank = frame.groupby(keys, sort=False).cumcount()
    return frame[rank >= n]


def apply_warmup(frame: pd.DataFrame, *, trim: int = 0, rule: str = "none",
                 max_fraction: float = 0.2) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Drop leading timed iterations; return the kept ones and a table of what each series lost and why.

    The untimed warm-up runs before the start barrier, so by default only the fixed ``trim`` is
    applied, the same count to every series. A data-driven cut could remove the contention itself
    (a neighbour's burst at the start of a shared series looks like a transient), so MSER-5 (White
    1997: the cut minimising the standard error of the remaining mean over batches of 5) is only a
    *diagnostic* here (column ``mser5_point``), unless ``rule="mser5-paired"``: then each tenant's
    alone and shared series lose the same number of iterations, the largest MSER-5 point over all of
    them (at most ``max_fraction`` of the shortest), so DF compares tails cut alike.
    """
    from kts_helpers.analyse.stats import steady_state_start

    if rule not in WARMUP_RULES:
        raise RunError(f"unknown warm-up rule {rule!r}; choose one of {', '.join(WARMUP_RULES)}")
    if trim < 0:
        raise RunError(f"trim must be >= 0, got {trim}")
    series = []
    for (scen, tenant, phase), grp in frame.groupby(["scenario", "tenant", "phase"], sort=False):
        grp = grp.sort_values("start_ns")
        x = grp["wall_ms"].to_numpy(np.float64)
        point = steady_state_start(x, detect=True, max_fraction=max_fraction)[0] if len(x) >= 20 else None
        series.append((scen, tenant, phase, grp, point))
    paired: dict[tuple[str, str], int] = {}
    if rule == "mser5-paired":
        cuts: dict[tuple[str, str], list[tuple[int, int]]] = {}
        for _scen, tenant, phase, grp, point in series:
            cuts.setdefault((tenant, phase), []).append((point or 0, len(grp)))
        for key, found in cuts.items():  # the largest point, but never more than max_fraction of the shortest
            paired[key] = min(max(p for p, _ in found), int(max_fraction * min(n for _, n in found)))
    keep, rows = [], []
    for scen, tenant, phase, grp, point in series:
        n = max(trim, paired.get((tenant, phase), 0))
        n = min(n, len(grp))
        why = (f"fixed: first {trim} timed iterations" if rule == "none" else
               f"paired MSER-5: the same {n} iterations in every series of {tenant}")
        keep.append(grp.iloc[n:])
        rows.append({"scenario": scen, "tenant": tenant, "phase": phase, "iterations": len(grp), "dropped": int(n),
                     "rule": why, "mser5_point": point,
                     "diagnostic": _stationarity_note(point, len(grp))})
    kept = pd.concat(keep).sort_index() if keep else frame
    return kept, pd.DataFrame(rows, columns=["scenario", "tenant", "phase", "iterations", "dropped", "rule",
                                             "mser5_point", "diagnostic"])


def _stationarity_note(point: int | None, n: int) -> str:
    if point is None:
        return "too short for MSER-5"
    if point == 0:
        return "stationary by MSER-5"
    return f"not stationary by MSER-5: its level settles after iteration {point} ({100 * point / n:.0f} %)"


def _series_stats(x: np.ndarray) -> dict[str, float]:
    if len(x) == 0:
        nan = float("nan")
        return {"n": 0, "p50_ms": nan, "p95_ms": nan, "p99_ms": nan, "mean_ms": nan, "jitter": nan,
                "throughput_per_s": nan}
    p50, p95, p99 = (float(v) for v in np.quantile(x, PERCENTILES))
    mean = float(np.mean(x))
    return {"n": int(len(x)), "p50_ms": p50, "p95_ms": p95, "p99_ms": p99, "mean_ms": mean,
            "jitter": p99 / p50 if p50 > 0 else float("nan"),
            "throughput_per_s": 1000.0 / mean if mean > 0 else float("nan")}


GROUP_KEYS = ["scenario_kind", "scenario_group", "sharing", "tenant", "workload", "phase"]


REPEAT_SUFFIX = r"-r\d+$"


def scenario_group(name: str) -> str:
    """Repeats of a scenario ("shared-r2") form one group ("shared")."""
    return re.sub(REPEAT_SUFFIX, "", str(name))


def _scenario_group(names: pd.Series) -> pd.Series:
    return names.astype(str).str.replace(REPEAT_SUFFIX, "", regex=True)


def series_groups(frame: pd.DataFrame, metric: str) -> list[tuple[dict[str, Any], list[np.ndarray]]]:
    """The samples behind each summary row: one array per repeat, overlap-clipped, in time order.

    A series with no iteration inside its overlap window still gets its (empty) arrays, so the row
    that says "no co-running samples" is shown instead of vanishing.
    """
    if metric not in METRICS:
        raise ValueError(f"unknown metric {metric!r}; choose one of {', '.join(METRICS)}")
    col = f"{metric}_ms"
    if col not in frame:
        raise LogParseError(f"metric {metric!r} needs column {col}; add_clocks() first")
    data = frame[frame["phase"] != PAD_PHASE]
    data = data.assign(scenario_group=_scenario_group(data["scenario"]))
    if "repeat" not in data:
        data = data.assign(repeat=0)
    inside = data["in_overlap"].to_numpy(bool) if "in_overlap" in data else np.ones(len(data), bool)
    data = data.assign(_inside=inside)
    out = []
    for key, grp in data.groupby(GROUP_KEYS, sort=False, dropna=False):
        runs = [g.loc[g["_inside"]].sort_values("start_ns")[col].to_numpy(np.float64)
                for _, g in grp.groupby("repeat", sort=True)]
        out.append((dict(zip(GROUP_KEYS, key, strict=True)), runs))
    return out


def baseline_row(table: pd.DataFrame, row: pd.Series) -> pd.Series | None:
    """The alone row a shared row is compared with: same tenant and phase, else same workload and phase."""
    base = table[(table["scenario"] == "baseline") & (table["metric"] == row["metric"])]
    match = base[(base["tenant"] == row["tenant"]) & (base["phase"] == row["phase"])]
    if match.empty:
        match = base[(base["workload"] == row["workload"]) & (base["phase"] == row["phase"])]
    return None if match.empty else match.iloc[0]


def summarize_frame(frame: pd.DataFrame, metric: str = "wall") -> pd.DataFrame:
    """Per tenant x scenario (x phase): n, p50/p95/p99, mean, jitter p99/p50, throughput, DF for shared rows.

    Percentiles use numpy's default (linear interpolation); repeats of a scenario are pooled. DF = shared
    p99 / baseline p99 of the same tenant (or, failing that, the same workload) in the same metric.
    ``df_reading`` says "insufficient co-running data" below ``MIN_CORUNNING`` shared samples; the
    interval's wording replaces it once ``intervals.add_intervals`` has run.
    """
    rows = []
    for key, runs in series_groups(frame, metric):
        row = {**key, "metric": metric, **_series_stats(np.concatenate(runs)), "repeats": len(runs)}
        rows.append(row)
    table = pd.DataFrame(rows)
    if table.empty:
        return table
    table = table.rename(columns={"scenario_kind": "scenario", "scenario_group": "scenario_name"})
    table["df"] = np.nan
    table["df_reading"] = None
    for i, row in table[table["scenario"] == "shared"].iterrows():
        base = baseline_row(table, row)
        if base is not None and base["p99_ms"] > 0 and row["n"] > 0:
            table.loc[i, "df"] = row["p99_ms"] / base["p99_ms"]
        table.loc[i, "df_reading"] = df_reading(int(row["n"]), None)
    return table


def summary_records(table: pd.DataFrame) -> list[dict[str, Any]]:
    """JSON-ready rows; ``df`` only on shared rows; NaN becomes null."""
    out = []
    for rec in table.to_dict(orient="records"):
        clean = {k: (None if isinstance(v, float) and np.isnan(v) else v) for k, v in rec.items()}
        if clean.get("scenario") != "shared":
            clean.pop("df", None)
            clean.pop("df_reading", None)
        out.append(clean)
    return out


# -- loading ------------------------------------------------------------------------------------------------
def load_logs(baseline: list[str | os.PathLike], shared: list[str | os.PathLike], *,
              clip: bool = True, trim: int = 0, floor_ms: float = 0.0) -> tuple[pd.DataFrame, ParsedLog]:
    """Read loose log files (e.g. from the article's tool) as one baseline and one shared scenario.

    Shared logs whose KTS_META lines name different GPUs are refused (CoRunError); v1 logs carry no
    KTS_META and are accepted as they are.
    """
    frames = []
    last: ParsedLog | None = None
    for kind, paths in (("baseline", baseline), ("shared", shared)):
        if not paths:
            continue
        if kind == "shared":
            _refuse_split_gpus({str(p): parse_file(p) for p in paths}, "the shared logs")
        parsed = parse_files(list(paths))
        f = parsed.frame
        f["scenario_kind"] = kind
        f["scenario"] = kind if kind == "shared" else "baseline-" + f["tenant"].astype(str)
        f["sharing"] = "timeslice"
        frames.append(f)
        last = parsed if last is None else _merge_counts(last, parsed)
    if not frames:
        raise LogParseError("no log files given; pass --baseline and/or --shared files")
    frame = mark_overlap(pd.concat(frames, ignore_index=True), clip=clip)  # raw lines, padding included
    frame, _pads = split_padding(frame)
    frame = trim_leading(frame, trim)
    frame = add_clocks(frame, floor_ms)
    assert last is not None
    return frame, last


def _refuse_split_gpus(logs: dict[str, ParsedLog], what: str) -> None:
    """A shared scenario whose tenants report different GPU UUIDs shared nothing: refuse its logs."""
    metas = {}
    for source, parsed in logs.items():
        for m in parsed.meta:
            metas[str(m.get("tenant") or source)] = m
    problem = gpu_mismatch(metas)
    if problem:
        raise CoRunError(f"{what}: {problem}")


def _merge_counts(a: ParsedLog, b: ParsedLog) -> ParsedLog:
    return ParsedLog(frame=a.frame, malformed=a.malformed + b.malformed, other=a.other + b.other,
                     meta=a.meta + b.meta, sources=a.sources + b.sources)


def load_run(run_dir: str | os.PathLike | Run, *, clip: bool = True, trim: int = 0,
             warmup: str = "none") -> RunData:
    """Load every completed tenant log of a run (and say what is missing or failed).

    The overlap window comes first, from the raw lines (padding included); then padding is set aside
    (``RunData.padding``) and ``trim`` / the ``warmup`` rule (see ``apply_warmup``) drop leading timed
    iterations, the counts in ``RunData.dropped``. A shared scenario whose tenants name different GPU
    UUIDs is refused (CoRunError).
    """
    run = run_dir if isinstance(run_dir, Run) else open_run(run_dir)
    manifest = run.manifest()
    problems: list[str] = []
    if manifest.get("status") == "failed":
        bad = [n for n, s in manifest.get("scenarios", {}).items() if s.get("status") == "failed"]
        problems.append(f"run {run.run_id} is marked failed (scenario(s): {', '.join(bad) or '?'}); "
                        "showing what its logs hold")
    elif manifest.get("status") != "complete":
        problems.append(f"run {run.run_id} is {manifest.get('status')!r}, not complete; showing what exists")
    if manifest.get("format_version", 1) < 2:
        problems.append(f"run {run.run_id} uses manifest format {manifest.get('format_version', 1)}; "
                        "fields added later (calibration, telemetry) may be missing")
    floor = float(manifest.get("calibration", {}).get("floor_ms", 0.0) or 0.0)
    frames, metas, issues = [], [], []
    for scen in manifest.get("spec", {}).get("scenarios", []):
        scen_logs: dict[str, ParsedLog] = {}
        for tenant in scen["tenants"]:
            path = run.log_path(scen["name"], tenant["name"])
            if not path.exists():
                problems.append(f"no log for {scen['name']}/{tenant['name']}")
                continue
            parsed = parse_file(path)
            scen_logs[tenant["name"]] = parsed
            issues.append({"scenario": scen["name"], "tenant": tenant["name"], "valid": parsed.n,
                           "malformed": parsed.malformed, "other": parsed.other})
            if parsed.n == 0:
                problems.append(f"{scen['name']}/{tenant['name']}: log has no valid KTS_APP line")
                continue
            f = parsed.frame
            f["scenario"] = scen["name"]
            f["scenario_kind"] = scen["kind"]
            f["sharing"] = scen.get("sharing", "timeslice")
            f["repeat"] = scen.get("repeat", 0)
            f["source"] = str(path)
            frames.append(f)
            for m in parsed.meta:
                metas.append({"scenario": scen["name"], **{k: v for k, v in m.items() if k != "notes"}})
        if scen.get("kind") == "shared":
            _refuse_split_gpus(scen_logs, f"run {run.run_id}, scenario {scen['name']}")
    if not frames:
        raise RunError(f"run {run.run_id} has no usable iterations yet"
                       + (f" ({problems[0]})" if problems else ""))
    frame = mark_overlap(pd.concat(frames, ignore_index=True), clip=clip)  # raw lines, before any trimming
    frame, padding = split_padding(frame)
    frame, dropped = apply_warmup(frame, trim=trim, rule=warmup)
    frame = add_clocks(frame, floor)
    tel, tel_status = load_run_telemetry(run, manifest)
    pods = {name: {str(t.get("pod") or (t.get("events") or {}).get("pod")) for t in rec.get("tenants", {}).values()}
            for name, rec in manifest.get("scenarios", {}).items()}
    frame = attach_run_telemetry(frame, tel, pods)
    return RunData(run=run, manifest=manifest, iterations=frame, meta=pd.DataFrame(metas),
                   parse_issues=pd.DataFrame(issues), floor_ms=floor, problems=problems, telemetry=tel,
                   telemetry_status=tel_status, dropped=dropped, padding=padding)


def load_run_telemetry(run: Run, manifest: dict[str, Any]) -> tuple[pd.DataFrame, dict[str, dict[str, Any]]]:
    """Each scenario's telemetry (NVML sampler or DCGM scrape) and its status; empty where there is none."""
    from kts_helpers.analyse.telemetry import load_telemetry
    from kts_helpers.run.telemetry import read_status

    frames, status = [], {}
    for scen in manifest.get("spec", {}).get("scenarios", []):
        path = run.log_dir(scen["name"]) / "telemetry.parquet"
        st = read_status(path) or manifest.get("scenarios", {}).get(scen["name"], {}).get("telemetry") or {
            "status": "absent", "reason": "no telemetry recorded"}
        status[scen["name"]] = st
        if st.get("status") in ("complete", "partial"):
            tel = load_telemetry(path)
            if len(tel):
                frames.append(tel.assign(scenario=scen["name"], scenario_kind=scen["kind"]))
    return (pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()), status


def attach_run_telemetry(frame: pd.DataFrame, tel: pd.DataFrame,
                         pods: dict[str, set[str]] | None = None) -> pd.DataFrame:
    """Join each iteration to the nearest telemetry sample of its own scenario (``tel_*`` columns)."""
    if tel.empty:
        return frame
    from kts_helpers.analyse.telemetry import attach_telemetry

    parts = []
    for scen, grp in frame.groupby("scenario", sort=False):
        t = tel[tel["scenario"] == scen].drop(columns=["scenario", "scenario_kind"])
        gpu = _scenario_gpu(t, pods or {}, scen)
        parts.append(attach_telemetry(grp, t, gpu=gpu) if len(t) and gpu != -1 else grp)
    return pd.concat(parts).loc[frame.index]


def _scenario_gpu(tel: pd.DataFrame, pods: dict[str, set[str]], scenario: str) -> int | None:
    """Which GPU's samples belong to a scenario: the only one, or (DCGM on a multi-GPU node) the one whose
    ``pod`` label names the scenario's pods; -1 when that cannot be told (then nothing is attached)."""
    if "gpu_index" not in tel or tel["gpu_index"].nunique() <= 1:
        return None
    if "pod" in tel and pods.get(scenario):
        gpus = tel.loc[tel["pod"].isin(pods[scenario]), "gpu_index"].unique()
        if len(gpus) == 1:
            return int(gpus[0])
    return -1


def clocks(data: RunData) -> Any:
    """SM clock per scenario, the 10 % baseline-vs-shared flag and the 75 % throttle rule (nvbench's)."""
    if "tel_sm_clock_mhz" not in data.iterations or not data.max_sm_clock_mhz:
        return None
    from kts_helpers.analyse.telemetry import clock_report

    return clock_report(data.iterations, data.max_sm_clock_mhz)


def summarize_run(data: RunData, metrics: tuple[str, ...] = METRICS) -> pd.DataFrame:
    return pd.concat([summarize_frame(data.iterations, m) for m in metrics], ignore_index=True)


def overlap_counts(data_or_frame: RunData | pd.DataFrame) -> pd.DataFrame:
    """Per shared tenant: timed iterations, how many co-ran with every neighbour, and padding lines.

    Every timed iteration of a shared scenario should co-run (the workers pad until all are done);
    ``outside`` > 0 means a tenant started late or stopped early, and those iterations are left out.
    """
    frame = data_or_frame.iterations if isinstance(data_or_frame, RunData) else data_or_frame
    pads = data_or_frame.padding if isinstance(data_or_frame, RunData) else pd.DataFrame()
    cols = ["scenario", "tenant", "timed", "co_running", "outside", "padding"]
    shared = frame[frame["scenario_kind"] == "shared"]
    if shared.empty:
        return pd.DataFrame(columns=cols)
    g = shared.groupby(["scenario", "tenant"])["in_overlap"].agg(timed="size", co_running="sum").reset_index()
    g["outside"] = g["timed"] - g["co_running"]
    n_pad = pads.groupby(["scenario", "tenant"]).size() if len(pads) else pd.Series(dtype=int)
    g["padding"] = [int(n_pad.get((s, t), 0)) for s, t in zip(g["scenario"], g["tenant"], strict=True)]
    return g[cols]


def efficiency(data: RunData) -> pd.DataFrame:
    """Achieved TFLOP/s and GB/s per tenant and scenario, from the work per op each worker reported."""
    if data.meta.empty:
        return pd.DataFrame()
    work = data.meta.drop_duplicates(["scenario", "tenant"]).set_index(["scenario", "tenant"])
    rows = []
    for (scen, tenant), grp in data.iterations.groupby(["scenario", "tenant"]):
        if (scen, tenant) not in work.index:
            continue
        w = work.loc[(scen, tenant)]
        per_op = grp.groupby("iteration")["device_ms"].sum().median() / 1e3  # seconds per op, device clock
        rows.append({"scenario": scen, "tenant": tenant, "workload": grp["workload"].iloc[0],
                     "device_ms_per_op_p50": per_op * 1e3,
                     "tflops": (w.get("flops_per_op") or np.nan) / per_op / 1e12 if per_op > 0 else np.nan,
                     "gb_per_s": (w.get("bytes_per_op") or np.nan) / per_op / 1e9 if per_op > 0 else np.nan})
    return pd.DataFrame(rows)


def write_summary(table: pd.DataFrame, out_dir: str | os.PathLike) -> tuple[Path, Path]:
    """summary.csv and summary.json, written atomically."""
    import json

    from kts_helpers.fsutil import atomic_write_text

    out = Path(out_dir)
    csv = atomic_write_text(out / "summary.csv", table.to_csv(index=False))
    js = atomic_write_text(out / "summary.json", json.dumps(summary_records(table), indent=2) + "\n")
    return csv, js


def primary_shared(names: list[str]) -> str | None:
    """The shared scenario the article's figures use: "shared", else "shared-all", else the first one."""
    for want in ("shared", "shared-all"):
        if want in names:
            return want
    return names[0] if names else None


def focus(table: pd.DataFrame, frame: pd.DataFrame | None = None) -> tuple[pd.DataFrame, pd.DataFrame | None]:
    """Alone rows plus the primary shared scenario, one phase per tenant (LLM: decode), for the main figures.

    Runs with several shared scenarios (modes, matrix) get their own comparison sections; pooling them
    in the alone-vs-shared figures would mix different neighbours.
    """
    shared_names = list(dict.fromkeys(table.loc[table["scenario"] == "shared", "scenario_name"]))
    main = primary_shared(shared_names)
    keep_t = (table["scenario"] == "baseline") | (table["scenario_name"] == main)
    keep_t &= ~table["phase"].isin(["prefill"])
    out_f = None
    if frame is not None:
        keep_f = (frame["scenario_kind"] == "baseline") | (_scenario_group(frame["scenario"]) == main)
        out_f = frame[keep_f & ~frame["phase"].isin(["prefill"])]
    return table[keep_t], out_f


def most_affected(table: pd.DataFrame, metric: str = "wall") -> tuple[str, str] | None:
    """(tenant, scenario) of the shared row with the largest DF: the tenant the report follows over time."""
    shared = table[(table["scenario"] == "shared") & (table["metric"] == metric) & table["df"].notna()]
    if shared.empty:
        return None
    row = shared.loc[shared["df"].idxmax()]
    return str(row["tenant"]), str(row["scenario_name"])
