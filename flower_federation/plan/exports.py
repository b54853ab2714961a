"""The shape of what one stack reads from another (`fromStack`), beyond the keys themselves: a value of the wrong
type was read as no value before (`rules/raw.as_dict`, an `isinstance` that skipped the check), so a malformed export
let a hub trust fewer of a site's keys, or a site dial another port than its hub's, without a word.

A null is not a value Pulumi passes on: a StackReference's outputs lose every null inside a mapping on their way
through Pulumi (its deserialisation drops them), so `render` and `pulumi up` never see one. `dropped_nulls` reports
those of a stack's outputs file (`--stack-outputs`) before they vanish, and `as_pulumi_reads` gives the outputs as
Pulumi passes them, so `validate` and `render` read the same values."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any, TypeGuard

from flower_federation.config.errors import PathPart, Problem, problem
from flower_federation.rules.raw import as_dict, as_list, get
from flower_federation.rules.sites import split_host_port

# Where a site names the hub stack it reads (the CA and the address).
REMOTE_FROM_STACK = ("supernodes", "superlink", "certificate", "fromStack")

# Outputs a hub reads from a site stack, and a site from its hub's.
SITE_OUTPUTS_READ = ("nodeAuth", "pools", "flowerVersion")
HUB_OUTPUTS_READ = ("superlink", "caCertificate", "tls", "flowerVersion")
MODES = ("StatefulSet", "DaemonSet")


def shown(value: Any) -> str:
    """A value as the stack's JSON spells it, cut to 60 characters."""
    text = json.dumps(value, ensure_ascii=False, default=repr)
    return text if len(text) <= 60 else text[:57] + "..."


def whole_number(value: Any) -> TypeGuard[int | float]:
    """An output number that is whole: Pulumi's outputs carry JSON numbers, so a count arrives as a float (2.0)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and float(value).is_integer()


def _nulls(value: Any, path: tuple[str, ...]) -> Iterator[tuple[str, ...]]:
    if isinstance(value, dict):
        for key, item in value.items():
            yield from [path + (str(key),)] if item is None else _nulls(item, path + (str(key),))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from _nulls(item, path + (str(i),))


def _without_nulls(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_without_nulls(v) for v in value]
    return value


def as_pulumi_reads(
    raw: Any, outputs: Mapping[str, Mapping[str, Any]]
) -> tuple[list[Problem], dict[str, dict[str, Any]]]:
    """(a problem for every null among the outputs the config reads, at each `fromStack` naming its stack; the
    outputs as a StackReference passes them on, nulls dropped)."""

    reads: list[tuple[tuple[PathPart, ...], str, tuple[str, ...], str]] = []
    remote = get(raw, *REMOTE_FROM_STACK)
    if isinstance(remote, str):
        reads.append((REMOTE_FROM_STACK, remote, HUB_OUTPUTS_READ, "the hub"))
    for i, site in enumerate(as_list(as_dict(raw).get("sites"))):
        stack, name = as_dict(site).get("fromStack"), as_dict(site).get("name")
        if isinstance(stack, str):
            reads.append((("sites", i, "fromStack"), stack, SITE_OUTPUTS_READ, f"site {name!r}"))
    problems = [
        problem(
            at,
            f"{who}: stack '{stack}' exports {'.'.join(null)} as null, which Pulumi drops on its way to this stack "
            "(it would read no such value): export a value, or none",
        )
        for at, stack, names, who in reads
        if stack in outputs
        for null in _nulls({k: v for k, v in outputs[stack].items() if k in names}, ())
    ]
    return problems, {stack: _without_nulls(dict(values)) for stack, values in outputs.items()}


def site_export_problems(at: tuple[PathPart, ...], site: str, stack: str, outputs: Any) -> list[Problem]:
    """A hub reading a site stack: its `pools` (what says how many keys a StatefulSet pool must export) and its
    `flowerVersion`, refused when present in another shape than the site's own program exports."""
    who = f"site {site!r}: stack '{stack}' exports"
    found = []
    pools = as_dict(outputs).get("pools")
    if pools is not None and not isinstance(pools, dict):
        found.append(problem(at, f"{who} pools as {shown(pools)}, not a mapping of pool to its kind and replicas"))
    for pool, shape in sorted(as_dict(pools).items()):
        if not isinstance(shape, dict):
            found.append(problem(at, f"{who} pools.{pool} as {shown(shape)}, not a mapping (kind, replicas)"))
            continue
        kind, replicas = shape.get("kind"), shape.get("replicas")
        if kind is not None and kind not in MODES:
            found.append(problem(at, f"{who} pools.{pool}.kind as {shown(kind)}, not one of {', '.join(MODES)}"))
        if kind == "StatefulSet" and replicas is not None and not (whole_number(replicas) and replicas >= 0):
            found.append(
                problem(at, f"{who} pools.{pool}.replicas as {shown(replicas)}, not a whole number of replicas")
            )
    version = as_dict(outputs).get("flowerVersion")
    if version is not None and not isinstance(version, str):
        found.append(problem(at, f"{who} flowerVersion as {shown(version)}, not a version string"))
    return found


def hub_export_problems(at: tuple[PathPart, ...], stack: str, outputs: Any) -> list[Problem]:
    """A site reading its hub's stack: `superlink.externalAddress` (host[:port]; a malformed one was read as none, so
    the site dialled its config's address at the Fleet port), `tls` and `flowerVersion`, refused when present in
    another shape than the hub's own program exports."""
    who = f"the hub: stack '{stack}' exports"
    found = []
    superlink = as_dict(outputs).get("superlink")
    if superlink is not None and not isinstance(superlink, dict):
        found.append(problem(at, f"{who} superlink as {shown(superlink)}, not a mapping (externalAddress, ...)"))
    address = as_dict(superlink).get("externalAddress")
    if address is not None:
        try:
            host, _ = split_host_port(address) if isinstance(address, str) else ("", None)
        except ValueError:
            host = ""
        if not host:
            found.append(problem(at, f"{who} superlink.externalAddress as {shown(address)}, not a host[:port]"))
    for name in ("tls", "flowerVersion"):
        value = as_dict(outputs).get(name)
        if value is not None and not isinstance(value, str):
            found.append(problem(at, f"{who} {name} as {shown(value)}, not a string"))
    return found
