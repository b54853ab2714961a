"""Container and pod-template builders: plain dicts in Kubernetes' own camelCase.

Pods run as Flower's image user (uid/gid 49999) under the Pod Security Standard
`restricted`, with a read-only root filesystem and emptyDirs for the paths Flower writes.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable
from typing import Any, Optional

from flower_federation.flower.layout import (
    FLOWER_UID,
    MANAGED_CONTAINERS,
    TELEMETRY_ENV,
    WRITABLE_PATHS,
    scratch_volume,
)
from flower_federation.flower.node_config import NODE_NAME_ENV, POD_INDEX_ENV, POD_INDEX_LABEL
from flower_federation.kube.objects import Container, PodTemplate
from flower_federation.kube.quantity import parse_quantity


def scratch_mounts(container: str) -> list[dict[str, Any]]:
    return [
        {"name": scratch_volume(container), "mountPath": path, "subPath": sub} for sub, path in WRITABLE_PATHS.items()
    ]


def container_security_context(privileged: bool = False, overrides: Optional[dict[str, Any]] = None) -> dict[str, Any]:
    if privileged:
        # Explicit opt-in only (AMD gpu.mountAll with allowPrivileged).
        return {"privileged": True, "allowPrivilegeEscalation": True, "readOnlyRootFilesystem": True}
    restricted = {
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
        "readOnlyRootFilesystem": True,
        "runAsNonRoot": True,
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    return with_overrides(restricted, overrides or {})


def with_overrides(security: dict[str, Any], overrides: dict[str, Any]) -> dict[str, Any]:
    """A container securityContext with the user's keys over ours. Kubernetes refuses a
    privileged container with allowPrivilegeEscalation false (ours): asking for privileged
    asks for escalation too, unless the user says otherwise (which rules refuse)."""
    merged = {**security, **copy.deepcopy(overrides)}
    if overrides.get("privileged") is True and "allowPrivilegeEscalation" not in overrides:
        merged["allowPrivilegeEscalation"] = True
    return merged


def pod_security_context(overrides: Optional[dict[str, Any]] = None) -> dict[str, Any]:
    return {
        "fsGroup": FLOWER_UID,
        "runAsGroup": FLOWER_UID,
        "runAsNonRoot": True,
        "runAsUser": FLOWER_UID,
        "seccompProfile": {"type": "RuntimeDefault"},
        **copy.deepcopy(overrides or {}),
    }


def merge_resources(defaults: Optional[dict[str, Any]], own: Optional[dict[str, Any]]) -> dict[str, Any]:
    """A component's resources over the defaults, key by key within requests/limits."""
    merged = copy.deepcopy(defaults or {})
    for section, amounts in (own or {}).items():
        if isinstance(amounts, dict):
            merged[section] = {**merged.get(section, {}), **copy.deepcopy(amounts)}
        else:
            merged[section] = copy.deepcopy(amounts)
    # A request above its limit makes the pod invalid. Whichever side came from the
    # defaults gives way to the one the component set.
    limits = merged.get("limits", {})
    requests = merged.get("requests", {})
    own_requests = (own or {}).get("requests", {}) if isinstance((own or {}).get("requests"), dict) else {}
    for name in list(requests):
        if name in limits and _exceeds(requests[name], limits[name]):
            if name in own_requests:
                limits[name] = requests[name]
            else:
                requests[name] = limits[name]
    return merged


def _exceeds(request: Any, limit: Any) -> bool:
    a, b = parse_quantity(str(request)), parse_quantity(str(limit))
    return a is not None and b is not None and a > b


def pod_index_env() -> dict[str, Any]:
    """The StatefulSet ordinal, straight from the label Kubernetes puts on the pod."""
    return {"name": POD_INDEX_ENV, "valueFrom": {"fieldRef": {"fieldPath": f"metadata.labels['{POD_INDEX_LABEL}']"}}}


def node_name_env() -> dict[str, Any]:
    return {"name": NODE_NAME_ENV, "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}


def telemetry_env(enabled: bool) -> list[dict[str, Any]]:
    """`FLWR_TELEMETRY_ENABLED=0` unless telemetry is asked for (Flower's default is to send)."""
    return [] if enabled else [{"name": TELEMETRY_ENV, "value": "0"}]


def merge_env(*layers: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Later layers win by name; a var keeps the position where it first appeared, so the
    order is stable and a `$(VAR)` reference to an earlier var keeps working."""
    merged: dict[str, dict[str, Any]] = {}  # insertion-ordered
    for layer in layers:
        for var in layer:
            merged[var["name"]] = var
    return list(merged.values())


def container(
    name: str,
    image: str,
    args: list[str],
    *,
    env: Optional[list[dict[str, Any]]] = None,
    resources: Optional[dict[str, Any]] = None,
    mounts: Optional[list[dict[str, Any]]] = None,
    privileged: bool = False,
    security_overrides: Optional[dict[str, Any]] = None,
    pull_policy: str = "IfNotPresent",
) -> Container:
    c: Container = {
        "name": name,
        "image": image,
        "imagePullPolicy": pull_policy,
        "args": list(args),
        "resources": copy.deepcopy(resources) if resources else {},
        "securityContext": container_security_context(privileged, security_overrides),
        "volumeMounts": scratch_mounts(name) + list(mounts or []),
    }
    if env:
        c["env"] = env
    return c


def base_pod_template(
    labels: dict[str, str],
    containers: list[Container],
    volumes: list[dict[str, Any]],
    *,
    service_account: Optional[str] = None,
    api_token: bool = False,
    security_overrides: Optional[dict[str, Any]] = None,
) -> PodTemplate:
    scratch = [{"name": scratch_volume(c["name"]), "emptyDir": {}} for c in containers]
    spec: dict[str, Any] = {}
    if service_account:
        spec["serviceAccountName"] = service_account
    spec.update(
        {
            # Only a SuperExec with the Kubernetes executor talks to the Kubernetes API.
            "automountServiceAccountToken": api_token,
            # Service env vars are noise for Flower and leak the namespace's services.
            "enableServiceLinks": False,
            "securityContext": pod_security_context(security_overrides),
            "containers": containers,
            "volumes": scratch + volumes,
        }
    )
    return {"metadata": {"labels": dict(labels)}, "spec": spec}


Item = dict[str, Any]


# The merge keys a strategic merge patch uses for these lists (Kubernetes' patchMergeKey):
# an item of the patch replaces (or, for containers, merges into) ours with the same key,
# any other item is added. Lists not named here are replaced whole, as in Kubernetes.
CONTAINER_LIST_KEYS = {
    "env": "name",
    "volumeMounts": "mountPath",
    "ports": "containerPort",
    "volumeDevices": "devicePath",
}
POD_LIST_KEYS = {"containers": "name", "initContainers": "name", "volumes": "name", "imagePullSecrets": "name"}


def _replace(_: Item, patch: Item) -> Item:
    return copy.deepcopy(patch)


def _merge_keyed(
    base: list[Item], extra: list[Item], key: str, merge: Callable[[Item, Item], Item] = _replace
) -> list[Item]:
    index = {item.get(key): i for i, item in enumerate(base)}
    out = [copy.deepcopy(item) for item in base]
    for item in extra:
        if item.get(key) in index:
            i = index[item[key]]
            out[i] = merge(out[i], item)
        else:
            index[item.get(key)] = len(out)
            out.append(copy.deepcopy(item))
    return out


def _merge_container(base: Item, patch: Item) -> Item:
    out = dict(base)
    for key, value in patch.items():
        if key in CONTAINER_LIST_KEYS:
            out[key] = _merge_keyed(out.get(key, []), value, CONTAINER_LIST_KEYS[key])
        elif key == "envFrom":  # no merge key: the patch's sources come after ours
            out[key] = list(out.get(key, [])) + copy.deepcopy(value)
        elif key == "resources" and isinstance(value, dict):
            # Key by key, so a patch setting a CPU limit keeps the GPU limit we put there.
            out[key] = merge_resources(out.get(key), value)
        elif key == "securityContext" and isinstance(value, dict):
            out[key] = with_overrides(out.get(key, {}), value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def overlay_pod_template(
    template: PodTemplate, user: Optional[dict[str, Any]], added_resources: Optional[dict[str, Any]] = None
) -> PodTemplate:
    """Overlay a user `podTemplate` (the operator's PodTemplateSpec) on a generated one.

    Scheduling fields (nodeSelector, affinity, tolerations, priorityClassName,
    runtimeClassName, topologySpreadConstraints, imagePullSecrets, ...) are taken as
    given; lists merge by their Kubernetes merge keys as a strategic merge patch would
    (containers and init containers by name, merged field by field; volumes by name;
    env by name, volumeMounts by mountPath, ports by containerPort, volumeDevices by
    devicePath); security contexts merge key by key; our labels win. A container or init
    container the template adds gets `added_resources` under its own `resources`, as a
    LimitRange would: no container of the pod goes without requests and a memory limit.
    """
    if not user:
        return template
    out = copy.deepcopy(template)
    ours = {c["name"] for c in template["spec"].get("containers", []) + template["spec"].get("initContainers", [])}
    meta = user.get("metadata") or {}
    out["metadata"]["labels"] = {**meta.get("labels", {}), **out["metadata"]["labels"]}
    if meta.get("annotations"):
        out["metadata"]["annotations"] = {**out["metadata"].get("annotations", {}), **meta["annotations"]}
    spec = out["spec"]
    for key, value in (user.get("spec") or {}).items():
        if key == "containers":
            # A patch of one of our containers goes to the pods that run it: a pool's
            # podTemplate reaches both its SuperNode pods and its distributed SuperExec pods.
            running = {c["name"] for c in spec["containers"]}
            value = [c for c in value if c.get("name") in running or c.get("name") not in MANAGED_CONTAINERS]
        if key in ("containers", "initContainers"):
            spec[key] = _merge_keyed(spec.get(key, []), value, "name", _merge_container)
        elif key in POD_LIST_KEYS:
            spec[key] = _merge_keyed(spec.get(key, []), value, POD_LIST_KEYS[key])
        elif key == "securityContext":
            spec[key] = {**spec.get(key, {}), **copy.deepcopy(value)}
        else:
            spec[key] = copy.deepcopy(value)
    if added_resources is not None:
        for c in spec.get("containers", []) + spec.get("initContainers", []):
            if c.get("name") not in ours:
                c["resources"] = merge_resources(added_resources, c.get("resources"))
    return out
