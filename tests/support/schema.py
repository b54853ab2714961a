"""Strict schema validation of rendered objects: Kubernetes 1.34 (kubernetes-validate)
for the core kinds, the vendored Gateway API schemas (tests/support/gateway_api/) for
`gateway.networking.k8s.io` objects, the vendored Prometheus Operator schemas
(tests/support/prometheus_operator/) for `monitoring.coreos.com` objects."""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterable, Iterator
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import kubernetes_validate.utils
import referencing

from tests.support.gateway_api.generate import GROUP as GATEWAY_API_GROUP
from tests.support.gateway_api.generate import RELEASES as GATEWAY_API_RELEASES
from tests.support.prometheus_operator.generate import GROUP as PROMETHEUS_OPERATOR_GROUP
from tests.support.prometheus_operator.generate import RELEASE as PROMETHEUS_OPERATOR_RELEASE

K8S_VERSION = "1.34.0"
GATEWAY_API_DIR = Path(__file__).resolve().parent / "gateway_api"
PROMETHEUS_OPERATOR_DIR = Path(__file__).resolve().parent / "prometheus_operator"

# kubernetes-validate reads and parses its schema files on every call (the 1.34 `_definitions.json` is megabytes of
# JSON: ~10 ms an object, a tenth of `make test-rest`'s CPU); read once each, the validation is its own, unchanged
# (the parsed schemas are only read: `Resource.from_contents` and the validator copy nothing into them).
if not hasattr(kubernetes_validate.utils.schema_contents, "cache_info"):
    kubernetes_validate.utils.schema_contents = functools.lru_cache(maxsize=None)(
        kubernetes_validate.utils.schema_contents
    )


def validate(obj: dict[str, Any]) -> None:
    """Raise kubernetes_validate.ValidationError unless `obj` is valid, strictly (a
    GatewayAPIValidationError, its subclass, for a Gateway API object; a
    kubernetes_validate.SchemaNotFoundError for a kind or version without a schema)."""
    if _group(obj.get("apiVersion")) == GATEWAY_API_GROUP:
        validate_gateway_api(obj)
    elif _group(obj.get("apiVersion")) == PROMETHEUS_OPERATOR_GROUP:
        validate_prometheus_operator(obj)
    else:
        kubernetes_validate.validate(obj, K8S_VERSION, strict=True)


def validate_all(objects: Iterable[dict[str, Any]]) -> None:
    objects = list(objects)
    assert objects
    for obj in objects:
        validate(obj)


# --- Gateway API -------------------------------------------------------------------


class GatewayAPIValidationError(kubernetes_validate.ValidationError):
    """A Gateway API object broke its vendored schema of a release; str() is `Kind/name at path: message`."""

    def __init__(self, caught: jsonschema.ValidationError, obj: dict[str, Any], release: str) -> None:
        super().__init__(caught, version=release)
        metadata = obj.get("metadata")
        self.object_name = f"{obj.get('kind')}/{metadata.get('name') if isinstance(metadata, dict) else None}"

    def __str__(self) -> str:
        where = _json_path(self.absolute_path) or "(object)"
        return f"{self.object_name} at {where}: {self.message} (Gateway API {self.version} schema)"


class GatewayAPISchemaNotFoundError(kubernetes_validate.SchemaNotFoundError):
    """A `gateway.networking.k8s.io` kind or version that has no vendored schema."""

    def __init__(self, kind: Any, api_version: Any) -> None:
        releases = ", ".join(GATEWAY_API_RELEASES)
        super().__init__(kind=kind, version=releases, api_version=api_version)
        known = ", ".join(sorted({f"{k} {v}" for by_kind in _gateway_api_schemas().values() for v, k in by_kind}))
        self.message = (
            f"no vendored Gateway API ({releases}) schema for kind {kind!r} with apiVersion "
            f"{api_version!r} (vendored: {known}; see tests/support/gateway_api/README.md)"
        )
        Exception.__init__(self, self.message)


def validate_gateway_api(obj: dict[str, Any]) -> None:
    """Raise GatewayAPIValidationError unless `obj` passes the vendored strict schema of
    every release that serves its kind and version, GatewayAPISchemaNotFoundError if none
    does (CEL `x-kubernetes-validations` are not evaluated: see gateway_api/README.md)."""
    api_version, kind = obj.get("apiVersion"), obj.get("kind")
    releases = gateway_api_releases_serving(obj)
    if not releases:
        raise GatewayAPISchemaNotFoundError(kind=kind, api_version=api_version)
    for release in releases:
        validator = _gateway_api_validators()[release][(api_version, kind)]
        error = jsonschema.exceptions.best_match(validator.iter_errors(obj))
        if error is not None:
            raise GatewayAPIValidationError(error, obj, release)


class PrometheusOperatorValidationError(GatewayAPIValidationError):
    def __str__(self) -> str:
        where = _json_path(self.absolute_path) or "(object)"
        return f"{self.object_name} at {where}: {self.message} (Prometheus Operator {self.version} schema)"


def validate_prometheus_operator(obj: dict[str, Any]) -> None:
    """Raise PrometheusOperatorValidationError (the Gateway API schemas' strict checks) unless `obj`
    passes the vendored Prometheus Operator schema of its kind and version; SchemaNotFoundError if none."""
    key = (obj.get("apiVersion"), obj.get("kind"))
    validator = _prometheus_operator_validators().get(key)
    if validator is None:
        raise kubernetes_validate.SchemaNotFoundError(
            kind=obj.get("kind"), version=PROMETHEUS_OPERATOR_RELEASE, api_version=obj.get("apiVersion")
        )
    error = jsonschema.exceptions.best_match(validator.iter_errors(obj))
    if error is not None:
        raise PrometheusOperatorValidationError(error, obj, PROMETHEUS_OPERATOR_RELEASE)


def gateway_api_releases_serving(obj: dict[str, Any]) -> list[str]:
    """The vendored Gateway API releases with a schema for `obj`'s apiVersion and kind, oldest first."""
    key = (obj.get("apiVersion"), obj.get("kind"))
    return [release for release, by_kind in _gateway_api_schemas().items() if key in by_kind]


def _group(api_version: Any) -> str:
    return api_version.rpartition("/")[0] if isinstance(api_version, str) else ""


def _json_path(path: Iterable[Any]) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else f".{part}"
    return out.lstrip(".")


@functools.cache
def _gateway_api_schemas() -> dict[str, dict[tuple[str, str], dict[str, Any]]]:
    """The vendored schemas by release, then by (apiVersion, kind), as their fixed values say."""
    schemas: dict[str, dict[tuple[str, str], dict[str, Any]]] = {}
    for release in GATEWAY_API_RELEASES:
        by_kind = schemas[release] = {}
        for file in sorted((GATEWAY_API_DIR / release).glob("*.json")):
            schema = json.loads(file.read_text())
            props = schema["properties"]
            by_kind[(props["apiVersion"]["const"], props["kind"]["const"])] = schema
    return schemas


def _re2_search(validator: Any, pattern: str, instance: Any, schema: Any) -> Iterator[jsonschema.ValidationError]:
    """`pattern` as the API server (Go RE2) reads it: `$` ends the text, never before a final newline."""
    if validator.is_type(instance, "string") and not _re2(pattern).search(instance):
        yield jsonschema.ValidationError(f"{instance!r} does not match {pattern!r}")


@functools.cache
def _re2(pattern: str) -> re.Pattern[str]:
    out, i, in_class = [], 0, False
    while i < len(pattern):
        c = pattern[i]
        if c == "\\":
            out.append(pattern[i : i + 2])
            i += 2
            continue
        if in_class:
            in_class = c != "]"
        elif c == "[":
            # `[`, an optional `^`, then a `]` that is a member, not the end.
            j = i + 1 + (pattern[i + 1 : i + 2] == "^")
            j += pattern[j : j + 1] == "]"
            out.append(pattern[i:j])
            i, in_class = j, True
            continue
        elif c == "$":
            out.append(r"\Z")
            i += 1
            continue
        out.append(c)
        i += 1
    return re.compile("".join(out))


def _list_map_keys(validator: Any, keys: list[str], instance: Any, schema: Any) -> Iterator[jsonschema.ValidationError]:
    """`x-kubernetes-list-type: map`: no two items with the same key fields."""
    if not validator.is_type(instance, "array"):
        return
    seen: set[str] = set()
    for index, item in enumerate(instance):
        if not isinstance(item, dict):
            continue
        key = json.dumps({k: item.get(k) for k in keys}, sort_keys=True)
        if key in seen:
            yield jsonschema.ValidationError(f"Duplicate value: {key}", path=[index])
        seen.add(key)


_GatewayAPIValidator = jsonschema.validators.extend(
    jsonschema.Draft202012Validator,
    validators={"pattern": _re2_search, "x-kubernetes-list-map-keys": _list_map_keys},
    # A JSON integer: the API server refuses 1.0 for an integer field.
    type_checker=jsonschema.Draft202012Validator.TYPE_CHECKER.redefine(
        "integer", lambda _checker, value: isinstance(value, int) and not isinstance(value, bool)
    ),
)


@functools.cache
def _gateway_api_validators() -> dict[str, dict[tuple[Any, Any], Any]]:
    # metadata refers to kubernetes-validate's ObjectMeta, in `_definitions.json` by its `$id`.
    definitions = json.loads(
        resources.files("kubernetes_validate")
        .joinpath(f"kubernetes-json-schema/v{K8S_VERSION}-local-strict", "_definitions.json")
        .read_text()
    )
    registry = referencing.Resource.from_contents(definitions) @ referencing.Registry()
    return {
        release: {key: _GatewayAPIValidator(schema, registry=registry) for key, schema in by_kind.items()}
        for release, by_kind in _gateway_api_schemas().items()
    }


@functools.cache
def _prometheus_operator_validators() -> dict[tuple[Any, Any], Any]:
    registry = referencing.Resource.from_contents(_definitions()) @ referencing.Registry()
    out = {}
    for file in sorted((PROMETHEUS_OPERATOR_DIR / PROMETHEUS_OPERATOR_RELEASE).glob("*.json")):
        schema = json.loads(file.read_text())
        props = schema["properties"]
        out[(props["apiVersion"]["const"], props["kind"]["const"])] = _GatewayAPIValidator(schema, registry=registry)
    return out


@functools.cache
def _definitions() -> Any:
    return json.loads(
        resources.files("kubernetes_validate")
        .joinpath(f"kubernetes-json-schema/v{K8S_VERSION}-local-strict", "_definitions.json")
        .read_text()
    )
