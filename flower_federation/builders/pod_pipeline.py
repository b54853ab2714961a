"""Every pod template of ours is finished by one function, `finish_pod`, in one order:

1. the base template (`pods.base_pod_template`): our containers and volumes, Pod Security
   `restricted`, no API token unless asked, no service links;
2. init containers and the restart policy a builder asks for (the SuperLink's state guard; a Job's);
3. the pool's GPUs, on the container that runs its ClientApps;
4. the chart-style pod settings (`pod_settings.apply_to_pod`): labels, annotations, node
   selector, tolerations, affinity presets, pull secrets, lifecycle;
5. the user's `podTemplate` (`pods.overlay_pod_template`), which wins over all of the above
   except our labels;
6. the user's volumes that no container of this pod mounts, dropped (`keep_used_volumes`);
7. for a DaemonSet with node keys, only the nodes that have a key.

The order is the contract: a user's podTemplate sees, and may override, everything we set;
the pruning sees the podTemplate's mounts. Each step returns a new template and leaves its
input alone."""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Optional

from flower_federation.builders import gpus, pod_settings, pods, resources
from flower_federation.config import PodSettings, Pool
from flower_federation.flower.layout import RESERVED_VOLUMES
from flower_federation.kube.objects import Container, PodTemplate, Volume
from flower_federation.plan import FederationPlan


@dataclass(frozen=True)
class PodRecipe:
    """What a builder says about one kind of pod; `finish_pod` does the rest."""

    labels: dict[str, str]
    containers: list[Container]
    volumes: list[Volume]
    service_account: str
    # The component's pods, for the anti-affinity (spreading) preset.
    selector: dict[str, str]
    # The component's own settings (None: the federation's top-level ones only).
    settings: Optional[PodSettings] = None
    api_token: bool = False
    init_containers: Sequence[dict[str, Any]] = ()
    restart_policy: Optional[str] = None
    # False where spreading means nothing: a DaemonSet (one pod per node already) or a Job.
    spread: bool = True
    # The container that takes the component's `lifecycle`.
    main_container: Optional[str] = None
    # The pool whose GPUs go to the named container.
    gpus_for: Optional[tuple[Pool, str]] = None
    # The user's podTemplate for this pod (a pool's or the SuperLink's).
    user_template: Optional[dict[str, Any]] = None
    # The user's volumes to prune when no container mounts them (None: keep every volume).
    user_volumes: Optional[list[Volume]] = None
    # The podTemplate reaches two kinds of pod (a pool's SuperNodes and its distributed SuperExecs).
    shared_template: bool = False
    # Only these nodes (by name): a DaemonSet SuperNode finds its key by its node's name.
    only_nodes: Optional[list[str]] = None


def finish_pod(plan: FederationPlan, recipe: PodRecipe) -> PodTemplate:
    # Not copied here: every step below copies what it changes (the pod settings step, always run, copies all).
    pod = pods.base_pod_template(
        recipe.labels,
        list(recipe.containers),
        list(recipe.volumes),
        service_account=recipe.service_account,
        api_token=recipe.api_token,
        security_overrides=plan.spec.pod_security_context,
    )
    if recipe.init_containers:
        pod["spec"]["initContainers"] = copy.deepcopy(list(recipe.init_containers))
    if recipe.restart_policy:
        pod["spec"]["restartPolicy"] = recipe.restart_policy
    if recipe.gpus_for is not None:
        pool, container = recipe.gpus_for
        pod = gpus.with_gpus(pod, pool, container)
    pod = pod_settings.apply_to_pod(
        plan, pod, recipe.settings, recipe.selector, spread=recipe.spread, main_container=recipe.main_container
    )
    pod = pods.overlay_pod_template(pod, recipe.user_template, resources.added_container(plan))
    if recipe.user_volumes is not None:
        pod = keep_used_volumes(pod, recipe.user_volumes, recipe.user_template, shared_template=recipe.shared_template)
    if recipe.only_nodes is not None:
        pod = only_nodes(pod, recipe.only_nodes)
    return pod


def used_volumes(pod: PodTemplate) -> set[Any]:
    """The volumes a pod's containers and init containers mount or use as a block device."""
    spec = pod["spec"]
    containers = [*spec.get("initContainers", []), *spec["containers"]]
    return {u.get("name") for c in containers for key in ("volumeMounts", "volumeDevices") for u in c.get(key, [])}


def claims_used_by(claims: list[dict[str, Any]], pod: PodTemplate) -> list[dict[str, Any]]:
    """The volumeClaimTemplates a pod's containers mount (a claim template per workload);
    podTemplate patches included, so the pod's mounts are its own."""
    used = used_volumes(pod)
    return [copy.deepcopy(c) for c in claims if c.get("metadata", {}).get("name") in used]


def keep_used_volumes(
    pod: PodTemplate, volumes: list[Volume], user_template: Optional[dict[str, Any]], *, shared_template: bool
) -> PodTemplate:
    """The pod without those of the user's `volumes` (a pool's, which reach its SuperNode pods and its distributed
    SuperExec pods alike) that none of its containers mounts or uses as a device, podTemplate patches included: a
    PVC a pod lists is attached to it, mounted or not, so a ReadWriteOnce claim only the SuperExec mounts would keep
    the SuperNode's pod from starting (multi-attach). Where the podTemplate reaches two kinds of pod
    (`shared_template`: distributed SuperExecs) the volumes it declares go the same way; where it patches one pod
    they are taken as given, as the rest of it. Our own volumes stay."""
    declared = {v.get("name") for v in ((user_template or {}).get("spec") or {}).get("volumes") or []}
    names = {v.get("name") for v in volumes}
    candidates = (names | declared) - RESERVED_VOLUMES if shared_template else names - declared
    unused = candidates - used_volumes(pod)
    volumes = [v for v in pod["spec"].get("volumes", []) if v.get("name") not in unused]
    return {**pod, "spec": {**pod["spec"], "volumes": volumes}}


def only_nodes(pod: PodTemplate, node_names: list[str]) -> PodTemplate:
    """A DaemonSet SuperNode finds its key by node name: keep it off nodes without one
    (it would crash-loop). ANDed into every required node selector term the user set."""
    out = copy.deepcopy(pod)
    match = {"key": "metadata.name", "operator": "In", "values": sorted(node_names)}
    affinity = out["spec"].setdefault("affinity", {})
    node_affinity = affinity.setdefault("nodeAffinity", {})
    required = node_affinity.setdefault("requiredDuringSchedulingIgnoredDuringExecution", {})
    terms = required.get("nodeSelectorTerms") or [{}]
    required["nodeSelectorTerms"] = [{**t, "matchFields": [*t.get("matchFields", []), match]} for t in terms]
    return out
