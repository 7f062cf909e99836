"""Helpers for the Kubernetes backend tests: a fake control plane on top of kmock's emulator.

kmock stores objects and serves list/watch, but runs no controllers and ignores label
selectors. ``FakeCluster`` plays the Job controller, the scheduler, the kubelet, Kueue and
the garbage collector: it turns each Job into a pod and walks the pod through a scripted
life (``behaviour`` per tenant), always through the HTTP API so that watches see changes.
Timestamps are synthetic (a fixed offset per step) so layered waits have known values.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import secrets
import threading
from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, TypeVar

import kmock

from kts_helpers.run.runs import Run, create_run
from kts_helpers.run.spec import ExperimentParams, ExperimentSpec, resolve

NS = "kts"
T = TypeVar("T")
BASE = datetime(2025, 1, 1, 12, 0, 0, tzinfo=timezone.utc)
# Seconds after the Job's creation at which each step happens (no queue: admission is instant).
STEPS = {"admitted": 3, "pod_created": 3, "scheduled": 5, "started": 8, "finished": 20}
INSUFFICIENT = ("0/1 nodes are available: 1 Insufficient nvidia.com/gpu. preemption: 0/1 nodes are available: "
                "1 No preemption victims found for incoming pod.")


def ts(offset_s: float, base: datetime = BASE) -> str:
    return (base + timedelta(seconds=offset_s)).strftime("%Y-%m-%dT%H:%M:%SZ")


def gpu_node(name: str, allocatable: int = 4, *, replicas: int | None = 4, strategy: str | None = "time-slicing",
             resource: str = "nvidia.com/gpu", extra_labels: dict[str, str] | None = None) -> dict[str, Any]:
    labels = {"kubernetes.io/hostname": name, "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
              "nvidia.com/gpu.count": "1", **(extra_labels or {})}
    if replicas is not None:
        labels["nvidia.com/gpu.replicas"] = str(replicas)
    if strategy is not None:
        labels["nvidia.com/gpu.sharing-strategy"] = strategy
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels},
            "status": {"allocatable": {"cpu": "16", "memory": "64Gi", resource: str(allocatable)},
                       "capacity": {resource: str(allocatable)}}}


def kts_lines(tenant: str, workload: str, n: int = 3, *, pads: int = 0, gpu_uuid: str = "GPU-fake-0",
              stretch: int = 1) -> bytes:
    """What the worker prints: a META line with the keys the analysis reads, then ``n`` v2 iterations.

    Iteration ``i`` lasts 5 ms plus 0, 0.5 or 1 ms (a deterministic spread, so statistics have
    something to estimate); iterations start 10 ms apart from the fixed ``STEPS["started"]`` instant.
    ``pads`` padding lines follow (a shared tenant waiting for its neighbours to finish). ``stretch`` spaces
    the lines ``stretch`` times further apart (a tenant that sleeps longer between iterations).
    """
    t0 = 1_735_732_808_000_000_000
    meta = {"workload": workload, "tenant": tenant, "iterations": n, "device": "cuda", "device_name": "fake",
            "start_at_ns": t0, "loop_start_ns": t0, "flops_per_op": 1.0e9, "bytes_per_op": 1.0e6,
            "gpu_uuid": gpu_uuid, "phases_per_iteration": 1}
    lines = [f"KTS_META,v2,{json.dumps(meta, separators=(',', ':'))}"]
    for i in range(n + pads):
        s = t0 + i * 10_000_000 * stretch
        ms = 5.0 + 0.5 * (i % 3)
        phase, index = ("op", i) if i < n else ("pad", i - n)
        lines.append(f"KTS_APP,v2,{workload},{tenant},{index},{phase},{s},{s},{s + int(ms * 1e6)},{ms},{ms}")
    return ("\n".join(lines) + "\n").encode()


class FakeCluster:
    """Plays the controllers of a one-namespace cluster on top of a kmock emulator."""

    def __init__(self, km: Any, namespace: str = NS):
        self.km = km
        self.ns = namespace
        # tenant -> ok | unschedulable | imagepull | oom | exit1 | hang | othergpu (reports another GPU UUID)
        # | slow (its iterations are 10x further apart: its timed loop ends long after its neighbours')
        self.behaviour: dict[str, str] = {}
        self.logs: dict[str, bytes] = {}  # pod name -> log
        self.step: dict[str, int] = {}  # pod name -> lifecycle step
        self.job_of_pod: dict[str, str] = {}
        self.base: dict[str, datetime] = {}  # job -> its creation time
        self.admit_after: int = 2  # controller ticks a queued Job waits before Kueue admits it
        self.queued_ticks: dict[str, int] = {}
        self.max_runs_at_once = 0
        self.tick_s = 0.02
        self.log_iterations = 3  # KTS_APP lines in the log of a finished pod
        self.placement_delay_s: dict[str, int] = {}  # tenant -> extra seconds before PodScheduled (and after)
        self._task: asyncio.Task[None] | None = None
        for res, kind, namespaced in (("v1/pods", "Pod", True), ("batch/v1/jobs", "Job", True),
                                      ("v1/nodes", "Node", False), ("v1/events", "Event", True),
                                      ("kueue.x-k8s.io/v1beta1/workloads", "Workload", True)):
            km.resources[res] = kmock.ResourceInfo(kind=kind, namespaced=namespaced,
                                                   verbs={"get", "list", "watch", "create", "delete", "patch"})
        km["get", kmock.subresource("log")] << self._serve_log

    # ------------------------------------------------------------------ setup helpers
    def add_node(self, node: dict[str, Any]) -> None:
        self.km.objects["v1/nodes", None, node["metadata"]["name"]] = node

    def add_job(self, name: str, labels: dict[str, str], annotations: dict[str, str] | None = None) -> None:
        """A pre-existing Job (e.g. a leftover of an interrupted run, or someone else's)."""
        self.km.objects["batch/v1/jobs", self.ns, name] = {
            "apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "namespace": self.ns, "labels": labels, "annotations": annotations or {}},
            "spec": {"template": {"metadata": {"labels": labels}, "spec": {"containers": []}}},
            "status": {"conditions": [{"type": "Complete", "status": "True"}]}}

    def add_event(self, kind: str, name: str, reason: str, message: str, type_: str = "Warning") -> None:
        ev_name = f"{name}.{secrets.token_hex(3)}"
        self.km.objects["v1/events", self.ns, ev_name] = {
            "apiVersion": "v1", "kind": "Event", "metadata": {"name": ev_name, "namespace": self.ns},
            "involvedObject": {"kind": kind, "name": name, "namespace": self.ns}, "reason": reason,
            "message": message, "type": type_, "count": 3, "lastTimestamp": ts(6)}

    def live(self, resource: str) -> dict[str, dict[str, Any]]:
        return {key[2]: obj.raw for key, obj in list(self.km.objects.items())
                if key[0] == resource and not obj.deleted}

    def deleted(self, resource: str) -> set[str]:
        return {key[2] for key, obj in list(self.km.objects.items()) if key[0] == resource and obj.deleted}

    def backend(self, **kwargs: Any) -> Any:
        from kubernetes import client

        from kts_helpers.run.backends.kubernetes import KubernetesBackend

        cfg = client.Configuration(host=str(self.km.url).rstrip("/"))
        opts: dict[str, Any] = {"namespace": self.ns, "image": "kts-worker:test", "start_delay_s": 0.0,
                                "poll_s": 0.1, "schedule_timeout_s": 1.0, "cleanup_timeout_s": 5.0}
        opts.update(kwargs)
        return KubernetesBackend(api_client=client.ApiClient(cfg), context="kmock", **opts)

    # ------------------------------------------------------------------ the control loop
    async def __aenter__(self) -> FakeCluster:
        self._task = asyncio.create_task(self._loop())
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._task is not None
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task

    async def _serve_log(self, request: Any) -> bytes:
        if request.name in self.logs and request.name not in self.live("v1/pods"):
            # a deleted pod's log is gone (as on a real cluster): only what was streamed before remains
            raise kmock.KubernetesError(404, "NotFound", f'pods "{request.name}" not found')
        if request.name in self.logs:
            return self.logs[request.name]
        raise kmock.KubernetesError(400, "BadRequest", f'container "worker" in pod "{request.name}" is waiting '
                                                       "to start: ContainerCreating")

    async def _loop(self) -> None:
        while True:
            await self._tick()
            await asyncio.sleep(self.tick_s)

    async def _tick(self) -> None:
        jobs = self.live("batch/v1/jobs")
        pods = self.live("v1/pods")
        runs = {j["metadata"]["labels"].get("kts.run-id") for j in jobs.values()
                if j["metadata"].get("labels", {}).get("app.kubernetes.io/managed-by") == "kts"
                and "uid" in j["metadata"]}
        self.max_runs_at_once = max(self.max_runs_at_once, len(runs))
        # Garbage collector: pods of deleted Jobs go too (foreground propagation).
        for pod, job in list(self.job_of_pod.items()):
            if job not in jobs and pod in pods:
                await self._http("delete", f"/api/v1/namespaces/{self.ns}/pods/{pod}")
        for name, job in jobs.items():
            if "uid" not in job["metadata"]:
                if "template" not in job.get("spec", {}) or not job["spec"]["template"]["spec"].get("containers"):
                    continue  # a pre-made leftover: nothing to run
                self.base[name] = BASE
                await self._patch_job(name, {"metadata": {"uid": f"uid-{name}", "creationTimestamp": ts(0)}})
                continue
            if job["spec"].get("suspend"):
                await self._kueue(name, job)
                continue
            if name not in self.job_of_pod.values():
                await self._create_pod(name, job)
        for pod_name, pod in pods.items():
            if pod_name in self.job_of_pod:
                await self._advance(pod_name, pod)

    async def _http(self, method: str, path: str, body: Any = None) -> None:
        resp = await self.km.request(method, path, json=body) if body is not None else \
            await self.km.request(method, path)
        resp.release()

    async def _patch_job(self, name: str, patch: dict[str, Any]) -> None:
        await self._http("patch", f"/apis/batch/v1/namespaces/{self.ns}/jobs/{name}", patch)

    async def _kueue(self, name: str, job: dict[str, Any]) -> None:
        n = self.queued_ticks[name] = self.queued_ticks.get(name, 0) + 1
        if n < self.admit_after:
            return
        wl = f"job-{name}-abcde"
        await self._http("post", f"/apis/kueue.x-k8s.io/v1beta1/namespaces/{self.ns}/workloads", {
            "apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "Workload",
            "metadata": {"name": wl, "namespace": self.ns,
                         "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": name,
                                              "uid": job["metadata"]["uid"]}]},
            "status": {"conditions": [{"type": "QuotaReserved", "status": "True", "lastTransitionTime": ts(2)},
                                      {"type": "Admitted", "status": "True",
                                       "lastTransitionTime": ts(STEPS["admitted"])}]}})
        await self._patch_job(name, {"spec": {"suspend": False}})

    async def _create_pod(self, job_name: str, job: dict[str, Any]) -> None:
        tmpl = job["spec"]["template"]
        pod_name = f"{job_name}-{secrets.token_hex(3)[:5]}"
        labels = dict(tmpl["metadata"].get("labels", {}), **{"batch.kubernetes.io/job-name": job_name})
        body = {"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": pod_name, "namespace": self.ns, "labels": labels,
                             "annotations": tmpl["metadata"].get("annotations", {}),
                             "creationTimestamp": ts(STEPS["pod_created"])},
                "spec": tmpl["spec"], "status": {"phase": "Pending"}}
        self.job_of_pod[pod_name] = job_name
        self.step[pod_name] = 0
        await self._http("post", f"/api/v1/namespaces/{self.ns}/pods", body)

    async def _advance(self, pod_name: str, pod: dict[str, Any]) -> None:
        tenant = pod["metadata"]["labels"].get("kts.tenant", "")
        mode = self.behaviour.get(tenant, "ok")
        step = self.step[pod_name]
        node = pod["spec"].get("nodeSelector", {}).get("kubernetes.io/hostname", "gpu-1")
        env = {e["name"]: e["value"] for e in pod["spec"]["containers"][0]["env"]}
        workload = env.get("WORKLOAD", "fft")
        padding = env.get("KTS_PAD") == "1"  # a shared tenant: it pads until its Job is deleted
        uuid = "GPU-fake-1" if mode == "othergpu" else "GPU-fake-0"
        path = f"/api/v1/namespaces/{self.ns}/pods/{pod_name}"
        d = self.placement_delay_s.get(tenant, 0)
        scheduled = {"type": "PodScheduled", "status": "True", "lastTransitionTime": ts(STEPS["scheduled"] + d)}
        patch: dict[str, Any] | None = None
        if step == 0:
            if mode == "unschedulable":
                patch = {"status": {"conditions": [{"type": "PodScheduled", "status": "False",
                                                    "reason": "Unschedulable", "message": INSUFFICIENT,
                                                    "lastTransitionTime": ts(STEPS["scheduled"])}]}}
            else:
                patch = {"spec": {"nodeName": node}, "status": {"conditions": [scheduled]}}
        elif step == 1 and mode == "imagepull":
            patch = {"status": {"containerStatuses": [{"name": "worker", "ready": False, "state": {"waiting": {
                "reason": "ImagePullBackOff", "message": 'Back-off pulling image "kts-worker:test"'}}}]}}
        elif step == 1 and mode not in ("unschedulable", "imagepull"):
            # a log only grows: what is there after the first iteration is the start of the final log
            first = kts_lines(tenant, workload, self.log_iterations, gpu_uuid=uuid).split(b"\n")[:2]
            self.logs[pod_name] = b"\n".join(first) + b"\n"
            patch = {"status": {"phase": "Running", "containerStatuses": [{"name": "worker", "ready": True, "state": {
                "running": {"startedAt": ts(STEPS["started"] + d)}}}]}}
        elif step == 3 and padding and mode in ("ok", "othergpu", "slow"):
            # timed iterations done; padding starts ...
            self.logs[pod_name] = kts_lines(tenant, workload, self.log_iterations, pads=2, gpu_uuid=uuid,
                                            stretch=10 if mode == "slow" else 1)
        elif step > 3 and padding and mode in ("ok", "othergpu", "slow"):
            # ... and goes on, one more line each tick, until the Job is deleted
            stretch = 10 if mode == "slow" else 1
            self.logs[pod_name] = kts_lines(tenant, workload, self.log_iterations, pads=step - 1, gpu_uuid=uuid,
                                            stretch=stretch)
        elif step == 3 and mode not in ("unschedulable", "imagepull", "hang"):
            code, reason = {"ok": (0, "Completed"), "othergpu": (0, "Completed"), "oom": (137, "OOMKilled"),
                            "exit1": (1, "Error")}[mode]
            log = kts_lines(tenant, workload, self.log_iterations, gpu_uuid=uuid)
            if mode == "exit1":
                log += b"Traceback (most recent call last):\nRuntimeError: CUDA error: out of memory\n"
            self.logs[pod_name] = log
            patch = {"status": {"phase": "Succeeded" if code == 0 else "Failed", "containerStatuses": [{
                "name": "worker", "ready": False, "state": {"terminated": {
                    "exitCode": code, "reason": reason, "startedAt": ts(STEPS["started"] + d),
                    "finishedAt": ts(STEPS["finished"] + d)}}}]}}
        self.step[pod_name] = step + 1
        if patch is not None:
            await self._http("patch", path, patch)


def make_run(root: Path, workloads: tuple[str, ...] = ("fft", "gemm"), label: str = "") -> tuple[Run, ExperimentSpec]:
    spec = resolve(ExperimentParams(profile="tiny", workloads=workloads, backend="kubernetes", label=label), "cuda")
    return create_run(spec.to_dict(), {"test": True}, root=root, label=label), spec


class EmulatorThread:
    """kmock's emulator and a FakeCluster on their own event loop in a daemon thread, for sync callers.

    For code that cannot share the test's loop (papermill kernels in another process, plain
    synchronous tests): ``with EmulatorThread() as emu: emu.url, emu.call(lambda fc: ...)``.
    """

    def __init__(self, namespace: str = NS, start_timeout_s: float = 30.0) -> None:
        self.namespace = namespace
        self.start_timeout_s = start_timeout_s
        self.url = ""
        self.cluster: FakeCluster | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._main, name="kmock-emulator", daemon=True)

    def _main(self) -> None:
        try:
            asyncio.run(self._serve())
        except BaseException as exc:  # noqa: BLE001 - reported to the starting thread
            self._error = exc
            self._ready.set()

    async def _serve(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        async with kmock.KubernetesEmulator() as km, kmock.Server(km) as srv, FakeCluster(km, self.namespace) as fc:
            self.cluster, self.url = fc, str(srv.url).rstrip("/")
            self._ready.set()
            await self._stop.wait()

    def call(self, fn: Callable[[FakeCluster], T | Awaitable[T]], timeout_s: float = 10.0) -> T:
        """Run ``fn(cluster)`` on the emulator's loop (so it never races the controllers); its result."""
        assert self._loop is not None and self.cluster is not None, "emulator not started"
        cluster = self.cluster

        async def _do() -> T:
            out = fn(cluster)
            return await out if asyncio.iscoroutine(out) else out  # type: ignore[return-value]

        return asyncio.run_coroutine_threadsafe(_do(), self._loop).result(timeout_s)

    def __enter__(self) -> EmulatorThread:
        self._thread.start()
        if not self._ready.wait(self.start_timeout_s):
            raise RuntimeError(f"kmock emulator did not start within {self.start_timeout_s:.0f} s")
        if self._error is not None:
            raise RuntimeError(f"kmock emulator failed to start: {self._error!r}")
        return self

    def __exit__(self, *exc: object) -> None:
        if self._loop is not None and self._stop is not None and not self._loop.is_closed():
            with contextlib.suppress(RuntimeError):
                self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(10.0)

    def kubeconfig(self, path: Path, context: str = "kmock") -> Path:
        """A kubeconfig whose ``context`` points at the emulator (no credentials: kmock wants none)."""
        import yaml

        path.write_text(yaml.safe_dump({
            "apiVersion": "v1", "kind": "Config", "current-context": context,
            "clusters": [{"name": context, "cluster": {"server": self.url}}],
            "users": [{"name": context, "user": {"token": "kmock"}}],
            "contexts": [{"name": context, "context": {"cluster": context, "user": context,
                                                       "namespace": self.namespace}}]}))
        return path
