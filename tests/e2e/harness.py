"""A small kubelet, kube-proxy and cluster DNS on one Linux host, for end-to-end tests:
it runs the pods of rendered manifests as real processes, with real Flower.

What it does, as Kubernetes would:

- **Objects.** `Cluster.apply(manifests)` keeps Secrets, ConfigMaps, Services and
  workloads (StatefulSet, Deployment, DaemonSet) like an API server would.
  `create_pods()` makes the pods a controller would: StatefulSet pod `<sts>-<k>` with
  the labels `apps.kubernetes.io/pod-index` and `statefulset.kubernetes.io/pod-name`,
  hostname `<sts>-<k>` and subdomain `serviceName`; one Deployment pod per replica; one
  DaemonSet pod per emulated node (`node-a`, `node-b`) its required node affinity /
  nodeSelector on `metadata.name` / `kubernetes.io/hostname` admits.
- **Network.** A network namespace `<id>-node` stands for the node: it holds a bridge
  with the first address of a random 10.x.y.0/24 that no host route or address uses, and
  is where probes come from. Each pod gets a network namespace `<id>-<pod>` with `lo`
  and `eth0` (a veth whose peer is on the bridge) and its own address; all of a pod's
  containers share it. Nothing is created in the host's network namespace and no host
  address is used.
- **DNS.** Per pod, `/etc/netns/<netns>/hosts` (bind-mounted over /etc/hosts by
  `ip netns exec`) maps what cluster DNS would answer: a ClusterIP Service's names
  (`svc`, in its own namespace only; `svc.ns`, `svc.ns.svc`, `svc.ns.svc.<domain>`) to
  its single backing pod (the Service's virtual IP; a Service port must equal its
  target port, since no port translation is emulated); a headless Service's names to
  every pod it selects, and `<hostname>.<svc>...` for StatefulSet pods; plus the pod's
  own hostname, as the kubelet writes it. `resolv.conf` points at a closed local port, so
  other names fail at once (there is no network beyond the bridge).
- **Volumes.** Secrets and ConfigMaps (with `items`, `defaultMode`/`mode`, then the
  kubelet's fsGroup ownership: group fsGroup, `| 0440`, read-only mount), emptyDirs (mode
  2777, group fsGroup, fresh for every pod, subPath directories created like the
  kubelet), PVCs of volumeClaimTemplates and persistentVolumeClaim volumes (directories
  `<claim>-<pod>` that outlive pods, group fsGroup, 2775). Each container's mounts
  appear at their mountPaths in a private mount namespace (see podinit.py); mountpoints
  missing on the host (e.g. /etc/flower/ca, /app/.flwr, /var/lib/flower) are created and
  removed again at the end, exactly those.
- **Init containers** run one after the other before the pod's containers, each until
  it exits 0 (restarted with the back-off below otherwise).
- **Containers.** The entrypoint of the image (`flwr/superlink:<v>` ->
  `flower-superlink` of the Flower venv of version `<v>`: the image tag must be that
  version), or `command`; `args` with the kubelet's `$(VAR)` expansion; env from values,
  the downward API (`metadata.name`, `metadata.namespace`, `spec.nodeName`,
  `metadata.labels[...]`, `status.podIP`, ...), Secret/ConfigMap keys and `envFrom`;
  image env `HOME=/app`, `PATH` (venv first), `HOSTNAME`; working dir `/app` (the
  images' WORKDIR) unless `workingDir`; runAsUser/runAsGroup/fsGroup/
  supplementalGroups, runAsNonRoot enforced, allowPrivilegeEscalation=false
  (no_new_privs), capabilities drop ALL (empty bounding set), readOnlyRootFilesystem
  (`/` remounted read-only). Each container is PID 1 of its own PID namespace, so when
  it dies everything it started dies with it, as in a container.
- **Restarts.** restartPolicy Always: a container that exits is started again after a
  back-off of 1 s, doubling, capped at 8 s (the kubelet: 10 s ... 5 min), reset once it
  ran twice the cap. Logs of every container incarnation go to one file per container.
- **Probes.** From the node namespace to the pod IP (prober.py): gRPC health (SERVING),
  HTTP(S) GET (200-399, certificate not verified), with initialDelaySeconds,
  timeoutSeconds, failureThreshold, successThreshold. Liveness every periodSeconds;
  `failureThreshold` failures in a row kill the container (it restarts). Readiness
  every periodSeconds once ready; while not ready, every min(periodSeconds, 1 s): the
  kubelet probes again at once on pod status updates, and this keeps tests fast. A pod
  is Ready when every container is running and its readiness probe (if any) passes.
- **Cleanup.** Every process runs in one of our network namespaces; `close()` kills
  them (PID namespaces first, then whatever `ip netns pids` still finds), deletes the
  namespaces (their veths and the bridge go with them), the /etc/netns entries, the
  work directory and the mountpoints it created. `close()` runs from `try/finally` in the
  fixtures, at interpreter exit and on SIGTERM/SIGHUP; every wait is bounded.

What it does not emulate: scheduling, resource requests/limits, seccomp, NetworkPolicies
(all pods can reach each other), Service virtual IPs and port translation (a ClusterIP
name resolves to its backing pod's address, which stays the same when that pod is
recreated, as a virtual IP would), readiness-gated endpoints, startup probes, exec
probes, sidecar (restartPolicy Always) init containers, Secret updates after a pod started, image pulls, PodDisruptionBudgets,
ServiceAccounts and RBAC.
"""

from __future__ import annotations

import atexit
import copy
import hashlib
import ipaddress
import json
import os
import random
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Optional

from tests.support.kube import MissingReference, container_command, container_env

HERE = Path(__file__).resolve().parent
PODINIT = HERE / "podinit.py"
PROBER = HERE / "prober.py"
ID_PREFIX = "fe2e"  # every namespace, veth and directory we create starts with it
NODES = ("node-a", "node-b")
CLUSTER_DOMAIN = "cluster.local"
BACKOFF_START = 1.0
BACKOFF_CAP = 8.0
# Flower images: ENTRYPOINT is the program (../shared/flower-cli.md), HOME/WORKDIR /app.
IMAGE_ENTRYPOINTS = {
    "flwr/superlink": "flower-superlink",
    "flwr/supernode": "flower-supernode",
    "flwr/superexec": "flower-superexec",
    "flwr/serverapp": "flwr-serverapp",
    "flwr/clientapp": "flwr-clientapp",
}
IMAGE_HOME = "/app"
BASE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
WORKLOADS = ("StatefulSet", "Deployment", "DaemonSet")


class HarnessError(Exception):
    """The harness cannot run what it was given (an unsupported field, a broken object)."""


class NotReady(AssertionError):
    """Something did not become ready within its bounded wait."""


def skip_reason() -> Optional[str]:
    """Why the e2e tests cannot run here, or None."""
    if sys.platform != "linux":
        return "e2e tests need Linux network namespaces"
    if os.geteuid() != 0:
        return "e2e tests need root (network and mount namespaces, setpriv); CI runs them as root"
    for tool in ("ip", "unshare", "setpriv", "mount"):
        if shutil.which(tool) is None:
            return f"e2e tests need `{tool}` on PATH"
    probe = f"{ID_PREFIX}-check-{secrets.token_hex(3)}"
    res = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True, timeout=10)
    if res.returncode != 0:
        return f"`ip netns add` does not work here: {res.stderr.strip()}"
    subprocess.run(["ip", "netns", "del", probe], capture_output=True, timeout=10)
    return None


def _run(argv: list[str], check: bool = True, timeout: float = 20) -> subprocess.CompletedProcess:
    res = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    if check and res.returncode != 0:
        raise HarnessError(f"{' '.join(argv)} failed ({res.returncode}): {res.stderr.strip()}")
    return res


def _kill(pid: Optional[int], sig: int = signal.SIGKILL) -> None:
    if not pid:
        return
    try:
        os.kill(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _children(pid: int) -> list[int]:
    try:
        return [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def _add_netns(name: str) -> None:
    _run(["ip", "netns", "add", name])
    try:
        NETNS_INODES.add(f"net:[{os.stat(f'/run/netns/{name}').st_ino}]")
    except OSError:
        pass


def netns_pids(netns: str) -> list[int]:
    res = _run(["ip", "netns", "pids", netns], check=False)
    return [int(p) for p in res.stdout.split()] if res.returncode == 0 else []


def our_netns(prefix: str = ID_PREFIX) -> list[str]:
    res = _run(["ip", "netns", "list"], check=False)
    return [line.split()[0] for line in res.stdout.splitlines() if line.split() and line.split()[0].startswith(prefix)]


# --- mountpoints on the host, shared by every cluster of this process ---------------------

class _Mountpoints:
    """Directories (and files) created on the host as mount targets; removed when the
    last cluster closes. Only what we created, deepest first, only if still empty."""

    def __init__(self):
        self.lock = threading.Lock()
        self.created: list[Path] = []
        self.users = 0

    def ensure(self, path: str, is_file: bool = False) -> None:
        with self.lock:
            p = Path(path)
            missing = []
            parent = p if not is_file else p.parent
            while not parent.exists():
                missing.append(parent)
                parent = parent.parent
            for d in reversed(missing):
                d.mkdir(mode=0o755)
                self.created.append(d)
            if is_file and not p.exists():
                p.touch(mode=0o644)
                self.created.append(p)

    def acquire(self) -> None:
        with self.lock:
            self.users += 1

    def release(self) -> None:
        with self.lock:
            self.users -= 1
            if self.users > 0:
                return
            for p in sorted(self.created, key=lambda x: len(x.parts), reverse=True):
                try:
                    p.rmdir() if p.is_dir() else p.unlink()
                except OSError:
                    pass
            self.created = [p for p in self.created if p.exists()]

    def leftovers(self) -> list[Path]:
        with self.lock:
            return [p for p in self.created if p.exists()]


MOUNTPOINTS = _Mountpoints()
# Private host directories masked in containers (see image_exposures), for the report.
EXPOSED: set[str] = set()
# Every cluster id and work directory this process made, for the leftover check.
CREATED: list[tuple[str, Path]] = []
# "net:[inode]" of every network namespace we made: no process may be left in one.
NETNS_INODES: set[str] = set()
_ETC_NETNS = Path("/etc/netns")
_ETC_LOCK = threading.Lock()
_ETC_CREATED: list[bool] = []


# --- every cluster of this process, for cleanup at exit / on signals ------------------------

_LIVE: set["Cluster"] = set()
_LIVE_LOCK = threading.Lock()


def close_all() -> None:
    with _LIVE_LOCK:
        clusters = list(_LIVE)
    for c in clusters:
        c.close()


def _on_signal(signum, frame):
    close_all()
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)


_HANDLERS_INSTALLED = False


def install_cleanup_handlers() -> None:
    """Close every cluster at exit and on SIGTERM/SIGHUP (call from the main thread)."""
    _install_handlers()


def leftovers() -> list[str]:
    """Anything of any cluster this process made that still exists."""
    out = []
    for cid, workdir in CREATED:
        out += [f"netns {ns}" for ns in our_netns(cid)]
        etc = Path("/etc/netns")
        if etc.exists():
            out += [f"{d}" for d in etc.iterdir() if d.name.startswith(cid)]
        if workdir.exists():
            out.append(f"work dir {workdir}")
    out += [f"mountpoint {p}" for p in MOUNTPOINTS.leftovers()]
    if NETNS_INODES:
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                try:
                    if os.readlink(f"/proc/{entry}/ns/net") in NETNS_INODES:
                        out.append(f"process {entry} in one of our network namespaces")
                except OSError:
                    pass
    return out


def _install_handlers() -> None:
    global _HANDLERS_INSTALLED
    if _HANDLERS_INSTALLED:
        return
    _HANDLERS_INSTALLED = True
    atexit.register(close_all)
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, _on_signal)
    # SIGINT raises KeyboardInterrupt: the fixtures' finally blocks close the clusters.


def _unsearchable(path: Path) -> Optional[Path]:
    """The first ancestor of `path` (or itself) that a non-root user outside its group
    cannot search, or None."""
    for p in [*reversed(path.parents), path]:
        if p.exists() and not p.stat().st_mode & 0o001:
            return p
    return None


def image_exposures(venv: Path) -> list[dict[str, Any]]:
    """What podinit must expose so a non-root container user can run `venv`'s Python,
    as an image would provide it: the venv and its base interpreter's prefix. Where one
    lives under a directory that user cannot search (a checkout in a 0700 `mktemp -d`,
    pyenv under /root), a tmpfs goes over the first such directory with only the needed
    paths bound back."""
    prefix = Path(os.path.realpath(venv / "bin" / "python")).parent.parent
    by_mask: dict[str, set[str]] = {}
    for path in (venv, prefix):
        mask = _unsearchable(path)
        if mask is None:
            continue
        if mask == path:
            raise HarnessError(f"{path} itself is not searchable by a non-root user")
        by_mask.setdefault(str(mask), set()).add(str(path))
    return [{"mask": mask, "paths": sorted(paths)} for mask, paths in sorted(by_mask.items())]


# --- the prober ------------------------------------------------------------------------

class Prober:
    """prober.py in the node's network namespace; probe() is thread-safe."""

    def __init__(self, netns: str, python: Path, log: Path):
        self._log = open(log, "ab")
        self.proc = subprocess.Popen(
            ["ip", "netns", "exec", netns, "unshare", "--pid", "--fork", "--kill-child", "--mount-proc",
             str(python), str(PROBER)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._log, text=True, start_new_session=True)
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
        _kill(self.proc.pid)
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
        self._log.close()


# --- containers ----------------------------------------------------------------------------

@dataclass
class ProbeState:
    ok_streak: int = 0
    fail_streak: int = 0
    last: str = ""


class Container:
    """One container of a pod, supervised: started, probed, restarted with back-off."""

    def __init__(self, pod: "Pod", spec: dict[str, Any], init: bool = False):
        self.pod = pod
        self.spec = spec
        self.init = init  # an init container: done once it exits 0
        self.succeeded = threading.Event()
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
        self.liveness_kills = 0
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread: Optional[threading.Thread] = None

    # -- lifecycle
    def start(self) -> None:
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
                    self.proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT,
                                                 stdin=subprocess.DEVNULL, start_new_session=True)
                self.started_at = time.monotonic()
                self.readiness, self.liveness = ProbeState(), ProbeState()
                self.ready = False
            self.pid1 = self._find_pid1(self.proc.pid)
            probers = [threading.Thread(target=self._probe_loop, args=(kind, incarnation), daemon=True)
                       for kind in ("readinessProbe", "livenessProbe") if kind in self.spec]
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
            if self.init and code == 0:
                self.succeeded.set()
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
            kids = _children(unshare_pid)
            if kids:
                return kids[0]
            time.sleep(0.01)
        return None

    def kill(self) -> None:
        """The container's process dies (SIGKILL to its PID 1: its PID namespace goes)."""
        with self._lock:
            proc, pid1 = self.proc, self.pid1
        _kill(pid1)
        if proc is not None:
            _kill(proc.pid)

    def stop(self) -> None:
        self._stop.set()
        self.kill()
        if self.proc is not None:
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
        if self._thread is not None:
            self._thread.join(timeout=10)

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    # -- probes
    def _probe_request(self, probe: dict[str, Any]) -> dict[str, Any]:
        timeout = probe.get("timeoutSeconds", 1)
        if "grpc" in probe:
            return {"type": "grpc", "host": self.pod.ip, "port": int(probe["grpc"]["port"]),
                    "service": probe["grpc"].get("service", ""), "timeout": timeout}
        if "httpGet" in probe:
            get = probe["httpGet"]
            return {"type": "http", "host": get.get("host") or self.pod.ip, "port": self._port(get["port"]),
                    "path": get.get("path", "/"), "scheme": get.get("scheme", "HTTP"), "timeout": timeout}
        raise HarnessError(f"{self.pod.name}/{self.name}: only grpc and httpGet probes are emulated: {probe}")

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
        state = self.readiness if kind == "readinessProbe" else self.liveness
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
            if kind == "readinessProbe":
                if ok and state.ok_streak >= ok_min:
                    self.ready = True
                elif not ok and state.fail_streak >= fail_max:
                    self.ready = False
                wait = period if self.ready else min(period, 1.0)
            else:
                if state.fail_streak >= fail_max:
                    with open(self.log_path, "ab") as log:
                        log.write(f"=== liveness probe failed {fail_max}x ({detail}): killing\n".encode())
                    self.liveness_kills += 1
                    self.kill()
                    return
                wait = period
            if self._stop.wait(wait):
                return

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
        state = "running" if self.running else "completed" if self.succeeded.is_set() else "waiting"
        probe = f", readiness: {self.readiness.last}" if "readinessProbe" in self.spec else ""
        return (f"{self.pod.name}/{self.name}: {state}, ready={self.is_ready()}, restarts={self.restarts}, "
                f"exit codes={self.exit_codes[-5:]}{probe}")


# --- pods ------------------------------------------------------------------------------------

class Pod:
    def __init__(self, cluster: "Cluster", owner: dict[str, Any], name: str, labels: dict[str, str],
                 node: str, ordinal: Optional[int], hostname: Optional[str], subdomain: Optional[str]):
        self.cluster = cluster
        self.owner = owner
        self.kind = owner["kind"]
        self.workload = owner["metadata"]["name"]
        self.namespace = owner["metadata"].get("namespace", "default")
        self.name = name
        self.labels = labels
        self.node = node
        self.ordinal = ordinal
        self.hostname = hostname
        self.subdomain = subdomain
        self.template = copy.deepcopy(owner["spec"]["template"])
        self.spec = self.template["spec"]
        self.uid = ""
        self.netns = f"{cluster.id}-{name}"
        self.ip = ""
        self.volume_dirs: dict[str, Path] = {}
        self.read_only_volumes: set[str] = set()
        self.containers: list[Container] = []
        self.init_containers: list[Container] = []
        self._stopping = threading.Event()
        self.dir: Optional[Path] = None

    # -- identity, as the downward API sees it
    def identity(self) -> dict[str, Any]:
        return {"name": self.name, "namespace": self.namespace, "nodeName": self.node, "labels": self.labels,
                "annotations": self.template["metadata"].get("annotations", {}), "podIP": self.ip,
                "hostIP": self.cluster.bridge_ip, "serviceAccountName": self.spec.get("serviceAccountName", "default"),
                "uid": self.uid}

    # -- sandbox (network namespace), kept across recreations
    def create_sandbox(self) -> None:
        c = self.cluster
        self.ip = c.allocate_ip()
        veth = c.next_veth()
        _add_netns(self.netns)
        c.netns.append(self.netns)
        _run(["ip", "-n", c.node_ns, "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", self.netns])
        _run(["ip", "-n", c.node_ns, "link", "set", veth, "master", c.bridge, "up"])
        _run(["ip", "-n", self.netns, "addr", "add", f"{self.ip}/{c.subnet.prefixlen}", "dev", "eth0"])
        _run(["ip", "-n", self.netns, "link", "set", "eth0", "up"])
        _run(["ip", "-n", self.netns, "link", "set", "lo", "up"])

    # -- volumes, fresh for every pod (PVCs excepted)
    def prepare_volumes(self) -> None:
        self.uid = secrets.token_hex(4)
        self.dir = self.cluster.workdir / "pods" / f"{self.name}-{self.uid}"
        self.dir.mkdir(parents=True)
        fs_group = self.spec.get("securityContext", {}).get("fsGroup")
        claims = {t["metadata"]["name"] for t in self.owner["spec"].get("volumeClaimTemplates", [])}
        volumes = {v["name"]: v for v in self.spec.get("volumes", [])}
        for claim in claims:
            volumes.setdefault(claim, {"name": claim, "persistentVolumeClaim": {"claimName": f"{claim}-{self.name}"}})
        self.volume_dirs, self.read_only_volumes = {}, set()
        for name, vol in volumes.items():
            target = self.dir / "volumes" / name
            if "emptyDir" in vol:
                target.mkdir(parents=True)
                _own(target, fs_group, 0o777, read_only=False)
            elif "secret" in vol or "configMap" in vol:
                kind = "Secret" if "secret" in vol else "ConfigMap"
                src = vol["secret"] if kind == "Secret" else vol["configMap"]
                obj_name = src["secretName"] if kind == "Secret" else src["name"]
                data = self.cluster.data(kind, obj_name)
                if data is None:
                    if src.get("optional"):
                        data = {}
                    else:
                        raise HarnessError(f"pod {self.name}: volume {name}: {kind} {obj_name} not found")
                target.mkdir(parents=True)
                default = src.get("defaultMode", 0o644)
                items = src.get("items") or [{"key": k, "path": k} for k in data]
                for item in items:
                    if item["key"] not in data:
                        raise HarnessError(f"pod {self.name}: volume {name}: {kind} {obj_name} has no key {item['key']}")
                    f = target / item["path"]
                    f.parent.mkdir(parents=True, exist_ok=True)
                    f.write_text(data[item["key"]])
                    _own(f, fs_group, item.get("mode", default), read_only=True)
                _own(target, fs_group, 0o755, read_only=True)
                self.read_only_volumes.add(name)
            elif "persistentVolumeClaim" in vol:
                claim = vol["persistentVolumeClaim"]["claimName"]
                target = self.cluster.pvc_dir(claim)
                _own(target, fs_group, 0o755, read_only=False)
                if vol["persistentVolumeClaim"].get("readOnly"):
                    self.read_only_volumes.add(name)
            else:
                raise HarnessError(f"pod {self.name}: volume {name}: type {sorted(set(vol) - {'name'})} is not emulated")
            self.volume_dirs[name] = target

    def remove_volumes(self) -> None:
        if self.dir is not None:
            shutil.rmtree(self.dir, ignore_errors=True)
            self.dir = None

    # -- containers
    def container_launch(self, c: Container) -> tuple[list[str], Path]:
        """The command that runs container `c`, and its podinit spec file."""
        spec = c.spec
        image = spec["image"]
        repo, _, tag = image.rpartition(":") if ":" in image.rsplit("/", 1)[-1] else (image, "", "")
        version = self.cluster.version
        if repo not in IMAGE_ENTRYPOINTS:
            raise HarnessError(f"{self.name}/{c.name}: image {image} is not a Flower image this harness has")
        if tag.split("-")[0] != version:
            raise HarnessError(f"{self.name}/{c.name}: image {image}, but the harness runs Flower {version}")
        venv_bin = self.cluster.venv / "bin"
        entry = [str(venv_bin / IMAGE_ENTRYPOINTS[repo])]
        lookup = self.cluster.data
        argv = container_command(spec, self.identity(), entry, lookup)
        env = {"PATH": f"{venv_bin}:{BASE_PATH}", "HOSTNAME": self.name, "HOME": IMAGE_HOME, "LANG": "C.UTF-8"}
        env.update(container_env(spec, self.identity(), lookup))
        pod_sc = self.spec.get("securityContext", {})
        sc = {**pod_sc, **spec.get("securityContext", {})}
        uid, gid = sc.get("runAsUser", 0), sc.get("runAsGroup", 0)
        if sc.get("runAsNonRoot") and uid == 0:
            raise HarnessError(f"{self.name}/{c.name}: runAsNonRoot, but it would run as root")
        groups = [g for g in [pod_sc.get("fsGroup"), *pod_sc.get("supplementalGroups", [])] if g is not None]
        caps = sc.get("capabilities", {})
        if caps.get("add"):
            raise HarnessError(f"{self.name}/{c.name}: added capabilities are not emulated")
        user = {"uid": uid, "gid": gid, "groups": groups,
                "noNewPrivs": sc.get("allowPrivilegeEscalation") is False,
                "dropAllCaps": "ALL" in caps.get("drop", [])}
        mounts = []
        for m in spec.get("volumeMounts", []):
            if m["name"] not in self.volume_dirs:
                raise HarnessError(f"{self.name}/{c.name}: mount of unknown volume {m['name']}")
            source = self.volume_dirs[m["name"]]
            if m.get("subPath"):
                source = source / m["subPath"]
                if not source.exists():  # the kubelet creates it with the volume's mode
                    source.mkdir(parents=True)
                    st = self.volume_dirs[m["name"]].stat()
                    os.chown(source, -1, st.st_gid)
                    source.chmod(st.st_mode & 0o7777)
            MOUNTPOINTS.ensure(m["mountPath"], is_file=source.is_file())
            mounts.append({"source": str(source), "target": m["mountPath"],
                           "readOnly": bool(m.get("readOnly")) or m["name"] in self.read_only_volumes})
        launch = {"mounts": mounts, "expose": self.cluster.exposures, "image": self.cluster.image_paths, "hostname": self.name, "readOnlyRoot": bool(sc.get("readOnlyRootFilesystem")),
                  "user": user, "setpriv": shutil.which("setpriv"), "env": env, "argv": argv,
                  "cwd": spec.get("workingDir", IMAGE_HOME)}
        MOUNTPOINTS.ensure(launch["cwd"])
        spec_file = self.dir / f"{c.name}.json"
        spec_file.write_text(json.dumps(launch, indent=1))
        return self.cluster.ns_exec(self.netns, spec_file), spec_file

    def start(self) -> None:
        """Init containers one after the other, each until it exits 0 (restarted with
        back-off otherwise), then every container at once."""
        self.init_containers = [Container(self, c, init=True) for c in self.spec.get("initContainers", [])]
        self.containers = [Container(self, c) for c in self.spec["containers"]]
        self._stopping = threading.Event()
        if not self.init_containers:
            for c in self.containers:
                c.start()
            return
        threading.Thread(target=self._run_init, name=f"{self.name}/init", daemon=True).start()

    def _run_init(self) -> None:
        for c in self.init_containers:
            c.start()
            while not c.succeeded.wait(0.2):
                if self._stopping.is_set():
                    return
        if not self._stopping.is_set():
            for c in self.containers:
                c.start()

    def stop(self) -> None:
        self._stopping.set()
        every = [*self.init_containers, *self.containers]
        for c in every:
            c._stop.set()
            c.kill()
        for c in every:
            c.stop()

    def container(self, name: str) -> Container:
        return next(c for c in self.containers if c.name == name)

    def is_ready(self) -> bool:
        return bool(self.containers) and all(c.is_ready() for c in self.containers)

    def describe(self) -> str:
        return "\n".join(c.describe() for c in [*self.init_containers, *self.containers])


def _own(path: Path, fs_group: Optional[int], mode: int, read_only: bool) -> None:
    """The kubelet's SetVolumeOwnership: group fsGroup, group read (+write unless read
    only) bits, setgid and group x on directories."""
    if fs_group is None:
        path.chmod(mode)
        return
    mask = 0o440 if read_only else 0o660
    if path.is_dir():
        mask |= 0o2110
    os.chown(path, -1, fs_group)
    path.chmod(mode | mask)


# --- the cluster ----------------------------------------------------------------------------

def _host_networks() -> list[ipaddress.IPv4Network]:
    nets = []
    for argv in (["ip", "-4", "route", "show", "table", "all"], ["ip", "-4", "addr", "show"]):
        for token in _run(argv, check=False).stdout.split():
            try:
                if "/" in token or token.count(".") == 3:
                    nets.append(ipaddress.ip_network(token, strict=False))
            except ValueError:
                pass
    return nets


_USED_SUBNETS: set[ipaddress.IPv4Network] = set()
_SUBNET_LOCK = threading.Lock()


def _pick_subnet() -> ipaddress.IPv4Network:
    with _SUBNET_LOCK:
        return _pick_subnet_locked()


def _pick_subnet_locked() -> ipaddress.IPv4Network:
    host = _host_networks()
    for _ in range(200):
        net = ipaddress.ip_network(f"10.{random.randint(64, 250)}.{random.randint(0, 255)}.0/24")
        if net not in _USED_SUBNETS and not any(net.overlaps(h) for h in host if h.prefixlen > 0):
            _USED_SUBNETS.add(net)
            return net
    raise HarnessError("no free 10.x.y.0/24 found")


class Cluster:
    """One emulated node running one Flower version's images (one venv)."""

    def __init__(self, version: str, venv: Path, label: str = "e2e"):
        _install_handlers()
        self.version = version
        self.venv = venv
        self.label = label
        self.exposures = image_exposures(venv)
        # What the image provides at fixed paths: the venv and its base interpreter.
        self.image_paths = [str(venv), os.path.realpath(venv / "bin" / "python").rsplit("/bin/", 1)[0]]
        EXPOSED.update(e["mask"] for e in self.exposures)
        self.id = f"{ID_PREFIX}{secrets.token_hex(2)}"
        self.netns: list[str] = []
        self.objects: dict[tuple[str, str], dict[str, Any]] = {}
        self.pods: dict[str, Pod] = {}
        self._closed = False
        self._close_lock = threading.Lock()
        self._ips = 10
        self._veths = 0
        self.clients: list[tuple[str, str]] = []  # (netns, Kubernetes namespace)
        self.hosts_dirs: list[Path] = []
        with _LIVE_LOCK:
            _LIVE.add(self)
        MOUNTPOINTS.acquire()
        self.workdir = Path(tempfile.mkdtemp(prefix=f"{self.id}-{label}-"))
        CREATED.append((self.id, self.workdir))
        self.logdir = self.workdir / "logs"
        self.logdir.mkdir()
        self.pvcdir = self.workdir / "pvc"
        self.pvcdir.mkdir()
        try:
            self.subnet = _pick_subnet()
            hosts = list(self.subnet.hosts())
            self.bridge_ip = str(hosts[0])
            self.node_ns = f"{self.id}-node"
            self.bridge = f"{self.id}br"
            _add_netns(self.node_ns)
            self.netns.append(self.node_ns)
            _run(["ip", "-n", self.node_ns, "link", "set", "lo", "up"])
            _run(["ip", "-n", self.node_ns, "link", "add", self.bridge, "type", "bridge"])
            _run(["ip", "-n", self.node_ns, "addr", "add", f"{self.bridge_ip}/{self.subnet.prefixlen}", "dev", self.bridge])
            _run(["ip", "-n", self.node_ns, "link", "set", self.bridge, "up"])
            self.prober = Prober(self.node_ns, venv / "bin" / "python", self.logdir / "prober.log")
        except BaseException:
            self.close()
            raise

    # -- bookkeeping
    def allocate_ip(self) -> str:
        ip = str(self.subnet.network_address + self._ips)
        self._ips += 1
        return ip

    def next_veth(self) -> str:
        self._veths += 1
        return f"{self.id}v{self._veths}"

    def pvc_dir(self, claim: str) -> Path:
        d = self.pvcdir / claim
        d.mkdir(exist_ok=True)
        return d

    def ns_exec(self, netns: str, spec_file: Path) -> list[str]:
        return ["ip", "netns", "exec", netns, "unshare", "--pid", "--fork", "--kill-child", "--mount-proc", "--uts",
                sys.executable, str(PODINIT), str(spec_file)]

    # -- the API server part
    def apply(self, manifests: Iterable[dict[str, Any]]) -> None:
        for m in manifests:
            self.objects[(m["kind"], m["metadata"]["name"])] = copy.deepcopy(m)

    def data(self, kind: str, name: str) -> Optional[dict[str, str]]:
        """A Secret's / ConfigMap's data as text."""
        import base64

        obj = self.objects.get((kind, name))
        if obj is None:
            return None
        out = {}
        if kind == "Secret":
            out.update({k: base64.b64decode(v).decode() for k, v in (obj.get("data") or {}).items()})
        else:
            out.update(obj.get("data") or {})
        out.update(obj.get("stringData") or {})
        return out

    def workloads(self) -> list[dict[str, Any]]:
        return [o for o in self.objects.values() if o["kind"] in WORKLOADS]

    # -- the controllers' part
    def create_pods(self) -> list[Pod]:
        """Pods of every workload (not started), their sandboxes and DNS."""
        made = []
        for w in self.workloads():
            for pod in self._pods_for(w):
                self.pods[pod.name] = pod
                pod.create_sandbox()
                made.append(pod)
        self.write_dns()
        return made

    def _pods_for(self, w: dict[str, Any]) -> list[Pod]:
        name = w["metadata"]["name"]
        labels = dict(w["spec"]["template"]["metadata"].get("labels", {}))
        revision = hashlib.sha256(json.dumps(w["spec"]["template"], sort_keys=True).encode()).hexdigest()[:10]
        if w["kind"] == "StatefulSet":
            out = []
            for k in range(w["spec"].get("replicas", 1)):
                pod_name = f"{name}-{k}"
                pl = {**labels, "apps.kubernetes.io/pod-index": str(k), "statefulset.kubernetes.io/pod-name": pod_name,
                      "controller-revision-hash": f"{name}-{revision}"}
                out.append(Pod(self, w, pod_name, pl, NODES[k % len(NODES)], k, pod_name, w["spec"].get("serviceName")))
            return out
        if w["kind"] == "Deployment":
            return [Pod(self, w, f"{name}-{revision}-{secrets.token_hex(3)[:5]}", {**labels, "pod-template-hash": revision},
                        NODES[k % len(NODES)], None, None, None) for k in range(w["spec"].get("replicas", 1))]
        return [Pod(self, w, f"{name}-{secrets.token_hex(3)[:5]}", dict(labels), node, None, None, None)
                for node in NODES if _schedulable(w["spec"]["template"]["spec"], node)]

    # -- cluster DNS
    def _backing(self, service: dict[str, Any]) -> list[Pod]:
        selector = service["spec"].get("selector") or {}
        ns = service["metadata"].get("namespace", "default")
        if not selector:
            return []
        return [p for p in self.pods.values()
                if p.namespace == ns and all(p.labels.get(k) == v for k, v in selector.items())]

    def _check_ports(self, service: dict[str, Any], pods: list[Pod]) -> None:
        for sp in service["spec"].get("ports", []):
            target = sp.get("targetPort", sp["port"])
            for pod in pods:
                resolved = None
                if isinstance(target, int) or str(target).isdigit():
                    resolved = int(target)
                else:
                    for c in pod.spec["containers"]:
                        for cp in c.get("ports", []):
                            if cp.get("name") == target:
                                resolved = int(cp["containerPort"])
                    if resolved is None:
                        raise HarnessError(f"Service {service['metadata']['name']}: targetPort {target!r} "
                                           f"is no container port of pod {pod.name}")
                if resolved != sp["port"]:
                    raise HarnessError(f"Service {service['metadata']['name']}: port {sp['port']} -> {resolved}: "
                                       "port translation is not emulated")

    def hosts_for(self, namespace: str, own: Optional[Pod] = None) -> str:
        """/etc/hosts for a pod (or client) in `namespace`."""
        d = CLUSTER_DOMAIN
        lines = ["127.0.0.1\tlocalhost", "::1\tlocalhost ip6-localhost ip6-loopback"]
        if own is not None:
            if own.hostname and own.subdomain:
                lines.append(f"{own.ip}\t{own.hostname}.{own.subdomain}.{own.namespace}.svc.{d}\t{own.hostname}")
            else:
                lines.append(f"{own.ip}\t{own.name}")
        for (kind, _), svc in sorted(self.objects.items()):
            if kind != "Service":
                continue
            name = svc["metadata"]["name"]
            ns = svc["metadata"].get("namespace", "default")

            def forms(host: str) -> list[str]:
                names = [f"{host}.{ns}", f"{host}.{ns}.svc", f"{host}.{ns}.svc.{d}"]
                return ([host] if ns == namespace else []) + names

            pods = self._backing(svc)
            self._check_ports(svc, pods)
            if svc["spec"].get("clusterIP") == "None":
                for p in pods:
                    lines.append(f"{p.ip}\t{' '.join(forms(name))}")
                    if p.hostname and p.subdomain == name:
                        lines.append(f"{p.ip}\t{' '.join(forms(f'{p.hostname}.{name}'))}")
            elif pods:
                if len(pods) > 1:
                    raise HarnessError(f"Service {name} selects {len(pods)} pods: load balancing is not emulated")
                lines.append(f"{pods[0].ip}\t{' '.join(forms(name))}")
        return "\n".join(lines) + "\n"

    def write_dns(self) -> None:
        """(Re)write every pod's and client's hosts file in place (ip netns exec bind-
        mounts the file, so running processes see the new content)."""
        targets = [(p.netns, p.namespace, p) for p in self.pods.values()]
        targets += [(netns, ns, None) for netns, ns in self.clients]
        for netns, ns, pod in targets:
            d = _ETC_NETNS / netns
            with _ETC_LOCK:
                if not _ETC_NETNS.exists():
                    _ETC_NETNS.mkdir()
                    _ETC_CREATED.append(True)
                if not d.exists():
                    d.mkdir()
                    self.hosts_dirs.append(d)
            with open(d / "hosts", "w") as f:
                f.write(self.hosts_for(ns, pod))
            (d / "resolv.conf").write_text(
                f"# cluster DNS is emulated by the hosts file; other names fail at once\n"
                f"nameserver 127.0.0.1\nsearch {ns}.svc.{CLUSTER_DOMAIN} svc.{CLUSTER_DOMAIN} {CLUSTER_DOMAIN}\n"
                "options timeout:1 attempts:1\n")

    # -- running pods
    def start_pods(self, pods: Optional[Iterable[Pod]] = None) -> None:
        for p in list(pods if pods is not None else self.pods.values()):
            p.prepare_volumes()
            p.start()

    def delete_pod(self, pod: Pod) -> None:
        """The pod goes: its containers are killed, its emptyDirs and Secret volumes
        deleted. Its sandbox (address) stays for the replacement; PVCs stay."""
        pod.stop()
        pod.remove_volumes()

    def recreate_pod(self, pod: Pod) -> Pod:
        """What the StatefulSet controller does after `delete_pod`: the same pod name,
        a fresh pod on the same claims."""
        self.delete_pod(pod)
        pod.prepare_volumes()
        pod.start()
        return pod

    def pod(self, name: str) -> Pod:
        return self.pods[name]

    def wait_pods_ready(self, pods: Iterable[Pod], timeout: float) -> None:
        pods = list(pods)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if all(p.is_ready() for p in pods):
                return
            time.sleep(0.2)
        raise NotReady(f"pods not ready within {timeout:.0f}s:\n" + "\n".join(p.describe() for p in pods)
                       + "\n" + self.logs([p for p in pods if not p.is_ready()]))

    def logs(self, pods: Optional[Iterable[Pod]] = None, tail: int = 40) -> str:
        out = []
        for p in (pods if pods is not None else self.pods.values()):
            for c in [*p.init_containers, *p.containers]:
                out.append(f"----- {p.name}/{c.name} (restarts {c.restarts}) -----\n{c.log(tail)}")
        return "\n".join(out)

    # -- what runs where
    def processes(self) -> list[tuple[str, str, int, list[str]]]:
        """(pod, container, host pid, argv) of every process in a container: the
        container's PID namespace tells which container a process belongs to."""
        owners: dict[str, tuple[str, str]] = {}
        for p in self.pods.values():
            for c in [*p.init_containers, *p.containers]:
                pid1 = c.pid1
                if pid1:
                    try:
                        owners[os.readlink(f"/proc/{pid1}/ns/pid")] = (p.name, c.name)
                    except OSError:
                        pass
        out = []
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                owner = owners.get(os.readlink(f"/proc/{entry}/ns/pid"))
                if owner is None:
                    continue
                argv = Path(f"/proc/{entry}/cmdline").read_bytes().decode(errors="replace").split("\0")[:-1]
            except OSError:
                continue
            out.append((owner[0], owner[1], int(entry), argv))
        return out

    def sample_programs(self, names: Iterable[str], stop: threading.Event, seen: set, every: float = 0.2) -> None:
        """Until `stop`: add (pod, container, program) to `seen` for every running process
        whose argv names one of `names` (a program or a Python script of that name)."""
        names = set(names)
        while not stop.is_set():
            for pod, container, _, argv in self.processes():
                for arg in argv[:2]:
                    if os.path.basename(arg) in names:
                        seen.add((pod, container, os.path.basename(arg)))
                        break
            stop.wait(every)

    # -- a client namespace (e.g. where the flwr CLI runs)
    def add_client(self, name: str, namespace: str) -> str:
        netns = f"{self.id}-{name}"
        ip = self.allocate_ip()
        veth = self.next_veth()
        _add_netns(netns)
        self.netns.append(netns)
        _run(["ip", "-n", self.node_ns, "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", netns])
        _run(["ip", "-n", self.node_ns, "link", "set", veth, "master", self.bridge, "up"])
        _run(["ip", "-n", netns, "addr", "add", f"{ip}/{self.subnet.prefixlen}", "dev", "eth0"])
        _run(["ip", "-n", netns, "link", "set", "eth0", "up"])
        _run(["ip", "-n", netns, "link", "set", "lo", "up"])
        self.clients.append((netns, namespace))
        self.write_dns()
        return netns

    def exec_in(self, netns: str, argv: list[str], *, env: dict[str, str], mounts: list[dict[str, Any]],
                cwd: str, timeout: float, name: str = "exec") -> subprocess.CompletedProcess:
        """Run `argv` as root in `netns` with `mounts`, bounded by `timeout` (then
        everything it started is killed)."""
        for m in mounts:
            MOUNTPOINTS.ensure(m["target"], is_file=Path(m["source"]).is_file())
        spec_file = self.workdir / f"{name}-{secrets.token_hex(3)}.json"
        spec_file.write_text(json.dumps({"mounts": mounts, "hostname": name, "readOnlyRoot": False, "user": None,
                                         "setpriv": None, "env": env, "argv": argv, "cwd": cwd}))
        proc = subprocess.Popen(self.ns_exec(netns, spec_file), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                stdin=subprocess.DEVNULL, text=True, start_new_session=True)
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            for kid in _children(proc.pid):
                _kill(kid)
            _kill(proc.pid)
            out, err = proc.communicate(timeout=10)
            raise NotReady(f"{' '.join(argv)} did not finish within {timeout:.0f}s\n{out}\n{err}")
        finally:
            spec_file.unlink(missing_ok=True)
        return subprocess.CompletedProcess(argv, proc.returncode, out, err)

    # -- the end
    def close(self) -> None:
        with self._close_lock:
            if self._closed:
                return
            self._closed = True
        try:
            for p in self.pods.values():
                p._stopping.set()
                for c in [*p.init_containers, *p.containers]:
                    c._stop.set()
                    c.kill()
            if getattr(self, "prober", None) is not None:
                self.prober.close()
            for p in self.pods.values():
                for c in [*p.init_containers, *p.containers]:
                    c.stop()
            for ns in self.netns:
                for _ in range(20):
                    pids = netns_pids(ns)
                    if not pids:
                        break
                    for pid in pids:
                        _kill(pid)
                    time.sleep(0.1)
            for ns in reversed(self.netns):
                _run(["ip", "netns", "del", ns], check=False)
            with _ETC_LOCK:
                for d in self.hosts_dirs:
                    shutil.rmtree(d, ignore_errors=True)
                if _ETC_CREATED:  # we made /etc/netns: remove it once nobody uses it
                    try:
                        _ETC_NETNS.rmdir()
                        _ETC_CREATED.clear()
                    except OSError:
                        pass
            shutil.rmtree(self.workdir, ignore_errors=True)
        finally:
            MOUNTPOINTS.release()
            with _LIVE_LOCK:
                _LIVE.discard(self)

    def leftovers(self) -> list[str]:
        """What of this cluster still exists (should be nothing after close())."""
        out = [f"netns {ns}" for ns in our_netns(self.id)]
        out += [f"dir {d}" for d in self.hosts_dirs if d.exists()]
        if self.workdir.exists():
            out.append(f"dir {self.workdir}")
        return out


def _schedulable(pod_spec: dict[str, Any], node: str) -> bool:
    """Required node affinity (metadata.name / kubernetes.io/hostname In) and nodeSelector
    on kubernetes.io/hostname, for the emulated nodes (whose hostname label is their name)."""
    host = pod_spec.get("nodeSelector", {}).get("kubernetes.io/hostname")
    if host is not None and host != node:
        return False
    terms = (pod_spec.get("affinity", {}).get("nodeAffinity", {})
             .get("requiredDuringSchedulingIgnoredDuringExecution", {}).get("nodeSelectorTerms"))
    if not terms:
        return True
    for term in terms:
        exprs = term.get("matchFields", []) + term.get("matchExpressions", [])
        if all(_matches(e, node) for e in exprs):
            return True
    return False


def _matches(expr: dict[str, Any], node: str) -> bool:
    if expr["key"] not in ("metadata.name", "kubernetes.io/hostname"):
        raise HarnessError(f"node affinity on {expr['key']} is not emulated")
    if expr["operator"] == "In":
        return node in expr["values"]
    if expr["operator"] == "NotIn":
        return node not in expr["values"]
    raise HarnessError(f"node affinity operator {expr['operator']} is not emulated")
