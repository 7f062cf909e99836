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
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from k8s_fixtures import INDEX, NS, emulated_cluster, gpu_node, make_run, until

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
            fc.add_configmap(PLUGIN_NS, "kts-time-slicing-config", {"any": "version: v1\nsharing:\n  timeSlicing:\n    "
                                                        "resources:\n      - name: nvidia.com/gpu\n        replicas: 4\n"})
            backend = fc.backend(queue_name="kts", lease_duration_s=3, cluster_pod_list=opt_in,  # renewed while it runs
                                 device_plugin_config=f"{PLUGIN_NS}/kts-time-slicing-config" if opt_in else None)
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
            await until(lambda: "orphan" in fc.deleted("v1/pods"))  # a pod's delete is graceful: gone a tick later
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


def helm_configmap_name(release: str, chart: str = "nvidia-device-plugin", name_override: str = "") -> str:
    """The ConfigMap the device plugin's Helm chart generates from ``config.map``: deployments/helm/
    nvidia-device-plugin/templates/_helpers.tpl, ``configMapName`` = ``printf "%s-%s" fullname "configs"``, with
    ``fullname`` the release name when it contains the chart's name, else ``<release>-<chart>`` (63 characters,
    "-" trimmed)."""
    name = name_override or chart
    full = release if name in release else f"{release}-{name}"
    return f"{full[:63].rstrip('-')}-configs"


def test_the_config_readers_role_names_the_configmaps_the_plugin_is_given() -> None:
    """The opt-in Role's ``resourceNames`` name the ConfigMaps a plugin is actually given: the kit's own (the
    ConfigMaps manifests/overlays/device-plugin-timeslicing and -mps render, which the docs pass as the chart's
    ``config.name`` or the GPU Operator's) and the one the Helm chart generates from ``config.map`` for the release
    of manifests/README.md (nvdp). Fails on the old ``[nvdp-config]``, which is neither (issue 50: every read was a
    403 and the values "unverified")."""
    from test_k8s_manifests import render

    docs = [d for d in yaml.safe_load_all(PLUGIN_CONFIG.read_text()) if d]
    (role,) = [d for d in docs if d["kind"] == "Role"]
    names = set(role["rules"][0]["resourceNames"])
    own = {d["metadata"]["name"] for o in ("device-plugin-timeslicing", "device-plugin-mps") for d in render(o)
           if d["kind"] == "ConfigMap"}
    readme = (Path(__file__).resolve().parents[1] / "manifests" / "README.md").read_text()
    release = re.search(r"helm upgrade -i (\S+) nvdp/nvidia-device-plugin", readme)[1]
    assert role["metadata"]["namespace"] == PLUGIN_NS and own == {"kts-time-slicing-config", "kts-mps-config"}
    assert names == own | {helm_configmap_name(release)} == {*own, "nvdp-nvidia-device-plugin-configs"}
    assert helm_configmap_name("nvidia-device-plugin") == "nvidia-device-plugin-configs"  # the chart's own rule


def test_the_base_with_the_opt_in_component_keeps_the_role_in_the_plugins_namespace(tmp_path: Path) -> None:
    """``kubectl kustomize`` of manifests/base with components/device-plugin-config listed under its components (as
    the component's comment says to use it): the Role and RoleBinding stay in the plugin's namespace, the kit's
    own resources are in kts. base sets its namespace with kustomize's NamespaceTransformer and ``unsetOnly``
    (kustomize api/filters/namespace: a set namespace is left alone), not with ``namespace:``, which moves every
    namespaced resource. Fails on the old base (``namespace: kts``: the Role rendered into kts, where it grants
    nothing, and the kit found the ConfigMap unreadable)."""
    import shutil

    from test_k8s_manifests import render_dir

    copy = tmp_path / "manifests"
    shutil.copytree(Path(__file__).resolve().parents[1] / "manifests", copy)
    base = copy / "base" / "kustomization.yaml"
    base.write_text(base.read_text() + "components:\n  - ../components/device-plugin-config\n")
    placed = {(d["kind"], d["metadata"]["name"]): d["metadata"].get("namespace") for d in render_dir(copy / "base")}
    assert placed[("Role", "kts-device-plugin-config-reader")] == PLUGIN_NS
    assert placed[("RoleBinding", "kts-device-plugin-config-reader")] == PLUGIN_NS
    assert placed[("Role", "kts-runner")] == placed[("ServiceAccount", "kts-worker")] == "kts"
    assert placed[("PriorityClass", "kts-tenant")] is None and placed[("Namespace", "kts")] is None
    # what manifests/kind/run-kind.sh applies (the component beside base, the narrowed pod patch): the same places
    kind = {(d["kind"], d["metadata"]["name"]): d["metadata"].get("namespace")
            for d in render_dir(Path(__file__).resolve().parents[1] / "manifests" / "kind")}
    assert kind[("Role", "kts-device-plugin-config-reader")] == PLUGIN_NS and kind[("Role", "kts-runner")] == "kts"
    assert ("ValidatingAdmissionPolicy", "kts-runner-pod-patch") in kind


# ------------------------------------------------------------------------------ the docs' RBAC tables

ROOT = Path(__file__).resolve().parents[1]
RBAC_TABLES = [ROOT / "docs" / "guide" / "kubernetes.md", ROOT / "manifests" / "README.md"]
K8S_VERBS = ("get", "list", "watch", "create", "update", "patch", "delete", "deletecollection")
# how the tables name a resource -> (API group, resource)
DOC_RESOURCES = {"jobs": ("batch", "jobs"), "pods": ("", "pods"), "pods/log": ("", "pods/log"),
                 "events": ("", "events"), "kueue workloads": ("kueue.x-k8s.io", "workloads"),
                 "leases": ("coordination.k8s.io", "leases"), "nodes": ("", "nodes"),
                 "configmaps": ("", "configmaps")}
_VERB = "|".join(K8S_VERBS)
_RULE = re.compile(rf"^\s*(?P<noun>[A-Za-z][A-Za-z/ ]*?)\s+(?P<verbs>(?:{_VERB})(?:/(?:{_VERB}))*)(?![\w/])")
Scope = tuple[str, str, str | None]  # (Role | ClusterRole, its name, its namespace; "*": "the plugin's namespace")
Rules = dict[tuple[str, str], tuple[frozenset[str], tuple[str, ...] | None]]  # -> (verbs, resourceNames)


def _manifest_grants() -> dict[Scope, Rules]:
    """Every Role and ClusterRole of manifests/base and of the opt-in components: scope -> (group, resource) ->
    (verbs, resourceNames)."""
    paths = [ROOT / "manifests" / "base" / "rbac.yaml",
             *sorted((ROOT / "manifests" / "components").glob("*/*.yaml"))]
    out: dict[Scope, Rules] = {}
    for path in paths:
        for d in yaml.safe_load_all(path.read_text()):
            if not d or d.get("kind") not in ("Role", "ClusterRole"):
                continue
            meta = d["metadata"]
            scope = (d["kind"], meta["name"], meta.get("namespace") if d["kind"] == "Role" else None)
            rules = out.setdefault(scope, {})
            for rule in d["rules"]:
                for g in rule["apiGroups"]:
                    for r in rule["resources"]:
                        verbs, _ = rules.get((g, r), (frozenset(), None))
                        rules[(g, r)] = (verbs | set(rule["verbs"]), tuple(rule.get("resourceNames") or ()))
    return out


def _doc_table(text: str) -> list[list[str]]:
    """The cells of the table whose header begins ``| grant |`` (one per document), separator row dropped."""
    lines = text.splitlines()
    (start,) = [i for i, ln in enumerate(lines) if ln.startswith("| grant |")]
    rows = []
    for ln in lines[start + 2:]:
        if not ln.startswith("|"):
            break
        rows.append([c.strip() for c in ln.strip().strip("|").split("|")])
    return rows


def _doc_grants(text: str) -> dict[Scope, Rules]:
    """The table's rows as the manifests' shape: the grant cell names the kind, the role and its namespace; the
    second cell lists ``<resource> <verb>/<verb>...`` separated by ";" (parentheses are commentary), with
    ``resourceNames`` (and the names where given) beside the resource it narrows."""
    out: dict[Scope, Rules] = {}
    for cells in _doc_table(text):
        grant, calls = cells[0], cells[1].replace("**", "")
        m = re.match(r"(Role|ClusterRole) `([^`]+)`", grant)
        assert m, f"grant cell names no Role/ClusterRole: {grant!r}"
        ns_m = re.search(r"namespace `([^`]+)`", grant)
        ns = None if m[1] == "ClusterRole" else ns_m[1] if ns_m else "*" if "namespace" in grant else None
        rules: Rules = {}
        for segment in calls.split(";"):
            named = re.search(r"resourceNames(?::\s*\[([^\]]*)\])?", segment)
            names: tuple[str, ...] | None = ()
            if named:
                names = tuple(n.strip() for n in named[1].split(",")) if named[1] is not None else None
            plain = segment
            while re.search(r"\([^()]*\)", plain):
                plain = re.sub(r"\s*\([^()]*\)", "", plain)
            rm = _RULE.match(plain)
            if rm is None:
                assert not any(plain.strip().lower().startswith(n) for n in DOC_RESOURCES), \
                    f"{segment!r}: a resource without verbs the check can read"
                continue
            noun = rm["noun"].strip().lower()
            assert noun in DOC_RESOURCES, f"{segment!r}: resource {noun!r} unknown to this check (DOC_RESOURCES)"
            rules[DOC_RESOURCES[noun]] = (frozenset(rm["verbs"].split("/")), names)
        out[(m[1], m[2], ns)] = rules
    return out


def _compare_docs(doc: dict[Scope, Rules], manifests: dict[Scope, Rules]) -> list[str]:
    """What differs between a table and the manifests (both ways); [] when they agree."""
    def match(d: Scope) -> Scope | None:
        return next((s for s in manifests if s[:2] == d[:2] and (d[2] == s[2] or (d[2] == "*" and s[0] == "Role"))),
                    None)

    problems = []
    for scope, rules in doc.items():
        ms = match(scope)
        if ms is None:
            problems.append(f"{scope}: in the table, not in the manifests")
            continue
        got = manifests[ms]
        for key in sorted(set(rules) | set(got)):
            if key not in got or key not in rules:
                problems.append(f"{scope} {key}: {'only in the table' if key not in got else 'not in the table'}")
                continue
            (dv, dn), (mv, mn) = rules[key], got[key]
            if dv != mv:
                problems.append(f"{scope} {key}: verbs {sorted(dv)} in the table, {sorted(mv)} in the manifests")
            if (dn is None and not mn) or (dn is not None and dn != mn):
                said = "named without the names" if dn is None else list(dn)
                problems.append(f"{scope} {key}: resourceNames {said} in the table, {list(mn)} in the manifests")
    matched = {match(s) for s in doc}
    problems += [f"{s}: in the manifests, not in the table" for s in manifests if s not in matched]
    return problems


@pytest.mark.parametrize("doc", RBAC_TABLES, ids=lambda p: str(p.relative_to(ROOT)))
def test_the_docs_rbac_table_matches_the_manifests(doc: Path) -> None:
    """docs/guide/kubernetes.md and manifests/README.md each tabulate the grants: per Role or ClusterRole (its name,
    its namespace), the resources with their verbs and resourceNames. Both ways against manifests/base/rbac.yaml and
    every Role/ClusterRole of manifests/components: a verb, resource, resourceName or role that one side has and the
    other has not fails, so the docs cannot drift from what is applied."""
    manifests = _manifest_grants()
    assert {s[1] for s in manifests} == {"kts-runner", "kts-node-reader", "kts-cluster-pod-reader",
                                         "kts-device-plugin-config-reader"}  # extend DOC_RESOURCES for a new one
    assert _compare_docs(_doc_grants(doc.read_text()), manifests) == []


def test_the_docs_table_check_would_notice_a_drift() -> None:
    """The comparison is not vacuous: a verb dropped, a verb added, a resourceName changed, a row missing or a
    namespace changed in the table are each reported."""
    manifests = _manifest_grants()
    text = RBAC_TABLES[1].read_text()
    assert _compare_docs(_doc_grants(text), manifests) == []
    for old, new, needle in [
            ("Jobs create/list/delete", "Jobs create/list", "verbs ['create', 'list'] in the table"),
            ("events list", "events list/watch", "verbs ['list', 'watch'] in the table"),
            ("`resourceNames: [kts-time-slicing-config, kts-mps-config, nvdp-nvidia-device-plugin-configs]`",
             "`resourceNames: [other]`", "resourceNames ['other']"),
            ("Role `kts-runner`, namespace `kts`", "Role `kts-runner`, namespace `gpu`", "not in the manifests"),
            ("nodes list/get", "nodes list", "verbs ['list'] in the table")]:
        assert old in text, old
        problems = _compare_docs(_doc_grants(text.replace(old, new)), manifests)
        assert any(needle in p for p in problems), (old, problems)
    dropped = "\n".join(ln for ln in text.splitlines() if not ln.startswith("| ClusterRole `kts-node-reader`"))
    assert _compare_docs(_doc_grants(dropped), manifests) == [
        "('ClusterRole', 'kts-node-reader', None): in the manifests, not in the table"]


async def test_the_opt_in_policy_narrows_patch_pods_to_the_go_annotation(tmp_path: Path) -> None:
    """RBAC narrows verbs and resources, never fields: ``patch pods`` alone would let the kts-runner identity change a
    pod's labels, annotations, finalizers, or a container's image. The kit patches one annotation only
    (``KubeApi.annotate_pod``: ``kts/start-at``, the go and the word to stop padding), and the opt-in component
    manifests/components/narrow-pod-patch (a ValidatingAdmissionPolicy, admissionregistration.k8s.io/v1, valid for
    Kubernetes 1.30 and 1.37) makes the API server refuse anything else from that identity. The emulator mirrors its
    validations (``pod_patch_denied``): with it on, a whole shared scenario runs (its go and its stop pass), while a
    label, another annotation, a spec change or a pod that is not the kit's are refused with the policy's words.
    Fails when the kit's patch touches anything beside the go annotation."""
    import kubernetes_validate
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    from kts_helpers.run.backends.kubernetes.names import ANN_START

    policy_file = Path(__file__).resolve().parents[1] / "manifests" / "components" / "narrow-pod-patch" / "policy.yaml"
    docs = [d for d in yaml.safe_load_all(policy_file.read_text()) if d]
    for d in docs:
        for version in ("1.30.0", "1.37.0"):
            kubernetes_validate.validate(d, version, strict=True)
    policy = next(d for d in docs if d["kind"] == "ValidatingAdmissionPolicy")
    subject = next(d for d in yaml.safe_load_all(RBAC.read_text()) if d and d["kind"] == "RoleBinding")["subjects"][0]
    assert f"system:serviceaccount:{subject['namespace']}:{subject['name']}" in policy["spec"]["matchConditions"][0][
        "expression"]
    assert all(f"'{ANN_START}'" in v["expression"] for v in policy["spec"]["validations"][3:])
    async with emulated_cluster() as fc:
        fc.km.pod_patch_policy = True
        fc.add_node(gpu_node("gpu-1"))
        run, spec = make_run(tmp_path)
        assert (await asyncio.to_thread(fc.backend().run_scenario, run, spec.scenario("shared"), timeout_s=120,
                                        progress=False)).status == "complete"
        kits = [r.data["metadata"]["annotations"][ANN_START] for r in fc.requests("patch", "v1/pods")
                if not r.headers.get("User-Agent", "").startswith("kmock/")]  # the kit's, not the fake kubelet's
        assert len(kits) == 4 and sum('"stop"' in a for a in kits) == 2, kits  # each tenant's go, then its stop
        core = client.CoreV1Api(client.ApiClient(client.Configuration(host=str(fc.km.url).rstrip("/"))))
        for name, labels in (("ours", {"app.kubernetes.io/managed-by": "kts"}), ("theirs", {"app": "x"})):
            await fc._http("post", f"/api/v1/namespaces/{NS}/pods", {"apiVersion": "v1", "kind": "Pod", "metadata": {
                "name": name, "namespace": NS, "labels": labels}, "spec": {"containers": [{"name": "c", "image": "a"}]}})

        async def patch(name: str, body: dict) -> str:
            try:
                await asyncio.to_thread(core.patch_namespaced_pod, name, NS, body)
            except ApiException as exc:
                return f"{exc.status} {exc.body}"
            return "200"

        assert await patch("ours", {"metadata": {"annotations": {ANN_START: '{"fft":1}'}}}) == "200"
        for name, body, words in [
                ("ours", {"metadata": {"labels": {"app.kubernetes.io/managed-by": "kts", "x": "y"}}}, "labels"),
                ("ours", {"metadata": {"annotations": {"other": "1"}}}, "one annotation of a pod only"),
                ("ours", {"spec": {"containers": [{"name": "c", "image": "evil"}]}}, "a pod's spec"),
                ("theirs", {"metadata": {"annotations": {ANN_START: "1"}}}, "only the kit's own pods")]:
            got = await patch(name, body)
            assert got.startswith("403") and "kts-runner-pod-patch" in got and words in got, (body, got)
