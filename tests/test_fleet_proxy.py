"""The Fleet-only proxy's rendered nginx.conf, run by a real nginx (Debian's, which
`make test` installs for the e2e as root) in front of a stand-in SuperLink: an HTTPS
server on the SuperLink's own port with the rendered server certificate, recording
every request it receives.

Shown: a Fleet request reaches it with its node-auth headers and a body of one full array
chunk (Flower's 5 MiB) and more intact,
and its response comes back; `/health` (GET) is forwarded; Control, Runtime, unknown
and dot-segment or percent-encoded paths are answered 404 by the proxy and never reach
the SuperLink; the hop is verified TLS (a SuperLink whose certificate is not from the
federation's CA gets 502, the negative control). Paths and ports of the rendered config
are moved to a temporary directory and free ports; every other directive is as rendered.
"""

from __future__ import annotations

import hashlib
import http.client
import http.server
import shutil
import socket
import ssl
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from flower_federation.builders import fleet_proxy
from tests.e2e.gateway_objects import CA
from tests.support.manifests import get
from tests.support.processes import free_port
from tests.support.tls_provider import RealTlsProvider
from tests.test_sites import _hub

pytestmark = pytest.mark.live
NGINX = shutil.which("nginx") or ("/usr/sbin/nginx" if Path("/usr/sbin/nginx").exists() else None)
# One of Flower's array chunks (FLWR_PRIVATE_MAX_ARRAY_CHUNK_SIZE, 5 MiB) with room for its framing: the
# largest body Flower's Fleet client sends for a model of any size.
BIG = 7 * 1024 * 1024


class Recorder(http.server.BaseHTTPRequestHandler):
    seen: list[dict[str, Any]] = []

    def _handle(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        body = self.rfile.read(length) if length else b""
        self.seen.append(
            {
                "method": self.command,
                "path": self.path,
                "headers": dict(self.headers),
                "sha": hashlib.sha256(body).hexdigest(),
            }
        )
        reply = b"fleet-ok:" + hashlib.sha256(body).hexdigest().encode()
        self.send_response(200)
        self.send_header("content-type", "application/protobuf")
        self.send_header("content-length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)

    do_GET = do_POST = _handle  # noqa: N815

    def log_message(self, *args: Any) -> None:
        pass


def _other_cert(tmp: Path) -> tuple[Path, Path]:
    """A certificate for the SuperLink's name that is not from the federation's CA."""
    cert, key = CA("impostor CA").issue("fl-superlink.flower-hub.svc.cluster.local")
    crt, pem = tmp / "other.crt", tmp / "other.key"
    crt.write_text(cert)
    pem.write_text(key)
    return crt, pem


class Setup:
    def __init__(self, tmp: Path):
        result = _hub(provider=RealTlsProvider())
        objects = result.manifests(show_secrets=True)
        conf = get(objects, "ConfigMap", "fl-superlink-fleet-proxy")["data"]["nginx.conf"]
        secret = get(objects, "Secret", "fl-superlink-tls")["stringData"]
        self.tmp = tmp
        for name in ("tls.crt", "tls.key", "ca.crt"):
            (tmp / name).write_text(secret[name])
        self.public, self.upstream = free_port(), free_port()
        assert "listen 8000 ssl;" in conf and "server 127.0.0.1:9095;" in conf, conf
        conf = (
            conf.replace(" /tmp/", f" {tmp}/")
            .replace("listen 8000 ssl;", f"listen 127.0.0.1:{self.public} ssl;")
            .replace("127.0.0.1:9095", f"127.0.0.1:{self.upstream}")
            .replace("/etc/flower/tls/", f"{tmp}/")
            .replace("/etc/flower/ca/", f"{tmp}/")
            .replace("/dev/stdout", f"{tmp}/access.log")
        )
        (tmp / "nginx.conf").write_text(conf)
        self.client = ssl.create_default_context(cafile=str(tmp / "ca.crt"))

    def serve(self, cert: Path, key: Path) -> http.server.ThreadingHTTPServer:
        Recorder.seen = []
        server = http.server.ThreadingHTTPServer(("127.0.0.1", self.upstream), Recorder)
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(str(cert), str(key))
        server.socket = ctx.wrap_socket(server.socket, server_side=True)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        return server

    def request(self, method: str, path: str, body: bytes = b"", headers: dict[str, str] | None = None):
        conn = http.client.HTTPSConnection("127.0.0.1", self.public, context=self.client, timeout=60)
        # The name sites dial (the rendered certificate names it).
        conn._tunnel_host = None  # noqa: SLF001
        conn.sock = self.client.wrap_socket(
            socket.create_connection(("127.0.0.1", self.public), timeout=60), server_hostname="fl.example.org"
        )
        conn.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
        conn.putheader("Host", "fl.example.org:443")
        for k, v in (headers or {}).items():
            conn.putheader(k, v)
        conn.putheader("Content-Length", str(len(body)))
        conn.endheaders(body)
        resp = conn.getresponse()
        data = resp.read()
        conn.close()
        return resp.status, data


@pytest.fixture(scope="module")
def proxy(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Setup]:
    if NGINX is None:
        pytest.fail("nginx is not installed: `make test` installs Debian's nginx as root (the Makefile's e2e packages)")
    setup = Setup(tmp_path_factory.mktemp("fleet-proxy"))
    proc = subprocess.Popen(
        [NGINX, "-e", "stderr", "-c", str(setup.tmp / "nginx.conf")], stderr=subprocess.PIPE, text=True
    )
    for _ in range(100):
        try:
            socket.create_connection(("127.0.0.1", setup.public), timeout=1).close()
            break
        except OSError:
            if proc.poll() is not None:
                pytest.fail(f"nginx exited {proc.returncode}: {proc.stderr.read() if proc.stderr else ''}")
            time.sleep(0.1)
    yield setup
    proc.terminate()
    proc.wait(timeout=10)


def test_fleet_requests_pass_with_headers_and_large_bodies(proxy: Setup) -> None:
    server = proxy.serve(proxy.tmp / "tls.crt", proxy.tmp / "tls.key")
    try:
        body = bytes(range(256)) * (BIG // 256)
        headers = {"flwr-public-key": "cHVibGlj", "flwr-signature": "c2lnbmF0dXJl", "flwr-timestamp": "2026-11-25"}
        status, data = proxy.request("POST", "/v1/fleet/push-object", body, headers)
        assert status == 200 and data == b"fleet-ok:" + hashlib.sha256(body).hexdigest().encode()
        status, _ = proxy.request("GET", "/health")
        assert status == 200
        (fleet, health) = Recorder.seen
        assert fleet["path"] == "/v1/fleet/push-object" and fleet["sha"] == hashlib.sha256(body).hexdigest()
        for k, v in headers.items():
            assert fleet["headers"].get(k) == v, (k, fleet["headers"])
        assert health["path"] == "/health"
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize(
    ("method", "path", "status"),
    [
        ("POST", "/v1/control/list-runs", 404),
        ("POST", "/v1/control/start-run", 404),
        ("POST", "/v1/runtime/pull-message", 404),
        ("POST", "/v1/fleet/../control/list-runs", 404),
        ("POST", "/v1/fleet/%2e%2e/control/list-runs", 404),
        ("POST", "/v1/fleet/push-object/../../control/list-runs", 404),
        ("POST", "/v1/fleetx/anything", 404),
        ("POST", "/v1/fleet/get-run?next=/v1/control/list-runs", 404),
        ("POST", "/v1/fleet//get-run", 404),
        ("POST", "/", 404),
        ("POST", "/health", 403),
    ],
)
def test_everything_but_the_fleet_api_is_answered_by_the_proxy(
    proxy: Setup, method: str, path: str, status: int
) -> None:
    server = proxy.serve(proxy.tmp / "tls.crt", proxy.tmp / "tls.key")
    try:
        got, _ = proxy.request(method, path, b"x" * 100)
        assert got == status
        assert Recorder.seen == [], f"{path} reached the SuperLink"
        # The same connection setup does reach it on a Fleet route (the control).
        assert proxy.request("POST", "/v1/fleet/get-run", b"x")[0] == 200
        assert [r["path"] for r in Recorder.seen] == ["/v1/fleet/get-run"]
    finally:
        server.shutdown()
        server.server_close()


def test_a_body_over_the_limit_is_refused_before_the_superlink(proxy: Setup) -> None:
    """`fleetProxy.maxRequestBodySize` (8m): nginx answers 413 on the declared length."""
    server = proxy.serve(proxy.tmp / "tls.crt", proxy.tmp / "tls.key")
    try:
        conn = http.client.HTTPSConnection("127.0.0.1", proxy.public, context=proxy.client, timeout=60)
        conn.sock = proxy.client.wrap_socket(
            socket.create_connection(("127.0.0.1", proxy.public), timeout=60), server_hostname="fl.example.org"
        )
        conn.putrequest("POST", "/v1/fleet/push-object", skip_host=True)
        conn.putheader("Host", "fl.example.org")
        conn.putheader("Content-Length", str(8 * 1024 * 1024 + 1))
        conn.endheaders()
        assert conn.getresponse().status == 413
        conn.close()
        assert Recorder.seen == []
    finally:
        server.shutdown()
        server.server_close()


def test_the_hop_to_the_superlink_is_verified_tls(proxy: Setup) -> None:
    crt, key = _other_cert(proxy.tmp)
    server = proxy.serve(crt, key)
    try:
        status, _ = proxy.request("POST", "/v1/fleet/get-run", b"x")
        assert status == 502 and Recorder.seen == []
    finally:
        server.shutdown()
        server.server_close()


def test_the_config_forwards_only_fleet_routes_and_health() -> None:
    """What the rendered config says, for a reader: two forwarding locations, 404 for the rest."""
    conf = get(_hub().manifests(), "ConfigMap", "fl-superlink-fleet-proxy")["data"]["nginx.conf"]
    assert conf.count("proxy_pass ") == 2 and "location / {\n            return 404;" in conf
    assert fleet_proxy.FLEET_URI in conf and "client_max_body_size 8m;" in conf
    assert "proxy_set_header X-Forwarded-For $remote_addr;" in conf
