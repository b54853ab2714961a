"""What an imported stack file says about resources. Every figure is what the render of the stack as written gives
a container, computed by the render's own functions (builders/resources.py) over the written config, never
restated: so the header cannot say 384Mi where a request in the values raised the limit to 512Mi, or state
presets that --preserve-behaviour turned off. Also a note wherever ClientApps train on a GPU under a memory limit
the source never set (a preset's), at which a GPU ClientApp is likely OOM-killed."""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any, Optional

from flower_federation.builders import manifests
from flower_federation.config.errors import ConfigError, format_path
from flower_federation.flower.layout import FLEET_PROXY_CONTAINER
from flower_federation.importers.common import Stack, get_path
from flower_federation.kube.naming import POOL_LABEL, SUPEREXEC_CLIENTAPP, SUPEREXEC_SERVERAPP, SUPERLINK, SUPERNODE
from flower_federation.plan import FederationPlan, load_plan

WORKLOADS = ("StatefulSet", "Deployment", "DaemonSet")


@dataclass(frozen=True)
class Container:
    """One container of the render: where it is, what it gets, and where the config sets its own resources."""

    name: str
    workload: str
    resources: dict[str, Any]
    own: tuple[str | int, ...]  # its own resources' config path (under the top-level `defaultResources`)
    clientapps: bool = False  # ClientApps run (and train) in it


def describe(given: dict[str, Any]) -> str:
    """`requests cpu 250m and memory 256Mi, limits memory 384Mi`, or `no requests or limits`."""
    parts = []
    for section in ("requests", "limits"):
        amounts = given.get(section) or {}
        if amounts:
            parts.append(f"{section} " + " and ".join(f"{name} {amounts[name]}" for name in sorted(amounts)))
    return ", ".join(parts) or "no requests or limits"


def rendered(stack: Stack) -> Optional[list[Container]]:
    """The containers of the stack as written; None if it does not validate (then it is refused, and nothing is
    printed). Supplied node keys are secret config set after the import: they size nothing, so generated ones stand
    in."""
    config = copy.deepcopy(stack.config)
    node_auth = config.get("nodeAuth")
    if isinstance(node_auth, dict) and node_auth.get("keySource") == "config":
        node_auth["keySource"] = "generate"
    try:
        return containers(load_plan(config, stack.stack))
    except (ConfigError, manifests.InvariantError):
        return None


def containers(plan: FederationPlan) -> list[Container]:
    """Every container of the render's workloads, with the resources the render gives it: read off the objects
    the render builds (builders/manifests.py), GPUs and all."""
    pools = {pool.name: i for i, pool in enumerate(plan.spec.supernodes.pools)}
    out = []
    for obj in manifests.render(plan).objects():
        if obj["kind"] not in WORKLOADS:
            continue
        pool = pools.get(obj["metadata"]["labels"].get(POOL_LABEL, ""))
        for c in obj["spec"]["template"]["spec"]["containers"]:
            own = _own(c["name"], pool)
            runs = c["name"] == (SUPEREXEC_CLIENTAPP if plan.process_isolation else SUPERNODE)
            out.append(Container(c["name"], obj["metadata"]["name"], c.get("resources", {}), own, runs))
    return out


def _own(container: str, pool: Optional[int]) -> tuple[str | int, ...]:
    if pool is not None and container in (SUPERNODE, SUPEREXEC_CLIENTAPP):
        key = "supernodeResources" if container == SUPERNODE else "superexecResources"
        return ("supernodes", "pools", pool, key)
    return {
        SUPERLINK: ("superlink", "resources"),
        SUPEREXEC_SERVERAPP: ("superlink", "superexecResources"),
        FLEET_PROXY_CONTAINER: ("superlink", "fleetProxy", "resources"),
    }.get(container, ())


def stated(c: Container) -> str:
    return f"container {c.name} of {c.workload}: {describe(c.resources)}"


def difference(
    stack: Stack, found: Optional[list[Container]], *, source: str, does: str, own: str, lift: str, preserved: str
) -> Optional[str]:
    """The 'Resources' item of the differences from the source (`found`: `rendered(stack)`, `source`: "the chart",
    `does`: what it does with resources, `own`: whose resources the stack copied, "the values'"); None when the
    stack does not validate (it is refused then)."""
    if found is None:
        return None
    listed = "; ".join(stated(c) for c in found)
    presets = stack.config.get("resourcesPreset") != "none"
    here = (
        f"here each container starts from its role's preset (docs/what-it-creates.md, 'Resources'), {own} own "
        "resources over it"
        if presets
        else f"here, with resourcesPreset: none, each container gets only {own} own resources"
    )
    text = f"Resources: {source} {does}; {here}. The render of this stack gives {listed}. "
    if presets:
        text += (
            "A ClientApp that needs more memory is OOM-killed at its container's limit: raise it with "
            f"{lift}, taken key by key over the preset, or run without presets as {source} does. "
        )
    return text + preserved


def gpu_notes(stack: Stack, found: Optional[list[Container]], source: str) -> list[str]:
    """Where ClientApps train on a GPU under a memory limit from a preset (not set in the config): likely too low
    (`found`: `rendered(stack)`)."""
    notes = []
    for c in found or []:
        limit = (c.resources.get("limits") or {}).get("memory")
        gpus = [name for name in {**c.resources.get("limits", {}), **c.resources.get("requests", {})} if "gpu" in name]
        if not (c.clientapps and gpus and limit) or _sets_memory_limit(stack.config, c.own):
            continue
        notes.append(
            f"The ClientApps of {c.workload} train on a GPU ({', '.join(gpus)}) in container {c.name}, "
            f"whose memory limit of {limit} comes from its role's preset, not from {source}: a GPU ClientApp (the "
            "CUDA runtime, the model, its batches) is likely OOM-killed at that. Set "
            f"{format_path(c.own, root='').lstrip('.')}.limits.memory to what it needs (or resourcesPreset: none)."
        )
    return notes


def _sets_memory_limit(config: dict[str, Any], own: tuple[Any, ...]) -> bool:
    """Whether the config sets the container's memory limit: its own resources, or `defaultResources`."""
    given = [get_path(config, own), config.get("defaultResources")]
    return any(isinstance(r, dict) and isinstance(r.get("limits"), dict) and "memory" in r["limits"] for r in given)
