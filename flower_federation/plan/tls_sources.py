"""Where the federation's TLS material lives and who makes it, resolved once from config:
the SuperLink's serving Secret and the CA Secret everything that dials it trusts
(`Trust`), and each pool's Runtime API certificate (`RuntimeTrust`). The builders that
render these Secrets are trust.py and appio.py."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from flower_federation.config import Federation
from flower_federation.config.derived import runtime_api_own_ca, runtime_api_tls
from flower_federation.flower.versions import FlowerVersion
from flower_federation.kube.naming import Names


@dataclass(frozen=True)
class Trust:
    """Where TLS material lives. The SuperLink mounts `server_secret` (tls.crt, tls.key)
    and the CA from `ca_secret`; everything that dials it mounts only `ca_secret`, so a
    tampered server Secret makes clients fail instead of trusting it.

    `source` says who makes the server Secret (generate: us, from pulumi-tls;
    certManager: cert-manager; existingSecret: the user); `trust_source` who makes the
    CA Secret (generated / copyFromServerSecret: us; existingSecret: the user)."""

    server_secret: str
    ca_secret: str
    ca_key: str = "ca.crt"
    source: str = "generate"
    trust_source: str = "generated"

    @property
    def serves(self) -> bool:
        """The stack runs a SuperLink with this certificate (not a site trusting a hub)."""
        return self.source != "remote"

    @property
    def creates_ca_secret(self) -> bool:
        return self.trust_source != "existingSecret"

    @property
    def external_secrets(self) -> frozenset[str]:
        """Secrets the user manages (named in config), which pods may mount unrendered."""
        names = set()
        if self.source in ("existingSecret", "remote") and self.server_secret:
            names.add(self.server_secret)
        if not self.creates_ca_secret:
            names.add(self.ca_secret)
        return frozenset(names)


@dataclass(frozen=True)
class RuntimeTrust:
    """TLS on the Runtime API each SuperNode serves its ClientApp SuperExec (Flower 1.40+,
    process isolation). `source` says who makes each pool's certificate: generate, us
    (pulumi-tls), signed by the federation's CA; certManager, a Certificate per pool from
    the federation's issuer; existingSecret, the user (`pools[].runtimeApiSecret`).
    SuperExecs verify it with the federation's CA (`ca_secret`/`ca_key`), which they
    mount anyway.

    `own_ca`: a site's certificates (generate) are signed by a CA the site generates for this hop
    alone (it has the hub's CA certificate, never its key); its certificate, public, reaches each pool
    in a Secret of the pool's (`pool_ca_secrets`), which its SuperNodes and SuperExecs mount instead."""

    source: str
    ca_secret: str
    ca_key: str
    pool_secrets: tuple[tuple[str, str], ...]
    own_ca: bool = False
    pool_ca_secrets: tuple[tuple[str, str], ...] = ()

    def pool_secret(self, pool: str) -> str:
        return dict(self.pool_secrets)[pool]

    def pool_ca_secret(self, pool: str) -> str:
        return dict(self.pool_ca_secrets)[pool]


def resolve_trust(spec: Federation, names: Names) -> Trust:
    if spec.role == "site":
        cert = spec.supernodes.superlink.certificate if spec.supernodes.superlink else None
        if cert is not None and cert.existing_secret:
            # Copied into N-ca (ca.crt, else tls.crt), as the chart's copyFromExistingSecret.
            return Trust(cert.existing_secret, names.ca_secret, "ca.crt", "remote", "copyFromServerSecret")
        return Trust("", names.ca_secret, "ca.crt", "remote", "pem")
    tls = spec.tls
    trust_source = tls.trust.source or ("generated" if tls.source == "generate" else "copyFromServerSecret")
    server = tls.existing_secret if tls.source == "existingSecret" and tls.existing_secret else names.server_tls_secret
    if trust_source == "existingSecret" and tls.trust.existing_secret:
        return Trust(server, tls.trust.existing_secret, tls.trust.key, tls.source, trust_source)
    return Trust(server, names.ca_secret, "ca.crt", tls.source, trust_source)


def resolve_runtime_trust(
    spec: Federation, names: Names, trust: Optional[Trust], version: FlowerVersion
) -> Optional[RuntimeTrust]:
    if trust is None or not runtime_api_tls(spec.insecure, spec.role, spec.isolation_mode, version):
        return None
    pools = spec.supernodes.pools
    if runtime_api_own_ca(spec.role):
        # A site: the rules refuse `tls` there, so its certificates are always generated, by its own CA.
        return RuntimeTrust(
            "generate",
            "",
            "ca.crt",
            tuple((p.name, names.runtime_tls_secret(p.name)) for p in pools),
            own_ca=True,
            pool_ca_secrets=tuple((p.name, names.runtime_ca_secret(p.name)) for p in pools),
        )
    if trust.source == "existingSecret":
        secrets = tuple((p.name, str(p.runtime_api_secret)) for p in pools)
    else:
        secrets = tuple((p.name, names.runtime_tls_secret(p.name)) for p in pools)
    return RuntimeTrust(trust.source, trust.ca_secret, trust.ca_key, secrets)
