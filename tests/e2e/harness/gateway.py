"""A Gateway API controller's data plane, in the spirit of wan.expose: a Gateway the test
writes as a platform team would (gateway.networking.k8s.io/v1, HTTPS listeners that
terminate TLS) is programmed from the objects applied to a cluster, and served by
Debian's nginx on a WAN address of its own, owned by the cluster's node.

`expose_gateway(wan, cluster, gateway, extra=())` reads, from `cluster.objects` (plus
`extra`, e.g. the platform's own Secret or ReferenceGrant it did not apply):

- **HTTPRoutes** whose parentRefs name the Gateway (group gateway.networking.k8s.io,
  kind Gateway, `name`, `namespace` defaulting to the route's; `sectionName` = a
  listener's name, `port` = its port). A route attaches to each listener so selected that
  admits it (`allowedRoutes.namespaces.from`: Same (default), All, Selector on the
  Namespace objects' labels; `kinds`) and whose hostname intersects the route's
  `hostnames` (wildcards as the API defines them). Each rule's `matches[].path`
  (default `PathPrefix /`) becomes an nginx location: `Exact` an exact one, `PathPrefix
  V` matches V on path-element boundaries with a trailing `/` ignored (`/v1/fleet/` and
  `/v1/fleet` both match `/v1/fleet`, `/v1/fleet/` and `/v1/fleet/x`, not
  `/v1/fleetx`). The longest match wins, Exact first (nginx's location order is the API's
  precedence here). A rule's single backendRef (kind Service, `port`) is proxied to the
  Service's single backing pod at the Service port's resolved targetPort (no Service
  virtual IP: as harness/dns.py does); a rule without backendRefs answers 500. Requests
  no rule matches answer 404 and reach no backend (unknown hosts too: a default server).
- **BackendTLSPolicies** (`spec.targetRefs` [{group "", kind Service, name,
  sectionName = the Service port's name or none: every port}], `spec.validation`
  {caCertificateRefs to ConfigMaps (key `ca.crt`), hostname}): for a backend they target,
  the gateway speaks TLS and verifies it (`proxy_ssl_verify on`, the CA bundle, the name
  `hostname`, sent as SNI too): a backend whose certificate does not verify answers 502.
  Without one the backend is plain HTTP.
- **ReferenceGrants** (v1beta1): a listener's certificateRef to a Secret in another
  namespace than the Gateway's, a backendRef to a Service in another namespace than the
  route's, each needs one in the referent's namespace.
- **Secrets** (listener certificates: `tls.crt`, `tls.key`, as data or stringData; written
  to a private directory of the WAN's, mode 0600), **ConfigMaps**, **Services**, and the
  cluster's pods (those backing the Services must exist).

What a real controller would not program is refused with a HarnessError naming the
object (a route whose parentRef names this Gateway's name in another namespace, or a
listener that does not exist or does not admit it; a Secret or Service in another
namespace without a ReferenceGrant; a missing Secret, Service, Service port, CA ConfigMap
or `ca.crt`), and so is what is not emulated (other listener protocols, TLS passthrough,
filters, header/query/method matches, RegularExpression paths, several weighted
backends, `wellKnownCACertificates`, `subjectAltNames`).

Requests pass as sent: headers (underscores and all, the Host header kept), bodies of any
size streamed (`client_max_body_size 0`, no request or response buffering), HTTP/1.1 to
the backend, 3600 s read/send timeouts. The listener speaks HTTP/1.1 (no h2 via ALPN).

The data plane runs in the cluster's node network namespace (nginx's master is PID 1 of a
PID namespace of its own, so it dies whole), like the load balancers' relays: it reaches pods
from the node's bridge address, which NetworkPolicies always admit (a real gateway's pods
would be judged by their labels: not emulated). Every request is logged, one JSON object
a line (time, client, sni, host, method, uri, status, route = `ns/name#rule`, upstream
address and status, sizes): `ExposedGateway.requests()`. Publish the listener's hostname
where clients run (`wan.publish(cluster, hostname, gw.address)`). The process is one of
`wan.forwarders`: `Wan.close()` kills it, and its directory goes with the WAN's.
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import os
import subprocess
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

from tests.e2e.harness.dns import backing
from tests.e2e.harness.host import HarnessError, kill, run_cmd
from tests.e2e.harness.netpol import namespace_labels, selector_matches
from tests.e2e.harness.pods import host_nginx
from tests.e2e.harness.wan import NODE_LINK
from tests.support.manifests import object_data

if TYPE_CHECKING:
    from tests.e2e.harness.cluster import Cluster
    from tests.e2e.harness.pods import Pod
    from tests.e2e.harness.wan import Wan

GROUP = "gateway.networking.k8s.io"
TIMEOUT = "3600s"
CONNECT_TIMEOUT = "10s"
START_SECONDS = 10.0
CONF = "nginx.conf"
ACCESS_LOG = "access.log"
PROCESS_LOG = "nginx.log"
# One JSON object per request: what tests assert on (ExposedGateway.requests).
LOG_FORMAT = (
    '\'{"time":"$time_iso8601","client":"$remote_addr","sni":"$ssl_server_name","host":"$host",'
    '"method":"$request_method","uri":"$request_uri","status":$status,"route":"$gw_route",'
    '"upstream":"$upstream_addr","upstream_status":"$upstream_status",'
    '"request_length":$request_length,"bytes_sent":$bytes_sent,"request_time":$request_time}\''
)
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


@dataclass
class Upstream:
    """Where a rule's requests go: the backing pod's address and target port, TLS-verified or plain."""

    ip: str
    port: int
    service: str  # ns/name:port, for messages
    ca_file: Optional[str] = None  # BackendTLSPolicy: the CA bundle's file name in the directory
    tls_name: Optional[str] = None  # ... and the name verified (and sent as SNI)
    policy: Optional[str] = None


@dataclass
class Location:
    match: str  # nginx location modifier and path: "= /x", "^~ /x/", "/"
    route: str  # ns/name#rule
    upstream: Optional[Upstream]  # None: the rule has no backend (500)
    exact: bool  # from an Exact match (wins over a PathPrefix's exact twin)


@dataclass
class Server:
    port: int
    hostname: Optional[str]  # None: any host (the listener has none, nor do its routes)
    listener: str
    certificates: list[tuple[str, str]]  # (crt file, key file) names in the directory
    locations: dict[str, Location] = field(default_factory=dict)


@dataclass
class Programmed:
    """What the controller programs: nginx's configuration, the files it names (relative to the
    directory it runs in: certificates, keys, CA bundles) and the attached routes."""

    config: str
    files: dict[str, str]
    routes: list[str]
    servers: list[Server]


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
        return Programmed(self._config(address, directory, ordered), dict(self.files), routes, ordered)

    def _config(self, address: str, d: Path, servers: list[Server]) -> str:
        lines = [
            f"# {self.ref}, as tests/e2e/harness/gateway.py programs it",
            "daemon off;",
            "master_process on;",
            "worker_processes 1;",
            "user root root;",
            f"pid {d}/nginx.pid;",
            "error_log stderr notice;",
            "events { worker_connections 1024; }",
            "http {",
            f"    log_format gateway escape=json {LOG_FORMAT};",
            f"    access_log {d}/{ACCESS_LOG} gateway;",
            *(f"    {t}_temp_path {d}/{t}_temp;" for t in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")),
            "    server_tokens off;",
            "    underscores_in_headers on;",
            "    ignore_invalid_headers off;",
            "    client_max_body_size 0;",
            "    proxy_request_buffering off;",
            "    proxy_buffering off;",
            "    proxy_http_version 1.1;",
            '    proxy_set_header Connection "";',
            "    proxy_set_header Host $http_host;",
            "    proxy_next_upstream off;",
            f"    proxy_connect_timeout {CONNECT_TIMEOUT};",
            f"    proxy_read_timeout {TIMEOUT};",
            f"    proxy_send_timeout {TIMEOUT};",
            f"    client_body_timeout {TIMEOUT};",
            f"    send_timeout {TIMEOUT};",
            "    ssl_protocols TLSv1.2 TLSv1.3;",
            "    proxy_ssl_protocols TLSv1.2 TLSv1.3;",
        ]
        for s in servers:
            default = " default_server" if s.hostname is None else ""
            lines += [
                "    server {",
                f"        # listener {s.listener}",
                f"        listen {address}:{s.port} ssl{default};",
                f"        server_name {s.hostname or '_'};",
            ]
            for crt, key in s.certificates:
                lines += [f"        ssl_certificate {d}/{crt};", f"        ssl_certificate_key {d}/{key};"]
            lines.append('        set $gw_route "";')
            for loc in sorted(s.locations.values(), key=lambda x: x.match):
                lines += [f"        location {loc.match} {{", f'            set $gw_route "{loc.route}";']
                up = loc.upstream
                if up is None:
                    lines.append("            return 500;")
                elif up.ca_file is None:
                    lines.append(f"            proxy_pass http://{up.ip}:{up.port};  # {up.service}")
                else:
                    lines += [
                        f"            proxy_pass https://{up.ip}:{up.port};  # {up.service}, {up.policy}",
                        "            proxy_ssl_verify on;",
                        "            proxy_ssl_verify_depth 4;",
                        f"            proxy_ssl_trusted_certificate {d}/{up.ca_file};",
                        f"            proxy_ssl_name {up.tls_name};",
                        "            proxy_ssl_server_name on;",
                    ]
                lines.append("        }")
            if "/" not in s.locations:
                lines.append("        location / { return 404; }")
            lines.append("    }")
        lines.append("}")
        return "\n".join(lines) + "\n"


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


@dataclass
class ExposedGateway:
    """A Gateway's data plane on the WAN: `address` is where clients connect (port 443, or the listeners')."""

    namespace: str
    name: str
    address: str
    directory: Path
    programmed: Programmed

    def access_log(self) -> str:
        try:
            return (self.directory / ACCESS_LOG).read_text(errors="replace")
        except OSError:
            return ""

    def requests(self) -> list[dict[str, Any]]:
        """Every request served so far (nginx logs one once it is answered), oldest first."""
        return [json.loads(line) for line in self.access_log().splitlines() if line.strip()]

    def log(self) -> str:
        """nginx's own log (its error log: upstream TLS failures, refused connections)."""
        try:
            return (self.directory / PROCESS_LOG).read_text(errors="replace")
        except OSError:
            return ""


def _listening(pid: int, address: str, port: int) -> bool:
    """Whether a TCP socket listens on address:port in the network namespace of `pid`."""
    packed = ipaddress.IPv4Address(address).packed[::-1].hex().upper()
    want = f"{packed}:{port:04X}"
    try:
        lines = Path(f"/proc/{pid}/net/tcp").read_text().splitlines()[1:]
    except OSError:
        return False
    return any(line.split()[1] == want and line.split()[3] == "0A" for line in lines)


def expose_gateway(
    wan: Wan, cluster: Cluster, gateway: Mapping[str, Any], extra: Iterable[Mapping[str, Any]] = ()
) -> ExposedGateway:
    """Program `gateway` from `cluster`'s objects (and `extra`) and pods, and serve it on a new WAN
    address owned by the cluster's node (returned with the log readers: ExposedGateway)."""
    nginx = host_nginx()
    name, namespace = gateway["metadata"]["name"], _ns(gateway)
    directory = wan.workdir / f"gateway-{namespace}-{name}"
    if directory.exists():
        raise HarnessError(f"Gateway {namespace}/{name} is already exposed on this WAN")
    wan.connect(cluster)
    address = wan._allocate()
    programmed = program(gateway, [*cluster.objects.values(), *extra], cluster.pods.values(), address, directory)
    directory.mkdir(mode=0o700)
    for file, text in programmed.files.items():
        fd = os.open(directory / file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(text)
    conf = directory / CONF
    conf.write_text(programmed.config)
    run_cmd(["ip", "-n", cluster.node_ns, "addr", "add", f"{address}/{wan.subnet.prefixlen}", "dev", NODE_LINK])
    log = open(directory / PROCESS_LOG, "ab")  # noqa: SIM115  (closed by Wan.close, as a forwarder's)
    proc = subprocess.Popen(
        [
            *("ip", "netns", "exec", cluster.node_ns),
            *("unshare", "--pid", "--fork", "--kill-child", "--mount-proc"),
            *(nginx, "-p", f"{directory}/", "-e", "stderr", "-c", str(conf)),
        ],
        stdout=log,
        stderr=log,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )
    wan.forwarders.append((proc, log))  # Wan.close kills it (its PID namespace with it) and closes the log
    ports = sorted({int(lst["port"]) for lst in gateway["spec"]["listeners"]})
    deadline = time.monotonic() + START_SECONDS
    while not all(_listening(proc.pid, address, p) for p in ports):
        if proc.poll() is not None or time.monotonic() > deadline:
            kill(proc.pid)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=5)
            text = (directory / PROCESS_LOG).read_text(errors="replace")
            raise HarnessError(f"the data plane of Gateway {namespace}/{name} did not start:\n{text}")
        time.sleep(0.05)
    return ExposedGateway(namespace, name, address, directory, programmed)
