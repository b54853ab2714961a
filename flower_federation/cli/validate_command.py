"""`python -m flower_federation validate`: every problem of the stack's config at once, offline; and, when it
passes, what it could not check offline (values only Pulumi decrypts, outputs of other stacks not given) with how
to check them, so that `render` or `pulumi preview` is never the first to complain."""

from __future__ import annotations

import argparse
import sys

from flower_federation.cli.render import placeholder_notes, report, stack_outputs, unread_stacks
from flower_federation.cli.stack_file import checked, federation_value, read
from flower_federation.plan.exports import as_pulumi_reads
from flower_federation.plan.outputs import prerelease_warnings


def cmd_validate(args: argparse.Namespace) -> int:
    found = read(args, encrypted_as_placeholders=True)
    pairs: list[str] = getattr(args, "stack_outputs", None) or []
    raw = federation_value(found.config)
    usage, outputs = stack_outputs(pairs, raw, require_all=False)
    nulls, outputs = as_pulumi_reads(raw, outputs)  # what a StackReference passes on: no nulls
    unread = unread_stacks(pairs, raw)
    # Another stack's outputs are checked with the config only when every stack it reads is given: the plan
    # reads a stack it was not given as one whose outputs are missing.
    plan, problems = checked(found, None if unread else outputs)
    if nulls:
        plan, problems = None, nulls + problems
    if usage or plan is None:
        print(report(usage, problems, "validate"), file=sys.stderr)
        return 2 if usage else 1
    pools = ", ".join(f"{p.name}" for p in plan.spec.supernodes.pools) or f"none (a {plan.role} runs no SuperNodes)"
    print(
        f"ok: federation '{plan.name}' in namespace '{plan.namespace}', Flower {plan.version} "
        f"({plan.dialect.name}), {plan.spec.mode} pools: {pools}"
    )
    for warning in prerelease_warnings(plan):
        print(f"warning: {warning}", file=sys.stderr)
    for note in [*not_checked(found.encrypted, unread, bool(outputs)), *placeholder_notes(raw, outputs)]:
        print(f"note: {note}", file=sys.stderr)
    return 0


def not_checked(encrypted: tuple[str, ...], unread: list[tuple[str, str]], some_read: bool) -> list[str]:
    """What validate could not check offline, each with the command that checks it."""
    notes = []
    if encrypted:
        notes.append(
            f"not checked offline, encrypted (secure:): {', '.join(encrypted)}; pulumi preview decrypts and checks them"
        )
    for path, stack in unread:
        # A hub reads its sites' node keys; a site reads its hub's address and trust (plan/sites.py).
        holds = "its SuperNodes' public keys" if ".sites[" in path else "the hub's address, CA certificate, TLS"
        notes.append(
            f"not checked offline, the outputs of stack '{stack}' that {path} reads ({holds} and Flower "
            f"version): check them with `validate --stack-outputs {stack}=FILE.json`, "
            f"FILE.json written by `pulumi stack output --json --stack {stack}` (or by `render --outputs` of that "
            "stack's config); `render` needs it too"
        )
    if unread and some_read:
        notes.append("the --stack-outputs given are checked with the config once every stack it reads is given")
    return notes
