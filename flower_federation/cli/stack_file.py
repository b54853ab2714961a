"""A stack settings file as the CLI reads it (`--stack NAME`: Pulumi.NAME.yaml at the project root, or
`--config-file FILE`), and the problems of the config it holds, as `validate` reports them and `render` reports
them before it runs the program."""

from __future__ import annotations

import argparse
import difflib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional, Union

import yaml

from flower_federation.config.errors import ROOT, ConfigError, Problem, problem
from flower_federation.kube.goyaml import DuplicateKeys, load_stack_file

if TYPE_CHECKING:
    from flower_federation.plan import FederationPlan

PROJECT_ROOT = Path(__file__).resolve().parents[2]
PROJECT = "flower-federation"
CONFIG_KEYS = ("flower-federation:federation", "federation")
NODE_KEYS_KEYS = ("flower-federation:nodeAuthKeys", "nodeAuthKeys")


def project_dir() -> Path:
    """Where `--stack NAME` finds Pulumi.<NAME>.yaml: this checkout's root when the package runs from one,
    else (an installed package) the current directory, the user's Pulumi project."""
    return PROJECT_ROOT if (PROJECT_ROOT / "Pulumi.yaml").is_file() else Path.cwd()


class UsageError(Exception):
    """The command line, or a file it names, is wrong: exit code 2."""


@dataclass(frozen=True)
class StackFile:
    """A stack settings file read: its `config:` map, the stack's name, and what is wrong with the file's shape
    (no `config:`, keys of this project it does not know), said with the config's problems."""

    config: dict[str, Any]
    stack: str
    problems: tuple[Problem, ...] = ()
    # Config paths of `secure:` values, read as placeholders (`validate` only: it checks everything else).
    encrypted: tuple[str, ...] = ()


def read_stack_file(args: argparse.Namespace) -> tuple[dict[str, Any], str]:
    """(config map, stack name) from --config-file or Pulumi.<stack>.yaml."""
    found = read(args)
    return found.config, found.stack


def read(args: argparse.Namespace, *, encrypted_as_placeholders: bool = False) -> StackFile:
    """`encrypted_as_placeholders`: `secure:` values (which only Pulumi decrypts) stand in as placeholders, for
    `validate`; otherwise they are a usage error, since a render would print placeholders as if they were values."""
    if args.config_file:
        path = Path(args.config_file)
        stack = args.stack or _stack_from_filename(path)
    else:
        stack = args.stack or "dev"
        path = project_dir() / f"Pulumi.{stack}.yaml"
    try:
        # As Pulumi's engine reads it (YAML 1.2: `yes` a string, `1e-3` a float), which PyYAML does not.
        settings = load_stack_file(path.read_text()) or {}
    except FileNotFoundError:
        raise UsageError(f"no such stack settings file: {path}") from None
    except yaml.YAMLError as err:
        raise UsageError(yaml_error(path, err)) from None
    config = settings.get("config") if isinstance(settings, dict) else None
    if config is None:
        config = {}
    if not isinstance(config, dict):
        raise UsageError(f"{path}: `config:` must be a mapping")
    encrypted: list[str] = []
    plain = _placeholders(config, "config", encrypted)
    if encrypted and encrypted_as_placeholders:
        return StackFile(
            _as_pulumi_passes_it(plain), stack, tuple(_key_problems(path, settings, plain)), tuple(encrypted)
        )
    if encrypted:
        raise UsageError(
            f"{path}: encrypted (secure:) values cannot be decrypted offline: {', '.join(encrypted)}. "
            "Render a copy of the file with plain test values instead."
        )
    problems = tuple(_key_problems(path, settings, config))
    # As Pulumi passes it to the program (JSON: every key a string), so `validate` checks what `render` renders.
    return StackFile(_as_pulumi_passes_it(config), stack, problems)


def _as_pulumi_passes_it(config: dict[str, Any]) -> dict[str, Any]:
    """Each value through JSON, as Pulumi hands config to the program: a key YAML read as null or true is "null"."""
    return {key: json.loads(json.dumps(value, default=str)) for key, value in config.items()}


def yaml_error(path: Union[Path, str], err: yaml.YAMLError) -> str:
    """`FILE:LINE:COLUMN: not valid YAML: what (where it started)`, one line, as editors and compilers say it; a
    key written twice, one line per key, `FILE:LINE: PATH: ...` with both lines (Pulumi's engine refuses the file)."""
    if isinstance(err, DuplicateKeys):
        return "\n".join(
            f"{path}:{d.line}: {d.path + '.' if d.path else ''}{d.key}: key written twice in one mapping ("
            f"{f'lines {d.first_line} and {d.line}' if d.first_line != d.line else f'both on line {d.line}'}); "
            f'Pulumi\'s engine (go-yaml v3) refuses the file: mapping key "{d.key}" already defined at line '
            f"{d.first_line}. Keep one"
            for d in err.duplicates
        )
    if not isinstance(err, yaml.MarkedYAMLError) or err.problem_mark is None:
        return f"{path}: not valid YAML: {' '.join(str(err).split())}"
    mark = err.problem_mark
    text = f"{path}:{mark.line + 1}:{mark.column + 1}: not valid YAML: {err.problem}"
    if err.context and err.context_mark is not None:
        at = err.context_mark
        text += f" ({err.context} at line {at.line + 1}, column {at.column + 1})"
    return text


def _ours(key: str) -> bool:
    """A key of this project's config namespace (`flower-federation:x`, or `x`, which Pulumi puts there)."""
    return key.startswith(f"{PROJECT}:") or ":" not in key


def _key_problems(path: Path, settings: Any, config: dict[str, Any]) -> list[Problem]:
    """What the file holds instead of (or beside) the keys this project reads, with the nearest of those."""
    if not isinstance(settings, dict):
        return [
            Problem(ROOT, f"missing: {path.name} is not a mapping with `config:`, it holds {type(settings).__name__}")
        ]
    known = [CONFIG_KEYS[0], NODE_KEYS_KEYS[0]]
    problems = []
    if "config" not in settings and any(str(k) in CONFIG_KEYS for k in settings):
        keys = ", ".join(str(k) for k in settings)
        return [
            Problem(
                ROOT,
                f"missing: {path.name} has no `config:`; its top level holds {keys}. A stack settings file holds the "
                "stack's config under `config:`: put it under `config:` (a `config:` line, the rest indented below)",
            )
        ]
    unknown = [str(k) for k in config if _ours(str(k)) and str(k) not in (*CONFIG_KEYS, *NODE_KEYS_KEYS)]
    for key in unknown:
        qualified = key if ":" in key else f"{PROJECT}:{key}"
        near = difflib.get_close_matches(qualified, known, n=1, cutoff=0.6)
        hint = f"did you mean '{near[0]}'?" if near else f"it reads {' and '.join(known)}"
        if federation_value(config) is None and near == [CONFIG_KEYS[0]]:
            problems.append(Problem(ROOT, f"missing: config has no {CONFIG_KEYS[0]} but {key}: {hint}"))
        else:
            problems.append(Problem(f"config.{key}", f"not a config key of this project; {hint}"))
    empty = [key for key in CONFIG_KEYS if key in config and config[key] is None]
    if empty and not any(p.path == ROOT for p in problems):
        problems.append(
            Problem(
                ROOT,
                f"missing: {empty[0]} in {path.name} is empty (nothing under it): put the federation's settings "
                "under it, indented",
            )
        )
    if federation_value(config) is None and not any(p.path == ROOT for p in problems):
        found = ", ".join(str(k) for k in config) or "nothing"
        problems.append(
            Problem(ROOT, f"missing: set the {CONFIG_KEYS[0]} config key (config: in {path.name} holds {found})")
        )
    return problems + _key_type_problems(federation_value(config))


# What YAML reads a plain key as when it is not a string.
_READ_AS = {type(None): "null", bool: "a boolean", int: "a number", float: "a number"}


def _key_type_problems(value: Any, at: tuple[Any, ...] = ()) -> list[Problem]:
    """A mapping key that YAML reads as no string (`~:`, `true:`, `1.5:`): Pulumi passes config as JSON, whose keys
    are strings, so `render` would have made it "null" or "true" where `validate` saw None or True. Refused at its
    mapping, quoting the key; quoted in the file, it is the string it looks like."""
    found: list[Problem] = []
    pending = [(value, at)]
    while pending:
        node, here = pending.pop()
        if isinstance(node, dict):
            for key, child in node.items():
                if not isinstance(key, str):
                    shown, kind = json.dumps(key, default=str), _READ_AS.get(type(key), type(key).__name__)
                    found.append(
                        problem(
                            here,
                            f"key {shown} is read as {kind}, not a string: quote it in the file (unquoted, Pulumi "
                            f'passes it on as the key "{shown}")',
                        )
                    )
                pending.append((child, (*here, key if isinstance(key, str) else json.dumps(key, default=str))))
        elif isinstance(node, list):
            pending.extend((child, (*here, i)) for i, child in enumerate(node))
    return found


def _stack_from_filename(path: Path) -> str:
    parts = path.name.split(".")
    return parts[1] if len(parts) == 3 and parts[0] == "Pulumi" and parts[2] in ("yaml", "yml") else "dev"


SECURE_PLACEHOLDER = "[secure: decrypted by pulumi]"


def _placeholders(value: Any, path: str, found: list[str]) -> Any:
    """`value` with each `secure:` value (only Pulumi decrypts one) as SECURE_PLACEHOLDER; their paths go to
    `found`."""
    if isinstance(value, dict):
        if set(value) == {"secure"}:
            found.append(path)
            return SECURE_PLACEHOLDER
        return {k: _placeholders(v, f"{path}.{k}", found) for k, v in value.items()}
    if isinstance(value, list):
        return [_placeholders(v, f"{path}[{i}]", found) for i, v in enumerate(value)]
    return value


def federation_value(config: dict[str, Any], keys: tuple[str, ...] = CONFIG_KEYS) -> Optional[Any]:
    for key in keys:
        if key in config:
            return config[key]
    return None


def check(
    found: StackFile, stack_outputs: Optional[dict[str, dict[str, Any]]] = None
) -> tuple[Optional[FederationPlan], list[Problem]]:
    """(the plan, []) or (None, every problem of the stack file and its config), as `validate` reports them; the
    outputs of stacks read with fromStack checked only when given (every such stack's)."""
    from flower_federation.plan import ENCRYPTED, load_plan

    config = found.config
    if any(p.path == ROOT for p in found.problems):  # no federation config to check
        return None, list(found.problems)
    keys = federation_value(config, NODE_KEYS_KEYS)
    try:
        plan = load_plan(
            federation_value(config),
            found.stack,
            ENCRYPTED if keys == SECURE_PLACEHOLDER else keys,
            stack_outputs=stack_outputs,
        )
    except ConfigError as err:
        return None, [*found.problems, *err.problems]
    return (None, list(found.problems)) if found.problems else (plan, [])


def checked(
    found: StackFile, outputs: Optional[dict[str, dict[str, Any]]]
) -> tuple[Optional[FederationPlan], list[Problem]]:
    """(the plan, []) or (None, its problems), as `validate` and `render` report them: the config, then (a complete
    plan, every stack it reads given: what `render` renders) its rendered objects' limits."""
    plan, problems = check(found, outputs)
    if plan is not None and outputs is not None and not found.encrypted:
        plan, problems = rendered(plan)
    return plan, problems


def rendered(plan: FederationPlan) -> tuple[Optional[FederationPlan], list[Problem]]:
    """(the plan, []), or (None, the problems) of a plan whose render the API server would refuse: the limits
    every rendered object is held to (kube/limits.py: its name's length, its size, its labels), as `render` and
    `pulumi preview` refuse it."""
    from flower_federation.builders.manifests import TooLarge, render

    try:
        render(plan)
    except TooLarge as err:
        return None, list(err.problems)
    return plan, []
