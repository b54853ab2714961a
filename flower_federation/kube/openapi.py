"""Kubernetes OpenAPI (JSON schema, strict) checks for config fragments.

Uses the schemas kubernetes-validate ships, so a typo in `podTemplate` or `env` is
reported against the user's config path at `pulumi preview` time rather than by the API
server half-way through `pulumi up`.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterator
from importlib import resources
from typing import TYPE_CHECKING, Any

from flower_federation.kube.api_rules import api_errors

if TYPE_CHECKING:
    import jsonschema

KUBERNETES_VERSION = "1.34.0"
_SCHEMA_DIR = f"kubernetes-json-schema/v{KUBERNETES_VERSION}-local-strict"


@functools.cache
def _load(filename: str) -> Any:
    ref = resources.files("kubernetes_validate").joinpath(_SCHEMA_DIR, filename)
    return json.loads(ref.read_text())


def type_schema(filename: str) -> Any:
    """One Kubernetes type's JSON schema (e.g. `securitycontext-v1.json`; `_definitions.json` holds the `$defs`)."""
    return _load(filename)


@functools.cache
def _validator(schema_file: str) -> jsonschema.protocols.Validator:
    # Imported here: jsonschema and its dependencies cost ~0.1 s to import, and most
    # stacks carry no Kubernetes fragment to check.
    import jsonschema
    import referencing

    schema = _load(schema_file)
    # Type schemas refer to `_definitions.json` by its `$id`, as kubernetes-validate does.
    registry = referencing.Resource.from_contents(_load("_definitions.json")) @ referencing.Registry()
    return jsonschema.validators.Draft202012Validator(schema, registry=registry)


def fragment_errors(value: Any, type_file: str) -> Iterator[tuple[tuple[Any, ...], str]]:
    """(relative path, message) for each schema violation of `value` against one type
    schema, e.g. `envvar-v1.json`; deepest-first errors are flattened for readability. A fragment the schema
    takes is then checked as the API server would (kube/api_rules.py)."""
    errors = sorted(_validator(type_file).iter_errors(value), key=lambda e: list(map(str, e.absolute_path)))
    for err in errors:
        leaves = _leaf_errors(err)
        for leaf in leaves:
            yield tuple(leaf.absolute_path), _message(leaf)
    if not errors:
        definitions = _load("_definitions.json")["$defs"]
        yield from api_errors(value, _load(type_file), definitions, _type_name(type_file))


@functools.cache
def _type_name(type_file: str) -> str:
    """The OpenAPI name of a type schema's file: `KIND-VERSION.json` is core's (`envvar-v1.json` ->
    `io.k8s.api.core.v1.EnvVar`), `KIND-GROUP-VERSION.json` its group's (`statefulsetupdatestrategy-apps-v1.json` ->
    `io.k8s.api.apps.v1.StatefulSetUpdateStrategy`)."""
    kind, *group, version = type_file.removesuffix(".json").split("-")
    within = f".{'.'.join(group) or 'core'}.{version}.{kind}"
    names = [n for n in _load("_definitions.json")["$defs"] if n.lower().endswith(within)]
    return names[0] if len(names) == 1 else ""


def _leaf_errors(err: jsonschema.ValidationError) -> list[jsonschema.ValidationError]:
    # anyOf/oneOf (e.g. `int-or-string`, nullable types) wrap the useful error.
    if err.context:
        from jsonschema.exceptions import best_match

        best = best_match(err.context)
        return [best] if best is not None else [err]
    return [err]


def _message(err: jsonschema.ValidationError) -> str:
    if err.validator == "additionalProperties":
        return f"not a Kubernetes field here: {err.message}"
    return err.message
