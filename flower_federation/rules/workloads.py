"""The Helm chart's workload settings: labels and annotations as Kubernetes spells them (our labels stay ours:
labels.py), node selectors, tolerations and affinity checked against the Kubernetes schema, on every component and at
the top level (the chart's `global.*`)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any, Optional

from flower_federation.config.errors import Problem, problem
from flower_federation.kube.naming import DNS1123_SUBDOMAIN, NAME_PART, NAME_PART_MAX, PREFIX_MAX, is_label_value
from flower_federation.kube.openapi import fragment_errors
from flower_federation.rules.images import pull_secrets
from flower_federation.rules.labels import Ours, our_label_problem, our_labels
from flower_federation.rules.raw import At, Pools, Raw, as_dict, as_list, get

KEY_RULE = (
    "an optional DNS subdomain prefix and '/', then at most 63 letters, digits, '-', '_' or '.', starting and ending "
    "with a letter or digit"
)


def qualified_name_problem(key: str) -> str:
    """Why `key` is not a label or annotation key ("" if it is one)."""
    prefix, _, name = key.rpartition("/")
    ok = bool(NAME_PART.fullmatch(name)) and len(name) <= NAME_PART_MAX
    if "/" in key:
        ok = ok and bool(DNS1123_SUBDOMAIN.fullmatch(prefix)) and len(prefix) <= PREFIX_MAX
    return "" if ok else f"'{key}' is not a Kubernetes key: {KEY_RULE}"


def label_value_problem(value: str) -> str:
    if is_label_value(value):
        return ""
    return (
        f"label value '{value}' is not valid in Kubernetes: at most 63 letters, digits, '-', '_' or '.', starting and "
        "ending with a letter or digit (or empty)"
    )


def label_map(at: At, value: Any, ours: Optional[Ours] = None) -> Iterator[Problem]:
    """Labels as Kubernetes spells them; with `ours`, labels that reach our objects, where ours stay ours."""
    for key, text in as_dict(value).items():
        why = qualified_name_problem(str(key)) or (our_label_problem(str(key), text, ours) if ours else "")
        if why:
            yield problem(at + (key,), why)
        if isinstance(text, str):
            why = label_value_problem(text)
            if why:
                yield problem(at + (key,), why)


def annotation_keys(at: At, value: Any) -> Iterator[Problem]:
    for key in as_dict(value):
        why = qualified_name_problem(str(key))
        if why:
            yield problem(at + (key,), why)


def schema_list(at: At, value: Any, schema: str) -> Iterator[Problem]:
    for j, item in enumerate(as_list(value)):
        for path, msg in fragment_errors(item, schema):
            yield problem(at + (j,) + path, msg)


# What each workload kind calls its update strategy, its schema, and the types Kubernetes takes.
STRATEGIES = {
    "StatefulSet": ("statefulsetupdatestrategy-apps-v1.json", ("RollingUpdate", "OnDelete")),
    "DaemonSet": ("daemonsetupdatestrategy-apps-v1.json", ("RollingUpdate", "OnDelete")),
    "Deployment": ("deploymentstrategy-apps-v1.json", ("RollingUpdate", "Recreate")),
}


def update_strategy(at: At, strategy: Any, kind: str) -> Iterator[Problem]:
    if not isinstance(strategy, dict):
        return
    schema, types = STRATEGIES[kind]
    for path, msg in fragment_errors(strategy, schema):
        yield problem(at + path, msg)
    kind_type = strategy.get("type")
    if isinstance(kind_type, str) and kind_type not in types:
        yield problem(at + ("type",), f"a {kind} takes {' or '.join(types)}, not '{kind_type}'")
    elif kind_type not in (None, "RollingUpdate") and strategy.get("rollingUpdate") is not None:
        yield problem(at + ("rollingUpdate",), f"only with type RollingUpdate, not {kind_type}")
    rolling = as_dict(strategy.get("rollingUpdate"))
    # Kubernetes' own validation: a StatefulSet must update at least one pod at a time; a
    # DaemonSet may hold all only while it surges (maxSurge above 0).
    zero = _zero(rolling.get("maxUnavailable"))
    if zero and (kind == "StatefulSet" or (kind == "DaemonSet" and not _positive(rolling.get("maxSurge")))):
        unless = "" if kind == "StatefulSet" else " unless maxSurge is above 0"
        yield problem(
            at + ("rollingUpdate", "maxUnavailable"),
            f"{rolling['maxUnavailable']!r}: a {kind} must update at least one pod at a time (Kubernetes refuses "
            f"0{unless}); leave it out (1) or set 1 or more",
        )


def _zero(value: Any) -> bool:
    return (isinstance(value, int) and not isinstance(value, bool) and value == 0) or value in ("0", "0%")


def _positive(value: Any) -> bool:
    if isinstance(value, int) and not isinstance(value, bool):
        return value > 0
    return isinstance(value, str) and bool(re.fullmatch(r"[0-9]+%?", value)) and int(value.rstrip("%")) > 0


def container_settings(at: At, section: Raw) -> Iterator[Problem]:
    lifecycle = section.get("lifecycle")
    if isinstance(lifecycle, dict):
        for path, msg in fragment_errors(lifecycle, "lifecycle-v1.json"):
            yield problem(at + ("lifecycle",) + path, msg)


def pod_settings(at: At, section: Raw, kind: str) -> Iterator[Problem]:
    """A component's pod settings (beyond labels and scheduling): its ServiceAccount, pod securityContext and update
    strategy (for its workload `kind`)."""
    yield from label_map(at + ("serviceAccount", "labels"), get(section, "serviceAccount", "labels"))
    yield from annotation_keys(at + ("serviceAccount", "annotations"), get(section, "serviceAccount", "annotations"))
    context = section.get("podSecurityContext")
    if isinstance(context, dict):
        for path, msg in fragment_errors(context, "podsecuritycontext-v1.json"):
            yield problem(at + ("podSecurityContext",) + path, msg)
    yield from update_strategy(at + ("updateStrategy",), section.get("updateStrategy"), kind)


def pod_metadata(at: At, section: Raw, ours: Ours) -> Iterator[Problem]:
    """A component's (or the top level's) labels, annotations and scheduling settings; `ours`: our labels where its
    labels go."""
    yield from label_map(at + ("labels",), section.get("labels"), ours)
    yield from label_map(at + ("podLabels",), section.get("podLabels"), ours)
    yield from annotation_keys(at + ("annotations",), section.get("annotations"))
    yield from annotation_keys(at + ("podAnnotations",), section.get("podAnnotations"))
    yield from label_map(at + ("nodeSelector",), section.get("nodeSelector"))
    yield from schema_list(at + ("tolerations",), section.get("tolerations"), "toleration-v1.json")
    affinity = section.get("affinity")
    if at and isinstance(affinity, dict):  # a component's: a Kubernetes Affinity
        for path, msg in fragment_errors(affinity, "affinity-v1.json"):
            yield problem(at + ("affinity",) + path, msg)


def components(raw: Raw, pools: Pools) -> Iterator[tuple[At, Raw, str]]:
    """Every section of config that describes one workload of ours, with the workload's kind."""
    superlink = raw.get("superlink")
    if isinstance(superlink, dict):
        yield ("superlink",), superlink, "StatefulSet"
    pool_kind = "DaemonSet" if raw.get("mode") == "DaemonSet" else "StatefulSet"
    for i, pool in pools:
        yield ("supernodes", "pools", i), pool, pool_kind


def workloads(raw: Raw, pools: Pools, stack: str) -> Iterator[Problem]:
    yield from pod_metadata((), raw, our_labels(raw, stack, ()))
    expressions = get(raw, "affinity", "nodeAffinity", "matchExpressions")
    yield from schema_list(
        ("affinity", "nodeAffinity", "matchExpressions"), expressions, "nodeselectorrequirement-v1.json"
    )
    sections = list(components(raw, pools))
    for at, section, kind in sections:
        yield from pod_metadata(at, section, our_labels(raw, stack, at))
        yield from pod_settings(at, section, kind)
        yield from container_settings(at, section)
    yield from pull_secrets([((), raw), *((at, section) for at, section, _ in sections)])
