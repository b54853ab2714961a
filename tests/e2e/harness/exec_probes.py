"""Exec probes, as the kubelet has the container runtime run them (CRI ExecSync, runc exec): the probe's
command runs inside the running container, in its namespaces (mount: its volumes, read-only root and /proc;
network, PID and UTS), as its user (uid, gid, groups, no_new_privs, no capabilities), with its environment and
working directory; exit code 0 is a success, anything else a failure. A command that has not exited within
timeoutSeconds is a failure too, and is killed, as the runtime kills a timed-out exec (Kubernetes enforces exec
probe timeouts since 1.20).

The container's identity is what podinit.py was given to start it (the launch spec pods.py wrote), so an exec
runs as the container's own process does, not as the harness."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from tests.e2e.podinit import privileges

# The kubelet keeps at most 10 KiB of a probe's output (probe/exec: maxReadLength).
OUTPUT_LIMIT = 10 * 1024
# Bounds the reaping of the process that entered the namespaces, then the wait for a killed group to be gone
# (_wait_group_gone): SIGKILL takes effect when a process next runs, which under load is not at once.
REAP_SECONDS = 10.0


def _tool(name: str) -> str:
    """A host tool by absolute path: the exec's environment is the container's, whose PATH is the image's."""
    found = shutil.which(name)
    if found is None:
        raise FileNotFoundError(f"`{name}` is not on PATH: the e2e harness runs exec probes with it")
    return found


def exec_argv(pid1: int, launch: dict[str, Any], command: list[str], nice: int = 0) -> list[str]:
    """`command` in the namespaces of the container whose PID 1 (as the host sees it) is `pid1`, as its user.
    nsenter forks into the container's PID namespace (the exec dies with the container, as in one); coreutils'
    `env --chdir` changes to the working dir after entering the mount namespace, so the path is the
    container's view (a volume mounted there included); setpriv (podinit's prefix) takes on the user."""
    argv = [_tool("nsenter"), f"--target={pid1}", "--mount", "--uts", "--net", "--pid", "--"]
    argv += [_tool("env"), f"--chdir={launch['cwd']}"]
    if launch.get("user") is not None:
        argv += privileges(launch["user"], launch["setpriv"])
    argv += command
    if nice:  # the container's processes run at the cluster's niceness: so does what runs in it
        argv = [_tool("nice"), "-n", str(nice), *argv]
    return argv


def run_exec_probe(
    pid1: int, launch: dict[str, Any], command: list[str], timeout: float, nice: int = 0
) -> tuple[bool, str]:
    """(success, detail) of one exec probe: exit 0 within `timeout` seconds. The output goes to a file, not a
    pipe: a process the command left behind could hold a pipe open, and reading it would wait for that."""
    with tempfile.TemporaryFile() as out:
        proc = subprocess.Popen(
            exec_argv(pid1, launch, command, nice),
            env=launch["env"],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group: a timeout kills everything it started
        )
        try:
            code = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=REAP_SECONDS)
            left = _wait_group_gone(proc.pid, REAP_SECONDS)
            still = f" (processes {left} still alive after {REAP_SECONDS:.0f} s)" if left else ""
            return False, f"command timed out after {timeout}s, killed{still}"
        out.seek(0)
        text = out.read(OUTPUT_LIMIT).decode(errors="replace").strip()
    last = text.splitlines()[-1] if text else ""
    return code == 0, f"exit {code}" + (f": {last}" if code != 0 and last else "")


def _wait_group_gone(pgid: int, bound: float) -> list[int]:
    """Until no live process of group `pgid` is left (a zombie waiting for the container's PID 1 to reap it has
    run its last instruction): SIGKILL is queued at once but acted on when the process next runs, which on a
    loaded machine comes after killpg returns (CI once found the killed command still in /proc). `bound` only
    guards against a hang: a process SIGKILLed stays, if at all, in an uninterruptible wait. Returns those left."""
    deadline = time.monotonic() + bound
    while (left := _live_members(pgid)) and time.monotonic() < deadline:
        time.sleep(0.05)
    return left


def _live_members(pgid: int) -> list[int]:
    members = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            # /proc/PID/stat: "pid (comm) state ppid pgrp ...": comm may hold spaces and parentheses.
            state, _ppid, pgrp = stat.read_text().rsplit(")", 1)[1].split()[:3]
        except (OSError, ValueError):
            continue
        if int(pgrp) == pgid and state != "Z":
            members.append(int(stat.parent.name))
    return members
