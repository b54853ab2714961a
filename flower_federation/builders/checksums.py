"""Which Secret each checksum annotation on a pod template digests, stated once.

A Flower process cannot reload a certificate or a key file, so a pod template carries a digest of the generated
Secrets it mounts and a new digest rolls its pods. The shell (shell/rollout.py) puts each digest's value on the
templates that mount its Secret; `diff` (review/consequences.py) reads the same fact to say why a pod rolls. The
digests themselves are Pulumi Outputs, made only at registration.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from flower_federation.builders import appio, node_auth, trust
from flower_federation.builders.manifests import volume_sources
from flower_federation.kube.objects import PodTemplate
from flower_federation.plan import FederationPlan
from flower_federation.plan.tls_sources import Trust


@dataclass(frozen=True)
class Checksummed:
    """A Secret whose digest a pod template that mounts it carries under `annotation`."""

    annotation: str
    secret: str


def tls(trust_: Trust) -> tuple[Checksummed, Checksummed]:
    """The SuperLink's server Secret (its certificate and CA), then the CA clients trust: the SuperLink mounts
    both, and its annotation digests the server's (the first that a template mounts wins)."""
    return (
        Checksummed(trust.CHECKSUM_ANNOTATION, trust_.server_secret),
        Checksummed(trust.CHECKSUM_ANNOTATION, trust_.ca_secret),
    )


def node_keys(secret: str) -> Checksummed:
    """A pool's node-keys Secret: its public keys' digest."""
    return Checksummed(node_auth.CHECKSUM_ANNOTATION, secret)


def runtime(secret: str) -> Checksummed:
    """A pool's Runtime API certificate Secret, or a site's own Runtime API CA Secret."""
    return Checksummed(appio.RUNTIME_CHECKSUM_ANNOTATION, secret)


def of_plan(plan: FederationPlan) -> tuple[Checksummed, ...]:
    """Every Secret a checksum may digest in the federation `plan` renders, in the order `covering` takes them."""
    out: list[Checksummed] = list(tls(plan.trust)) if plan.trust is not None else []
    pools = plan.spec.supernodes.pools
    out += [node_keys(plan.names.node_keys_secret(p.name)) for p in pools]
    if plan.runtime_trust is not None:
        # A pool's Runtime API certificate, then a site's own CA (its SuperExecs mount only that one).
        out += [runtime(secret) for _, secret in plan.runtime_trust.pool_secrets]
        out += [runtime(secret) for _, secret in plan.runtime_trust.pool_ca_secrets]
    return tuple(out)


def covering(template: PodTemplate, candidates: Iterable[Checksummed]) -> dict[str, Checksummed]:
    """annotation -> the Secret it digests on `template`: of the `candidates` the template mounts, the first per
    annotation (the mounts are read off the template itself, so a new mount needs no wiring)."""
    mounted = {name for kind, name in volume_sources(template["spec"].get("volumes", [])) if kind == "Secret"}
    out: dict[str, Checksummed] = {}
    for c in candidates:
        if c.secret in mounted:
            out.setdefault(c.annotation, c)
    return out
