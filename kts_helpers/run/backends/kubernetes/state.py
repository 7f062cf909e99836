"""Reading Kubernetes objects: API timestamps, the layered waits, and what a pod's status means for a tenant."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from kts_helpers.run.backends.kubernetes.names import CONTAINER, RESOLUTION_S, as_int

# --------------------------------------------------------------------------- time stamps

# Waiting reasons after which the kubelet will not get the container running by itself.
FATAL_WAITING = {"ImagePullBackOff", "ErrImageNeverPull", "InvalidImageName", "CreateContainerConfigError",
                 "CreateContainerError", "RunContainerError", "CrashLoopBackOff"}


def parse_time(value: str | None) -> float | None:
    """RFC 3339 (``2024-05-01T12:00:00Z``) to epoch seconds; None stays None."""
    if not value:
        return None
    text = str(value).strip().replace("Z", "+00:00")
    try:
        dt = datetime.fromisoformat(text)
    except ValueError:
        return None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=timezone.utc)
    return dt.timestamp()


def _diff(later: float | None, earlier: float | None) -> float | None:
    return None if later is None or earlier is None else max(0.0, later - earlier)


def waits_from_events(ev: Mapping[str, Any]) -> dict[str, float | None]:
    """The four layers of waiting for one tenant, from its recorded API timestamps (seconds)."""
    t = {k: parse_time(ev.get(k)) for k in ("job_created", "admitted", "pod_created", "scheduled",
                                             "container_started", "container_finished")}
    return {
        "admission_wait_s": _diff(t["admitted"], t["job_created"]) if ev.get("queue") else None,
        "placement_wait_s": _diff(t["scheduled"], t["pod_created"]),
        "startup_s": _diff(t["container_started"], t["scheduled"]),
        "run_s": _diff(t["container_finished"], t["container_started"]),
    }



# --------------------------------------------------------------------------- pod state

@dataclass
class PodState:
    """The part of a pod's status that decides what the backend does next."""

    phase: str = "NoPod"
    done: bool = False
    failed: bool = False
    exit_code: int | None = None
    reason: str = ""
    unschedulable: str = ""  # the scheduler's message while the pod cannot be placed
    summary: str = "waiting for a pod"


def condition(obj: Mapping[str, Any], kind: str) -> dict[str, Any]:
    for c in (obj.get("status") or {}).get("conditions") or []:
        if c.get("type") == kind:
            return dict(c)
    return {}


def container_status(pod: Mapping[str, Any]) -> dict[str, Any]:
    for cs in (pod.get("status") or {}).get("containerStatuses") or []:
        if cs.get("name") == CONTAINER:
            return dict(cs)
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    return dict(statuses[0]) if statuses else {}


def pod_state(job: Mapping[str, Any] | None, pod: Mapping[str, Any] | None) -> PodState:
    """Classify a tenant from its Job and pod: still waiting, done, or failed (and why)."""
    if job is not None:
        failed = condition(job, "Failed")
        if failed.get("status") == "True":
            why = failed.get("reason") or "JobFailed"
            return PodState("Failed", True, True, None, f"Job failed: {why}: {failed.get('message', '')}".strip(": "),
                            summary=f"job failed ({why})")
        if condition(job, "Complete").get("status") == "True" and pod is None:
            return PodState("Succeeded", True, False, 0, "", summary="completed (pod already gone)")
        if (job.get("spec") or {}).get("suspend") and pod is None:
            return PodState("Queued", summary="waiting for admission (Job suspended)")
    if pod is None:
        return PodState()
    status = pod.get("status") or {}
    phase = status.get("phase") or "Pending"
    cs = container_status(pod)
    state = cs.get("state") or {}
    term = state.get("terminated")
    if term:
        code = as_int(term.get("exitCode"))
        why = term.get("reason") or ("Completed" if code == 0 else "Error")
        if code == 0:
            return PodState(phase, True, False, 0, "", summary="completed")
        msg = f"{why} (exit code {code})" + (f": {term['message'].strip()[:200]}" if term.get("message") else "")
        return PodState(phase, True, True, code, msg, summary=f"terminated: {why}")
    if phase == "Succeeded":
        return PodState(phase, True, False, 0, "", summary="completed")
    if phase == "Failed":
        why = status.get("reason") or "Failed"
        return PodState(phase, True, True, None, f"{why}: {status.get('message', '')}".strip(": "),
                        summary=f"failed: {why}")
    waiting = state.get("waiting")
    if waiting and waiting.get("reason") in FATAL_WAITING:
        why = waiting["reason"]
        msg = (waiting.get("message") or "").strip().splitlines()
        return PodState(phase, True, True, None, f"{why}: {msg[0][:200]}" if msg else why, summary=why)
    sched = condition(pod, "PodScheduled")
    if sched.get("status") == "False":
        msg = sched.get("message") or sched.get("reason") or "unschedulable"
        return PodState(phase, unschedulable=msg, summary=f"Pending: {msg[:120]}")
    if state.get("running"):
        return PodState(phase, summary="running")
    if waiting:
        return PodState(phase, summary=f"waiting: {waiting.get('reason', '')}")
    return PodState(phase, summary=phase.lower())



def status_text(scenario: str, tenant: str, job: Mapping[str, Any], pod: Mapping[str, Any] | None,
                 events: Sequence[Mapping[str, Any]], ev: Mapping[str, Any]) -> str:
    """The .stderr file of a Kubernetes tenant: pod status, reason and events, for humans."""
    lines = [f"# kts kubernetes backend: scenario {scenario}, tenant {tenant}",
             f"job: {(job.get('metadata') or {}).get('name')}"]
    if pod is None:
        lines.append("pod: (none was created)")
    else:
        status = pod.get("status") or {}
        lines.append(f"pod: {pod['metadata'].get('name')}  node: {(pod.get('spec') or {}).get('nodeName') or '-'}"
                     f"  phase: {status.get('phase') or '-'}")
        if status.get("reason") or status.get("message"):
            lines.append(f"pod reason: {status.get('reason', '')} {status.get('message', '')}".rstrip())
        for c in status.get("conditions") or []:
            lines.append(f"condition {c.get('type')}={c.get('status')} at {c.get('lastTransitionTime') or '-'}"
                         + (f": {c.get('reason', '')} {c.get('message', '')}".rstrip() if c.get("status") != "True"
                            else ""))
        for kind, st in ((container_status(pod).get("state") or {}).items()):
            detail = ", ".join(f"{k}={v}" for k, v in (st or {}).items())
            lines.append(f"container {CONTAINER}: {kind} {detail}")
    for e in events:
        lines.append(f"event {e.get('type', '')} {e.get('reason', '')} x{e.get('count', 1)} "
                     f"at {e.get('lastTimestamp') or e.get('eventTime') or '-'}: {e.get('message', '')}")
    for key in ("job_created", "admitted", "pod_created", "scheduled", "container_started", "container_finished"):
        lines.append(f"{key}: {ev.get(key) or '-'}")
    lines.append(f"outcome: {ev.get('outcome')}" + (f": {ev['reason']}" if ev.get("reason") else ""))
    return "\n".join(lines) + "\n"


def tenant_events(job: Mapping[str, Any], pod: Mapping[str, Any] | None, workloads: Sequence[Mapping[str, Any]],
              start_at_ns: int, queue_name: str | None) -> dict[str, Any]:
    """The layered timestamps of one tenant (ISO strings, whole seconds) plus where it ran."""
    jmeta = job.get("metadata") or {}
    ev: dict[str, Any] = {"job": jmeta.get("name"), "job_created": jmeta.get("creationTimestamp"),
                          "queue": queue_name, "admitted": None, "pod": None, "node": None,
                          "pod_created": None, "scheduled": None, "container_started": None,
                          "container_finished": None, "start_at_ns": start_at_ns, "resolution_s": RESOLUTION_S}
    if queue_name:
        for wl in workloads:
            owners = (wl.get("metadata") or {}).get("ownerReferences") or []
            if any((o.get("uid") and o.get("uid") == jmeta.get("uid")) or
                   (o.get("kind") == "Job" and o.get("name") == jmeta.get("name")) for o in owners):
                adm = condition(wl, "Admitted")
                if adm.get("status") == "True":
                    ev["admitted"] = adm.get("lastTransitionTime")
                ev["workload"] = (wl.get("metadata") or {}).get("name")
    if pod is not None:
        meta, spec = pod.get("metadata") or {}, pod.get("spec") or {}
        ev.update(pod=meta.get("name"), node=spec.get("nodeName"), pod_created=meta.get("creationTimestamp"))
        sched = condition(pod, "PodScheduled")
        if sched.get("status") == "True":
            ev["scheduled"] = sched.get("lastTransitionTime")
        state = container_status(pod).get("state") or {}
        running, term = state.get("running") or {}, state.get("terminated") or {}
        ev["container_started"] = running.get("startedAt") or term.get("startedAt")
        ev["container_finished"] = term.get("finishedAt")
        started = parse_time(ev["container_started"])
        # With 1 s resolution, only a start clearly after the barrier means the tenants did not begin together.
        ev["missed_start_barrier"] = bool(started is not None and started - start_at_ns / 1e9 > RESOLUTION_S)
    ev["waits"] = waits_from_events(ev)
    return ev
