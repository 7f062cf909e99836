"""The NVIDIA device plugin's own config: which replicas, sharing strategy and resource name it serves, verified.

The kit otherwise takes them from the node's GPU feature discovery labels (``nvidia.com/gpu.replicas``,
``nvidia.com/gpu.sharing-strategy``) or, without node reads, from what the user stated (``K8S_GPU_REPLICAS``).
Where RBAC lets it read the plugin's ConfigMap (``device_plugin_config="<namespace>/<name>"``, K8S_DEVICE_PLUGIN_CONFIG;
the opt-in Role of manifests/components/device-plugin-config), the kit reads the config the plugin itself loads
and records each value as "verified from <source>" or "unverified (stated by K8S_*)".

Mirrored from NVIDIA/k8s-device-plugin:

* the schema, api/config/v1: ``Config{version, flags, sharing}`` (config.go; ``version`` empty means "v1", any
  other fails ``parseConfigFrom``); ``Sharing{timeSlicing, mps}`` (sharing.go); ``ReplicatedResources{renameByDefault,
  failRequestsGreaterThanOne, resources[]}`` with ``ReplicatedResource{name, rename, devices, replicas}``
  (replicas.go ``UnmarshalJSON``: a sharing block without resources, or with an empty list, is "no resources
  specified"; ``replicas`` is required, a Go ``int`` (a string is refused by Go's json decoder, as sigs.k8s.io/yaml
  hands it the YAML as JSON) and must be >= 2; ``renameByDefault`` renames ``<name>`` to ``<name>.shared``);
  ``flags.plugin.deviceListStrategy`` (a string or a list) and ``deviceIDStrategy`` (flags.go);
  ``flags.plugin.sharedDevicesAllocationPolicy`` (from v0.20.0);
* what the plugin then does with it, config.go: ``DisableResourceNamingInConfig`` (called by the plugin's,
  GFD's and the MPS daemon's main since v0.15.0) resets every resource's ``rename`` to ``<name>.shared`` under
  ``renameByDefault`` and to none otherwise ("Setting the 'rename' field ... is not yet supported in the config.
  Ignoring..."): ``rename`` is ignored; ``NewConfig`` forces MPS ``failRequestsGreaterThanOne`` to true before
  v0.20.0, and from v0.20.0 defaults it to true only where it is unset (an explicit false holds): with the
  plugin's version unknown an explicit false is recorded as unverified;
* the active strategy, sharing.go ``SharingStrategy()``: "mps" when ``sharing.mps`` replicates a resource, else
  "time-slicing" when ``sharing.timeSlicing`` does, else "none";
* which key of the ConfigMap a node loads, cmd/config-manager/main.go ``updateConfigName``: the node's label
  ``nvidia.com/device-plugin.config`` (``DefaultConfigLabel``) names the key; without it the ``--default-config``
  (the Helm chart's ``config.default``, stated here as ``<namespace>/<name>/<key>``); without that the fallbacks
  "named" (a key called ``default``) then "single" (the one key there is).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kts_helpers.errors import SpecError

CONFIG_LABEL = "nvidia.com/device-plugin.config"  # cmd/config-manager/main.go, DefaultConfigLabel
NAMED_FALLBACK = "default"  # cmd/config-manager/main.go, NamedConfigFallback


class PluginConfigError(ValueError):
    """The ConfigMap's text is not a config the plugin would load (it would fail to start on it)."""


FAIL_EXPLICIT_SINCE = (0, 20, 0)  # config.go NewConfig: an explicit MPS failRequestsGreaterThanOne=false holds


@dataclass
class PluginSharing:
    """What one key of the plugin's ConfigMap makes the plugin serve, for one GPU resource."""

    strategy: str  # mps | time-slicing | none
    replicas: int | None  # None: the resource is not replicated
    resource: str  # the name pods ask for (<name>.shared under renameByDefault; a resource's own rename is ignored)
    rename_by_default: bool = False
    fail_requests_greater_than_one: bool = False
    fail_requests_note: str = ""  # why the value above is not certain (an explicit false, the plugin's version unknown)
    rename_ignored: str = ""  # a resource's own ``rename`` the plugin ignores, named
    allocation_policy: str | None = None  # flags.plugin.sharedDevicesAllocationPolicy (v0.20.0+)
    device_list_strategy: list[str] = field(default_factory=list)
    device_id_strategy: str | None = None


def _yaml(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        import yaml  # optional: PyYAML comes with the kubernetes client (its dependency), as the kit's Kubernetes path does

        try:
            return yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise PluginConfigError(f"unmarshal error: {exc}") from None


def _go_type(value: Any, kind: type, where: str) -> Any:
    """A value as Go's encoding/json takes it into a field of type ``kind`` (int or bool), or its error."""
    go = {int: "int", bool: "bool"}[kind]
    if kind is int and isinstance(value, float) and value.is_integer():
        return int(value)  # YAML 4.0 reaches the decoder as the JSON number 4
    if isinstance(value, kind) and not (kind is int and isinstance(value, bool)):
        return value
    what = {str: "string", bool: "bool", float: f"number {value}", list: "array", dict: "object"}.get(
        type(value), type(value).__name__)
    raise PluginConfigError(f"{where}: json: cannot unmarshal {what} into Go value of type {go}")


def parse_plugin_config(text: str, resource: str = "nvidia.com/gpu",
                        plugin_version: str | None = None) -> PluginSharing:
    """One config file of the plugin (a ConfigMap key), read as ``parseConfigFrom`` and the v1 types read it, and
    as the plugin then applies it (``DisableResourceNamingInConfig``, ``NewConfig``); ``plugin_version`` (e.g.
    "0.19.2", None when unknown) decides an explicit MPS ``failRequestsGreaterThanOne: false``."""
    doc = _yaml(text) or {}
    if not isinstance(doc, Mapping):
        raise PluginConfigError("unmarshal error: the config is not a mapping")
    version = str(doc.get("version") or "v1")
    if version != "v1":
        raise PluginConfigError(f"unknown version: {version}")
    flags = doc.get("flags") or {}
    plugin = (flags.get("plugin") or {}) if isinstance(flags, Mapping) else {}
    dls = plugin.get("deviceListStrategy")
    dls_list = [str(dls)] if isinstance(dls, str) else [str(x) for x in dls or []]
    sharing = doc.get("sharing") or {}
    mps, ts = sharing.get("mps"), sharing.get("timeSlicing")

    for name, each in (("mps", mps), ("timeSlicing", ts)):  # replicas.go, ReplicatedResources/Resource.UnmarshalJSON
        if each is None:
            continue  # absent (or null: a nil pointer for mps)
        if not isinstance(each, Mapping) or not each.get("resources"):
            raise PluginConfigError(f"sharing.{name}: no resources specified")
        for key in ("renameByDefault", "failRequestsGreaterThanOne"):
            if key in each:
                _go_type(each[key], bool, f"sharing.{name}.{key}")
        for r in each["resources"]:
            if not isinstance(r, Mapping) or "name" not in r:
                raise PluginConfigError(f"sharing.{name}: no resource name specified")
            if "replicas" not in r:
                raise PluginConfigError(f"sharing.{name}: no replicas specified")
            if _go_type(r["replicas"], int, f"sharing.{name}.resources.replicas") < 2:
                raise PluginConfigError(f"sharing.{name}: number of replicas must be >= 2")

    def replicated(block: Any) -> bool:
        return isinstance(block, Mapping) and any(int(r["replicas"]) > 1 for r in block.get("resources") or [])

    if replicated(mps):
        strategy, block = "mps", mps
    elif replicated(ts):
        strategy, block = "time-slicing", ts
    else:
        strategy, block = "none", (mps if isinstance(mps, Mapping) else ts) or {}
    rename_default = bool(block.get("renameByDefault", False))
    fail = block.get("failRequestsGreaterThanOne")
    note = ""
    if strategy != "mps":
        fail_value = bool(fail)
    elif fail is None or fail:
        fail_value = True  # NewConfig: true for MPS where unset, in every version
    else:  # an explicit false: honoured from v0.20.0 only
        known = tuple(int(x) for x in plugin_version.split(".")) if plugin_version else None
        fail_value = False
        if known is None:
            note = ("the config says false, but device plugins before v0.20.0 force it true for MPS "
                    "(api/config/v1/config.go NewConfig) and the plugin's version is unknown")
        elif known < FAIL_EXPLICIT_SINCE:
            fail_value = True
            note = f"the config says false; device plugin v{plugin_version} forces it true for MPS (before v0.20.0)"
    out = PluginSharing(strategy=strategy, replicas=None, resource=resource, rename_by_default=rename_default,
                        fail_requests_greater_than_one=fail_value, fail_requests_note=note,
                        allocation_policy=plugin.get("sharedDevicesAllocationPolicy"),
                        device_list_strategy=dls_list, device_id_strategy=plugin.get("deviceIDStrategy"))
    for r in block.get("resources") or []:
        if str(r["name"]) != resource:
            continue
        out.replicas = int(r["replicas"])
        out.resource = f"{resource}.shared" if rename_default else resource  # DisableResourceNamingInConfig
        if r.get("rename") and str(r["rename"]) != out.resource:
            out.rename_ignored = (f"rename: {r['rename']} is ignored by the plugin (DisableResourceNamingInConfig: "
                                  f"it serves {out.resource})")
    return out


def config_key(data: Mapping[str, str], label: str | None, default: str | None) -> tuple[str | None, str]:
    """The key of the plugin's ConfigMap that a node loads, and how it was chosen (``updateConfigName``); (None,
    why) when it cannot be told (the node's label unread, several keys, no default)."""
    if label:
        if label not in data:
            return None, f"the node's label {CONFIG_LABEL}={label} names a key the ConfigMap does not have"
        return label, f"the node's label {CONFIG_LABEL}={label}"
    if default:
        if default not in data:
            return None, f"the stated default config {default!r} is not a key of the ConfigMap"
        return default, f"the stated default config {default!r} (the node has no {CONFIG_LABEL} label)"
    if NAMED_FALLBACK in data:
        return NAMED_FALLBACK, f"the key named {NAMED_FALLBACK!r} (the config manager's 'named' fallback)"
    if len(data) == 1:
        key = next(iter(data))
        return key, f"the ConfigMap's only key {key!r} (the config manager's 'single' fallback)"
    return None, (f"which of the keys {sorted(data)} the node loads is unknown (no {CONFIG_LABEL} label read, no "
                  "default stated)")


def parse_reference(value: str | None) -> tuple[str, str, str | None] | None:
    """``"<namespace>/<name>[/<default key>]"`` -> (namespace, name, default key)."""
    if not value:
        return None
    parts = str(value).strip().split("/")
    if len(parts) not in (2, 3) or not all(parts[:2]):
        raise SpecError(f"device_plugin_config must be <namespace>/<configmap>[/<default key>] (the device plugin's "
                        f"ConfigMap, e.g. gpu-operator/kts-time-slicing-config), got {value!r}")
    return parts[0], parts[1], (parts[2] or None) if len(parts) == 3 else None


def plugin_settings(configmap: Mapping[str, Any], label: str | None, default: str | None,
                    resource: str, plugin_version: str | None = None) -> tuple[PluginSharing | None, str]:
    """What the plugin serves on a node, from its ConfigMap, and the source sentence; (None, why) when the key
    the node loads cannot be told and the keys disagree."""
    meta = configmap.get("metadata") or {}
    where = f"ConfigMap {meta.get('namespace')}/{meta.get('name')}"
    data = {str(k): str(v) for k, v in (configmap.get("data") or {}).items()}
    if not data:
        return None, f"{where} has no config"
    key, how = config_key(data, label, default)
    if key is not None:
        return parse_plugin_config(data[key], resource, plugin_version), f"{where}, key {key!r} ({how})"
    parsed = {k: parse_plugin_config(v, resource, plugin_version) for k, v in data.items()}
    values = {(p.strategy, p.replicas, p.resource) for p in parsed.values()}
    if len(values) == 1 and "the ConfigMap does not have" not in how and "not a key" not in how:
        return next(iter(parsed.values())), f"{where}, every key alike ({how})"
    return None, f"{where}: {how}"
