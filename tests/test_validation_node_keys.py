"""Supplied node keys (secret config `nodeAuthKeys`, keySource: config): accepted and
normalised when right; otherwise every problem is reported under
`nodeAuthKeys.<pool>.<slot>`: missing or extra slots, keys of the wrong type or curve,
unreadable keys, the same key twice (however its text ends), unknown pools."""

from __future__ import annotations

import functools

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from flower_federation.flower.public_keys import slot_order
from flower_federation.plan import load_plan
from tests.support.render import node_key_secret_of
from tests.support.stacks import base
from tests.support.tls_provider import new_openssh_key
from tests.support.validation import assert_problems, config_error

KEY_CONFIG = {"enabled": True, "keySource": "config"}
KEY_HINT = "must be an ECDSA P-384 private key in OpenSSH format (ssh-keygen -t ecdsa -b 384 -N '' -f key)"


@functools.cache
def _keys(n: int = 8) -> tuple[str, ...]:
    return tuple(new_openssh_key() for _ in range(n))


def _full_keys() -> dict[str, dict[str, str]]:
    k = _keys()
    return {"alpha": {"0": k[0], "1": k[1], "2": k[2]}, "beta": {"0": k[3]}}


def test_supplied_keys_are_accepted_and_normalised():
    k = _keys()
    plan = load_plan(
        base(nodeAuth=KEY_CONFIG), "dev", node_auth_keys={"alpha": {0: k[0], 1: k[1], 2: k[2]}, "beta": {0: k[3]}}
    )
    assert plan.node_auth_keys == _full_keys()
    pool = plan.spec.supernodes.pools[0]
    assert node_key_secret_of(plan, pool, plan.node_auth_keys["alpha"])["stringData"] == {
        "node-0.key": k[0],
        "node-1.key": k[1],
        "node-2.key": k[2],
    }


@functools.cache
def _wrong_keys() -> dict[str, str]:
    rsa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return {
        "rsa": rsa_key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH, serialization.NoEncryption()
        ).decode(),
        "p256": new_openssh_key("P256"),
        "garbage": "-----BEGIN OPENSSH PRIVATE KEY-----\nbm90IGEga2V5\n-----END OPENSSH PRIVATE KEY-----\n",
    }


def _supplied_cases() -> dict[str, tuple]:
    k = _keys()
    full = _full_keys()
    wrong = _wrong_keys()
    return {
        "missing-entirely": (
            None,
            [
                "nodeAuthKeys: missing: nodeAuth.keySource is config, so set one key per SuperNode with "
                "`pulumi config set --secret --path 'nodeAuthKeys.<pool>.<slot>' \"$(cat key)\"`"
            ],
        ),
        "missing-replicas": (
            {"alpha": {"0": k[0]}},
            ["nodeAuthKeys.alpha: missing keys for replicas 1, 2", "nodeAuthKeys.beta: missing keys for replicas 0"],
        ),
        "extra-ordinal": (
            {**full, "alpha": {**full["alpha"], "3": k[4]}},
            ["nodeAuthKeys.alpha[\"3\"]: pool 'alpha' has replicas 0..2; no SuperNode would use this key"],
        ),
        # '²' passes str.isdigit() but int() refuses it: refused like any other slot no replica uses.
        "non-ascii-ordinal": (
            {**full, "alpha": {**full["alpha"], "\u00b2": k[4], "1\u00b2": k[5]}},
            [
                "nodeAuthKeys.alpha[\"1\u00b2\"]: pool 'alpha' has replicas 0..2; no SuperNode would use this key",
                "nodeAuthKeys.alpha[\"\u00b2\"]: pool 'alpha' has replicas 0..2; no SuperNode would use this key",
            ],
        ),
        "wrong-key-types": (
            {**full, "alpha": {"0": wrong["rsa"], "1": wrong["p256"], "2": wrong["garbage"]}},
            [
                f'nodeAuthKeys.alpha["0"]: {KEY_HINT}',
                f'nodeAuthKeys.alpha["1"]: {KEY_HINT}',
                f'nodeAuthKeys.alpha["2"]: {KEY_HINT}; it could not be read (passphrase-protected keys are not supported)',
            ],
        ),
        "not-a-key-at-all": ({**full, "beta": {"0": "hunter2"}}, [f'nodeAuthKeys.beta["0"]: {KEY_HINT}']),
        "duplicate-key": (
            {"alpha": {"0": k[0], "1": k[1], "2": k[0]}, "beta": {"0": k[1]}},
            [
                'nodeAuthKeys.alpha["2"]: the same key as alpha.0: every SuperNode needs its own',
                'nodeAuthKeys.beta["0"]: the same key as alpha.1: every SuperNode needs its own',
            ],
        ),
        "unknown-pool": (
            {**full, "gamma": {"0": k[5]}},
            ["nodeAuthKeys.gamma: no pool named 'gamma' (pools: alpha, beta)"],
        ),
    }


@pytest.mark.parametrize(
    "case",
    [
        "missing-entirely",
        "missing-replicas",
        "extra-ordinal",
        "non-ascii-ordinal",
        "wrong-key-types",
        "not-a-key-at-all",
        "duplicate-key",
        "unknown-pool",
    ],
)
def test_supplied_key_problems(case):
    keys, expected = _supplied_cases()[case]
    err = config_error(base(nodeAuth=KEY_CONFIG), node_auth_keys=keys)
    assert all(p.path.startswith("nodeAuthKeys") for p in err.problems)
    assert_problems(err, expected)


def test_supplied_daemonset_key_problems():
    k = _keys()
    err = config_error(base(mode="DaemonSet", nodeAuth=KEY_CONFIG), node_auth_keys={"alpha": {"Node_A": k[0]}})
    assert_problems(
        err,
        [
            "nodeAuthKeys.alpha.Node_A: DaemonSet keys are named by Kubernetes node name",
            "nodeAuthKeys.beta: missing: give one key per Kubernetes node name",
        ],
    )


def test_a_daemonset_slot_of_non_ascii_digits_is_no_node_name():
    k = _keys()
    err = config_error(
        base(mode="DaemonSet", nodeAuth=KEY_CONFIG), node_auth_keys={"alpha": {"node-a": k[0], "\u00b2": k[1]}}
    )
    assert_problems(
        err,
        [
            'nodeAuthKeys.alpha["\u00b2"]: DaemonSet keys are named by Kubernetes node name',
            "nodeAuthKeys.beta: missing: give one key per Kubernetes node name",
        ],
    )


def test_slot_order_is_total():
    slots = ["b", "\u00b2", "10", "07", "7", "2", "\u0664", "a"]
    assert sorted(slots, key=slot_order) == ["2", "07", "7", "10", "a", "b", "\u00b2", "\u0664"]


def test_keys_are_not_read_unless_key_source_is_config():
    plan = load_plan(base(nodeAuth={"enabled": True}), "dev", node_auth_keys={"bogus": "ignored"})
    assert plan.node_auth_keys is None


def test_the_same_key_written_differently_is_still_a_duplicate():
    """`pulumi config set --secret ... "$(cat key)"` drops the key's trailing newline; a
    YAML block scalar keeps it. The same private key under two slots must be refused
    however its text ends, or two SuperNodes share one registered identity."""
    k = _keys()
    keys = {"alpha": {"0": k[0], "1": k[0].rstrip("\n"), "2": k[2]}, "beta": {"0": k[3]}}
    err = config_error(base(nodeAuth=KEY_CONFIG), node_auth_keys=keys)
    assert [p.path for p in err.problems] == ['nodeAuthKeys.alpha["1"]']
    assert "the same key as alpha.0" in err.problems[0].message
