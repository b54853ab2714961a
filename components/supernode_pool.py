"""SuperNodePoolComponent: one pool's StatefulSet (with its headless Service) or
DaemonSet, its ServiceAccount, PodDisruptionBudget and NetworkPolicies, its node keys
(node authentication), and with distributed SuperExec the paired SuperExec StatefulSet.

Each pool is its own component, so editing one pool's config changes only the
resources under that pool."""

from __future__ import annotations

from typing import Optional

import pulumi

from federation import nodeauth, trust, workloads
from federation.config import Pool
from federation.plan import FederationPlan

from .kubernetes import register
from .node_keys import NodeKeysComponent


class SuperNodePoolComponent(pulumi.ComponentResource):
    kind: pulumi.Output[str]
    replicas: pulumi.Output
    public_keys: Optional[pulumi.Output[dict]]

    def __init__(self, name: str, plan: FederationPlan, pool: Pool, opts: Optional[pulumi.ResourceOptions] = None,
                 ca_checksum: Optional[pulumi.Output[str]] = None):
        super().__init__("flower-federation:index:SuperNodePool", name, None, opts)
        depends: list[pulumi.Resource] = []
        self.public_keys = None
        if plan.spec.node_auth.enabled:
            keys = NodeKeysComponent(f"{name}-node-keys", plan, pool, pulumi.ResourceOptions(parent=self))
            depends.append(keys.secret)
            self.public_keys = keys.public_keys
        annotations = {}
        if ca_checksum is not None:
            annotations[trust.CHECKSUM_ANNOTATION] = ca_checksum
        if self.public_keys is not None:
            annotations[nodeauth.CHECKSUM_ANNOTATION] = self.public_keys.apply(nodeauth.keys_checksum)
        child = pulumi.ResourceOptions(parent=self, depends_on=depends)
        self.resources = [register(m, child) for m in workloads.pool(plan, pool, annotations or None)]
        self.kind = pulumi.Output.from_input(plan.spec.mode)
        self.replicas = pulumi.Output.from_input(pool.replicas)
        self.register_outputs({"kind": self.kind, "replicas": self.replicas})
