"""rules/label_maps.py finds the label maps by walking the config models (issue 36: generating the JSON schema for
it cost a fifth of a small render). The JSON schema stays the reference: the walk must find exactly the paths a walk
of `json_schema()` finds, so a field type the model walk misreads fails here, not in a user's config."""

from __future__ import annotations

import sys
from typing import Annotated, Any, Literal, Optional, Union

import pytest
from pydantic import Field

from flower_federation.config import json_schema
from flower_federation.config.base import Model
from flower_federation.rules.label_maps import _LABEL_MAP_NAME, ANY, Pattern, label_map_paths, paths_in

label_maps_module = sys.modules["flower_federation.rules.label_maps"]  # rules/__init__ shadows it by a function


def schema_paths(schema: dict[str, Any]) -> tuple[Pattern, ...]:
    """The label maps of a JSON schema: string-valued maps (`additionalProperties` of type string) named so."""
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


def test_the_model_walk_finds_the_label_maps_the_schema_has() -> None:
    found = label_map_paths()
    assert found == schema_paths(json_schema())
    assert ("networkPolicy", "ingressPodMatchLabels") in found and len(found) > 20


class _Inner(Model):
    pod_labels: Optional[dict[str, str]] = None
    match_labels: dict[str, Union[int, Literal["a", "b"]]] = {}
    selector_count: dict[str, int] = {}  # not string-valued: no label map
    annotations: dict[str, str] = {}  # string-valued, but not named for labels


class _Outer(Model):
    items: list[_Inner] = []
    by_name: Annotated[Optional[_Inner], Field(description="x")] = None
    node_selector: dict[str, str] = {}


def test_the_walk_reads_lists_unions_and_annotations_as_the_schema_does() -> None:
    """A synthetic model with each shape the walk must read (and two it must skip): both walks agree on it."""
    expected = (
        ("byName", "matchLabels"),
        ("byName", "podLabels"),
        ("items", ANY, "matchLabels"),
        ("items", ANY, "podLabels"),
        ("nodeSelector",),
    )
    assert schema_paths(_Outer.model_json_schema(by_alias=True)) == expected
    assert paths_in(_Outer) == expected


def test_negative_control_a_walk_blind_to_optional_fields_misses_maps_the_schema_has(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The comparison can fail: with unions not looked into, `Optional[...]` label maps go unseen and differ."""
    monkeypatch.setattr(label_maps_module, "_alternatives", lambda annotation: [annotation])
    assert paths_in(_Outer) == (("nodeSelector",),)
    assert paths_in(_Outer) != schema_paths(_Outer.model_json_schema(by_alias=True))
