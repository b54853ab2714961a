"""SuperLinkComponent: the SuperLink StatefulSet, its Service(s), ServiceAccount and
NetworkPolicies and, with distributed SuperExec, the ServerApp SuperExec Deployment."""

from __future__ import annotations

from typing import Optional

import pulumi

from flower_federation.kube.objects import Manifest
from flower_federation.plan import FederationPlan
from flower_federation.shell.kubernetes import register
from flower_federation.shell.rollout import Rollout


class SuperLinkComponent(pulumi.ComponentResource):
    fleet_address: pulumi.Output[str]
    control_address: pulumi.Output[str]

    def __init__(
        self,
        name: str,
        plan: FederationPlan,
        objects: list[Manifest],
        rollout: Rollout,
        opts: Optional[pulumi.ResourceOptions] = None,
    ):
        super().__init__("flower-federation:index:SuperLink", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        self.resources = [register(m, child, pod_annotations=rollout.annotations(m)) for m in objects]
        self.fleet_address = pulumi.Output.from_input(plan.fleet_address)
        self.control_address = pulumi.Output.from_input(plan.control_address)
        self.register_outputs({"fleetAddress": self.fleet_address, "controlAddress": self.control_address})
