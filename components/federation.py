"""FederationComponent: the namespace, the SuperLink and one component per pool.

TLS material arrives through `plan.trust` (Secret names the pods mount); a
TlsTrustComponent that creates those Secrets is passed as `trust_dependencies` so pods
are only created once their Secrets exist.
"""

from __future__ import annotations

from typing import Optional, Sequence

import pulumi

from federation import workloads
from federation.plan import FederationPlan

from .kubernetes import register
from .superlink import SuperLinkComponent
from .supernode_pool import SuperNodePoolComponent


class FederationComponent(pulumi.ComponentResource):
    def __init__(
        self,
        name: str,
        plan: FederationPlan,
        opts: Optional[pulumi.ResourceOptions] = None,
        trust_dependencies: Sequence[pulumi.Resource] = (),
    ):
        super().__init__("flower-federation:index:Federation", name, None, opts)
        depends: list[pulumi.Resource] = list(trust_dependencies)
        self.namespace = None
        if plan.spec.create_namespace:
            self.namespace = register(workloads.namespace(plan), pulumi.ResourceOptions(parent=self))
            depends.append(self.namespace)
        in_namespace = pulumi.ResourceOptions(parent=self, depends_on=depends)
        self.superlink = SuperLinkComponent(f"{name}-superlink", plan, in_namespace)
        self.pools = {
            p.name: SuperNodePoolComponent(f"{name}-pool-{p.name}", plan, p, in_namespace)
            for p in plan.spec.supernodes.pools
        }
        self.register_outputs({"fleetAddress": self.superlink.fleet_address,
                               "controlAddress": self.superlink.control_address})
