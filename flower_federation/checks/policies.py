"""Every policy, in the order they are reported, and `run`: the same functions behind `check`
and the policy pack (policy/)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from flower_federation.checks import flower_policies, gateway_grants, pod_policies
from flower_federation.checks.model import MANDATORY, Objects, Policy, Violation

POLICIES: tuple[Policy, ...] = flower_policies.POLICIES + gateway_grants.POLICIES + pod_policies.POLICIES
BY_NAME = {p.name: p for p in POLICIES}


def flatten(items: Iterable[Any]) -> Iterator[dict[str, Any]]:
    """Objects, with a `kind: List` (or `*List`, as `kubectl get -o yaml` prints) opened into its items."""
    for obj in items:
        if not isinstance(obj, Mapping):
            continue
        kind = obj.get("kind")
        if isinstance(kind, str) and kind.endswith("List") and isinstance(obj.get("items"), list):
            yield from flatten(obj["items"])
        else:
            yield dict(obj)


def run(items: Iterable[Any], policies: Iterable[Policy] = POLICIES) -> list[Violation]:
    """Every violation of `policies` among the objects of one cluster, policy by policy."""
    objects = Objects(flatten(items))
    return [v for p in policies for v in p.run(objects)]


def mandatory(violations: Iterable[Violation]) -> list[Violation]:
    return [v for v in violations if v.level == MANDATORY]


def metadata_table(policies: Iterable[Policy] = POLICIES) -> str:
    """docs/policies.md's table of each policy's severity, link and benchmark controls, from the policies
    themselves (what the policy pack hands Pulumi): the docs are held to it (tests/test_policies.py)."""
    rows = ["| Policy | Severity | More | Controls it implements |", "|---|---|---|---|"]
    for p in policies:
        by_framework: dict[str, list[str]] = {}
        for c in p.controls:
            by_framework.setdefault(f"{c.framework} {c.version}", []).append(c.reference)
        controls = "; ".join(f"{name}: {', '.join(refs)}" for name, refs in by_framework.items()) or "none"
        rows.append(f"| `{p.name}` | {p.severity} | <{p.url}> | {controls} |")
    return "\n".join(rows) + "\n"
