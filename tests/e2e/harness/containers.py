"""Containers, as the kubelet runs them: each container supervised (started, restarted
with back-off when it exits, its log kept across incarnations), its liveness and
readiness probes sent from the node's network namespace by prober.py (probes.py)."""

from __future__ import annotations

import contextlib
import resource
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional, Union

from tests.e2e.harness.host import PODINIT, HarnessError, children, kill
from tests.e2e.harness.probes import ContainerProbes, ProbeState
from tests.e2e.harness.warm import WarmProcess, prepare
from tests.support.kube import MissingReference

if TYPE_CHECKING:
    from tests.e2e.harness.pods import Pod

BACKOFF_START = 1.0
BACKOFF_CAP = 8.0
# Bounds the wait for podinit to exec the program (it takes milliseconds: a few mounts, then exec).
EXEC_WAIT = 10.0


class Container(ContainerProbes):
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
        self.proc: Optional[Union[subprocess.Popen, WarmProcess]] = None
        self.pid1: Optional[int] = None
        # The running incarnation's podinit spec (its user, environment, working dir): exec probes take them on.
        self.launch_file: Optional[Path] = None
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
                if self.pod.cluster.nice:
                    argv = ["nice", "-n", str(self.pod.cluster.nice), *argv]
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
                self.launch_file = spec_file
                with open(self.log_path, "ab") as log:
                    log.write(f"=== start #{incarnation} at {time.strftime('%H:%M:%S')}\n".encode())
                    log.flush()
                    self.proc = self._launch(argv, spec_file, log)
                # The autogroup of the container's session: the cold path's own (start_new_session), a warm one's
                # (warm_flower's setsid before its fork); written once the process runs, in both.
                if self.pod.cluster.nice:
                    self._yield_cpu(self.proc.pid, self.pod.cluster.nice)
                self.started_at = time.monotonic()
                self.readiness, self.liveness, self.startup = ProbeState(), ProbeState(), ProbeState()
                self.started = threading.Event()
                if "startupProbe" not in self.spec:
                    self.started.set()
                self.ready = False
            self.pid1 = self.proc.pid if isinstance(self.proc, WarmProcess) else self._find_pid1(self.proc.pid)
            self._wait_exec(self.pid1)
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

    def _launch(self, argv: list[str], spec_file: Path, log: Any) -> Union[subprocess.Popen, WarmProcess]:
        """The container's process: `argv` (the cold path: ip netns exec, unshare, podinit), or, in a warm cluster,
        a fork of a warm Flower for a Flower daemon (warm.py). A warm start that fails is an exit 127 (podinit's
        for a container it cannot start), its reason in the log."""
        cluster = self.pod.cluster
        if cluster.warm:
            try:
                script = prepare(spec_file)
                if script is not None:
                    return WarmProcess(script, spec_file, self.pod.netns, cluster.nice, log)
            except (HarnessError, OSError) as exc:
                log.write(f"=== warm start failed: {exc}\n".encode())
                log.flush()
                argv = ["sh", "-c", "exit 127"]
        return subprocess.Popen(
            argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True
        )

    @staticmethod
    def _yield_cpu(pid: int, nice: int) -> None:
        """The container's session (its own: start_new_session) at `nice`. With the kernel's autogroup
        scheduling on, a session's processes share one group, and groups share the CPU evenly whatever their
        processes' niceness: the `nice` the command runs under counts only within the group, the group's
        own niceness between groups."""
        # No autogroup (CONFIG_SCHED_AUTOGROUP off): the plain `nice` is all it takes.
        with contextlib.suppress(OSError), open(f"/proc/{pid}/autogroup", "w") as f:
            f.write(str(nice))

    @staticmethod
    def _find_pid1(unshare_pid: int) -> Optional[int]:
        deadline = time.monotonic() + 2
        while time.monotonic() < deadline:
            kids = children(unshare_pid)
            if kids:
                return kids[0]
            time.sleep(0.01)
        return None

    @staticmethod
    def _wait_exec(pid1: Optional[int]) -> None:
        """Until podinit, the container's PID 1 at first, has exec'd the program (or died): its mounts are done. The
        runtime reports a container started only then, so its probes start only then: an exec probe before would
        join a mount namespace still being set up, and a file it holds open makes podinit's read-only remount of
        `/` fail (EBUSY)."""
        deadline = time.monotonic() + EXEC_WAIT
        while pid1 and time.monotonic() < deadline:
            try:
                if PODINIT.name.encode() not in Path(f"/proc/{pid1}/cmdline").read_bytes():
                    return
            except OSError:
                return
            time.sleep(0.01)

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
