"""TLS trust as plain data: which names the SuperLink certificate must cover, and the
Secrets and cert-manager Certificate that hold it. Key material itself is made by
pulumi-tls (or cert-manager, or the user) in the Pulumi shell, which fills the Secrets
built here (without data) when it registers them.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

from flower_federation.builders import gateway
from flower_federation.config.derived import LOCALHOST
from flower_federation.flower.dialects import LOOPBACK
from flower_federation.kube.naming import SUPERLINK, is_ip_address, service_dns_names
from flower_federation.kube.objects import Manifest, ObjectMeta
from flower_federation.plan import FederationPlan
from flower_federation.plan.tls_sources import Trust

# Server keys: ECDSA P-256 is what every gRPC / TLS stack Flower uses accepts.
SERVER_KEY_ALGORITHM = "ECDSA"
SERVER_KEY_CURVE = "P256"  # pulumi-tls's name
SERVER_KEY_BITS = 256  # cert-manager's: the same curve
CHECKSUM_ANNOTATION = "flower.flwr.ai/tls-checksum"
# stakater/Reloader (if installed) restarts pods when a Secret changes outside Pulumi,
# e.g. after cert-manager renews a certificate.
RELOADER_ANNOTATION = "secret.reloader.stakater.com/reload"


def _external_hosts(plan: FederationPlan) -> list[str]:
    """Names and IPs the SuperLink is dialled by from outside its cluster."""
    sl = plan.spec.superlink
    hosts = [sl.ingress.host] if sl.ingress else []
    hosts += [sl.gateway.hostname] if sl.gateway else []
    return hosts + ([plan.external.host] if plan.external else [])


def superlink_dns_names(plan: FederationPlan) -> list[str]:
    """Every name the SuperLink's Service answers to in-cluster, then localhost, the
    configured names and the external ones; ordered and without duplicates."""
    services = [plan.names.superlink] + ([plan.names.superlink_control] if plan.control_apart else [])
    names = [n for svc in services for n in service_dns_names(svc, plan.namespace, plan.spec.cluster_domain)]
    names.append(LOCALHOST)
    names += plan.spec.tls.dns_names
    names += [h for h in _external_hosts(plan) if not is_ip_address(h)]
    return list(dict.fromkeys(names))


def superlink_ip_addresses(plan: FederationPlan) -> list[str]:
    external = [h for h in _external_hosts(plan) if is_ip_address(h)]
    return list(dict.fromkeys([LOOPBACK, *plan.spec.tls.ip_addresses, *external]))


def common_name(plan: FederationPlan) -> str:
    # X.509 limits a common name to 64 bytes; the SANs carry the full names. The
    # StatefulSet rule keeps `<name>-superlink` within 52.
    return plan.names.superlink


def _trust(plan: FederationPlan) -> Trust:
    assert plan.trust is not None, "TLS objects need TLS (insecure is false)"
    return plan.trust


def _meta(plan: FederationPlan, name: str, annotations: dict[str, str] | None = None) -> ObjectMeta:
    return plan.meta(name, SUPERLINK, annotations=annotations)


def server_secret(plan: FederationPlan) -> Manifest:
    """The SuperLink's kubernetes.io/tls Secret (source=generate); the shell fills
    `stringData` (tls.crt, tls.key, ca.crt) from pulumi-tls."""
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "kubernetes.io/tls",
        "metadata": _meta(plan, _trust(plan).server_secret),
    }


def trust_secret(plan: FederationPlan) -> Manifest:
    """The CA Secret clients mount (key ca.crt); the shell fills it from the generated
    CA (`stringData`) or with the CA copied out of the server Secret (`data`). A site
    trusting a hub's CA given as PEM holds it here already: a CA certificate is public."""
    secret: Manifest = {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "Opaque",
        "metadata": _meta(plan, _trust(plan).ca_secret),
    }
    if plan.remote is not None and plan.remote.ca_pem and _trust(plan).trust_source == "pem":
        secret["stringData"] = {"ca.crt": plan.remote.ca_pem}
    return secret


def ca_bundle(plan: FederationPlan) -> Manifest:
    """The federation's CA certificate (public) as a ConfigMap, for a Gateway's
    BackendTLSPolicy (gateway.py); the shell fills `data` with the CA the pods trust."""
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": _meta(plan, plan.names.ca_bundle)}


def certificate(plan: FederationPlan) -> Manifest:
    """cert-manager Certificate of the SuperLink for source=certManager."""
    return cert_manager_certificate(
        plan,
        _meta(plan, plan.names.certificate),
        _trust(plan).server_secret,
        common_name(plan),
        superlink_dns_names(plan),
        superlink_ip_addresses(plan),
    )


def cert_manager_certificate(
    plan: FederationPlan, meta: ObjectMeta, secret: str, common: str, dns_names: list[str], ip_addresses: list[str]
) -> Manifest:
    """A server's cert-manager Certificate from the federation's issuer (so the CA clients trust signs it), with a
    new key at each renewal. Pulumi waits until it is Ready (pulumi.com/waitFor), so the Secret exists before
    anything reads or mounts it."""
    cm = plan.spec.tls.cert_manager
    issuer = cm.issuer_ref
    assert issuer is not None, "rules require an issuerRef for certManager"
    return {
        "apiVersion": "cert-manager.io/v1",
        "kind": "Certificate",
        "metadata": {**meta, "annotations": {**meta.get("annotations", {}), "pulumi.com/waitFor": "condition=Ready"}},
        "spec": {
            "secretName": secret,
            "duration": cm.duration,
            "renewBefore": cm.renew_before,
            "commonName": common,
            "dnsNames": dns_names,
            "ipAddresses": ip_addresses,
            "privateKey": {"algorithm": SERVER_KEY_ALGORITHM, "size": SERVER_KEY_BITS, "rotationPolicy": "Always"},
            "usages": ["server auth", "digital signature", "key encipherment"],
            "issuerRef": {"name": issuer.name, "kind": issuer.kind, "group": issuer.group},
        },
    }


def objects(plan: FederationPlan) -> list[Manifest]:
    """What the federation creates for TLS, by source: generated server and CA Secrets; a
    cert-manager Certificate; and a CA Secret copied from the server Secret unless the
    user names one of their own."""
    if plan.trust is None:
        return []
    out = []
    if plan.trust.source == "generate" and plan.runs_superlink:
        out.append(server_secret(plan))
    elif plan.trust.source == "certManager":
        out.append(certificate(plan))
    if plan.trust.creates_ca_secret:
        out.append(trust_secret(plan))
    if gateway.needs_ca_bundle(plan):
        out.append(ca_bundle(plan))
    return out


def checksum(parts: Iterable[str | None]) -> str:
    """Digest of the certificates a pod mounts (never of a key): a new certificate or CA
    changes the pod template, so the workload rolls."""
    h = hashlib.sha256()
    for part in parts:
        h.update((part or "").encode())
        h.update(b"\0")
    return h.hexdigest()
