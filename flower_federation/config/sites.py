"""A federation across clusters and organisations: the SuperLink a site dials, the sites a hub
admits, and the clusters one stack deploys into. (How a hub is reached from outside is the
SuperLink's: config/superlink.py `externalAddress` and config/exposure.py.)"""

from __future__ import annotations

from typing import Literal, Optional

from pydantic import Field

from flower_federation.config.base import Model

Role = Literal["federation", "hub", "site"]


class RemoteCertificate(Model):
    """The CA a site trusts the hub's SuperLink with: exactly one source. Only public certificates cross the
    boundary."""

    pem: Optional[str] = Field(
        default=None, description="The hub's CA certificate (PEM), e.g. the hub stack's `caCertificate` output."
    )
    existing_secret: Optional[str] = Field(
        default=None,
        description=(
            "A Secret in the site's namespace holding it (key `ca.crt`, else `tls.crt`), copied into Secret `N-ca` at "
            "deploy time, as the chart's `certificate.existingSecret`."
        ),
    )
    from_stack: Optional[str] = Field(
        default=None,
        description=(
            "`org/project/stack` of the hub: its `caCertificate` output (a pulumi.StackReference), and its external "
            "address and port when `address`/`port` are unset."
        ),
    )


class RemoteSuperLink(Model):
    """Role `site`: the SuperLink the site's SuperNodes dial (the Helm chart's `supernode.superlink`)."""

    address: Optional[str] = Field(
        default=None,
        description="Host name or IP of the hub's SuperLink, as its certificate names it. Required unless fromStack.",
    )
    port: Optional[int] = Field(
        default=None, ge=1, le=65535, description="Unset: the hub's (fromStack), else the dialect's Fleet port."
    )
    certificate: RemoteCertificate = RemoteCertificate()
    cidrs: list[str] = Field(
        default=[],
        description=(
            "Where the SuperLink's address may resolve to: SuperNodes' egress to its port is limited to these CIDRs. "
            "Empty: that port to any destination (the address may be a name)."
        ),
    )


class Site(Model):
    """An organisation whose SuperNodes the hub admits (node authentication): their public keys, inline or from the
    site's stack. Only public keys cross the boundary."""

    name: str = Field(description="Unique DNS-1123 label naming the site.")
    public_keys: list[str] = Field(
        default=[], description="OpenSSH public keys (`ecdsa-sha2-nistp384 AAAA... comment`), one per SuperNode."
    )
    from_stack: Optional[str] = Field(
        default=None, description="`org/project/stack` of the site: its `nodeAuth.publicKeys` output."
    )


class Cluster(Model):
    """A Kubernetes cluster this stack deploys into besides its ambient one: one explicit `kubernetes.Provider`."""

    kubeconfig: Optional[str] = Field(
        default=None,
        description=(
            "Kubeconfig contents; a secret (`pulumi config set --secret --path 'federation.clusters.C.kubeconfig' ...`), "
            "never rendered or exported."
        ),
    )
    context: Optional[str] = Field(
        default=None, description="Kubeconfig context (of `kubeconfig`, else the ambient one)."
    )
