"""NetworkPolicies from one list of relations.

Every allowed flow is written once as a `Link` ("A may talk to B on port P"); each
component's policy takes its ingress rules from the links that end at it and its egress
rules from the links that start at it, so the two sides can never disagree. A policy
selects a component's pods for both Ingress and Egress, which makes everything not
linked a default deny.

A plaintext hop Flower cannot protect (the gRPC-era ClientAppIo API, with distributed
SuperExecs) is confined further, to its pod pairs: SuperNode k takes it only from
SuperExec k (replica k of each of the pool's SuperExec StatefulSets, one per
`superexec.replicas`) and each SuperExec k sends it only to SuperNode k, through an Ingress
policy per SuperNode and an Egress policy per SuperExec that select the pods by the
`statefulset.kubernetes.io/pod-name` label the StatefulSet controller puts on each pod.
"""

from __future__ import annotations

from typing import Any, Optional

from flower_federation.builders.network_links import POD_NAME_LABEL, Component, Link, Peer, components_and_links
from flower_federation.config import Pool
from flower_federation.kube.naming import POOL_LABEL
from flower_federation.kube.objects import Manifest
from flower_federation.plan import FederationPlan


def _peer(end: Component | Peer) -> Optional[dict[str, Any]]:
    if isinstance(end, Component):
        return {"podSelector": {"matchLabels": end.selector}}
    return end.render()


def _rule(direction: str, other: Component | Peer, ports: tuple[tuple[int, str], ...]) -> dict[str, Any]:
    rule: dict[str, Any] = {}
    peer = _peer(other)
    if peer is not None:
        rule[direction] = [peer]
    rule["ports"] = [{"port": p, "protocol": proto} for p, proto in ports]
    return rule


def _ends_at(end: Component | Peer, c: Component) -> bool:
    return isinstance(end, Component) and end.covers(c)


def policies(plan: FederationPlan) -> list[tuple[Optional[str], Manifest]]:
    """Every NetworkPolicy, each with the pool whose component registers it (None: the
    SuperLink's). Computed once for the whole federation."""
    components, links = components_and_links(plan)
    out = []
    for c in components:
        if not c.settings.enabled:
            continue
        ingress = [
            _rule("from", link.source, link.ports) for link in links if _ends_at(link.target, c) and not link.pairwise
        ]
        ingress += list(c.settings.extra_ingress or [])
        egress: list[dict[str, Any]]
        if c.settings.allow_external_egress:
            egress = [{}]
        else:
            egress = [
                _rule("to", link.target, link.ports) for link in links if _ends_at(link.source, c) and not link.pairwise
            ]
            egress += list(c.settings.extra_egress or [])
        selector = dict(c.labels)
        policy: Manifest = {
            "apiVersion": "networking.k8s.io/v1",
            "kind": "NetworkPolicy",
            "metadata": plan.meta(c.key, selector["app.kubernetes.io/component"], selector.get(POOL_LABEL)),
            "spec": {
                "podSelector": {"matchLabels": c.selector},
                "policyTypes": ["Ingress", "Egress"],
                "ingress": ingress,
                "egress": egress,
            },
        }
        out.append((c.pool, policy))
        for link in links:
            if link.pairwise and c in (link.source, link.target):
                out += [(c.pool, p) for p in _pair_policies(plan, link, "Ingress" if link.target == c else "Egress")]
    return out


def _pair_policies(plan: FederationPlan, link: Link, side: str) -> list[Manifest]:
    """Per replica k: `Ingress` to replica k of the target (a pool's SuperNodes) from
    replica k of each source StatefulSet (its SuperExecs: one per `superexec.replicas`)
    alone, or `Egress` from each source's replica k to target k alone."""
    source, target = link.source, link.target
    assert isinstance(source, Component) and isinstance(target, Component)
    pool = next(p for p in plan.spec.supernodes.pools if p.name == target.pool)
    ports = [{"port": p, "protocol": proto} for p, proto in link.ports]
    sources = _statefulsets(plan, source, pool)
    out: list[Manifest] = []
    for k in range(pool.replicas or 0):
        if side == "Ingress":
            peers = [_pod_peer(source, f"{s}-{k}") for s in sources]
            out.append(_pair_policy(plan, target, f"{target.key}-{k}", pool.name, side, peers, ports))
        else:
            peer = _pod_peer(target, f"{target.key}-{k}")
            out += [_pair_policy(plan, source, f"{s}-{k}", pool.name, side, [peer], ports) for s in sources]
    return out


def _statefulsets(plan: FederationPlan, c: Component, pool: Pool) -> list[str]:
    """The StatefulSets of a component's pods: a pool's SuperExecs may be several."""
    if c.key == plan.names.pool_superexec(pool.name):
        return [plan.names.pool_superexec_replica(pool.name, r) for r in range(pool.superexec.replicas)]
    return [c.key]


def _pod_peer(c: Component, pod: str) -> dict[str, Any]:
    return {"podSelector": {"matchLabels": {**c.selector, POD_NAME_LABEL: pod}}}


def _pair_policy(
    plan: FederationPlan,
    own: Component,
    pod: str,
    pool: str,
    side: str,
    peers: list[dict[str, Any]],
    ports: list[dict[str, Any]],
) -> Manifest:
    """The policy of one pod (`pod`, of `own`'s pods), named after it."""
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": plan.meta(f"{pod}-pair", own.selector["app.kubernetes.io/component"], pool),
        "spec": {
            "podSelector": _pod_peer(own, pod)["podSelector"],
            "policyTypes": [side],
            side.lower(): [{"from" if side == "Ingress" else "to": peers, "ports": ports}],
        },
    }
