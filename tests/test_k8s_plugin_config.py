"""The device plugin's own config (issue #45): replicas, strategy, renameByDefault and failRequestsGreaterThanOne
read from the plugin's ConfigMap where RBAC allows, recorded as verified or as stated, against the emulated cluster.

The config's schema and the key a node loads mirror NVIDIA/k8s-device-plugin (api/config/v1/config.go,
sharing.go, replicas.go; cmd/config-manager/main.go ``updateConfigName``); the emulator's RBAC enforces the opt-in
Role of manifests/components/device-plugin-config in the plugin's namespace, and nothing else there.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from k8s_fixtures import (
    RBAC_FILE,
    RBAC_PLUGIN_CONFIG,
    FakeCluster,
    emulated_cluster,
    gpu_node,
    make_run,
    rbac_rules,
    run_scenario,
)

from kts_helpers.errors import BackendError
from kts_helpers.run.backends.kubernetes.plugin_config import (
    PluginConfigError,
    config_key,
    parse_plugin_config,
)

pytestmark = pytest.mark.timeout(150)
JOBS = "batch/v1/jobs"
PLUGIN_NS, PLUGIN_CM = "nvidia-device-plugin", "kts-time-slicing-config"
TIMESLICING_4 = """version: v1
flags:
  migStrategy: none
sharing:
  timeSlicing:
    resources:
      - name: nvidia.com/gpu
        replicas: 4
"""
MPS_4 = """version: v1
sharing:
  mps:
    resources:
      - name: nvidia.com/gpu
        replicas: 4
"""
RENAMED_4 = """version: v1
sharing:
  timeSlicing:
    renameByDefault: true
    failRequestsGreaterThanOne: true
    resources:
      - name: nvidia.com/gpu
        replicas: 4
"""


@pytest.fixture
async def cluster() -> Any:
    async with emulated_cluster() as fc:
        yield fc


def _role_and_config_reader(fc: FakeCluster, *, reader: bool = True) -> None:
    """The namespaced Role alone (no node reads), with the opt-in ConfigMap reader in the plugin's namespace."""
    rules = rbac_rules(RBAC_FILE, *((RBAC_PLUGIN_CONFIG,) if reader else ()))
    fc.km.rbac = {**rules, "ClusterRole": set()}


async def test_the_plugins_config_verifies_the_stated_replicas_under_the_role_alone(cluster: FakeCluster,
                                                                                   tmp_path: Path) -> None:
    """Nodes unreadable; the stated replicas (K8S_GPU_REPLICAS=4) are checked against the plugin's ConfigMap, the
    one key it has (the config manager's "single" fallback), and recorded as verified from it, with the strategy
    (sharing.go ``SharingStrategy``), renameByDefault and failRequestsGreaterThanOne (replicas.go; false by
    default for time-slicing). Fails when the kit does not read the config (the record says "stated")."""
    cluster.add_node(gpu_node("gpu-1"))
    cluster.add_configmap(PLUGIN_NS, PLUGIN_CM, {"any": TIMESLICING_4})
    _role_and_config_reader(cluster)
    run, spec = make_run(tmp_path)
    backend = cluster.backend(node_name="gpu-1", gpu_replicas=4, device_plugin_config=f"{PLUGIN_NS}/{PLUGIN_CM}")
    assert (await run_scenario(backend, run, spec.scenario("shared"), 120.0)).status == "complete"
    got = run.manifest()["scenarios"]["shared"]["device_plugin_settings"]
    source = f"verified from ConfigMap {PLUGIN_NS}/{PLUGIN_CM}, key 'any' (the ConfigMap's only key"
    assert got["replicas"]["value"] == 4 and got["replicas"]["source"].startswith(source)
    assert got["strategy"] == {"value": "time-slicing", "source": got["replicas"]["source"]}
    assert got["rename_by_default"]["value"] is False and got["fail_requests_greater_than_one"]["value"] is False
    assert all(f[0:2] == ("", "nodes") for f in cluster.km.forbidden)  # only the node reads were refused


async def test_an_understated_replica_count_fails_before_any_job_naming_the_config(cluster: FakeCluster,
                                                                                 tmp_path: Path) -> None:
    """K8S_GPU_REPLICAS=2 where the plugin's config says 4: two replicas would stay free for strangers. The run
    fails before submitting anything, naming both values and the config's source. Fails when the stated value is
    trusted (the run then relies on the replica probe alone)."""
    cluster.add_node(gpu_node("gpu-1"))
    cluster.add_configmap(PLUGIN_NS, PLUGIN_CM, {"any": TIMESLICING_4})
    _role_and_config_reader(cluster)
    run, spec = make_run(tmp_path)
    backend = cluster.backend(node_name="gpu-1", gpu_replicas=2, device_plugin_config=f"{PLUGIN_NS}/{PLUGIN_CM}")
    with pytest.raises(BackendError, match=r"replicas 4 in the config, 2 stated by K8S_GPU_REPLICAS.*ConfigMap "
                                           r"nvidia-device-plugin/kts-time-slicing-config, key 'any'"):
        await run_scenario(backend, run, spec.scenario("shared"), 120.0)
    assert not cluster.requests("post", JOBS)


async def test_rename_by_default_makes_the_pods_ask_for_the_shared_resource(cluster: FakeCluster,
                                                                           tmp_path: Path) -> None:
    """``renameByDefault: true`` (replicas.go: the resource becomes ``nvidia.com/gpu.shared``): without node reads
    the kit learns the resource's name from the config, and its pods ask for it; the emulated scheduler counts
    each extended resource by its name, as kube-scheduler does. failRequestsGreaterThanOne is recorded. Fails
    when the stated default (nvidia.com/gpu) is kept: the pods stay Pending, "Insufficient nvidia.com/gpu"."""
    cluster.add_node(gpu_node("gpu-1", resource="nvidia.com/gpu.shared"))
    cluster.add_configmap(PLUGIN_NS, PLUGIN_CM, {"default": RENAMED_4, "other": TIMESLICING_4})
    _role_and_config_reader(cluster)
    run, spec = make_run(tmp_path)
    backend = cluster.backend(node_name="gpu-1", gpu_replicas=4, device_plugin_config=f"{PLUGIN_NS}/{PLUGIN_CM}")
    assert (await run_scenario(backend, run, spec.scenario("shared"), 120.0)).status == "complete"
    rec = run.manifest()["scenarios"]["shared"]
    assert rec["gpu_resource"] == "nvidia.com/gpu.shared"
    got = rec["device_plugin_settings"]
    assert got["resource"]["value"] == "nvidia.com/gpu.shared" and "key 'default'" in got["resource"]["source"]
    assert got["rename_by_default"]["value"] is True and got["fail_requests_greater_than_one"]["value"] is True


async def test_without_the_config_reader_the_values_are_stated_and_unverified(cluster: FakeCluster,
                                                                             tmp_path: Path) -> None:
    """The Role alone, no ConfigMap reader: the API server answers 403 in the plugin's namespace (RBAC scoped by
    namespace); the run goes on with the stated replicas, recorded as "unverified (stated by K8S_GPU_REPLICAS)"
    and why the config was not read. Fails when a 403 stops the run, or the record claims more than it knows."""
    cluster.add_node(gpu_node("gpu-1"))
    cluster.add_configmap(PLUGIN_NS, PLUGIN_CM, {"any": TIMESLICING_4})
    _role_and_config_reader(cluster, reader=False)
    run, spec = make_run(tmp_path)
    backend = cluster.backend(node_name="gpu-1", gpu_replicas=4, device_plugin_config=f"{PLUGIN_NS}/{PLUGIN_CM}")
    assert (await run_scenario(backend, run, spec.scenario("shared"), 120.0)).status == "complete"
    got = run.manifest()["scenarios"]["shared"]["device_plugin_settings"]
    assert got["replicas"] == {"value": 4, "source": "unverified (stated by K8S_GPU_REPLICAS)"}
    assert got["config"].startswith("not read:") and "device-plugin-config" in got["config"]
    assert ("", "configmaps", "get", PLUGIN_NS) in cluster.km.forbidden


async def test_the_config_reader_reads_only_the_configmap_its_role_names(cluster: FakeCluster,
                                                                         tmp_path: Path) -> None:
    """The opt-in Role grants ``get`` on configmaps with ``resourceNames`` (the plugin's own ConfigMaps); the run is
    configured to
    read another ConfigMap of the plugin's namespace (``plugin-cfg``, which exists). A real API server answers 403
    (plugin/pkg/auth/authorizer/rbac/rbac.go ``RuleAllows`` -> ``ResourceNameMatches``: a rule with resourceNames
    matches only a request naming one of them), so the run goes on with the stated replicas, recorded as
    "unverified (stated by K8S_GPU_REPLICAS)" with the 403 as the reason. Fails when the emulator grants the rule's
    verbs on every ConfigMap of the namespace (the record then says "verified from ConfigMap ...")."""
    cluster.add_node(gpu_node("gpu-1"))
    cluster.add_configmap(PLUGIN_NS, PLUGIN_CM, {"any": TIMESLICING_4})
    cluster.add_configmap(PLUGIN_NS, "plugin-cfg", {"any": TIMESLICING_4})
    _role_and_config_reader(cluster)
    run, spec = make_run(tmp_path)
    backend = cluster.backend(node_name="gpu-1", gpu_replicas=4, device_plugin_config=f"{PLUGIN_NS}/plugin-cfg")
    assert (await run_scenario(backend, run, spec.scenario("shared"), 120.0)).status == "complete"
    got = run.manifest()["scenarios"]["shared"]["device_plugin_settings"]
    assert got["replicas"] == {"value": 4, "source": "unverified (stated by K8S_GPU_REPLICAS)"}
    assert got["config"].startswith("not read: Kubernetes RBAC forbids 'get' on 'configmaps' in namespace "
                                    f"'{PLUGIN_NS}': configmaps \"plugin-cfg\" is forbidden: "), got["config"]
    assert "the Role of manifests/components/device-plugin-config must be in namespace nvidia-device-plugin" in \
        got["config"] and "never in a kustomization that sets namespace:" in got["config"]
    assert ("", "configmaps", "get", PLUGIN_NS) in cluster.km.forbidden


async def test_the_emulators_rbac_matches_resource_names_as_the_api_server_does(cluster: FakeCluster) -> None:
    """pkg/apis/rbac/v1/evaluation_helpers.go ``ResourceNameMatches`` with the name requestinfo.go ``NewRequestInfo``
    gives a request: the Role's ``resourceNames`` allow get of the ConfigMaps they name only, not of another
    ConfigMap, nor in another namespace; a list carries no name, so a rule with resourceNames never allows it unless
    its field selector names exactly ``metadata.name`` (then the rule's verbs must include list)."""
    import asyncio

    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    cluster.add_configmap(PLUGIN_NS, PLUGIN_CM, {"any": TIMESLICING_4})
    cluster.add_configmap(PLUGIN_NS, "plugin-cfg", {"any": TIMESLICING_4})
    _role_and_config_reader(cluster)
    core = client.CoreV1Api(client.ApiClient(client.Configuration(host=str(cluster.km.url).rstrip("/"))))

    async def status(fn: Any, *args: Any, **kwargs: Any) -> int:
        try:
            await asyncio.to_thread(fn, *args, _preload_content=False, **kwargs)
        except ApiException as exc:
            return exc.status
        return 200

    assert await status(core.read_namespaced_config_map, PLUGIN_CM, PLUGIN_NS) == 200
    assert await status(core.read_namespaced_config_map, "plugin-cfg", PLUGIN_NS) == 403
    assert await status(core.read_namespaced_config_map, PLUGIN_CM, "default") == 403
    assert await status(core.list_namespaced_config_map, PLUGIN_NS) == 403  # no list verb, and no name
    assert [f[2:] for f in cluster.km.forbidden] == [("get", PLUGIN_NS), ("get", "default"), ("list", PLUGIN_NS)]
    # a rule granting list of one ConfigMap by name: a list naming it by field selector matches, others do not
    cluster.km.rbac = {"Role": set(), "ClusterRole": set(), f"Role:{PLUGIN_NS}": {("", "configmaps", "list", PLUGIN_CM)}}
    assert await status(core.list_namespaced_config_map, PLUGIN_NS, field_selector=f"metadata.name={PLUGIN_CM}") == 200
    assert await status(core.list_namespaced_config_map, PLUGIN_NS, field_selector="metadata.name=plugin-cfg") == 403
    assert await status(core.list_namespaced_config_map, PLUGIN_NS) == 403
    assert await status(core.read_namespaced_config_map, PLUGIN_CM, PLUGIN_NS) == 403  # list granted, not get


async def test_the_nodes_config_label_selects_an_mps_config_the_labels_contradict(cluster: FakeCluster,
                                                                                 tmp_path: Path) -> None:
    """With node reads: the node's ``nvidia.com/device-plugin.config`` label (config-manager ``DefaultConfigLabel``)
    selects the key "mps-4", an MPS config, while GPU feature discovery says time-slicing: the plugin has not
    loaded the config its label names. The run fails by name before any Job. Fails when the label is not read
    (the first key would be taken) or the two are not compared."""
    cluster.add_node(gpu_node("gpu-1", extra_labels={"nvidia.com/device-plugin.config": "mps-4"}))
    cluster.add_configmap(PLUGIN_NS, PLUGIN_CM, {"ts-4": TIMESLICING_4, "mps-4": MPS_4})
    run, spec = make_run(tmp_path)
    backend = cluster.backend(device_plugin_config=f"{PLUGIN_NS}/{PLUGIN_CM}")
    with pytest.raises(BackendError, match=r"sharing strategy mps in the config, time-slicing on the node's label.*"
                                           r"key 'mps-4' \(the node's label nvidia\.com/device-plugin\.config=mps-4"):
        await run_scenario(backend, run, spec.scenario("shared"), 120.0)
    assert not cluster.requests("post", JOBS)


def test_the_config_is_read_as_the_plugin_reads_it() -> None:
    """api/config/v1: MPS defaults failRequestsGreaterThanOne to true (config.go ``NewConfig``); a replicated
    resource needs replicas >= 2 (replicas.go); only version v1 loads (config.go ``parseConfigFrom``); MPS wins
    over time-slicing (sharing.go ``SharingStrategy``); deviceListStrategy is a string or a list (flags.go).
    The key a node loads: label, stated default, "default", the only key (config-manager ``updateConfigName``)."""
    mps = parse_plugin_config(MPS_4)
    assert (mps.strategy, mps.replicas, mps.fail_requests_greater_than_one) == ("mps", 4, True)
    both = parse_plugin_config(MPS_4.replace("sharing:\n", "sharing:\n  timeSlicing:\n    resources:\n"
                                             "      - name: nvidia.com/gpu\n        replicas: 2\n"))
    assert both.strategy == "mps"
    assert parse_plugin_config("version: v1\nflags:\n  plugin:\n    deviceListStrategy: [cdi-annotations]\n"
                               ).device_list_strategy == ["cdi-annotations"]
    assert parse_plugin_config("version: v1\n").strategy == "none"
    with pytest.raises(PluginConfigError, match="must be >= 2"):
        parse_plugin_config(TIMESLICING_4.replace("replicas: 4", "replicas: 1") + "      - name: x\n        "
                            "replicas: 1\n")
    with pytest.raises(PluginConfigError, match="unknown version: v2"):
        parse_plugin_config("version: v2\n")
    data = {"a": "", "b": ""}
    assert config_key(data, "b", "a")[0] == "b" and config_key(data, None, "a")[0] == "a"
    assert config_key({**data, "default": ""}, None, None)[0] == "default"
    assert config_key({"only": ""}, None, None)[0] == "only" and config_key(data, None, None)[0] is None


def test_the_config_is_applied_as_the_plugin_applies_it() -> None:
    """What the plugin does with a config beyond reading it (NVIDIA/k8s-device-plugin api/config/v1):

    * ``rename`` is ignored: ``DisableResourceNamingInConfig`` (config.go, called by the plugin's, GFD's and the MPS
      daemon's main since v0.15.0; replicas.go ``disableResoureRenaming``) resets it to ``<name>.shared`` under
      ``renameByDefault`` and to none otherwise, logging "Setting the 'rename' field ... Ignoring...";
    * an empty sharing block is refused: replicas.go ``ReplicatedResources.UnmarshalJSON`` returns "no resources
      specified" without ``resources`` or with an empty list;
    * ``replicas`` is a Go ``int``: sigs.k8s.io/yaml hands the YAML to encoding/json, which refuses a string
      ("json: cannot unmarshal string into Go value of type int", replicas.go ``ReplicatedResource.UnmarshalJSON``);
    * MPS ``failRequestsGreaterThanOne``: ``NewConfig`` forces it true before v0.20.0 (v0.19.x: ``if
      config.Sharing.MPS != nil { ...FailRequestsGreaterThanOne = true }``) and from v0.20.0 only where it is unset:
      an explicit false is true under v0.19.2, false under v0.20.0, and unverified where the version is unknown.

    Fails on the old parser, which honoured ``rename``, accepted an empty block and ``replicas: "4"``, and read an
    explicit false as verified whatever the plugin's version."""
    renamed = TIMESLICING_4.replace("replicas: 4", "replicas: 4\n        rename: nvidia.com/gpu.ts")
    got = parse_plugin_config(renamed)
    assert (got.resource, got.replicas) == ("nvidia.com/gpu", 4) and "rename: nvidia.com/gpu.ts is ignored" in \
        got.rename_ignored
    assert parse_plugin_config(renamed.replace("timeSlicing:\n", "timeSlicing:\n    renameByDefault: true\n")
                               ).resource == "nvidia.com/gpu.shared"
    for empty in ("sharing:\n  timeSlicing: {}\n", "sharing:\n  timeSlicing:\n    resources: []\n",
                  "sharing:\n  mps:\n    renameByDefault: false\n"):
        with pytest.raises(PluginConfigError, match="no resources specified"):
            parse_plugin_config("version: v1\n" + empty)
    assert parse_plugin_config("version: v1\nsharing: {}\n").strategy == "none"
    with pytest.raises(PluginConfigError, match=r"json: cannot unmarshal string into Go value of type int"):
        parse_plugin_config(TIMESLICING_4.replace("replicas: 4", 'replicas: "4"'))
    with pytest.raises(PluginConfigError, match=r"cannot unmarshal string into Go value of type bool"):
        parse_plugin_config(RENAMED_4.replace("renameByDefault: true", 'renameByDefault: "true"'))
    assert parse_plugin_config(TIMESLICING_4.replace("replicas: 4", "replicas: 4.0")).replicas == 4
    explicit = MPS_4.replace("mps:\n", "mps:\n    failRequestsGreaterThanOne: false\n")
    unknown, old, new = (parse_plugin_config(explicit, plugin_version=v) for v in (None, "0.19.2", "0.20.0"))
    assert (unknown.fail_requests_greater_than_one, old.fail_requests_greater_than_one,
            new.fail_requests_greater_than_one) == (False, True, False)
    assert "before v0.20.0 force it true" in unknown.fail_requests_note and "v0.19.2 forces it true" in \
        old.fail_requests_note and new.fail_requests_note == ""
    assert parse_plugin_config(MPS_4).fail_requests_note == ""  # unset: true in every version


async def test_an_explicit_mps_false_is_recorded_unverified_where_the_plugins_version_is_unknown(
        cluster: FakeCluster) -> None:
    """The record of an MPS config that says ``failRequestsGreaterThanOne: false``, read under the Role alone (the
    plugin's pod, and so its version, unseen): "unverified", with why; the resource's ignored ``rename`` is recorded.
    Fails when the record says "verified from ConfigMap ..." for a value plugins before v0.20.0 overrule."""
    from kts_helpers.run.backends.kubernetes.nodes import stated_node

    cm = MPS_4.replace("mps:\n", "mps:\n    failRequestsGreaterThanOne: false\n").replace(
        "replicas: 4", "replicas: 4\n        rename: nvidia.com/gpu.mps")
    cluster.add_configmap(PLUGIN_NS, PLUGIN_CM, {"any": cm})
    _role_and_config_reader(cluster)
    backend = cluster.backend(node_name="gpu-1", gpu_replicas=4, device_plugin_config=f"{PLUGIN_NS}/{PLUGIN_CM}")
    node = stated_node("gpu-1", None, 4)
    import asyncio

    await asyncio.to_thread(backend.verify_plugin, node)
    rec = node.plugin
    assert rec["fail_requests_greater_than_one"]["value"] is False
    assert rec["fail_requests_greater_than_one"]["source"].startswith("unverified: the config says false, but device "
                                                                     "plugins before v0.20.0 force it true")
    assert rec["strategy"]["value"] == "mps" and "is ignored by the plugin" in rec["rename_ignored"]
