"""What changes at `up` because a generated value changes, and which pods roll, each with its reason.

A key, certificate or random secret is made by pulumi-tls or pulumi-random at `up`; every input of theirs forces a
new one. `diff` renders with stand-ins that name the resource and a digest of its inputs
(flower/public_keys.py `ISSUED_PLACEHOLDER`), so whatever the program builds from a new one (a Secret's data, a
trust bundle, the checksum annotations shell/rollout.py puts on pod templates) differs between the two renders
exactly as it will at `up`. This module says why: which new issue reached which object (read off the stand-ins
in its new values), and which Secret a changed checksum annotation digests (builders/checksums.py, the fact the
shell uses), so a reviewer reads "re-issued certificate -> Secret -> StatefulSet rolls".
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from flower_federation.builders import checksums
from flower_federation.flower.public_keys import ISSUED_PLACEHOLDER
from flower_federation.kube.objects import WORKLOAD_KINDS, PodTemplate
from flower_federation.review.changes import Changed, Resource, Review
from flower_federation.review.fields import FieldChange, format_path

# What each generated type makes, for a reader.
GENERATED = {
    "tls:index/privateKey:PrivateKey": "key",
    "tls:index/selfSignedCert:SelfSignedCert": "CA certificate",
    "tls:index/certRequest:CertRequest": "certificate request",
    "tls:index/locallySignedCert:LocallySignedCert": "certificate",
    "random:index/randomPassword:RandomPassword": "random secret",
}
ROLLING_KINDS = ("StatefulSet", "Deployment", "DaemonSet")  # their controllers replace the pods; a Job runs anew
TEMPLATE = ("spec", "template")
ANNOTATIONS = ("metadata", "annotations")
MAX_PATHS = 3  # pod-template fields named in a reason


def pod_template(r: Resource) -> PodTemplate | None:
    """A workload's pod template (kube.objects.pod_template_of, over a review's plain manifest)."""
    if r.inputs.get("kind") not in WORKLOAD_KINDS:
        return None
    template: PodTemplate = r.inputs["spec"]["template"]
    return template


@dataclass(frozen=True)
class Consequence:
    """A Kubernetes object that changes at `up`, and why: each reason a chain from its cause to the object."""

    resource: Resource
    reasons: tuple[str, ...]

    @property
    def rolls(self) -> bool:
        """Its pods are replaced: a workload's template changes (a Job's: it is deleted and runs anew)."""
        return pod_template(self.resource) is not None

    @property
    def verb(self) -> str:
        if not self.rolls:
            return "changes"
        return "runs anew" if self.resource.inputs.get("kind") == "Job" else "rolls"


def new_issues(review: Review) -> dict[str, str]:
    """Generated resource name -> what is new at `up` ("re-issued certificate `N`", "new key `N`")."""
    out: dict[str, str] = {}
    for change in review.other_changed:
        what = GENERATED.get(change.new.type)
        if what is not None and change.reasons:
            out[change.new.name] = (
                f"{'re-issued' if what.endswith('certificate') else 'new'} {what} `{change.new.name}`"
            )
    for r in review.other_added:
        what = GENERATED.get(r.type)
        if what is not None:
            out[r.name] = f"new {what} `{r.name}`"
    return out


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)


def _causes(fields: Iterable[FieldChange], issues: dict[str, str]) -> list[str]:
    """The new issues whose stand-ins the changed values hold."""
    found = {
        issues[m["resource"]]
        for f in fields
        for text in _strings(f.new)
        for m in ISSUED_PLACEHOLDER.finditer(text)
        if m["resource"] in issues
    }
    return sorted(found)


def _template_reasons(
    change: Changed, candidates: tuple[checksums.Checksummed, ...], secret_causes: dict[tuple[str, ...], list[str]]
) -> list[str]:
    template = pod_template(change.new)
    assert template is not None
    covered = checksums.covering(template, candidates)
    cluster, _, namespace, _, _ = change.new.key
    reasons: list[str] = []
    other: list[str] = []
    for f in change.fields:
        if f.path[:2] != TEMPLATE:
            continue
        key = f.path[4] if f.path[2:4] == ANNOTATIONS and len(f.path) > 4 else None
        if isinstance(key, str) and key in covered:
            secret = covered[key].secret
            causes = secret_causes.get((cluster, namespace, secret)) or []
            via = f"Secret {namespace}/{secret}" if namespace else f"Secret {secret}"
            head = [", ".join(causes)] if causes else []
            reasons.append(" → ".join([*head, via, f"`{key}`"]))
        else:
            other.append(f"`{format_path(f.path[2:])}`")
    if other:
        more = f" and {len(other) - MAX_PATHS} more" if len(other) > MAX_PATHS else ""
        reasons.append(f"its pod template changes: {', '.join(other[:MAX_PATHS])}{more}")
    if change.reasons and not reasons:
        # Replaced for a field outside the template (a StatefulSet's volumeClaimTemplates): its pods go with it.
        reasons.append("it is replaced (above): its pods are deleted and created anew")
    return reasons


def consequences(review: Review, candidates: tuple[checksums.Checksummed, ...]) -> tuple[Consequence, ...]:
    """Every changed Kubernetes object that holds a new issue of a generated value, and every workload whose pod
    template changes, with why; `candidates` the Secrets checksum annotations may digest (checksums.of_plan)."""
    issues = new_issues(review)
    out: list[Consequence] = []
    secret_causes: dict[tuple[str, ...], list[str]] = {}
    for change in review.changed:
        causes = _causes(change.fields, issues)
        if causes and pod_template(change.new) is None:
            out.append(Consequence(change.new, (", ".join(causes),)))
            cluster, kind, namespace, name, _ = change.new.key
            if kind == "Secret":
                secret_causes[(cluster, namespace, name)] = causes
    for change in review.changed:
        if pod_template(change.new) is not None:
            reasons = _template_reasons(change, candidates, secret_causes)
            if reasons:
                out.append(Consequence(change.new, tuple(reasons)))
    return tuple(sorted(out, key=lambda c: (c.rolls, c.resource.key)))
