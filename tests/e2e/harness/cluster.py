"""The cluster: one emulated node running Flower's images, each version's from the venv of
that version (the cluster's own by default; any other installed one when a later render
moves pods to it, as an upgrade does). It keeps objects like an API server, makes pods like
the controllers, writes cluster DNS, runs clients (the flwr CLI) in namespaces of their
own, and cleans up everything it made, also at interpreter exit and on SIGTERM/SIGHUP.
Its network (bridge addresses, routes, partitions, client namespaces) is cluster_network.py's,
what runs in it cluster_processes.py's, the registry of live clusters cleanup.py's."""

from __future__ import annotations

import contextlib
import copy
import os
import secrets
import shutil
import tempfile
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from tests.e2e.harness import dns, warm
from tests.e2e.harness.cleanup import _LIVE, _LIVE_LOCK, CREATED, _install_handlers
from tests.e2e.harness.cluster_network import ClusterNetwork
from tests.e2e.harness.cluster_processes import ClusterProcesses
from tests.e2e.harness.enforce import Enforcer
from tests.e2e.harness.host import ID_PREFIX, HarnessError, NotReady, kill, run_cmd
from tests.e2e.harness.jobs import Job
from tests.e2e.harness.network import add_bridge, add_netns, netns_pids, our_netns, pick_subnet
from tests.e2e.harness.pods import Pod
from tests.e2e.harness.probes import Prober
from tests.e2e.harness.volumes import EXPOSED, MOUNTPOINTS, image_exposures, refresh_config_maps
from tests.e2e.harness.workload_pods import pods_for
from tests.support.flower import venv as flower_venv
from tests.support.manifests import WORKLOAD_KINDS, object_data


@dataclass(frozen=True)
class FlowerImages:
    """What stands in for Flower `version`'s images: its venv, what podinit must expose so a
    non-root user can run it, and the paths an image provides (the venv, its base interpreter)."""

    version: str
    venv: Path
    exposures: list[dict[str, Any]]
    paths: list[str]

    @classmethod
    def of(cls, version: str, venv: Path) -> FlowerImages:
        if not (venv / "bin" / "python").exists():
            raise HarnessError(f"Flower {version}'s images: no venv at {venv} (`make test` installs the tested ones)")
        exposures = image_exposures(venv)
        EXPOSED.update(e["mask"] for e in exposures)
        return cls(
            version, venv, exposures, [str(venv), os.path.realpath(venv / "bin" / "python").rsplit("/bin/", 1)[0]]
        )


class Cluster(ClusterNetwork, ClusterProcesses):
    """One emulated node running Flower's images: `version`'s (`venv`) unless a pod names another."""

    def __init__(self, version: str, venv: Path, label: str = "e2e", nice: int = 0, warm: bool = False):
        _install_handlers()
        # Flower's daemons in this cluster's containers start as forks of a warm Flower (harness/warm.py).
        self.warm = warm
        self.version = version
        self.label = label
        # The niceness of every container's processes: a cluster that stands for other machines (a site's, in
        # scale.py) yields the shared CPU to the clusters whose processes a test measures.
        self.nice = nice
        self.images = {version: FlowerImages.of(version, venv)}
        self.id = f"{ID_PREFIX}{secrets.token_hex(2)}"
        self.netns: list[str] = []
        self.objects: dict[tuple[str, str], dict[str, Any]] = {}
        self.pods: dict[str, Pod] = {}
        self.jobs: dict[str, Job] = {}  # by Job name; their pods are not in `pods` (jobs.py)
        # Names public DNS answers for this cluster's pods (add_host), e.g. another
        # cluster's load balancer; and routes every pod and client gets (add_route).
        self.extra_hosts: dict[str, str] = {}
        self.routes: list[tuple[str, str]] = []
        self._closed = False
        self._close_lock = threading.Lock()
        self._ips = 10
        self._veths = 0
        self.veths: dict[str, str] = {}  # netns -> its veth's bridge end (in node_ns)
        self.partitioned: set[str] = set()  # netns whose bridge port is isolated (partition)
        self.clients: list[tuple[str, str]] = []  # (netns, Kubernetes namespace)
        self.client_labels: dict[str, dict[str, str]] = {}  # netns -> the labels its pod would have
        self.addresses: dict[str, str] = {}  # netns -> its address on the bridge
        self.netpol: Optional[Enforcer] = None
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
            self.subnet = pick_subnet()
            hosts = list(self.subnet.hosts())
            self.bridge_ip = str(hosts[0])
            self.node_ns = f"{self.id}-node"
            self.bridge = f"{self.id}br"
            add_netns(self.node_ns)
            self.netns.append(self.node_ns)
            run_cmd(["ip", "-n", self.node_ns, "link", "set", "lo", "up"])
            self.bridge_mac = add_bridge(self.node_ns, self.bridge)
            run_cmd(
                [
                    "ip",
                    "-n",
                    self.node_ns,
                    "addr",
                    "add",
                    f"{self.bridge_ip}/{self.subnet.prefixlen}",
                    "dev",
                    self.bridge,
                ]
            )
            run_cmd(["ip", "-n", self.node_ns, "link", "set", self.bridge, "up"])
            self.prober = Prober(self.node_ns, venv / "bin" / "python", self.logdir / "prober.log")
            # NetworkPolicies are enforced in every pod's namespace (enforce.py): no nft, no cluster.
            self.netpol = Enforcer(self)
        except BaseException:
            self.close()
            raise

    # -- bookkeeping
    def flower_images(self, version: str) -> FlowerImages:
        """Flower `version`'s images: the cluster's own, or another tested version's venv."""
        if version not in self.images:
            self.images[version] = FlowerImages.of(version, flower_venv(version))
        return self.images[version]

    def pvc_dir(self, claim: str) -> Path:
        d = self.pvcdir / claim
        d.mkdir(exist_ok=True)
        return d

    # -- the API server part
    def apply(self, manifests: Iterable[dict[str, Any]]) -> None:
        for m in manifests:
            self.objects[(m["kind"], m["metadata"]["name"])] = copy.deepcopy(m)

    def data(self, kind: str, name: str) -> Optional[dict[str, str]]:
        """A Secret's / ConfigMap's data as text."""
        obj = self.objects.get((kind, name))
        return None if obj is None else object_data(obj)

    def workloads(self) -> list[dict[str, Any]]:
        return [o for o in self.objects.values() if o["kind"] in WORKLOAD_KINDS]

    # -- the controllers' part
    def create_pods(self) -> list[Pod]:
        """Pods of every workload (not started), their sandboxes and DNS; Jobs (not
        started: start_jobs)."""
        made = []
        for w in self.workloads():
            if w["kind"] == "Job":
                self.jobs[w["metadata"]["name"]] = Job(self, w)
                continue
            for pod in pods_for(self, w):
                self.pods[pod.name] = pod
                pod.create_sandbox()
                made.append(pod)
        self.write_dns()
        return made

    # -- cluster DNS
    def hosts_for(self, namespace: str, own: Optional[Pod] = None) -> str:
        """/etc/hosts for a pod (or client) in `namespace`."""
        hosts = dns.hosts_file(self.objects, self.pods.values(), namespace, own)
        return hosts + "".join(f"{ip}\t{name}\n" for name, ip in sorted(self.extra_hosts.items()))

    def job_pods(self) -> list[Pod]:
        return [p for job in self.jobs.values() for p in job.pods]

    def write_dns(self) -> None:
        """(Re)write every pod's and client's hosts file in place (ip netns exec bind-
        mounts the file, so running processes see the new content), and bring the
        NetworkPolicy rules up to date: this runs whenever pods, clients or objects change."""
        targets = [(p.netns, p.namespace, p) for p in [*self.pods.values(), *self.job_pods()]]
        targets += [(netns, ns, None) for netns, ns in self.clients]
        for netns, ns, pod in targets:
            dns.write_netns_files(netns, ns, self.hosts_for(ns, pod), self.hosts_dirs)
        if self.netpol is not None:
            self.netpol.sync()

    # -- running pods
    def start_pods(self, pods: Optional[Iterable[Pod]] = None) -> None:
        for p in list(pods if pods is not None else self.pods.values()):
            p.prepare_volumes()
            p.start()

    def start_jobs(self, names: Optional[Iterable[str]] = None) -> list[Job]:
        """Start the Jobs (all not yet started, or those named): each makes its pod."""
        jobs = [self.jobs[n] for n in names] if names is not None else list(self.jobs.values())
        for job in jobs:
            job.start()
        return jobs

    def update(self, manifests: Iterable[dict[str, Any]]) -> list[Job]:
        """A later deployment of the same stack (`pulumi up` again): objects rendered
        again are updated, objects no longer rendered deleted (a deleted Job's pods with
        it), new Jobs created (not started; returned), a changed Job replaced as Pulumi
        does. A running pod sees its ConfigMap volumes' new content
        (volumes.refresh_config_maps) but keeps the Secrets it mounted (Secret updates after
        start are not emulated), so a changed spec of a long-running workload (a rolling
        update), a new or a removed one is refused."""
        new = {(m["kind"], m["metadata"]["name"]): copy.deepcopy(m) for m in manifests}
        for key in [k for k in self.objects if k not in new]:
            kind, name = key
            if kind == "Job":
                self.jobs.pop(name).stop()
            elif kind in WORKLOAD_KINDS:
                raise HarnessError(f"{kind} {name} removed: deleting a workload is not emulated")
            del self.objects[key]
        added = []
        for key, m in new.items():
            kind, name = key
            old = self.objects.get(key)
            if kind in WORKLOAD_KINDS and kind != "Job":
                if old is None:
                    raise HarnessError(f"{kind} {name} added: a new workload after the first apply is not emulated")
                if old["spec"] != m["spec"]:
                    raise HarnessError(f"{kind} {name} changed: a rolling update is not emulated")
            if kind == "Job" and old is not None and old["spec"] != m["spec"]:
                # A Job's template is immutable: pulumi-kubernetes replaces the Job (deletes it, creates it again).
                self.jobs.pop(name).stop()
            self.objects[key] = m
            if kind == "Job" and name not in self.jobs:
                self.jobs[name] = Job(self, m)
                added.append(self.jobs[name])
        for p in self.pods.values():  # the kubelet syncs a changed ConfigMap into running pods' volumes
            refresh_config_maps(p.name, p.spec, self.data, p.volume_dirs)
        self.write_dns()
        return added

    def delete_pod(self, pod: Pod) -> None:
        """The pod goes: its containers are killed, its emptyDirs and Secret volumes
        deleted. Its sandbox (address) stays for the replacement; PVCs stay."""
        pod.stop()
        pod.remove_volumes()

    def recreate_pod(self, pod: Pod) -> Pod:
        """What the StatefulSet controller does after `delete_pod`: the same pod name,
        a fresh pod on the same claims."""
        self.delete_pod(pod)
        pod.terminating = False  # a fresh pod (terminate() may have deleted the old one gracefully)
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
        raise NotReady(
            f"pods not ready within {timeout:.0f}s:\n"
            + "\n".join(p.describe() for p in pods)
            + "\n"
            + self.logs([p for p in pods if not p.is_ready()])
        )

    def logs(self, pods: Optional[Iterable[Pod]] = None, tail: int = 40) -> str:
        """The containers' last `tail` lines; for the whole cluster, a warm one's, also the end of its warm Flower
        servers' logs (a call refused or failed there is otherwise seen nowhere: the shim runs the program itself)."""
        out = []
        for p in pods if pods is not None else [*self.pods.values(), *self.job_pods()]:
            for c in [*p.init_containers, *p.containers]:
                out.append(f"----- {p.name}/{c.name} (restarts {c.restarts}) -----\n{c.log(tail)}")
        if pods is None and self.warm:
            venvs = {image.venv for image in self.images.values()}
            for server in warm.servers():
                if server.venv in venvs:
                    out.append(f"----- warm Flower server {server.dir.name} (shared by the warm clusters) -----")
                    out.append("\n".join(server.tail().splitlines()[-tail:]))
        return "\n".join(out)

    # -- the end
    def close(self) -> None:
        with self._close_lock:
            if self._closed:
                return
            self._closed = True
        try:
            for job in self.jobs.values():
                job.halt()
            for p in [*self.pods.values(), *self.job_pods()]:
                p._stopping.set()
                for c in [*p.init_containers, *p.containers]:
                    c._stop.set()
                    c.kill()
            if getattr(self, "prober", None) is not None:
                self.prober.close()
            if getattr(self, "netpol", None) is not None:
                self.netpol.close()
            for p in [*self.pods.values(), *self.job_pods()]:
                for c in [*p.init_containers, *p.containers]:
                    c.stop()
            for ns in self.netns:
                for _ in range(20):
                    pids = netns_pids(ns)
                    if not pids:
                        break
                    for pid in pids:
                        kill(pid)
                    time.sleep(0.1)
            for ns in reversed(self.netns):
                run_cmd(["ip", "netns", "del", ns], check=False)
            dns.remove_netns_files(self.hosts_dirs)
            keep = os.environ.get("E2E_KEEP_LOGS")  # a directory: every container's whole log, kept
            if keep:
                with contextlib.suppress(OSError):
                    shutil.copytree(self.logdir, Path(keep) / f"{self.label}-{self.id}", dirs_exist_ok=True)
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
