"""The Pulumi package schema of the `flower-federation` component plugin, generated from the config model, so
that TypeScript, Go, C#, Java and YAML programs get the same typed `Federation` the stack config describes.

One component, `flower-federation:index:Federation`. Its inputs are the top-level keys of the stack config
`flower-federation:federation` (config/__init__.py `Federation`), by the same camelCase names, plus
`clusterProviders` and `nodeAuthKeys` (`EXTRA_INPUTS`); its outputs are `OUTPUTS`, which the component imports.
Every model the config nests is an object type named as in pydantic's JSON schema (`$defs`); every `Literal` is a
string enum type (`ENUM_NAMES`). `make schema` writes `schema.json` beside this module, which the provider serves.

How the model's JSON schema maps (docs/pulumi-package.md, "The package schema"): `Optional[X]` is X, not required;
a union is `oneOf`; `dict[str, X]` a map of X; `dict[str, Any]` a map of `pulumi.json#/Any`, `Any` that type
itself. Defaults are stated in the descriptions, never as schema `default`s: generated SDKs fill those in before
the component sees its inputs, and the config tells a key that is set from one left out (probe settings layer key
by key: config/shared_settings.py, plan/probes.py). Bounds and patterns stay the provider's to check (pydantic,
rules/), with every other rule.
"""

from __future__ import annotations

import importlib
import json
from pathlib import Path
from typing import Any, NamedTuple

from flower_federation.config import json_schema

Spec = dict[str, Any]

PACKAGE = "flower-federation"
TOKEN_PREFIX = f"{PACKAGE}:index:"
FEDERATION = f"{TOKEN_PREFIX}Federation"
# requirements.txt's pin of pulumi-kubernetes (tests/test_package_schema.py holds them equal): the schema the
# generated SDKs take the Kubernetes Provider type from, and the package they depend on.
KUBERNETES_VERSION = "4.34.2"
KUBERNETES_PROVIDER = f"/kubernetes/v{KUBERNETES_VERSION}/schema.json#/provider"
ANY = "pulumi.json#/Any"
SCHEMA_FILE = Path(__file__).resolve().with_name("schema.json")

# The SDKs' names. Python: not `flower_federation`, the name of this package, which an SDK of the same name would
# overwrite in an environment holding both (Pulumi's own default form, `pulumi_<name>`). Node.js: under the
# project's own npm scope (Pulumi's default would be `@pulumi/flower-federation`, a scope that is Pulumi's).
# C#: the root namespace replaces `Pulumi` (a NuGet prefix reserved by Pulumi), so `FlowerFederation.FlowerFederation`.
# Go: `pulumi package add` writes a `replace` of this module to the local SDK; until the project is published from
# a repository of its own, a path under example.com (reserved for examples) that claims no one's.
LANGUAGE: Spec = {
    "csharp": {"rootNamespace": "FlowerFederation", "respectSchemaVersion": True},
    "go": {
        "importBasePath": "example.com/flower-federation/sdk/go/flowerfederation",
        "generateResourceContainerTypes": True,
        "respectSchemaVersion": True,
    },
    "nodejs": {"packageName": "@flower-federation/pulumi", "respectSchemaVersion": True},
    "python": {"packageName": "pulumi_flower_federation", "respectSchemaVersion": True},
}


class OutputSpec(NamedTuple):
    """One output of the component: its Pulumi type, whether it is always set, and what it holds."""

    type: Spec
    required: bool
    description: str


_STRING: Spec = {"type": "string"}
_KEYS_BY_POOL_AND_SLOT: Spec = {
    "type": "object",
    "additionalProperties": {"type": "object", "additionalProperties": {"type": "string"}},
}

# The component's outputs, stated once: the schema's `properties` and `required`, and the component's attributes.
OUTPUTS: dict[str, OutputSpec] = {
    "fleetAddress": OutputSpec(
        _STRING,
        True,
        "`host:port` of the Fleet API the SuperNodes dial: the SuperLink's Service in the cluster, or on a site the "
        "hub's address.",
    ),
    "controlAddress": OutputSpec(
        _STRING, False, "`host:port` of the SuperLink's Control API in the cluster (`flwr` in a pod). None on a site."
    ),
    "externalAddress": OutputSpec(
        _STRING, False, "`host:port` sites dial from outside the cluster (`superlink.externalAddress`), when set."
    ),
    "caCertificate": OutputSpec(
        _STRING,
        False,
        "The CA certificate (PEM, public) SuperNodes and `flwr` trust: generated here, read from the Secret "
        "named, or (a site) the hub's; none without TLS.",
    ),
    "nodePublicKeys": OutputSpec(
        _KEYS_BY_POOL_AND_SLOT,
        True,
        "Node authentication: every SuperNode's OpenSSH public key, `{pool: {slot: key}}` (what a hub's "
        "`sites[].publicKeys` lists); empty without it.",
    ),
    "flwrConfig": OutputSpec(
        _STRING, False, "The `flwr` CLI's connection config (TOML) for this federation. None on a site."
    ),
    "flwrConfigFile": OutputSpec(
        _STRING,
        False,
        "Where `flwrConfig` goes: `~/.flwr/config.toml` (Flower 1.26+) or the app's `pyproject.toml`. None on a site.",
    ),
    "namespace": OutputSpec(_STRING, True, "The namespace of the federation's objects."),
    "role": OutputSpec(_STRING, True, "`federation`, `hub` or `site`."),
    "flowerVersion": OutputSpec(_STRING, True, "The Flower version every command line and port was made for."),
}

# Inputs the stack config has no key for: what a program passes as Pulumi values instead.
EXTRA_INPUTS: dict[str, Spec] = {
    "clusterProviders": {
        "type": "object",
        "additionalProperties": {"$ref": KUBERNETES_PROVIDER},
        "description": (
            "The Kubernetes provider of each named cluster, by its name in `clusters` (in place of "
            "`clusters.<name>.kubeconfig`). The federation's own cluster is the `provider` resource option's."
        ),
    },
    "nodeAuthKeys": {
        **_KEYS_BY_POOL_AND_SLOT,
        "secret": True,
        "description": (
            "`nodeAuth.keySource: config`: the SuperNodes' private keys, `{pool: {slot: key}}`, each an OpenSSH or PEM "
            "(PKCS#8, SEC1) ECDSA P-384 key; the stack config's secret `nodeAuthKeys`."
        ),
    },
}

# Config properties that hold credentials: secret in every SDK (the program refuses them in plain text).
SECRETS = frozenset({("Cluster", "kubeconfig")})

# The names of enum types used in more than one place, or better named than `<Model><Property>` (the name an enum
# used once gets; the Federation's own properties leave out the model). A new enum used twice must be named here.
ENUM_NAMES: dict[tuple[str, ...], str] = {
    ("none", "nano", "micro", "small", "medium", "large", "xlarge", "2xlarge"): "ResourcesPreset",
    ("Always", "IfNotPresent", "Never"): "PullPolicy",
    ("none", "soft", "hard"): "AffinityPreset",
    ("ClusterIP", "NodePort", "LoadBalancer"): "ServiceType",
    ("StatefulSet", "DaemonSet"): "PoolKind",
    ("generated", "existingSecret", "copyFromServerSecret"): "TrustedCaSource",
}
# Enum values that are no identifier: the member name every SDK gets instead of a prefixed `_2xlarge`.
ENUM_VALUE_NAMES = {"2xlarge": "TwoXlarge"}

_SCALARS = ("string", "integer", "number", "boolean")
_RESOURCE_DESCRIPTION = (
    "A Flower federation on Kubernetes: a SuperLink and pools of SuperNodes, a hub that sites dial, or a site's "
    "pools, with TLS, NetworkPolicies and restricted pods by default. Its inputs are the stack config "
    "`flower-federation:federation`, key for key."
)


def project_version() -> str:
    """`flower_federation.__version__`, where the package states its version (read off the package itself, not
    imported from a layer: the root package holds no code)."""
    return str(importlib.import_module("flower_federation").__version__)


def type_ref(name: str) -> Spec:
    return {"$ref": f"#/types/{TOKEN_PREFIX}{name}"}


def package_schema(version: str) -> Spec:
    """The Pulumi package schema (https://www.pulumi.com/docs/iac/extending-pulumi/schema/) of `version`."""
    model = json_schema()
    types = _Types(model)
    inputs = {key: types.property("Federation", key, node) for key, node in model["properties"].items()}
    clash = sorted(set(inputs) & set(EXTRA_INPUTS))
    if clash:
        raise ValueError(f"config keys {clash} clash with the component's own inputs")
    resource: Spec = {
        "isComponent": True,
        "description": _RESOURCE_DESCRIPTION,
        "inputProperties": {**inputs, **EXTRA_INPUTS},
        "requiredInputs": sorted(model.get("required", [])),
        "properties": {name: {**out.type, "description": out.description} for name, out in OUTPUTS.items()},
        "required": sorted(name for name, out in OUTPUTS.items() if out.required),
    }
    return {
        "name": PACKAGE,
        "displayName": "Flower Federation",
        "description": (
            "Flower federated-learning federations on Kubernetes: one component, `Federation`, whose inputs are the "
            "flower-federation stack config."
        ),
        "version": version,
        "keywords": ["flower", "federated-learning", "kubernetes", "kind/component", "category/infrastructure"],
        "dependencies": [{"name": "kubernetes", "version": KUBERNETES_VERSION}],
        "language": LANGUAGE,
        "resources": {FEDERATION: resource},
        "types": types.specs(),
    }


def schema_text(version: str | None = None) -> str:
    """What `schema.json` holds: sorted keys, two-space indents, a final newline; it changes only with the model,
    `OUTPUTS` and the version."""
    return json.dumps(package_schema(version or project_version()), indent=2, sort_keys=True) + "\n"


class _Types:
    """The object and enum types of one JSON schema of the config model, by name."""

    def __init__(self, model: Spec) -> None:
        self.defs: dict[str, Spec] = model.get("$defs", {})
        self.enums = _enum_names({"Federation": model, **self.defs})
        clash = sorted(set(self.enums.values()) & (set(self.defs) | {"Federation"}))
        if clash:
            raise ValueError(f"enum type names {clash} are model names too: name them in ENUM_NAMES")

    def specs(self) -> dict[str, Spec]:
        out: dict[str, Spec] = {}
        for name, node in self.defs.items():
            spec: Spec = {
                "type": "object",
                "properties": {key: self.property(name, key, prop) for key, prop in node.get("properties", {}).items()},
            }
            if node.get("description"):
                spec["description"] = " ".join(node["description"].split())
            if node.get("required"):
                spec["required"] = sorted(node["required"])
            out[TOKEN_PREFIX + name] = spec
        for values, name in self.enums.items():
            out[TOKEN_PREFIX + name] = {
                "type": "string",
                "description": "One of " + ", ".join(f"`{v}`" for v in values) + ".",
                "enum": [
                    {"value": v, **({"name": ENUM_VALUE_NAMES[v]} if v in ENUM_VALUE_NAMES else {})} for v in values
                ],
            }
        return out

    def property(self, owner: str, key: str, node: Spec) -> Spec:
        spec = self.type(node)
        description = " ".join((node.get("description") or self._model_description(node)).split())
        default = node.get("default")
        if isinstance(default, (bool, int, float, str)):
            shown = default if isinstance(default, str) else json.dumps(default)
            description = f"{description} Default: `{shown}`.".strip()
        if description:
            spec["description"] = description
        if (owner, key) in SECRETS:
            spec["secret"] = True
        return spec

    def type(self, node: Spec) -> Spec:
        """The Pulumi type of one JSON schema node (no description)."""
        if "$ref" in node:
            return type_ref(_def_name(node["$ref"]))
        for key in ("anyOf", "oneOf"):
            if key in node:
                alternatives: list[Spec] = []
                for alternative in node[key]:
                    converted = None if alternative.get("type") == "null" else self.type(alternative)
                    if converted is not None and converted not in alternatives:
                        alternatives.append(converted)
                return alternatives[0] if len(alternatives) == 1 else {"oneOf": alternatives}
        if "enum" in node:
            return type_ref(self.enums[tuple(node["enum"])])
        kind = node.get("type")
        if kind in _SCALARS:
            return {"type": kind}
        if kind == "array":
            return {"type": "array", "items": self.type(node.get("items", {}))}
        if kind == "object" and "properties" not in node:
            values = node.get("additionalProperties", True)
            return {"type": "object", "additionalProperties": {"$ref": ANY} if values is True else self.type(values)}
        if kind is None and not {"properties", "items", "additionalProperties", "const"} & set(node):
            return {"$ref": ANY}
        raise ValueError(f"no Pulumi type for the JSON schema {json.dumps(node, sort_keys=True)}")

    def _model_description(self, node: Spec) -> str:
        """A property that is a model (or None) and has no description of its own is described by the model's
        docstring."""
        refs = [n["$ref"] for n in [node, *node.get("anyOf", [])] if "$ref" in n]
        return str(self.defs[_def_name(refs[0])].get("description", "")) if len(refs) == 1 else ""


def _def_name(ref: str) -> str:
    if not ref.startswith("#/$defs/"):
        raise ValueError(f"unexpected $ref {ref!r} in the config's JSON schema")
    return ref.removeprefix("#/$defs/")


def _enum_names(models: dict[str, Spec]) -> dict[tuple[str, ...], str]:
    """Each enum's value list -> its type name: from ENUM_NAMES, else `<Model><Property>` of its one use."""
    uses: dict[tuple[str, ...], list[tuple[str, str]]] = {}
    for model, node in models.items():
        for key, prop in node.get("properties", {}).items():
            for values in _enums_in(prop):
                uses.setdefault(values, []).append((model, key))
    names = {}
    for values, where in uses.items():
        if values in ENUM_NAMES:
            names[values] = ENUM_NAMES[values]
        elif len(where) == 1:
            model, key = where[0]
            names[values] = ("" if model == "Federation" else model) + key[0].upper() + key[1:]
        else:
            raise ValueError(f"the enum {list(values)} is used by {where}: name its type in ENUM_NAMES")
    if len(set(names.values())) != len(names):
        raise ValueError(f"two enums share a type name: {sorted(names.values())}")
    return names


def _enums_in(node: Any) -> list[tuple[str, ...]]:
    """The value lists of the enums in one property's JSON schema (in a union, a list's items, a map's values)."""
    if not isinstance(node, dict):
        return []
    found = [tuple(node["enum"])] if "enum" in node else []
    for key in ("anyOf", "oneOf"):
        for alternative in node.get(key, []):
            found += _enums_in(alternative)
    for key in ("items", "additionalProperties"):
        found += _enums_in(node.get(key))
    return found
