"""What both importers share: a refusal by the source's own path, the stack being built
(with where each config value came from), and checking the result with the project's own
validation, so an import never prints a config `pulumi up` would reject."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Optional, Union

from flower_federation.config.errors import ConfigError, PathPart, format_path
from flower_federation.flower.layout import TELEMETRY_ENV
from flower_federation.flower.public_keys import CONFIG_KEY as NODE_KEYS_KEY

Parts = tuple[PathPart, ...]
_PART = re.compile(r"([^.\[\]]+)|\[([^\]]+)\]")
# A validation problem about an object name's length: its source is what makes the name.
_NAME_LENGTH = re.compile(r"^object name '[^']*' has \d+ characters")
_POOL = re.compile(r"^federation\.supernodes\.pools\[([0-9]+)\]")


def flow(value: Any) -> str:
    """A value as YAML writes it inline (`true`, `{readOnlyRootFilesystem: false}`)."""
    import yaml

    return str(yaml.safe_dump(value, default_flow_style=True, width=10_000)).strip().removesuffix("...").strip()


def parts_of(path: str) -> Parts:
    """`supernodes.pools[0].podTemplate.spec.containers[supernode]` -> its parts: `[0]` is a
    list index, `[name]` the item of a list of named items (containers) with that name."""
    out: list[PathPart] = []
    for m in _PART.finditer(path):
        key, index = m.group(1), m.group(2)
        out.append(key if key is not None else (int(index) if re.fullmatch(r"[0-9]+", index) else f"[{index}]"))
    return tuple(out)


def get_path(data: Any, parts: Parts) -> Any:
    for part in parts:
        if isinstance(part, str) and part.startswith("["):
            data = next((i for i in data or [] if isinstance(i, dict) and i.get("name") == part[1:-1]), None)
        elif isinstance(part, int):
            data = data[part] if isinstance(data, list) and part < len(data) else None
        else:
            data = data.get(part) if isinstance(data, dict) else None
        if data is None:
            return None
    return data


def set_path(data: dict[str, Any], parts: Parts, value: Any) -> None:
    """Set `value` at `parts`, making the mappings and lists on the way (a `[name]` part makes
    the named item of a list)."""
    node: Any = data
    for i, part in enumerate(parts):
        last = i == len(parts) - 1
        nxt: Any = [] if not last and (isinstance(parts[i + 1], int) or str(parts[i + 1]).startswith("[")) else {}
        if isinstance(part, str) and part.startswith("["):
            name = part[1:-1]
            item = next((x for x in node if x.get("name") == name), None)
            if item is None:
                item = {"name": name}
                node.append(item)
            if last:
                item.update(value)
            node = item
        elif isinstance(part, int):
            while len(node) <= part:
                node.append({})
            if last:
                node[part] = value
            node = node[part]
        else:
            if last:
                node[part] = value
            else:
                node = node.setdefault(part, nxt)


@dataclass(frozen=True, order=True)
class Refusal:
    """A source value the import cannot carry over: its path in the source, and why.
    `droppable` ones are dropped (and listed) with --allow-drop; the others never are."""

    path: str
    reason: str
    droppable: bool = True

    def __str__(self) -> str:
        return f"{self.path}: {self.reason}"


class ImportRefused(Exception):
    """Every problem of one source at once."""

    def __init__(self, source: str, refusals: Iterable[Refusal]):
        self.refusals = sorted(set(refusals))
        count = len(self.refusals)
        head = f"cannot import {source} ({count} problem{'s' if count != 1 else ''}):"
        lines = [head] + [f"  - {r}" for r in self.refusals]
        if self.refusals and all(r.droppable for r in self.refusals):  # else a rerun with it would fail too
            lines.append("(rerun with --allow-drop to leave these out; the output lists each)")
        super().__init__("\n".join(lines))


Note = Union[str, tuple[str, str]]  # a comment line, or (label, text)


@dataclass
class Stack:
    """One imported stack: the `flower-federation:federation` value, where its values came
    from, and what the stack file says about it in comments."""

    stack: str
    origin: str  # what was imported, in words
    command: str  # the command line that imported it
    config: dict[str, Any] = field(default_factory=dict)
    provenance: dict[Parts, str] = field(default_factory=dict)
    names: list[str] = field(default_factory=list)
    differences: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    secrets: list[str] = field(default_factory=list)
    # The secret config's offline form (YAML lines under `config:`), for `validate`/`render` of a copy of the file.
    offline_secrets: list[str] = field(default_factory=list)
    # The source's settings that name the federation and a pool (`{pool}`: the pool's index), which an object name
    # too long is shortened with.
    name_settings: tuple[str, str] = ("", "")
    dropped: list[Refusal] = field(default_factory=list)
    refusals: list[Refusal] = field(default_factory=list)

    def set(self, path: Union[str, Parts], value: Any, source: str) -> None:
        parts = parts_of(path) if isinstance(path, str) else path
        set_path(self.config, parts, value)
        self.provenance.setdefault(parts, source)

    def left_unset(self, path: str, source: str) -> None:
        """A config path left unset because `source` was refused: a problem there (a required value missing) comes
        of that refusal, and is not said besides it."""
        self.provenance.setdefault(parts_of(path), source)

    def refuse(self, path: str, reason: str, droppable: bool = True) -> None:
        self.refusals.append(Refusal(path, reason, droppable))

    def settle(
        self, allow_drop: bool, check: Optional[Callable[[Stack, frozenset[str]], list[Refusal]]] = None
    ) -> None:
        """With --allow-drop, droppable refusals become dropped values; raise with the rest,
        and with the problems `check` (the project's validation) finds in what would be
        written with the droppable ones dropped, so that one rerun with --allow-drop meets no
        problem that could have been said now. Problems that come of a refused value are left
        out (they would go with it)."""
        keep = [r for r in self.refusals if not (allow_drop and r.droppable)]
        if allow_drop:
            self.dropped = sorted({r for r in self.refusals if r.droppable})
        if keep:
            found = check(self, frozenset(r.path for r in self.refusals)) if check is not None else []
            raise ImportRefused(self.origin, keep + found)
        self.refusals = []

    def source_of(self, config_path: str) -> Optional[str]:
        """The source path a validation problem's config path came from (longest match)."""
        best: Optional[tuple[int, str]] = None
        for parts, source in self.provenance.items():
            prefix = format_path(parts)
            under = config_path == prefix or config_path.startswith((prefix + ".", prefix + "["))
            if under and (best is None or len(prefix) > best[0]):
                best = (len(prefix), source)
        return best[1] if best else None


def problems(stack: Stack, refused: frozenset[str] = frozenset()) -> list[Refusal]:
    """The project's own validation of what was built; its problems are refusals (never
    droppable: the source asked for something the config cannot be), each naming the source
    path it came from. Node keys supplied later as secret config are left out, and so are
    problems that come of a `refused` source path."""
    from flower_federation.plan import load_plan

    try:
        load_plan(stack.config, stack.stack)
    except ConfigError as err:
        found = []
        for p in err.problems:
            if p.path.startswith(NODE_KEYS_KEY):
                continue  # set afterwards with `pulumi config set --secret` (the stack file says how)
            source = _source(stack, p.path, p.message)
            if source and _comes_of(source, refused):
                continue
            where = f"{p.path} (from {source})" if source else p.path
            found.append(Refusal(where, p.message + _shorten(stack, p.path, p.message), droppable=False))
        return found
    return []


def _shorten(stack: Stack, path: str, message: str) -> str:
    """For an object name too long: which of the source's settings shortens it."""
    federation, pool = stack.name_settings
    if not _NAME_LENGTH.match(message) or not federation:
        return ""
    if m := _POOL.match(path):
        setting = pool.format(pool=m.group(1))
        return f": set {federation} (the federation's name) or {setting} (the pool's) shorter"
    return f": set {federation} (the federation's name) shorter"


def _comes_of(source: str, refused: frozenset[str]) -> bool:
    """Whether a source (`a, b`, `supernode.image.*`, `x (the chart's default)`) names a refused path."""
    for part in re.split(r"[,;]| and ", source):
        path = part.split(" (")[0].strip()
        if path in refused or (path.endswith(".*") and any(r.startswith(path[:-1]) for r in refused)):
            return True
    return False


def _source(stack: Stack, path: str, message: str) -> Optional[str]:
    """Where a problem came from; an object name too long comes of the names that make it
    (the federation's name, and the pool's), whatever setting the problem is reported at."""
    if not _NAME_LENGTH.match(message):
        return stack.source_of(path)
    paths: list[tuple[PathPart, ...]] = [("name",)]
    if m := _POOL.match(path):
        paths.append(("supernodes", "pools", int(m.group(1)), "name"))
    sources = [s for parts in paths if (s := stack.source_of(format_path(parts)))]
    return "; ".join(dict.fromkeys(sources)) or stack.source_of(path)


def validate(stack: Stack) -> None:
    """Raise ImportRefused with every problem of `problems`."""
    found = problems(stack)
    if found:
        raise ImportRefused(stack.origin, found)


TELEMETRY = (
    "Telemetry: Flower sends usage events (its version, the OS, CPU count, a random id) to telemetry.flower.ai "
    "unless FLWR_TELEMETRY_ENABLED=0, which {where} leaves unset; here every Flower container gets "
    "FLWR_TELEMETRY_ENABLED=0 (the NetworkPolicies deny that egress anyway). "
)


def telemetry_set_in(envs: list[object]) -> bool:
    """Whether any of these env lists names FLWR_TELEMETRY_ENABLED (then the import keeps the user's value)."""
    return any(
        isinstance(e, dict) and e.get("name") == TELEMETRY_ENV for env in envs if isinstance(env, list) for e in env
    )
