"""Register a plain manifest from the core as a Kubernetes resource of its type.

Each object is registered under its own type token (`kubernetes:apps/v1:StatefulSet`),
as pulumi-kubernetes' typed class for it would (rather than a YAML group): `pulumi preview
--diff` shows field-level diffs and per-object replace decisions. It is the registration
the class would make, without importing the class: the classes' modules are most of the
SDK's import time (docs/benchmarks.md, issue 36), and a render passes plain dicts, which the
classes pass through unchanged. What a class adds is here: `_KINDS` (its inputs, the aliases
of the kind's earlier API versions, the inputs it keeps secret), `_built_in_opts` (the
provider's version) and `_AsTypedClass` (where the object was made), for the pulumi-kubernetes
`requirements.txt` pins (`TABLE_VERSION`), to which `tests/test_kubernetes_registration.py` holds
them. With any other version installed (the package allows 4.x), objects are registered through
its own classes: slower, never different. The builders make camelCase keys only, which the
classes send unchanged (they would rename a snake_case key in a typed position, e.g.
`match_labels`: the strict schema check refuses one in a user's fragment).

This is where Pulumi Outputs meet the core's plain data: `register` takes extra
top-level fields (a Secret's generated `stringData`) and pod-template annotations (the
checksums that roll pods) and places them into a shallow copy at registration, so the
core never holds an Output.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Optional

import pulumi
from pulumi_kubernetes import _utilities

from flower_federation.kube.objects import Manifest


@dataclass(frozen=True)
class _Kind:
    """What pulumi-kubernetes' class for a built-in kind adds to a registration (its `_internal_init`)."""

    # Its constructor's inputs besides apiVersion and kind (wire names), each sent (None if unset).
    inputs: tuple[str, ...]
    aliases: tuple[str, ...] = ()  # the type tokens of the kind's earlier API versions
    secrets: tuple[str, ...] = ()  # inputs it wraps as secrets, and marks as secret outputs


_METADATA_SPEC = ("metadata", "spec")
_KINDS: dict[tuple[str, str], _Kind] = {
    ("v1", "Namespace"): _Kind(_METADATA_SPEC),
    ("v1", "Service"): _Kind(_METADATA_SPEC),
    ("v1", "Secret"): _Kind(("data", "immutable", "metadata", "stringData", "type"), secrets=("data", "stringData")),
    ("v1", "ConfigMap"): _Kind(("binaryData", "data", "immutable", "metadata")),
    ("v1", "ServiceAccount"): _Kind(("automountServiceAccountToken", "imagePullSecrets", "metadata", "secrets")),
    ("apps/v1", "StatefulSet"): _Kind(_METADATA_SPEC, ("apps/v1beta1", "apps/v1beta2")),
    ("apps/v1", "DaemonSet"): _Kind(_METADATA_SPEC, ("apps/v1beta2", "extensions/v1beta1")),
    ("apps/v1", "Deployment"): _Kind(_METADATA_SPEC, ("apps/v1beta1", "apps/v1beta2", "extensions/v1beta1")),
    ("networking.k8s.io/v1", "NetworkPolicy"): _Kind(_METADATA_SPEC, ("extensions/v1beta1",)),
    ("networking.k8s.io/v1", "Ingress"): _Kind(_METADATA_SPEC, ("extensions/v1beta1", "networking.k8s.io/v1beta1")),
    ("batch/v1", "Job"): _Kind(_METADATA_SPEC),
    ("policy/v1", "PodDisruptionBudget"): _Kind(_METADATA_SPEC, ("policy/v1beta1",)),
    ("rbac.authorization.k8s.io/v1", "Role"): _Kind(
        ("metadata", "rules"), ("rbac.authorization.k8s.io/v1alpha1", "rbac.authorization.k8s.io/v1beta1")
    ),
    ("rbac.authorization.k8s.io/v1", "RoleBinding"): _Kind(
        ("metadata", "roleRef", "subjects"),
        ("rbac.authorization.k8s.io/v1alpha1", "rbac.authorization.k8s.io/v1beta1"),
    ),
}
# Custom resources (their CRDs come with the operator that serves them: cert-manager;
# the platform's Gateway API implementation; the Prometheus Operator), registered as
# pulumi-kubernetes' `apiextensions.CustomResource` registers them.
_CUSTOM_KINDS = {
    ("cert-manager.io/v1", "Certificate"),
    ("monitoring.coreos.com/v1", "ServiceMonitor"),
    ("monitoring.coreos.com/v1", "PrometheusRule"),
    ("gateway.networking.k8s.io/v1", "HTTPRoute"),
    ("gateway.networking.k8s.io/v1", "BackendTLSPolicy"),
    ("gateway.networking.k8s.io/v1", "TLSRoute"),
    ("gateway.networking.k8s.io/v1alpha2", "TLSRoute"),
    ("gateway.networking.k8s.io/v1beta1", "ReferenceGrant"),
}

_VERSION: str = _utilities.get_version()  # type: ignore[no-untyped-call]  # the provider plugin's, as the classes pin it
# The pulumi-kubernetes whose classes the table above reproduces (requirements.txt pins it).
TABLE_VERSION = "4.34.2"
_V1ALPHA2_TLSROUTE = "gateway.networking.k8s.io/v1alpha2:TLSRoute"


def register(
    manifest: Manifest,
    opts: pulumi.ResourceOptions,
    *,
    fields: Optional[Mapping[str, Any]] = None,
    pod_annotations: Optional[Mapping[str, pulumi.Input[str]]] = None,
    prefix: str = "",
) -> pulumi.CustomResource:
    """One Kubernetes object. Its logical name is its Kubernetes name: unique per kind
    within a federation's namespace, and stable while config changes elsewhere.

    `fields` are top-level fields to add (e.g. a Secret's `stringData`), and
    `pod_annotations` annotations for a workload's pod template; both may hold Outputs.
    `prefix` goes before the logical name of an object whose Kubernetes name recurs in
    another cluster of the stack (its namespace, CA Secret)."""
    body: dict[str, Any] = {k: v for k, v in manifest.items() if k not in ("apiVersion", "kind")}
    body.update(fields or {})
    if pod_annotations:
        body["spec"] = _with_pod_annotations(body["spec"], pod_annotations)
    key = (manifest["apiVersion"], manifest["kind"])
    name = prefix + manifest["metadata"]["name"]
    if key == ("gateway.networking.k8s.io/v1", "TLSRoute"):
        # The same object as the v1alpha2 route rendered before (one CRD, two versions): an update in place,
        # not a create that the API server refuses as "already exists".
        opts = pulumi.ResourceOptions.merge(
            opts, pulumi.ResourceOptions(aliases=[pulumi.Alias(type_=f"kubernetes:{_V1ALPHA2_TLSROUTE}")])
        )
    if _VERSION != TABLE_VERSION:  # another pulumi-kubernetes than the table's: through its own classes
        return (_typed_custom if key in _CUSTOM_KINDS else _typed_built_in)(key, name, body, opts)
    return (_custom if key in _CUSTOM_KINDS else _built_in)(key, name, body, opts)


def read(key: tuple[str, str], name: str, object_id: pulumi.Input[str], opts: pulumi.ResourceOptions) -> Any:
    """An existing built-in object `object_id` ("namespace/name"), read as its class's `.get` reads it: its
    properties as Outputs by wire name (a Secret's `data`)."""
    if _VERSION != TABLE_VERSION:
        return _typed_class(key).get(name, object_id, opts=opts)
    kind = _KINDS[key]
    props = dict.fromkeys(("apiVersion", *kind.inputs, "kind"))
    opts = pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(id=object_id))
    return _AsTypedClass(_token(key), name, props, _built_in_opts(key, opts))


def _built_in(
    key: tuple[str, str], name: str, body: dict[str, Any], opts: pulumi.ResourceOptions
) -> pulumi.CustomResource:
    kind = _KINDS[key]
    unknown = set(body) - set(kind.inputs)
    if unknown:  # the class's constructor would refuse them: a builder's mistake, never config
        raise TypeError(f"{key[1]} {name}: no such fields {sorted(unknown)}")
    props: dict[str, Any] = {"apiVersion": key[0], "kind": key[1]}
    for field in kind.inputs:
        value = body.get(field)
        props[field] = pulumi.Output.secret(value) if field in kind.secrets and value is not None else value
    return _AsTypedClass(_token(key), name, props, _built_in_opts(key, opts))


def _built_in_opts(key: tuple[str, str], opts: pulumi.ResourceOptions) -> pulumi.ResourceOptions:
    kind = _KINDS[key]
    opts = pulumi.ResourceOptions.merge(_utilities.get_resource_opts_defaults(), opts)
    if kind.secrets:
        opts = pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(additional_secret_outputs=list(kind.secrets)))
    if kind.aliases:
        aliases = [pulumi.Alias(type_=f"kubernetes:{old}:{key[1]}") for old in kind.aliases]
        opts = pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(aliases=aliases))
    return opts


def _custom(
    key: tuple[str, str], name: str, body: dict[str, Any], opts: pulumi.ResourceOptions
) -> pulumi.CustomResource:
    unknown = set(body) - {"metadata", "spec"}
    if unknown:  # apiextensions.CustomResource takes no other field
        raise TypeError(f"{key[1]} {name}: no such fields {sorted(unknown)}")
    # apiextensions.CustomResource pins the version alone (no plugin download URL, unlike the built-in classes).
    opts = pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(version=_VERSION))
    props = {"apiVersion": key[0], "kind": key[1], "metadata": body.get("metadata"), "spec": body.get("spec")}
    return _AsTypedClass(_token(key), name, props, opts)


class _AsTypedClass(pulumi.CustomResource):
    """Where the object was made, as its typed class's would record it: the SDK records the stack above a
    resource's third `__init__` (Resource's, CustomResource's, then the class's), so a bare `pulumi.CustomResource`
    would record only what is above the caller's component's `__init__`."""

    def __init__(self, token: str, name: str, props: dict[str, Any], opts: pulumi.ResourceOptions) -> None:
        super().__init__(token, name, props, opts)


# -- Through the classes: another pulumi-kubernetes than the table's (and the tests' reference)
def _typed_class(key: tuple[str, str]) -> Any:
    group, _, version = key[0].rpartition("/")
    return getattr(importlib.import_module(f"pulumi_kubernetes.{group.split('.')[0] or 'core'}.{version}"), key[1])


def _typed_built_in(
    key: tuple[str, str], name: str, body: dict[str, Any], opts: pulumi.ResourceOptions
) -> pulumi.CustomResource:
    snake = {"".join("_" + c.lower() if c.isupper() else c for c in k): v for k, v in body.items()}
    resource: pulumi.CustomResource = _typed_class(key)(name, **snake, opts=opts)
    return resource


def _typed_custom(
    key: tuple[str, str], name: str, body: dict[str, Any], opts: pulumi.ResourceOptions
) -> pulumi.CustomResource:
    from pulumi_kubernetes.apiextensions import CustomResource

    return CustomResource(
        name, api_version=key[0], kind=key[1], metadata=body.get("metadata"), spec=body.get("spec"), opts=opts
    )


def _token(key: tuple[str, str]) -> str:
    api_version, kind = key
    return f"kubernetes:{api_version if '/' in api_version else 'core/' + api_version}:{kind}"


def _with_pod_annotations(spec: dict[str, Any], annotations: Mapping[str, pulumi.Input[str]]) -> dict[str, Any]:
    template = spec["template"]
    metadata = {**template["metadata"], "annotations": {**template["metadata"].get("annotations", {}), **annotations}}
    return {**spec, "template": {**template, "metadata": metadata}}
