"""TlsTrustComponent: the SuperLink's server certificate and the trust its clients
mount, from one of three sources (see flower_federation/builders/trust.py for the plain-data side).

- generate: pulumi-tls makes a CA and a server certificate; keys and certificates live
  in Pulumi state as secrets, and in a kubernetes.io/tls Secret for the SuperLink.
- certManager: a cert-manager Certificate; Pulumi waits until it is Ready.
- existingSecret: a kubernetes.io/tls Secret the user manages.

Clients trust a Secret of their own: the generated CA, an existing CA Secret, or a copy
of the server Secret's `ca.crt` (else `tls.crt`), as the Helm chart's
copyFromExistingSecret does. `superlink_checksum` / `client_checksum` digest the
certificates each side mounts, for pod annotations that roll pods when they change.
"""

from __future__ import annotations

from typing import Any, Optional

import pulumi
import pulumi_tls as tls

from flower_federation.builders import trust
from flower_federation.kube.objects import Manifest
from flower_federation.plan import FederationPlan
from flower_federation.plan.tls_sources import Trust
from flower_federation.shell import gateway_tls
from flower_federation.shell.certs import (
    CA_USES,
    Signer,
    b64decode,
    decoded,
    private_key,
    read_secret,
    server_certificate,
)
from flower_federation.shell.kubernetes import register


class TlsTrustComponent(pulumi.ComponentResource):
    superlink_checksum: pulumi.Output[str]
    client_checksum: pulumi.Output[str]
    ca_certificate: Optional[pulumi.Output[str]]
    # The CA certificate clients trust, for the CA Secrets of other clusters (None: the
    # user's own CA Secret, which they provide in each cluster).
    ca_pem: Optional[pulumi.Output[str]]
    # The generated CA, which also signs the pools' Runtime API certificates.
    signer: Optional[Signer]

    def __init__(
        self, name: str, plan: FederationPlan, objects: list[Manifest], opts: Optional[pulumi.ResourceOptions] = None
    ):
        """`objects` are the TLS objects the core rendered (trust.objects): Secrets
        without data, which this component fills, and a cert-manager Certificate."""
        super().__init__("flower-federation:index:TlsTrust", name, None, opts)
        assert plan.trust is not None, "TlsTrustComponent needs TLS (insecure is false)"
        self._plan = plan
        self._trust: Trust = plan.trust
        self._objects = {(m["kind"], m["metadata"]["name"]): m for m in objects}
        child = pulumi.ResourceOptions(parent=self)
        self.resources: list[pulumi.Resource] = []
        self.ca_certificate: Optional[pulumi.Output[str]] = None
        self.ca_pem = None
        self.signer = None
        source = plan.trust.source
        if source == "remote" and plan.trust.trust_source == "pem":
            # A site trusting the hub's CA as given (config or the hub stack's output):
            # the core rendered the Secret with it, public data.
            assert plan.remote is not None and plan.remote.ca_pem is not None
            self.resources.append(register(self._object("Secret", plan.trust.ca_secret), child))
            self.client_checksum = pulumi.Output.from_input(trust.checksum([plan.remote.ca_pem]))
            self.superlink_checksum = self.client_checksum
            self.ca_pem = pulumi.Output.from_input(plan.remote.ca_pem)
        elif source == "generate":
            server_cert, ca_pem = self._generate(name, child)
            self.superlink_checksum = pulumi.Output.all(server_cert, ca_pem).apply(trust.checksum)
            self.client_checksum = ca_pem.apply(lambda ca: trust.checksum([ca]))
            # A CA certificate is public: exported and copied to other clusters as is.
            self.ca_certificate = pulumi.Output.unsecret(ca_pem)
            self.ca_pem = self.ca_certificate
        else:
            after: list[pulumi.CustomResource] = []
            if source == "certManager":
                after.append(register(self._object("Certificate", plan.names.certificate), child))
                self.resources += after
            server_data = self._read(name, plan.trust.server_secret, "server", after)
            # Checksums digest certificates only (public), so they are not secret: a
            # secret annotation would mark whole workload specs secret in every diff.
            if plan.trust.trust_source == "copyFromServerSecret":
                ca_b64 = server_data.apply(lambda d: (d or {}).get("ca.crt") or (d or {}).get("tls.crt"))
                self.resources.append(
                    register(
                        self._object("Secret", plan.trust.ca_secret),
                        pulumi.ResourceOptions(parent=self, depends_on=after),
                        fields={"data": {"ca.crt": pulumi.Output.secret(ca_b64)}},
                    )
                )
                self.superlink_checksum = pulumi.Output.unsecret(
                    server_data.apply(
                        lambda d: trust.checksum(
                            [decoded(d, "tls.crt"), b64decode((d or {}).get("ca.crt") or (d or {}).get("tls.crt"))]
                        )
                    )
                )
                self.client_checksum = pulumi.Output.unsecret(ca_b64.apply(lambda b: trust.checksum([b64decode(b)])))
                self.ca_pem = pulumi.Output.unsecret(ca_b64.apply(b64decode))
            else:
                ca_data = self._read(name, plan.trust.ca_secret, "ca", [])
                # The SuperLink mounts the user's CA Secret too: both feed its checksum.
                ca_key = plan.trust.ca_key
                self.superlink_checksum = pulumi.Output.unsecret(
                    pulumi.Output.all(server_data, ca_data).apply(
                        lambda ds: trust.checksum([decoded(ds[0], "tls.crt"), decoded(ds[1], ca_key)])
                    )
                )
                self.client_checksum = pulumi.Output.unsecret(
                    ca_data.apply(lambda d: trust.checksum([decoded(d, ca_key)]))
                )
                self.ca_pem = pulumi.Output.unsecret(ca_data.apply(lambda d: decoded(d, ca_key)))
        # The Gateway listener's own certificate (public hostname only), never the SuperLink's key.
        self.resources += gateway_tls.listener_certificate(self, name, plan, self._objects, self.signer)
        bundle = self._objects.get(("ConfigMap", plan.names.ca_bundle))
        if bundle is not None:
            # The CA as a ConfigMap (public), for a Gateway's BackendTLSPolicy.
            assert self.ca_pem is not None
            self.resources.append(register(bundle, child, fields={"data": {"ca.crt": self.ca_pem}}))
        self.register_outputs({"superlinkChecksum": self.superlink_checksum, "clientChecksum": self.client_checksum})

    def _generate(self, name: str, child: pulumi.ResourceOptions) -> tuple[pulumi.Output[str], pulumi.Output[str]]:
        """The CAs (the signing one and every trusted one), the server certificate, and the
        Secrets; returns (server certificate, the trusted CAs' bundle)."""
        plan = self._plan
        gen = plan.spec.tls.generate
        cas = {g: self._ca(name, g, child) for g in sorted({gen.ca_generation, *gen.trusted})}
        signing_key, signing_ca = cas[gen.ca_generation]
        self.signer = Signer(pulumi.Output.secret(signing_key.private_key_pem), signing_ca.cert_pem)
        server_cert = server_certificate(
            f"{name}-server",
            common_name=trust.common_name(plan),
            dns_names=trust.superlink_dns_names(plan),
            ip_addresses=trust.superlink_ip_addresses(plan),
            signer=self.signer,
            validity=gen,
            opts=child,
        )
        # What clients trust: every trusted CA, in the order given; while nothing rotates, the one CA's
        # certificate as it is (the same bytes, checksums and outputs as before CA generations existed).
        pems = [cas[g][1].cert_pem for g in gen.trusted]
        bundle: pulumi.Output[str] = (
            pems[0]
            if len(pems) == 1
            else pulumi.Output.all(*pems).apply(lambda got: "".join(p if p.endswith("\n") else p + "\n" for p in got))
        )
        secret_opts = pulumi.ResourceOptions(parent=self, additional_secret_outputs=["data", "stringData"])
        ca_pem: pulumi.Output[str] = pulumi.Output.secret(bundle)
        server = register(
            self._object("Secret", self._trust.server_secret),
            secret_opts,
            fields={
                "stringData": {
                    "tls.crt": pulumi.Output.secret(server_cert.cert.cert_pem),
                    "tls.key": pulumi.Output.secret(server_cert.key.private_key_pem),
                    "ca.crt": ca_pem,
                }
            },
        )
        ca_secret = register(
            self._object("Secret", self._trust.ca_secret), secret_opts, fields={"stringData": {"ca.crt": ca_pem}}
        )
        self.resources += [r for pair in cas.values() for r in pair] + [*server_cert.resources, server, ca_secret]
        return server_cert.cert.cert_pem, bundle

    def _ca(
        self, name: str, generation: int, child: pulumi.ResourceOptions
    ) -> tuple[tls.PrivateKey, tls.SelfSignedCert]:
        """CA `generation`: the first keeps the names it always had (`N-tls-ca`), a later one is a
        resource of its own (`N-tls-ca-g<n>`), so trusting the next CA creates it beside the first."""
        plan, gen = self._plan, self._plan.spec.tls.generate
        suffix = f"-g{generation}" if generation else ""
        ca_key = private_key(f"{name}-ca-key{suffix}", child)
        ca = tls.SelfSignedCert(
            f"{name}-ca{suffix}",
            private_key_pem=ca_key.private_key_pem,
            is_ca_certificate=True,
            subject=tls.SelfSignedCertSubjectArgs(
                common_name=f"{plan.name} Flower CA" + (f" {generation}" if generation else ""),
                organization="flower-federation",
            ),
            validity_period_hours=gen.ca_validity_hours,
            early_renewal_hours=min(gen.early_renewal_hours, gen.ca_validity_hours - 1),
            allowed_uses=CA_USES,
            opts=child,
        )
        return ca_key, ca

    def _object(self, kind: str, name: str) -> Manifest:
        return self._objects[(kind, name)]

    def _read(self, name: str, secret: str, role: str, after: list[pulumi.CustomResource]) -> pulumi.Output[Any]:
        """An existing Secret's data, read at deploy time (after `after`), secret."""
        return pulumi.Output.secret(
            read_secret(f"{name}-{role}-secret-read", self._plan.namespace, secret, after, self)
        )
