"""What a policy is and what it reports, and the one value a check cannot read: unknown.

A check reads Kubernetes objects as plain dicts, camelCase as `kubectl get -o yaml` prints them.
During `pulumi preview` some values are not known yet (a name Pulumi will generate, a field filled
from another resource's output); the policy pack hands them in as `UNKNOWN`. Every check reads an
unknown in the direction that reports nothing ("cannot tell yet"): no violation is ever made of
one, and the update, which runs the same policies with the values known, decides.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Optional

MANDATORY = "mandatory"
ADVISORY = "advisory"
LEVELS = (MANDATORY, ADVISORY)
# pulumi-policy's Severity values (1.18+), most severe first.
SEVERITIES = ("critical", "high", "medium", "low")
CIS = "CIS Kubernetes Benchmark"
CIS_VERSION = "1.9.0"
PSS = "Pod Security Standards"


class Unknown:
    """A value not known yet (Pulumi preview). One instance, `UNKNOWN`."""

    _instance: Optional[Unknown] = None

    def __new__(cls) -> Unknown:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "UNKNOWN"


UNKNOWN = Unknown()


def has_unknown(value: Any) -> bool:
    """Whether `value` is unknown or holds an unknown anywhere (keys and items)."""
    if value is UNKNOWN:
        return True
    if isinstance(value, Mapping):
        return any(has_unknown(k) or has_unknown(v) for k, v in value.items())
    if isinstance(value, list | tuple):
        return any(has_unknown(v) for v in value)
    return False


def as_dict(value: Any) -> dict[str, Any]:
    """`value` if it is a mapping, else {} (absent, null, unknown: callers that must tell unknown
    from absent check `has_unknown` first)."""
    return dict(value) if isinstance(value, Mapping) else {}


def as_list(value: Any) -> list[Any]:
    return list(value) if isinstance(value, list | tuple) else []


def as_str(value: Any) -> Optional[str]:
    return value if isinstance(value, str) else None


@dataclass(frozen=True, order=True)
class Ref:
    """An object by kind, namespace and name ("" when the object has none; `?` when unknown)."""

    kind: str
    namespace: str
    name: str

    @classmethod
    def of(cls, obj: Mapping[str, Any]) -> Ref:
        meta = as_dict(obj.get("metadata"))
        return cls(_text(obj.get("kind")), _text(meta.get("namespace")), _text(meta.get("name")))

    def __str__(self) -> str:
        where = f"{self.namespace}/" if self.namespace else ""
        return f"{self.kind} {where}{self.name}"


def _text(value: Any) -> str:
    if value is UNKNOWN:
        return "?"
    return value if isinstance(value, str) else ""


@dataclass(frozen=True, order=True)
class Violation:
    """One broken promise: the object and the field where it is broken, and why. `policy` and
    `level` are filled in by the policy that found it."""

    ref: Ref
    path: str
    message: str
    policy: str = ""
    level: str = ""

    def line(self) -> str:
        return f"{self.ref} {self.path}: {self.message}"


Check = Callable[["Objects"], Iterable[Violation]]


@dataclass(frozen=True)
class Control:
    """A control of a published benchmark that a policy implements: the CIS Kubernetes Benchmark's recommendation
    (`5.3.2`) or a Pod Security Standards profile (`restricted`)."""

    framework: str
    version: str
    reference: str
    title: str


@dataclass(frozen=True)
class Policy:
    """A promise of the federation, checked on any Kubernetes objects.

    `whole_stack`: the check relates objects to one another (Services to pods, NetworkPolicies to
    pods, RoleBindings to ServiceAccounts), so the policy pack runs it over every resource of the
    stack; otherwise over each resource alone."""

    name: str
    description: str
    level: str
    remediation: str
    check: Check
    whole_stack: bool = False
    # How bad a violation is (SEVERITIES), where to read more, and the benchmark controls it implements: what
    # the policy pack hands Pulumi (pulumi-policy 1.18+) and docs/policies.md lists (tests/test_policies.py).
    severity: str = ""
    url: str = ""
    controls: tuple[Control, ...] = ()

    def __post_init__(self) -> None:
        assert self.level in LEVELS, self.level
        assert self.severity in SEVERITIES, (self.name, self.severity)  # every policy says its own
        assert self.url.startswith("https://"), (self.name, self.url)

    def run(self, objects: Objects) -> list[Violation]:
        found = {Violation(v.ref, v.path, v.message, self.name, self.level) for v in self.check(objects)}
        return sorted(found)


class Objects:
    """The objects a policy runs over, with the lookups every check needs. Objects of one cluster:
    a Service selects pods, a NetworkPolicy covers pods, of its own namespace only."""

    def __init__(self, items: Iterable[Mapping[str, Any]]):
        self.items: list[dict[str, Any]] = [dict(o) for o in items if isinstance(o, Mapping)]

    def of_kind(self, *kinds: str) -> Iterator[dict[str, Any]]:
        for obj in self.items:
            if obj.get("kind") in kinds:
                yield obj


def same_namespace(a: str, b: str) -> bool:
    """An object without a namespace (a hand-written file applied with `-n`) or with an unknown
    one may be in any: both count as the same, so no violation rests on a guess."""
    return a == b or "" in (a, b) or "?" in (a, b)


def selector_matches(selector: Any, labels: Any) -> bool:
    """A LabelSelector (matchLabels, matchExpressions) against labels. An unknown selector or
    unknown labels match (callers for whom a match makes a violation check `has_unknown`)."""
    if has_unknown(selector) or has_unknown(labels):
        return True
    sel = as_dict(selector)
    have = as_dict(labels)
    if any(have.get(k) != v for k, v in as_dict(sel.get("matchLabels")).items()):
        return False
    for expr in as_list(sel.get("matchExpressions")):
        e = as_dict(expr)
        key, op, values = str(e.get("key")), e.get("operator"), as_list(e.get("values"))
        if op == "In" and have.get(key) not in values:
            return False
        if op == "NotIn" and key in have and have.get(key) in values:
            return False
        if op == "Exists" and key not in have:
            return False
        if op == "DoesNotExist" and key in have:
            return False
    return True


def map_selector_matches(selector: Any, labels: Any) -> Optional[bool]:
    """A Service's plain `selector` map against labels; None when unknown, False when the Service
    has no selector (it selects no pod: its endpoints are someone else's)."""
    if has_unknown(selector) or has_unknown(labels):
        return None
    sel = as_dict(selector)
    if not sel:
        return False
    have = as_dict(labels)
    return all(have.get(k) == v for k, v in sel.items())
