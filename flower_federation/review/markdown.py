"""A review as the Markdown of a pull-request comment: a summary line, what is replaced and why, the objects
created, deleted and updated (with their changed fields; secret values never), the other Pulumi resources, and the
new side's topology as a Mermaid diagram (GitHub draws it)."""

from __future__ import annotations

from flower_federation.review.changes import Moved, Resource, Review, field_changes
from flower_federation.review.consequences import Consequence
from flower_federation.review.fields import FieldChange

MAX_FIELDS = 40  # changed fields listed per object
GENERATING = ("tls:", "random:")


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def _where(r: Resource, several: bool) -> str:
    return f"{r.title} (cluster `{r.cluster}`)" if several else r.title


def _table(resources: tuple[Resource, ...], several: bool) -> list[str]:
    head = (
        ["| Cluster | Kind | Namespace | Name |", "|---|---|---|---|"]
        if several
        else ["| Kind | Namespace | Name |", "|---|---|---|"]
    )
    rows = []
    for r in resources:
        cluster, kind, namespace, name, _ = r.key
        cells = [kind, namespace or "(cluster-scoped)", name]
        rows.append("| " + " | ".join(([cluster] if several else []) + [f"`{c}`" if c else "" for c in cells]) + " |")
    return head + rows


def _fields(fields: tuple[FieldChange, ...]) -> list[str]:
    lines = []
    for f in fields[:MAX_FIELDS]:
        lines += [f"- {f.text}", *(f"  {line}" for line in f.lines)]
    if len(fields) > MAX_FIELDS:
        lines.append(f"- … and {len(fields) - MAX_FIELDS} more")
    return lines


def _moved_fields(moved: Moved) -> tuple[FieldChange, ...]:
    """What else differs between an object and its renamed successor (its name aside: the heading says it)."""
    return tuple(f for f in field_changes(moved.old, moved.new) if f.path[:2] not in (("metadata", "name"),))


def summary(review: Review, stack: str, at_up: tuple[Consequence, ...] = ()) -> str:
    """One line whose every number is the length of a list below it."""
    if review.empty:
        return f"No changes: stack `{stack}` renders the same objects and Pulumi resources on both sides."
    replacing = sum(1 for c in review.changed if c.reasons)
    counts = [
        _plural(len(review.added), "object") + " to create",
        f"{len(review.removed)} to delete",
        f"{len(review.changed)} to update ({replacing} of them replaced)",
    ]
    if review.moved:
        counts.append(f"{len(review.moved)} renamed or moved (deleted and created)")
    if at_up:
        rolling = sum(1 for c in at_up if c.rolls)
        counts.append(f"{_plural(len(at_up), 'change')} at `up` ({rolling} of them roll pods)")
    tail = ""
    if review.other_added or review.other_removed or review.other_changed:
        other_replaced = sum(1 for c in review.other_changed if c.reasons)
        tail = (
            f"; other Pulumi resources: {len(review.other_added)} created, {len(review.other_removed)} deleted, "
            f"{len(review.other_changed)} changed ({other_replaced} of them replaced)"
        )
    return f"**Stack `{stack}`**: {', '.join(counts)}{tail}."


def _name(r: Resource) -> str:
    """A Pulumi resource by its type and name (the last part of its URN)."""
    return f"{r.type}::{r.name}"


def _generated(r: Resource) -> str:
    return " (a key or certificate: generated anew)" if r.type.startswith(GENERATING) else ""


def render(review: Review, stack: str, topology: str = "", at_up: tuple[Consequence, ...] = ()) -> str:
    """The comment. A review with no changes is one line. `at_up`: what changes at `up` and why
    (consequences.py)."""
    if review.empty:
        return summary(review, stack) + "\n"
    several = len(review.clusters) > 1
    out = [f"## Offline review of stack `{stack}`", "", summary(review, stack, at_up), ""]
    if at_up:
        out += [f"### Changes at `up` ({len(at_up)})", ""]
        for c in at_up:
            out.append(f"- **{_where(c.resource, several)}** {c.verb}: {'; '.join(c.reasons)}")
        out.append("")
    if review.replaced or review.moved:
        count = len(review.replaced) + len(review.moved)
        out += [f"### Replaced ({count}: deleted and created anew, not updated in place)", ""]
        for change in review.replaced:
            what = _where(change.new, several) if change.new.kubernetes else f"`{_name(change.new)}`"
            out.append(f"- **{what}**")
            out += [f"  - {reason.text}" for reason in change.reasons]
        for moved in review.moved:
            out.append(
                f"- **{_where(moved.old, several)} → {_where(moved.new, several)}**: {moved.why}; pulumi up deletes "
                "the old object and creates the new one (`metadata.name`/`metadata.namespace` are its identity)"
            )
            out += [f"  {line}" for line in _fields(_moved_fields(moved))]
        out.append("")
    for title, resources in (("Created", review.added), ("Deleted", review.removed)):
        if resources:
            out += [f"### {title} ({len(resources)})", "", *_table(resources, several), ""]
    if review.changed:
        out += [f"### Updated ({len(review.changed)})", ""]
        for change in review.changed:
            mark = " (replaced)" if change.reasons else ""
            out += [f"#### {_where(change.new, several)}{mark}", "", *_fields(change.fields), ""]
    other = len(review.other_added) + len(review.other_removed) + len(review.other_changed)
    if other:
        out += [f"### Other Pulumi resources ({other})", ""]
        out += [f"- created: `{_name(r)}`{_generated(r)}" for r in review.other_added]
        out += [f"- deleted: `{_name(r)}`" for r in review.other_removed]
        for change in review.other_changed:
            out.append(f"- changed: `{_name(change.new)}`{' (replaced)' if change.reasons else ''}")
            out += [f"  {line}" for line in _fields(change.fields)]
        out.append("")
    if topology:
        out += ["### Topology (this change's side)", "", "```mermaid", topology.rstrip("\n"), "```", ""]
    return "\n".join(out)
