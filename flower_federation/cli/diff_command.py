"""`python -m flower_federation diff --base OLD_STACK_FILE --config-file NEW_STACK_FILE`: what a config change does,
offline and without credentials, as the Markdown of a pull-request comment (review/).

Both stack files run through the real program under Pulumi's mocks, as `render` runs them (offline.py); the old one
as the same stack (the new side's name), so only the config differs. `--base -` reads the old file from stdin, so
`git show main:Pulumi.prod.yaml | python -m flower_federation diff --base - --stack prod` works, as does a process
substitution (`--base <(git show main:Pulumi.prod.yaml)`). Exit 0 with or without changes; 1 when either side's
config is invalid (every problem, by config path, under the side it belongs to); 2 on a usage error."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from flower_federation.cli.render import stack_outputs, topology_of
from flower_federation.cli.stack_file import NODE_KEYS_KEYS, StackFile, UsageError, check, federation_value, read
from flower_federation.config.errors import ConfigError, Problem

if TYPE_CHECKING:
    from flower_federation.builders.checksums import Checksummed
    from flower_federation.review.changes import Resource, Review
    from flower_federation.review.consequences import Consequence

STDIN = "/dev/stdin"


def add_parser(sub: Any, description: str) -> None:
    p = sub.add_parser("diff", help=description[0].lower() + description[1:].rstrip("."), description=description)
    p.add_argument(
        "--base",
        required=True,
        metavar="OLD_STACK_FILE",
        help="the stack file before the change (`-`: stdin, e.g. from `git show main:Pulumi.prod.yaml`)",
    )
    p.add_argument(
        "--stack",
        help="the stack's name (default: from --config-file's name Pulumi.<STACK>.yaml); without --config-file, "
        "the stack file after the change is Pulumi.<STACK>.yaml at the project root (default: dev)",
    )
    p.add_argument("--config-file", help="the stack file after the change")
    p.add_argument(
        "--stack-outputs",
        action="append",
        metavar="ORG/PROJECT/STACK=FILE.json",
        help="outputs of a stack either side reads with fromStack (repeatable; each side gets those it reads)",
    )
    p.set_defaults(fn=cmd_diff)


def _outputs_of(
    side: StackFile, pairs: list[str], read_by_base: set[str], is_new: bool
) -> tuple[list[Problem], dict[str, dict[str, Any]]]:
    """`--stack-outputs` for one side: the pairs of the stacks it reads; the new side also checks those neither side
    reads (so a misspelt or malformed flag is reported once, as `render` reports it)."""
    from flower_federation.plan.sites import referenced_stacks

    reads = set(referenced_stacks(federation_value(side.config)))
    mine = [p for p in pairs if (stack := p.partition("=")[0]) in reads or (is_new and stack not in read_by_base)]
    return stack_outputs(mine, federation_value(side.config))


def resources(found: StackFile, outputs: dict[str, dict[str, Any]]) -> list[Resource]:
    """Every resource the program registers for the stack file (reads of existing objects aside), each with its
    inputs revealed and redacted, its URN and its cluster."""
    from flower_federation.cli.offline import issued_outputs, reveal, run_with_urns
    from flower_federation.review.changes import Resource

    # A `secure:` value makes its whole top-level key secret config, as Pulumi holds it.
    secret = tuple(sorted({path.removeprefix("config.").split(".")[0] for path in found.encrypted}))
    # Generated values change with their inputs, so what is built from them changes as at `up`.
    run, urns = run_with_urns(
        found.config, found.stack, stack_outputs=outputs, secret_config=secret, provider=issued_outputs
    )
    urn_of = {(typ, name): urn for typ, name, urn in urns}
    return [
        Resource(
            r.type,
            r.name,
            reveal(r.inputs, True),
            reveal(r.inputs, False),
            urn_of.get((r.type, r.name), ""),
            r.cluster,
        )
        for r in run.registrations
        if r.read_id is None
    ]


def cmd_diff(args: argparse.Namespace) -> int:
    import pulumi

    from flower_federation.plan.sites import referenced_stacks
    from flower_federation.review import markdown

    # `secure:` values (a cluster's kubeconfig) stand in as placeholders: one changed only in its ciphertext is
    # not seen, and node keys supplied that way cannot be turned into public keys offline.
    new = _readable(read(argparse.Namespace(config_file=args.config_file, stack=args.stack), **PLACEHOLDERS))
    base_file = STDIN if args.base == "-" else args.base
    old = _readable(read(argparse.Namespace(config_file=base_file, stack=new.stack), **PLACEHOLDERS))
    pairs = args.stack_outputs or []
    sides = (("base", "stdin" if args.base == "-" else args.base, old), ("new", _new_name(args), new))
    read_by_base = set(referenced_stacks(federation_value(old.config)))
    usage: list[str] = []
    invalid: list[str] = []
    outputs: dict[str, dict[str, dict[str, Any]]] = {}
    for side, name, found in sides:
        problems, outputs[side] = _outputs_of(found, pairs, read_by_base, side == "new")
        usage += [f"  - the {side} side ({name}): {p}" for p in problems]
        _, config = check(found)
        if config:
            invalid.append(f"error: the {side} side ({name}) is invalid: {ConfigError(config).render()}")
    if usage:
        print(
            "\n".join(
                [f"error: cannot diff ({len(usage)} problem{'s' if len(usage) != 1 else ''}):", *usage, *invalid]
            ),
            file=sys.stderr,
        )
        return 2
    if invalid:
        print("\n".join(invalid), file=sys.stderr)
        return 1
    rendered = {}
    for side, name, found in sides:
        try:
            rendered[side] = resources(found, outputs[side])
        except pulumi.RunError as err:
            print(f"error: the {side} side ({name}): {err}", file=sys.stderr)
            return 1
    result, at_up = predict((old, rendered["base"], outputs["base"]), (new, rendered["new"], outputs["new"]))
    sys.stdout.write(markdown.render(result, new.stack, topology_of(new, outputs["new"]), at_up))
    return 0


Side = tuple[StackFile, list["Resource"], dict[str, dict[str, Any]]]  # a stack file, its resources, its outputs


def predict(old: Side, new: Side) -> tuple[Review, tuple[Consequence, ...]]:
    """The review of two rendered sides, and what changes at `up` because of it (and why)."""
    from flower_federation.review import changes, consequences

    result = changes.review(old[1], new[1])
    candidates = tuple(dict.fromkeys(c for found, _, outputs in (old, new) for c in _checksummed(found, outputs)))
    return result, consequences.consequences(result, candidates)


def _checksummed(found: StackFile, outputs: dict[str, dict[str, Any]]) -> tuple[Checksummed, ...]:
    """The Secrets whose checksums the side's pod templates may carry, planned as the program plans it."""
    from flower_federation.builders.checksums import of_plan
    from flower_federation.plan import load_plan

    keys = federation_value(found.config, NODE_KEYS_KEYS)
    return of_plan(load_plan(federation_value(found.config), found.stack, keys, stack_outputs=outputs))


PLACEHOLDERS = {"encrypted_as_placeholders": True}


def _readable(found: StackFile) -> StackFile:
    keys = [path for path in found.encrypted if path.removeprefix("config.").startswith(NODE_KEYS_KEYS)]
    if keys:
        raise UsageError(
            f"encrypted (secure:) node keys cannot be read offline: {', '.join(keys)}; diff needs their public "
            "keys (run it on a copy whose nodeAuthKeys are test keys, or review with `pulumi preview`)"
        )
    return found


def _new_name(args: argparse.Namespace) -> str:
    if args.config_file:
        return str(args.config_file)
    if args.stack:
        return f"Pulumi.{args.stack}.yaml"
    return "Pulumi.dev.yaml"
