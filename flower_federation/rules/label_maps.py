"""Every label map config takes (a Service's `labels`, a NetworkPolicy's `ingressPodMatchLabels`, a Gateway's
`podSelector`, ...), found in the config model itself so a new one is covered without a word here: each key and
value is checked by the label grammar at its own config path. The render's API-server limits would catch a bad one
too, but late and at whichever setting reached the object first.

The maps are found by walking the models' fields, not `json_schema()`: generating the JSON schema took a fifth of a
small stack's render (issue 36), and every `render`, `validate` and `pulumi up` runs these rules once.
tests/test_label_maps.py holds this walk to the schema's (the same paths), so the two cannot drift."""

from __future__ import annotations

import re
import types
import typing
from collections import abc
from collections.abc import Iterator
from functools import cache
from typing import Any, Literal

from pydantic import BaseModel

from flower_federation.config import Federation
from flower_federation.config.errors import Problem
from flower_federation.rules.raw import At, Raw
from flower_federation.rules.workloads import label_map

# A map whose name says it holds labels or selects by them (`labels`, `podLabels`, `*MatchLabels`, `*Selector`).
_LABEL_MAP_NAME = re.compile(r"(?i).*(?:labels|selector)")
ANY = "*"  # a list element or a map value on a schema path
Pattern = tuple[str, ...]


def _alternatives(annotation: Any) -> list[Any]:
    """The types an annotation admits: `Annotated[X, ...]` -> X, a union -> each member (None dropped)."""
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _alternatives(typing.get_args(annotation)[0])
    if origin in (typing.Union, types.UnionType):
        return [alt for arg in typing.get_args(annotation) if arg is not type(None) for alt in _alternatives(arg)]
    return [annotation]


def _is_string(annotation: Any) -> bool:
    """Whether a value of this type may be a string (what the schema says as `"type": "string"`)."""
    for alt in _alternatives(annotation):
        if alt is str or (isinstance(alt, type) and issubclass(alt, str)):
            return True
        if typing.get_origin(alt) is Literal and any(isinstance(v, str) for v in typing.get_args(alt)):
            return True
    return False


@cache
def label_map_paths() -> tuple[Pattern, ...]:
    return paths_in(Federation)


def paths_in(root: type[BaseModel]) -> tuple[Pattern, ...]:
    """The config paths of every string-valued map under `root` whose key names labels or a selector."""
    out: set[Pattern] = set()

    def walk(annotation: Any, path: Pattern, models: frozenset[type]) -> None:
        for alt in _alternatives(annotation):
            origin = typing.get_origin(alt)
            if isinstance(alt, type) and issubclass(alt, BaseModel):
                if alt in models:  # a model that holds itself: its maps were found on the first pass
                    continue
                for name, info in alt.model_fields.items():
                    walk(info.annotation, path + (info.alias or name,), models | {alt})
            elif isinstance(origin, type) and issubclass(origin, abc.Mapping):
                key_value = typing.get_args(alt)
                if len(key_value) == 2 and _is_string(key_value[1]) and path and _LABEL_MAP_NAME.fullmatch(path[-1]):
                    out.add(path)
            elif isinstance(origin, type) and issubclass(origin, (abc.Sequence, abc.Set)):
                items = [a for a in typing.get_args(alt) if a is not Ellipsis]
                if items:
                    walk(items[0], path + (ANY,), models)

    walk(root, (), frozenset())
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
