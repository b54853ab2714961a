"""Register a plain manifest from the core as a typed pulumi-kubernetes resource.

Typed resources (rather than a YAML group) give `pulumi preview --diff` field-level
diffs and per-object replace decisions. The manifests are in Kubernetes' camelCase,
which pulumi-kubernetes passes through unchanged for dict inputs.

This is where Pulumi Outputs meet the core's plain data: `register` takes extra
top-level fields (a Secret's generated `stringData`) and pod-template annotations (the
checksums that roll pods) and places them into a shallow copy at registration, so the
core never holds an Output.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Optional

import pulumi
import pulumi_kubernetes as k8s

from flower_federation.kube.objects import Manifest

_RESOURCE_BY_KIND: dict[tuple[str, str], Callable[..., pulumi.CustomResource]] = {
    ("v1", "Namespace"): k8s.core.v1.Namespace,
    ("v1", "Service"): k8s.core.v1.Service,
    ("v1", "Secret"): k8s.core.v1.Secret,
    ("v1", "ConfigMap"): k8s.core.v1.ConfigMap,
    ("v1", "ServiceAccount"): k8s.core.v1.ServiceAccount,
    ("apps/v1", "StatefulSet"): k8s.apps.v1.StatefulSet,
    ("apps/v1", "DaemonSet"): k8s.apps.v1.DaemonSet,
    ("apps/v1", "Deployment"): k8s.apps.v1.Deployment,
    ("networking.k8s.io/v1", "NetworkPolicy"): k8s.networking.v1.NetworkPolicy,
    ("networking.k8s.io/v1", "Ingress"): k8s.networking.v1.Ingress,
    ("batch/v1", "Job"): k8s.batch.v1.Job,
    ("policy/v1", "PodDisruptionBudget"): k8s.policy.v1.PodDisruptionBudget,
    ("rbac.authorization.k8s.io/v1", "Role"): k8s.rbac.v1.Role,
    ("rbac.authorization.k8s.io/v1", "RoleBinding"): k8s.rbac.v1.RoleBinding,
}
# Custom resources (their CRDs come with the operator that serves them: cert-manager;
# the platform's Gateway API implementation; the Prometheus Operator).
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
    if key in _CUSTOM_KINDS:
        extra = {k: v for k, v in body.items() if k not in ("metadata", "spec")}
        if key == ("gateway.networking.k8s.io/v1", "TLSRoute"):
            # The same object as the v1alpha2 route rendered before (one CRD, two versions): an update in place,
            # not a create that the API server refuses as "already exists".
            opts = pulumi.ResourceOptions.merge(
                opts, pulumi.ResourceOptions(aliases=[pulumi.Alias(type_=f"kubernetes:{_V1ALPHA2_TLSROUTE}")])
            )
        return k8s.apiextensions.CustomResource(
            name, api_version=key[0], kind=key[1], metadata=body["metadata"], spec=body.get("spec"), opts=opts, **extra
        )
    return _RESOURCE_BY_KIND[key](name, **_snake_top_level(body), opts=opts)


def _with_pod_annotations(spec: dict[str, Any], annotations: Mapping[str, pulumi.Input[str]]) -> dict[str, Any]:
    template = spec["template"]
    metadata = {**template["metadata"], "annotations": {**template["metadata"].get("annotations", {}), **annotations}}
    return {**spec, "template": {**template, "metadata": metadata}}


def _snake_top_level(body: dict[str, Any]) -> dict[str, Any]:
    # Only the constructor's own keyword arguments are snake_case in Python
    # (e.g. Secret's `string_data`); everything nested stays camelCase.
    out = {}
    for key, value in body.items():
        out["".join("_" + c.lower() if c.isupper() else c for c in key)] = value
    return out
