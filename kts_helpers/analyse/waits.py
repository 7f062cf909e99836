"""What a tenant waits for on a cluster before and around its timed loop, per tenant and scenario.

Before its first kernel a pod may wait for *admission* (quota: Kueue), for *placement* (scheduling onto a
node with a free GPU replica) and through *start-up* (image pull, container start, CUDA init, warm-up);
then the worker sleeps at the *start barrier* until START_AT and runs its *timed loop*, where each kernel
may wait for another context's time-slice. The first three come from API timestamps (whole seconds), the
last two from the worker's own clock (nanoseconds). Each interval is a difference between two clocks
(the API server, Kueue's controller, the node): a negative one is not a wait but clock skew, and is
reported as such with both clocks named, never clamped to zero.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd

from kts_helpers.run.backends.kubernetes import RESOLUTION_S, parse_time
from kts_helpers.run.manifest import RunManifest

WAIT_COLUMNS = ["scenario", "tenant", "admission_wait_s", "placement_wait_s", "startup_s", "barrier_wait_s",
                "timed_loop_s", "late_start_s", "clock_skew", "node", "pod", "resolution_s"]
API_LAYERS = ("admission_wait_s", "placement_wait_s", "startup_s")  # one end is an API timestamp: whole seconds
WORKER_LAYERS = ("barrier_wait_s", "timed_loop_s", "late_start_s")  # the worker's clock alone


def _ns(value: Any) -> float | None:
    return None if value is None else int(value) / 1e9


def waits_from_events(ev: Mapping[str, Any]) -> dict[str, Any]:
    """The layers of one tenant (seconds) from its recorded timestamps, and any clock skew they reveal."""
    node = ev.get("node") or "?"
    api, kueue, worker = "the API server", "Kueue's controller", f"node {node} (the worker)"
    w = ev.get("worker") or {}
    t = {k: parse_time(ev.get(k)) for k in ("job_created", "admitted", "pod_created", "scheduled")}
    skew: list[str] = []

    def layer(later: tuple[str, float | None, str], earlier: tuple[str, float | None, str]) -> float | None:
        (lname, lt, lclock), (ename, et, eclock) = later, earlier
        if lt is None or et is None:
            return None
        if lt < et:
            skew.append(f"{lname} on {lclock}'s clock reads {et - lt:.1f} s before {ename} on {eclock}'s clock")
            return None
        return lt - et

    out = {
        "admission_wait_s": layer(("admitted", t["admitted"], kueue), ("job created", t["job_created"], api))
        if ev.get("queue") else None,
        "placement_wait_s": layer(("scheduled", t["scheduled"], api), ("pod created", t["pod_created"], api)),
        "startup_s": layer(("barrier reached", _ns(w.get("barrier_reached_ns")), worker),
                           ("scheduled", t["scheduled"], api)),
        "barrier_wait_s": layer(("loop start", _ns(w.get("loop_start_ns")), worker),
                                ("barrier reached", _ns(w.get("barrier_reached_ns")), worker)),
        # from the loop's start (lead-in included) to the end of the last timed line: the padding tail,
        # which lasts until the orchestrator stops it, is not part of the run
        "timed_loop_s": layer(("last timed line", _ns(w.get("timed_end_ns")), worker),
                              ("loop start", _ns(w.get("loop_start_ns")), worker)),
        "late_start_s": ev.get("late_start_s"),
    }
    out["clock_skew"] = "; ".join(skew)
    return out


def layered_waits(manifest: RunManifest) -> pd.DataFrame:
    """Admission, placement, start-up, barrier wait and timed loop per (scenario, tenant), from the manifest.

    Scenarios run by another backend are left out. The API-based layers are whole seconds (nullable
    integers: ``resolution_s`` is 1), the worker-clock ones float seconds; NaN where a layer did not
    apply or the clocks disagree (``clock_skew`` says which, by how much).
    """
    rows = []
    for scenario, record in manifest.records.items():
        if record.backend != "kubernetes":
            continue
        for tenant, ev in record.tenants.items():
            rows.append({"scenario": scenario, "tenant": tenant, **waits_from_events(ev), "node": ev.get("node"),
                         "pod": ev.get("pod"),
                         "resolution_s": ev.get("resolution_s", record.extra.get("resolution_s", RESOLUTION_S))})
    frame = pd.DataFrame(rows, columns=WAIT_COLUMNS)
    for col in API_LAYERS:
        frame[col] = pd.to_numeric(frame[col], errors="coerce").round().astype("Int64")
    for col in WORKER_LAYERS:
        frame[col] = pd.to_numeric(frame[col], errors="coerce").astype("float64")
    frame["clock_skew"] = frame["clock_skew"].fillna("").astype(str)
    return frame
