"""Validation of nodeConfig: `{index}`/`{replicas}` only in StatefulSet mode, values of
TOML scalar types within TOML's range, keys of letters, digits, '_' and '-'."""

from __future__ import annotations

import pytest

from tests.support.validation import assert_valid, cfg, pool, problems, sts_pool

DS = "; pool 'a' has mode DaemonSet (one SuperNode per node, no ordinal)"


def test_index_and_replicas_placeholders_only_in_statefulset_mode():
    node_config = {"i": "{index}", "r": "of-{replicas}", "p": "{pool}", "n": "{node}"}
    assert_valid(cfg(sts_pool("a", nodeConfig=node_config)))
    raw = cfg(pool("a", nodeConfig=node_config), mode="DaemonSet")
    assert problems(raw) == [
        ("federation.supernodes.pools[0].nodeConfig.i", "{index} is only available when mode is StatefulSet" + DS),
        ("federation.supernodes.pools[0].nodeConfig.r", "{replicas} is only available when mode is StatefulSet" + DS),
    ]


@pytest.mark.parametrize(
    "value, kind",
    [([1, 2], "list"), (None, "null"), ({"a": 1}, "dict")],
    ids=["list", "null", "dict"],
)
def test_node_config_value_types(value, kind):
    raw = cfg(sts_pool("a", nodeConfig={"ok": "x", "bad": value}))
    assert problems(raw) == [
        ("federation.supernodes.pools[0].nodeConfig.bad", f"must be a string, integer, float or boolean, not {kind}"),
    ]


def test_node_config_integer_out_of_toml_range():
    raw = cfg(sts_pool("a", nodeConfig={"big": 2**63}))
    assert problems(raw) == [("federation.supernodes.pools[0].nodeConfig.big", "integer out of TOML's 64-bit range")]


def test_node_config_scalars_are_valid():
    assert_valid(cfg(sts_pool("a", nodeConfig={"s": "x y", "i": -3, "f": 0.5, "b": True, "k_e-y9": 2**63 - 1})))


@pytest.mark.parametrize("key", ["a b", "a.b", "a=b", "ä"])
def test_node_config_bad_keys(key):
    raw = cfg(sts_pool("a", nodeConfig={key: 1}))
    assert problems(raw) == [
        (f'federation.supernodes.pools[0].nodeConfig["{key}"]', "keys may only hold letters, digits, '_' and '-'"),
    ]
