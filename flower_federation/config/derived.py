"""Facts derived from settings, stated once: the plan (from the validated model) and the
rules (from raw config, before or despite type errors) call these same functions, so the
meaning a rule checks is the meaning the render gets.

Each function takes plain values, and tolerates wrong types where rules pass raw config
(a wrong type is pydantic's to report; here it falls back to the default)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Optional

from flower_federation.config import NETWORK_POLICY_DEFAULTS, Federation
from flower_federation.config.supernodes import SuperNodeService
from flower_federation.flower.dialects import LOOPBACK
from flower_federation.flower.versions import APPIO_PROTECTION_SINCE, FlowerVersion
from flower_federation.kube.naming import Names, is_ip_address, pod_wildcards, service_dns_names

# Every default, as the config model defines it (`DEFAULTS.mode`, `DEFAULTS.tls.source`, ...).
DEFAULTS = Federation()
# What `render --cluster`, its `# cluster:` headers and resource names call the stack's ambient cluster
# (the one its default provider reaches); inside the plan it is the key "".
AMBIENT_CLUSTER = "default"


def federation_name(name: Any, stack: str) -> str:
    """`N`: the `name` setting (an empty one too, which the rules refuse), else the stack's name."""
    return name if isinstance(name, str) else stack


def runs_superlink(role: Any) -> bool:
    """A hub or a plain federation runs its SuperLink; a site dials another's."""
    return (role if isinstance(role, str) else DEFAULTS.role) != "site"


def cluster_key(cluster: Optional[str]) -> str:
    """The plan's key of a component's cluster: "" for the ambient one."""
    return cluster or ""


def cluster_label(key: str) -> str:
    """The name a user reads for a cluster key."""
    return key or AMBIENT_CLUSTER


# Service types that give the SuperLink's port an address outside its cluster: a port on every node, a load balancer.
OUTSIDE_SERVICE_TYPES = ("LoadBalancer", "NodePort")


@dataclass(frozen=True)
class Exposure:
    """How the SuperLink is reached from outside its cluster.

    `by_config`: the config makes something outside dial it: a hub's sites, an ingress, a gateway, a pool in another
    cluster. What opens its NetworkPolicy's Fleet port to anywhere and asks for an external address.
    `by_service`: its own Service is a LoadBalancer or NodePort, whoever the config names: whoever reaches that address
    reaches the port, NetworkPolicy or not (a cluster may not enforce them).
    `reachable` (either): what puts the Fleet-only proxy in front of an HTTP-era SuperLink and what the preview's
    warnings (TLS off, no node authentication, `exposeControlApi`) key on."""

    by_config: bool
    by_service: bool

    @property
    def reachable(self) -> bool:
        return self.by_config or self.by_service


def superlink_exposure(
    role: Any, service_type: Any, ingress: Any, gateway: Any, superlink_cluster: Any, pool_clusters: Iterable[Any]
) -> Exposure:
    """The SuperLink's Exposure from its settings (a site runs none: never exposed). `ingress`/`gateway` are the
    settings' values (None: unset); clusters as config writes them (unset or empty: the ambient one)."""
    if not runs_superlink(role):
        return Exposure(by_config=False, by_service=False)
    home = _cluster_name(superlink_cluster)
    by_config = (
        role == "hub"
        or ingress is not None
        or gateway is not None
        or any(_cluster_name(c) != home for c in pool_clusters)
    )
    service_type = service_type if isinstance(service_type, str) else DEFAULTS.superlink.service.type
    return Exposure(by_config=by_config, by_service=service_type in OUTSIDE_SERVICE_TYPES)


def _cluster_name(cluster: Any) -> str:
    return cluster_key(cluster) if isinstance(cluster, str) else ""


@dataclass(frozen=True)
class SuperExecLayout:
    """Where SuperExecs run: none (subprocess isolation), beside each SuperNode and the SuperLink
    (sidecar), or in pods of their own (distributed)."""

    process_isolation: bool
    distributed: bool

    @property
    def sidecar(self) -> bool:
        return self.process_isolation and not self.distributed


def superexec_layout(isolation: Any, placement: Any) -> SuperExecLayout:
    isolation = isolation if isinstance(isolation, str) else DEFAULTS.isolation_mode
    placement = placement if isinstance(placement, str) else DEFAULTS.superexec_placement
    process = isolation == "process"
    return SuperExecLayout(process_isolation=process, distributed=process and placement == "distributed")


def network_policy_settings(*layers: Any) -> dict[str, Any]:
    """A component's effective networkPolicy, camelCase as config writes it: each layer (top level, then
    `superlink`/`supernodes`, then a pool, ...) a mapping or None; a later layer's set key wins, the defaults
    fill the rest."""
    merged = NETWORK_POLICY_DEFAULTS.model_dump(by_alias=True)
    for layer in layers:
        if isinstance(layer, Mapping):
            merged.update({k: v for k, v in layer.items() if k in merged and v is not None})
    return merged


# A pool's `service` as the model defaults it.
POOL_SERVICE_DEFAULTS = SuperNodeService()


# What a sidecar dials on its pod's loopback, and a `kubectl port-forward` user.
LOCALHOST = "localhost"


def runtime_api_sans(
    federation: str, pool: str, namespace: str, cluster_domain: str, external_names: list[str]
) -> tuple[list[str], list[str]]:
    """The DNS names and IP addresses a pool's Runtime API certificate carries: every name a SuperExec may dial
    its SuperNode by: localhost (sidecar), the pool's headless Service and, by wildcard, each pod's stable name
    behind it (what a distributed SuperExec dials), and what SuperExecs outside the cluster dial an exposed
    Service by (`service.externalNames`)."""
    svc = Names(federation).pool(pool)
    outside_names = [n for n in external_names if not is_ip_address(n)]
    outside_ips = [n for n in external_names if is_ip_address(n)]
    dns = [
        LOCALHOST,
        *service_dns_names(svc, namespace, cluster_domain),
        *pod_wildcards(svc, namespace, cluster_domain),
    ]
    return list(dict.fromkeys(dns + outside_names)), list(dict.fromkeys([LOOPBACK, *outside_ips]))


def runtime_api_tls(insecure: Any, role: Any, isolation: Any, version: Optional[FlowerVersion]) -> bool:
    """Whether each pool's SuperNodes serve their Runtime API over TLS (with a certificate of the pool's): a stack
    with TLS in process isolation on Flower 1.40+ (the gRPC era's hop cannot carry TLS). A stack that runs its
    SuperLink signs the certificates with the federation's CA; a site, which never holds the hub's CA key, with a
    CA of its own (`runtime_api_own_ca`). Only `insecure: true` leaves the hop plaintext."""
    return (
        insecure is not True
        and superexec_layout(isolation, None).process_isolation
        and version is not None
        and version >= APPIO_PROTECTION_SINCE
    )


def runtime_api_own_ca(role: Any) -> bool:
    """Whether the Runtime API certificates are signed by a CA the stack generates for them alone (a site-local CA):
    a site trusts the hub's CA but never has its key, so it cannot sign with it."""
    return not runs_superlink(role)
