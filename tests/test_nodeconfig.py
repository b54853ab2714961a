"""nodeConfig values reach the SuperNode exactly as configured, whatever a string
holds: rendered, expanded as the kubelet expands args, then parsed by Flower's own
`flwr.common.config.parse_config_args` (both dialects' versions)."""

from __future__ import annotations

import math
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from flower_federation.flower.node_config import NODE_NAME_ENV, POD_INDEX_ENV, render_node_config, render_value
from tests.support.flower import GRPC_ERA, HTTP_ERA
from tests.support.kube import expand

keys = st.from_regex(r"\A[A-Za-z0-9_-]{1,20}\Z")
# Any text, with the characters that break naive quoting over-represented.
nasty = st.sampled_from(
    list("\"'\\$`(){} =\t\n") + ["$(HOME)", "$$", "{index}", "{pool}", "{node}", "{replicas}", "\u00e9", "\U0001f33c"]
)
strings = st.one_of(st.text(), st.lists(st.one_of(nasty, st.text(max_size=3)), max_size=12).map("".join))
values = st.one_of(
    strings,
    st.booleans(),
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.floats(allow_nan=False),
)
configs = st.dictionaries(keys, values, min_size=1, max_size=6)

POD = {POD_INDEX_ENV: "4", NODE_NAME_ENV: "node-7.zone-b"}


def resolved(value, pool: str, replicas: int):
    """What the operator defines the placeholders to mean: a value that is exactly
    {index} or {replicas} is an integer; inside strings placeholders are substituted
    left to right in one pass."""
    subs = {"index": "4", "replicas": str(replicas), "pool": pool, "node": "node-7.zone-b"}
    if not isinstance(value, str):
        return value
    if value in ("{index}", "{replicas}"):
        return int(subs[value[1:-1]])
    return re.sub(r"\{(index|replicas|pool|node)\}", lambda m: subs[m.group(1)], value)


def _same(a, b) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return a == b and math.copysign(1, a) == math.copysign(1, b)
    return type(a) is type(b) and a == b


@pytest.mark.parametrize("version", [GRPC_ERA, HTTP_ERA])
@settings(
    max_examples=150,
    deadline=None,
    # make test runs this niced beside the e2e tests: wall-clock checks would be flaky.
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(config=configs, replicas=st.integers(min_value=1, max_value=500))
def test_any_value_survives_kubernetes_and_flower(version, flower, config, replicas):
    arg = render_node_config(config, "pool-a", replicas)
    parsed = flower[version].node_config(expand(arg, POD))
    assert set(parsed) == set(config)
    for key, value in config.items():
        want = resolved(value, "pool-a", replicas)
        assert _same(parsed[key], want), (key, value, parsed[key], want)


@pytest.mark.parametrize(
    "value, rendered",
    [
        ("{index}", f"$({POD_INDEX_ENV})"),
        ("{replicas}", "4"),
        ("7", '"7"'),
        (7, "7"),
        (True, "true"),
        (0.5, "0.5"),
        (1e16, "1e+16"),
        ("a $(b) c", '"a $$(b) c"'),
        ('say "hi"', '"say \\u0022hi\\u0022"'),
        ("client_{pool}_{index}", f'"client_p_$({POD_INDEX_ENV})"'),
    ],
)
def test_rendering_examples(value, rendered):
    assert render_value(value, "p", 4) == rendered


def test_keys_sorted_and_empty_config_omitted():
    assert render_node_config({"b": 1, "a": 2}, "p", 1) == "a=2 b=1"
    assert render_node_config({}, "p", 1) is None
