"""Pydantic's validation errors as config problems: each at the config path a user edits (union tags of image
fields left out), an unknown key with the nearest valid one suggested."""

from __future__ import annotations

import difflib
import typing
from typing import Any, Optional

import pydantic

from flower_federation.config import Federation, Model
from flower_federation.config.base import field_type
from flower_federation.config.errors import Problem, problem
from flower_federation.config.images import OBJECT_TAG, STRING_TAG


def pydantic_problems(err: pydantic.ValidationError) -> list[Problem]:
    out = []
    for e in err.errors():
        # An image's union tags name no config key.
        loc = tuple(part for part in e["loc"] if part not in (STRING_TAG, OBJECT_TAG))
        if e["type"] == "extra_forbidden":
            out.append(problem(loc, _unknown_key_message(loc)))
        else:
            msg = e["msg"]
            if e["type"] in ("model_type", "dict_type"):
                msg = "must be a mapping"
            elif e["type"] == "literal_error":  # say what was found, not only what was expected
                msg = f"{msg}, not {e['input']!r}"
            elif loc == ("version",) and e["type"] == "string_type":
                msg = f'must be a string; quote it in YAML, e.g. version: "{e["input"]}.0"'
            out.append(problem(loc, msg))
    return out


def _unknown_key_message(loc: tuple[Any, ...]) -> str:
    key = str(loc[-1])
    model = _model_at(loc[:-1])
    valid = sorted(f.alias or n for n, f in model.model_fields.items()) if model else []
    close = difflib.get_close_matches(key, valid, n=1, cutoff=0.6)
    if close:
        return f"unknown key '{key}'; did you mean '{close[0]}'?"
    return f"unknown key '{key}'; valid keys: {', '.join(valid)}"


def _model_at(loc: tuple[Any, ...]) -> Optional[type[Model]]:
    """The config model class found at a config path, following lists and Optionals."""
    current: Any = Federation
    for part in loc:
        current = field_type(current)
        if isinstance(part, int):
            args = typing.get_args(current)
            current = args[0] if args else None
            continue
        if not (isinstance(current, type) and issubclass(current, Model)):
            return None
        by_alias = {(f.alias or n): f for n, f in current.model_fields.items()}
        if part not in by_alias:
            return None
        current = by_alias[part].annotation
    current = field_type(current)
    return current if isinstance(current, type) and issubclass(current, Model) else None
