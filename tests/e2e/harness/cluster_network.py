"""The cluster's network, as its CNI and node make it: an address on the node's bridge for
each pod and client namespace (and the routes every one of them gets), network partitions
(isolated bridge ports), public names, and client namespaces standing for pods. A part of
cluster.Cluster (ClusterNetwork, a mixin), kept apart from its API server and controllers."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Optional

from tests.e2e.harness.host import run_cmd
from tests.e2e.harness.network import add_netns, attach_to_bridge, isolate_port

if TYPE_CHECKING:
    from tests.e2e.harness.pods import Pod


class ClusterNetwork:
    """cluster.Cluster's network. Uses the cluster's id, subnet, node_ns, bridge, netns,
    addresses, veths, routes, partitioned, extra_hosts, clients, client_labels, _ips,
    _veths and write_dns()."""

    def allocate_ip(self) -> str:
        ip = str(self.subnet.network_address + self._ips)
        self._ips += 1
        return ip

    def next_veth(self) -> str:
        self._veths += 1
        return f"{self.id}v{self._veths}"

    def add_bridged_netns(self, netns: str) -> str:
        """A network namespace of ours on the node's bridge (for a pod or a client),
        with an address of its own, which it returns."""
        ip = self.allocate_ip()
        veth = self.next_veth()
        add_netns(netns)
        self.netns.append(netns)
        self.addresses[netns] = ip
        attach_to_bridge(netns, self.node_ns, self.bridge, veth, ip, self.subnet.prefixlen)
        self.veths[netns] = veth
        for cidr, via in self.routes:
            run_cmd(["ip", "-n", netns, "route", "add", cidr, "via", via])
        return ip

    def add_route(self, cidr: str, via: str) -> None:
        """A route every pod and client of this cluster has (and later ones get)."""
        self.routes.append((cidr, via))
        for netns in self.netns:
            if netns != self.node_ns:
                run_cmd(["ip", "-n", netns, "route", "add", cidr, "via", via])

    def partition(self, pods: Iterable[Pod]) -> None:
        """A network partition: the given pods stop reaching one another (their bridge
        ports are isolated: frames between them are dropped silently). The node, where
        the kubelet probes from, and every other pod or client still reach them, as
        across nodes whose network split while each kubelet still sees its own pods."""
        for p in pods:
            isolate_port(self.node_ns, self.veths[p.netns], True)
            self.partitioned.add(p.netns)

    def heal(self) -> None:
        """The partition is over: every isolated port is joined again."""
        for netns in sorted(self.partitioned):
            isolate_port(self.node_ns, self.veths[netns], False)
        self.partitioned.clear()

    def add_host(self, name: str, ip: str) -> None:
        """`name` resolves to `ip` in every pod and client of this cluster (a public DNS
        record, e.g. another cluster's load balancer)."""
        self.extra_hosts[name] = ip
        self.write_dns()

    # -- a client namespace (e.g. where the flwr CLI runs)
    def add_client(self, name: str, namespace: str, labels: Optional[dict[str, str]] = None) -> str:
        """A network namespace standing for a pod with `labels` in `namespace` (for the
        NetworkPolicies), that runs no containers: where clients and probes run."""
        netns = f"{self.id}-{name}"
        self.add_bridged_netns(netns)
        self.client_labels[netns] = dict(labels or {})
        self.clients.append((netns, namespace))
        self.write_dns()
        return netns
