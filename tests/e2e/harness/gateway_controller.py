"""The emulated Gateway API controller (see gateway.py for what it programs and refuses):
from a Gateway, the objects applied to a cluster and its pods, the listeners' certificates,
the HTTPRoutes that attach to them (allowedRoutes, parentRefs, hostnames), each rule's
backend with its BackendTLSPolicy, and the servers and locations that make nginx's
configuration (gateway_nginx.py). Pure: `program` writes no file and starts no process."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

from tests.e2e.harness.dns import backing
from tests.e2e.harness.gateway_api import (
    GROUP,
    RULE_KEYS,
    _group,
    _intersect,
    _locations,
    _ns,
    _Objects,
    _ref,
    _target_port,
)
from tests.e2e.harness.gateway_nginx import Location, Programmed, Server, Upstream, nginx_config
from tests.e2e.harness.host import HarnessError
from tests.e2e.harness.netpol import namespace_labels, selector_matches

if TYPE_CHECKING:
    from tests.e2e.harness.pods import Pod


class _Controller:
    def __init__(self, gateway: Mapping[str, Any], objects: Iterable[Mapping[str, Any]], pods: Iterable[Pod]):
        if gateway.get("kind") != "Gateway" or _group(gateway.get("apiVersion", "")) != GROUP:
            raise HarnessError(f"not a {GROUP} Gateway: {gateway.get('apiVersion')} {gateway.get('kind')}")
        self.gateway = gateway
        self.name = gateway["metadata"]["name"]
        self.namespace = _ns(gateway)
        self.ref = f"Gateway {self.namespace}/{self.name}"
        self.objects = _Objects(objects)
        self.pods = list(pods)
        self.files: dict[str, str] = {}
        self.listeners = list((gateway.get("spec") or {}).get("listeners") or [])
        if not self.listeners:
            raise HarnessError(f"{self.ref}: no listeners")
        names = [lst.get("name") for lst in self.listeners]
        if len(set(names)) != len(names):
            raise HarnessError(f"{self.ref}: listener names repeat: {names}")

    # -- listeners
    def _certificates(self, listener: Mapping[str, Any]) -> list[tuple[str, str]]:
        where = f"{self.ref} listener {listener['name']}"
        tls = listener.get("tls") or {}
        if tls.get("mode", "Terminate") != "Terminate":
            raise HarnessError(f"{where}: tls.mode {tls['mode']} is not emulated (Terminate)")
        if tls.get("frontendValidation"):
            raise HarnessError(f"{where}: tls.frontendValidation (client certificates) is not emulated")
        refs = tls.get("certificateRefs") or []
        if not refs:
            raise HarnessError(f"{where}: an HTTPS listener needs tls.certificateRefs")
        out = []
        for i, ref in enumerate(refs):
            if (ref.get("group") or "") != "" or ref.get("kind", "Secret") != "Secret":
                raise HarnessError(f"{where}: certificateRef {ref} is not a Secret")
            ns = ref.get("namespace") or self.namespace
            secret_ref = f"Secret {ns}/{ref['name']}"
            if ns != self.namespace and not self.objects.granted("Gateway", self.namespace, "Secret", ns, ref["name"]):
                raise HarnessError(
                    f"{where}: certificateRef {secret_ref} is in another namespace and no ReferenceGrant in {ns} "
                    f"allows Gateways of {self.namespace} to refer to it"
                )
            secret = self.objects.get("Secret", ns, ref["name"])
            if secret is None:
                raise HarnessError(f"{where}: certificateRef {secret_ref} not found")
            data = self.objects.data(secret)
            missing = [k for k in ("tls.crt", "tls.key") if not data.get(k)]
            if missing:
                raise HarnessError(f"{where}: {secret_ref} has no {' or '.join(missing)}")
            stem = f"listener-{listener['name']}-{i}"
            self.files[f"{stem}.crt"] = data["tls.crt"]
            self.files[f"{stem}.key"] = data["tls.key"]
            out.append((f"{stem}.crt", f"{stem}.key"))
        return out

    def _admits(self, listener: Mapping[str, Any], route: Mapping[str, Any]) -> Optional[str]:
        """Why `listener` does not admit `route`, or None."""
        allowed = listener.get("allowedRoutes") or {}
        kinds = allowed.get("kinds")
        if kinds and not any(k.get("kind") == "HTTPRoute" and k.get("group", GROUP) == GROUP for k in kinds):
            return f"its allowedRoutes.kinds {kinds} exclude HTTPRoute"
        namespaces = allowed.get("namespaces") or {}
        source = namespaces.get("from", "Same")
        route_ns = _ns(route)
        if source == "Same" and route_ns != self.namespace:
            return f"it admits routes of its own namespace {self.namespace} only (allowedRoutes from Same)"
        if source == "Selector":
            labels = {n["metadata"]["name"]: n["metadata"].get("labels") or {} for n in self.objects.all("Namespace")}
            if not selector_matches(namespaces.get("selector") or {}, namespace_labels(labels, route_ns)):
                return f"namespace {route_ns} does not match its allowedRoutes selector"
        elif source not in ("Same", "All"):
            raise HarnessError(f"{self.ref} listener {listener['name']}: allowedRoutes from {source!r}")
        return None

    # -- routes
    def _attached(self, route: Mapping[str, Any]) -> list[tuple[Mapping[str, Any], list[Optional[str]]]]:
        """The listeners `route` attaches to, with the hostnames it serves on each; [] if it does not
        name this Gateway; refused if it names it and would not attach."""
        where = _ref(route)
        hosts = list((route.get("spec") or {}).get("hostnames") or [])
        out: dict[str, tuple[Mapping[str, Any], list[Optional[str]]]] = {}
        for pr in (route.get("spec") or {}).get("parentRefs") or []:
            if pr.get("group", GROUP) != GROUP or pr.get("kind", "Gateway") != "Gateway" or pr["name"] != self.name:
                continue
            ns = pr.get("namespace") or _ns(route)
            if ns != self.namespace:
                raise HarnessError(f"{where}: its parentRef names Gateway {ns}/{pr['name']}, not {self.ref}")
            chosen = [
                lst
                for lst in self.listeners
                if pr.get("sectionName") in (None, lst["name"]) and pr.get("port") in (None, lst.get("port"))
            ]
            if not chosen:
                raise HarnessError(
                    f"{where}: {self.ref} has no listener sectionName={pr.get('sectionName')} port={pr.get('port')}"
                )
            reasons = []
            for lst in chosen:
                why = self._admits(lst, route)
                served = _intersect(lst.get("hostname"), hosts)
                if why is None and not served:
                    why = f"its hostname {lst.get('hostname')} and the route's {hosts} do not intersect"
                if why is None:
                    out[lst["name"]] = (lst, served)
                else:
                    reasons.append(f"listener {lst['name']}: {why}")
            if reasons and (pr.get("sectionName") is not None or len(reasons) == len(chosen)):
                raise HarnessError(f"{where}: not accepted by {self.ref}: {'; '.join(reasons)}")
        return list(out.values())

    def _upstream(self, route: Mapping[str, Any], rule_where: str, ref: Mapping[str, Any]) -> Upstream:
        if (ref.get("group") or "") != "" or ref.get("kind", "Service") != "Service":
            raise HarnessError(f"{rule_where}: backendRef {ref} is not a Service")
        if ref.get("filters"):
            raise HarnessError(f"{rule_where}: backendRef filters are not emulated")
        ns = ref.get("namespace") or _ns(route)
        svc_ref = f"Service {ns}/{ref['name']}"
        if ns != _ns(route) and not self.objects.granted("HTTPRoute", _ns(route), "Service", ns, ref["name"]):
            raise HarnessError(
                f"{rule_where}: backendRef {svc_ref} is in another namespace and no ReferenceGrant in {ns} "
                f"allows HTTPRoutes of {_ns(route)} to refer to it"
            )
        svc = self.objects.get("Service", ns, ref["name"])
        if svc is None:
            raise HarnessError(f"{rule_where}: backendRef {svc_ref} not found")
        if "port" not in ref:
            raise HarnessError(f"{rule_where}: backendRef {svc_ref} without a port")
        sp = next((p for p in svc["spec"].get("ports", []) if p["port"] == ref["port"]), None)
        if sp is None:
            raise HarnessError(f"{rule_where}: {svc_ref} has no port {ref['port']}")
        pods = backing(svc, self.pods)  # type: ignore[arg-type]
        if len(pods) != 1:
            raise HarnessError(
                f"{rule_where}: {svc_ref} selects {len(pods)} pods: exactly one is emulated (its pods must exist)"
            )
        up = Upstream(pods[0].ip, _target_port(svc, sp, pods[0]), f"{ns}/{ref['name']}:{ref['port']}")
        policy = self._policy(svc, sp)
        if policy is not None:
            up.policy, up.ca_file, up.tls_name = policy
        return up

    def _policy(self, svc: Mapping[str, Any], sp: Mapping[str, Any]) -> Optional[tuple[str, str, str]]:
        """The BackendTLSPolicy for a Service port: (its ref, the CA bundle file, the hostname), or None."""
        ns, name = _ns(svc), svc["metadata"]["name"]
        by_section, whole = [], []
        for pol in self.objects.all("BackendTLSPolicy"):
            if _ns(pol) != ns or _group(pol.get("apiVersion", "")) != GROUP:
                continue
            for t in (pol.get("spec") or {}).get("targetRefs") or []:
                if (t.get("group") or "") != "" or t.get("kind") != "Service" or t.get("name") != name:
                    continue
                if t.get("sectionName") is None:
                    whole.append(pol)
                elif t["sectionName"] == sp.get("name"):
                    by_section.append(pol)
        chosen = by_section or whole
        if not chosen:
            return None
        if len(chosen) > 1:
            raise HarnessError(
                f"{_ref(svc)} port {sp['port']}: several BackendTLSPolicies target it: {[_ref(p) for p in chosen]}"
            )
        pol = chosen[0]
        where = _ref(pol)
        validation = (pol.get("spec") or {}).get("validation") or {}
        for key in ("wellKnownCACertificates", "subjectAltNames"):
            if validation.get(key):
                raise HarnessError(f"{where}: validation.{key} is not emulated")
        hostname = validation.get("hostname")
        if not hostname:
            raise HarnessError(f"{where}: validation.hostname is required")
        refs = validation.get("caCertificateRefs") or []
        if not refs:
            raise HarnessError(f"{where}: validation.caCertificateRefs is empty")
        bundle = []
        for ref in refs:
            if (ref.get("group") or "") != "" or ref.get("kind") != "ConfigMap":
                raise HarnessError(f"{where}: caCertificateRef {ref} is not a ConfigMap")
            cm = self.objects.get("ConfigMap", ns, ref["name"])
            if cm is None:
                raise HarnessError(f"{where}: CA ConfigMap {ns}/{ref['name']} not found")
            ca = self.objects.data(cm).get("ca.crt")
            if not ca:
                raise HarnessError(f"{where}: CA ConfigMap {ns}/{ref['name']} has no ca.crt")
            bundle.append(ca if ca.endswith("\n") else ca + "\n")
        file = f"backend-ca-{ns}-{pol['metadata']['name']}.crt"
        self.files[file] = "".join(bundle)
        return where, file, hostname

    def _rules(self, route: Mapping[str, Any]) -> list[Location]:
        out = []
        for k, rule in enumerate((route.get("spec") or {}).get("rules") or [{}]):
            where = f"{_ref(route)} rule {k}"
            unknown = sorted(set(rule) - RULE_KEYS)
            if unknown:
                raise HarnessError(f"{where}: {', '.join(unknown)} not emulated")
            refs = [r for r in rule.get("backendRefs") or [] if r.get("weight", 1) != 0]
            if len(refs) > 1:
                raise HarnessError(f"{where}: {len(refs)} weighted backendRefs: one backend per rule is emulated")
            upstream = self._upstream(route, where, refs[0]) if refs else None
            for match in rule.get("matches") or [{}]:
                others = sorted(set(match) - {"path"})
                if others:
                    raise HarnessError(f"{where}: {', '.join(others)} matches are not emulated (path only)")
                for loc, exact in _locations(match.get("path") or {}, where):
                    out.append(Location(loc, f"{_ns(route)}/{route['metadata']['name']}#{k}", upstream, exact))
        return out

    # -- the whole
    def program(self, address: str, directory: Path) -> Programmed:
        servers: dict[tuple[int, Optional[str]], Server] = {}
        certs: dict[str, list[tuple[str, str]]] = {}
        for lst in self.listeners:
            if lst.get("protocol") != "HTTPS":
                raise HarnessError(f"{self.ref} listener {lst['name']}: protocol {lst.get('protocol')} is not emulated")
            certs[lst["name"]] = self._certificates(lst)
        routes = []
        for route in self.objects.all("HTTPRoute"):
            attached = self._attached(route)
            if not attached:
                continue
            routes.append(f"{_ns(route)}/{route['metadata']['name']}")
            rules = self._rules(route)
            for lst, hostnames in attached:
                for host in hostnames:
                    key = (int(lst["port"]), host)
                    server = servers.get(key)
                    if server is None:
                        server = servers[key] = Server(key[0], host, lst["name"], certs[lst["name"]])
                    elif server.listener != lst["name"]:
                        raise HarnessError(
                            f"{self.ref}: listeners {server.listener} and {lst['name']} both serve "
                            f"{host or 'any host'} on port {key[0]}"
                        )
                    for location in rules:  # the first route (by namespace, name) and rule wins; Exact first
                        held = server.locations.get(location.match)
                        if held is None or (location.exact and not held.exact):
                            server.locations[location.match] = location
        if not routes:
            seen = [
                f"{_ref(r)} -> {[(p.get('namespace'), p.get('name')) for p in r['spec'].get('parentRefs') or []]}"
                for r in self.objects.all("HTTPRoute")
            ]
            raise HarnessError(f"no HTTPRoute attaches to {self.ref} (HTTPRoutes and their parentRefs: {seen})")
        for lst in self.listeners:  # a port without a catch-all server gets one that answers 404
            port = int(lst["port"])
            if (port, None) not in servers:
                servers[(port, None)] = Server(port, None, lst["name"], certs[lst["name"]])
        ordered = sorted(servers.values(), key=lambda s: (s.port, s.hostname is not None, s.hostname or ""))
        return Programmed(nginx_config(self.ref, address, directory, ordered), dict(self.files), routes, ordered)


def program(
    gateway: Mapping[str, Any],
    objects: Iterable[Mapping[str, Any]],
    pods: Iterable[Pod],
    address: str,
    directory: Path,
) -> Programmed:
    """What a controller programs for `gateway` from the cluster's `objects` and `pods`: nginx's
    configuration listening on `address`, run in `directory` (where `files` are to be written).
    Pure: no file is written, no process started."""
    return _Controller(gateway, objects, pods).program(address, Path(directory))
