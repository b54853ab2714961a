"""The nftables side of the NetworkPolicy emulation: one pod's compiled rules (netpol.py)
as the script that replaces its table atomically, an ingress and an egress chain that,
when isolated, accept established traffic, loopback, the node (ingress) and what the
policies allow, and drop (counted) the rest. Pure, as the compiler."""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from typing import Optional

from tests.e2e.harness.netpol_model import EGRESS, INGRESS, PROTOCOLS, TABLE, Block, Direction, PodRules, PortRange

_NFT_PROTO = {"TCP": "tcp", "UDP": "udp", "SCTP": "sctp"}


def _addr_match(direction: str, blocks: Optional[tuple[Block, ...]]) -> list[str]:
    """nft expressions for the peer side, one per address family and exception set."""
    if blocks is None:
        return [""]
    key = "saddr" if direction == INGRESS else "daddr"
    out = []
    for version, fam in ((4, "ip"), (6, "ip6")):
        # nft refuses overlapping elements in a set: merge them first.
        plain = list(ipaddress.collapse_addresses(b.net for b in blocks if b.net.version == version and not b.excepts))
        if plain:
            items = ", ".join(str(n.network_address) if n.num_addresses == 1 else str(n) for n in plain)
            out.append(f"{fam} {key} {{ {items} }} ")
        for b in blocks:
            if b.net.version == version and b.excepts:
                excepts = ", ".join(str(e) for e in b.excepts if e.version == version)
                out.append(f"{fam} {key} {b.net} " + (f"{fam} {key} != {{ {excepts} }} " if excepts else ""))
    return out


def _port_matches(ports: Optional[tuple[PortRange, ...]]) -> list[str]:
    if ports is None:
        return [""]
    out = []
    for protocol in PROTOCOLS:
        mine = [p for p in ports if p.protocol == protocol]
        if not mine:
            continue
        proto = _NFT_PROTO[protocol]
        if any(p.first is None for p in mine):
            out.append(f"meta l4proto {proto} ")
            continue
        items = [
            f"{a}-{b}" if b != a else f"{a}" for a, b in _merge((p.first or 0, p.last or p.first or 0) for p in mine)
        ]
        out.append(f"{proto} dport {{ {', '.join(items)} }} ")
    return out


def _merge(ranges: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    """Port ranges merged where they overlap or touch (nft refuses overlapping elements)."""
    out: list[tuple[int, int]] = []
    for first, last in sorted(ranges):
        if out and first <= out[-1][1] + 1:
            out[-1] = (out[-1][0], max(out[-1][1], last))
        else:
            out.append((first, last))
    return out


def _chain(name: str, hook: str, d: Direction, policy_type: str, exempt: Iterable[str]) -> list[str]:
    lo = "iif" if policy_type == INGRESS else "oif"
    lines = [
        f"  chain {name} {{",
        f"    type filter hook {hook} priority filter; policy accept;",
    ]
    if d.isolated:
        lines += [
            f"    # isolated by {', '.join(d.policies)}",
            "    ct state established,related accept",
            f'    {lo} "lo" accept',
        ]
        if policy_type == INGRESS:
            lines += [f'    ip saddr {ip} accept comment "the node (kubelet probes)"' for ip in exempt]
        for a in d.allows:
            for addr in _addr_match(policy_type, a.peers):
                for port in _port_matches(a.ports):
                    lines.append(f'    {addr}{port}accept comment "{a.why}"')
        # Counted: a probe kill's diagnostics (probes.py) show whether this chain dropped.
        lines.append("    counter drop")
    lines.append("  }")
    return lines


def ruleset(rules: PodRules, exempt: Iterable[str] = ()) -> str:
    """The nftables script that replaces this pod's table atomically (`nft -f -`):
    `exempt` are source addresses always admitted (the node)."""
    exempt = list(exempt)
    lines = [
        f"table inet {TABLE}",
        f"delete table inet {TABLE}",
        f"# {rules.endpoint.namespace}/{rules.endpoint.name} {rules.endpoint.ip}",
        f"table inet {TABLE} {{",
        *_chain("ingress", "input", rules.ingress, INGRESS, exempt),
        *_chain("egress", "output", rules.egress, EGRESS, exempt),
        "}",
    ]
    return "\n".join(lines) + "\n"
