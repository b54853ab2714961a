"""Running `python -m flower_federation import ...` in tests, and rendering what it printed the way a
user would (the stack file through the real program under mocks), plus reading a chart
guide example's meaning from the guide's own defaults (not from the importer's table)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Optional

import yaml

from flower_federation.cli.main import main
from flower_federation.cli.offline import Run, run_program
from tests.support.seeds import chart_parameters

CONFIG_KEY = "flower-federation:federation"


def run_import(capsys: Any, *argv: str) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of `python -m flower_federation import ARGV...`."""
    code = main(["import", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def write(tmp_path: Path, name: str, data: Any) -> str:
    path = tmp_path / name
    path.write_text(data if isinstance(data, str) else yaml.safe_dump(data, sort_keys=False))
    return str(path)


def stack_config(text: str) -> dict[str, Any]:
    """The federation value of a printed stack file."""
    settings = yaml.safe_load(text)
    assert list(settings) == ["config"] and list(settings["config"]) == [CONFIG_KEY]
    value: dict[str, Any] = settings["config"][CONFIG_KEY]
    return value


def run(config: dict[str, Any], stack: str, node_keys: Optional[dict[str, Any]] = None) -> Run:
    """The program run `python -m flower_federation render` makes of this federation value."""
    settings: dict[str, Any] = {CONFIG_KEY: config}
    if node_keys is not None:
        settings["flower-federation:nodeAuthKeys"] = node_keys
    return run_program(settings, stack)


def render(config: dict[str, Any], stack: str, node_keys: Optional[dict[str, Any]] = None) -> list[dict[str, Any]]:
    """The objects `python -m flower_federation render` prints for this federation value."""
    return run(config, stack, node_keys).manifests()


def reads(result: Run) -> set[str]:
    """`namespace/name` of every existing object the program reads (a Secret to copy from)."""
    return {r.read_id for r in result.registrations if r.read_id and r.type.startswith("kubernetes:")}


def header(text: str) -> str:
    """The comment lines before `config:`, unwrapped into one line per item."""
    lines = text.split("\nconfig:", 1)[0].splitlines()
    return re.sub(r"\n#\s{3,}(?!- )", " ", "\n".join(lines))


# --- what a chart values file means, read off the guide's Parameters tables ---------------


def chart_values(values: dict[str, Any]) -> dict[str, Any]:
    """Every parameter of the guide with its value for `values` (the guide's default unless set)."""
    params = chart_parameters()
    out = dict(params)

    def walk(node: Any, prefix: str) -> None:
        for key, value in node.items():
            path = f"{prefix}.{key}" if prefix else key
            if path in params or not isinstance(value, dict):
                out[path] = value
            else:
                walk(value, path)

    walk(values, "")
    return out


def chart_image(v: dict[str, Any], component: str) -> str:
    registry, repository, tag, digest = (
        v[f"{component}.image.{k}"] for k in ("registry", "repository", "tag", "digest")
    )
    ref = f"{registry}/{repository}" if registry else repository
    return ref + (f":{tag}" if tag else "") + (f"@{digest}" if digest else "")


def chart_fullname(v: dict[str, Any], release: Optional[str]) -> str:
    name = v["nameOverride"]
    release = release or name
    return v["fullnameOverride"] or (release if name in release else f"{release}-{name}")
