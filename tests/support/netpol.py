"""NetworkPolicy semantics, evaluated generically from selectors and pod labels: which
pods a selector or peer picks, and whether the policies of a namespace allow a flow."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from flower_federation.builders.network_links import POD_NAME_LABEL
from tests.support.manifests import by_kind, workloads
from tests.support.security_matrix import executor_configs


def selects(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    assert set(selector) <= {"matchLabels"}, selector  # ours never use matchExpressions
    return all(labels.get(k) == v for k, v in selector.get("matchLabels", {}).items())


def pod_groups(objects: Iterable[dict[str, Any]], per_pod: bool = False) -> dict[str, dict[str, str]]:
    """Every set of pods of the federation, by id -> its labels: workload pod templates
    (`per_pod`: a StatefulSet's pods one by one, with the pod-name label its controller
    adds, which pair policies select by) and the task pods the Kubernetes executor labels
    from its config."""
    objects = list(objects)
    groups = {}
    for w in workloads(objects):
        labels, name = w["spec"]["template"]["metadata"]["labels"], w["metadata"]["name"]
        if per_pod and w["kind"] == "StatefulSet":
            for k in range(w["spec"].get("replicas") or 0):
                groups[f"StatefulSet/{name}-{k}"] = {**labels, POD_NAME_LABEL: f"{name}-{k}"}
        else:
            groups[f"{w['kind']}/{name}"] = labels
    groups.update({f"tasks/{name}": cfg["labels"] for name, cfg in executor_configs(objects).items()})
    return groups


def peer_matches(peer: dict[str, Any], labels: dict[str, str], namespace_name: str) -> bool:
    """Does a NetworkPolicyPeer select pods with `labels` in our namespace?"""
    if "ipBlock" in peer:
        return False
    if "namespaceSelector" in peer:
        ns_labels = {"kubernetes.io/metadata.name": namespace_name}
        if not selects(peer["namespaceSelector"], ns_labels):
            return False
    return selects(peer.get("podSelector", {}), labels)


def port_matches(rule: dict[str, Any], port: int, protocol: str) -> bool:
    ports = rule.get("ports")
    return not ports or any(p.get("port") == port and p.get("protocol", "TCP") == protocol for p in ports)


def rule_allows(
    rule: dict[str, Any], direction: str, labels: dict[str, str], port: int, protocol: str, ns: str
) -> bool:
    peers = rule.get(direction)
    peer_ok = not peers or any(peer_matches(p, labels, ns) for p in peers)
    return peer_ok and port_matches(rule, port, protocol)


def allowed(
    objects: Iterable[dict[str, Any]],
    pod_labels: dict[str, str],
    kind: str,
    peer_labels: dict[str, str],
    port: int,
    protocol: str,
    ns: str,
) -> bool:
    """Do the policies selecting `pod_labels` allow this flow (`kind` ingress/egress)?"""
    policy_type = kind.capitalize()
    relevant = [
        p
        for p in by_kind(objects, "NetworkPolicy")
        if selects(p["spec"]["podSelector"], pod_labels) and policy_type in p["spec"]["policyTypes"]
    ]
    if not relevant:
        return True
    direction = "from" if kind == "ingress" else "to"
    return any(
        rule_allows(r, direction, peer_labels, port, protocol, ns) for p in relevant for r in p["spec"].get(kind, [])
    )
