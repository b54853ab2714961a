"""What a program hands `Federation`: the config model, or the same shape as a dict (the
stack config's `federation` value) whose values may be Pulumi Inputs: a StackReference's
output, another resource's, a secret.

The plan needs plain values (an address goes into command lines, a port into
NetworkPolicies, a CA into a Secret and a checksum), so every Input is awaited here, once,
before anything is registered, as `stack_refs.read` awaits a `fromStack` stack's outputs.
A value that is still unknown at `pulumi preview` (it comes from a resource this very
update creates) cannot be planned: it is reported by its config path, with the rest of the
config's problems, and nothing is registered. A secret Input stays secret: its value is noted, and
every object whose inputs hold it is registered with those inputs secret.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pulumi
from pulumi.runtime import rpc
from pulumi.runtime.sync_await import _sync_await

from flower_federation.config import Federation as FederationArgs
from flower_federation.config.errors import ROOT, PathPart, Problem, problem

UNKNOWN_AT_PREVIEW = (
    "is unknown until `pulumi up` (it comes from a resource this update creates), and the federation is "
    "planned from known values: pass a value known at preview (config, a StackReference's output, a literal), "
    "or create that resource in an earlier stack"
)

RESOLVED_TO_NOTHING = (
    "the Input given here resolved to nothing (None): a StackReference's get_output of an output the stack does "
    "not export (check the name against `pulumi stack output --stack ...`), or an Output of an unset value"
)


@dataclass
class Resolved:
    """Plain data, what could not be resolved, and the values that came from secret Inputs (as text: the
    component keeps every input that holds one secret, shell/federation.py)."""

    value: Any
    problems: list[Problem] = field(default_factory=list)
    secrets: set[str] = field(default_factory=set)


def plain_config(args: FederationArgs | Mapping[str, Any]) -> Resolved:
    """The config as plain data: a model as its camelCase dump of what was set (what a stack file would
    hold), a mapping with every Input in it resolved."""
    if isinstance(args, FederationArgs):
        return Resolved(args.model_dump(mode="json", by_alias=True, exclude_unset=True))
    return plain_value(args, ROOT)


def plain_value(value: Any, root: str) -> Resolved:
    """An Input (the config, the node keys, reported as `root`), resolved."""
    found = Resolved(None)
    found.value = _resolve(value, (), root, found, secret=False)
    return found


def _resolve(value: Any, path: tuple[PathPart, ...], root: str, found: Resolved, secret: bool) -> Any:
    if isinstance(value, pulumi.Output) or inspect.isawaitable(value):
        output = pulumi.Output.from_input(value)
        if not _sync_await(output.is_known()):
            found.problems.append(problem(path, UNKNOWN_AT_PREVIEW, root))
            return None
        secret = secret or bool(_sync_await(output.is_secret()))
        resolved = _sync_await(output.future())
        if resolved is None:  # else reported as a missing setting, though the user did set one
            found.problems.append(problem(path, RESOLVED_TO_NOTHING, root))
            return None
        return _resolve(resolved, path, root, found, secret)
    if isinstance(value, str) and value == rpc.UNKNOWN:  # an unknown as the engine hands it to a provider
        found.problems.append(problem(path, UNKNOWN_AT_PREVIEW, root))
        return None
    if isinstance(value, Mapping):
        return {key: _resolve(item, (*path, str(key)), root, found, secret) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_resolve(item, (*path, index), root, found, secret) for index, item in enumerate(value)]
    if secret and isinstance(value, (str, int, float)) and not isinstance(value, bool):
        found.secrets.add(str(value))
    return value
