"""What crosses an organisation's boundary, as plain data: the endpoint a hub is dialled
at, the hub a site dials (with the CA it trusts), and the public keys of the sites a hub
admits. Values named by `fromStack` come from other stacks' outputs, which the shell (a
pulumi.StackReference, or `render --stack-outputs` offline) reads before planning.

Outputs exchanged (see `outputs.py`): a hub exports `superlink.externalAddress` and
`caCertificate`; a site exports `nodeAuth.publicKeys` ({pool: {slot: key}})."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Optional

from flower_federation.config import Federation
from flower_federation.config.errors import PathPart, Problem, format_path, problem
from flower_federation.config.pydantic_errors import shown as quoted
from flower_federation.flower.certificates import certificate_problem, is_offline_ca_placeholder
from flower_federation.flower.dialects import dialect_for
from flower_federation.flower.public_keys import (
    CONFIG_KEY,
    is_deploy_time_placeholder,
    key_material,
    public_key,
    public_key_problem,
    slot_order,
)
from flower_federation.flower.versions import FlowerVersion
from flower_federation.plan.exports import (
    REMOTE_FROM_STACK,
    hub_export_problems,
    shown,
    site_export_problems,
    whole_number,
)
from flower_federation.rules.raw import as_dict, as_list, get
from flower_federation.rules.security import DNS_NAME
from flower_federation.rules.sites import split_host_port

# {stack name: {output name: value}}, as `pulumi stack output --json --show-secrets` prints one stack's.
StackOutputs = Mapping[str, Mapping[str, Any]]

HUB_ADDRESS_OUTPUT = ("superlink", "externalAddress")
HUB_CA_OUTPUT = ("caCertificate",)
SITE_KEYS_OUTPUT = ("nodeAuth", "publicKeys")
_ORDINAL = re.compile(r"0|[1-9][0-9]*")  # a StatefulSet replica's slot
# Port an Ingress serves TLS on.
INGRESS_PORT = 443


@dataclass(frozen=True)
class Endpoint:
    """A host and port dialled from outside a cluster: the hub's external Fleet address,
    or the remote SuperLink a site dials."""

    host: str
    port: int

    def __str__(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"


@dataclass(frozen=True)
class RemoteSuperLink:
    """Role site: the hub's SuperLink. Trust is the hub's CA, inline (`ca_pem`, from config
    or the hub stack's output) or copied from a Secret in the site's namespace (then None)."""

    endpoint: Endpoint
    ca_pem: Optional[str] = None
    cidrs: tuple[str, ...] = ()
    # The Flower the hub reports (its stack's `flowerVersion`), when read from its stack.
    hub_version: Optional[str] = None


def stack_references(raw: Any) -> list[tuple[str, str]]:
    """(config path, stack) of every `fromStack` in the raw config, in config order (tolerant
    of wrong types: rules report those)."""
    at: list[tuple[tuple[PathPart, ...], Any]] = [
        (REMOTE_FROM_STACK, get(raw, "supernodes", "superlink", "certificate", "fromStack"))
    ]
    sites = as_list(as_dict(raw).get("sites"))
    at += [(("sites", i, "fromStack"), as_dict(site).get("fromStack")) for i, site in enumerate(sites)]
    return [(format_path(parts), name) for parts, name in at if isinstance(name, str) and name]


def referenced_stacks(raw: Any) -> list[str]:
    """Every stack the raw config names with `fromStack`, once each, in config order."""
    return list(dict.fromkeys(name for _, name in stack_references(raw)))


def _output(outputs: Optional[StackOutputs], stack: str, path: tuple[str, ...]) -> Any:
    return get((outputs or {}).get(stack), *path)


# Where moving a hub and its sites from one era to the other is written down.
ACROSS_ERAS = "docs/operations.md, Across eras"


def era_of(version: str) -> Optional[str]:
    """The Flower dialect's name of a version string, None if it is not a supported one."""
    parsed = FlowerVersion.parse(version)
    found = dialect_for(parsed) if parsed is not None else None
    return found.name if found is not None else None


def remote_superlink(
    spec: Federation, fleet_port: int, outputs: Optional[StackOutputs], site_version: object = None
) -> tuple[list[Problem], Optional[RemoteSuperLink]]:
    """Role site: the hub it dials. Without `outputs` (first validation pass, before the
    stacks are read) values a stack supplies are left open and the result is None."""
    remote = spec.supernodes.superlink
    if spec.role != "site" or remote is None:
        return [], None
    at = REMOTE_FROM_STACK
    stack = remote.certificate.from_stack
    host, port, ca_pem = remote.address, remote.port, remote.certificate.pem
    problems: list[Problem] = []
    if stack:
        if outputs is None:
            return [], None
        if stack not in outputs:
            return [problem(at, f"the outputs of stack '{stack}' were not read")], None
        problems += hub_export_problems(at, stack, outputs[stack])
        address = _output(outputs, stack, HUB_ADDRESS_OUTPUT)
        try:
            hub_host, hub_port = split_host_port(address) if isinstance(address, str) else ("", None)
        except ValueError:
            hub_host, hub_port = "", None
        if not hub_host and not host:
            problems.append(
                problem(at, f"stack '{stack}' has no output superlink.externalAddress (is it a hub?); set address")
            )
        host, port = host or hub_host, port or hub_port
        hub_tls = _output(outputs, stack, ("tls",))
        if isinstance(hub_tls, str) and (hub_tls == "enabled") == spec.insecure:
            problems.append(
                problem(
                    at,
                    f"stack '{stack}' runs its SuperLink {'with' if hub_tls == 'enabled' else 'without'} TLS; "
                    f"this site has insecure: {str(spec.insecure).lower()}",
                )
            )
        hub_version = _output(outputs, stack, ("flowerVersion",))
        if isinstance(hub_version, str) and era_of(hub_version) not in (None, era_of(str(site_version))):
            problems.append(
                problem(
                    at,
                    f"stack '{stack}' runs Flower {hub_version} ({era_of(hub_version)}); this site runs "
                    f"{site_version} ({era_of(str(site_version))}): SuperNodes and SuperLink must speak the same era. "
                    f"Set version to the hub's era ({ACROSS_ERAS})",
                )
            )
        ca_pem = _output(outputs, stack, HUB_CA_OUTPUT)
        if not spec.insecure and not (isinstance(ca_pem, str) and ca_pem):
            problems.append(problem(at, f"stack '{stack}' has no output caCertificate (a hub with TLS exports it)"))
        elif not spec.insecure and not is_offline_ca_placeholder(ca_pem):
            why = certificate_problem(ca_pem)
            if why:
                problems.append(problem(at, f"stack '{stack}' exports a caCertificate that {why}"))
    if problems or not host:
        return problems, None
    hub_version = _output(outputs, stack, ("flowerVersion",)) if stack else None
    reported = hub_version if isinstance(hub_version, str) else None
    return [], RemoteSuperLink(Endpoint(host, port or fleet_port), ca_pem, tuple(remote.cidrs), reported)


# Where a trusted key was given: its config path, and (a fromStack key) which of the stack's outputs.
KeyOwner = tuple[str, str]


def site_keys(
    spec: Federation, outputs: Optional[StackOutputs], supplied: Optional[Mapping[str, Mapping[str, str]]] = None
) -> tuple[list[Problem], tuple[tuple[str, tuple[str, ...]], ...]]:
    """Public keys to admit, by site: inline, or every key of a site stack's
    `nodeAuth.publicKeys` output (in pool, then slot order). Each key is trusted once: the same key
    material given twice (by two sites, a site twice, or a site and a pool's `supplied` private key)
    is refused naming both, since removing one holder could never revoke it."""
    problems: list[Problem] = []
    found: list[tuple[str, tuple[str, ...]]] = []
    owners: dict[bytes, KeyOwner] = {}

    def own(key: str, path: str, detail: str = "") -> None:
        if is_deploy_time_placeholder(key):
            return
        first = owners.setdefault(key_material(key), (path, detail))
        if first != (path, detail):
            shown = key.split()[1][-16:] if len(key.split()) > 1 else key[-16:]
            problems.append(
                Problem(
                    path,
                    f"key ...{shown}{detail} is also trusted as {first[0]}{first[1]}: one key is one SuperNode's, "
                    "trusted once (removing either would not revoke it); give each SuperNode its own key pair",
                )
            )

    for pool, slots in sorted((supplied or {}).items()):
        for slot in sorted(slots, key=slot_order):
            own(public_key(slots[slot]), format_path((pool, slot), CONFIG_KEY))
    for i, site in enumerate(spec.sites):
        keys = list(site.public_keys)
        for j, key in enumerate(keys):
            own(key, format_path(("sites", i, "publicKeys", j)))
        if site.from_stack and outputs is not None:
            at = ("sites", i, "fromStack")
            by_pool = _output(outputs, site.from_stack, SITE_KEYS_OUTPUT)
            if site.from_stack not in outputs:
                problems.append(problem(at, f"the outputs of stack '{site.from_stack}' were not read"))
                continue
            problems += site_export_problems(at, site.name, site.from_stack, outputs[site.from_stack])
            if not isinstance(by_pool, dict):
                found_as = "no output" if by_pool is None else f"{shown(by_pool)} as its output"
                problems.append(
                    problem(
                        at,
                        f"stack '{site.from_stack}' has {found_as} nodeAuth.publicKeys (a site with nodeAuth exports "
                        "a mapping of pool to its keys)",
                    )
                )
                continue
            exported: list[tuple[str, str]] = []
            problems += _export_shape(
                at, site.from_stack, by_pool, as_dict(_output(outputs, site.from_stack, ("pools",)))
            )
            for pool in sorted(by_pool):
                slots = as_dict(by_pool[pool])
                exported += [(f"{pool}.{s}", slots[s]) for s in sorted(slots, key=slot_order)]
                problems += [
                    problem(
                        at,
                        f"stack '{site.from_stack}' exports a key under slot {s!r} (publicKeys.{pool}.{s}), which is "
                        "neither a replica ordinal nor a Kubernetes node name",
                    )
                    for s in sorted(slots, key=slot_order)
                    if not is_slot(s)
                ]
            keys += [key for _, key in exported]
            bad = [(slot, why) for slot, key in exported if (why := public_key_problem(key))]
            for slot, why in bad[:1]:
                problems.append(problem(at, f"stack '{site.from_stack}' exports a key (publicKeys.{slot}) that {why}"))
            for slot, key in exported if not bad else []:
                own(key, format_path(at), f" (its stack's publicKeys.{slot})")
        found.append((site.name, tuple(keys)))
    return problems, tuple(found)


def _export_shape(at: tuple[Any, ...], stack: str, by_pool: dict[str, Any], pools: dict[str, Any]) -> list[Problem]:
    """What a site stack's key export must hold for the hub to trust exactly its SuperNodes: each pool a mapping of
    slot to key, and a StatefulSet pool (its `pools` output says which, and how many replicas) a key for every
    ordinal. A pool exported as anything else, or with keys missing (a null key, dropped on its way through Pulumi),
    would otherwise be trusted as fewer keys, silently: `pulumi up` revokes the keys the hub no longer lists."""
    found = []
    for pool in sorted(by_pool):
        slots = by_pool[pool]
        if not isinstance(slots, dict):
            found.append(
                problem(
                    at, f"stack '{stack}' exports publicKeys.{pool} as {quoted(slots)}, not a mapping of slot to key"
                )
            )
            continue
        shape = as_dict(pools.get(pool))
        replicas = shape.get("replicas")
        if not whole_number(replicas):  # site_export_problems says what else it is
            continue
        if shape.get("kind") == "StatefulSet":
            count = int(replicas)
            keyed = sum(
                1
                for slot, key in slots.items()
                if isinstance(key, str) and _ORDINAL.fullmatch(slot) and int(slot) < count
            )
            # The first few missing ordinals by name (a site's output may claim any number of replicas).
            named = [str(n) for n in range(min(count, len(slots) + 3)) if not isinstance(slots.get(str(n)), str)]
            if keyed < count:
                more = f" (and {count - keyed - len(named)} more)" if count - keyed > len(named) else ""
                found.append(
                    problem(
                        at,
                        f"stack '{stack}' exports no key for ordinal {', '.join(named)}{more} of pool '{pool}' "
                        f"({count} replicas, its pools output says): those SuperNodes would be refused",
                    )
                )
    return found


def is_slot(slot: str) -> bool:
    """A slot a site's own stack can export: a replica ordinal (`0`) or a Kubernetes node name, ASCII only."""
    return bool(DNS_NAME.fullmatch(slot)) and not slot.startswith("*")


def site_versions(spec: Federation, outputs: Optional[StackOutputs]) -> tuple[tuple[str, str], ...]:
    """(site, Flower version) of every site whose stack says which Flower it runs (its
    `flowerVersion` output): the hub warns when one is in another era."""
    found = []
    for site in spec.sites:
        version = _output(outputs, site.from_stack, ("flowerVersion",)) if site.from_stack else None
        if isinstance(version, str):
            found.append((site.name, version))
    return tuple(found)


def external_endpoint(spec: Federation, fleet_port: int) -> Optional[Endpoint]:
    """Where the SuperLink is dialled from outside its cluster: `externalAddress`, else the
    gateway hostname or the ingress host (port 443), else the first `tls.dnsNames` entry,
    with the Fleet port."""
    sl = spec.superlink
    fronts = {h for h in (sl.gateway.hostname if sl.gateway else None, sl.ingress.host if sl.ingress else None) if h}
    if sl.external_address:
        host, port = split_host_port(sl.external_address)
        return Endpoint(host, port or (INGRESS_PORT if host in fronts else fleet_port))
    if sl.gateway:
        return Endpoint(sl.gateway.hostname, INGRESS_PORT)
    if sl.ingress:
        return Endpoint(sl.ingress.host, INGRESS_PORT)
    if spec.tls.dns_names:
        return Endpoint(spec.tls.dns_names[0], fleet_port)
    return None
