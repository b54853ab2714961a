"""Warm Flower for a cluster's containers (tests/e2e/warm_flower.py says what a start does): which containers and
programs start warm, the servers that start them (one per Flower venv and import environment, started on first
use and kept for the test session), the console scripts bound over the image's in a warm cluster's containers
(tests/e2e/warm_shim.py), and the handle a container's supervisor waits on in place of a Popen.

In a warm cluster (`Cluster(warm=True)`: the federations and sites of the e2e, never each version's `process`
federation, whose containers prove the console scripts and the exec), every container of a Flower image gets the
shims of SPAWNED_PROGRAMS over its venv's scripts, so what Flower starts (a SuperNode's SuperExec, a SuperExec's
ClientApps and ServerApps) starts warm; and a container whose own program is one of POD_PROGRAMS, run as a user
other than root, starts warm itself."""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import secrets
import select
import shutil
import socket
import subprocess
import threading
from pathlib import Path
from typing import IO, Any, Optional

from tests.e2e.harness.host import HERE, HarnessError
from tests.e2e.podinit import which
from tests.e2e.warm_flower import console_target

WARM_FLOWER = HERE / "warm_flower.py"
WARM_SHIM = HERE / "warm_shim.py"
POD_PROGRAMS = ("flower-supernode", "flower-superexec")
SPAWNED_PROGRAMS = ("flower-superexec", "flwr-clientapp", "flwr-serverapp")
WARM_PROGRAMS = (*POD_PROGRAMS, *(p for p in SPAWNED_PROGRAMS if p not in POD_PROGRAMS))
# What Flower's modules read from the environment when imported (module-level os.getenv / os.environ in every
# tested version: tests/test_warm_flower.py reads them from the venvs and fails on one missing here), HOME, and
# the prefixes of what Python (PYTHON*, LC_*, LANG) and Flower's libraries (gRPC's core, OpenBLAS, OpenMP, numpy)
# read at their start: a server imports Flower with the container's values of all of them.
IMPORT_ENV = (
    "BROWSER_USE_SETUP_LOGGING",
    "FLWR_LOCAL_CONTROL_API_PORT",
    "FLWR_LOCAL_SUPERLINK_HTTP_API_PORT",
    "FLWR_LOG_LEVEL",
    "FLWR_PRIVATE_MAX_ARRAY_CHUNK_SIZE",
    "FLWR_PRIVATE_MAX_CONCURRENT_OBJ_PULLS",
    "FLWR_PRIVATE_MAX_CONCURRENT_OBJ_PUSHES",
    "FLWR_SUPERGRID_ADDRESS",
    "FLWR_SUPERGRID_API_URL",
    "FLWR_TELEMETRY_ENABLED",
    "FLWR_TELEMETRY_LOGGING",
    "HOME",
    "LANG",
    "TZ",
)
IMPORT_ENV_PREFIXES = ("PYTHON", "LC_", "GRPC_", "OPENBLAS_", "OMP_", "NPY_", "MKL_", "PROTOCOL_BUFFERS_")
# The server's import on a loaded machine (an interpreter and Flower's import: seconds, tens under load).
SERVER_START_SECONDS = 180.0
# A pod call's answer: podinit's mounts in the new container, on a loaded machine (milliseconds, seconds under load).
ANSWER_SECONDS = 120.0


def import_key(env: dict[str, str]) -> tuple[tuple[str, str], ...]:
    return tuple(sorted((k, v) for k, v in env.items() if k in IMPORT_ENV or k.startswith(IMPORT_ENV_PREFIXES)))


def warm_script(spec: dict[str, Any]) -> Optional[Path]:
    """The Flower console script a container's launch spec runs, if it may start warm."""
    user = spec.get("user")
    if user is None or int(user.get("uid", 0)) == 0:
        return None
    script = Path(which(spec["argv"][0], spec["env"]))
    if script.name not in POD_PROGRAMS or not (script.parent / "python").exists():
        return None
    return script


class _Server:
    """One warm_flower.py process: Flower `venv`'s python, imported with `key`'s environment, listening at a socket
    in a directory of its own under /run (which containers see), beside its shims."""

    def __init__(self, venv: Path, key: tuple[tuple[str, str], ...]):
        remove_stale()
        self.venv = venv
        self.dir = Path(f"{RUN_PREFIX}{secrets.token_hex(4)}")
        self.dir.mkdir(mode=0o755)
        os.chmod(self.dir, 0o755)
        self.address = str(self.dir / "socket")
        scripts = [venv / "bin" / p for p in WARM_PROGRAMS if (venv / "bin" / p).exists()]
        self.shims = {s.name: self._shim(s) for s in scripts if s.name in SPAWNED_PROGRAMS}
        self.log = self.dir / "log"  # removed with the rest at the end; a start that fails quotes it
        keyspec = {"names": IMPORT_ENV, "prefixes": IMPORT_ENV_PREFIXES, "key": [list(kv) for kv in key]}
        env = {"PATH": f"{venv / 'bin'}:/usr/sbin:/usr/bin:/sbin:/bin", **dict(key)}
        with open(self.log, "wb") as log:
            # No -I: Python's start reads this environment (the key's: the container's), as the program's would.
            self.proc = subprocess.Popen(
                [str(venv / "bin" / "python"), str(WARM_FLOWER), self.address, json.dumps(keyspec)]
                + [str(s) for s in scripts],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log,
                env=env,
            )
        (self.dir / "pid").write_text(str(self.proc.pid))
        assert self.proc.stdout is not None
        ready = select.select([self.proc.stdout], [], [], SERVER_START_SECONDS)[0]
        line = self.proc.stdout.readline() if ready else b""
        if line.strip() != b"ready":
            log_tail = self.tail()
            self.stop()
            raise HarnessError(f"warm Flower ({venv}) did not start: {log_tail}")

    def tail(self) -> str:
        try:
            return self.log.read_text(errors="replace")[-2000:]
        except OSError:
            return ""

    def calls(self) -> list[str]:
        """Its log's call lines (warm_flower.py writes one a call: `KIND SCRIPT: forked` or `...: refused: WHY`)."""
        try:
            lines = self.log.read_text(errors="replace").splitlines()
        except OSError:
            return []
        return [line for line in lines if line.startswith(("pod ", "join ", "None "))]

    def _shim(self, script: Path) -> Path:
        """warm_shim.py for `script`: its interpreter line, the server's address and the script's entry point."""
        text = WARM_SHIM.read_text()
        text = text.replace('ADDRESS = ""', f"ADDRESS = {self.address!r}", 1)
        text = text.replace('TARGET = ""', f"TARGET = {console_target(script)!r}", 1)
        shim = self.dir / script.name
        shim.write_text(script.read_text().splitlines()[0] + "\n" + text)
        os.chmod(shim, 0o755)
        return shim

    def overlays(self, venv: Path) -> list[dict[str, str]]:
        return [{"source": str(shim), "target": str(venv / "bin" / name)} for name, shim in self.shims.items()]

    def stop(self) -> None:
        with contextlib.suppress(OSError):
            if self.proc.stdin is not None:
                self.proc.stdin.close()  # no new containers; running ones keep their own processes
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=10)
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


RUN_PREFIX = "/run/fe2e-warm-"


def remove_stale() -> None:
    """A server's directory left by a run killed with SIGKILL (its atexit never ran): removed when the server it
    names (its `pid` file) is gone. Another run's live server keeps its own."""
    for d in Path("/run").glob(Path(RUN_PREFIX).name + "*"):
        try:
            pid = int((d / "pid").read_text())
            os.kill(pid, 0)
        except ProcessLookupError:
            shutil.rmtree(d, ignore_errors=True)
        except (OSError, ValueError):  # no pid yet (a server starting beside it) or not ours to judge
            continue


_servers: dict[tuple[Any, ...], _Server] = {}
_servers_lock = threading.Lock()
_starting: dict[tuple[Any, ...], threading.Lock] = {}  # one start per key; other keys' containers go on meanwhile


def _server(venv: Path, key: tuple[tuple[str, str], ...]) -> _Server:
    with _servers_lock:
        start = _starting.setdefault((venv, key), threading.Lock())
    with start:
        with _servers_lock:
            server = _servers.get((venv, key))
        if server is None:
            server = _Server(venv, key)
            with _servers_lock:
                _servers[(venv, key)] = server
        elif server.proc.poll() is not None:
            # Never replaced: running containers' shims point at it, and would quietly run cold. Every start of
            # this key fails from here on, naming why.
            raise HarnessError(f"warm Flower {server.address} exited {server.proc.returncode}: {server.tail()}")
        return server


def servers() -> list[_Server]:
    with _servers_lock:
        return list(_servers.values())


@atexit.register
def stop_servers() -> None:
    with _servers_lock:
        for server in _servers.values():
            server.stop()
        _servers.clear()


def prepare(spec_file: Path) -> Optional[Path]:
    """In a warm cluster, before a container of a Flower image starts: its launch spec gets the shims over its
    venv's scripts (podinit binds them; their server started if it is not yet). The script its own program
    is, if it starts warm too (warm_script)."""
    spec = json.loads(spec_file.read_text())
    venv = Path((spec.get("image") or ["/none"])[0])  # a Flower image's paths: its venv first (pods.py)
    if not (venv / "bin" / "python").exists() or not (venv / "bin" / "flwr-clientapp").exists():
        return None  # not a Flower image (nginx's)
    spec["overlays"] = _server(venv, import_key(spec["env"])).overlays(venv)
    spec_file.write_text(json.dumps(spec, indent=1))
    return warm_script(spec)


class WarmProcess:
    """A warm container start, waited on as a Popen: `pid` is the container's PID 1 (the program itself, there is
    no `unshare` between), `wait`/`poll`/`returncode` its exit as Popen reports it (-N for signal N), `kill` has
    it killed (its connection closed)."""

    def __init__(self, script: Path, spec_file: Path, netns: str, nice: int, log: IO[bytes]):
        spec = json.loads(spec_file.read_text())
        server = _server(script.parent.parent, import_key(spec["env"]))
        self.returncode: Optional[int] = None
        self._done = threading.Event()
        self.argv = [str(script.parent / "python"), str(script), *spec["argv"][1:]]  # its cmdline, cold
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self._sock.connect(server.address)
        request = {"kind": "pod", "spec": str(spec_file), "netns": netns, "nice": nice, "script": str(script)}
        with open(os.devnull, "rb") as devnull:
            socket.send_fds(self._sock, [json.dumps(request).encode()], [devnull.fileno(), log.fileno(), log.fileno()])
        self._sock.settimeout(ANSWER_SECONDS)
        try:
            reply = self._recv()
        except (OSError, ValueError) as exc:  # closed unanswered: the server's child kills what it forked, unrun
            reply = {"error": f"no answer within {ANSWER_SECONDS:.0f} s: {exc}"}
        self._sock.settimeout(None)
        if "pid" not in reply:
            self._sock.close()
            raise HarnessError(f"warm start of {script.name} failed: {reply.get('error') or reply.get('refused')}")
        self.pid: int = reply["pid"]
        threading.Thread(target=self._wait_rc, name=f"warm-{self.pid}", daemon=True).start()

    def _recv(self) -> dict[str, Any]:
        msg = self._sock.recv(4096)
        return json.loads(msg) if msg else {}

    def _wait_rc(self) -> None:
        try:
            reply = self._recv()
        except OSError:
            reply = {}
        self.returncode = int(reply.get("rc", -9))  # its server's child went away: as killed
        self._sock.close()
        self._done.set()

    def wait(self, timeout: Optional[float] = None) -> int:
        if not self._done.wait(timeout):
            raise subprocess.TimeoutExpired(self.argv, timeout or 0)
        assert self.returncode is not None
        return self.returncode

    def poll(self) -> Optional[int]:
        return self.returncode if self._done.is_set() else None

    def kill(self) -> None:
        with contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_WR)
