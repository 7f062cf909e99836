"""The manifests: every overlay renders with kubectl kustomize and validates against the official schemas.

Schemas come bundled with kubernetes-validate (no network). The device-plugin ConfigMaps are
checked against the plugin's real config schema, the Jobs against the hardening the issue asks for,
and the Jobs the Python backend builds against the same schemas and the same hardening.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from functools import cache
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from kts_helpers.run.backends.kubernetes.jobs import build_hold_job, build_scenario_job
from kts_helpers.run.spec import ExperimentParams, resolve

ROOT = Path(__file__).resolve().parents[1]
MANIFESTS = ROOT / "manifests"
OVERLAYS = sorted(p.name for p in (MANIFESTS / "overlays").iterdir() if (p / "kustomization.yaml").exists())
JOB_OVERLAYS = [o for o in OVERLAYS if not o.startswith("device-plugin")]
K8S_VERSIONS = ["1.30.0", "1.37.0"]
KUBECTL = shutil.which("kubectl") or "/usr/bin/kubectl"


@cache
def render(overlay: str) -> tuple[dict[str, Any], ...]:
    return render_dir(MANIFESTS / "overlays" / overlay)


def render_dir(path: Path) -> tuple[dict[str, Any], ...]:
    out = subprocess.run([KUBECTL, "kustomize", str(path)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return tuple(d for d in yaml.safe_load_all(out.stdout) if d)


def kinds(overlay: str) -> list[str]:
    return [d["kind"] for d in render(overlay)]


def jobs(overlay: str) -> list[dict[str, Any]]:
    return [d for d in render(overlay) if d["kind"] == "Job"]


def test_expected_overlays_exist() -> None:
    assert set(OVERLAYS) == {"baseline-fft", "baseline-gemm", "shared", "shared-kueue", "device-plugin-timeslicing",
                             "device-plugin-mps"}
    assert kubernetes_validate.utils.all_versions()[-1] >= "1.37"  # the versions we claim are bundled


@pytest.mark.parametrize("version", K8S_VERSIONS)
@pytest.mark.parametrize("overlay", OVERLAYS)
def test_rendered_overlay_validates_strictly(overlay: str, version: str) -> None:
    docs = render(overlay)
    assert docs
    for doc in docs:
        kubernetes_validate.validate(doc, version, strict=True)


@pytest.mark.parametrize("version", K8S_VERSIONS)
def test_strict_validation_really_rejects_unknown_fields(version: str) -> None:
    job = dict(jobs("shared")[0])
    job["spec"] = dict(job["spec"], memoryLimit="4Gi")  # the field that does not exist
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(job, version, strict=True)


def test_cli_validates_offline_as_ci_would(tmp_path: Path) -> None:
    rendered = tmp_path / "shared.yaml"
    rendered.write_text(yaml.safe_dump_all(render("shared")))
    exe = shutil.which("kubernetes-validate", path=str(Path(__import__("sys").executable).parent))
    assert exe is not None
    for version in K8S_VERSIONS:
        out = subprocess.run([exe, "--strict", "-k", version, "--quiet", str(rendered)], capture_output=True,
                             text=True, timeout=120)
        assert out.returncode == 0, out.stdout + out.stderr


@pytest.mark.parametrize("overlay", JOB_OVERLAYS)
def test_job_overlays_hold_the_kit_objects_and_one_job_per_scenario(overlay: str) -> None:
    k = kinds(overlay)
    for kind in ("Namespace", "ServiceAccount", "Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding"):
        assert kind in k
    assert k.count("Job") == 1  # a scenario is one object: Kueue admits it as one Workload


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_no_overlay_resets_the_start_barrier(overlay: str) -> None:
    """The barrier is set per run (README); an overlay that carried kts-start-at would reset it on apply."""
    assert not [d for d in render(overlay) if d["kind"] == "ConfigMap" and d["metadata"]["name"] == "kts-start-at"]


def _hardened(pod: dict[str, Any], tenant: bool = True) -> None:
    """Pod Security "restricted" and the resources a tenant asks for (``tenant=False``: a placeholder's)."""
    psc = pod["securityContext"]
    assert psc["runAsNonRoot"] is True and psc["runAsUser"] >= 1000
    assert psc["seccompProfile"] == {"type": "RuntimeDefault"}
    assert pod["restartPolicy"] == "Never" and pod["automountServiceAccountToken"] is False
    (c,) = pod["containers"]
    sc = c["securityContext"]
    assert sc["allowPrivilegeEscalation"] is False and sc["privileged"] is False
    # not required by "restricted", and some CDI-mode GPU containers need a writable root: an option
    assert sc["readOnlyRootFilesystem"] is False and sc["runAsNonRoot"] is True
    assert sc["capabilities"] == {"drop": ["ALL"]}
    assert sc["seccompProfile"] == {"type": "RuntimeDefault"}
    mounts = {m["name"]: m["mountPath"] for m in c["volumeMounts"]}
    vols = {v["name"]: v for v in pod["volumes"]}
    assert "emptyDir" in vols[next(iter(mounts))] and mounts["scratch"] == "/scratch"
    if not tenant:  # a sleeping placeholder: minimal requests, one replica
        assert c["resources"] == {"requests": {"cpu": "10m", "memory": "64Mi"},
                                  "limits": {"memory": "64Mi", "nvidia.com/gpu": "1"}}
        return
    env = {e["name"]: e for e in c["env"]}
    assert env["HOME"]["value"] == "/scratch" and env["DEVICE"]["value"] == "cuda"
    # hand-applied manifests start at START_AT (ConfigMap kts-start-at, no barrier); the backend's Jobs at their
    # go file: the pod's own annotation through a downwardAPI volume
    assert "START_AT" in env or (env["KTS_GO_FILE"]["value"] == "/kts-go/start_at" and vols["go"]["downwardAPI"][
        "items"] == [{"path": "start_at", "fieldRef": {"fieldPath": "metadata.annotations['kts/start-at']"}}])
    assert c["resources"]["limits"]["nvidia.com/gpu"] == "1"
    assert c["resources"]["requests"] == {"cpu": "1", "memory": "8Gi"}
    assert c["resources"]["limits"]["cpu"] == "1" and c["resources"]["limits"]["memory"] == "8Gi"  # Guaranteed


@pytest.mark.parametrize("overlay", JOB_OVERLAYS)
def test_jobs_are_hardened_and_request_one_gpu_each(overlay: str) -> None:
    for job in jobs(overlay):
        assert job["spec"]["backoffLimit"] == 0
        assert job["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "kts"
        # hand-applied Jobs carry a run id too, so clean-up can find them
        assert job["metadata"]["labels"]["kts.run-id"] == "manual"
        assert job["spec"]["template"]["metadata"]["labels"]["kts.run-id"] == "manual"
        pod = job["spec"]["template"]["spec"]
        _hardened(pod)
        assert pod["serviceAccountName"] == "kts-worker"
        start = {e["name"]: e for e in pod["containers"][0]["env"]}["START_AT"]
        assert start["valueFrom"]["configMapKeyRef"] == {"name": "kts-start-at", "key": "START_AT"}
    sa = [d for d in render(overlay) if d["kind"] == "ServiceAccount" and d["metadata"]["name"] == "kts-worker"]
    assert sa[0]["automountServiceAccountToken"] is False
    ns = next(d for d in render(overlay) if d["kind"] == "Namespace")
    for mode in ("enforce", "warn", "audit"):
        assert ns["metadata"]["labels"][f"pod-security.kubernetes.io/{mode}"] == "restricted"
        assert ns["metadata"]["labels"][f"pod-security.kubernetes.io/{mode}-version"] == "latest"


def _plain_env(job: dict[str, Any]) -> dict[str, str]:
    return {e["name"]: e["value"] for e in job["spec"]["template"]["spec"]["containers"][0]["env"] if "value" in e}


def test_the_shared_scenario_is_one_indexed_job_with_the_baselines_settings() -> None:
    (shared,) = jobs("shared")
    spec = shared["spec"]
    assert spec["completionMode"] == "Indexed" and spec["completions"] == spec["parallelism"] == 2
    tenants = json.loads(_plain_env(shared)["KTS_TENANTS"])
    assert json.loads(shared["metadata"]["annotations"]["kts/tenants"]) == [t["TENANT"] for t in tenants]
    (fft,), (gemm,) = jobs("baseline-fft"), jobs("baseline-gemm")
    for entry, alone in zip(tenants, (fft, gemm), strict=True):
        # each index runs exactly what its tenant runs alone (the DF compares the two)
        assert entry == {k: v for k, v in _plain_env(alone).items() if k in entry}
        assert set(entry) == {"WORKLOAD", "TENANT", "ITERATIONS", "MATRIX_SIZE", "SLEEP_MS", "WARMUP", "THREADS"}
        assert alone["spec"]["template"]["spec"]["containers"][0]["resources"] == \
            shared["spec"]["template"]["spec"]["containers"][0]["resources"]
    env = _plain_env(shared)
    assert env["KTS_PAD"] == "1" and env["KTS_PAD_LIMIT_EXIT"] == "0" and float(env["KTS_LEAD_IN_S"]) > 0
    term = spec["template"]["spec"]["affinity"]["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert term[0]["topologyKey"] == "kubernetes.io/hostname"
    # the pod matches its own affinity term, so the first index can land and the other follows it
    assert term[0]["labelSelector"]["matchLabels"].items() <= spec["template"]["metadata"]["labels"].items()
    assert "kueue.x-k8s.io/queue-name" not in shared["metadata"]["labels"]
    for job in (fft, gemm):
        assert "affinity" not in job["spec"]["template"]["spec"]
        assert job["metadata"]["labels"]["kts.scenario"].startswith("baseline-")


def test_kueue_overlay_adds_queue_label_and_suspends_the_one_job() -> None:
    (job,) = jobs("shared-kueue")
    assert job["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "kts"
    assert job["spec"]["suspend"] is True and job["spec"]["completions"] == 2


def test_read_only_root_is_an_opt_in_component(tmp_path: Path) -> None:
    up = os.path.relpath(MANIFESTS, tmp_path)
    (tmp_path / "kustomization.yaml").write_text(yaml.safe_dump({
        "apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization",
        "resources": [f"{up}/overlays/shared"], "components": [f"{up}/components/read-only-root"]}))
    (job,) = [d for d in render_dir(tmp_path) if d["kind"] == "Job"]
    assert job["spec"]["template"]["spec"]["containers"][0]["securityContext"]["readOnlyRootFilesystem"] is True
    for version in K8S_VERSIONS:
        kubernetes_validate.validate(job, version, strict=True)


def _device_plugin_config(overlay: str) -> dict[str, Any]:
    (cm,) = [d for d in render(overlay) if d["kind"] == "ConfigMap"]
    assert cm["metadata"]["namespace"] == "gpu-operator"
    assert list(cm["data"]) == ["any"]
    return yaml.safe_load(cm["data"]["any"])


def test_time_slicing_configmap_uses_the_device_plugin_schema() -> None:
    cfg = _device_plugin_config("device-plugin-timeslicing")
    assert cfg["version"] == "v1"
    # replicas packed onto one physical GPU: on a multi-GPU node the tenants still share one
    assert cfg["flags"] == {"migStrategy": "none", "plugin": {"sharedDevicesAllocationPolicy": "packed"}}
    ts = cfg["sharing"]["timeSlicing"]
    assert ts["renameByDefault"] is False and ts["failRequestsGreaterThanOne"] is True
    assert ts["resources"] == [{"name": "nvidia.com/gpu", "replicas": 4}]
    assert set(cfg["sharing"]) == {"timeSlicing"}
    assert "memoryLimit" not in yaml.safe_dump(cfg)


def test_mps_configmap_uses_the_device_plugin_schema() -> None:
    cfg = _device_plugin_config("device-plugin-mps")
    assert cfg["version"] == "v1"
    assert set(cfg["sharing"]) == {"mps"}
    assert cfg["flags"]["plugin"] == {"sharedDevicesAllocationPolicy": "packed"}
    assert cfg["sharing"]["mps"]["resources"] == [{"name": "nvidia.com/gpu", "replicas": 4}]


def test_no_invented_resources_anywhere() -> None:
    # comments may explain what does not exist; the YAML itself must not use it
    text = "\n".join(re.sub(r"(^|\s)#.*", "", line) for p in MANIFESTS.rglob("*.yaml")
                     for line in p.read_text().splitlines())
    assert "kind: Job" in text and "timeSlicing" in text  # the stripping kept the content
    assert not re.search(r"kind:\s*TimeSlicingConfig", text)
    assert "memoryLimit" not in text


def test_rbac_binds_the_runner_and_grants_no_wildcards() -> None:
    """Which verbs: tests/test_k8s_rbac.py derives them from the backend's calls, both ways."""
    docs = render("shared")
    (role,) = [d for d in docs if d["kind"] == "Role"]
    assert role["metadata"]["namespace"] == "kts"
    (cluster_role,) = [d for d in docs if d["kind"] == "ClusterRole"]
    # the only cluster-wide read in base: nodes; the pods of every namespace are an opt-in component
    assert [(r["resources"], r["verbs"]) for r in cluster_role["rules"]] == [(["nodes"], ["get", "list"])]
    opt_in = list(yaml.safe_load_all((MANIFESTS / "components" / "cluster-pod-list" / "rbac.yaml").read_text()))
    assert [(r["resources"], r["verbs"]) for d in opt_in if d["kind"] == "ClusterRole" for r in d["rules"]] == [
        (["pods"], ["list"])]
    for binding in (d for d in docs if d["kind"] in ("RoleBinding", "ClusterRoleBinding")):
        assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "kts-runner", "namespace": "kts"}]
    assert "*" not in yaml.safe_dump([role, cluster_role])


def test_readme_documents_helm_values_and_cluster_policy_patch() -> None:
    readme = (MANIFESTS / "README.md").read_text()
    for needle in ("config.name=kts-time-slicing-config", "config.default=any", "clusterpolicies.nvidia.com",
                   '"devicePlugin"', "nvidia.com/device-plugin.config", "kubectl kustomize", "LocalQueue",
                   "--set runtimeClassName=nvidia", "GKE", "kts-start-at", "Lease", "--resume",
                   "components/read-only-root", "imagePullSecrets"):
        assert needle in readme


@pytest.mark.parametrize("version", K8S_VERSIONS)
def test_backend_jobs_validate_and_match_the_manifests(version: str) -> None:
    spec = resolve(ExperimentParams(profile="tiny", workloads=("fft", "gemm")), "cuda")
    manifest = jobs("shared")[0]
    for scenario in (spec.scenario("shared"), spec.scenario("baseline-fft")):
        job = build_scenario_job(run_id="20250101T000000Z-tiny-lab-ab12", scenario=scenario, namespace="kts",
                                 image="kts-worker:latest", node="gpu-1", barrier_timeout_s=1950.0,
                                 queue_name="kts", image_pull_secrets=("regcred",), placeholders=2,
                                 tolerations=({"key": "dedicated", "operator": "Equal", "value": "ml",
                                               "effect": "NoSchedule"},))
        kubernetes_validate.validate(job, version, strict=True)  # successPolicy, podFailurePolicy, downwardAPI
        pod = job["spec"]["template"]["spec"]
        _hardened(pod)
        manifest_pod = manifest["spec"]["template"]["spec"]
        assert pod["securityContext"] == manifest_pod["securityContext"]
        assert pod["containers"][0]["securityContext"] == manifest_pod["containers"][0]["securityContext"]
        assert pod["containers"][0]["resources"] == manifest_pod["containers"][0]["resources"]
        assert pod["serviceAccountName"] == manifest_pod["serviceAccountName"] == "kts-worker"
        assert pod["imagePullSecrets"] == [{"name": "regcred"}]
        assert job["spec"]["completionMode"] == manifest["spec"]["completionMode"] == "Indexed"
        assert job["spec"]["completions"] == len(scenario.tenants)  # the placeholders are a Job of their own
        hold = build_hold_job(job, 2, len(scenario.tenants))
        kubernetes_validate.validate(hold, version, strict=True)
        _hardened(hold["spec"]["template"]["spec"], tenant=False)
        assert hold["spec"]["completions"] == 2 and hold["metadata"]["name"] == job["metadata"]["name"] + "-hold"
        assert job["metadata"]["labels"]["kts.scenario"] == scenario.name
        assert job["spec"]["suspend"] is True


def test_the_written_device_plugin_configmap_never_says_another_replica_count() -> None:
    """``kts plan --configmap-out`` rewrites the overlay's replicas: its comments must not keep "4 clients
    ... 1/4" when replicas is 2 (issue #31's finding), and MPS on Kubernetes is not called local MPS."""
    from kts_helpers.plan.capacity import device_plugin_configmap

    for mode in ("mps", "timeslice"):
        text = device_plugin_configmap(mode, 2)
        assert "replicas: 2" in text
        assert not re.search(r"\b4 clients|1/4|replicas: 4", text), text
    assert "NOT the local backend's MPS mode" in device_plugin_configmap("mps", 2)


def test_the_launcher_runs_the_worker_where_the_image_puts_it() -> None:
    """The Job's command replaces the image's ENTRYPOINT (a placeholder index sleeps instead): it must exec the
    same worker path."""
    from kts_helpers.run.backends.kubernetes.jobs import LAUNCHER, WORKER_PATH

    text = (ROOT / "workers" / "Containerfile").read_text()
    assert f'ENTRYPOINT ["python", "-u", "{WORKER_PATH}"]' in text and WORKER_PATH in LAUNCHER
    env = {"PATH": os.environ.get("PATH", ""), "KTS_TENANTS": '[{"TENANT": "fft"}]', "JOB_COMPLETION_INDEX": "1",
           "KTS_HOLD_S": "0", "NVIDIA_VISIBLE_DEVICES": "GPU-1234"}
    out = subprocess.run([sys.executable, "-u", "-c", LAUNCHER], env=env, capture_output=True, text=True, timeout=30)
    # no libnvidia-ml here: the environment's value, said to be one (NVML answers on a GPU node: test_k8s_conditions)
    assert out.returncode == 0 and out.stdout == "kts_placeholder: holding index=1 gpu=GPU-1234 source=env\n"
    tenant = subprocess.run([sys.executable, "-u", "-c", LAUNCHER], env={**env, "JOB_COMPLETION_INDEX": "0"},
                            capture_output=True, text=True, timeout=30)
    assert tenant.returncode != 0 and WORKER_PATH in tenant.stderr  # it exec'd the worker (absent here)


def test_containerfile_builds_a_non_root_worker_image() -> None:
    text = (ROOT / "workers" / "Containerfile").read_text()
    assert re.search(r"^USER 10001:10001$", text, re.M)  # numeric: runAsNonRoot can verify it
    copied = " ".join(re.findall(r"^COPY (?!--from)(.*) /opt/kts/$", text, re.M))
    parts = {p.name for p in (ROOT / "workers").glob("kts_*.py")}
    assert parts <= set(copied.split()), parts - set(copied.split())  # every part of the worker is in the image
    assert 'ENTRYPOINT ["python", "-u", "/opt/kts/kts_worker.py"]' in text
    assert re.search(r'pip install .*"torch==\$\{TORCH_VERSION\}"', text)
    assert (ROOT / "workers" / "kts_worker.py").exists()  # the build context is workers/
    final_stage = text.rsplit("\nFROM ", 1)[1]
    assert final_stage.index("USER 10001") > final_stage.index("COPY kts_worker.py")


def test_the_docs_describe_two_jobs_and_the_go_bound_as_the_emulators() -> None:
    """manifests/README.md and the Kubernetes guide describe what the backend builds (issue 50): the placeholders are
    a Job of their own (``jobs.build_hold_job``), no longer indexes of the tenants' Job completed by a
    ``successPolicy``; and the go's 5.25 s is the emulator's number (``k8s_fixtures.GO_BOUND_S``: the kubelet's
    periods on that path, an assumed second for the watch, times 1.5), not an upstream bound. Fails on the old
    README (placeholders "share the Job ... a successPolicy completes the Job") and on a bound stated as the
    kubelet's."""
    from k8s_fixtures import GO_BOUND_S

    readme = (MANIFESTS / "README.md").read_text()
    guide = (ROOT / "docs" / "guide" / "kubernetes.md").read_text()
    assert "successPolicy" not in readme and "They share the Job" not in readme
    assert "A second Indexed Job of the scenario, `<job>-hold`" in readme
    bound = f"{GO_BOUND_S:g} s"
    for text in (readme, " ".join(guide.split())):
        flat = " ".join(text.split())
        assert bound in flat and "the emulator's number, not" in flat, bound
