"""FederationComponent: everything the stack deploys, cluster by cluster, each object
registered by the component that owns it in the core's render.

The first cluster (the SuperLink's, or a site's first) gets the namespace, TLS trust,
shared RBAC, the SuperLink and node registration; every other cluster a ClusterComponent
(namespace, CA Secret, RBAC) with its own Kubernetes provider. Pools follow the cluster
they run in. Pods are created only after the Secrets they mount exist (TLS trust first),
and carry a checksum of the certificates and keys they mount, so new ones roll them
(rollout.py).
"""

from __future__ import annotations

import dataclasses
from typing import Optional

import pulumi

from flower_federation.builders.manifests import (
    APPIO,
    FEDERATION,
    REGISTRATION,
    SUPERLINK,
    TLS,
    Manifests,
    appio_owner,
    node_keys_owner,
    pool_owner,
)
from flower_federation.config.derived import cluster_label
from flower_federation.plan import FederationPlan
from flower_federation.shell.appio import AppIoComponent
from flower_federation.shell.cluster import ClusterComponent
from flower_federation.shell.kubernetes import register
from flower_federation.shell.registration import RegistrationComponent
from flower_federation.shell.rollout import Rollout
from flower_federation.shell.superlink import SuperLinkComponent
from flower_federation.shell.supernode_pool import SuperNodePoolComponent
from flower_federation.shell.tls import TlsTrustComponent


class FederationComponent(pulumi.ComponentResource):
    def __init__(
        self,
        name: str,
        plan: FederationPlan,
        rendered: Manifests,
        providers: Optional[dict[str, pulumi.ProviderResource]] = None,
        opts: Optional[pulumi.ResourceOptions] = None,
    ):
        """`providers` maps a named cluster to its Kubernetes provider; the unnamed one
        ("") is the stack's ambient provider."""
        super().__init__("flower-federation:index:Federation", name, None, opts)
        providers = providers or {}
        home, *others = rendered.clusters

        def in_cluster(cluster: str, depends: list[pulumi.Resource]) -> pulumi.ResourceOptions:
            provider = providers.get(cluster)
            return pulumi.ResourceOptions(
                parent=self, depends_on=list(depends), providers=[provider] if provider else None
            )

        shared = home.owned_by(FEDERATION)
        namespaces = [m for m in shared if m["kind"] == "Namespace"]
        depends: list[pulumi.Resource] = []
        self.namespace = None
        if namespaces:
            self.namespace = register(namespaces[0], in_cluster(home.name, []))
            depends.append(self.namespace)
        self.tls: Optional[TlsTrustComponent] = None
        rollout = Rollout()
        if plan.trust is not None:
            self.tls = TlsTrustComponent(f"{name}-tls", plan, home.owned_by(TLS), in_cluster(home.name, depends))
            depends.append(self.tls)
            rollout = dataclasses.replace(
                rollout,
                tls=plan.trust,
                superlink_checksum=self.tls.superlink_checksum,
                client_checksum=self.tls.client_checksum,
            )
        self.access = [register(m, in_cluster(home.name, depends)) for m in shared if m["kind"] != "Namespace"]
        ready = {home.name: [*depends, *self.access]}
        self.clusters = {}
        for cluster in others:
            component = ClusterComponent(
                f"{name}-cluster-{cluster_label(cluster.name)}",
                cluster,
                self.tls.ca_pem if self.tls else None,
                in_cluster(cluster.name, [self.tls] if self.tls else []),
            )
            self.clusters[cluster.name] = component
            ready[cluster.name] = [component]

        signer = self.tls.signer if self.tls else None
        self.superlink: Optional[SuperLinkComponent] = None
        if plan.runs_superlink:
            superlink_ready = list(ready[home.name])
            appio_objects = home.owned_by(APPIO)
            if appio_objects:
                auth = AppIoComponent(
                    f"{name}-superlink-appio", plan, None, appio_objects, None, in_cluster(home.name, superlink_ready)
                )
                superlink_ready.append(auth)
            self.superlink = SuperLinkComponent(
                f"{name}-superlink", plan, home.owned_by(SUPERLINK), rollout, in_cluster(home.name, superlink_ready)
            )
        self.pools = {}
        for cluster in rendered.clusters:
            for p in plan.pools_in(cluster.name):
                key_secrets = cluster.owned_by(node_keys_owner(p.name))
                self.pools[p.name] = SuperNodePoolComponent(
                    f"{name}-pool-{p.name}",
                    plan,
                    p,
                    cluster.owned_by(pool_owner(p.name)),
                    key_secrets[0] if key_secrets else None,
                    rollout,
                    in_cluster(cluster.name, ready[cluster.name]),
                    appio_objects=cluster.owned_by(appio_owner(p.name)),
                    signer=signer,
                )
        # Key-set changes in the order that never refuses a SuperNode: new keys registered,
        # then the pools roll onto them, then keys no longer trusted are revoked.
        self.registration: Optional[RegistrationComponent] = None
        registration = home.owned_by(REGISTRATION)
        if registration and self.superlink is not None:
            self.registration = RegistrationComponent(
                f"{name}-node-registration",
                plan,
                registration,
                self.public_keys(),
                rollout,
                in_cluster(home.name, [*ready[home.name], self.superlink]),
            )
        # Pools roll after the SuperLink's rollout: a SuperNode stopping then tells a running SuperLink it leaves, so
        # its successor is admitted at once (a SuperLink that missed it holds the node online for 60 s).
        registered = [self.registration.registered] if self.registration else []
        registered += [self.superlink] if self.superlink is not None else []
        rolled = [r for pool in self.pools.values() for r in pool.deploy(registered)]
        if self.registration is not None:
            self.registration.revoke_after(rolled)
        outputs = {}
        if self.superlink is not None:
            outputs = {"fleetAddress": self.superlink.fleet_address, "controlAddress": self.superlink.control_address}
        self.register_outputs(outputs)

    def public_keys(self) -> pulumi.Output[dict[str, dict[str, str]]]:
        """Every pool's node public keys, {pool: {slot: key}} (pools without keys left out)."""
        keys = {name: pool.public_keys for name, pool in self.pools.items() if pool.public_keys is not None}
        return pulumi.Output.all(**keys) if keys else pulumi.Output.from_input({})
