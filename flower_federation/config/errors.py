"""Config problems, each tied to the config path a user would edit.

Validation collects every problem before failing, so a user fixes a stack's config in
one pass instead of one error per `pulumi preview`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Union

PathPart = Union[str, int]

ROOT = "federation"
_PLAIN_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*$")
# A value quoted in a message may hold a newline or an escape sequence (a label value pasted with its line
# break, a terminal's colour codes): printed raw it would split the problem over lines, or forge one.
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
# A run of ASCII digits: `str.isdigit` is also true of '²' or '٤', which int() refuses or reads as another number.
_NUMBER = re.compile(r"([0-9]+)")


def visible(text: str) -> str:
    """`text` with every control character written as its escape (`\\n`, `\\x1b`): one problem, one line."""
    return _CONTROL.sub(lambda m: _ESCAPES.get(m[0], f"\\x{ord(m[0]):02x}"), text)


def format_path(parts: Sequence[PathPart], root: str = ROOT) -> str:
    """`("supernodes", "pools", 1, "replicas")` -> `federation.supernodes.pools[1].replicas`.

    Keys that are not plain identifiers (label keys such as `app.kubernetes.io/name`)
    are written `["..."]` so the path stays unambiguous.
    """
    out = root
    for part in parts:
        if isinstance(part, int):
            out += f"[{part}]"
        elif _PLAIN_KEY.fullmatch(part):
            out += f".{part}"
        else:
            out += f'["{part}"]'
    return out


@dataclass(frozen=True, order=True)
class Problem:
    path: str
    message: str

    def __str__(self) -> str:
        return f"{visible(self.path)}: {visible(self.message)}"


def problem_order(p: Problem) -> tuple[tuple[tuple[int, int, str], ...], str]:
    """Natural order by path (pools[2] before pools[10]), then message: total, as each chunk is tagged with its
    kind (no int is compared with a str, as `team` and `team2` would), and digits are ASCII only."""
    chunks = _NUMBER.split(p.path)  # odd positions hold the digit runs
    return tuple((1, int(c), c) if i % 2 else (0, 0, c) for i, c in enumerate(chunks)), p.message


def problem(parts: Sequence[PathPart], message: str, root: str = ROOT) -> Problem:
    return Problem(format_path(parts, root), message)


class ConfigError(Exception):
    """Invalid stack config: every problem, once each, in the order given (load_plan
    sorts them by config path)."""

    def __init__(self, problems: Iterable[Problem]):
        unique: list[Problem] = []
        for p in problems:
            if p not in unique:
                unique.append(p)
        self.problems = unique
        super().__init__(self.render())

    def render(self) -> str:
        count = len(self.problems)
        head = f"invalid flower-federation config ({count} problem{'s' if count != 1 else ''}):"
        return "\n".join([head] + [f"  - {p}" for p in self.problems])
