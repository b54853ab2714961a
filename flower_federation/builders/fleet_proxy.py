"""The Fleet-only proxy (HTTP era): what lets a SuperLink be reached from outside its
cluster without exposing its Control and Runtime APIs, which Flower 1.40+ serves on the
same port as the Fleet API.

Why a proxy in the SuperLink's pod, and why nginx:
- It works behind anything that exposes the pod (a LoadBalancer or NodePort Service, an
  Ingress, a Gateway route, TLS passthrough) and on every cluster, with no controller to
  install; a Gateway route or an Ingress path match alone would leave the Service's own
  port open to the whole API.
- It terminates TLS with the SuperLink's own certificate and key (the same Secret), so
  sites see the same address, name and CA as before, and it forwards over the pod's
  loopback with TLS verified against the federation's CA: no plaintext hop.
- A path allowlist on the raw request URI (`FLEET_URI`), not only on the normalised
  path: nginx forwards the URI as the client sent it, so `/v1/fleet/../control/...`
  must be refused, not normalised into a Fleet route and forwarded.
- nginx is the smallest widely audited HTTP proxy with an unprivileged image; headers
  (the node-auth `flwr-public-key`/`flwr-timestamp`/`flwr-signature`) pass unchanged,
  bodies stream both ways without buffering, up to `fleetProxy.maxRequestBodySize` per
  request (64m: Flower's Fleet client, `flwr/supercore/protobuf/client.py` in 1.41 and
  1.42, speaks HTTP/1.1 with a 30 s timeout per request and pushes models as arrays in
  5 MiB chunks, so a model of any size crosses; the limit keeps anyone who reaches the
  address from filling the SuperLink's memory, which reads a whole body before it
  checks the node's signature). A client stalled for `IDLE_TIMEOUT` is dropped; the
  SuperLink's answer may take `fleetProxy.timeoutSeconds`.

SuperNodes in the same cluster dial the Fleet port too (the proxy); the registration
Job, `flwr` and distributed SuperExecs dial the SuperLink's own port through Service
`N-superlink-control` (`plan.control_address`).
"""

from __future__ import annotations

from typing import Any

from flower_federation.builders import pods, resources
from flower_federation.config import FleetProxy
from flower_federation.config.images import reference
from flower_federation.flower.layout import (
    CA_DIR,
    CA_FILE,
    CA_VOLUME,
    FLEET_PROXY_CONFIG_DIR,
    FLEET_PROXY_CONFIG_VOLUME,
    FLEET_PROXY_CONTAINER,
    TLS_DIR,
    TLS_VOLUME,
    scratch_volume,
)
from flower_federation.kube.naming import SUPERLINK
from flower_federation.kube.objects import Container, Manifest
from flower_federation.plan import FederationPlan, probes

CONTAINER = FLEET_PROXY_CONTAINER
PORT_NAME = "fleet"  # the proxy's container port, which Service `N-superlink` targets
CONFIG_DIR = FLEET_PROXY_CONFIG_DIR
CONFIG_VOLUME = FLEET_PROXY_CONFIG_VOLUME
CONFIG_KEY = "nginx.conf"
SCRATCH_DIR = "/tmp"  # pid file and temp paths: the root filesystem is read-only
# Flower's Fleet routes are `/v1/fleet/<method>` (fleet_http_client.py): segments of
# letters, digits, `-` and `_`; no query, never `.`, `%` or an empty segment.
FLEET_URI = r"^/v1/fleet(/[A-Za-z0-9_-]+)+$"
HEALTH_URI = r"^/health$"
# One proxied request holds two connections (client, SuperLink): about 4,000 requests at
# once, SuperNodes' keep-alive connections included.
WORKER_CONNECTIONS = 8192
# Between two reads of a request body or two writes of a response: a stalled upload
# frees its connection after this, whatever `timeoutSeconds` allows the whole request.
IDLE_TIMEOUT = "60s"


def public_port_name(plan: FederationPlan) -> str:
    """The name of Service `N-superlink`'s Fleet port (what an Ingress or route targets)."""
    return PORT_NAME if plan.fleet_proxy else plan.dialect.service_ports(plan.ports)[0].name


def settings(plan: FederationPlan) -> FleetProxy:
    return plan.spec.superlink.fleet_proxy


def config(plan: FederationPlan) -> str:
    """nginx.conf: the Fleet API and `/health` forwarded to the SuperLink's own port on
    loopback, everything else answered 404 by the proxy itself."""
    tls = plan.trust is not None
    timeout = f"{settings(plan).timeout_seconds}s"
    scheme = "https" if tls else "http"
    upstream = f"{scheme}://127.0.0.1:{plan.ports.control}"
    listen = f"listen {plan.ports.fleet}{' ssl' if tls else ''};"
    tls_lines = (
        [
            f"ssl_certificate {TLS_DIR}/tls.crt;",
            f"ssl_certificate_key {TLS_DIR}/tls.key;",
            "ssl_protocols TLSv1.2 TLSv1.3;",
            # The hop to the SuperLink is TLS too, verified as any client of it would.
            "proxy_ssl_verify on;",
            f"proxy_ssl_trusted_certificate {CA_FILE};",
            f"proxy_ssl_name {plan.superlink_host};",
            "proxy_ssl_server_name on;",
            "proxy_ssl_protocols TLSv1.2 TLSv1.3;",
        ]
        if tls
        else []
    )
    server = [
        listen,
        *tls_lines,
        # Flower sends arrays in chunks (5 MiB) and streams responses; a request body over
        # the limit is refused (413) before the SuperLink, which reads a whole body before
        # it checks the node's signature, holds it in memory.
        f"client_max_body_size {settings(plan).max_request_body_size};",
        "proxy_request_buffering off;",
        "proxy_buffering off;",
        "proxy_http_version 1.1;",
        f"client_body_timeout {IDLE_TIMEOUT};",
        f"send_timeout {IDLE_TIMEOUT};",
        f"proxy_read_timeout {timeout};",
        f"proxy_send_timeout {timeout};",
        "proxy_connect_timeout 10s;",
        "proxy_set_header Host $http_host;",
        'proxy_set_header Connection "";',
        # The site's address for the SuperLink's log (uvicorn trusts these from 127.0.0.1);
        # set, never appended to what a client sent.
        "proxy_set_header X-Forwarded-For $remote_addr;",
        "proxy_set_header X-Forwarded-Proto $scheme;",
        "",
        "location /v1/fleet/ {",
        f'    if ($request_uri !~ "{FLEET_URI}") {{',
        "        return 404;",
        "    }",
        f"    proxy_pass {upstream};",
        "}",
        "location = /health {",
        f'    if ($request_uri !~ "{HEALTH_URI}") {{',
        "        return 404;",
        "    }",
        "    limit_except GET {",
        "        deny all;",
        "    }",
        f"    proxy_pass {upstream};",
        "}",
        "# Control (/v1/control/), Runtime (/v1/runtime/) and anything else: never forwarded.",
        "location / {",
        "    return 404;",
        "}",
    ]
    lines = [
        # Rendered bytes stay as they were before the package moved (a changed ConfigMap would restart
        # every proxy for a comment): the path named here is this module's old one.
        "# Rendered by flower-federation: the SuperLink's Fleet API only (federation/fleet_proxy.py).",
        "worker_processes 1;",
        f"worker_rlimit_nofile {2 * WORKER_CONNECTIONS};",
        "daemon off;",
        f"pid {SCRATCH_DIR}/nginx.pid;",
        "error_log stderr notice;",
        "events {",
        f"    worker_connections {WORKER_CONNECTIONS};",
        "}",
        "http {",
        f"    client_body_temp_path {SCRATCH_DIR}/client-body;",
        f"    proxy_temp_path {SCRATCH_DIR}/proxy;",
        f"    fastcgi_temp_path {SCRATCH_DIR}/fastcgi;",
        f"    uwsgi_temp_path {SCRATCH_DIR}/uwsgi;",
        f"    scgi_temp_path {SCRATCH_DIR}/scgi;",
        "    server_tokens off;",
        "    underscores_in_headers on;",
        '    log_format fleet \'$remote_addr "$request_method $request_uri" $status $request_length '
        "$bytes_sent $request_time upstream=$upstream_addr';",
        "    access_log /dev/stdout fleet;",
        "    server {",
        *(f"        {line}" if line else "" for line in server),
        "    }",
        "}",
    ]
    return "\n".join(lines) + "\n"


def config_map(plan: FederationPlan) -> Manifest:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": plan.meta(plan.names.fleet_proxy_config, SUPERLINK),
        "data": {CONFIG_KEY: config(plan)},
    }


def volumes(plan: FederationPlan) -> list[dict[str, Any]]:
    """The proxy's own volume (its config); it shares the SuperLink's TLS and CA volumes."""
    return [
        {
            "name": CONFIG_VOLUME,
            "configMap": {"name": plan.names.fleet_proxy_config, "defaultMode": 0o444},
        }
    ]


def container(plan: FederationPlan) -> Container:
    """`fleet-proxy`: restricted like every container of ours (the pod's user, a
    read-only root filesystem, no capabilities), its scratch emptyDir at /tmp only."""
    s = settings(plan)
    mounts = [{"name": CONFIG_VOLUME, "mountPath": CONFIG_DIR, "readOnly": True}]
    if plan.trust:
        mounts += [
            {"name": TLS_VOLUME, "mountPath": TLS_DIR, "readOnly": True},
            {"name": CA_VOLUME, "mountPath": CA_DIR, "readOnly": True},
        ]
    c = pods.container(
        CONTAINER,
        reference(s.image),
        [],
        resources=resources.fleet_proxy(plan),
        mounts=mounts,
        security_overrides=plan.spec.security_context,
        pull_policy=plan.pull_policy(s.image),
    )
    c["volumeMounts"] = [{"name": scratch_volume(CONTAINER), "mountPath": SCRATCH_DIR}] + mounts
    c["command"] = ["nginx", "-e", "stderr", "-c", f"{CONFIG_DIR}/{CONFIG_KEY}"]
    c["ports"] = [{"name": PORT_NAME, "containerPort": plan.ports.fleet, "protocol": "TCP"}]
    health = probes.proxy_health(PORT_NAME, plan.trust is not None, plan.superlink_probes)
    c.update(health)  # type: ignore[typeddict-item]  # probe keys only
    return c
