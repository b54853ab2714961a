"""Negative controls of the NetworkPolicies the harness enforces (harness/enforce.py):
real TCP connection attempts, each from a pod's network namespace. A pod outside the
allowed set must time out (its packets dropped by the policy, as a CNI drops them) and
the same attempt from an allowed pod must connect, so no negative is vacuous (the port
listens, the route exists). The "intruder" is an extra pod in the federation's
namespace with labels no policy names; the outside world is a host outside the cluster
(harness/enforce.py, OUTSIDE_IP) listening on 443, which the intruder reaches; cluster
DNS a stand-in kube-dns pod listening on TCP 53 (lookups themselves use hosts files).

Each check runs every source's attempts at once, with a short connect timeout: a few
seconds per federation, inside the scenarios' existing lanes.
"""

from __future__ import annotations

import time
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

from tests.e2e.harness.enforce import DNS_PORT

if TYPE_CHECKING:
    from tests.e2e.harness import Cluster, Pod
    from tests.e2e.stack import Federation

CONNECT_TIMEOUT = 2.0  # a dropped SYN: the connect times out; an allowed one answers in ms
INTRUDER_LABELS = {"app.kubernetes.io/name": "intruder"}
OUTSIDE_PORT = 443
OK, DROPPED = "ok", "timeout"


def intruder(cluster: Cluster, namespace: str) -> str:
    """The intruder's network namespace (made once per cluster)."""
    for netns, _ in cluster.clients:
        if netns.endswith("-intruder"):
            return netns
    return cluster.add_client("intruder", namespace, INTRUDER_LABELS)


def superlink_ports(pod: Pod) -> dict[str, int]:
    """The SuperLink's Fleet, Control and ServerAppIo/Runtime ports, from its container's
    named ports (gRPC era: fleet, control, serverappio; HTTP era: one `api` port)."""
    named = {p["name"]: int(p["containerPort"]) for p in pod.spec["containers"][0].get("ports", [])}
    api = named.get("api")
    return {
        "Fleet": named.get("fleet", api or 0),
        "Control": named.get("control", api or 0),
        "ServerAppIo/Runtime": named.get("serverappio", api or 0),
    }


def clientappio_port(pod: Pod) -> int:
    """A SuperNode's ClientAppIo/Runtime port as rendered (`supernodes.pools[].containerPorts`
    may move it): its named port, else the port of its bind argument (subprocess and
    sidecar isolation bind it to 127.0.0.1, without a named port)."""
    container = pod.spec["containers"][0]
    for p in container.get("ports", []):
        if p.get("name") == "clientappio":
            return int(p["containerPort"])
    args = container.get("args", [])
    for flag in ("--port", "--clientappio-api-address"):
        if flag in args:
            return int(args[args.index(flag) + 1].rsplit(":", 1)[-1])
    raise AssertionError(f"{pod.name}: no ClientAppIo/Runtime port in its spec")


def expect(cluster: Cluster, attempts: list[tuple[str, str, str, int, str]]) -> str:
    """Make every attempt (what, source netns, host, port, expected outcome) and assert
    each outcome; every mismatch is reported at once, with the rulesets involved.
    Returns a one-line summary for the scenario's phases."""
    assert cluster.netpol is not None, "NetworkPolicies are not enforced on this cluster"
    by_source: dict[str, list[tuple[str, int]]] = defaultdict(list)
    for _, source, host, port, _ in attempts:
        by_source[source].append((host, port))
    start = time.monotonic()
    netpol = cluster.netpol
    with ThreadPoolExecutor(len(by_source)) as pool:  # every source at once: one timeout in all
        futures = {
            source: pool.submit(netpol.reach, source, targets, CONNECT_TIMEOUT) for source, targets in by_source.items()
        }
        seen = {source: f.result() for source, f in futures.items()}
    wrong = []
    for what, source, host, port, wanted in attempts:
        got = seen[source][f"{host}:{port}"]
        if got != wanted:
            wrong.append(f"{what}: {source} -> {host}:{port} gave {got!r}, expected {wanted!r}")
    if wrong:
        involved = sorted({source for _, source, _, _, _ in attempts})
        raise AssertionError(
            "NetworkPolicy controls failed:\n  "
            + "\n  ".join(wrong)
            + "\n"
            + "\n".join(f"--- {ns} ---\n{cluster.netpol.describe(ns)}" for ns in involved)
        )
    denied = sum(w == DROPPED for *_, w in attempts)
    return f"netpol controls ({denied} dropped, {len(attempts) - denied} allowed) {time.monotonic() - start:.1f}s"


def superlink_and_egress(fed: Federation) -> str:
    """The SuperLink's Fleet and Control ports, a SuperNode's Runtime/ClientAppIo port
    and egress to the outside world: refused to pods outside the allowed set, open to
    the pods that need them."""
    c, ns = fed.cluster, fed.rendered.raw["namespace"]
    assert c.netpol is not None, "NetworkPolicies are not enforced on this cluster"
    bad = intruder(c, ns)
    superlink, node = fed.superlink, fed.supernodes_pods[0]
    ports = superlink_ports(superlink)
    appio = clientappio_port(node)
    outside = c.netpol.outside(OUTSIDE_PORT)
    dns = c.netpol.cluster_dns()
    attempts = [
        ("intruder to the Fleet API", bad, superlink.ip, ports["Fleet"], DROPPED),
        ("intruder to the Control API", bad, superlink.ip, ports["Control"], DROPPED),
        ("SuperNode to the Fleet API", node.netns, superlink.ip, ports["Fleet"], OK),
        ("flwr CLI to the Control API", fed.cli_netns, superlink.ip, ports["Control"], OK),
        # Subprocess/sidecar: the API binds 127.0.0.1; unfiltered, the SYN would be
        # refused (RST): a timeout shows the policy dropped it first.
        ("intruder to a SuperNode's ClientAppIo/Runtime API", bad, node.ip, appio, DROPPED),
        ("SuperNode to the outside world", node.netns, outside, OUTSIDE_PORT, DROPPED),
        ("SuperLink to the outside world", superlink.netns, outside, OUTSIDE_PORT, DROPPED),
        ("intruder (egress open) to the outside world", bad, outside, OUTSIDE_PORT, OK),
        # Name lookups use hosts files: these show the DNS rules select the DNS pod.
        ("SuperNode to cluster DNS", node.netns, dns, DNS_PORT, OK),
        ("SuperLink to cluster DNS", superlink.netns, dns, DNS_PORT, OK),
    ]
    if ports["Control"] != ports["Fleet"]:  # gRPC era: least privilege per port
        attempts.append(("SuperNode to the Control API", node.netns, superlink.ip, ports["Control"], DROPPED))
    return expect(c, attempts)


def distributed_apis(fed: Federation) -> str:
    """Distributed SuperExecs: a SuperNode's ClientAppIo/Runtime API (bound to every
    address here) and the SuperLink's ServerAppIo/Runtime API are open to their
    SuperExecs only."""
    c, ns = fed.cluster, fed.rendered.raw["namespace"]
    assert c.netpol is not None, "NetworkPolicies are not enforced on this cluster"
    bad = intruder(c, ns)
    superlink, node = fed.superlink, fed.supernodes_pods[0]
    outside = c.netpol.outside(OUTSIDE_PORT)
    superexec = next(p for p in fed.pods("superexec-clientapp") if p.ordinal == node.ordinal)
    (serverapp,) = fed.pods("superexec-serverapp")
    appio = superlink_ports(superlink)["ServerAppIo/Runtime"]
    node_api = clientappio_port(node)
    return expect(
        c,
        [
            ("intruder to a SuperNode's ClientAppIo/Runtime API", bad, node.ip, node_api, DROPPED),
            ("its SuperExec to the SuperNode's ClientAppIo/Runtime API", superexec.netns, node.ip, node_api, OK),
            ("the SuperLink to a SuperNode's ClientAppIo/Runtime API", superlink.netns, node.ip, node_api, DROPPED),
            ("intruder to the SuperLink's ServerAppIo/Runtime API", bad, superlink.ip, appio, DROPPED),
            ("ServerApp SuperExec to the ServerAppIo/Runtime API", serverapp.netns, superlink.ip, appio, OK),
            ("ClientApp SuperExec to the outside world", superexec.netns, outside, OUTSIDE_PORT, DROPPED),
            ("intruder (egress open) to the outside world", bad, outside, OUTSIDE_PORT, OK),
            ("ClientApp SuperExec to cluster DNS", superexec.netns, c.netpol.cluster_dns(), DNS_PORT, OK),
        ],
    )
