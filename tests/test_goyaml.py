"""flower_federation/kube/goyaml.py: files read as the Go program that reads each for real (Helm and kubectl: go-yaml
v2; Pulumi's engine: go-yaml v3), not as PyYAML's YAML 1.1, and a stack file written so that each reads
back what was written. Then the `render` command on a stack file whose nodeConfig PyYAML would misread."""

from __future__ import annotations

import contextlib
import io
import math

import pytest
import yaml

from flower_federation.cli.main import main
from flower_federation.kube import goyaml
from tests.support.flower import GRPC_ERA, PROGRAMS
from tests.support.kube import started_containers

# Plain scalar -> (go-yaml v2's value, go-yaml v3's value), from go-yaml's resolve.go.
SCALARS = {
    "1e-3": (0.001, 0.001),  # PyYAML: a string (no dot)
    "1.5e3": (1500.0, 1500.0),  # PyYAML: a string (unsigned exponent)
    "5E-4": (0.0005, 0.0005),
    "1.": (1.0, 1.0),
    ".5": (0.5, 0.5),
    "+.5": (0.5, 0.5),
    "1_000": (1000, 1000),
    "0x1F": (31, 31),
    "0X1F": (31, 31),  # PyYAML: a string
    "0o17": (15, 15),  # PyYAML: a string
    "017": (15, 15),
    "0b101": (5, 5),
    "09": (9.0, 9.0),  # not octal, so go-yaml's float regex takes it; PyYAML: a string
    "18446744073709551615": (2**64 - 1, 2**64 - 1),  # ParseUint
    "99999999999999999999": (1e20, 1e20),  # beyond uint64: the float regex
    "1e400": ("1e400", "1e400"),  # ParseFloat's range error
    "1:30": ("1:30", "1:30"),  # PyYAML: 90 (base 60)
    "2024-01-01": ("2024-01-01", "2024-01-01"),  # PyYAML: a date
    "._5": ("._5", "._5"),
    "=": ("=", "="),  # PyYAML: fails (no constructor for its `value` tag)
    "-.inf": (-math.inf, -math.inf),
    "y": (True, "y"),  # YAML 1.1 (go-yaml v2) only; PyYAML: a string
    "Yes": (True, "Yes"),
    "on": (True, "on"),
    "OFF": (False, "OFF"),
    "n": (False, "n"),
    "True": (True, True),
    "FALSE": (False, False),
    "~": (None, None),
    "": (None, None),
    "x1": ("x1", "x1"),
}
LOADERS = {"v2": goyaml.HelmLoader, "v3": goyaml.PulumiLoader}


def _same(a, b) -> bool:
    return type(a) is type(b) and (a == b or (isinstance(a, float) and math.isnan(a) and math.isnan(b)))


@pytest.mark.parametrize("dialect", [0, 1], ids=["go-yaml v2", "go-yaml v3"])
def test_scalars_as_go_yaml_reads_them(dialect):
    loader = list(LOADERS.values())[dialect]
    for text, values in SCALARS.items():
        got = yaml.load(f"k: {text}\n", Loader=loader)["k"]
        assert _same(got, values[dialect]), (text, got)
        # Quoted, every scalar is the string.
        assert yaml.load(f"k: '{text}'\n", Loader=loader)["k"] == text


def test_the_c_and_python_loaders_read_alike():
    """The loaders are built on libyaml's parser where PyYAML has one; PyYAML's own reads the same."""
    text = "".join(f"k{i}: {t}\n" for i, t in enumerate(SCALARS)) + "a: &x {b: 1}\nc: {<<: *x, d: 2}\n"
    for loader in LOADERS.values():
        python = type("Python", (goyaml.GoResolution, yaml.SafeLoader), {"BOOLEANS": loader.BOOLEANS})
        a, b = yaml.load(text, Loader=loader), yaml.load(text, Loader=python)
        assert list(a) == list(b) and all(_same(a[k], b[k]) for k in a), (a, b)


def test_documents_and_merges():
    assert goyaml.load_helm_values("a: 1\n---\nb: y\n") == [{"a": 1}, {"b": True}]
    assert goyaml.load_stack_file("a: &x {b: yes}\nc: {<<: *x, d: 1e-3}\n") == {
        "a": {"b": "yes"},
        "c": {"b": "yes", "d": 0.001},
    }


def test_a_stack_file_reads_back_as_written():
    """Strings any of the three readers would take for something else are quoted; numbers and booleans stay
    plain."""
    data = {"s": [t for t in SCALARS if t != ""] + ["yes", "null", "1e-3"], "n": [0.001, 1e-7, 10, -math.inf, True]}
    text = yaml.dump(data, Dumper=goyaml.StackDumper, sort_keys=False)
    for read in (goyaml.load_stack_file, lambda t: goyaml.load_helm_values(t)[0], yaml.safe_load):
        assert read(text) == data
    assert "- 0.001\n" in text and "- '1e-3'\n" in text and "- 'y'\n" in text


def _render(tmp_path, text: str) -> tuple[int, str, str]:
    path = tmp_path / "Pulumi.y.yaml"
    path.write_text(text)
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["render", "--config-file", str(path)])
    return code, out.getvalue(), err.getvalue()


STACK = """\
config:
  flower-federation:federation:
    name: y
    version: 1.26.1
    insecure: true
    supernodes:
      pools:
        - name: a
          replicas: 1
          nodeConfig: {answer: yes, lr: 1e-3, flag: true}
"""


def test_render_reads_a_stack_file_as_pulumi_does(tmp_path, flower):
    """`yes` is a string to Pulumi (YAML 1.2), `1e-3` a float: the SuperNode gets what `pulumi up` would give it."""
    code, out, err = _render(tmp_path, STACK)
    assert code == 0, err
    objects = [d for d in yaml.safe_load_all(out) if d]
    (argv,) = [a for _, _, c, a in started_containers(objects) if c["name"] == "supernode"]
    cli = flower[GRPC_ERA]
    got = cli.node_config(cli.parse(PROGRAMS["supernode"], argv)["node_config"])
    assert got == {"answer": "yes", "lr": 0.001, "flag": True} and type(got["lr"]) is float
