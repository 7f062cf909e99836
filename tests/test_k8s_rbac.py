"""RBAC: the Role and ClusterRoles in manifests/base and the opt-in components/cluster-pod-list grant exactly
the calls the backend makes.

The calls are not listed by hand: one test drives the backend through every path that talks to the
API server (describe, a queued shared scenario with its Lease, a failure, clean-up of an orphaned pod,
the age-based clean-up, resume's look for submitted Jobs) against the emulated cluster, checks that
every public ``KubeApi`` method was used on the way, and derives (API group, resource, verb) from the
requests the emulator recorded. Both directions must hold: nothing called is missing from the rules,
nothing granted goes unused. The cluster-wide pod list is called only with the opt-in ``cluster_pod_list``;
without it the namespaced Role and the node reader cover every call. (tests/test_k8s_guard.py runs the kit
with the Role alone, the emulator enforcing it.)
"""

from __future__ import annotations

import asyncio
import inspect
from pathlib import Path
from typing import Any

import pytest
import yaml
from k8s_fixtures import INDEX, NS, emulated_cluster, gpu_node, make_run

from kts_helpers.errors import TenantFailed
from kts_helpers.run.backends.kubernetes.api import KubeApi

pytestmark = pytest.mark.timeout(120)
RBAC = Path(__file__).resolve().parents[1] / "manifests" / "base" / "rbac.yaml"
OPT_IN = Path(__file__).resolve().parents[1] / "manifests" / "components" / "cluster-pod-list" / "rbac.yaml"
PLUGIN_CONFIG = Path(__file__).resolve().parents[1] / "manifests" / "components" / "device-plugin-config" / "rbac.yaml"
PLUGIN_NS = "nvidia-device-plugin"
VERB = {"POST": "create", "PUT": "update", "PATCH": "patch"}


def _verb(request: Any) -> str:
    if request.method == "GET":
        if request.params.get("watch", "").lower() in ("true", "1"):
            return "watch"
        return "get" if request.name else "list"
    if request.method == "DELETE":
        return "delete" if request.name else "deletecollection"
    return VERB[request.method]


def _granted(kind: str, path: Path = RBAC) -> set[tuple[str, str, str]]:
    docs = [d for d in yaml.safe_load_all(path.read_text()) if d and d["kind"] == kind]
    return {(g, r, v) for d in docs for rule in d["rules"] for g in rule["apiGroups"] for r in rule["resources"]
            for v in rule["verbs"]}


@pytest.mark.parametrize("opt_in", [False, True])
async def test_rbac_grants_exactly_what_the_backend_calls(tmp_path: Path, opt_in: bool) -> None:
    used: set[str] = set()
    public = [n for n, f in inspect.getmembers(KubeApi, inspect.isfunction) if not n.startswith("_")]
    originals = {n: getattr(KubeApi, n) for n in public}

    def spy(name: str) -> Any:
        def wrapper(self: KubeApi, *args: Any, **kwargs: Any) -> Any:
            used.add(name)
            return originals[name](self, *args, **kwargs)
        return wrapper

    for name in public:
        setattr(KubeApi, name, spy(name))
    try:
        async with emulated_cluster() as fc:
            fc.add_node(gpu_node("gpu-1"))
            fc.add_configmap(PLUGIN_NS, "nvdp-config", {"any": "version: v1\nsharing:\n  timeSlicing:\n    "
                                                        "resources:\n      - name: nvidia.com/gpu\n        replicas: 4\n"})
            backend = fc.backend(queue_name="kts", lease_duration_s=3, cluster_pod_list=opt_in,  # renewed while it runs
                                 device_plugin_config=f"{PLUGIN_NS}/nvdp-config" if opt_in else None)
            run, spec = make_run(tmp_path)
            await asyncio.to_thread(backend.describe)
            await asyncio.to_thread(backend.run_scenario, run, spec.scenario("shared"), timeout_s=120, progress=False)
            fc.behaviour["fft"] = "unschedulable"  # the failure path: node state, events, pod status
            with pytest.raises(TenantFailed):
                await asyncio.to_thread(backend.run_scenario, run, spec.scenario("baseline-fft"), timeout_s=120,
                                        progress=False)
            # a pod of this run whose Job someone deleted with orphan propagation: clean-up removes it
            await fc._http("post", f"/api/v1/namespaces/{NS}/pods", {
                "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "orphan", "namespace": NS, "labels": {
                    "app.kubernetes.io/managed-by": "kts", "kts.run-id": run.run_id, INDEX: "0",
                    "batch.kubernetes.io/job-name": "gone"}}, "spec": {"containers": []}})
            assert await asyncio.to_thread(backend.cleanup, run.run_id) == []
            assert "orphan" in fc.deleted("v1/pods")
            await asyncio.to_thread(backend.cleanup_older_than, 3600)
            await asyncio.to_thread(backend.submitted_scenarios, run.run_id)
            ours = [r for r in fc.km.log if not r.headers.get("User-Agent", "").startswith("kmock/")]
    finally:
        for name, fn in originals.items():
            setattr(KubeApi, name, fn)
    opt_in_calls = {"read_configmap"}  # the device plugin's ConfigMap: only with device_plugin_config
    assert sorted(set(public) - used - (set() if opt_in else opt_in_calls)) == [], \
        "extend this test so that it exercises every API call"

    called = {(r.resource.group, r.resource.plural + (f"/{r.subresource}" if r.subresource else ""), _verb(r))
              for r in ours if r.resource is not None}
    # cluster-scoped requests (nodes; pods of every namespace on a node) need the ClusterRole
    cluster_wide = {(r.resource.group, r.resource.plural, _verb(r)) for r in ours
                    if r.resource is not None and r.namespace is None}
    namespaced = {(r.resource.group, r.resource.plural + (f"/{r.subresource}" if r.subresource else ""), _verb(r))
                  for r in ours if r.resource is not None and r.namespace == NS}
    in_plugin_ns = {(r.resource.group, r.resource.plural, _verb(r)) for r in ours
                    if r.resource is not None and r.namespace == PLUGIN_NS}
    assert called == namespaced | cluster_wide | in_plugin_ns
    # the opt-in Role of components/device-plugin-config, in the plugin's namespace: exactly its one call
    assert in_plugin_ns == (_granted("Role", PLUGIN_CONFIG) if opt_in else set())
    assert all(r.namespace is None for r in ours if r.resource is not None and r.resource.plural == "nodes")
    assert all(r.namespace in (None, NS, PLUGIN_NS) for r in ours if r.resource is not None)
    assert namespaced == _granted("Role"), (sorted(namespaced - _granted("Role")),
                                            sorted(_granted("Role") - namespaced))
    assert cluster_wide == _granted("ClusterRole") | (_granted("ClusterRole", OPT_IN) if opt_in else set())
    assert (("", "pods", "list") in cluster_wide) is opt_in
    print(f"\nRBAC calls in the namespace (Role), opt-in {opt_in}:", sorted(namespaced))
    print(f"RBAC calls cluster-wide (ClusterRoles), opt-in {opt_in}:", sorted(cluster_wide))


def test_the_rbac_test_would_notice_a_verb_too_many() -> None:
    role = _granted("Role")
    assert ("batch", "jobs", "create") in role and ("batch", "jobs", "watch") not in role
    assert not any(v in ("*", "deletecollection") for _, _, v in role | _granted("ClusterRole"))
    assert {v for g, r, v in role if r == "pods"} == {"list", "watch", "patch", "delete"}  # patch: the go only
    assert _granted("ClusterRole") == {("", "nodes", "get"), ("", "nodes", "list")}  # no pod of other namespaces
    assert _granted("ClusterRole", OPT_IN) == {("", "pods", "list")}
    assert _granted("Role", PLUGIN_CONFIG) == {("", "configmaps", "get")}  # one ConfigMap, by resourceNames
    docs = [d for d in yaml.safe_load_all(PLUGIN_CONFIG.read_text()) if d]
    (role,) = [d for d in docs if d["kind"] == "Role"]
    assert role["metadata"]["namespace"] == PLUGIN_NS and role["rules"][0]["resourceNames"] == ["nvdp-config"]
