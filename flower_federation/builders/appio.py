"""The SuperExec hop as plain data: what protects the API a SuperExec dials, its
SuperNode's Runtime API (a pool) or the SuperLink's (Flower 1.40+, process isolation).

- TLS: each pool's SuperNodes serve their Runtime API with a certificate of the pool's
  (`N-supernode-P-runtime-tls`), signed by the federation's CA (generate), issued by the
  federation's cert-manager issuer (certManager), or the user's (existingSecret,
  `pools[].runtimeApiSecret`). SuperExecs verify it with the federation's CA. The
  SuperLink side needs nothing new: its Runtime API shares the TLS port. A site has the
  hub's CA certificate but never its key: its pools' certificates are signed by a CA of
  the site's own (pulumi-tls, secret in Pulumi state), whose certificate each pool gets in
  `N-supernode-P-runtime-ca`; its SuperNodes and SuperExecs mount that, not the hub's CA.
- SuperExec auth: a random secret per pool (`N-supernode-P-superexec-auth`) and one for
  the SuperLink (`N-superlink-superexec-auth`), mounted as a file into the server and its
  SuperExecs; the SuperExec signs every request with it (HMAC), the server refuses the
  rest. Made by pulumi-random in the shell, which fills the Secrets built here.

Key material never appears here: Secrets are rendered without data.
"""

from __future__ import annotations

from typing import Any, Optional

from flower_federation.builders import trust
from flower_federation.config import Pool
from flower_federation.config.derived import runtime_api_sans
from flower_federation.flower.dialects import ServerTls
from flower_federation.flower.layout import (
    RUNTIME_CA_DIR,
    RUNTIME_CA_VOLUME,
    RUNTIME_TLS_DIR,
    RUNTIME_TLS_VOLUME,
    SUPEREXEC_AUTH_DIR,
    SUPEREXEC_AUTH_FILE,
    SUPEREXEC_AUTH_KEY,
    SUPEREXEC_AUTH_VOLUME,
)
from flower_federation.kube.naming import SUPERLINK, SUPERNODE
from flower_federation.kube.objects import Manifest
from flower_federation.plan import FederationPlan
from flower_federation.plan.tls_sources import RuntimeTrust

# A new pool certificate or CA rolls the pool's pods (Flower reads the files at start).
RUNTIME_CHECKSUM_ANNOTATION = "flower.flwr.ai/runtime-tls-checksum"
# Length of a generated auth secret (letters and digits: ~285 bits).
AUTH_SECRET_LENGTH = 48


def _runtime(plan: FederationPlan) -> RuntimeTrust:
    assert plan.runtime_trust is not None, "Runtime API TLS needs TLS, process isolation and Flower 1.40+"
    return plan.runtime_trust


def pool_dns_names(plan: FederationPlan, pool: Pool) -> list[str]:
    return _sans(plan, pool)[0]


def pool_ip_addresses(plan: FederationPlan, pool: Pool) -> list[str]:
    return _sans(plan, pool)[1]


def _sans(plan: FederationPlan, pool: Pool) -> tuple[list[str], list[str]]:
    return runtime_api_sans(plan.name, pool.name, plan.namespace, plan.spec.cluster_domain, pool.service.external_names)


def pool_common_name(plan: FederationPlan, pool: Pool) -> str:
    # <= 52 characters (the StatefulSet name rule), within X.509's 64.
    return plan.names.pool(pool.name)


def pool_tls_secret(plan: FederationPlan, pool: Pool) -> Manifest:
    """A pool's kubernetes.io/tls Secret (source generate); the shell fills `stringData`
    (tls.crt, tls.key) from pulumi-tls."""
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "kubernetes.io/tls",
        "metadata": plan.meta(_runtime(plan).pool_secret(pool.name), SUPERNODE, pool.name),
    }


def pool_ca_secret(plan: FederationPlan, pool: Pool) -> Manifest:
    """A site's CA certificate for one pool's Runtime API (key ca.crt, public), in the pool's cluster; the shell
    fills `stringData` with the site-local CA's certificate."""
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "Opaque",
        "metadata": plan.meta(_runtime(plan).pool_ca_secret(pool.name), SUPERNODE, pool.name),
    }


def pool_certificate(plan: FederationPlan, pool: Pool) -> Manifest:
    """cert-manager Certificate of a pool's Runtime API (source certManager)."""
    return trust.cert_manager_certificate(
        plan,
        plan.meta(plan.names.runtime_tls_secret(pool.name), SUPERNODE, pool.name),
        _runtime(plan).pool_secret(pool.name),
        pool_common_name(plan, pool),
        pool_dns_names(plan, pool),
        pool_ip_addresses(plan, pool),
    )


def auth_secret(plan: FederationPlan, owner: str, component: str, pool: Optional[str]) -> Manifest:
    """A SuperExec auth secret (key `secret`), filled by the shell from pulumi-random."""
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "Opaque",
        "metadata": plan.meta(plan.names.superexec_auth_secret(owner), component, pool),
    }


def superlink_auth_secret_name(plan: FederationPlan) -> str:
    return plan.names.superexec_auth_secret(plan.names.superlink)


def pool_auth_secret_name(plan: FederationPlan, pool: Pool) -> str:
    return plan.names.superexec_auth_secret(plan.names.pool(pool.name))


def pool_objects(plan: FederationPlan, pool: Pool) -> list[Manifest]:
    """What protects one pool's Runtime API: its certificate (a Secret we fill, or a
    Certificate) and its auth secret. Registered by the pool's own component."""
    out: list[Manifest] = []
    runtime = plan.runtime_trust
    if runtime is not None and runtime.source == "generate":
        out.append(pool_tls_secret(plan, pool))
        if runtime.own_ca:
            out.append(pool_ca_secret(plan, pool))
    elif runtime is not None and runtime.source == "certManager":
        out.append(pool_certificate(plan, pool))
    if plan.superexec_auth:
        out.append(auth_secret(plan, plan.names.pool(pool.name), SUPERNODE, pool.name))
    return out


def superlink_objects(plan: FederationPlan) -> list[Manifest]:
    if not (plan.superexec_auth and plan.runs_superlink):
        return []
    return [auth_secret(plan, plan.names.superlink, SUPERLINK, None)]


# --- what pods mount ---------------------------------------------------------------------


def runtime_server_tls(plan: FederationPlan) -> Optional[ServerTls]:
    """The files a SuperNode serves its Runtime API with (Flower wants the CA too)."""
    ca_file = plan.runtime_ca_file
    if ca_file is None:
        return None
    return ServerTls(ca_file=ca_file, cert_file=f"{RUNTIME_TLS_DIR}/tls.crt", key_file=f"{RUNTIME_TLS_DIR}/tls.key")


def runtime_tls_volumes(plan: FederationPlan, pool: Pool) -> list[dict[str, Any]]:
    if plan.runtime_trust is None:
        return []
    # 0440 with fsGroup: readable by the Flower user only.
    return [
        {
            "name": RUNTIME_TLS_VOLUME,
            "secret": {
                "secretName": plan.runtime_trust.pool_secret(pool.name),
                "defaultMode": 0o440,
                "items": [{"key": "tls.crt", "path": "tls.crt"}, {"key": "tls.key", "path": "tls.key"}],
            },
        }
    ]


def runtime_tls_mounts(plan: FederationPlan) -> list[dict[str, Any]]:
    if plan.runtime_trust is None:
        return []
    return [{"name": RUNTIME_TLS_VOLUME, "mountPath": RUNTIME_TLS_DIR, "readOnly": True}]


def own_ca_volumes(plan: FederationPlan, pool: Pool) -> list[dict[str, Any]]:
    """A site's own Runtime API CA (public, 0444), for its SuperNodes (--ssl-ca-certfile) and SuperExecs."""
    if plan.runtime_trust is None or not plan.runtime_trust.own_ca:
        return []
    secret = {"secretName": plan.runtime_trust.pool_ca_secret(pool.name), "defaultMode": 0o444}
    return [{"name": RUNTIME_CA_VOLUME, "secret": {**secret, "items": [{"key": "ca.crt", "path": "ca.crt"}]}}]


def own_ca_mounts(plan: FederationPlan) -> list[dict[str, Any]]:
    if plan.runtime_trust is None or not plan.runtime_trust.own_ca:
        return []
    return [{"name": RUNTIME_CA_VOLUME, "mountPath": RUNTIME_CA_DIR, "readOnly": True}]


def auth_volumes(plan: FederationPlan, secret: str) -> list[dict[str, Any]]:
    if not plan.superexec_auth:
        return []
    return [
        {
            "name": SUPEREXEC_AUTH_VOLUME,
            "secret": {
                "secretName": secret,
                "defaultMode": 0o440,
                "items": [{"key": SUPEREXEC_AUTH_KEY, "path": SUPEREXEC_AUTH_KEY}],
            },
        }
    ]


def auth_mounts(plan: FederationPlan) -> list[dict[str, Any]]:
    if not plan.superexec_auth:
        return []
    return [{"name": SUPEREXEC_AUTH_VOLUME, "mountPath": SUPEREXEC_AUTH_DIR, "readOnly": True}]


def auth_file(plan: FederationPlan) -> Optional[str]:
    return SUPEREXEC_AUTH_FILE if plan.superexec_auth else None
