"""What the emulated Gateway controller programs (gateway_controller.py), as nginx runs it:
the servers per listener port and hostname, their locations and upstreams (TLS-verified
per a BackendTLSPolicy, or plain), and nginx's configuration for them, which passes
requests as sent and logs each as one JSON object. Pure."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

TIMEOUT = "3600s"
CONNECT_TIMEOUT = "10s"
ACCESS_LOG = "access.log"
# One JSON object per request: what tests assert on (ExposedGateway.requests).
LOG_FORMAT = (
    '\'{"time":"$time_iso8601","client":"$remote_addr","sni":"$ssl_server_name","host":"$host",'
    '"method":"$request_method","uri":"$request_uri","status":$status,"route":"$gw_route",'
    '"upstream":"$upstream_addr","upstream_status":"$upstream_status",'
    '"request_length":$request_length,"bytes_sent":$bytes_sent,"request_time":$request_time}\''
)


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


def nginx_config(ref: str, address: str, d: Path, servers: list[Server]) -> str:
    """nginx's configuration for `servers`, listening on `address`, run in `d` (the files' directory)."""
    lines = [
        f"# {ref}, as tests/e2e/harness/gateway.py programs it",
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
