"""A component's `superexec` settings (the Helm chart's `superexec.*`): only where SuperExecs run, pod settings only
where they have pods of their own, what the Kubernetes executor needs, health ports that do not clash in a shared
pod, and the names of the extra StatefulSets that more SuperExecs per SuperNode make."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from flower_federation.config.errors import Problem, problem
from flower_federation.flower.dialects import HEALTH_PORT, SUPERNODE_APPIO_PORT
from flower_federation.kube.naming import STATEFULSET_NAME_MAX, Names
from flower_federation.rules.fragments import list_fragment, reserved_env
from flower_federation.rules.images import pull_secrets
from flower_federation.rules.labels import our_labels
from flower_federation.rules.raw import At, Pools, Raw, effective_name, get, superexecs_of
from flower_federation.rules.workloads import container_settings, pod_metadata, pod_settings

# What a sidecar SuperExec has no use for: it runs in the SuperLink's or SuperNode's pod and workload.
POD_KEYS = (
    "replicas",
    "labels",
    "annotations",
    "podLabels",
    "podAnnotations",
    "nodeSelector",
    "tolerations",
    "affinity",
    "imagePullSecrets",
    "serviceAccount",
    "automountServiceAccountToken",
    "podSecurityContext",
    "updateStrategy",
    "networkPolicy",
)
NO_API_KEYS = ("allowExternal", "ingressPodMatchLabels", "ingressNSMatchLabels", "ingressNSPodMatchLabels")


def _set(key: str, value: Any) -> bool:
    """A key given a value that changes something (an empty map or list, or one replica, changes nothing)."""
    if key == "replicas" and value == 1 and not isinstance(value, bool):
        return False
    return value is not None and not (isinstance(value, (dict, list)) and not value)


def _sections(raw: Raw, pools: Pools) -> Iterator[tuple[At, Raw, str, str]]:
    """(path, settings, owner, workload kind) of every `superexec` section."""
    superexec = get(raw, "superlink", "superexec")
    if isinstance(superexec, dict):
        yield ("superlink", "superexec"), superexec, "the SuperLink's pod (superlink.*)", "Deployment"
    for i, pool in pools:
        superexec = pool.get("superexec")
        if isinstance(superexec, dict):
            yield (
                ("supernodes", "pools", i, "superexec"),
                superexec,
                "the pool's pods (the pool's own keys)",
                "StatefulSet",
            )


def superexecs(raw: Raw, pools: Pools, isolation: str, stack: str) -> Iterator[Problem]:
    executor = get(raw, "executor", "type") == "kubernetes"
    distributed = superexecs_of(raw).distributed
    for at, settings, owner, kind in _sections(raw, pools):
        if isolation != "process":
            if any(_set(k, v) for k, v in settings.items()):
                yield problem(
                    at, "there is no SuperExec in subprocess isolation: remove it, or set isolationMode: process"
                )
            continue
        if not distributed:
            for key in POD_KEYS:
                if _set(key, settings.get(key)):
                    yield problem(
                        at + (key,),
                        f"a sidecar SuperExec runs in {owner}: set it there, or use superexecPlacement: distributed",
                    )
        yield from _executor(at, settings, executor)
        for key in NO_API_KEYS:
            if _set(key, get(settings, "networkPolicy", key)):
                yield problem(at + ("networkPolicy", key), "a SuperExec serves no API: there is nothing to open")
        yield from pod_metadata(at, settings, our_labels(raw, stack, at))
        yield from pod_settings(at, settings, kind)
        yield from pull_secrets([(at, settings)])
        yield from container_settings(at, settings)
        yield from list_fragment(at + ("env",), settings.get("env"), "envvar-v1.json")
        yield from reserved_env(at + ("env",), settings.get("env"))
        if not distributed:
            yield from _sidecar_health_port(raw, at, settings)
    yield from _replica_names(raw, pools, stack)


def _executor(at: At, settings: Raw, executor: bool) -> Iterator[Problem]:
    if not executor:
        return
    replicas = settings.get("replicas")
    if isinstance(replicas, int) and not isinstance(replicas, bool) and replicas > 1:
        yield problem(
            at + ("replicas",),
            "with the Kubernetes executor one SuperExec starts as many task pods as executor.config allows "
            "(active-pod-budget): more SuperExecs would only compete for them",
        )
    for key in (("automountServiceAccountToken",), ("serviceAccount", "automountServiceAccountToken")):
        if get(settings, *key) is False:
            yield problem(at + key, "the Kubernetes executor starts pods through the API: it needs the token")


def _sidecar_health_port(raw: Raw, at: At, settings: Raw) -> Iterator[Problem]:
    port = get(settings, "containerPorts", "health")
    if not isinstance(port, int):
        return
    taken = {HEALTH_PORT: "the main container's health server"}
    if at[0] == "supernodes":
        pool = get(raw, *at[:-1])
        own = get(pool, "containerPorts", "health")
        taken = {own if isinstance(own, int) else HEALTH_PORT: "the SuperNode's health server"}
        appio = get(pool, "containerPorts", "clientAppIo")
        taken[appio if isinstance(appio, int) else SUPERNODE_APPIO_PORT] = "the SuperNode's ClientAppIo API"
    if port in taken:
        yield problem(at + ("containerPorts", "health"), f"port {port} is {taken[port]}'s in this shared pod")


def _replica_names(raw: Raw, pools: Pools, stack: str) -> Iterator[Problem]:
    """More SuperExecs per SuperNode add StatefulSets `N-superexec-P-<c>`: within a StatefulSet name's limit, and
    never another pool's."""
    if not superexecs_of(raw).distributed:
        return
    names = Names(effective_name(raw, stack))
    owners: dict[str, int] = {}
    extra: list[tuple[int, str]] = []
    for i, pool in pools:
        pname = pool.get("name")
        if not isinstance(pname, str):
            continue
        owners[names.pool_superexec(pname)] = i
        replicas = get(pool, "superexec", "replicas")
        if isinstance(replicas, int) and not isinstance(replicas, bool):
            extra += [(i, names.pool_superexec_replica(pname, c)) for c in range(1, replicas)]
    too_long: dict[int, str] = {}  # the longest name per pool is enough to report
    for i, name in extra:
        if len(name) > STATEFULSET_NAME_MAX:
            too_long[i] = name
    for i, name in too_long.items():
        yield problem(
            ("supernodes", "pools", i, "superexec", "replicas"),
            f"object name '{name}' has {len(name)} characters; a StatefulSet name may have at most "
            f"{STATEFULSET_NAME_MAX} (Kubernetes adds a revision hash to it)",
        )
    for i, name in extra:
        at = ("supernodes", "pools", i, "superexec", "replicas")
        if name in owners and owners[name] != i:
            yield problem(
                at, f"StatefulSet '{name}' would take the name of supernodes.pools[{owners[name]}]'s SuperExecs"
            )
