"""Who may talk to whom in a federation, written once: each allowed flow is a `Link`
("A may talk to B on these ports, because ..."), between our own `Component`s (pods that
get a policy) and `Peer`s (cluster DNS, the API server, configured sources, anywhere).
`network.py` turns the links into both sides of every NetworkPolicy."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Optional

from flower_federation.config import NETWORK_POLICY_DEFAULTS, NetworkPolicy, Pool
from flower_federation.config.derived import network_policy_settings
from flower_federation.kube.naming import (
    NODE_REGISTRATION,
    SERVERAPP_ROLE,
    SUPEREXEC_CLIENTAPP,
    SUPEREXEC_SERVERAPP,
    SUPERLINK,
    SUPERNODE,
    TASK_EXECUTOR,
    TASK_ROLE_LABEL,
    selector_labels,
)
from flower_federation.plan import FederationPlan

DNS_PORT = 53
# Package indexes for runtime dependency installation (`uv sync`).
PACKAGE_INDEX_PORTS = (443,)
# Set by the StatefulSet controller on every pod it makes: `<statefulset>-<ordinal>`.
POD_NAME_LABEL = "statefulset.kubernetes.io/pod-name"


@dataclass(frozen=True)
class Component:
    """Pods of ours that get a policy."""

    key: str  # object name of the policy
    labels: tuple[tuple[str, str], ...]  # selector labels, as sorted items (hashable)
    settings: NetworkPolicy
    # The pool whose component registers the policy (None: the SuperLink's side).
    pool: Optional[str] = None
    # A group (e.g. every SuperNode of the federation) gets no policy of its own; its
    # links apply to each member, so adding a pool leaves the SuperLink's policy alone.
    group: bool = False
    # In another cluster than the SuperLink (or a site's): never a member of an in-cluster group.
    outside: bool = False

    @property
    def selector(self) -> dict[str, str]:
        return dict(self.labels)

    def covers(self, other: Component | Peer) -> bool:
        if not isinstance(other, Component):
            return False
        return other == self or (self.group and not other.outside and set(self.labels) <= set(other.labels))


@dataclass(frozen=True)
class Peer:
    """A NetworkPolicyPeer other than our own components; `peer=None` means anywhere."""

    peer: Optional[tuple[Any, ...]] = None  # ((key, json-able value), ...)

    def render(self) -> Optional[dict[str, Any]]:
        return None if self.peer is None else _thaw(self.peer)


@dataclass(frozen=True)
class Link:
    source: Component | Peer
    target: Component | Peer
    ports: tuple[tuple[int, str], ...]
    why: str = field(default="", compare=False)
    # StatefulSet replica k of `source` to replica k of `target` only: both sides' rules
    # come from per-replica pair policies (`_pair_policies`), not their own.
    pairwise: bool = field(default=False, compare=False)


def _freeze(value: Any) -> Any:
    if isinstance(value, dict):
        return tuple((k, _freeze(v)) for k, v in value.items())
    if isinstance(value, list):
        return ("__list__",) + tuple(_freeze(v) for v in value)
    return value


def _thaw(value: Any) -> Any:
    if isinstance(value, tuple):
        if value and value[0] == "__list__":
            return [_thaw(v) for v in value[1:]]
        return {k: _thaw(v) for k, v in value}
    return value


def effective(*layers: NetworkPolicy) -> NetworkPolicy:
    """Later layers' set fields win over earlier ones; the config's defaults fill the rest (the same
    layering the rules check: config/derived.py)."""
    merged = network_policy_settings(*(layer.model_dump(by_alias=True, exclude_none=True) for layer in layers))
    return NetworkPolicy.model_validate(merged)


ANYWHERE = Peer()
# Cluster DNS as kubeadm, EKS, GKE and AKS label it.
DNS = Peer(
    _freeze(
        {
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "kube-system"}},
            "podSelector": {"matchLabels": {"k8s-app": "kube-dns"}},
        }
    )
)
# The API server's address is not a pod: allow its ports to any address.
API_SERVER = Peer(_freeze({"ipBlock": {"cidr": "0.0.0.0/0"}}))


def _tcp(*ports: int) -> tuple[tuple[int, str], ...]:
    return tuple((p, "TCP") for p in ports)


def _starts_pods(superexec: Component) -> Link:
    """A SuperExec with the Kubernetes executor calls the API server to start its task pods."""
    return Link(
        superexec, API_SERVER, _tcp(*superexec.settings.api_server_ports or ()), "the Kubernetes executor starts pods"
    )


def _sources(settings: NetworkPolicy) -> list[Peer]:
    """Configured sources allowed to reach a component's API ports (the chart's
    ingress*MatchLabels)."""
    peers: list[Peer] = []
    if settings.ingress_pod_match_labels:
        peers.append(
            Peer(_freeze({"podSelector": {"matchLabels": dict(sorted(settings.ingress_pod_match_labels.items()))}}))
        )
    if settings.ingress_ns_match_labels:
        peer: dict[str, Any] = {
            "namespaceSelector": {"matchLabels": dict(sorted(settings.ingress_ns_match_labels.items()))}
        }
        if settings.ingress_ns_pod_match_labels:
            peer["podSelector"] = {"matchLabels": dict(sorted(settings.ingress_ns_pod_match_labels.items()))}
        peers.append(Peer(_freeze(peer)))
    return peers


def task_labels(plan: FederationPlan, role: str) -> dict[str, str]:
    """Labels the Kubernetes executor puts on the pods it starts for one SuperExec
    (`role` is `serverapp` or a pool name), so policies can select them."""
    return {**selector_labels(plan.name, TASK_EXECUTOR), TASK_ROLE_LABEL: role}


def components_and_links(plan: FederationPlan) -> tuple[list[Component], list[Link]]:
    spec = plan.spec
    names = plan.names
    global_np = spec.network_policy

    def comp(key: str, labels: dict[str, str], *layers: NetworkPolicy, pool: Optional[str] = None) -> Component:
        return Component(key, tuple(sorted(labels.items())), effective(global_np, *layers), pool)

    components: list[Component] = []
    links: list[Link] = []
    superlink: Optional[Component] = None
    if plan.runs_superlink:
        superlink = comp(names.superlink, selector_labels(plan.name, SUPERLINK), spec.superlink.network_policy)
        components, links = _superlink_side(plan, superlink, comp)
    if superlink is not None and any(not plan.dials_from_outside(p) for p in spec.supernodes.pools):
        all_supernodes = Component(
            f"{plan.name}-supernodes",
            tuple(sorted(selector_labels(plan.name, SUPERNODE).items())),
            NETWORK_POLICY_DEFAULTS,
            group=True,
        )
        links.append(Link(all_supernodes, superlink, _tcp(plan.ports.fleet), "SuperNodes dial the Fleet API"))
    for pool in spec.supernodes.pools:
        components_of_pool, pool_links = _pool(plan, pool, comp)
        components += components_of_pool
        links += pool_links

    links += [Link(c, DNS, ((DNS_PORT, "UDP"), (DNS_PORT, "TCP")), "name lookups") for c in components]
    return components, links


def _superlink_side(
    plan: FederationPlan, superlink: Component, comp: Callable[..., Component]
) -> tuple[list[Component], list[Link]]:
    spec = plan.spec
    names = plan.names
    components = [superlink]
    links: list[Link] = []
    appio_port = plan.ports.serverappio or plan.ports.control

    # The SuperLink's public API: Fleet from outside when the config makes something
    # outside dial it (a hub, an ingress, a gateway, pools in other clusters) or allows
    # it, Fleet and Control from the configured sources. A LoadBalancer or NodePort
    # Service alone names no client, so it opens nothing here (`allowExternal` does).
    # HTTP era: one port carries both, unless the Fleet-only proxy holds the Fleet port
    # and the SuperLink's own port takes only what is linked to it below.
    if superlink.settings.allow_external or plan.exposure.by_config:
        for source in _fleet_sources(plan, superlink):
            links.append(Link(source, superlink, _tcp(plan.ports.fleet), "SuperNodes outside the cluster"))
    control_service = spec.superlink.control_service
    if plan.fleet_proxy and control_service.type == "LoadBalancer":
        links += [
            Link(Peer(_freeze({"ipBlock": {"cidr": cidr}})), superlink, _tcp(plan.ports.control), "flwr from outside")
            for cidr in control_service.load_balancer_source_ranges
        ]
    for source in _sources(superlink.settings):
        links.append(
            Link(source, superlink, _tcp(*sorted({plan.ports.fleet, plan.ports.control})), "configured sources")
        )
    if spec.monitoring.enabled:
        links += [
            Link(scraper, superlink, _tcp(spec.monitoring.port), "Prometheus scrapes the federation exporter")
            for scraper in _scrapers(plan)
        ]
    if plan.registers_nodes:
        job = comp(
            names.node_registration, selector_labels(plan.name, NODE_REGISTRATION), spec.superlink.network_policy
        )
        components.append(job)
        links.append(Link(job, superlink, _tcp(plan.ports.control), "registration dials the Control API"))

    serverapp_side = [superlink]
    if plan.distributed:
        superexec = comp(
            names.superexec_serverapp,
            selector_labels(plan.name, SUPEREXEC_SERVERAPP),
            spec.superlink.network_policy,
            spec.superlink.superexec.network_policy,
        )
        components.append(superexec)
        links.append(Link(superexec, superlink, _tcp(appio_port), "SuperExec dials the ServerAppIo/Runtime API"))
        serverapp_side.append(superexec)
        if plan.kubernetes_executor:
            tasks = comp(
                names.task_policy(SERVERAPP_ROLE), task_labels(plan, SERVERAPP_ROLE), spec.superlink.network_policy
            )
            components.append(tasks)
            links.append(Link(tasks, superlink, _tcp(appio_port), "ServerApp pods dial the ServerAppIo/Runtime API"))
            links.append(_starts_pods(superexec))
    if spec.allow_runtime_dependency_installation:
        links += [
            Link(c, ANYWHERE, _tcp(*PACKAGE_INDEX_PORTS), "runtime dependency installation") for c in serverapp_side
        ]
    return components, links


def _scrapers(plan: FederationPlan) -> list[Peer]:
    """Who may scrape the exporter: pods matching `monitoring.scrapers`' pod selector in namespaces matching its
    namespace selector (no namespace selector: the federation's own namespace)."""
    scrapers = plan.spec.monitoring.scrapers
    peer: dict[str, Any] = {"podSelector": {"matchLabels": dict(sorted(scrapers.pod_selector.items()))}}
    if scrapers.namespace_selector:
        peer["namespaceSelector"] = {"matchLabels": dict(sorted(scrapers.namespace_selector.items()))}
    return [Peer(_freeze(peer))]


def _fleet_sources(plan: FederationPlan, superlink: Component) -> list[Peer]:
    """Who may reach the Fleet port from outside the cluster: anywhere, unless only a
    gateway exposes the SuperLink and its pods are named (`gateway.podSelector` /
    `namespaceSelector`)."""
    sl = plan.spec.superlink
    gw = sl.gateway
    only_gateway = (
        gw is not None
        and (gw.pod_selector or gw.namespace_selector)
        and sl.service.type == "ClusterIP"
        and sl.ingress is None
        and not superlink.settings.allow_external
    )
    if not only_gateway:
        return [ANYWHERE]
    assert gw is not None
    peer: dict[str, Any] = {}
    if gw.namespace_selector:
        peer["namespaceSelector"] = {"matchLabels": dict(sorted(gw.namespace_selector.items()))}
    if gw.pod_selector:
        peer["podSelector"] = {"matchLabels": dict(sorted(gw.pod_selector.items()))}
    return [Peer(_freeze(peer))]


def _remote_superlink(plan: FederationPlan, pool: Pool) -> list[Peer]:
    """Where a pool that dials from outside may connect: the SuperLink's address may be a
    name, so its port to anywhere, or to the CIDRs a site names."""
    cidrs = plan.remote.cidrs if plan.remote is not None else ()
    if not cidrs:
        return [ANYWHERE]
    return [Peer(_freeze({"ipBlock": {"cidr": cidr}})) for cidr in cidrs]


def _pool(plan: FederationPlan, pool: Pool, comp: Callable[..., Component]) -> tuple[list[Component], list[Link]]:
    spec = plan.spec
    names = plan.names
    layers = (spec.supernodes.network_policy, pool.network_policy)
    supernode = comp(names.pool(pool.name), selector_labels(plan.name, SUPERNODE, pool.name), *layers, pool=pool.name)
    links: list[Link] = []
    if plan.dials_from_outside(pool):
        supernode = dataclasses.replace(supernode, outside=True)
        port = _tcp(plan.pool_fleet_endpoint(pool).port)
        links += [
            Link(supernode, peer, port, "SuperNodes dial the SuperLink's address")
            for peer in _remote_superlink(plan, pool)
        ]
    components = [supernode]
    if plan.distributed:
        # The SuperNode's Runtime/ClientAppIo API leaves the pod only here.
        superexec = comp(
            names.pool_superexec(pool.name),
            selector_labels(plan.name, SUPEREXEC_CLIENTAPP, pool.name),
            *layers,
            pool.superexec.network_policy,
            pool=pool.name,
        )
        components.append(superexec)
        appio = _tcp(plan.supernode_appio_port(pool))
        # gRPC era: plaintext, so only SuperExec k may reach SuperNode k. HTTP era: TLS
        # and SuperExec auth (appio.py) protect it; the pool's SuperExecs may reach it.
        links.append(Link(superexec, supernode, appio, "SuperExec dials its SuperNode", pairwise=plan.grpc_era))
        if supernode.settings.allow_external:
            links.append(Link(ANYWHERE, supernode, appio, "SuperExecs outside the cluster"))
        for source in _sources(supernode.settings):
            links.append(Link(source, supernode, appio, "configured sources"))
        if plan.kubernetes_executor:
            tasks = comp(names.task_policy(pool.name), task_labels(plan, pool.name), *layers, pool=pool.name)
            components.append(tasks)
            links.append(Link(tasks, supernode, appio, "ClientApp pods dial the SuperNode"))
            links.append(_starts_pods(superexec))
    if spec.allow_runtime_dependency_installation:
        links += [Link(c, ANYWHERE, _tcp(*PACKAGE_INDEX_PORTS), "runtime dependency installation") for c in components]
    return components, links
