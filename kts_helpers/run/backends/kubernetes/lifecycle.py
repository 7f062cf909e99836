"""One scenario on the cluster, from submission (or re-attachment) to its tenants' logs in the run directory.

* Submit the scenario's Indexed Job, or attach to the one this run submitted before (``kts run --resume``
  after the client went away): a running Job is followed from its pods' first log byte, a completed one
  is collected, a failed one is replaced.
* Watch it: the pods (a watch wakes the loop, a re-list decides), the Job's conditions, Kueue's
  Workload, the node; follow every tenant's log live and feed the co-running watch.
* In a shared scenario, delete the Job once every tenant has finished its timed iterations (the streamed
  logs keep every line); collect logs, pod status and timestamps.
"""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from kts_helpers.errors import BackendError, KtsError
from kts_helpers.fsutil import write_new
from kts_helpers.run.backends.base import TenantResult
from kts_helpers.run.backends.kubernetes.api import KubeApi, fingerprint
from kts_helpers.run.backends.kubernetes.barrier import StartBarrier, configmap_body, go_configmap_name
from kts_helpers.run.backends.kubernetes.clock import Clock, parse_time
from kts_helpers.run.backends.kubernetes.jobs import build_scenario_job, job_tenants
from kts_helpers.run.backends.kubernetes.lease import NodeLease
from kts_helpers.run.backends.kubernetes.logs import LiveScenario
from kts_helpers.run.backends.kubernetes.names import (
    ANN_RUN,
    ANN_SCENARIO,
    LABEL_RUN,
    LABEL_SCENARIO,
    MANAGED_BY,
    MANAGED_VALUE,
    STOP_GRACE_S,
    completion_index,
    is_kts_object,
    job_name,
    job_of,
    label_value,
    selector_string,
)
from kts_helpers.run.backends.kubernetes.nodes import NodeInfo, node_info
from kts_helpers.run.backends.kubernetes.state import (
    PodState,
    admission,
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

    def hint(self, reason: str) -> str: ...

    def wait_gone(self, names: Sequence[str], sel: str) -> None: ...

PAD_CHECK_S = 0.25  # while tenants pad or say ready, look at their logs this often (logs do not wake the watch)


@dataclass
class Failure:
    tenant: str
    exit_code: int | None
    reason: str


def scenario_selector(run_id: str, scenario: str) -> str:
    return selector_string({MANAGED_BY: MANAGED_VALUE, LABEL_RUN: label_value(run_id),
                            LABEL_SCENARIO: label_value(scenario)})


class ScenarioRun:
    """One scenario's Job on one node: submit or attach, watch, stop the padding, collect."""

    def __init__(self, backend: ScenarioHost, run: Run, scenario: ScenarioSpec, node: NodeInfo, *,
                 timeout_s: float, pad_limit_s: float, progress: bool, lease: NodeLease | None = None) -> None:
        self.b, self.api, self.clock, self.lease = backend, backend.api, backend.clock, lease
        self.run, self.scenario, self.node = run, scenario, node
        self.timeout_s, self.pad_limit_s, self.progress = timeout_s, pad_limit_s, progress
        self.name = job_name(run.run_id, scenario.name)
        self.tenants = scenario.tenant_names
        self.sel = scenario_selector(run.run_id, scenario.name)
        self.live = LiveScenario(CoRunWatch(self.tenants, pad_limit_s=pad_limit_s),
                                 scenario.kind == "shared" and len(scenario.tenants) > 1)
        self.job: dict[str, Any] = {}
        self.barrier = StartBarrier(self.tenants, backend.start_delay_s)
        self.go_name = go_configmap_name(self.name)
        self.how = "submitted"  # or "attached" (found running), "collected" (found complete), "replaced"
        self.workload: dict[str, Any] | None = None
        self.admitted_once = False  # Kueue let the Job run (a later suspension is an eviction)

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
            self.api.delete_job(self.name)
            self.b.wait_gone([self.name], self.sel)
            self.how, old = "replaced", None
        if old is not None:
            go = (self.api.read_configmap(self.go_name) or {}).get("data") or {}
            published = self.barrier.adopt(str(go.get("start_at") or ""))
            if not published and job_outcome(old).state != "complete":
                # its tenants wait at the barrier, and their ready lines are old: their clocks cannot be
                # read again from this client, so the scenario starts over
                self.say(f"Job {self.name} of this run is still waiting at its start barrier; running it again")
                self.api.delete_job(self.name)
                self.b.wait_gone([self.name], self.sel)
                self.how, old = "replaced", None
        if old is not None:
            self.job = old
            self.how = "collected" if job_outcome(old).state == "complete" else "attached"
            self.say(f"{self.how} Job {self.name}, which this run submitted before")
            return
        self._reset_go()
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
            image_pull_secrets=self.b.image_pull_secrets, read_only_root=self.b.read_only_root)
        self.job = self.api.create_job(body) or body

    def _reset_go(self) -> None:
        """The go ConfigMap, empty: created before the Job so no pod waits for its volume; a replaced Job's
        old starts are cleared."""
        meta = self.job_labels()
        body = configmap_body(self.go_name, self.b.namespace, meta, {ANN_RUN: self.run.run_id,
                                                                     ANN_SCENARIO: self.scenario.name})
        if self.api.read_configmap(self.go_name) is None:
            self.api.create_configmap(body)
        else:
            self.api.replace_configmap(self.go_name, body)

    def job_labels(self) -> dict[str, str]:
        return {MANAGED_BY: MANAGED_VALUE, LABEL_RUN: label_value(self.run.run_id),
                LABEL_SCENARIO: label_value(self.scenario.name)}

    def poll_barrier(self) -> bool:
        """Note the tenants that said ready; release the barrier once all have. True once released."""
        if not self.barrier.starts:
            for t, stream in self.live.streams.items():
                if stream.ready is not None:
                    self.barrier.ready.setdefault(t, stream.ready)
            if self.barrier.all_ready():
                self.release_barrier()
        return bool(self.barrier.starts)

    def release_barrier(self) -> None:
        """Every tenant is ready: publish each one's start on its own pod's clock."""
        text = self.barrier.release(self.clock.now_ns())
        body = configmap_body(self.go_name, self.b.namespace, self.job_labels(),
                              {ANN_RUN: self.run.run_id, ANN_SCENARIO: self.scenario.name}, text)
        self.api.replace_configmap(self.go_name, body)
        offsets = ", ".join(f"{t} {r.offset_ns / 1e9:+.2f} s" for t, r in self.barrier.ready.items())
        self.say(f"every tenant is ready; they start together in {self.b.start_delay_s:.0f} s "
                 f"(pod clocks vs this client's: {offsets})")

    # ------------------------------------------------------------------ watching
    def snapshot(self) -> tuple[dict[str, Any] | None, dict[str, dict[str, Any]], list[dict[str, Any]]]:
        """The scenario's Job (None once gone), each tenant's newest pod, and every pod seen."""
        job = self.existing()
        raw = [p for p in self.api.list_pods(self.sel) if is_kts_object(p, self.run.run_id, self.scenario.name)
               and job_of(p) == self.name]
        pods: dict[str, dict[str, Any]] = {}
        for p in sorted(raw, key=lambda p: str((p.get("metadata") or {}).get("creationTimestamp") or "")):
            idx = completion_index(p)
            if idx is not None and 0 <= idx < len(self.tenants):
                pods[self.tenants[idx]] = p  # the newest pod of an index wins
        return job, pods, raw

    def watch(self) -> Failure | None:
        """Follow the scenario to its end; a Failure names the tenant and why, None when it is done."""
        t0 = self.clock.monotonic()
        go_mono = t0 if self.barrier.starts else None
        pending_since: dict[str, float] = {}
        no_pod_since: float | None = None
        shown: dict[str, str] = {}
        while True:
            job, pods, raw = self.snapshot()
            now = self.clock.monotonic()
            states = {t: pod_state(pods.get(t)) for t in self.tenants}
            self.live.follow(self.api, pods, states, self.b.poll_s, self.clock)
            if go_mono is None and self.poll_barrier():
                go_mono = now
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
            if self.b.queue_name and outcome.state == "running":
                self.admitted_once = True
            evicted = self._evicted(job, outcome.state, states)
            if evicted:
                return Failure(self.tenants[0], None, evicted)
            if outcome.state == "failed":  # the Job controller is stopping the other tenants already
                t = next((t for t, st in states.items() if st.failed), self._open(states))
                why = f"Job {self.name} failed ({outcome.text})"
                if states[t].failed:
                    why += f"; pod {self._pod_name(pods, t)}: {states[t].reason}{self.b.hint(states[t].reason)}"
                return Failure(t, states[t].exit_code, why)
            for t, st in states.items():
                if st.failed:
                    return Failure(t, st.exit_code, f"pod {self._pod_name(pods, t)}: {st.reason}"
                                                    f"{self.b.hint(st.reason)}")
            if self.live.pad and self.live.watch.ready_to_stop():
                self.stop_padding()
                return None
            overrun = self.live.watch.overrun() if self.live.pad else None
            if overrun:
                self.stop_padding()
                return Failure(next(t for t, p in self.live.watch.tenants.items() if not p.timed_done), None, overrun)
            if outcome.state == "complete" or all(st.done for st in states.values()):
                return None
            if outcome.state == "suspended" and self.b.queue_name:
                self.workload = workload_of(job, self.api.list_workloads())
                if self.api.kueue_version == "":
                    return Failure(self.tenants[0], None, f"Job {self.name} waits for Kueue (queue "
                                                          f"{self.b.queue_name!r}) but the cluster serves no "
                                                          "kueue.x-k8s.io Workloads: is Kueue installed?")
                _, blocked = admission(self.workload)
                if blocked:
                    wl = (self.workload or {}).get("metadata", {}).get("name", "?")
                    return Failure(self.tenants[0], None, f"Kueue will not admit Workload {wl} of Job {self.name} "
                                                          f"(queue {self.b.queue_name!r}): {blocked}")
            else:
                problem = node_problem(self.api.read_node(self.node.name))
                if problem:
                    return Failure(self._open(states), None, problem)
            for t, st in states.items():
                if st.unschedulable:
                    pending_since.setdefault(t, now)
                    if now - pending_since[t] >= min(self.b.schedule_timeout_s, deadline - t0):
                        return Failure(t, None, self._unschedulable_reason(pods[t], st, now - pending_since[t]))
                else:
                    pending_since.pop(t, None)
            if outcome.state == "running" and any(t not in pods for t in self.tenants):
                no_pod_since = now if no_pod_since is None else no_pod_since
                if now - no_pod_since >= 2 * self.b.poll_s:
                    why = self.create_failure()
                    if why:
                        return Failure(next(t for t in self.tenants if t not in pods), None,
                                       f"Job {self.name} cannot create its pods: {why}")
            else:
                no_pod_since = None
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

    def _evicted(self, job: Mapping[str, Any], state: str, states: Mapping[str, PodState]) -> str:
        """Kueue took the admission back (preemption, ...): the pods were stopped (exit 143) and the Job
        suspended, to be admitted again later with fresh pods. Their logs would mix two admissions, so the
        scenario stops here, named as what it is."""
        if not self.b.queue_name or not ((state == "suspended" and self.admitted_once)
                                         or any(st.failed for st in states.values())):
            return ""
        self.workload = workload_of(job, self.api.list_workloads()) or self.workload
        why = eviction(self.workload)
        return f"{why}; the scenario must run again" if why else ""

    def _open(self, states: Mapping[str, PodState]) -> str:
        return next((t for t, st in states.items() if not st.done), self.tenants[0])

    def _pod_name(self, pods: Mapping[str, dict[str, Any]], tenant: str) -> str:
        return str((pods.get(tenant) or {}).get("metadata", {}).get("name") or f"{self.name}-?")

    def _queue_text(self) -> str:
        return pending_admission(self.workload)

    def create_failure(self) -> str:
        """The Job controller's FailedCreate event: how Pod Security and quota rejections show."""
        for ev in self.api.list_events("Job", self.name):
            if ev.get("reason") == "FailedCreate":
                return str(ev.get("message") or "FailedCreate").splitlines()[0][:300]
        return ""

    def _unschedulable_reason(self, pod: Mapping[str, Any], st: PodState, waited: float) -> str:
        name = (pod.get("metadata") or {}).get("name", "?")
        msg = f"pod {name} stayed Pending for {waited:.0f} s: {st.unschedulable.strip()}"
        if "Insufficient nvidia.com/gpu" in st.unschedulable:
            try:
                info = node_info(self.api.read_node(self.node.name), self.b.gpu_resource)
            except KtsError:
                info = None
            note = info.sharing_note() if info else "node state unavailable"
            msg += (f"; time-slicing may not be configured ({note}); apply manifests/overlays/"
                    "device-plugin-timeslicing and check the device plugin's config (manifests/README.md)")
        return msg

    def stop_padding(self) -> None:
        """Every tenant is past its timed iterations: delete the Job (SIGTERM to every pod, no replacements)."""
        self.live.stopped_ns = self.clock.now_ns()
        self.say("every tenant finished its timed iterations; stopping the padding")
        self.api.delete_job(self.name, grace_s=STOP_GRACE_S)

    def stop(self) -> None:
        """After a failure or an interrupt: stop every tenant (ended containers' logs are read first)."""
        for stream in self.live.streams.values():
            if stream.finishing:
                stream.finish(10.0)
        self.api.delete_job(self.name)

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
        if self.b.queue_name and job is not None and admission(self.workload)[0] is None:
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
            ev = tenant_events(job, pod, self.workload, self.barrier.starts.get(t, 0), self.b.queue_name,
                               worker_times(log) if log else None)
            ev.update(ev_extra)
            st = pod_state(pod)
            if failure is not None and failure.tenant == t:
                ev["outcome"], ev["reason"] = "failed", failure.reason
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
