"""Node keys in the real Pulumi program (under mocks): each SuperNode replica resolves
a P-384 key of its own whose public half is the exported one, the exported register
script registers every SuperNode once (and again without error), supplied keys land in
the pool's Secret for DaemonSets and StatefulSets, and supplied keys in plain config or
of the wrong kind stop the program before anything is registered."""

from __future__ import annotations

import json
import os
import shlex
import stat
import subprocess

import pulumi
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import load_ssh_private_key, load_ssh_public_key
from pulumi.runtime import rpc

from flower_federation import program
from flower_federation.builders import node_auth, trust
from flower_federation.cli.offline import Run, run_program
from flower_federation.flower import public_keys
from flower_federation.flower.layout import NODE_KEY_DIR
from tests.support.kube import container_argv, pod_for
from tests.support.manifests import arg_after, container
from tests.support.program import (
    PREVIEW,
    STACKS,
    created_secrets,
    ec_public_numbers,
    manifest,
    plan_for,
    secret_files,
    secret_volumes,
)
from tests.support.render import plan_of
from tests.support.stacks import HTTP_ERA, base, daemonset_node_keys, program_config
from tests.support.tls_provider import RealTlsProvider, new_openssh_key

FED_KEY = f"{program.PROJECT}:{program.CONFIG_KEY}"
KEYS_KEY = f"{program.PROJECT}:{program.NODE_KEYS_KEY}"


def test_each_replica_resolves_a_key_of_its_own():
    stack = "http-nodeauth"
    cfg = program_config(stack)
    plan = plan_for(cfg, stack)
    run = run_program(cfg, stack, provider=RealTlsProvider())
    secret = created_secrets(run)[plan.names.node_keys_secret("alpha")]
    files = secret_files(secret)
    assert sorted(files) == ["node-0.key", "node-1.key", "node-2.key"]
    assert len(set(files.values())) == 3
    keys = {}
    for name, text in files.items():
        assert text.startswith(public_keys.OPENSSH_HEADER)
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
        path = arg_after(argv, "--auth-supernode-private-key")
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
    assert ec_public_numbers(load_ssh_public_key(public["beta"]["0"].encode())) == ec_public_numbers(
        beta_key.public_key()
    )
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
    run = run_program(program_config(stack), stack, provider=RealTlsProvider())
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
    again = subprocess.run(
        ["sh", str(path)], capture_output=True, text=True, timeout=30, env={**env, "FLWR_DUPLICATE": "1"}
    )
    assert again.returncode == 0, again.stderr
    assert again.stdout.count("already registered or revoked: ") == 4


@PREVIEW
def test_supplied_keys_for_a_daemonset_land_in_the_secret_and_are_exported(preview):
    stack = "http-daemonset-supplied-keys"
    supplied = daemonset_node_keys(new_openssh_key)
    cfg = program_config(stack, supplied)
    plan = plan_for(cfg, stack)
    run = run_program(cfg, stack, preview=preview)
    # No node key is generated: the only pulumi-tls keys are the TLS server's and CA's.
    assert all(
        r.inputs["ecdsaCurve"] == trust.SERVER_KEY_CURVE
        for r in run.registrations
        if r.type == "tls:index/privateKey:PrivateKey"
    )
    secrets = created_secrets(run)
    public = run.outputs["nodeAuth"]["publicKeys"]
    for pool, slots in supplied.items():
        reg = secrets[plan.names.node_keys_secret(pool)]
        assert rpc.is_rpc_secret(reg.inputs["stringData"])
        assert secret_files(reg) == {node_auth.key_file(slot): text for slot, text in slots.items()}
        assert public[pool] == {
            slot: public_keys.public_key(text, f"sec/{pool}/{slot}") for slot, text in slots.items()
        }
        ds = manifest(run, "DaemonSet", plan.names.pool(pool))
        for node in slots:
            argv = container_argv(container(ds, "supernode"), pod_for(ds, node=node))
            assert arg_after(argv, "--auth-supernode-private-key") == f"{NODE_KEY_DIR}/node-{node}.key"
    assert "PRIVATE KEY" not in json.dumps(run.outputs)


@PREVIEW
def test_supplied_keys_for_a_statefulset_give_each_ordinal_its_key(preview):
    raw = base(HTTP_ERA, nodeAuth={"enabled": True, "keySource": "config"})
    supplied = {"alpha": {str(i): new_openssh_key() for i in range(3)}, "beta": {"0": new_openssh_key()}}
    run = run_program({"federation": raw, "nodeAuthKeys": supplied}, "sts-keys", preview=preview)
    plan = plan_of(raw, "sts-keys", supplied)
    secrets = created_secrets(run)
    alpha = secrets[plan.names.node_keys_secret("alpha")]
    assert rpc.is_rpc_secret(alpha.inputs["stringData"])
    assert secret_files(alpha) == {f"node-{i}.key": supplied["alpha"][str(i)] for i in range(3)}
    assert run.outputs["nodeAuth"]["publicKeys"]["alpha"] == {
        slot: public_keys.public_key(text, f"sec/alpha/{slot}") for slot, text in supplied["alpha"].items()
    }
    sts = manifest(run, "StatefulSet", plan.names.pool("alpha"))
    for i in range(3):
        path = arg_after(container_argv(container(sts, "supernode"), pod_for(sts, i)), "--auth-supernode-private-key")
        assert secret_files(alpha)[os.path.basename(path)] == supplied["alpha"][str(i)]
    assert not [
        r
        for r in run.registrations
        if r.type == "tls:index/privateKey:PrivateKey" and r.inputs["ecdsaCurve"] == node_auth.KEY_CURVE
    ]


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
        expected = [
            "nodeAuthKeys.alpha.node-b: must be an ECDSA P-384 private key in OpenSSH format",
            "nodeAuthKeys.beta.node-a: must be an ECDSA P-384 private key in OpenSSH format",
        ]
    elif case == "duplicate-and-extra":
        stack = "sts-keys"
        raw = base(HTTP_ERA, nodeAuth={"enabled": True, "keySource": "config"})
        shared = new_openssh_key()
        keys = {"alpha": {"0": shared, "1": shared, "2": new_openssh_key(), "3": new_openssh_key()}, "beta": {}}
        expected = [
            'nodeAuthKeys.alpha["1"]: the same key as alpha.0',
            'nodeAuthKeys.alpha["3"]',
            "nodeAuthKeys.beta: missing keys for replicas 0",
        ]
    else:
        from cryptography.hazmat.primitives.asymmetric import rsa

        stack = "http-daemonset-supplied-keys"
        raw = STACKS[stack]
        keys = daemonset_node_keys(new_openssh_key)
        rsa_key = rsa.generate_private_key(public_exponent=65537, key_size=1024)
        keys["alpha"]["node-a"] = rsa_key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH, serialization.NoEncryption()
        ).decode()
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
