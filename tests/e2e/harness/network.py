"""Network namespaces: the node's (with the bridge) and one per pod or client, each
attached to the bridge by a veth, on a random 10.x.y.0/24 that no host route or address
uses. Nothing is created in the host's network namespace."""

from __future__ import annotations

import contextlib
import ipaddress
import os
import random
import secrets
import threading

from tests.e2e.harness.host import ID_PREFIX, HarnessError, run_cmd

# "net:[inode]" of every network namespace we made: no process may be left in one.
NETNS_INODES: set[str] = set()


def add_netns(name: str) -> None:
    run_cmd(["ip", "netns", "add", name])
    with contextlib.suppress(OSError):
        NETNS_INODES.add(f"net:[{os.stat(f'/run/netns/{name}').st_ino}]")


def netns_pids(netns: str) -> list[int]:
    res = run_cmd(["ip", "netns", "pids", netns], check=False)
    return [int(p) for p in res.stdout.split()] if res.returncode == 0 else []


def our_netns(prefix: str = ID_PREFIX) -> list[str]:
    res = run_cmd(["ip", "netns", "list"], check=False)
    return [line.split()[0] for line in res.stdout.splitlines() if line.split() and line.split()[0].startswith(prefix)]


def add_bridge(netns: str, name: str) -> str:
    """A bridge in `netns` with a MAC address of its own, which it keeps; returns the MAC.

    A Linux bridge whose address was never set takes the lowest MAC of its ports, so a
    pod joining (a Job's, a client's) can change the node's MAC. Pods keep the old one in
    their neighbour cache and their replies to the node are lost until they resolve it
    again, which may take a minute: the node's next ARP request, when it comes from
    another of its addresses (a load balancer's, harness/wan.py), updates the pod's entry
    for that address and not for its gateway. Probes and new connections then time out
    while the pod is fine (the e2e's scenario-6 flake). CNI bridge plugins set the
    bridge's address for the same reason."""
    mac = "02:" + ":".join(f"{b:02x}" for b in secrets.token_bytes(5))  # locally administered, unicast
    run_cmd(["ip", "-n", netns, "link", "add", name, "address", mac, "type", "bridge"])
    return mac


def bridge_mac(netns: str, name: str) -> str:
    return run_cmd(["ip", "netns", "exec", netns, "cat", f"/sys/class/net/{name}/address"]).stdout.strip()


def attach_to_bridge(netns: str, node_ns: str, bridge: str, veth: str, ip: str, prefixlen: int) -> None:
    """Give network namespace `netns` `lo` and `eth0` at `ip`: a veth whose peer `veth`
    is on the node namespace's bridge."""
    run_cmd(["ip", "-n", node_ns, "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", netns])
    run_cmd(["ip", "-n", node_ns, "link", "set", veth, "master", bridge, "up"])
    run_cmd(["ip", "-n", netns, "addr", "add", f"{ip}/{prefixlen}", "dev", "eth0"])
    run_cmd(["ip", "-n", netns, "link", "set", "eth0", "up"])
    run_cmd(["ip", "-n", netns, "link", "set", "lo", "up"])


def isolate_port(node_ns: str, veth: str, isolated: bool) -> None:
    """Bridge port isolation (Linux 4.18+): frames between two isolated ports are
    dropped silently, no reset and no ICMP, as on a partitioned network; the node itself
    (where the kubelet's probes come from) and ports not isolated still reach them."""
    state = "on" if isolated else "off"
    run_cmd(["ip", "-n", node_ns, "link", "set", "dev", veth, "type", "bridge_slave", "isolated", state])


def _host_networks() -> list[ipaddress.IPv4Network]:
    nets = []
    for argv in (["ip", "-4", "route", "show", "table", "all"], ["ip", "-4", "addr", "show"]):
        for token in run_cmd(argv, check=False).stdout.split():
            try:
                if "/" in token or token.count(".") == 3:
                    nets.append(ipaddress.ip_network(token, strict=False))
            except ValueError:
                pass
    return nets


_USED_SUBNETS: set[ipaddress.IPv4Network] = set()
_SUBNET_LOCK = threading.Lock()


def pick_subnet() -> ipaddress.IPv4Network:
    with _SUBNET_LOCK:
        return _pick_subnet_locked()


def _pick_subnet_locked() -> ipaddress.IPv4Network:
    host = _host_networks()
    for _ in range(200):
        net = ipaddress.ip_network(f"10.{random.randint(64, 250)}.{random.randint(0, 255)}.0/24")
        if net not in _USED_SUBNETS and not any(net.overlaps(h) for h in host if h.prefixlen > 0):
            _USED_SUBNETS.add(net)
            return net
    raise HarnessError("no free 10.x.y.0/24 found")
