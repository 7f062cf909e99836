"""The Kubernetes backend against an emulated cluster (tests/k8s_fixtures: kmock's API server plus fake
controllers for Jobs, Kueue, the scheduler and the kubelet, all on one fake clock).

The backend's client is synchronous and the emulator serves from the test's event loop, so every
backend call runs in a thread (``asyncio.to_thread``) while the fake controllers keep going. The
fault tests each fail on the backend broken in the corresponding way (see the docstrings).
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from pathlib import Path
from typing import Any

import kmock
import pandas as pd
import pytest
from k8s_fixtures import (
    NS,
    POD_SECURITY,
    QUOTA,
    FakeCluster,
    SkewedClock,
    emulated_cluster,
    gpu_node,
    kubeconfig_file,
    make_run,
    ts,
)

from kts_helpers.analyse.logparse import parse_bytes
from kts_helpers.analyse.waits import layered_waits
from kts_helpers.errors import BackendError, SpecError, TenantFailed
from kts_helpers.run.backends.base import Backend
from kts_helpers.run.backends.kubernetes.api import KubeForbidden
from kts_helpers.run.backends.kubernetes.backend import KubernetesBackend
from kts_helpers.run.backends.kubernetes.lease import NodeBusy
from kts_helpers.run.backends.kubernetes.names import (
    MANAGED_BY,
    job_name,
    label_value,
    lease_name,
    parse_selector,
)

pytestmark = pytest.mark.timeout(90)
LABEL_RE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$")
DNS_RE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
JOBS, PODS, LEASES = "batch/v1/jobs", "v1/pods", "coordination.k8s.io/v1/leases"


@pytest.fixture
async def cluster() -> Any:
    async with emulated_cluster() as fc:
        yield fc


async def _run(backend: KubernetesBackend, run: Any, scenario: Any, timeout_s: float = 60.0, **kw: Any) -> Any:
    return await asyncio.to_thread(backend.run_scenario, run, scenario, timeout_s=timeout_s, progress=False, **kw)


def _env(job: dict[str, Any]) -> dict[str, str]:
    return {e["name"]: e["value"] for e in job["spec"]["template"]["spec"]["containers"][0]["env"]}


def _jobs_created(fc: FakeCluster) -> list[dict[str, Any]]:
    """The tenants' Jobs the kit created (the placeholders' ``-hold`` Jobs apart: ``_hold_jobs``)."""
    return [r.data for r in fc.requests("post", JOBS) if not r.data["metadata"]["name"].endswith("-hold")]


def _hold_jobs(fc: FakeCluster) -> list[dict[str, Any]]:
    return [r.data for r in fc.requests("post", JOBS) if r.data["metadata"]["name"].endswith("-hold")]


def _printed(fc: FakeCluster, pod: str) -> bytes:
    """Everything the pod's container printed (the emulator remembers it after the pod is gone)."""
    return fc.logs[pod]


# ------------------------------------------------------------------------------------------ happy path

async def test_shared_scenario_is_one_indexed_job_pinned_to_one_node(cluster: FakeCluster, tmp_path: Path) -> None:
    cluster.add_node(gpu_node("gpu-1"))
    cluster.add_node(gpu_node("gpu-2", allocatable=8, extra_labels={"pool": "other"}))
    backend = cluster.backend(node_selector="nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3,!pool")
    assert isinstance(backend, Backend)
    run, spec = make_run(tmp_path)
    scenario = spec.scenario("shared")

    result = await _run(backend, run, scenario)

    assert result.status == "complete"
    assert [t.tenant for t in result.tenants] == ["fft", "gemm"]
    (job,) = _jobs_created(cluster)  # one object for the whole scenario
    assert job["metadata"]["name"] == job_name(run.run_id, "shared")
    assert job["spec"]["completionMode"] == "Indexed"
    # two tenants; two placeholders hold the GPU's other replicas (replicas: 4) in a Job of their own, with
    # minimal requests: the scheduler keeps strangers off the measured GPU
    assert job["spec"]["completions"] == job["spec"]["parallelism"] == 2 and job["spec"]["backoffLimit"] == 0
    assert "successPolicy" not in job["spec"]
    assert job["metadata"]["annotations"]["kts/placeholders"] == "2"
    (hold,) = _hold_jobs(cluster)
    assert hold["metadata"]["name"] == job_name(run.run_id, "shared") + "-hold"
    assert hold["spec"]["completions"] == hold["spec"]["parallelism"] == 2
    assert hold["spec"]["template"]["spec"]["affinity"] == job["spec"]["template"]["spec"]["affinity"]
    assert job["spec"]["podFailurePolicy"]["rules"] == [{"action": "FailJob", "onPodConditions": [
        {"type": "DisruptionTarget", "status": "True"}]}]
    labels = job["metadata"]["labels"]
    assert labels[MANAGED_BY] == "kts" and labels["kts.run-id"] == label_value(run.run_id)
    assert labels["kts.scenario"] == "shared"
    env = _env(job)
    assert json.loads(env["KTS_TENANTS"]) == [t.env() for t in scenario.tenants]  # each index's own settings
    assert env["KTS_PAD"] == "1" and env["DEVICE"] == "cuda" and "START_AT" not in env  # the barrier says when
    assert env["KTS_GO_FILE"] == "/kts-go/start_at"
    pod = job["spec"]["template"]["spec"]
    # the go: each pod's own annotation, through a downwardAPI volume (the kubelet syncs on the change)
    assert {"name": "go", "downwardAPI": {"items": [{"path": "start_at", "fieldRef": {
        "fieldPath": "metadata.annotations['kts/start-at']"}}]}} in pod["volumes"]
    # the selector excluded gpu-2 client-side (the emulator ignores label selectors)
    assert pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"] == {
        "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["gpu-1"]}]}]}
    assert "kubernetes.io/hostname" not in pod["nodeSelector"]
    assert pod["serviceAccountName"] == "kts-worker"
    (c,) = pod["containers"]
    assert c["resources"] == {"requests": {"cpu": "1", "memory": "8Gi"},  # Guaranteed QoS: requests = limits
                              "limits": {"cpu": "1", "memory": "8Gi", "nvidia.com/gpu": "1"}}
    assert c["securityContext"]["readOnlyRootFilesystem"] is False
    # each index ran as its tenant, on gpu-1, and every line its container printed is in the run
    posted = [r.data for r in cluster.requests("post", PODS)]
    pods = {p["metadata"]["labels"]["batch.kubernetes.io/job-completion-index"]: p for p in posted
            if not p["metadata"]["labels"]["job-name"].endswith("-hold")}
    holders = [p for p in posted if p["metadata"]["labels"]["job-name"].endswith("-hold")]
    starts = {r.name: r.data["metadata"]["annotations"]["kts/start-at"] for r in cluster.requests("patch", PODS)
              if r.headers.get("User-Agent", "").startswith("OpenAPI")}
    assert set(starts) == {pods["0"]["metadata"]["name"], pods["1"]["metadata"]["name"]}  # tenants only
    assert len(holders) == 2 and all(p["metadata"]["name"] not in starts for p in holders)  # no go for them
    for index, tenant in enumerate(("fft", "gemm")):
        ev = run.manifest()["scenarios"]["shared"]["tenants"][tenant]
        name = pods[str(index)]["metadata"]["name"]
        assert ev["pod"] == name and ev["node"] == "gpu-1"
        log = run.log_path("shared", tenant).read_bytes()
        assert log == _printed(cluster, name)  # nothing lost, although the pod is gone
        frame = parse_bytes(log, source=tenant).frame
        assert set(frame["tenant"]) == {tenant} and (frame["phase"] == "op").sum() == 3
        assert "outcome: complete" in run.stderr_path("shared", tenant).read_text()

    scen = run.manifest()["scenarios"]["shared"]
    assert scen["status"] == "complete" and scen["backend"] == "kubernetes" and scen["how"] == "submitted"
    assert scen["resolution_s"] == 1 and scen["node"] == "gpu-1" and scen["job"] == job["metadata"]["name"]
    assert {t: c["timed_lines"] for t, c in scen["corun"].items()} == {"fft": 3, "gemm": 3}
    assert scen["padding_stopped_ns"] > scen["started_ns"]
    assert "warnings" not in scen
    assert scen["exclusivity"]["placeholders"] == 2 and scen["exclusivity"]["strangers"] == []
    assert scen["exclusivity"]["placeholder_gpus"] == {"2": "GPU-fake-0", "3": "GPU-fake-0"}
    assert scen["log_gaps"] == {}

    # the waits, split: the API's (whole seconds) and the worker's own; the fake clock moves per step
    waits = layered_waits(run.read()).set_index("tenant")
    assert list(waits.index) == ["fft", "gemm"]
    fft = waits.loc["fft"]
    assert pd.isna(fft.admission_wait_s)  # no queue, no admission layer
    assert (fft.placement_wait_s, fft.startup_s) == (1, 3)  # created -> scheduled -> start-up done
    assert str(waits["startup_s"].dtype) == "Int64"  # printed as whole seconds, not "3.000"
    ev = scen["tenants"]["fft"]
    start_at = scen["barrier"]["tenants"]["fft"]["start_at_ns"]
    assert fft.barrier_wait_s == pytest.approx((ev["worker"]["loop_start_ns"] - ev["worker"]["barrier_reached_ns"]) / 1e9)
    assert fft.timed_loop_s == pytest.approx((ev["worker"]["timed_end_ns"] - ev["worker"]["loop_start_ns"]) / 1e9)
    assert ev["worker"]["timed_end_ns"] < ev["worker"]["last_line_ns"]  # the padding tail is not the run
    assert 0.5 < fft.timed_loop_s < 5.0 and fft.late_start_s == pytest.approx(0.001, abs=1e-4)
    assert fft.clock_skew == "" and ev["worker"]["start_at_ns"] == start_at

    # everything the scenario created is gone again, and the node's Lease was given back
    assert not cluster.live(JOBS) and not cluster.live(PODS) and not cluster.live(LEASES)
    deletes = cluster.requests("delete", JOBS)
    assert {r.name for r in deletes} == {job["metadata"]["name"], hold["metadata"]["name"]}
    assert all("Foreground" in (r.params.get("propagationPolicy"), (r.data or {}).get("propagationPolicy"))
               for r in deletes)
    (lease,) = [r.data for r in cluster.requests("post", LEASES)]
    assert lease["metadata"]["name"] == lease_name("gpu-1") and lease["spec"]["holderIdentity"] == backend.identity


async def test_describe_reports_what_kubernetes_sees_and_renamed_resource(cluster: FakeCluster, tmp_path: Path) -> None:
    cluster.add_node(gpu_node("gpu-1", allocatable=4, resource="nvidia.com/gpu.shared"))
    backend = cluster.backend()
    info = await asyncio.to_thread(backend.describe)
    assert info["summary"] == "Kubernetes sees 4 GPUs; the node has 1"
    assert (info["gpu_resource"], info["replicas"], info["sharing_strategy"]) == ("nvidia.com/gpu.shared", 4,
                                                                                   "time-slicing")
    assert info["warnings"] == [] and info["other_gpu_pods"] == []
    run, spec = make_run(tmp_path, ("fft",))
    await _run(backend, run, spec.scenario("baseline-fft"))
    limits = _jobs_created(cluster)[0]["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]
    assert limits == {"cpu": "1", "memory": "8Gi", "nvidia.com/gpu.shared": "1"}


async def test_without_gpu_feature_discovery_the_kit_says_what_it_cannot_know(cluster: FakeCluster,
                                                                             tmp_path: Path) -> None:
    """GKE's own device plugin and bare plugins set no nvidia.com/gpu.* labels."""
    node = gpu_node("plain", allocatable=4, replicas=None, strategy=None)
    del node["metadata"]["labels"]["nvidia.com/gpu.count"]
    del node["metadata"]["labels"]["nvidia.com/gpu.product"]
    cluster.add_node(node)
    backend = cluster.backend()
    info = await asyncio.to_thread(backend.describe)
    assert info["summary"] == ("Kubernetes sees 4 GPUs; how many the node has is unknown "
                               "(no GPU feature discovery labels)")
    assert any("time-slicing does not seem configured" in w for w in info["warnings"])
    assert any("no GPU feature discovery labels" in w and "GPU UUIDs are still checked" in w for w in info["warnings"])
    # an unknown physical count is not refused as a multi-GPU node: the UUID check decides after the run
    run, spec = make_run(tmp_path)
    assert (await _run(backend, run, spec.scenario("shared"))).status == "complete"


async def test_no_gpu_node_is_a_clear_error(cluster: FakeCluster) -> None:
    cpu = gpu_node("cpu-only")
    cpu["status"]["allocatable"] = {"cpu": "8"}
    cluster.add_node(cpu)
    with pytest.raises(BackendError, match=r"no schedulable node advertises nvidia.com/gpu .*device plugin"):
        await asyncio.to_thread(cluster.backend().describe)


async def test_pod_options_pull_secrets_read_only_root_runtime_class(cluster: FakeCluster, tmp_path: Path) -> None:
    cluster.add_node(gpu_node("gpu-1"))
    backend = cluster.backend(image_pull_secrets="regcred, other-cred", read_only_root="true", runtime_class="nvidia")
    run, spec = make_run(tmp_path, ("fft",))
    await _run(backend, run, spec.scenario("baseline-fft"))
    pod = _jobs_created(cluster)[0]["spec"]["template"]["spec"]
    assert pod["imagePullSecrets"] == [{"name": "regcred"}, {"name": "other-cred"}]
    assert pod["containers"][0]["securityContext"]["readOnlyRootFilesystem"] is True
    assert pod["runtimeClassName"] == "nvidia"
    with pytest.raises(SpecError, match="image pull Secret"):
        cluster.backend(image_pull_secrets="Bad_Name")
    with pytest.raises(SpecError, match="read_only_root"):
        cluster.backend(read_only_root="maybe")


# ------------------------------------------------------------------------------------------ Kueue

async def test_kueue_admits_the_scenario_as_one_workload(cluster: FakeCluster, tmp_path: Path) -> None:
    cluster.add_node(gpu_node("gpu-1"))
    backend = cluster.backend(queue_name="kts-queue")
    run, spec = make_run(tmp_path)
    result = await _run(backend, run, spec.scenario("shared"))
    (job,) = _jobs_created(cluster)
    assert job["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "kts-queue"
    assert job["spec"]["suspend"] is True  # Kueue un-suspends it: the whole gang at once
    # two Workloads, each a gang: the tenants' Job and the placeholders' own (minimal requests, issue #45); the
    # start barrier waits for both to run
    wls = {r.data["metadata"]["ownerReferences"][0]["name"]: r.data
           for r in cluster.requests("post", "kueue.x-k8s.io/v1beta2/workloads")}
    wl, hold_wl = wls[job["metadata"]["name"]], wls[job["metadata"]["name"] + "-hold"]
    assert wl["spec"]["podSets"] == [{"name": "main", "count": 2}] == hold_wl["spec"]["podSets"]
    created = job["metadata"]["creationTimestamp"]
    for t in result.tenants:
        assert t.events["workload"] == wl["metadata"]["name"]
        assert t.events["job_created"] == created
        assert t.events["admitted"] == ts(_epoch(created) + cluster.admit_after)
    # Kueue's storage version is read first (and, served, it is the only one asked for)
    assert {r.url.path.split("/")[3] for r in cluster.km.log if r.url.path.endswith("/workloads")} == {"v1beta2"}
    waits = layered_waits(run.read())
    assert list(waits["admission_wait_s"]) == [2, 2] and list(waits["placement_wait_s"]) == [1, 1]
    assert run.manifest()["scenarios"]["shared"]["workload"] == wl["metadata"]["name"]


def _epoch(stamp: str) -> float:
    from kts_helpers.run.backends.kubernetes.clock import parse_time

    value = parse_time(stamp)
    assert value is not None
    return value


async def test_kueue_v1beta1_only_is_still_read(tmp_path: Path) -> None:
    async with emulated_cluster(kueue_version="v1beta1") as fc:
        fc.add_node(gpu_node("gpu-1"))
        run, spec = make_run(tmp_path, ("fft",))
        result = await _run(fc.backend(queue_name="kts"), run, spec.scenario("baseline-fft"))
        assert result.tenants[0].events["admitted"] is not None
        # the backend's requests only: the fake Kueue controller writes its Workloads (kmock's user agent) too
        versions = [r.url.path.split("/")[3] for r in list(fc.km.log)
                    if "workloads" in r.url.path and not r.headers.get("User-Agent", "").startswith("kmock/")]
        assert versions[0] == "v1beta2" and "v1beta1" in versions  # v1beta2 first, then the fallback


async def test_workload_not_admitted_fails_with_kueues_reason(cluster: FakeCluster, tmp_path: Path) -> None:
    """A missing LocalQueue: Kueue says so on the Workload; waiting would only reach the deadline.
    Fails when the backend does not read the Workload's conditions, or records an admission that is False."""
    cluster.add_node(gpu_node("gpu-1"))
    cluster.local_queues = {"kts"}
    run, spec = make_run(tmp_path)
    started = time.monotonic()
    with pytest.raises(TenantFailed, match=r"Kueue will not admit Workload job-kts-shared-.* \(queue 'typo'\): "
                                           r"Inadmissible: LocalQueue typo doesn't exist"):
        await _run(cluster.backend(queue_name="typo"), run, spec.scenario("shared"), timeout_s=600)
    assert time.monotonic() - started < 30  # not the 600 s deadline
    scen = run.manifest()["scenarios"]["shared"]
    assert scen["status"] == "failed"
    for ev in scen["tenants"].values():
        assert ev["admitted"] is None and "LocalQueue typo doesn't exist" in ev["admission_blocked"]
        assert ev["pod"] is None
    assert not cluster.live(JOBS)


async def test_a_queue_without_kueue_fails_at_once(tmp_path: Path) -> None:
    async with emulated_cluster(kueue_version=None) as fc:
        fc.add_node(gpu_node("gpu-1"))
        run, spec = make_run(tmp_path, ("fft",))
        with pytest.raises(TenantFailed, match=r"waits for Kueue \(queue 'kts'\) but the cluster serves no "
                                               r"kueue.x-k8s.io Workloads: is Kueue installed\?"):
            await _run(fc.backend(queue_name="kts"), run, spec.scenario("baseline-fft"), timeout_s=3000)
        assert not fc.live(JOBS)


async def test_a_workload_waiting_for_quota_is_reported_while_it_waits(cluster: FakeCluster, tmp_path: Path,
                                                                     capfd: pytest.CaptureFixture[str]) -> None:
    cluster.add_node(gpu_node("gpu-1"))
    cluster.kueue_hold = True
    run, spec = make_run(tmp_path, ("fft",))
    backend = cluster.backend(queue_name="kts", ready_timeout_s=18.0)
    with pytest.raises(TenantFailed, match=r"not every tenant was ready .* within 18 s .*queued \(Pending: "
                                           r"couldn't assign flavors"):
        await asyncio.to_thread(backend.run_scenario, run, spec.scenario("baseline-fft"), timeout_s=10.0,
                                progress=True)
    assert "queued (Pending: couldn't assign flavors to pod set main" in capfd.readouterr().err


# ------------------------------------------------------------------------------------------ Job failures

async def test_job_failed_backoff_limit_names_the_tenant_and_keeps_the_neighbours_log(cluster: FakeCluster,
                                                                                     tmp_path: Path) -> None:
    """gemm exits 1: the Job controller fails the Job (BackoffLimitExceeded) and deletes fft's pod."""
    cluster.add_node(gpu_node("gpu-1"))
    cluster.behaviour["gemm"] = "exit1"
    run, spec = make_run(tmp_path)
    with pytest.raises(TenantFailed) as err:
        await _run(cluster.backend(), run, spec.scenario("shared"))
    exc = err.value
    assert exc.tenant == "gemm" and exc.exit_code == 1
    assert "Error (exit code 1)" in str(exc) and str(exc).endswith("RuntimeError: CUDA error: out of memory")
    assert parse_bytes(run.log_path("shared", "fft").read_bytes()).n >= 3  # the streamed log outlived its pod
    scen = run.manifest()["scenarios"]["shared"]
    assert scen["status"] == "failed" and scen["failed_tenant"] == "gemm"
    assert not cluster.live(JOBS) and not cluster.live(PODS)


def test_the_barrier_is_not_released_to_pods_that_are_gone() -> None:
    """Every tenant said ready, then the Job failed (its deadline) and its controller deleted the pods before the
    next poll: no start is published (no KeyError from a missing pod), the watch goes on to read the Job's failure.
    Deterministic form of a race the deadline test below met once on a loaded CI machine."""
    from types import SimpleNamespace

    from kts_helpers.run.backends.kubernetes.lifecycle import ScenarioRun

    published = []
    sr = SimpleNamespace(
        tenants=["fft", "gemm"], holders={}, placeholders=0, live=SimpleNamespace(streams={}),
        barrier=SimpleNamespace(starts={}, ready={"fft": 1, "gemm": 1}, all_ready=lambda: True),
        release_barrier=lambda pods: published.append({t: pods[t] for t in ("fft", "gemm")}),
        replicas_proven=lambda: True)  # nodes readable: nothing to probe
    assert ScenarioRun.poll_barrier(sr, {"gemm": {"metadata": {"name": "gemm-pod"}}}) is False
    assert published == []
    pods = {t: {"metadata": {"name": f"{t}-pod"}} for t in ("fft", "gemm")}
    ScenarioRun.poll_barrier(sr, pods)
    assert published == [pods]  # with every pod there, the barrier is released


async def test_job_deadline_exceeded_is_read_from_the_job(cluster: FakeCluster, tmp_path: Path) -> None:
    """A policy caps activeDeadlineSeconds: the Job controller fails the Job (DeadlineExceeded) and deletes
    its pods. Fails when the backend ignores the Job's Failed/FailureTarget condition (it would wait for
    pods that are gone until its own, much later, deadline)."""
    cluster.add_node(gpu_node("gpu-1"))
    cluster.behaviour["fft"] = "hang"
    cluster.deadline_cap_s = 12
    run, spec = make_run(tmp_path)
    with pytest.raises(TenantFailed, match=r"tenant 'fft'.*Job kts-shared-\w+ failed \(DeadlineExceeded: Job was "
                                           r"active longer than specified deadline\)"):
        await _run(cluster.backend(), run, spec.scenario("shared"), timeout_s=3000)
    assert "job condition FailureTarget=True" in run.stderr_path("shared", "fft").read_text()
    assert not cluster.live(JOBS)


@pytest.mark.parametrize("error", [POD_SECURITY, QUOTA], ids=["pod-security", "quota"])
async def test_failed_create_is_reported_from_the_jobs_events(cluster: FakeCluster, tmp_path: Path, error: str) -> None:
    """The API refuses the pods (Pod Security, a ResourceQuota): the Job controller only leaves a
    FailedCreate event. Fails when the backend does not read it (it would wait for its deadline)."""
    cluster.add_node(gpu_node("gpu-1"))
    cluster.create_error = error
    run, spec = make_run(tmp_path)
    started = time.monotonic()
    with pytest.raises(TenantFailed) as err:
        await _run(cluster.backend(), run, spec.scenario("shared"), timeout_s=600)
    assert time.monotonic() - started < 30
    msg = str(err.value)
    assert "cannot create its pods: Error creating: pods" in msg
    assert ("violates PodSecurity" in msg) if error == POD_SECURITY else ("exceeded quota" in msg)
    assert "\n" not in msg
    assert not cluster.live(JOBS)


@pytest.mark.parametrize(("mode", "code", "needle"), [
    ("imagepull", None, "ImagePullBackOff"),
    ("oom", 137, "OOMKilled (exit code 137)"),
])
async def test_container_failures_stop_keep_logs_and_name_pod(cluster: FakeCluster, tmp_path: Path, mode: str,
                                                              code: int | None, needle: str) -> None:
    cluster.add_node(gpu_node("gpu-1"))
    cluster.behaviour["gemm"] = mode
    run, spec = make_run(tmp_path)
    with pytest.raises(TenantFailed) as err:
        await _run(cluster.backend(), run, spec.scenario("shared"))
    exc = err.value
    assert exc.tenant == "gemm" and exc.exit_code == code
    assert needle in str(exc) and f"pod {job_name(run.run_id, 'shared')}-1-" in str(exc)
    gemm_log = run.log_path("shared", "gemm").read_bytes()
    if mode == "imagepull":
        assert gemm_log == b"" and "can the node pull kts-worker:test" in str(exc)
    else:  # the lines the worker printed before it died are kept
        assert parse_bytes(gemm_log, source="gemm").n >= 3
    assert needle.split(" ")[0] in run.stderr_path("shared", "gemm").read_text()
    assert run.log_path("shared", "fft").exists()
    assert run.manifest()["scenarios"]["shared"]["status"] == "failed"
    assert not cluster.live(JOBS)


async def test_node_lost_mid_run_fails_with_the_nodes_condition(cluster: FakeCluster, tmp_path: Path) -> None:
    cluster.add_node(gpu_node("gpu-1"))
    cluster.behaviour["fft"] = "hang"
    run, spec = make_run(tmp_path)
    backend = cluster.backend()
    task = asyncio.create_task(_run(backend, run, spec.scenario("shared"), timeout_s=3000))
    while not any(p.get("status", {}).get("phase") == "Running" for p in cluster.live(PODS).values()):
        await asyncio.sleep(0.02)
    await cluster.lose_node("gpu-1")
    with pytest.raises(TenantFailed, match=r"node gpu-1 is not ready \(Ready=Unknown: NodeStatusUnknown: Kubelet "
                                           r"stopped posting node status.\) - lost mid-run"):
        await asyncio.wait_for(task, 60)
    assert run.manifest()["scenarios"]["shared"]["status"] == "failed"


async def test_pending_insufficient_gpu_stops_and_names_who_holds_the_replicas(cluster: FakeCluster,
                                                                               tmp_path: Path) -> None:
    """A tenant the scheduler leaves Pending for a GPU replica: the node's replicas are counted out (the scenario's
    pods bound there, what the kit can see, the rest) with the node's own labels; the time-slicing config is not
    blamed (issue 50: the node advertises enough replicas, or the kit would have refused it before submitting)."""
    cluster.add_node(gpu_node("gpu-1", allocatable=2, replicas=None, strategy=None))
    cluster.behaviour["gemm"] = "unschedulable"
    run, spec = make_run(tmp_path)
    with pytest.raises(TenantFailed) as err:
        await _run(cluster.backend(schedule_timeout_s=2.0), run, spec.scenario("shared"))
    msg = str(err.value)
    assert "'gemm'" in msg and "Insufficient nvidia.com/gpu" in msg
    assert "node gpu-1's 2 replica(s) of its GPU are held: 1 by this scenario's pods; 1 by pod(s) not visible" in msg
    assert "nvidia.com/gpu.replicas=unset" in msg and "time-slicing may not be configured" not in msg
    assert "\n" not in msg
    scen = run.manifest()["scenarios"]["shared"]
    assert scen["status"] == "failed" and scen["failed_tenant"] == "gemm"
    assert "condition PodScheduled=False" in run.stderr_path("shared", "gemm").read_text()
    assert run.log_path("shared", "gemm").read_bytes() == b""  # the file exists, empty: no container ran
    assert not cluster.live(JOBS) and not cluster.live(PODS)


async def test_too_few_gpu_slots_fails_before_creating_jobs(cluster: FakeCluster, tmp_path: Path) -> None:
    cluster.add_node(gpu_node("gpu-1", allocatable=1, replicas=1))
    run, spec = make_run(tmp_path)
    with pytest.raises(BackendError, match=r"needs 2 GPUs on one node.*nvidia.com/gpu.replicas=1.*time-slicing"):
        await _run(cluster.backend(), run, spec.scenario("shared"))
    assert not _jobs_created(cluster)


async def test_time_limit_stops_a_hanging_tenant(cluster: FakeCluster, tmp_path: Path) -> None:
    cluster.add_node(gpu_node("gpu-1"))
    cluster.behaviour["fft"] = "hang"
    run, spec = make_run(tmp_path, ("fft",))
    with pytest.raises(TenantFailed, match=r"did not finish within 18 s .*last state: running"):
        await _run(cluster.backend(), run, spec.scenario("baseline-fft"), timeout_s=10.0)
    assert parse_bytes(run.log_path("baseline-fft", "fft").read_bytes()).n >= 1  # partial log kept
    assert not cluster.live(JOBS)


# ------------------------------------------------------------------------------ co-running on one GPU

async def test_multi_gpu_node_needs_the_packed_allocation_policy(cluster: FakeCluster, tmp_path: Path) -> None:
    cluster.add_node(gpu_node("gpu-1", allocatable=8, extra_labels={"nvidia.com/gpu.count": "2"}))
    run, spec = make_run(tmp_path)
    with pytest.raises(BackendError, match=r"node gpu-1 has 2 physical GPUs.*'distributed'.*packed"):
        await _run(cluster.backend(), run, spec.scenario("shared"))
    assert not _jobs_created(cluster)
    result = await _run(cluster.backend(allocation_policy="packed"), run, spec.scenario("shared"))
    assert result.status == "complete"
    with pytest.raises(SpecError, match="allocation_policy"):
        cluster.backend(allocation_policy="spread")


async def test_sharing_strategy_none_is_refused_for_a_shared_scenario(cluster: FakeCluster, tmp_path: Path) -> None:
    cluster.add_node(gpu_node("gpu-1", allocatable=2, replicas=None, strategy="none"))
    run, spec = make_run(tmp_path)
    with pytest.raises(BackendError, match=r"sharing strategy 'none' every tenant gets a GPU of its own"):
        await _run(cluster.backend(), run, spec.scenario("shared"))
    assert not _jobs_created(cluster)
    assert (await _run(cluster.backend(), run, spec.scenario("baseline-fft"))).status == "complete"


async def test_tenants_on_different_gpu_uuids_fail_the_scenario(cluster: FakeCluster, tmp_path: Path) -> None:
    cluster.add_node(gpu_node("gpu-1"))
    cluster.behaviour["gemm"] = "othergpu"
    run, spec = make_run(tmp_path)
    with pytest.raises(TenantFailed, match=r"fft on GPU-fake-0, gemm on GPU-fake-1"):
        await _run(cluster.backend(), run, spec.scenario("shared"))
    rec = run.manifest()["scenarios"]["shared"]
    assert rec["status"] == "failed" and "GPU-fake-1" in rec["reason"]
    assert not cluster.live(JOBS)


async def test_padding_is_stopped_only_after_every_tenant_finished(cluster: FakeCluster, tmp_path: Path) -> None:
    """gemm finishes and pads; fft never finishes its timed iterations: no stop, and the pad limit fails it."""
    cluster.add_node(gpu_node("gpu-1"))
    cluster.behaviour["fft"] = "hang"
    run, spec = make_run(tmp_path)
    with pytest.raises(TenantFailed, match=r"tenant 'fft'.*padding went on for more than 0.5 s.*fft \(1 timed"):
        await _run(cluster.backend(), run, spec.scenario("shared"), timeout_s=3000.0, pad_limit_s=0.5)
    rec = run.manifest()["scenarios"]["shared"]
    assert rec["status"] == "failed" and "padding_stopped_ns" in rec
    log = parse_bytes(run.log_path("shared", "gemm").read_bytes()).frame
    assert (log["phase"] == "op").sum() == 3 and (log["phase"] == "pad").sum() >= 5
    assert not cluster.live(JOBS)


async def test_padders_keep_going_until_the_slow_tenant_is_done(cluster: FakeCluster, tmp_path: Path) -> None:
    """fft's iterations are 10x further apart: gemm, done long before, must pad past fft's last one."""
    from conftest import corunning_fractions

    cluster.add_node(gpu_node("gpu-1"))
    cluster.behaviour["fft"] = "slow"
    run, spec = make_run(tmp_path)
    assert (await _run(cluster.backend(), run, spec.scenario("shared"))).status == "complete"
    got = corunning_fractions(run.path)
    assert got["shared/fft"][:2] == (3, 3) and got["shared/gemm"][:2] == (3, 3)
    assert got["shared/gemm"][2] > 20  # its padding ran on to cover the slow tenant's last iteration


async def test_baseline_does_not_pad_and_completes_by_itself(cluster: FakeCluster, tmp_path: Path) -> None:
    cluster.add_node(gpu_node("gpu-1"))
    run, spec = make_run(tmp_path)
    await _run(cluster.backend(), run, spec.scenario("baseline-fft"))
    (job,) = _jobs_created(cluster)
    assert _env(job)["KTS_PAD"] == "0" and float(_env(job)["KTS_LEAD_IN_S"]) > 0
    assert job["spec"]["completions"] == 1 and _hold_jobs(cluster)[0]["spec"]["completions"] == 3  # alone on the GPU
    rec = run.manifest()["scenarios"]["baseline-fft"]
    assert "padding_stopped_ns" not in rec and rec["tenants"]["fft"]["outcome"] == "complete"
    assert cluster.requests("delete", JOBS)  # cleaned up after it completed


# ------------------------------------------------------------------------------ the barrier and the clocks

async def test_a_late_worker_fails_the_scenario_from_its_own_loop_start(cluster: FakeCluster,
                                                                       tmp_path: Path) -> None:
    """The go reaches gemm 3 s after its start (a slow kubelet): its live log shows it (a ready line past its
    start, or its loop start), and tenants that did not start together are no co-run: the scenario fails.
    Fails when the missed-barrier flag is not computed, or only warned about."""
    cluster.add_node(gpu_node("gpu-1"))
    cluster.behaviour["gemm"] = "late"
    run, spec = make_run(tmp_path)
    with pytest.raises(TenantFailed, match=r"tenant 'gemm' .* began its timed loop [0-3]\.\d\d s after its start "
                                           r"\(seen live\).*did not start together"):
        await _run(cluster.backend(), run, spec.scenario("shared"))
    scen = run.manifest()["scenarios"]["shared"]
    assert scen["status"] == "failed" and scen["failed_tenant"] == "gemm"
    fft, gemm = scen["tenants"]["fft"], scen["tenants"]["gemm"]
    assert gemm["missed_start_barrier"] is True and 0.1 < gemm["late_start_s"] <= 3.01
    assert fft["missed_start_barrier"] is False
    waits = layered_waits(run.read()).set_index("tenant")
    assert waits.loc["gemm", "late_start_s"] == pytest.approx(gemm["late_start_s"])



async def test_the_barrier_holds_through_long_pulls_and_independent_clocks(cluster: FakeCluster,
                                                                          tmp_path: Path) -> None:
    """Image pulls of 60-300 s, a client clock 40 s behind the API server's, a node 7 s ahead of it: the
    start is chosen once every tenant is ready, on the client's clock, and given to each pod on its own.
    Fails with a start fixed at submission (the tenants miss it), or with one taken from a single clock."""
    cluster.add_node(gpu_node("gpu-1"))
    cluster.pull_s_of.update({"fft": 60.0, "gemm": 300.0})
    cluster.node_skew_s["gpu-1"] = 7.0
    backend = cluster.backend(clock=SkewedClock(cluster.clock, -40.0))
    run, spec = make_run(tmp_path)
    assert (await _run(backend, run, spec.scenario("shared"), timeout_s=120.0)).status == "complete"
    scen = run.manifest()["scenarios"]["shared"]
    barrier = scen["barrier"]
    assert barrier["clock"] == "client" and barrier["start_delay_s"] == 8.0
    for tenant in ("fft", "gemm"):
        rec, ev = barrier["tenants"][tenant], scen["tenants"][tenant]
        # the pod's clock is 47 s ahead of the client's (the log's delivery delay makes it read a little low)
        assert 45.0 <= rec["clock_offset_s"] <= 47.0
        assert ev["missed_start_barrier"] is False and ev["worker"]["start_at_ns"] == rec["start_at_ns"]
        assert abs(rec["start_at_ns"] - barrier["go_ns"] - barrier["node_clock_offset_s"] * 1e9) < 1e6
    starts = [barrier["tenants"][t]["start_at_ns"] for t in ("fft", "gemm")]
    assert starts[0] == starts[1]  # one node, one clock, one instant
    assert "warnings" not in scen


async def test_clock_skew_between_node_and_api_server_is_reported_not_hidden(cluster: FakeCluster,
                                                                             tmp_path: Path) -> None:
    cluster.add_node(gpu_node("gpu-1"))
    cluster.node_skew_s["gpu-1"] = -6.0  # the node's clock is 6 s behind the API server's
    run, spec = make_run(tmp_path, ("fft",))
    assert (await _run(cluster.backend(start_delay_s=2.0), run, spec.scenario("baseline-fft"))).status == "complete"
    row = layered_waits(run.read()).iloc[0]
    assert row.placement_wait_s == 1  # both ends on the API server's clock: unaffected
    assert pd.isna(row.startup_s)  # not clamped to 0
    assert row.clock_skew.startswith("barrier reached on node gpu-1 (the worker)'s clock reads ")
    assert "before scheduled on the API server's clock" in row.clock_skew
    assert row.barrier_wait_s >= 0 and row.timed_loop_s > 0  # one clock: still fine


# ------------------------------------------------------------------------------------------ the watch

async def test_the_watch_wakes_the_loop(cluster: FakeCluster, tmp_path: Path) -> None:
    """With a 30 s poll interval only the pod watch can move the loop on in time. Fails without the watch."""
    cluster.add_node(gpu_node("gpu-1"))
    run, spec = make_run(tmp_path, ("fft",))
    started = time.monotonic()
    assert (await _run(cluster.backend(poll_s=30.0), run, spec.scenario("baseline-fft"))).status == "complete"
    assert time.monotonic() - started < 20
    assert len([r for r in list(cluster.km.log) if r.action == kmock.action.WATCH]) >= 2


async def test_a_dropped_watch_stream_is_opened_again(cluster: FakeCluster, tmp_path: Path) -> None:
    cluster.add_node(gpu_node("gpu-1"))
    cluster.km.drop_watches = 3
    run, spec = make_run(tmp_path)
    started = time.monotonic()
    assert (await _run(cluster.backend(poll_s=30.0), run, spec.scenario("shared"))).status == "complete"
    assert time.monotonic() - started < 30
    assert cluster.km.watches_dropped == 3
    assert len([r for r in list(cluster.km.log) if r.action == kmock.action.WATCH]) >= 4  # resumed after each drop
    for tenant in ("fft", "gemm"):
        assert parse_bytes(run.log_path("shared", tenant).read_bytes()).n >= 6


# ------------------------------------------------------------------------------ other clients and users

async def test_a_foreign_job_on_the_node_is_waited_for_and_never_touched(cluster: FakeCluster, tmp_path: Path) -> None:
    """Another kts run (its client died, its Lease expired) still has a GPU pod on gpu-1: wait, never delete."""
    cluster.add_node(gpu_node("gpu-1"))
    theirs = {MANAGED_BY: "kts", "kts.run-id": "their-run", "kts.scenario": "shared"}
    await cluster.add_running_job("kts-theirs", theirs, "gpu-1", run_for_s=12)
    while not any(p.get("status", {}).get("phase") == "Running" for p in cluster.live(PODS).values()):
        await asyncio.sleep(0.02)
    run, spec = make_run(tmp_path, ("fft",))
    backend = cluster.backend()
    info = await asyncio.to_thread(backend.describe)
    assert [p.split(" ")[0] for p in info["other_gpu_pods"]] and "kts run their-run" in info["other_gpu_pods"][0]
    assert (await _run(backend, run, spec.scenario("baseline-fft"))).status == "complete"
    assert cluster.max_runs_per_node == 1  # never two runs' pods on the node at once
    assert "kts-theirs" not in {r.name for r in cluster.requests("delete", JOBS)}
    assert not [r for r in cluster.requests("delete", PODS) if r.name.startswith("kts-theirs")]
    rec = run.manifest()["scenarios"]["baseline-fft"]
    assert rec["lease"]["waited_for_node_s"] >= 5


async def test_a_gpu_pod_of_another_namespace_is_a_neighbour_too(cluster: FakeCluster, tmp_path: Path) -> None:
    """Another team's GPU pod in namespace ml-team runs on gpu-1 (a CPU-only pod there does not count): the
    scenario waits for it, by a cluster-scoped read of the node's pods (the opt-in ``cluster_pod_list``).
    Fails with a read of the kit's namespace only (the Role's), which never sees it; without the opt-in the
    placeholders keep it off the GPU instead (tests/test_k8s_guard.py)."""
    cluster.add_node(gpu_node("gpu-1"))
    cluster.add_node(gpu_node("gpu-2"))
    await cluster.add_foreign_pod("ml-team", "trainer-0", "gpu-1", run_for_s=12)
    await cluster.add_foreign_pod("ml-team", "trainer-elsewhere", "gpu-2", run_for_s=None)
    await cluster.add_foreign_pod("web", "frontend", "gpu-1", run_for_s=None, gpu=False)
    run, spec = make_run(tmp_path, ("fft",))
    assert (await asyncio.to_thread(cluster.backend(node_name="gpu-1").describe))["other_gpu_pods"] == []
    backend = cluster.backend(node_name="gpu-1", cluster_pod_list=True)
    info = await asyncio.to_thread(backend.describe)
    assert info["other_gpu_pods"] == ["ml-team/trainer-0 (no Job, not a kts pod)"]
    assert (await _run(backend, run, spec.scenario("baseline-fft"))).status == "complete"
    assert run.manifest()["scenarios"]["baseline-fft"]["lease"]["waited_for_node_s"] >= 5
    lists = [r for r in cluster.requests("get", PODS) if r.namespace is None]
    assert lists and all(r.params.get("fieldSelector") == "spec.nodeName=gpu-1" for r in lists)
    assert not [r for r in cluster.requests("delete", PODS) if r.namespace != NS]  # theirs never touched


async def test_a_gpu_pod_that_never_ends_fails_clearly_and_is_left_alone(cluster: FakeCluster, tmp_path: Path) -> None:
    cluster.add_node(gpu_node("gpu-1"))
    await cluster.add_running_job("training", {"app": "someone-elses"}, "gpu-1", run_for_s=None)
    while not any(p.get("status", {}).get("phase") == "Running" for p in cluster.live(PODS).values()):
        await asyncio.sleep(0.02)
    run, spec = make_run(tmp_path, ("fft",))
    with pytest.raises(NodeBusy, match=r"node gpu-1 still runs GPU pods that are not this run's after \d+ s: "
                                       r"kts/training-0-\w+ \(Job training, not a kts pod\); kts never deletes"):
        await _run(cluster.backend(lease_wait_s=5.0), run, spec.scenario("baseline-fft"))
    assert not _jobs_created(cluster)[1:]  # only the foreign Job was ever created
    assert "training" in cluster.live(JOBS) and not cluster.requests("delete", JOBS)
    assert not cluster.live(LEASES)  # our Lease was given back


async def test_a_lease_held_by_another_client_keeps_this_one_off_the_node(cluster: FakeCluster, tmp_path: Path) -> None:
    cluster.add_node(gpu_node("gpu-1"))
    await cluster.put_lease("gpu-1", "kts@their-laptop/4242/abc", renewed_ago_s=0, duration_s=3600)
    run, spec = make_run(tmp_path, ("fft",))
    with pytest.raises(NodeBusy, match=r"node gpu-1 is in use by another kts client: held by "
                                       r"kts@their-laptop/4242/abc \(run theirs\), unchanged for \d+ s as this client saw it, lease 3600 s "
                                       r"\(Lease kts/kts-node-gpu-1\); waited \d+ s"):
        await _run(cluster.backend(lease_wait_s=4.0), run, spec.scenario("baseline-fft"))
    assert not _jobs_created(cluster)
    lease = cluster.live(LEASES)[lease_name("gpu-1")]
    assert lease["spec"]["holderIdentity"] == "kts@their-laptop/4242/abc"  # untouched


async def test_a_stale_lease_expires_and_is_taken_over(cluster: FakeCluster, tmp_path: Path) -> None:
    """A holder that died: its record stays unchanged, and after one lease duration watched on this
    client's own clock (client-go's way) the Lease is taken over."""
    cluster.add_node(gpu_node("gpu-1"))
    await cluster.put_lease("gpu-1", "kts@crashed/1/dead", renewed_ago_s=120, duration_s=30)
    run, spec = make_run(tmp_path, ("fft",))
    backend = cluster.backend(lease_wait_s=120.0)
    assert (await _run(backend, run, spec.scenario("baseline-fft"))).status == "complete"
    assert run.manifest()["scenarios"]["baseline-fft"]["lease"]["waited_for_node_s"] >= 30
    (takeover, *renewals) = [r.data for r in cluster.requests("put", LEASES)]
    assert takeover["spec"]["holderIdentity"] == backend.identity and takeover["spec"]["leaseTransitions"] == 1
    assert not cluster.live(LEASES)  # released at the end


async def test_a_live_lease_is_kept_whatever_the_clocks_say(cluster: FakeCluster, tmp_path: Path) -> None:
    """Another client holds gpu-1's Lease and renews it every 5 s; this client's clock runs 2 minutes ahead
    (its renewTime looks 120 s old). Fails when expiry is judged from renewTime against the local clock."""
    cluster.add_node(gpu_node("gpu-1"))
    await cluster.put_lease("gpu-1", "kts@their-laptop/4242/abc", renewed_ago_s=0, duration_s=30)
    backend = cluster.backend(clock=SkewedClock(cluster.clock, 120.0), lease_wait_s=60.0)
    run, spec = make_run(tmp_path, ("fft",))

    async def holder() -> None:
        while True:
            await cluster.renew_lease("gpu-1")
            await asyncio.sleep(5 * cluster.tick_s)

    renewing = asyncio.create_task(holder())
    try:
        with pytest.raises(NodeBusy, match=r"held by kts@their-laptop/4242/abc"):
            await _run(backend, run, spec.scenario("baseline-fft"))
    finally:
        renewing.cancel()
    assert cluster.live(LEASES)[lease_name("gpu-1")]["spec"]["holderIdentity"] == "kts@their-laptop/4242/abc"
    assert not _jobs_created(cluster)


def test_time_parsing_never_fails_open() -> None:
    """Go's RFC 3339 with nine fraction digits, offsets, no 'Z' support in old Pythons: parsed by hand;
    junk is None (unknown), which no caller takes for "long ago"."""
    from kts_helpers.run.backends.kubernetes.clock import parse_time

    assert parse_time("2025-01-01T12:00:00.123456789Z") == pytest.approx(1735732800.123456789)
    assert parse_time("2025-01-01T13:00:00+01:00") == 1735732800.0
    assert parse_time("2025-01-01T12:00:00Z") == 1735732800.0
    assert parse_time("2025-01-01t12:00:00.5z") == 1735732800.5  # RFC 3339 allows lower case
    assert parse_time("yesterday") is None and parse_time("2025-13-01T12:00:00Z") is None and parse_time(None) is None


async def test_the_lease_is_renewed_while_a_long_scenario_runs(cluster: FakeCluster, tmp_path: Path) -> None:
    cluster.add_node(gpu_node("gpu-1"))
    cluster.behaviour["fft"] = "slow"
    run, spec = make_run(tmp_path)
    backend = cluster.backend(lease_duration_s=3)
    assert (await _run(backend, run, spec.scenario("shared"))).status == "complete"
    renewals = [r.data for r in cluster.requests("put", LEASES)]
    assert len(renewals) >= 2 and {r["spec"]["holderIdentity"] for r in renewals} == {backend.identity}
    times = [_epoch(r["spec"]["renewTime"]) for r in renewals]
    assert times == sorted(times) and times[-1] > times[0]


async def test_a_lease_taken_over_mid_run_fails_the_scenario(cluster: FakeCluster, tmp_path: Path) -> None:
    """Another client overwrote the node's Lease: stop at once (fft would hang until the deadline)."""
    cluster.add_node(gpu_node("gpu-1"))
    cluster.behaviour["fft"] = "hang"
    run, spec = make_run(tmp_path)
    backend = cluster.backend(lease_duration_s=3)
    started = time.monotonic()
    task = asyncio.create_task(_run(backend, run, spec.scenario("shared"), timeout_s=3000))
    while not any(p.get("status", {}).get("phase") == "Running" for p in cluster.live(PODS).values()):
        await asyncio.sleep(0.02)
    # take it over as another client would: a write based on a resourceVersion that a renewal made stale
    # in the meantime is refused (409), so try again until the takeover is stored
    for _ in range(100):
        lease = cluster.live(LEASES)[lease_name("gpu-1")]
        if lease["spec"]["holderIdentity"] == "kts@impatient/7/xyz":
            break
        await cluster._http("put", f"/apis/coordination.k8s.io/v1/namespaces/{NS}/leases/{lease_name('gpu-1')}",
                            {**lease, "spec": {**lease["spec"], "holderIdentity": "kts@impatient/7/xyz"}})
    with pytest.raises(TenantFailed, match=r"taken over by kts@impatient/7/xyz while this client measured"):
        await asyncio.wait_for(task, 60)
    assert time.monotonic() - started < 20
    assert not cluster.live(JOBS)


# ------------------------------------------------------------------------------------------ clean-up

async def test_cleanup_touches_only_this_runs_objects_or_old_kit_objects(cluster: FakeCluster, tmp_path: Path) -> None:
    cluster.add_node(gpu_node("gpu-1"))
    kts = {MANAGED_BY: "kts", "kts.run-id": "old-run", "kts.scenario": "shared"}
    cluster.add_job("kts-old", kts, {"kts/run-id": "old-run"}, age_s=3 * 86400)
    cluster.add_job("kts-recent", dict(kts, **{"kts.run-id": "other"}), {"kts/run-id": "other"}, age_s=600)
    cluster.add_job("helm-job", {MANAGED_BY: "helm", "kts.run-id": "old-run"}, age_s=3 * 86400)
    cluster.add_job("plain-job", {"app": "web"}, age_s=3 * 86400)
    backend = cluster.backend()
    run, spec = make_run(tmp_path, ("fft",))
    await _run(backend, run, spec.scenario("baseline-fft"))
    assert {"kts-old", "kts-recent", "helm-job", "plain-job"} <= set(cluster.live(JOBS))  # a run touches its own only
    assert await asyncio.to_thread(backend.cleanup, "some-other-run") == []
    assert await asyncio.to_thread(backend.cleanup, "old-run") == ["kts-old"]
    cluster.add_job("kts-old", kts, {"kts/run-id": "old-run"}, age_s=3 * 86400)
    assert await asyncio.to_thread(backend.cleanup_older_than, 86400) == ["kts-old"]
    assert set(cluster.live(JOBS)) == {"kts-recent", "helm-job", "plain-job"}
    with pytest.raises(SpecError, match="needs a run id"):
        await asyncio.to_thread(backend.cleanup, "")


async def test_interrupt_cleans_up_and_records(cluster: FakeCluster, tmp_path: Path) -> None:
    cluster.add_node(gpu_node("gpu-1"))
    cluster.behaviour["fft"] = "hang"
    backend = cluster.backend()
    real = backend.api.list_pods
    calls = {"n": 0}

    def list_pods(*args: Any, **kwargs: Any) -> list[dict[str, Any]]:
        calls["n"] += 1
        if calls["n"] == 8:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    backend.api.list_pods = list_pods  # type: ignore[method-assign]
    run, spec = make_run(tmp_path, ("fft",))
    with pytest.raises(KeyboardInterrupt):
        await _run(backend, run, spec.scenario("baseline-fft"))
    scen = run.manifest()["scenarios"]["baseline-fft"]
    assert scen["status"] == "failed" and scen["reason"] == "interrupted (KeyboardInterrupt)"
    assert run.stderr_path("baseline-fft", "fft").exists()
    assert not cluster.live(JOBS) and not cluster.live(LEASES)


# ------------------------------------------------------------------------------------------ RBAC

async def test_rbac_forbidden_names_verb_and_resource(cluster: FakeCluster, tmp_path: Path) -> None:
    cluster.add_node(gpu_node("gpu-1"))
    cluster.km["post", f"/apis/batch/v1/namespaces/{NS}/jobs"] << kmock.KubernetesError(
        403, "Forbidden", 'jobs.batch is forbidden: User "system:serviceaccount:kts:kts-runner" cannot create '
                          'resource "jobs" in API group "batch" in the namespace "kts"')
    run, spec = make_run(tmp_path, ("fft",))
    with pytest.raises(KubeForbidden) as err:
        await _run(cluster.backend(), run, spec.scenario("baseline-fft"))
    assert (err.value.verb, err.value.resource) == ("create", "jobs.batch")
    assert "forbids 'create' on 'jobs.batch' in namespace 'kts'" in str(err.value)
    assert run.manifest()["scenarios"]["baseline-fft"]["status"] == "failed"


async def test_rbac_forbidden_on_nodes(cluster: FakeCluster) -> None:
    cluster.km["get", "/api/v1/nodes"] << kmock.KubernetesError(403, "Forbidden", "nodes is forbidden")
    with pytest.raises(BackendError, match=r"not read nodes \(no ClusterRole kts-node-reader\): pass node_name"):
        await asyncio.to_thread(cluster.backend().describe)


# ------------------------------------------------------------------------------------------ config errors

async def test_unreachable_api_names_context(tmp_path: Path, closed_port: str) -> None:
    server = closed_port.rsplit("/", 1)[0]
    cfg = kubeconfig_file(tmp_path / "kubeconfig", server)
    backend = KubernetesBackend(kubeconfig=cfg)
    backend.api.api_client.configuration.retries = 0
    with pytest.raises(BackendError, match=rf"cannot reach the Kubernetes API at {re.escape(server)} "
                                           r"\(context 'lab'\)"):
        backend.describe()
    with pytest.raises(BackendError, match=r"context 'prod' is not in kubeconfig .*; it has: lab"):
        KubernetesBackend(kubeconfig=cfg, context="prod")


def test_missing_kubeconfig_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "nope"))
    with pytest.raises(BackendError, match=r"no kubeconfig found at .*nope \(context 'lab'\)"):
        KubernetesBackend(context="lab")
    bad = tmp_path / "bad"
    bad.write_text("apiVersion: v1\nkind: Config\ncontexts: []\n")
    with pytest.raises(BackendError, match=r"cannot load context '\(current\)' from kubeconfig .*bad"):
        KubernetesBackend(kubeconfig=bad)


def test_bad_arguments_fail_fast() -> None:
    with pytest.raises(SpecError, match="namespace"):
        KubernetesBackend(namespace="Bad_NS", api_client=object())
    with pytest.raises(SpecError, match="gpu_resource"):
        KubernetesBackend(gpu_resource="amd.com/gpu", api_client=object())
    with pytest.raises(SpecError, match="lease_duration_s"):
        KubernetesBackend(lease_duration_s=1, api_client=object())
    with pytest.raises(SpecError, match="only k=v"):
        parse_selector("zone in (a,b)")
    assert parse_selector("a=b, c, !d") == {"a": "b", "c": None, "d": "!"}


def test_label_values_and_names_are_sanitised() -> None:
    for raw in ("shared-fft+gemm", "x" * 80, "20250101T000000Z-article-lab run-ab12", "-lead", ""):
        value = label_value(raw)
        assert LABEL_RE.match(value) and len(value) <= 63
    assert label_value("shared") == "shared"
    assert label_value("a+b") != label_value("a-b")  # sanitising never merges distinct values
    names = {job_name("r" * 70, s) for s in ("shared-all+" * 5, "shared-fft+gemm", "baseline-llm")}
    assert len(names) == 3
    # the pods' hostname is <job>-<index>: it must stay a DNS label
    assert all(DNS_RE.match(n) and len(f"{n}-15") <= 63 for n in names)
    for node in ("gpu-1", "ip-10-0-0-1.ec2.internal", "n" * 250):
        assert len(lease_name(node)) <= 63 and lease_name(node).startswith("kts-node-")
    assert lease_name("a.b") != lease_name("a-b")


def test_layered_waits_skips_other_backends(tmp_path: Path) -> None:
    run, _ = make_run(tmp_path)
    run.record_scenario("baseline-fft", {"status": "complete", "backend": "local", "tenants": {}})
    frame = layered_waits(run.read())
    assert frame.empty
    assert list(frame.columns)[:7] == ["scenario", "tenant", "admission_wait_s", "placement_wait_s", "startup_s",
                                       "barrier_wait_s", "timed_loop_s"]
