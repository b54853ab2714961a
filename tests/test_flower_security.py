"""The security stacks against the real Flower they are meant for.

1. Every container of every workload of every security stack (flwr 1.26.1 and 1.41.0),
   expanded as the kubelet would, is accepted by that version's own argparse parser, and
   every file it is told to read (TLS, CA, node key, executor config, database directory)
   is one the pod really mounts, from the right Secret/ConfigMap and key. The stacks are
   rendered by the Pulumi program with real key material (RealTlsProvider), so a node
   key is not only named right but present in the Secret and the one whose public key
   is exported for registration.
2. The Kubernetes executor's `executor.yaml` is loaded by flwr 1.41's own loader and
   executor factory, and Flower ends up with exactly the pod settings we rendered.
3. Real processes: the rendered SuperLink (both dialects) started with the rendered
   certificate, key and CA, only paths and listen addresses rewritten; `/health` (or the
   gRPC TLS handshake) verified against the rendered CA for both `localhost` and
   `127.0.0.1`; the exported register script registers every SuperNode key with the
   real `flwr` CLI (and is idempotent); a real SuperNode with its own rendered key and
   args comes online.
4. Negative controls: a CA that did not sign the server certificate, and a name the
   certificate does not cover, fail verification against the same live SuperLink.
"""

from __future__ import annotations

import base64
import copy
import functools
import json
import os
import re
import signal
import socket
import ssl
import subprocess
import time
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Optional

import pytest
import tomli_w
import yaml
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from components.offline import run_program
from federation.plan import FederationPlan, load_plan
from tests.support.flower import GRPC_ERA, HTTP_ERA, PROGRAMS, ROOT, WORKLOADS, FlowerError
from tests.support.kube import container_argv, pod_for
from tests.support.stacks import daemonset_node_keys, security_stacks
from tests.support.tls_provider import RealTlsProvider, new_openssh_key

VERSIONS = (GRPC_ERA, HTTP_ERA)  # the versions with a real-Flower venv
# Flower serves the gRPC health protocol (--health-server-address) before 1.43.
GRPC_HEALTH_UNTIL = (1, 43)
FILE_FLAGS = ("ssl_certfile", "ssl_keyfile", "ssl_ca_certfile", "root_certificates",
              "auth_supernode_private_key", "executor_config")


def _version_tuple(version: str) -> tuple[int, ...]:
    return tuple(int(x) for x in version.split(".")[:2])


# --- rendering --------------------------------------------------------------------------

@dataclass
class Rendered:
    stack_id: str
    raw: dict[str, Any]
    plan: FederationPlan
    objects: list[dict[str, Any]]  # manifests, secrets shown
    outputs: dict[str, Any]
    reads: set[str]  # "namespace/name" of existing Secrets the program reads
    node_keys: Optional[dict[str, dict[str, str]]]

    def find(self, kind: str, name: str) -> Optional[dict[str, Any]]:
        return next((o for o in self.objects if o["kind"] == kind and o["metadata"]["name"] == name), None)

    def data(self, kind: str, name: str) -> Optional[dict[str, str]]:
        """A rendered Secret's/ConfigMap's files as text (stringData and decoded data)."""
        obj = self.find(kind, name)
        if obj is None:
            return None
        out = {k: base64.b64decode(v).decode() for k, v in (obj.get("data") or {}).items()} if kind == "Secret" \
            else dict(obj.get("data") or {})
        out.update(obj.get("stringData") or {})
        return out

    def workloads(self) -> list[dict[str, Any]]:
        return [o for o in self.objects if o["kind"] in WORKLOADS]

    def workload(self, name: str) -> dict[str, Any]:
        return next(o for o in self.workloads() if o["metadata"]["name"] == name)


def _render_uncached(stack_id: str) -> Rendered:
    raw = copy.deepcopy(security_stacks()[stack_id])
    config: dict[str, Any] = {"federation": raw}
    keys = None
    if raw.get("nodeAuth", {}).get("keySource") == "config":
        keys = daemonset_node_keys(new_openssh_key)
        config["nodeAuthKeys"] = keys
    run = run_program(config, "dev", provider=RealTlsProvider())
    plan = load_plan(raw, "dev", keys)
    reads = {r.read_id for r in run.registrations if r.read_id}
    return Rendered(stack_id, raw, plan, run.manifests(show_secrets=True), run.outputs, reads, keys)


render = functools.lru_cache(maxsize=None)(_render_uncached)


# --- what a pod mounts ---------------------------------------------------------------

@dataclass(frozen=True)
class Mounted:
    kind: str  # Secret / ConfigMap
    name: str
    key: str
    mode: int


def pod_files(r: Rendered, pod_spec: dict[str, Any], container: dict[str, Any]) -> dict[str, Mounted]:
    """Files a container sees from Secret and ConfigMap volumes: path -> source. A
    volume without `items` projects every key of the object (which must be rendered)."""
    volumes = {v["name"]: v for v in pod_spec.get("volumes", [])}
    files: dict[str, Mounted] = {}
    for m in container.get("volumeMounts", []):
        vol = volumes.get(m["name"], {})
        for kind, src_key, name_key in (("Secret", "secret", "secretName"), ("ConfigMap", "configMap", "name")):
            src = vol.get(src_key)
            if not src:
                continue
            name = src[name_key]
            default = src.get("defaultMode", 0o644)
            if "items" in src:
                items = [(i["key"], i["path"], i.get("mode", default)) for i in src["items"]]
            else:
                data = r.data(kind, name)
                assert data is not None, f"{kind} {name} is mounted whole but not rendered: its keys are unknown"
                items = [(k, k, default) for k in data]
            assert "subPath" not in m, "a subPath mount of a Secret/ConfigMap never sees updates"
            for key, path, mode in items:
                files[f"{m['mountPath'].rstrip('/')}/{path}"] = Mounted(kind, name, key, mode)
    return files


def claim_mounts(workload: dict[str, Any], container: dict[str, Any]) -> set[str]:
    """Mount paths backed by a PersistentVolumeClaim (StatefulSet claim templates)."""
    claims = {t["metadata"]["name"] for t in workload["spec"].get("volumeClaimTemplates", [])}
    claims |= {v["name"] for v in workload["spec"]["template"]["spec"].get("volumes", [])
               if "persistentVolumeClaim" in v}
    return {m["mountPath"].rstrip("/") for m in container.get("volumeMounts", []) if m["name"] in claims}


def key_slots(r: Rendered, pool: str) -> list[str]:
    """The nodes a DaemonSet pool has keys for (else one ordinary node)."""
    if r.node_keys and pool in r.node_keys:
        return sorted(r.node_keys[pool])
    return ["node-a"]


def started_containers(r: Rendered) -> Iterator[tuple[dict, dict, dict, list[str]]]:
    """(workload, pod, container, argv) for every container of every pod we start."""
    for obj in r.workloads():
        if obj["kind"] == "StatefulSet":
            pods = [pod_for(obj, i) for i in range(obj["spec"]["replicas"])]
        elif obj["kind"] == "DaemonSet":
            pool = obj["spec"]["template"]["metadata"]["labels"]["flower.flwr.ai/pool"]
            pods = [pod_for(obj, node=n) for n in key_slots(r, pool)]
        else:
            pods = [pod_for(obj)]
        for pod in pods:
            for c in obj["spec"]["template"]["spec"]["containers"]:
                yield obj, pod, c, container_argv(c, pod)


# --- 1. every command line, every file --------------------------------------------------

STACKS = [sid for sid, raw in security_stacks().items() if raw["version"] in VERSIONS]


def _secret_provides(r: Rendered, name: str, key: str) -> None:
    """The Secret a pod mounts exists at deploy time and has `key`: rendered by us,
    issued by our cert-manager Certificate, or the user's Secret the program reads."""
    data = r.data("Secret", name)
    if data is not None:
        assert key in data, f"Secret {name} has no key {key} ({sorted(data)})"
        return
    certs = [o for o in r.objects if o["kind"] == "Certificate" and o["spec"]["secretName"] == name]
    if certs:
        assert key in ("tls.crt", "tls.key", "ca.crt"), f"cert-manager writes no key {key}"
        return
    assert f"{r.plan.namespace}/{name}" in r.reads, f"Secret {name} is neither rendered, issued nor an existing one"


def _check_mounted(r: Rendered, files: dict[str, Mounted], path: Optional[str], kind: str, name: str, key: str) -> Mounted:
    assert path in files, f"{path} is not mounted ({sorted(files)})"
    got = files[path]
    assert (got.kind, got.name, got.key) == (kind, name, key), f"{path} comes from {got}, not {kind} {name}/{key}"
    if kind == "Secret":
        _secret_provides(r, name, key)
    else:
        data = r.data(kind, name)
        assert data is not None and key in data, f"ConfigMap {name} with key {key} is not rendered"
    return got


def _probe_ports(c: dict[str, Any]) -> set:
    return {c[p].get("grpc", {}).get("port") for p in ("livenessProbe", "readinessProbe") if p in c}


def _check_health(version: str, program: str, parsed: dict, c: dict, trust: bool) -> Optional[int]:
    http_superlink = program == "flower-superlink" and parsed.get("serverappio_api_address") is None
    if http_superlink:
        # HTTP era: GET /health on the API port, over TLS when TLS is on.
        assert parsed["health_server_address"] is None
        ports = {p["name"]: p["containerPort"] for p in c["ports"]}
        for probe in ("livenessProbe", "readinessProbe"):
            get = c[probe]["httpGet"]
            assert get["path"] == "/health"
            assert ports.get(get["port"], get["port"]) == parsed["port"]
            assert get["scheme"] == ("HTTPS" if trust else "HTTP")
        return None
    assert _version_tuple(version) < GRPC_HEALTH_UNTIL
    address = parsed["health_server_address"]
    assert address is not None, f"{program} starts no gRPC health server, but its probes are gRPC"
    host, port = address.rsplit(":", 1)
    assert host == "0.0.0.0", "the kubelet probes the pod IP"
    assert _probe_ports(c) == {int(port)}, f"probes {_probe_ports(c)} vs health server {address}"
    return int(port)


@pytest.mark.parametrize("stack_id", STACKS)
def test_every_container_is_accepted_and_reads_mounted_files(stack_id, flower):
    r = render(stack_id)
    plan, version = r.plan, r.raw["version"]
    cli = flower[version]
    trust = plan.trust
    node_auth = plan.spec.node_auth.enabled
    public_keys = (r.outputs.get("nodeAuth") or {}).get("publicKeys", {})
    started = list(started_containers(r))
    assert {c["name"] for _, _, c, _ in started} >= {"superlink", "supernode"}
    health_ports: dict[tuple[str, str], list[int]] = {}
    supernodes_seen = 0

    for workload, pod, c, argv in started:
        program = PROGRAMS[c["name"]]
        parsed = cli.parse(program, argv)
        spec = workload["spec"]["template"]["spec"]
        files = pod_files(r, spec, c)
        for flag in FILE_FLAGS:
            if parsed.get(flag):
                assert parsed[flag] in files, f"{c['name']}: --{flag.replace('_', '-')} {parsed[flag]} is not mounted"
        port = _check_health(version, program, parsed, c, trust is not None)
        if port is not None:
            health_ports.setdefault((pod["name"], pod["nodeName"]), []).append(port)

        if c["name"] == "superlink":
            if trust:
                assert parsed["insecure"] is False
                _check_mounted(r, files, parsed["ssl_certfile"], "Secret", trust.server_secret, "tls.crt")
                key = _check_mounted(r, files, parsed["ssl_keyfile"], "Secret", trust.server_secret, "tls.key")
                assert key.mode & 0o007 == 0, f"server key mode {oct(key.mode)} is world-accessible"
                _check_mounted(r, files, parsed["ssl_ca_certfile"], "Secret", trust.ca_secret, trust.ca_key)
                _check_server_pair(r, trust.server_secret)
            else:
                assert parsed["insecure"] is True and not files
            assert parsed["enable_supernode_auth"] is node_auth
            if plan.spec.superlink.persistence.enabled:
                db_dir = os.path.dirname(parsed["database"])
                assert db_dir in claim_mounts(workload, c), f"--database {parsed['database']} is not on a volume claim"
            else:
                assert parsed["database"] == ":flwr-in-memory:"

        elif c["name"] == "supernode":
            supernodes_seen += 1
            if trust:
                assert parsed["insecure"] is False
                _check_mounted(r, files, parsed["root_certificates"], "Secret", trust.ca_secret, trust.ca_key)
            else:
                assert parsed["insecure"] is True
            # A SuperNode never mounts the server's private key, nor another pool's keys.
            assert all(f.name != getattr(trust, "server_secret", None) for f in files.values())
            pool = pod["labels"]["flower.flwr.ai/pool"]
            if node_auth:
                slot = pod["labels"].get("apps.kubernetes.io/pod-index") or pod["nodeName"]
                secret = f"{plan.name}-supernode-{pool}-node-keys"
                key = f"node-{slot}.key"
                got = _check_mounted(r, files, parsed["auth_supernode_private_key"], "Secret", secret, key)
                assert got.mode & 0o007 == 0, f"node key mode {oct(got.mode)} is world-accessible"
                assert {f.name for f in files.values() if f.kind == "Secret"} <= {secret, getattr(trust, "ca_secret", None)}
                assert key in r.find("Secret", secret)["stringData"]  # real key material, per pod
                _check_node_key(r.find("Secret", secret)["stringData"][key], public_keys[pool][slot])
            else:
                assert parsed["auth_supernode_private_key"] is None
                assert not any("node-keys" in f.name for f in files.values())

        else:  # a SuperExec
            if parsed.get("root_certificates"):
                _check_mounted(r, files, parsed["root_certificates"], "Secret", trust.ca_secret, trust.ca_key)
            executor = parsed.get("executor")
            if executor is not None and "kubernetes" in str(executor):
                _check_mounted(r, files, parsed["executor_config"], "ConfigMap",
                               plan.names.executor_config(workload["metadata"]["name"]), "executor.yaml")
            else:
                assert parsed.get("executor_config") is None
            # Only the SuperLink holds the server key.
            assert all(not (f.kind == "Secret" and f.key == "tls.key") for f in files.values())

    assert supernodes_seen == sum(
        len(key_slots(r, p.name)) if plan.spec.mode == "DaemonSet" else p.replicas for p in plan.spec.supernodes.pools)
    for pod, ports in health_ports.items():  # sidecars must not share a health port
        assert len(ports) == len(set(ports)), f"{pod}: health ports {ports} collide"


def _check_server_pair(r: Rendered, server_secret: str) -> None:
    """With generated TLS: the mounted key is the certificate's, and the CA the clients
    mount signed it."""
    data = r.data("Secret", server_secret)
    if data is None or r.plan.trust.source != "generate":
        return
    cert = x509.load_pem_x509_certificate(data["tls.crt"].encode())
    key = serialization.load_pem_private_key(data["tls.key"].encode(), None)
    assert cert.public_key().public_numbers() == key.public_key().public_numbers()
    ca = x509.load_pem_x509_certificate(r.data("Secret", r.plan.trust.ca_secret)[r.plan.trust.ca_key].encode())
    cert.verify_directly_issued_by(ca)


def _check_node_key(private_openssh: str, exported_public: str) -> None:
    """The pod's key is an ECDSA P-384 OpenSSH key whose public half is the one the
    register script registers."""
    key = serialization.load_ssh_private_key(private_openssh.encode(), None)
    assert isinstance(key, ec.EllipticCurvePrivateKey) and isinstance(key.curve, ec.SECP384R1)
    line = key.public_key().public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH).decode()
    assert exported_public.split()[:2] == line.split()[:2]


def test_daemonset_pods_run_only_on_nodes_that_have_a_key():
    """A DaemonSet with supplied keys must not start SuperNodes on nodes without a key:
    such a pod's `--auth-supernode-private-key node-<node>.key` does not exist, so it
    would crash-loop. The pod template must restrict scheduling to the key's nodes."""
    r = render("http-daemonset-supplied-keys")
    for ds in (o for o in r.objects if o["kind"] == "DaemonSet"):
        pool = ds["spec"]["template"]["metadata"]["labels"]["flower.flwr.ai/pool"]
        allowed = _schedulable_nodes(ds["spec"]["template"]["spec"])
        assert allowed is not None, f"{ds['metadata']['name']}: pods go to every node, keys exist for {key_slots(r, pool)}"
        assert allowed <= set(key_slots(r, pool))


def _schedulable_nodes(pod_spec: dict[str, Any]) -> Optional[set[str]]:
    """Node names a pod may run on, if its required node affinity pins them (by the
    node's name field or its kubernetes.io/hostname label); None if unrestricted."""
    required = (pod_spec.get("affinity", {}).get("nodeAffinity", {})
                .get("requiredDuringSchedulingIgnoredDuringExecution", {}))
    allowed: Optional[set[str]] = None
    for term in required.get("nodeSelectorTerms", []):
        names = None
        for expr in term.get("matchFields", []) + term.get("matchExpressions", []):
            if expr["key"] in ("metadata.name", "kubernetes.io/hostname") and expr["operator"] == "In":
                names = set(expr["values"]) if names is None else names & set(expr["values"])
        if names is None:
            return None  # one term lets the pod anywhere
        allowed = names if allowed is None else allowed | names
    host = pod_spec.get("nodeSelector", {}).get("kubernetes.io/hostname")
    if host is not None:
        allowed = {host} if allowed is None else allowed & {host}
    return allowed


# --- 2. the Kubernetes executor config, as flwr 1.41 loads it --------------------------

def test_kubernetes_executor_config_is_what_flower_loads(flower):
    r = render("http-executor-kubernetes")
    plan = r.plan
    cli = flower[HTTP_ERA]
    checked = 0
    for workload, pod, c, argv in started_containers(r):
        if not c["name"].startswith("superexec"):
            continue
        parsed = cli.parse("flower-superexec", argv)
        assert argv[argv.index("--executor"):argv.index("--executor") + 4] == [
            "--executor", "kubernetes", "--executor-config", "/etc/flower/executor/executor.yaml"]
        assert "kubernetes" in str(parsed["executor"])
        assert parsed["executor_config"] == "/etc/flower/executor/executor.yaml"
        files = pod_files(r, workload["spec"]["template"]["spec"], c)
        mounted = _check_mounted(r, files, parsed["executor_config"], "ConfigMap",
                                 plan.names.executor_config(workload["metadata"]["name"]), "executor.yaml")
        text = r.data("ConfigMap", mounted.name)["executor.yaml"]
        rendered = yaml.safe_load(text)
        loaded = flower[HTTP_ERA].executor_config(text)

        assert loaded["namespace"] == rendered["namespace"] == plan.namespace
        assert loaded["image"] == rendered["image"] == f"flwr/superexec:{HTTP_ERA}"
        assert loaded["image_pull_policy"] == rendered["image-pull-policy"]
        assert loaded["service_account_name"] == rendered["service-account-name"]
        sa = r.find("ServiceAccount", loaded["service_account_name"])
        assert sa is not None and sa["automountServiceAccountToken"] is False, "task pods need no API token"
        assert loaded["labels"] == rendered["labels"]
        assert loaded["labels"]["flower.flwr.ai/task-role"] == (
            "serverapp" if c["name"] == "superexec-serverapp" else pod["labels"]["flower.flwr.ai/pool"])
        assert loaded["pod_security_context"] == rendered["pod-security-context"]
        assert loaded["pod_security_context"]["runAsNonRoot"] is True
        assert loaded["container_security_context"] == rendered["container-security-context"]
        assert loaded["container_security_context"]["allowPrivilegeEscalation"] is False
        assert loaded["container_security_context"]["readOnlyRootFilesystem"] is True
        assert loaded["volumes"] == rendered["volumes"] and loaded["volume_mounts"] == rendered["volume-mounts"]
        assert loaded["resources"] == rendered.get("resources")
        assert loaded["active_pod_budget"] == 4  # the user's executor.config passes through
        # The SuperExec itself talks to the API server: a token and a binding to the executor Role.
        sa_name = workload["spec"]["template"]["spec"]["serviceAccountName"]
        assert r.find("ServiceAccount", sa_name)["automountServiceAccountToken"] is True
        assert any(b["roleRef"]["name"] == plan.names.executor_role and
                   {"kind": "ServiceAccount", "name": sa_name, "namespace": plan.namespace} in b["subjects"]
                   for b in r.objects if b["kind"] == "RoleBinding")
        checked += 1
    # The ServerApp SuperExec, and one ClientApp SuperExec per SuperNode.
    assert checked == 1 + sum(p.replicas for p in plan.spec.supernodes.pools)


def test_flower_rejects_a_broken_executor_config(flower):
    """Negative control: the loader really validates (missing image, secret volumes)."""
    r = render("http-executor-kubernetes")
    cm = next(o for o in r.objects if o["kind"] == "ConfigMap" and "executor.yaml" in o["data"])
    good = yaml.safe_load(cm["data"]["executor.yaml"])
    no_image = {k: v for k, v in good.items() if k != "image"}
    with pytest.raises(FlowerError, match="image"):
        flower[HTTP_ERA].executor_config(yaml.safe_dump(no_image))
    secret_volume = {**good, "volumes": [{"name": "x", "secret": {"secretName": "s"}}]}
    with pytest.raises(FlowerError, match="secret"):
        flower[HTTP_ERA].executor_config(yaml.safe_dump(secret_volume))


# --- 3. real SuperLink, real certificates, real flwr CLI -------------------------------

LIVE_STACKS = {GRPC_ERA: "grpc-nodeauth", HTTP_ERA: "http-nodeauth"}
READY_TIMEOUT = 30
CLI_TIMEOUT = 60


def venv_bin(version: str) -> Path:
    return ROOT / f".venv-flwr-{version}" / "bin"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class PortMap(dict):
    """Container port -> a free local port, picked on first use."""

    def __missing__(self, port: int) -> int:
        self[port] = _free_port()
        return self[port]


def _descendants(pid: int) -> list[int]:
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


def _signal(pid: int, sig: int, group: bool = False) -> None:
    try:
        os.killpg(pid, sig) if group else os.kill(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


@dataclass
class Processes:
    """Processes we start, each in its own session; stop() ends them, their process
    groups and their descendants (Flower starts its SuperExec in a new session)."""
    workdir: Path
    procs: list[tuple[str, subprocess.Popen, Path]] = field(default_factory=list)

    def start(self, name: str, argv: list[str], env: dict[str, str]) -> subprocess.Popen:
        log = self.workdir / f"{name}.log"
        with open(log, "wb") as out:
            proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    env=env, cwd=self.workdir, start_new_session=True)
        self.procs.append((name, proc, log))
        return proc

    def log(self, name: str) -> str:
        return next(log for n, _, log in self.procs if n == name).read_text(errors="replace")

    def stop(self) -> None:
        for _, proc, _ in reversed(self.procs):
            family = _descendants(proc.pid)
            _signal(proc.pid, signal.SIGTERM, group=True)
            for pid in family:
                _signal(pid, signal.SIGTERM)
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
            _signal(proc.pid, signal.SIGKILL, group=True)
            for pid in family:
                _signal(pid, signal.SIGKILL)
            proc.wait(timeout=5)


def run_bounded(argv: list[str], env: dict[str, str], timeout: float = CLI_TIMEOUT,
                cwd: Optional[Path] = None) -> subprocess.CompletedProcess:
    """subprocess.run with a timeout that kills the whole process group."""
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                            cwd=cwd, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _signal(proc.pid, signal.SIGKILL, group=True)
        out, err = proc.communicate()
        raise AssertionError(f"{argv} timed out after {timeout}s:\n{out}\n{err}")
    finally:
        _signal(proc.pid, signal.SIGKILL, group=True)
    return subprocess.CompletedProcess(argv, proc.returncode, out, err)


def materialize(r: Rendered, workload: dict, container: dict, root: Path) -> dict[str, Mounted]:
    """Write the files the container mounts under `root` (same paths, same modes), and
    create its other mount points (volume claims, scratch)."""
    files = pod_files(r, workload["spec"]["template"]["spec"], container)
    for path, src in files.items():
        data = r.data(src.kind, src.name)
        assert data is not None and src.key in data, f"{src} is not rendered with real content"
        target = root / path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(data[src.key])
        target.chmod(src.mode)
    for m in container.get("volumeMounts", []):
        (root / m["mountPath"].lstrip("/")).mkdir(parents=True, exist_ok=True)
    return files


ADDRESS = re.compile(r"(0\.0\.0\.0|127\.0\.0\.1):(\d+)")


def localize(argv: list[str], container: dict, root: Path, ports: PortMap,
             superlink_ports: Optional[PortMap] = None) -> list[str]:
    """The rendered args, runnable here: mount paths under `root`, listen addresses on
    127.0.0.1 at free ports, the SuperLink address at its local port. Nothing else."""
    mounts = [m["mountPath"].rstrip("/") for m in container.get("volumeMounts", [])]
    out = []
    for i, arg in enumerate(argv):
        flag = argv[i - 1] if i else None
        if flag == "--host":
            arg = "127.0.0.1"
        elif flag == "--port":
            arg = str(ports[int(arg)])
        elif flag == "--superlink":
            arg = f"127.0.0.1:{superlink_ports[int(arg.rsplit(':', 1)[1])]}"
        elif ADDRESS.fullmatch(arg):
            arg = f"127.0.0.1:{ports[int(ADDRESS.fullmatch(arg).group(2))]}"
        elif any(arg == m or arg.startswith(m + "/") for m in mounts):
            arg = str(root) + arg
        out.append(arg)
    return out


def process_env(version: str, home: Path) -> dict[str, str]:
    home.mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FLWR_", "VIRTUAL_ENV", "PYTHON"))}
    # Flower starts flower-superexec (and the CLI) from PATH, as in the image.
    env.update(PATH=f"{venv_bin(version)}{os.pathsep}{os.environ.get('PATH', '')}", HOME=str(home),
               FLWR_HOME=str(home / ".flwr"), FLWR_TELEMETRY_ENABLED="0", NO_COLOR="1")
    return env


def tls_probe(port: int, cafile: Path, server_hostname: str, http_path: Optional[str] = None,
              timeout: float = 3) -> tuple[Optional[int], bytes]:
    """Connect to 127.0.0.1:port, verifying the certificate against `cafile` only (no
    system CAs) for `server_hostname`; for HTTP, GET `http_path`. Returns (status, DER
    of the server certificate)."""
    ctx = ssl.create_default_context(cafile=str(cafile))
    assert ctx.verify_mode == ssl.CERT_REQUIRED and ctx.check_hostname
    ctx.set_alpn_protocols(["http/1.1"] if http_path else ["h2"])
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        with ctx.wrap_socket(sock, server_hostname=server_hostname) as tls:
            der = tls.getpeercert(binary_form=True)
            if http_path is None:
                return None, der
            tls.sendall(f"GET {http_path} HTTP/1.1\r\nHost: {server_hostname}\r\nConnection: close\r\n\r\n".encode())
            head = b""
            while b"\r\n" not in head:
                chunk = tls.recv(4096)
                if not chunk:
                    break
                head += chunk
            return int(head.split(b" ", 2)[1]), der


@dataclass
class LiveSuperLink:
    version: str
    r: Rendered
    procs: Processes
    root: Path
    ports: PortMap
    ca_file: Path  # the exported caCertificate output
    api_ports: list[int]  # local ports of the TLS APIs (HTTP: one; gRPC: fleet, control)
    health_port: Optional[int]  # local gRPC health port, if any
    http: bool

    def probe(self, port: int, cafile: Path, name: str):
        return tls_probe(port, cafile, name, "/health" if self.http else None)


def _superlink(r: Rendered) -> tuple[dict, dict, dict, list[str]]:
    return next(s for s in started_containers(r) if s[2]["name"] == "superlink")


@pytest.fixture(scope="module", params=VERSIONS)
def live(request, tmp_path_factory) -> Iterator[LiveSuperLink]:
    version = request.param
    r = _render_uncached(LIVE_STACKS[version])
    workdir = tmp_path_factory.mktemp(f"live-{version}")
    procs = Processes(workdir)
    try:
        workload, pod, c, argv = _superlink(r)
        root = workdir / "superlink-pod"
        materialize(r, workload, c, root)
        ports = PortMap()
        args = localize(argv, c, root, ports)
        http = "--host" in argv
        if http:
            assert (argv[argv.index("--host") + 1], argv[argv.index("--port") + 1]) == ("0.0.0.0", "8000")
            api_ports = [ports[8000]]
        else:
            api_ports = [ports[r.plan.ports.fleet], ports[r.plan.ports.control]]
        health = next((a for f, a in zip(argv, argv[1:]) if f == "--health-server-address"), None)
        health_port = ports[int(health.rsplit(":", 1)[1])] if health else None
        ca_file = workdir / "ca.crt"
        ca_file.write_text(r.outputs["caCertificate"])
        proc = procs.start("superlink", [str(venv_bin(version) / "flower-superlink"), *args],
                           process_env(version, root / "app"))
        link = LiveSuperLink(version, r, procs, root, ports, ca_file, api_ports, health_port, http)
        deadline = time.monotonic() + READY_TIMEOUT
        while True:
            assert proc.poll() is None, f"flower-superlink exited {proc.returncode}:\n{procs.log('superlink')}"
            try:
                status, _ = link.probe(api_ports[0], ca_file, "localhost")
                if status in (None, 200):
                    break
            except (OSError, ssl.SSLError):
                pass
            assert time.monotonic() < deadline, f"SuperLink not ready in {READY_TIMEOUT}s:\n{procs.log('superlink')}"
            time.sleep(0.2)
        yield link
    finally:
        procs.stop()


def test_real_superlink_serves_the_rendered_certificate(live, flower):
    r = live.r
    server = r.data("Secret", r.plan.trust.server_secret)
    assert r.outputs["caCertificate"] == r.data("Secret", r.plan.trust.ca_secret)["ca.crt"]
    served = x509.load_pem_x509_certificate(server["tls.crt"].encode()).public_bytes(serialization.Encoding.DER)
    for port in live.api_ports:
        for name in ("localhost", "127.0.0.1"):  # both SANs verify, hostname check on
            status, der = live.probe(port, live.ca_file, name)
            assert der == served
            if live.http:
                assert status == 200, f"GET https://{name}:{port}/health -> {status}"
    if live.health_port is not None:  # gRPC era: what the kubelet's grpc probe asks
        assert flower[live.version].grpc_health(f"127.0.0.1:{live.health_port}") == "SERVING"
    assert live.procs.procs[0][1].poll() is None


def test_a_ca_that_did_not_sign_the_certificate_is_refused(live):
    """Negative control: the same check fails with another deployment's CA, and for a
    name the certificate does not cover."""
    other = _render_uncached(LIVE_STACKS[live.version])
    assert other.outputs["caCertificate"] != live.r.outputs["caCertificate"]
    wrong_ca = live.root.parent / "other-ca.crt"
    wrong_ca.write_text(other.outputs["caCertificate"])
    for port in live.api_ports:
        for name in ("localhost", "127.0.0.1"):
            with pytest.raises(ssl.SSLCertVerificationError, match="unable to get local issuer|certificate verify failed"):
                live.probe(port, wrong_ca, name)
        with pytest.raises(ssl.SSLCertVerificationError, match="mismatch|doesn't match"):
            live.probe(port, live.ca_file, "flower.example.com")
    # ...while the right CA still works (the SuperLink did not just go away).
    live.probe(live.api_ports[0], live.ca_file, "localhost")


def _cli_home(live: LiveSuperLink) -> tuple[str, dict[str, str]]:
    """FLWR_HOME with config.toml from the exported flwrConfig: only the address (to the
    local port of the port it names) and the CA path changed."""
    doc = tomllib.loads(live.r.outputs["flwrConfig"])
    name = doc["superlink"]["default"]
    conn = doc["superlink"][name]
    assert set(conn) == {"address", "root-certificates"}, conn  # TLS, no `insecure`
    host, port = conn["address"].rsplit(":", 1)
    assert host == live.r.plan.service_host(live.r.plan.names.superlink)
    assert int(port) in live.ports, f"flwrConfig dials port {port}, the SuperLink listens on {sorted(live.ports)}"
    conn["address"] = f"127.0.0.1:{live.ports[int(port)]}"
    conn["root-certificates"] = str(live.ca_file)
    env = process_env(live.version, live.root.parent / "cli")
    Path(env["FLWR_HOME"]).mkdir(parents=True, exist_ok=True)
    (Path(env["FLWR_HOME"]) / "config.toml").write_text(tomli_w.dumps(doc))
    return name, env


def _nodes(live: LiveSuperLink, name: str, env: dict[str, str]) -> list[dict]:
    res = run_bounded([str(venv_bin(live.version) / "flwr"), "supernode", "list", name, "--format", "json"], env)
    assert res.returncode == 0, res.stdout + res.stderr
    doc = json.loads(res.stdout[res.stdout.index("{"):])
    assert doc["success"] is True, doc
    return doc["nodes"]


def test_register_script_and_a_real_supernode(live, flower):
    r = live.r
    name, env = _cli_home(live)
    script = live.root.parent / "register.sh"
    script.write_text(r.outputs["nodeAuth"]["registerScript"])
    expected = [f"{pool}/{slot}" for pool, keys in sorted(r.outputs["nodeAuth"]["publicKeys"].items())
                for slot in sorted(keys, key=int)]
    assert len(expected) == 4

    first = run_bounded(["sh", str(script)], env)
    assert first.returncode == 0, first.stdout + first.stderr
    assert first.stdout.splitlines() == [f"registered {k}" for k in expected], first.stdout + first.stderr

    # SuperNode alpha-1, with its rendered args and only its own key file.
    sts = r.workload(r.plan.names.pool("alpha"))
    pod = pod_for(sts, 1)
    c = sts["spec"]["template"]["spec"]["containers"][0]
    root = live.root.parent / "supernode-alpha-1"
    files = materialize(r, sts, c, root)
    argv = container_argv(c, pod)
    key_path = argv[argv.index("--auth-supernode-private-key") + 1]
    assert files[key_path].key == "node-1.key"
    args = localize(argv, c, root, PortMap(), superlink_ports=live.ports)
    node = live.procs.start("supernode-alpha-1", [str(venv_bin(live.version) / "flower-supernode"), *args],
                            process_env(live.version, root / "app"))

    again = run_bounded(["sh", str(script)], env)  # idempotent
    assert again.returncode == 0, again.stdout + again.stderr
    assert again.stdout.splitlines() == [f"already registered: {k}" for k in expected], again.stdout + again.stderr

    deadline = time.monotonic() + READY_TIMEOUT
    node_id = None
    while True:
        assert node.poll() is None, f"flower-supernode exited {node.returncode}:\n{live.procs.log('supernode-alpha-1')}"
        if node_id is None:
            m = re.search(r"SuperNode ID: (\d+)", live.procs.log("supernode-alpha-1"))
            node_id = m and m.group(1)
        nodes = _nodes(live, name, env)
        assert len(nodes) == 4, nodes
        status = {n["node-id"]: n["status"] for n in nodes}
        if node_id is not None and status.get(node_id) == "online":
            break
        assert time.monotonic() < deadline, f"SuperNode not online in {READY_TIMEOUT}s: {status}\n" + \
            live.procs.log("supernode-alpha-1")
        time.sleep(0.5)
    assert sorted(status.values()) == ["online", "registered", "registered", "registered"]
    health = next(a for f, a in zip(args, args[1:]) if f == "--health-server-address")
    assert flower[live.version].grpc_health(health) == "SERVING"
