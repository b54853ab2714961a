"""Containers and probes, as the kubelet runs them: each container supervised (started,
restarted with back-off when it exits, its log kept across incarnations), its liveness
and readiness probes sent from the node's network namespace by prober.py."""

from __future__ import annotations

import contextlib
import json
import os
import resource
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

from tests.e2e.harness.host import PROBER, HarnessError, children, kill
from tests.support.kube import MissingReference

if TYPE_CHECKING:
    from tests.e2e.harness.pods import Pod

BACKOFF_START = 1.0
BACKOFF_CAP = 8.0
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


class Container:
    """One container of a pod, supervised: started, probed, restarted with back-off."""

    def __init__(self, pod: Pod, spec: dict[str, Any], init: bool = False):
        self.pod = pod
        self.spec = spec
        self.init = init  # an init container: done once it exits 0
        # The pod's restartPolicy: Always (the default) restarts a container whatever its
        # exit; OnFailure only after a failure; Never not at all (a Job's pods).
        self.restart_policy = pod.spec.get("restartPolicy", "Always")
        if self.restart_policy not in ("Always", "OnFailure", "Never"):
            raise HarnessError(f"{pod.name}: restartPolicy {self.restart_policy} is not a Kubernetes policy")
        self.succeeded = threading.Event()  # exited 0 and will not run again
        self.finished = threading.Event()  # exited and will not run again (see exit_codes[-1])
        self.name = spec["name"]
        self.log_path = pod.cluster.logdir / f"{pod.name}_{self.name}.log"
        self.restarts = 0
        self.exit_codes: list[int] = []
        self.proc: Optional[subprocess.Popen] = None
        self.pid1: Optional[int] = None
        self.started_at = 0.0
        self.incarnation = 0
        self.ready = False
        self.readiness = ProbeState()
        self.liveness = ProbeState()
        self.startup = ProbeState()
        # Set once this incarnation's startupProbe succeeded (at once when it has none):
        # as the kubelet does, liveness and readiness probes only start then.
        self.started = threading.Event()
        self.liveness_kills = 0
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread: Optional[threading.Thread] = None

    # -- lifecycle
    def start(self) -> None:
        # No core files from the SIGABRT of _probe_kill: containers inherit this process's limit.
        resource.setrlimit(resource.RLIMIT_CORE, (0, resource.getrlimit(resource.RLIMIT_CORE)[1]))
        self._thread = threading.Thread(target=self._supervise, name=f"{self.pod.name}/{self.name}", daemon=True)
        self._thread.start()

    def _supervise(self) -> None:
        backoff = BACKOFF_START
        while not self._stop.is_set():
            try:
                argv, spec_file = self.pod.container_launch(self)
            except (HarnessError, MissingReference) as exc:  # CreateContainerConfigError
                with open(self.log_path, "a") as log:
                    log.write(f"=== cannot start: {exc}\n")
                self._stop.wait(backoff)
                backoff = min(backoff * 2, BACKOFF_CAP)
                continue
            with self._lock:
                if self._stop.is_set():
                    return
                self.incarnation += 1
                incarnation = self.incarnation
                with open(self.log_path, "ab") as log:
                    log.write(f"=== start #{incarnation} at {time.strftime('%H:%M:%S')}\n".encode())
                    log.flush()
                    self.proc = subprocess.Popen(
                        argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True
                    )
                self.started_at = time.monotonic()
                self.readiness, self.liveness, self.startup = ProbeState(), ProbeState(), ProbeState()
                self.started = threading.Event()
                if "startupProbe" not in self.spec:
                    self.started.set()
                self.ready = False
            self.pid1 = self._find_pid1(self.proc.pid)
            probers = [
                threading.Thread(target=self._probe_loop, args=(kind, incarnation), daemon=True)
                for kind in ("startupProbe", "readinessProbe", "livenessProbe")
                if kind in self.spec
            ]
            for t in probers:
                t.start()
            code = self.proc.wait()
            ran = time.monotonic() - self.started_at
            with self._lock:
                self.ready = False
                self.pid1 = None
                self.exit_codes.append(code)
            with open(self.log_path, "ab") as log:
                log.write(f"=== exited {code} after {ran:.1f}s\n".encode())
            if self._stop.is_set():
                return
            if code == 0 and (self.init or self.restart_policy != "Always"):
                self.succeeded.set()
                self.finished.set()
                return
            if self.restart_policy == "Never":  # the pod has failed
                self.finished.set()
                return
            self.restarts += 1
            if ran >= 2 * BACKOFF_CAP:
                backoff = BACKOFF_START
            self._stop.wait(backoff)
            backoff = min(backoff * 2, BACKOFF_CAP)

    @staticmethod
    def _find_pid1(unshare_pid: int) -> Optional[int]:
        deadline = time.monotonic() + 2
        while time.monotonic() < deadline:
            kids = children(unshare_pid)
            if kids:
                return kids[0]
            time.sleep(0.01)
        return None

    def kill(self) -> None:
        """The container's process dies (SIGKILL to its PID 1: its PID namespace goes)."""
        with self._lock:
            proc, pid1 = self.proc, self.pid1
        kill(pid1)
        if proc is not None:
            # Popen's own kill: a no-op once the process was reaped, whose PID another process may
            # have by now (pid_max is 32768 here, and an e2e run starts tens of thousands).
            with contextlib.suppress(ProcessLookupError):
                proc.kill()

    def terminate(self, grace: float) -> None:
        """The kubelet stopping a container of a deleted pod: SIGTERM to its PID 1 (which
        gets it only if it handles it, as in a container), SIGKILL if it still runs after
        `grace` seconds (terminationGracePeriodSeconds); it is not restarted."""
        self._stop.set()
        with self._lock:
            proc, pid1 = self.proc, self.pid1
        if proc is not None and pid1:
            kill(pid1, signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=grace)
        self.stop()

    def stop(self) -> None:
        self._stop.set()
        self.kill()
        if self.proc is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=10)
        if self._thread is not None:
            self._thread.join(timeout=10)

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    # -- probes
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
        raise HarnessError(
            f"{self.pod.name}/{self.name}: only grpc, httpGet and tcpSocket probes are emulated: {probe}"
        )

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
        ports = sorted(
            {self._probe_request(self.spec[k])["port"] for k in ("livenessProbe", "startupProbe") if k in self.spec}
        )
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

    def is_ready(self) -> bool:
        if not self.running:
            return False
        if "readinessProbe" not in self.spec:
            return True
        return self.ready

    def log(self, tail: int = 60) -> str:
        try:
            lines = self.log_path.read_text(errors="replace").splitlines()
        except OSError:
            return ""
        return "\n".join(lines[-tail:])

    def describe(self) -> str:
        state = (
            "running"
            if self.running
            else "completed"
            if self.succeeded.is_set()
            else "failed"
            if self.finished.is_set()
            else "waiting"
        )
        probe = f", readiness: {self.readiness.last}" if "readinessProbe" in self.spec else ""
        return (
            f"{self.pod.name}/{self.name}: {state}, ready={self.is_ready()}, restarts={self.restarts}, "
            f"exit codes={self.exit_codes[-5:]}{probe}"
        )
