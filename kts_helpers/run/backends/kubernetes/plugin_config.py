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
  (replicas.go: ``replicas`` is required and must be >= 2; ``renameByDefault`` renames ``<name>`` to
  ``<name>.shared`` where ``rename`` is unset; ``failRequestsGreaterThanOne`` defaults to false, and to true for
  MPS, config.go ``NewConfig``); ``flags.plugin.deviceListStrategy`` (a string or a list) and
  ``deviceIDStrategy`` (flags.go); ``flags.plugin.sharedDevicesAllocationPolicy`` (from v0.20.0);
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


@dataclass
class PluginSharing:
    """What one key of the plugin's ConfigMap makes the plugin serve, for one GPU resource."""

    strategy: str  # mps | time-slicing | none
    replicas: int | None  # None: the resource is not replicated
    resource: str  # the name pods ask for (renamed to <name>.shared by renameByDefault or rename)
    rename_by_default: bool = False
    fail_requests_greater_than_one: bool = False
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


def parse_plugin_config(text: str, resource: str = "nvidia.com/gpu") -> PluginSharing:
    """One config file of the plugin (a ConfigMap key), read as ``parseConfigFrom`` and the v1 types read it."""
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
    mps, ts = sharing.get("mps"), sharing.get("timeSlicing") or {}

    for name, each in (("mps", mps), ("timeSlicing", ts)):  # replicas.go, ReplicatedResource.UnmarshalJSON
        for r in (each or {}).get("resources") or [] if isinstance(each, Mapping) else []:
            if not isinstance(r, Mapping) or "name" not in r:
                raise PluginConfigError(f"sharing.{name}: no resource name specified")
            if "replicas" not in r:
                raise PluginConfigError(f"sharing.{name}: no replicas specified")
            if int(r["replicas"]) < 2:
                raise PluginConfigError(f"sharing.{name}: number of replicas must be >= 2")

    def replicated(block: Any) -> bool:
        return isinstance(block, Mapping) and any((r or {}).get("replicas", 0) and int(r["replicas"]) > 1
                                                  for r in block.get("resources") or [])

    if replicated(mps):
        strategy, block, fail_default = "mps", mps, True  # config.go NewConfig: MPS defaults it to true
    elif replicated(ts):
        strategy, block, fail_default = "time-slicing", ts, False
    else:
        strategy, block, fail_default = "none", (mps if isinstance(mps, Mapping) else ts) or {}, False
    rename_default = bool(block.get("renameByDefault", False))
    fail = block.get("failRequestsGreaterThanOne")
    out = PluginSharing(strategy=strategy, replicas=None, resource=resource, rename_by_default=rename_default,
                        fail_requests_greater_than_one=fail_default if fail is None else bool(fail),
                        allocation_policy=plugin.get("sharedDevicesAllocationPolicy"),
                        device_list_strategy=dls_list, device_id_strategy=plugin.get("deviceIDStrategy"))
    for r in block.get("resources") or []:
        if str(r["name"]) != resource:
            continue
        out.replicas = int(r["replicas"])
        rename = r.get("rename") or (f"{resource}.shared" if rename_default else "")
        out.resource = str(rename or resource)
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
                        f"ConfigMap, e.g. nvidia-device-plugin/nvdp-config), got {value!r}")
    return parts[0], parts[1], (parts[2] or None) if len(parts) == 3 else None


def plugin_settings(configmap: Mapping[str, Any], label: str | None, default: str | None,
                    resource: str) -> tuple[PluginSharing | None, str]:
    """What the plugin serves on a node, from its ConfigMap, and the source sentence; (None, why) when the key
    the node loads cannot be told and the keys disagree."""
    meta = configmap.get("metadata") or {}
    where = f"ConfigMap {meta.get('namespace')}/{meta.get('name')}"
    data = {str(k): str(v) for k, v in (configmap.get("data") or {}).items()}
    if not data:
        return None, f"{where} has no config"
    key, how = config_key(data, label, default)
    if key is not None:
        return parse_plugin_config(data[key], resource), f"{where}, key {key!r} ({how})"
    parsed = {k: parse_plugin_config(v, resource) for k, v in data.items()}
    values = {(p.strategy, p.replicas, p.resource) for p in parsed.values()}
    if len(values) == 1 and "the ConfigMap does not have" not in how and "not a key" not in how:
        return next(iter(parsed.values())), f"{where}, every key alike ({how})"
    return None, f"{where}: {how}"
