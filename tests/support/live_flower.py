"""A rendered pod run here as the kubelet would run it, with real Flower: the files it
mounts from rendered Secrets and ConfigMaps written under a tmp root (same paths, same
modes), its args with only mount paths, listen addresses and the SuperLink's address
localized; the rendered SuperLink started that way and waited for; the `flwr` CLI and
real SuperNodes against it. Shared by the live tests (tests/test_flower_live_*.py)."""

from __future__ import annotations

import contextlib
import json
import re
import socket
import sqlite3
import ssl
import subprocess
import time
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

import tomli_w

from tests.support.flower import GRPC_ERA, HTTP_ERA, venv_bin, venv_python
from tests.support.kube import container_argv, pod_for
from tests.support.processes import PortMap, Processes, process_env, run_bounded
from tests.support.real_render import Mounted, Rendered, pod_files, render_fresh, started_containers

VERSIONS = (GRPC_ERA, HTTP_ERA)  # the versions with a real-Flower venv
LIVE_STACKS = {GRPC_ERA: "grpc-nodeauth", HTTP_ERA: "http-nodeauth"}
READY_TIMEOUT = 120  # a hang guard: readiness returns at once on success


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


def rewrite(path: Path, text: str) -> None:
    """Replace a materialized (read-only) file's content, keeping its mode."""
    mode = path.stat().st_mode & 0o777
    path.chmod(0o600)
    path.write_text(text)
    path.chmod(mode)


ADDRESS = re.compile(r"(0\.0\.0\.0|127\.0\.0\.1):(\d+)")


def localize_path(value: str, container: dict, root: Path) -> str:
    """A path in one of the container's mounts, under `root`; anything else unchanged."""
    mounts = [m["mountPath"].rstrip("/") for m in container.get("volumeMounts", [])]
    return str(root) + value if any(value == m or value.startswith(m + "/") for m in mounts) else value


def localize(
    argv: list[str], container: dict, root: Path, ports: PortMap, superlink_ports: Optional[PortMap] = None
) -> list[str]:
    """The rendered args, runnable here: mount paths under `root`, listen addresses on
    127.0.0.1 at free ports, the SuperLink address at its local port. Nothing else."""
    out = []
    for i, arg in enumerate(argv):
        flag = argv[i - 1] if i else None
        if flag == "--host":
            arg = "127.0.0.1"
        elif flag == "--port":
            arg = str(ports[int(arg)])
        elif flag == "--superlink":
            assert superlink_ports is not None
            arg = f"127.0.0.1:{superlink_ports[int(arg.rsplit(':', 1)[1])]}"
        elif m := ADDRESS.fullmatch(arg):
            arg = f"127.0.0.1:{ports[int(m.group(2))]}"
        else:
            arg = localize_path(arg, container, root)
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
    database: Path  # the SuperLink's state file (`--database`, on its PVC's mount under `root`)

    @property
    def workdir(self) -> Path:
        return self.root.parent

    def probe(self, port: int, cafile: Path, name: str) -> tuple[Optional[int], bytes]:
        return tls_probe(port, cafile, name, "/health" if self.http else None)

    def localize_connection(self, toml_text: str, ca_file: Path) -> str:
        """A `flwr` config dialing this SuperLink: only the connection's address (to the
        local port of the port it names) and its CA path (`ca_file`) changed."""
        doc = tomllib.loads(toml_text)
        conn = doc["superlink"][doc["superlink"]["default"]]
        assert set(conn) == {"address", "root-certificates"}, conn  # TLS, no `insecure`
        host, port = conn["address"].rsplit(":", 1)
        assert host == self.r.plan.service_host(self.r.plan.names.superlink)
        assert int(port) in self.ports, f"the config dials port {port}, the SuperLink listens on {sorted(self.ports)}"
        conn["address"] = f"127.0.0.1:{self.ports[int(port)]}"
        conn["root-certificates"] = str(ca_file)
        return tomli_w.dumps(doc)


def _superlink(r: Rendered) -> tuple[Any, dict, dict, list[str]]:
    return next(s for s in started_containers(r) if s[2]["name"] == "superlink")


def state_created(database: Path) -> bool:
    """The SuperLink's SQLite state exists with its schema migrated (Alembic stamps the
    version when a migration has finished)."""
    if not database.exists():
        return False
    try:
        with contextlib.closing(sqlite3.connect(f"file:{database}?mode=ro", uri=True, timeout=0.2)) as db:
            return bool(db.execute("SELECT version_num FROM alembic_version").fetchall())
    except sqlite3.Error:  # no such table yet, or locked by the migration
        return False


@contextlib.contextmanager
def live_superlink(version: str, workdir: Path) -> Iterator[LiveSuperLink]:
    """A fresh render of the version's node-auth stack and its SuperLink running under
    `workdir`, ready: its APIs answer over TLS (verified with the exported CA) and its
    state exists."""
    r = render_fresh(LIVE_STACKS[version])
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
        # The rendered command where there is one (the state wrapper before Flower 1.31;
        # the image's `python` is Flower's), else the image's entrypoint.
        command = (
            [str(venv_python(version)), *c["command"][1:]]
            if "command" in c
            else [str(venv_bin(version) / "flower-superlink")]
        )
        proc = procs.start("superlink", [*command, *args], process_env(version, root / "app"))
        database = Path(args[args.index("--database") + 1])
        link = LiveSuperLink(version, r, procs, root, ports, ca_file, api_ports, health_port, http, database)
        deadline = time.monotonic() + READY_TIMEOUT
        while True:
            assert proc.poll() is None, f"flower-superlink exited {proc.returncode}:\n{procs.log('superlink')}"
            try:  # every TLS API (gRPC era: Fleet and Control)
                if all(link.probe(port, ca_file, "localhost")[0] in (None, 200) for port in api_ports):
                    break
            except (OSError, ssl.SSLError):
                pass
            assert time.monotonic() < deadline, f"SuperLink not ready in {READY_TIMEOUT}s:\n{procs.log('superlink')}"
            time.sleep(0.2)
        # Through the rendered wrapper the state exists before the ports open (1.26); this
        # check keeps the claim honest for every version.
        while not state_created(database):
            assert proc.poll() is None, f"flower-superlink exited {proc.returncode}:\n{procs.log('superlink')}"
            assert time.monotonic() < deadline, f"no SuperLink state in {READY_TIMEOUT}s:\n{procs.log('superlink')}"
            time.sleep(0.2)
        yield link
    finally:
        procs.stop()


def cli_home(live: LiveSuperLink, name: str = "cli") -> tuple[str, dict[str, str]]:
    """(connection name, env) of the `flwr` CLI with FLWR_HOME/config.toml from the
    exported flwrConfig, localized (`LiveSuperLink.localize_connection`) to the exported CA."""
    text = live.localize_connection(live.r.outputs["flwrConfig"], live.ca_file)
    env = process_env(live.version, live.workdir / name)
    Path(env["FLWR_HOME"]).mkdir(parents=True, exist_ok=True)
    (Path(env["FLWR_HOME"]) / "config.toml").write_text(text)
    return tomllib.loads(text)["superlink"]["default"], env


def list_nodes(live: LiveSuperLink, name: str, env: dict[str, str]) -> list[dict]:
    """`flwr supernode list --format json`: the SuperLink's nodes as the real CLI shows them."""
    res = run_bounded([str(venv_bin(live.version) / "flwr"), "supernode", "list", name, "--format", "json"], env)
    assert res.returncode == 0, res.stdout + res.stderr
    doc = json.loads(res.stdout[res.stdout.index("{") :])
    assert doc["success"] is True, doc
    return doc["nodes"]


@dataclass
class LiveSuperNode:
    label: str  # its process name in live.procs, e.g. "supernode-alpha-1"
    proc: subprocess.Popen
    args: list[str]

    def health_address(self) -> str:
        return next(a for f, a in zip(self.args, self.args[1:], strict=False) if f == "--health-server-address")


def start_supernode(live: LiveSuperLink, pool: str, index: int) -> LiveSuperNode:
    """SuperNode `index` of a StatefulSet pool with its rendered args and only its own
    key file, dialing the live SuperLink."""
    r = live.r
    sts = r.workload(r.plan.names.pool(pool))
    pod = pod_for(sts, index)
    c = sts["spec"]["template"]["spec"]["containers"][0]
    label = f"supernode-{pool}-{index}"
    root = live.workdir / label
    files = materialize(r, sts, c, root)
    argv = container_argv(c, pod)
    key_path = argv[argv.index("--auth-supernode-private-key") + 1]
    assert files[key_path].key == f"node-{index}.key"
    args = localize(argv, c, root, PortMap(), superlink_ports=live.ports)
    proc = live.procs.start(
        label, [str(venv_bin(live.version) / "flower-supernode"), *args], process_env(live.version, root / "app")
    )
    return LiveSuperNode(label, proc, args)


def node_id_of(live: LiveSuperLink, node: LiveSuperNode) -> Optional[str]:
    """The node ID a SuperNode logged once the SuperLink accepted it."""
    m = re.search(r"SuperNode ID: (\d+)", live.procs.log(node.label))
    return m.group(1) if m else None


def wait_online(live: LiveSuperLink, node: LiveSuperNode, name: str, env: dict[str, str]) -> list[dict]:
    """Wait until the SuperNode is `online` in `flwr supernode list`; returns the list."""
    deadline = time.monotonic() + READY_TIMEOUT
    node_id = None
    while True:
        assert node.proc.poll() is None, (
            f"flower-supernode exited {node.proc.returncode}:\n{live.procs.log(node.label)}"
        )
        node_id = node_id or node_id_of(live, node)
        nodes = list_nodes(live, name, env)
        status = {n["node-id"]: n["status"] for n in nodes}
        if node_id is not None and status.get(node_id) == "online":
            return nodes
        assert time.monotonic() < deadline, f"SuperNode not online in {READY_TIMEOUT}s: {status}\n" + live.procs.log(
            node.label
        )
        time.sleep(0.5)
