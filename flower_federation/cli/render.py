"""`python -m flower_federation render`: every object the stack would create, as YAML, from the real program
run offline under Pulumi's mocks (offline.py).

It reports, in one list, everything wrong with what it was given: the config's problems (as `validate` says
them) and the `--stack-outputs` flags against the stacks the config reads with `fromStack` (a stack read without
its outputs, outputs of a stack the config never reads, an unreadable file). A wrong flag or stack file is reported
before the program runs, with the config's problems; a config whose only problems are its own is reported by the
program's plan (the same list), before it registers anything: a good config is planned once."""

from __future__ import annotations

import argparse
import difflib
import json
import sys
from pathlib import Path
from typing import Any

from flower_federation.cli.stack_file import StackFile, UsageError, checked, federation_value, read
from flower_federation.config.errors import ConfigError, Problem


def stack_outputs(
    pairs: list[str], raw: Any, *, require_all: bool = True
) -> tuple[list[Problem], dict[str, dict[str, Any]]]:
    """(problems, {stack: outputs}) of `--stack-outputs STACK=FILE.json` flags, each file as
    `pulumi stack output --json --stack STACK` writes it (what is read is public). Every one given must be a stack
    the config reads with `fromStack`, and (`require_all`: render) every such stack must have one."""
    from flower_federation.plan.sites import referenced_stacks, stack_references

    references = stack_references(raw)
    reads = referenced_stacks(raw)
    problems: list[Problem] = []
    found: dict[str, dict[str, Any]] = {}
    for pair in pairs:
        flag = f"--stack-outputs {pair}"
        stack, sep, file = pair.partition("=")
        if not sep or not stack or not file:
            problems.append(Problem(flag, "expected ORG/PROJECT/STACK=FILE.json"))
            continue
        if stack not in reads:
            problems.append(Problem(flag, f"the config reads no stack '{stack}': {_stacks_read(stack, reads)}"))
            continue
        try:
            outputs = json.loads(Path(file).read_text())
        except FileNotFoundError:
            problems.append(Problem(flag, f"no such file: {file}"))
            continue
        except ValueError as err:
            problems.append(Problem(flag, f"{file} is not JSON: {err}"))
            continue
        if not isinstance(outputs, dict):
            problems.append(Problem(flag, f"{file} must hold a JSON object of outputs"))
            continue
        found[stack] = outputs
    given = {pair.partition("=")[0] for pair in pairs}
    for path, stack in references if require_all else ():
        if stack not in given:
            problems.append(
                Problem(
                    path,
                    f"the config reads the outputs of stack '{stack}' (fromStack): pass --stack-outputs "
                    f"{stack}=FILE.json, FILE.json written by `pulumi stack output --json --stack {stack}` "
                    "(or by `render --outputs` of that stack's config)",
                )
            )
    return problems, found


def unread_stacks(pairs: list[str], raw: Any) -> list[tuple[str, str]]:
    """(config path, stack) of each `fromStack` whose stack has no `--stack-outputs` flag."""
    from flower_federation.plan.sites import stack_references

    given = {pair.partition("=")[0] for pair in pairs}
    return [(path, stack) for path, stack in stack_references(raw) if stack not in given]


def placeholder_notes(raw: Any, outputs: dict[str, dict[str, Any]]) -> list[str]:
    """What an offline render takes on trust from the stacks it reads: a hub's CA certificate that the hub's own
    offline render could only stand in for (OFFLINE_CA_PLACEHOLDER). Said on stderr, as `validate` says what it
    could not check."""
    from flower_federation.config.errors import format_path
    from flower_federation.flower.certificates import is_offline_ca_placeholder
    from flower_federation.plan.exports import REMOTE_FROM_STACK
    from flower_federation.plan.sites import HUB_CA_OUTPUT, stack_references

    at = format_path(REMOTE_FROM_STACK)
    notes = []
    for path, stack in stack_references(raw):
        ca = outputs.get(stack, {}).get(HUB_CA_OUTPUT[0])
        if path == at and is_offline_ca_placeholder(ca):
            notes.append(
                f"{path}: stack '{stack}' exports a placeholder caCertificate, {ca}: its outputs were written offline "
                "and its CA is made at deploy time; taken as the CA SuperNodes trust. "
                f"pulumi preview reads the real one (or pass outputs written by `pulumi stack output --json --stack "
                f"{stack}`)"
            )
    return notes


def _stacks_read(stack: str, reads: list[str]) -> str:
    if not reads:
        return "it reads no other stack's outputs (no fromStack)"
    close = difflib.get_close_matches(stack, reads, n=1, cutoff=0.6)
    hint = f"did you mean '{close[0]}'? " if close else ""
    return f"{hint}the stacks it reads (fromStack): {', '.join(reads)}"


def report(usage: list[Problem], config: list[Problem], command: str = "render") -> str:
    """One report. Config problems alone read as `validate` prints them."""
    if not usage:
        return ConfigError(config).render()
    problems = usage + config
    count = len(problems)
    head = f"error: cannot {command} ({count} problem{'s' if count != 1 else ''}):"
    return "\n".join([head] + [f"  - {p}" for p in problems])


def cmd_render(args: argparse.Namespace) -> int:
    import pulumi

    from flower_federation.cli.offline import run_program
    from flower_federation.kube.documents import dump_all

    found = read(args)
    from flower_federation.plan.exports import as_pulumi_reads

    usage, outputs = stack_outputs(args.stack_outputs or [], federation_value(found.config))
    # A null in a stack's outputs never reaches the program (Pulumi drops it): said here, as `validate` says it.
    nulls, outputs = as_pulumi_reads(federation_value(found.config), outputs)
    if usage or found.problems or nulls:
        # Said in one list with the config's problems. Otherwise the program's own plan says those (the same
        # list, as `validate` prints it) with nothing registered, so a good config is planned once, not twice.
        _, problems = checked(found, None if usage else outputs)
        print(report(usage, nulls + problems), file=sys.stderr)
        return 2 if usage else 1
    try:
        result = run_program(found.config, found.stack, stack_outputs=outputs)
    except pulumi.RunError as err:
        print(err, file=sys.stderr)
        return 1
    for warning in result.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    for note in placeholder_notes(federation_value(found.config), outputs):
        print(f"note: {note}", file=sys.stderr)
    if args.outputs:
        text = json.dumps(result.stack_outputs_json(args.show_secrets), indent=2, sort_keys=True) + "\n"
        Path(args.outputs).write_text(text)
    clusters = result.clusters
    if getattr(args, "format", "yaml") == "mermaid":
        sys.stdout.write(topology_of(found, outputs))  # every cluster's: the topology is the federation's
        return 0
    if args.cluster is not None:
        if args.cluster not in clusters:
            raise UsageError(f"no objects go to cluster '{args.cluster}' (this stack's: {', '.join(clusters)})")
        sys.stdout.write(dump_all(result.manifests(args.show_secrets, cluster=args.cluster)))
    elif result.ambient_only:
        sys.stdout.write(dump_all(result.manifests(show_secrets=args.show_secrets)))
    else:
        groups = [f"# cluster: {c}\n" + dump_all(result.manifests(args.show_secrets, cluster=c)) for c in clusters]
        sys.stdout.write("---\n".join(groups))
    return 0


def topology_of(found: StackFile, outputs: dict[str, dict[str, Any]]) -> str:
    """The Mermaid topology of a valid stack file, planned with the outputs of the stacks it reads (a site's hub
    address comes from them), as the program plans it."""
    from flower_federation.cli.stack_file import NODE_KEYS_KEYS
    from flower_federation.plan import load_plan
    from flower_federation.review.topology import mermaid

    keys = federation_value(found.config, NODE_KEYS_KEYS)
    return mermaid(load_plan(federation_value(found.config), found.stack, keys, stack_outputs=outputs))
