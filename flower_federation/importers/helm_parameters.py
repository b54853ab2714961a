"""The contract between Flower's SuperNode Helm chart and this config: docs/helm-parameters.md maps every
parameter of the chart's table (docs/reference/flower-supernode-helm-chart.md, a verbatim copy of the chart's
documentation) to the config path that carries it, or says why it is refused. It is the one mapping table: read
here by `import helm` (flower_federation/importers/chart.py, with the chart's defaults from its own tables) and by the
test that keeps the table complete and every path real."""

from __future__ import annotations

import functools
import re
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

import yaml
from pydantic import BaseModel

from flower_federation.config import Federation
from flower_federation.config.base import field_type
from flower_federation.kube.goyaml import HelmLoader
from flower_federation.kube.openapi import type_schema

# docs/helm-parameters.md and docs/reference/flower-supernode-helm-chart.md, through links in the package
# (chart_docs/), so an installed package carries them too (the wheel holds the files' contents).
DOCS = Path(__file__).parent / "chart_docs"
MAPPING_FILE = DOCS / "helm-parameters.md"
CHART_FILE = DOCS / "flower-supernode-helm-chart.md"
STATUSES = {
    "carried": "the config path carries it, with the chart's meaning",
    "partial": "carried for the values the note names; the others are refused, with the note's reason",
    "ignored": "changes nothing that runs here (a name, or what always happens); the importer drops it and says so",
    "refused": "no counterpart; the importer refuses it with the note's reason",
}
# Config keys beside `federation` that a mapping may name (secret stack config).
OTHER_KEYS = {"nodeAuthKeys": 2}  # nodeAuthKeys.<pool>.<ordinal>
# Free-form Kubernetes fragments in config whose keys the path may go into, by their Kubernetes type.
FRAGMENT_SCHEMAS = {
    "securityContext": "securitycontext-v1.json",
    "podSecurityContext": "podsecuritycontext-v1.json",
    "updateStrategy": "statefulsetupdatestrategy-apps-v1.json",
}

_CHART_ROW = re.compile(r"^\| `([^`]+)` +\|")
_MAPPING_ROW = re.compile(r"^\| `([^`]+)` \| (.*?) \| (\w+) \| (.*) \|$")


@dataclass(frozen=True)
class Mapping:
    parameter: str
    config_path: Optional[str]  # None: no path (refused, or ignored without one)
    status: str
    note: str


def chart_parameters(text: str) -> list[str]:
    """Every parameter of the chart's tables (its `## Parameters` section), in order, each once."""
    section = text[text.index("## Parameters") :]
    found = [m.group(1) for line in section.splitlines() if (m := _CHART_ROW.match(line))]
    return list(dict.fromkeys(found))


_CHART_VALUE = re.compile(r"^\|\s*`([^`]+)`\s*\|.*\|\s*`(.*)`\s*\|\s*$")


def chart_defaults(text: str) -> dict[str, Any]:
    """Each parameter's default as the chart's tables give it (their Value column, read as Helm reads YAML; the
    first row of a parameter listed twice)."""
    section = text[text.index("## Parameters") :]
    out: dict[str, Any] = {}
    for line in section.splitlines():
        if m := _CHART_VALUE.match(line):
            out.setdefault(m.group(1), yaml.load(m.group(2), Loader=HelmLoader))
    return out


def read_mappings(text: str) -> list[Mapping]:
    out = []
    for line in text.splitlines():
        m = _MAPPING_ROW.match(line)
        if not m:
            continue
        path = m.group(2).strip()
        out.append(Mapping(m.group(1), path.strip("`") if path.startswith("`") else None, m.group(3), m.group(4)))
    return out


@functools.cache
def mappings() -> tuple[Mapping, ...]:
    """docs/helm-parameters.md, row by row."""
    return tuple(read_mappings(MAPPING_FILE.read_text(encoding="utf-8")))


def path_problem(path: str) -> str:
    """Why `path` (relative to `federation`, `[]` for list items, `<...>` for map keys) names no config key; "" if
    it names one."""
    parts = path.split(".")
    if parts[0] in OTHER_KEYS:
        ok = len(parts) == 1 + OTHER_KEYS[parts[0]] and all(p.startswith("<") for p in parts[1:])
        return "" if ok else f"{parts[0]} takes {OTHER_KEYS[parts[0]]} placeholder keys"
    current: Any = Federation
    for i, part in enumerate(parts):
        model = _model(current)
        if model is None:
            return f"'{'.'.join(parts[:i])}' holds no keys"
        key, is_list = (part[:-2], True) if part.endswith("[]") else (part, False)
        fields = {(f.alias or n): f for n, f in model.model_fields.items()}
        if key not in fields:
            return f"no key '{key}' under '{'.'.join(parts[:i]) or 'federation'}'"
        current = field_type(fields[key].annotation)
        if not is_list and typing.get_origin(current) is list and i + 1 < len(parts):
            return f"'{key}' is a list: write '{key}[]'"
        if is_list:
            args = typing.get_args(current)
            if typing.get_origin(current) is not list or not args:
                return f"'{key}' is not a list"
            current = args[0]
        if key in FRAGMENT_SCHEMAS and i + 1 < len(parts):
            return _fragment_problem(FRAGMENT_SCHEMAS[key], parts[i + 1 :])
    return ""


def _fragment_problem(schema_file: str, keys: list[str]) -> str:
    schema = type_schema(schema_file)
    for key in keys:
        properties = _resolve(schema).get("properties", {})
        if key not in properties:
            return f"'{key}' is not a field of {schema_file}"
        schema = properties[key]
    return ""


def _resolve(schema: dict[str, Any]) -> dict[str, Any]:
    ref = schema.get("$ref")
    if ref:
        name = ref.rsplit("/", 1)[-1]
        return typing.cast(dict[str, Any], type_schema("_definitions.json")["$defs"][name])
    return schema


def _model(annotation: Any) -> Optional[type[BaseModel]]:
    return annotation if isinstance(annotation, type) and issubclass(annotation, BaseModel) else None
