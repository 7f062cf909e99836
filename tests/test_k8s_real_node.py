"""Kubernetes that survives a real GPU node (issue 50), against the emulated cluster (tests/k8s_fixtures).

* the placeholders are watched as closely as the tenants: a placeholder-side failure (Kueue admitting the tenants'
  Workload and not theirs, a ResourceQuota refusing their pods, a placeholder preempted during the tenants' image
  pull) ends the run within a minute of the fake clock, naming the placeholders and the cause;
* signals as a kubelet sends them: a tenant preempted or drained while it pads fails the run by name; a pod stopped
  from outside is disrupted whatever its exit code; placeholders end within 2 s of their delete (a SIGTERM handler;
  without one PID 1 ignores SIGTERM and the kubelet's SIGKILL comes after the grace period, exit 137);
* the emulator's scheduler takes pending pods in kube-scheduler's queue order (priority, then time queued).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from k8s_fixtures import QUOTA, FakeCluster, emulated_cluster, gpu_node, make_run, run_scenario, until

from kts_helpers.errors import BackendError, TenantFailed

pytestmark = pytest.mark.timeout(150)
PODS, JOBS = "v1/pods", "batch/v1/jobs"


@pytest.fixture
async def cluster() -> Any:
    async with emulated_cluster() as fc:
        yield fc


# ------------------------------------------------------------------------------ the placeholders' side

PLACEHOLDER_SIDE = {
    # Kueue's quota counts every admitted Workload (its cache's ClusterQueue usage; flavorassigner.go
    # fitsResourceQuota): 3 GPUs admit the tenants' 2-pod Workload, then leave the placeholders' 2 pods "insufficient
    # unused quota ..., 1 more needed" for as long as the tenants run
    "kueue-cumulative-quota": r"Kueue admitted the tenants' Workload of Job \S+ but not the placeholders' Workload "
                              r"\S+ of Job kts-shared-\S+-hold within \d+ s \(queue 'kts': Pending: couldn't assign "
                              r"flavors to pod set main: insufficient unused quota for nvidia.com/gpu in flavor gpu, "
                              r"1 more needed\)",
    # a ResourceQuota refuses the placeholders' pods only: the Job controller's FailedCreate event on their Job
    "resource-quota": r"the placeholders' Job kts-shared-\S+-hold cannot create its pods: Error creating: pods "
                      r"\"kts-shared-\S+-hold-\d-\S+\" is forbidden: exceeded quota: gpu-quota",
    # a placeholder preempted (DisruptionTarget, SIGTERM) while the tenants' images are still pulling
    "preempted-during-pull": r"placeholder kts-shared-\S+-hold-\d-\S+ of Job kts-shared-\S+-hold stopped holding its "
                             r"replica of the GPU \(disrupted: the scheduler preempted it .*\) before the start",
}


@pytest.mark.parametrize("case", list(PLACEHOLDER_SIDE))
async def test_each_placeholder_side_failure_ends_the_run_within_a_minute_naming_the_placeholders(
        cluster: FakeCluster, tmp_path: Path, case: str) -> None:
    """Each failure on the placeholders' side ends the run within 60 s of the fake clock with the placeholders and the
    cause named, and no tenant blamed (the record names the placeholders' Job). Fails on the old watch, which read
    the placeholders only after the barrier and only for a Pending pod: each of these waited out the 30-minute
    ``ready_timeout_s`` holding the node's Lease, then blamed a tenant that was ready ("tenant 'fft' ... not every
    tenant was ready ... last state: running")."""
    cluster.add_node(gpu_node("gpu-1"))
    opts: dict[str, Any] = {"ready_timeout_s": 1800.0, "schedule_timeout_s": 300.0}
    if case == "kueue-cumulative-quota":
        cluster.kueue_quota = 3
        opts["queue_name"] = "kts"
    elif case == "resource-quota":
        cluster.create_errors["placeholders"] = QUOTA
    else:
        cluster.pull_s_of.update({"fft": 120.0, "gemm": 120.0})  # the tenants' CUDA image takes minutes
        cluster.disrupted_holders = 1
    run, spec = make_run(tmp_path)
    t0 = cluster.clock.t
    with pytest.raises(BackendError, match=r"scenario 'shared' failed on Kubernetes: " + PLACEHOLDER_SIDE[case]):
        await run_scenario(cluster.backend(**opts), run, spec.scenario("shared"), 120.0)
    assert cluster.clock.t - t0 < 60.0, cluster.clock.t - t0
    rec = run.manifest()["scenarios"]["shared"]
    assert rec["status"] == "failed" and rec["failed_placeholders"].endswith("-hold") and "failed_tenant" not in rec
    assert not cluster.live(JOBS) and not cluster.live("coordination.k8s.io/v1/leases")


# ------------------------------------------------------------------------------ signals as a kubelet sends them

async def test_a_tenant_drained_while_it_pads_fails_the_run_by_name(cluster: FakeCluster, tmp_path: Path) -> None:
    """fft has finished its timed iterations and pads while gemm still times; a drain (the Eviction API) gives its
    pod ``DisruptionTarget`` and the kubelet's SIGTERM. The worker ends with 143 on a SIGTERM the kit did not ask for
    (workers/kts_harness.py ``stop_exit_code``), so the pod ends Failed, the Job's podFailurePolicy fails it and the
    run names fft and its condition. Fails on the old worker (exit 0 while padding: the pod ends Succeeded, the policy
    never fires, the placeholder check switched off once a tenant was done, and the run completed with fft gone from
    beside gemm) together with the old pod reader (a disruption dropped on exit 0)."""
    cluster.add_node(gpu_node("gpu-1"))
    cluster.log_iterations = 12
    cluster.behaviour["gemm"] = "slow"  # 1 s a line: still timing while fft pads
    run, spec = make_run(tmp_path)

    async def drain() -> None:
        await until(lambda: any(w.tenant == "fft" and w.done_timed() for w in cluster.workers.values()))
        cluster.disrupt("fft", "EvictionByEvictionAPI", "Eviction API: evicting")

    task = asyncio.create_task(drain())
    with pytest.raises(TenantFailed, match=r"tenant 'fft' .*disrupted: it was evicted through the Eviction API .*"
                                           r"\(DisruptionTarget EvictionByEvictionAPI: Eviction API: evicting\)"):
        await run_scenario(cluster.backend(), run, spec.scenario("shared"), 120.0)
    await task
    rec = run.manifest()["scenarios"]["shared"]
    assert rec["failed_tenant"] == "fft" and rec["tenants"]["fft"]["exit_code"] == 143


def test_a_pod_stopped_from_outside_is_disrupted_whatever_its_exit_code() -> None:
    """``state.pod_state``: a pod with ``DisruptionTarget`` (set by the scheduler's preemption, the Eviction API, the
    taint manager or the kubelet before their SIGTERM) is failed and named even when its container exited 0 (an
    older worker, or any container that exits 0 on SIGTERM); without the condition, exit 0 is a completion. Fails on
    the old reader, which returned "completed" for exit 0 before looking at the condition."""
    from kts_helpers.run.backends.kubernetes.state import pod_state

    def pod(code: int, disrupted: bool) -> dict:
        conds = [{"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler",
                  "message": "default-scheduler: preempting to accommodate a higher priority pod"}] if disrupted else []
        return {"status": {"phase": "Succeeded" if code == 0 else "Failed", "conditions": conds,
                           "containerStatuses": [{"name": "worker", "state": {"terminated": {
                               "exitCode": code, "reason": "Completed" if code == 0 else "Error"}}}]}}

    for code in (0, 143):
        st = pod_state(pod(code, True))
        assert st.done and st.failed and st.exit_code == code, (code, st)
        assert st.reason.startswith("disrupted: the scheduler preempted it for a higher-priority pod")
    assert not pod_state(pod(0, False)).failed and pod_state(pod(143, False)).failed
    succeeded = {"status": {"phase": "Succeeded", "conditions": pod(0, True)["status"]["conditions"]}}
    assert pod_state(succeeded).failed  # a phase without container statuses reads the same


@pytest.mark.parametrize("launcher", ["kit", "probe", "no-handler"])
async def test_placeholders_end_within_2_s_of_their_delete(cluster: FakeCluster, launcher: str) -> None:
    """A placeholder sleeps as PID 1 of its container, which Linux delivers no default-action signal (man 7
    pid_namespaces: only signals it has a handler for, SIGKILL and SIGSTOP from an ancestor namespace aside): the
    kit's placeholder pod (``jobs.build_hold_job``: the launcher catches SIGTERM, exit 143 at once, and a 1 s grace
    period) ends within 2 s of the SIGTERM its delete brings. The emulator's kubelet sends SIGTERM and, to a process
    that ignores it, SIGKILL after ``terminationGracePeriodSeconds``: exit 137 (the old launcher, without a handler,
    with the tenants' 30 s). Fails on the old launcher and grace period (30 s, then 137: every scenario's clean-up
    waited for them)."""
    from k8s_fixtures import ts

    from kts_helpers.run.backends.kubernetes.jobs import LAUNCHER, build_hold_job, build_scenario_job
    from kts_helpers.run.spec import ExperimentParams, resolve

    scenario = resolve(ExperimentParams(profile="tiny", workloads=("fft", "gemm"), backend="kubernetes"),
                       "cuda").scenario("shared")
    job = build_scenario_job(run_id="r", scenario=scenario, namespace="kts", image="i", node="gpu-1")
    pod_spec = build_hold_job(job, 2, 2)["spec"]["template"]["spec"]
    if launcher == "probe":  # the replica probe: the scenario's Job cut to one sleeping pod, same launcher, 1 s grace
        from kts_helpers.run.backends.kubernetes.replica_probe import probe_job
        pod_spec = probe_job(job, "nvidia.com/gpu")["spec"]["template"]["spec"]
        assert pod_spec["terminationGracePeriodSeconds"] == 1  # a SIGKILL 1 s after the SIGTERM at worst
        assert any("kts_placeholder" in c and "signal.SIGTERM" in c for c in pod_spec["containers"][0]["command"])
    if launcher == "no-handler":  # the old launcher and the tenants' grace period
        pod_spec["containers"][0]["command"][-1] = LAUNCHER.replace(
            "signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))\n", "")
        pod_spec["terminationGracePeriodSeconds"] = 30
    pod_spec.pop("priorityClassName", None)
    pod_spec["nodeName"] = "gpu-1"
    await cluster._http("post", "/api/v1/namespaces/kts/pods", {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "hold-0", "namespace": "kts"}, "spec": pod_spec,
        "status": {"phase": "Running", "containerStatuses": [{"name": "worker", "state": {"running": {
            "startedAt": ts(cluster.clock.t)}}}]}})
    await cluster._kill("hold-0")  # the delete's SIGTERM
    await until(lambda: "hold-0" in cluster.exit_codes)
    ended = cluster.exited_at["hold-0"] - cluster.sigterm_at["hold-0"]
    if launcher in ("kit", "probe"):
        assert ended <= 2.0 and cluster.exit_codes["hold-0"] == 143, ended
    else:
        assert ended >= 30.0 and cluster.exit_codes["hold-0"] == 137, ended
    await until(lambda: "hold-0" in cluster.deleted(PODS))  # the kubelet removes the pod once its container ended


# ------------------------------------------------------------------------------ the emulator's scheduler

async def test_the_emulators_scheduler_takes_pending_pods_in_queue_sort_order(cluster: FakeCluster) -> None:
    """kube-scheduler's default queue sort (pkg/scheduler/framework/plugins/queuesort/priority_sort.go, ``Less``):
    the higher ``spec.priority`` first, then the pod queued earlier. A placeholder created before a tenant, in the
    same second, waits behind it (kts-placeholder 0 < kts-tenant 1: manifests/base); a stranger of priority 1000
    goes first. Fails on an emulator that schedules in creation order."""
    def pod(name: str, cls: str | None) -> dict:
        spec: dict[str, Any] = {"containers": [{"name": "main", "image": "x"}]}
        if cls:
            spec["priorityClassName"] = cls
        return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "kts"}, "spec": spec}

    cluster.km.priority_classes["urgent"] = 1000
    for ns, name, cls in (("kts", "hold-0", "kts-placeholder"), ("kts", "tenant-0", "kts-tenant"),
                          ("kts", "plain", None), ("them", "urgent-0", "urgent")):
        await cluster._http("post", f"/api/v1/namespaces/{ns}/pods", pod(name, cls))
        cluster.strangers[name] = ns  # no node: they stay queued
    assert [name for _, _, name, _ in cluster._scheduling_queue()] == ["urgent-0", "tenant-0", "hold-0", "plain"]
