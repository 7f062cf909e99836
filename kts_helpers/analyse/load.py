"""From a run directory (or loose log files) to one typed table of iterations.

Three clocks per iteration (``rules.add_clocks``): ``device_ms`` (CUDA events), ``wall_ms`` (launch to
completion on the host: what a latency SLO sees) and ``wait_ms`` (wall - device - overhead floor). The
rules that decide which iterations count (co-running window, padding, warm-up) live in ``rules``; this
module applies them in their order: window from the raw lines first, then padding aside, then trimming.
Columns: ``scenario`` (as run, e.g. ``shared-r2``), ``kind`` (baseline/shared), ``group`` (``shared``),
``repeat``, ``sharing``, ``tenant``, ``workload``, ``phase``, the clocks, ``in_overlap`` and ``tel_*``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from kts_helpers.analyse import hostspeed
from kts_helpers.analyse.logparse import ParsedLog, parse_file, parse_files
from kts_helpers.analyse.rules import (
    add_clocks,
    apply_warmup,
    mark_collided,
    mark_overlap,
    scenario_group,
    split_padding,
    trim_leading,
)
from kts_helpers.analyse.telemetry import (
    attach_telemetry,
    clock_report,
    dcgm_strangers,
    gpu_strangers,
    load_telemetry,
)
from kts_helpers.errors import LogParseError, RunError
from kts_helpers.run.corun import CoRunError, gpu_mismatch
from kts_helpers.run.manifest import RunManifest, ScenarioRecord
from kts_helpers.run.runs import Run, open_run
from kts_helpers.run.telemetry import read_status


@dataclass
class RunData:
    """Everything analysis needs from one run directory, loaded once."""

    run: Run
    manifest: RunManifest
    iterations: pd.DataFrame
    meta: pd.DataFrame
    parse_issues: pd.DataFrame
    problems: list[str] = field(default_factory=list)
    dropped: pd.DataFrame = field(default_factory=pd.DataFrame)
    padding: pd.DataFrame = field(default_factory=pd.DataFrame)  # pad lines: neighbours' load, never timed
    telemetry: pd.DataFrame = field(default_factory=pd.DataFrame)
    telemetry_status: dict[str, dict[str, Any]] = field(default_factory=dict)
    stopping: pd.DataFrame = field(default_factory=pd.DataFrame)  # KTS_END: n reached and why, per tenant

    @property
    def floor_ms(self) -> float:
        return self.manifest.floor_ms

    @property
    def max_sm_clock_mhz(self) -> float | None:
        for st in self.telemetry_status.values():
            if st.get("max_sm_clock_mhz"):
                return float(st["max_sm_clock_mhz"])
        v = self.manifest.environment.get("max_sm_clock_mhz")
        return float(v) if v else None

    @property
    def run_id(self) -> str:
        return self.manifest.run_id or self.run.path.name

    @property
    def on_gpu(self) -> bool:
        return self.manifest.on_gpu

    @property
    def two_clocks(self) -> bool:
        """Whether device time is a clock of its own: on a GPU (CUDA events) always; on a CPU when the worker's
        wall clock started at the operation's due time, so wall - device is the wait for the core (since
        2026-12-01; before that a CPU worker wrote one number twice, and there is nothing to split)."""
        if self.on_gpu:
            return True
        it = self.iterations
        return bool(len(it)) and bool(((it["wall_ms"] - it["device_ms"]) > 0).any())


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
        f["kind"] = kind
        f["scenario"] = kind if kind == "shared" else "baseline-" + f["tenant"].astype(str)
        f["group"] = f["scenario"]
        f["repeat"] = 0
        f["sharing"] = "timeslice"
        frames.append(f)
        last = parsed if last is None else _merge_counts(last, parsed)
    if not frames:
        raise LogParseError("no log files given; pass --baseline and/or --shared files")
    frame = mark_collided(mark_overlap(pd.concat(frames, ignore_index=True), clip=clip))  # raw lines, padding included
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
    out = ParsedLog(frame=a.frame)
    out.add(a)
    out.add(b)
    return out


def read_manifest(run_dir: str | os.PathLike) -> RunManifest:
    """A run's manifest alone (what ran, where, how it ended), without reading its logs."""
    return open_run(run_dir).read()


def load_run(run_dir: str | os.PathLike | Run, *, clip: bool = True, trim: int = 0,
             warmup: str = "none", telemetry: bool = True) -> RunData:
    """Load every completed tenant log of a run (and say what is missing or failed).

    ``telemetry`` False: the logs only (``blocks=auto``'s looks, while the session's sampler still writes). A
    scenario the run skipped (``blocks=auto`` decided before it) has no logs and is no problem.

    The overlap window comes first, from the raw lines (padding included); then padding is set aside
    (``RunData.padding``) and ``trim`` / the ``warmup`` rule (see ``apply_warmup``) drop leading timed
    iterations, the counts in ``RunData.dropped``. A shared scenario whose tenants name different GPU
    UUIDs is refused (CoRunError).
    """
    run = run_dir if isinstance(run_dir, Run) else open_run(run_dir)
    manifest = run.read()
    problems: list[str] = []
    if manifest.status == "failed":
        problems.append(f"run {run.run_id} is marked failed (scenario(s): "
                        f"{', '.join(manifest.failed_scenarios) or '?'}); showing what its logs hold")
    elif manifest.status != "complete":
        problems.append(f"run {run.run_id} is {manifest.status!r}, not complete; showing what exists")
    if manifest.format_version < 2:
        problems.append(f"run {run.run_id} uses manifest format {manifest.format_version}; "
                        "fields added later (calibration, telemetry) may be missing")
    frames, metas, issues, ends = [], [], [], []
    for scen in manifest.scenarios:
        scen_logs: dict[str, ParsedLog] = {}
        rec = manifest.record(scen.name)
        if rec is not None and rec.status == "skipped":
            continue
        for tenant in scen.tenant_names:
            path = run.log_path(scen.name, tenant)
            if not path.exists():
                problems.append(f"no log for {scen.name}/{tenant}")
                continue
            parsed = parse_file(path)
            scen_logs[tenant] = parsed
            issues.append({"scenario": scen.name, "tenant": tenant, "valid": parsed.n,
                           "malformed": parsed.malformed, "other": parsed.other, "rejected": parsed.n_rejected,
                           "rejected_why": "; ".join(f"{k}: {v}" for k, v in parsed.rejected.items())})
            if parsed.n == 0:
                problems.append(f"{scen.name}/{tenant}: log has no valid KTS_APP line")
                continue
            f = parsed.frame
            f["scenario"] = scen.name
            f["kind"] = scen.kind
            f["group"] = scenario_group(scen.name)
            f["sharing"] = scen.sharing
            f["repeat"] = scen.repeat
            f["source"] = str(path)
            f[hostspeed.COLUMN] = hostspeed.probe_column(f, parsed.ends)  # the host's speed after each iteration
            f[hostspeed.ISSUE_COLUMN] = hostspeed.issue_column(f, parsed.ends)  # how long the host took to issue it
            frames.append(f)
            for m in parsed.meta:
                metas.append({"scenario": scen.name, **{k: v for k, v in m.items() if k != "notes"}})
            ends += [stopping_row(scen.name, tenant, e) for e in parsed.ends]
        if scen.kind == "shared":
            _refuse_split_gpus(scen_logs, f"run {run.run_id}, scenario {scen.name}")
    if not frames:
        raise RunError(f"run {run.run_id} has no usable iterations yet"
                       + (f" ({problems[0]})" if problems else ""))
    frame = mark_collided(mark_overlap(pd.concat(frames, ignore_index=True), clip=clip))  # raw lines, untrimmed
    frame, padding = split_padding(frame)
    frame, dropped = apply_warmup(frame, trim=trim, rule=warmup)
    frame = add_clocks(frame, manifest.floor_ms)
    tel, tel_status = load_run_telemetry(run, manifest) if telemetry else (pd.DataFrame(), {})
    pods = {name: {str(t.get("pod") or (t.get("events") or {}).get("pod")) for t in rec.tenants.values()}
            for name, rec in manifest.records.items()}
    frame = attach_run_telemetry(frame, tel, pods, tel_status)
    problems += strangers_on_the_gpu(manifest, tel, metas)
    problems += dcgm_page_problems(tel_status)
    return RunData(run=run, manifest=manifest, iterations=frame, meta=pd.DataFrame(metas),
                   parse_issues=pd.DataFrame(issues), problems=problems, telemetry=tel,
                   telemetry_status=tel_status, dropped=dropped, padding=padding,
                   stopping=pd.DataFrame(ends, columns=STOPPING_COLUMNS))


STOPPING_COLUMNS = ["scenario", "tenant", "rule", "n", "reason", "elapsed_s", "target", "p99_ms", "p99_lo_ms",
                    "p99_hi_ms", "half_width", "projected_n"]


def stopping_row(scenario: str, tenant: str, end: dict[str, Any]) -> dict[str, Any]:
    """One KTS_END record as a row: the rule, n reached, why it stopped, and (auto) the widest phase's p99 interval."""
    rule = end.get("rule") or {}
    phases = [v for v in (end.get("p99") or {}).values() if isinstance(v, dict)]
    worst = max(phases, key=lambda v: v.get("rel_half_width") or float("inf"), default={})
    return {"scenario": scenario, "tenant": tenant, "rule": rule.get("rule", "fixed"), "n": end.get("n"),
            "reason": end.get("reason"), "elapsed_s": end.get("elapsed_s"), "target": rule.get("rel_width"),
            "p99_ms": worst.get("estimate"), "p99_lo_ms": worst.get("lo"), "p99_hi_ms": worst.get("hi"),
            "half_width": worst.get("rel_half_width"), "projected_n": end.get("projected_n")}


def strangers_on_the_gpu(manifest: RunManifest, tel: pd.DataFrame, metas: list[dict[str, Any]]) -> list[str]:
    """Per scenario, a problem line for each process on the GPU that was not one of its tenants (bare host:
    ``telemetry.gpu_strangers``, by the PIDs the tenants' KTS_META lines give) and each pod dcgm-exporter
    attributes the tenants' GPU to that is not the scenario's Job's (Kubernetes: ``telemetry.dcgm_strangers``)."""
    if tel.empty:
        return []
    out = []
    # the warm design: a block's idle neighbours are the run's own resident workers (the same pids in every block
    # of their mode), not strangers; what they cost "alone" is the idle-neighbour control's to say (analyse.design)
    warm = manifest.spec.resolved.get("design_kind") == "warm"
    own = {int(m["pid"]) for m in metas if m.get("pid") is not None} if warm else set()
    for scen in manifest.scenarios:
        mine_meta = [m for m in metas if m.get("scenario") == scen.name]
        pids = {int(m["pid"]) for m in mine_meta if m.get("pid") is not None} | own
        uuids = {m.get("gpu_uuid") for m in mine_meta} - {None}
        rec = manifest.record(scen.name)
        mine = tel[tel["scenario"] == scen.name]
        found = gpu_strangers(mine, tenant_pids=pids, mps=scen.sharing != "timeslice") if "procs_json" in mine \
            else []
        if rec is not None and len(uuids) == 1:
            found += dcgm_strangers(mine, gpu_uuid=uuids.pop(), namespace=rec.extra.get("namespace"),
                                    job=rec.extra.get("job"))
        for text in found:
            out.append(f"{scen.name}: a process that is not one of its tenants used the GPU during it ({text}): "
                       "it competed with the measurement, which then is not what its label says")
    return out


def load_run_telemetry(run: Run, manifest: RunManifest) -> tuple[pd.DataFrame, dict[str, dict[str, Any]]]:
    """Each scenario's telemetry (NVML sampler or DCGM scrape) and its status; empty where there is none.

    A warm block has no file of its own: its record names its session's (``session_path``), and its telemetry is
    that file's samples within the block's start and end, with the session sampler's status (how it ended)."""
    frames, status = [], {}
    sessions: dict[str, tuple[pd.DataFrame, dict[str, Any]]] = {}
    for scen in manifest.scenarios:
        path = run.log_dir(scen.name) / "telemetry.parquet"
        record = manifest.record(scen.name)
        st = read_status(path) or (record.telemetry if record else None) or {
            "status": "absent", "reason": "no telemetry recorded"}
        if st.get("session_path") and record is not None:
            tel, st = _session_window(run, st, record, sessions)
        elif st.get("status") in ("complete", "partial"):
            tel = load_telemetry(path)
        else:
            tel = None
        status[scen.name] = st
        if tel is not None and len(tel):
            frames.append(tel.assign(scenario=scen.name, kind=scen.kind))
    return (pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()), status


def _session_window(run: Run, recorded: dict[str, Any], record: ScenarioRecord,
                    sessions: dict[str, tuple[pd.DataFrame, dict[str, Any]]]) -> tuple[pd.DataFrame, dict[str, Any]]:
    """A warm block's samples (its window of the session's file) and its status: the session sampler's last word,
    with this block's sample count."""
    key = str(recorded["session_path"])
    if key not in sessions:
        where = run.path / key
        final = read_status(where) or {"status": "absent", "reason": f"the session sampler wrote nothing ({key})"}
        sessions[key] = (load_telemetry(where) if final.get("status") in ("complete", "partial") else
                         pd.DataFrame(), final)
    whole, final = sessions[key]
    if whole.empty or record.started_ns is None or record.ended_ns is None:
        return whole, {**final, "samples": 0, "session_path": key}
    mine = whole[(whole["ts_ns"] >= record.started_ns) & (whole["ts_ns"] <= record.ended_ns)].reset_index(drop=True)
    st = {**final, "samples": int(len(mine)), "session_path": key}
    if final.get("status") == "complete" and not len(mine):
        st.update(status="absent", reason="no session sample fell inside this block")
    return mine, st


def dcgm_page_problems(statuses: dict[str, dict[str, Any]]) -> list[str]:
    """A problem line per scenario whose dcgm-exporter pages the backend refused (another GPU or node) or flagged
    (one pod per device: ``run.telemetry.page_check``)."""
    out = []
    for scen, st in statuses.items():
        if st.get("refused"):
            out.append(f"{scen}: DCGM telemetry {st.get('reason')}")
        if st.get("attribution"):
            out.append(f"{scen}: DCGM {st['attribution']}")
    return out


def join_tolerance_ms(status: dict[str, Any] | None) -> float:
    """How far from an iteration its telemetry sample may be: 250 ms, or half the dcgm-exporter's collect interval
    where the scraper measured it (the exporter serves one collection for 30 s by default: a finer join would
    only pretend)."""
    interval = (status or {}).get("exporter_interval_ms")
    return max(250.0, float(interval) / 2) if isinstance(interval, (int, float)) and interval > 0 else 250.0


def attach_run_telemetry(frame: pd.DataFrame, tel: pd.DataFrame, pods: dict[str, set[str]] | None = None,
                         statuses: dict[str, dict[str, Any]] | None = None) -> pd.DataFrame:
    """Join each iteration to the nearest telemetry sample of its own scenario (``tel_*`` columns), at the
    resolution its source has (``join_tolerance_ms``)."""
    if tel.empty:
        return frame
    parts = []
    for scen, grp in frame.groupby("scenario", sort=False):
        t = tel[tel["scenario"] == scen].drop(columns=["scenario", "kind"])
        gpu = _scenario_gpu(t, pods or {}, scen)
        tolerance = join_tolerance_ms((statuses or {}).get(str(scen)))
        parts.append(attach_telemetry(grp, t, gpu=gpu, tolerance_ms=tolerance) if len(t) and gpu != -1 else grp)
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
    return clock_report(data.iterations, data.max_sm_clock_mhz)
