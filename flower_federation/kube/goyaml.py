"""YAML read as the Go programs that read each file for real, not as PyYAML reads it.

PyYAML is YAML 1.1 its own way: a float needs a dot there (`1e-3` is a string), `1:30` is a
base-60 integer and `2024-01-01` a date. What a user's file means is what Helm, kubectl or
Pulumi make of it, and they read it with go-yaml, where `1e-3` is the float 0.001 and `1:30`
and `2024-01-01` are strings. Two loaders, each the one of the tool that reads the file:

- `HelmLoader`, go-yaml v2: Helm reads a values file with it, kubectl a manifest (a CR) through
  sigs.k8s.io/yaml. YAML 1.1 booleans: y, yes, on, true, n, no, off, false, each also
  Capitalised and UPPER.
- `PulumiLoader`, go-yaml v3 (YAML 1.2 core schema): Pulumi's engine reads a stack file with it.
  Only true and false (True, TRUE, False, FALSE) are booleans; `yes` and `on` are strings.

Both read numbers as go-yaml's resolve.go does, for a scalar that starts with a digit, a sign or
a dot: with every `_` dropped, an integer where Go's strconv.ParseInt/ParseUint with base 0 take
it (decimal, 0x.., 0o.., 0b.., 0.. octal), else a float where it matches Go's
`^[-+]?(\\.[0-9]+|[0-9]+(\\.[0-9]*)?)([eE][-+]?[0-9]+)?$` (and .inf, .nan). Anything else is a
string: dates and times too (go-yaml gives them to an untyped value as the string) and `=`.
Null and `<<` merges are PyYAML's, the same as go-yaml's.

A key written twice in one mapping: go-yaml v3 (Pulumi) refuses the file, naming both lines
(`DuplicateKeys`); go-yaml v2 (Helm's non-strict Unmarshal) keeps the last, as PyYAML does.

`StackDumper` writes a stack file both Pulumi and a YAML 1.1 reader read back as written: it
quotes a string either would take for something else (`"1e-3"` for Pulumi, `"yes"` for PyYAML).

Built on libyaml's C loader where PyYAML has it: it calls the same Python resolver and
constructors, so the two read alike (tests/test_goyaml.py)."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Optional

import yaml

from flower_federation.kube.yaml_bounds import check_bounds

BOOL, INT, FLOAT = "tag:yaml.org,2002:bool", "tag:yaml.org,2002:int", "tag:yaml.org,2002:float"
# PyYAML's resolvers that go-yaml reads otherwise; null, merge and the rest stay.
_REPLACED = {BOOL, INT, FLOAT, "tag:yaml.org,2002:timestamp", "tag:yaml.org,2002:value"}

YAML_1_1_BOOLEANS = {
    **{w: True for word in ("y", "yes", "on", "true") for w in (word, word.capitalize(), word.upper())},
    **{w: False for word in ("n", "no", "off", "false") for w in (word, word.capitalize(), word.upper())},
}
YAML_1_2_BOOLEANS = {"true": True, "True": True, "TRUE": True, "false": False, "False": False, "FALSE": False}
SPECIAL_FLOATS = {
    **{f"{sign}.{w}": math.inf for sign in ("", "+") for w in ("inf", "Inf", "INF")},
    **{f"-.{w}": -math.inf for w in ("inf", "Inf", "INF")},
    **{f".{w}": math.nan for w in ("nan", "NaN", "NAN")},
}
# Go's strconv.ParseInt(s, 0, 64) syntax, and go-yaml's float regex (yamlStyleFloat).
_GO_INT = re.compile(r"([-+]?)(0[xX][0-9a-fA-F]+|0[bB][01]+|0[oO][0-7]+|0[0-7]*|[1-9][0-9]*)")
_GO_FLOAT = re.compile(r"[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?")
_BASES = {"x": 16, "X": 16, "b": 2, "B": 2, "o": 8, "O": 8}


def _go_int(plain: str) -> Optional[int]:
    m = _GO_INT.fullmatch(plain)
    if not m:
        return None
    sign, digits = m.groups()
    if len(digits) > 1 and digits[1] in _BASES:
        value = int(digits[2:], _BASES[digits[1]])
    else:
        value = int(digits, 8 if len(digits) > 1 else 10) if digits[0] == "0" else int(digits)
    value = -value if sign == "-" else value
    # ParseInt's int64, else ParseUint's uint64 (which takes no sign); beyond: not an integer.
    top = 2**63 - 1 if sign else 2**64 - 1
    return value if -(2**63) <= value <= top else None


def go_number(text: str) -> Optional[int | float]:
    """The number go-yaml reads `text` (a plain scalar) as, or None where it reads no number."""
    if text in SPECIAL_FLOATS:
        return SPECIAL_FLOATS[text]
    if not text or text[0] not in "+-.0123456789":
        return None
    if text[0] == ".":  # strconv.ParseFloat of the text itself, which takes no `_` here
        return float(text) if _GO_FLOAT.fullmatch(text) else None
    plain = text.replace("_", "")
    number = _go_int(plain)
    if number is not None:
        return number
    if _GO_FLOAT.fullmatch(plain):
        value = float(plain)
        return None if math.isinf(value) else value  # ParseFloat's range error: a string
    return None


def _go_tag(value: str, booleans: dict[str, bool]) -> Optional[str]:
    if value in booleans:
        return BOOL
    number = go_number(value)
    if number is None:
        return None
    return INT if isinstance(number, int) else FLOAT


if TYPE_CHECKING:
    _Mixin = yaml.SafeLoader
else:
    _Mixin = object


class GoResolution(_Mixin):
    """go-yaml's reading of plain scalars, mixed in before a PyYAML loader; `BOOLEANS` says which
    words are booleans. A subclass gets PyYAML's implicit resolvers without those go-yaml reads
    otherwise, and constructors for what it resolves instead."""

    BOOLEANS: dict[str, bool] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls.yaml_implicit_resolvers = {
            first: [(tag, regexp) for tag, regexp in resolvers if tag not in _REPLACED]
            for first, resolvers in cls.yaml_implicit_resolvers.items()
        }
        cls.add_constructor(BOOL, cls.construct_go_bool)
        cls.add_constructor(INT, cls.construct_go_number)
        cls.add_constructor(FLOAT, cls.construct_go_number)

    def resolve(self, kind: Any, value: Any, implicit: Any) -> Any:
        if kind is yaml.ScalarNode and implicit[0]:
            tag = _go_tag(value, self.BOOLEANS)
            if tag is not None:
                return tag
        return super().resolve(kind, value, implicit)  # type: ignore[no-untyped-call]

    def construct_go_bool(self, node: yaml.ScalarNode) -> Any:
        value = self.construct_scalar(node)
        return self.BOOLEANS[value] if value in self.BOOLEANS else self.construct_yaml_bool(node)

    def construct_go_number(self, node: yaml.ScalarNode) -> Any:
        number = go_number(str(self.construct_scalar(node)))
        if number is None:  # an explicit !!int or !!float of another spelling: PyYAML's reading
            return self.construct_yaml_float(node) if node.tag == FLOAT else self.construct_yaml_int(node)
        return float(number) if node.tag == FLOAT else number


# libyaml's parser where PyYAML has it (faster): it calls the same Python resolver and constructors.
_Base: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class HelmLoader(GoResolution, _Base):  # type: ignore[valid-type,misc]
    """go-yaml v2: Helm values files, and manifests kubectl applies (sigs.k8s.io/yaml)."""

    BOOLEANS = YAML_1_1_BOOLEANS


class PulumiLoader(GoResolution, _Base):  # type: ignore[valid-type,misc]
    """go-yaml v3: Pulumi stack files, as Pulumi's engine reads them."""

    BOOLEANS = YAML_1_2_BOOLEANS


class StackDumper(yaml.SafeDumper):
    """A stack file's writer: a string is quoted where Pulumi (go-yaml v3) or a YAML 1.1 reader
    (PyYAML, go-yaml v2) would read it unquoted as anything but that string."""

    def resolve(self, kind: Any, value: Any, implicit: Any) -> Any:
        if kind is yaml.ScalarNode and implicit[0]:
            tag = _go_tag(value, YAML_1_1_BOOLEANS)
            if tag is not None:
                return tag
        return super().resolve(kind, value, implicit)  # type: ignore[no-untyped-call]


@dataclass(frozen=True)
class DuplicateKey:
    """A key written a second time in one mapping: `path` the mapping's keys from the top (a key's own
    text, `[i]` a list index), lines 1-based as editors count them."""

    path: str
    key: str
    line: int
    first_line: int


class DuplicateKeys(yaml.YAMLError):
    """Every key written twice in its mapping, as go-yaml v3 refuses them ("mapping key ... already defined at
    line N"), all at once."""

    def __init__(self, duplicates: list[DuplicateKey]) -> None:
        self.duplicates = sorted(duplicates, key=lambda d: d.line)
        super().__init__(
            "; ".join(
                f"line {d.line}: mapping key {d.key!r} already defined at line {d.first_line}" for d in self.duplicates
            )
        )


def _duplicate_keys(node: yaml.Node, path: str, found: list[DuplicateKey], seen: set[int]) -> None:
    """go-yaml v3's uniqueKeys check: two keys of one mapping are the same when both are scalars of the same
    text (quoting aside: `1` and `"1"` collide there too); `<<` merges are not keys. `seen` guards aliases."""
    if id(node) in seen:
        return
    seen.add(id(node))
    if isinstance(node, yaml.MappingNode):
        first: dict[str, int] = {}
        for key, value in node.value:
            if isinstance(key, yaml.ScalarNode) and key.tag != "tag:yaml.org,2002:merge":
                line = key.start_mark.line + 1
                if key.value in first:
                    found.append(DuplicateKey(path, key.value, line, first[key.value]))
                else:
                    first[key.value] = line
            label = key.value if isinstance(key, yaml.ScalarNode) else "?"
            _duplicate_keys(value, f"{path}.{label}" if path else label, found, seen)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            _duplicate_keys(item, f"{path}[{i}]", found, seen)


def load_helm_values(text: str) -> list[Any]:
    """Every document of a values file or manifest, as Helm and kubectl read it."""
    loader = HelmLoader(text)
    try:
        documents = []
        while loader.check_node():
            node = loader.get_node()
            if node is not None:
                check_bounds(node)
            documents.append(loader.construct_document(node))
        return documents
    finally:
        loader.dispose()


def load_stack_file(text: str) -> Any:
    """A Pulumi stack settings file, as Pulumi reads it: DuplicateKeys where it holds a key twice in a mapping."""
    loader = PulumiLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        check_bounds(node)  # first: the walk below recurses
        duplicates: list[DuplicateKey] = []
        _duplicate_keys(node, "", duplicates, set())
        if duplicates:
            raise DuplicateKeys(duplicates)
        return loader.construct_document(node)
    finally:
        loader.dispose()
