"""What is reachable from outside the cluster: the ports of pods behind a LoadBalancer or
NodePort Service (or one with `externalIPs`), an Ingress backend, or a Gateway API route's
backend. A Service selects pods of its namespace by its `selector`; a port reaches a container
port by number or by name (`targetPort`, `port` when absent).

Nothing here trusts a NetworkPolicy to close an exposed port: a cluster that does not enforce
them (docs/exposure.md: a gRPC-era LoadBalancer reaches 9093 there) would leave it open.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Optional

from flower_federation.checks.model import (
    UNKNOWN,
    Objects,
    Ref,
    as_dict,
    as_list,
    as_str,
    has_unknown,
    map_selector_matches,
    same_namespace,
)
from flower_federation.checks.pods import PodSite

EXTERNAL_SERVICE_TYPES = ("LoadBalancer", "NodePort")
ROUTE_KINDS = ("HTTPRoute", "GRPCRoute", "TLSRoute", "TCPRoute", "UDPRoute")


@dataclass(frozen=True)
class Exposure:
    """A Service port reachable from outside the cluster, and what makes it so."""

    source: Ref  # the Service, Ingress or route
    path: str  # the field in `source`
    how: str  # "a LoadBalancer Service", "Ingress flower/fl-superlink"
    service: dict[str, Any]
    port: dict[str, Any]  # the Service's port

    @property
    def port_label(self) -> str:
        return str(self.port.get("name") or self.port.get("port"))


def _service_ports(service: dict[str, Any]) -> list[tuple[int, dict[str, Any]]]:
    return [(i, p) for i, p in enumerate(as_list(as_dict(service.get("spec")).get("ports"))) if isinstance(p, dict)]


def _port_key(i: int, port: dict[str, Any]) -> str:
    name = port.get("name")
    return name if isinstance(name, str) and name else str(i)


def _find_service(objects: Objects, namespace: str, name: Any) -> Optional[dict[str, Any]]:
    if not isinstance(name, str):
        return None
    for svc in objects.of_kind("Service"):
        ref = Ref.of(svc)
        if ref.name == name and same_namespace(ref.namespace, namespace):
            return svc
    return None


def _backend(objects: Objects, source: Ref, path: str, how: str, service: Any, port: Any) -> Iterator[Exposure]:
    """The Service port a backend (Ingress or route) names: by number, or (Ingress) by name."""
    svc = _find_service(objects, source.namespace, service)
    if svc is None or has_unknown(port):
        return
    for _, p in _service_ports(svc):
        if (isinstance(port, int) and p.get("port") == port) or (isinstance(port, str) and p.get("name") == port):
            yield Exposure(source, path, how, svc, p)


def exposures(objects: Objects) -> Iterator[Exposure]:
    for svc in objects.of_kind("Service"):
        spec = as_dict(svc.get("spec"))
        kind = spec.get("type")
        external = kind in EXTERNAL_SERVICE_TYPES
        how = f"a {kind} Service"
        if not external and as_list(spec.get("externalIPs")) and not has_unknown(spec.get("externalIPs")):
            external, how = True, "a Service with externalIPs"
        if external:
            for i, p in _service_ports(svc):
                yield Exposure(Ref.of(svc), f"spec.ports[{_port_key(i, p)}]", how, svc, p)
    for ing in objects.of_kind("Ingress"):
        ref, spec = Ref.of(ing), as_dict(ing.get("spec"))
        how = str(ref)  # "Ingress ns/name": a Ref says its kind
        default = as_dict(spec.get("defaultBackend") or spec.get("backend"))
        yield from _ingress_backend(objects, ref, "spec.defaultBackend", how, default)
        for r, rule in enumerate(as_list(spec.get("rules"))):
            for q, item in enumerate(as_list(as_dict(as_dict(rule).get("http")).get("paths"))):
                at = f"spec.rules[{r}].http.paths[{q}].backend"
                yield from _ingress_backend(objects, ref, at, how, as_dict(as_dict(item).get("backend")))
    for route in objects.of_kind(*ROUTE_KINDS):
        ref = Ref.of(route)
        for r, rule in enumerate(as_list(as_dict(route.get("spec")).get("rules"))):
            for b, backend in enumerate(as_list(as_dict(rule).get("backendRefs"))):
                be = as_dict(backend)
                if be.get("kind", "Service") != "Service" or be.get("group", "") not in ("", "core"):
                    continue
                target = Ref(ref.kind, as_str(be.get("namespace")) or ref.namespace, ref.name)
                at = f"spec.rules[{r}].backendRefs[{b}]"
                yield from _backend(objects, target, at, str(ref), be.get("name"), be.get("port"))


def _ingress_backend(objects: Objects, ref: Ref, at: str, how: str, backend: dict[str, Any]) -> Iterator[Exposure]:
    if not backend:
        return
    svc = as_dict(backend.get("service"))
    if svc:  # networking.k8s.io/v1
        port = as_dict(svc.get("port"))
        yield from _backend(objects, ref, at, how, svc.get("name"), port.get("number") or port.get("name"))
    elif backend.get("serviceName") is not None:  # extensions/v1beta1
        yield from _backend(objects, ref, at, how, backend.get("serviceName"), backend.get("servicePort"))


def selects(exposure: Exposure, pod: PodSite) -> bool:
    """Whether the exposed Service sends traffic to `pod` (False when that is not known yet)."""
    svc = Ref.of(exposure.service)
    if not same_namespace(svc.namespace, pod.ref.namespace):
        return False
    return map_selector_matches(as_dict(exposure.service.get("spec")).get("selector"), pod.labels) is True


def target(exposure: Exposure, pod: PodSite) -> Optional[tuple[Optional[str], int]]:
    """(container name, port number) the exposed port reaches in `pod`; the container is None when
    a numeric targetPort is declared by no container. None: no such port, or not known yet."""
    wanted: Any = exposure.port.get("targetPort", exposure.port.get("port"))
    if wanted is None or wanted is UNKNOWN:
        return None
    for _, c in pod.containers(("containers",)):
        for cp in as_list(c.get("ports")):
            cp = as_dict(cp)
            number = cp.get("containerPort")
            if not isinstance(number, int):
                continue
            if (isinstance(wanted, int) and number == wanted) or (isinstance(wanted, str) and cp.get("name") == wanted):
                return as_str(c.get("name")), number
    return (None, wanted) if isinstance(wanted, int) else None
