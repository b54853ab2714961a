"""Gateway API objects as a platform team and the product would write them, and certificates
for them: shared by the Gateway emulation's tests (tests/test_e2e_gateway_config.py without
root, tests/e2e/test_e2e_gateway_emulation.py end to end)."""

from __future__ import annotations

import datetime
import ipaddress
from typing import Any, Optional

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

GATEWAY_API = "gateway.networking.k8s.io/v1"
GRANT_API = "gateway.networking.k8s.io/v1beta1"


class CA:
    """A CA that issues server certificates (ECDSA P-256, SANs as given)."""

    def __init__(self, name: str = "test CA"):
        self.key = ec.generate_private_key(ec.SECP256R1())
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
        now = datetime.datetime.now(datetime.UTC)
        self.cert = (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(subject)
            .public_key(self.key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(
                x509.KeyUsage(True, False, False, False, False, True, True, False, False),
                critical=True,
            )
            .sign(self.key, hashes.SHA256())
        )
        self.pem = self.cert.public_bytes(serialization.Encoding.PEM).decode()

    def issue(self, *names: str) -> tuple[str, str]:
        """(certificate PEM, key PEM) for DNS names (or IP addresses)."""
        key = ec.generate_private_key(ec.SECP256R1())
        sans: list[x509.GeneralName] = []
        for n in names:
            try:
                sans.append(x509.IPAddress(ipaddress.ip_address(n)))
            except ValueError:
                sans.append(x509.DNSName(n))
        now = datetime.datetime.now(datetime.UTC)
        cert = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, names[0])]))
            .issuer_name(self.cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.SubjectAlternativeName(sans), critical=False)
            .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .sign(self.key, hashes.SHA256())
        )
        key_pem = key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        ).decode()
        return cert.public_bytes(serialization.Encoding.PEM).decode(), key_pem


def meta(name: str, namespace: str) -> dict[str, Any]:
    return {"name": name, "namespace": namespace}


def gateway(
    name: str, namespace: str, hostname: Optional[str], secret: str, secret_ns: Optional[str], port: int = 443
) -> dict[str, Any]:
    """A platform team's Gateway: one HTTPS listener `fleet` terminating TLS with `secret`, routes from anywhere."""
    ref: dict[str, Any] = {"group": "", "kind": "Secret", "name": secret}
    if secret_ns is not None:
        ref["namespace"] = secret_ns
    listener: dict[str, Any] = {
        "name": "fleet",
        "port": port,
        "protocol": "HTTPS",
        "tls": {"mode": "Terminate", "certificateRefs": [ref]},
        "allowedRoutes": {"namespaces": {"from": "All"}},
    }
    if hostname is not None:
        listener["hostname"] = hostname
    return {
        "apiVersion": GATEWAY_API,
        "kind": "Gateway",
        "metadata": meta(name, namespace),
        "spec": {"gatewayClassName": "platform", "listeners": [listener]},
    }


def http_route(
    name: str,
    namespace: str,
    parent: tuple[str, str],
    rules: list[tuple[list[tuple[str, str]], Optional[tuple[str, int]]]],
    hostnames: Optional[list[str]] = None,
    section: Optional[str] = "fleet",
) -> dict[str, Any]:
    """An HTTPRoute to Gateway `parent` (namespace, name); rules: ([(match type, path)], (Service, port) or None)."""
    pref: dict[str, Any] = {"group": "gateway.networking.k8s.io", "kind": "Gateway", "namespace": parent[0]}
    pref["name"] = parent[1]
    if section is not None:
        pref["sectionName"] = section
    spec: dict[str, Any] = {"parentRefs": [pref], "rules": []}
    if hostnames:
        spec["hostnames"] = hostnames
    for matches, backend in rules:
        rule: dict[str, Any] = {"matches": [{"path": {"type": t, "value": v}} for t, v in matches]}
        if backend is not None:
            rule["backendRefs"] = [{"group": "", "kind": "Service", "name": backend[0], "port": backend[1]}]
        spec["rules"].append(rule)
    return {"apiVersion": GATEWAY_API, "kind": "HTTPRoute", "metadata": meta(name, namespace), "spec": spec}


def backend_tls_policy(
    name: str, namespace: str, targets: list[tuple[str, Optional[str]]], ca_config_map: str, hostname: str
) -> dict[str, Any]:
    """A BackendTLSPolicy: Services (name, port name or None) verified against a CA ConfigMap and `hostname`."""
    refs = []
    for svc, section in targets:
        ref: dict[str, Any] = {"group": "", "kind": "Service", "name": svc}
        if section is not None:
            ref["sectionName"] = section
        refs.append(ref)
    return {
        "apiVersion": GATEWAY_API,
        "kind": "BackendTLSPolicy",
        "metadata": meta(name, namespace),
        "spec": {
            "targetRefs": refs,
            "validation": {
                "caCertificateRefs": [{"group": "", "kind": "ConfigMap", "name": ca_config_map}],
                "hostname": hostname,
            },
        },
    }


def reference_grant(
    name: str, namespace: str, from_kind: str, from_ns: str, to_kind: str, to_name: Optional[str] = None
) -> dict[str, Any]:
    to: dict[str, Any] = {"group": "", "kind": to_kind}
    if to_name is not None:
        to["name"] = to_name
    return {
        "apiVersion": GRANT_API,
        "kind": "ReferenceGrant",
        "metadata": meta(name, namespace),
        "spec": {"from": [{"group": "gateway.networking.k8s.io", "kind": from_kind, "namespace": from_ns}], "to": [to]},
    }


def service(name: str, namespace: str, selector: dict[str, str], ports: list[tuple[str, int, Any]]) -> dict[str, Any]:
    """A ClusterIP Service: ports (name, port, targetPort)."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": meta(name, namespace),
        "spec": {
            "selector": selector,
            "ports": [{"name": n, "port": p, "targetPort": t, "protocol": "TCP"} for n, p, t in ports],
        },
    }


def tls_secret(name: str, namespace: str, cert: str, key: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "kubernetes.io/tls",
        "metadata": meta(name, namespace),
        "stringData": {"tls.crt": cert, "tls.key": key},
    }


def ca_config_map(name: str, namespace: str, ca_pem: Optional[str], key: str = "ca.crt") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": meta(name, namespace),
        "data": {key: ca_pem} if ca_pem is not None else {},
    }
