"""Processes in a cluster: which process runs in which container (their PID namespaces
tell), sampled for the programs they run and the memory they hold; and a command run as
root in a client namespace, bounded by a timeout (exec_in: the flwr CLI's, a probe's). A
part of cluster.Cluster (ClusterProcesses, a mixin), kept apart from its API server and
controllers."""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import subprocess
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Optional

from tests.e2e.harness.host import NotReady, children, kill, ns_exec
from tests.e2e.harness.volumes import MOUNTPOINTS
from tests.e2e.harness.warm import WarmProcess


class ClusterProcesses:
    """cluster.Cluster's processes. Uses the cluster's pods and workdir."""

    # -- what runs where
    def processes(self) -> list[tuple[str, str, int, list[str]]]:
        """(pod, container, host pid, argv) of every process in a container: the
        container's PID namespace tells which container a process belongs to."""
        owners: dict[str, tuple[str, str]] = {}
        warm: dict[int, list[str]] = {}  # a warm start's PID 1: the command line it would have had (warm.py)
        for p in self.pods.values():
            for c in [*p.init_containers, *p.containers]:
                pid1, proc = c.pid1, c.proc
                if pid1:
                    with contextlib.suppress(OSError):
                        owners[os.readlink(f"/proc/{pid1}/ns/pid")] = (p.name, c.name)
                    if isinstance(proc, WarmProcess) and proc.pid == pid1:
                        warm[pid1] = list(proc.argv)
        out = []
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                owner = owners.get(os.readlink(f"/proc/{entry}/ns/pid"))
                if owner is None:
                    continue
                argv = (
                    warm.get(int(entry))
                    or (Path(f"/proc/{entry}/cmdline").read_bytes().decode(errors="replace").split("\0")[:-1])
                )
            except OSError:
                continue
            out.append((owner[0], owner[1], int(entry), argv))
        return out

    def sample_programs(
        self,
        names: Iterable[str],
        stop: threading.Event,
        seen: set,
        every: float = 0.2,
        peak_rss: Optional[dict[tuple[str, str], int]] = None,
    ) -> None:
        """Until `stop`: add (pod, container, program) to `seen` for every running process
        whose argv names one of `names` (a program or a Python script of that name); and
        keep in `peak_rss` the most resident memory each container's processes held
        together at one sample, in bytes. The sum of RSS counts shared pages once per
        process, so it is above what the kubelet's cgroup would charge: a fair check of a
        memory limit, though not its enforcement (the harness has no cgroups)."""
        names = set(names)
        page = os.sysconf("SC_PAGE_SIZE")
        while not stop.is_set():
            held: dict[tuple[str, str], int] = {}
            for pod, container, pid, argv in self.processes():
                for arg in argv[:2]:
                    if os.path.basename(arg) in names:
                        seen.add((pod, container, os.path.basename(arg)))
                        break
                if peak_rss is not None:
                    with contextlib.suppress(OSError, ValueError, IndexError):
                        resident = int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * page
                        held[(pod, container)] = held.get((pod, container), 0) + resident
            if peak_rss is not None:
                for key, total in held.items():
                    peak_rss[key] = max(peak_rss.get(key, 0), total)
            stop.wait(every)

    # -- a command in a client namespace
    def exec_in(
        self,
        netns: str,
        argv: list[str],
        *,
        env: dict[str, str],
        mounts: list[dict[str, Any]],
        cwd: str,
        timeout: float,
        name: str = "exec",
    ) -> subprocess.CompletedProcess:
        """Run `argv` as root in `netns` with `mounts`, bounded by `timeout` (then
        everything it started is killed)."""
        spec_file = self._root_spec(argv, env=env, mounts=mounts, cwd=cwd, name=name)
        proc = subprocess.Popen(
            ns_exec(netns, spec_file),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            text=True,
            start_new_session=True,
        )
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            for kid in children(proc.pid):
                kill(kid)
            kill(proc.pid)
            out, err = proc.communicate(timeout=10)
            raise NotReady(f"{' '.join(argv)} did not finish within {timeout:.0f}s\n{out}\n{err}") from None
        finally:
            spec_file.unlink(missing_ok=True)
        return subprocess.CompletedProcess(argv, proc.returncode, out, err)

    def start_in(self, netns: str, argv: list[str], log: Path, **spec: Any) -> subprocess.Popen:
        """Start `argv` as root in `netns` as exec_in would (`spec`: its env, mounts, cwd and name), in the
        background, its output to `log`: a long-lived helper of a client (the CLI user's warm `flwr`); it ends
        with the cluster (close() kills every process of its network namespaces) or when the caller stops it."""
        spec_file = self._root_spec(argv, **spec)
        with log.open("ab") as out:
            return subprocess.Popen(
                ns_exec(netns, spec_file), stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
            )

    def _root_spec(
        self, argv: list[str], *, env: dict[str, str], mounts: list[dict[str, Any]], cwd: str, name: str
    ) -> Path:
        """podinit.py's spec for `argv` run as root with `mounts` (their mount points made first)."""
        for m in mounts:
            MOUNTPOINTS.ensure(m["target"], is_file=Path(m["source"]).is_file())
        spec_file = self.workdir / f"{name}-{secrets.token_hex(3)}.json"
        spec_file.write_text(
            json.dumps(
                {
                    "mounts": mounts,
                    "hostname": name,
                    "readOnlyRoot": False,
                    "user": None,
                    "setpriv": None,
                    "env": env,
                    "argv": argv,
                    "cwd": cwd,
                }
            )
        )
        return spec_file
