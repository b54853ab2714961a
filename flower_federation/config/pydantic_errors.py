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

# The tags pydantic puts in an error's location for each branch of a scalar union (`Int32 | str`: a count or a
# percentage), by the Python type a branch takes.
_SCALAR_TAGS = {"int": int, "constrained-int": int, "str": str, "constrained-str": str}


def pydantic_problems(err: pydantic.ValidationError) -> list[Problem]:
    out = []
    unions: dict[tuple[Any, ...], list[tuple[type, Any]]] = {}
    for e in err.errors():
        # An image's union tags name no config key.
        loc = tuple(part for part in e["loc"] if part not in (STRING_TAG, OBJECT_TAG))
        if loc and loc[-1] in _SCALAR_TAGS:
            unions.setdefault(loc[:-1], []).append((_SCALAR_TAGS[str(loc[-1])], e))
        elif e["type"] == "extra_forbidden":
            out.append(problem(loc, _unknown_key_message(loc)))
        else:
            out.append(problem(loc, _message(loc, e["type"], e["msg"], e.get("input"))))
    for loc, branches in unions.items():
        # One problem at the key itself: the branch of the value's own type says what is wrong with it; a value of
        # neither type is told what both take.
        given = branches[0][1].get("input")
        own = [e for kind, e in branches if type(given) is kind]
        if own:
            out.append(problem(loc, _message(loc, own[0]["type"], own[0]["msg"], given)))
        else:
            kinds = " or ".join(sorted({"a whole number" if kind is int else "a string" for kind, _ in branches}))
            out.append(problem(loc, f"must be {kinds}, not {shown(given)}"))
    return out


# What YAML 1.1 (PyYAML, Helm's go-yaml v2) reads as booleans and YAML 1.2, which Pulumi reads stack files with,
# as strings.
YAML_1_1_BOOLEANS = {"yes", "no", "on", "off", "y", "n"}
# Longest value a message quotes whole.
QUOTED = 60
# Pydantic's messages that state only the rule ("Input should be greater than or equal to 1"): the value given is
# appended, so a problem always says what was found.
QUOTING = frozenset(
    {"int_from_float", "greater_than", "greater_than_equal", "less_than", "less_than_equal", "string_pattern_mismatch"}
)


def shown(value: Any) -> str:
    """A value given, quoted as Python would (short ones whole, long ones cut)."""
    text = repr(value)
    if isinstance(value, float) and value.is_integer() and not -(2**63) <= value <= 2**64 - 1:
        # A whole number written beyond 64 bits (99999999999999999999999): Pulumi's reader, as go-yaml, makes it
        # the float 1e+23, which is all the program is given: say why it reads so unlike what was written.
        return f"{text} (a whole number beyond 64 bits, which Pulumi reads as a float)"
    return text if len(text) <= QUOTED else f"{text[: QUOTED - 3]}..."


def _message(loc: tuple[Any, ...], kind: str, msg: str, given: Any) -> str:
    """Pydantic's message, saying what was found besides what was expected."""
    if loc == ("version",) and kind == "string_type":
        return f'must be a string; quote it in YAML, e.g. version: "{given}.0"'
    if kind in ("model_type", "dict_type"):
        return f"must be a mapping, not {shown(given)}"
    if kind in ("bool_type", "bool_parsing"):
        msg = f"must be true or false, not {shown(given)}"
        if isinstance(given, str) and given.lower() in YAML_1_1_BOOLEANS:
            msg += (
                f" (a string: Pulumi reads stack files as YAML 1.2, where yes, no, on and off are strings, not "
                f"booleans; write {'true' if given.lower() in ('yes', 'on', 'y') else 'false'})"
            )
        return msg
    if kind == "literal_error" or kind.endswith(("_type", "_parsing")) or kind in QUOTING:
        return f"{msg}, not {shown(given)}"
    return msg


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
