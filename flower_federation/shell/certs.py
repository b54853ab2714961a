"""What the TLS components share (tls.py: the SuperLink's; appio.py: each pool's Runtime
API): keys and certificates signed by a CA with pulumi-tls, secret in Pulumi state, and
Secrets read at deploy time when cert-manager or the user makes them."""

from __future__ import annotations

import base64
from dataclasses import dataclass
from typing import Any, Optional

import pulumi
import pulumi_tls as tls

from flower_federation.builders import trust
from flower_federation.config.security import GeneratedCertificate
from flower_federation.shell import kubernetes

SERVER_USES = ["digital_signature", "key_encipherment", "server_auth"]
CA_USES = ["cert_signing", "crl_signing", "digital_signature"]


@dataclass
class Signer:
    """The CA that signs generated server certificates."""

    key_pem: pulumi.Output[str]  # secret
    cert_pem: pulumi.Output[str]


@dataclass
class ServerCertificate:
    key: tls.PrivateKey
    request: tls.CertRequest
    cert: tls.LocallySignedCert

    @property
    def resources(self) -> list[pulumi.Resource]:
        return [self.key, self.request, self.cert]


def private_key(name: str, opts: pulumi.ResourceOptions) -> tls.PrivateKey:
    return tls.PrivateKey(name, algorithm=trust.SERVER_KEY_ALGORITHM, ecdsa_curve=trust.SERVER_KEY_CURVE, opts=opts)


def server_certificate(
    prefix: str,
    *,
    common_name: str,
    dns_names: list[str],
    ip_addresses: list[str],
    signer: Signer,
    validity: GeneratedCertificate,
    opts: pulumi.ResourceOptions,
) -> ServerCertificate:
    """A new key and a certificate for it signed by `signer`: `<prefix>-key`,
    `<prefix>-csr`, `<prefix>-cert` (names kept stable: Pulumi state knows them)."""
    key = private_key(f"{prefix}-key", opts)
    request = tls.CertRequest(
        f"{prefix}-csr",
        private_key_pem=key.private_key_pem,
        subject=tls.CertRequestSubjectArgs(common_name=common_name, organization="flower-federation"),
        dns_names=dns_names,
        ip_addresses=ip_addresses,
        opts=opts,
    )
    cert = tls.LocallySignedCert(
        f"{prefix}-cert",
        cert_request_pem=request.cert_request_pem,
        ca_private_key_pem=signer.key_pem,
        ca_cert_pem=signer.cert_pem,
        validity_period_hours=validity.validity_hours,
        early_renewal_hours=validity.early_renewal_hours,
        allowed_uses=SERVER_USES,
        opts=opts,
    )
    return ServerCertificate(key, request, cert)


def read_secret(
    name: str, namespace: str, secret: str, after: list[pulumi.CustomResource], parent: pulumi.Resource
) -> pulumi.Output[Any]:
    """An existing Secret's `data`, read at deploy time, after `after` (a cert-manager
    Certificate): while that is still to be created (first preview) the read is
    deferred by an id that waits for it, instead of failing on a missing Secret."""
    secret_id: Any = f"{namespace}/{secret}"
    if after:
        secret_id = after[0].id.apply(lambda _: f"{namespace}/{secret}")
    read = kubernetes.read(("v1", "Secret"), name, secret_id, pulumi.ResourceOptions(parent=parent, depends_on=after))
    data: pulumi.Output[Any] = read.data
    return data


def b64decode(value: Optional[str]) -> str:
    return base64.b64decode(value).decode(errors="replace") if value else ""


def decoded(data: Optional[dict[str, str]], key: str) -> str:
    """One key of a Secret's `data`, decoded ("" when absent)."""
    return b64decode((data or {}).get(key))
