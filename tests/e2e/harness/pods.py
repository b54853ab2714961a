"""Pods, as the kubelet makes them (which pods a workload has, the controllers' part, is
workload_pods.py): each with its network namespace (kept across recreations), its volumes
(fresh per pod) and its containers, init containers first; and the command that starts
each container through podinit.py.

Images: Flower's (`flwr/superlink:<v>` ... -> the program of the Flower venv of version `<v>`, any tested
`<v>`) and nginx's (`nginxinc/nginx-unprivileged`, `nginx`, any tag: the container's `command`, `nginx` being the host's
Debian nginx, with the image's environment and working dir `/`); any other image is refused. Either runs
as the container's securityContext says (user, groups, read-only root, no_new_privs, capabilities)."""

from __future__ import annotations

import copy
import functools
import json
import os
import re
import secrets
import shutil
import subprocess
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

from tests.e2e.harness.containers import Container
from tests.e2e.harness.host import HarnessError, ns_exec
from tests.e2e.harness.volumes import MOUNTPOINTS, _unsearchable, container_mounts, make_volumes
from tests.support.kube import container_command, container_env

if TYPE_CHECKING:
    from tests.e2e.harness.cluster import Cluster

NODES = ("node-a", "node-b")
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
# What every container's environment starts from, as Flower's images set it; plus, the harness's own,
# PYTHONFAULTHANDLER: a process the kubelet kills for failed probes first gets SIGABRT and writes every
# thread's stack to its log (probes.ContainerProbes._probe_kill), so a hang says where it hung.
IMAGE_ENV = {"LANG": "C.UTF-8", "PYTHONFAULTHANDLER": "1"}

# nginx images (the Fleet-only proxy's): run with the host's nginx (Debian's `nginx`, which `make e2e` / `make test`
# install as root). Their ENTRYPOINT is a shell script (docker-entrypoint.sh) the harness does not emulate, so a
# container of them must give `command`, whose program must be `nginx`. The two repositories, as Docker Hub spells them.
NGINX_REPOSITORIES = frozenset(
    {
        "nginxinc/nginx-unprivileged",
        "docker.io/nginxinc/nginx-unprivileged",
        "nginx",
        "library/nginx",
        "docker.io/library/nginx",
        "docker.io/nginx",
    }
)
NGINX_MISSING = (
    "`nginx` is not installed: the e2e harness runs nginx images (the Fleet-only proxy) and its Gateway "
    "emulation with Debian's nginx (`make e2e` / `make test` install it as root)"
)
# HOME as the images' /etc/passwd gives it (containerd sets it from there): uid 101 is their `nginx` user.
NGINX_HOMES = {0: "/root", 101: "/var/cache/nginx"}


def split_image(image: str) -> tuple[str, str]:
    """(repository, tag) of an image reference; a digest (`@sha256:...`) is dropped, the tag is "" without one."""
    ref = image.split("@", 1)[0]
    if ":" in ref.rsplit("/", 1)[-1]:
        repo, _, tag = ref.rpartition(":")
        return repo, tag
    return ref, ""


def nginx_path() -> Optional[str]:
    """The host's nginx: on PATH, or where Debian installs it (root's PATH has /usr/sbin, not every PATH)."""
    found = shutil.which("nginx")
    if found:
        return found
    return next((p for p in ("/usr/sbin/nginx", "/sbin/nginx") if os.access(p, os.X_OK)), None)


@functools.lru_cache(maxsize=4)
def nginx_unusable(nginx: str) -> Optional[str]:
    """Why the host's `nginx` cannot stand in for the images, or None: it must have the http ssl and
    proxy modules built in (`nginx -V`), and a non-root container user (uid 101) must be able to run it
    under a read-only root: the binary and every shared object it loads (`ldd`) world-readable (the
    binary also executable) below directories anyone may search. As an image provides them, nothing is
    exposed."""
    built = subprocess.run([nginx, "-V"], capture_output=True, text=True, timeout=20).stderr
    if "--with-http_ssl_module" not in built or "--without-http_proxy_module" in built:
        return f"{nginx} lacks the http ssl or proxy module (`nginx -V`: {built.strip()[-300:]})"
    paths = [Path(os.path.realpath(nginx))]
    res = subprocess.run(["ldd", nginx], capture_output=True, text=True, timeout=20)
    for line in res.stdout.splitlines():
        lib = line.split("=>")[-1].strip().split(" (")[0].strip()
        if lib.startswith("/"):
            paths.append(Path(os.path.realpath(lib)))
    for path in paths:
        mask = _unsearchable(path.parent)
        if mask is not None:
            return f"{path}: {mask} is not searchable by a non-root user"
        mode = path.stat().st_mode
        if not mode & 0o004 or (path == paths[0] and not mode & 0o001):
            return f"{path} is not readable (executable) by a non-root user"
    return None


def host_nginx() -> str:
    """The host's nginx, fit to run the nginx images and the Gateway emulation; else a HarnessError saying why."""
    nginx = nginx_path()
    if nginx is None:
        raise HarnessError(NGINX_MISSING)
    why = nginx_unusable(nginx)
    if why is not None:
        raise HarnessError(f"the host's nginx cannot stand in for the nginx images: {why}")
    return nginx


class Pod:
    def __init__(
        self,
        cluster: Cluster,
        owner: dict[str, Any],
        name: str,
        labels: dict[str, str],
        node: str,
        ordinal: Optional[int],
        hostname: Optional[str],
        subdomain: Optional[str],
    ):
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
        self.terminating = False  # deleted gracefully, containers stopping (terminate)
        self.dir: Optional[Path] = None

    # -- identity, as the downward API sees it
    def identity(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "namespace": self.namespace,
            "nodeName": self.node,
            "labels": self.labels,
            "annotations": self.template["metadata"].get("annotations", {}),
            "podIP": self.ip,
            "hostIP": self.cluster.bridge_ip,
            "serviceAccountName": self.spec.get("serviceAccountName", "default"),
            "uid": self.uid,
        }

    # -- sandbox (network namespace), kept across recreations
    def create_sandbox(self) -> None:
        self.ip = self.cluster.add_bridged_netns(self.netns)

    # -- volumes, fresh for every pod (PVCs excepted)
    def prepare_volumes(self) -> None:
        self.uid = secrets.token_hex(4)
        self.dir = self.cluster.workdir / "pods" / f"{self.name}-{self.uid}"
        self.dir.mkdir(parents=True)
        self.volume_dirs, self.read_only_volumes = {}, set()
        make_volumes(
            self.name,
            self.owner,
            self.spec,
            self.dir / "volumes",
            self.cluster.data,
            self.cluster.pvc_dir,
            self.volume_dirs,
            self.read_only_volumes,
        )

    def remove_volumes(self) -> None:
        if self.dir is not None:
            shutil.rmtree(self.dir, ignore_errors=True)
            self.dir = None

    # -- containers
    def container_launch(self, c: Container) -> tuple[list[str], Path]:
        """The command that runs container `c`, and its podinit spec file."""
        spec = c.spec
        image = spec["image"]
        repo, tag = split_image(image)
        pod_sc = self.spec.get("securityContext", {})
        sc = {**pod_sc, **spec.get("securityContext", {})}
        uid, gid = sc.get("runAsUser", 0), sc.get("runAsGroup", 0)
        lookup = self.cluster.data
        if repo in NGINX_REPOSITORIES:
            argv, env, workdir, exposures, image_paths = self._nginx_image(c, tag, uid)
        elif repo in IMAGE_ENTRYPOINTS:
            try:
                images = self.cluster.flower_images(tag.split("-")[0])
            except HarnessError as exc:
                raise HarnessError(f"{self.name}/{c.name}: image {image}: {exc}") from None
            venv_bin = images.venv / "bin"
            entry = [str(venv_bin / IMAGE_ENTRYPOINTS[repo])]
            argv = container_command(spec, self.identity(), entry, lookup)
            env = {"PATH": f"{venv_bin}:{BASE_PATH}", "HOSTNAME": self.name, "HOME": IMAGE_HOME, **IMAGE_ENV}
            workdir, exposures, image_paths = IMAGE_HOME, images.exposures, images.paths
        else:
            raise HarnessError(f"{self.name}/{c.name}: image {image} is neither a Flower nor an nginx image")
        env.update(container_env(spec, self.identity(), lookup))
        if sc.get("runAsNonRoot") and uid == 0:
            raise HarnessError(f"{self.name}/{c.name}: runAsNonRoot, but it would run as root")
        groups = [g for g in [pod_sc.get("fsGroup"), *pod_sc.get("supplementalGroups", [])] if g is not None]
        caps = sc.get("capabilities", {})
        if caps.get("add"):
            raise HarnessError(f"{self.name}/{c.name}: added capabilities are not emulated")
        user = {
            "uid": uid,
            "gid": gid,
            "groups": groups,
            "noNewPrivs": sc.get("allowPrivilegeEscalation") is False,
            "dropAllCaps": "ALL" in caps.get("drop", []),
        }
        mounts = container_mounts(f"{self.name}/{c.name}", spec, self.volume_dirs, self.read_only_volumes)
        launch = {
            "mounts": mounts,
            "expose": exposures,
            "image": image_paths,
            "hostname": self.name,
            "readOnlyRoot": bool(sc.get("readOnlyRootFilesystem")),
            "user": user,
            "setpriv": shutil.which("setpriv"),
            "env": env,
            "argv": argv,
            "cwd": spec.get("workingDir", workdir),
        }
        MOUNTPOINTS.ensure(launch["cwd"])
        spec_file = self.dir / f"{c.name}.json"
        spec_file.write_text(json.dumps(launch, indent=1))
        return ns_exec(self.netns, spec_file), spec_file

    def _nginx_image(
        self, c: Container, tag: str, uid: int
    ) -> tuple[list[str], dict[str, str], str, list[dict[str, Any]], list[str]]:
        """An nginx image's container as the host's nginx: (argv, the image's environment, its working dir,
        podinit's exposures and image paths). Its `command` runs, `nginx` being the host's binary."""
        where = f"{self.name}/{c.name}"
        if "command" not in c.spec:
            raise HarnessError(
                f"{where}: image {c.spec['image']} without `command`: its entrypoint (docker-entrypoint.sh) "
                "is not emulated, give `command: [nginx, ...]`"
            )
        try:
            nginx = host_nginx()
        except HarnessError as exc:
            raise HarnessError(f"{where}: {exc}") from None
        argv = container_command(c.spec, self.identity(), [], self.cluster.data)
        if not argv or os.path.basename(argv[0]) != "nginx":
            raise HarnessError(f"{where}: only `nginx` runs from image {c.spec['image']} here, not {argv[:1]}")
        argv[0] = nginx
        # What the images set (ENV): PATH as Docker's default, NGINX_VERSION from the tag when it is a version.
        env = {"PATH": BASE_PATH, "HOSTNAME": self.name, "HOME": NGINX_HOMES.get(uid, "/")}
        version = re.match(r"\d+\.\d+\.\d+", tag)
        if version:
            env["NGINX_VERSION"] = version.group(0)
        # No WORKDIR in the images: `/`. The binary's directory is held as the image's (podinit binds it back
        # should a volume hide it); nginx_unusable checked it needs no exposure.
        return argv, env, "/", [], [os.path.dirname(os.path.realpath(nginx))]

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
                # Finished and not succeeded: the pod failed. Asked after the wait timed out, so succeeded is asked
                # again: an init container that exits 0 sets succeeded, then finished, and both may land between
                # the wait and this test (the CI run of 71d10c5: the SuperLink of scenario 2b never started).
                if self._stopping.is_set() or (c.finished.is_set() and not c.succeeded.is_set()):
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

    def terminate(self, grace: float) -> None:
        """Graceful deletion, as the kubelet does it: every container gets SIGTERM at once
        and SIGKILL after `grace` seconds; the pod is not Ready from the start."""
        self.terminating = True
        self._stopping.set()
        every = [*self.init_containers, *self.containers]
        stoppers = [threading.Thread(target=c.terminate, args=(grace,), daemon=True) for c in every]
        for t in stoppers:
            t.start()
        for t in stoppers:
            t.join(timeout=grace + 15)

    def container(self, name: str) -> Container:
        return next(c for c in self.containers if c.name == name)

    def is_ready(self) -> bool:
        return not self.terminating and bool(self.containers) and all(c.is_ready() for c in self.containers)

    @property
    def phase(self) -> str:
        """Pending, Running, Succeeded (every container exited 0 and none runs again) or
        Failed (a container failed and runs no more: restartPolicy Never)."""
        if any(c.finished.is_set() and not c.succeeded.is_set() for c in [*self.init_containers, *self.containers]):
            return "Failed"
        if self.containers and all(c.succeeded.is_set() for c in self.containers):
            return "Succeeded"
        return "Running" if any(c.running for c in self.containers) else "Pending"

    def describe(self) -> str:
        return "\n".join(c.describe() for c in [*self.init_containers, *self.containers])
