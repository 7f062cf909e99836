"""Kubernetes that proves its conditions (issue #45), against the emulated cluster (tests/k8s_fixtures).

Each test makes the emulator behave as the upstream component does (the source is named in the test) and
fails when the fix it names is removed:

* a foreign GPU pod on the node, unseen under the namespaced Role, keeps a placeholder Pending: the run ends
  within a minute, naming the placeholder and the scheduler's reason (not after the 30-minute ready timeout);
* a Role grants nothing outside its namespace (the emulator's RBAC is scoped as the API server's is);
* Kueue's "Pending" messages of the versions that never send ``NoMatchingFlavor`` are blocked, quoted;
* the workers' ``mps_client`` must match the scenario's mode; the MPS cap is the plugin's integer percentage;
* dcgm-exporter pages of another node or GPU are refused, single-pod attribution is flagged with its fix, and
  the exporter's collect interval is measured and joined at (each collection stamped once).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from k8s_fixtures import (
    RBAC_FILE,
    RBAC_OPT_IN,
    FakeCluster,
    emulated_cluster,
    gpu_node,
    make_run,
    rbac_rules,
    run_scenario,
    until,
)

from kts_helpers.errors import BackendError, TenantFailed
from kts_helpers.run.backends.kubernetes.api import KubeForbidden
from kts_helpers.run.runs import create_run

pytestmark = pytest.mark.timeout(150)
PODS, JOBS = "v1/pods", "batch/v1/jobs"


@pytest.fixture
async def cluster() -> Any:
    async with emulated_cluster() as fc:
        yield fc


def _role_only(fc: FakeCluster) -> None:
    """RBAC enforced with manifests/base's Role alone (no ClusterRole): the default least-privilege identity."""
    fc.km.rbac = {"Role": rbac_rules(RBAC_FILE)["Role"], "ClusterRole": set()}


# ------------------------------------------------------------------------------ exclusivity without a cluster read

@pytest.mark.parametrize("visible,first", [(False, "tenants"), (False, "placeholders"), (True, "tenants")],
                         ids=["role-only-tenants-first", "role-only-placeholders-first", "cluster-pod-list"])
async def test_a_foreign_gpu_pod_ends_the_run_within_a_minute_naming_the_holder(
        cluster: FakeCluster, tmp_path: Path, first: str, visible: bool) -> None:
    """Another team's GPU pod holds 1 of the node's 4 replicas. The tenants' and the placeholders' Jobs are two
    Jobs: which one's pods exist first is not ordered upstream (the Job controller syncs each on its own), so either
    a placeholder or a tenant is the pod left Pending with the scheduler's "Insufficient nvidia.com/gpu"
    (kube-scheduler's NodeResourcesFit, noderesources/fit.go: ``"Insufficient " + resource``). In both orders the
    run ends within a minute of the fake clock (every pod's 30 s Pending rule, issue 50), naming the Pending pod, the
    scheduler's words and who holds the replicas: under the namespaced Role the stranger (there before the run, in
    its own namespace) is the replica no visible pod accounts for; with the opt-in cluster-wide pod list a stranger
    that came as the Jobs were created (the kit waits for one it sees before) is named. Fails when only
    placeholders are checked for a stuck Pending (a tenant left Pending waited for the 300 s schedule timeout,
    blaming the time-slicing config)."""
    cluster.add_node(gpu_node("gpu-1"))
    if visible:
        cluster.km.rbac = {"Role": rbac_rules(RBAC_FILE)["Role"], "ClusterRole": rbac_rules(RBAC_OPT_IN)[
            "ClusterRole"]}

        async def stranger() -> None:  # comes once the kit has looked and submitted
            await until(lambda: len(cluster.live(JOBS)) >= 2)
            await cluster.schedule_stranger("them", "their-training")

        task = asyncio.create_task(stranger())
    else:
        await cluster.add_foreign_pod("them", "their-training", "gpu-1")  # holds 1 of the 4 replicas, unseen
        _role_only(cluster)
    cluster.job_seen_s["tenants" if first == "placeholders" else "placeholders"] = 3.0
    run, spec = make_run(tmp_path)
    backend = cluster.backend(node_name="gpu-1", gpu_replicas=4, schedule_timeout_s=300.0, ready_timeout_s=1800.0,
                              cluster_pod_list=visible)
    t0 = cluster.clock.t
    pending = r"placeholder kts-shared-\S+-hold-\d" if first == "tenants" else r"tenant pod kts-shared-\S+-1-"
    holder = r"by them/their-training \(no Job, not a kts pod\)" if visible else \
        r"1 by pod\(s\) not visible from namespace kts"
    with pytest.raises(BackendError if first == "tenants" else TenantFailed,
                       match=pending + r"\S+ stayed Pending for \d+ s: 0/1 nodes are available: 1 Insufficient "
                                       r"nvidia\.com/gpu.*node gpu-1's 4 replica\(s\) of its GPU are held: 3 by this "
                                       r"scenario's pods; " + holder):
        await run_scenario(backend, run, spec.scenario("shared"), 120.0)
    assert cluster.clock.t - t0 < 60.0, cluster.clock.t - t0
    rec = run.manifest()["scenarios"]["shared"]
    assert rec["status"] == "failed" and "Insufficient nvidia.com/gpu" in rec["reason"]
    assert (rec.get("failed_tenant") == "gemm") is (first == "placeholders")
    if visible:
        await task
    else:
        assert cluster.km.forbidden and all(f[1] == "nodes" for f in cluster.km.forbidden)  # the stranger unseen


async def test_a_role_grants_nothing_outside_its_namespace(cluster: FakeCluster, tmp_path: Path) -> None:
    """The emulator scopes a Role to the namespace it is bound in, as the API server's RBAC authorizer does
    (kubernetes plugin/pkg/auth/authorizer/rbac/rbac.go: ``Authorize`` visits the rules of the request's
    namespace only): Leases in another namespace, with the ``kts`` Role alone, are refused (403) and the
    error names that namespace. Fails with an emulator whose Role holds in every namespace (the run then took
    Leases in namespace 'elsewhere' that a real API server refuses)."""
    cluster.add_node(gpu_node("gpu-1"))
    _role_only(cluster)
    run, spec = make_run(tmp_path)
    backend = cluster.backend(node_name="gpu-1", gpu_replicas=4, lease_namespace="elsewhere")
    with pytest.raises(KubeForbidden, match=r"forbids '(get|create)' on 'leases.coordination.k8s.io' in namespace "
                                            r"'elsewhere'"):
        await run_scenario(backend, run, spec.scenario("shared"), 120.0)
    assert any(f[1] == "leases" and f[3] == "elsewhere" for f in cluster.km.forbidden)
    assert not cluster.live(JOBS)  # refused before anything was submitted


# ------------------------------------------------------------------------------ Kueue as each version answers

# Kueue's words, from pkg/scheduler/flavorassigner/flavorassigner.go of each version (``Assignment.Message``:
# "couldn't assign flavors to pod set <name>: " + the reasons joined with ", "; a batch Job's pod set is "main";
# a taint is printed by corev1 ``Taint.ToString``: key=value:Effect); the condition's reason is "Pending"
# (scheduler.go: ``UnsetQuotaReservationWithCondition(..., "Pending", ...)`` up to v0.18, and v0.19's
# ``UnadmittedWorkloadReasonWithFallback`` with the UnadmittedWorkloadsObservability gate off, its v0.19 default).
OLD_KUEUE = [
    ("v0.9.0", "couldn't assign flavors to pod set main: flavor gpu doesn't match node affinity"),
    ("v0.14.0", "couldn't assign flavors to pod set main: flavor h100 doesn't match node affinity, flavor a100 "
                "doesn't match node affinity"),
    ("v0.19.0", "couldn't assign flavors to pod set main: untolerated taint dedicated=ml:NoSchedule in flavor gpu"),
]


@pytest.mark.parametrize("version,message", OLD_KUEUE, ids=[v for v, _ in OLD_KUEUE])
async def test_old_kueue_pending_that_no_flavor_fits_is_blocked_with_its_words(cluster: FakeCluster, tmp_path: Path,
                                                                              version: str, message: str) -> None:
    """Kueue before v0.19 (and v0.19 with its default gates) never sends ``NoMatchingFlavor``: a gang whose every
    flavor excludes it waits as "Pending" with the flavors' reasons. The kit fails at once quoting them.
    Fails when a "Pending" reason is always taken for a wait for quota (a 30-minute hang)."""
    cluster.add_node(gpu_node("gpu-1"))
    cluster.kueue_inadmissible = ("Pending", message)
    run, spec = make_run(tmp_path)
    t0 = cluster.clock.t
    quoted = message.split(": ", 1)[1].split(",")[0]
    with pytest.raises(TenantFailed, match=rf"Kueue will not admit Workload .*\(queue 'kts'\): Pending: .*{quoted}"):
        await run_scenario(cluster.backend(queue_name="kts", ready_timeout_s=1800.0), run, spec.scenario("shared"),
                           120.0)
    assert cluster.clock.t - t0 < 60


def test_a_flavor_short_of_quota_beside_one_that_never_fits_is_a_wait() -> None:
    """One flavor excludes the gang, another lacks quota now (v0.14's words): quota may come free, so the kit
    keeps waiting (the progress line shows why). Fails when any "doesn't match" is read as blocked."""
    from kts_helpers.run.backends.kubernetes.state import admission

    wl = {"status": {"conditions": [{"type": "QuotaReserved", "status": "False", "reason": "Pending", "message":
                                     "couldn't assign flavors to pod set main: flavor h100 doesn't match node "
                                     "affinity, insufficient unused quota for nvidia.com/gpu in flavor a100, 2 more "
                                     "needed"}]}}
    assert admission(wl) == (None, "")
    wl["status"]["conditions"][0]["message"] = OLD_KUEUE[0][1]
    assert admission(wl)[1] == f"Pending: {OLD_KUEUE[0][1]}"


# Kueue's words for a gang larger than the ClusterQueue's whole quota, from pkg/scheduler/flavorassigner/
# flavorassigner.go ``fitsResourceQuota`` at each tag: v0.9.0 without a cohort has no "> maximum capacity"
OVER_CAPACITY = [
    ("v0.9.0", "couldn't assign flavors to pod set main: insufficient quota for nvidia.com/gpu in flavor gpu in "
               "ClusterQueue"),
    ("v0.10.0", "couldn't assign flavors to pod set main: insufficient quota for nvidia.com/gpu in flavor gpu, "
                "request > maximum capacity (4 > 3)"),
    ("v0.19.0", "couldn't assign flavors to pod set main: insufficient quota for nvidia.com/gpu in flavor gpu, "
                "previously considered podsets requests (0) + current podset request (4) > maximum capacity (3)"),
]


@pytest.mark.parametrize("version,message", OVER_CAPACITY, ids=[v for v, _ in OVER_CAPACITY])
def test_a_gang_over_the_queues_whole_quota_is_blocked_in_every_versions_words(version: str, message: str) -> None:
    """A Workload larger than its ClusterQueue's quota never fits: Kueue v0.10 and later say "> maximum capacity";
    v0.9, in a ClusterQueue without a cohort, says "insufficient quota for <resource> in flavor <f> in ClusterQueue"
    (mode noFit: the request exceeds the nominal quota). Each is blocked at once, quoted; v0.9's cohort message
    ("insufficient unused quota in cohort ..., N more needed") is a wait. Fails on v0.9's words when only
    "> maximum capacity" is read (issue 50: the kit waited out ``ready_timeout_s``)."""
    from kts_helpers.run.backends.kubernetes.state import admission

    wl = {"status": {"conditions": [{"type": "QuotaReserved", "status": "False", "reason": "Pending",
                                     "message": message}]}}
    assert admission(wl)[1].startswith(f"Pending: {message} (the scenario's pods are admitted as one gang")
    wl["status"]["conditions"][0]["message"] = ("couldn't assign flavors to pod set main: insufficient unused quota "
                                                "in cohort for nvidia.com/gpu in flavor gpu, 2 more needed")
    assert admission(wl) == (None, "")


# ------------------------------------------------------------------------------ the mode, as the plugin serves it

def _mps_spec() -> Any:
    from kts_helpers.run.spec import ExperimentParams, resolve

    return resolve(ExperimentParams(profile="tiny", workloads=("fft", "gemm"), backend="kubernetes",
                                    sharing=("mps",)), "cuda")


@pytest.mark.parametrize("node_mode,sharing", [("mps", "timeslice"), ("time-slicing", "mps")])
async def test_a_mode_the_node_does_not_serve_fails_by_the_workers_mps_flag(cluster: FakeCluster, tmp_path: Path,
                                                                           node_mode: str, sharing: str) -> None:
    """With node reads off (the namespaced Role), the node's sharing strategy is unknown to the kit: a
    time-slicing run on an MPS node, or the reverse, would be labelled wrong. The emulated device plugin does
    what k8s-device-plugin does on an MPS node (internal/plugin/server.go: ``getAllocateResponse`` ->
    ``updateResponseForMPS`` sets CUDA_MPS_PIPE_DIRECTORY in every container), which the worker echoes as
    ``mps_client``. Fails when ``mps_client`` is not checked against the scenario's mode."""
    from kts_helpers.run.runs import create_run

    cluster.add_node(gpu_node("gpu-1", strategy=node_mode))
    _role_only(cluster)
    spec = _mps_spec() if sharing == "mps" else make_run(tmp_path / "x")[1]
    run = create_run(spec.to_dict(), {"test": True}, root=tmp_path)
    scenario = spec.scenario("shared-mps" if sharing == "mps" else "shared")
    with pytest.raises(TenantFailed, match=rf"ran as (an|not an) MPS client.*but the scenario measures {sharing}"):
        await run_scenario(cluster.backend(node_name="gpu-1", gpu_replicas=4), run, scenario, 120.0)


def test_the_mps_cap_is_the_plugins_integer_percentage() -> None:
    """cmd/mps-control-daemon/mps/daemon.go (``activeThreadPercentage``): ``fmt.Sprintf("%d", 100/replicas)``,
    Go's integer division: 3 replicas give 33 %, 7 give 14 %. Fails with the 33.333 % recorded before."""
    from kts_helpers.run.backends.kubernetes.nodes import mps_caps

    assert mps_caps(3)["active_thread_percentage"] == 33 and isinstance(mps_caps(3)["active_thread_percentage"], int)
    assert mps_caps(7)["active_thread_percentage"] == 14
    assert mps_caps(4)["active_thread_percentage"] == 25


# ------------------------------------------------------------------------------ honest DCGM

async def _shared_with_exporter(cluster: FakeCluster, tmp_path: Path, http_server: Any, **exporter: Any) -> Any:
    from k8s_fixtures import FakeExporter

    cluster.add_node(gpu_node("gpu-1"))
    cluster.log_iterations = 20  # a few real seconds of scenario: many scrapes
    url = http_server(FakeExporter(cluster, "gpu-1", **exporter).handler()) + "/metrics"
    run, spec = make_run(tmp_path)
    result = await run_scenario(cluster.backend(dcgm_url=url, dcgm_interval_ms=50), run, spec.scenario("shared"),
                                120.0)
    assert result.status == "complete"  # telemetry never fails the measurement
    return run


async def test_a_dcgm_page_of_another_node_is_refused_by_name(cluster: FakeCluster, tmp_path: Path,
                                                            http_server: Any) -> None:
    """The URL is a Service that answered from another node's exporter: its pages name GPU-other-7 on gpu-2
    (render_metrics.go's ``UUID`` and ``Hostname`` labels), not the tenants' GPU on gpu-1. The backend refuses
    them: status "absent", the reason naming both, a warning in the record and a problem line in the analysis,
    nothing joined. Fails when the pages' GPU and node are not checked (another GPU's clocks would be read
    as the tenants')."""
    from kts_helpers.analyse.load import dcgm_page_problems, load_run_telemetry
    from kts_helpers.run.telemetry import read_status

    run = await _shared_with_exporter(cluster, tmp_path, http_server, hostname="gpu-2", uuid="GPU-other-7")
    rec = run.manifest()["scenarios"]["shared"]
    why = ("refused: the dcgm-exporter pages show GPU(s) GPU-other-7 on gpu-2, not the tenants' GPU GPU-fake-0 on "
           "node gpu-1")
    assert rec["telemetry"]["status"] == "absent" and rec["telemetry"]["reason"].startswith(why)
    assert read_status(run.log_dir("shared") / "telemetry.parquet")["reason"].startswith(why)  # what analysis reads
    assert any(w.startswith("DCGM telemetry refused") for w in rec["warnings"])
    tel, statuses = load_run_telemetry(run, run.read())
    assert tel.empty and dcgm_page_problems(statuses) == [f"shared: DCGM telemetry {statuses['shared']['reason']}"]


@pytest.mark.parametrize("virtual_gpus", [False, True])
async def test_single_pod_attribution_is_flagged_by_name(cluster: FakeCluster, tmp_path: Path, http_server: Any,
                                                         virtual_gpus: bool) -> None:
    """dcgm-exporter with its default KUBERNETES_VIRTUAL_GPUS=false names one pod per device (the last listed:
    transformation/kubernetes.go ``toDeviceToPod``), though the scenario's four pods hold the GPU: per-pod
    attribution, and with it the look for strangers there, is unavailable, and the record says so with the fix.
    With it true (one series per pod, ``vgpu`` label) nothing is flagged. Fails when the kit assumes one series
    per pod."""
    run = await _shared_with_exporter(cluster, tmp_path, http_server, virtual_gpus=virtual_gpus)
    tel = run.manifest()["scenarios"]["shared"]["telemetry"]
    assert tel["status"] == "complete" and tel["page"]["uuids"] == ["GPU-fake-0"]
    if virtual_gpus:
        assert "attribution" not in tel and tel["page"]["virtual_gpus"] is True
        assert tel["page"]["max_pods_per_gpu"] == {"GPU-fake-0": 4}
    else:
        assert tel["attribution"].startswith("attribution unavailable; set KUBERNETES_VIRTUAL_GPUS=true")
        assert run.manifest()["scenarios"]["shared"]["warnings"] == [f"DCGM {tel['attribution']}"]


def test_the_exporters_collect_interval_is_measured_and_each_sample_stamped_once(http_server: Any,
                                                                                tmp_path: Path) -> None:
    """The exporter serves one collection until the next (DCGM_EXPORTER_INTERVAL, 30 s by default: pkg/cmd/app.go
    ``CLICollectInterval``); scraped every 50 ms, a 300 ms exporter repeats each collection ~6 times. The scraper
    records the interval between changes and stamps every repeat with the scrape that first showed it, and the
    analysis joins at half that interval. Fails when each repeat carries its own scrape time (a stale value stamped
    as fresh) or the interval is not recorded."""
    import http.server
    import time

    from kts_helpers.analyse.load import join_tolerance_ms
    from kts_helpers.analyse.telemetry import load_telemetry
    from kts_helpers.run.telemetry import DcgmScraper

    t0 = time.monotonic()

    class Slow(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802
            n = int((time.monotonic() - t0) / 0.3)
            body = (f'DCGM_FI_DEV_POWER_USAGE{{gpu="0",UUID="GPU-a",Hostname="n"}} {400 + n}\n').encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    out = tmp_path / "dcgm.parquet"
    st = DcgmScraper(http_server(Slow) + "/metrics", out, interval_ms=50, flush_s=0).run(duration_s=2.0)
    assert 200 <= st["exporter_interval_ms"] <= 420, st["exporter_interval_ms"]
    tel = load_telemetry(out)
    stamps = tel.groupby("power_w")["ts_ns"].nunique()
    assert (stamps == 1).all() and len(tel) > 2 * len(stamps)  # repeats kept, each with its collection's stamp
    assert join_tolerance_ms(st) == max(250.0, st["exporter_interval_ms"] / 2)
    assert join_tolerance_ms({"exporter_interval_ms": 30000.0}) == 15000.0 and join_tolerance_ms(None) == 250.0


# ------------------------------------------------------------------------------ cleanup on SIGTERM

def test_sigterm_issues_the_deletes_writes_the_record_and_gives_the_lease_back_within_2_s(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A notebook kernel killed from outside (Jupyter sends SIGKILL 2.5 s after its SIGTERM), ``kill <pid>`` or a
    deleted notebook pod: SIGTERM arrives while a scenario runs and fft is stuck in an iteration (it ends only at the
    kubelet's SIGKILL, its grace period later: 30 s by default, 5 s here). The backend issues the deletes of the scenario's Jobs (not
    waited for), writes the logs streamed so far and the record ("interrupted (SIGTERM)"), then gives the node's Lease
    back, all within 2 s of the signal, and the signal goes on up; the previous handler is back afterwards. Fails on
    the old order (stop, collect the logs, wait for the Jobs to go, then record and release: fft's grace period), and
    without the handler (the Job holds every replica until its activeDeadlineSeconds, the Lease until it
    expires). The backend runs in the main thread, where Python delivers signals; the emulated cluster (real time)
    runs in its own."""
    import os
    import signal
    import threading
    import time

    from k8s_fixtures import EmulatorThread

    from kts_helpers.run.backends.kubernetes import jobs
    from kts_helpers.run.backends.kubernetes.lease import NodeLease
    from kts_helpers.run.interrupts import Terminated
    from kts_helpers.run.runs import Run

    hits: list[int] = []
    when: dict[str, float] = {}
    record, release = Run.record_scenario, NodeLease.release

    def previous(signum: int, frame: Any) -> None:
        hits.append(signum)

    def recorded(self: Any, *a: Any, **k: Any) -> Any:
        out = record(self, *a, **k)
        when.setdefault("record", time.monotonic())
        return out

    def released(self: Any) -> None:
        release(self)
        when.setdefault("lease", time.monotonic())

    monkeypatch.setattr(Run, "record_scenario", recorded)
    monkeypatch.setattr(NodeLease, "release", released)
    monkeypatch.setattr(jobs, "STOP_GRACE_S", 5)  # the tenants' grace period: the SIGKILL of a stuck fft comes sooner
    old = signal.signal(signal.SIGTERM, previous)
    earlier = set(threading.enumerate())  # other tests' streams in this process are not this one's
    try:
        with EmulatorThread() as emu:
            emu.call(lambda fc: fc.add_node(gpu_node("gpu-1")))
            emu.call(lambda fc: fc.behaviour.__setitem__("fft", "hang"))
            backend = emu.call(lambda fc: fc.backend(start_delay_s=1.0), timeout_s=60.0)  # a loaded CI host is slow
            run, spec = make_run(tmp_path, ("fft",))

            def kill_once_running() -> None:
                for _ in range(600):
                    if emu.call(lambda fc: any(w.tenant == "fft" and w.i >= 2 for w in fc.workers.values())):
                        when["kill"] = time.monotonic()  # fft is stuck in its timed iteration
                        os.kill(os.getpid(), signal.SIGTERM)
                        return
                    threading.Event().wait(0.05)

            threading.Thread(target=kill_once_running, daemon=True).start()
            with pytest.raises(Terminated):
                backend.run_scenario(run, spec.scenario("baseline-fft"), timeout_s=30, progress=False)
            assert when["kill"] < when["record"] < when["lease"] <= when["kill"] + 2.0, when
            scen = run.manifest()["scenarios"]["baseline-fft"]
            assert scen["status"] == "failed" and scen["reason"] == "interrupted (SIGTERM)"
            assert run.stderr_path("baseline-fft", "fft").exists() and run.log_path("baseline-fft", "fft").exists()
            assert not emu.call(lambda fc: fc.live("coordination.k8s.io/v1/leases"))
            deletes = emu.call(lambda fc: {r.name for r in fc.requests("delete", JOBS)})
            assert any(n.endswith("-hold") for n in deletes) and len(deletes) == 2  # issued; fft ends at its SIGKILL
            assert all(j["metadata"].get("deletionTimestamp") for j in emu.call(lambda fc: fc.live(JOBS)).values())
        # the log streams were told to end: none follows (or retries) a deleted pod after the cluster is gone -- a
        # daemon thread still in urllib3 at interpreter exit aborted the test process (SIGABRT) in 2 of 5 runs
        streams = [t for t in threading.enumerate() if t.name.startswith("kts-log-") and t not in earlier]
        for t in streams:
            t.join(5.0)
        assert not [t.name for t in streams if t.is_alive()]
        assert signal.getsignal(signal.SIGTERM) is previous and hits == []
    finally:
        signal.signal(signal.SIGTERM, old)


# ------------------------------------------------------------------------------ sizes: CPU, memory, pods, QoS

def _no_gfd_node(allocatable: int, **alloc: str) -> dict[str, Any]:
    """A node without GPU feature discovery (no count, replicas or strategy labels) advertising ``allocatable``
    replicas: the kit cannot tell the replicas of one GPU, so it holds every one the tenants leave free."""
    node = gpu_node("gpu-1", allocatable=allocatable, replicas=None, strategy=None)
    del node["metadata"]["labels"]["nvidia.com/gpu.count"]
    node["status"]["allocatable"].update(alloc)
    return node


async def test_46_placeholders_fit_where_tenant_sized_ones_would_not(cluster: FakeCluster, tmp_path: Path) -> None:
    """A 48-replica node without GPU feature discovery (a 48-client MPS or time-slicing config), 16 CPUs, 64Gi and
    the kubelet's default 110 pods: 46 placeholders hold the replicas the two tenants leave free. They are a Job of
    their own with minimal requests (10m, 64Mi), so they fit; 46 pods of the tenants' template (a CPU and the
    memory limit each, Guaranteed) would not (the emulated scheduler counts CPU, memory and pods as
    kube-scheduler's NodeResourcesFit does, pkg/scheduler/framework/plugins/noderesources/fit.go ``fitsRequest``).
    Fails when the placeholders share the tenants' pod template (the run then fails "Insufficient cpu")."""
    from k8s_fixtures import pod_requests, quantity

    cluster.add_node(_no_gfd_node(48))
    run, spec = make_run(tmp_path)
    result = await run_scenario(cluster.backend(schedule_timeout_s=300.0), run, spec.scenario("shared"), 120.0)
    assert result.status == "complete", run.manifest()["scenarios"]["shared"].get("reason")
    jobs = {r.data["metadata"]["name"]: r.data for r in cluster.requests("post", JOBS)}
    (hold,) = [j for n, j in jobs.items() if n.endswith("-hold")]
    (tenants,) = [j for n, j in jobs.items() if not n.endswith("-hold")]
    assert hold["spec"]["completions"] == hold["spec"]["parallelism"] == 46
    assert tenants["spec"]["completions"] == 2
    hold_pod, tenant_pod = hold["spec"]["template"]["spec"], tenants["spec"]["template"]["spec"]
    assert hold_pod["containers"][0]["resources"] == {"requests": {"cpu": "10m", "memory": "64Mi"},
                                                      "limits": {"memory": "64Mi", "nvidia.com/gpu": "1"}}
    alloc = {k: quantity(v) for k, v in _no_gfd_node(48)["status"]["allocatable"].items() if k in ("cpu", "memory")}
    small, big = pod_requests(hold_pod), pod_requests(tenant_pod)
    assert 46 * small["cpu"] + 2 * big["cpu"] <= alloc["cpu"] and 46 * small["memory"] + 2 * big["memory"] <= alloc[
        "memory"]
    assert 48 * big["cpu"] > alloc["cpu"] and 48 * big["memory"] > alloc["memory"]  # tenant-sized ones would not fit
    rec = run.manifest()["scenarios"]["shared"]
    assert rec["exclusivity"]["placeholders"] == 46
    assert rec["qos"]["placeholder_requests"] == {"cpu": "10m", "memory": "64Mi"}


async def test_placeholders_the_node_has_no_room_for_fail_fast_by_the_schedulers_reason(cluster: FakeCluster,
                                                                                       tmp_path: Path) -> None:
    """A 24-replica node without feature discovery and room for 12 pods only (a kubelet's ``maxPods``: "Too many
    pods" from NodeResourcesFit ``fitsRequest``): the 22 placeholders, however small, cannot all be placed. The run
    ends within a minute naming the placeholder and the scheduler's reason, and says what to do. Fails with an
    emulator that counts GPUs only (the run then passes unseen), or without the placeholders' Pending check (a
    30-minute hang)."""
    cluster.add_node(_no_gfd_node(24, pods="12"))
    run, spec = make_run(tmp_path)
    t0 = cluster.clock.t
    with pytest.raises(BackendError, match=r"placeholder \S+ stayed Pending for \d+ s: 0/1 nodes are available: 1 "
                                           r"Too many pods\..*no room for 22 placeholders"):
        await run_scenario(cluster.backend(schedule_timeout_s=300.0), run, spec.scenario("shared"), 120.0)
    assert cluster.clock.t - t0 < 60.0


async def test_the_tenants_are_guaranteed_and_the_class_is_read_back(cluster: FakeCluster, tmp_path: Path) -> None:
    """The tenants ask for Guaranteed QoS (requests = limits, whole CPUs); the API server sets each pod's
    ``status.qosClass`` (kubernetes pkg/apis/core/v1/helper/qos/qos.go ``GetPodQOS``; the emulator's
    ``qos_class`` follows it line by line) and the record states the class read back, not the one asked for.
    Fails when the tenants are Burstable (CPU requests without limits, as before) or the class is not read."""
    from k8s_fixtures import qos_class

    cluster.add_node(gpu_node("gpu-1"))
    run, spec = make_run(tmp_path)
    assert (await run_scenario(cluster.backend(), run, spec.scenario("shared"), 120.0)).status == "complete"
    rec = run.manifest()["scenarios"]["shared"]
    assert rec["qos"]["tenants"] == {"fft": "Guaranteed", "gemm": "Guaranteed"} and "note" not in rec["qos"]
    assert rec["qos"]["source"].startswith("pod status.qosClass")
    (tenants,) = [r.data for r in cluster.requests("post", JOBS) if not r.data["metadata"]["name"].endswith("-hold")]
    res = tenants["spec"]["template"]["spec"]["containers"][0]["resources"]
    assert res["requests"] == {k: v for k, v in res["limits"].items() if k in ("cpu", "memory")}
    assert res["requests"]["cpu"].isdigit()  # whole CPUs
    # GetPodQOS's edges: a missing request defaults to the limit; an init container counts; zero is skipped
    assert qos_class({"containers": [{"resources": {"limits": {"cpu": "2", "memory": "8Gi"}}}]}) == "Guaranteed"
    assert qos_class({"containers": [{"resources": {"limits": {"cpu": "2", "memory": "8Gi"}}}],
                      "initContainers": [{"resources": {"requests": {"cpu": "1"}}}]}) == "Burstable"
    assert qos_class({"containers": [{"resources": {"requests": {"cpu": "0"}}}]}) == "BestEffort"
    assert qos_class({"containers": [{"resources": {"requests": {"cpu": "1", "memory": "2Gi"},
                                                    "limits": {"memory": "8Gi"}}}]}) == "Burstable"


def test_a_cluster_without_gpus_runs_cpu_workers_only_when_asked() -> None:
    """manifests/kind/run-kind.sh runs the path on a kind cluster with a fake nvidia.com/gpu resource: the workers
    need DEVICE=cpu there (``worker_device``, K8S_WORKER_DEVICE); anything but cuda or cpu is refused in one line."""
    from kts_helpers.errors import SpecError
    from kts_helpers.run.backends.kubernetes.backend import KubernetesBackend
    from kts_helpers.run.backends.kubernetes.jobs import build_scenario_job
    from kts_helpers.run.params import backend_options_from_env
    from kts_helpers.run.spec import ExperimentParams, resolve

    scenario = resolve(ExperimentParams(profile="tiny", workloads=("fft", "gemm"), backend="kubernetes"),
                       "cuda").scenario("shared")
    job = build_scenario_job(run_id="r", scenario=scenario, namespace="kts", image="i", node="n", device="cpu")
    env = {e["name"]: e["value"] for e in job["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["DEVICE"] == "cpu"
    assert backend_options_from_env("kubernetes", environ={"K8S_WORKER_DEVICE": "cpu"})["worker_device"] == "cpu"
    with pytest.raises(SpecError, match="worker_device must be 'cuda' or 'cpu'"):
        KubernetesBackend(worker_device="tpu", api_client=object())


# ------------------------------------------------------------------------------ the placeholders' GPU, proven

async def test_a_placeholder_that_cannot_tell_its_gpu_on_a_multi_gpu_node_fails_the_shared_scenario(
        cluster: FakeCluster, tmp_path: Path) -> None:
    """Under CDI (the GPU Operator's default from v25.10) or deviceIDStrategy=index the device plugin never sets
    NVIDIA_VISIBLE_DEVICES to a UUID (k8s-device-plugin internal/plugin/server.go: ``getAllocateResponse``
    returns before ``updateResponseForDeviceListEnvVar`` when every strategy is CDI), and without NVML the
    placeholder says ``gpu=?``. On a node with two GPUs ("packed"), that every replica of the tenants' GPU was
    held is then unproven: the shared scenario fails, naming the placeholder. Fails when the check is skipped
    unless the placeholder reads ``GPU-...`` (the run passed, a stranger possibly beside the tenants)."""
    cluster.add_node(gpu_node("gpu-1", allocatable=8, count=2))
    cluster.holder_gpu = "?"
    run, spec = make_run(tmp_path)
    with pytest.raises(BackendError, match=r"placeholder \S+ could not tell which GPU holds its replica .*'\?'"):
        await run_scenario(cluster.backend(allocation_policy="packed"), run, spec.scenario("shared"), 120.0)


def test_the_placeholder_asks_nvml_not_the_environment_and_ends_on_sigterm(tmp_path: Path) -> None:
    """The launcher's placeholder branch, run for real: without libnvidia-ml (this host) it falls back to the
    environment and says so (``source=env``); the kit then proves nothing from it on a multi-GPU node (above). It
    catches SIGTERM (its ``SigCgt`` mask in /proc has the bit: as PID 1 of a container it would otherwise ignore the
    signal, Linux delivering PID 1 no default-action signal) and ends with 143 at once. Fails on a launcher without
    the handler (SigCgt clear; here, not PID 1, the default action ends it with -15)."""
    import os
    import signal
    import subprocess
    import sys
    import time

    from kts_helpers.run.backends.kubernetes.jobs import LAUNCHER

    env = {**os.environ, "KTS_TENANTS": "[]", "JOB_COMPLETION_INDEX": "0", "KTS_HOLD_S": "60",
           "NVIDIA_VISIBLE_DEVICES": "0", "LD_LIBRARY_PATH": str(tmp_path)}
    proc = subprocess.Popen([sys.executable, "-c", LAUNCHER], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    line = proc.stdout.readline()  # printed once the handler is in place
    assert line.strip() == "kts_placeholder: holding index=0 gpu=0 source=env" or \
        line.startswith("kts_placeholder: holding index=0 gpu=GPU-")  # a host with a GPU answers from NVML
    caught = int(next(ln for ln in Path(f"/proc/{proc.pid}/status").read_text().splitlines()
                      if ln.startswith("SigCgt:")).split()[1], 16)
    t0 = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=5) == 143 and time.monotonic() - t0 < 2.0
    assert caught & (1 << (signal.SIGTERM - 1)), hex(caught)


# ------------------------------------------------------------------------------ stated replicas, proven

@pytest.mark.parametrize("advertised,stated", [(4, 4), (6, 4)])
async def test_stated_replicas_are_proven_by_one_more_that_must_stay_pending(cluster: FakeCluster, tmp_path: Path,
                                                                           advertised: int, stated: int) -> None:
    """With the namespaced Role alone the replicas are what the user states (K8S_GPU_REPLICAS). Before the start
    the kit asks the scheduler for one more replica on the node: kube-scheduler leaves it Pending with
    "Insufficient nvidia.com/gpu" when the statement held (the record says so), and places it when the node
    advertises more (6, stated 4: two replicas free for a stranger): the scenario then fails, naming it.
    Fails when a stated K8S_GPU_REPLICAS is trusted (the understatement passes unseen)."""
    cluster.add_node(gpu_node("gpu-1", allocatable=advertised, replicas=advertised))
    _role_only(cluster)
    run, spec = make_run(tmp_path)
    backend = cluster.backend(node_name="gpu-1", gpu_replicas=stated)
    if advertised == stated:
        assert (await run_scenario(backend, run, spec.scenario("shared"), 120.0)).status == "complete"
        rec = run.manifest()["scenarios"]["shared"]
        assert rec["exclusivity"]["replicas"].startswith("stated (gpu_replicas=4); no replica left free: one more "
                                                         "stayed Pending (0/1 nodes are available: 1 Insufficient "
                                                         "nvidia.com/gpu")
    else:
        with pytest.raises(TenantFailed, match=r"a replica of node gpu-1's GPU was free beside the tenants and "
                                               r"placeholders .* more than the stated 4 replicas"):
            await run_scenario(backend, run, spec.scenario("shared"), 120.0)
    assert not cluster.live(JOBS)  # the probe went with the scenario's Job


# ------------------------------------------------------------------------------ priorities and preemption

def _released(fc: FakeCluster) -> bool:
    return any((p["metadata"].get("annotations") or {}).get("kts/start-at") for p in fc.live(PODS).values())


@pytest.mark.parametrize("latest", ["gemm", "placeholder"])
async def test_a_higher_priority_pod_preempts_a_placeholder_never_a_tenant_and_the_run_names_it(
        cluster: FakeCluster, tmp_path: Path, latest: str) -> None:
    """Another team's pod of PriorityClass "urgent" (1000) asks for a replica of the full GPU mid-run. kube-scheduler
    removes every lower-priority pod, then reprieves the most important first (default_preemption.go
    ``SelectVictimsOnNode`` with ``MoreImportantPod``: higher priority, then the earlier start): with the tenants'
    PriorityClass above the placeholders' (manifests/base: kts-tenant 1, kts-placeholder 0) the victim is a
    placeholder, whichever pod started last. It gets ``DisruptionTarget`` (``PreemptionByScheduler``:
    preemption.go ``prepareCandidate``) and SIGTERM; the run names the placeholder that stopped holding its replica
    and why. Fails without the tenants' PriorityClass (all at 0, the latest started, gemm, is evicted mid-run)."""
    cluster.add_node(gpu_node("gpu-1"))
    cluster.km.priority_classes["urgent"] = 1000
    cluster.log_iterations = 40
    if latest == "gemm":
        cluster.placement_delay_s["gemm"] = 3  # placed after the placeholders: the latest started
    run, spec = make_run(tmp_path)

    async def urgent() -> None:
        await until(lambda: _released(cluster))
        await cluster.schedule_stranger("them", "urgent-inference", priority_class="urgent")

    task = asyncio.create_task(urgent())
    with pytest.raises(BackendError, match=r"placeholder kts-shared-\S+-hold-\d-\S+ of Job \S+ stopped holding its "
                                           r"replica of the GPU \(disrupted: the scheduler preempted it[^(]*"
                                           r"\(DisruptionTarget PreemptionByScheduler"):
        await run_scenario(cluster.backend(), run, spec.scenario("shared"), 120.0)
    await task
    assert len(cluster.preempted_pods) == 1 and "hold" in cluster.preempted_pods[0]


# ------------------------------------------------------------------------------ a stranger context, from used memory

@pytest.mark.parametrize("case", ["no-stranger", "stranger", "mps-baseline"])
async def test_a_stranger_context_on_the_gpu_is_flagged_by_name_from_the_devices_used_memory(
        cluster: FakeCluster, tmp_path: Path, case: str) -> None:
    """A process on the measured GPU that no API read shows (a pod of another namespace under the Role alone, a
    process on the host): the device's memory info (nvmlDeviceGetMemoryInfo) counts its context whoever holds it,
    while NVML's process list inside a container shows only the caller's PID namespace (as the workers see it:
    their own process). Each tenant reads both at its block's end (workers/kts_gpumem.py, here against
    tests/fake_nvml.py's driver, with the H200's 615 MiB reserve); 6 GiB that neither tenant holds fails the run,
    naming the GPU and the memory; without it the record says the check passed and what it saw, the reserve apart.
    On an MPS node the device plugin's MPS server (its own pod: unseen from the tenants) holds memory in every
    block, alone ones too: the check allows for it. Fails on the v1 reading (the reserve read as a stranger in every
    block), when the tenants' footprints are not compared with the device's memory (the stranger unseen), and when
    a baseline on an MPS node is checked without the server."""
    if case == "mps-baseline":
        cluster.add_node(gpu_node("gpu-1", strategy="mps"))
        spec = _mps_spec()
        run = create_run(spec.to_dict(), {"test": True}, root=tmp_path)
        scenario = next(s for s in spec.scenarios if s.kind == "baseline")
    else:
        cluster.add_node(gpu_node("gpu-1"))
        run, spec = make_run(tmp_path)
        scenario = spec.scenario("shared")
    cluster.nvml = True
    if case == "stranger":
        cluster.gpu_strangers[31337] = 6 << 30
        with pytest.raises(TenantFailed, match=r"a stranger context on GPU GPU-fake-0: 6144 MiB of the device's "
                                               r"allocated memory \(the driver's reserve apart\) is held by none of "
                                               r"the block's 2 tenant\(s\) \(fft, gemm\); its process is not visible "
                                               r"from the tenants' PID namespaces"):
            await run_scenario(cluster.backend(), run, scenario, 120.0)
        return
    assert (await run_scenario(cluster.backend(), run, scenario, 120.0)).status == "complete"
    got = run.manifest()["scenarios"][scenario.name]["gpu_memory"]
    assert got["status"] == "ok" and got["unexplained_mib"] == 0 and got["device_reserved_mib"] == 615.0, got
    assert got.get("companions_mib") == ({"MPS server": 128.0} if case == "mps-baseline" else None), got


def test_the_stranger_check_leaves_the_drivers_reserve_out_and_counts_the_experiments_own() -> None:
    """``run.gpumem.check_block`` on readings made by the worker's real code (workers/kts_gpumem.py) from a model of
    the driver (tests/fake_nvml.py: the H200's 615 MiB reserve, NVML v1 counting it as used, v2 apart):

    * with no stranger, a 1-, 2- and 3-tenant block passes, and so does an alone block of the warm design beside its
      idle resident neighbours (``companions``, counted from NVML's process list by host PID) and an MPS block (the
      server named by NVML on a host; its 66 MiB, the H200's, where a container cannot see it);
    * a stranger process holding 1 GiB is named, by host PID, memory and name;
    * a version-1 reading (an old nvidia-ml-py or driver) leaves the check unknown, with why: its used memory holds
      the reserve; without nvidia-ml-py it is unknown too.

    Fails on the v1 reading of the reserve as used (every block a "stranger" of 615 MiB), on idle neighbours not
    counted (the warm design's alone blocks fail) and on an MPS server not told apart (the record names it)."""
    from fake_nvml import GIB, MIB, MPS_SERVER, FakeGpu, reading

    from kts_helpers.run.gpumem import check_block

    def block(n: int, *, stranger: int = 0, idle: int = 0, mps: bool = False, inside: bool = False) -> dict:
        gpu = FakeGpu()
        for i in range(n + idle):
            gpu.hold(100 + i, (2 << 30) + 400 * MIB)
        if mps:
            gpu.hold(99, 66 * MIB, MPS_SERVER)
        if stranger:
            gpu.hold(31337, stranger, "train.py")
        readings = {f"t{i}": reading(gpu, 100 + i, torch_reserved=2 << 30, own_only=inside, ns_pid=1)
                    for i in range(n)}
        return check_block(readings, mps=mps, companions={f"t{n + j} (idle)": 100 + n + j for j in range(idle)})

    for n in (1, 2, 3):
        got = block(n)
        assert got["status"] == "ok" and got["unexplained_mib"] == 0 and got["device_reserved_mib"] == 615, (n, got)
    assert block(1, idle=2)["status"] == "ok" and block(1, idle=2)["companions_mib"] == {
        "t1 (idle)": 2448.0, "t2 (idle)": 2448.0}
    assert block(2, mps=True)["status"] == "ok" and block(2, mps=True)["companions_mib"] == {"MPS server": 66.0}
    assert block(2, mps=True, inside=True)["status"] == "ok"  # the server unseen: its allowance
    named = block(3, stranger=1 * GIB)
    assert named["status"] == "stranger" and named["strangers"] == [{"pid": 31337, "used_mib": 1024.0,
                                                                     "name": "train.py"}]
    assert "1024 MiB of the device's allocated memory" in named["text"] and "pid 31337 train.py (1024.0 MiB)" in \
        named["text"]
    unseen = block(2, stranger=1 * GIB, inside=True)
    assert unseen["status"] == "stranger" and "not visible from the tenants' PID namespaces" in unseen["text"]
    gpu = FakeGpu()
    gpu.hold(100, 3 << 30)
    v1 = check_block({"fft": reading(gpu, 100, v2=False)})
    assert v1["status"] == "unknown" and "version 1 of its memory info" in v1["reason"]
    got = check_block({"fft": {"status": "unknown", "reason": "nvidia-ml-py is not installed"}, "gemm": None})
    assert got["status"] == "unknown" and "fft: nvidia-ml-py is not installed" in got["reason"]


def test_the_committed_h200_readings_would_all_have_failed_the_old_check() -> None:
    """The one committed run with readings, data/reference/h200-2026-12-06-rm-warm-ts-24 (three tenants, no stranger,
    24 warm shared blocks), read NVML in version 1: its device used memory exceeds its processes' by the reserve in
    every block, 635 MiB in each shared block (over the 512 MiB threshold), and its alone blocks carried the idle
    residents too. The old check (v1 used against the block's tenants alone) would have failed all 101 blocks
    (issue 50); the check now says "unknown" for a version-1 reading, and the residents would be the run's own."""
    import json

    from kts_helpers.run.gpumem import check_block

    root = Path(__file__).resolve().parents[1] / "data" / "reference" / "h200-2026-12-06-rm-warm-ts-24" / "logs"
    blocks = sorted(p for p in root.iterdir() if p.is_dir())
    gaps, old = {}, {}
    for scen in blocks:
        readings = {}
        for log in scen.glob("*.log"):
            for line in log.read_text().splitlines():
                if line.startswith("KTS_END"):
                    end = json.loads(line.split(",", 2)[2])
                    readings[end["tenant"]] = end["gpu_memory"]
        procs = {p["pid"]: p["used_bytes"] for r in readings.values() for p in r["processes"]}
        used = min(r["device_used_bytes"] for r in readings.values())
        gaps[scen.name] = (used - sum(procs.values())) / (1 << 20)  # beyond every process: the driver's reserve
        old[scen.name] = (used - sum(r["own_process_bytes"] for r in readings.values())) / (1 << 20)  # the old check
        assert check_block(readings)["status"] == "unknown"
    assert len(gaps) == 101 and all(615 <= g <= 640 for g in gaps.values()), gaps
    assert all(g > 512 for g in old.values()) and min(old.values()) == min(gaps.values())  # 101 of 101 "strangers"
    assert [round(g, 1) for s, g in old.items() if s.startswith("shared")] == [635.1] * 24


async def test_a_class_changed_by_the_api_server_is_recorded_as_read(cluster: FakeCluster, tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """A LimitRange or webhook made the tenants Burstable: the record states what the API server set, with a note.
    Fails when the record states the class asked for instead of status.qosClass."""
    import k8s_fixtures

    monkeypatch.setattr(k8s_fixtures, "qos_class", lambda spec: "Burstable")
    cluster.add_node(gpu_node("gpu-1"))
    run, spec = make_run(tmp_path)
    await run_scenario(cluster.backend(), run, spec.scenario("shared"), 120.0)
    rec = run.manifest()["scenarios"]["shared"]
    assert rec["qos"]["tenants"] == {"fft": "Burstable", "gemm": "Burstable"} and "note" in rec["qos"]
