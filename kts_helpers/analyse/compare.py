"""Beyond the article: sharing modes side by side, who hurts whom, LLM phases (open loop: ``openloop``).

The article compares one pair of tenants alone and time-sliced. A run of this kit can hold more:
the same pair under CUDA time-slicing, MPS and MPS with a thread limit; every pair of three
tenants plus all of them together (a contention matrix); a tenant whose operations arrive on
their own schedule (open loop); and an LLM-like tenant with a prefill and a decode phase.
Each function here is a pure function of a :class:`~kts_helpers.analyse.load.RunData` (or of the
tables built from it) and returns a DataFrame; the matching charts are in ``present.charts``.

Every rule (co-running iterations only, repeat groups, baseline matching, DF and its interval, the CCDF)
comes from ``rules``, and every ``reading`` is the tenant's verdict (``verdict.decide``: the one rule the
summary, the headline and the README use, so no table words a DF interval its own way); ``note`` carries
what the interval said (no bound at this n, a short series). A report's verdicts are one family (Holm over
tenants x scenarios x clocks): given the report's readings (``report``: ``summary.family_readings``), a table
quotes them for the series the report reads, and reads the others (an open loop's time to first token, another
quantile) as one family of their own (``_as_family``); without them, the table's verdicts are its family.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd

from kts_helpers.analyse import stats
from kts_helpers.analyse.estimate import Estimate
from kts_helpers.analyse.load import RunData
from kts_helpers.analyse.prior import kind_of
from kts_helpers.analyse.rules import (
    Degradation,
    collided_of,
    match_baseline,
    quantile,
    runs_of,
    scenario_group,
    series_label,
)
from kts_helpers.analyse.verdict import Verdict, decide, family
from kts_helpers.run.manifest import RunManifest

__all__ = ["MODE_ORDER", "Scenario", "catalogue", "contention_matrix", "has_matrix", "has_modes", "has_phases",
           "modes_table", "phase_table"]

MODE_ORDER = ("alone", "timeslice", "mps", "mps-limited")
ALL_OTHERS = "all others"
PRIMARY_PHASE = {"llm": "decode"}  # the phase a workload's headline number uses; others: every phase


# -- scenario catalogue -------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Scenario:
    """A scenario of the run that has iterations: its name, repeat group, kind, sharing, repeat, tenants."""

    name: str
    group: str
    kind: str
    sharing: str
    repeat: int
    tenants: tuple[str, ...]


def catalogue(data: RunData) -> list[Scenario]:
    """Every baseline and shared scenario of the run that has iterations, in spec order."""
    present = set(data.iterations["scenario"].unique())
    return [Scenario(s.name, scenario_group(s.name), s.kind, s.sharing, s.repeat, tuple(s.tenant_names))
            for s in data.manifest.scenarios if s.name in present and s.kind in ("baseline", "shared")]


def _tenant_order(data: RunData) -> list[str]:
    names: list[str] = []
    for s in catalogue(data):
        names += [t for t in s.tenants if t not in names]
    return names


def _rows(data: RunData, scenarios: Iterable[str], tenant: str, phase: str | None = None) -> pd.DataFrame:
    """Overlap-clipped rows of one tenant (and phase) in some scenarios, in time order."""
    it = data.iterations
    sel = it["scenario"].isin(list(scenarios)) & (it["tenant"] == tenant)
    if phase is not None:
        sel &= it["phase"] == phase
    if "in_overlap" in it:
        sel &= it["in_overlap"].astype(bool)
    return it[sel].sort_values("start_ns")


def _baseline_rows(data: RunData, cat: list[Scenario], tenant: str, workload: str, phase: str,
                   sharing: str = "timeslice") -> pd.DataFrame:
    """The alone series a shared series of mode ``sharing`` is compared with (``rules.match_baseline``: that mode's
    own alone blocks where the run has them, the plain ones otherwise), in time order."""
    names = [s.name for s in cat if s.kind == "baseline"]
    it = data.iterations
    alone = it[it["scenario"].isin(names)]
    if "in_overlap" in alone:
        alone = alone[alone["in_overlap"].astype(bool)]
    return match_baseline(alone, tenant, workload, phase, sharing).sort_values("start_ns")


def _quantile(runs: list[np.ndarray], q: float, n_resamples: int, seed: int | None) -> stats.Interval:
    return quantile(runs, q, n_resamples=n_resamples, seed=seed)


def _df_bounds(df: Degradation | None) -> Estimate:
    """A DF's interval columns; NaN (no interval) on an alone row."""
    return df.bounds if df is not None else Estimate(float("nan"))


def _notes(*ivs: stats.Interval) -> str:
    return "; ".join(dict.fromkeys(iv.note for iv in ivs if iv.note))


# -- 1. sharing modes ---------------------------------------------------------------------------------------
def plugin_mps_caps(manifest: RunManifest) -> dict | None:
    """The caps the Kubernetes device plugin's MPS daemon put on every client of this run's MPS scenarios (the
    record's ``mps_caps``: SM share 100/replicas %, memory 1/replicas), or None: local MPS, uncapped unless a
    thread limit is set. The two are different conditions: a plugin-MPS number is shown with its caps, and is
    never set beside a local MPS one unlabelled."""
    return next((r.extra["mps_caps"] for r in manifest.records.values() if r.extra.get("mps_caps")), None)


def plugin_mps_text(caps: dict) -> str:
    """One sentence naming the caps (the report's modes section, the lesson)."""
    return (f"MPS here is the Kubernetes device plugin's ({caps.get('replicas')} replicas): every client, the alone "
            f"baselines included, was capped at {caps.get('active_thread_percentage'):g} % of the SMs and "
            f"{100 * float(caps.get('pinned_memory_fraction') or 0):g} % of the memory, so these numbers are not "
            "local MPS's (uncapped) and are not compared with them.")


Key = tuple[str, str, str, str]  # (group, tenant, phase, clock): a series the report reads


def _as_family(rows: list[dict], verdicts: list[Verdict | None], keys: list[Key | None],
               report: Mapping[Key, str] | None) -> None:
    """Each row's ``reading`` as a member of the report's family: the report's own word where it reads the same
    series (``report``), the rest read together by Holm (``verdict.family``), never one verdict at its own level."""
    quoted = {i for i, k in enumerate(keys) if report is not None and k is not None and k in report}
    own = [i for i, v in enumerate(verdicts) if v is not None and i not in quoted]
    for i, v in zip(own, family([verdicts[i] for i in own]), strict=True):
        rows[i]["reading"] = v.reading
    for i in quoted:
        rows[i]["reading"] = report[keys[i]]  # type: ignore[index]


def has_modes(data: RunData) -> bool:
    """Whether the run's shared scenarios use more than one sharing mode (timeslice, mps, mps-limited)."""
    return len({s.sharing for s in catalogue(data) if s.kind == "shared"}) > 1


def _thread_pct(data: RunData, scen: str, tenant: str) -> float:
    t = data.manifest.spec.tenant(scen, tenant)
    return float(t.mps_thread_percentage) if t is not None and t.mps_thread_percentage is not None else float("nan")


def modes_table(data: RunData, *, metric: str = "wall", n_resamples: int = 2000,
                seed: int | None = 0, report: Mapping[Key, str] | None = None) -> pd.DataFrame:
    """Per tenant (and phase) and sharing mode: p50/p99 with intervals, DF vs alone, device p50.

    Why: the article measures time-slicing only. MPS lets kernels of different processes share
    the SMs at once, and a thread limit caps a tenant's share; whether that helps the victim, and
    what it costs the neighbour, is only visible with both tenants' numbers side by side, each
    with its interval. One row per tenant is the alone baseline (mode "alone"); for each mode the
    scenario with the most tenants is used (``shared``/``shared-all`` in matrix runs).
    Columns: tenant, workload, phase, label, mode, scenario, thread_pct (MPS thread limit), n,
    p50_ms/p50_lo/p50_hi, p99_ms/p99_lo/p99_hi, device_p50_ms, df/df_lo/df_hi (p99), reading, note.
    """
    col = f"{metric}_ms"
    cat = catalogue(data)
    picked: dict[str, list[Scenario]] = {}
    for mode in dict.fromkeys(s.sharing for s in cat if s.kind == "shared"):
        scens = [s for s in cat if s.kind == "shared" and s.sharing == mode]
        top = max(len(s.tenants) for s in scens)
        groups = list(dict.fromkeys(s.group for s in scens if len(s.tenants) == top))
        picked[mode] = [s for s in scens if s.group == groups[0]]
    it = data.iterations
    rows: list[dict] = []
    verdicts: list[Verdict | None] = []
    keys: list[Key | None] = []
    for tenant in _tenant_order(data):
        mine = it[it["tenant"] == tenant]
        if mine.empty:
            continue
        workload = str(mine["workload"].iloc[0])
        for phase in dict.fromkeys(mine["phase"].astype(str)):
            alone = _baseline_rows(data, cat, tenant, workload, phase)
            series = [("alone", [s for s in cat if s.kind == "baseline" and tenant in s.tenants], alone)]
            for mode, scens in picked.items():
                scens = [s for s in scens if tenant in s.tenants]
                if scens:
                    series.append((mode, scens, _rows(data, [s.name for s in scens], tenant, phase)))
            for mode, scens, r in series:
                if r.empty and mode == "alone":
                    continue
                base_runs = runs_of(alone if mode == "alone" else
                                    _baseline_rows(data, cat, tenant, workload, phase, scens[0].sharing), col)
                runs = runs_of(r, col)
                p50 = _quantile(runs, 0.50, n_resamples, seed)
                p99 = _quantile(runs, 0.99, n_resamples, seed)
                v = decide(runs, base_runs, n_resamples=n_resamples, seed=seed,
                           collided=collided_of(r), kind=kind_of(it, tenant)) if mode != "alone" else None
                df = v.df if v else None
                scen_name = scens[0].group if scens else "baseline"
                verdicts.append(v)
                keys.append((scen_name, tenant, phase, metric) if v else None)
                rows.append({
                    "tenant": tenant, "workload": workload, "phase": phase, "label": series_label(tenant, phase),
                    "mode": mode, "scenario": scen_name,
                    "thread_pct": _thread_pct(data, scens[0].name, tenant) if scens else float("nan"),
                    "n": int(len(r)),
                    "p50_ms": p50.estimate, **Estimate.of(p50).columns("p50"),
                    "p99_ms": p99.estimate, **Estimate.of(p99).columns("p99"),
                    "device_p50_ms": float(np.median(r["device_ms"])) if len(r) else float("nan"),
                    "df": df.estimate if df else float("nan"), **_df_bounds(df).columns("df"),
                    "reading": v.reading if v else "",
                    "note": _notes(*(x for x in (p50, p99, df) if x is not None)),
                })
    _as_family(rows, verdicts, keys, report)
    return pd.DataFrame(rows, columns=[
        "tenant", "workload", "phase", "label", "mode", "scenario", "thread_pct", "n", "p50_ms", "p50_lo",
        "p50_hi", "p99_ms", "p99_lo", "p99_hi", "device_p50_ms", "df", "df_lo", "df_hi", "reading", "note"])


# -- 2. contention matrix -----------------------------------------------------------------------------------
def has_matrix(data: RunData) -> bool:
    """Whether some tenant was measured next to more than one set of neighbours in one sharing mode."""
    cat = catalogue(data)
    for mode in {s.sharing for s in cat if s.kind == "shared"}:
        sets = {frozenset(s.tenants) for s in cat if s.kind == "shared" and s.sharing == mode}
        if len(sets) > 1:
            return True
    return False


def _neighbour_label(s: Scenario, victim: str, all_tenants: list[str]) -> str:
    others = [t for t in s.tenants if t != victim]
    if len(all_tenants) > 2 and set(s.tenants) >= set(all_tenants) and len(others) > 1:
        return ALL_OTHERS
    order = {t: i for i, t in enumerate(all_tenants)}
    return "+".join(sorted(others, key=lambda t: order.get(t, len(order))))


def contention_matrix(data: RunData, *, q: float = 0.99, metric: str = "wall", n_resamples: int = 2000,
                      seed: int | None = 0, report: Mapping[Key, str] | None = None) -> pd.DataFrame:
    """Who hurts whom: the victim's DF next to each set of neighbours, with its interval and reading.

    Why: one shared scenario says a tenant is slower, not because of whom. Pair scenarios
    (``shared-<a>+<b>``) isolate each neighbour's effect, ``shared-all`` (neighbours "all others")
    shows whether effects add up. One row per victim, neighbour set, sharing mode and phase; for a
    multi-phase workload (llm) every phase has a row and ``primary`` marks the headline one
    (decode: the per-token latency a user feels); single-phase workloads' rows are all primary.
    Columns: victim, neighbours, sharing, phase, primary, scenario, q, metric, alone_ms, shared_ms
    (the q-quantiles), df, df_lo, df_hi, reading, n_shared, n_alone, note.
    """
    col = f"{metric}_ms"
    cat = catalogue(data)
    tenants = _tenant_order(data)
    it = data.iterations
    workloads = it.drop_duplicates("tenant").set_index("tenant")["workload"].astype(str).to_dict()
    rows: list[dict] = []
    verdicts: list[Verdict | None] = []
    keys: list[Key | None] = []
    for victim in tenants:
        workload = workloads.get(victim, victim)
        phases = list(dict.fromkeys(it.loc[it["tenant"] == victim, "phase"].astype(str)))
        for mode in dict.fromkeys(s.sharing for s in cat if s.kind == "shared"):
            scens = [s for s in cat if s.kind == "shared" and s.sharing == mode and victim in s.tenants]
            groups: dict[str, list[Scenario]] = {}
            for s in scens:
                groups.setdefault(s.group, []).append(s)
            ordered = sorted(groups.values(), key=lambda g: (len(g[0].tenants), _pair_key(g[0], victim, tenants)))
            for grp in ordered:
                label = _neighbour_label(grp[0], victim, tenants)
                for phase in phases:
                    shared = _rows(data, [s.name for s in grp], victim, phase)
                    alone = _baseline_rows(data, cat, victim, workload, phase, mode)
                    v = decide(runs_of(shared, col), runs_of(alone, col), q=q, n_resamples=n_resamples, seed=seed,
                               collided=collided_of(shared), kind=kind_of(it, victim))
                    iv = v.df
                    primary = PRIMARY_PHASE.get(workload, phase) == phase or len(phases) == 1
                    verdicts.append(v)
                    keys.append((grp[0].group, victim, phase, metric) if q == 0.99 else None)  # the report's p99
                    rows.append({
                        "victim": victim, "neighbours": label, "sharing": mode, "phase": phase, "primary": primary,
                        "scenario": grp[0].group, "q": q, "metric": metric,
                        "alone_ms": float(np.quantile(alone[col], q)) if len(alone) else float("nan"),
                        "shared_ms": float(np.quantile(shared[col], q)) if len(shared) else float("nan"),
                        "df": iv.estimate, **iv.bounds.columns("df"), "reading": v.reading,
                        "n_shared": int(len(shared)), "n_alone": int(len(alone)), "note": iv.note,
                    })
    _as_family(rows, verdicts, keys, report)
    return pd.DataFrame(rows, columns=[
        "victim", "neighbours", "sharing", "phase", "primary", "scenario", "q", "metric", "alone_ms", "shared_ms",
        "df", "df_lo", "df_hi", "reading", "n_shared", "n_alone", "note"])


def _pair_key(s: Scenario, victim: str, tenants: list[str]) -> list[int]:
    order = {t: i for i, t in enumerate(tenants)}
    return sorted(order.get(t, len(order)) for t in s.tenants if t != victim)


# -- 4. LLM phases ------------------------------------------------------------------------------------------
PHASE_STATS = {"prefill": ("time to first token", "response_ms"), "decode": ("per-token decode", "wall_ms")}


def has_phases(data: RunData) -> bool:
    """Whether some tenant reports a prefill and a decode phase (the llm workload)."""
    it = data.iterations
    for _tenant, grp in it.groupby("tenant"):
        if {"prefill", "decode"} <= set(grp["phase"].astype(str)):
            return True
    return False


def phase_table(data: RunData, *, n_resamples: int = 2000, seed: int | None = 0,
                report: Mapping[Key, str] | None = None) -> pd.DataFrame:
    """Time to first token and per-token decode latency per scenario, with intervals and DF vs alone.

    Why: an LLM tenant's users feel two numbers, not one: the wait for the first token (the
    prefill, one long pass over the prompt) and the pace of the following tokens (one short
    decode step each). A neighbour can hurt them differently: short decode kernels queue behind
    a time slice as often as long ones but lose proportionally more.
    Time to first token = prefill ``response_ms`` (end - intended: from launch in closed loop,
    from arrival in open loop); per-token decode = each decode step's ``wall_ms``.
    Columns: tenant, stat, phase, scenario, when, sharing, n, p50_ms/p50_lo/p50_hi,
    p99_ms/p99_lo/p99_hi, df/df_lo/df_hi (p99 vs alone), reading, note.
    """
    cat = catalogue(data)
    it = data.iterations
    rows: list[dict] = []
    verdicts: list[Verdict | None] = []
    keys: list[Key | None] = []
    for tenant in _tenant_order(data):
        mine = it[it["tenant"] == tenant]
        if not {"prefill", "decode"} <= set(mine["phase"].astype(str)):
            continue
        workload = str(mine["workload"].iloc[0])
        for phase, (stat, col) in PHASE_STATS.items():
            groups: dict[str, list[Scenario]] = {}
            for s in cat:
                if tenant in s.tenants:
                    groups.setdefault(s.group, []).append(s)
            for group, scens in groups.items():
                r = _rows(data, [s.name for s in scens], tenant, phase)
                shared = scens[0].kind == "shared"
                if r.empty and not shared:
                    continue
                runs = runs_of(r, col)
                p50 = _quantile(runs, 0.50, n_resamples, seed)
                p99 = _quantile(runs, 0.99, n_resamples, seed)
                v = decide(runs, runs_of(_baseline_rows(data, cat, tenant, workload, phase, scens[0].sharing), col),
                           n_resamples=n_resamples, seed=seed, collided=collided_of(r),
                           kind=kind_of(it, tenant)) if shared else None
                df = v.df if v else None
                verdicts.append(v)
                # the report reads wall time; time to first token is the same series in closed loop only
                same = col == "wall_ms" or r["response_ms"].equals(r["wall_ms"])
                keys.append((group, tenant, phase, "wall") if v and same else None)
                rows.append({
                    "tenant": tenant, "stat": stat, "phase": phase, "scenario": group,
                    "when": "shared" if shared else "alone", "sharing": scens[0].sharing, "n": int(len(r)),
                    "p50_ms": p50.estimate, **Estimate.of(p50).columns("p50"),
                    "p99_ms": p99.estimate, **Estimate.of(p99).columns("p99"),
                    "df": df.estimate if df else float("nan"), **_df_bounds(df).columns("df"),
                    "reading": v.reading if v else "",
                    "note": _notes(*(x for x in (p50, p99, df) if x is not None)),
                })
    _as_family(rows, verdicts, keys, report)
    return pd.DataFrame(rows, columns=[
        "tenant", "stat", "phase", "scenario", "when", "sharing", "n", "p50_ms", "p50_lo", "p50_hi", "p99_ms",
        "p99_lo", "p99_hi", "df", "df_lo", "df_hi", "reading", "note"])
