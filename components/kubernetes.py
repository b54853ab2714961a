"""Register a plain manifest from the core as a typed pulumi-kubernetes resource.

Typed resources (rather than a YAML group) give `pulumi preview --diff` field-level
diffs and per-object replace decisions. The manifests are in Kubernetes' camelCase,
which pulumi-kubernetes passes through unchanged for dict inputs.
"""

from __future__ import annotations

from typing import Any, Callable

import pulumi
import pulumi_kubernetes as k8s

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
    ("policy/v1", "PodDisruptionBudget"): k8s.policy.v1.PodDisruptionBudget,
    ("rbac.authorization.k8s.io/v1", "Role"): k8s.rbac.v1.Role,
    ("rbac.authorization.k8s.io/v1", "RoleBinding"): k8s.rbac.v1.RoleBinding,
}
# Custom resources (their CRDs come with the operator that serves them).
_CUSTOM_KINDS = {("cert-manager.io/v1", "Certificate")}


def register(manifest: dict[str, Any], opts: pulumi.ResourceOptions) -> pulumi.CustomResource:
    """One Kubernetes object. Its logical name is its Kubernetes name: unique per kind
    within a federation's namespace, and stable while config changes elsewhere."""
    key = (manifest["apiVersion"], manifest["kind"])
    name = manifest["metadata"]["name"]
    if key in _CUSTOM_KINDS:
        body = {k: v for k, v in manifest.items() if k not in ("apiVersion", "kind", "metadata", "spec")}
        return k8s.apiextensions.CustomResource(name, api_version=key[0], kind=key[1], metadata=manifest["metadata"],
                                                spec=manifest.get("spec"), opts=opts, **body)
    cls = _RESOURCE_BY_KIND[key]
    body = {k: v for k, v in manifest.items() if k not in ("apiVersion", "kind")}
    return cls(name, **_snake_top_level(body), opts=opts)


def _snake_top_level(body: dict[str, Any]) -> dict[str, Any]:
    # Only the constructor's own keyword arguments are snake_case in Python
    # (e.g. Secret's `string_data`); everything nested stays camelCase.
    out = {}
    for key, value in body.items():
        out["".join("_" + c.lower() if c.isupper() else c for c in key)] = value
    return out
