"""Probes from Flower 1.43, which removes the gRPC health server (versions.GRPC_HEALTH_UNTIL): a SuperNode's
liveness and readiness run Flower's own Python in the container to GET the loopback Runtime API's `/health`
(HTTPS when the Runtime API is TLS), a SuperExec's check that its process is not stopped; same config keys and
defaults as the gRPC probes; manifests strictly valid, pods restricted. Live: the exact rendered command against
a real SuperNode (the 1.43 nightly and 1.42.0, whose Runtime API serves the route too) succeeds, and fails on
the same SuperNode stopped with SIGSTOP (the negative control)."""

from __future__ import annotations

import http.server
import os
import signal
import ssl
import subprocess
import threading
import time
from pathlib import Path

import pytest

from flower_federation.kube.pod_security import restricted_violations
from flower_federation.plan.probes import PROBE_PYTHON, PROCESS_ALIVE, RUNTIME_HEALTH
from tests.support.flower import HTTP_ERA, NEXT, venv_bin, venv_python
from tests.support.manifests import workloads
from tests.support.processes import free_port, process_env
from tests.support.render import core_objects, plan_of
from tests.support.stacks import base
from tests.support.tls_provider import self_signed


def _pods(raw: dict) -> list[tuple[dict, dict]]:
    return [
        (w, c)
        for w in workloads(core_objects(raw))
        if w["kind"] != "Job"
        for c in w["spec"]["template"]["spec"]["containers"]
    ]


@pytest.mark.parametrize("insecure", [False, True])
@pytest.mark.parametrize("isolation", ["subprocess", "process"])
def test_supernodes_and_superexecs_are_probed_without_the_grpc_health_server(isolation, insecure, k8s_validate):
    raw = base(NEXT, isolation=isolation)
    raw["insecure"] = insecure
    plan = plan_of(raw)
    seen = set()
    for w, c in _pods(raw):
        if c["name"] == "superlink":
            continue  # HTTP era: httpGet /health on its API port (tests/test_probes.py)
        assert "--health-server-address" not in c["args"]
        seen.add(c["name"])
        for probe in ("livenessProbe", "readinessProbe"):
            command = c[probe]["exec"]["command"]
            assert set(c[probe]) - {"exec"} == {
                "initialDelaySeconds",
                "periodSeconds",
                "timeoutSeconds",
                "failureThreshold",
                "successThreshold",
            }
            if c["name"] == "supernode":
                port = int(c["args"][c["args"].index("--port") + 1])
                tls = "--ssl-certfile" in c["args"]
                assert tls is (plan.runtime_trust is not None)
                url = f"{'https' if tls else 'http'}://127.0.0.1:{port}/health"
                assert command == [*PROBE_PYTHON, RUNTIME_HEALTH, url, str(c[probe]["timeoutSeconds"])]
            else:
                assert command == [*PROBE_PYTHON, PROCESS_ALIVE]
        assert restricted_violations(w["spec"]["template"]) == []
        k8s_validate(w)
    assert "supernode" in seen
    assert ("superexec-clientapp" in seen) is (isolation == "process")


def test_same_keys_and_defaults_as_the_grpc_probes():
    """The probe settings of a 1.43 SuperNode are those a 1.42 one gets, configured or not."""
    settings = {"livenessProbe": {"periodSeconds": 7}, "readinessProbe": {"timeoutSeconds": 3}}

    def timing(version: str) -> dict:
        raw = base(version)
        raw["supernodes"]["probes"] = settings
        c = next(c for _, c in _pods(raw) if c["name"] == "supernode")
        return {p: {k: v for k, v in c[p].items() if k not in ("grpc", "exec")} for p in settings}

    ours, before = timing(NEXT), timing(HTTP_ERA)
    assert ours == before
    assert ours["livenessProbe"]["periodSeconds"] == 7 and ours["readinessProbe"]["timeoutSeconds"] == 3
    assert ours["livenessProbe"]["timeoutSeconds"] == 5 and ours["livenessProbe"]["failureThreshold"] == 6


def test_the_process_probe_fails_on_a_stopped_process(tmp_path: Path):
    """PROCESS_ALIVE reads PID 1's state; run here against a stand-in /proc/1/stat of each state."""
    script = PROCESS_ALIVE.replace("/proc/1/stat", str(tmp_path / "stat"))
    codes = {}
    for state in ("S", "R", "D", "T", "t", "Z"):
        (tmp_path / "stat").write_text(f"1 (flower-superexec (x)) {state} 0 1 1 0 -1\n")
        codes[state] = subprocess.run(["python3", "-c", script], check=False).returncode
    assert codes == {"S": 0, "R": 0, "D": 0, "T": 1, "t": 1, "Z": 1}


def _server_context(directory: Path) -> ssl.SSLContext:
    """A server context with a throwaway self-signed certificate (the probe verifies nothing)."""
    cert, key = self_signed("runtime-api")
    (directory / "tls.crt").write_text(cert)
    (directory / "tls.key").write_text(key)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(directory / "tls.crt", directory / "tls.key")
    return context


@pytest.mark.parametrize("scheme", ["http", "https"])
@pytest.mark.parametrize(("status", "code"), [(200, 0), (204, 0), (302, 0), (404, 1), (500, 1), (503, 1)])
def test_the_runtime_probe_passes_on_the_kubelets_success_statuses_only(
    scheme: str, status: int, code: int, tmp_path: Path
) -> None:
    """RUNTIME_HEALTH judges an answer as the kubelet's httpGet does (200-399 passes), over HTTP and over HTTPS with
    a certificate it does not verify, against a stand-in server that answers only the URL's path as asked."""
    asked: list[str] = []

    class Health(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (the stdlib's name)
            asked.append(self.path)
            self.send_response(status if self.path == "/health" else 400)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Health)
    if scheme == "https":
        server.socket = _server_context(tmp_path).wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"{scheme}://127.0.0.1:{server.server_address[1]}/health"
        argv = ["python3", *PROBE_PYTHON[1:], RUNTIME_HEALTH, url, "5"]
        assert subprocess.run(argv, check=False, capture_output=True, timeout=60).returncode == code
        assert asked == ["/health"]
    finally:
        server.shutdown()
        server.server_close()
    # Nothing listening: refused, a failure.
    refused = f"{scheme}://127.0.0.1:{free_port()}/health"
    argv = ["python3", *PROBE_PYTHON[1:], RUNTIME_HEALTH, refused, "5"]
    assert subprocess.run(argv, check=False, capture_output=True, timeout=60).returncode != 0


def _probe(command: list[str], version: str, port: int) -> int:
    """The rendered probe command as the kubelet runs it: the image's `python` is Flower's (the venv's), the
    Runtime API on its local port."""
    argv = [str(venv_python(version)), *command[1:]]
    argv[len(PROBE_PYTHON) + 1] = argv[len(PROBE_PYTHON) + 1].replace(":9094/", f":{port}/")
    return subprocess.run(argv, check=False, capture_output=True, timeout=60).returncode


@pytest.mark.live
@pytest.mark.parametrize("version", [NEXT, HTTP_ERA])
def test_the_rendered_probe_passes_on_a_live_supernode_and_fails_on_a_stopped_one(version, tmp_path: Path):
    raw = base(NEXT)
    raw["insecure"] = True
    c = next(c for _, c in _pods(raw) if c["name"] == "supernode")
    command = c["livenessProbe"]["exec"]["command"]
    assert command[len(PROBE_PYTHON) + 1] == "http://127.0.0.1:9094/health"
    port, nowhere = free_port(), free_port()
    node = subprocess.Popen(
        [str(venv_bin(version) / "flower-supernode"), "--insecure", "--superlink", f"127.0.0.1:{nowhere}"]
        + ["--host", "127.0.0.1", "--port", str(port)],
        env=process_env(version, tmp_path / "app"),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 120  # a hang guard: the loop ends when the probe first passes
        while _probe(command, version, port) != 0:
            assert node.poll() is None, f"flower-supernode {version} exited {node.returncode}"
            assert time.monotonic() < deadline, "the probe never passed"
            time.sleep(0.3)
        os.kill(node.pid, signal.SIGSTOP)
        assert _probe(command, version, port) != 0  # stopped: no answer within the probe's timeout
        os.kill(node.pid, signal.SIGCONT)
        assert _probe(command, version, port) == 0
    finally:
        os.killpg(node.pid, signal.SIGKILL)
        node.wait(timeout=30)
