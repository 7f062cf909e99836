"""The Kubernetes backend on a cluster as it really behaves (issue 21), on the emulator: the node chosen for
the measurement and kept for the whole experiment, pinned by its name, whatever its hostname label says."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from k8s_fixtures import FakeCluster, emulated_cluster, gpu_node, make_run, run_scenario

from kts_helpers.errors import BackendError, TenantFailed
from kts_helpers.run.backends.kubernetes.jobs import pinned_node
from kts_helpers.run.experiment import run_kind

pytestmark = pytest.mark.timeout(120)
JOBS = "batch/v1/jobs"


@pytest.fixture
async def cluster() -> Any:
    async with emulated_cluster() as fc:
        yield fc


async def _run(backend: Any, run: Any, scenario: Any, timeout_s: float = 60.0) -> Any:
    return await run_scenario(backend, run, scenario, timeout_s)


def _pinned(fc: FakeCluster) -> list[str | None]:
    return [pinned_node(r.data["spec"]["template"]["spec"]) for r in fc.requests("post", JOBS)
            if not r.data["metadata"]["name"].endswith("-hold")]  # the placeholders' Job is pinned the same way


# ------------------------------------------------------------------------------------------ the node's name

async def test_pods_are_pinned_by_node_name_not_hostname_label(cluster: FakeCluster, tmp_path: Path) -> None:
    """The node is gpu-1.example.internal, its hostname label gpu-1 (--hostname-override): pinned by
    metadata.name the pods land there. Fails with a kubernetes.io/hostname selector (they stay Pending)."""
    cluster.add_node(gpu_node("gpu-1.example.internal", hostname="gpu-1"))
    run, spec = make_run(tmp_path)
    backend = cluster.backend(node_name="gpu-1.example.internal")
    assert (await _run(backend, run, spec.scenario("shared"))).status == "complete"
    assert _pinned(cluster) == ["gpu-1.example.internal"]
    assert run.manifest()["scenarios"]["shared"]["node"] == "gpu-1.example.internal"


# ------------------------------------------------------------------------------------------ the node's choice

async def test_a_mixed_cluster_measures_on_a_one_gpu_node_for_the_whole_experiment(cluster: FakeCluster,
                                                                                   tmp_path: Path) -> None:
    """An 8-GPU node advertises 32 replicas, a 1-GPU node 4: the experiment takes the 1-GPU node (every
    replica is that GPU) and keeps it for every scenario, even when a better 1-GPU node turns up midway.
    Fails when the node with the most replicas is preferred (the shared scenario is then refused), or
    when each scenario chooses again (baseline and shared on different hardware)."""
    cluster.add_node(gpu_node("gpu-big", allocatable=32, count=8))
    cluster.add_node(gpu_node("gpu-small", allocatable=4, count=1))
    run, _spec = make_run(tmp_path)
    backend = cluster.backend()
    await asyncio.to_thread(run_kind, run, "baseline", progress=False, backend=backend)
    cluster.add_node(gpu_node("gpu-small-2", allocatable=8, replicas=8, count=1))  # would rank first now
    await asyncio.to_thread(run_kind, run, "shared", progress=False, backend=backend)
    nodes = {name: rec["node"] for name, rec in run.manifest()["scenarios"].items()}
    assert nodes == {"baseline-fft": "gpu-small", "baseline-gemm": "gpu-small", "shared": "gpu-small"}
    assert set(_pinned(cluster)) == {"gpu-small"}


async def test_packed_counts_only_where_the_device_plugin_knows_it(cluster: FakeCluster, tmp_path: Path) -> None:
    """Two 8-GPU nodes, allocation_policy='packed': the plugin's version comes from its DaemonSet pod's
    image. v0.17.0 predates sharedDevicesAllocationPolicy (it would spread the replicas): that node ranks
    last and is refused for a shared scenario; v0.20.0's node is taken. Fails without the version check."""
    cluster.add_node(gpu_node("gpu-a", allocatable=32, count=8))
    cluster.add_node(gpu_node("gpu-b", allocatable=16, count=8))
    await cluster.add_device_plugin("gpu-a", "v0.17.0")
    await cluster.add_device_plugin("gpu-b", "v0.20.0-ubi9")
    backend = cluster.backend(allocation_policy="packed", cluster_pod_list=True)  # sees the plugin's pod
    nodes = await asyncio.to_thread(backend.gpu_nodes)
    assert [(n.name, n.plugin_version) for n in nodes] == [("gpu-b", "0.20.0"), ("gpu-a", "0.17.0")]
    run, spec = make_run(tmp_path)
    assert (await _run(backend, run, spec.scenario("shared"))).status == "complete"
    assert run.manifest()["scenarios"]["shared"]["device_plugin"] == "0.20.0"
    old, ospec = make_run(tmp_path / "old")
    with pytest.raises(BackendError, match=r"node gpu-a has 8 physical GPUs and runs device plugin v0\.17\.0, "
                                           r"which predates sharedDevicesAllocationPolicy \(v0\.20\.0\)"):
        await _run(cluster.backend(allocation_policy="packed", node_name="gpu-a", cluster_pod_list=True), old,
                   ospec.scenario("shared"))


async def test_a_tenant_without_a_gpu_uuid_fails_the_same_gpu_check(cluster: FakeCluster, tmp_path: Path) -> None:
    """gemm prints no gpu_uuid: nothing shows it shared fft's GPU, so the shared scenario fails; so does one
    where no tenant prints one. Fails when a silent tenant is skipped."""
    cluster.add_node(gpu_node("gpu-1"))
    cluster.behaviour["gemm"] = "nouuid"
    run, spec = make_run(tmp_path)
    with pytest.raises(TenantFailed, match=r"tenant gemm reported no GPU UUID"):
        await _run(cluster.backend(), run, spec.scenario("shared"))
    assert run.manifest()["scenarios"]["shared"]["status"] == "failed"
    cluster.behaviour["fft"] = "nouuid"  # neither says: on a GPU backend that proves nothing either
    both, bspec = make_run(tmp_path / "both")
    with pytest.raises(TenantFailed, match=r"tenant fft reported no GPU UUID"):
        await _run(cluster.backend(), both, bspec.scenario("shared"))


# ------------------------------------------------------------------------------------------ Kueue's answers

async def test_a_gang_over_the_queues_capacity_fails_fast_with_kueues_message(cluster: FakeCluster,
                                                                             tmp_path: Path) -> None:
    """The LocalQueue's whole quota is one GPU, the tenants' gang needs two (the placeholders are a gang of their own):
    Kueue v0.19 says reason Pending
    with "... > maximum capacity (1)", which no waiting changes. The kit fails at once with that message and
    gives the node's Lease back. Fails when only Inadmissible/Misconfigured/Suspended count (it waits out
    ready_timeout_s holding the Lease)."""
    cluster.add_node(gpu_node("gpu-1"))
    cluster.kueue_capacity = 1
    run, spec = make_run(tmp_path)
    backend = cluster.backend(queue_name="kts", ready_timeout_s=600.0)
    t0 = cluster.clock.t
    with pytest.raises(TenantFailed, match=r"Kueue will not admit Workload .*: Pending: couldn't assign flavors to "
                                           r"pod set main: .*request \(2\) > maximum capacity \(1\)"):
        await _run(backend, run, spec.scenario("shared"))
    assert cluster.clock.t - t0 < 60  # not the 600 s of ready_timeout_s
    assert not cluster.live("coordination.k8s.io/v1/leases") and not cluster.live(JOBS)


async def test_a_preemption_is_named_and_never_mixes_two_admissions(cluster: FakeCluster, tmp_path: Path) -> None:
    """Kueue preempts the running shared Job: its pods exit 143, the Job is suspended and would be admitted
    again with new pods. The kit names the eviction (not "Error (exit code 143)"), stops there and keeps
    the logs of the one admission. Fails without the eviction check."""
    cluster.add_node(gpu_node("gpu-1"))
    cluster.log_iterations = 40
    run, spec = make_run(tmp_path)
    backend = cluster.backend(queue_name="kts")
    task = asyncio.create_task(_run(backend, run, spec.scenario("shared"), timeout_s=120.0))
    while not (cluster.workers and all(w.timed_lines() >= 2 for w in cluster.workers.values())
               and len(cluster.workers) == 2):
        assert not task.done(), task.result()
        await asyncio.sleep(0.01)
    (job,) = [j for j in cluster.live(JOBS) if not j.endswith("-hold")]
    await cluster.preempt(job)
    with pytest.raises(TenantFailed, match=r"evicted by Kueue \(Preempted: Preempted to accommodate a workload.*; "
                                           r"preempted InClusterQueue.*the scenario must run again"):
        await task
    rec = run.manifest()["scenarios"]["shared"]
    assert rec["status"] == "failed" and "exit code 143" not in rec["reason"]
    created = [r.data["metadata"]["name"] for r in cluster.requests("post", "v1/pods")]
    assert len(created) == 4  # one admission's pods only (2 tenants, 2 placeholders): not run again
    for tenant in ("fft", "gemm"):
        lines = [ln for ln in run.log_path("shared", tenant).read_text().splitlines() if ln.startswith("KTS_META")]
        assert len(lines) == 1


# ------------------------------------------------------------------------------------------ log rotation

async def test_a_log_rotated_by_the_kubelet_is_followed_without_losing_lines(cluster: FakeCluster,
                                                                           tmp_path: Path) -> None:
    """The kubelet rotates fft's log mid-run and the followed stream drops: a new connection starts at the
    new file, whose first bytes the client already holds. Every line lands in the run once, in order.
    Fails when a reconnection skips as many bytes as are held (lines after the rotation are lost)."""
    cluster.add_node(gpu_node("gpu-1"))
    cluster.log_iterations = 30
    cluster.behaviour["fft"] = "rotate"
    run, spec = make_run(tmp_path)
    assert (await _run(cluster.backend(), run, spec.scenario("shared"))).status == "complete"
    (pod,) = cluster.rotated  # it did rotate
    assert run.log_path("shared", "fft").read_bytes() == cluster.logs[pod]


def test_a_stale_workload_of_a_replaced_job_is_never_taken_for_the_new_ones() -> None:
    """A Workload left by an earlier Job of the same name (uid old) says Inadmissible; the new Job (uid new)
    has none yet. Fails with the name-only fallback, which would fail the new Job on the old answer."""
    from kts_helpers.run.backends.kubernetes.state import workload_of

    job = {"metadata": {"name": "kts-shared-ab12cd", "uid": "new"}}
    stale = {"metadata": {"name": "job-kts-shared-ab12cd-old", "ownerReferences": [
        {"kind": "Job", "name": "kts-shared-ab12cd", "uid": "old"}]}}
    fresh = {"metadata": {"name": "job-kts-shared-ab12cd-new", "ownerReferences": [
        {"kind": "Job", "name": "kts-shared-ab12cd", "uid": "new"}]}}
    assert workload_of(job, [stale]) is None
    assert workload_of(job, [stale, fresh]) == fresh
    assert workload_of({"metadata": {"name": "kts-shared-ab12cd"}}, [stale]) == stale  # no uid known: by name
