"""RuntimeCaComponent: a site's own CA for the SuperExec hop (flower_federation/builders/appio.py has the plain-data
side). A site trusts the hub's CA but never holds its key, so it cannot sign its pools' Runtime API certificates
with it; it generates a CA for that hop alone, whose key stays a secret in Pulumi state and never enters a
Kubernetes object. Its certificate (public) reaches each pool in `N-supernode-P-runtime-ca` (shell/appio.py)."""

from __future__ import annotations

from typing import Optional

import pulumi
import pulumi_tls as tls

from flower_federation.plan import FederationPlan
from flower_federation.shell.certs import CA_USES, Signer, private_key


class RuntimeCaComponent(pulumi.ComponentResource):
    signer: Signer

    def __init__(self, name: str, plan: FederationPlan, opts: Optional[pulumi.ResourceOptions] = None):
        super().__init__("flower-federation:index:RuntimeCa", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        # The site's tls.generate defaults (a site sets no `tls`): the same lifetimes as a hub's generated CA.
        gen = plan.spec.tls.generate
        key = private_key(f"{name}-key", child)  # pulumi-tls keeps privateKeyPem a secret in state
        cert = tls.SelfSignedCert(
            f"{name}-cert",
            private_key_pem=key.private_key_pem,
            is_ca_certificate=True,
            subject=tls.SelfSignedCertSubjectArgs(
                common_name=f"{plan.name} Runtime API CA", organization="flower-federation"
            ),
            validity_period_hours=gen.ca_validity_hours,
            early_renewal_hours=min(gen.early_renewal_hours, gen.ca_validity_hours - 1),
            allowed_uses=CA_USES,
            opts=child,
        )
        self.signer = Signer(pulumi.Output.secret(key.private_key_pem), cert.cert_pem)
        self.resources: list[pulumi.Resource] = [key, cert]
        self.register_outputs({})
