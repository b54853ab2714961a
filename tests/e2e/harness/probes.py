"""Probes, as the kubelet sends them: prober.py in the node's network namespace (Prober, one
per cluster; exec probes run in the container itself: exec_probes.py), and each container's
startup, readiness and liveness probe loops with what follows from them (Ready, a kill after
failureThreshold failures, with the stacks and the network state written to the container's
log first). The loops are a part of containers.Container (ContainerProbes, a mixin), kept
apart from its supervision."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.e2e.harness.exec_probes import run_exec_probe
from tests.e2e.harness.host import PROBER, HarnessError, kill

# A TCP connect to host:port... with a 2 s timeout, one line each: ok, or the error (timeout: dropped).
DIAL = """
import socket, sys
for port in sys.argv[2:]:
    s = socket.socket()
    s.settimeout(2)
    try:
        s.connect((sys.argv[1], int(port)))
        print(port, "ok")
    except OSError as exc:
        print(port, type(exc).__name__, exc)
    finally:
        s.close()
"""
CONNTRACK = "/proc/net/nf_conntrack"
# How long a probe-killed process may take to write its threads' stacks (faulthandler) before SIGKILL.
STACK_DUMP_SECONDS = 3.0


class Prober:
    """prober.py in the node's network namespace; probe() is thread-safe."""

    def __init__(self, netns: str, python: Path, log: Path):
        self._log = open(log, "ab")  # noqa: SIM115  (held for the prober's lifetime, closed in close())
        self.proc = subprocess.Popen(
            [
                "ip",
                "netns",
                "exec",
                netns,
                "unshare",
                "--pid",
                "--fork",
                "--kill-child",
                "--mount-proc",
                str(python),
                str(PROBER),
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log,
            text=True,
            start_new_session=True,
        )
        self._lock = threading.Lock()
        self._next = 1
        self._waiting: dict[int, tuple[threading.Event, list]] = {}
        first = self.proc.stdout.readline()
        if not first:
            raise HarnessError(f"prober did not start: see {log}")
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            msg = json.loads(line)
            with self._lock:
                waiter = self._waiting.pop(msg["id"], None)
            if waiter:
                waiter[1].append(msg)
                waiter[0].set()

    def probe(self, request: dict[str, Any]) -> tuple[bool, str]:
        event, box = threading.Event(), []
        with self._lock:
            rid = self._next
            self._next += 1
            self._waiting[rid] = (event, box)
            try:
                self.proc.stdin.write(json.dumps({**request, "id": rid}) + "\n")
                self.proc.stdin.flush()
            except (OSError, ValueError):
                self._waiting.pop(rid, None)
                return False, "prober gone"
        if not event.wait(request["timeout"] + 5):
            with self._lock:
                self._waiting.pop(rid, None)
            return False, "prober did not answer"
        return box[0]["ok"], box[0]["detail"]

    def close(self) -> None:
        kill(self.proc.pid)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=5)
        self._log.close()


@dataclass
class ProbeState:
    ok_streak: int = 0
    fail_streak: int = 0
    last: str = ""


class ContainerProbes:
    """containers.Container's probes: its probe loops and the kill they may end in. Uses the
    container's spec, pod, name, log_path, proc, pid1, incarnation, running, started, ready,
    the three ProbeStates, liveness_kills, _stop, _lock and kill()."""

    def _probe_request(self, probe: dict[str, Any]) -> dict[str, Any]:
        timeout = probe.get("timeoutSeconds", 1)
        if "grpc" in probe:
            return {
                "type": "grpc",
                "host": self.pod.ip,
                "port": int(probe["grpc"]["port"]),
                "service": probe["grpc"].get("service", ""),
                "timeout": timeout,
            }
        if "httpGet" in probe:
            get = probe["httpGet"]
            return {
                "type": "http",
                "host": get.get("host") or self.pod.ip,
                "port": self._port(get["port"]),
                "path": get.get("path", "/"),
                "scheme": get.get("scheme", "HTTP"),
                "timeout": timeout,
            }
        if "tcpSocket" in probe:
            tcp = probe["tcpSocket"]
            return {
                "type": "tcp",
                "host": tcp.get("host") or self.pod.ip,
                "port": self._port(tcp["port"]),
                "timeout": timeout,
            }
        if "exec" in probe:
            return {"type": "exec", "command": list(probe["exec"]["command"]), "timeout": timeout}
        raise HarnessError(
            f"{self.pod.name}/{self.name}: only grpc, httpGet, tcpSocket and exec probes are emulated: {probe}"
        )

    def _exec(self, request: dict[str, Any], incarnation: int) -> tuple[bool, str]:
        """An exec probe in incarnation `incarnation` of this container (exec_probes.py); never in a later one (whose
        PID 1 the loop of a restarted one could otherwise read while it is set up), none while it is not running."""
        with self._lock:
            pid1, launch_file, current = self.pid1, self.launch_file, self.incarnation
        if current != incarnation or not pid1 or launch_file is None or not self.running:
            return False, "container not running"
        launch = json.loads(launch_file.read_text())
        return run_exec_probe(pid1, launch, request["command"], request["timeout"], self.pod.cluster.nice)

    def _port(self, port: Any) -> int:
        if isinstance(port, int) or str(port).isdigit():
            return int(port)
        for p in self.spec.get("ports", []):
            if p.get("name") == port:
                return int(p["containerPort"])
        raise HarnessError(f"{self.pod.name}/{self.name}: probe names port {port!r}, which the container lacks")

    def _probe_loop(self, kind: str, incarnation: int) -> None:
        probe = self.spec[kind]
        period = probe.get("periodSeconds", 10)
        fail_max = probe.get("failureThreshold", 3)
        ok_min = probe.get("successThreshold", 1)
        request = self._probe_request(probe)
        state = {"readinessProbe": self.readiness, "livenessProbe": self.liveness, "startupProbe": self.startup}[kind]
        started = self.started
        if kind != "startupProbe":
            while not started.wait(0.5):
                if self._stop.is_set() or self.incarnation != incarnation or not self.running:
                    return
        if self._stop.wait(probe.get("initialDelaySeconds", 0)):
            return
        while not self._stop.is_set() and self.incarnation == incarnation and self.running:
            if request["type"] == "exec":
                ok, detail = self._exec(request, incarnation)
            else:
                ok, detail = self.pod.cluster.prober.probe(request)
            if self.incarnation != incarnation:
                return
            state.last = detail
            if ok:
                state.ok_streak += 1
                state.fail_streak = 0
            else:
                state.fail_streak += 1
                state.ok_streak = 0
            if kind == "startupProbe":
                if ok:
                    started.set()
                    return
                if state.fail_streak >= fail_max:
                    self._probe_kill("startup", fail_max, detail)
                    return
                wait = period
            elif kind == "readinessProbe":
                if ok and state.ok_streak >= ok_min:
                    self.ready = True
                elif not ok and state.fail_streak >= fail_max:
                    self.ready = False
                wait = period if self.ready else min(period, 1.0)
            else:
                if state.fail_streak >= fail_max:
                    self._probe_kill("liveness", fail_max, detail)
                    return
                wait = period
            if self._stop.wait(wait):
                return

    def _probe_kill(self, kind: str, fail_max: int, detail: str) -> None:
        """The kubelet kills a container whose liveness (or startup) probe failed `fail_max` times in a
        row. First, what the kubelet cannot do: SIGABRT, on which the process's faulthandler (enabled
        in every container here, pods.IMAGE_ENV) writes every thread's stack to the log, so a hung
        process says where it hung; SIGKILL follows (at once if the process has already died)."""
        with open(self.log_path, "ab") as log:
            load = "/".join(f"{x:.1f}" for x in os.getloadavg())  # starved, or hung?
            log.write(
                f"=== {kind} probe failed {fail_max}x ({detail}; load {load}): dumping stacks, killing\n".encode()
            )
        self.liveness_kills += 1
        with self._lock:
            proc, pid1 = self.proc, self.pid1
        if proc is not None and pid1:
            kill(pid1, signal.SIGABRT)
            deadline = time.monotonic() + STACK_DUMP_SECONDS
            while proc.returncode is None and time.monotonic() < deadline:
                time.sleep(0.1)
        with contextlib.suppress(Exception):  # diagnostics only: never in the way of the kill
            self._network_state()
        with open(self.log_path, "ab") as log:
            log.write(f"=== killed: {kind} probe failed {fail_max}x ({detail})\n".encode())
        self.kill()

    def _network_state(self) -> None:
        """What the pod's network looked like when its probes failed: a TCP connect from the node to each
        probed port, the pod's sockets, its NetworkPolicy table (is it unreachable, not listening, or up?)."""
        c = self.pod.cluster
        requests = [self._probe_request(self.spec[k]) for k in ("livenessProbe", "startupProbe") if k in self.spec]
        ports = sorted({r["port"] for r in requests if "port" in r})  # an exec probe has none
        checks = [
            ["ip", "-n", self.pod.netns, "-brief", "addr", "show"],
            ["ip", "-n", c.node_ns, "route", "get", self.pod.ip],
            ["ip", "-n", c.node_ns, "neigh", "show", self.pod.ip],
            ["ip", "netns", "exec", c.node_ns, c.netpol.nft, "list", "ruleset"],
            ["ip", "netns", "exec", self.pod.netns, "ss", "-tln"],
            ["ip", "netns", "exec", self.pod.netns, c.netpol.nft, "list", "chain", "inet", "k8s-netpol", "ingress"],
            ["ip", "netns", "exec", c.node_ns, sys.executable, "-c", DIAL, self.pod.ip, *map(str, ports)],
            # The pod's connection tracking for those ports (its egress passes replies only as `established`).
            ["ip", "netns", "exec", self.pod.netns, "grep", "-E", "|".join(f"port={p} " for p in ports), CONNTRACK],
            # The pod's side of the path back to the node: its neighbour cache against the bridge's
            # address and MAC now, every TCP socket (SYN-RECV: the SYN arrived), its drop counters.
            ["ip", "-n", self.pod.netns, "neigh", "show"],
            ["ip", "-n", c.node_ns, "-brief", "link", "show", c.bridge],
            ["ip", "netns", "exec", self.pod.netns, "ss", "-tan"],
            [
                "ip",
                "netns",
                "exec",
                self.pod.netns,
                "nstat",
                "-az",
                "TcpExtListen*",
                "TcpExtTCPReqQFullDrop",
                "IpExtInNoRoutes",
            ],
            ["ip", "netns", "exec", self.pod.netns, c.netpol.nft, "list", "chain", "inet", "k8s-netpol", "egress"],
        ]
        with open(self.log_path, "ab") as log:
            for argv in checks:
                res = subprocess.run(argv, capture_output=True, text=True, timeout=10)
                shown = " ".join(a for a in argv if a != DIAL)
                log.write(f"=== $ {shown}\n{res.stdout}{res.stderr}".encode())
