"""What each tenant does on the device, from the profile its alone run recorded (``workers/kts_profile.py``).

Why: the planner's mechanisms (MPS weight, SM need, kernel boundaries, the host share of an op) come from these
numbers, so a reader of a run must see them beside the times they explain, and see whether the profile left
anything behind on the timed iterations that followed it in the same process (CUPTI attached: every later launch
pays its callbacks; ``residue``: the tenant's p50 just after the profile over just before it, a noisy hint).

One row per alone block, tenant and phase: kernels per op, the kernels' time per op (device clock) and that time
over the *timed* alone p50 wall (the busy share the planner uses: the profiled wall runs slower than the timed
one), the SM share of the grids, peak memory, what profiling cost in run time, whether CUPTI was detached, and
the residue. Rows are built from a profile and the timed walls (:func:`profile_rows`), so the report and the
planner's validation block (``plan.validation``) read one rule.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from kts_helpers.run.logformat import PAD_PHASE


def profile_rows(profile: Mapping[str, Any], walls: Mapping[str, np.ndarray]) -> list[dict[str, Any]]:
    """One row per phase of ``walls`` (the timed alone walls, ms): the profile's numbers for it (NaN where the
    profile did not see the phase) and the timed p50/p99."""
    memory = profile.get("memory") or {}
    phases = profile.get("phases") or {}
    residue = profile.get("residue") or {}
    gpu = profile.get("device") == "cuda"
    rows = []
    for phase, wall in walls.items():
        ph = phases.get(phase) or {}
        p50 = float(np.median(wall)) if len(wall) else float("nan")
        busy = ph.get("busy_ms") if ph.get("kernels_per_op") else None  # a profile that saw no kernel measured none
        rows.append({
            "phase": phase, "n": len(wall), "wall_p50_ms": p50,
            "wall_p99_ms": float(np.quantile(wall, 0.99)) if len(wall) else float("nan"),
            "kernels_per_op": float(ph["kernels_per_op"]) if ph.get("kernels_per_op") else float("nan"),
            "busy_ms": float(busy) if busy is not None else float("nan"),
            "busy_share": float(busy) / p50 if busy is not None and p50 > 0 else float("nan"),
            "sm_share": float(ph["sm_share"]) if ph.get("sm_share") is not None else float("nan"),
            "host_syncs": float(ph["host_syncs"]) if ph.get("host_syncs") is not None else float("nan"),  # v3 on
            "peak_mib": float(memory.get("peak_mib", memory.get("rss_peak_mib", float("nan")))),
            "cost_s": float(profile.get("cost_s", float("nan"))),
            "cupti_detached": (bool(profile.get("cupti_teardown")) if gpu else None),
            "residue": float(residue[phase]) if phase in residue else float("nan"),
        })
    return rows


def profiles_table(meta: pd.DataFrame, iterations: pd.DataFrame) -> pd.DataFrame:
    """Every profiled alone block's rows (:func:`profile_rows`), with scenario and tenant; empty: no profile."""
    if meta.empty or "profile" not in meta:
        return pd.DataFrame()
    out = []
    alone = iterations[(iterations["kind"] == "baseline") & (iterations["phase"] != PAD_PHASE)]
    for _, m in meta.iterrows():
        prof = m.get("profile")
        if not isinstance(prof, dict):
            continue
        mine = alone[(alone["scenario"] == m["scenario"]) & (alone["tenant"] == m["tenant"])]
        walls = {str(ph): g["wall_ms"].to_numpy(float) for ph, g in mine.groupby("phase", sort=False)}
        out += [{"scenario": m["scenario"], "tenant": m["tenant"], **r} for r in profile_rows(prof, walls)]
    return pd.DataFrame(out)


def profile_warnings(blocks: list[tuple[str, str, bool | None]]) -> list[str]:
    """One sentence naming the alone blocks whose GPU profile left CUPTI attached (``blocks``: tenant, scenario,
    CUPTI detached after the profile, None on a CPU); none when every profile detached it.

    The residue is shown, never warned on: it is two ~1 s windows of a host that drifts, and on the H200 blocks whose
    profile detached CUPTI read 0.60-1.83 (2026-12-03), as wide as the effect it would have to find."""
    attached = [f"{tenant} ({scenario})" for tenant, scenario, detached in blocks if detached is False]
    if not attached:
        return []
    return [f"the GPU profile left CUPTI attached in {len(attached)} alone block(s) ({', '.join(attached)}): a "
            f"worker before the teardown, or TEARDOWN_CUPTI=0. Every later launch of those processes paid CUPTI's "
            f"callbacks, so a launch-bound tenant's alone times run slow, ratios against them lean low and "
            f"predictions high"]


def warnings(table: pd.DataFrame) -> list[str]:
    """:func:`profile_warnings` for every profiled alone block of :func:`profiles_table`."""
    if table.empty:
        return []
    blocks = []
    for (scenario, tenant), g in table.groupby(["scenario", "tenant"], sort=False):
        det = g["cupti_detached"].iloc[0]
        blocks.append((str(tenant), str(scenario), None if det is None or pd.isna(det) else bool(det)))
    return profile_warnings(blocks)
