"""The network between clusters (a WAN), for federations that span clusters: each
cluster's node is a router with one leg on the cluster's bridge and one on a shared WAN
bridge (its own network namespace `<id>-wan`, its own random 10.x.y.0/24).

- `connect(cluster)`: the node gets a WAN address and forwards; every pod and client of
  the cluster gets a route to the WAN subnet (and only to it) through its node, and the
  nodes route each other's pod subnets (for the replies). A pod therefore reaches
  addresses on the WAN, never another cluster's pods.
- `expose(cluster, service)`: what a cloud load balancer does for a Service of type
  LoadBalancer: an address of its own on the WAN, owned by the cluster's node, where
  forwarder.py relays every port of the Service to its (single) backing pod, TCP byte
  for byte (TLS is never terminated), from that address: the backing pod's
  NetworkPolicy judges the load balancer's address (not the node's, which is always
  admitted, nor the client's). The backing pod keeps its address when
  recreated, as the Service's endpoints would follow it.
- `publish(cluster, name, ip)`: public DNS: `name` resolves to `ip` in that cluster's
  pods and clients (their hosts files), nowhere else. The in-cluster Service names of
  another cluster never resolve.

Each cluster enforces its own NetworkPolicies in its own pods (harness/enforce.py); the
WAN and the nodes filter nothing, as the network between clusters would not know the
policies. Not emulated: NAT of egress traffic (the backends see the node's address),
several backing pods (no balancing). Everything is made
under ID_PREFIX, closed by `close()`, at exit and by `close_all()` with the clusters.
"""

from __future__ import annotations

import contextlib
import secrets
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import IO

from tests.e2e.harness import cleanup
from tests.e2e.harness.cleanup import CREATED
from tests.e2e.harness.cluster import Cluster
from tests.e2e.harness.dns import backing, check_ports
from tests.e2e.harness.host import HERE, ID_PREFIX, HarnessError, kill, run_cmd
from tests.e2e.harness.network import add_bridge, add_netns, netns_pids, pick_subnet

FORWARDER = HERE / "forwarder.py"
NODE_LINK = "wan0"  # the node's leg on the WAN


class Wan:
    def __init__(self, label: str = "wan"):
        cleanup.install_cleanup_handlers()
        self.id = f"{ID_PREFIX}{secrets.token_hex(2)}"
        self.netns = f"{self.id}-wan"
        self.bridge = "wan"
        self.workdir = Path(tempfile.mkdtemp(prefix=f"{self.id}-{label}-"))
        CREATED.append((self.id, self.workdir))
        self.links: dict[str, tuple[Cluster, str]] = {}  # cluster id -> (cluster, its node's WAN address)
        self.balancers: dict[tuple[str, str], str] = {}  # (cluster id, Service) -> address
        self.forwarders: list[tuple[subprocess.Popen, IO[bytes]]] = []
        self._next = 1
        self._lock = threading.Lock()
        self._closed = False
        with cleanup._LIVE_LOCK:
            cleanup._LIVE.add(self)  # type: ignore[arg-type]  (close_all closes it too)
        try:
            self.subnet = pick_subnet()
            add_netns(self.netns)
            run_cmd(["ip", "-n", self.netns, "link", "set", "lo", "up"])
            add_bridge(self.netns, self.bridge)
            run_cmd(["ip", "-n", self.netns, "link", "set", self.bridge, "up"])
        except BaseException:
            self.close()
            raise

    def _allocate(self) -> str:
        with self._lock:
            self._next += 1
            return str(self.subnet.network_address + self._next)

    def connect(self, cluster: Cluster) -> str:
        """Attach `cluster`'s node to the WAN; returns the node's WAN address."""
        if cluster.id in self.links:
            return self.links[cluster.id][1]
        ip = self._allocate()
        peer = f"{cluster.id}w"
        node = cluster.node_ns
        run_cmd(["ip", "-n", self.netns, "link", "add", peer, "type", "veth", "peer", "name", NODE_LINK, "netns", node])
        run_cmd(["ip", "-n", self.netns, "link", "set", peer, "master", self.bridge, "up"])
        run_cmd(["ip", "-n", node, "addr", "add", f"{ip}/{self.subnet.prefixlen}", "dev", NODE_LINK])
        run_cmd(["ip", "-n", node, "link", "set", NODE_LINK, "up"])
        run_cmd(["ip", "netns", "exec", node, "sysctl", "-qw", "net.ipv4.ip_forward=1"])
        cluster.add_route(str(self.subnet), cluster.bridge_ip)
        for other, other_ip in self.links.values():
            run_cmd(["ip", "-n", node, "route", "add", str(other.subnet), "via", other_ip])
            run_cmd(["ip", "-n", other.node_ns, "route", "add", str(cluster.subnet), "via", ip])
        self.links[cluster.id] = (cluster, ip)
        return ip

    def expose(self, cluster: Cluster, service: str) -> str:
        """The external address of `cluster`'s LoadBalancer Service `service` (its pods
        must exist); every Service port is relayed to the backing pod."""
        svc = cluster.objects.get(("Service", service))
        if svc is None:
            raise HarnessError(f"no Service {service}")
        if svc["spec"].get("type") != "LoadBalancer":
            raise HarnessError(f"Service {service} is {svc['spec'].get('type', 'ClusterIP')}, not LoadBalancer")
        pods = backing(svc, cluster.pods.values())
        if len(pods) != 1:
            raise HarnessError(f"Service {service} selects {len(pods)} pods: exactly one is emulated")
        check_ports(svc, pods)
        self.connect(cluster)
        ip = self._allocate()
        run_cmd(["ip", "-n", cluster.node_ns, "addr", "add", f"{ip}/{self.subnet.prefixlen}", "dev", NODE_LINK])
        routes = [f"{ip}:{p['port']}={pods[0].ip}:{p['port']}" for p in svc["spec"]["ports"]]
        log = open(self.workdir / f"lb-{service}.log", "ab")  # noqa: SIM115  (closed in close())
        proc = subprocess.Popen(
            ["ip", "netns", "exec", cluster.node_ns, sys.executable, str(FORWARDER), *routes],
            stdout=subprocess.PIPE,
            stderr=log,
            stdin=subprocess.DEVNULL,
            text=True,
            start_new_session=True,
        )
        self.forwarders.append((proc, log))
        if proc.stdout.readline().strip() != "ready":
            raise HarnessError(f"load balancer for {service} did not start: see {log.name}")
        self.balancers[(cluster.id, service)] = ip
        return ip

    def balancer_log(self, service: str) -> str:
        try:
            return (self.workdir / f"lb-{service}.log").read_text(errors="replace")
        except OSError:
            return ""

    def publish(self, cluster: Cluster, name: str, ip: str) -> None:
        """Public DNS: `name` resolves to `ip` in `cluster`'s pods and clients."""
        cluster.add_host(name, ip)

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
        try:
            for proc, log in self.forwarders:
                kill(proc.pid)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(timeout=5)
                if proc.stdout is not None:
                    proc.stdout.close()
                log.close()
            for _ in range(20):
                pids = netns_pids(self.netns)
                if not pids:
                    break
                for pid in pids:
                    kill(pid)
            run_cmd(["ip", "netns", "del", self.netns], check=False)
            shutil.rmtree(self.workdir, ignore_errors=True)
        finally:
            with cleanup._LIVE_LOCK:
                cleanup._LIVE.discard(self)  # type: ignore[arg-type]
