"""Reading a scenario's objects: the Job's outcome, the Workload's admission, each tenant's pod, the timestamps.

The Job controller reports a Job's end in conditions: ``FailureTarget`` then ``Failed`` (reasons
``BackoffLimitExceeded``, ``DeadlineExceeded``), ``SuccessCriteriaMet`` then ``Complete`` (clusters
before 1.31 write only the second of each pair); it deletes the remaining pods of a failed Job. Kueue
reports admission on its Workload: ``QuotaReserved`` (False with reason ``Inadmissible``/``Misconfigured``
and "LocalQueue ... doesn't exist" when the queue is missing; reason ``Pending``, or ``ExceedsMaxQuota``
where that reason exists, with "... > maximum capacity (...)" when the gang can never fit the queue's
quota), ``Admitted``, ``Evicted`` (True with reason ``Preempted``, ``PodsReadyTimeout``,
``InactiveWorkload``, ...; a ``Preempted`` condition says by whom) then the Job suspended again and its
pods stopped (exit 143), ``Finished``. On re-admission Kueue sets ``Evicted`` back to False, so a client that
looked away during the eviction finds the reason only in ``status.schedulingStats.evictions`` (reason and
count) and the ``Requeued`` condition, which ``eviction`` reads too. Kueue's granular ``QuotaReserved``
reasons (``NoMatchingFlavor``, ``TopologyPlacementFailed``, HEAD) and v0.19's ``Pending`` with "resource ...
unavailable in ClusterQueue" (the queue covers no such resource) never clear by waiting: blocked at once; so do
the ``Pending`` messages of every version before (and v0.19 with its default gates) whose every flavor "doesn't
match node affinity" or has an "untolerated taint" (``no_flavor_fits``).
A pod that a preemption, a drain or a taint manager stops carries ``DisruptionTarget`` (``disruption``). Timestamps
are the API's RFC 3339 strings (whole seconds); the worker's own nanosecond times come from its log.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kts_helpers.run.backends.kubernetes.barrier import LATE_SLACK_S
from kts_helpers.run.backends.kubernetes.names import CONTAINER, RESOLUTION_S, as_int
from kts_helpers.run.corun import CoRunWatch

# Waiting reasons after which the kubelet will not get the container running by itself.
FATAL_WAITING = {"ImagePullBackOff", "ErrImageNeverPull", "InvalidImageName", "CreateContainerConfigError",
                 "CreateContainerError", "RunContainerError", "CrashLoopBackOff"}
# Kueue's QuotaReserved=False reasons that no waiting will change (a missing or stopped queue, a gang
# larger than the queue's whole quota); Kueue v0.19 reports the last as "Pending" with this message part.
KUEUE_BLOCKED = {"Inadmissible", "Misconfigured", "Suspended", "ExceedsMaxQuota", "NoMatchingFlavor",
                 "TopologyPlacementFailed"}
OVER_CAPACITY = "> maximum capacity"  # v0.10 to HEAD (flavorassigner.go fitsResourceQuota)
# v0.9 says the same thing without those words: a request above the ClusterQueue's nominal quota, in a ClusterQueue
# without a cohort (flavorassigner.go v0.9.0 fitsResourceQuota: mode noFit and no parent ->
# "insufficient quota for %s in flavor %s in ClusterQueue"; with a cohort it says "... in cohort ..., N more needed")
OVER_CAPACITY_V09 = re.compile(r"insufficient quota for \S+ in flavor \S+ in ClusterQueue")
NOT_COVERED = "unavailable in ClusterQueue"  # "resource nvidia.com/gpu unavailable in ClusterQueue"
# Kueue's flavor assigner says why a flavor can never take the pod set (pkg/scheduler/flavorassigner/
# flavorassigner.go, ``status.appendf``: "flavor %s doesn't match node affinity", "untolerated taint %s in flavor
# %s", the same words from v0.9 to v0.19 and HEAD). Only from v0.19 with the UnadmittedWorkloadsObservability gate
# (off by default in v0.19, on at HEAD) does the condition's reason say so (``NoMatchingFlavor``); before, and in
# v0.19 by default, the reason is "Pending" (scheduler.go: ``UnadmittedWorkloadReasonWithFallback(..., "Pending")``)
# and only the message tells. The message joins every flavor's reasons with ", ": it is blocked only when every
# reason is one of these; a flavor that lacks quota ("insufficient unused quota ...") may still come free.
NEVER_FITS = ("doesn't match node affinity", "untolerated taint")
MAY_COME_FREE = ("insufficient", "quota", "more needed", "preempt", "borrow")
# A worker whose timed loop began later than this after START_AT missed the shared start.
BARRIER_SLACK_S = LATE_SLACK_S
# What each DisruptionTarget reason means (the pod's condition, set before it is stopped).
DISRUPTION = {"PreemptionByScheduler": "the scheduler preempted it for a higher-priority pod",
              "PreemptionByKubeScheduler": "the scheduler preempted it for a higher-priority pod",
              "EvictionByEvictionAPI": "it was evicted through the Eviction API (a drain: kubectl drain, a node "
                                       "upgrade or autoscaler)",
              "DeletionByTaintManager": "a NoExecute taint on its node evicted it",
              "DeletionByPodGC": "the pod garbage collector deleted it (its node is gone)",
              "TerminationByKubelet": "its kubelet stopped it (node pressure or a graceful node shutdown)"}


def condition(obj: Mapping[str, Any] | None, kind: str) -> dict[str, Any]:
    for c in ((obj or {}).get("status") or {}).get("conditions") or []:
        if c.get("type") == kind:
            return dict(c)
    return {}


def _true(obj: Mapping[str, Any] | None, kind: str) -> dict[str, Any]:
    c = condition(obj, kind)
    return c if c.get("status") == "True" else {}


# --------------------------------------------------------------------------- the Job and its Workload

@dataclass
class JobOutcome:
    """Where the scenario's Job stands, from its conditions."""

    state: str  # "running" | "suspended" | "complete" | "failed"
    reason: str = ""
    message: str = ""

    @property
    def text(self) -> str:
        return f"{self.reason}: {self.message}".strip(": ") if self.reason or self.message else self.state


def job_outcome(job: Mapping[str, Any] | None) -> JobOutcome:
    """Failed/FailureTarget first (the controller is already stopping the pods), then Complete/SuccessCriteriaMet."""
    for kind in ("Failed", "FailureTarget"):
        c = _true(job, kind)
        if c:
            return JobOutcome("failed", str(c.get("reason") or "JobFailed"), str(c.get("message") or ""))
    for kind in ("Complete", "SuccessCriteriaMet"):
        if _true(job, kind):
            return JobOutcome("complete")
    if ((job or {}).get("spec") or {}).get("suspend"):
        return JobOutcome("suspended")
    return JobOutcome("running")


def workload_of(job: Mapping[str, Any], workloads: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
    """The Kueue Workload Kueue created for ``job``: its owner reference names the Job's uid. By name only
    where either uid is unknown: a Workload left by an earlier Job of the same name (a replaced one) has
    another uid and is never taken for this Job's."""
    meta = job.get("metadata") or {}
    for wl in workloads:
        for o in (wl.get("metadata") or {}).get("ownerReferences") or []:
            if o.get("uid") and meta.get("uid"):
                if o["uid"] == meta["uid"]:
                    return dict(wl)
            elif o.get("kind") == "Job" and o.get("name") == meta.get("name"):
                return dict(wl)
    return None


def admission(workload: Mapping[str, Any] | None) -> tuple[str | None, str]:
    """(when Kueue admitted it, or None; why it is not admitted when no waiting will help, else "")."""
    if workload is None:
        return None, ""
    admitted = _true(workload, "Admitted").get("lastTransitionTime")
    quota = condition(workload, "QuotaReserved")
    blocked = ""
    over = OVER_CAPACITY in str(quota.get("message") or "") or bool(OVER_CAPACITY_V09.search(str(quota.get("message")
                                                                                                or "")))
    never = over or NOT_COVERED in str(quota.get("message") or "") or no_flavor_fits(str(quota.get("message") or ""))
    if not admitted and quota.get("status") == "False" and (quota.get("reason") in KUEUE_BLOCKED or never):
        blocked = f"{quota.get('reason')}: {quota.get('message') or 'not admissible'}"
        if over:
            blocked += " (the scenario's pods are admitted as one gang, which exceeds the queue's whole quota)"
    return admitted, blocked


def no_flavor_fits(message: str) -> bool:
    """Kueue's "couldn't assign flavors" message names only flavors that can never take the pod set (their node
    labels exclude it, or their taints are not tolerated): waiting will not change it (``NEVER_FITS``)."""
    low = message.lower()
    return any(p in low for p in NEVER_FITS) and not any(p in low for p in MAY_COME_FREE)


def eviction(workload: Mapping[str, Any] | None) -> str:
    """Why Kueue evicted the Workload (preemption, PodsReady timeout, deactivation), else ""."""
    evicted = _true(workload, "Evicted")
    if not evicted:
        return past_eviction(workload)
    why = f"evicted by Kueue ({evicted.get('reason') or 'Evicted'}: {evicted.get('message') or ''}".rstrip(": ")
    preempted = _true(workload, "Preempted")
    if preempted:
        why += f"; preempted {preempted.get('reason') or ''}: {preempted.get('message') or ''}".rstrip(": ")
    return why + ")"


def past_eviction(workload: Mapping[str, Any] | None) -> str:
    """An eviction that re-admission hid (``Evicted`` back to False): ``schedulingStats.evictions`` keeps its
    reason and count, the ``Requeued`` condition its cause; "" when the Workload was never evicted."""
    stats = (((workload or {}).get("status") or {}).get("schedulingStats") or {}).get("evictions") or []
    counted = [e for e in stats if (as_int(e.get("count")) or 0) > 0]
    requeued = condition(workload, "Requeued")
    if not counted and requeued.get("reason") in (None, "", "Pending", "NoReservation", "Admitted"):
        return ""
    parts = [f"{e.get('reason')}{'/' + str(e['underlyingCause']) if e.get('underlyingCause') else ''} x{e.get('count')}"
             for e in counted]
    why = f"evicted by Kueue and admitted again ({', '.join(parts) or 'eviction'}"
    if requeued.get("reason"):
        why += f"; Requeued {requeued.get('reason')}: {requeued.get('message') or ''}".rstrip(": ")
    return why + ")"


def disruption(pod: Mapping[str, Any] | None) -> str:
    """Why a pod was stopped from outside (its ``DisruptionTarget`` condition), named; "" when it was not."""
    c = _true(pod, "DisruptionTarget")
    if not c:
        return ""
    reason = str(c.get("reason") or "DisruptionTarget")
    meaning = DISRUPTION.get(reason, "it was stopped from outside")
    return f"disrupted: {meaning} (DisruptionTarget {reason}: {c.get('message') or ''}".rstrip(": ") + ")"


def pending_admission(workload: Mapping[str, Any] | None) -> str:
    """What Kueue says while a Workload waits (quota, flavors), for the progress line."""
    quota = condition(workload, "QuotaReserved")
    if quota.get("status") == "False":
        return f"{quota.get('reason') or 'Pending'}: {quota.get('message') or ''}".strip(": ")
    return "waiting for Kueue" if workload is None else "quota reserved, waiting for admission checks"


def node_problem(node: Mapping[str, Any]) -> str:
    """Why a node cannot be trusted to finish the run (its kubelet stopped reporting), else ""."""
    ready = condition(node, "Ready")
    if not ready or ready.get("status") == "True":
        return ""
    name = (node.get("metadata") or {}).get("name", "?")
    return (f"node {name} is not ready (Ready={ready.get('status')}"
            f"{': ' + str(ready.get('reason')) if ready.get('reason') else ''}"
            f"{': ' + str(ready.get('message')) if ready.get('message') else ''}) - lost mid-run")


# --------------------------------------------------------------------------- pods

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


def container_status(pod: Mapping[str, Any]) -> dict[str, Any]:
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    for cs in statuses:
        if cs.get("name") == CONTAINER:
            return dict(cs)
    return dict(statuses[0]) if statuses else {}


def pod_state(pod: Mapping[str, Any] | None) -> PodState:
    """Classify a tenant's pod: still waiting, done, or failed (and why)."""
    if pod is None:
        return PodState()
    status = pod.get("status") or {}
    phase = status.get("phase") or "Pending"
    state = container_status(pod).get("state") or {}
    term = state.get("terminated")
    if term:
        code = as_int(term.get("exitCode"))
        why = term.get("reason") or ("Completed" if code == 0 else "Error")
        if code == 0 and disruption(pod):  # stopped from outside: named whatever the exit code (issue 50)
            return PodState(phase, True, True, 0, f"{disruption(pod)}; exited 0 ({why})",
                            summary=f"disrupted: {why}")
        if code == 0:
            return PodState(phase, True, False, 0, "", summary="completed")
        msg = f"{why} (exit code {code})" + (f": {term['message'].strip()[:200]}" if term.get("message") else "")
        if disruption(pod):
            msg = f"{disruption(pod)}; {msg}"
        return PodState(phase, True, True, code, msg, summary=f"terminated: {why}")
    if phase == "Succeeded" and disruption(pod):
        return PodState(phase, True, True, 0, f"{disruption(pod)}; Succeeded", summary="disrupted")
    if phase == "Succeeded":
        return PodState(phase, True, False, 0, "", summary="completed")
    if phase == "Failed":
        why = status.get("reason") or "Failed"
        msg = f"{why}: {status.get('message', '')}".strip(": ")
        return PodState(phase, True, True, None, f"{disruption(pod)}; {msg}" if disruption(pod) else msg,
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


# --------------------------------------------------------------------------- what one tenant went through

def worker_times(log: bytes) -> dict[str, Any]:
    """The worker's own clock (nanoseconds, on its node) from its log: START_AT, when it reached the barrier,
    when its loop began, its first and last line, and when its last timed (not padding) line ended."""
    watch = CoRunWatch(["t"], pad_limit_s=1.0)
    watch.feed("t", log if log.endswith(b"\n") else log + b"\n")
    p = watch.tenants["t"]
    meta = p.meta or {}
    return {"start_at_ns": as_int(meta.get("start_at_ns")), "barrier_reached_ns": as_int(meta.get("barrier_reached_ns")),
            "loop_start_ns": as_int(meta.get("loop_start_ns")), "first_line_ns": p.first_start_ns,
            "last_line_ns": p.last_end_ns or None, "timed_end_ns": p.last_timed_end_ns or None, "gpu_uuid": meta.get("gpu_uuid")}


def late_start_s(worker: Mapping[str, Any]) -> float | None:
    """How long after the shared START_AT this worker's timed loop began (None without a barrier)."""
    start_at, loop = worker.get("start_at_ns"), worker.get("loop_start_ns")
    if not start_at or loop is None:
        return None
    return (int(loop) - int(start_at)) / 1e9


def tenant_events(job: Mapping[str, Any], pod: Mapping[str, Any] | None, workload: Mapping[str, Any] | None,
                  start_at_ns: int, queue_name: str | None, worker: Mapping[str, Any] | None = None
                  ) -> dict[str, Any]:
    """The timestamps of one tenant (API: ISO strings, whole seconds; worker: ns on its node), and where it ran."""
    jmeta = job.get("metadata") or {}
    ev: dict[str, Any] = {"job": jmeta.get("name"), "job_created": jmeta.get("creationTimestamp"),
                          "queue": queue_name, "admitted": None, "pod": None, "node": None,
                          "pod_created": None, "scheduled": None, "container_started": None,
                          "container_finished": None, "start_at_ns": start_at_ns, "resolution_s": RESOLUTION_S}
    if queue_name and workload is not None:
        ev["workload"] = (workload.get("metadata") or {}).get("name")
        ev["admitted"], blocked = admission(workload)
        if blocked:
            ev["admission_blocked"] = blocked
    if pod is not None:
        meta, spec = pod.get("metadata") or {}, pod.get("spec") or {}
        ev.update(pod=meta.get("name"), node=spec.get("nodeName"), pod_created=meta.get("creationTimestamp"))
        ev["scheduled"] = _true(pod, "PodScheduled").get("lastTransitionTime")
        state = container_status(pod).get("state") or {}
        running, term = state.get("running") or {}, state.get("terminated") or {}
        ev["container_started"] = running.get("startedAt") or term.get("startedAt")
        ev["container_finished"] = term.get("finishedAt")
        ev["qos_class"] = (pod.get("status") or {}).get("qosClass")  # the API server's: Guaranteed, Burstable, ...
    if worker:
        ev["worker"] = {k: v for k, v in worker.items() if k != "gpu_uuid"}
        late = late_start_s(worker)
        ev["late_start_s"] = late
        ev["missed_start_barrier"] = bool(late is not None and late > BARRIER_SLACK_S)
    return ev


def status_text(scenario: str, tenant: str, job: Mapping[str, Any], pod: Mapping[str, Any] | None,
                events: Sequence[Mapping[str, Any]], ev: Mapping[str, Any]) -> str:
    """The .stderr file of a Kubernetes tenant: Job and pod status, reasons and events, for humans."""
    lines = [f"# kts kubernetes backend: scenario {scenario}, tenant {tenant}",
             f"job: {(job.get('metadata') or {}).get('name')}"]
    for c in (job.get("status") or {}).get("conditions") or []:
        lines.append(f"job condition {c.get('type')}={c.get('status')} at {c.get('lastTransitionTime') or '-'}"
                     + (f": {c.get('reason', '')} {c.get('message', '')}".rstrip() if c.get("reason") else ""))
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
    for key, value in (ev.get("worker") or {}).items():
        lines.append(f"worker {key}: {value if value is not None else '-'}")
    lines.append(f"outcome: {ev.get('outcome')}" + (f": {ev['reason']}" if ev.get("reason") else ""))
    return "\n".join(lines) + "\n"
