"""Real processes for tests that start Flower: free local ports, processes in their own
sessions that are ended with their process groups and descendants, commands bounded by
a timeout, and the environment a Flower program finds in its image."""

from __future__ import annotations

import contextlib
import os
import random
import signal
import socket
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from tests.support.flower import venv_bin

CLI_TIMEOUT = 60


# Ports for the servers the tests start (nginx, Flower, stand-ins) that cannot bind port 0 and report it.
# They come from BELOW the kernel's ephemeral range (net.ipv4.ip_local_port_range, 32768-60999 by
# default): a bind to port 0 and every outgoing connection's source port are drawn from that range, so a
# port found free there and released can be taken by any connection before the server binds it (CI of
# e169bcc: a port of test_fleet_proxy.py taken while the e2e harness probed its pods). Below the range,
# only an explicit bind takes a port. Each process starts at a random place and remembers what it handed
# out, so the pytest processes `make -j` runs side by side (e2e, live, rest) do not pick the same ones.
_LOWEST_PORT = 10000
_handed_out: set[int] = set()
_pick = random.Random()


def _ephemeral_low() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768  # Linux's default


def _bindable(port: int) -> bool:
    with socket.socket() as s:  # no SO_REUSEADDR: strictest, any holder on any address refuses
        try:
            s.bind(("", port))
        except OSError:
            return False
    return True


def free_port() -> int:
    """A local TCP port nothing holds, outside the ephemeral range, never the same one twice in a process."""
    low, high = _LOWEST_PORT, _ephemeral_low()
    if high - low < 1000:  # a host whose ephemeral range starts low: fall back to the kernel's choice
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            return int(s.getsockname()[1])
    start = _pick.randrange(low, high)
    for offset in range(high - low):
        port = low + (start - low + offset) % (high - low)
        if port not in _handed_out and _bindable(port):
            _handed_out.add(port)
            return port
    raise OSError(f"no free port in {low}-{high - 1}")


class PortMap(dict[int, int]):
    """Container port -> a free local port, picked on first use."""

    def __missing__(self, port: int) -> int:
        self[port] = free_port()
        return self[port]


def descendants(pid: int) -> list[int]:
    """Every process below `pid` (children, their children, ...), read off /proc."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry))
    out, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def send_signal(pid: int, sig: int, group: bool = False) -> None:
    """Signal a process (or its process group), if it is still there."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig) if group else os.kill(pid, sig)


@dataclass
class Processes:
    """Processes we start, each in its own session; stop() ends them, their process
    groups and their descendants (Flower starts its SuperExec in a new session)."""

    workdir: Path
    procs: list[tuple[str, subprocess.Popen, Path]] = field(default_factory=list)

    def start(self, name: str, argv: list[str], env: dict[str, str]) -> subprocess.Popen:
        log = self.workdir / f"{name}.log"
        with open(log, "wb") as out:
            proc = subprocess.Popen(
                argv,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=env,
                cwd=self.workdir,
                start_new_session=True,
            )
        self.procs.append((name, proc, log))
        return proc

    def log(self, name: str) -> str:
        return next(log for n, _, log in self.procs if n == name).read_text(errors="replace")

    def stop(self) -> None:
        for _, proc, _ in reversed(self.procs):
            family = descendants(proc.pid)
            send_signal(proc.pid, signal.SIGTERM, group=True)
            for pid in family:
                send_signal(pid, signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=5)
            send_signal(proc.pid, signal.SIGKILL, group=True)
            for pid in family:
                send_signal(pid, signal.SIGKILL)
            proc.wait(timeout=5)


def run_bounded(
    argv: list[str], env: dict[str, str], timeout: float = CLI_TIMEOUT, cwd: Optional[Path] = None
) -> subprocess.CompletedProcess:
    """subprocess.run with a timeout that kills the whole process group."""
    proc = subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=cwd, start_new_session=True
    )
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        send_signal(proc.pid, signal.SIGKILL, group=True)
        out, err = proc.communicate()
        raise AssertionError(f"{argv} timed out after {timeout}s:\n{out}\n{err}") from None
    finally:
        send_signal(proc.pid, signal.SIGKILL, group=True)
    return subprocess.CompletedProcess(argv, proc.returncode, out, err)


def process_env(version: str, home: Path) -> dict[str, str]:
    """The environment of a Flower program of `version` with HOME `home`, as its image
    would give it: the Flower venv first on PATH, no telemetry, no colours."""
    home.mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FLWR_", "VIRTUAL_ENV", "PYTHON"))}
    # Flower starts flower-superexec (and the CLI) from PATH, as in the image.
    env.update(
        PATH=f"{venv_bin(version)}{os.pathsep}{os.environ.get('PATH', '')}",
        HOME=str(home),
        FLWR_HOME=str(home / ".flwr"),
        FLWR_TELEMETRY_ENABLED="0",
        NO_COLOR="1",
    )
    return env
