"""FederationComponent: the namespace, TLS trust, shared RBAC, the SuperLink and one
component per pool.

Pods are created only after the Secrets they mount exist (TLS trust first), and carry
a checksum of the certificates they mount, so a new certificate rolls them.
"""

from __future__ import annotations

from typing import Optional

import pulumi

from federation import access, workloads
from federation.plan import FederationPlan

from .kubernetes import register
from .superlink import SuperLinkComponent
from .supernode_pool import SuperNodePoolComponent
from .tls import TlsTrustComponent


class FederationComponent(pulumi.ComponentResource):
    def __init__(self, name: str, plan: FederationPlan, opts: Optional[pulumi.ResourceOptions] = None):
        super().__init__("flower-federation:index:Federation", name, None, opts)
        depends: list[pulumi.Resource] = []
        self.namespace = None
        if plan.spec.create_namespace:
            self.namespace = register(workloads.namespace(plan), pulumi.ResourceOptions(parent=self))
            depends.append(self.namespace)
        in_namespace = pulumi.ResourceOptions(parent=self, depends_on=list(depends))
        self.tls: Optional[TlsTrustComponent] = None
        if plan.trust is not None:
            self.tls = TlsTrustComponent(f"{name}-tls", plan, in_namespace)
            depends.append(self.tls)
        self.access = [register(m, in_namespace) for m in access.federation_objects(plan)]
        after_trust = pulumi.ResourceOptions(parent=self, depends_on=depends + self.access)
        self.superlink = SuperLinkComponent(f"{name}-superlink", plan, after_trust,
                                            self.tls.superlink_checksum if self.tls else None)
        self.pools = {
            p.name: SuperNodePoolComponent(f"{name}-pool-{p.name}", plan, p, after_trust,
                                           self.tls.client_checksum if self.tls else None)
            for p in plan.spec.supernodes.pools
        }
        self.register_outputs({"fleetAddress": self.superlink.fleet_address,
                               "controlAddress": self.superlink.control_address})
