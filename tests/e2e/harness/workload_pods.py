"""The pods a workload's controller makes, not started: a StatefulSet's ordinals with their
labels, hostname and subdomain; a Deployment's replicas; a DaemonSet's pods on the emulated
nodes its node affinity admits. A Job's pods are the Job controller's (jobs.py). Apart from
pods.py, which is the kubelet's side of a pod (its sandbox, volumes, containers and their
launch)."""

from __future__ import annotations

import hashlib
import json
import secrets
from typing import TYPE_CHECKING, Any

from tests.e2e.harness.host import HarnessError
from tests.e2e.harness.pods import NODES, Pod

if TYPE_CHECKING:
    from tests.e2e.harness.cluster import Cluster


def pods_for(cluster: Cluster, w: dict[str, Any]) -> list[Pod]:
    """The pods a workload's controller makes (not started)."""
    name = w["metadata"]["name"]
    labels = dict(w["spec"]["template"]["metadata"].get("labels", {}))
    revision = hashlib.sha256(json.dumps(w["spec"]["template"], sort_keys=True).encode()).hexdigest()[:10]
    if w["kind"] == "StatefulSet":
        out = []
        for k in range(w["spec"].get("replicas", 1)):
            pod_name = f"{name}-{k}"
            pl = {
                **labels,
                "apps.kubernetes.io/pod-index": str(k),
                "statefulset.kubernetes.io/pod-name": pod_name,
                "controller-revision-hash": f"{name}-{revision}",
            }
            out.append(Pod(cluster, w, pod_name, pl, NODES[k % len(NODES)], k, pod_name, w["spec"].get("serviceName")))
        return out
    if w["kind"] == "Job":
        raise HarnessError(f"Job {name}: its pods are the Job controller's (jobs.py), made one at a time")
    if w["kind"] == "Deployment":
        return [
            Pod(
                cluster,
                w,
                f"{name}-{revision}-{secrets.token_hex(3)[:5]}",
                {**labels, "pod-template-hash": revision},
                NODES[k % len(NODES)],
                None,
                None,
                None,
            )
            for k in range(w["spec"].get("replicas", 1))
        ]
    return [
        Pod(cluster, w, f"{name}-{secrets.token_hex(3)[:5]}", dict(labels), node, None, None, None)
        for node in NODES
        if _schedulable(w["spec"]["template"]["spec"], node)
    ]


def _schedulable(pod_spec: dict[str, Any], node: str) -> bool:
    """Required node affinity (metadata.name / kubernetes.io/hostname In) and nodeSelector
    on kubernetes.io/hostname, for the emulated nodes (whose hostname label is their name)."""
    host = pod_spec.get("nodeSelector", {}).get("kubernetes.io/hostname")
    if host is not None and host != node:
        return False
    terms = (
        pod_spec.get("affinity", {})
        .get("nodeAffinity", {})
        .get("requiredDuringSchedulingIgnoredDuringExecution", {})
        .get("nodeSelectorTerms")
    )
    if not terms:
        return True
    for term in terms:
        exprs = term.get("matchFields", []) + term.get("matchExpressions", [])
        if all(_matches(e, node) for e in exprs):
            return True
    return False


def _matches(expr: dict[str, Any], node: str) -> bool:
    if expr["key"] not in ("metadata.name", "kubernetes.io/hostname"):
        raise HarnessError(f"node affinity on {expr['key']} is not emulated")
    if expr["operator"] == "In":
        return node in expr["values"]
    if expr["operator"] == "NotIn":
        return node not in expr["values"]
    raise HarnessError(f"node affinity operator {expr['operator']} is not emulated")
