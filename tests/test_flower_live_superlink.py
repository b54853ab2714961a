"""Real processes: the rendered SuperLink (both dialects) started with the rendered
certificate, key and CA, only paths and listen addresses rewritten; `/health` (or the
gRPC TLS handshake) verified against the rendered CA for both `localhost` and
`127.0.0.1`; the exported register script registers every SuperNode key with the real
`flwr` CLI (and is idempotent); a real SuperNode with its own rendered key and args comes
online. Negative controls: a CA that did not sign the server certificate, and a name the
certificate does not cover, fail verification against the same live SuperLink."""

from __future__ import annotations

import json
import re
import socket
import ssl
import time
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import pytest
import tomli_w
from cryptography import x509
from cryptography.hazmat.primitives import serialization

from tests.support.flower import GRPC_ERA, HTTP_ERA, venv_bin, venv_python
from tests.support.kube import container_argv, pod_for
from tests.support.processes import PortMap, Processes, process_env, run_bounded
from tests.support.real_render import Mounted, Rendered, pod_files, render_fresh, started_containers

VERSIONS = (GRPC_ERA, HTTP_ERA)  # the versions with a real-Flower venv
LIVE_STACKS = {GRPC_ERA: "grpc-nodeauth", HTTP_ERA: "http-nodeauth"}
READY_TIMEOUT = 30


def materialize(r: Rendered, workload: dict, container: dict, root: Path) -> dict[str, Mounted]:
    """Write the files the container mounts under `root` (same paths, same modes), and
    create its other mount points (volume claims, scratch)."""
    files = pod_files(r, workload["spec"]["template"]["spec"], container)
    for path, src in files.items():
        data = r.data(src.kind, src.name)
        assert data is not None and src.key in data, f"{src} is not rendered with real content"
        target = root / path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(data[src.key])
        target.chmod(src.mode)
    for m in container.get("volumeMounts", []):
        (root / m["mountPath"].lstrip("/")).mkdir(parents=True, exist_ok=True)
    return files


ADDRESS = re.compile(r"(0\.0\.0\.0|127\.0\.0\.1):(\d+)")


def localize(
    argv: list[str], container: dict, root: Path, ports: PortMap, superlink_ports: Optional[PortMap] = None
) -> list[str]:
    """The rendered args, runnable here: mount paths under `root`, listen addresses on
    127.0.0.1 at free ports, the SuperLink address at its local port. Nothing else."""
    mounts = [m["mountPath"].rstrip("/") for m in container.get("volumeMounts", [])]
    out = []
    for i, arg in enumerate(argv):
        flag = argv[i - 1] if i else None
        if flag == "--host":
            arg = "127.0.0.1"
        elif flag == "--port":
            arg = str(ports[int(arg)])
        elif flag == "--superlink":
            arg = f"127.0.0.1:{superlink_ports[int(arg.rsplit(':', 1)[1])]}"
        elif ADDRESS.fullmatch(arg):
            arg = f"127.0.0.1:{ports[int(ADDRESS.fullmatch(arg).group(2))]}"
        elif any(arg == m or arg.startswith(m + "/") for m in mounts):
            arg = str(root) + arg
        out.append(arg)
    return out


def tls_probe(
    port: int, cafile: Path, server_hostname: str, http_path: Optional[str] = None, timeout: float = 3
) -> tuple[Optional[int], bytes]:
    """Connect to 127.0.0.1:port, verifying the certificate against `cafile` only (no
    system CAs) for `server_hostname`; for HTTP, GET `http_path`. Returns (status, DER
    of the server certificate)."""
    ctx = ssl.create_default_context(cafile=str(cafile))
    assert ctx.verify_mode == ssl.CERT_REQUIRED and ctx.check_hostname
    ctx.set_alpn_protocols(["http/1.1"] if http_path else ["h2"])
    with (
        socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock,
        ctx.wrap_socket(sock, server_hostname=server_hostname) as tls,
    ):
        der = tls.getpeercert(binary_form=True)
        if http_path is None:
            return None, der
        tls.sendall(f"GET {http_path} HTTP/1.1\r\nHost: {server_hostname}\r\nConnection: close\r\n\r\n".encode())
        head = b""
        while b"\r\n" not in head:
            chunk = tls.recv(4096)
            if not chunk:
                break
            head += chunk
        return int(head.split(b" ", 2)[1]), der


@dataclass
class LiveSuperLink:
    version: str
    r: Rendered
    procs: Processes
    root: Path
    ports: PortMap
    ca_file: Path  # the exported caCertificate output
    api_ports: list[int]  # local ports of the TLS APIs (HTTP: one; gRPC: fleet, control)
    health_port: Optional[int]  # local gRPC health port, if any
    http: bool

    def probe(self, port: int, cafile: Path, name: str):
        return tls_probe(port, cafile, name, "/health" if self.http else None)


def _superlink(r: Rendered) -> tuple[dict, dict, dict, list[str]]:
    return next(s for s in started_containers(r) if s[2]["name"] == "superlink")


@pytest.fixture(scope="module", params=VERSIONS)
def live(request, tmp_path_factory) -> Iterator[LiveSuperLink]:
    version = request.param
    r = render_fresh(LIVE_STACKS[version])
    workdir = tmp_path_factory.mktemp(f"live-{version}")
    procs = Processes(workdir)
    try:
        workload, pod, c, argv = _superlink(r)
        root = workdir / "superlink-pod"
        materialize(r, workload, c, root)
        ports = PortMap()
        args = localize(argv, c, root, ports)
        http = "--host" in argv
        if http:
            assert (argv[argv.index("--host") + 1], argv[argv.index("--port") + 1]) == ("0.0.0.0", "8000")
            api_ports = [ports[8000]]
        else:
            api_ports = [ports[r.plan.ports.fleet], ports[r.plan.ports.control]]
        health = next((a for f, a in zip(argv, argv[1:], strict=False) if f == "--health-server-address"), None)
        health_port = ports[int(health.rsplit(":", 1)[1])] if health else None
        ca_file = workdir / "ca.crt"
        ca_file.write_text(r.outputs["caCertificate"])
        # The rendered command where there is one (the image's `python` is Flower's).
        command = (
            [str(venv_python(version)), *c["command"][1:]]
            if "command" in c
            else [str(venv_bin(version) / "flower-superlink")]
        )
        proc = procs.start("superlink", [*command, *args], process_env(version, root / "app"))
        link = LiveSuperLink(version, r, procs, root, ports, ca_file, api_ports, health_port, http)
        deadline = time.monotonic() + READY_TIMEOUT
        while True:
            assert proc.poll() is None, f"flower-superlink exited {proc.returncode}:\n{procs.log('superlink')}"
            try:
                status, _ = link.probe(api_ports[0], ca_file, "localhost")
                if status in (None, 200):
                    break
            except (OSError, ssl.SSLError):
                pass
            assert time.monotonic() < deadline, f"SuperLink not ready in {READY_TIMEOUT}s:\n{procs.log('superlink')}"
            time.sleep(0.2)
        yield link
    finally:
        procs.stop()


def test_real_superlink_serves_the_rendered_certificate(live, flower):
    r = live.r
    server = r.data("Secret", r.plan.trust.server_secret)
    assert r.outputs["caCertificate"] == r.data("Secret", r.plan.trust.ca_secret)["ca.crt"]
    served = x509.load_pem_x509_certificate(server["tls.crt"].encode()).public_bytes(serialization.Encoding.DER)
    for port in live.api_ports:
        for name in ("localhost", "127.0.0.1"):  # both SANs verify, hostname check on
            status, der = live.probe(port, live.ca_file, name)
            assert der == served
            if live.http:
                assert status == 200, f"GET https://{name}:{port}/health -> {status}"
    if live.health_port is not None:  # gRPC era: what the kubelet's grpc probe asks
        assert flower[live.version].grpc_health(f"127.0.0.1:{live.health_port}") == "SERVING"
    assert live.procs.procs[0][1].poll() is None


def test_a_ca_that_did_not_sign_the_certificate_is_refused(live):
    """Negative control: the same check fails with another deployment's CA, and for a
    name the certificate does not cover."""
    other = render_fresh(LIVE_STACKS[live.version])
    assert other.outputs["caCertificate"] != live.r.outputs["caCertificate"]
    wrong_ca = live.root.parent / "other-ca.crt"
    wrong_ca.write_text(other.outputs["caCertificate"])
    for port in live.api_ports:
        for name in ("localhost", "127.0.0.1"):
            with pytest.raises(
                ssl.SSLCertVerificationError, match="unable to get local issuer|certificate verify failed"
            ):
                live.probe(port, wrong_ca, name)
        with pytest.raises(ssl.SSLCertVerificationError, match="mismatch|doesn't match"):
            live.probe(port, live.ca_file, "flower.example.com")
    # ...while the right CA still works (the SuperLink did not just go away).
    live.probe(live.api_ports[0], live.ca_file, "localhost")


def _cli_home(live: LiveSuperLink) -> tuple[str, dict[str, str]]:
    """FLWR_HOME with config.toml from the exported flwrConfig: only the address (to the
    local port of the port it names) and the CA path changed."""
    doc = tomllib.loads(live.r.outputs["flwrConfig"])
    name = doc["superlink"]["default"]
    conn = doc["superlink"][name]
    assert set(conn) == {"address", "root-certificates"}, conn  # TLS, no `insecure`
    host, port = conn["address"].rsplit(":", 1)
    assert host == live.r.plan.service_host(live.r.plan.names.superlink)
    assert int(port) in live.ports, f"flwrConfig dials port {port}, the SuperLink listens on {sorted(live.ports)}"
    conn["address"] = f"127.0.0.1:{live.ports[int(port)]}"
    conn["root-certificates"] = str(live.ca_file)
    env = process_env(live.version, live.root.parent / "cli")
    Path(env["FLWR_HOME"]).mkdir(parents=True, exist_ok=True)
    (Path(env["FLWR_HOME"]) / "config.toml").write_text(tomli_w.dumps(doc))
    return name, env


def _nodes(live: LiveSuperLink, name: str, env: dict[str, str]) -> list[dict]:
    res = run_bounded([str(venv_bin(live.version) / "flwr"), "supernode", "list", name, "--format", "json"], env)
    assert res.returncode == 0, res.stdout + res.stderr
    doc = json.loads(res.stdout[res.stdout.index("{") :])
    assert doc["success"] is True, doc
    return doc["nodes"]


def test_register_script_and_a_real_supernode(live, flower):
    r = live.r
    name, env = _cli_home(live)
    script = live.root.parent / "register.sh"
    script.write_text(r.outputs["nodeAuth"]["registerScript"])
    expected = [
        f"{pool}/{slot}"
        for pool, keys in sorted(r.outputs["nodeAuth"]["publicKeys"].items())
        for slot in sorted(keys, key=int)
    ]
    assert len(expected) == 4

    first = run_bounded(["sh", str(script)], env)
    assert first.returncode == 0, first.stdout + first.stderr
    assert first.stdout.splitlines() == [f"registered {k}" for k in expected], first.stdout + first.stderr

    # SuperNode alpha-1, with its rendered args and only its own key file.
    sts = r.workload(r.plan.names.pool("alpha"))
    pod = pod_for(sts, 1)
    c = sts["spec"]["template"]["spec"]["containers"][0]
    root = live.root.parent / "supernode-alpha-1"
    files = materialize(r, sts, c, root)
    argv = container_argv(c, pod)
    key_path = argv[argv.index("--auth-supernode-private-key") + 1]
    assert files[key_path].key == "node-1.key"
    args = localize(argv, c, root, PortMap(), superlink_ports=live.ports)
    node = live.procs.start(
        "supernode-alpha-1",
        [str(venv_bin(live.version) / "flower-supernode"), *args],
        process_env(live.version, root / "app"),
    )

    again = run_bounded(["sh", str(script)], env)  # idempotent
    assert again.returncode == 0, again.stdout + again.stderr
    assert again.stdout.splitlines() == [f"already registered: {k}" for k in expected], again.stdout + again.stderr

    deadline = time.monotonic() + READY_TIMEOUT
    node_id = None
    while True:
        assert node.poll() is None, f"flower-supernode exited {node.returncode}:\n{live.procs.log('supernode-alpha-1')}"
        if node_id is None:
            m = re.search(r"SuperNode ID: (\d+)", live.procs.log("supernode-alpha-1"))
            node_id = m and m.group(1)
        nodes = _nodes(live, name, env)
        assert len(nodes) == 4, nodes
        status = {n["node-id"]: n["status"] for n in nodes}
        if node_id is not None and status.get(node_id) == "online":
            break
        assert time.monotonic() < deadline, f"SuperNode not online in {READY_TIMEOUT}s: {status}\n" + live.procs.log(
            "supernode-alpha-1"
        )
        time.sleep(0.5)
    assert sorted(status.values()) == ["online", "registered", "registered", "registered"]
    health = next(a for f, a in zip(args, args[1:], strict=False) if f == "--health-server-address")
    assert flower[live.version].grpc_health(health) == "SERVING"
