"""Security properties of the real Pulumi program (`components.program.run`) under the
Pulumi mock runtime: key material stays secret, each pod mounts only what it needs,
every SuperNode replica gets a key of its own, generated certificates are what a client
verifies, pods roll when certificates change, and invalid security config stops the
program before anything is registered.

`RealTlsProvider` stands in for pulumi-tls with real keys and certificates, so the
assertions below hold for real key material, not for placeholders."""

from __future__ import annotations

import base64
import datetime
import ipaddress
import json
import os
import re
import shlex
import stat
import subprocess
from typing import Any, Optional

import pulumi
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import load_ssh_private_key, load_ssh_public_key
from cryptography.x509.oid import ExtendedKeyUsageOID
from pulumi.runtime import rpc

from components import program
from components.offline import SECRET_PLACEHOLDER, SECRET_TYPE, Registration, Run, reveal, run_program
from federation import nodeauth, trust
from federation.plan import FederationPlan, load_plan
from tests.support.kube import container_argv, pod_for
from tests.support.stacks import HTTP_ERA, base, daemonset_node_keys, security_stacks
from tests.support.tls_provider import RealTlsProvider, new_openssh_key

STACKS = security_stacks()
FED_KEY = f"{program.PROJECT}:{program.CONFIG_KEY}"
KEYS_KEY = f"{program.PROJECT}:{program.NODE_KEYS_KEY}"
NS = "flower-sec"
WORKLOADS = {"StatefulSet", "DaemonSet", "Deployment"}
CERTIFICATE_TYPE = "kubernetes:cert-manager.io/v1:Certificate"
TLS_TRUST_TYPE = "flower-federation:index:TlsTrust"
# Resources that take a pulumi-tls private key as input, and the inputs that carry it.
PRIVATE_KEY_CONSUMERS = {
    "tls:index/selfSignedCert:SelfSignedCert": ("privateKeyPem",),
    "tls:index/certRequest:CertRequest": ("privateKeyPem",),
    "tls:index/locallySignedCert:LocallySignedCert": ("caPrivateKeyPem",),
}
PREVIEW = pytest.mark.parametrize("preview", [True, False], ids=["preview", "up"])
HEX64 = re.compile(r"^[0-9a-f]{64}$")


# --- helpers -------------------------------------------------------------------------

def config_for(stack: str, keys: Optional[dict] = None) -> dict[str, Any]:
    """run_program config for a security stack (supplied keys where the stack needs them)."""
    cfg: dict[str, Any] = {"federation": STACKS[stack]}
    if STACKS[stack].get("nodeAuth", {}).get("keySource") == "config":
        cfg["nodeAuthKeys"] = keys if keys is not None else daemonset_node_keys(new_openssh_key)
    return cfg


_RUNS: dict[str, tuple[dict[str, Any], Run]] = {}


def default_run(stack: str) -> tuple[dict[str, Any], Run]:
    """(config, run) of a security stack with the placeholder provider; deterministic, so
    shared by the tests that only read the render."""
    if stack not in _RUNS:
        cfg = config_for(stack)
        _RUNS[stack] = cfg, run_program(cfg, stack)
    return _RUNS[stack]


def plan_for(cfg: dict[str, Any], stack: str) -> FederationPlan:
    return load_plan(cfg["federation"], stack, cfg.get("nodeAuthKeys"))


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def created_secrets(run: Run) -> dict[str, Registration]:
    return {r.name: r for r in run.kubernetes if r.type == SECRET_TYPE}


def secret_files(reg: Registration) -> dict[str, str]:
    """A registered Secret's files, decoded: stringData as is, data from base64."""
    shown = reveal(reg.inputs, True)
    files = dict(shown.get("stringData") or {})
    for key, value in (shown.get("data") or {}).items():
        files[key] = base64.b64decode(value).decode()
    return files


def manifest(run: Run, kind: str, name: str, show_secrets: bool = True) -> dict[str, Any]:
    found = [m for m in run.manifests(show_secrets) if m["kind"] == kind and m["metadata"]["name"] == name]
    assert len(found) == 1, f"{kind}/{name}: {len(found)} found"
    return found[0]


def workloads(run: Run) -> list[dict[str, Any]]:
    return [m for m in run.manifests(True) if m["kind"] in WORKLOADS]


def secret_volumes(pod_spec: dict[str, Any]) -> dict[str, list[tuple[str, Optional[list[str]]]]]:
    """volume name -> [(Secret name, keys projected or None for all)], projected volumes included."""
    out: dict[str, list[tuple[str, Optional[list[str]]]]] = {}
    for vol in pod_spec.get("volumes", []):
        refs = []
        if "secret" in vol:
            items = vol["secret"].get("items")
            refs.append((vol["secret"]["secretName"], [i["key"] for i in items] if items else None))
        for source in vol.get("projected", {}).get("sources", []):
            if "secret" in source:
                items = source["secret"].get("items")
                refs.append((source["secret"]["name"], [i["key"] for i in items] if items else None))
        if refs:
            out[vol["name"]] = refs
    return out


def mounted_secret_names(pod_spec: dict[str, Any]) -> set[str]:
    return {name for refs in secret_volumes(pod_spec).values() for name, _ in refs}


def checksum_of(workload: dict[str, Any]) -> Optional[str]:
    return workload["spec"]["template"]["metadata"].get("annotations", {}).get(trust.CHECKSUM_ANNOTATION)


def is_superlink(workload: dict[str, Any], plan: FederationPlan) -> bool:
    return workload["kind"] == "StatefulSet" and workload["metadata"]["name"] == plan.names.superlink


def supernode_workloads(run: Run, plan: FederationPlan) -> dict[str, dict[str, Any]]:
    return {p.name: manifest(run, plan.spec.mode, plan.names.pool(p.name)) for p in plan.spec.supernodes.pools}


def container(workload: dict[str, Any], name: str) -> dict[str, Any]:
    return next(c for c in workload["spec"]["template"]["spec"]["containers"] if c["name"] == name)


def arg_value(argv: list[str], flag: str) -> str:
    assert argv.count(flag) == 1, argv
    return argv[argv.index(flag) + 1]


def load_cert(pem: str) -> x509.Certificate:
    assert pem.startswith("-----BEGIN CERTIFICATE-----"), pem[:60]
    return x509.load_pem_x509_certificate(pem.encode())


def ec_public_numbers(key) -> tuple:
    numbers = key.public_numbers()
    return numbers.curve.name, numbers.x, numbers.y


def recording_entry():
    """program.run, plus a stack transformation that records every resource's parent and
    depends_on (exported as `_tree`: name@type -> urns)."""

    def entry():
        seen: list[pulumi.ResourceTransformationArgs] = []

        def transformation(args: pulumi.ResourceTransformationArgs):
            seen.append(args)
            return None

        pulumi.runtime.register_stack_transformation(transformation)
        program.run()

        def urn_of(resource) -> pulumi.Output[str]:
            return resource.urn if resource is not None else pulumi.Output.from_input("")

        def deps(opts) -> list:
            d = getattr(opts, "depends_on", None) if opts is not None else None
            if d is None:
                return []
            return list(d) if isinstance(d, (list, tuple)) else [d]

        pulumi.export("_tree", pulumi.Output.all(**{
            f"{a.name}@{a.type_}": pulumi.Output.all(
                urn=a.resource.urn,
                parent=urn_of(a.opts.parent if a.opts is not None else None),
                depends_on=pulumi.Output.all(*[r.urn for r in deps(a.opts)]),
            )
            for a in seen
        }))

    return entry


def tree(run: Run) -> dict[str, dict[str, Any]]:
    return run.outputs["_tree"]


# --- key material is secret ----------------------------------------------------------

@PREVIEW
@pytest.mark.parametrize("stack", ["http-nodeauth", "grpc-process-sidecar-nodeauth", "http-executor-kubernetes"])
def test_generated_private_keys_reach_their_consumers_only_as_secrets(stack, preview):
    run = run_program(config_for(stack), stack, preview=preview, provider=RealTlsProvider())
    consumers = [r for r in run.registrations if r.type in PRIVATE_KEY_CONSUMERS]
    # CA cert, server CSR, server cert: each takes a private key.
    assert sorted(r.type for r in consumers) == sorted(PRIVATE_KEY_CONSUMERS)
    for reg in consumers:
        for prop in PRIVATE_KEY_CONSUMERS[reg.type]:
            value = reg.inputs[prop]
            assert rpc.is_rpc_secret(value), f"{reg.name}.{prop} is not secret"
            assert "-----BEGIN PRIVATE KEY-----" in rpc.unwrap_rpc_secret(value)
        # Nothing else a consumer receives is a private key in the clear.
        plain = {k: v for k, v in reg.inputs.items() if not rpc.is_rpc_secret(v)}
        assert "PRIVATE KEY" not in json.dumps(plain, default=str), reg.name
    # The keys themselves: server and CA on P-256, one P-384 node key per SuperNode (3 + 1).
    keys = sorted((r.name, r.inputs["ecdsaCurve"]) for r in run.registrations
                  if r.type == "tls:index/privateKey:PrivateKey")
    assert [c for _, c in keys].count("P256") == 2
    assert [c for _, c in keys].count("P384") == 4


@PREVIEW
@pytest.mark.parametrize("stack", ["http-nodeauth", "grpc-process-sidecar-nodeauth", "http-certmanager",
                                   "http-existing-copy", "http-daemonset-supplied-keys"])
def test_every_secret_the_program_creates_holds_its_data_as_a_pulumi_secret(stack, preview):
    cfg = config_for(stack)
    plan = plan_for(cfg, stack)
    run = run_program(cfg, stack, preview=preview, provider=RealTlsProvider())
    secrets = created_secrets(run)
    expected = set()
    if plan.trust.source == "generate":
        expected.add(plan.trust.server_secret)
    if plan.trust.creates_ca_secret:
        expected.add(plan.trust.ca_secret)
    if plan.spec.node_auth.enabled:
        expected |= {plan.names.node_keys_secret(p.name) for p in plan.spec.supernodes.pools}
    assert set(secrets) == expected and expected
    masked = {m["metadata"]["name"]: m for m in run.manifests() if m["kind"] == "Secret"}
    for name, reg in secrets.items():
        payload = [k for k in ("stringData", "data") if k in reg.inputs]
        assert payload, f"{name} carries no data"
        for key in payload:
            assert rpc.is_rpc_secret(reg.inputs[key]), f"{name}.{key} is registered in plain text"
            values = masked[name][key]
            assert values and set(values.values()) == {SECRET_PLACEHOLDER}, (name, values)
        files = secret_files(reg)
        assert files and all(v and v != SECRET_PLACEHOLDER for v in files.values())
    # Key material really is in there (not vacuous): node keys and the server key.
    for pool in plan.spec.supernodes.pools if plan.spec.node_auth.enabled else []:
        files = secret_files(secrets[plan.names.node_keys_secret(pool.name)])
        assert all(nodeauth.OPENSSH_HEADER in v for v in files.values())
    if plan.trust.source == "generate":
        assert "-----BEGIN PRIVATE KEY-----" in secret_files(secrets[plan.trust.server_secret])["tls.key"]


@PREVIEW
@pytest.mark.parametrize("stack", ["http-nodeauth", "http-daemonset-supplied-keys"])
def test_outputs_export_public_keys_and_the_ca_only(stack, preview):
    cfg = config_for(stack)
    plan = plan_for(cfg, stack)
    run = run_program(cfg, stack, preview=preview, provider=RealTlsProvider())
    for key, value in run.outputs.items():
        text = value if isinstance(value, str) else json.dumps(value)
        assert "PRIVATE KEY" not in text, f"output {key} holds a private key"
    node_auth = run.outputs["nodeAuth"]
    assert set(node_auth) == {"publicKeys", "registerScript"}
    public = node_auth["publicKeys"]
    assert set(public) == {p.name for p in plan.spec.supernodes.pools}
    for pool, slots in public.items():
        assert slots
        for slot, line in slots.items():
            assert line.startswith("ecdsa-sha2-nistp384 ") and line.endswith(f" sec/{pool}/{slot}")
            key = load_ssh_public_key(line.encode())
            assert isinstance(key, ec.EllipticCurvePublicKey) and isinstance(key.curve, ec.SECP384R1)
    # Public material is plain output: shown by `pulumi stack output`, usable by scripts.
    assert not {"nodeAuth", "caCertificate"} & run.secret_outputs
    ca = load_cert(run.outputs["caCertificate"])
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca is True
    # The exported CA is the one clients mount.
    ca_secret = created_secrets(run)[plan.trust.ca_secret]
    assert secret_files(ca_secret)["ca.crt"] == run.outputs["caCertificate"]


# --- what each pod mounts ------------------------------------------------------------

TLS_STACKS = sorted(s for s in STACKS if not s.endswith("-insecure"))


@pytest.mark.parametrize("stack", TLS_STACKS)
def test_only_the_superlink_container_mounts_the_server_key(stack):
    cfg, run = default_run(stack)
    plan = plan_for(cfg, stack)
    all_workloads = workloads(run)
    assert sum(is_superlink(w, plan) for w in all_workloads) == 1
    for w in all_workloads:
        pod = w["spec"]["template"]["spec"]
        volumes = secret_volumes(pod)
        server_volumes = {v for v, refs in volumes.items() if any(n == plan.trust.server_secret for n, _ in refs)}
        where = f"{w['kind']}/{w['metadata']['name']}"
        if not is_superlink(w, plan):
            assert not server_volumes, f"{where} mounts the server key Secret {plan.trust.server_secret}"
            continue
        assert len(server_volumes) == 1
        for c in pod["containers"] + pod.get("initContainers", []):
            mounts = {m["name"] for m in c.get("volumeMounts", [])}
            if c["name"] == "superlink":
                assert server_volumes <= mounts
            else:  # e.g. the SuperExec sidecar
                assert not server_volumes & mounts, f"{where} container {c['name']} mounts the server key"
    # Node keys: each pool's SuperNodes mount their own pool's keys, nobody else any.
    for w in all_workloads:
        pod = w["spec"]["template"]["spec"]
        node_key_secrets = {n for n in mounted_secret_names(pod) if n.endswith("-node-keys")}
        own = [p.name for p in plan.spec.supernodes.pools if w["metadata"]["name"] == plan.names.pool(p.name)]
        if own and plan.spec.node_auth.enabled:
            assert node_key_secrets == {plan.names.node_keys_secret(own[0])}
        else:
            assert not node_key_secrets, f"{w['metadata']['name']} mounts node keys {node_key_secrets}"


@pytest.mark.parametrize("stack", TLS_STACKS)
def test_the_ca_secret_holds_no_private_key(stack):
    cfg, run = default_run(stack)
    plan = plan_for(cfg, stack)
    secrets = created_secrets(run)
    if plan.trust.creates_ca_secret:
        files = secret_files(secrets[plan.trust.ca_secret])
        assert set(files) == {"ca.crt"}
        assert "PRIVATE KEY" not in files["ca.crt"]
    else:
        assert plan.trust.ca_secret not in secrets
    mounted_as_ca = 0
    for w in workloads(run):
        for refs in secret_volumes(w["spec"]["template"]["spec"]).values():
            for name, keys in refs:
                if name == plan.trust.ca_secret:
                    mounted_as_ca += 1
                    assert keys == [plan.trust.ca_key], (w["metadata"]["name"], keys)
                if name != plan.trust.server_secret:
                    assert keys is None or "tls.key" not in keys, (w["metadata"]["name"], name, keys)
    # The SuperLink and every pool's SuperNodes at least.
    assert mounted_as_ca >= 1 + len(plan.spec.supernodes.pools)


# --- node keys: one per replica ------------------------------------------------------

def test_each_replica_resolves_a_key_of_its_own():
    stack = "http-nodeauth"
    cfg = config_for(stack)
    plan = plan_for(cfg, stack)
    run = run_program(cfg, stack, provider=RealTlsProvider())
    secret = created_secrets(run)[plan.names.node_keys_secret("alpha")]
    files = secret_files(secret)
    assert sorted(files) == ["node-0.key", "node-1.key", "node-2.key"]
    assert len(set(files.values())) == 3
    keys = {}
    for name, text in files.items():
        assert text.startswith(nodeauth.OPENSSH_HEADER)
        key = load_ssh_private_key(text.encode(), None)
        assert isinstance(key, ec.EllipticCurvePrivateKey) and isinstance(key.curve, ec.SECP384R1)
        keys[name] = key
    assert len({ec_public_numbers(k.public_key()) for k in keys.values()}) == 3

    sts = manifest(run, "StatefulSet", plan.names.pool("alpha"))
    pod = sts["spec"]["template"]["spec"]
    supernode = container(sts, "supernode")
    paths = []
    for index in range(3):
        argv = container_argv(supernode, pod_for(sts, index))
        path = arg_value(argv, "--auth-supernode-private-key")
        assert "$(" not in path
        directory, file = os.path.split(path)
        mount = next(m for m in supernode["volumeMounts"] if m["mountPath"].rstrip("/") == directory)
        assert mount.get("readOnly") is True
        [(secret_name, items)] = secret_volumes(pod)[mount["name"]]
        assert secret_name == secret.name
        assert items is None or file in items
        assert file == f"node-{index}.key" and file in files
        paths.append(path)
    assert len(set(paths)) == 3

    # Exported public key k is the public half of node-k.key.
    public = run.outputs["nodeAuth"]["publicKeys"]
    assert sorted(public["alpha"]) == ["0", "1", "2"] and sorted(public["beta"]) == ["0"]
    for slot, line in public["alpha"].items():
        exported = load_ssh_public_key(line.encode())
        assert ec_public_numbers(exported) == ec_public_numbers(keys[f"node-{slot}.key"].public_key())
    beta = secret_files(created_secrets(run)[plan.names.node_keys_secret("beta")])
    assert set(beta) == {"node-0.key"}
    beta_key = load_ssh_private_key(beta["node-0.key"].encode(), None)
    assert ec_public_numbers(load_ssh_public_key(public["beta"]["0"].encode())) == ec_public_numbers(beta_key.public_key())
    # Pools never share a key.
    assert beta["node-0.key"] not in files.values()


FAKE_FLWR = """#!/bin/sh
# flwr supernode register <public key file> <connection>
[ "$1" = supernode ] && [ "$2" = register ] || exit 2
if [ -n "${FLWR_DUPLICATE:-}" ]; then echo "Public key already in use"; exit 1; fi
{ printf '%s|' "$4"; cat "$3"; } >> "$FLWR_LOG"
"""


def test_register_script_registers_every_supernode_once(tmp_path):
    stack = "http-nodeauth"
    run = run_program(config_for(stack), stack, provider=RealTlsProvider())
    script = run.outputs["nodeAuth"]["registerScript"]
    public = run.outputs["nodeAuth"]["publicKeys"]
    register_lines = [line for line in script.splitlines() if line.startswith("register ")]
    assert len(register_lines) == 4  # alpha 3 + beta 1
    assert sorted(shlex.split(line)[1] for line in register_lines) == ["alpha/0", "alpha/1", "alpha/2", "beta/0"]
    path = tmp_path / "register.sh"
    path.write_text(script)
    check = subprocess.run(["sh", "-n", str(path)], capture_output=True, text=True)
    assert check.returncode == 0, check.stderr

    # Run it against a stand-in `flwr`: each key is registered once, with the exported connection.
    bindir = tmp_path / "bin"
    bindir.mkdir()
    flwr = bindir / "flwr"
    flwr.write_text(FAKE_FLWR)
    flwr.chmod(flwr.stat().st_mode | stat.S_IXUSR)
    log = tmp_path / "flwr.log"
    env = {**os.environ, "PATH": f"{bindir}:{os.environ['PATH']}", "FLWR_LOG": str(log)}
    done = subprocess.run(["sh", str(path)], capture_output=True, text=True, env=env, timeout=30)
    assert done.returncode == 0, done.stderr
    registered = log.read_text().splitlines()
    expected = sorted(f"sec|{line}" for slots in public.values() for line in slots.values())
    assert sorted(registered) == expected
    assert done.stdout.count("registered ") == 4
    # Re-running where every key is already registered is not an error.
    again = subprocess.run(["sh", str(path)], capture_output=True, text=True, timeout=30,
                           env={**env, "FLWR_DUPLICATE": "1"})
    assert again.returncode == 0, again.stderr
    assert again.stdout.count("already registered: ") == 4


@PREVIEW
def test_supplied_keys_for_a_daemonset_land_in_the_secret_and_are_exported(preview):
    stack = "http-daemonset-supplied-keys"
    supplied = daemonset_node_keys(new_openssh_key)
    cfg = config_for(stack, supplied)
    plan = plan_for(cfg, stack)
    run = run_program(cfg, stack, preview=preview)
    # No node key is generated: the only pulumi-tls keys are the TLS server's and CA's.
    assert all(r.inputs["ecdsaCurve"] == trust.SERVER_KEY_CURVE for r in run.registrations
               if r.type == "tls:index/privateKey:PrivateKey")
    secrets = created_secrets(run)
    public = run.outputs["nodeAuth"]["publicKeys"]
    for pool, slots in supplied.items():
        reg = secrets[plan.names.node_keys_secret(pool)]
        assert rpc.is_rpc_secret(reg.inputs["stringData"])
        assert secret_files(reg) == {nodeauth.key_file(slot): text for slot, text in slots.items()}
        assert public[pool] == {slot: nodeauth.public_key(text, f"sec/{pool}/{slot}") for slot, text in slots.items()}
        ds = manifest(run, "DaemonSet", plan.names.pool(pool))
        for node in slots:
            argv = container_argv(container(ds, "supernode"), pod_for(ds, node=node))
            assert arg_value(argv, "--auth-supernode-private-key") == f"{nodeauth.KEY_DIR}/node-{node}.key"
    assert "PRIVATE KEY" not in json.dumps(run.outputs)


@PREVIEW
def test_supplied_keys_for_a_statefulset_give_each_ordinal_its_key(preview):
    raw = base(HTTP_ERA, nodeAuth={"enabled": True, "keySource": "config"})
    supplied = {"alpha": {str(i): new_openssh_key() for i in range(3)}, "beta": {"0": new_openssh_key()}}
    run = run_program({"federation": raw, "nodeAuthKeys": supplied}, "sts-keys", preview=preview)
    plan = load_plan(raw, "sts-keys", supplied)
    secrets = created_secrets(run)
    alpha = secrets[plan.names.node_keys_secret("alpha")]
    assert rpc.is_rpc_secret(alpha.inputs["stringData"])
    assert secret_files(alpha) == {f"node-{i}.key": supplied["alpha"][str(i)] for i in range(3)}
    assert run.outputs["nodeAuth"]["publicKeys"]["alpha"] == {
        slot: nodeauth.public_key(text, f"sec/alpha/{slot}") for slot, text in supplied["alpha"].items()}
    sts = manifest(run, "StatefulSet", plan.names.pool("alpha"))
    for i in range(3):
        path = arg_value(container_argv(container(sts, "supernode"), pod_for(sts, i)), "--auth-supernode-private-key")
        assert secret_files(alpha)[os.path.basename(path)] == supplied["alpha"][str(i)]
    assert not [r for r in run.registrations if r.type == "tls:index/privateKey:PrivateKey"
                and r.inputs["ecdsaCurve"] == nodeauth.KEY_CURVE]


def _entry_with_config(raw: dict, keys: dict, keys_secret: bool):
    """program.run with the engine's config replaced: `nodeAuthKeys` secret or not."""

    def entry():
        config = {FED_KEY: json.dumps(raw), KEYS_KEY: json.dumps(keys)}
        pulumi.runtime.set_all_config(config, [KEYS_KEY] if keys_secret else [])
        return program.run()

    return entry


def test_node_auth_keys_in_plain_config_are_refused():
    stack = "http-daemonset-supplied-keys"
    raw, keys = STACKS[stack], daemonset_node_keys(new_openssh_key)
    run = Run()
    with pytest.raises(pulumi.RunError) as err:
        run_program({}, stack, entry=_entry_with_config(raw, keys, keys_secret=False), into=run)
    message = str(err.value)
    assert "nodeAuthKeys" in message and "--secret" in message
    assert "PRIVATE KEY" not in message and "AAAA" not in message
    assert run.registrations == []
    # The same config as a secret is accepted (the harness itself is sound).
    ok = run_program({}, stack, entry=_entry_with_config(raw, keys, keys_secret=True))
    assert set(ok.outputs["nodeAuth"]["publicKeys"]) == {"alpha", "beta"}


@pytest.mark.parametrize("case", ["wrong-curve-and-garbage", "duplicate-and-extra", "rsa"])
def test_invalid_supplied_keys_are_refused_with_their_path(case):
    if case == "wrong-curve-and-garbage":
        stack = "http-daemonset-supplied-keys"
        raw = STACKS[stack]
        keys = daemonset_node_keys(new_openssh_key)
        keys["alpha"]["node-b"] = new_openssh_key("P256")
        keys["beta"]["node-a"] = "not a key"
        expected = ["nodeAuthKeys.alpha.node-b: must be an ECDSA P-384 private key in OpenSSH format",
                    "nodeAuthKeys.beta.node-a: must be an ECDSA P-384 private key in OpenSSH format"]
    elif case == "duplicate-and-extra":
        stack = "sts-keys"
        raw = base(HTTP_ERA, nodeAuth={"enabled": True, "keySource": "config"})
        shared = new_openssh_key()
        keys = {"alpha": {"0": shared, "1": shared, "2": new_openssh_key(), "3": new_openssh_key()}, "beta": {}}
        expected = ['nodeAuthKeys.alpha["1"]: the same key as alpha.0', 'nodeAuthKeys.alpha["3"]',
                    "nodeAuthKeys.beta: missing keys for replicas 0"]
    else:
        from cryptography.hazmat.primitives.asymmetric import rsa

        stack = "http-daemonset-supplied-keys"
        raw = STACKS[stack]
        keys = daemonset_node_keys(new_openssh_key)
        rsa_key = rsa.generate_private_key(public_exponent=65537, key_size=1024)
        keys["alpha"]["node-a"] = rsa_key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH,
                                                        serialization.NoEncryption()).decode()
        expected = ["nodeAuthKeys.alpha.node-a: must be an ECDSA P-384 private key"]
    run = Run()
    with pytest.raises(pulumi.RunError) as err:
        run_program({"federation": raw, "nodeAuthKeys": keys}, stack, into=run)
    message = str(err.value)
    for part in expected:
        assert part in message, message
    # The error never echoes key material.
    assert "PRIVATE KEY" not in message and "not a key" not in message
    assert run.registrations == []


@pytest.mark.parametrize("extra, expected", [
    ({"insecure": True, "nodeAuth": {"enabled": True}},
     "federation.nodeAuth.enabled: node authentication needs TLS"),
    ({"tls": {"source": "existingSecret"}}, "federation.tls.existingSecret: name the kubernetes.io/tls Secret"),
    ({"tls": {"source": "certManager"}}, "federation.tls.certManager.issuerRef: name the cert-manager Issuer"),
    ({"insecure": True, "tls": {"dnsNames": ["flower.example.com"]}},
     "federation.tls: TLS settings have no effect with insecure: true"),
    ({"nodeAuth": {"enabled": True, "keySource": "config"}}, "nodeAuthKeys: missing"),
], ids=["nodeauth-insecure", "existing-unnamed", "certmanager-no-issuer", "tls-and-insecure", "keys-missing"])
def test_invalid_security_config_registers_nothing(extra, expected):
    run = Run()
    with pytest.raises(pulumi.RunError) as err:
        run_program({"federation": base(HTTP_ERA, **extra)}, "bad", into=run)
    assert expected in str(err.value)
    assert "invalid flower-federation config" in str(err.value)
    assert run.registrations == []


# --- generated TLS -------------------------------------------------------------------

def test_generated_server_certificate_is_what_clients_verify():
    raw = base(HTTP_ERA, tls={"dnsNames": ["flower.example.com"], "ipAddresses": ["10.0.0.5"],
                              "generate": {"validityHours": 2000, "earlyRenewalHours": 100, "caValidityHours": 9000}})
    plan = load_plan(raw, "tls")
    run = run_program({"federation": raw}, "tls", provider=RealTlsProvider())
    secrets = created_secrets(run)
    server_files = secret_files(secrets[plan.trust.server_secret])
    assert manifest(run, "Secret", plan.trust.server_secret)["type"] == "kubernetes.io/tls"
    cert, ca = load_cert(server_files["tls.crt"]), load_cert(server_files["ca.crt"])
    assert secret_files(secrets[plan.trust.ca_secret])["ca.crt"] == server_files["ca.crt"] == run.outputs["caCertificate"]

    # Signed by the CA.
    cert.verify_directly_issued_by(ca)
    assert cert.issuer == ca.subject
    # The CA is a CA, and signs certificates.
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca is True
    assert ca.extensions.get_extension_for_class(x509.KeyUsage).value.key_cert_sign is True
    assert ca.not_valid_after_utc - ca.not_valid_before_utc == datetime.timedelta(hours=9000)
    # The server certificate: names, use and lifetime as configured.
    assert cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca is False
    san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert san.get_values_for_type(x509.DNSName) == trust.superlink_dns_names(plan)
    assert "flower.example.com" in san.get_values_for_type(x509.DNSName)
    assert f"{plan.names.superlink}.{NS}.svc.cluster.local" in san.get_values_for_type(x509.DNSName)
    assert san.get_values_for_type(x509.IPAddress) == [ipaddress.ip_address("127.0.0.1"),
                                                       ipaddress.ip_address("10.0.0.5")]
    eku = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert ExtendedKeyUsageOID.SERVER_AUTH in eku
    assert cert.not_valid_after_utc - cert.not_valid_before_utc == datetime.timedelta(hours=2000)
    signed = next(r for r in run.registrations if r.type == "tls:index/locallySignedCert:LocallySignedCert")
    assert reveal(signed.inputs, True)["earlyRenewalHours"] == 100
    assert reveal(signed.inputs, True)["validityPeriodHours"] == 2000
    # tls.key is the certificate's own key, on the server curve.
    key = serialization.load_pem_private_key(server_files["tls.key"].encode(), None)
    assert isinstance(key, ec.EllipticCurvePrivateKey) and isinstance(key.curve, ec.SECP256R1)
    assert ec_public_numbers(key.public_key()) == ec_public_numbers(cert.public_key())


def _checksums(run: Run, plan: FederationPlan) -> tuple[str, dict[str, str]]:
    superlink = checksum_of(manifest(run, "StatefulSet", plan.names.superlink))
    pools = {name: checksum_of(w) for name, w in supernode_workloads(run, plan).items()}
    return superlink, pools


def test_tls_checksum_annotations_digest_the_mounted_certificates_and_roll_on_change():
    stack = "http-nodeauth"
    plan = plan_for(config_for(stack), stack)
    first = run_program(config_for(stack), stack, provider=RealTlsProvider())
    second = run_program(config_for(stack), stack, provider=RealTlsProvider())
    sums = []
    for run in (first, second):
        files = secret_files(created_secrets(run)[plan.trust.server_secret])
        ca = secret_files(created_secrets(run)[plan.trust.ca_secret])["ca.crt"]
        assert ca == files["ca.crt"]
        superlink, pools = _checksums(run, plan)
        assert superlink == trust.checksum([files["tls.crt"], files["ca.crt"]])
        assert pools == {p: trust.checksum([ca]) for p in pools} and len(pools) == 2
        assert superlink != pools["alpha"]
        sums.append((superlink, pools))
    # A new certificate (and CA) changes every pod template: the workloads roll.
    assert sums[0][0] != sums[1][0]
    assert sums[0][1]["alpha"] != sums[1][1]["alpha"]

    # The placeholder provider renders byte-identical output, run after run.
    a = run_program(config_for(stack), stack)
    b = run_program(config_for(stack), stack, preview=True)
    dump = lambda run: sorted(json.dumps(m, sort_keys=True) for m in run.manifests(True))  # noqa: E731
    assert dump(a) == dump(b)
    assert json.dumps(a.outputs, sort_keys=True) == json.dumps(b.outputs, sort_keys=True)


@pytest.mark.parametrize("stack", ["http-process-distributed", "http-executor-kubernetes",
                                   "grpc-process-distributed", "http-process-sidecar-nodeauth"])
def test_every_pod_that_mounts_tls_material_carries_a_checksum(stack):
    cfg, run = default_run(stack)
    plan = plan_for(cfg, stack)
    superlink, pools = _checksums(run, plan)
    assert HEX64.match(superlink) and all(HEX64.match(c) for c in pools.values())
    tls_secrets = {plan.trust.server_secret, plan.trust.ca_secret}
    for w in workloads(run):
        mounts_tls = bool(mounted_secret_names(w["spec"]["template"]["spec"]) & tls_secrets)
        value = checksum_of(w)
        if mounts_tls:
            assert value in {superlink, *pools.values()}, f"{w['metadata']['name']} mounts TLS without checksum"
        else:
            assert value is None, w["metadata"]["name"]


# --- certificates from elsewhere ------------------------------------------------------

CRT = "-----BEGIN CERTIFICATE-----\nserver\n-----END CERTIFICATE-----\n"
CA = "-----BEGIN CERTIFICATE-----\nca\n-----END CERTIFICATE-----\n"
KEY = "-----BEGIN EC PRIVATE KEY-----\nkey\n-----END EC PRIVATE KEY-----\n"
ROOT = "-----BEGIN CERTIFICATE-----\nroot\n-----END CERTIFICATE-----\n"


def _user_tls(with_ca: bool) -> dict:
    data = {"tls.crt": b64(CRT), "tls.key": b64(KEY)}
    if with_ca:
        data["ca.crt"] = b64(CA)
    return {(SECRET_TYPE, f"{NS}/my-tls"): {"data": data}}


@PREVIEW
@pytest.mark.parametrize("with_ca", [False, True], ids=["no-ca-crt", "ca-crt"])
def test_copy_from_server_secret_copies_the_ca_and_never_the_key(with_ca, preview):
    stack = "http-existing-copy"
    plan = plan_for(config_for(stack), stack)
    run = run_program(config_for(stack), stack, preview=preview, existing=_user_tls(with_ca))
    reads = [r for r in run.registrations if r.read_id is not None]
    assert [(r.type, r.read_id) for r in reads] == [(SECRET_TYPE, f"{NS}/my-tls")]
    assert not any(r.read_id for r in run.kubernetes)
    assert not [r for r in run.kubernetes if r.name == "my-tls"]
    secrets = created_secrets(run)
    assert set(secrets) == {plan.trust.ca_secret}  # the server Secret is the user's
    ca_secret = secrets[plan.trust.ca_secret]
    assert rpc.is_rpc_secret(ca_secret.inputs["data"])
    expected = CA if with_ca else CRT  # the chart's fallback: ca.crt, else tls.crt
    assert reveal(ca_secret.inputs, True)["data"] == {"ca.crt": b64(expected)}
    assert KEY not in json.dumps(run.manifests(True))
    superlink, pools = _checksums(run, plan)
    assert pools == {"alpha": trust.checksum([expected]), "beta": trust.checksum([expected])}
    if with_ca:
        assert superlink == trust.checksum([CRT, CA])
    sl = manifest(run, "StatefulSet", plan.names.superlink)
    assert plan.trust.server_secret == "my-tls" and "my-tls" in mounted_secret_names(sl["spec"]["template"]["spec"])


@PREVIEW
def test_existing_trust_secret_is_mounted_as_is_and_not_recreated(preview):
    stack = "http-existing-ca"
    plan = plan_for(config_for(stack), stack)
    existing = {**_user_tls(True), (SECRET_TYPE, f"{NS}/my-ca"): {"data": {"root.pem": b64(ROOT)}}}
    run = run_program(config_for(stack), stack, preview=preview, existing=existing)
    assert sorted(r.read_id for r in run.registrations if r.read_id) == [f"{NS}/my-ca", f"{NS}/my-tls"]
    assert created_secrets(run) == {}  # neither a server nor a CA Secret of ours
    assert plan.trust.ca_secret == "my-ca" and plan.trust.ca_key == "root.pem"
    for name, w in supernode_workloads(run, plan).items():
        volumes = secret_volumes(w["spec"]["template"]["spec"])
        assert [refs for refs in volumes.values()] == [[("my-ca", ["root.pem"])]]
        assert checksum_of(w) == trust.checksum([ROOT])


def test_superlink_checksum_covers_the_trust_secret_it_mounts():
    """The SuperLink mounts the user's CA Secret (my-ca/root.pem) as its CA; a new CA
    there must roll it like it rolls the SuperNodes."""
    stack = "http-existing-ca"
    plan = plan_for(config_for(stack), stack)

    def superlink_sum(root: str) -> str:
        existing = {**_user_tls(True), (SECRET_TYPE, f"{NS}/my-ca"): {"data": {"root.pem": b64(root)}}}
        run = run_program(config_for(stack), stack, existing=existing)
        sl = manifest(run, "StatefulSet", plan.names.superlink)
        assert ("my-ca", ["root.pem"]) in [ref for refs in secret_volumes(sl["spec"]["template"]["spec"]).values()
                                          for ref in refs]
        return checksum_of(sl)

    assert superlink_sum(ROOT) == trust.checksum([CRT, ROOT])
    assert superlink_sum(ROOT) != superlink_sum(ROOT.replace("root", "rotated"))


@PREVIEW
@pytest.mark.parametrize("stack", ["http-certmanager", "grpc-certmanager"])
def test_cert_manager_certificate_is_waited_for_before_its_secret_is_read(stack, preview):
    plan = plan_for(config_for(stack), stack)
    run = run_program(config_for(stack), stack, preview=preview, entry=recording_entry(),
                      existing={(SECRET_TYPE, f"{NS}/{plan.trust.server_secret}"):
                                {"data": {"tls.crt": b64(CRT), "tls.key": b64(KEY), "ca.crt": b64(CA)}}})
    certs = [r for r in run.kubernetes if r.type == CERTIFICATE_TYPE]
    assert len(certs) == 1
    spec = reveal(certs[0].inputs, True)["spec"]
    assert spec["secretName"] == plan.trust.server_secret
    assert spec["dnsNames"] == trust.superlink_dns_names(plan) and "flower.example.com" in spec["dnsNames"]
    assert spec["ipAddresses"] == ["127.0.0.1"]
    assert spec["issuerRef"] == {"name": "ca-issuer", "kind": "ClusterIssuer", "group": "cert-manager.io"}
    assert "server auth" in spec["usages"]
    [read] = [r for r in run.registrations if r.read_id is not None]
    assert read.read_id == f"{NS}/{plan.trust.server_secret}" and read.type == SECRET_TYPE
    assert read not in run.kubernetes
    nodes = tree(run)
    cert_urn = nodes[f"{certs[0].name}@{CERTIFICATE_TYPE}"]["urn"]
    assert cert_urn in nodes[f"{read.name}@{SECRET_TYPE}"]["depends_on"]
    # cert-manager holds the key; we create only the CA copy for clients.
    secrets = created_secrets(run)
    assert set(secrets) == {plan.trust.ca_secret}
    for reg in secrets.values():
        assert "tls.key" not in secret_files(reg)
    assert secret_files(secrets[plan.trust.ca_secret]) == {"ca.crt": CA}
    assert not [r for r in run.registrations if r.type.startswith("tls:")]


@pytest.mark.parametrize("stack", ["http-certmanager", "http-existing-copy", "http-existing-ca"])
def test_certificate_checksums_do_not_hide_workload_specs(stack):
    """The checksum digests certificates, not keys: a workload's spec stays plain, so
    `pulumi preview --diff` shows what changes in it."""
    run = run_program(config_for(stack), stack)
    for reg in run.kubernetes:
        if reg.type.split(":")[-1] in WORKLOADS:
            assert not rpc.is_rpc_secret(reg.inputs["spec"]), f"{reg.name}: whole spec is secret"
    for w in (m for m in run.manifests() if m["kind"] in WORKLOADS):
        value = checksum_of(w) if isinstance(w["spec"], dict) and isinstance(w["spec"].get("template"), dict) else None
        assert value is not None and HEX64.match(value), (w["metadata"]["name"], str(w["spec"])[:120])


# --- parenting and pool isolation ----------------------------------------------------

@PREVIEW
@pytest.mark.parametrize("stack", ["http-nodeauth", "http-certmanager", "http-existing-ca"])
def test_tls_and_node_key_resources_are_parented_by_their_components(stack, preview):
    cfg = config_for(stack)
    plan = plan_for(cfg, stack)
    run = run_program(cfg, stack, preview=preview, entry=recording_entry(),
                      existing={(SECRET_TYPE, f"{NS}/my-ca"): {"data": {"root.pem": b64(ROOT)}}})
    nodes = tree(run)
    by_urn = {n["urn"]: key for key, n in nodes.items()}
    [tls_key] = [k for k in nodes if k.endswith(f"@{TLS_TRUST_TYPE}")]
    tls_urn = nodes[tls_key]["urn"]
    assert "::flower-federation:index:Federation$flower-federation:index:TlsTrust::sec-tls" in tls_urn
    tls_children = {key for key, n in nodes.items() if n["parent"] == tls_urn}
    # The CA and server keys and certificates (node keys belong to their pools, below).
    expected = {f"{r.name}@{r.type}" for r in run.registrations
                if r.type.startswith("tls:") and not r.name.startswith("sec-pool-")}
    if plan.trust.source == "generate":
        expected |= {f"{plan.trust.server_secret}@{SECRET_TYPE}", f"{plan.trust.ca_secret}@{SECRET_TYPE}"}
        assert len(expected) == 7
    if plan.trust.source == "certManager":
        expected |= {f"{plan.names.certificate}@{CERTIFICATE_TYPE}", f"{plan.trust.ca_secret}@{SECRET_TYPE}"}
    expected |= {f"{r.name}@{r.type}" for r in run.registrations if r.read_id}
    assert tls_children == expected
    for key in tls_children:
        assert f"::{TLS_TRUST_TYPE}$" in nodes[key]["urn"]
    # Pools: the NodeKeys component under its pool, keys and their Secret under it.
    for pool in plan.spec.supernodes.pools:
        pool_key = f"sec-pool-{pool.name}@flower-federation:index:SuperNodePool"
        workload_key = f"{plan.names.pool(pool.name)}@kubernetes:apps/v1:{plan.spec.mode}"
        assert nodes[workload_key]["parent"] == nodes[pool_key]["urn"]
        if not plan.spec.node_auth.enabled:
            assert not [k for k in nodes if "NodeKeys" in k]
            continue
        keys_key = f"sec-pool-{pool.name}-node-keys@flower-federation:index:NodeKeys"
        assert nodes[keys_key]["parent"] == nodes[pool_key]["urn"]
        secret_key = f"{plan.names.node_keys_secret(pool.name)}@{SECRET_TYPE}"
        assert nodes[secret_key]["parent"] == nodes[keys_key]["urn"]
        assert "::flower-federation:index:NodeKeys$kubernetes:core/v1:Secret::" in nodes[secret_key]["urn"]
        generated = [k for k, n in nodes.items() if k.startswith(f"sec-pool-{pool.name}-node-keys-")]
        assert len(generated) == (pool.replicas or 0)
        assert all(nodes[k]["parent"] == nodes[keys_key]["urn"] for k in generated)
        # SuperNodes start only after their keys exist.
        assert nodes[secret_key]["urn"] in nodes[workload_key]["depends_on"]
    # Node keys never sit under TlsTrust, TLS material never under a pool.
    for key, n in nodes.items():
        if key.startswith("sec-pool-") and key.endswith("@tls:index/privateKey:PrivateKey"):
            assert by_urn[n["parent"]].endswith("@flower-federation:index:NodeKeys")


def test_editing_one_pool_changes_only_that_pools_resources():
    stack = "http-nodeauth"
    before_raw = STACKS[stack]
    after_raw = json.loads(json.dumps(before_raw))
    after_raw["supernodes"]["pools"][0]["replicas"] = 4  # alpha
    before = run_program({"federation": before_raw}, stack)
    after = run_program({"federation": after_raw}, stack)

    def identity(run: Run) -> dict[tuple[str, str], str]:
        return {(m["kind"], m["metadata"]["name"]): json.dumps(m, sort_keys=True) for m in run.manifests(True)}

    old, new = identity(before), identity(after)
    assert old.keys() == new.keys()
    changed = {k for k in old if old[k] != new[k]}
    assert {("StatefulSet", "sec-supernode-alpha"), ("Secret", "sec-supernode-alpha-node-keys")} <= changed
    labels = {(m["kind"], m["metadata"]["name"]): m["metadata"].get("labels", {}) for m in after.manifests()}
    for key in changed:
        assert labels[key].get("flower.flwr.ai/pool") == "alpha", key
    alpha_keys = secret_files(created_secrets(after)["sec-supernode-alpha-node-keys"])
    assert sorted(alpha_keys) == [f"node-{i}.key" for i in range(4)]
    added = {(r.type, r.name) for r in after.registrations} - {(r.type, r.name) for r in before.registrations}
    assert added == {("tls:index/privateKey:PrivateKey", "sec-pool-alpha-node-keys-3")}
    assert after.outputs["nodeAuth"]["publicKeys"]["beta"] == before.outputs["nodeAuth"]["publicKeys"]["beta"]
    assert after.outputs["nodeAuth"]["registerScript"].count("\nregister ") == 5
