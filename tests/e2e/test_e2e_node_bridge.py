"""The emulated node's bridge keeps its MAC address when pods join it (harness/network.py
`add_bridge`). Before it did, a Job's pod joining the hub's bridge could give the bridge a
new MAC; the SuperLink pod kept sending to the old one, and once the node's next ARP
request came from the load balancer's address the pod never learnt the new MAC for its
gateway: the kubelet's probes and every new connection timed out for up to a minute while
the SuperLink was fine, and the probes killed it (the scenario-6 flake of issue 11 §3).

The test replays that sequence on a bridge of its own: a pod, a port with the lowest
possible MAC joining, the node dialling the pod first from a second address, then from
the bridge's. The negative control runs the same sequence on a bridge made as before
(`ip link add ... type bridge`) and must see the timeout, so the test cannot pass because
the sequence no longer provokes anything."""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import subprocess
import sys

import pytest

from tests.e2e.harness.enforce import LISTENER
from tests.e2e.harness.host import ID_PREFIX, run_cmd
from tests.e2e.harness.network import add_bridge, add_netns, attach_to_bridge, bridge_mac

SUBNET = "10.251.{}.0/24"  # only inside this test's own namespaces
SECOND_ADDRESS = "203.0.113.7"  # the node's other address (a load balancer's), RFC 5737
PORT = 7001

DIAL = """
import socket, sys
s = socket.socket()
s.settimeout(3)
if sys.argv[3]:
    s.bind((sys.argv[3], 0))
try:
    s.connect((sys.argv[1], int(sys.argv[2])))
    print("ok")
except OSError as exc:
    print(type(exc).__name__)
"""


def _dial(netns: str, ip: str, source: str = "") -> str:
    argv = ["ip", "netns", "exec", netns, sys.executable, "-c", DIAL, ip, str(PORT), source]
    return subprocess.run(argv, capture_output=True, text=True, timeout=20).stdout.strip()


def _join(node: str, netns: str, port: str, mac: str) -> None:
    """`netns` joins the bridge on a port with the given MAC."""
    run_cmd(
        ["ip", "-n", node, "link", "add", port, "address", mac, "type", "veth", "peer", "name", "eth0", "netns", netns]
    )
    run_cmd(["ip", "-n", node, "link", "set", port, "master", "br0", "up"])


def _replay(fixed_mac: bool) -> tuple[str, str, str]:
    """The bridge's MAC before and after a low-MAC port joined, and the node's connect
    from the bridge's address after its first contact came from its second address."""
    tag = secrets.token_hex(2)
    node, first, pod, joiner = (f"{ID_PREFIX}{tag}-{n}" for n in ("node", "first", "pod", "join"))
    subnet = SUBNET.format(int(tag, 16) % 200 + 20)
    base = subnet.rsplit(".", 2)[0]
    bridge_ip, pod_ip = f"{base}.0.1", f"{base}.0.10"
    listener = None
    try:
        for ns in (node, first, pod, joiner):
            add_netns(ns)
        run_cmd(["ip", "-n", node, "link", "set", "lo", "up"])
        if fixed_mac:
            add_bridge(node, "br0")
        else:
            run_cmd(["ip", "-n", node, "link", "add", "br0", "type", "bridge"])
        run_cmd(["ip", "-n", node, "addr", "add", f"{bridge_ip}/24", "dev", "br0"])
        run_cmd(["ip", "-n", node, "link", "set", "br0", "up"])
        run_cmd(["ip", "-n", node, "addr", "add", f"{SECOND_ADDRESS}/32", "dev", "lo"])
        # A pod already there whose port has a low MAC: a default bridge takes it. (A frame to the
        # pod's own port's MAC would still reach the node: it is the other ports' that are lost.)
        _join(node, first, f"{ID_PREFIX}{tag}f", "00:00:00:00:00:10")
        attach_to_bridge(pod, node, "br0", f"{ID_PREFIX}{tag}p", pod_ip, 24)
        run_cmd(["ip", "-n", pod, "route", "add", f"{SECOND_ADDRESS}/32", "via", bridge_ip])
        listener = subprocess.Popen(
            ["ip", "netns", "exec", pod, sys.executable, "-c", LISTENER, pod_ip, str(PORT)],
            stdout=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        assert listener.stdout is not None and listener.stdout.readline().strip() == "ready"
        # The pod learns the bridge's MAC (a probe from the node).
        assert _dial(node, pod_ip) == "ok"
        before = bridge_mac(node, "br0")
        # A pod joins on a port with the lowest unicast MAC there is.
        _join(node, joiner, f"{ID_PREFIX}{tag}j", "00:00:00:00:00:01")
        after = bridge_mac(node, "br0")
        # The node's first contact after it comes from its second address (the load balancer's relay).
        _dial(node, pod_ip, SECOND_ADDRESS)
        return before, after, _dial(node, pod_ip)
    finally:
        if listener is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(listener.pid, signal.SIGKILL)
            listener.wait(timeout=10)
            if listener.stdout is not None:
                listener.stdout.close()
        for ns in (joiner, pod, first, node):
            run_cmd(["ip", "netns", "del", ns], check=False)


def test_node_bridge_keeps_its_mac_when_pods_join():
    before, after, probe = _replay(fixed_mac=True)
    assert after == before, f"the bridge's MAC changed from {before} to {after} when a pod joined"
    assert probe == "ok", f"the node's connect to the pod after a pod joined: {probe}"


def test_negative_control_a_bridge_without_its_own_mac_loses_the_pods_replies():
    before, after, probe = _replay(fixed_mac=False)
    if after == before:
        pytest.fail(f"the sequence no longer changes a default bridge's MAC ({before}): this test proves nothing")
    assert probe == "TimeoutError", f"expected the old bridge to time out, got {probe!r}"
