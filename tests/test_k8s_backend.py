"""The Kubernetes backend against kmock's emulator, with tests/k8s_fixtures.FakeCluster as control plane.

The backend's client is synchronous and kmock serves from the test's event loop, so every
backend call runs in a thread (``asyncio.to_thread``) while the fake controllers keep going.
"""

from __future__ import annotations

import asyncio
import json
import math
import re
from pathlib import Path
from typing import Any

import kmock
import pytest
import yaml
from k8s_fixtures import NS, FakeCluster, gpu_node, kts_lines, make_run

from kts_helpers.analyse.logparse import parse_bytes
from kts_helpers.analyse.waits import layered_waits
from kts_helpers.errors import BackendError, SpecError, TenantFailed
from kts_helpers.run.backends.base import Backend
from kts_helpers.run.backends.kubernetes.api import KubeForbidden
from kts_helpers.run.backends.kubernetes.backend import KubernetesBackend
from kts_helpers.run.backends.kubernetes.names import MANAGED_BY, job_name, label_value, parse_selector
from kts_helpers.run.backends.kubernetes.scale import scale_out

pytestmark = pytest.mark.timeout(60)
LABEL_RE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$")
DNS_RE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


@pytest.fixture
async def cluster(kmock: Any) -> Any:
    async with FakeCluster(kmock) as fc:
        yield fc


async def _run(backend: KubernetesBackend, run: Any, scenario: Any, timeout_s: float = 10.0) -> Any:
    return await asyncio.to_thread(backend.run_scenario, run, scenario, timeout_s=timeout_s, progress=False)


def _env(job: dict[str, Any]) -> dict[str, str]:
    return {e["name"]: e["value"] for e in job["spec"]["template"]["spec"]["containers"][0]["env"]}


def _jobs_created(km: Any) -> list[dict[str, Any]]:
    return [r.data for r in list(km) if r.method == "POST" and r.resource == "batch/v1/jobs"]


# ------------------------------------------------------------------------------------------ happy path

async def test_shared_scenario_runs_pinned_together_and_records_layered_waits(cluster: FakeCluster,
                                                                              tmp_path: Path) -> None:
    cluster.add_node(gpu_node("gpu-1"))
    cluster.add_node(gpu_node("gpu-2", allocatable=8, extra_labels={"pool": "other"}))
    backend = cluster.backend(node_selector="nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3,!pool")
    assert isinstance(backend, Backend)
    run, spec = make_run(tmp_path)
    scenario = spec.scenario("shared")

    result = await _run(backend, run, scenario)

    assert result.status == "complete"
    assert [t.tenant for t in result.tenants] == ["fft", "gemm"]
    jobs = _jobs_created(cluster.km)
    assert len(jobs) == 2
    envs = [_env(j) for j in jobs]
    for job, env, tenant in zip(jobs, envs, scenario.tenants, strict=True):
        labels = job["metadata"]["labels"]
        assert labels[MANAGED_BY] == "kts"
        assert labels["kts.run-id"] == label_value(run.run_id)
        assert labels["kts.scenario"] == "shared" and labels["kts.tenant"] == tenant.name
        pod = job["spec"]["template"]["spec"]
        # the selector excluded gpu-2 client-side (kmock ignores label selectors)
        assert pod["nodeSelector"]["kubernetes.io/hostname"] == "gpu-1"
        assert pod["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "1"
        assert env["DEVICE"] == "cuda"
        assert {k: env[k] for k in tenant.env()} == tenant.env()
        assert job["metadata"]["name"] == job_name(run.run_id, "shared", tenant.name)
    assert envs[0]["START_AT"] == envs[1]["START_AT"]  # one barrier for all tenants

    # logs land exactly where the local backend writes them, and parse: the timed iterations, then padding
    # until every tenant was done -- then kts deleted the Jobs and kept the streamed logs
    assert {envs[0]["KTS_PAD"], envs[1]["KTS_PAD"]} == {"1"}
    for tenant in ("fft", "gemm"):
        log = run.log_path("shared", tenant).read_bytes()
        frame = parse_bytes(log, source=tenant).frame
        pads = int((frame["phase"] == "pad").sum())
        assert (frame["phase"] == "op").sum() == 3 and pads >= 2
        assert log == kts_lines(tenant, tenant, 3, pads=pads)  # every line the pod printed, in order
        status = run.stderr_path("shared", tenant).read_text()
        assert "outcome: complete" in status

    scen = run.manifest()["scenarios"]["shared"]
    assert scen["status"] == "complete" and scen["backend"] == "kubernetes"
    assert scen["resolution_s"] == 1 and scen["node"] == "gpu-1"
    assert scen["tenants"]["fft"]["scheduled"] == "2025-01-01T12:00:05Z"
    assert result.tenants[0].events["pod"].startswith(job_name(run.run_id, "shared", "fft"))

    assert {t: c["timed_lines"] for t, c in scen["corun"].items()} == {"fft": 3, "gemm": 3}
    assert scen["padding_stopped_ns"] > scen["started_ns"]
    waits = layered_waits(run.read())
    assert list(waits["tenant"]) == ["fft", "gemm"]
    row = waits.iloc[0]
    assert (row.placement_wait_s, row.startup_s) == (2.0, 3.0)
    assert math.isnan(row.admission_wait_s)  # no queue, no admission layer

    # everything the scenario created is gone again
    assert not [n for n in cluster.live("batch/v1/jobs")]
    assert not [n for n in cluster.live("v1/pods")]
    deletes = [r for r in list(cluster.km) if r.method == "DELETE" and r.resource == "batch/v1/jobs"]
    assert {r.name for r in deletes} == {j["metadata"]["name"] for j in jobs}
    assert all("Foreground" in (r.params.get("propagationPolicy"), (r.data or {}).get("propagationPolicy")) for r in deletes)


async def test_describe_reports_what_kubernetes_sees_and_renamed_resource(cluster: FakeCluster, tmp_path: Path) -> None:
    cluster.add_node(gpu_node("gpu-1", allocatable=4, resource="nvidia.com/gpu.shared"))
    backend = cluster.backend()
    info = await asyncio.to_thread(backend.describe)
    assert info["summary"] == "Kubernetes sees 4 GPUs; the node has 1"
    assert (info["gpu_resource"], info["replicas"], info["sharing_strategy"]) == ("nvidia.com/gpu.shared", 4,
                                                                                   "time-slicing")
    assert info["warnings"] == []
    run, spec = make_run(tmp_path, ("fft",))
    await _run(backend, run, spec.scenario("baseline-fft"))
    limits = _jobs_created(cluster.km)[0]["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]
    assert limits == {"memory": "8Gi", "nvidia.com/gpu.shared": "1"}


async def test_describe_warns_when_time_slicing_is_not_configured(cluster: FakeCluster) -> None:
    node = gpu_node("plain", allocatable=1, replicas=None, strategy=None)
    del node["metadata"]["labels"]["nvidia.com/gpu.count"]
    cluster.add_node(node)
    info = await asyncio.to_thread(cluster.backend().describe)
    assert info["summary"] == "Kubernetes sees 1 GPUs; the node has 1"
    assert "time-slicing does not seem configured" in info["warnings"][0]


async def test_no_gpu_node_is_a_clear_error(cluster: FakeCluster) -> None:
    cpu = gpu_node("cpu-only")
    cpu["status"]["allocatable"] = {"cpu": "8"}
    cluster.add_node(cpu)
    with pytest.raises(BackendError, match=r"no schedulable node advertises nvidia.com/gpu .*device plugin"):
        await asyncio.to_thread(cluster.backend().describe)


async def test_kueue_admission_is_measured(cluster: FakeCluster, tmp_path: Path) -> None:
    cluster.add_node(gpu_node("gpu-1"))
    backend = cluster.backend(queue_name="kts-queue")
    run, spec = make_run(tmp_path, ("fft",))
    result = await _run(backend, run, spec.scenario("baseline-fft"))
    job = _jobs_created(cluster.km)[0]
    assert job["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "kts-queue"
    assert job["spec"]["suspend"] is True
    assert result.tenants[0].events["admitted"] == "2025-01-01T12:00:03Z"
    assert result.tenants[0].events["workload"].startswith("job-")
    row = layered_waits(run.read()).iloc[0]
    assert (row.admission_wait_s, row.placement_wait_s, row.startup_s) == (3.0, 2.0, 3.0)


# ------------------------------------------------------------------------------------------ faults

async def test_pending_insufficient_gpu_stops_and_blames_time_slicing(cluster: FakeCluster, tmp_path: Path) -> None:
    cluster.add_node(gpu_node("gpu-1", allocatable=2, replicas=None, strategy=None))
    cluster.behaviour["gemm"] = "unschedulable"
    run, spec = make_run(tmp_path)
    with pytest.raises(TenantFailed) as err:
        await _run(cluster.backend(schedule_timeout_s=0.5), run, spec.scenario("shared"), timeout_s=30)
    msg = str(err.value)
    assert "'gemm'" in msg and "Insufficient nvidia.com/gpu" in msg
    assert "time-slicing may not be configured" in msg and "nvidia.com/gpu.replicas=unset" in msg
    assert "\n" not in msg
    scen = run.manifest()["scenarios"]["shared"]
    assert scen["status"] == "failed" and scen["failed_tenant"] == "gemm"
    assert run.manifest()["status"] == "failed"
    assert "condition PodScheduled=False" in run.stderr_path("shared", "gemm").read_text()
    assert run.log_path("shared", "gemm").read_bytes() == b""  # the file exists, empty: no container ran
    assert not cluster.live("batch/v1/jobs") and not cluster.live("v1/pods")


async def test_too_few_gpu_slots_fails_before_creating_jobs(cluster: FakeCluster, tmp_path: Path) -> None:
    cluster.add_node(gpu_node("gpu-1", allocatable=1, replicas=1))
    run, spec = make_run(tmp_path)
    with pytest.raises(BackendError, match=r"needs 2 GPUs on one node.*nvidia.com/gpu.replicas=1.*time-slicing"):
        await _run(cluster.backend(), run, spec.scenario("shared"))
    assert not _jobs_created(cluster.km)


# ------------------------------------------------------------------------------ co-running on one GPU

async def test_multi_gpu_node_needs_the_packed_allocation_policy(cluster: FakeCluster, tmp_path: Path) -> None:
    cluster.add_node(gpu_node("gpu-1", allocatable=8, extra_labels={"nvidia.com/gpu.count": "2"}))
    run, spec = make_run(tmp_path)
    with pytest.raises(BackendError, match=r"node gpu-1 has 2 physical GPUs.*'distributed'.*packed"):
        await _run(cluster.backend(), run, spec.scenario("shared"))
    assert not _jobs_created(cluster.km)
    # a baseline (one tenant) needs no shared GPU; with the packed policy the shared scenario runs
    result = await _run(cluster.backend(allocation_policy="packed"), run, spec.scenario("shared"))
    assert result.status == "complete"
    with pytest.raises(SpecError, match="allocation_policy"):
        cluster.backend(allocation_policy="spread")


async def test_sharing_strategy_none_is_refused_for_a_shared_scenario(cluster: FakeCluster, tmp_path: Path) -> None:
    cluster.add_node(gpu_node("gpu-1", allocatable=2, replicas=None, strategy="none"))
    run, spec = make_run(tmp_path)
    with pytest.raises(BackendError, match=r"sharing strategy 'none' every tenant gets a GPU of its own"):
        await _run(cluster.backend(), run, spec.scenario("shared"))
    assert not _jobs_created(cluster.km)
    assert (await _run(cluster.backend(), run, spec.scenario("baseline-fft"))).status == "complete"


async def test_tenants_on_different_gpu_uuids_fail_the_scenario(cluster: FakeCluster, tmp_path: Path) -> None:
    cluster.add_node(gpu_node("gpu-1"))
    cluster.behaviour["gemm"] = "othergpu"
    run, spec = make_run(tmp_path)
    with pytest.raises(TenantFailed, match=r"fft on GPU-fake-0, gemm on GPU-fake-1"):
        await _run(cluster.backend(), run, spec.scenario("shared"))
    rec = run.manifest()["scenarios"]["shared"]
    assert rec["status"] == "failed" and "GPU-fake-1" in rec["reason"]
    assert not cluster.live("batch/v1/jobs")


async def test_padding_is_stopped_only_after_every_tenant_finished(cluster: FakeCluster, tmp_path: Path) -> None:
    """gemm finishes and pads; fft never finishes its timed iterations: no stop, and the pad limit fails it."""
    cluster.add_node(gpu_node("gpu-1"))
    cluster.behaviour["fft"] = "hang"
    run, spec = make_run(tmp_path)
    backend = cluster.backend()
    with pytest.raises(TenantFailed, match=r"tenant 'fft'.*padding went on for more than 0.5 s.*fft \(1 timed"):
        await asyncio.to_thread(backend.run_scenario, run, spec.scenario("shared"), timeout_s=20.0,
                                progress=False, pad_limit_s=0.5)
    rec = run.manifest()["scenarios"]["shared"]
    assert rec["status"] == "failed" and "padding_stopped_ns" in rec
    # the padder's streamed log is complete although its pod is gone (the emulator forgets deleted pods' logs)
    log = parse_bytes(run.log_path("shared", "gemm").read_bytes()).frame
    assert (log["phase"] == "op").sum() == 3 and (log["phase"] == "pad").sum() >= 2
    assert not cluster.live("batch/v1/jobs")


async def test_padders_keep_going_until_the_slow_tenant_is_done(cluster: FakeCluster, tmp_path: Path) -> None:
    """gemm is done after ~30 ms of log time, fft (10x slower) after ~210 ms: gemm must pad past that."""
    from conftest import corunning_fractions

    cluster.add_node(gpu_node("gpu-1"))
    cluster.behaviour["fft"] = "slow"
    run, spec = make_run(tmp_path)
    assert (await _run(cluster.backend(), run, spec.scenario("shared"), timeout_s=30.0)).status == "complete"
    got = corunning_fractions(run.path)
    assert got["shared/fft"][:2] == (3, 3) and got["shared/gemm"][:2] == (3, 3)
    assert got["shared/gemm"][2] > 10  # its padding ran on to cover the slow tenant's last iteration


async def test_baseline_does_not_pad_and_completes_by_itself(cluster: FakeCluster, tmp_path: Path) -> None:
    cluster.add_node(gpu_node("gpu-1"))
    run, spec = make_run(tmp_path)
    await _run(cluster.backend(), run, spec.scenario("baseline-fft"))
    job = _jobs_created(cluster.km)[0]
    assert _env(job)["KTS_PAD"] == "0" and float(_env(job)["KTS_LEAD_IN_S"]) > 0
    rec = run.manifest()["scenarios"]["baseline-fft"]
    assert "padding_stopped_ns" not in rec and rec["tenants"]["fft"]["waits"]["run_s"] == 12.0


@pytest.mark.parametrize(("mode", "code", "needle"), [
    ("imagepull", None, "ImagePullBackOff"),
    ("oom", 137, "OOMKilled (exit code 137)"),
    ("exit1", 1, "Error (exit code 1)"),
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
    assert needle in str(exc)
    assert f"pod {job_name(run.run_id, 'shared', 'gemm')}-" in str(exc)
    if mode == "exit1":
        assert str(exc).endswith("last stderr line: RuntimeError: CUDA error: out of memory")
    gemm_log = run.log_path("shared", "gemm").read_bytes()
    if mode == "imagepull":
        assert gemm_log == b""
    else:  # the lines the worker printed before it died are kept
        assert parse_bytes(gemm_log, source="gemm").n == 3
    assert needle.split(" ")[0] in run.stderr_path("shared", "gemm").read_text()
    assert run.log_path("shared", "fft").exists()
    assert run.manifest()["scenarios"]["shared"]["status"] == "failed"
    assert not cluster.live("batch/v1/jobs")


async def test_time_limit_stops_a_hanging_tenant(cluster: FakeCluster, tmp_path: Path) -> None:
    cluster.add_node(gpu_node("gpu-1"))
    cluster.behaviour["fft"] = "hang"
    run, spec = make_run(tmp_path, ("fft",))
    with pytest.raises(TenantFailed, match=r"did not finish within 1 s .*last state: running"):
        await _run(cluster.backend(), run, spec.scenario("baseline-fft"), timeout_s=1.0)
    assert parse_bytes(run.log_path("baseline-fft", "fft").read_bytes()).n == 1  # partial log kept
    assert not cluster.live("batch/v1/jobs")


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
    with pytest.raises(BackendError, match=r"forbids 'list' on 'nodes' \(cluster-wide\).*kts-node-reader"):
        await asyncio.to_thread(cluster.backend().describe)


async def test_leftovers_are_cleaned_and_nothing_else_is_touched(cluster: FakeCluster, tmp_path: Path) -> None:
    cluster.add_node(gpu_node("gpu-1"))
    kts = {MANAGED_BY: "kts", "kts.run-id": "old-run", "kts.scenario": "shared", "kts.tenant": "fft"}
    cluster.add_job("kts-leftover", kts, {"kts/run-id": "old-run"})
    cluster.add_job("kts-other-node", dict(kts, **{"kts.run-id": "other"}),
                    {"kts/run-id": "other", "kts/node": "gpu-2"})
    cluster.add_job("helm-job", {MANAGED_BY: "helm", "kts.run-id": "old-run"})
    cluster.add_job("plain-job", {"app": "web"})
    backend = cluster.backend()
    info = await asyncio.to_thread(backend.describe)
    assert info["leftover_jobs"] == ["kts-leftover"]
    run, spec = make_run(tmp_path, ("fft",))
    await _run(backend, run, spec.scenario("baseline-fft"))
    assert "kts-leftover" in cluster.deleted("batch/v1/jobs")
    assert {"kts-other-node", "helm-job", "plain-job"} <= set(cluster.live("batch/v1/jobs"))
    # an explicit cleanup of everything the kit owns still spares the foreign Jobs
    removed = await asyncio.to_thread(backend.cleanup)
    assert removed == ["kts-other-node"]
    assert set(cluster.live("batch/v1/jobs")) == {"helm-job", "plain-job"}


async def test_interrupt_cleans_up_and_records(cluster: FakeCluster, tmp_path: Path) -> None:
    cluster.add_node(gpu_node("gpu-1"))
    cluster.behaviour["fft"] = "hang"
    backend = cluster.backend()
    real = backend.api.list_pods
    calls = {"n": 0}

    def list_pods(selector: str) -> list[dict[str, Any]]:
        calls["n"] += 1
        if calls["n"] == 6:
            raise KeyboardInterrupt
        return real(selector)

    backend.api.list_pods = list_pods  # type: ignore[method-assign]
    run, spec = make_run(tmp_path, ("fft",))
    with pytest.raises(KeyboardInterrupt):
        await _run(backend, run, spec.scenario("baseline-fft"))
    scen = run.manifest()["scenarios"]["baseline-fft"]
    assert scen["status"] == "failed" and scen["reason"] == "interrupted (KeyboardInterrupt)"
    assert run.stderr_path("baseline-fft", "fft").exists()
    assert not cluster.live("batch/v1/jobs")


# ------------------------------------------------------------------------------------------ config errors

async def test_unreachable_api_names_context(tmp_path: Path) -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again below: nothing listens there
    cfg = tmp_path / "kubeconfig"
    cfg.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "lab",
        "clusters": [{"name": "c", "cluster": {"server": f"http://127.0.0.1:{port}"}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "lab", "context": {"cluster": "c", "user": "u"}}]}))
    backend = KubernetesBackend(kubeconfig=cfg)
    backend.api.api_client.configuration.retries = 0
    with pytest.raises(BackendError, match=rf"cannot reach the Kubernetes API at http://127.0.0.1:{port} "
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
    with pytest.raises(SpecError, match="only k=v"):
        parse_selector("zone in (a,b)")
    assert parse_selector("a=b, c, !d") == {"a": "b", "c": None, "d": "!"}


def test_label_values_and_names_are_sanitised() -> None:
    for raw in ("shared-fft+gemm", "x" * 80, "20250101T000000Z-article-lab run-ab12", "-lead", ""):
        value = label_value(raw)
        assert LABEL_RE.match(value) and len(value) <= 63
    assert label_value("shared") == "shared"
    assert label_value("a+b") != label_value("a-b")  # sanitising never merges distinct values
    names = {job_name("r" * 70, "shared-all+" * 5, t) for t in ("fft", "gemm", "llm")}
    assert len(names) == 3
    assert all(DNS_RE.match(n) and len(n) <= 52 for n in names)


def test_layered_waits_skips_other_backends(tmp_path: Path) -> None:
    run, _ = make_run(tmp_path)
    run.record_scenario("baseline-fft", {"status": "complete", "backend": "local", "tenants": {}})
    frame = layered_waits(run.read())
    assert frame.empty
    assert list(frame.columns)[:6] == ["scenario", "tenant", "admission_wait_s", "placement_wait_s", "startup_s",
                                       "run_s"]


# ------------------------------------------------------------------------------------------ scale out

async def test_scale_out_runs_one_experiment_per_node_at_once(cluster: FakeCluster, tmp_path: Path) -> None:
    from kubernetes import client

    from kts_helpers.run.spec import ExperimentParams

    cluster.add_node(gpu_node("gpu-a", extra_labels={"kts/pool": "bench"}))
    cluster.add_node(gpu_node("gpu-b", extra_labels={"kts/pool": "bench"}))
    cluster.add_node(gpu_node("gpu-c"))  # not in the pool
    experiments = [ExperimentParams(profile="tiny", workloads=("fft", "gemm"), label=f"cell{i}") for i in range(2)]
    api = client.ApiClient(client.Configuration(host=str(cluster.km.url).rstrip("/")))
    results = await asyncio.to_thread(
        scale_out, experiments, node_selector="kts/pool=bench", root=tmp_path, api_client=api, progress=False,
        namespace=NS, image="kts-worker:test", start_delay_s=0.0, poll_s=0.1, cleanup_timeout_s=5.0)
    assert [r.status for r in results] == ["complete", "complete"]
    assert {r.node for r in results} == {"gpu-a", "gpu-b"}
    assert len({r.run_path for r in results}) == 2
    assert cluster.max_runs_at_once == 2  # both experiments had Jobs at the same time
    for r in results:
        assert r.run_path is not None
        run_dir = Path(r.run_path)
        jobs = [j for j in _jobs_created(cluster.km) if j["metadata"]["annotations"]["kts/run-id"] == run_dir.name]
        assert len(jobs) == 5  # calibration (the kit's one runner calibrates everywhere), 2 baselines, shared x2
        assert {j["spec"]["template"]["spec"]["nodeSelector"]["kubernetes.io/hostname"] for j in jobs} == {r.node}
        assert sorted(p.name for p in (run_dir / "logs").iterdir()) == ["baseline-fft", "baseline-gemm",
                                                                       "calibration", "shared"]
        assert "floor_ms" in json.loads((run_dir / "manifest.json").read_text())["calibration"]


# ------------------------------------------------------------------------------------------ k8s_smoke

def _kubeconfig(path: Path, server: str, context: str = "lab") -> Path:
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": context,
        "clusters": [{"name": "c", "cluster": {"server": server}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": context, "context": {"cluster": "c", "user": "u"}}]}))
    return path


async def test_k8s_smoke_runs_a_tiny_experiment(cluster: FakeCluster, tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    from kts_helpers import k8s_smoke

    cluster.add_node(gpu_node("gpu-1"))
    cfg = _kubeconfig(tmp_path / "kubeconfig", str(cluster.km.url).rstrip("/"))
    code = await asyncio.to_thread(k8s_smoke.main, ["--kubeconfig", str(cfg), "--start-delay", "0",
                                                    "--root", str(tmp_path / "runs"), "--timeout", "20"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "Kubernetes sees 4 GPUs; the node has 1" in out and "context lab" in out
    (run_dir,) = (tmp_path / "runs").iterdir()
    assert "k8s-smoke" in run_dir.name
    assert sorted(p.name for p in (run_dir / "logs").iterdir()) == ["baseline-fft", "baseline-gemm", "calibration",
                                                                   "shared"]
    assert "placement_wait_s" in out
    assert not cluster.live("batch/v1/jobs")


async def test_k8s_smoke_cleanup_and_errors(cluster: FakeCluster, tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    from kts_helpers import k8s_smoke

    cluster.add_job("kts-leftover", {MANAGED_BY: "kts", "kts.run-id": "old"}, {"kts/run-id": "old"})
    cluster.add_job("web", {"app": "web"})
    cfg = _kubeconfig(tmp_path / "kubeconfig", str(cluster.km.url).rstrip("/"))
    code = await asyncio.to_thread(k8s_smoke.main, ["--kubeconfig", str(cfg), "--cleanup"])
    assert code == 0
    assert "removed 1 kts Job(s) from namespace kts: kts-leftover" in capsys.readouterr().out
    assert set(cluster.live("batch/v1/jobs")) == {"web"}

    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    code = await asyncio.to_thread(k8s_smoke.main, ["--kubeconfig", str(tmp_path / "missing")])
    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith("kts k8s-smoke: error: no kubeconfig found at") and err.count("\n") == 1
