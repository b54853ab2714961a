"""The Gateway listener's own certificate, registered beside the SuperLink's (tls.py calls
this): for `tls.source: generate` a pulumi-tls key and certificate that the federation's CA
signs, for the public hostname only, in Secret `N-gateway-tls` (secret in Pulumi state);
for certManager the rendered Certificate, which cert-manager fills from the same issuer.
What it holds is decided in builders/gateway_tls.py; the SuperLink's key is never used."""

from __future__ import annotations

from typing import Optional

import pulumi

from flower_federation.builders import gateway, gateway_tls
from flower_federation.kube.objects import Manifest
from flower_federation.plan import FederationPlan
from flower_federation.shell.certs import Signer, server_certificate
from flower_federation.shell.kubernetes import register


def listener_certificate(
    parent: pulumi.Resource,
    name: str,
    plan: FederationPlan,
    objects: dict[tuple[str, str], Manifest],
    signer: Optional[Signer],
) -> list[pulumi.Resource]:
    """Registers the listener's Certificate or its generated Secret (from `objects`, the rendered TLS objects);
    returns what it registered (nothing when the Gateway terminates no TLS, or the user owns the Secret)."""
    secret = gateway.listener_secret(plan)
    if secret is None:
        return []
    child = pulumi.ResourceOptions(parent=parent)
    certificate = objects.get(("Certificate", plan.names.gateway_certificate))
    if certificate is not None:
        return [register(certificate, child)]
    manifest = objects.get(("Secret", secret))
    if manifest is None:
        return []
    assert signer is not None, "a generated listener Secret needs the generated CA"
    cert = server_certificate(
        f"{name}-gateway",
        common_name=gateway_tls.common_name(plan),
        dns_names=gateway_tls.dns_names(plan),
        ip_addresses=[],
        signer=signer,
        validity=plan.spec.tls.generate,
        opts=child,
    )
    filled = register(
        manifest,
        pulumi.ResourceOptions(parent=parent, additional_secret_outputs=["data", "stringData"]),
        fields={
            "stringData": {
                "tls.crt": pulumi.Output.secret(cert.cert.cert_pem),
                "tls.key": pulumi.Output.secret(cert.key.private_key_pem),
            }
        },
    )
    return [*cert.resources, filled]
