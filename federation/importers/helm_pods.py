"""`import helm`: the chart's security contexts and the settings of one container
(lifecycle, pull policy, env, the API token), as our pods take them."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..pods import container_security_context, pod_security_context
from .chart import POD, POOL, SUPEREXEC_CONTAINER, SUPERNODE_CONTAINER
from .common import get_path, parts_of

if TYPE_CHECKING:
    from .helm_steps import Steps

# Where Kubernetes takes each securityContext key: only in a container, only in a pod, or both.
CONTAINER_ONLY = {"allowPrivilegeEscalation", "capabilities", "privileged", "procMount", "readOnlyRootFilesystem"}
POD_ONLY = {"fsGroup", "fsGroupChangePolicy", "supplementalGroups", "supplementalGroupsPolicy", "sysctls"}
SHARED = "a pool's SuperNodes and their SuperExecs share"


def security_contexts(steps: Steps) -> None:
    v, s = steps.vals, steps.stack
    ours = {**pod_security_context(), **container_security_context()}
    for path in ("global.securityContext", "global.podSecurityContext"):
        given = v.get(path)
        if not isinstance(given, dict):
            s.refuse(path, "must be a mapping (a Kubernetes SecurityContext)", droppable=False)
            continue
        for key, value in given.items():
            if ours.get(key) == value:
                continue
            target = "podSecurityContext" if key in POD_ONLY else "securityContext"
            s.set((target, key), value, f"{path}.{key}")
    for component in ("supernode", "superexec"):
        path = f"{component}.podSecurityContext"
        given = v.get(path)
        if not steps.active(path) or not v.set_by_user(path):
            continue
        if not isinstance(given, dict):
            s.refuse(path, "must be a mapping (a Kubernetes SecurityContext)", droppable=False)
            continue
        for key, value in given.items():
            target = f"{POD}.spec.securityContext.{key}"
            current = get_path(s.config, parts_of(target))
            if key in CONTAINER_ONLY:
                _patch(steps, component, "securityContext", {key: value}, f"{path}.{key}")
            elif current is not None and current != value:  # the other component's, in one pod
                s.refuse(f"{path}.{key}", f"{value!r} here, {current!r} for the SuperNodes: {SHARED} {target}")
            else:
                s.set(target, value, f"{path}.{key}")


def _container(component: str) -> str:
    return SUPERNODE_CONTAINER if component == "supernode" else SUPEREXEC_CONTAINER


def _patch(steps: Steps, component: str, key: str, value: Any, source: str) -> None:
    """A setting of one managed container: a podTemplate patch of it. Distributed
    SuperExecs share the pool's podTemplate, where the patch would add the container to
    the other workload too."""
    if steps.distributed:
        steps.stack.refuse(
            source,
            "a per-container setting has no counterpart yet with distributed SuperExecs (they share the pool's "
            "podTemplate with the SuperNodes)",
        )
        return
    target = f"{_container(component)}.{key}"
    current = get_path(steps.stack.config, parts_of(target))
    merged = {**current, **value} if isinstance(current, dict) and isinstance(value, dict) else value
    steps.stack.set(target, merged, source)


def per_container(steps: Steps) -> None:
    v = steps.vals
    components = ["supernode"] + (["superexec"] if steps.process else [])
    for component in components:
        if v.set_by_user(f"{component}.lifecycle") and v.get(f"{component}.lifecycle"):
            _patch(steps, component, "lifecycle", v.get(f"{component}.lifecycle"), f"{component}.lifecycle")
        own = f"{component}.image.pullPolicy"
        policy = v.get(own) if v.set_by_user(own) else v.get("global.image.pullPolicy")
        if policy != "IfNotPresent":
            _patch(
                steps, component, "imagePullPolicy", policy, own if v.set_by_user(own) else "global.image.pullPolicy"
            )
    _env(steps, components)
    _automount(steps, components)


def _env(steps: Steps, components: list[str]) -> None:
    v, s = steps.vals, steps.stack
    lists = {c: v.get(f"{c}.env") for c in components if v.set_by_user(f"{c}.env")}
    if not lists:
        return
    if len(components) == 1 or v.get("supernode.env") == v.get("superexec.env"):
        s.set(f"{POOL}.env", v.get("supernode.env"), " and ".join(f"{c}.env" for c in lists))
        return
    for component, env in lists.items():
        if env:
            _patch(steps, component, "env", env, f"{component}.env")


def _automount(steps: Steps, components: list[str]) -> None:
    v, s = steps.vals, steps.stack
    paths = [f"{c}.automountServiceAccountToken" for c in components]
    if any(v.set_by_user(p) and v.get(p) is True for p in paths):
        s.set(f"{POD}.spec.automountServiceAccountToken", True, ", ".join(p for p in paths if v.set_by_user(p)))
