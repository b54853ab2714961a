"""SuperNodePoolComponent: one pool's StatefulSet (with its headless Service) or
DaemonSet, and with distributed SuperExec the paired SuperExec StatefulSet.

Each pool is its own component, so editing one pool's config changes only the
resources under that pool."""

from __future__ import annotations

from typing import Optional

import pulumi

from federation import workloads
from federation.config import Pool
from federation.plan import FederationPlan

from .kubernetes import register


class SuperNodePoolComponent(pulumi.ComponentResource):
    kind: pulumi.Output[str]
    replicas: pulumi.Output

    def __init__(self, name: str, plan: FederationPlan, pool: Pool, opts: Optional[pulumi.ResourceOptions] = None):
        super().__init__("flower-federation:index:SuperNodePool", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        self.resources = [register(m, child) for m in workloads.pool(plan, pool)]
        self.kind = pulumi.Output.from_input(plan.spec.mode)
        self.replicas = pulumi.Output.from_input(pool.replicas)
        self.register_outputs({"kind": self.kind, "replicas": self.replicas})
