"""Key material in the real Pulumi program (under mocks, with real keys from
RealTlsProvider): generated private keys reach their consumers only as Pulumi secrets,
every Secret the program creates holds its data as a secret, outputs carry public keys
and the CA only, only the SuperLink container mounts the server key, and the CA Secret
holds no private key."""

from __future__ import annotations

import json

import pytest
from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import load_ssh_public_key
from pulumi.runtime import rpc

from flower_federation.cli.offline import SECRET_PLACEHOLDER, run_program
from flower_federation.flower import public_keys
from tests.support.program import (
    PREVIEW,
    STACKS,
    created_secrets,
    default_run,
    is_superlink,
    load_cert,
    mounted_secret_names,
    plan_for,
    secret_files,
    secret_volumes,
    workloads_of,
)
from tests.support.stacks import program_config
from tests.support.tls_provider import RealTlsProvider

# Resources that take a pulumi-tls private key as input, and the inputs that carry it.
PRIVATE_KEY_CONSUMERS = {
    "tls:index/selfSignedCert:SelfSignedCert": ("privateKeyPem",),
    "tls:index/certRequest:CertRequest": ("privateKeyPem",),
    "tls:index/locallySignedCert:LocallySignedCert": ("caPrivateKeyPem",),
}


@PREVIEW
@pytest.mark.parametrize("stack", ["http-nodeauth", "grpc-process-sidecar-nodeauth", "http-executor-kubernetes"])
def test_generated_private_keys_reach_their_consumers_only_as_secrets(stack, preview):
    run = run_program(program_config(stack), stack, preview=preview, provider=RealTlsProvider())
    consumers = [r for r in run.registrations if r.type in PRIVATE_KEY_CONSUMERS]
    # CA cert, server CSR, server cert: each takes a private key; with a protected
    # SuperExec hop (1.41, process isolation) each pool's Runtime API CSR and cert too.
    plan = plan_for(program_config(stack), stack)
    pools = len(plan.spec.supernodes.pools) if plan.runtime_trust is not None else 0
    expected = sorted(PRIVATE_KEY_CONSUMERS)
    expected += ["tls:index/certRequest:CertRequest", "tls:index/locallySignedCert:LocallySignedCert"] * pools
    assert sorted(r.type for r in consumers) == sorted(expected)
    for reg in consumers:
        for prop in PRIVATE_KEY_CONSUMERS[reg.type]:
            value = reg.inputs[prop]
            assert rpc.is_rpc_secret(value), f"{reg.name}.{prop} is not secret"
            assert "-----BEGIN PRIVATE KEY-----" in rpc.unwrap_rpc_secret(value)
        # Nothing else a consumer receives is a private key in the clear.
        plain = {k: v for k, v in reg.inputs.items() if not rpc.is_rpc_secret(v)}
        assert "PRIVATE KEY" not in json.dumps(plain, default=str), reg.name
    # The keys themselves: server and CA (and each pool's Runtime API) on P-256, one
    # P-384 node key per SuperNode (3 + 1).
    keys = sorted(
        (r.name, r.inputs["ecdsaCurve"]) for r in run.registrations if r.type == "tls:index/privateKey:PrivateKey"
    )
    assert [c for _, c in keys].count("P256") == 2 + pools
    assert [c for _, c in keys].count("P384") == 4


@PREVIEW
@pytest.mark.parametrize(
    "stack",
    [
        "http-nodeauth",
        "grpc-process-sidecar-nodeauth",
        "http-certmanager",
        "http-existing-copy",
        "http-daemonset-supplied-keys",
    ],
)
def test_every_secret_the_program_creates_holds_its_data_as_a_pulumi_secret(stack, preview):
    cfg = program_config(stack)
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
        assert all(public_keys.OPENSSH_HEADER in v for v in files.values())
    if plan.trust.source == "generate":
        assert "-----BEGIN PRIVATE KEY-----" in secret_files(secrets[plan.trust.server_secret])["tls.key"]


@PREVIEW
@pytest.mark.parametrize("stack", ["http-nodeauth", "http-daemonset-supplied-keys"])
def test_outputs_export_public_keys_and_the_ca_only(stack, preview):
    cfg = program_config(stack)
    plan = plan_for(cfg, stack)
    run = run_program(cfg, stack, preview=preview, provider=RealTlsProvider())
    for key, value in run.outputs.items():
        text = value if isinstance(value, str) else json.dumps(value)
        assert "PRIVATE KEY" not in text, f"output {key} holds a private key"
    node_auth = run.outputs["nodeAuth"]
    assert set(node_auth) == {"publicKeys", "registerScript", "registrationJob"}
    assert node_auth["registrationJob"].startswith(f"{plan.names.node_registration}-")
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
    all_workloads = workloads_of(run)
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
    for w in workloads_of(run):
        for refs in secret_volumes(w["spec"]["template"]["spec"]).values():
            for name, keys in refs:
                if name == plan.trust.ca_secret:
                    mounted_as_ca += 1
                    assert keys == [plan.trust.ca_key], (w["metadata"]["name"], keys)
                runtime = plan.runtime_trust
                if runtime is not None and name in dict(runtime.pool_secrets).values():
                    # A pool's Runtime API key: only in that pool's SuperNodes.
                    pool = w["spec"]["template"]["metadata"]["labels"]["flower.flwr.ai/pool"]
                    assert w["metadata"]["name"] == plan.names.pool(pool) and name == runtime.pool_secret(pool)
                elif name != plan.trust.server_secret:
                    assert keys is None or "tls.key" not in keys, (w["metadata"]["name"], name, keys)
    # The SuperLink and every pool's SuperNodes at least.
    assert mounted_as_ca >= 1 + len(plan.spec.supernodes.pools)
