"""The Gateway listener's certificate, presented by a real nginx (Debian's) as a Gateway's
TLS listener would: a client that trusts the federation's CA (a site, in-cluster `flwr`,
the registration Job) accepts it for the public hostname and for nothing else, so a Gateway
in the granted namespace cannot impersonate the SuperLink's Control API. Negative control:
the SuperLink's own Secret, which the ReferenceGrant handed out before (issue 32 part 6),
served the same way is accepted as `localhost` and as the in-cluster Control Service."""

from __future__ import annotations

import copy
import shutil
import socket
import ssl
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from flower_federation.cli.offline import run_program
from flower_federation.plan import load_plan
from tests.support.processes import free_port
from tests.support.program import NS, created_secrets, secret_files
from tests.support.stacks import HTTP_ERA, base
from tests.support.tls_provider import RealTlsProvider

pytestmark = pytest.mark.live
NGINX = shutil.which("nginx") or ("/usr/sbin/nginx" if Path("/usr/sbin/nginx").exists() else None)
HOST = "fl.example.org"


class Listeners:
    """One nginx, two TLS listeners: `listener` presents the rendered listener Secret, `superlink` the SuperLink's
    own Secret (what the old grant exposed)."""

    def __init__(self, tmp: Path) -> None:
        raw = base(HTTP_ERA)
        raw["superlink"] = {
            "gateway": {
                "parentRefs": [{"name": "public", "namespace": "gateway-system", "sectionName": "fleet"}],
                "hostname": HOST,
            }
        }
        plan = load_plan(copy.deepcopy(raw), "gw")
        self.control_name = f"{plan.names.superlink_control}.{NS}.svc.cluster.local"
        secrets = created_secrets(run_program({"federation": raw}, "gw", provider=RealTlsProvider()))
        self.ports: dict[str, int] = {}
        servers = []
        for role, secret in (("listener", f"{plan.name}-gateway-tls"), ("superlink", plan.trust.server_secret)):
            files = secret_files(secrets[secret])
            (tmp / f"{role}.crt").write_text(files["tls.crt"])
            (tmp / f"{role}.key").write_text(files["tls.key"])
            self.ports[role] = port = free_port()
            servers.append(
                f"server {{ listen 127.0.0.1:{port} ssl; ssl_certificate {tmp}/{role}.crt; "
                f"ssl_certificate_key {tmp}/{role}.key; location / {{ return 200 '{role}'; }} }}"
            )
        (tmp / "ca.crt").write_text(secret_files(secrets[plan.trust.ca_secret])["ca.crt"])
        (tmp / "nginx.conf").write_text(
            f"pid {tmp}/nginx.pid; daemon off; error_log stderr; events {{}}\n"
            f"http {{ access_log off; client_body_temp_path {tmp}; proxy_temp_path {tmp}; "
            f"fastcgi_temp_path {tmp}; uwsgi_temp_path {tmp}; scgi_temp_path {tmp};\n" + "\n".join(servers) + "\n}\n"
        )
        self.tmp = tmp
        self.client = ssl.create_default_context(cafile=str(tmp / "ca.crt"))  # the federation's CA, as clients

    def handshake(self, role: str, name: str) -> str:
        """'ok', or why the client refused the certificate for `name`."""
        try:
            raw_sock = socket.create_connection(("127.0.0.1", self.ports[role]), timeout=10)
            with raw_sock, self.client.wrap_socket(raw_sock, server_hostname=name):
                return "ok"
        except ssl.SSLCertVerificationError as e:
            return e.verify_message


@pytest.fixture(scope="module")
def listeners(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Listeners]:
    if NGINX is None:
        pytest.fail("nginx is not installed: `make test` installs Debian's nginx as root (the Makefile's e2e packages)")
    setup = Listeners(tmp_path_factory.mktemp("gateway-listener"))
    proc = subprocess.Popen([NGINX, "-e", "stderr", "-c", str(setup.tmp / "nginx.conf")], stderr=subprocess.PIPE)
    try:
        for port in setup.ports.values():
            for _ in range(100):  # nginx's start-up: bounded liveness wait, not a timing claim
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=1).close()
                    break
                except OSError:
                    if proc.poll() is not None:
                        stderr = proc.stderr.read().decode() if proc.stderr else ""
                        pytest.fail(f"nginx exited {proc.returncode}: {stderr}")
                    time.sleep(0.1)
        yield setup
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_the_listener_certificate_verifies_for_the_public_hostname(listeners: Listeners) -> None:
    assert listeners.handshake("listener", HOST) == "ok"


@pytest.mark.parametrize("name", ["localhost", "control"])
def test_the_listener_certificate_cannot_impersonate_the_control_api(listeners: Listeners, name: str) -> None:
    target = listeners.control_name if name == "control" else name
    assert "Hostname mismatch" in listeners.handshake("listener", target)
    # Negative control: the SuperLink's own certificate, which the ReferenceGrant named before, passes as both.
    assert listeners.handshake("superlink", target) == "ok"
