"""SuperNodePoolComponent: one pool's StatefulSet (with its headless Service) or
DaemonSet, its ServiceAccount, PodDisruptionBudget and NetworkPolicies, its node keys
(node authentication), and with distributed SuperExec the paired SuperExec StatefulSet.

Each pool is its own component, so editing one pool's config changes only the
resources under that pool. Its keys are made first; its objects (`deploy`) once the
registration Job registered them."""

from __future__ import annotations

import dataclasses
from typing import Any, Optional

import pulumi

from flower_federation.builders import node_auth
from flower_federation.config import Pool
from flower_federation.kube.objects import Manifest
from flower_federation.plan import FederationPlan
from flower_federation.shell.appio import AppIoComponent
from flower_federation.shell.certs import Signer
from flower_federation.shell.kubernetes import register
from flower_federation.shell.node_keys import NodeKeysComponent
from flower_federation.shell.rollout import Rollout


class SuperNodePoolComponent(pulumi.ComponentResource):
    kind: pulumi.Output[str]
    replicas: pulumi.Output[Any]
    public_keys: Optional[pulumi.Output[dict[str, str]]]

    def __init__(
        self,
        name: str,
        plan: FederationPlan,
        pool: Pool,
        objects: list[Manifest],
        key_secret: Optional[Manifest],
        rollout: Rollout,
        opts: Optional[pulumi.ResourceOptions] = None,
        appio_objects: Optional[list[Manifest]] = None,
        signer: Optional[Signer] = None,
    ):
        """`key_secret` is the pool's node-keys Secret as rendered (node auth only);
        `appio_objects` what protects its SuperExec hop (appio.pool_objects), `signer`
        the CA that signs a generated Runtime API certificate."""
        super().__init__("flower-federation:index:SuperNodePool", name, None, opts)
        self._plan, self._pool, self._objects = plan, pool, objects
        self._hops: list[pulumi.Resource] = []
        self.public_keys = None
        self.keys: Optional[NodeKeysComponent] = None
        if key_secret is not None:
            self.keys = NodeKeysComponent(
                f"{name}-node-keys", plan, pool, key_secret, pulumi.ResourceOptions(parent=self)
            )
            self.public_keys = self.keys.public_keys
            checksum = self.keys.public_keys.apply(node_auth.keys_checksum)
            rollout = dataclasses.replace(rollout, node_keys={key_secret["metadata"]["name"]: checksum})
        if appio_objects:
            hop = AppIoComponent(
                f"{name}-appio", plan, pool, appio_objects, signer, pulumi.ResourceOptions(parent=self)
            )
            self._hops.append(hop)
            if hop.checksum is not None and plan.runtime_trust is not None:
                secret = plan.runtime_trust.pool_secret(pool.name)
                rollout = dataclasses.replace(rollout, runtime={**rollout.runtime, secret: hop.checksum})
            if hop.ca_checksum is not None and plan.runtime_trust is not None:
                # A site's own CA: its SuperExecs roll when it changes (they mount nothing else of the hop's TLS).
                ca_secret = plan.runtime_trust.pool_ca_secret(pool.name)
                rollout = dataclasses.replace(rollout, runtime={**rollout.runtime, ca_secret: hop.ca_checksum})
        self._rollout = rollout
        self.resources: list[pulumi.Resource] = []

    def deploy(self, registered: list[pulumi.Resource]) -> list[pulumi.Resource]:
        """The pool's objects, its node-keys Secret first, once `registered` is done (the
        registration Job that makes its keys known to the SuperLink). Returns them: the
        revocation Job waits for them (pulumi-kubernetes waits for a StatefulSet's rollout)."""
        depends = list(self._hops)
        if self.keys is not None:
            depends.append(self.keys.write_secret(registered))
        child = pulumi.ResourceOptions(parent=self, depends_on=depends + registered)
        # A loop, not a comprehension: on Python 3.11 a comprehension is a frame of its own, and the SDK turns every
        # frame under a registration into a source position (a path made a URI, a protobuf message): one frame
        # less for each of a render's registrations is ~1% of a 16-pool render's CPU (docs/benchmarks.md).
        self.resources = []
        for m in self._objects:
            self.resources.append(register(m, child, pod_annotations=self._rollout.annotations(m)))
        self.kind = pulumi.Output.from_input(self._plan.spec.mode)
        self.replicas = pulumi.Output.from_input(self._pool.replicas)
        self.register_outputs({"kind": self.kind, "replicas": self.replicas})
        return self.resources
