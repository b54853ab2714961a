"""The SuperExec hop is TLS, shown live (issue 32 part 7): from a ClientApp SuperExec's own network namespace (the
path its connections take, NetworkPolicies and all), to its SuperNode's Runtime API:

- a plaintext HTTP client (`GET /health`) gets no HTTP answer: the port speaks TLS only;
- a TLS client verifying with the CA file the SuperExec mounts, by the stable name it dials, completes the
  handshake and gets an HTTP answer (positive control: the port listens and the chain and name are right);
- a TLS client verifying with another CA is refused (CERTIFICATE_VERIFY_FAILED): verification is real.

Negative control of the plaintext probe itself: the same probe, in the same namespace, against a plaintext HTTP
server it starts there, does report an HTTP answer, so "no HTTP answer" is not the probe's blindness.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tests.e2e.netpol_controls import clientappio_port
from tests.e2e.site_stacks import other_ca

if TYPE_CHECKING:
    from tests.e2e.harness import Pod
    from tests.e2e.stack import Federation

PROBE_TIMEOUT = 60  # the three attempts take well under a second; this only bounds a hang
# The CA volumes a ClientApp SuperExec verifies its SuperNode with: a site's own CA, else the federation's.
CA_VOLUMES = ("runtime-ca", "ca")

PROBE = r"""
import http.server, json, socket, ssl, sys, threading

host, port, name, ca, wrong = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
REQUEST = b"GET /health HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n" % name.encode()


def answer(sock):
    sock.settimeout(5)
    sock.sendall(REQUEST)
    data = b""
    try:
        while len(data) < 16:
            chunk = sock.recv(16)
            if not chunk:
                break
            data += chunk
    except OSError as exc:
        return type(exc).__name__
    return "http" if data.startswith(b"HTTP/") else "no-http:" + repr(data[:16])


def plain(h, p):
    try:
        with socket.create_connection((h, p), timeout=5) as s:
            return answer(s)
    except OSError as exc:
        return type(exc).__name__


def tls(cafile):
    ctx = ssl.create_default_context(cafile=cafile)
    try:
        with socket.create_connection((host, port), timeout=5) as s, ctx.wrap_socket(s, server_hostname=name) as t:
            return "tls:" + answer(t)
    except ssl.SSLCertVerificationError as exc:
        return "verify-failed:" + str(exc.verify_message)
    except OSError as exc:
        return type(exc).__name__ + ":" + str(exc)


control = http.server.ThreadingHTTPServer(("127.0.0.1", 0), http.server.SimpleHTTPRequestHandler)
threading.Thread(target=control.serve_forever, daemon=True).start()
out = {
    "control": plain("127.0.0.1", control.server_address[1]),
    "plaintext": plain(host, port),
    "right_ca": tls(ca),
    "wrong_ca": tls(wrong),
}
control.shutdown()
print(json.dumps(out))
"""


def _ca_file(superexec: Pod) -> Path:
    for volume in CA_VOLUMES:
        if volume in superexec.volume_dirs:
            return superexec.volume_dirs[volume] / "ca.crt"
    raise AssertionError(f"{superexec.name} mounts no CA ({sorted(superexec.volume_dirs)}): its hop cannot be TLS")


def probe(node: Pod, superexec: Pod) -> dict[str, Any]:
    """The three attempts (and the probe's control) from a SuperExec to the SuperNode it serves."""
    service = node.name.rsplit("-", 1)[0]  # the pool's headless Service: the StatefulSet's name
    name = f"{node.name}.{service}.{node.namespace}.svc.cluster.local"  # what the SuperExec dials
    with tempfile.TemporaryDirectory() as tmp:
        wrong = Path(tmp) / "other-ca.crt"
        wrong.write_text(other_ca())
        wrong.chmod(0o644)
        Path(tmp).chmod(0o755)
        argv = ["ip", "netns", "exec", superexec.netns, sys.executable, "-c", PROBE]
        argv += [node.ip, str(clientappio_port(node)), name, str(_ca_file(superexec)), str(wrong)]
        done = subprocess.run(argv, capture_output=True, text=True, timeout=PROBE_TIMEOUT, check=False)
    assert done.returncode == 0, f"the probe failed: {done.stderr[-2000:]}"
    out: dict[str, Any] = json.loads(done.stdout)
    return out


def assert_runtime_api_is_tls(fed: Federation) -> str:
    """Assert the hop of SuperNode 0 and its SuperExec is TLS-only and verified; returns a one-line summary for the
    scenario's phases."""
    node = fed.supernodes_pods[0]
    superexec = next(p for p in fed.pods("superexec-clientapp") if p.ordinal == node.ordinal)
    return assert_pair_is_tls(node, superexec)


def assert_pair_is_tls(node: Pod, superexec: Pod) -> str:
    got = probe(node, superexec)
    assert got["control"] == "http", f"the probe cannot see a plaintext HTTP server: {got}"
    assert got["plaintext"] != "http", f"the SuperNode's Runtime API answered plaintext HTTP: {got}"
    assert got["right_ca"] == "tls:http", f"a TLS client with the SuperExec's CA was not served: {got}"
    assert got["wrong_ca"].startswith("verify-failed"), f"a client with another CA was not refused: {got}"
    return f"runtime API TLS-only: plaintext {got['plaintext']}, right CA served, other CA {got['wrong_ca']}"
