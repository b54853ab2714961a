"""The examples of the two documents the importers read, taken from the markdown itself so a
new example is picked up: copies of ../shared/seeds/, the Helm chart's guide in
docs/reference/ (where `import helm` reads the chart's defaults) and the flower-operator
README in tests/seeds/ (tests check both are current where ../shared exists).

The chart guide's YAML lost its indentation in that copy (every line starts at column 0).
`nest` puts it back from the guide's own Parameters tables: a key goes under the deepest
open mapping where its path is a parameter (or a prefix of one), else into the deepest open
free-form parameter (`supernode.node.config`, `superexec.supernode`); a block scalar's lines
go under its key. Anything it cannot place fails the test that reads it. Values are read as
Helm reads them (flower_federation/kube/goyaml.py)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

import yaml

from flower_federation.kube.goyaml import HelmLoader

ROOT = Path(__file__).resolve().parents[2]
HELM_GUIDE = ROOT / "docs" / "reference" / "flower-supernode-helm-chart.md"
OPERATOR_README = ROOT / "tests" / "seeds" / "flower-operator-readme.md"

_FENCE = re.compile(r"^```([^\n]*)\n(.*?)^```$", re.S | re.M)
_ROW = re.compile(r"^\|\s*`([^`]+)`\s*\|.*\|\s*`(.*)`\s*\|\s*$")
_KEY = re.compile(r"^([A-Za-z0-9_.-]+):(?:\s+(.*))?$")


def text(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def chart_parameters() -> dict[str, Any]:
    """Every row of the guide's Parameters tables: path -> the default its Value column gives."""
    out: dict[str, Any] = {}
    for line in text(HELM_GUIDE).splitlines():
        m = _ROW.match(line)
        if m:
            out[m.group(1)] = yaml.load(m.group(2), Loader=HelmLoader)
    return out


def _blocks(doc: str) -> list[tuple[str, str, int]]:
    return [(m.group(1), m.group(2), m.start()) for m in _FENCE.finditer(doc)]


def nest(flat: str, parameters: dict[str, Any]) -> str:
    """The guide's flattened YAML, indented again (see the module's docstring)."""
    known = set(parameters)
    prefixes = {".".join(p.split(".")[:i]) for p in known for i in range(1, len(p.split(".")))}
    free = {p for p, default in parameters.items() if default == {}}
    stack: list[str] = []
    block_depth: Optional[int] = None
    out = []
    for line in flat.splitlines():
        if not line.strip():
            continue
        m = _KEY.match(line)
        if block_depth is not None and not m:
            out.append("  " * block_depth + line)
            continue
        block_depth = None
        if not m:
            raise ValueError(f"cannot place {line!r}")
        key, rest = m.group(1), m.group(2)
        depth = next(
            (d for d in range(len(stack), -1, -1) if ".".join([*stack[:d], key]) in known | prefixes),
            None,
        )
        if depth is None:
            depth = next(
                (d for d in range(len(stack), 0, -1) if any(".".join(stack[:i]) in free for i in range(1, d + 1))),
                None,
            )
        if depth is None:
            raise ValueError(f"{line!r} is no parameter under {'.'.join(stack) or 'the top level'}")
        stack = stack[:depth]
        out.append("  " * depth + line)
        if not rest:
            stack.append(key)
        elif rest.startswith(("|", ">")):
            block_depth = depth + 1
    return "\n".join(out) + "\n"


@dataclass(frozen=True)
class HelmExample:
    id: str
    values: dict[str, Any]
    release: Optional[str]  # from the `helm install NAME .` that follows it, if any


def helm_examples() -> list[HelmExample]:
    """Every YAML example of the chart guide, with the release its next command installs."""
    doc = text(HELM_GUIDE)
    parameters = chart_parameters()
    blocks = _blocks(doc)
    out = []
    for i, (lang, body, start) in enumerate(blocks):
        if lang != "yaml":
            continue
        heading = re.findall(r"^#+ (.+)$", doc[:start], re.M)[-1]
        following = blocks[i + 1] if i + 1 < len(blocks) else None
        release = None
        if following and following[0] == "sh":
            found = re.search(r"helm install (\S+) ", following[1])
            release = found.group(1) if found else None
        slug = re.sub(r"[^a-z0-9]+", "-", heading.lower()).strip("-")
        ident = f"{slug}-{release}" if release else slug
        n = sum(1 for e in out if e.id.startswith(ident))
        out.append(
            HelmExample(
                f"{ident}-{n + 1}" if n else ident, yaml.load(nest(body, parameters), Loader=HelmLoader), release
            )
        )
    return out


def operator_crs() -> list[str]:
    """Every complete Federation CR of the operator README, verbatim."""
    return [body for lang, body, _ in _blocks(text(OPERATOR_README)) if lang == "yaml" and "kind: Federation" in body]
