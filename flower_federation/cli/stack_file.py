"""A stack settings file as the CLI reads it (`--stack NAME`: Pulumi.NAME.yaml at the project root, or
`--config-file FILE`), and the problems of the config it holds, as `validate` reports them and `render` reports
them before it runs the program."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

import yaml

from flower_federation.config.errors import ConfigError, Problem
from flower_federation.kube.goyaml import load_stack_file

if TYPE_CHECKING:
    from flower_federation.plan import FederationPlan

PROJECT_ROOT = Path(__file__).resolve().parents[2]
CONFIG_KEYS = ("flower-federation:federation", "federation")
NODE_KEYS_KEYS = ("flower-federation:nodeAuthKeys", "nodeAuthKeys")


class UsageError(Exception):
    """The command line, or a file it names, is wrong: exit code 2."""


def read_stack_file(args: argparse.Namespace) -> tuple[dict[str, Any], str]:
    """(config map, stack name) from --config-file or Pulumi.<stack>.yaml."""
    if args.config_file:
        path = Path(args.config_file)
        stack = args.stack or _stack_from_filename(path)
    else:
        stack = args.stack or "dev"
        path = PROJECT_ROOT / f"Pulumi.{stack}.yaml"
    try:
        # As Pulumi's engine reads it (YAML 1.2: `yes` a string, `1e-3` a float), which PyYAML does not.
        settings = load_stack_file(path.read_text()) or {}
    except FileNotFoundError:
        raise UsageError(f"no such stack settings file: {path}") from None
    except yaml.YAMLError as err:
        raise UsageError(f"{path}: not valid YAML: {err}") from None
    config = settings.get("config") if isinstance(settings, dict) else None
    if config is None:
        config = {}
    if not isinstance(config, dict):
        raise UsageError(f"{path}: `config:` must be a mapping")
    encrypted = list(_secure_paths(config))
    if encrypted:
        raise UsageError(
            f"{path}: encrypted (secure:) values cannot be decrypted offline: {', '.join(encrypted)}. "
            "Render a copy of the file with plain test values instead."
        )
    return config, stack


def _stack_from_filename(path: Path) -> str:
    parts = path.name.split(".")
    return parts[1] if len(parts) == 3 and parts[0] == "Pulumi" and parts[2] in ("yaml", "yml") else "dev"


def _secure_paths(value: Any, path: str = "config") -> Any:
    if isinstance(value, dict):
        if set(value) == {"secure"}:
            yield path
            return
        for k, v in value.items():
            yield from _secure_paths(v, f"{path}.{k}")
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _secure_paths(v, f"{path}[{i}]")


def federation_value(config: dict[str, Any], keys: tuple[str, ...] = CONFIG_KEYS) -> Optional[Any]:
    for key in keys:
        if key in config:
            return config[key]
    return None


def check(config: dict[str, Any], stack: str) -> tuple[Optional[FederationPlan], list[Problem]]:
    """(the plan, []) or (None, every problem of the stack's config), as `validate` reports them; the outputs
    of stacks read with fromStack aside (those are checked once they are read)."""
    from flower_federation.plan import load_plan

    try:
        return load_plan(federation_value(config), stack, federation_value(config, NODE_KEYS_KEYS)), []
    except ConfigError as err:
        return None, err.problems
