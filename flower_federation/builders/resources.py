"""Every container's ResourceRequirements: requests and a memory limit by default, sized
per role, so that no pod of ours can starve or OOM its node's neighbours.

A container's resources are three layers merged key by key, later layers winning:

1. its preset: the component's own `...ResourcesPreset`, else the top-level
   `resourcesPreset`, else its role's default (`default_preset`); `none` is no preset;
2. `defaultResources`;
3. the component's own `resources` (task pods: `executor.config.resources`; containers a
   `podTemplate` adds: their own `resources`).

A request that ends up above its limit meets the side set by the later layer
(`pods.merge_resources`): a `resources.requests.memory` above the preset's limit raises
the limit to it; a `resources.limits.memory` below the preset's request lowers the request.

The presets are Bitnami's (`common.resources.preset` in bitnami/charts' common chart,
`_resources.tpl`): the same requests and the same memory limits (1.5 × the request up to
`large`), written as the API server writes quantities back (`1Gi`, not `1024Mi`; `1500m`,
not `1.5`), so the live objects never differ from ours. Two keys are deliberately left out:

- CPU limits. CPU is compressible: under contention the kernel shares it in proportion to
  requests, so a request already protects the neighbours. A limit only adds CFS
  throttling, which stretches training rounds and can make a SuperNode miss its heartbeats
  while CPUs sit idle. `limits.cpu` in `resources` or `defaultResources` opts in.
- `ephemeral-storage`. Flower installs each app (FAB) and, with runtime dependency
  installation, its dependencies under emptyDirs; a fixed limit (Bitnami's 1-2Gi) would
  evict a SuperNode whose app pulls in PyTorch. Set it in `defaultResources` or a
  component's `resources` where the apps' size is known.

Memory, by contrast, is not compressible: without a limit one pod that leaks or loads too
big a model makes the kernel OOM-kill whatever it picks on the node. Every role therefore
gets a memory limit by default, sized from real Flower (1.41 running the e2e numpy app;
proportional set size of each container's whole process tree at its peak): a SuperLink
~100 MiB idle, ~300 MiB while its ServerApp runs in subprocess isolation; a SuperNode
~90 MiB, ~280 MiB while a ClientApp trains in it; a SuperExec running an app ~180 MiB;
the node-registration Job's Python with Flower's CLI modules ~100 MiB.
"""

from __future__ import annotations

import copy
import typing
from typing import Any, Optional

from flower_federation.builders import pods
from flower_federation.config import Pool, ResourcesPreset
from flower_federation.plan import FederationPlan

# name -> (requests.cpu, requests.memory, limits.memory)
_SIZES: dict[str, tuple[str, str, str]] = {
    "nano": ("100m", "128Mi", "192Mi"),
    "micro": ("250m", "256Mi", "384Mi"),
    "small": ("500m", "512Mi", "768Mi"),
    "medium": ("500m", "1Gi", "1536Mi"),
    "large": ("1", "2Gi", "3Gi"),
    "xlarge": ("1500m", "4Gi", "6Gi"),
    "2xlarge": ("1500m", "4Gi", "12Gi"),
}
PRESETS: dict[str, dict[str, Any]] = {
    "none": {},
    **{
        name: {"requests": {"cpu": cpu, "memory": memory}, "limits": {"memory": limit}}
        for name, (cpu, memory, limit) in _SIZES.items()
    },
}
assert set(PRESETS) == set(typing.get_args(ResourcesPreset)), "the config's preset names and the table differ"

# Roles: what a container does decides how much it needs.
SUPERLINK = "superlink"
SUPERNODE = "supernode"
SERVERAPP_SUPEREXEC = "superexec-serverapp"
CLIENTAPP_SUPEREXEC = "superexec-clientapp"
TASK_POD = "task-pod"  # a ServerApp/ClientApp pod of Flower's Kubernetes executor
REGISTRATION = "node-registration"  # the Job's one container
ADDED = "added"  # a container or init container a `podTemplate` adds
FLEET_PROXY = "fleet-proxy"  # the SuperLink's Fleet-only proxy
# monitoring's exporter: Python with Flower's client modules loaded, about 92 MiB resident (Flower 1.42.0,
# measured 2026-11-28): `nano`'s 192Mi limit leaves it twice that.
EXPORTER = "federation-exporter"


def default_preset(plan: FederationPlan, role: str) -> str:
    """The preset a role gets when neither its component nor the top level names one.
    Whatever runs ServerApps or ClientApps (loads a model, trains) gets `small`; a process
    that only relays messages or launches pods gets `micro`; a helper container `nano`."""
    return role_preset(role, process_isolation=plan.process_isolation, kubernetes_executor=plan.kubernetes_executor)


def role_preset(role: str, *, process_isolation: bool, kubernetes_executor: bool) -> str:
    """`default_preset` without a plan (what `import helm` tells a chart user)."""
    if role == SUPERNODE:  # in subprocess isolation the SuperNode's children train
        return "micro" if process_isolation else "small"
    if role in (SERVERAPP_SUPEREXEC, CLIENTAPP_SUPEREXEC):
        return "micro" if kubernetes_executor else "small"
    if role == REGISTRATION:
        return "micro"
    if role in (ADDED, FLEET_PROXY, EXPORTER):
        return "nano"
    # The SuperLink: a singleton, so generous sizing costs little; its memory grows with
    # nodes, runs and messages in flight, and in subprocess isolation it runs ServerApps.
    return "small"


def preset(name: str) -> dict[str, Any]:
    return copy.deepcopy(PRESETS[name])


def resolve(
    plan: FederationPlan, role: str, own_preset: Optional[str] = None, own: Optional[dict[str, Any]] = None
) -> dict[str, Any]:
    name = own_preset or plan.spec.resources_preset or default_preset(plan, role)
    return pods.merge_resources(pods.merge_resources(preset(name), plan.spec.default_resources), own)


def superlink(plan: FederationPlan) -> dict[str, Any]:
    sl = plan.spec.superlink
    return resolve(plan, SUPERLINK, sl.resources_preset, sl.resources)


def serverapp_superexec(plan: FederationPlan) -> dict[str, Any]:
    sl = plan.spec.superlink
    return resolve(plan, SERVERAPP_SUPEREXEC, sl.superexec_resources_preset, sl.superexec_resources)


def supernode(plan: FederationPlan, pool: Pool) -> dict[str, Any]:
    return resolve(plan, SUPERNODE, pool.supernode_resources_preset, pool.supernode_resources)


def clientapp_superexec(plan: FederationPlan, pool: Pool) -> dict[str, Any]:
    return resolve(plan, CLIENTAPP_SUPEREXEC, pool.superexec_resources_preset, pool.superexec_resources)


def task_pods(plan: FederationPlan) -> dict[str, Any]:
    executor = plan.spec.executor
    own = executor.config.get("resources")
    return resolve(plan, TASK_POD, executor.resources_preset, own if isinstance(own, dict) else None)


def registration_job(plan: FederationPlan) -> dict[str, Any]:
    return resolve(plan, REGISTRATION)


def added_container(plan: FederationPlan) -> dict[str, Any]:
    """Under a podTemplate's own `resources` for a container or init container it adds."""
    return resolve(plan, ADDED)


def fleet_proxy(plan: FederationPlan) -> dict[str, Any]:
    proxy = plan.spec.superlink.fleet_proxy
    return resolve(plan, FLEET_PROXY, proxy.resources_preset, proxy.resources)


def exporter(plan: FederationPlan) -> dict[str, Any]:
    m = plan.spec.monitoring
    return resolve(plan, EXPORTER, m.resources_preset, m.resources)
