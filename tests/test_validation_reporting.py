"""How an invalid config is reported: every problem once, in a deterministic order, in
one error; the Pulumi program stops with that list as a `pulumi.RunError` (no traceback,
nothing registered); the CLI exits 1 with it on stderr and nothing on stdout."""

from __future__ import annotations

import asyncio
import copy
import subprocess
from pathlib import Path
from typing import Any

import pulumi
import pytest
import yaml

from flower_federation.cli import offline
from flower_federation.config.errors import ConfigError, Problem, problem_order
from flower_federation.flower.versions import DEFAULT_VERSION
from flower_federation.plan import load_plan
from tests.support.paths import ROOT
from tests.support.validation import (
    CEL_CLIENTAPP_REQUIRED,
    CEL_NO_POOLS,
    CEL_STS_REPLICAS,
    CEL_SUPEREXEC_REQUIRED,
    DNS_NAME_MSG,
    cfg,
    not_a_field,
    pool,
    problems,
    sts_pool,
)

PYTHON = ROOT / ".venv" / "bin" / "python"


MANY_PROBLEMS = {
    "namespace": "Flower_NS",
    "isolatonMode": "process",
    "superlink": {"podTemplate": {"spec": {"nodeSelectr": {}}}, "env": [{"name": "FLOWER_POD_INDEX"}]},
    "supernodes": {
        "pools": [
            {"name": "a"},
            {"name": "a", "replicas": "many"},
            {"name": "c", "replicas": 1, "nodeConfig": {"a b": 1, "x": None}},
        ]
    },
    "version": "1.41.0",
    "superexecPlacement": "distributed",
}
MANY_EXPECTED = [
    ("federation.isolatonMode", "unknown key 'isolatonMode'; did you mean 'isolationMode'?"),
    ("federation.namespace", "'Flower_NS' must be a DNS label of at most 63 characters"),
    ("federation.superexecPlacement", "distributed SuperExec needs isolationMode=process"),
    ("federation.superlink.env[0].name", "FLOWER_POD_INDEX is set by flower-federation (node config placeholders)"),
    ("federation.superlink.podTemplate.spec", not_a_field("nodeSelectr")),
    ("federation.supernodes.pools[0].replicas", CEL_STS_REPLICAS),
    ("federation.supernodes.pools[1].name", "duplicate pool name 'a' (also supernodes.pools[0])"),
    ("federation.supernodes.pools[1].replicas", "Input should be a valid integer, not 'many'"),
    # Sorted by path: `.x` sorts before `["a b"]`.
    ("federation.supernodes.pools[2].nodeConfig.x", "must be a string, integer, float or boolean, not null"),
    ('federation.supernodes.pools[2].nodeConfig["a b"]', "keys may only hold letters, digits, '_' and '-'"),
]


def _reversed_keys(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _reversed_keys(value[k]) for k in reversed(list(value))}
    if isinstance(value, list):
        return [_reversed_keys(v) for v in value]
    return value


def test_all_problems_reported_together_each_once():
    assert problems(copy.deepcopy(MANY_PROBLEMS)) == MANY_EXPECTED


def test_problem_order_does_not_depend_on_key_order():
    assert problems(_reversed_keys(copy.deepcopy(MANY_PROBLEMS))) == MANY_EXPECTED


def test_error_text_lists_every_problem_once():
    with pytest.raises(ConfigError) as info:
        load_plan(copy.deepcopy(MANY_PROBLEMS), "dev")
    lines = str(info.value).splitlines()
    assert lines[0] == f"invalid flower-federation config ({len(MANY_EXPECTED)} problems):"
    assert lines[1:] == [f"  - {path}: {message}" for path, message in MANY_EXPECTED]


def test_single_problem_header_is_singular():
    with pytest.raises(ConfigError) as info:
        load_plan({"supernodes": {"pools": []}}, "dev")
    assert (
        str(info.value)
        == f"invalid flower-federation config (1 problem):\n  - federation.supernodes.pools: {CEL_NO_POOLS}"
    )


def test_problems_in_natural_pool_order():
    pools = [sts_pool(f"p{i}") for i in range(12)]
    pools[10] = pool("p10")
    pools[2] = pool("p2")
    assert problems(cfg(*pools)) == [
        ("federation.supernodes.pools[2].replicas", CEL_STS_REPLICAS),
        ("federation.supernodes.pools[10].replicas", CEL_STS_REPLICAS),
    ]


@pytest.mark.parametrize(
    "raw, paths",
    [
        # One path a prefix of the other but for its digits (`team`, `team2`): no int is compared with a str.
        (cfg(sts_pool(), labels={"team2": "-", "team": "-"}), ["federation.labels.team", "federation.labels.team2"]),
        (
            cfg(sts_pool(nodeConfig={"lr2": None, "lr": None})),
            ["federation.supernodes.pools[0].nodeConfig.lr", "federation.supernodes.pools[0].nodeConfig.lr2"],
        ),
        # '²' and '٤' pass str.isdigit() but are no ASCII number: sorted as text, never int()'d.
        (cfg(sts_pool(), labels={"1²1": "x", "1٤": "x"}), ['federation.labels["1²1"]', 'federation.labels["1٤"]']),
    ],
)
def test_problem_order_is_total(raw, paths):
    assert [path for path, _ in problems(raw)] == paths


def test_problem_order_is_natural_and_deterministic():
    given = [
        Problem("federation.a[10]", "m"),
        Problem("federation.a[2]", "m"),
        Problem("federation.a[02]", "m"),
        Problem("federation.a²", "m"),
        Problem("federation.a", "n"),
        Problem("federation.a", "m"),
    ]
    expected = [given[5], given[4], given[2], given[1], given[0], given[3]]
    assert sorted(given, key=problem_order) == expected
    assert sorted([given[i] for i in (3, 5, 1, 4, 0, 2)], key=problem_order) == expected


def test_type_error_does_not_hide_cel_rule_elsewhere():
    raw = cfg(pool("a", replicas="many"), isolationMode="process")
    assert problems(raw) == [
        ("federation.superlink.superexecImage", CEL_SUPEREXEC_REQUIRED),
        ("federation.supernodes.pools[0].images.superexecClientApp", CEL_CLIENTAPP_REQUIRED),
        ("federation.supernodes.pools[0].replicas", "Input should be a valid integer, not 'many'"),
    ]


def test_config_error_deduplicates_problems():
    p = Problem("federation.mode", "x")
    q = Problem("federation.name", "y")
    assert ConfigError([p, q, p]).problems == [p, q]


# --- the Pulumi program: RunError, no traceback, nothing registered ---------------------------


@pytest.fixture
def runs(monkeypatch) -> list[offline.Run]:
    """Every `Run` the offline runner creates, so a failed run can be inspected too."""
    created: list[offline.Run] = []

    class SpyRun(offline.Run):
        def __init__(self):
            super().__init__()
            created.append(self)

    monkeypatch.setattr(offline, "Run", SpyRun)
    return created


def test_valid_config_registers_resources(runs):
    # Proves the spy sees registrations, so the empty list below means something.
    result = offline.run_program({"flower-federation:federation": cfg()}, "dev")
    assert runs == [result]
    assert result.kubernetes, "a valid config registers Kubernetes objects"


def test_invalid_config_raises_run_error_and_registers_nothing(runs):
    with pytest.raises(pulumi.RunError) as info:
        offline.run_program({"flower-federation:federation": copy.deepcopy(MANY_PROBLEMS)}, "dev")
    message = str(info.value)
    for path, msg in MANY_EXPECTED:
        assert message.count(f"  - {path}: {msg}") == 1
    assert message.startswith(f"invalid flower-federation config ({len(MANY_EXPECTED)} problems):")
    assert "Traceback" not in message
    assert len(runs) == 1
    assert runs[0].registrations == []
    assert runs[0].outputs == {}


def test_missing_config_raises_run_error(runs):
    with pytest.raises(pulumi.RunError) as info:
        offline.run_program({}, "dev")
    assert str(info.value) == (
        "invalid flower-federation config (1 problem):\n"
        "  - federation: missing: set the flower-federation:federation config key"
    )
    assert runs[0].registrations == []


@pytest.mark.parametrize("value, kind", [("str", "str"), ("{not json", "str"), (["a"], "list"), (5, "int")])
def test_a_federation_that_is_no_mapping_is_a_problem_as_validate_says_it(runs, value, kind):
    """Pulumi passes a string config value as it is written, not as JSON: `get_object` raised its own
    `Configuration ... is not a valid 'JSON object'` where `validate` lists the problem."""
    with pytest.raises(pulumi.RunError) as info:
        offline.run_program({"flower-federation:federation": value}, "dev")
    assert (
        str(info.value)
        == f"invalid flower-federation config (1 problem):\n  - federation: must be a mapping, not {kind}"
    )
    assert runs[0].registrations == []


def test_invalid_stack_name_reaches_the_program(runs):
    with pytest.raises(pulumi.RunError) as info:
        offline.run_program({"flower-federation:federation": cfg()}, "Prod_EU")
    assert f"federation.name: stack name 'Prod_EU' (the default for name) {DNS_NAME_MSG}" in str(info.value)
    assert runs[0].registrations == []


def test_run_program_closes_every_event_loop_it_creates(monkeypatch):
    created: list[asyncio.AbstractEventLoop] = []
    real_new_event_loop = asyncio.new_event_loop

    def tracking_new_event_loop():
        loop = real_new_event_loop()
        created.append(loop)
        return loop

    monkeypatch.setattr(asyncio, "new_event_loop", tracking_new_event_loop)
    offline.run_program({"flower-federation:federation": cfg()}, "dev")
    left_open = [loop for loop in created if not loop.is_closed()]
    for loop in left_open:  # don't leave them for the garbage collector
        loop.close()
    assert created, "the offline runner creates at least its own loop"
    assert left_open == []


# --- CLI -----------------------------------------------------------------------------------------


def _write_stack(tmp_path: Path, federation: Any, filename: str = "stack.yaml") -> Path:
    path = tmp_path / filename
    path.write_text(yaml.safe_dump({"config": {"flower-federation:federation": federation}}, sort_keys=False))
    return path


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(PYTHON), "-m", "flower_federation", *args], cwd=ROOT, capture_output=True, text=True, timeout=300
    )


@pytest.mark.parametrize("command", ["validate", "render"])
def test_cli_invalid_config_exits_1_with_problems_on_stderr(tmp_path, command):
    path = _write_stack(tmp_path, MANY_PROBLEMS)
    result = _cli(command, "--config-file", str(path))
    assert result.returncode == 1
    assert result.stdout == ""
    assert "Traceback" not in result.stderr
    with pytest.raises(ConfigError) as info:
        load_plan(copy.deepcopy(MANY_PROBLEMS), "dev")
    assert result.stderr == str(info.value) + "\n"


def test_cli_validate_valid_config(tmp_path):
    path = _write_stack(tmp_path, cfg(name="demo", namespace="flower-dev"))
    result = _cli("validate", "--config-file", str(path))
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    assert result.stdout == (
        f"ok: federation 'demo' in namespace 'flower-dev', Flower {DEFAULT_VERSION} (HTTP era), StatefulSet pools: a\n"
    )


def test_cli_render_valid_config(tmp_path):
    path = _write_stack(tmp_path, cfg(name="demo"))
    result = _cli("render", "--config-file", str(path))
    assert result.returncode == 0, result.stderr
    # No assertion on a clean stderr here: see test_run_program_closes_every_event_loop_it_creates.
    docs = [d for d in yaml.safe_load_all(result.stdout) if d]
    kinds = {d["kind"] for d in docs}
    assert {"StatefulSet", "Service"} <= kinds
    assert "demo-supernode-a" in {d["metadata"]["name"] for d in docs}


def test_cli_stack_name_from_file_name_is_the_default_name(tmp_path):
    path = _write_stack(tmp_path, cfg(), filename="Pulumi.Prod_EU.yaml")
    result = _cli("validate", "--config-file", str(path))
    assert result.returncode == 1
    assert result.stdout == ""
    assert result.stderr == (
        "invalid flower-federation config (1 problem):\n"
        f"  - federation.name: stack name 'Prod_EU' (the default for name) {DNS_NAME_MSG}\n"
    )


def test_cli_missing_file_is_a_usage_error(tmp_path):
    result = _cli("validate", "--config-file", str(tmp_path / "nope.yaml"))
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr.startswith("error: no such stack settings file:")
