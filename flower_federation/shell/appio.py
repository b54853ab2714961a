"""AppIoComponent: what protects the SuperExec hop of one pool, or of the SuperLink
(flower_federation/builders/appio.py has the plain-data side): the pool's Runtime API certificate and
the SuperExec auth secret.

- The auth secret is a pulumi-random password, a secret in Pulumi state and in the
  Secret it fills; never a checksum (a checksum of a secret would leak it to a diff).
- A generated certificate is signed by the CA `signer` holds (the federation's, or a
  site's own); its key is a pulumi-tls key, secret like every other.
- A cert-manager Certificate is registered as rendered; its Secret, or the user's
  existing one, is read at deploy time for the checksum that rolls the pool's pods.
"""

from __future__ import annotations

from typing import Any, Optional

import pulumi
import pulumi_random as random

from flower_federation.builders import appio, trust
from flower_federation.config import Pool
from flower_federation.kube.objects import Manifest
from flower_federation.plan import FederationPlan
from flower_federation.shell.certs import Signer, decoded, read_secret, server_certificate
from flower_federation.shell.kubernetes import register


class AppIoComponent(pulumi.ComponentResource):
    # Digest of the pool's Runtime API certificate and its CA (None: no certificate).
    checksum: Optional[pulumi.Output[str]]
    # Digest of a site's own Runtime API CA alone (None: no site-local CA), for the SuperExecs, which mount only it.
    ca_checksum: Optional[pulumi.Output[str]]

    def __init__(
        self,
        name: str,
        plan: FederationPlan,
        pool: Optional[Pool],
        objects: list[Manifest],
        signer: Optional[Signer],
        opts: Optional[pulumi.ResourceOptions] = None,
    ):
        super().__init__("flower-federation:index:AppIo", name, None, opts)
        self._plan = plan
        self.resources: list[pulumi.Resource] = []
        self.checksum = None
        self.ca_checksum = None
        runtime = plan.runtime_trust
        own_ca = runtime.pool_ca_secret(pool.name) if pool is not None and runtime and runtime.own_ca else None
        secret_opts = pulumi.ResourceOptions(parent=self, additional_secret_outputs=["data", "stringData"])
        for m in objects:
            if m["kind"] == "Secret" and m["type"] == "kubernetes.io/tls":
                assert pool is not None and signer is not None, (
                    "a generated Runtime API certificate needs a pool and CA"
                )
                self._generate(name, pool, m, signer, secret_opts)
            elif m["kind"] == "Secret" and m["metadata"]["name"] == own_ca:
                assert signer is not None, "a site's Runtime API CA Secret needs its CA"
                # A CA certificate is public; registered secret like every Secret's data here, all the same.
                ca_fields: dict[str, Any] = {"stringData": {"ca.crt": pulumi.Output.secret(signer.cert_pem)}}
                self.resources.append(register(m, secret_opts, fields=ca_fields))
                self.ca_checksum = pulumi.Output.unsecret(signer.cert_pem.apply(lambda ca: trust.checksum([ca])))
            elif m["kind"] == "Secret":
                password = random.RandomPassword(
                    f"{name}-superexec-auth",
                    length=appio.AUTH_SECRET_LENGTH,
                    special=False,
                    opts=pulumi.ResourceOptions(parent=self),
                )
                self.resources.append(password)
                fields: dict[str, Any] = {"stringData": {"secret": pulumi.Output.secret(password.result)}}
                self.resources.append(register(m, secret_opts, fields=fields))
            else:  # a cert-manager Certificate
                self.resources.append(register(m, pulumi.ResourceOptions(parent=self)))
        if pool is not None and runtime is not None and runtime.source != "generate":
            certificates = [r for r in self.resources if isinstance(r, pulumi.CustomResource)]
            self.checksum = self._read_checksum(name, runtime.pool_secret(pool.name), certificates)
        self.register_outputs({})

    def _generate(
        self, name: str, pool: Pool, secret: Manifest, signer: Signer, secret_opts: pulumi.ResourceOptions
    ) -> None:
        plan = self._plan
        server = server_certificate(
            f"{name}-runtime",
            common_name=appio.pool_common_name(plan, pool),
            dns_names=appio.pool_dns_names(plan, pool),
            ip_addresses=appio.pool_ip_addresses(plan, pool),
            signer=signer,
            validity=plan.spec.tls.generate,
            opts=pulumi.ResourceOptions(parent=self),
        )
        cert = server.cert
        data: dict[str, Any] = {
            "stringData": {
                "tls.crt": pulumi.Output.secret(cert.cert_pem),
                "tls.key": pulumi.Output.secret(server.key.private_key_pem),
            }
        }
        self.resources += [*server.resources, register(secret, secret_opts, fields=data)]
        # Certificates are public: the checksum is not secret.
        self.checksum = pulumi.Output.unsecret(
            pulumi.Output.all(cert.cert_pem, signer.cert_pem).apply(lambda parts: trust.checksum(parts))
        )

    def _read_checksum(self, name: str, secret: str, after: list[pulumi.CustomResource]) -> pulumi.Output[str]:
        """Digest of an existing (or cert-manager's) Secret's certificate, read at deploy time."""
        data = read_secret(f"{name}-runtime-secret-read", self._plan.namespace, secret, after, self)
        return pulumi.Output.unsecret(data.apply(lambda d: trust.checksum([decoded(d, "tls.crt")])))
