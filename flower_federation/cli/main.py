"""`python -m flower_federation`: validate a stack's config, render its Kubernetes objects offline (no
cluster, no Pulumi CLI) by running the real program under Pulumi's mocks, review a change (diff), check
any manifests against the federation's promises (check).

    python -m flower_federation render [--stack NAME | --config-file FILE] [--show-secrets]
                                [--cluster NAME] [--outputs FILE.json]
                                [--stack-outputs ORG/PROJECT/STACK=FILE.json ...] [--format yaml|mermaid]
    python -m flower_federation diff --base OLD_STACK_FILE|- [--stack NAME | --config-file FILE]
                              [--stack-outputs ORG/PROJECT/STACK=FILE.json ...]
    python -m flower_federation validate [--stack NAME | --config-file FILE]
    python -m flower_federation schema [--write | --package]
    python -m flower_federation docs [--write]
    python -m flower_federation import helm VALUES.yaml [--release NAME] [--namespace NS]
                                 [--allow-drop] [--preserve-behaviour] [--output-dir DIR]
    python -m flower_federation import operator CR.yaml [--allow-drop] [--preserve-behaviour] [--output-dir DIR]
    python -m flower_federation check FILE.yaml... [--strict]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Optional

from flower_federation.cli.render import cmd_render
from flower_federation.cli.stack_file import PROJECT_ROOT, UsageError, check, read


def _sentence(text: str) -> str:
    """A subcommand's help as the description `--help` prints above its options."""
    return text[0].upper() + text[1:] + "."


def cmd_validate(args: argparse.Namespace) -> int:
    from flower_federation.config.errors import ConfigError

    found = read(args, encrypted_as_placeholders=True)
    plan, problems = check(found)
    if plan is None:
        print(ConfigError(problems), file=sys.stderr)
        return 1
    pools = ", ".join(f"{p.name}" for p in plan.spec.supernodes.pools) or f"none (a {plan.role} runs no SuperNodes)"
    print(
        f"ok: federation '{plan.name}' in namespace '{plan.namespace}', Flower {plan.version} "
        f"({plan.dialect.name}), {plan.spec.mode} pools: {pools}"
    )
    from flower_federation.plan.outputs import prerelease_warnings

    for warning in prerelease_warnings(plan):
        print(f"warning: {warning}", file=sys.stderr)
    if found.encrypted:
        print(
            f"note: not checked offline, encrypted (secure:): {', '.join(found.encrypted)}; pulumi preview decrypts "
            "and checks them",
            file=sys.stderr,
        )
    return 0


def cmd_schema(args: argparse.Namespace) -> int:
    from flower_federation.config.reference import SCHEMA_FILE, schema_text
    from flower_federation.provider import schema as package

    if args.write:
        _emit(schema_text(), SCHEMA_FILE)
        return _emit(package.schema_text(), package.SCHEMA_FILE)
    return _emit(package.schema_text() if args.package else schema_text(), None)


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
        p = sub.add_parser(name, help=help_text, description=_sentence(help_text))
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
            p.add_argument(
                "--format",
                choices=("yaml", "mermaid"),
                default="yaml",
                help="yaml: the objects (default); mermaid: the federation's topology as a Mermaid flowchart",
            )
        p.set_defaults(fn=fn)
    for name, fn, help_text, target in (
        (
            "schema",
            cmd_schema,
            "print the JSON schema of the federation config",
            "flower_federation/config/config.schema.json, and the package schema to provider/schema.json",
        ),
        (
            "docs",
            cmd_docs,
            "print the config reference (markdown tables), generated from the config model",
            "docs/config-reference.md between its markers",
        ),
    ):
        p = sub.add_parser(name, help=help_text, description=_sentence(help_text))
        out = p.add_mutually_exclusive_group()
        out.add_argument("--write", action="store_true", help=f"write it to {target} instead")
        if name == "schema":
            out.add_argument(
                "--package", action="store_true", help="print the Pulumi package schema of the component plugin instead"
            )
        p.set_defaults(fn=fn)
    from flower_federation.cli.import_command import add_parser as add_import_parser

    add_import_parser(sub)
    from flower_federation.cli.check_command import add_parser as add_check_parser

    add_check_parser(sub)
    from flower_federation.cli.diff_command import add_parser as add_diff_parser

    add_diff_parser(
        sub,
        "Markdown for a pull request: the objects a config change adds, removes, changes and replaces, offline",
    )
    args = parser.parse_args(argv)
    try:
        code: int = args.fn(args)
        return code
    except UsageError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
