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

This module serves it; the controller is gateway_controller.py (`program`), reading the
objects as gateway_api.py does and programming what gateway_nginx.py writes for nginx.
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import os
import subprocess
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tests.e2e.harness.gateway_api import _locations, _ns  # noqa: F401  (_locations: tests/test_e2e_gateway_config.py)
from tests.e2e.harness.gateway_controller import program
from tests.e2e.harness.gateway_nginx import ACCESS_LOG, Programmed
from tests.e2e.harness.host import HarnessError, kill, run_cmd
from tests.e2e.harness.pods import host_nginx
from tests.e2e.harness.wan import NODE_LINK

if TYPE_CHECKING:
    from tests.e2e.harness.cluster import Cluster
    from tests.e2e.harness.wan import Wan

START_SECONDS = 10.0
CONF = "nginx.conf"
PROCESS_LOG = "nginx.log"


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
