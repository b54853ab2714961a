"""ClusterComponent: what a cluster other than the SuperLink's gets before its pools
land there: the namespace, the CA Secret its pools trust (filled with the federation's CA
certificate, public) and the shared RBAC. Its objects' logical names carry the cluster's
name, since each of its Kubernetes names also exists in the SuperLink's cluster."""

from __future__ import annotations

from typing import Optional

import pulumi

from flower_federation.builders.manifests import FEDERATION, TLS, ClusterManifests
from flower_federation.config.derived import cluster_label
from flower_federation.shell.kubernetes import register


class ClusterComponent(pulumi.ComponentResource):
    def __init__(
        self,
        name: str,
        cluster: ClusterManifests,
        ca_pem: Optional[pulumi.Output[str]],
        opts: Optional[pulumi.ResourceOptions] = None,
    ):
        super().__init__("flower-federation:index:Cluster", name, None, opts)
        # Named after the cluster, never its position, so which cluster is home never renames them.
        prefix = f"{cluster_label(cluster.name)}/"
        shared = cluster.owned_by(FEDERATION)
        namespaces = [m for m in shared if m["kind"] == "Namespace"]
        self.resources: list[pulumi.Resource] = [
            register(m, pulumi.ResourceOptions(parent=self), prefix=prefix) for m in namespaces
        ]
        in_namespace = pulumi.ResourceOptions(parent=self, depends_on=list(self.resources))
        for secret in cluster.owned_by(TLS):
            fields = {"stringData": {"ca.crt": ca_pem}} if ca_pem is not None and "stringData" not in secret else None
            self.resources.append(register(secret, in_namespace, prefix=prefix, fields=fields))
        self.resources += [register(m, in_namespace, prefix=prefix) for m in shared if m["kind"] != "Namespace"]
        self.register_outputs({"cluster": cluster.name})
