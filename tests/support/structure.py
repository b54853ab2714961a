"""The structure of what a render generates, with the values left out: Kubernetes objects by their keys and list
lengths, and inside them the generated files by their own grammar (nginx.conf by nginxinc's parser, Python by its
AST, TOML by tomllib, shell by its words). Two renders of one stack that differ only in one config string must have
the same structure: a string that changes it (a `;` that ends an nginx directive, a newline that starts a script
line) is an injection (tests/test_injection_invariant.py)."""

from __future__ import annotations

import ast
import json
import shlex
import tempfile
import tomllib
from pathlib import Path
from typing import Any

import crossplane

NGINX_MARK = "# Rendered by flower-federation: the SuperLink's Fleet API only"


def nginx_shape(text: str) -> Any:
    with tempfile.TemporaryDirectory() as d:
        conf = Path(d) / "nginx.conf"
        conf.write_text(text, encoding="utf-8")
        parsed = crossplane.parse(str(conf), single=True, comments=False, check_ctx=True, check_args=True)
    if parsed["status"] != "ok":
        return ("nginx errors", [e["error"] for e in parsed["errors"]])

    def tree(block: list[dict[str, Any]]) -> list[Any]:
        # A directive's arguments by count (their values are the config's); a block by its directives.
        return [(d["directive"], len(d["args"]), tree(d.get("block") or [])) for d in block]

    return tree(parsed["config"][0]["parsed"])


class _Blank(ast.NodeTransformer):
    def visit_Constant(self, node: ast.Constant) -> ast.AST:
        return ast.Constant(value=type(node.value).__name__)


def python_shape(text: str) -> Any:
    try:
        tree = ast.parse(text)
    except SyntaxError as e:
        return ("python syntax error", str(e))
    return ast.dump(_Blank().visit(tree), annotate_fields=False)


def toml_shape(text: str, value: str = "") -> Any:
    try:
        return shape(tomllib.loads(text), value=value)
    except tomllib.TOMLDecodeError as e:
        return ("toml error", str(e))


def shell_shape(text: str) -> Any:
    lines = text.split("\n")
    out: list[Any] = []
    for line in lines:
        try:
            out.append(len(shlex.split(line, comments=True)))
        except ValueError as e:
            out.append(("shell error", str(e)))
    return out


def string_shape(value: str, key: str = "", placeholder: str = "") -> Any:
    if value.startswith(NGINX_MARK) or key.endswith(".conf"):
        return ("nginx", nginx_shape(value))
    if key.endswith(".py"):
        return ("python", python_shape(value))
    if key.endswith(".toml") or key in ("flwrConfig",):
        return ("toml", toml_shape(value, placeholder))
    if key.endswith(".sh") or value.startswith("#!/") or key == "registerScript":
        return ("shell", shell_shape(value))
    if key == "key-labels":  # the federation exporter's `site pool key-type key-material` lines
        return ("lines", [len(line.split(" ")) for line in value.split("\n")])
    if key.endswith(".json"):
        try:
            return ("json", shape(json.loads(value), value=placeholder))
        except ValueError as e:
            return ("json error", str(e))
    return "str"


def shape(node: Any, key: str = "", value: str = "") -> Any:
    """`node` with its strings reduced to their structure (most to "str"); a map key equal to `value` (the config
    string under test, where it names something: a connection) stands as `<value>`."""
    if isinstance(node, dict):
        return {
            ("<value>" if value and k == value else k): shape(v, str(k), value)
            for k, v in sorted(node.items(), key=lambda kv: str(kv[0]))
        }
    if isinstance(node, list):
        # `python -c SCRIPT` and `sh -c SCRIPT` in a container's command: the script by its grammar.
        out = [shape(v, key, value) for v in node]
        for i, v in enumerate(node[:-1]):
            if v == "-c" and isinstance(node[i + 1], str) and i >= 1 and isinstance(node[i - 1], str):
                grammar = python_shape if node[i - 1].endswith("python") else shell_shape
                out[i + 1] = (grammar.__name__, grammar(node[i + 1]))
        return out
    if isinstance(node, str):
        return string_shape(node, key, value)
    return type(node).__name__
