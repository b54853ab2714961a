"""Kubernetes fragments in config (`env`, volumes, `resources`, `podTemplate`, ...)
checked against the Kubernetes OpenAPI schema, and our reserved names kept free."""

from __future__ import annotations

from collections.abc import Iterator
from decimal import Decimal
from typing import Any

from flower_federation.config.errors import Problem, problem
from flower_federation.flower import layout
from flower_federation.flower.layout import MANAGED_CONTAINERS, RESERVED_ENV, RESERVED_MOUNT_PATHS, RESERVED_VOLUMES
from flower_federation.kube.naming import SUPEREXEC_CLIENTAPP, SUPEREXEC_SERVERAPP, SUPERLINK, SUPERNODE
from flower_federation.kube.openapi import fragment_errors
from flower_federation.kube.quantity import parse_quantity
from flower_federation.rules.labels import label_problems, our_labels
from flower_federation.rules.raw import At, Pools, Raw, as_dict, as_list, get, superexecs_of

_LIST_FRAGMENTS = {
    "env": "envvar-v1.json",
    "volumes": "volume-v1.json",
    "volumeMounts": "volumemount-v1.json",
    "superexecVolumeMounts": "volumemount-v1.json",
    "volumeClaimTemplates": "persistentvolumeclaim-v1.json",
}

_DICT_FRAGMENTS = {
    "resources": "resourcerequirements-v1.json",
    "superexecResources": "resourcerequirements-v1.json",
    "supernodeResources": "resourcerequirements-v1.json",
}


def fragments(raw: Raw, pools: Pools, stack: str) -> Iterator[Problem]:
    sections: list[tuple[At, Raw, str]] = [(("superlink",), as_dict(raw.get("superlink")), "superlink")]
    sections += [(("supernodes", "pools", i), pool, "pool") for i, pool in pools]
    for key, schema in (
        ("securityContext", "securitycontext-v1.json"),
        ("podSecurityContext", "podsecuritycontext-v1.json"),
        ("defaultResources", "resourcerequirements-v1.json"),
    ):
        value = raw.get(key)
        if isinstance(value, dict):
            for path, msg in fragment_errors(value, schema):
                yield problem((key,) + path, msg)
            if key == "defaultResources":
                yield from quantities((key,), value)
            if key == "securityContext":
                yield from _privileged((key,), value)
    supernodes = as_dict(raw.get("supernodes"))
    yield from list_fragment(("supernodes", "env"), supernodes.get("env"), "envvar-v1.json")
    yield from reserved_env(("supernodes", "env"), supernodes.get("env"))
    for at, section, kind in sections:
        for key, schema in _LIST_FRAGMENTS.items():
            yield from list_fragment(at + (key,), section.get(key), schema)
        for key, schema in _DICT_FRAGMENTS.items():
            value = section.get(key)
            if isinstance(value, dict):
                for path, msg in fragment_errors(value, schema):
                    yield problem(at + (key,) + path, msg)
                yield from quantities(at + (key,), value)
        yield from reserved_env(at + ("env",), section.get("env"))
        yield from _duplicates(at, section)
        yield from _volume_refs(at, section)
        template = section.get("podTemplate")
        yield from _pod_template_problems(at + ("podTemplate",), template, _pod_containers(raw, kind))
        ours = our_labels(raw, stack, at + ("podTemplate",))
        yield from label_problems(at + ("podTemplate", "metadata", "labels"), get(template, "metadata", "labels"), ours)


def quantities(at: At, resources: Raw) -> Iterator[Problem]:
    """Amounts as the API server takes them: quantities, not negative, and within one
    fragment no request above its limit (across fragments the defaults give way)."""
    amounts: dict[str, dict[str, Decimal]] = {"limits": {}, "requests": {}}
    for section in ("limits", "requests"):
        for name, amount in as_dict(resources.get(section)).items():
            value = None if isinstance(amount, bool) else parse_quantity(str(amount))
            if value is None:
                yield problem(at + (section, name), f"'{amount}' is not a Kubernetes quantity (e.g. 500m, 2, 1Gi)")
            elif value < 0:
                yield problem(at + (section, name), f"'{amount}' is negative")
            else:
                amounts[section][name] = value
    for name, request in amounts["requests"].items():
        limit = amounts["limits"].get(name)
        if limit is not None and request > limit:
            shown = resources["limits"][name]
            yield problem(at + ("requests", name), f"'{resources['requests'][name]}' is above limits.{name} '{shown}'")


def _privileged(at: At, security: Any) -> Iterator[Problem]:
    if get(security, "privileged") is True and get(security, "allowPrivilegeEscalation") is False:
        yield problem(at + ("allowPrivilegeEscalation",), "Kubernetes refuses false for a privileged container")


def list_fragment(at: At, value: Any, schema: str) -> Iterator[Problem]:
    if not isinstance(value, list):
        return
    for j, item in enumerate(value):
        for path, msg in fragment_errors(item, schema):
            yield problem(at + (j,) + path, msg)


def reserved_env(at: At, env: Any) -> Iterator[Problem]:
    for j, item in enumerate(as_list(env)):
        if isinstance(item, dict) and item.get("name") in RESERVED_ENV:
            yield problem(at + (j, "name"), f"{item['name']} is set by flower-federation (node config placeholders)")


# Lists whose items the API server wants unique within a pod (or container): by this key.
_UNIQUE: dict[str, tuple[tuple[str, ...], str]] = {
    "volumes": (("name",), "volume name"),
    "volumeClaimTemplates": (("metadata", "name"), "claim name"),
    "volumeMounts": (("mountPath",), "mountPath"),
    "superexecVolumeMounts": (("mountPath",), "mountPath"),
}


def _duplicates(at: At, section: Raw) -> Iterator[Problem]:
    for key, (field, what) in _UNIQUE.items():
        seen: dict[str, int] = {}
        for j, item in enumerate(as_list(section.get(key))):
            value = get(item, *field)
            if not isinstance(value, str):
                continue
            if value in seen:
                yield problem(at + (key, j, *field), f"duplicate {what} '{value}' (also {key}[{seen[value]}])")
            seen.setdefault(value, j)


# What flower-federation mounts at each reserved path, so a refusal says what is there.
MOUNTED = {
    **dict.fromkeys(layout.WRITABLE_PATHS.values(), "a writable emptyDir"),
    layout.STATE_DIR: "the state volume (sized by persistence)",
    layout.TLS_DIR: "the component's TLS certificate",
    layout.CA_DIR: "the CA certificate",
    layout.RUNTIME_TLS_DIR: "the runtime API's TLS certificate",
    layout.RUNTIME_CA_DIR: "a site's own CA certificate for the runtime API",
    layout.SUPEREXEC_AUTH_DIR: "the SuperExec auth secret",
    layout.NODE_KEY_DIR: "the node authentication key",
    layout.EXECUTOR_CONFIG_DIR: "the Kubernetes executor's config",
    layout.REGISTRATION_DIR: "the node registration's files",
    layout.FLEET_PROXY_CONFIG_DIR: "the Fleet-only proxy's config",
    layout.EXPORTER_DIR: "the federation exporter's files",
    layout.EXPORTER_CERT_DIR: "the federation exporter's copy of the server certificate",
    **dict.fromkeys(layout.AMD_DEVICES.values(), "the AMD GPU device (gpu.mountAll)"),
}
assert set(MOUNTED) == RESERVED_MOUNT_PATHS, "a reserved mount path without a description"


def already_mounted(path: str) -> str:
    return f"{path} is already {MOUNTED[path]} mounted by flower-federation; leave this mount out"


def _volume_refs(at: At, section: Raw) -> Iterator[Problem]:
    declared = {v.get("name") for v in as_list(section.get("volumes")) if isinstance(v, dict)}
    declared |= {
        get(v, "metadata", "name") for v in as_list(section.get("volumeClaimTemplates")) if isinstance(v, dict)
    }
    declared |= {v.get("name") for v in as_list(get(section, "podTemplate", "spec", "volumes")) if isinstance(v, dict)}
    for key in ("volumes", "volumeClaimTemplates"):
        for j, v in enumerate(as_list(section.get(key))):
            if not isinstance(v, dict):
                continue  # the schema check reports it
            vname = v.get("name") if key == "volumes" else get(v, "metadata", "name")
            if key == "volumeClaimTemplates" and vname is None:
                yield problem(at + (key, j, "metadata", "name"), "required: the name mounts use for the claim")
            if vname in RESERVED_VOLUMES:
                path = at + (key, j) + (("name",) if key == "volumes" else ("metadata", "name"))
                yield problem(path, f"volume name '{vname}' is used by flower-federation")
    for key in ("volumeMounts", "superexecVolumeMounts"):
        for j, m in enumerate(as_list(section.get(key))):
            if not isinstance(m, dict):
                continue
            if isinstance(m.get("name"), str) and m["name"] not in declared:
                yield problem(
                    at + (key, j, "name"), f"no volume named '{m['name']}' in volumes or volumeClaimTemplates"
                )
            if m.get("mountPath") in RESERVED_MOUNT_PATHS:
                yield problem(at + (key, j, "mountPath"), already_mounted(m["mountPath"]))
    # A podTemplate's containers mount the same volumes (their paths are checked in _pod_template_problems).
    spec = as_dict(get(section, "podTemplate", "spec"))
    for key in ("containers", "initContainers"):
        for j, c in enumerate(as_list(spec.get(key))):
            for k, m in enumerate(as_list(get(c, "volumeMounts"))):
                name = get(m, "name")
                if isinstance(name, str) and name not in declared:
                    yield problem(
                        at + ("podTemplate", "spec", key, j, "volumeMounts", k, "name"),
                        f"no volume named '{name}' in volumes, volumeClaimTemplates or podTemplate.spec.volumes",
                    )


def _pod_containers(raw: Raw, kind: str) -> tuple[str, ...]:
    """Our containers in the pods a section's podTemplate patches: the SuperLink's pod, or
    a pool's SuperNode pods and distributed SuperExec pods."""
    superexecs = superexecs_of(raw)
    if kind == "superlink":
        return (SUPERLINK,) + ((SUPEREXEC_SERVERAPP,) if superexecs.sidecar else ())
    return (SUPERNODE,) + ((SUPEREXEC_CLIENTAPP,) if superexecs.process_isolation else ())


def _pod_template_problems(at: At, template: Any, ours: tuple[str, ...]) -> Iterator[Problem]:
    if not isinstance(template, dict):
        return
    spec = as_dict(template.get("spec"))
    # PodSpec requires `containers`; a pod template here usually only patches, so check
    # it as if it named one container.
    probe = dict(template)
    probe["spec"] = {**spec, "containers": spec.get("containers", [{"name": ours[0]}])}
    for path, msg in fragment_errors(probe, "podtemplatespec-v1.json"):
        yield problem(at + path, msg)
    for key in ("containers", "initContainers"):
        for j, c in enumerate(as_list(spec.get(key))):
            resources = get(c, "resources")
            if isinstance(resources, dict):
                yield from quantities(at + ("spec", key, j, "resources"), resources)
            yield from _privileged(at + ("spec", key, j, "securityContext"), get(c, "securityContext"))
    for j, c in enumerate(as_list(spec.get("containers"))):
        if isinstance(c, dict) and c.get("name") in MANAGED_CONTAINERS:
            for field in ("image", "command", "args"):
                if field in c:
                    hint = "images" if field == "image" else "extraArgs"
                    yield problem(
                        at + ("spec", "containers", j, field),
                        f"the {c['name']} container's {field} is managed; use {hint} instead",
                    )
            # A patch's volumeMounts merge by mountPath: one at a path of ours would replace our mount.
            for k, m in enumerate(as_list(c.get("volumeMounts"))):
                if isinstance(m, dict) and m.get("mountPath") in RESERVED_MOUNT_PATHS:
                    yield problem(
                        at + ("spec", "containers", j, "volumeMounts", k, "mountPath"),
                        already_mounted(m["mountPath"]),
                    )
    yield from _added_containers(at, spec, ours)
    for j, v in enumerate(as_list(spec.get("volumes"))):
        if isinstance(v, dict) and v.get("name") in RESERVED_VOLUMES:
            yield problem(
                at + ("spec", "volumes", j, "name"), f"volume name '{v['name']}' is used by flower-federation"
            )


def _added_containers(at: At, spec: Raw, ours: tuple[str, ...]) -> Iterator[Problem]:
    """A patch container merges into ours of the same name; any other is added to the pod,
    so it needs an image and a name no container of the pod has."""
    theirs = ", ".join(ours)
    for key in ("containers", "initContainers"):
        for j, c in enumerate(as_list(spec.get(key))):
            name = c.get("name") if isinstance(c, dict) else None
            if not isinstance(name, str) or (key == "containers" and name in ours):
                continue
            where = at + ("spec", key, j)
            if key == "containers" and name in MANAGED_CONTAINERS:
                yield problem(where + ("name",), f"these pods run no {name} container (theirs: {theirs})")
            elif name in MANAGED_CONTAINERS or name in ours:
                yield problem(where + ("name",), f"'{name}' is the name of a container of flower-federation's")
            elif not c.get("image"):
                yield problem(where + ("image",), f"required: '{name}' is a container of your own (ours: {theirs})")
