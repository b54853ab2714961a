"""End to end: the harness's Gateway API emulation (harness/gateway.py) and its nginx images
(harness/pods.py), with real traffic. A platform's Gateway (namespace gateway-system)
terminates TLS for `fleet.example.test` with the federation's certificate (Secret in
namespace fed, read through a ReferenceGrant) and routes, as HTTPRoutes and
BackendTLSPolicies in fed say:

- `/v1/fleet/` to a Fleet-only proxy pod: the nginx image `nginxinc/nginx-unprivileged`
  as the product runs it (uid 101, read-only root, no capabilities; its config from a
  ConfigMap, the server certificate 0440 through the pod's fsGroup, /tmp an emptyDir),
  which passes it on, verified, to a backend;
- `/direct/` to that backend itself, and `/wrong-name/`, `/wrong-ca/` to two ports of it
  whose certificates the policy must reject (another name; another CA): the negative
  controls that verification is on;
- `/plain` to its plain-HTTP port (no policy).

The backend is a Python HTTP(S) server in a Flower image pod that logs and echoes what
arrives (headers, the body's length and SHA-256). A client in another cluster dials the
Gateway's WAN address by its public name. Nothing of it outlives the WAN and clusters."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Optional

import pytest

from tests.e2e import gateway_objects as g
from tests.e2e import harness
from tests.e2e.harness import cleanup
from tests.e2e.harness.gateway import ExposedGateway, expose_gateway
from tests.e2e.harness.host import ID_PREFIX, children
from tests.e2e.harness.pods import nginx_path
from tests.e2e.harness.wan import Wan
from tests.support.flower import HTTP_ERA, venv

GW_NS, FED = "gateway-system", "fed"
HOST = "fleet.example.test"
BACKEND_NAME = "backend.fed.svc"
PROXY_NAME = "proxy.fed.svc"
BODY_BYTES = 40 * 1024 * 1024
READY_TIMEOUT = 60
PROXY_IMAGE = "nginxinc/nginx-unprivileged:1.28.0-alpine"
FLWR_UID = 49999
# Flower's node-auth headers (HTTP era: flwr.supercore.constant), as a SuperNode signs its requests.
FLOWER_HEADERS = {
    "Content-Type": "application/protobuf",
    "flwr-public-key": "BGm0c1+Yx/Qm2t3hYk9VbqzK3J8o0X0m8v8cVZt2g4yq8yS1o0cQ7p/4d+f3q9Q3yG1b2Q==",
    "flwr-timestamp": "2026-03-01T12:34:56.789012+00:00",
    "flwr-signature": "MEUCIQDx3vN8ZqgkU0r1+5kq6o7p4a+0dGZx1uE3v2m7l9k2cQIgW0Nn/5Yy8TjvJ+YcD3k=",
}

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

# Requests from the client's namespace, each on a connection of its own: [{method, path, headers, size}].
CLIENT = r"""
import hashlib, http.client, json, os, ssl, sys
host, ca, requests = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
ctx = ssl.create_default_context(cafile=ca)
out = []
for r in requests:
    body = os.urandom(r["size"]) if r["size"] else None
    conn = http.client.HTTPSConnection(host, 443, context=ctx, timeout=60)
    conn.request(r["method"], r["path"], body=body, headers=r["headers"])
    resp = conn.getresponse()
    data = resp.read()
    conn.close()
    out.append({"status": resp.status, "body": data.decode(errors="replace")[:20000],
                "sha256": hashlib.sha256(body or b"").hexdigest(), "length": len(body or b"")})
print(json.dumps(out))
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


class Setup:
    """A hub cluster (the federation's pods, the Gateway on the WAN) and a site cluster (the client)."""

    def __init__(self) -> None:
        self.version = HTTP_ERA
        self.tmp = Path(tempfile.mkdtemp(prefix=f"{ID_PREFIX}-gwtest-"))
        self.wan: Optional[Wan] = None
        self.hub: Optional[harness.Cluster] = None
        self.site: Optional[harness.Cluster] = None

    def start(self) -> None:
        python = venv(self.version) / "bin" / "python"
        if not python.exists():
            pytest.fail(f"{python} missing: run `make test` or `make e2e`, which install flwr=={self.version}")
        self.wan = Wan("gateway")
        self.hub = harness.Cluster(self.version, venv(self.version), "gw-hub")
        self.site = harness.Cluster(self.version, venv(self.version), "gw-site")
        self.ids = {self.wan.id, self.hub.id, self.site.id}
        ca, stranger = g.CA("federation CA"), g.CA("someone else's CA")
        (self.tmp / "ca.crt").write_text(ca.pem)
        self.hub.apply(hub_objects(self.version, ca, stranger))
        pods = self.hub.create_pods()
        self.hub.start_pods(pods)
        self.hub.wait_pods_ready(pods, READY_TIMEOUT)
        self.backend = next(p for p in pods if p.workload == "backend")
        self.proxy = next(p for p in pods if p.workload == "proxy")
        self.gateway: ExposedGateway = expose_gateway(
            self.wan, self.hub, g.gateway("edge", GW_NS, HOST, "fleet-tls", FED)
        )
        self.wan.connect(self.site)
        self.client = self.site.add_client("client", "default")
        self.wan.publish(self.site, HOST, self.gateway.address)

    def send(self, *requests: dict[str, Any]) -> list[dict[str, Any]]:
        """Requests through the Gateway from the other cluster's client, by the public name."""
        argv = ["ip", "netns", "exec", self.client, sys.executable, "-c", CLIENT]
        argv += [HOST, str(self.tmp / "ca.crt"), json.dumps(list(requests))]
        res = subprocess.run(argv, capture_output=True, text=True, timeout=120)
        assert res.returncode == 0, f"client failed:\n{res.stderr}\n{self.gateway.log()}"
        return list(json.loads(res.stdout))

    def backend_requests(self) -> list[dict[str, Any]]:
        lines = self.backend.container("server").log(tail=100000).splitlines()
        return [json.loads(line) for line in lines if line.startswith("{")]

    def close(self) -> None:
        for part in (self.wan, self.site, self.hub):
            if part is not None:
                part.close()
        shutil.rmtree(self.tmp, ignore_errors=True)


def _get(path: str, headers: dict[str, str] | None = None, size: int = 0) -> dict[str, Any]:
    return {"method": "POST" if size else "GET", "path": path, "headers": headers or {}, "size": size}


@pytest.fixture(scope="module")
def setup():
    harness.install_cleanup_handlers()
    s = Setup()
    try:
        s.start()
        yield s
    finally:
        s.close()


def test_a_fleet_request_reaches_the_backend_unchanged_through_gateway_and_proxy(setup):
    """40 MB and Flower's signature headers, through the Gateway (TLS terminated, the proxy
    verified against the BackendTLSPolicy) and the Fleet-only proxy (the backend verified):
    the bytes and headers arrive as sent."""
    path = "/v1/fleet/push-messages?node=7"
    (res,) = setup.send(_get(path, FLOWER_HEADERS, BODY_BYTES))
    assert res["status"] == 200, res["body"][:2000]
    seen = json.loads(res["body"])
    assert (seen["path"], seen["port"], seen["method"]) == (path, 8443, "POST")
    assert (seen["length"], seen["sha256"]) == (res["length"], res["sha256"]), "the body changed on the way"
    received = {k.lower(): v for k, v in seen["headers"]}
    for name, value in FLOWER_HEADERS.items():
        assert received.get(name.lower()) == value, f"header {name}: sent {value!r}, got {received.get(name.lower())!r}"
    assert received["host"] == HOST
    assert [k.lower() for k, _ in seen["headers"]].count("flwr-signature") == 1
    # The Gateway logged it, forwarded to the proxy pod's Fleet port.
    entry = next(e for e in setup.gateway.requests() if e["uri"] == path)
    assert entry["status"] == 200 and entry["route"] == "fed/superlink#0"
    assert entry["upstream"] == f"{setup.proxy.ip}:8000" and entry["sni"] == HOST
    assert entry["request_length"] > BODY_BYTES


def test_what_no_route_matches_gets_404_and_reaches_no_backend(setup):
    before = len(setup.backend_requests())
    paths = ["/v1/control/list-runs", "/v1/fleetx", "/flwr.proto.Control/ListRuns", "/"]
    answers = setup.send(*(_get(p, FLOWER_HEADERS) for p in paths))
    assert [a["status"] for a in answers] == [404] * len(paths)
    entries = {e["uri"]: e for e in setup.gateway.requests() if e["uri"] in paths}
    assert set(entries) == set(paths)
    for e in entries.values():
        assert (e["status"], e["upstream"], e["route"]) == (404, "", ""), e
    assert setup.backend_requests()[before:] == []
    proxy_log = setup.proxy.container("fleet-proxy").log(tail=100000)
    assert "/v1/control" not in proxy_log and "/v1/fleetx" not in proxy_log


def test_the_backend_tls_policy_verifies_name_and_ca(setup):
    """Negative controls: the same policy, CA and backend pod, on ports whose certificates name
    another host or come from another CA: 502, the request never reaches the backend; the
    port with the right certificate answers (so it is the verification that refuses)."""
    before = len(setup.backend_requests())
    ok, wrong_name, wrong_ca = setup.send(_get("/direct/x"), _get("/wrong-name/x"), _get("/wrong-ca/x"))
    assert ok["status"] == 200, ok["body"]
    assert (wrong_name["status"], wrong_ca["status"]) == (502, 502)
    arrived = [r["path"] for r in setup.backend_requests()[before:]]
    assert arrived == ["/direct/x"]
    entries = {e["uri"]: e for e in setup.gateway.requests()}
    assert entries["/wrong-name/x"]["upstream"] == f"{setup.backend.ip}:9443"
    assert entries["/wrong-ca/x"]["upstream"] == f"{setup.backend.ip}:9444"
    log = setup.gateway.log()
    assert "upstream SSL certificate does not match" in log, log[-3000:]
    assert "upstream SSL certificate verify error" in log, log[-3000:]


def test_a_backend_without_a_policy_is_plain_http(setup):
    (res,) = setup.send(_get("/plain"))
    assert res["status"] == 200, res["body"]
    assert json.loads(res["body"])["port"] == 8080


def _status(pid: int) -> dict[str, str]:
    lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    return {k: v.strip() for k, _, v in (line.partition(":") for line in lines)}


def test_the_nginx_image_runs_as_uid_101_with_a_read_only_root(setup):
    """The proxy container's nginx (master and worker): uid/gid 101, the pod's fsGroup as its only
    supplementary group, no capabilities, no_new_privs; `/` read-only in its mount namespace; the
    host's nginx with the image's environment."""
    procs = [
        (pid, argv) for pod, c, pid, argv in setup.hub.processes() if (pod, c) == (setup.proxy.name, "fleet-proxy")
    ]
    titles = [" ".join(argv) for _, argv in procs]
    assert any("master process" in t for t in titles) and any("worker process" in t for t in titles), titles
    for pid, _ in procs:
        st = _status(pid)
        assert st["Uid"].split() == ["101"] * 4 and st["Gid"].split() == ["101"] * 4, st
        assert st["Groups"].split() == [str(FLWR_UID)]
        assert int(st["CapEff"], 16) == 0 and int(st["CapBnd"], 16) == 0 and st["NoNewPrivs"] == "1"
        root = next(line for line in Path(f"/proc/{pid}/mountinfo").read_text().splitlines() if line.split()[4] == "/")
        assert "ro" in root.split()[5].split(","), root
    master = next(pid for pid, argv in procs if "master process" in " ".join(argv))
    # nginx writes its title over its environment: what podinit was told to exec is in its spec.
    launch = json.loads((setup.proxy.dir / "fleet-proxy.json").read_text())
    assert launch["argv"] == [nginx_path(), "-e", "stderr", "-c", "/etc/fleet-proxy/nginx.conf"]
    env = launch["env"]
    assert env["HOME"] == "/var/cache/nginx" and env["NGINX_VERSION"] == "1.28.0", env
    assert "PYTHONFAULTHANDLER" not in env and "/.venv" not in env["PATH"]
    assert launch["cwd"] == "/" and launch["readOnlyRoot"] is True
    assert os.path.realpath(f"/proc/{master}/exe").endswith("/nginx")
    # It logs its access to /dev/stdout as the images do (the container log, its own since podinit).
    assert '"GET /health HTTP/1.1" 200' in setup.proxy.container("fleet-proxy").log(tail=100000)
    assert setup.proxy.container("fleet-proxy").restarts == 0


def _running(pid: int) -> bool:
    try:
        return "Z (zombie)" not in Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False


def test_closing_leaves_nothing_behind(setup):
    """The WAN's close kills the Gateway's nginx (its PID namespace with it); the clusters'
    closes the rest: no namespace, directory or process of ours is left."""
    unshare_pid = setup.wan.forwarders[-1][0].pid
    gateway_pids = [unshare_pid, *children(unshare_pid)]
    gateway_pids += [kid for pid in gateway_pids[1:] for kid in children(pid)]
    assert len(gateway_pids) == 3, f"unshare, nginx's master and worker: {gateway_pids}"
    directory = setup.gateway.directory
    setup.wan.close()
    assert not directory.exists()
    deadline = time.monotonic() + 5  # the kernel kills the PID namespace's processes as its PID 1 dies
    while any(_running(pid) for pid in gateway_pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not [pid for pid in gateway_pids if _running(pid)], "the Gateway's nginx outlived the WAN"
    setup.close()
    left = [entry for entry in harness.leftovers() if any(i in entry for i in setup.ids)]
    assert left == [], f"left behind: {left}"
    with cleanup._LIVE_LOCK:
        alone = not cleanup._LIVE
    if alone:  # no other cluster of this process runs: nothing at all may be left
        assert harness.leftovers() == []
