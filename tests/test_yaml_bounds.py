"""flower_federation/kube/yaml_bounds.py: a file whose aliases expand beyond go-yaml's bound (a "billion laughs"
of a few hundred bytes), whose anchor holds an alias of itself, or that nests deeper than MAX_DEPTH is refused
as a file, at once, by every command that reads one (validate, render, import), never loaded and walked.

The alias boundaries below were measured with go-yaml v3.0.1 itself (what Pulumi's engine reads a stack file
with: Debian's golang-gopkg-yaml.v3-dev, `yaml.Unmarshal` into an `interface{}`, 2026-11-29): the smallest number
of plain items before the aliases that go-yaml accepts. The count decides to the node, so one item fewer is
refused."""

from __future__ import annotations

import contextlib
import io

import pytest

from flower_federation.cli.main import main
from flower_federation.kube.goyaml import load_helm_values, load_stack_file
from flower_federation.kube.yaml_bounds import MAX_DEPTH, ExcessiveAliasing, TooDeep

# (items of the anchored value, aliases of it, how it is written) -> go-yaml v3.0.1's smallest accepted padding
GO_YAML_BOUNDARIES = {
    (200, 300, "seq"): 102,
    (200, 1000, "seq"): 823,
    (500, 150, "seq"): 102,
    (300, 400, "map"): 1421,
    (1000, 120, "map"): 298,
    (150, 2000, "seq"): 893,
    (300, 400, "merge"): 621,  # each alias a `<<` merge into a mapping of its own
}

BOMB = "\n".join(
    [
        'a: &a ["x","x","x","x","x","x","x","x","x","x"]',
        *(f"{c}: &{c} [{','.join([f'*{p}'] * 10)}]" for p, c in zip("abcdefg", "bcdefgh", strict=True)),
    ]
)


def padded(items: int, aliases: int, shape: str, padding: int) -> str:
    if shape == "seq":
        value, use = "[" + ",".join(["x"] * items) + "]", "*a"
    else:
        value = "{" + ",".join(f"k{i}: v" for i in range(items)) + "}"
        use = "*a" if shape == "map" else "{<<: *a}"
    return f"a: &a {value}\np: [{','.join(['y'] * padding)}]\nb: [{','.join([use] * aliases)}]\n"


@pytest.mark.parametrize("case", GO_YAML_BOUNDARIES, ids=str)
def test_aliases_are_bounded_where_go_yaml_bounds_them(case: tuple[int, int, str]) -> None:
    accepted = GO_YAML_BOUNDARIES[case]
    load_stack_file(padded(*case, accepted))
    with pytest.raises(ExcessiveAliasing, match="excessive aliasing"):
        load_stack_file(padded(*case, accepted - 1))
    load_helm_values(padded(*case, accepted))  # go-yaml v2 (Helm) has the same bound since 2.2.8
    with pytest.raises(ExcessiveAliasing):
        load_helm_values(padded(*case, accepted - 1))


def test_an_anchor_holding_itself_is_refused_and_a_shared_one_is_not() -> None:
    with pytest.raises(ExcessiveAliasing, match="contains an alias of itself"):
        load_stack_file("a: &a [1, *a]")
    with pytest.raises(ExcessiveAliasing, match="contains an alias of itself"):
        load_stack_file("a: &a {b: [{c: *a}]}")
    assert load_stack_file("a: &a [1]\nb: [*a, *a]\nc: {<<: {d: *a}}") == {"a": [1], "b": [[1], [1]], "c": {"d": [1]}}


def nested(levels: int) -> str:
    return "a: " + "[" * levels + "]" * levels


def test_nesting_is_bounded_aliases_included() -> None:
    load_stack_file(nested(MAX_DEPTH - 1))  # the mapping is a level too
    with pytest.raises(TooDeep, match=f"nested more than {MAX_DEPTH} deep"):
        load_stack_file(nested(MAX_DEPTH))
    chain = "\n".join(f"l{i}: &l{i} [{f'*l{i - 1}' if i else ''}]" for i in range(MAX_DEPTH + 1))
    with pytest.raises(TooDeep):  # each level an alias of the one before: 65 levels of 65 lines
        load_stack_file(chain)
    load_stack_file("\n".join(chain.splitlines()[: MAX_DEPTH - 1]))


def _run(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    return code, out.getvalue(), err.getvalue()


STACK = """config:
  flower-federation:federation:
    name: demo
    supernodes:
      pools:
        - name: cpu
          replicas: 1
          extraArgs: {value}
"""


@pytest.mark.parametrize("command", ["validate", "render"])
def test_every_command_refuses_such_a_file_at_once_without_a_traceback(tmp_path, command: str) -> None:
    """The file a few hundred bytes long whose 10^8 strings hung `render`; 3,000 nested lists, which raised
    RecursionError; and the negative control: the same file with the alias used in it three levels up renders."""
    for value, says in (("*h", "excessive aliasing"), (nested(3000)[3:], "nested more than")):
        path = tmp_path / "Pulumi.x.yaml"
        path.write_text((BOMB + "\n" if value.startswith("*h") else "") + STACK.format(value=value))
        code, out, err = _run([command, "--config-file", str(path)])
        assert (code, out) == (2, "") and says in err and "Traceback" not in err, err
        assert err.startswith(f"error: {path}: not valid YAML: "), err
    path.write_text(STACK.format(value='["--max-retries", "1"]'))
    assert _run([command, "--config-file", str(path)])[0] == 0


def test_import_refuses_a_values_file_bomb(tmp_path) -> None:
    values = tmp_path / "values.yaml"
    values.write_text(BOMB + "\nsupernode: *h\n")
    code, out, err = _run(["import", "helm", str(values)])
    assert code != 0 and "excessive aliasing" in err and "Traceback" not in err, err
