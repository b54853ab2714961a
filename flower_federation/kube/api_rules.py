"""What the API server checks of a Kubernetes fragment beyond its OpenAPI schema (kube/openapi.py).

The schema says a field is a string or an integer; the API server's validation (Kubernetes 1.34,
pkg/apis/core/validation) then refuses a volume named `Data`, an environment variable named `A=B`, `5 Gi` as a
quantity, a port of 70000, a user id of -1, a toleration that is `Exists` with a value, a field path it does not
expose. A fragment of a user's config (`env`, `volumes`, `podTemplate`, `tolerations`, a security context, ...)
reaches a pod as it was written, so these are checked here, at the fragment's config path, as the schema is:
`pulumi up` would otherwise stop half-way at the API server. The fragment is walked along its schema, so a rule
applies wherever its type appears (a PodSpec's containers, a pod template's volumes, an EnvVar in any list).

Numbers by their schema format (int32, int64) and every Quantity are checked wherever they appear."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Any, Optional

from flower_federation.kube.limits import qualified_name_problem
from flower_federation.kube.naming import is_dns_label, is_dns_subdomain
from flower_federation.kube.quantity import parse_quantity

Path = tuple[Any, ...]
Found = Iterator[tuple[Path, str]]
_CORE = "io.k8s.api.core.v1."
_QUANTITY = "io.k8s.apimachinery.pkg.api.resource.Quantity"
_INT_RANGES = {"int32": (-(2**31), 2**31 - 1), "int64": (-(2**63), 2**63 - 1)}
_ID_MAX = 2**31 - 1  # a user or group id: validation.IsValidUserID / IsValidGroupID
# The environment variable names Kubernetes 1.34 takes: any printable ASCII but '='
# (RelaxedEnvironmentVariableValidation, GA in 1.34; the schema's own description says so).
_ENV_NAME = re.compile(r"[\x20-\x3c\x3e-\x7e]+")
_IANA_SVC_NAME = re.compile(r"[a-z0-9]([a-z0-9-]{0,13}[a-z0-9])?")  # a port's name: 15 at most, a letter in it
# The field paths the downward API exposes, in an env var's fieldRef and in a downwardAPI volume's (the rest).
_FIELD_PATHS_ENV = {
    "metadata.name",
    "metadata.namespace",
    "metadata.uid",
    "spec.nodeName",
    "spec.serviceAccountName",
    "status.hostIP",
    "status.hostIPs",
    "status.podIP",
    "status.podIPs",
}
_FIELD_PATHS_VOLUME = {"metadata.name", "metadata.namespace", "metadata.uid", "metadata.labels", "metadata.annotations"}
_SUBSCRIPTED = re.compile(r"metadata\.(labels|annotations)\['(.+)'\]")


def _dns_label(value: Any) -> Optional[str]:
    if isinstance(value, str) and not is_dns_label(value):
        return (
            f"'{value}' must be a DNS-1123 label: up to 63 lowercase letters, digits and '-', alphanumeric at both ends"
        )
    return None


def _dns_subdomain(value: Any) -> Optional[str]:
    if isinstance(value, str) and not is_dns_subdomain(value):
        return f"'{value}' must be a DNS-1123 subdomain: lowercase letters, digits, '-' and '.', up to 253"
    return None


def is_qualified_name(value: str) -> bool:
    """A label or annotation key's shape: an optional DNS subdomain prefix and '/', then a name part."""
    return qualified_name_problem(value) is None


def _ids(*keys: str) -> Callable[[dict[str, Any], tuple[str, ...]], Found]:
    def check(value: dict[str, Any], _: tuple[str, ...]) -> Found:
        for key in keys:
            ids = value.get(key)
            for i, uid in enumerate(ids if isinstance(ids, list) else [ids]):
                if isinstance(uid, int) and not 0 <= uid <= _ID_MAX:
                    at = (key, i) if isinstance(ids, list) else (key,)
                    yield at, f"{uid} must be between 0 and {_ID_MAX}, inclusive"

    return check


def _env_var(value: dict[str, Any], _: tuple[str, ...]) -> Found:
    name = value.get("name")
    if isinstance(name, str) and not _ENV_NAME.fullmatch(name):
        yield ("name",), f"{name!r} must be printable ASCII characters other than '=' (and not empty)"


def _names(
    check: Callable[[Any], Optional[str]], *keys: str, empty_unset: tuple[str, ...] = ()
) -> Callable[[dict[str, Any], tuple[str, ...]], Found]:
    """`keys` of a type held to `check`, but those of `empty_unset` when empty (Kubernetes checks these only when
    set: `priorityClassName: ""`, a claim's `storageClassName: ""`, which binds a volume of no class)."""

    def check_names(value: dict[str, Any], _: tuple[str, ...]) -> Found:
        for key in keys:
            if key in empty_unset and value.get(key) == "":
                continue
            message = check(value.get(key))
            if message:
                yield (key,), message

    return check_names


def _container_port(value: dict[str, Any], _: tuple[str, ...]) -> Found:
    for key, low in (("containerPort", 1), ("hostPort", 0)):
        port = value.get(key)
        if isinstance(port, int) and not low <= port <= 65535:
            yield (key,), f"{port} must be a port number, {low} to 65535"
    name = value.get("name")
    if (
        isinstance(name, str)
        and name
        and not (_IANA_SVC_NAME.fullmatch(name) and "--" not in name and re.search("[a-z]", name))
    ):
        yield (
            ("name",),
            f"'{name}' must be a port name: up to 15 lowercase letters, digits and '-', a letter among them",
        )


def _toleration(value: dict[str, Any], _: tuple[str, ...]) -> Found:
    key, operator, effect = value.get("key") or "", value.get("operator") or "", value.get("effect") or ""
    if key and not is_qualified_name(str(key)):
        yield ("key",), f"'{key}' must be a qualified name (a label key)"
    if operator not in ("", "Equal", "Exists"):
        yield ("operator",), f"'{operator}' must be Equal or Exists"
    if not key and operator != "Exists":
        yield ("operator",), "a toleration without a key must have operator Exists"
    if operator == "Exists" and value.get("value"):
        yield ("value",), f"'{value['value']}' must be empty when operator is Exists"
    if effect not in ("", "NoSchedule", "PreferNoSchedule", "NoExecute"):
        yield ("effect",), f"'{effect}' must be NoSchedule, PreferNoSchedule or NoExecute"
    if value.get("tolerationSeconds") is not None and effect != "NoExecute":
        yield ("tolerationSeconds",), "only a NoExecute toleration takes tolerationSeconds"


def _field_selector(value: dict[str, Any], within: tuple[str, ...]) -> Found:
    path = value.get("fieldPath")
    if not isinstance(path, str):
        return
    subscripted = _SUBSCRIPTED.fullmatch(path)
    if subscripted:
        # Kubernetes lowercases an annotation's key before it checks it (annotation keys match case-insensitively).
        key = subscripted.group(2).lower() if subscripted.group(1) == "annotations" else subscripted.group(2)
        if not is_qualified_name(key):
            yield ("fieldPath",), f"'{subscripted.group(2)}' in '{path}' must be a qualified name (a label key)"
        return
    volume = _CORE + "DownwardAPIVolumeFile" in within
    allowed = _FIELD_PATHS_VOLUME if volume else _FIELD_PATHS_ENV
    if not volume and path == "spec.host":  # the API server's older name for spec.nodeName, which it converts
        return
    if path not in allowed:
        yield ("fieldPath",), f"'{path}' is not a field the downward API exposes here: {', '.join(sorted(allowed))}"


_PERCENT = re.compile(r"[0-9]+%")


def _int_or_percent(*keys: str, capped: tuple[str, ...] = ()) -> Callable[[dict[str, Any], tuple[str, ...]], Found]:
    """An amount of pods (ValidatePositiveIntOrPercent): 0 or more, or a percentage; those in `capped` at most 100%."""

    def check(value: dict[str, Any], _: tuple[str, ...]) -> Found:
        for key in keys:
            amount = value.get(key)
            if isinstance(amount, str) and not _PERCENT.fullmatch(amount):
                yield (key,), f"'{amount}' must be a whole number or a percentage (e.g. 1 or '25%')"
            elif isinstance(amount, str) and key in capped and int(amount[:-1]) > 100:
                yield (key,), f"'{amount}' must not be more than 100%"
            elif isinstance(amount, int) and not isinstance(amount, bool) and amount < 0:
                yield (key,), f"{amount} must be 0 or more"

    return check


# A type's own rules, by its OpenAPI name: (its value, the types it is inside) -> (path within it, message).
_RULES: dict[str, Callable[[dict[str, Any], tuple[str, ...]], Found]] = {
    _CORE + "EnvVar": _env_var,
    _CORE + "Volume": _names(_dns_label, "name"),
    _CORE + "Container": _names(_dns_label, "name"),
    _CORE + "ContainerPort": _container_port,
    _CORE + "PodSecurityContext": _ids("runAsUser", "runAsGroup", "fsGroup", "supplementalGroups"),
    _CORE + "SecurityContext": _ids("runAsUser", "runAsGroup"),
    # runtimeClassName is checked whenever it is given: "" names no RuntimeClass.
    _CORE + "PodSpec": _names(
        _dns_subdomain,
        "priorityClassName",
        "serviceAccountName",
        "runtimeClassName",
        empty_unset=("priorityClassName", "serviceAccountName"),
    ),
    _CORE + "PersistentVolumeClaimSpec": _names(_dns_subdomain, "storageClassName", empty_unset=("storageClassName",)),
    _CORE + "Toleration": _toleration,
    _CORE + "ObjectFieldSelector": _field_selector,
    "io.k8s.api.apps.v1.RollingUpdateDaemonSet": _int_or_percent(
        "maxSurge", "maxUnavailable", capped=("maxSurge", "maxUnavailable")
    ),
    "io.k8s.api.apps.v1.RollingUpdateDeployment": _int_or_percent(
        "maxSurge", "maxUnavailable", capped=("maxUnavailable",)
    ),
    "io.k8s.api.apps.v1.RollingUpdateStatefulSetStrategy": _int_or_percent(
        "maxUnavailable", capped=("maxUnavailable",)
    ),
}


def api_errors(value: Any, schema: dict[str, Any], definitions: dict[str, Any], own_type: str) -> Found:
    """(path in `value`, message) for each thing the API server refuses that the schema lets through; `schema` is
    the type schema `value` was checked against (`own_type` its OpenAPI name), `definitions` their `$defs`."""
    # (value, its schema, its path, the types it is inside, whether it is a whole value of the last of those types:
    # reached through a `$ref`, or the fragment itself; only then do that type's own rules apply)
    pending: list[tuple[Any, dict[str, Any], Path, tuple[str, ...], bool]] = [(value, schema, (), (own_type,), True)]
    while pending:
        node, node_schema, at, within, typed = pending.pop()
        ref = node_schema.get("$ref")
        if isinstance(ref, str):
            name = ref.rsplit("/", 1)[-1]
            node_schema, within, typed = definitions.get(name, {}), within + (name,), True
        quantity = typed and within[-1] == _QUANTITY and node is not None
        if quantity and (isinstance(node, bool) or parse_quantity(str(node)) is None):
            yield at, f"'{node}' is not a Kubernetes quantity (e.g. 500m, 2, 1Gi)"
        bounds = _INT_RANGES.get(node_schema.get("format", ""))
        if bounds and isinstance(node, int) and not isinstance(node, bool) and not bounds[0] <= node <= bounds[1]:
            yield at, f"{node} is beyond {node_schema['format']}'s range, {bounds[0]} to {bounds[1]}"
        if isinstance(node, dict):
            rule = _RULES.get(within[-1]) if typed else None
            if rule:
                yield from ((at + path, message) for path, message in rule(node, within))
            properties = node_schema.get("properties", {})
            extra = node_schema.get("additionalProperties")
            for key, child in node.items():
                child_schema = properties.get(key, extra if isinstance(extra, dict) else None)
                if isinstance(child_schema, dict):
                    pending.append((child, child_schema, at + (key,), within, False))
        elif isinstance(node, list) and isinstance(node_schema.get("items"), dict):
            pending.extend((item, node_schema["items"], at + (i,), within, False) for i, item in enumerate(node))
