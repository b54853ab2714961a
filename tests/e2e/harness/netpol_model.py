"""The compiled form of NetworkPolicies (netpol.py compiles them, netpol_nft.py writes them
as nftables rules): an endpoint (a pod as the policies see it), and per pod and direction
whether it is isolated and what allows traffic there (peer address blocks, port ranges).
Apart so that the compiler and the nftables writer share it without importing each other."""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Optional

INGRESS, EGRESS = "Ingress", "Egress"
PROTOCOLS = ("TCP", "UDP", "SCTP")
TABLE = "k8s-netpol"

Net = ipaddress.IPv4Network | ipaddress.IPv6Network


class PolicyError(ValueError):
    """A NetworkPolicy the compiler cannot read (the API server would have refused it)."""


@dataclass(frozen=True)
class Endpoint:
    """A pod (or a client standing for one) as the policies see it."""

    name: str
    netns: str
    namespace: str
    ip: str
    labels: Mapping[str, str] = field(default_factory=dict)
    # Named container ports: name -> (port, protocol).
    ports: Mapping[str, tuple[int, str]] = field(default_factory=dict)


@dataclass(frozen=True)
class PortRange:
    protocol: str  # TCP, UDP, SCTP
    first: Optional[int] = None  # None: every port of the protocol
    last: Optional[int] = None

    def covers(self, protocol: str, port: int) -> bool:
        if protocol != self.protocol:
            return False
        return self.first is None or self.first <= port <= (self.last or self.first)


@dataclass(frozen=True)
class Block:
    """An address range minus exceptions (a pod is a /32 without exceptions)."""

    net: Net
    excepts: tuple[Net, ...] = ()

    def covers(self, ip: str) -> bool:
        addr = ipaddress.ip_address(ip)
        return addr in self.net and not any(addr in e for e in self.excepts)


@dataclass(frozen=True)
class Allow:
    """One allowing rule of an isolated direction: peer addresses (None: any) and ports
    (None: any port of any protocol)."""

    peers: Optional[tuple[Block, ...]]
    ports: Optional[tuple[PortRange, ...]]
    why: str  # policy name and rule index, as a comment in the ruleset

    def covers(self, ip: str, protocol: str, port: int) -> bool:
        peer_ok = self.peers is None or any(b.covers(ip) for b in self.peers)
        port_ok = self.ports is None or any(p.covers(protocol, port) for p in self.ports)
        return peer_ok and port_ok


@dataclass(frozen=True)
class Direction:
    isolated: bool
    allows: tuple[Allow, ...] = ()
    policies: tuple[str, ...] = ()  # the policies that isolate it

    def admits(self, ip: str, protocol: str, port: int) -> bool:
        return not self.isolated or any(a.covers(ip, protocol, port) for a in self.allows)


@dataclass(frozen=True)
class PodRules:
    endpoint: Endpoint
    ingress: Direction
    egress: Direction
