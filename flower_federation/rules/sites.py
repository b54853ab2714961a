"""Roles (federation, hub, site), the SuperLink a site dials, the sites a hub admits, and
the clusters one stack deploys into.

A key that makes no sense for the stack's role is an error at its own path, so a hub
config with pools or a site config with a SuperLink image says exactly what to remove."""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterator
from typing import Any, Optional

from flower_federation.config.derived import AMBIENT_CLUSTER, DEFAULTS, Exposure, superlink_exposure
from flower_federation.config.errors import Problem, problem
from flower_federation.flower.certificates import certificate_problem
from flower_federation.flower.dialects import HTTP_PORT, Dialect
from flower_federation.flower.public_keys import public_key_problem
from flower_federation.kube.naming import DNS1123_LABEL, DNS_LABEL_MAX
from flower_federation.rules.gateway import gateway_listener
from flower_federation.rules.raw import Pools, Raw, as_dict, as_list, get
from flower_federation.rules.security import DNS_NAME, is_cidr

# A port as written in `host:port`: ASCII digits only (str.isdigit() is also true of '٤٤٣', which int() reads as 443).
PORT = re.compile(r"[0-9]{1,5}")
# `org/project/stack` (or `project/stack`, `stack`), as `pulumi.StackReference` takes it.
STACK_NAME = re.compile(r"^[A-Za-z0-9_.-]+(/[A-Za-z0-9_.-]+){0,2}$")
SITE_ONLY = "supernodes.superlink is for role site only: a hub or federation runs the SuperLink itself"


def role_of(raw: Raw) -> str:
    role = raw.get("role", DEFAULTS.role)
    return role if isinstance(role, str) else DEFAULTS.role


def has_pools(raw: Raw) -> bool:
    pools = get(raw, "supernodes", "pools")
    return isinstance(pools, list) and len(pools) > 0


def split_host_port(text: str) -> tuple[str, Optional[int]]:
    """`host`, `host:port` or `[v6]:port` -> (host, port or None); ValueError if malformed."""
    if text.startswith("["):
        host, _, rest = text[1:].partition("]")
        if rest and not rest.startswith(":"):
            raise ValueError(text)
        port_text = rest[1:] if rest else None
    elif text.count(":") == 1:
        host, port_text = text.split(":")
    else:
        host, port_text = text, None
    if not host or not valid_host(host):
        raise ValueError(text)
    if port_text is None:
        return host, None
    if not PORT.fullmatch(port_text) or not 1 <= int(port_text) <= 65535:
        raise ValueError(text)
    return host, int(port_text)


def valid_host(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
        return True
    except ValueError:
        return bool(DNS_NAME.fullmatch(host)) and not host.startswith("*")


def roles(raw: Raw, pools: Pools, dialect: Optional[Dialect]) -> Iterator[Problem]:
    role = role_of(raw)
    if role != "site":
        yield from _exposure(raw, pools, dialect)
    if role == "hub":
        if get(raw, "nodeAuth", "enabled") is not True and raw.get("insecure") is not True:
            yield problem(
                ("nodeAuth", "enabled"),
                "a hub accepts SuperNodes from other organisations: set nodeAuth.enabled: true, so only the keys it "
                "registers may join",
            )
        if has_pools(raw):
            yield problem(
                ("supernodes", "pools"),
                "a hub runs no SuperNodes: put pools in site stacks (role: site), or use role: federation",
            )
        for key in sorted(as_dict(raw.get("supernodes"))):
            if key not in ("pools", "superlink"):
                yield problem(("supernodes", key), "a hub runs no SuperNodes: this belongs in a site stack")
        if not external_address_known(raw):
            yield problem(
                ("superlink", "externalAddress"),
                "a hub is dialled from other clusters: set superlink.externalAddress, superlink.gateway, "
                "superlink.ingress or tls.dnsNames",
            )
        service_type = get(raw, "superlink", "service", "type", default=DEFAULTS.superlink.service.type)
        if (
            service_type == "ClusterIP"
            and not get(raw, "superlink", "ingress")
            and not get(raw, "superlink", "gateway")
        ):
            yield problem(
                ("superlink", "service", "type"),
                "a hub must be reachable from other clusters: set LoadBalancer or NodePort, or add superlink.gateway "
                "(or superlink.ingress)",
            )
    if role == "site":
        yield from _site(raw)
    elif get(raw, "supernodes", "superlink") is not None:
        yield problem(("supernodes", "superlink"), SITE_ONLY)
    if role != "site":
        remote_pools = [i for i, p in pools if _cluster_of(p) != _cluster_of(as_dict(raw.get("superlink")))]
        if remote_pools and not external_address_known(raw):
            yield problem(
                ("supernodes", "pools", remote_pools[0], "cluster"),
                "this pool runs in another cluster than the SuperLink and dials its external address: set "
                "superlink.externalAddress, superlink.ingress or tls.dnsNames",
            )
    yield from _external_address(raw)
    for i, cidr in enumerate(as_list(get(raw, "superlink", "service", "loadBalancerSourceRanges"))):
        if isinstance(cidr, str) and not is_cidr(cidr):
            yield problem(
                ("superlink", "service", "loadBalancerSourceRanges", i),
                f"'{cidr}' is not a CIDR (e.g. 198.51.100.0/24)",
            )
    yield from _sites(raw, role)
    yield from _clusters(raw, pools)


def exposure(raw: Raw, pools: Pools) -> Exposure:
    """How the SuperLink is reached from outside its cluster (as plan.exposure: one function)."""
    return superlink_exposure(
        role_of(raw),
        get(raw, "superlink", "service", "type"),
        get(raw, "superlink", "ingress"),
        get(raw, "superlink", "gateway"),
        _cluster_of(as_dict(raw.get("superlink"))),
        [_cluster_of(p) for _, p in pools],
    )


def _exposure(raw: Raw, pools: Pools, dialect: Optional[Dialect]) -> Iterator[Problem]:
    yield from _control_service(raw)
    yield from _gateway(raw)
    yield from gateway_listener(raw, dialect)
    if dialect is not None and dialect.resolve_ports({}).serverappio is not None:
        for key in ("fleetProxy", "controlService"):
            if get(raw, "superlink", key) is not None:
                yield problem(
                    ("superlink", key),
                    f"HTTP era only (Flower 1.40+): Flower {dialect.version} serves the Fleet API on a port of its "
                    "own, which alone is exposed; remove this",
                )
    exposed = exposure(raw, pools)
    if not exposed.reachable:
        return
    http_era = dialect is not None and dialect.resolve_ports({}).serverappio is None
    if (
        http_era
        and get(raw, "superlink", "fleetProxy", "enabled") is False
        and get(raw, "superlink", "exposeControlApi") is not True
    ):
        yield problem(
            ("superlink", "fleetProxy", "enabled"),
            f"Flower {dialect.version if dialect else ''} serves Fleet and Control on one port: without the "
            "Fleet-only proxy, exposing this SuperLink outside its cluster exposes its Control API too (`flwr run` "
            "runs code at every site). Remove fleetProxy.enabled: false, or set superlink.exposeControlApi: true to "
            "accept that",
        )
    service_type = get(raw, "superlink", "service", "type", default=DEFAULTS.superlink.service.type)
    address = get(raw, "superlink", "externalAddress")
    # Sites and pools in other clusters dial the external address: a NodePort's is the node's, with its port.
    if exposed.by_config and service_type == "NodePort" and not get(raw, "superlink", "ingress"):
        has_port = False
        if isinstance(address, str):
            try:
                has_port = split_host_port(address)[1] is not None
            except ValueError:
                has_port = True  # reported by _external_address
        if not has_port:
            yield problem(
                ("superlink", "externalAddress"),
                "with a NodePort Service, give the node address and the node port sites dial (host:port); Kubernetes "
                "picks the node port (30000-32767), not the Fleet port",
            )


def _control_service(raw: Raw) -> Iterator[Problem]:
    at = ("superlink", "controlService")
    cs = get(raw, *at)
    if not isinstance(cs, dict):
        return
    ranges = as_list(cs.get("loadBalancerSourceRanges"))
    if cs.get("type") == "LoadBalancer" and not ranges:
        yield problem(
            at + ("loadBalancerSourceRanges",),
            "required with type LoadBalancer: the CIDRs allowed to reach the Control API (`flwr run` runs code at "
            "every site), e.g. your operators' egress addresses",
        )
    for i, cidr in enumerate(ranges):
        if isinstance(cidr, str) and not is_cidr(cidr):
            yield problem(at + ("loadBalancerSourceRanges", i), f"'{cidr}' is not a CIDR (e.g. 198.51.100.0/24)")
    port = cs.get("port")
    fleet = get(raw, "superlink", "service", "ports", "http", default=HTTP_PORT)
    if isinstance(port, int) and port == fleet:
        yield problem(
            at + ("port",),
            f"{port} is the Fleet port (superlink.service.ports.http), which the Fleet-only proxy serves: choose "
            "another port for the SuperLink's own API",
        )


def _gateway(raw: Raw) -> Iterator[Problem]:
    at = ("superlink", "gateway")
    gw = get(raw, *at)
    if not isinstance(gw, dict):
        return
    host = gw.get("hostname")
    if isinstance(host, str) and ":" in host:
        yield problem(at + ("hostname",), f"'{host}': give the name only (sites dial it on the listener's port, 443)")
    elif isinstance(host, str) and not (DNS_NAME.fullmatch(host) and not host.startswith("*")):
        yield problem(at + ("hostname",), f"'{host}' is not a DNS name (sites dial it; no wildcard)")
    refs = gw.get("parentRefs")
    if isinstance(refs, list) and not refs:
        yield problem(at + ("parentRefs",), "at least one Gateway (name, namespace, sectionName) to attach to")
    for i, ref in enumerate(as_list(refs)):
        ns = get(ref, "namespace")
        if isinstance(ns, str) and not (DNS_NAME.fullmatch(ns) and "." not in ns and len(ns) <= DNS_LABEL_MAX):
            yield problem(at + ("parentRefs", i, "namespace"), f"'{ns}' is not a namespace name")
        for key in ("name", "sectionName"):
            value = get(ref, key)
            if isinstance(value, str) and not (DNS_NAME.fullmatch(value) and len(value) <= 253):
                yield problem(at + ("parentRefs", i, key), f"'{value}' is not a Gateway API object name")
        if get(ref, "sectionName") is None and get(ref, "allListeners") is not True:
            # Without sectionName a route attaches to every listener that admits it, plain HTTP too.
            yield problem(
                at + ("parentRefs", i, "sectionName"),
                f"unset: the route would attach to every listener of Gateway '{get(ref, 'name')}', plain-HTTP ones "
                "included (the Fleet API in clear); name the listener sites dial (HTTPS, or TLS passthrough in the "
                "gRPC era), or set allListeners: true",
            )
    for key in ("podSelector", "namespaceSelector"):
        labels = gw.get(key)
        if isinstance(labels, dict) and not labels:
            yield problem(at + (key,), "empty: leave it unset (any source) or give the gateway pods' labels")


def external_address_known(raw: Raw) -> bool:
    return bool(
        get(raw, "superlink", "externalAddress")
        or get(raw, "superlink", "gateway", "hostname")
        or get(raw, "superlink", "ingress", "host")
        or as_list(get(raw, "tls", "dnsNames"))
    )


def _cluster_of(component: Raw) -> Any:
    return component.get("cluster")


def _site(raw: Raw) -> Iterator[Problem]:
    for key in sorted(as_dict(raw.get("superlink"))):
        yield problem(("superlink", key), "a site runs no SuperLink: its SuperNodes dial supernodes.superlink")
    for key in ("tls", "cli", "sites"):
        if raw.get(key):
            reason = {
                "tls": "a site takes no TLS settings: it trusts the hub's CA (supernodes.superlink.certificate) and "
                "generates its own CA for its SuperNodes' Runtime API (isolationMode process)",
                "cli": "`flwr` dials the hub's SuperLink: the hub stack exports its connection config",
                "sites": "the hub admits sites; a site only hands its public keys over",
            }[key]
            yield problem((key,), reason)
    remote = raw.get("supernodes", {}).get("superlink") if isinstance(raw.get("supernodes"), dict) else None
    if not isinstance(remote, dict):
        yield problem(
            ("supernodes", "superlink"),
            "required for role site: the hub's address and CA (address, port, certificate.pem | existingSecret | "
            "fromStack)",
        )
        return
    at = ("supernodes", "superlink")
    cert = as_dict(remote.get("certificate"))
    from_stack = cert.get("fromStack")
    address = remote.get("address")
    if not address and not from_stack:
        yield problem(at + ("address",), "required: the hub's SuperLink host (or certificate.fromStack)")
    elif isinstance(address, str) and not valid_host(address):
        yield problem(at + ("address",), f"'{address}' is not a host name or IP address (the port goes in `port`)")
    sources = [k for k in ("pem", "existingSecret", "fromStack") if cert.get(k)]
    insecure = raw.get("insecure") is True
    typed = isinstance(raw.get("insecure", False), bool)  # else its type error is the problem: no guess at the CA
    if insecure and sources and sources != ["fromStack"]:
        yield problem(at + ("certificate",), "a certificate has no use with insecure: true; remove one of the two")
    elif typed and not insecure and len(sources) != 1:
        found = ", ".join(sources) if sources else "none"
        empty = [k for k in ("pem", "existingSecret", "fromStack") if k in cert and k not in sources]
        if empty and not sources:
            found += f" ({', '.join(empty)} given but empty)"
        yield problem(
            at + ("certificate",),
            f"set exactly one of pem, existingSecret, fromStack (the hub's CA certificate); found: {found}",
        )
    pem = cert.get("pem")
    why = certificate_problem(pem) if isinstance(pem, str) else None
    if why:
        yield problem(at + ("certificate", "pem"), f"must be the hub's CA certificate in PEM; this one {why}")
    secret = cert.get("existingSecret")
    if isinstance(secret, str) and not (DNS_NAME.fullmatch(secret) and len(secret) <= 253):
        yield problem(at + ("certificate", "existingSecret"), f"'{secret}' is not a Secret name")
    if isinstance(from_stack, str) and not STACK_NAME.fullmatch(from_stack):
        yield problem(at + ("certificate", "fromStack"), f"'{from_stack}' is not a stack name (org/project/stack)")
    if isinstance(secret, str) and raw.get("createNamespace", DEFAULTS.create_namespace) is True:
        yield problem(
            ("createNamespace",),
            "certificate.existingSecret lives in the site's namespace, which must exist before the stack: set "
            "createNamespace: false (or give the CA as certificate.pem)",
        )
    for i, cidr in enumerate(as_list(remote.get("cidrs"))):
        if not is_cidr(cidr):  # a NetworkPolicy ipBlock: an address alone is refused there
            yield problem(at + ("cidrs", i), f"'{cidr}' is not a CIDR (e.g. 203.0.113.0/24)")


def _external_address(raw: Raw) -> Iterator[Problem]:
    address = get(raw, "superlink", "externalAddress")
    if isinstance(address, str):
        try:
            split_host_port(address)
        except ValueError:
            yield problem(("superlink", "externalAddress"), f"'{address}' is not `host` or `host:port`")
    host = get(raw, "superlink", "ingress", "host")
    if isinstance(host, str) and not (DNS_NAME.fullmatch(host) and not host.startswith("*")):
        yield problem(("superlink", "ingress", "host"), f"'{host}' is not a DNS name")


def _sites(raw: Raw, role: str) -> Iterator[Problem]:
    sites = as_list(raw.get("sites"))
    if not sites:
        return
    if role != "site" and get(raw, "nodeAuth", "enabled") is not True:
        yield problem(("sites",), "sites are admitted by their node keys: set nodeAuth.enabled: true")
    seen: dict[str, int] = {}
    for i, site in enumerate(sites):
        if not isinstance(site, dict):
            continue
        at = ("sites", i)
        name = site.get("name")
        if isinstance(name, str):
            if not (DNS1123_LABEL.fullmatch(name) and len(name) <= DNS_LABEL_MAX):
                yield problem(at + ("name",), f"'{name}' is not a DNS label (lowercase letters, digits and '-')")
            elif name in seen:
                yield problem(at + ("name",), f"duplicate site name '{name}' (also sites[{seen[name]}])")
            seen.setdefault(name, i)
        keys = as_list(site.get("publicKeys"))
        from_stack = site.get("fromStack")
        if bool(keys) == bool(from_stack):
            yield problem(at, "set exactly one of publicKeys (inline) and fromStack (the site stack's output)")
        if isinstance(from_stack, str) and not STACK_NAME.fullmatch(from_stack):
            yield problem(at + ("fromStack",), f"'{from_stack}' is not a stack name (org/project/stack)")
        for j, key in enumerate(keys):
            why = public_key_problem(key, placeholders=False)
            if why:
                # Control and separator characters quoted as escapes: the message stays one line.
                text = str(key).encode("unicode_escape").decode() if isinstance(key, str) else str(key)
                shown = text if len(text) <= 60 else f"{text[:57]}..."
                yield problem(at + ("publicKeys", j), f"'{shown}' {why}")


def _clusters(raw: Raw, pools: Pools) -> Iterator[Problem]:
    clusters = as_dict(raw.get("clusters"))
    for name, cluster in clusters.items():
        if not (DNS1123_LABEL.fullmatch(name) and len(name) <= DNS_LABEL_MAX):
            yield problem(("clusters", name), f"cluster name '{name}' must be a DNS label")
        elif name == AMBIENT_CLUSTER:
            yield problem(
                ("clusters", name), f"'{AMBIENT_CLUSTER}' names the stack's ambient cluster; choose another name"
            )
        if isinstance(cluster, dict) and not (cluster.get("kubeconfig") or cluster.get("context")):
            yield problem(("clusters", name), "set kubeconfig (a secret) or context")
    known = ", ".join(sorted(clusters)) or "none"
    refs: list[tuple[tuple[Any, ...], Any]] = [(("superlink", "cluster"), get(raw, "superlink", "cluster"))]
    refs += [(("supernodes", "pools", i, "cluster"), p.get("cluster")) for i, p in pools]
    for at, name in refs:
        if isinstance(name, str) and name not in clusters:
            yield problem(at, f"'{name}' is not a key of clusters (known: {known})")
