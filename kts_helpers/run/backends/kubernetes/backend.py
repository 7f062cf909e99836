"""``KubernetesBackend``: one scenario from submission to clean-up, on one GPU node.

* All tenants of a scenario are pinned to one node (a ``kubernetes.io/hostname`` node selector, so the
  scheduler still decides and ``PodScheduled`` stays meaningful) and share one ``START_AT`` barrier.
* Their logs are followed live; in a shared scenario the Jobs are deleted once every tenant has finished
  its timed iterations (``corun.CoRunWatch``), and the streamed logs are kept.
* Only objects whose labels the kit verifies itself are deleted, always with foreground propagation,
  also after Ctrl-C.

Longer than 500 lines on purpose: a scenario's lifecycle (submit, watch, stop the padding, collect,
clean up) and every failure path out of it are one class, read top to bottom; the pieces that stand
alone (names, API, nodes, Job manifests, pod state, log streams) are their own modules.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from kts_helpers.errors import BackendError, KtsError, SpecError, TenantFailed
from kts_helpers.fsutil import write_new
from kts_helpers.run.backends.base import ScenarioResult, TenantResult
from kts_helpers.run.backends.kubernetes.api import KubeApi, fingerprint, load_api_client
from kts_helpers.run.backends.kubernetes.jobs import build_job
from kts_helpers.run.backends.kubernetes.logs import LiveScenario
from kts_helpers.run.backends.kubernetes.names import (
    ANN_NODE,
    ANN_RUN,
    ANN_TENANT,
    GPU_RESOURCES,
    LABEL_RE,
    LABEL_RUN,
    LABEL_SCENARIO,
    MANAGED_BY,
    MANAGED_VALUE,
    RESOLUTION_S,
    STOP_GRACE_S,
    is_kts_object,
    label_value,
    labels_match,
    parse_selector,
    selector_string,
)
from kts_helpers.run.backends.kubernetes.nodes import NodeInfo, node_info
from kts_helpers.run.backends.kubernetes.state import (
    PodState,
    parse_time,
    pod_state,
    status_text,
    tenant_events,
)
from kts_helpers.run.corun import CoRunWatch, gpu_mismatch
from kts_helpers.run.runs import Run
from kts_helpers.run.spec import ScenarioSpec

# --------------------------------------------------------------------------- the backend

STRATEGY_OF = {"timeslice": "time-slicing", "mps": "mps"}
_ACTIVE_LOCK = threading.Lock()
_ACTIVE_RUNS: set[str] = set()  # run ids executing in this process (scale-out siblings are not leftovers)


@dataclass
class _Failure:
    tenant: str
    exit_code: int | None
    reason: str


class KubernetesBackend:
    """Runs each tenant of a scenario as a Job on one GPU node and collects logs and layered waits.

    ``namespace``/``image``: where the Jobs go and what they run. ``kubeconfig``/``context``: which
    cluster (default: ``$KUBECONFIG`` or ``~/.kube/config``, else the in-cluster service account);
    ``api_client`` replaces both (tests, scale-out). ``node_selector`` (``"k=v,k2"`` or a mapping)
    narrows the GPU nodes, ``node_name`` pins one. ``queue_name``: a Kueue LocalQueue. ``start_delay_s``:
    START_AT = creation + this, long enough for image pulls. ``schedule_timeout_s``: how long a pod
    may stay unschedulable. ``gpu_resource``: force ``nvidia.com/gpu`` or ``nvidia.com/gpu.shared``
    (default: what the node advertises). ``runtime_class``: e.g. ``nvidia`` on K3s. ``dcgm_url``: a
    dcgm-exporter ``/metrics`` URL scraped every ``dcgm_interval_ms`` while a scenario runs, into
    ``logs/<scenario>/telemetry.parquet`` (the NVML sampler's schema); an unreachable exporter only
    leaves the telemetry status "absent" or "partial" in the scenario record. ``allocation_policy``:
    the device plugin's ``sharedDevicesAllocationPolicy`` on the node; only ``packed`` keeps the tenants
    of a shared scenario on one GPU of a multi-GPU node, so such nodes are refused without it.
    """

    name = "kubernetes"

    def __init__(self, namespace: str = "kts", image: str = "kts-worker:latest", *,
                 kubeconfig: str | os.PathLike | None = None, context: str | None = None,
                 node_selector: str | Mapping[str, str] | None = None, node_name: str | None = None,
                 queue_name: str | None = None, api_client: Any = None, gpu_resource: str | None = None,
                 service_account: str | None = None, memory_limit: str = "8Gi", start_delay_s: float = 30.0,
                 schedule_timeout_s: float = 300.0, poll_s: float = 2.0, cleanup_timeout_s: float = 120.0,
                 image_pull_policy: str = "IfNotPresent", clean_leftovers: bool = True,
                 runtime_class: str | None = None, dcgm_url: str | None = None,
                 dcgm_interval_ms: float = 1000.0, allocation_policy: str | None = None):
        if not re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", namespace or "") or len(namespace) > 63:
            raise SpecError(f"invalid Kubernetes namespace {namespace!r}")
        if not image or any(c.isspace() for c in image):
            raise SpecError(f"invalid image reference {image!r}")
        if gpu_resource is not None and gpu_resource not in GPU_RESOURCES:
            raise SpecError(f"gpu_resource must be one of {', '.join(GPU_RESOURCES)}, got {gpu_resource!r}")
        if queue_name is not None and not LABEL_RE.match(queue_name):
            raise SpecError(f"invalid Kueue queue name {queue_name!r}")
        for key, value in (("start_delay_s", start_delay_s), ("schedule_timeout_s", schedule_timeout_s),
                           ("poll_s", poll_s), ("cleanup_timeout_s", cleanup_timeout_s)):
            if value < 0 or (key == "poll_s" and value == 0):
                raise SpecError(f"{key} must be > 0, got {value}")
        if dcgm_url is not None and not re.match(r"^https?://[^\s/]+", str(dcgm_url)):
            raise SpecError(f"dcgm_url must be an http(s) URL such as http://dcgm-exporter:9400/metrics, "
                            f"got {dcgm_url!r}")
        if not float(dcgm_interval_ms) > 0:
            raise SpecError(f"dcgm_interval_ms must be > 0, got {dcgm_interval_ms}")
        if allocation_policy not in (None, "", "distributed", "packed"):
            raise SpecError(f"allocation_policy must be 'packed' or 'distributed' (the device plugin's "
                            f"sharedDevicesAllocationPolicy), got {allocation_policy!r}")
        self.allocation_policy = allocation_policy or "distributed"
        self.namespace, self.image, self.queue_name = namespace, image, queue_name or None
        self.node_selector = parse_selector(node_selector)
        self.node_name = node_name
        self.gpu_resource = gpu_resource
        self.service_account, self.memory_limit = service_account, memory_limit
        self.start_delay_s, self.schedule_timeout_s = float(start_delay_s), float(schedule_timeout_s)
        self.poll_s, self.cleanup_timeout_s = float(poll_s), float(cleanup_timeout_s)
        self.image_pull_policy, self.clean_leftovers = image_pull_policy, clean_leftovers
        self.runtime_class = runtime_class or None
        self.dcgm_url, self.dcgm_interval_ms = dcgm_url or None, float(dcgm_interval_ms)
        if api_client is None:
            api_client, ctx = load_api_client(kubeconfig, context)
        else:
            ctx = context or "(given ApiClient)"
        self.context = ctx
        self.api = KubeApi(api_client, namespace, context=ctx)

    # ---------------------------------------------------------------- nodes
    def gpu_nodes(self) -> list[NodeInfo]:
        """Schedulable nodes matching the selector that advertise an NVIDIA GPU resource."""
        terms = dict(self.node_selector)
        if self.node_name:
            terms["kubernetes.io/hostname"] = self.node_name
        nodes = self.api.list_nodes(selector_string(terms))
        out = []
        for n in nodes:
            labels = (n.get("metadata") or {}).get("labels") or {}
            name = (n.get("metadata") or {}).get("name")
            if self.node_name and name != self.node_name:
                continue
            if not labels_match(labels, self.node_selector):
                continue
            info = node_info(n, self.gpu_resource)
            if info is not None and info.allocatable > 0 and info.schedulable:
                out.append(info)
        return sorted(out, key=lambda i: (-i.allocatable, i.name))

    def pick_node(self) -> NodeInfo:
        nodes = self.gpu_nodes()
        if not nodes:
            what = f"node {self.node_name!r}" if self.node_name else "no schedulable node"
            sel = selector_string(self.node_selector) or "(none)"
            raise BackendError(f"{what} advertises {' or '.join(GPU_RESOURCES)} (selector {sel}, context "
                               f"{self.context!r}); is the NVIDIA device plugin running on the GPU node?")
        return nodes[0]

    def describe(self) -> dict[str, Any]:
        """What the cluster offers, for the setup notebook ("Kubernetes sees N GPUs; the node has M")."""
        nodes = self.gpu_nodes()
        if not nodes:
            self.pick_node()  # raises the explanatory error
        node = nodes[0]
        warnings = []
        if node.strategy in (None, "none") and (node.replicas or 1) <= 1:
            warnings.append(f"time-slicing does not seem configured ({node.sharing_note()}); apply "
                            "manifests/overlays/device-plugin-timeslicing (see manifests/README.md)")
        leftovers = [j["metadata"]["name"] for j in self._kts_jobs() if self._is_leftover(j, node.name)]
        return {
            "backend": self.name, "context": self.context, "server": self.api.host, "namespace": self.namespace,
            "image": self.image, "queue": self.queue_name, "node": node.name, "gpu_resource": node.resource,
            "kubernetes_gpus": node.allocatable, "physical_gpus": node.physical, "replicas": node.replicas,
            "sharing_strategy": node.strategy, "product": node.product, "summary": node.sentence,
            "nodes": [asdict(n) | {"sentence": n.sentence} for n in nodes], "leftover_jobs": leftovers,
            "warnings": warnings, "resolution_s": RESOLUTION_S,
        }

    # ---------------------------------------------------------------- leftovers and cleanup
    def _kts_jobs(self) -> list[dict[str, Any]]:
        return [j for j in self.api.list_jobs(f"{MANAGED_BY}={MANAGED_VALUE}") if is_kts_object(j)]

    @staticmethod
    def _is_leftover(job: Mapping[str, Any], node: str) -> bool:
        """A kit Job of a run not active in this process that would compete for ``node``'s GPU."""
        meta = job.get("metadata") or {}
        run_id = (meta.get("annotations") or {}).get(ANN_RUN) or (meta.get("labels") or {}).get(LABEL_RUN)
        target = (meta.get("annotations") or {}).get(ANN_NODE)
        with _ACTIVE_LOCK:
            active = run_id in _ACTIVE_RUNS
        return not active and target in (None, "", node)

    def cleanup(self, run_id: str | None = None, scenario: str | None = None, *, wait: bool = True,
                only: Callable[[Mapping[str, Any]], bool] | None = None) -> list[str]:
        """Delete the kit's Jobs (optionally of one run / scenario) and their pods; returns Job names.

        Only objects whose labels say ``managed-by=kts`` (and the run / scenario asked for) are
        touched; the server-side selector narrows the listing, the client-side check decides.
        """
        terms = {MANAGED_BY: MANAGED_VALUE}
        if run_id is not None:
            terms[LABEL_RUN] = label_value(run_id)
        if scenario is not None:
            terms[LABEL_SCENARIO] = label_value(scenario)
        sel = selector_string(terms)
        jobs = [j for j in self.api.list_jobs(sel) if is_kts_object(j, run_id, scenario) and (only is None or only(j))]
        names = [j["metadata"]["name"] for j in jobs]
        for name in names:
            self.api.delete_job(name)
        # Orphaned pods (their Job deleted with orphan propagation by someone else) are ours too.
        existing = {j["metadata"]["name"] for j in self.api.list_jobs(sel)} - set(names)
        for pod in self.api.list_pods(sel):
            labels = (pod.get("metadata") or {}).get("labels") or {}
            owner = labels.get("batch.kubernetes.io/job-name") or labels.get("job-name")
            if not is_kts_object(pod, run_id, scenario) or owner in existing:
                continue
            if owner in names or only is None or only(pod):
                self.api.delete_pod(pod["metadata"]["name"])
        if wait and names:
            deadline = time.monotonic() + self.cleanup_timeout_s
            while True:
                left = [j["metadata"]["name"] for j in self.api.list_jobs(sel) if j["metadata"]["name"] in names]
                if not left:
                    break
                if time.monotonic() >= deadline:
                    raise BackendError(f"Jobs {', '.join(left)} still exist {self.cleanup_timeout_s:.0f} s after "
                                       f"deletion (namespace {self.namespace}); check finalizers with kubectl")
                time.sleep(min(self.poll_s, 1.0))
        return names

    def clean_leftovers_for(self, node: str) -> list[str]:
        """Remove kit Jobs of interrupted runs that would share ``node``'s GPU with this run."""
        return self.cleanup(only=lambda j: self._is_leftover(j, node))

    # ---------------------------------------------------------------- a scenario
    def run_scenario(self, run: Run, scenario: ScenarioSpec, *, timeout_s: float,
                     progress: bool = True, pad_limit_s: float | None = None) -> ScenarioResult:
        """Create one Job per tenant, watch them to the end, collect logs and waits, always clean up."""
        if not timeout_s or timeout_s <= 0:
            raise SpecError(f"timeout_s must be > 0, got {timeout_s}")
        if not scenario.tenants:
            raise SpecError(f"scenario {scenario.name!r} has no tenants")
        node = self.pick_node()
        if node.allocatable < len(scenario.tenants):
            raise BackendError(f"scenario {scenario.name!r} needs {len(scenario.tenants)} GPUs on one node but "
                               f"{node.sharing_note()}; time-slicing may not be configured (replicas)")
        if scenario.kind == "shared":
            self._check_one_physical_gpu(scenario, node)
        run.claim_scenario(scenario.name)
        with _ACTIVE_LOCK:
            _ACTIVE_RUNS.add(run.run_id)
        try:
            if self.clean_leftovers:
                gone = self.clean_leftovers_for(node.name)
                if gone and progress:
                    print(f"[kts] removed leftover Jobs on {node.name}: {', '.join(gone)}", file=sys.stderr)
            return self._run(run, scenario, node, float(timeout_s), progress,
                             float(timeout_s if pad_limit_s is None else pad_limit_s))
        finally:
            with _ACTIVE_LOCK:
                _ACTIVE_RUNS.discard(run.run_id)

    def _check_one_physical_gpu(self, scenario: ScenarioSpec, node: NodeInfo) -> None:
        """A shared scenario's tenants must land on one physical GPU of the node, by a sharing strategy.

        The device plugin advertises each physical GPU ``replicas`` times, and its default allocation
        policy ("distributed") spreads replicas over physical GPUs: on a node with more than one, the
        "shared" tenants would each get a GPU of their own. Only the plugin's ``packed`` policy
        (``flags.plugin.sharedDevicesAllocationPolicy``, set in manifests/overlays/device-plugin-timeslicing)
        keeps them together; the workers' GPU UUIDs then prove it after the run.
        """
        want = STRATEGY_OF.get(scenario.sharing, scenario.sharing)
        if node.strategy == "none":
            raise BackendError(f"scenario {scenario.name!r} is shared but {node.sharing_note()}: with sharing "
                               "strategy 'none' every tenant gets a GPU of its own; apply manifests/overlays/"
                               "device-plugin-timeslicing (see manifests/README.md)")
        if node.strategy not in (None, "", want):
            raise BackendError(f"scenario {scenario.name!r} wants {want} sharing but {node.sharing_note()}; apply "
                               f"the matching manifests/overlays/device-plugin-* ConfigMap")
        if node.physical > 1 and self.allocation_policy != "packed":
            raise BackendError(f"node {node.name} has {node.physical} physical GPUs and the device plugin's default "
                               "'distributed' allocation would give the tenants of scenario "
                               f"{scenario.name!r} different GPUs; set flags.plugin.sharedDevicesAllocationPolicy: "
                               "packed in the plugin config (manifests/overlays/device-plugin-timeslicing does) and "
                               "pass allocation_policy='packed' (K8S_ALLOCATION_POLICY=packed), or select a node "
                               "with one GPU")

    def _run(self, run: Run, scenario: ScenarioSpec, node: NodeInfo, timeout_s: float,
             progress: bool, pad_limit_s: float) -> ScenarioResult:
        started_ns = time.time_ns()
        start_at_ns = started_ns + int(self.start_delay_s * 1e9)
        bodies = {t.name: build_job(
            run_id=run.run_id, scenario=scenario, tenant=t, namespace=self.namespace, image=self.image,
            node=node.name, start_at_ns=start_at_ns, gpu_resource=node.resource, node_selector=self.node_selector,
            queue_name=self.queue_name, service_account=self.service_account, memory_limit=self.memory_limit,
            active_deadline_s=int(timeout_s + self.start_delay_s + self.schedule_timeout_s) + 60,
            image_pull_policy=self.image_pull_policy, runtime_class=self.runtime_class,
            pad_limit_s=pad_limit_s + 60.0)  # the worker's backstop: later than this client's limit
            for t in scenario.tenants}
        error: BaseException | None = None
        failure: _Failure | None = None
        created: dict[str, dict[str, Any]] = {}
        telemetry: dict[str, Any] = {}
        live = LiveScenario(CoRunWatch(scenario.tenant_names, pad_limit_s=pad_limit_s),
                     scenario.kind == "shared" and len(scenario.tenants) > 1)
        scraper = self._start_telemetry(run.log_dir(scenario.name), telemetry)
        try:
            for tenant, body in bodies.items():
                created[tenant] = self.api.create_job(body) or body
            failure = self._watch(run, scenario, bodies, node, timeout_s, progress, live)
        except BaseException as exc:  # noqa: BLE001 - Ctrl-C included: collect, clean up, re-raise
            error = exc
        self._stop_telemetry(scraper, telemetry)
        if (failure is not None or error is not None) and live.stopped_ns is None:
            # stop the other tenants first, so their log streams end; ended containers' logs are read first
            for stream in live.streams.values():
                if stream.finishing:
                    stream.finish(10.0)
            with contextlib.suppress(Exception):
                for body in bodies.values():
                    self.api.delete_job(body["metadata"]["name"])
        tenants: list[TenantResult] = []
        events: dict[str, dict[str, Any]] = {}
        try:
            tenants, events = self._collect(run, scenario, bodies, created, node, start_at_ns, failure, error, live)
        except BaseException as exc:  # noqa: BLE001
            error = error or exc
        if error is None and failure is None and scenario.kind == "shared":
            metas = {t: live.watch.tenants[t].meta for t in bodies}
            mismatch = gpu_mismatch(metas)
            if mismatch:
                failure = _Failure(next(iter(bodies)), None, mismatch)
        cleanup_error = ""
        try:
            self.cleanup(run.run_id, scenario.name)
        except BaseException as exc:  # noqa: BLE001
            cleanup_error = str(exc) or type(exc).__name__
            if error is None and not isinstance(exc, KtsError):
                error = exc
        ended_ns = time.time_ns()
        reason = ""
        if error is not None:
            reason = "interrupted (KeyboardInterrupt)" if isinstance(error, KeyboardInterrupt) else \
                (str(error).splitlines()[0] if str(error) else type(error).__name__)
        elif failure is not None:
            reason = f"tenant {failure.tenant!r}: {failure.reason}"
        elif cleanup_error:
            reason = f"cleanup failed: {cleanup_error}"
        status = "failed" if reason else "complete"
        info = {
            "status": status, "backend": self.name, "kind": scenario.kind, "sharing": scenario.sharing,
            "context": self.context, "namespace": self.namespace, "image": self.image, "node": node.name,
            "gpu_resource": node.resource, "kubernetes_gpus": node.allocatable, "physical_gpus": node.physical,
            "replicas": node.replicas, "sharing_strategy": node.strategy, "queue": self.queue_name,
            "start_at_ns": start_at_ns, "started_ns": started_ns, "ended_ns": ended_ns,
            "resolution_s": RESOLUTION_S, "tenants": events, "corun": live.watch.summary(),
            **({"padding_stopped_ns": live.stopped_ns} if live.stopped_ns else {}), **telemetry,
        }
        if reason:
            info["reason"] = reason
        if failure is not None:
            info["failed_tenant"] = failure.tenant
        if cleanup_error:
            info["cleanup_error"] = cleanup_error
        late = [t for t, ev in events.items() if ev.get("missed_start_barrier")]
        if late:
            info["warnings"] = [f"tenant(s) {', '.join(late)} started after START_AT; raise start_delay_s"]
        run.record_scenario(scenario.name, info)
        if error is not None:
            raise error
        if failure is not None:
            log_file = run.log_path(scenario.name, failure.tenant)
            tail = log_file.read_text(errors="replace")[-4000:] if log_file.exists() else ""
            if not tail.strip() or tail.strip().splitlines()[-1].startswith("KTS_"):
                tail = ""  # no error text in the pod log: the pod's reason above is the news
            raise TenantFailed(scenario.name, failure.tenant, failure.exit_code, tail,
                               reason=f"failed on Kubernetes: {failure.reason} (pod log and status in "
                                      f"{run.stderr_path(scenario.name, failure.tenant)})")
        if cleanup_error:
            raise BackendError(f"scenario {scenario.name!r} finished but cleanup failed: {cleanup_error}")
        return ScenarioResult(scenario.name, status, tenants, started_ns, ended_ns,
                              extra={"node": node.name, "namespace": self.namespace, "resolution_s": RESOLUTION_S,
                                     "jobs": {t: b["metadata"]["name"] for t, b in bodies.items()}})

    def _start_telemetry(self, log_dir: Path, out: dict[str, Any]) -> Any:
        """Scrape dcgm-exporter in the background while the scenario runs; None when off or broken."""
        if not self.dcgm_url:
            out["telemetry"] = {"status": "absent", "reason": "no dcgm_url configured (KTS_DCGM_URL)"}
            return None
        try:
            from kts_helpers.run.telemetry import DcgmScraper

            return DcgmScraper(self.dcgm_url, log_dir / "telemetry.parquet",
                               interval_ms=self.dcgm_interval_ms).start()
        except Exception as exc:  # noqa: BLE001 - telemetry must never stop the experiment
            text = str(exc).splitlines()[0][:300] if str(exc) else type(exc).__name__
            out["telemetry"] = {"status": "absent", "reason": f"DCGM scraper did not start: {text}",
                                "source": "dcgm", "url": self.dcgm_url}
            return None

    @staticmethod
    def _stop_telemetry(scraper: Any, out: dict[str, Any]) -> None:
        if scraper is None:
            return
        try:
            out["telemetry"] = scraper.stop()
        except Exception as exc:  # noqa: BLE001
            text = str(exc).splitlines()[0][:300] if str(exc) else type(exc).__name__
            out["telemetry"] = {"status": "absent", "reason": f"DCGM scraper failed: {text}", "source": "dcgm",
                                "url": scraper.url}

    def _selector(self, run: Run, scenario: ScenarioSpec) -> str:
        return selector_string({MANAGED_BY: MANAGED_VALUE, LABEL_RUN: label_value(run.run_id),
                                LABEL_SCENARIO: label_value(scenario.name)})

    def _snapshot(self, run: Run, scenario: ScenarioSpec, bodies: Mapping[str, dict[str, Any]]
                  ) -> tuple[dict[str, dict[str, Any]], dict[str, dict[str, Any]], list[dict[str, Any]]]:
        sel = self._selector(run, scenario)
        by_job = {b["metadata"]["name"]: t for t, b in bodies.items()}
        jobs = {by_job[j["metadata"]["name"]]: j for j in self.api.list_jobs(sel)
                if is_kts_object(j, run.run_id, scenario.name) and j["metadata"]["name"] in by_job}
        raw_pods = [p for p in self.api.list_pods(sel) if is_kts_object(p, run.run_id, scenario.name)]
        pods: dict[str, dict[str, Any]] = {}
        for p in sorted(raw_pods, key=lambda p: str((p.get("metadata") or {}).get("creationTimestamp") or "")):
            meta = p.get("metadata") or {}
            tenant = (meta.get("annotations") or {}).get(ANN_TENANT)
            owner = (meta.get("labels") or {}).get("batch.kubernetes.io/job-name") or \
                (meta.get("labels") or {}).get("job-name")
            tenant = tenant if tenant in bodies else by_job.get(owner or "")
            if tenant is not None:
                pods[tenant] = p  # the newest pod of the tenant wins
        return jobs, pods, raw_pods

    def _watch(self, run: Run, scenario: ScenarioSpec, bodies: Mapping[str, dict[str, Any]], node: NodeInfo,
               timeout_s: float, progress: bool, live: LiveScenario) -> _Failure | None:
        t0 = time.monotonic()
        deadline = t0 + self.start_delay_s + timeout_s
        pending_since: dict[str, float] = {}
        no_pod_since: dict[str, float] = {}
        shown: dict[str, str] = {}
        sel = self._selector(run, scenario)
        while True:
            jobs, pods, raw = self._snapshot(run, scenario, bodies)
            now = time.monotonic()
            states = {t: pod_state(jobs.get(t), pods.get(t)) for t in bodies}
            live.follow(self.api, pods, states, self.poll_s)
            if live.pad and live.watch.ready_to_stop():
                self._stop_padding(bodies, live, progress, scenario)
                return None
            overrun = live.watch.overrun() if live.pad else None
            if overrun:
                self._stop_padding(bodies, live, progress, scenario)
                return _Failure(next(t for t, p in live.watch.tenants.items() if not p.timed_done), None, overrun)
            for t, st in states.items():
                if progress and shown.get(t) != st.summary:
                    print(f"[kts] {scenario.name}/{t}: {st.summary}", file=sys.stderr)
                shown[t] = st.summary
            for t, st in states.items():
                if st.failed:
                    pod = (pods.get(t) or {}).get("metadata", {}).get("name") or bodies[t]["metadata"]["name"]
                    return _Failure(t, st.exit_code, f"pod {pod}: {st.reason}{self._hint(st.reason)}")
            if all(st.done for st in states.values()):
                return None
            for t, st in states.items():
                if st.unschedulable:
                    pending_since.setdefault(t, now)
                    if now - pending_since[t] >= min(self.schedule_timeout_s, deadline - t0):
                        return _Failure(t, None, self._unschedulable_reason(pods[t], st, now - pending_since[t]))
                else:
                    pending_since.pop(t, None)
                if st.phase == "NoPod" and t in jobs:
                    no_pod_since.setdefault(t, now)
                    if now - no_pod_since[t] >= 2 * self.poll_s:
                        why = self._job_create_failure(bodies[t]["metadata"]["name"])
                        if why:
                            return _Failure(t, None, f"Job {bodies[t]['metadata']['name']} cannot create its pod: {why}")
                else:
                    no_pod_since.pop(t, None)
            if now >= deadline:
                t = next(t for t, st in states.items() if not st.done)
                return _Failure(t, None, f"did not finish within {deadline - t0:.0f} s (start delay "
                                         f"{self.start_delay_s:.0f} s + timeout {timeout_s:.0f} s); last state: "
                                         f"{states[t].summary}")
            known = {(p.get("metadata") or {}).get("name", ""): fingerprint(p) for p in raw}
            self.api.wait_pods_changed(sel, known, min(self.poll_s, max(0.0, deadline - now)),
                                       relevant=lambda o: is_kts_object(o, run.run_id, scenario.name))

    def _stop_padding(self, bodies: Mapping[str, dict[str, Any]], live: LiveScenario, progress: bool,
                      scenario: ScenarioSpec) -> None:
        """Every tenant is past its timed iterations: delete the Jobs (SIGTERM; no replacement pods)."""
        live.stopped_ns = time.time_ns()
        if progress:
            print(f"[kts] {scenario.name}: every tenant finished its timed iterations; stopping the padding",
                  file=sys.stderr)
        for body in bodies.values():
            self.api.delete_job(body["metadata"]["name"], grace_s=STOP_GRACE_S)

    def _hint(self, reason: str) -> str:
        if "OOMKilled" in reason:
            return f"; the container's memory limit is {self.memory_limit}: raise memory_limit"
        if "Image" in reason:
            return (f"; can the node pull {self.image}? push it to a registry the node reaches, or import it "
                    "into the node's runtime (manifests/README.md)")
        return ""

    def _job_create_failure(self, job: str) -> str:
        for ev in self.api.list_events("Job", job):
            if ev.get("reason") == "FailedCreate":
                return str(ev.get("message") or "FailedCreate").splitlines()[0][:300]
        return ""

    def _unschedulable_reason(self, pod: Mapping[str, Any], st: PodState, waited: float) -> str:
        name = (pod.get("metadata") or {}).get("name", "?")
        msg = f"pod {name} stayed Pending for {waited:.0f} s: {st.unschedulable.strip()}"
        if "Insufficient nvidia.com/gpu" in st.unschedulable:
            target = ((pod.get("spec") or {}).get("nodeSelector") or {}).get("kubernetes.io/hostname")
            try:
                info = node_info(self.api.read_node(target or self.pick_node().name), self.gpu_resource)
            except KtsError:
                info = None
            note = info.sharing_note() if info else "node state unavailable"
            msg += (f"; time-slicing may not be configured ({note}); apply manifests/overlays/"
                    "device-plugin-timeslicing and check the device plugin's config (manifests/README.md)")
        return msg

    # ---------------------------------------------------------------- collection
    def _collect(self, run: Run, scenario: ScenarioSpec, bodies: Mapping[str, dict[str, Any]],
                 created: Mapping[str, dict[str, Any]], node: NodeInfo, start_at_ns: int,
                 failure: _Failure | None, error: BaseException | None, live: LiveScenario
                 ) -> tuple[list[TenantResult], dict[str, dict[str, Any]]]:
        """Write each tenant's pod log and status into the run directory; return results and events.

        The log is what the live stream received (it outlives a stopped pod) or, where the pod can
        still be read, the whole log read once more, whichever is longer.
        """
        try:
            jobs, pods, _ = self._snapshot(run, scenario, bodies)
        except KtsError:
            jobs, pods = {}, {}
        pods = {**live.last_pods, **pods}  # a stopped pod may be gone: its last seen state stays
        streamed = {t: stream.finish(STOP_GRACE_S + 10.0) for t, stream in live.streams.items()}
        workloads: list[dict[str, Any]] = []
        if self.queue_name:
            try:
                workloads = self.api.list_workloads()
            except KtsError:
                workloads = []
        results, events = [], {}
        for t in bodies:
            job = jobs.get(t) or created.get(t) or bodies[t]
            pod = pods.get(t)
            ev = tenant_events(job, pod, workloads, start_at_ns, self.queue_name)
            st = pod_state(jobs.get(t), pod)
            if failure is not None and failure.tenant == t:
                ev["outcome"], ev["reason"] = "failed", failure.reason
            elif st.failed:
                ev["outcome"], ev["reason"] = "failed", st.reason
            elif st.done:
                ev["outcome"] = "complete"
            elif live.stopped_ns and failure is None and error is None:
                ev["outcome"] = "complete"  # padding, stopped by kts once every tenant had finished
            else:
                ev["outcome"] = "interrupted" if error is not None or failure is not None else "unknown"
            ev["exit_code"] = st.exit_code
            log = b""
            pod_events: list[dict[str, Any]] = []
            if pod is not None:
                try:
                    log = self.api.read_pod_log(pod["metadata"]["name"]) or b""
                except KtsError as exc:
                    ev["log_error"] = str(exc)
            if len(streamed.get(t, b"")) > len(log):
                log = streamed[t]
            if pod is not None:
                try:
                    pod_events = self.api.list_events("Pod", pod["metadata"]["name"])
                except KtsError:
                    pod_events = []
            log_path, err_path = run.log_path(scenario.name, t), run.stderr_path(scenario.name, t)
            write_new(log_path, log)
            write_new(err_path, status_text(scenario.name, t, job, pod, pod_events, ev).encode())
            ev["log"], ev["stderr"] = str(log_path.relative_to(run.path)), str(err_path.relative_to(run.path))
            events[t] = ev
            started = parse_time(ev.get("container_started"))
            ended = parse_time(ev.get("container_finished"))
            results.append(TenantResult(
                tenant=t, exit_code=st.exit_code, log_path=str(log_path), stderr_path=str(err_path),
                started_ns=int(started * 1e9) if started is not None else None,
                ended_ns=int(ended * 1e9) if ended is not None else None,
                reason=ev.get("reason", ""), events=ev))
        return results, events
