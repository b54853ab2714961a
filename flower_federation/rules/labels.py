"""The labels flower-federation sets itself (selector labels, and those that say which federation, component,
pool and tool an object belongs to), kept its own wherever config sets labels that reach our objects and pods:
ours are applied over a user's, so a user's label of one of our keys to another value would be kept in the stack
and silently lost in the render (or, in the Kubernetes executor's task pods, where the user's win, it would take
them out of their NetworkPolicies). The same value as ours is accepted."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Optional

from flower_federation.config.errors import Problem, problem
from flower_federation.kube.naming import (
    POOL_LABEL,
    SUPEREXEC_CLIENTAPP,
    SUPEREXEC_REPLICA_LABEL,
    SUPEREXEC_SERVERAPP,
    SUPERLINK,
    SUPERNODE,
    TASK_EXECUTOR,
    TASK_ROLE_LABEL,
    common_labels,
    selector_labels,
)
from flower_federation.rules.raw import At, Raw, as_dict, effective_name, get, superexecs_of
from flower_federation.rules.versions import resolve_version

OURS = "selector/ownership label set by flower-federation"
COMPONENT_KEYS = tuple(k for k in common_labels("x", "x", "x") if k.endswith("/component"))
VERSION_KEY = "app.kubernetes.io/version"

Ours = dict[str, Optional[str]]  # key -> our value on everything a setting reaches; None: ours differ there


def our_labels(raw: Raw, stack: str, at: At) -> Ours:
    """Our labels on the objects and pods the labels of the section at `at` reach (a component's `labels`,
    `podLabels`, `podTemplate`; the top level's reach every component; `executor` is the task pods' config): the
    value where it is one for all of them, None where ours differ among them (a component's, a pool's, a SuperExec
    replica's, a task's role) or are another's to set."""
    name = effective_name(raw, stack)
    if at[:1] == ("executor",):  # the task pods carry their own labels only (network_links.task_labels)
        return {**selector_labels(name, TASK_EXECUTOR), TASK_ROLE_LABEL: None}
    component: Optional[str] = None
    pool: Optional[str] = None
    if at[:1] == ("superlink",):
        component = SUPEREXEC_SERVERAPP if at[1:2] == ("superexec",) else SUPERLINK
    elif at[:2] == ("supernodes", "pools") and len(at) > 2:
        pool_name = get(raw, *at[:3], "name")
        pool = pool_name if isinstance(pool_name, str) else None
        # A pool's podTemplate reaches its distributed SuperExecs' pods too: two components.
        shared = at[3:4] == ("podTemplate",) and superexecs_of(raw).distributed
        component = None if shared else SUPEREXEC_CLIENTAPP if at[3:4] == ("superexec",) else SUPERNODE
    version, _ = resolve_version(raw)
    ours: Ours = {**common_labels(name, component or "", str(version or ""), pool)}
    ours.update({POOL_LABEL: pool, SUPEREXEC_REPLICA_LABEL: None, TASK_ROLE_LABEL: None})
    if component is None:
        ours.update(dict.fromkeys(COMPONENT_KEYS))
    if version is None:
        ours[VERSION_KEY] = None
    return ours


def our_label_problem(key: str, value: Any, ours: Ours) -> str:
    """Why a user's label `key: value` cannot be where `ours` are ("" if it can)."""
    if key not in ours or (ours[key] is not None and value == ours[key]):
        return ""
    held = f"here '{ours[key]}'" if ours[key] is not None else "its value differs among the objects this reaches"
    return f"'{value}': {OURS} ({held})"


def label_problems(at: At, labels: Any, ours: Ours) -> Iterator[Problem]:
    for key, value in as_dict(labels).items():
        why = our_label_problem(str(key), value, ours)
        if why:
            yield problem(at + (key,), why)
