"""Every label map config takes (a Service's `labels`, a NetworkPolicy's `ingressPodMatchLabels`, a Gateway's
`podSelector`, ...), found in the config model's schema so a new one is covered without a word here: each key and
value is checked by the label grammar at its own config path. The render's API-server limits would catch a bad one
too, but late and at whichever setting reached the object first."""

from __future__ import annotations

import re
from collections.abc import Iterator
from functools import cache
from typing import Any

from flower_federation.config import json_schema
from flower_federation.config.errors import Problem
from flower_federation.rules.raw import At, Raw
from flower_federation.rules.workloads import label_map

# A map whose name says it holds labels or selects by them (`labels`, `podLabels`, `*MatchLabels`, `*Selector`).
_LABEL_MAP_NAME = re.compile(r"(?i).*(?:labels|selector)")
ANY = "*"  # a list element or a map value on a schema path
Pattern = tuple[str, ...]


@cache
def label_map_paths() -> tuple[Pattern, ...]:
    schema = json_schema()
    out: set[Pattern] = set()

    def walk(node: dict[str, Any], path: Pattern, refs: frozenset[str]) -> None:
        ref = node.get("$ref")
        if ref in refs:
            return
        refs = refs | {ref} if ref else refs
        while "$ref" in node:
            node = schema["$defs"][node["$ref"].rsplit("/", 1)[1]]
        for alt in node.get("anyOf", []):
            walk(alt, path, refs)
        values = node.get("additionalProperties")
        is_string_map = isinstance(values, dict) and (
            "string" in str(values.get("type", "")) or any(a.get("type") == "string" for a in values.get("anyOf", []))
        )
        if is_string_map and path and _LABEL_MAP_NAME.fullmatch(path[-1]):
            out.add(path)
        for key, sub in node.get("properties", {}).items():
            walk(sub, path + (key,), refs)
        if isinstance(node.get("items"), dict):
            walk(node["items"], path + (ANY,), refs)

    walk(schema, (), frozenset())
    return tuple(sorted(out))


def _at(raw: Any, pattern: Pattern, at: At) -> Iterator[tuple[At, Any]]:
    if not pattern:
        yield at, raw
        return
    head, rest = pattern[0], pattern[1:]
    if head == ANY and isinstance(raw, list):
        for i, item in enumerate(raw):
            yield from _at(item, rest, at + (i,))
    elif head != ANY and isinstance(raw, dict) and head in raw:
        yield from _at(raw[head], rest, at + (head,))


def label_maps(raw: Raw) -> Iterator[Problem]:
    for pattern in label_map_paths():
        for at, value in _at(raw, pattern, ()):
            yield from label_map(at, value)  # a problem workloads.py reports too is listed once (ConfigError)
