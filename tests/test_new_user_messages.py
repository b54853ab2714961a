"""Config problems as a new user reads them (GitHub issue 23): a type error quotes the value given, and says that
`yes`/`no`/`on`/`off` are strings to Pulumi (YAML 1.2); a value of the wrong type brings no second, unrelated
problem; an invalid pool name is quoted; `{index}` under DaemonSet says the mode is DaemonSet."""

from __future__ import annotations

import pytest

from tests.support.importing import run_import, write
from tests.support.stacks import base
from tests.support.validation import cfg, pool, problems, sts_pool


@pytest.mark.parametrize("word", ["yes", "no", "on", "off", "Yes", "OFF"])
def test_a_yaml_1_1_boolean_word_is_a_string_and_the_message_says_so(word):
    ((path, message),) = problems(cfg(nodeAuth={"enabled": word}))
    assert path == "federation.nodeAuth.enabled"
    assert repr(word) in message
    assert "YAML 1.2" in message and "true or false" in message


@pytest.mark.parametrize(
    ("field", "value"),
    [
        (("nodeAuth", "enabled"), "sure"),
        (("supernodes", "pools", 0, "replicas"), "three"),
        (("superlink", "persistence", "size"), 5),
        (("namespace",), ["a"]),
        (("superlink",), "big"),
    ],
)
def test_every_type_error_quotes_the_value_given(field, value):
    raw = cfg()
    node = raw
    for part in field[:-1]:
        node = node.setdefault(part, {}) if isinstance(part, str) else node[part]
    node[field[-1]] = value
    found = problems(raw)
    messages = [m for p, m in found if p.endswith(".".join(str(f) for f in field if isinstance(f, str))[-8:])]
    assert any(repr(value) in m for m in messages), found
    assert not any("YAML 1.2" in m for m in messages)


def test_a_mistyped_insecure_on_a_site_brings_no_certificate_problem():
    raw = base(role="site", insecure="yes")
    raw["supernodes"]["superlink"] = {"address": "hub.example.org"}
    found = problems(raw)
    assert [p for p, _ in found] == ["federation.insecure"], found


def test_a_mistyped_tls_enabled_in_chart_values_is_the_one_problem(tmp_path, capsys):
    values = {"tls": {"enabled": "yes"}, "supernode": {"image": {"tag": "1.26.1"}}}
    code, out, err = run_import(capsys, "helm", write(tmp_path, "v.yaml", values))
    assert code == 1 and out == ""
    problems_said = [line for line in err.splitlines() if line.startswith("  - ")]
    assert problems_said == ["  - tls.enabled: must be true or false, not 'yes'"], err


def test_an_invalid_pool_name_is_quoted():
    ((path, message),) = problems(cfg(sts_pool("GPU_1")))
    assert path == "federation.supernodes.pools[0].name"
    assert "'GPU_1'" in message


def test_index_under_daemonset_says_the_mode_is_daemonset():
    raw = cfg(pool("edge", nodeConfig={"partition-id": "{index}"}), mode="DaemonSet")
    ((path, message),) = problems(raw)
    assert path == "federation.supernodes.pools[0].nodeConfig.partition-id"
    assert "only available when mode is StatefulSet" in message
    assert "pool 'edge' has mode DaemonSet" in message


def test_a_value_with_a_line_break_or_an_escape_stays_on_its_problems_line():
    """A label value pasted with its newline, or a terminal escape in a name, is quoted escaped: each problem is one
    line of the report, and no value can forge another problem's line or colour the terminal."""
    from flower_federation.config.errors import ConfigError
    from flower_federation.plan import load_plan

    raw = cfg(labels={"team": "ml\n  - federation.namespace: forged"}, namespace="a\x1b[31mb")
    with pytest.raises(ConfigError) as info:
        load_plan(raw, "dev")
    lines = info.value.render().splitlines()
    assert len(lines) == 1 + len(info.value.problems) >= 3, lines
    assert all(line.startswith("  - federation.") for line in lines[1:]), lines
    assert any("ml\\n  - federation.namespace: forged" in line for line in lines), lines
    assert any("a\\x1b[31mb" in line for line in lines) and not any("\x1b" in line for line in lines), lines
