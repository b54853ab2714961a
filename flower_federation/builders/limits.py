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
    found: list[Problem] = []
    raw: Optional[dict[str, Any]] = None
    for pool, m in objects:
        name = m["metadata"].get("name", "")
        added = extra.get(name, 0) if m["kind"] == "ConfigMap" else 0
        for breach in limits.breaches(m, added):
            if added and breach.what in ("data", "object"):
                found.append(_keys_problem(plan, m, breach))
                continue
            if raw is None:  # only when something breaks: the config as the user wrote it (camelCase keys)
                raw = plan.spec.model_dump(by_alias=True, exclude_defaults=True, mode="json")
            at = _blame(raw, plan, pool, breach.what)
            fix = "shorten the name" if breach.what == "name" else "make it smaller"
            found.append(problem(at, f"{breach}: {fix}"))
    return found


def _keys_problem(plan: FederationPlan, m: Manifest, breach: limits.Breach) -> Problem:
    keys = len(registration.site_lines(plan))
    pools = sum(len(node_auth.slots(plan, p)) for p in plan.spec.supernodes.pools)
    sharded = registration.keys_sharded(plan)
    where = f"shard {m['metadata']['name']} of {registration.SHARDS}" if sharded else f"{m['metadata']['name']}"
    return problem(
        ("sites",),
        f"{keys:,} trusted site keys (and {pools:,} of the pools') make ConfigMap {where} "
        f"{breach.figure:,} bytes{' as JSON' if breach.what == 'object' else ''}; the API server refuses more "
        f"than {breach.limit:,}: admit fewer keys to this hub (split the sites across hubs)",
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
