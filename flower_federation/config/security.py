"""TLS (generated, cert-manager or your own), node authentication and RBAC."""

from __future__ import annotations

from typing import Literal, Optional

from pydantic import Field

from flower_federation.config.base import Int32, Model


class GeneratedCertificate(Model):
    """`source: generate`: lifetimes of the pulumi-tls CA and server certificate."""

    validity_hours: Int32 = Field(default=8760, ge=1, description="Server certificate validity (one year).")
    early_renewal_hours: Int32 = Field(
        default=720,
        ge=0,
        description=(
            "A `pulumi up` this close to a certificate's expiry issues a new one (and rolls the pods); less than "
            "validityHours."
        ),
    )
    ca_validity_hours: Int32 = Field(default=87600, ge=1, description="CA validity (ten years).")
    ca_generation: Int32 = Field(
        default=0,
        ge=0,
        description=(
            "The CA that signs the SuperLink's certificate (0: the first). Rotating the CA with an overlap, one "
            "`pulumi up` each: trust the next one too (`trustedCaGenerations: [0, 1]`), then sign with it "
            "(`caGeneration: 1`), then drop the old one (`trustedCaGenerations: [1]`); docs/operations.md."
        ),
    )
    trusted_ca_generations: Optional[list[Int32]] = Field(
        default=None,
        description=(
            "The CAs every client trusts (the `N-ca` bundle, the `caCertificate` output sites read), in this order; "
            "it must include `caGeneration`. Unset: `[caGeneration]`."
        ),
    )

    @property
    def trusted(self) -> list[int]:
        """The CA generations clients trust, the signing one included (validated)."""
        return list(self.trusted_ca_generations) if self.trusted_ca_generations is not None else [self.ca_generation]


class IssuerRef(Model):
    """The cert-manager issuer of the SuperLink certificate; required for `source: certManager`."""

    name: str = Field(description="Name of the Issuer or ClusterIssuer.")
    kind: Literal["Issuer", "ClusterIssuer"] = Field(default="Issuer", description="Its kind.")
    group: str = Field(default="cert-manager.io", description="Its API group.")


class CertManager(Model):
    """`source: certManager`: a cert-manager Certificate `N-superlink`; Pulumi waits until it is Ready."""

    issuer_ref: Optional[IssuerRef] = None
    duration: str = Field(default="43800h", description="Certificate lifetime, a Go duration (the chart's default).")
    renew_before: str = Field(
        default="360h",
        description=("cert-manager renews this long before expiry; shorter than duration (the chart's default)."),
    )


class TrustSource(Model):
    """What SuperNodes and SuperExecs trust, kept in a Secret of its own (never the one
    holding the server key)."""

    source: Optional[Literal["generated", "existingSecret", "copyFromServerSecret"]] = Field(
        default=None,
        description=(
            "generated: the CA pulumi-tls made (only with source generate). copyFromServerSecret: the server Secret's "
            "`ca.crt` (else `tls.crt`) copied into Secret `N-ca` at deploy time, as the chart's copyFromExistingSecret. "
            "existingSecret: a CA Secret you manage (not with source generate, whose CA only pulumi-tls has). Unset: generated for "
            "source generate, else copyFromServerSecret."
        ),
    )
    existing_secret: Optional[str] = Field(
        default=None, description=("`trust.source: existingSecret`: the Secret holding the CA certificate.")
    )
    key: str = Field(default="ca.crt", description="`trust.source: existingSecret`: the CA certificate's key in it.")


class Tls(Model):
    """TLS on the SuperLink's Fleet and Control APIs (HTTP era: also the Runtime API its SuperExecs dial) and, with
    process isolation and Flower 1.40+, on each pool's Runtime API (a certificate per pool from the same source: see
    "The SuperExec hop"). Plaintext by Flower's design: the gRPC-era ServerAppIo and ClientAppIo APIs, which leave a
    pod only with distributed SuperExecs. The SuperLink mounts the server certificate and key; SuperNodes and
    SuperExecs mount only the CA. Any `tls` key together with `insecure: true` is an error."""

    source: Literal["generate", "certManager", "existingSecret"] = Field(
        default="generate",
        description=(
            "generate: a CA and a server certificate (ECDSA P-256) made by pulumi-tls, kept as secrets in Pulumi state, in "
            "Secrets `N-superlink-tls` and `N-ca`. certManager: a cert-manager Certificate. existingSecret: a "
            "kubernetes.io/tls Secret you manage."
        ),
    )
    existing_secret: Optional[str] = Field(
        default=None,
        description=(
            "Only with source existingSecret: the kubernetes.io/tls Secret (`tls.crt`, `tls.key`, optional `ca.crt`)."
        ),
    )
    dns_names: list[str] = Field(
        default=[],
        description=(
            "Extra DNS names of a generated or cert-manager certificate (load balancer, ingress), besides the Service's "
            "in-cluster names and localhost."
        ),
    )
    ip_addresses: list[str] = Field(
        default=[], description=("Extra IP addresses of a generated or cert-manager certificate, besides 127.0.0.1.")
    )
    generate: GeneratedCertificate = GeneratedCertificate()
    cert_manager: CertManager = CertManager()
    trust: TrustSource = TrustSource()


class NodeAuth(Model):
    """SuperNode authentication (Flower 1.23+, needs TLS): see "Node authentication, step by step"."""

    enabled: bool = Field(
        default=False,
        description=(
            "The SuperLink runs with `--enable-supernode-auth` and accepts only registered SuperNodes; each SuperNode gets "
            "its own ECDSA P-384 key from Secret `N-supernode-P-node-keys`."
        ),
    )
    key_source: Literal["generate", "config"] = Field(
        default="generate",
        description=(
            "generate: one pulumi-tls key per replica. config: keys from the secret stack config key `nodeAuthKeys` (see "
            "below); required for DaemonSets."
        ),
    )


class Rbac(Model):
    viewer_groups: list[str] = Field(
        default=[],
        description=(
            "Groups bound to Role `N-viewer`: get/list/watch on the namespace's pods and their logs, Services, ConfigMaps, "
            "PVCs, workloads, NetworkPolicies, PDBs and events; never Secrets."
        ),
    )
