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
  request (8m: Flower's Fleet client, `flwr/supercore/protobuf/client.py` in 1.41 and
  1.42, speaks HTTP/1.1 with a 30 s timeout per request and pushes models as objects of
  one array chunk, at most 5 MiB, so a model of any size crosses).
- Against abuse by anyone who reaches the address (issue 32): the SuperLink reads a whole
  body before it checks the node's signature, so the proxy bounds how many bodies it
  forwards at once, per client address and in total (`limit_conn`, defaults derived from
  the SuperLink's memory limit: `upload_limits`), and drops slow clients at each stage
  (headers, body, response, idle keep-alive). The SuperLink's answer may take
  `fleetProxy.timeoutSeconds`.

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
from flower_federation.kube.quantity import parse_quantity
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
# The upload bounds (issue 32): the SuperLink reads a whole body before it checks the node's
# signature, and was measured to grow by up to about 6.5 times a body meanwhile (docs/benchmarks.md); so the
# bodies in flight at once are bounded, per client address and in total, by `limit_conn` zones.
# A request whose Content-Length has at most 4 digits (< 10 kB: heartbeats, pulls, small pushes)
# is not counted (an empty zone key); those are bounded by `WORKER_CONNECTIONS` alone (at most
# 4,096 x 10 kB, 40 MB). Over a bound nginx answers 503, which Flower's Fleet client retries.
SMALL_BODY = r"~^[0-9]{1,4}$"
PER_ADDRESS_ZONE = "fleet_uploads_per_address"
TOTAL_ZONE = "fleet_uploads_total"
# max(1, floor((L - BASELINE) / (COPIES * B))): the default total (config: maxConcurrentUploads).
# The SuperLink's own memory beside the uploads: up to 405 MiB measured while its ServerApp runs in
# `subprocess` isolation (docs/benchmarks.md, e2e), with margin (147 MB idle).
BASELINE = 416 * 1024**2
COPIES = 8  # up to about six and a half times an 8m body measured (tests/test_fleet_proxy_abuse.py), with margin
ASSUMED_LIMIT = 768 * 1024**2  # a SuperLink without a memory limit: the default preset's
# Flower's Fleet client pushes at most two objects at once (FLWR_PRIVATE_MAX_CONCURRENT_OBJ_PUSHES, 1.42):
# one SuperNode never needs more slots than that.
FLOWER_CONCURRENT_PUSHES = 2
# The hop to the SuperLink (measured: docs/benchmarks.md, "The Fleet-only proxy's price"). Without an upstream
# group every request opened a new TCP and TLS connection to the SuperLink: about 1 ms of nginx's CPU per
# heartbeat and a handshake in the SuperLink's Python on every request. Kept-alive connections are safe to
# share between sites: the SuperLink authenticates each request by its own signed headers, never by its
# connection, and nginx re-frames every request it forwards (no request of one client can run into another's).
UPSTREAM = "superlink"
# Idle connections kept per worker: the requests in flight at once in a quiet federation (a few per site);
# more are opened when needed and closed after their request.
UPSTREAM_IDLE = 16
# Below uvicorn's `timeout_keep_alive` (5 s, which flower-superlink does not change): nginx closes an idle
# connection before the SuperLink does, so it never sends a request on one the SuperLink is closing (nginx
# does not send a POST again after such a failure: the site would see a 502).
UPSTREAM_IDLE_TIMEOUT = "4s"
RESPONSE_BUFFER = "16k"  # the largest TLS record (RFC 8446, 2^14 bytes)


def public_port_name(plan: FederationPlan) -> str:
    """The name of Service `N-superlink`'s Fleet port (what an Ingress or route targets)."""
    return PORT_NAME if plan.fleet_proxy else plan.dialect.service_ports(plan.ports)[0].name


def settings(plan: FederationPlan) -> FleetProxy:
    return plan.spec.superlink.fleet_proxy


def body_bytes(size: str) -> int:
    """An nginx size (`8m`, `512k`) in bytes."""
    return int(size.rstrip("km")) * {"k": 1024, "m": 1024**2}.get(size[-1:], 1)


def memory_limit(plan: FederationPlan) -> int:
    """The SuperLink container's memory limit in bytes (`ASSUMED_LIMIT` when it has none)."""
    limit = resources.superlink(plan).get("limits", {}).get("memory")
    parsed = parse_quantity(limit) if isinstance(limit, str) else None
    return int(parsed) if parsed else ASSUMED_LIMIT


def upload_limits(plan: FederationPlan) -> tuple[int, int]:
    """(total, per client address) concurrent counted uploads: the settings, else derived from the
    SuperLink's memory limit (the formula is `maxConcurrentUploads`' description)."""
    s = settings(plan)
    body = body_bytes(s.max_request_body_size)
    assert body > 0, "rules/fleet_proxy.py refuses maxRequestBodySize 0 (nginx: no limit)"
    derived = max(1, (memory_limit(plan) - BASELINE) // (COPIES * body))
    total = s.max_concurrent_uploads or derived
    per_address = s.max_concurrent_uploads_per_address or min(total, FLOWER_CONCURRENT_PUSHES)
    return total, per_address


def config(plan: FederationPlan) -> str:
    """nginx.conf: the Fleet API and `/health` forwarded to the SuperLink's own port on
    loopback, everything else answered 404 by the proxy itself."""
    tls = plan.trust is not None
    s = settings(plan)
    timeout = f"{s.timeout_seconds}s"
    idle = f"{s.idle_timeout_seconds}s"
    total, per_address = upload_limits(plan)
    scheme = "https" if tls else "http"
    upstream = f"{scheme}://{UPSTREAM}"
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
        f"client_max_body_size {s.max_request_body_size};",
        "proxy_request_buffering off;",
        "proxy_buffering off;",
        # Unbuffered, an answer (a pulled model's objects) crosses in pieces of `proxy_buffer_size`: one TLS
        # record's worth (16k) per read and write, not a page (4k): about a quarter less of nginx's CPU per GB pulled
        # (docs/benchmarks.md). Held once per request in flight: 4,096 x 16k = 64 MiB at most, within the
        # `nano` preset's limit (64k measured a little better, but 256 MiB would not fit). `proxy_buffers`
        # is never allocated with buffering off; nginx only requires it larger than the busy buffers.
        f"proxy_buffer_size {RESPONSE_BUFFER};",
        f"proxy_buffers 4 {RESPONSE_BUFFER};",
        "proxy_http_version 1.1;",
        # Slow clients: each stage a client controls has its own bound, so a trickle of bytes
        # cannot hold a connection (and an upload slot) for `timeoutSeconds`.
        f"client_header_timeout {s.client_header_timeout_seconds}s;",
        f"client_body_timeout {idle};",
        f"send_timeout {idle};",
        f"keepalive_timeout {s.keepalive_timeout_seconds}s;",
        "client_header_buffer_size 1k;",
        f"large_client_header_buffers 4 {s.header_buffer_size};",
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
        f"    limit_conn {PER_ADDRESS_ZONE} {per_address};",
        f"    limit_conn {TOTAL_ZONE} {total};",
        "    limit_conn_status 503;",
        "    limit_conn_log_level warn;",
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
        # Zone keys: the client's address, or one key for all; empty (not counted) for a small body.
        "    map $content_length $fleet_upload_address {",
        f'        "{SMALL_BODY}" "";',
        "        default $binary_remote_addr;",
        "    }",
        "    map $content_length $fleet_upload_all {",
        f'        "{SMALL_BODY}" "";',
        "        default all;",
        "    }",
        f"    limit_conn_zone $fleet_upload_address zone={PER_ADDRESS_ZONE}:10m;",
        f"    limit_conn_zone $fleet_upload_all zone={TOTAL_ZONE}:1m;",
        f"    upstream {UPSTREAM} {{",
        f"        server 127.0.0.1:{plan.ports.control};",
        f"        keepalive {UPSTREAM_IDLE};",
        f"        keepalive_timeout {UPSTREAM_IDLE_TIMEOUT};",
        "    }",
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
