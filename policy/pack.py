"""flower-federation's policies as a CrossGuard pack: Pulumi resources adapted to Kubernetes
manifests, then the very policy functions of `flower_federation/checks/` (what `python -m
flower_federation check` runs on YAML).

How props arrive (pulumi_policy 1.21, `policy.py` Analyze/AnalyzeStack): the resource's inputs,
camelCase for pulumi-kubernetes (`metadata`, `spec.template.spec.containers[].securityContext`),
wrapped in a proxy that raises `UnknownValueError` on reading a value not known during preview;
the raw value there is a sentinel string (`pulumi_policy.proxy.UNKNOWN_*_VALUE`). A policy that
let that error escape would not run at all for the stack ("can't run policy ... during preview").
Here the proxies are unwrapped and every sentinel becomes `checks.model.UNKNOWN`, which the checks
read as "cannot tell yet": no violation is made of it, the others are still reported, and the
update runs the same policies with the values known.

A policy that relates objects (`whole_stack`: Services to pods, NetworkPolicies, RoleBindings) is
a StackValidationPolicy, run over the stack's resources per Kubernetes provider (one cluster
each); the others are ResourceValidationPolicies, one resource at a time.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Optional

from pulumi_policy import (
    EnforcementLevel,
    PolicyComplianceFramework,
    PolicyResource,
    ReportViolation,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    Severity,
    StackValidationArgs,
    StackValidationPolicy,
)
from pulumi_policy import proxy as _proxy

from flower_federation.checks.model import MANDATORY, UNKNOWN, Objects, Policy, Ref, Violation
from flower_federation.checks.policies import POLICIES

PACK_NAME = "flower-federation"
# kubernetes:<group>/<version>:<Kind>; `core` is the legacy group (apiVersion `v1`).
_TYPE = re.compile(r"^kubernetes:(?P<group>[^:/]+)/(?P<version>[^:/]+):(?P<kind>[A-Za-z0-9]+)$")
_SENTINELS = frozenset(
    {
        _proxy.UNKNOWN_BOOLEAN_VALUE,
        _proxy.UNKNOWN_NUMBER_VALUE,
        _proxy.UNKNOWN_STRING_VALUE,
        _proxy.UNKNOWN_ARRAY_VALUE,
        _proxy.UNKNOWN_ASSET_VALUE,
        _proxy.UNKNOWN_ARCHIVE_VALUE,
        _proxy.UNKNOWN_OBJECT_VALUE,
    }
)
# Objects that are not whole: a server-side apply patch (…Patch) is a fragment of an object
# someone else owns; a …List type holds items of the kind it names.
_PARTIAL = ("Patch", "List")


def plain(value: Any) -> Any:
    """The props as plain dicts and lists, every unknown as UNKNOWN (never raising)."""
    if isinstance(value, _proxy._DictProxy | _proxy._ListProxy):
        value = value["__target"]
    if isinstance(value, Mapping):
        return {k: plain(value[k]) for k in list(value)}
    if isinstance(value, Sequence) and not isinstance(value, str | bytes):
        return [plain(value[i]) for i in range(len(value))]
    if isinstance(value, str) and value in _SENTINELS:
        return UNKNOWN
    if isinstance(value, float) and value.is_integer():
        return int(value)  # a protobuf Struct carries every number as a double: ports are integers
    return value


def manifest(resource_type: str, props: Any, name: str) -> Optional[dict[str, Any]]:
    """The Kubernetes object a pulumi-kubernetes resource stands for, or None (another provider's
    resource, a Helm release or YAML group whose objects come as resources of their own, a patch)."""
    m = _TYPE.match(resource_type)
    if m is None or m["kind"].endswith(_PARTIAL):
        return None
    obj = plain(props)
    if not isinstance(obj, dict):
        return None
    group, version = m["group"], m["version"]
    obj["apiVersion"] = version if group == "core" else f"{group}/{version}"
    obj["kind"] = m["kind"]
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        meta = obj["metadata"] = {} if meta is not UNKNOWN else {"name": UNKNOWN}
    meta.setdefault("name", UNKNOWN)  # auto-named: Pulumi names it at create time
    return obj


def _level(policy: Policy) -> EnforcementLevel:
    return EnforcementLevel.MANDATORY if policy.level == MANDATORY else EnforcementLevel.ADVISORY


def framework(policy: Policy) -> Optional[PolicyComplianceFramework]:
    """The benchmark the policy implements (pulumi-policy takes one per policy): its first control's framework,
    with every reference of that framework it meets; the others' references are in `tags`."""
    if not policy.controls:
        return None
    first = policy.controls[0]
    references = [c.reference for c in policy.controls if c.framework == first.framework]
    return PolicyComplianceFramework(name=first.framework, version=first.version, reference=", ".join(references))


def tags(policy: Policy) -> list[str]:
    """`cis-kubernetes-1.9.0:5.2.2`, `pod-security-standards-v1.34:restricted`: every control, one tag each."""
    return [f"{'-'.join(c.framework.lower().split()[:2])}-{c.version}:{c.reference}" for c in policy.controls]


def message(policy: Policy, v: Violation) -> str:
    return f"{v.ref} {v.path}: {v.message}. Remediation: {policy.remediation}"


def _resource_validation(policy: Policy) -> Any:
    def validate(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
        obj = manifest(args.resource_type, args.props, args.name)
        if obj is None:
            return
        for v in policy.run(Objects([obj])):
            report_violation(message(policy, v), args.urn)

    return validate


def _cluster(resource: PolicyResource) -> str:
    """Resources of one Kubernetes provider are one cluster's (the default provider: "")."""
    return resource.provider.urn if resource.provider is not None else ""


def _stack_validation(policy: Policy) -> Any:
    def validate(args: StackValidationArgs, report_violation: ReportViolation) -> None:
        clusters: dict[str, list[tuple[dict[str, Any], str]]] = {}
        for r in args.resources:
            obj = manifest(r.resource_type, r.props, r.name)
            if obj is not None:
                clusters.setdefault(_cluster(r), []).append((obj, r.urn))
        for members in clusters.values():
            urns: dict[Ref, str] = {}
            for obj, urn in members:
                urns.setdefault(Ref.of(obj), urn)
            for v in policy.run(Objects(obj for obj, _ in members)):
                report_violation(message(policy, v), urns.get(v.ref))

    return validate


def policies(checks: Iterable[Policy] = POLICIES) -> list[ResourceValidationPolicy | StackValidationPolicy]:
    out: list[ResourceValidationPolicy | StackValidationPolicy] = []
    for p in checks:
        # A policy that needs every resource at once (which pods a NetworkPolicy selects) is a stack policy.
        kind, validate = (
            (StackValidationPolicy, _stack_validation(p))
            if p.whole_stack
            else (ResourceValidationPolicy, _resource_validation(p))
        )
        out.append(
            kind(
                name=p.name,
                description=p.description,
                validate=validate,
                enforcement_level=_level(p),
                remediation_steps=p.remediation,
                severity=Severity(p.severity),
                url=p.url,
                framework=framework(p),
                tags=tags(p),
            )
        )
    return out
