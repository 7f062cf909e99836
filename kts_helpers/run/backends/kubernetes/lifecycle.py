"""One scenario on the cluster, from submission (or re-attachment) to its tenants' logs in the run directory.

* Submit the scenario's Indexed Job, or attach to the one this run submitted before (``kts run --resume``
  after the client went away): a running Job is followed from its pods' first log byte, a completed one
  is collected, a failed one is replaced.
* Watch it: the pods (a watch wakes the loop, a re-list decides), the Job's conditions, Kueue's
  Workload, the node; follow every tenant's log live and feed the co-running watch. The placeholders' Job is
  watched as closely, before the barrier too (``placeholder_failure``: its conditions, its Workload's admission,
  ``FailedCreate`` events, its pods' ends), and any pod of the scenario Pending for ``PENDING_S`` ends it, naming
  who holds the node's replicas (``_pending``).
* In a shared scenario, once every tenant has finished its timed iterations, ask the tenants to stop padding (the
  word ``"stop"`` in their go annotation; a SIGTERM alone ends a worker with 143, so a preemption is never taken
  for the kit's stop); collect logs, pod status and timestamps.
* While it runs, stop it at once when what it measures stops being true: a tenant that began late (its
  live log says so, ``barrier.late_tenant``), a placeholder that no longer holds its replica, a stranger GPU
  pod on the node (looked for every ``STRANGER_LOOK_S``), lines lost from a log (``logs.Continuity``), a
  Kueue flavor whose node labels exclude the pinned node, an eviction Kueue has already undone.

Longer than 500 lines: every guard of the measurement that must act while the scenario runs (late start, the
placeholders' side, every pod's Pending, strangers, lost lines) lives in the one watch loop that sees them all.
"""

from __future__ import annotations

import contextlib
import re
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from kts_helpers.errors import BackendError, KtsError
from kts_helpers.fsutil import write_new
from kts_helpers.run.backends.base import TenantResult
from kts_helpers.run.backends.kubernetes.api import KubeApi, fingerprint
from kts_helpers.run.backends.kubernetes.barrier import StartBarrier, late_tenant
from kts_helpers.run.backends.kubernetes.clock import Clock, parse_time
from kts_helpers.run.backends.kubernetes.jobs import (
    PLACEHOLDER_REQUESTS,
    build_hold_job,
    build_scenario_job,
    hold_job_name,
    job_placeholders,
    job_tenants,
)
from kts_helpers.run.backends.kubernetes.lease import NodeLease
from kts_helpers.run.backends.kubernetes.logs import LiveScenario
from kts_helpers.run.backends.kubernetes.names import (
    ANN_START,
    LABEL_RUN,
    LABEL_SCENARIO,
    MANAGED_BY,
    MANAGED_VALUE,
    QUEUE_LABEL,
    STOP_GRACE_S,
    completion_index,
    is_kts_object,
    job_name,
    job_of,
    label_value,
    selector_string,
)
from kts_helpers.run.backends.kubernetes.nodes import NodeInfo, mps_caps
from kts_helpers.run.backends.kubernetes.replica_probe import PROBE_DECIDE_S, probe_job, probe_verdict
from kts_helpers.run.backends.kubernetes.state import (
    PodState,
    admission,
    disruption,
    eviction,
    job_outcome,
    node_problem,
    pending_admission,
    pod_state,
    status_text,
    tenant_events,
    worker_times,
    workload_of,
)
from kts_helpers.run.corun import CoRunWatch
from kts_helpers.run.runs import Run
from kts_helpers.run.spec import ScenarioSpec


class ScenarioHost(Protocol):
    """What a scenario needs from the backend that runs it (``KubernetesBackend`` is one): its options,
    its API and clock, and two services. Stated here so this module never imports the backend."""

    api: KubeApi
    clock: Clock
    namespace: str
    image: str
    image_pull_policy: str
    image_pull_secrets: tuple[str, ...]
    keep_finished_s: int
    memory_limit: str
    node_selector: dict[str, str | None]
    gpu_resource: str | None
    poll_s: float
    queue_name: str | None
    ready_timeout_s: float
    read_only_root: bool
    runtime_class: str | None
    schedule_timeout_s: float
    service_account: str | None
    start_delay_s: float
    nodes_readable: bool
    tolerations: list[dict[str, Any]]
    cluster_pod_list: bool
    worker_device: str
    placeholders: bool
    priority_classes: tuple[str | None, str | None]  # (the tenants', the placeholders')

    def hint(self, reason: str) -> str: ...

    def gpu_pods(self, node: str, run_id: str | None, scenario: str | None = None, *,
                 ended: bool = False) -> list[dict[str, Any]]: ...

    def _describe_pod(self, p: Mapping[str, Any]) -> str: ...

    def wait_gone(self, names: Sequence[str], sel: str) -> None: ...

PAD_CHECK_S = 0.25  # while tenants pad or say ready, look at their logs this often (logs do not wake the watch)
HOLDING_RE = re.compile(rb"^kts_placeholder: holding index=\d+ gpu=(\S*)", re.M)
STRANGER_LOOK_S = 5.0  # how often other GPU pods on the node are looked for while the scenario runs
# any pod of the scenario (tenant or placeholder) the scheduler leaves Pending on the pinned node this long fails it,
# by name and with the replicas' holders: the node's state is what kept it off (issue 50: every pod, not only the
# placeholders); and the placeholders' Workload that Kueue does not admit this long after the tenants' fails it too
PENDING_S = 30.0
PLACEHOLDER_PENDING_S = PENDING_S


@dataclass
class Failure:
    """Why the scenario ended early. ``tenant`` None: the placeholders' side failed (their Job, Workload, pods),
    and the reason names them; no tenant is blamed."""

    tenant: str | None
    exit_code: int | None
    reason: str


def scenario_selector(run_id: str, scenario: str) -> str:
    return selector_string({MANAGED_BY: MANAGED_VALUE, LABEL_RUN: label_value(run_id),
                            LABEL_SCENARIO: label_value(scenario)})


class ScenarioRun:
    """One scenario's Job on one node: submit or attach, watch, stop the padding, collect."""

    def __init__(self, backend: ScenarioHost, run: Run, scenario: ScenarioSpec, node: NodeInfo, *,
                 timeout_s: float, pad_limit_s: float, progress: bool, lease: NodeLease | None = None,
                 placeholders: int = 0) -> None:
        self.b, self.api, self.clock, self.lease = backend, backend.api, backend.clock, lease
        self.run, self.scenario, self.node = run, scenario, node
        self.timeout_s, self.pad_limit_s, self.progress = timeout_s, pad_limit_s, progress
        self.name = job_name(run.run_id, scenario.name)
        self.hold_name = hold_job_name(self.name)  # the placeholders' own Job (``jobs.build_hold_job``)
        self.tenants = scenario.tenant_names
        self.sel = scenario_selector(run.run_id, scenario.name)
        self.live = LiveScenario(CoRunWatch(self.tenants, pad_limit_s=pad_limit_s),
                                 scenario.kind == "shared" and len(scenario.tenants) > 1)
        self.job: dict[str, Any] = {}
        self.barrier = StartBarrier(self.tenants, backend.start_delay_s)
        self.placeholders = int(placeholders)  # indexes after the tenants' holding the GPU's other replicas
        self.holders: dict[int, dict[str, Any]] = {}  # placeholder index -> its newest pod
        self.holder_gpus: dict[int, str] = {}  # placeholder index -> the GPU its log says it holds
        self.holder_names: dict[int, str] = {}  # placeholder index -> its pod when the barrier was released
        self.queue = backend.queue_name  # the queue the created Job carries (Kueue may default it)
        self.strangers: dict[str, str] = {}  # other GPU pods seen on the node since the barrier's release
        self.late: dict[str, float] = {}  # tenants the live check found late, and by how much
        self.next_look = 0.0
        self.how = "submitted"  # or "attached" (found running), "collected" (found complete), "replaced"
        self.workload: dict[str, Any] | None = None
        self.admitted_once = False  # Kueue let the Job run (a later suspension is an eviction)
        # the stated replicas are proven by one more (``replica_probe``) where the node cannot be read
        self.replicas_proof = "node labels (GPU feature discovery)" if node.readable and node.physical_known else (
            "the node's allocatable count (no GPU feature discovery labels)" if node.readable else
            "stated (gpu_replicas), not yet verified")
        self.probe_since: float | None = None  # when the probe Job was created
        self.submitted: dict[str, Any] = {}  # the Job body this client submitted
        self.probe_failure = ""
        self.gpu_memory: dict[str, Any] = {}  # the block's stranger check from the device's used memory (gpumem)
        self.hold_job: dict[str, Any] | None = None  # the placeholders' Job as last listed
        self.hold_seen = False  # it was listed once (a Job gone after that was deleted by someone)
        self.hold_workload: dict[str, Any] | None = None
        self.hold_since: dict[str, float] = {}  # placeholder-side waits: "admission", "pods" -> since (monotonic)
        self.stop_asked: float | None = None  # when the kit asked the padding tenants to stop (monotonic)
        self.jobs_deleted = False
        self.replaced = False  # a tenant's pod was replaced by a new one (an eviction undone by re-admission)

    def say(self, text: str) -> None:
        if self.progress:
            print(f"[kts] {self.scenario.name}: {text}", file=sys.stderr)

    # ------------------------------------------------------------------ submit or attach
    def existing(self) -> dict[str, Any] | None:
        """This run's Job of this scenario, if the cluster has it (the client may have gone away)."""
        return next((j for j in self.api.list_jobs(self.sel) if is_kts_object(j, self.run.run_id, self.scenario.name)
                     and (j.get("metadata") or {}).get("name") == self.name), None)

    def start(self) -> None:
        """Attach to this run's Job of the scenario if it is still good, else submit a new one."""
        old = self.existing()
        if old is not None and job_tenants(old) not in ([], self.tenants):
            raise BackendError(f"Job {self.name} of run {self.run.run_id} runs tenants {job_tenants(old)}, not "
                               f"{self.tenants}; delete it by hand (kubectl -n {self.b.namespace} delete job "
                               f"{self.name}) and resume again")
        if old is not None and job_outcome(old).state == "failed":
            self.say(f"Job {self.name} of this run failed while kts was away ({job_outcome(old).text}); "
                     "running the scenario again")
            self.delete_jobs()
            self.b.wait_gone([self.name, self.hold_name], self.sel)
            self.how, old = "replaced", None
        if old is not None:
            self.placeholders = job_placeholders(old)
            published = any(self.barrier.adopt(str(((p.get("metadata") or {}).get("annotations") or {})
                                                   .get(ANN_START) or "")) for p in self.snapshot()[1].values())
            if not published and job_outcome(old).state != "complete":
                # its tenants wait at the barrier, and their ready lines are old: their clocks cannot be
                # read again from this client, so the scenario starts over
                self.say(f"Job {self.name} of this run is still waiting at its start barrier; running it again")
                self.delete_jobs()
                self.b.wait_gone([self.name, self.hold_name], self.sel)
                self.how, old = "replaced", None
        if old is not None:
            self.job = old
            self.how = "collected" if job_outcome(old).state == "complete" else "attached"
            self.say(f"{self.how} Job {self.name}, which this run submitted before")
            self.queue = ((old.get("metadata") or {}).get("labels") or {}).get(QUEUE_LABEL) or self.queue
            return
        body = build_scenario_job(
            run_id=self.run.run_id, scenario=self.scenario, namespace=self.b.namespace, image=self.b.image,
            node=self.node.name, barrier_timeout_s=self.b.ready_timeout_s + self.b.start_delay_s + 60.0,
            gpu_resource=self.node.resource,
            node_selector=self.b.node_selector, queue_name=self.b.queue_name,
            service_account=self.b.service_account, memory_limit=self.b.memory_limit,
            active_deadline_s=int(self.b.ready_timeout_s + self.b.start_delay_s + self.timeout_s
                                  + self.pad_limit_s) + 120,
            image_pull_policy=self.b.image_pull_policy, runtime_class=self.b.runtime_class,
            ttl_s=self.b.keep_finished_s, pad_limit_s=self.pad_limit_s + 60.0,  # the workers' backstop: later
            image_pull_secrets=self.b.image_pull_secrets, read_only_root=self.b.read_only_root,
            placeholders=self.placeholders, tolerations=self.b.tolerations,
            sharing_caps=mps_caps(self.node.replicas) if self.scenario.sharing == "mps" and self.node.replicas else None,
            device=self.b.worker_device, priority_class=self.b.priority_classes[0])
        self.submitted = body  # what the kit asked for (the probe is made from it, never from server-set fields)
        self.job = self.api.create_job(body) or body
        if self.placeholders:  # their own Job and pod template: minimal requests (``jobs.build_hold_job``)
            self.api.create_job(build_hold_job(body, self.placeholders, len(self.tenants), self.node.resource,
                                               priority_class=self.b.priority_classes[1]))
        # Read the queue back: Kueue's webhook puts an unlabelled Job into a LocalQueue named "default"
        # (LocalQueueDefaulting) and suspends it; the kit then waits for that queue's admission, knowingly.
        queue = ((self.job.get("metadata") or {}).get("labels") or {}).get(QUEUE_LABEL)
        if queue and queue != self.queue:
            self.say(f"Kueue put Job {self.name} into LocalQueue {queue!r}"
                     + ("" if self.queue else " (the namespace's default queue)") + "; waiting for its admission")
            self.queue = queue

    def poll_barrier(self, pods: Mapping[str, dict[str, Any]]) -> bool:
        """Note the tenants that said ready; release the barrier once all have and every placeholder holds its
        replica (runs). True once released."""
        if not self.barrier.starts:
            for t, stream in self.live.streams.items():
                if stream.ready is not None:
                    self.barrier.ready.setdefault(t, stream.ready)
            holding = len(self.holders) >= self.placeholders and all(
                pod_state(p).summary == "running" for p in self.holders.values())
            # every tenant's pod still there: a Job that failed (its deadline) deletes them, and the start is then
            # never published; the watch reads the Job's own failure instead
            alive = all(t in pods for t in self.tenants)
            if self.barrier.all_ready() and holding and alive and self.replicas_proven():
                self.release_barrier(pods)
        return bool(self.barrier.starts)

    def replicas_proven(self) -> bool:
        """Where the node cannot be read and placeholders hold the stated replicas: ask for one more
        (``replica_probe``) and wait for the scheduler's answer. True once the start may be published."""
        if self.node.readable or not self.b.placeholders or self.probe_failure or not self.submitted:
            return not self.probe_failure
        name = f"{self.name}-probe"
        now = self.clock.monotonic()
        if self.probe_since is None:
            self.probe_since = now
            self.api.create_job(probe_job(self.submitted, self.node.resource, self.b.priority_classes[1]))
            self.say(f"asking the scheduler for one more replica of node {self.node.name}'s GPU than stated "
                     "(it must stay Pending)")
            return False
        pod = next((p for p in self.api.list_pods(self.sel) if job_of(p) == name), None)
        verdict, words = probe_verdict(pod)
        if verdict == "free":
            self.probe_failure = (f"a replica of node {self.node.name}'s GPU was free beside the tenants and "
                                  f"placeholders (the probe pod was placed): the node has more than the stated "
                                  f"{self.node.replicas} replicas (gpu_replicas / K8S_GPU_REPLICAS), so a stranger "
                                  "could share the GPU unseen; state the replicas the device plugin advertises")
        elif verdict == "held":
            self.replicas_proof = (f"stated (gpu_replicas={self.node.replicas}); no replica left free: one more "
                                   f"stayed Pending ({words})")
        elif now - self.probe_since >= PROBE_DECIDE_S:
            self.replicas_proof = (f"stated (gpu_replicas={self.node.replicas}), unverified: the probe for one more "
                                   f"replica was not decided within {PROBE_DECIDE_S:.0f} s")
        else:
            return False
        with contextlib.suppress(KtsError):
            self.api.delete_job(name)
        return not self.probe_failure

    def release_barrier(self, pods: Mapping[str, dict[str, Any]]) -> None:
        """Every tenant is ready: publish the starts (on the node's clock) in each tenant pod's annotation."""
        self.holder_names = {idx: pod["metadata"]["name"] for idx, pod in self.holders.items()}
        for idx, pod in self.holders.items():  # which GPU each placeholder holds (its first log line)
            with contextlib.suppress(KtsError):
                m = HOLDING_RE.search(self.api.read_pod_log(pod["metadata"]["name"]) or b"")
                if m:
                    self.holder_gpus[idx] = m.group(1).decode(errors="replace")
        text = self.barrier.release(self.clock.now_ns())
        for t in self.tenants:
            self.api.annotate_pod(pods[t]["metadata"]["name"], {ANN_START: text})
        offsets = ", ".join(f"{t} {r.offset_ns / 1e9:+.2f} s" for t, r in self.barrier.ready.items())
        self.say(f"every tenant is ready; they start together in {self.b.start_delay_s:.0f} s (node clock vs this "
                 f"client's {(self.barrier.node_offset_ns or 0) / 1e9:+.2f} s; per pod: {offsets})")

    # ------------------------------------------------------------------ watching
    def snapshot(self) -> tuple[dict[str, Any] | None, dict[str, dict[str, Any]], list[dict[str, Any]]]:
        """The scenario's Job (None once gone), each tenant's newest pod, and every pod seen; the placeholders' Job
        and pods in ``hold_job`` and ``holders``."""
        jobs = {(j.get("metadata") or {}).get("name"): j for j in self.api.list_jobs(self.sel)
                if is_kts_object(j, self.run.run_id, self.scenario.name)}
        job, self.hold_job = jobs.get(self.name), jobs.get(self.hold_name)
        raw = [p for p in self.api.list_pods(self.sel) if is_kts_object(p, self.run.run_id, self.scenario.name)
               and job_of(p) in (self.name, self.hold_name)]
        pods: dict[str, dict[str, Any]] = {}
        holders: dict[int, dict[str, Any]] = {}
        for p in sorted(raw, key=lambda p: str((p.get("metadata") or {}).get("creationTimestamp") or "")):
            idx = completion_index(p)
            if idx is not None and job_of(p) == self.hold_name:
                idx += len(self.tenants)  # the hold Job's indexes continue the tenants'
            if idx is not None and 0 <= idx < len(self.tenants):
                pods[self.tenants[idx]] = p  # the newest pod of an index wins
            elif idx is not None and len(self.tenants) <= idx < len(self.tenants) + self.placeholders:
                holders[idx] = p
        self.holders = holders
        return job, pods, raw

    def watch(self) -> Failure | None:
        """Follow the scenario to its end; a Failure names the tenant (or the placeholders) and why, None when done."""
        t0 = self.clock.monotonic()
        go_mono = t0 if self.barrier.starts else None
        pending_since: dict[str, float] = {}
        no_pod_since: float | None = None
        shown: dict[str, str] = {}
        while True:
            job, pods, raw = self.snapshot()
            now = self.clock.monotonic()
            states = {t: pod_state(pods.get(t)) for t in self.tenants}
            # a tenant's pod replaced (Kueue's eviction and re-admission): seen before ``follow`` takes the new pod
            self.replaced = self.replaced or any(
                t in self.live.streams and t in pods and pods[t]["metadata"].get("name") != self.live.streams[t].pod
                for t in self.tenants)
            self.live.follow(self.api, pods, states, self.b.poll_s, self.clock)
            if go_mono is None and self.poll_barrier(pods):
                go_mono = now
            if self.probe_failure:
                return Failure(self.tenants[0], None, self.probe_failure)
            deadline = (t0 + self.b.ready_timeout_s) if go_mono is None else \
                (go_mono + self.b.start_delay_s + self.timeout_s)
            if job is None:
                return Failure(self._open(states), None, f"Job {self.name} was deleted by someone else while it ran")
            self.job = job
            outcome = job_outcome(job)
            if self.lease is not None and self.lease.lost:  # another client measures here now
                return Failure(self._open(states), None, self.lease.lost)
            for t, st in states.items():
                text = st.summary if outcome.state != "suspended" else f"queued ({self._queue_text()})"
                if shown.get(t) != text:
                    self.say(f"{t}: {text}")
                shown[t] = text
            if self.queue and outcome.state == "running":
                self.admitted_once = True
            evicted = self._evicted(job, outcome.state, states, pods)
            if evicted:
                return Failure(self.tenants[0], None, evicted)
            if outcome.state == "failed":  # the Job controller is stopping the other tenants already
                # the tenant whose own end failed the Job, else the first that did not finish on its own (one the
                # controller's SIGTERM ended, exit 143, counts as unfinished: a deadline names no culprit)
                killed = {t for t, st in states.items() if st.exit_code == 143 and not disruption(pods.get(t))}
                t = next((t for t, st in states.items() if st.failed and t not in killed),
                         next((t for t, st in states.items() if not st.done or t in killed), self.tenants[0]))
                why = f"Job {self.name} failed ({outcome.text})"
                if states[t].failed:
                    why += f"; pod {self._pod_name(pods, t)}: {states[t].reason}{self.b.hint(states[t].reason)}"
                return Failure(t, states[t].exit_code, why)
            for t, st in states.items():
                if st.failed and not self._stopped_by_kit(pods.get(t), st):
                    return Failure(t, st.exit_code, f"pod {self._pod_name(pods, t)}: {st.reason}"
                                                    f"{self.b.hint(st.reason)}")
            gap = self.live.gap()  # before any "done": a log with lines missing never counts as complete
            if gap:
                return Failure(next(t for t, c in self.live.continuity.items() if c.gaps), None, gap)
            late = self.late_start(states) if go_mono is not None else None  # nor does a late start
            if late is not None:
                return late
            if self.live.pad and self.live.stopped_ns is None and self.live.watch.ready_to_stop():
                self.ask_stop(pods)
            if self.stop_asked is not None and not all(st.done for st in states.values()) and \
                    now - self.stop_asked >= self.b.start_delay_s:  # the word is late: the delete stops them
                self.delete_jobs(grace_s=STOP_GRACE_S)
                return None
            overrun = self.live.watch.overrun() if self.live.pad and self.stop_asked is None else None
            if overrun:
                self.stop_padding()
                return Failure(next(t for t, p in self.live.watch.tenants.items() if not p.timed_done), None, overrun)
            if outcome.state == "complete" or all(st.done for st in states.values()):
                if self.stop_asked is not None and not self.jobs_deleted:  # they stopped on the word: the Jobs go now,
                    self.delete_jobs(grace_s=STOP_GRACE_S)  # while the logs are collected (the GPU is free again)
                return None
            guarded = self._guard(job, outcome.state, states, go_mono is not None, now)
            if guarded is not None:
                return guarded
            if outcome.state == "suspended" and self.queue:
                self.workload = workload_of(job, self.api.list_workloads())
                if self.api.kueue_version == "":
                    return Failure(self.tenants[0], None, f"Job {self.name} waits for Kueue (queue "
                                                          f"{self.queue!r}) but the cluster serves no "
                                                          "kueue.x-k8s.io Workloads: is Kueue installed?")
                _, blocked = admission(self.workload)
                if blocked:
                    wl = (self.workload or {}).get("metadata", {}).get("name", "?")
                    return Failure(self.tenants[0], None, f"Kueue will not admit Workload {wl} of Job {self.name} "
                                                          f"(queue {self.queue!r}): {blocked}")
            elif self.b.nodes_readable:
                problem = node_problem(self.api.read_node(self.node.name))
                if problem:
                    return Failure(self._open(states), None, problem)
            pending = self._pending(pods, states, pending_since, now, deadline - t0)
            if pending is not None:
                return pending
            if outcome.state == "running" and any(t not in pods for t in self.tenants):
                no_pod_since = now if no_pod_since is None else no_pod_since
                if now - no_pod_since >= 2 * self.b.poll_s:
                    why = self.create_failure(self.name)
                    if why:
                        return Failure(next(t for t in self.tenants if t not in pods), None,
                                       f"Job {self.name} cannot create its pods: {why}{self.b.hint(why)}")
            else:
                no_pod_since = None
            held = self.placeholder_failure(outcome.state, go_mono is not None, now)
            if held is not None:
                return held
            if now >= deadline and go_mono is None:
                t = next((t for t in self.tenants if t not in self.barrier.ready), self.tenants[0])
                return Failure(t, None, f"not every tenant was ready (admitted, placed, image pulled, warmed up) "
                                        f"within {self.b.ready_timeout_s:.0f} s (ready_timeout_s); last state: "
                                        f"{shown.get(t, states[t].summary)}")
            if now >= deadline:
                t = self._open(states)
                return Failure(t, None, f"did not finish within {deadline - go_mono:.0f} s of the start barrier's "
                                        f"release (start delay {self.b.start_delay_s:.0f} s + timeout "
                                        f"{self.timeout_s:.0f} s); last state: {shown.get(t, states[t].summary)}")
            known = {(p.get("metadata") or {}).get("name", ""): fingerprint(p) for p in raw}
            wait = min(self.b.poll_s, max(0.0, deadline - now))
            if self.live.pad and any(p.timed_done for p in self.live.watch.tenants.values()):
                wait = min(wait, PAD_CHECK_S)  # padders are waiting for the word; logs do not wake the watch
            if go_mono is None and self.live.streams:
                wait = min(wait, PAD_CHECK_S)  # ready lines arrive in logs, which do not wake the watch either
            self.api.wait_pods_changed(self.sel, known, wait,
                                       relevant=lambda o: is_kts_object(o, self.run.run_id, self.scenario.name))

    def _stopped_by_kit(self, pod: Mapping[str, Any] | None, st: PodState) -> bool:
        """A tenant the kit asked to stop and then deleted before its go file showed the word: its SIGTERM exit
        (143) is the kit's own stop, not a failure (a disruption is still one)."""
        return self.stop_asked is not None and st.exit_code == 143 and not disruption(pod)

    def placeholder_failure(self, state: str, released: bool, now: float) -> Failure | None:
        """The placeholders watched as closely as the tenants, before the barrier and after it (issue 50): their
        Job's conditions, their Workload's admission (Kueue's quota is cumulative over admitted Workloads: it can
        admit the tenants and not them), the Job controller's ``FailedCreate`` events (a ResourceQuota), their pods'
        terminal states (a preemption, an eviction, a failure during the tenants' image pull). Any of them ends the
        scenario within ``PENDING_S``, naming the placeholders and the cause; it never waits out ``ready_timeout_s``
        holding the node's Lease. Off once the kit asked the tenants to stop (the measurement is over)."""
        if not self.placeholders or self.stop_asked is not None or self.live.stopped_ns is not None:
            return None
        hold = self.hold_job
        if hold is None:
            return Failure(None, None, f"the placeholders' Job {self.hold_name} was deleted by someone else while "
                                       "the scenario ran: the measured GPU's other replicas are no longer held") \
                if self.hold_seen else None
        self.hold_seen = True
        for idx, pod in sorted(self.holders.items()):
            st = pod_state(pod)
            meta = pod.get("metadata") or {}
            if st.done or meta.get("deletionTimestamp"):
                why = disruption(pod) or st.reason or ("being deleted" if meta.get("deletionTimestamp") else
                                                       st.summary)
                evicted = self._hold_eviction()
                return Failure(None, st.exit_code, f"placeholder {meta.get('name', idx)} of Job {self.hold_name} "
                                                   f"stopped holding its replica of the GPU ({evicted or why}) "
                                                   f"{'mid-run' if released else 'before the start'}: other pods "
                                                   "could be placed on the measured GPU; the scenario must run again")
        h = job_outcome(hold)
        if h.state in ("failed", "complete"):
            lost = self._lost_holder() if released else None
            if lost:  # the pod's stop caused the Job's end: named first, whichever of the two the watch saw first
                return Failure(None, None, f"{lost}; its Job {self.hold_name} then "
                                           f"{'failed' if h.state == 'failed' else 'completed'} ({h.text})")
            return Failure(None, None, f"the placeholders' Job {self.hold_name} "
                                       f"{'failed' if h.state == 'failed' else 'completed'} ({h.text}) before the "
                                       "scenario ended: the measured GPU's other replicas are no longer all held")
        if self.queue and h.state == "suspended":
            self.hold_workload = workload_of(hold, self.api.list_workloads()) or self.hold_workload
            wl = (self.hold_workload or {}).get("metadata", {}).get("name", "(none yet)")
            _, blocked = admission(self.hold_workload)
            if blocked:
                return Failure(None, None, f"Kueue will not admit the placeholders' Workload {wl} of Job "
                                           f"{self.hold_name} (queue {self.queue!r}): {blocked}")
            if state == "running":  # the tenants were admitted, the placeholders wait: cumulative quota
                since = self.hold_since.setdefault("admission", now)
                if now - since >= PENDING_S:
                    return Failure(None, None, f"Kueue admitted the tenants' Workload of Job {self.name} but not the "
                                               f"placeholders' Workload {wl} of Job {self.hold_name} within "
                                               f"{now - since:.0f} s (queue {self.queue!r}: "
                                               f"{pending_admission(self.hold_workload)}): the queue's quota, counted "
                                               "over every admitted Workload, has no room for them, so the measured "
                                               "GPU's other replicas cannot be held")
        else:
            self.hold_since.pop("admission", None)
        if h.state == "running" and len(self.holders) < self.placeholders:
            since = self.hold_since.setdefault("pods", now)
            if now - since >= 2 * self.b.poll_s:
                why = self.create_failure(self.hold_name)
                if why:
                    return Failure(None, None, f"the placeholders' Job {self.hold_name} cannot create its pods: "
                                               f"{why}{self.b.hint(why)}; the measured GPU's other replicas cannot be "
                                               "held")
        else:
            self.hold_since.pop("pods", None)
        lost = self._lost_holder() if released else None
        return Failure(None, None, lost) if lost else None

    def _lost_holder(self) -> str:
        """After the barrier: a placeholder whose pod is gone or replaced since the start, said as the failure."""
        for idx in range(len(self.tenants), len(self.tenants) + self.placeholders):
            pod, held = self.holders.get(idx), self.holder_names.get(idx)
            if pod is None or (pod.get("metadata") or {}).get("name") != held:
                return (f"placeholder {held or f'index {idx}'} stopped holding its replica of the GPU mid-run "
                        f"({'replaced by a new pod' if pod else 'gone'}): other pods could be placed on the measured "
                        "GPU; the scenario must run again")
        return ""

    def _hold_eviction(self) -> str:
        """Kueue evicting the placeholders' (or the whole gang's) Workload, named, where a queue is used."""
        if not self.queue:
            return ""
        with contextlib.suppress(KtsError):
            workloads = self.api.list_workloads()
            for job in (self.hold_job, self.job):
                why = eviction(workload_of(job or {}, workloads)) if job else ""
                if why:
                    return why
        return ""

    def _evicted(self, job: Mapping[str, Any], state: str, states: Mapping[str, PodState],
                 pods: Mapping[str, dict[str, Any]]) -> str:
        """Kueue took the admission back (preemption, ...): the pods were stopped (exit 143) and the Job
        suspended, to be admitted again later with fresh pods. Their logs would mix two admissions, so the
        scenario stops here, named as what it is. A client that looked away meanwhile finds the Job running
        again with a tenant's pod replaced, and the reason only in the Workload's eviction record."""
        replaced = self.replaced or any(t in self.live.streams and (pods.get(t) or {}).get("metadata", {}).get(
            "name") != self.live.streams[t].pod for t in self.tenants)  # gone, or a new pod
        if not self.queue or not ((state == "suspended" and self.admitted_once) or replaced
                                  or any(st.failed for st in states.values())):
            return ""
        self.workload = workload_of(job, self.api.list_workloads()) or self.workload
        why = eviction(self.workload)
        if not why and replaced and any(t in pods for t in self.tenants):
            why = "a tenant's pod was replaced mid-run (its first pod is gone)"
        return f"{why}; the scenario must run again" if why else ""

    def _guard(self, job: Mapping[str, Any], state: str, states: Mapping[str, PodState], released: bool,
               now: float) -> Failure | None:
        """What must stay true while the scenario runs (see the module docstring); a Failure once it is not."""
        if state == "running" and self.queue and self.b.nodes_readable:
            tmpl = ((job.get("spec") or {}).get("template") or {}).get("spec") or {}
            wrong = {k: v for k, v in (tmpl.get("nodeSelector") or {}).items() if self.node.labels.get(k) != v}
            if wrong:
                return Failure(self.tenants[0], None, f"Kueue admitted Job {self.name} to a ResourceFlavor whose "
                                                      f"node labels {wrong} the pinned node {self.node.name} does not "
                                                      "have: its pods can never be placed; give the flavor the node's "
                                                      "labels or pin a node of that flavor")
        if not released:
            return None
        if now >= self.next_look and (self.barrier.go_ns is None or self.clock.now_ns() >= self.barrier.go_ns):
            self.next_look = now + STRANGER_LOOK_S
            with contextlib.suppress(KtsError):
                for p in self.b.gpu_pods(self.node.name, self.run.run_id, self.scenario.name):
                    self.strangers.setdefault((p.get("metadata") or {}).get("name", "?"), self.b._describe_pod(p))
            if self.strangers:
                return Failure(self._open(states), None, self.stranger_text())
        return None

    def look_after(self, ended_ns: int) -> None:
        """After the run: other GPU pods on the node whose life (API timestamps, whole seconds) overlapped the
        measurement, [the barrier's go, now], ended ones included (a stranger that came and went between two
        looks). A finish time is truncated to the second, so one that reads a second before the go counts."""
        started_ns = self.barrier.go_ns
        if started_ns is None:
            return  # never released (or adopted on resume without the go's client time): nothing was measured here
        for p in self.b.gpu_pods(self.node.name, self.run.run_id, self.scenario.name, ended=True):
            status = p.get("status") or {}
            starts = [parse_time(((c.get("state") or {}).get(k) or {}).get("startedAt"))
                      for c in status.get("containerStatuses") or [] for k in ("running", "terminated")]
            began = parse_time(status.get("startTime")) or min((x for x in starts if x is not None), default=None)
            ends = [parse_time(((c.get("state") or {}).get("terminated") or {}).get("finishedAt"))
                    for c in status.get("containerStatuses") or []]
            ended = max((e for e in ends if e is not None), default=None)
            if status.get("phase") in ("Succeeded", "Failed") and ended is None:
                continue  # finished, when is unknown: it cannot be placed in time
            if began is not None and began * 1e9 <= ended_ns and (ended is None or (ended + 1) * 1e9 > started_ns):
                self.strangers.setdefault((p.get("metadata") or {}).get("name", "?"), self.b._describe_pod(p))

    def holder_mismatch(self, gpu: str | None) -> str:
        """A placeholder whose replica is on another GPU than the tenants' (``packed`` spilled over): the measured
        GPU's replicas were not all held. Where the node may have more than one GPU, a placeholder that could not
        tell its GPU (no NVML, and NVIDIA_VISIBLE_DEVICES no UUID: CDI, deviceIDStrategy=index) fails the check
        too: unproven is not held. On a node known to have one GPU every replica is on it."""
        one_gpu = self.node.physical_known and self.node.physical == 1
        for idx, held in sorted(self.holder_gpus.items()):
            name = (self.holders.get(idx) or {}).get("metadata", {}).get("name", f"index {idx}")
            known = held.startswith(("GPU-", "MIG-"))
            if gpu and known and held != gpu:
                return (f"placeholder {name} holds GPU {held}, the tenants use {gpu}: not every replica of the "
                        "measured GPU was held; the scenario must run again")
            if not known and not one_gpu:
                return (f"placeholder {name} could not tell which GPU holds its replica (NVML gave no UUID and "
                        f"NVIDIA_VISIBLE_DEVICES reads {held!r}: a CDI device list or deviceIDStrategy=index) on a node "
                        "that may have several GPUs: that every replica of the tenants' GPU was held is unproven; "
                        "the scenario must run again (is libnvidia-ml mounted in the kit's pods?)")
        return ""

    def late_start(self, states: Mapping[str, PodState]) -> Failure | None:
        """A tenant whose live log shows it began late (``barrier.late_tenant``): with neighbours, no co-run."""
        if len(self.tenants) < 2:
            return None  # alone, a late start costs nothing (a warning in the record)
        for t in self.tenants:
            stream = self.live.streams.get(t)
            if t in self.barrier.starts and stream is not None and not states[t].done:
                late = late_tenant(self.barrier.starts[t], self.live.watch.tenants[t].meta, stream.last_ready_ns)
                if late is not None:
                    self.late[t] = late
                    return Failure(t, None, f"began its timed loop {late:.2f} s after its start (seen live): the "
                                            "go reached its pod late; the tenants did not start together and "
                                            "the scenario must run again (raise start_delay_s)")
        return None

    def stranger_text(self) -> str:
        where = "any namespace" if self.b.cluster_pod_list else f"namespace {self.b.namespace}"
        return (f"another GPU pod ran on node {self.node.name} during the measurement: "
                f"{', '.join(sorted(self.strangers.values()))} (looked for in {where}); it shared the GPU, so the "
                "scenario must run again")

    def _open(self, states: Mapping[str, PodState]) -> str:
        return next((t for t, st in states.items() if not st.done), self.tenants[0])

    def _pod_name(self, pods: Mapping[str, dict[str, Any]], tenant: str) -> str:
        return str((pods.get(tenant) or {}).get("metadata", {}).get("name") or f"{self.name}-?")

    def _queue_text(self) -> str:
        return pending_admission(self.workload)

    def create_failure(self, job: str) -> str:
        """The Job controller's FailedCreate event on ``job``: how Pod Security, quota and PriorityClass rejections
        show."""
        for ev in self.api.list_events("Job", job):
            if ev.get("reason") == "FailedCreate":
                return str(ev.get("message") or "FailedCreate").splitlines()[0][:300]
        return ""

    def _pending(self, pods: Mapping[str, dict[str, Any]], states: Mapping[str, PodState],
                 pending_since: dict[str, float], now: float, ready_window: float) -> Failure | None:
        """Any pod of the scenario, tenant or placeholder, the scheduler leaves Pending on the pinned node for
        ``PENDING_S`` (or ``schedule_timeout_s``, whichever is shorter) fails it, by name, with the scheduler's words
        and who holds the node's replicas (issue 50: which of two Jobs' pods the scheduler places first is its queue's
        order, so a stranger's replica can leave a tenant Pending as well as a placeholder).

        Why fail: every pod is pinned to the node, and the placeholders ask for exactly the replicas the tenants leave
        free, so "Insufficient nvidia.com/gpu" for any of them means a pod that is not the scenario's holds one (the
        kit may not see it: another namespace, under the namespaced Role); the barrier would wait for it in silence."""
        limit = min(PENDING_S, self.b.schedule_timeout_s, ready_window)
        waiting = {t: (pods[t], st) for t, st in states.items() if st.unschedulable and t in pods}
        waiting.update({f"placeholder {idx}": (pod, pod_state(pod)) for idx, pod in sorted(self.holders.items())
                        if pod_state(pod).unschedulable})
        for key in list(pending_since):
            if key not in waiting:
                pending_since.pop(key)
        for key, (pod, st) in waiting.items():
            since = pending_since.setdefault(key, now)
            if now - since < limit:
                continue
            name = (pod.get("metadata") or {}).get("name", key)
            said = f"{'placeholder' if key.startswith('placeholder') else 'tenant pod'} {name} stayed Pending for " \
                   f"{now - since:.0f} s: {st.unschedulable.strip()}"
            if "nvidia.com/" in st.unschedulable:
                why = (f"{said}; {self._holders()}, so the measured GPU cannot be held whole; the scenario cannot "
                       "run alone on it (free the node, or choose another)")
            elif key.startswith("placeholder"):
                why = (f"{said}; the node has no room for {self.placeholders} placeholders beside the tenants (each "
                       f"asks {PLACEHOLDER_REQUESTS['cpu']} CPU and {PLACEHOLDER_REQUESTS['memory']}; without GPU "
                       "feature discovery their count is the node's whole allocatable GPU count): the GPU's replicas "
                       "cannot all be held (free the node's CPU, memory or pods, label the node through GPU feature "
                       "discovery, or placeholders=False / K8S_PLACEHOLDERS=false to measure without them)")
            else:
                why = f"{said}; the pinned node {self.node.name} has no room for it"
            return Failure(None if key.startswith("placeholder") else key, None, why)
        return None

    def _holders(self) -> str:
        """Who holds the pinned node's GPU replicas, as far as this client can see: the scenario's own pods bound
        there, the other GPU pods it may list, and how many replicas no visible pod accounts for."""
        total = int(self.node.replicas or self.node.allocatable or 0) if not (
            self.node.physical_known and self.node.physical > 1) else int(self.node.allocatable or 0)
        bound = [p for p in [*self.live.last_pods.values(), *self.holders.values()]
                 if (p.get("spec") or {}).get("nodeName") == self.node.name and not pod_state(p).done]
        try:
            others = self.b.gpu_pods(self.node.name, self.run.run_id, self.scenario.name)
        except KtsError:
            others = []
        named = [self.b._describe_pod(p) for p in others]
        unseen = max(0, total - len(bound) - len(others)) if total else 0
        where = "any namespace" if self.b.cluster_pod_list else f"namespace {self.b.namespace}"
        parts = [f"{len(bound)} by this scenario's pods"] + (
            [f"by {', '.join(sorted(named))}"] if named else []) + (
            [f"{unseen} by pod(s) not visible from {where} (another namespace: the opt-in K8S_CLUSTER_POD_LIST with "
             "manifests/components/cluster-pod-list names them)"] if unseen else [])
        return (f"node {self.node.name}'s {total or '?'} replica(s) of its GPU are held: {'; '.join(parts)} "
                f"({self.node.sharing_note()}); another pod holds a replica of node {self.node.name}'s GPU"
                + ("" if named else f" (none seen in {where}: it may be in another namespace)"))

    def ask_stop(self, pods: Mapping[str, dict[str, Any]]) -> None:
        """Every tenant is past its timed iterations: ask them to stop padding, in the go annotation they read
        (``"stop"`` beside their starts). Each worker ends with 0 on that word; a SIGTERM alone (a preemption, a
        drain) ends it with 143, so a disruption is never taken for the kit's stop (issue 50). The Jobs go after
        the tenants ended (``cleanup``), or, if the word takes longer than ``start_delay_s``, by deletion."""
        self.live.stopped_ns = self.clock.now_ns()
        self.stop_asked = self.clock.monotonic()
        self.say("every tenant finished its timed iterations; asking them to stop padding")
        text = self.barrier.stop_text()
        for t in self.tenants:
            pod = pods.get(t)
            if pod is not None and not pod_state(pod).done:
                with contextlib.suppress(KtsError):
                    self.api.annotate_pod(pod["metadata"]["name"], {ANN_START: text})

    def stop_padding(self) -> None:
        """Padding must end now (it overran): delete the Jobs (SIGTERM to every pod, no replacements)."""
        self.live.stopped_ns = self.clock.now_ns()
        self.say("stopping the padding")
        self.delete_jobs(grace_s=STOP_GRACE_S)

    def delete_jobs(self, grace_s: int = 5) -> None:
        """The tenants' Job, then the placeholders' (the tenants stop first: the GPU stays held while they end)."""
        self.jobs_deleted = True
        self.api.delete_job(self.name, grace_s=grace_s)
        if self.placeholders:
            self.api.delete_job(self.hold_name, grace_s=grace_s)

    def stop(self) -> None:
        """After a failure or an interrupt: stop every tenant (ended containers' logs are read first)."""
        for stream in self.live.streams.values():
            if stream.finishing:
                stream.finish(10.0)
        self.delete_jobs()

    # ------------------------------------------------------------------ collection
    def collect(self, failure: Failure | None, error: BaseException | None
                ) -> tuple[list[TenantResult], dict[str, dict[str, Any]]]:
        """Write each tenant's log and status into the run directory; return results and recorded events.

        The log is what the live stream received (it outlives a stopped pod) or, where the pod can
        still be read, the whole log read once more, whichever is longer.
        """
        try:
            job, pods, _ = self.snapshot()
        except KtsError:
            job, pods = None, {}
        job = job or self.job
        pods = {**self.live.last_pods, **pods}  # a stopped pod may be gone: its last seen state stays
        streamed = {t: stream.finish(STOP_GRACE_S + 10.0) for t, stream in self.live.streams.items()}
        # the watch last read the Workload while the Job was suspended: read it again for its admission
        if self.queue and job is not None and admission(self.workload)[0] is None:
            with contextlib.suppress(KtsError):
                self.workload = workload_of(job, self.api.list_workloads()) or self.workload
        outcome = job_outcome(job)
        results, events = [], {}
        for t in self.tenants:
            pod = pods.get(t)
            log = b""
            ev_extra: dict[str, Any] = {}
            if pod is not None:
                try:
                    log = self.api.read_pod_log(pod["metadata"]["name"]) or b""
                except KtsError as exc:
                    ev_extra["log_error"] = str(exc)
            if len(streamed.get(t, b"")) > len(log):
                log = streamed[t]
            ev = tenant_events(job, pod, self.workload, self.barrier.starts.get(t, 0), self.queue,
                               worker_times(log) if log else None)
            if t in self.late:  # stopped live, perhaps before its loop began
                ev["late_start_s"], ev["missed_start_barrier"] = max(self.late[t], ev.get("late_start_s") or 0.0), True
            ev.update(ev_extra)
            st = pod_state(pod)
            if failure is not None and failure.tenant == t:
                ev["outcome"], ev["reason"] = "failed", failure.reason
            elif st.failed and self._stopped_by_kit(pod, st) and failure is None and error is None:
                ev["outcome"] = "complete"  # asked to stop, then deleted before its go file showed the word
            elif st.failed:
                ev["outcome"], ev["reason"] = "failed", st.reason
            elif st.done or (outcome.state == "complete" and pod is not None):
                ev["outcome"] = "complete"
            elif self.live.stopped_ns and failure is None and error is None:
                ev["outcome"] = "complete"  # padding, stopped by kts once every tenant had finished
            else:
                ev["outcome"] = "interrupted" if error is not None or failure is not None else "unknown"
            ev["exit_code"] = st.exit_code
            pod_events: list[dict[str, Any]] = []
            if pod is not None:
                try:
                    pod_events = self.api.list_events("Pod", pod["metadata"]["name"])
                except KtsError:
                    pod_events = []
            log_path, err_path = self.run.log_path(self.scenario.name, t), self.run.stderr_path(self.scenario.name, t)
            write_new(log_path, log)
            write_new(err_path, status_text(self.scenario.name, t, job, pod, pod_events, ev).encode())
            ev["log"], ev["stderr"] = str(log_path.relative_to(self.run.path)), str(err_path.relative_to(self.run.path))
            events[t] = ev
            started = parse_time(ev.get("container_started"))
            ended = parse_time(ev.get("container_finished"))
            results.append(TenantResult(
                tenant=t, exit_code=st.exit_code, log_path=str(log_path), stderr_path=str(err_path),
                started_ns=int(started * 1e9) if started is not None else None,
                ended_ns=int(ended * 1e9) if ended is not None else None,
                reason=ev.get("reason", ""), events=ev))
        return results, events

    def replay(self) -> CoRunWatch:
        """A co-running watch fed with the collected logs whole (a Job collected on resume was never streamed)."""
        watch = CoRunWatch(self.tenants, pad_limit_s=self.pad_limit_s)
        for t in self.tenants:
            path = self.run.log_path(self.scenario.name, t)
            if path.exists():
                watch.feed(t, path.read_bytes())
        return watch


def sleep_real(seconds: float) -> None:
    """A short real pause between polls (deadlines themselves follow the backend's clock)."""
    time.sleep(max(0.0, min(seconds, 1.0)))
