"""The API server's limits (kube/limits.py) over a whole render, each breach reported as a config problem
naming the setting that causes it, all at once and before anything is registered.

Which setting: the registration ConfigMaps' keys are the trusted keys, so `sites` (with how many keys
and, sharded, the shard); an annotation or label breach, the config's own annotations or labels that
reach the object (the largest such setting, at the top or under the object's pool or the SuperLink); a name
too long (or not a name), the pool's name for a pool's object, else the federation's `name`; any other breach
(a whole object too large), the largest setting under the section that owns the object (a pool, the SuperLink,
else the whole config), descending while one part holds most of it: a giant `nodeConfig` is named
`supernodes.pools[i].nodeConfig`. The figure and the limit are in the message.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any, Optional

from flower_federation.builders import node_auth, registration
from flower_federation.config.errors import PathPart, Problem, problem
from flower_federation.kube import limits
from flower_federation.kube.objects import Manifest
from flower_federation.plan import FederationPlan

# `pool` of an entry: a pool's name, SUPERLINK for the SuperLink's own objects, None for the federation's.
SUPERLINK = ""


def problems(plan: FederationPlan, objects: Iterable[tuple[Optional[str], Manifest]]) -> list[Problem]:
    """Every limit any object breaks, as config problems. `objects`: (pool, manifest) as `pool` above."""
    extra = registration.keys_estimate(plan)
    # One cause, one problem: the same breach (its setting and sentence) of many objects (the federation's
    # annotations reach every object) is said once, naming the first object and how many more.
    found: dict[tuple[tuple[PathPart, ...], str], list[limits.Breach]] = {}
    keys_breaches: list[tuple[Manifest, limits.Breach]] = []
    raw: Optional[dict[str, Any]] = None
    for pool, m in objects:
        name = m["metadata"].get("name", "")
        added = extra.get(name, 0) if m["kind"] == "ConfigMap" else 0
        for breach in limits.breaches(m, added):
            if added and breach.what in ("data", "object"):
                keys_breaches.append((m, breach))
                continue
            if raw is None:  # only when something breaks: the config as the user wrote it (camelCase keys)
                raw = plan.spec.model_dump(by_alias=True, exclude_defaults=True, mode="json")
            found.setdefault((_blame(raw, plan, pool, breach.what), breach.detail), []).append(breach)
    said = [problem(at, _said(breaches)) for (at, _), breaches in found.items()]
    return said + ([_keys_problem(plan, keys_breaches)] if keys_breaches else [])


def _said(breaches: list[limits.Breach]) -> str:
    first = breaches[0]
    fix = "shorten the name" if first.what == "name" else "make it smaller"
    more = f" (and {len(breaches) - 1} more object{'s' if len(breaches) > 2 else ''})" if len(breaches) > 1 else ""
    return f"{first.key}{more}: {first.detail}: {fix}"


def _keys_problem(plan: FederationPlan, breaches: list[tuple[Manifest, limits.Breach]]) -> Problem:
    """One problem for every registration ConfigMap the trusted keys overfill (each shard and each of its limits
    breaks for the one cause), at the setting that holds most of the keys: `sites`, or the pool of most SuperNodes
    (its replicas: the pools' keys are made at deploy time, so each shard is counted as if it held all of them)."""
    keys = len(registration.site_lines(plan))
    by_pool = [(len(node_auth.slots(plan, p)), i) for i, p in enumerate(plan.spec.supernodes.pools)]
    pools = sum(n for n, _ in by_pool)
    m, worst = max(breaches, key=lambda mb: mb[1].figure / mb[1].limit)
    sharded = registration.keys_sharded(plan)
    where = f"shard {m['metadata']['name']} of {registration.SHARDS}" if sharded else f"{m['metadata']['name']}"
    others = len({id(mb[0]) for mb in breaches}) - 1
    also = f" (and {others} more of its ConfigMaps)" if others > 0 else ""
    size = f"up to {worst.figure:,} bytes{' as JSON' if worst.what == 'object' else ''}"
    if pools > keys:
        most, i = max(by_pool)
        pool = plan.spec.supernodes.pools[i]
        at: tuple[PathPart, ...] = (
            ("supernodes", "pools", i, "replicas") if pool.replicas is not None else ("supernodes", "pools", i)
        )
        fix = f"fewer SuperNodes with node authentication in this stack (pool '{pool.name}' has {most:,})"
    else:
        at, fix = ("sites",), "admit fewer keys to this hub (split the sites across hubs)"
    return problem(
        at,
        f"{keys:,} trusted site keys and {pools:,} of the pools' make ConfigMap {where} {size}{also}; the API "
        f"server refuses more than {worst.limit:,}: {fix}",
    )


def _blame(raw: dict[str, Any], plan: FederationPlan, pool: Optional[str], what: str) -> tuple[PathPart, ...]:
    section = _section(plan, pool)
    if what == "name":  # every name we render is made of N (`name`, else the stack's) and a pool's name
        return (*section, "name") if section[:2] == ("supernodes", "pools") else ("name",)
    if what in ("annotations", "labels"):
        candidates = [p for p in _named(raw, (), what) if not p[:-1] or p[: len(section)] == section]
        if candidates:
            return max(candidates, key=lambda p: _size(_at(raw, p)))
    return _largest(raw, section)


def _section(plan: FederationPlan, pool: Optional[str]) -> tuple[PathPart, ...]:
    if pool == SUPERLINK:
        return ("superlink",)
    if pool is not None:
        names = [p.name for p in plan.spec.supernodes.pools]
        if pool in names:
            return ("supernodes", "pools", names.index(pool))
    return ()


def _at(raw: Any, path: tuple[PathPart, ...]) -> Any:
    for part in path:
        raw = raw[part]
    return raw


def _size(value: Any) -> int:
    return len(json.dumps(value, separators=(",", ":")).encode())


def _named(raw: Any, at: tuple[PathPart, ...], what: str) -> list[tuple[PathPart, ...]]:
    """Paths of every setting whose key ends with `what` (annotations, podAnnotations, labels, ...)."""
    found: list[tuple[PathPart, ...]] = []
    items: Iterable[tuple[PathPart, Any]] = (
        raw.items() if isinstance(raw, dict) else enumerate(raw) if isinstance(raw, list) else ()
    )
    for key, value in items:
        here = (*at, key)
        if isinstance(key, str) and key.lower().endswith(what) and value:
            found.append(here)
        elif isinstance(value, (dict, list)):
            found += _named(value, here, what)
    return found


def _largest(raw: dict[str, Any], section: tuple[PathPart, ...]) -> tuple[PathPart, ...]:
    """From `section` down, into the part holding more than half of it, while there is one."""
    try:
        node, path = _at(raw, section), section
    except (KeyError, IndexError, TypeError):
        node, path = raw, ()
    while isinstance(node, (dict, list)) and node:
        items = list(node.items()) if isinstance(node, dict) else list(enumerate(node))
        key, child = max(items, key=lambda kv: _size(kv[1]))
        if _size(child) * 2 <= _size(node):
            break
        node, path = child, (*path, key)
    return path
