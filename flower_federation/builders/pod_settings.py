"""The Helm chart's per-workload settings applied to what the builders made: labels and annotations of a workload
and its pods, node selector, tolerations and affinity (the top-level defaults, the chart's `global.*`, merged with a
component's own as the chart merges them). Applied before a component's `podTemplate`, which still wins."""

from __future__ import annotations

import copy
from typing import Any, Optional

from flower_federation.config import AffinityPresets, PodSettings
from flower_federation.kube.objects import PodTemplate
from flower_federation.plan import FederationPlan

HOSTNAME_TOPOLOGY = "kubernetes.io/hostname"
NO_SETTINGS = PodSettings()


def preset_affinity(presets: AffinityPresets, selector: dict[str, str], spread: bool) -> dict[str, Any]:
    """The chart's presets as a Kubernetes Affinity: pod anti-affinity among the pods `selector` selects (one
    workload's), node affinity to nodes matching the expressions."""
    out: dict[str, Any] = {}
    if spread and presets.pod_anti_affinity != "none":
        term = {"labelSelector": {"matchLabels": dict(selector)}, "topologyKey": HOSTNAME_TOPOLOGY}
        if presets.pod_anti_affinity == "hard":
            out["podAntiAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": [term]}
        else:
            out["podAntiAffinity"] = {
                "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 1, "podAffinityTerm": term}]
            }
    node = presets.node_affinity
    if node.type != "none" and node.match_expressions:
        expressions = copy.deepcopy(node.match_expressions)
        if node.type == "hard":
            out["nodeAffinity"] = {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [{"matchExpressions": expressions}]
                }
            }
        else:
            out["nodeAffinity"] = {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {"weight": 1, "preference": {"matchExpressions": expressions}}
                ]
            }
    return out


def tolerations(plan: FederationPlan, own: list[Any]) -> list[Any]:
    """The federation's tolerations, then the component's (an exact repeat is left out)."""
    out: list[Any] = []
    for t in [*plan.spec.tolerations, *own]:
        if t not in out:
            out.append(copy.deepcopy(t))
    return out


def apply_to_pod(
    plan: FederationPlan,
    pod: PodTemplate,
    settings: Optional[PodSettings],
    selector: dict[str, str],
    *,
    spread: bool = True,
    main_container: Optional[str] = None,
) -> PodTemplate:
    """`pod` with the federation's and the component's settings (`settings` None: the federation's only).
    `spread`: the pod anti-affinity preset applies (not to a DaemonSet, one pod per node already, nor a Job).
    `main_container` takes the component's `lifecycle`."""
    own = settings or NO_SETTINGS
    out = copy.deepcopy(pod)
    meta = out["metadata"]
    # Ours (the builder's) win: they hold the selector labels.
    meta["labels"] = {**plan.spec.pod_labels, **own.labels, **own.pod_labels, **meta["labels"]}
    if own.pod_annotations:
        meta["annotations"] = {**own.pod_annotations, **meta.get("annotations", {})}
    spec = out["spec"]
    node_selector = {**plan.spec.node_selector, **own.node_selector}
    if node_selector:
        spec["nodeSelector"] = node_selector
    merged_tolerations = tolerations(plan, own.tolerations)
    if merged_tolerations:
        spec["tolerations"] = merged_tolerations
    affinity = {**preset_affinity(plan.spec.affinity, selector, spread), **copy.deepcopy(own.affinity)}
    if affinity:
        spec["affinity"] = affinity
    pull_secrets = plan.image_pull_secrets(own.image_pull_secrets)
    if pull_secrets:
        spec["imagePullSecrets"] = pull_secrets
    if own.automount_service_account_token is not None:
        spec["automountServiceAccountToken"] = own.automount_service_account_token
    if own.pod_security_context:
        spec["securityContext"] = {**spec["securityContext"], **copy.deepcopy(own.pod_security_context)}
    if own.lifecycle and main_container:
        for c in spec["containers"]:
            if c["name"] == main_container:
                c["lifecycle"] = copy.deepcopy(own.lifecycle)
    return out
