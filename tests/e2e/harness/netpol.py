"""NetworkPolicies compiled into nftables rules, as a CNI would enforce them: the
NetworkPolicy objects of a cluster plus its pods (namespace, labels, address, named
container ports) and namespaces (labels) in, one nftables ruleset per pod network
namespace out. Pure (no root, no I/O): enforce.py loads the rulesets; tests check the
compiler by itself (tests/test_e2e_netpol_compiler.py). This module selects and compiles;
the compiled form is netpol_model.py's, the rulesets netpol_nft.py's.

Semantics (networking.k8s.io/v1, as the Kubernetes documentation states them):

- A policy selects pods of its own namespace (`podSelector`: matchLabels and
  matchExpressions In/NotIn/Exists/DoesNotExist; `{}` is every pod). A pod is isolated
  for ingress (egress) when some policy selecting it has `Ingress` (`Egress`) in its
  `policyTypes` (default: Ingress, plus Egress when the policy has egress rules). A
  direction no policy isolates allows everything.
- An isolated direction allows what at least one rule of one selecting policy allows
  (rules add up; there is no deny rule); everything else is dropped (a connect times
  out, as with the common CNIs). A connection needs the source's egress and the
  destination's ingress; replies of an allowed connection pass (connection tracking).
- Peers: `podSelector` (pods of the policy's namespace), `namespaceSelector` (every pod
  of the namespaces it selects, by their labels incl. `kubernetes.io/metadata.name`),
  both (those pods of those namespaces), `ipBlock` (`cidr` minus `except`). A rule
  without peers allows any address; without ports, any port and protocol.
- Ports: a number, a range (`endPort`), or a name: resolved against the pod's named
  container ports, the selected pod's for ingress and each destination pod's for egress
  (a name no pod has allows nothing). Protocol TCP unless UDP or SCTP is named.
- Traffic within a pod (loopback) is never filtered, and traffic from the node (the
  kubelet's probes, host processes) to its pods is always admitted, as Calico and
  Cilium do.

Limits of the emulation (also in CONTRIBUTING.md, "End to end"):

- `ipBlock` matches by address, pod addresses included (Calico's behaviour; the
  documentation leaves it to the implementation, and Cilium selects pods only by
  identity).
- Addresses are IPv4; IPv6 `ipBlock`s compile to `ip6` rules, but no pod has an IPv6
  address. ICMP other than errors of allowed connections is dropped in an isolated
  direction (also implementation-defined).
- Cluster DNS is a hosts file (harness/dns.py): name lookups send no packet, so the
  policies' DNS rules (port 53 to kube-dns in kube-system) are exercised only by the
  negative controls' connections to a stand-in kube-dns pod (enforce.cluster_dns, TCP;
  UDP is compiled the same way but not probed).
- Services have no virtual IPs here (their names resolve to the backing pod), so traffic
  is judged against the pod's address and port, as Kubernetes judges it after DNAT.
  A LoadBalancer (harness/wan.py) relays from its own external address: the backing
  pod's ingress sees that address, as with a load balancer that does not keep the
  client's address (externalTrafficPolicy: Cluster SNATs to a node's address instead).
- Rules follow objects and pods as they change (Cluster.apply/update, new pods,
  clients), not Pod label changes after creation (the harness never relabels a pod).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Mapping
from typing import Any, Optional

from tests.e2e.harness.netpol_model import (
    EGRESS,
    INGRESS,
    PROTOCOLS,
    Allow,
    Block,
    Direction,
    Endpoint,
    PodRules,
    PolicyError,
    PortRange,
)
from tests.e2e.harness.netpol_nft import ruleset  # noqa: F401  (tests/test_e2e_netpol_compiler.py imports it from here)

# --- selectors ---------------------------------------------------------------------------


def selector_matches(selector: Optional[Mapping[str, Any]], labels: Mapping[str, str]) -> bool:
    """A LabelSelector (matchLabels and matchExpressions ANDed; `{}` selects everything)."""
    if selector is None:
        return True
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expr in selector.get("matchExpressions") or []:
        key, op, values = expr["key"], expr["operator"], expr.get("values") or []
        if op == "In" and labels.get(key) not in values:
            return False
        if op == "NotIn" and key in labels and labels[key] in values:
            return False
        if op == "Exists" and key not in labels:
            return False
        if op == "DoesNotExist" and key in labels:
            return False
        if op not in ("In", "NotIn", "Exists", "DoesNotExist"):
            raise PolicyError(f"selector operator {op!r}")
    return True


def policy_types(policy: Mapping[str, Any]) -> list[str]:
    spec = policy.get("spec") or {}
    if spec.get("policyTypes"):
        return list(spec["policyTypes"])
    return [INGRESS, EGRESS] if spec.get("egress") else [INGRESS]


def namespace_labels(namespaces: Mapping[str, Mapping[str, str]], name: str) -> dict[str, str]:
    """A namespace's labels, with the one the API server always sets."""
    return {**namespaces.get(name, {}), "kubernetes.io/metadata.name": name}


# --- compiling ---------------------------------------------------------------------------


class _Compiler:
    def __init__(
        self,
        policies: Iterable[Mapping[str, Any]],
        endpoints: Iterable[Endpoint],
        namespaces: Mapping[str, Mapping[str, str]],
    ):
        self.policies = [p for p in policies if p.get("kind", "NetworkPolicy") == "NetworkPolicy"]
        self.endpoints = list(endpoints)
        self.namespaces = namespaces

    def peer_endpoints(self, peer: Mapping[str, Any], policy_ns: str) -> list[Endpoint]:
        if "namespaceSelector" in peer:
            in_ns = [
                e
                for e in self.endpoints
                if selector_matches(peer["namespaceSelector"], namespace_labels(self.namespaces, e.namespace))
            ]
        else:
            in_ns = [e for e in self.endpoints if e.namespace == policy_ns]
        return [e for e in in_ns if selector_matches(peer.get("podSelector"), e.labels)]

    @staticmethod
    def block(ip_block: Mapping[str, Any]) -> Block:
        try:
            net = ipaddress.ip_network(ip_block["cidr"], strict=False)
            excepts = tuple(ipaddress.ip_network(e, strict=False) for e in ip_block.get("except") or [])
        except (KeyError, ValueError) as exc:
            raise PolicyError(f"ipBlock {dict(ip_block)}: {exc}") from None
        return Block(net, excepts)

    @staticmethod
    def port_ranges(ports: Optional[list[Mapping[str, Any]]], named: Mapping[str, tuple[int, str]]) -> Optional[tuple]:
        """The rule's ports against one pod's named ports; None: every port."""
        if not ports:
            return None
        out = []
        for p in ports:
            protocol = p.get("protocol", "TCP")
            if protocol not in PROTOCOLS:
                raise PolicyError(f"protocol {protocol!r}")
            port = p.get("port")
            if port is None:
                out.append(PortRange(protocol))
            elif isinstance(port, int) or str(port).isdigit():
                out.append(PortRange(protocol, int(port), int(p.get("endPort") or port)))
            elif named.get(str(port), (None, None))[1] == protocol:
                out.append(PortRange(protocol, named[str(port)][0], named[str(port)][0]))
            # else: a name this pod does not have (with that protocol) matches nothing
        return tuple(out)

    @staticmethod
    def named(rule: Mapping[str, Any]) -> bool:
        return any(
            p.get("port") is not None and not (isinstance(p["port"], int) or str(p["port"]).isdigit())
            for p in rule.get("ports") or []
        )

    def rule_allows(self, policy: Mapping[str, Any], index: int, kind: str, target: Endpoint) -> list[Allow]:
        rule = policy["spec"][kind][index]
        why = f"{policy['metadata']['name']} {kind}[{index}]"
        policy_ns = policy["metadata"].get("namespace", "default")
        peers = rule.get("from" if kind == "ingress" else "to")
        pods: list[Endpoint] = []
        blocks: list[Block] = []
        for peer in peers or []:
            if "ipBlock" in peer:
                blocks.append(self.block(peer["ipBlock"]))
            else:
                pods += self.peer_endpoints(peer, policy_ns)
        if kind == "ingress" or not self.named(rule):
            # Ingress names resolve against the selected pod itself; numbers need no pod.
            ports = self.port_ranges(rule.get("ports"), target.ports)
            if ports == ():
                return []
            if not peers:
                return [Allow(None, ports, why)]
            members = tuple(sorted({Block(ipaddress.ip_network(e.ip)) for e in pods}, key=_block_key)) + tuple(blocks)
            return [Allow(members, ports, why)] if members else []
        # Egress with named ports: resolved against each destination pod.
        out = []
        candidates = list(self.endpoints) if not peers else pods
        candidates += [e for e in self.endpoints if any(b.covers(e.ip) for b in blocks)]
        unique = {e.netns: e for e in candidates}.values()
        for dest in sorted(unique, key=lambda e: ipaddress.ip_address(e.ip)):
            ports = self.port_ranges(rule.get("ports"), dest.ports)
            if ports:
                out.append(Allow((Block(ipaddress.ip_network(dest.ip)),), ports, f"{why} -> {dest.name}"))
        # Numbered ports of the same rule still apply to non-pod addresses of the blocks.
        numbered = [p for p in rule.get("ports") or [] if not self.named({"ports": [p]})]
        if numbered and (blocks or not peers):
            ports = self.port_ranges(numbered, {})
            out.append(Allow(tuple(blocks) if peers else None, ports, why))
        return out

    def direction(self, target: Endpoint, policy_type: str) -> Direction:
        kind = policy_type.lower()
        selecting = [
            p
            for p in self.policies
            if p["metadata"].get("namespace", "default") == target.namespace
            and selector_matches((p.get("spec") or {}).get("podSelector") or {}, target.labels)
            and policy_type in policy_types(p)
        ]
        if not selecting:
            return Direction(False)
        allows: list[Allow] = []
        for p in sorted(selecting, key=lambda p: p["metadata"]["name"]):
            for i in range(len(p["spec"].get(kind) or [])):
                allows += self.rule_allows(p, i, kind, target)
        return Direction(True, tuple(allows), tuple(sorted(p["metadata"]["name"] for p in selecting)))


def _block_key(b: Block) -> tuple[int, int, int]:
    return (b.net.version, int(b.net.network_address), b.net.prefixlen)


def compile_policies(
    policies: Iterable[Mapping[str, Any]],
    endpoints: Iterable[Endpoint],
    namespaces: Optional[Mapping[str, Mapping[str, str]]] = None,
) -> dict[str, PodRules]:
    """Every endpoint's rules, by its network namespace."""
    c = _Compiler(policies, endpoints, namespaces or {})
    return {e.netns: PodRules(e, c.direction(e, INGRESS), c.direction(e, EGRESS)) for e in c.endpoints}


def flow_allowed(rules: Mapping[str, PodRules], src: Endpoint, dst_ip: str, protocol: str, port: int) -> bool:
    """Would a connection from `src` to `dst_ip:port` be allowed (the source's egress and,
    when the destination is one of the endpoints, its ingress)? A pod's traffic to itself
    stays on loopback, which no policy filters."""
    if dst_ip == src.ip:
        return True
    if not rules[src.netns].egress.admits(dst_ip, protocol, port):
        return False
    dst = next((r for r in rules.values() if r.endpoint.ip == dst_ip), None)
    return dst is None or dst.ingress.admits(src.ip, protocol, port)
