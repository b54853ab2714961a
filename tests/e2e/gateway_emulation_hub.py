"""The federation's side of the Gateway emulation's end-to-end test
(test_e2e_gateway_emulation.py), in namespace fed: a Fleet-only proxy pod (the nginx image
as the product runs it) and an echoing HTTP(S) backend in a Flower image pod, their
Services, certificates and CA, the HTTPRoute to the platform's Gateway with its
BackendTLSPolicies, and the ReferenceGrant for the listener's certificate."""

from __future__ import annotations

from typing import Any

from tests.e2e import gateway_objects as g

GW_NS, FED = "gateway-system", "fed"
HOST = "fleet.example.test"
BACKEND_NAME = "backend.fed.svc"
PROXY_NAME = "proxy.fed.svc"
PROXY_IMAGE = "nginxinc/nginx-unprivileged:1.28.0-alpine"
FLWR_UID = 49999

SERVER = r"""
import hashlib, http.server, json, ssl, sys, threading

class Echo(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def _body(self):
        digest, n = hashlib.sha256(), 0
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            while True:
                size = int(self.rfile.readline().split(b";")[0], 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    break
                left = size
                while left:
                    chunk = self.rfile.read(min(left, 1 << 20))
                    digest.update(chunk); n += len(chunk); left -= len(chunk)
                self.rfile.readline()
        else:
            left = int(self.headers.get("Content-Length") or 0)
            while left:
                chunk = self.rfile.read(min(left, 1 << 20))
                if not chunk:
                    break
                digest.update(chunk); n += len(chunk); left -= len(chunk)
        return digest.hexdigest(), n

    def _serve(self):
        digest, n = self._body()
        seen = {"port": self.server.server_address[1], "method": self.command, "path": self.path,
                "headers": self.headers.items(), "sha256": digest, "length": n}
        if self.path != "/healthz":
            print(json.dumps(seen), flush=True)
        out = json.dumps(seen).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    do_GET = do_POST = do_PUT = _serve

def serve(port, name=None):
    server = http.server.ThreadingHTTPServer(("0.0.0.0", port), Echo)
    if name:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(f"/etc/backend/{name}.crt", f"/etc/backend/{name}.key")
        server.socket = ctx.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()

serve(8443, "good")
serve(9443, "impostor")
serve(9444, "stranger")
serve(8080)
print("serving", flush=True)
threading.Event().wait()
"""

PROXY_CONF = """daemon off;
pid /tmp/nginx.pid;
error_log stderr;
worker_processes 1;
events { worker_connections 256; }
http {
    access_log /dev/stdout;
    client_body_temp_path /tmp/client_temp;
    proxy_temp_path /tmp/proxy_temp;
    fastcgi_temp_path /tmp/fastcgi_temp;
    uwsgi_temp_path /tmp/uwsgi_temp;
    scgi_temp_path /tmp/scgi_temp;
    client_max_body_size 0;
    proxy_request_buffering off;
    proxy_buffering off;
    proxy_http_version 1.1;
    proxy_set_header Connection "";
    proxy_set_header Host $http_host;
    server {
        listen 8000 ssl;
        ssl_certificate /etc/flower/tls/tls.crt;
        ssl_certificate_key /etc/flower/tls/tls.key;
        location = /health { return 200 "ok\\n"; }
        location /v1/fleet/ {
            proxy_pass https://backend:8443;
            proxy_ssl_verify on;
            proxy_ssl_trusted_certificate /etc/flower/ca/ca.crt;
            proxy_ssl_name backend.fed.svc;
            proxy_ssl_server_name on;
        }
        location / { return 404; }
    }
}
"""

RESTRICTED = {
    "runAsNonRoot": True,
    "readOnlyRootFilesystem": True,
    "allowPrivilegeEscalation": False,
    "capabilities": {"drop": ["ALL"]},
}
POD_SECURITY = {"runAsUser": FLWR_UID, "runAsGroup": FLWR_UID, "fsGroup": FLWR_UID, "runAsNonRoot": True}


def _deployment(name: str, containers: list[dict[str, Any]], volumes: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": g.meta(name, FED),
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"securityContext": POD_SECURITY, "containers": containers, "volumes": volumes},
            },
        },
    }


def hub_objects(version: str, ca: g.CA, stranger: g.CA) -> list[dict[str, Any]]:
    """The federation's side (namespace fed): the proxy and the backend, their Services, certificates,
    CA, the route to the platform's Gateway with its BackendTLSPolicies and the ReferenceGrant."""
    good, impostor, other = ca.issue(BACKEND_NAME), ca.issue("impostor.fed.svc"), stranger.issue(BACKEND_NAME)
    backend_files = {
        "good.crt": good[0],
        "good.key": good[1],
        "impostor.crt": impostor[0],
        "impostor.key": impostor[1],
        "stranger.crt": other[0],
        "stranger.key": other[1],
    }
    backend = {
        "name": "server",
        "image": f"flwr/superlink:{version}",
        "command": ["python", "-c", SERVER],
        "ports": [
            {"name": "https", "containerPort": 8443},
            {"name": "wrong-name", "containerPort": 9443},
            {"name": "wrong-ca", "containerPort": 9444},
            {"name": "http", "containerPort": 8080},
        ],
        "readinessProbe": {"httpGet": {"path": "/healthz", "port": "http"}, "periodSeconds": 2},
        "securityContext": RESTRICTED,
        "volumeMounts": [{"name": "certs", "mountPath": "/etc/backend", "readOnly": True}],
    }
    proxy = {
        "name": "fleet-proxy",
        "image": PROXY_IMAGE,
        "command": ["nginx", "-e", "stderr", "-c", "/etc/fleet-proxy/nginx.conf"],
        "ports": [{"name": "fleet", "containerPort": 8000}],
        "readinessProbe": {"httpGet": {"path": "/health", "port": "fleet", "scheme": "HTTPS"}, "periodSeconds": 2},
        "livenessProbe": {"tcpSocket": {"port": "fleet"}, "periodSeconds": 2},
        "securityContext": {**RESTRICTED, "runAsUser": 101, "runAsGroup": 101},
        "volumeMounts": [
            {"name": "config", "mountPath": "/etc/fleet-proxy", "readOnly": True},
            {"name": "tls", "mountPath": "/etc/flower/tls", "readOnly": True},
            {"name": "ca", "mountPath": "/etc/flower/ca", "readOnly": True},
            {"name": "tmp", "mountPath": "/tmp"},
        ],
    }
    return [
        {**g.tls_secret("backend-certs", FED, "", ""), "stringData": backend_files},
        g.tls_secret("proxy-tls", FED, *ca.issue(PROXY_NAME)),
        g.tls_secret("fleet-tls", FED, *ca.issue(HOST)),
        g.ca_config_map("fed-ca", FED, ca.pem),
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": g.meta("proxy-config", FED),
            "data": {"nginx.conf": PROXY_CONF},
        },
        _deployment(
            "backend",
            [backend],
            [{"name": "certs", "secret": {"secretName": "backend-certs", "defaultMode": 0o440}}],
        ),
        _deployment(
            "proxy",
            [proxy],
            [
                {"name": "config", "configMap": {"name": "proxy-config"}},
                {"name": "tls", "secret": {"secretName": "proxy-tls", "defaultMode": 0o440}},
                {"name": "ca", "configMap": {"name": "fed-ca"}},
                {"name": "tmp", "emptyDir": {}},
            ],
        ),
        g.service("proxy", FED, {"app": "proxy"}, [("fleet", 8000, "fleet")]),
        g.service("backend", FED, {"app": "backend"}, [("https", 8443, "https")]),
        g.service("backend-wrong-name", FED, {"app": "backend"}, [("wrong-name", 9443, "wrong-name")]),
        g.service("backend-wrong-ca", FED, {"app": "backend"}, [("wrong-ca", 9444, "wrong-ca")]),
        g.service("backend-plain", FED, {"app": "backend"}, [("http", 8080, "http")]),
        g.backend_tls_policy("proxy-tls", FED, [("proxy", "fleet")], "fed-ca", PROXY_NAME),
        g.backend_tls_policy(
            "backend-tls",
            FED,
            [("backend", "https"), ("backend-wrong-name", None), ("backend-wrong-ca", "wrong-ca")],
            "fed-ca",
            BACKEND_NAME,
        ),
        g.reference_grant("gateways-read-fleet-tls", FED, "Gateway", GW_NS, "Secret", "fleet-tls"),
        g.http_route(
            "superlink",
            FED,
            (GW_NS, "edge"),
            [
                ([("PathPrefix", "/v1/fleet/")], ("proxy", 8000)),
                ([("PathPrefix", "/direct/")], ("backend", 8443)),
                ([("PathPrefix", "/wrong-name/")], ("backend-wrong-name", 9443)),
                ([("PathPrefix", "/wrong-ca/")], ("backend-wrong-ca", 9444)),
                ([("Exact", "/plain")], ("backend-plain", 8080)),
            ],
            hostnames=[HOST],
        ),
    ]
