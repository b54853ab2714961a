"""Gateway API objects (`superlink.gateway`): the route that brings only the Fleet API
from a platform's Gateway to the SuperLink, and what the Gateway needs to use it
safely. The Gateway itself (its listeners, addresses, class) is the platform's.

- HTTP era: an `HTTPRoute` matching only `PathPrefix /v1/fleet/` to the Fleet-only
  proxy (Service `N-superlink`, port `fleet`), and a `BackendTLSPolicy` so the gateway
  dials that backend over TLS and verifies it with the federation's CA (ConfigMap
  `N-ca-bundle`, filled by the Pulumi shell with the same CA the pods trust) and the
  Service's in-cluster name, which the server certificate carries.
- gRPC era: a `TLSRoute` passing TLS through to the Fleet port (the Fleet API has a
  port of its own there): the SuperLink keeps terminating TLS. `v1` (Gateway API v1.5+,
  standard channel, which no longer serves v1alpha2), `v1alpha2` by `tlsRouteVersion`.
- HTTP era, the Gateway terminating TLS: its listener presents a certificate of its own
  from the federation's CA for the public hostname only (`listener_secret`, made by
  gateway_tls.py with the SuperLink's), so sites keep trusting the federation's CA, and
  a `ReferenceGrant` lets a Gateway in another namespace read that Secret, and no other:
  never the SuperLink's own key, whose certificate also carries localhost and the
  in-cluster Control Service (whoever runs a Gateway there could impersonate the Control
  API to in-cluster `flwr` and the registration Job). Nothing else crosses a namespace
  (the routes and their backends live in the federation's namespace).

Versions: Gateway API v1.4 to v1.6 (HTTPRoute, BackendTLSPolicy: v1; ReferenceGrant:
v1beta1, served by all; TLSRoute: v1 from v1.5, v1alpha2 before). Offline schemas of each
release: tests/support/gateway_api/.
"""

from __future__ import annotations

from typing import Any, Optional

from flower_federation.builders import fleet_proxy
from flower_federation.config import Gateway
from flower_federation.kube.naming import SUPERLINK
from flower_federation.kube.objects import Manifest
from flower_federation.plan import FederationPlan

GROUP = "gateway.networking.k8s.io"
FLEET_PATH_PREFIX = "/v1/fleet/"
CA_KEY = "ca.crt"  # the key BackendTLSPolicy implementations read from a CA ConfigMap


def settings(plan: FederationPlan) -> Gateway:
    gw = plan.spec.superlink.gateway
    assert gw is not None
    return gw


def _parent_refs(plan: FederationPlan) -> list[dict[str, Any]]:
    out = []
    for ref in settings(plan).parent_refs:
        parent: dict[str, Any] = {"group": GROUP, "kind": "Gateway", "name": ref.name}
        if ref.namespace:
            parent["namespace"] = ref.namespace
        if ref.section_name:
            parent["sectionName"] = ref.section_name
        if ref.port:
            parent["port"] = ref.port
        out.append(parent)
    return out


def _http_route(plan: FederationPlan) -> Manifest:
    gw = settings(plan)
    backend = {"group": "", "kind": "Service", "name": plan.names.superlink, "port": plan.ports.fleet}
    rule: dict[str, Any] = {
        "matches": [{"path": {"type": "PathPrefix", "value": FLEET_PATH_PREFIX}}],
        "backendRefs": [backend],
    }
    return {
        "apiVersion": f"{GROUP}/v1",
        "kind": "HTTPRoute",
        "metadata": plan.meta(plan.names.superlink, SUPERLINK),
        "spec": {"parentRefs": _parent_refs(plan), "hostnames": [gw.hostname], "rules": [rule]},
    }


def _backend_tls_policy(plan: FederationPlan) -> Manifest:
    return {
        "apiVersion": f"{GROUP}/v1",
        "kind": "BackendTLSPolicy",
        "metadata": plan.meta(plan.names.superlink, SUPERLINK),
        "spec": {
            "targetRefs": [
                {
                    "group": "",
                    "kind": "Service",
                    "name": plan.names.superlink,
                    "sectionName": fleet_proxy.public_port_name(plan),
                }
            ],
            "validation": {
                "caCertificateRefs": [{"group": "", "kind": "ConfigMap", "name": plan.names.ca_bundle}],
                "hostname": plan.superlink_host,
            },
        },
    }


def _tls_route(plan: FederationPlan) -> Manifest:
    gw = settings(plan)
    backend = {"group": "", "kind": "Service", "name": plan.names.superlink, "port": plan.ports.fleet}
    return {
        "apiVersion": f"{GROUP}/{gw.tls_route_version}",
        "kind": "TLSRoute",
        "metadata": plan.meta(plan.names.superlink, SUPERLINK),
        "spec": {"parentRefs": _parent_refs(plan), "hostnames": [gw.hostname], "rules": [{"backendRefs": [backend]}]},
    }


def listener_secret(plan: FederationPlan) -> Optional[str]:
    """The Secret the Gateway's TLS listener presents (HTTP era, presentFederationCertificate), else None: ours
    (`N-gateway-tls`) unless the user manages the TLS Secrets (`listenerSecretName`, required by the rules)."""
    gw = plan.spec.superlink.gateway
    if gw is None or plan.grpc_era or plan.trust is None or not gw.present_federation_certificate:
        return None
    if plan.trust.source == "existingSecret":
        assert gw.listener_secret_name is not None, "rules require listenerSecretName with existingSecret"
        return gw.listener_secret_name
    return plan.names.gateway_tls_secret


def _reference_grant(plan: FederationPlan) -> list[Manifest]:
    """Lets the Gateways of other namespaces present the listener's Secret, that one only."""
    gw = settings(plan)
    secret = listener_secret(plan)
    if secret is None:
        return []
    namespaces = sorted({r.namespace for r in gw.parent_refs if r.namespace and r.namespace != plan.namespace})
    if not namespaces:
        return []
    return [
        {
            "apiVersion": f"{GROUP}/v1beta1",
            "kind": "ReferenceGrant",
            "metadata": plan.meta(secret, SUPERLINK),
            "spec": {
                "from": [{"group": GROUP, "kind": "Gateway", "namespace": ns} for ns in namespaces],
                "to": [{"group": "", "kind": "Secret", "name": secret}],
            },
        }
    ]


def needs_ca_bundle(plan: FederationPlan) -> bool:
    """The BackendTLSPolicy reads the federation's CA from a ConfigMap (trust.ca_bundle)."""
    return (
        plan.runs_superlink and plan.spec.superlink.gateway is not None and not plan.grpc_era and plan.trust is not None
    )


def objects(plan: FederationPlan) -> list[Manifest]:
    if plan.spec.superlink.gateway is None:
        return []
    if plan.grpc_era:
        return [_tls_route(plan)]
    out = [_http_route(plan)]
    if plan.trust is not None:
        out.append(_backend_tls_policy(plan))
    return out + _reference_grant(plan)
