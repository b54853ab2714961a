"""The Gateway API objects as the emulated controller (gateway_controller.py) reads them:
objects by kind, namespace and name with the ReferenceGrants between namespaces, hostname
intersection (wildcards as the API defines them), a Service port's target port on a pod, and
an HTTPPathMatch as nginx locations. Pure."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, Optional

from tests.e2e.harness.host import HarnessError
from tests.support.manifests import object_data

if TYPE_CHECKING:
    from tests.e2e.harness.pods import Pod

GROUP = "gateway.networking.k8s.io"
RULE_KEYS = {"name", "matches", "backendRefs", "timeouts"}  # timeouts: nginx keeps its generous ones


def _ns(obj: Mapping[str, Any]) -> str:
    return str(obj["metadata"].get("namespace") or "default")


def _ref(obj: Mapping[str, Any]) -> str:
    return f"{obj['kind']} {_ns(obj)}/{obj['metadata']['name']}"


def _group(api_version: str) -> str:
    return api_version.rsplit("/", 1)[0] if "/" in api_version else ""


class _Objects:
    """The objects by (kind, namespace, name), as an API server would serve them."""

    def __init__(self, objects: Iterable[Mapping[str, Any]]):
        self.by_key: dict[tuple[str, str, str], Mapping[str, Any]] = {}
        for o in objects:
            self.by_key[(o["kind"], _ns(o), o["metadata"]["name"])] = o

    def get(self, kind: str, namespace: str, name: str) -> Optional[Mapping[str, Any]]:
        return self.by_key.get((kind, namespace, name))

    def all(self, kind: str) -> list[Mapping[str, Any]]:
        return [o for (k, ns, name), o in sorted(self.by_key.items()) if k == kind]

    def data(self, obj: Mapping[str, Any]) -> dict[str, str]:
        """A Secret's / ConfigMap's data as text (Secret `data` is base64), stringData over it."""
        return object_data(dict(obj))

    def granted(self, from_kind: str, from_ns: str, to_kind: str, to_ns: str, to_name: str) -> bool:
        """Whether a ReferenceGrant in `to_ns` lets `from_kind`s of `from_ns` refer to `to_kind` `to_name`."""
        for grant in self.all("ReferenceGrant"):
            if _ns(grant) != to_ns:
                continue
            spec = grant.get("spec") or {}
            froms = any(
                f.get("group") == GROUP and f.get("kind") == from_kind and f.get("namespace") == from_ns
                for f in spec.get("from") or []
            )
            tos = any(
                (t.get("group") or "") == "" and t.get("kind") == to_kind and t.get("name") in (None, to_name)
                for t in spec.get("to") or []
            )
            if froms and tos:
                return True
        return False


def _hostname_match(pattern: str, host: str) -> bool:
    """A Gateway API hostname (`*.example.com`: one or more labels) matching a name."""
    if pattern.startswith("*."):
        return host.endswith(pattern[1:]) and len(host) > len(pattern) - 1
    return pattern == host


def _intersect(listener: Optional[str], route_hosts: list[str]) -> list[Optional[str]]:
    """The hostnames a route serves on a listener (None: any), [] when they do not intersect."""
    if not route_hosts:
        return [listener]
    if listener is None:
        return list(route_hosts)
    out: list[Optional[str]] = []
    for h in route_hosts:
        if h == listener or _hostname_match(h, listener):
            out.append(listener)
        elif _hostname_match(listener, h):
            out.append(h)
    return list(dict.fromkeys(out))


def _target_port(svc: Mapping[str, Any], sp: Mapping[str, Any], pod: Pod) -> int:
    """A Service port's targetPort on `pod`, resolved as harness/dns.check_ports resolves it."""
    target = sp.get("targetPort", sp["port"])
    if isinstance(target, int) or str(target).isdigit():
        return int(target)
    for c in pod.spec["containers"]:
        for cp in c.get("ports", []):
            if cp.get("name") == target:
                return int(cp["containerPort"])
    raise HarnessError(f"{_ref(svc)}: targetPort {target!r} is no container port of pod {pod.name}")


def _locations(path: Mapping[str, Any], where: str) -> list[tuple[str, bool]]:
    """nginx locations for an HTTPPathMatch: [(modifier and path, from an Exact match)]."""
    kind = path.get("type", "PathPrefix")
    value = path.get("value", "/")
    if not value.startswith("/") or any(c.isspace() or c in "{};\"'" for c in value):
        raise HarnessError(f"{where}: path {value!r} is not a path this emulation can program")
    if kind == "Exact":
        return [(f"= {value}", True)]
    if kind != "PathPrefix":
        raise HarnessError(f"{where}: path match type {kind} is not emulated (Exact, PathPrefix)")
    base = value.rstrip("/")
    if not base:
        return [("/", False)]
    return [(f"= {base}", False), (f"^~ {base}/", False)]
