"""`python -m flower_federation`: validate a stack's config, or render its Kubernetes objects
offline (no cluster, no Pulumi CLI) by running the real program under Pulumi's mocks.

    python -m flower_federation render [--stack NAME | --config-file FILE] [--show-secrets]
                                [--cluster NAME] [--outputs FILE.json]
                                [--stack-outputs ORG/PROJECT/STACK=FILE.json ...]
    python -m flower_federation validate [--stack NAME | --config-file FILE]
    python -m flower_federation schema [--write]
    python -m flower_federation docs [--write]
    python -m flower_federation import helm VALUES.yaml [--release NAME] [--namespace NS]
                                 [--allow-drop] [--preserve-behaviour] [--output-dir DIR]
    python -m flower_federation import operator CR.yaml [--allow-drop] [--preserve-behaviour] [--output-dir DIR]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, Optional

import yaml

from flower_federation.kube.goyaml import load_stack_file

PROJECT_ROOT = Path(__file__).resolve().parents[2]
CONFIG_KEYS = ("flower-federation:federation", "federation")
NODE_KEYS_KEYS = ("flower-federation:nodeAuthKeys", "nodeAuthKeys")


class UsageError(Exception):
    pass


def _read_stack_file(args: argparse.Namespace) -> tuple[dict[str, Any], str]:
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


def _federation_value(config: dict[str, Any], keys: tuple[str, ...] = CONFIG_KEYS) -> Optional[Any]:
    for key in keys:
        if key in config:
            return config[key]
    return None


def cmd_validate(args: argparse.Namespace) -> int:
    from flower_federation.config.errors import ConfigError
    from flower_federation.plan import load_plan

    config, stack = _read_stack_file(args)
    try:
        plan = load_plan(_federation_value(config), stack, _federation_value(config, NODE_KEYS_KEYS))
    except ConfigError as err:
        print(err, file=sys.stderr)
        return 1
    pools = ", ".join(f"{p.name}" for p in plan.spec.supernodes.pools)
    print(
        f"ok: federation '{plan.name}' in namespace '{plan.namespace}', Flower {plan.version} "
        f"({plan.dialect.name}), {plan.spec.mode} pools: {pools}"
    )
    return 0


def _stack_outputs(pairs: list[str], config: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """{stack: outputs} from `--stack-outputs STACK=FILE.json` flags, each file as
    `pulumi stack output --json --stack STACK` writes it (what is read is public); every stack the
    config reads with `fromStack` must have one."""
    from flower_federation.plan.sites import referenced_stacks

    found: dict[str, dict[str, Any]] = {}
    for pair in pairs:
        stack, sep, file = pair.partition("=")
        if not sep or not stack or not file:
            raise UsageError(f"--stack-outputs {pair!r}: expected ORG/PROJECT/STACK=FILE.json")
        try:
            outputs = json.loads(Path(file).read_text())
        except FileNotFoundError:
            raise UsageError(f"--stack-outputs {stack}: no such file: {file}") from None
        except ValueError as err:
            raise UsageError(f"--stack-outputs {stack}: {file} is not JSON: {err}") from None
        if not isinstance(outputs, dict):
            raise UsageError(f"--stack-outputs {stack}: {file} must hold a JSON object of outputs")
        found[stack] = outputs
    for stack in referenced_stacks(_federation_value(config)):
        if stack not in found:
            raise UsageError(
                f"the config reads the outputs of stack '{stack}' (fromStack): pass --stack-outputs "
                f"{stack}=FILE.json, FILE.json written by `pulumi stack output --json --stack {stack}` "
                "(or by `render --outputs` of that stack's config)"
            )
    return found


def cmd_render(args: argparse.Namespace) -> int:
    import pulumi

    from flower_federation.cli.offline import run_program
    from flower_federation.kube.documents import dump_all
    from flower_federation.rules.sites import AMBIENT

    config, stack = _read_stack_file(args)
    stack_outputs = _stack_outputs(args.stack_outputs or [], config)
    try:
        result = run_program(config, stack, stack_outputs=stack_outputs)
    except pulumi.RunError as err:
        print(err, file=sys.stderr)
        return 1
    if args.outputs:
        text = json.dumps(result.stack_outputs_json(args.show_secrets), indent=2, sort_keys=True) + "\n"
        Path(args.outputs).write_text(text)
    clusters = result.clusters
    if args.cluster is not None:
        if args.cluster not in clusters:
            raise UsageError(f"no objects go to cluster '{args.cluster}' (this stack's: {', '.join(clusters)})")
        sys.stdout.write(dump_all(result.manifests(args.show_secrets, cluster=args.cluster)))
    elif clusters in ([], [AMBIENT]):
        sys.stdout.write(dump_all(result.manifests(show_secrets=args.show_secrets)))
    else:
        groups = [f"# cluster: {c}\n" + dump_all(result.manifests(args.show_secrets, cluster=c)) for c in clusters]
        sys.stdout.write("---\n".join(groups))
    return 0


def cmd_schema(args: argparse.Namespace) -> int:
    from flower_federation.config.reference import SCHEMA_FILE, schema_text

    return _emit(schema_text(), SCHEMA_FILE if args.write else None)


def cmd_docs(args: argparse.Namespace) -> int:
    from flower_federation.config.reference import REFERENCE_FILE, reference_file_text, reference_markdown

    if not args.write:
        return _emit(reference_markdown(), None)
    try:
        text = reference_file_text(REFERENCE_FILE.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UsageError(f"no such file: {REFERENCE_FILE} (it holds the reference between its markers)") from None
    except ValueError as err:  # the markers are missing or out of order
        raise UsageError(f"{REFERENCE_FILE}: {err}") from None
    return _emit(text, REFERENCE_FILE)


def _emit(text: str, path: Optional[Path]) -> int:
    """Print `text`, or write it to `path` (only when it differs) and say which happened."""
    from flower_federation.config.reference import write_if_changed

    if path is None:
        sys.stdout.write(text)
    else:
        print(f"{'wrote' if write_if_changed(path, text) else 'up to date:'} {path.relative_to(PROJECT_ROOT)}")
    return 0


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m flower_federation", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    for name, fn, help_text in (
        ("render", cmd_render, "print every Kubernetes object the stack would create, as YAML"),
        ("validate", cmd_validate, "validate the stack's federation config"),
    ):
        p = sub.add_parser(name, help=help_text)
        src = p.add_mutually_exclusive_group()
        src.add_argument("--stack", help="read Pulumi.<STACK>.yaml at the project root (default: dev)")
        src.add_argument("--config-file", help="any file shaped like a Pulumi stack settings file")
        if name == "render":
            p.add_argument("--show-secrets", action="store_true", help="print secret values instead of a placeholder")
            p.add_argument(
                "--cluster",
                help="only the objects of this cluster (a key of `clusters`, or `default`: the ambient one)",
            )
            p.add_argument(
                "--outputs", metavar="FILE.json", help="also write the stack's outputs, as `pulumi stack output --json`"
            )
            p.add_argument(
                "--stack-outputs",
                action="append",
                metavar="ORG/PROJECT/STACK=FILE.json",
                help="outputs of a stack the config reads with fromStack (repeatable)",
            )
        p.set_defaults(fn=fn)
    for name, fn, help_text, target in (
        (
            "schema",
            cmd_schema,
            "print the JSON schema of the federation config",
            "flower_federation/config/config.schema.json",
        ),
        (
            "docs",
            cmd_docs,
            "print the config reference (markdown tables), generated from the config model",
            "docs/config-reference.md between its markers",
        ),
    ):
        p = sub.add_parser(name, help=help_text)
        p.add_argument("--write", action="store_true", help=f"write it to {target} instead")
        p.set_defaults(fn=fn)
    from flower_federation.cli.import_command import add_parser as add_import_parser

    add_import_parser(sub)
    args = parser.parse_args(argv)
    try:
        code: int = args.fn(args)
        return code
    except UsageError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
