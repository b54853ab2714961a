"""Bounds on a YAML file's shape, checked on the composed nodes before anything builds or walks its values
(kube/goyaml.py): how deep it nests, and go-yaml's bound on alias expansion.

MAX_DEPTH: collections nested deeper are refused. go-yaml refuses only beyond 10,000 levels, but what reads the
values after it recurses (Pulumi's Python SDK decoding the config's JSON, pydantic, this program's rules) fails
near Python's recursion limit of 1,000 with a traceback; no config of this project, a pod template fragment
included, nests beyond about 15.

Aliases:
PyYAML builds an alias as a reference to its anchor's value: a "billion laughs" file of a few hundred bytes loads
at once, and then hangs whatever walks it (a render, a JSON dump). go-yaml (v3, which Pulumi's engine reads a
stack file with, and v2 since 2.2.8, Helm's) counts every node it decodes, an alias's whole expansion included,
and refuses the file once aliases make more than 99% of up to 400,000 decoded nodes (10% from 4,000,000 on, linear
between): "document contains excessive aliasing". It refuses an anchor whose value holds an alias of itself
too ("anchor 'a' value contains itself"), which PyYAML builds as a cycle. `check_aliasing` decodes a composed
document as decode.go's `unmarshal` does into an untyped value (mappings, `<<` merges and their `mergedFields`,
sequences, aliases), counting, and refuses where go-yaml does: the same boundary to the node, compared with a build
of go-yaml v3 on generated files (docs/troubleshooting.md)."""

from __future__ import annotations

from collections.abc import Generator
from typing import Any, Optional

import yaml

# decode.go's alias_ratio_range_low and _high.
_RATIO_LOW, _RATIO_HIGH = 400_000, 4_000_000
_MERGE = "tag:yaml.org,2002:merge"


MAX_DEPTH = 64


class ExcessiveAliasing(yaml.YAMLError):
    """The file's aliases expand beyond go-yaml's bound, or an anchor's value holds an alias of itself."""


class TooDeep(yaml.YAMLError):
    """Collections nested deeper than MAX_DEPTH (aliases expanded)."""


def allowed_alias_ratio(decoded: int) -> float:
    if decoded <= _RATIO_LOW:
        return 0.99
    if decoded >= _RATIO_HIGH:
        return 0.10
    return 0.99 - 0.89 * (decoded - _RATIO_LOW) / (_RATIO_HIGH - _RATIO_LOW)


def _children(node: yaml.Node) -> list[Any]:
    if isinstance(node, yaml.MappingNode):
        return [n for key, value in node.value for n in (key, value)]
    return list(node.value) if isinstance(node, yaml.SequenceNode) else []


def _alias_edges(root: yaml.Node) -> dict[tuple[int, int], bool]:
    """(parent, child index) -> whether that child is written there as an alias: PyYAML composes an alias as its
    anchor's node itself, so an alias is a node met again, in document order (an anchor comes before its aliases)."""
    edges: dict[tuple[int, int], bool] = {}
    seen: set[int] = set()
    pending: list[tuple[Optional[yaml.Node], int, yaml.Node]] = [(None, 0, root)]
    while pending:
        parent, i, node = pending.pop()
        if parent is not None:
            edges[(id(parent), i)] = id(node) in seen
        if id(node) not in seen:
            seen.add(id(node))
            children = _children(node)
            pending.extend((node, j, children[j]) for j in range(len(children) - 1, -1, -1))
    return edges


# A call of decode.go's unmarshal: (node, parent, index in the parent's children, alias depth, anchors expanding).
_Call = tuple[yaml.Node, Optional[yaml.Node], int, int, frozenset[int]]


class _Decode:
    def __init__(self, root: yaml.Node) -> None:
        self.edges = _alias_edges(root)
        self.decoded, self.aliased = 1, 0  # go-yaml's document node, which PyYAML's composer does not return
        self.merged: Optional[set[Any]] = None  # decode.go's mergedFields

    def count(self, depth: int) -> None:
        self.decoded += 1
        self.aliased += depth > 0
        if (
            self.aliased > 100
            and self.decoded > 1000
            and self.aliased / self.decoded > allowed_alias_ratio(self.decoded)
        ):
            raise ExcessiveAliasing("document contains excessive aliasing (go-yaml's bound on alias expansion)")

    def unmarshal(self, call: _Call) -> Generator[_Call, Any, Any]:
        node, parent, index, depth, expanding = call
        if parent is not None and self.edges[(id(parent), index)]:
            self.count(depth)  # the alias node; then its anchor's value, one alias deeper
            if id(node) in expanding:
                raise ExcessiveAliasing("an anchor's value contains an alias of itself")
            depth, expanding = depth + 1, expanding | {id(node)}
        self.count(depth)
        if isinstance(node, yaml.ScalarNode):
            return (node.tag, node.value)  # the key it makes, as far as merges compare keys
        if isinstance(node, yaml.SequenceNode):
            for i, item in enumerate(node.value):
                yield (item, node, i, depth, expanding)
            return None
        merged, self.merged = self.merged, None
        merge: Optional[tuple[yaml.Node, int]] = None
        for i, (key, _) in enumerate(node.value):
            if isinstance(key, yaml.ScalarNode) and key.tag == _MERGE:
                merge = (node.value[i][1], 2 * i + 1)
                continue
            made = yield (key, node, 2 * i, depth, expanding)
            if merged is not None:
                if made in merged:
                    continue
                merged.add(made)
            yield (node.value[i][1], node, 2 * i + 1, depth, expanding)
        self.merged = merged
        if merge is not None:
            yield from self.merge(node, merge, depth, expanding)
        return None

    def merge(self, node: yaml.Node, merge: tuple[yaml.Node, int], depth: int, expanding: frozenset[int]) -> Any:
        outer = self.merged
        if outer is None:
            self.merged = set()
            for i, (key, _) in enumerate(node.value):
                self.merged.add((yield (key, node, 2 * i, depth, expanding)))
        value, index = merge
        if isinstance(value, yaml.SequenceNode) and not self.edges[(id(node), index)]:
            for i, item in enumerate(value.value):  # the list itself is not decoded, each of its mappings is
                yield (item, value, i, depth, expanding)
        else:
            yield (value, node, index, depth, expanding)
        self.merged = outer

    def run(self, root: yaml.Node) -> None:
        """The decode, by a stack of generators rather than recursion: a file nested deeper than Python's stack
        (libyaml composes it without recursion) is counted too."""
        stack = [self.unmarshal((root, None, 0, 0, frozenset()))]
        made: Any = None
        while stack:
            try:
                call = stack[-1].send(made)
            except StopIteration as end:
                stack.pop()
                made = end.value
                continue
            made = None
            stack.append(self.unmarshal(call))


def check_depth(root: yaml.Node) -> None:
    """Refuses a document nested deeper than MAX_DEPTH (TooDeep), an alias counting as its anchor's value there,
    or whose anchor holds an alias of itself (ExcessiveAliasing, as go-yaml says it). Without recursion: the longest
    path of the node graph, each node measured once."""
    depth: dict[int, int] = {}
    open_: set[int] = set()
    pending: list[tuple[yaml.Node, bool]] = [(root, False)]
    while pending:
        node, children_done = pending.pop()
        children = _children(node)
        if children_done:
            open_.discard(id(node))
            collection = isinstance(node, (yaml.MappingNode, yaml.SequenceNode))
            depth[id(node)] = collection + max((depth[id(c)] for c in children), default=0)
            if depth[id(node)] > MAX_DEPTH:
                line = node.start_mark.line + 1
                raise TooDeep(f"line {line}: collections nested more than {MAX_DEPTH} deep")
            continue
        if id(node) in depth:
            continue
        if id(node) in open_:
            raise ExcessiveAliasing("an anchor's value contains an alias of itself")
        open_.add(id(node))
        pending.append((node, True))
        pending.extend((c, False) for c in children if id(c) not in depth)


def check_aliasing(root: yaml.Node) -> None:
    """Refuses (ExcessiveAliasing) a composed document that go-yaml would refuse for its aliases."""
    _Decode(root).run(root)


def check_bounds(root: yaml.Node) -> None:
    """Both checks, depth first: it also refuses a cycle, which the alias count would follow for long."""
    check_depth(root)
    check_aliasing(root)
