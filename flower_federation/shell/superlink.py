"""SuperLinkComponent: the SuperLink StatefulSet, its Service(s), ServiceAccount and
NetworkPolicies and, with distributed SuperExec, the ServerApp SuperExec Deployment."""

from __future__ import annotations

from typing import Any, Optional

import pulumi

from flower_federation.builders import monitoring
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
        pool_keys: Optional[pulumi.Output[dict[str, dict[str, str]]]] = None,
    ):
        """`pool_keys`: the stack's own pools' public keys ({pool: {slot: key}}, made at deploy time), which the
        exporter's ConfigMap labels with their pool (monitoring.key_labels)."""
        super().__init__("flower-federation:index:SuperLink", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        self.resources: list[pulumi.CustomResource] = []
        for m in objects:  # a loop, not a comprehension: see supernode_pool.deploy
            fields = self._exporter_keys(plan, m, pool_keys)
            self.resources.append(register(m, child, pod_annotations=rollout.annotations(m), fields=fields))
        self.fleet_address = pulumi.Output.from_input(plan.fleet_address)
        self.control_address = pulumi.Output.from_input(plan.control_address)
        self.register_outputs({"fleetAddress": self.fleet_address, "controlAddress": self.control_address})

    @staticmethod
    def _exporter_keys(
        plan: FederationPlan, m: Manifest, pool_keys: Optional[pulumi.Output[dict[str, dict[str, str]]]]
    ) -> Optional[dict[str, Any]]:
        if pool_keys is None or m["kind"] != "ConfigMap" or m["metadata"]["name"] != plan.names.federation_exporter:
            return None
        labels = pool_keys.apply(lambda keys: monitoring.key_labels(plan, keys))
        return {"data": {**m["data"], monitoring.KEY_LABELS_FILE: labels}}
