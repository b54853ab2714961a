"""SuperLinkComponent: the SuperLink StatefulSet, its Service(s), ServiceAccount and
NetworkPolicies and, with distributed SuperExec, the ServerApp SuperExec Deployment."""

from __future__ import annotations

from typing import Optional

import pulumi

from federation import trust, workloads
from federation.plan import FederationPlan

from .kubernetes import register


class SuperLinkComponent(pulumi.ComponentResource):
    fleet_address: pulumi.Output[str]
    control_address: pulumi.Output[str]

    def __init__(self, name: str, plan: FederationPlan, opts: Optional[pulumi.ResourceOptions] = None,
                 tls_checksum: Optional[pulumi.Output[str]] = None):
        super().__init__("flower-federation:index:SuperLink", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        annotations = {trust.CHECKSUM_ANNOTATION: tls_checksum} if tls_checksum is not None else None
        self.resources = [register(m, child) for m in workloads.superlink(plan, annotations)]
        self.fleet_address = pulumi.Output.from_input(plan.fleet_address)
        self.control_address = pulumi.Output.from_input(plan.control_address)
        self.register_outputs({"fleetAddress": self.fleet_address, "controlAddress": self.control_address})
