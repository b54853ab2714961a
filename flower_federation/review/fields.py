"""The fields that differ between two versions of an object, by path (`spec.template.spec.containers[superlink].image`),
each with its old and new value or, where a value is secret, only that it changed."""

from __future__ import annotations

import difflib
import json
import re
from dataclasses import dataclass
from typing import Any, Optional, Union

MAX_VALUE = 100  # characters of a value shown
CONTEXT_LINES = 1  # unchanged lines shown around each changed one of a text


class _Absent:
    def __repr__(self) -> str:
        return "(absent)"


ABSENT: Any = _Absent()


@dataclass(frozen=True, order=True)
class Item:
    """A list element in a path: by its `name` where the list's elements are named (containers, env, volumes,
    ports), else by index."""

    key: str

    def __str__(self) -> str:
        return f"[{self.key}]"


Segment = Union[str, Item]
Path = tuple[Segment, ...]


def format_path(path: Path) -> str:
    out = ""
    for seg in path:
        if isinstance(seg, Item):
            out += str(seg)
        elif seg.replace("_", "").replace("-", "").isalnum():
            out += f".{seg}" if out else seg
        else:
            out += f'["{seg}"]'
    return out or "(the object)"


@dataclass(frozen=True)
class FieldChange:
    path: Path
    old: Any  # ABSENT: added
    new: Any  # ABSENT: removed
    secret: bool = False  # the value is secret: only "changed" is shown

    @property
    def text(self) -> str:
        where = f"`{format_path(self.path)}`"
        if self.secret:
            state = "added" if self.old is ABSENT else "removed" if self.new is ABSENT else "changed"
            return f"{where}: {state} (secret, value not shown)"
        return f"{where}: {show(self.old)} → {show(self.new)}"

    @property
    def lines(self) -> list[str]:
        """A multi-line text that is not secret (trusted keys with their labels, nginx.conf, a script) line by
        line: a unified diff, as a fenced block; empty for anything else."""
        texts = [v for v in (self.old, self.new) if v is not ABSENT]
        if self.secret or not all(isinstance(v, str) for v in texts) or not any("\n" in v for v in texts):
            return []
        old, new = ("" if v is ABSENT else v for v in (self.old, self.new))
        body = list(
            difflib.unified_diff(old.splitlines(), new.splitlines(), "before", "after", n=CONTEXT_LINES, lineterm="")
        )[2:]  # the ---/+++ header: the field's path says what it is
        # A fence longer than any backtick run inside, so no line of the text can close it (CommonMark).
        fence = "`" * max(3, 1 + max((len(run) for run in re.findall(r"`+", "\n".join(body))), default=0))
        return [f"{fence}diff", *body, fence]


def show(value: Any) -> str:
    if value is ABSENT:
        return "(absent)"
    if isinstance(value, str) and "\n" in value:
        return f"(text of {len(value.splitlines())} lines)"
    text = json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ": "))
    if len(text) > MAX_VALUE:
        text = text[: MAX_VALUE - 1] + "…"
    return f"`{text.replace('`', chr(0x2035))}`"


def _named(items: list[Any]) -> Optional[list[str]]:
    """The elements' names, when every element is a mapping with a distinct string `name`."""
    names = [i.get("name") if isinstance(i, dict) else None for i in items]
    if items and all(isinstance(n, str) for n in names) and len(set(names)) == len(names):
        return names  # type: ignore[return-value]
    return None


def changes(old: Any, new: Any, path: Path = ()) -> list[FieldChange]:
    """Every leaf-most difference between `old` and `new` (values as parsed JSON)."""
    if old == new:
        return []
    if isinstance(old, dict) and isinstance(new, dict):
        out: list[FieldChange] = []
        for key in sorted(set(old) | set(new), key=str):
            out += changes(old.get(key, ABSENT), new.get(key, ABSENT), (*path, str(key)))
        return out
    if isinstance(old, list) and isinstance(new, list):
        old_names, new_names = _named(old), _named(new)
        if old_names is not None and new_names is not None:
            out = []
            if set(old_names) == set(new_names) and old_names != new_names:
                out.append(FieldChange(path, old_names, new_names))  # reordered: the order shown by name
            by_old, by_new = dict(zip(old_names, old, strict=True)), dict(zip(new_names, new, strict=True))
            for name in sorted(set(old_names) | set(new_names)):
                out += changes(by_old.get(name, ABSENT), by_new.get(name, ABSENT), (*path, Item(name)))
            return out
        out = []
        for i in range(max(len(old), len(new))):
            out += changes(
                old[i] if i < len(old) else ABSENT, new[i] if i < len(new) else ABSENT, (*path, Item(str(i)))
            )
        return out
    return [FieldChange(path, old, new)]


def at(value: Any, path: Path) -> Any:
    """The value at `path` (ABSENT where there is none)."""
    for seg in path:
        if isinstance(seg, Item):
            if not isinstance(value, list):
                return ABSENT
            named = _named(value)
            if named is not None and seg.key in named:
                value = value[named.index(seg.key)]
            elif re.fullmatch(r"[0-9]+", seg.key) and int(seg.key) < len(value):
                value = value[int(seg.key)]
            else:
                return ABSENT
        elif isinstance(value, dict) and seg in value:
            value = value[seg]
        else:
            return ABSENT
    return value
