"""A pool's ClientAppIo API (the Helm chart's `supernode.service.*` and `supernode.containerPorts.*`): ports that do
not clash in a pod, and a NodePort or LoadBalancer Service only where it reaches something, for one SuperNode, with
the pool's NetworkPolicy saying the API may be reached from outside, and, where the pool's Runtime API certificate
is made for it, the names outside SuperExecs dial it by."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any, Optional

from flower_federation.config.derived import DEFAULTS, POOL_SERVICE_DEFAULTS, network_policy_settings
from flower_federation.config.errors import Problem, problem
from flower_federation.flower.dialects import HEALTH_PORT, SIDECAR_HEALTH_PORT, SUPERNODE_APPIO_PORT, Dialect
from flower_federation.flower.versions import APPIO_PROTECTION_SINCE
from flower_federation.kube.naming import is_ip_address
from flower_federation.rules.raw import Pools, Raw, as_dict, get, superexecs_of
from flower_federation.rules.security import DNS_NAME

# An IANA service name, as Kubernetes takes a port name.
PORT_NAME = re.compile(r"^(?=.{1,15}$)(?=.*[a-z])[a-z0-9]+(-[a-z0-9]+)*$")


def _effective(raw: Raw, pool: Raw, key: str) -> Any:
    """A networkPolicy key as the pool's SuperNodes get it (the same layering the render uses)."""
    return network_policy_settings(
        raw.get("networkPolicy"), get(raw, "supernodes", "networkPolicy"), pool.get("networkPolicy")
    )[key]


def supernode_apis(raw: Raw, pools: Pools, isolation: str, dialect: Optional[Dialect]) -> Iterator[Problem]:
    superexecs = superexecs_of(raw)
    distributed, sidecar = superexecs.distributed, superexecs.sidecar
    http = dialect is not None and dialect.version >= APPIO_PROTECTION_SINCE
    for i, pool in pools:
        at = ("supernodes", "pools", i)
        service = as_dict(pool.get("service"))
        kind = service.get("type", POOL_SERVICE_DEFAULTS.type)
        name = service.get("portName")
        if isinstance(name, str) and not PORT_NAME.fullmatch(name):
            yield problem(
                at + ("service", "portName"),
                f"'{name}' is not a port name: at most 15 lowercase letters, digits and '-', with a letter",
            )
        if service.get("nodePort") is not None and kind not in ("NodePort", "LoadBalancer"):
            yield problem(at + ("service", "nodePort"), "only with service.type NodePort or LoadBalancer")
        if kind in ("NodePort", "LoadBalancer"):
            yield from _exposed(raw, pool, at, kind, distributed, http)
        yield from _external_names(raw, service, at, kind, distributed and http)
        yield from _ports(pool, at, sidecar)


def _exposed(raw: Raw, pool: Raw, at: tuple[Any, ...], kind: str, distributed: bool, http: bool) -> Iterator[Problem]:
    if not distributed:
        yield problem(
            at + ("service", "type"),
            f"a {kind} Service reaches the ClientAppIo API only with distributed SuperExecs (isolationMode: process, "
            "superexecPlacement: distributed); otherwise it binds 127.0.0.1 in the SuperNode's pod",
        )
    replicas = pool.get("replicas")
    if isinstance(replicas, int) and replicas != 1:
        yield problem(
            at + ("service", "type"),
            f"a {kind} Service spreads connections over the pool's SuperNodes, but a SuperExec must stay with one: "
            "use replicas: 1 (a pool per exposed SuperNode)",
        )
    if _effective(raw, pool, "enabled") is True and _effective(raw, pool, "allowExternal") is not True:
        what = (
            "the Runtime API is reachable from outside (a SuperExec there needs the pool's SuperExec auth secret)"
            if http
            else "the plaintext ClientAppIo API is reachable from outside (whoever reaches it can take and answer "
            "this SuperNode's ClientApp tasks)"
        )
        yield problem(
            at + ("networkPolicy", "allowExternal"),
            f"the {kind} Service is for SuperExecs outside the cluster, which the pool's NetworkPolicy keeps out: set "
            f"networkPolicy.allowExternal: true to accept that {what}",
        )


def _external_names(raw: Raw, service: Raw, at: tuple[Any, ...], kind: str, protectable: bool) -> Iterator[Problem]:
    """`service.externalNames`: names outside SuperExecs dial, which the pool's Runtime API certificate must carry
    where we make it (HTTP era, a hub with TLS from generate or certManager)."""
    names = service.get("externalNames")
    where = at + ("service", "externalNames")
    if names and kind not in ("NodePort", "LoadBalancer"):
        yield problem(where, "only with service.type NodePort or LoadBalancer (what SuperExecs outside dial)")
    for j, name in enumerate(names if isinstance(names, list) else []):
        if isinstance(name, str) and not (
            is_ip_address(name) or (DNS_NAME.fullmatch(name) and not name.startswith("*"))
        ):
            yield problem(where + (j,), f"'{name}' is not a DNS name or an IP address")
    made_here = get(raw, "tls", "source", default=DEFAULTS.tls.source) in ("generate", "certManager")
    tls = raw.get("insecure") is not True and raw.get("role", DEFAULTS.role) != "site"
    if kind in ("NodePort", "LoadBalancer") and protectable and tls and made_here and not names:
        yield problem(
            where,
            f"name the DNS names or IPs SuperExecs outside the cluster dial the {kind} Service by: the pool's Runtime "
            "API is served over TLS with a certificate made here for the in-cluster names, which must carry them too",
        )


def _ports(pool: Raw, at: tuple[Any, ...], sidecar: bool) -> Iterator[Problem]:
    ports = as_dict(pool.get("containerPorts"))
    appio = ports.get("clientAppIo")
    health = ports.get("health")
    appio = appio if isinstance(appio, int) else SUPERNODE_APPIO_PORT
    health = health if isinstance(health, int) else HEALTH_PORT
    if appio == health:
        yield problem(at + ("containerPorts",), f"clientAppIo and health are both {appio}")
    superexec_health = get(pool, "superexec", "containerPorts", "health")
    if sidecar and not isinstance(superexec_health, int):  # the sidecar's default, next to these
        for key, port in (("clientAppIo", appio), ("health", health)):
            if port == SIDECAR_HEALTH_PORT:
                yield problem(
                    at + ("containerPorts", key),
                    f"port {port} is the SuperExec sidecar's health server's in this shared pod (or move it: "
                    "superexec.containerPorts.health)",
                )
