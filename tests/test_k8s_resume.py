"""The Kubernetes backend when the client goes away (``kts run --resume``), across several nodes and clients
(scale-out through node Leases), and the ``k8s-smoke`` command; on the emulated cluster of tests/k8s_fixtures.
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import pytest
from k8s_fixtures import FakeCluster, emulated_cluster, gpu_node, kubeconfig_file, make_run, until

from kts_helpers.run.backends.kubernetes.backend import KubernetesBackend
from kts_helpers.run.backends.kubernetes.jobs import pinned_node
from kts_helpers.run.backends.kubernetes.lifecycle import ScenarioRun
from kts_helpers.run.backends.kubernetes.names import MANAGED_BY, job_name
from kts_helpers.run.backends.kubernetes.state import pod_state
from kts_helpers.run.experiment import resume_experiment
from kts_helpers.run.runs import Run
from kts_helpers.run.scale import scale_out
from kts_helpers.run.spec import ExperimentParams

pytestmark = pytest.mark.timeout(120)
JOBS, PODS, LEASES = "batch/v1/jobs", "v1/pods", "coordination.k8s.io/v1/leases"


@pytest.fixture
async def cluster() -> Any:
    async with emulated_cluster() as fc:
        fc.add_node(gpu_node("gpu-1"))
        yield fc


def _abandon(backend: KubernetesBackend, run: Run, scenario: Any, *, released: bool = True) -> str:
    """A client that submitted the scenario's Job, released its start barrier (``released``) and then died
    (no more watching, no clean-up, no record)."""
    run.claim_scenario(scenario.name)
    sr = ScenarioRun(backend, run, scenario, backend.pick_node(), timeout_s=120.0, pad_limit_s=120.0, progress=False)
    sr.start()
    deadline = time.monotonic() + 60
    while released:
        assert time.monotonic() < deadline, "the tenants never got ready"
        _, pods, _ = sr.snapshot()
        sr.live.follow(backend.api, pods, {t: pod_state(pods.get(t)) for t in sr.tenants}, 0.1, backend.clock)
        if sr.poll_barrier(pods):
            break
        time.sleep(0.02)
    return sr.name


_until = until


def _condition(fc: FakeCluster, job: str, kind: str) -> bool:
    obj = fc.live(JOBS).get(job) or {}
    return any(c["type"] == kind and c["status"] == "True" for c in obj.get("status", {}).get("conditions", []))


# ------------------------------------------------------------------------------------------ resume

async def test_resume_collects_what_completed_while_the_client_was_away(cluster: FakeCluster, tmp_path: Path) -> None:
    backend = cluster.backend()
    run, spec = make_run(tmp_path)
    fft_job = await asyncio.to_thread(_abandon, backend, run, spec.scenario("baseline-fft"))
    shared_job = job_name(run.run_id, "shared")
    await _until(lambda: _condition(cluster, fft_job, "Complete"))
    pods = {p["metadata"]["name"] for p in cluster.live(PODS).values() if p["metadata"]["labels"]["job-name"] == fft_job}

    resumed = await asyncio.to_thread(resume_experiment, str(run.path), backend=backend, progress=False)

    m = resumed.manifest()
    assert m["status"] == "complete" and "floor_ms" in m["calibration"]
    rec = m["scenarios"]["baseline-fft"]
    assert rec["status"] == "complete" and rec["how"] == "collected" and rec["job"] == fft_job
    assert run.log_path("baseline-fft", "fft").read_bytes() == cluster.logs[pods.pop()]  # every line, from the pod
    assert {m["scenarios"][s]["how"] for s in ("baseline-gemm", "shared", "calibration")} == {"submitted"}
    created = [r.data["metadata"]["name"] for r in cluster.requests("post", JOBS)]
    assert created.count(fft_job) == 1 and created.count(shared_job) == 1  # nothing ran twice
    assert not cluster.live(JOBS) and not cluster.live(LEASES)


async def test_resume_follows_a_job_that_is_still_running(cluster: FakeCluster, tmp_path: Path) -> None:
    """The shared Job is still padding when the client comes back: it is followed from the pods' first
    byte and stopped as usual; the other scenarios run only after it (it holds the GPU)."""
    backend = cluster.backend()
    run, spec = make_run(tmp_path)
    shared_job = await asyncio.to_thread(_abandon, backend, run, spec.scenario("shared"))
    await _until(lambda: all(p.get("status", {}).get("phase") == "Running" for p in cluster.live(PODS).values())
                 and len(cluster.live(PODS)) == 2)

    await asyncio.to_thread(resume_experiment, str(run.path), backend=backend, progress=False)

    m = run.manifest()
    assert m["status"] == "complete"
    rec = m["scenarios"]["shared"]
    assert rec["how"] == "attached" and rec["padding_stopped_ns"] > 0
    assert m["scenarios"]["calibration"]["started_ns"] > rec["started_ns"]  # the attached Job went first
    assert cluster.max_runs_per_node == 1
    for tenant in ("fft", "gemm"):
        ev = rec["tenants"][tenant]
        assert run.log_path("shared", tenant).read_bytes() == cluster.logs[ev["pod"]]
    assert [r.data["metadata"]["name"] for r in cluster.requests("post", JOBS)].count(shared_job) == 1


async def test_resume_replaces_a_job_that_failed_while_the_client_was_away(cluster: FakeCluster,
                                                                          tmp_path: Path) -> None:
    backend = cluster.backend()
    run, spec = make_run(tmp_path, ("fft",))
    cluster.behaviour["fft"] = "exit1"
    fft_job = await asyncio.to_thread(_abandon, backend, run, spec.scenario("baseline-fft"))
    await _until(lambda: _condition(cluster, fft_job, "Failed"))
    cluster.behaviour["fft"] = "ok"

    await asyncio.to_thread(resume_experiment, str(run.path), backend=backend, progress=False)

    rec = run.manifest()["scenarios"]["baseline-fft"]
    assert rec["status"] == "complete" and rec["how"] == "replaced"
    assert fft_job in {r.name for r in cluster.requests("delete", JOBS)}
    assert [r.data["metadata"]["name"] for r in cluster.requests("post", JOBS)].count(fft_job) == 2


async def test_a_shared_job_completes_without_its_client_and_is_checked_on_resume(cluster: FakeCluster,
                                                                                 tmp_path: Path) -> None:
    """Nobody stops the padding: each worker pads for its own limit and ends with exit 0, so the Job completes;
    resume collects it and checks from the logs that the padding covered every neighbour."""
    backend = cluster.backend()
    run, spec = make_run(tmp_path)
    shared_job = await asyncio.to_thread(_abandon, backend, run, spec.scenario("shared"))
    await _until(lambda: _condition(cluster, shared_job, "Complete"), timeout_s=90)

    await asyncio.to_thread(resume_experiment, str(run.path), backend=backend, progress=False)

    rec = run.manifest()["scenarios"]["shared"]
    assert rec["status"] == "complete" and rec["how"] == "collected"
    assert all(c["pad_lines"] > 100 for c in rec["corun"].values())  # they padded to their limit
    assert all(ev["exit_code"] == 0 for ev in rec["tenants"].values())


async def test_kts_run_resume_on_the_command_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    from kts_helpers import cli
    from kts_helpers.run.experiment import setup_run

    async with emulated_cluster(realtime=True) as fc:
        fc.add_node(gpu_node("gpu-1"))
        cfg = kubeconfig_file(tmp_path / "kubeconfig", str(fc.km.url).rstrip("/"))
        monkeypatch.setenv("KUBECONFIG", str(cfg))
        for var in ("K8S_CONTEXT", "K8S_NODE_SELECTOR", "K8S_QUEUE", "KUBERNETES_SERVICE_HOST", "KTS_DCGM_URL"):
            monkeypatch.delenv(var, raising=False)
        options = {"namespace": "kts", "image": "kts-worker:test", "start_delay_s": 3.0, "poll_s": 0.1}
        params = ExperimentParams(profile="tiny", backend="kubernetes", calibrate_iterations=0)
        run, spec, _ = await asyncio.to_thread(setup_run, params, root=tmp_path / "runs", backend_options=options,
                                               progress=False)
        assert run.read().environment["node"] == "gpu-1"
        backend = KubernetesBackend(**options, kubeconfig=cfg)
        await asyncio.to_thread(_abandon, backend, run, spec.scenario("baseline-fft"))

        code = await asyncio.to_thread(cli.main, ["run", "--resume", run.run_id, "--root", str(tmp_path / "runs"),
                                                  "--backend", "kubernetes", "--quiet"])
        assert code == 0, capsys.readouterr().err
        assert capsys.readouterr().out.strip() == str(run.path)
        m = run.manifest()
        assert m["status"] == "complete" and m["scenarios"]["baseline-fft"]["how"] in ("collected", "attached")
        assert {s["node"] for s in m["scenarios"].values()} == {"gpu-1"}

        code = await asyncio.to_thread(cli.main, ["run", "--resume", run.run_id, "--profile", "article",
                                                  "--root", str(tmp_path / "runs")])
        err = capsys.readouterr().err
        assert code == 2 and err.startswith("kts: error: --resume continues a run with its own parameters; drop "
                                            "--profile") and err.count("\n") == 1


# ------------------------------------------------------------------------------------------ several nodes, clients

async def test_scale_out_takes_each_node_by_its_lease(tmp_path: Path) -> None:
    """Three experiments, two nodes: two run at once, the third waits for a node's Lease; never two on one node."""
    from kubernetes import client

    async with emulated_cluster() as fc:
        fc.add_node(gpu_node("gpu-a", extra_labels={"kts/pool": "bench"}))
        fc.add_node(gpu_node("gpu-b", extra_labels={"kts/pool": "bench"}))
        fc.add_node(gpu_node("gpu-c"))  # not in the pool
        experiments = [ExperimentParams(profile="tiny", workloads=("fft", "gemm"), label=f"cell{i}") for i in range(3)]
        api = client.ApiClient(client.Configuration(host=str(fc.km.url).rstrip("/")))
        results = await asyncio.to_thread(
            scale_out, experiments, node_selector="kts/pool=bench", root=tmp_path, api_client=api, progress=False,
            namespace="kts", image="kts-worker:test", start_delay_s=8.0, poll_s=0.1, cleanup_timeout_s=10.0,
            clock=fc.clock)
        assert [r.status for r in results] == ["complete"] * 3, [r.error for r in results]
        assert {r.node for r in results} == {"gpu-a", "gpu-b"}
        assert fc.max_runs_at_once == 2 and fc.max_runs_per_node == 1
        for r in results:
            assert r.run_path is not None
            run_dir = Path(r.run_path)
            jobs = [j.data for j in fc.requests("post", JOBS) if j.data["metadata"]["annotations"]["kts/run-id"]
                    == run_dir.name and not j.data["metadata"]["name"].endswith("-hold")]
            assert len(jobs) == 4  # calibration, 2 baselines, shared: one Job each
            assert {pinned_node(j["spec"]["template"]["spec"]) for j in jobs} == {r.node}
            assert "floor_ms" in json.loads((run_dir / "manifest.json").read_text())["calibration"]
        assert not fc.live(LEASES) and not fc.live(JOBS)


async def test_two_clients_on_one_node_take_turns(cluster: FakeCluster, tmp_path: Path) -> None:
    first, second = cluster.backend(lease_wait_s=60.0), cluster.backend(lease_wait_s=60.0)
    assert first.identity != second.identity
    run_a, spec_a = make_run(tmp_path / "a")
    run_b, spec_b = make_run(tmp_path / "b")
    results = await asyncio.gather(
        asyncio.to_thread(first.run_scenario, run_a, spec_a.scenario("shared"), timeout_s=120, progress=False),
        asyncio.to_thread(second.run_scenario, run_b, spec_b.scenario("shared"), timeout_s=120, progress=False))
    assert [r.status for r in results] == ["complete", "complete"]
    assert cluster.max_runs_per_node == 1  # one after the other, never together
    waited = sorted(r.manifest()["scenarios"]["shared"]["lease"]["waited_for_node_s"] for r in (run_a, run_b))
    assert waited[1] > waited[0]


# ------------------------------------------------------------------------------------------ k8s_smoke


async def test_k8s_smoke_runs_a_tiny_experiment(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from kts_helpers import k8s_smoke

    async with emulated_cluster(realtime=True) as fc:
        fc.add_node(gpu_node("gpu-1"))
        cfg = kubeconfig_file(tmp_path / "kubeconfig", str(fc.km.url).rstrip("/"))
        code = await asyncio.to_thread(k8s_smoke.main, ["--kubeconfig", str(cfg), "--start-delay", "2",
                                                        "--root", str(tmp_path / "runs"), "--timeout", "60"])
        out = capsys.readouterr().out
        assert code == 0, out
        assert "Kubernetes sees 4 GPUs; the node has 1" in out and "context lab" in out
        (run_dir,) = (tmp_path / "runs").iterdir()
        assert "k8s-smoke" in run_dir.name
        assert sorted(p.name for p in (run_dir / "logs").iterdir()) == ["baseline-fft", "baseline-gemm",
                                                                       "calibration", "shared"]
        assert "placement_wait_s" in out and "barrier_wait_s" in out
        assert not fc.live(JOBS)


async def test_k8s_smoke_cleanup_removes_only_old_kit_jobs(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    async with emulated_cluster(realtime=True) as cluster:  # k8s_smoke's backend has the real clock
        await _smoke_cleanup(cluster, tmp_path, capsys, monkeypatch)


async def _smoke_cleanup(cluster: FakeCluster, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                         monkeypatch: pytest.MonkeyPatch) -> None:
    from kts_helpers import k8s_smoke

    cluster.add_job("kts-ancient", {MANAGED_BY: "kts", "kts.run-id": "old"}, {"kts/run-id": "old"}, age_s=3 * 86400)
    cluster.add_job("kts-today", {MANAGED_BY: "kts", "kts.run-id": "new"}, {"kts/run-id": "new"}, age_s=3600)
    cluster.add_job("web", {"app": "web"}, age_s=9 * 86400)
    cfg = kubeconfig_file(tmp_path / "kubeconfig", str(cluster.km.url).rstrip("/"))
    code = await asyncio.to_thread(k8s_smoke.main, ["--kubeconfig", str(cfg), "--cleanup", "--older-than", "48"])
    assert code == 0
    assert "removed 1 kts Job(s) older than 48 h from namespace kts: kts-ancient" in capsys.readouterr().out
    assert set(cluster.live(JOBS)) == {"kts-today", "web"}

    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    code = await asyncio.to_thread(k8s_smoke.main, ["--kubeconfig", str(tmp_path / "missing")])
    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith("kts k8s-smoke: error: no kubeconfig found at") and err.count("\n") == 1
