"""The difference between two renders of a stack: the Kubernetes objects added, removed and changed (by cluster,
kind, namespace and name), the fields that changed, which changes replace an object (`replacements.py`, and a
changed Pulumi URN), and the other Pulumi resources (keys, certificates, providers, components) added, removed or
changed. Secret values are compared but never kept for printing: a field whose value is secret says only that it
changed."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Optional

from flower_federation.config.derived import AMBIENT_CLUSTER
from flower_federation.review import replacements
from flower_federation.review.fields import FieldChange, at, changes
from flower_federation.review.replacements import Reason, group_version

Manifest = dict[str, Any]
SECRET_FIELDS = ("data", "stringData", "binaryData")  # of a Secret: never printed
COMPONENT_LABEL = "app.kubernetes.io/component"
KUBERNETES = "kubernetes:"


@dataclass(frozen=True)
class Resource:
    """One resource a render registers: its Pulumi type and name, its inputs (a Kubernetes object's manifest) with
    secrets revealed (what is compared) and with secrets as placeholders (`redacted`; None: nothing in it is
    secret), what Pulumi knows it by (`urn`: `T1$...$TYPE::NAME`, "" unknown) and its cluster."""

    type: str
    name: str
    inputs: Manifest
    redacted: Optional[Manifest] = None
    urn: str = ""
    cluster: str = AMBIENT_CLUSTER

    @property
    def kubernetes(self) -> bool:
        return self.type.startswith(KUBERNETES)

    @property
    def shown(self) -> Manifest:
        return self.inputs if self.redacted is None else self.redacted

    @property
    def key(self) -> tuple[str, str, str, str, str]:
        """(cluster, kind, namespace, name, API group): a Kubernetes object's identity."""
        meta = self.inputs.get("metadata") or {}
        group, _ = group_version(self.inputs)
        return (
            self.cluster,
            str(self.inputs.get("kind", "")),
            meta.get("namespace") or "",
            meta.get("name", ""),
            group,
        )

    @property
    def title(self) -> str:
        """`Kind namespace/name` (`Kind name` when cluster-scoped)."""
        _, kind, namespace, name, _ = self.key
        return f"{kind} {namespace}/{name}" if namespace else f"{kind} {name}"

    @property
    def component(self) -> Optional[str]:
        labels = (self.inputs.get("metadata") or {}).get("labels") or {}
        value = labels.get(COMPONENT_LABEL)
        return value if isinstance(value, str) else None


def from_manifest(manifest: Manifest, cluster: str = AMBIENT_CLUSTER, urn: str = "") -> Resource:
    """A Kubernetes object as a resource (its Pulumi type from its apiVersion and kind, its name its own)."""
    group, version = group_version(manifest)
    typ = f"{KUBERNETES}{group or 'core'}/{version}:{manifest.get('kind', '')}"
    return Resource(typ, (manifest.get("metadata") or {}).get("name", ""), manifest, urn=urn, cluster=cluster)


@dataclass(frozen=True)
class Changed:
    old: Resource
    new: Resource
    fields: tuple[FieldChange, ...]
    reasons: tuple[Reason, ...] = ()  # empty: updated in place


@dataclass(frozen=True)
class Moved:
    """An object deleted and another created that read as one object renamed or moved: Pulumi deletes the old one
    and creates the new one (its pods, volumes and generated values anew)."""

    old: Resource
    new: Resource
    why: str


@dataclass(frozen=True)
class Review:
    added: tuple[Resource, ...] = ()
    removed: tuple[Resource, ...] = ()
    changed: tuple[Changed, ...] = ()
    moved: tuple[Moved, ...] = ()
    other_added: tuple[Resource, ...] = ()  # Pulumi resources that are not Kubernetes objects
    other_removed: tuple[Resource, ...] = ()
    other_changed: tuple[Changed, ...] = ()
    clusters: tuple[str, ...] = field(default=(AMBIENT_CLUSTER,))

    @property
    def empty(self) -> bool:
        return not (
            self.added or self.removed or self.changed or self.other_added or self.other_removed or self.other_changed
        )

    @property
    def replaced(self) -> tuple[Changed, ...]:
        return tuple(c for c in self.changed + self.other_changed if c.reasons)


def field_changes(old: Resource, new: Resource) -> list[FieldChange]:
    """What differs, each change secret where either side's value at its path (or under it) is: a Secret's data,
    or any value the render holds as a Pulumi secret."""
    found = []
    for change in changes(old.inputs, new.inputs):
        secret = (
            old.kubernetes
            and new.inputs.get("kind") == "Secret"
            and bool(change.path)
            and change.path[0] in SECRET_FIELDS
        ) or any(at(r.shown, change.path) != at(r.inputs, change.path) for r in (old, new))
        found.append(FieldChange(change.path, change.old, change.new, secret=secret))
    return found


_GENERATING = {"tls:": "pulumi-tls", "random:": "pulumi-random"}


def _reasons(old: Resource, new: Resource, fields: list[FieldChange]) -> list[Reason]:
    found = replacements.reasons(old.inputs, new.inputs, fields) if new.kubernetes and fields else []
    if old.urn and new.urn and old.urn != new.urn:
        found.append(
            Reason(
                "URN",
                "Pulumi",
                f"its URN changes ({old.urn} → {new.urn}): pulumi up deletes it and creates it anew (keep the old "
                "URN with aliases)",
            )
        )
    by = next((p for prefix, p in _GENERATING.items() if new.type.startswith(prefix)), None)
    if by is not None and fields:
        found.append(Reason("inputs", by, "a changed input makes a new key or certificate"))
    return sorted(found)


def _pair(removed: list[Resource], added: list[Resource]) -> list[Moved]:
    """Deleted and created objects that are one object renamed or moved: the same kind and name in another
    namespace or cluster, else the one object of its kind and component in its namespace on each side."""
    moved: list[Moved] = []
    for key_of, why in (
        (lambda r: (r.key[1], r.key[3], r.key[4]), "moved to another namespace or cluster"),
        (lambda r: (r.key[0], r.key[1], r.key[2], r.key[4], r.component), "renamed"),
    ):
        olds: dict[Any, list[Resource]] = defaultdict(list)
        news: dict[Any, list[Resource]] = defaultdict(list)
        taken = {id(m.old) for m in moved} | {id(m.new) for m in moved}
        for r in removed:
            if id(r) not in taken:
                olds[key_of(r)].append(r)
        for r in added:
            if id(r) not in taken:
                news[key_of(r)].append(r)
        for key, (old, *more) in olds.items():
            if not more and len(news.get(key, [])) == 1 and (why != "renamed" or old.component is not None):
                moved.append(Moved(old, news[key][0], why))
    return sorted(moved, key=lambda m: (m.old.key, m.new.key))


def review(old: list[Resource], new: list[Resource]) -> Review:
    """What changes from the render `old` to the render `new`."""
    old_k = {r.key: r for r in old if r.kubernetes}
    new_k = {r.key: r for r in new if r.kubernetes}
    changed = []
    for key in sorted(old_k.keys() & new_k.keys()):
        a, b = old_k[key], new_k[key]
        fields = field_changes(a, b)
        reasons = _reasons(a, b, fields)
        if fields or reasons:
            changed.append(Changed(a, b, tuple(fields), tuple(reasons)))
    removed = [old_k[k] for k in sorted(old_k.keys() - new_k.keys())]
    added = [new_k[k] for k in sorted(new_k.keys() - old_k.keys())]

    def other_key(r: Resource) -> str:
        return r.urn or f"{r.type}::{r.name}"

    old_o = {other_key(r): r for r in old if not r.kubernetes}
    new_o = {other_key(r): r for r in new if not r.kubernetes}
    other_changed = []
    for urn in sorted(old_o.keys() & new_o.keys()):
        a, b = old_o[urn], new_o[urn]
        fields = field_changes(a, b)
        if fields:
            other_changed.append(Changed(a, b, tuple(fields), tuple(_reasons(a, b, fields))))
    clusters = sorted({r.cluster for r in (*old, *new) if r.kubernetes} or {AMBIENT_CLUSTER})
    return Review(
        added=tuple(added),
        removed=tuple(removed),
        changed=tuple(changed),
        moved=tuple(_pair(removed, added)),
        other_added=tuple(new_o[k] for k in sorted(new_o.keys() - old_o.keys())),
        other_removed=tuple(old_o[k] for k in sorted(old_o.keys() - new_o.keys())),
        other_changed=tuple(other_changed),
        clusters=tuple(sorted(clusters, key=lambda c: (c != AMBIENT_CLUSTER, c))),
    )
