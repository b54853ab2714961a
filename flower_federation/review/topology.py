"""The federation's topology as a Mermaid flowchart: its clusters (subgraphs) and what runs in each (the SuperLink,
the registration Job, SuperExecs, each pool), the peers outside (cluster DNS, the API server, addresses), and who may
talk to whom.

Solid edges are the NetworkPolicies' own links (`builders/network_links.components_and_links`, the list
`builders/network.py` makes every policy from), never a second list: each link is an edge from its source to its
target, labelled with its ports and, for a Flower API, whether the plan puts TLS on it. A link from a group (every
SuperNode of the federation) is an edge from each pool it covers, as each pool's policy allows it. Dotted edges are
context, not policy: how traffic enters (an Ingress, a Gateway, a LoadBalancer Service, the external address), the
sites of a hub, the remote SuperLink a site dials, and `flwr` users of the Control API."""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from typing import Optional

from flower_federation.builders.network_links import ANYWHERE, DNS, Component, Link, Peer, components_and_links
from flower_federation.config.derived import AMBIENT_CLUSTER
from flower_federation.kube.naming import (
    NODE_REGISTRATION,
    POOL_LABEL,
    SUPEREXEC_CLIENTAPP,
    SUPEREXEC_SERVERAPP,
    SUPERLINK,
    SUPERNODE,
    TASK_EXECUTOR,
    TASK_ROLE_LABEL,
)
from flower_federation.plan import FederationPlan

COMPONENT_LABEL = "app.kubernetes.io/component"


@dataclass(frozen=True, order=True)
class Edge:
    """One allowed flow: source and target node ids, a port and its protocol."""

    source: str
    target: str
    port: int
    protocol: str


def node_id(prefix: str, name: str) -> str:
    """A valid Mermaid node id: letters, digits and underscores, never a keyword (`end`, `graph`, ...)."""
    return f"{prefix}_{re.sub(r'[^A-Za-z0-9_]', '_', name)}"


def component_id(c: Component) -> str:
    return node_id("c", c.key)


def peer_id(p: Peer) -> str:
    if p == ANYWHERE:
        return "p_anywhere"
    if p == DNS:
        return "p_dns"
    rendered = p.render() or {}
    cidr = (rendered.get("ipBlock") or {}).get("cidr")
    if cidr:
        return node_id("p_ip", cidr)
    digest = hashlib.sha256(json.dumps(rendered, sort_keys=True).encode()).hexdigest()[:10]
    return f"p_sel_{digest}"


def _ends(end: Component | Peer, components: list[Component]) -> list[str]:
    """The node ids of a link's end: a component, each member of a group, or a peer."""
    if isinstance(end, Peer):
        return [peer_id(end)]
    if end.group:
        return [component_id(c) for c in components if c is not end and end.covers(c)]
    return [component_id(end)]


def edges(plan: FederationPlan) -> set[Edge]:
    """Every flow the NetworkPolicies allow, from their links."""
    components, links = components_and_links(plan)
    return {
        Edge(s, t, port, proto)
        for link in links
        for s in _ends(link.source, components)
        for t in _ends(link.target, components)
        for port, proto in link.ports
    }


def _role(c: Component) -> str:
    return c.selector.get(COMPONENT_LABEL, "")


def tls(plan: FederationPlan, link: Link) -> Optional[bool]:
    """Whether the plan puts TLS on a link to a Flower API (None: not a Flower API)."""
    target, source = link.target, link.source
    if isinstance(target, Component) and _role(target) == SUPERLINK:
        return False if plan.ports.serverappio in {p for p, _ in link.ports} else plan.trust is not None
    if isinstance(target, Component) and _role(target) == SUPERNODE:
        return plan.runtime_trust is not None
    if isinstance(source, Component) and _role(source) == SUPERNODE and source.outside and target != DNS:
        endpoint = plan.remote.endpoint if plan.remote is not None else plan.external
        # Without the other stack's outputs (fromStack) the address is unknown: no mark rather than a guess.
        if endpoint is not None and {p for p, _ in link.ports} == {endpoint.port}:
            return plan.trust is not None
    return None


def _label(ports: list[tuple[int, str]], secure: Optional[bool], pairwise: bool) -> str:
    text = ", ".join(f"{p}/{proto}" for p, proto in sorted(set(ports)))
    if secure is not None:
        text += " · TLS" if secure else " · plaintext"
    return text + (" · replica k to k" if pairwise else "")


def _component_label(plan: FederationPlan, c: Component) -> str:
    role, pool = _role(c), c.selector.get(POOL_LABEL)
    if role == SUPERLINK:
        text = f"{'hub ' if plan.role == 'hub' else ''}SuperLink<br/>{c.key}"
        text += "<br/>with the Fleet-only proxy" if plan.fleet_proxy else ""
    elif role == SUPERNODE:
        p = next(p for p in plan.spec.supernodes.pools if p.name == pool)
        count = (
            "one per eligible node"
            if plan.spec.mode == "DaemonSet"
            else f"{p.replicas} replica{'' if p.replicas == 1 else 's'}"
        )
        text = f"pool {pool}: SuperNodes<br/>{c.key} ({plan.spec.mode}, {count})"
    elif role == SUPEREXEC_CLIENTAPP:
        text = f"pool {pool}: ClientApp SuperExecs<br/>{c.key}"
    elif role == SUPEREXEC_SERVERAPP:
        text = f"ServerApp SuperExec<br/>{c.key}"
    elif role == NODE_REGISTRATION:
        text = f"node registration Job<br/>{c.key}"
    elif role == TASK_EXECUTOR:
        text = f"{c.selector.get(TASK_ROLE_LABEL)} task pods (Kubernetes executor)<br/>{c.key}"
    else:
        text = c.key
    return text + ("" if c.settings.enabled else "<br/>(its NetworkPolicy is off)")


def _peer_label(p: Peer) -> str:
    if p == ANYWHERE:
        return "anywhere"
    if p == DNS:
        return "cluster DNS (kube-system/kube-dns)"
    rendered = p.render() or {}
    cidr = (rendered.get("ipBlock") or {}).get("cidr")
    if cidr == "0.0.0.0/0":
        return "0.0.0.0/0 (the Kubernetes API server, any IPv4 address)"
    if cidr:
        return f"addresses in {cidr}"
    parts = []
    for key, value in sorted(rendered.items()):
        labels = ",".join(f"{k}={v}" for k, v in sorted(value["matchLabels"].items()))
        parts.append(f"{key.removesuffix('Selector')}s labelled {labels}")
    return " and ".join(parts)


def _cluster_of(plan: FederationPlan, c: Component) -> str:
    if c.pool is not None:
        pool = next(p for p in plan.spec.supernodes.pools if p.name == c.pool)
        return plan.pool_cluster(pool) or AMBIENT_CLUSTER
    return plan.superlink_cluster or AMBIENT_CLUSTER


def _text(value: str) -> str:
    """Text safe inside a quoted Mermaid label."""
    return value.replace('"', "'")


def mermaid(plan: FederationPlan) -> str:
    """The topology of the planned federation, as a Mermaid flowchart (deterministic: sorted)."""
    components, links = components_and_links(plan)
    nodes = {component_id(c): c for c in components if not c.group}
    out = ["flowchart LR"]
    clusters = sorted({_cluster_of(plan, c) for c in nodes.values()}, key=lambda k: (k != AMBIENT_CLUSTER, k))
    for cluster in clusters:
        out.append(f'  subgraph {node_id("cluster", cluster)}["cluster {_text(cluster)}: namespace {plan.namespace}"]')
        for nid in sorted(n for n, c in nodes.items() if _cluster_of(plan, c) == cluster):
            out.append(f'    {nid}["{_text(_component_label(plan, nodes[nid]))}"]')
        out.append("  end")
    peers = {peer_id(e): e for link in links for e in (link.source, link.target) if isinstance(e, Peer)}
    out += [f'  {pid}(["{_text(_peer_label(peers[pid]))}"])' for pid in sorted(peers)]
    solid: dict[tuple[str, str, str], list[tuple[int, str]]] = {}
    pairwise: set[tuple[str, str]] = set()
    for link in links:
        secure = tls(plan, link)
        for s in _ends(link.source, components):
            for t in _ends(link.target, components):
                tag = "" if secure is None else ("tls" if secure else "plain")
                solid.setdefault((s, t, tag), []).extend(link.ports)
                if link.pairwise:
                    pairwise.add((s, t))
    for (s, t, tag), ports in sorted(solid.items()):
        secure = None if not tag else tag == "tls"
        out.append(f'  {s} -->|"{_label(ports, secure, (s, t) in pairwise)}"| {t}')
    out += _context(plan, components)
    return "\n".join(out) + "\n"


def _context(plan: FederationPlan, components: list[Component]) -> list[str]:
    """Dotted: how traffic enters and who is outside (not NetworkPolicy links)."""
    out: list[str] = []
    sl = plan.spec.superlink
    superlink = next((component_id(c) for c in components if _role(c) == SUPERLINK), None)
    secure = " · TLS" if plan.trust is not None else " · plaintext"
    if superlink is not None:
        entry = superlink
        via = None
        if sl.ingress is not None:
            via = ("x_ingress", f"Ingress {sl.ingress.host}", f"Fleet API{secure}")
        elif sl.gateway is not None:
            via = ("x_gateway", f"Gateway API route {sl.gateway.hostname}", f"Fleet API{secure}")
        elif sl.service.type in ("LoadBalancer", "NodePort"):
            via = ("x_service", f"{sl.service.type} Service {plan.names.superlink}", f"Fleet API{secure}")
        if via is not None and plan.exposed:
            out += [f'  {via[0]}[/"{_text(via[1])}"/]', f'  {via[0]} -.->|"{via[2]}"| {superlink}']
            entry = via[0]
        if plan.external is not None:
            out += [f'  x_external(["external address {_text(str(plan.external))}"])', f"  x_external -.-> {entry}"]
            entry = "x_external"
        for site in sorted(plan.spec.sites, key=lambda s: s.name):
            sid = node_id("site", site.name)
            out += [f'  {sid}{{{{"site {_text(site.name)}"}}}}', f'  {sid} -.->|"Fleet API{secure}"| {entry}']
        control = "LoadBalancer Service" if sl.control_service.type == "LoadBalancer" else "kubectl port-forward"
        out += [
            '  x_flwr(["flwr CLI users (Control API)"])',
            f'  x_flwr -.->|"{plan.ports.control}/TCP via {control}{secure}"| {superlink}',
        ]
    for c in components:
        pool = next((p for p in plan.spec.supernodes.pools if p.name == c.pool), None)
        if _role(c) != SUPERNODE or pool is None or not plan.dials_from_outside(pool):
            continue
        if plan.remote is not None:
            out.append(f'  x_remote(["hub SuperLink at {_text(str(plan.remote.endpoint))}"])')
            out.append(f'  {component_id(c)} -.->|"Fleet API{secure}"| x_remote')
        elif plan.external is not None:
            out.append(f'  {component_id(c)} -.->|"Fleet API{secure}"| x_external')
    return sorted(set(out), key=out.index)
