"""FederationComponent: the namespace, TLS trust, shared RBAC, the SuperLink and one
component per pool, each registering the objects the core rendered for it.

Pods are created only after the Secrets they mount exist (TLS trust first), and carry
a checksum of the certificates and keys they mount, so new ones roll them (rollout.py).
"""

from __future__ import annotations

import dataclasses
from typing import Optional

import pulumi

from federation.manifests import FEDERATION, SUPERLINK, TLS, ClusterManifests, node_keys_owner, pool_owner
from federation.plan import FederationPlan

from .kubernetes import register
from .rollout import Rollout
from .superlink import SuperLinkComponent
from .supernode_pool import SuperNodePoolComponent
from .tls import TlsTrustComponent


class FederationComponent(pulumi.ComponentResource):
    def __init__(
        self, name: str, plan: FederationPlan, cluster: ClusterManifests, opts: Optional[pulumi.ResourceOptions] = None
    ):
        super().__init__("flower-federation:index:Federation", name, None, opts)
        shared = cluster.owned_by(FEDERATION)
        namespaces = [m for m in shared if m["kind"] == "Namespace"]
        depends: list[pulumi.Resource] = []
        self.namespace = None
        if namespaces:
            self.namespace = register(namespaces[0], pulumi.ResourceOptions(parent=self))
            depends.append(self.namespace)
        in_namespace = pulumi.ResourceOptions(parent=self, depends_on=list(depends))
        self.tls: Optional[TlsTrustComponent] = None
        rollout = Rollout()
        if plan.trust is not None:
            self.tls = TlsTrustComponent(f"{name}-tls", plan, cluster.owned_by(TLS), in_namespace)
            depends.append(self.tls)
            rollout = dataclasses.replace(
                rollout,
                tls=plan.trust,
                superlink_checksum=self.tls.superlink_checksum,
                client_checksum=self.tls.client_checksum,
            )
        self.access = [register(m, in_namespace) for m in shared if m["kind"] != "Namespace"]
        after_trust = pulumi.ResourceOptions(parent=self, depends_on=[*depends, *self.access])
        self.superlink = SuperLinkComponent(
            f"{name}-superlink", plan, cluster.owned_by(SUPERLINK), rollout, after_trust
        )
        self.pools = {}
        for p in plan.spec.supernodes.pools:
            key_secrets = cluster.owned_by(node_keys_owner(p.name))
            self.pools[p.name] = SuperNodePoolComponent(
                f"{name}-pool-{p.name}",
                plan,
                p,
                cluster.owned_by(pool_owner(p.name)),
                key_secrets[0] if key_secrets else None,
                rollout,
                after_trust,
            )
        self.register_outputs(
            {"fleetAddress": self.superlink.fleet_address, "controlAddress": self.superlink.control_address}
        )
