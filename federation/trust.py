"""TLS trust as plain data: which names the SuperLink certificate must cover, and the
Secrets and cert-manager Certificate that hold it. Key material itself is made by
pulumi-tls (or cert-manager, or the user) in the Pulumi shell; values passed in here may
be Pulumi Outputs, which these builders only place, never inspect.
"""

from __future__ import annotations

import hashlib
from typing import Any, Iterable

from .naming import SUPERLINK, common_labels
from .plan import FederationPlan

# What the HTTP-era SuperExec sidecar dials, and what a `kubectl port-forward` user dials.
LOOPBACK_NAMES = ("localhost",)
LOOPBACK_IPS = ("127.0.0.1",)
# Server keys: ECDSA P-256 is what every gRPC / TLS stack Flower uses accepts.
SERVER_KEY_ALGORITHM = "ECDSA"
SERVER_KEY_CURVE = "P256"
CHECKSUM_ANNOTATION = "flower.flwr.ai/tls-checksum"
# stakater/Reloader (if installed) restarts pods when a Secret changes outside Pulumi,
# e.g. after cert-manager renews a certificate.
RELOADER_ANNOTATION = "secret.reloader.stakater.com/reload"


def superlink_dns_names(plan: FederationPlan) -> list[str]:
    """Every name the SuperLink's Service answers to in-cluster, then localhost and the
    configured external names; ordered and without duplicates."""
    svc, ns = plan.names.superlink, plan.namespace
    names = [svc, f"{svc}.{ns}", f"{svc}.{ns}.svc", f"{svc}.{ns}.svc.{plan.spec.cluster_domain}"]
    names += LOOPBACK_NAMES
    names += plan.spec.tls.dns_names
    return list(dict.fromkeys(names))


def superlink_ip_addresses(plan: FederationPlan) -> list[str]:
    return list(dict.fromkeys([*LOOPBACK_IPS, *plan.spec.tls.ip_addresses]))


def common_name(plan: FederationPlan) -> str:
    # X.509 limits a common name to 64 bytes; the SANs carry the full names. The
    # StatefulSet rule keeps `<name>-superlink` within 52.
    return plan.names.superlink


def _labels(plan: FederationPlan) -> dict[str, str]:
    return common_labels(plan.name, SUPERLINK, str(plan.version), None, plan.spec.labels)


def server_secret(plan: FederationPlan, cert: Any, key: Any, ca: Any) -> dict[str, Any]:
    """The SuperLink's kubernetes.io/tls Secret (source=generate)."""
    return {
        "apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
        "metadata": {"name": plan.trust.server_secret, "namespace": plan.namespace, "labels": _labels(plan)},
        "stringData": {"tls.crt": cert, "tls.key": key, "ca.crt": ca},
    }


def trust_secret(plan: FederationPlan, *, ca_pem: Any = None, ca_base64: Any = None) -> dict[str, Any]:
    """The CA Secret clients mount: from PEM text (generated CA) or from base64 data
    copied out of another Secret."""
    secret: dict[str, Any] = {
        "apiVersion": "v1", "kind": "Secret", "type": "Opaque",
        "metadata": {"name": plan.trust.ca_secret, "namespace": plan.namespace, "labels": _labels(plan)},
    }
    if ca_base64 is not None:
        secret["data"] = {"ca.crt": ca_base64}
    else:
        secret["stringData"] = {"ca.crt": ca_pem}
    return secret


def certificate(plan: FederationPlan) -> dict[str, Any]:
    """cert-manager Certificate for source=certManager. Pulumi waits until it is Ready
    (pulumi.com/waitFor), so the Secret exists before anything reads or mounts it."""
    cm = plan.spec.tls.cert_manager
    issuer = cm.issuer_ref
    return {
        "apiVersion": "cert-manager.io/v1", "kind": "Certificate",
        "metadata": {"name": plan.names.certificate, "namespace": plan.namespace, "labels": _labels(plan),
                     "annotations": {"pulumi.com/waitFor": "condition=Ready"}},
        "spec": {
            "secretName": plan.trust.server_secret,
            "duration": cm.duration,
            "renewBefore": cm.renew_before,
            "commonName": common_name(plan),
            "dnsNames": superlink_dns_names(plan),
            "ipAddresses": superlink_ip_addresses(plan),
            "privateKey": {"algorithm": "ECDSA", "size": 256, "rotationPolicy": "Always"},
            "usages": ["server auth", "digital signature", "key encipherment"],
            "issuerRef": {"name": issuer.name, "kind": issuer.kind, "group": issuer.group},
        },
    }


def checksum(parts: Iterable[str | None]) -> str:
    """Digest of the certificates a pod mounts (never of a key): a new certificate or CA
    changes the pod template, so the workload rolls."""
    h = hashlib.sha256()
    for part in parts:
        h.update((part or "").encode())
        h.update(b"\0")
    return h.hexdigest()
