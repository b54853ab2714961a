"""A review as the Markdown of a pull-request comment: a summary line, what is replaced and why, the objects
created, deleted and updated (with their changed fields; secret values never), the other Pulumi resources, and the
new side's topology as a Mermaid diagram (GitHub draws it)."""

from __future__ import annotations

from flower_federation.review.changes import Changed, Resource, Review

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


def _fields(change: Changed) -> list[str]:
    lines = [f"- {f.text}" for f in change.fields[:MAX_FIELDS]]
    if len(change.fields) > MAX_FIELDS:
        lines.append(f"- … and {len(change.fields) - MAX_FIELDS} more")
    return lines


def summary(review: Review, stack: str) -> str:
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
    other = len(review.other_added) + len(review.other_removed) + len(review.other_changed)
    tail = f"; {_plural(other, 'other Pulumi resource')} created, deleted or changed" if other else ""
    return f"**Stack `{stack}`**: {', '.join(counts)}{tail}."


def _name(r: Resource) -> str:
    """A Pulumi resource by its type and name (the last part of its URN)."""
    return f"{r.type}::{r.name}"


def _generated(r: Resource) -> str:
    return " (a key or certificate: generated anew)" if r.type.startswith(GENERATING) else ""


def render(review: Review, stack: str, topology: str = "") -> str:
    """The comment. A review with no changes is one line."""
    if review.empty:
        return summary(review, stack) + "\n"
    several = len(review.clusters) > 1
    out = [f"## Offline review of stack `{stack}`", "", summary(review, stack), ""]
    if review.replaced or review.moved:
        out += ["### Replaced (deleted and created anew, not updated in place)", ""]
        for change in review.replaced:
            what = _where(change.new, several) if change.new.kubernetes else f"`{_name(change.new)}`"
            out.append(f"- **{what}**")
            out += [f"  - {reason.text}" for reason in change.reasons]
        for moved in review.moved:
            out.append(
                f"- **{_where(moved.old, several)} → {_where(moved.new, several)}**: {moved.why}; pulumi up deletes "
                "the old object and creates the new one (`metadata.name`/`metadata.namespace` are its identity)"
            )
        out.append("")
    for title, resources in (("Created", review.added), ("Deleted", review.removed)):
        if resources:
            out += [f"### {title} ({len(resources)})", "", *_table(resources, several), ""]
    if review.changed:
        out += [f"### Updated ({len(review.changed)})", ""]
        for change in review.changed:
            mark = " (replaced)" if change.reasons else ""
            out += [f"#### {_where(change.new, several)}{mark}", "", *_fields(change), ""]
    if review.other_added or review.other_removed or review.other_changed:
        out += ["### Other Pulumi resources", ""]
        out += [f"- created: `{_name(r)}`{_generated(r)}" for r in review.other_added]
        out += [f"- deleted: `{_name(r)}`" for r in review.other_removed]
        for change in review.other_changed:
            out.append(f"- changed: `{_name(change.new)}`{' (replaced)' if change.reasons else ''}")
            out += [f"  {line}" for line in _fields(change)]
        out.append("")
    if topology:
        out += ["### Topology (this change's side)", "", "```mermaid", topology.rstrip("\n"), "```", ""]
    return "\n".join(out)
