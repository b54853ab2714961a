"""Every container of every workload of every security stack (flwr 1.26.1 and
1.41.0), expanded as the kubelet would, is accepted by that version's own argparse
parser, and every file it is told to read (TLS, CA, node key, executor config, database
directory) is one the pod really mounts, from the right Secret/ConfigMap and key. The
stacks are rendered by the Pulumi program with real key material (RealTlsProvider), so a
node key is not only named right but present in the Secret and the one whose public key
is exported for registration. DaemonSet pods run only on nodes that have a key."""

from __future__ import annotations

import os
from typing import Any, Optional

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from tests.support.flower import GRPC_ERA, HTTP_ERA, PROGRAMS
from tests.support.real_render import (
    Rendered,
    check_mounted,
    claim_mounts,
    key_slots,
    pod_files,
    render,
    started_containers,
)
from tests.support.stacks import security_stacks

VERSIONS = (GRPC_ERA, HTTP_ERA)  # the versions with a real-Flower venv
# Flower serves the gRPC health protocol (--health-server-address) before 1.43.
GRPC_HEALTH_UNTIL = (1, 43)
FILE_FLAGS = (
    "ssl_certfile",
    "ssl_keyfile",
    "ssl_ca_certfile",
    "root_certificates",
    "auth_supernode_private_key",
    "executor_config",
    "superexec_auth_secret_file",
)


def _version_tuple(version: str) -> tuple[int, ...]:
    return tuple(int(x) for x in version.split(".")[:2])


STACKS = [sid for sid, raw in security_stacks().items() if raw["version"] in VERSIONS]


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
                check_mounted(r, files, parsed["ssl_certfile"], "Secret", trust.server_secret, "tls.crt")
                key = check_mounted(r, files, parsed["ssl_keyfile"], "Secret", trust.server_secret, "tls.key")
                assert key.mode & 0o007 == 0, f"server key mode {oct(key.mode)} is world-accessible"
                check_mounted(r, files, parsed["ssl_ca_certfile"], "Secret", trust.ca_secret, trust.ca_key)
                _check_server_pair(r, trust.server_secret)
            else:  # nothing to mount but, with a SuperExec hop, its auth secret
                assert parsed["insecure"] is True
                assert set(files) <= {parsed.get("superexec_auth_secret_file")}
            assert parsed["enable_supernode_auth"] is node_auth
            if _hop_protected(r):
                _check_auth_secret(r, files, parsed, plan.names.superexec_auth_secret(plan.names.superlink))
            else:
                assert parsed.get("superexec_auth_secret_file") is None
            if plan.spec.superlink.persistence.enabled:
                db_dir = os.path.dirname(parsed["database"])
                assert db_dir in claim_mounts(workload, c), f"--database {parsed['database']} is not on a volume claim"
            else:
                assert parsed["database"] == ":flwr-in-memory:"

        elif c["name"] == "supernode":
            supernodes_seen += 1
            if trust:
                assert parsed["insecure"] is False
                check_mounted(r, files, parsed["root_certificates"], "Secret", trust.ca_secret, trust.ca_key)
            else:
                assert parsed["insecure"] is True
            # A SuperNode never mounts the server's private key, nor another pool's keys.
            assert all(f.name != getattr(trust, "server_secret", None) for f in files.values())
            pool = pod["labels"]["flower.flwr.ai/pool"]
            hop_secrets = _check_runtime_api(r, files, parsed, pool)
            if node_auth:
                slot = pod["labels"].get("apps.kubernetes.io/pod-index") or pod["nodeName"]
                secret = f"{plan.name}-supernode-{pool}-node-keys"
                key = f"node-{slot}.key"
                got = check_mounted(r, files, parsed["auth_supernode_private_key"], "Secret", secret, key)
                assert got.mode & 0o007 == 0, f"node key mode {oct(got.mode)} is world-accessible"
                assert {f.name for f in files.values() if f.kind == "Secret"} <= {
                    secret,
                    getattr(trust, "ca_secret", None),
                    *hop_secrets,
                }
                assert key in r.find("Secret", secret)["stringData"]  # real key material, per pod
                _check_node_key(r.find("Secret", secret)["stringData"][key], public_keys[pool][slot])
            else:
                assert parsed["auth_supernode_private_key"] is None
                assert not any("node-keys" in f.name for f in files.values())

        else:  # a SuperExec
            _check_superexec_hop(r, c["name"], pod, files, parsed)
            if parsed.get("root_certificates"):
                runtime = plan.runtime_trust
                if c["name"] == "superexec-clientapp" and runtime is not None:
                    check_mounted(r, files, parsed["root_certificates"], "Secret", runtime.ca_secret, runtime.ca_key)
                else:
                    check_mounted(r, files, parsed["root_certificates"], "Secret", trust.ca_secret, trust.ca_key)
            executor = parsed.get("executor")
            if executor is not None and "kubernetes" in str(executor):
                check_mounted(
                    r,
                    files,
                    parsed["executor_config"],
                    "ConfigMap",
                    plan.names.executor_config(workload["metadata"]["name"]),
                    "executor.yaml",
                )
            else:
                assert parsed.get("executor_config") is None
            # Only the SuperLink holds the server key.
            assert all(not (f.kind == "Secret" and f.key == "tls.key") for f in files.values())

    assert supernodes_seen == sum(
        len(key_slots(r, p.name)) if plan.spec.mode == "DaemonSet" else p.replicas for p in plan.spec.supernodes.pools
    )
    for pod, ports in health_ports.items():  # sidecars must not share a health port
        assert len(ports) == len(set(ports)), f"{pod}: health ports {ports} collide"


def _hop_protected(r: Rendered) -> bool:
    """Flower 1.40+ with process isolation: TLS (unless insecure) and auth on the SuperExec hop."""
    return r.plan.process_isolation and _version_tuple(r.raw["version"]) >= (1, 40)


def _check_auth_secret(r: Rendered, files: dict, parsed: dict, secret: str) -> None:
    got = check_mounted(r, files, parsed["superexec_auth_secret_file"], "Secret", secret, "secret")
    assert got.mode & 0o007 == 0, f"auth secret mode {oct(got.mode)} is world-accessible"
    value = r.data("Secret", secret)["secret"]
    assert len(value) >= 32 and value.isalnum(), "the auth secret is not a generated random string"


def _check_runtime_api(r: Rendered, files: dict, parsed: dict, pool: str) -> set[str]:
    """A SuperNode's Runtime API: over TLS with its pool's certificate and signed
    SuperExec requests checked with its pool's secret, exactly when the hop is protected.
    Returns the Secrets it mounts for that."""
    plan = r.plan
    if not _hop_protected(r):
        assert parsed.get("ssl_certfile") is None and parsed.get("superexec_auth_secret_file") is None
        return set()
    auth = f"{plan.name}-supernode-{pool}-superexec-auth"
    _check_auth_secret(r, files, parsed, auth)
    runtime = plan.runtime_trust
    if runtime is None:  # insecure: true, the explicit opt-out
        assert plan.trust is None and parsed["ssl_certfile"] is None
        return {auth}
    secret = runtime.pool_secret(pool)
    check_mounted(r, files, parsed["ssl_certfile"], "Secret", secret, "tls.crt")
    key = check_mounted(r, files, parsed["ssl_keyfile"], "Secret", secret, "tls.key")
    assert key.mode & 0o007 == 0, f"Runtime API key mode {oct(key.mode)} is world-accessible"
    check_mounted(r, files, parsed["ssl_ca_certfile"], "Secret", runtime.ca_secret, runtime.ca_key)
    _check_runtime_pair(r, secret, runtime.ca_secret, runtime.ca_key, pool)
    return {auth, secret, runtime.ca_secret}


def _check_superexec_hop(r: Rendered, container: str, pod: dict, files: dict, parsed: dict) -> None:
    """Every SuperExec of a protected hop verifies its server (never --insecure while the
    federation has TLS) and signs with the secret of the server it dials."""
    if not _hop_protected(r):
        assert parsed.get("superexec_auth_secret_file") is None
        return
    plan = r.plan
    if container == "superexec-serverapp":
        owner = plan.names.superlink
    else:
        owner = plan.names.pool(pod["labels"]["flower.flwr.ai/pool"])
    _check_auth_secret(r, files, parsed, plan.names.superexec_auth_secret(owner))
    if plan.trust is not None:
        assert parsed["insecure"] is False and parsed["root_certificates"], f"{container} dials without TLS"


def _check_runtime_pair(r: Rendered, secret: str, ca_secret: str, ca_key: str, pool: str) -> None:
    """With generated TLS: the pool's key is its certificate's, the CA its SuperExecs
    trust signed it, and it names what they dial (loopback, each pod's stable name)."""
    data, ca_data = r.data("Secret", secret), r.data("Secret", ca_secret)
    if data is None or ca_data is None or r.plan.runtime_trust.source != "generate":
        return
    cert = x509.load_pem_x509_certificate(data["tls.crt"].encode())
    key = serialization.load_pem_private_key(data["tls.key"].encode(), None)
    assert cert.public_key().public_numbers() == key.public_key().public_numbers()
    cert.verify_directly_issued_by(x509.load_pem_x509_certificate(ca_data[ca_key].encode()))
    sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    svc = f"{r.plan.names.pool(pool)}.{r.plan.namespace}.svc.{r.plan.spec.cluster_domain}"
    assert {"localhost", f"*.{svc}"} <= set(sans.get_values_for_type(x509.DNSName))
    assert "127.0.0.1" in {str(ip) for ip in sans.get_values_for_type(x509.IPAddress)}


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
        assert allowed is not None, (
            f"{ds['metadata']['name']}: pods go to every node, keys exist for {key_slots(r, pool)}"
        )
        assert allowed <= set(key_slots(r, pool))


def _schedulable_nodes(pod_spec: dict[str, Any]) -> Optional[set[str]]:
    """Node names a pod may run on, if its required node affinity pins them (by the
    node's name field or its kubernetes.io/hostname label); None if unrestricted."""
    required = (
        pod_spec.get("affinity", {}).get("nodeAffinity", {}).get("requiredDuringSchedulingIgnoredDuringExecution", {})
    )
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
