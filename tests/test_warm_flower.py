"""The e2e's warm Flower (tests/e2e/harness/warm.py) imports Flower with the container's values of every variable
Flower reads at import: IMPORT_ENV must name each one a tested version's modules read at module level (outside
functions: `os.getenv(...)`, `os.environ.get(...)`, `os.environ[...]`, `... in os.environ`), read here from each
venv's source. Negative control: the scan finds the reads it must (a module-level read and one in a function)."""

from __future__ import annotations

import ast
import os
import secrets
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.harness.warm import IMPORT_ENV, IMPORT_ENV_PREFIXES, RUN_PREFIX, remove_stale
from tests.support.flower import REAL_FLOWERS, venv

ENVIRON = ("os.environ", "environ")


def _at_import(tree: ast.Module) -> Iterator[ast.AST]:
    """The nodes run when the module is imported: its body and class bodies, not function bodies."""
    stack: list[ast.AST] = list(tree.body)
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            continue
        yield node
        stack.extend(ast.iter_child_nodes(node))


def env_read_at_import(source: str) -> set[str]:
    names = set()
    for node in _at_import(ast.parse(source)):
        name = None
        if isinstance(node, ast.Call) and ast.unparse(node.func) in ("os.getenv", "getenv", "os.environ.get"):
            name = node.args[0] if node.args else None
        elif isinstance(node, ast.Subscript) and ast.unparse(node.value) in ENVIRON:
            name = node.slice
        elif isinstance(node, ast.Compare) and any(ast.unparse(c) in ENVIRON for c in node.comparators):
            name = node.left
        if isinstance(name, ast.Constant):
            names.add(name.value)
    return names


def test_the_scan_finds_reads_at_import_and_not_in_functions() -> None:
    source = (
        "import os\nA = os.getenv('A_READ')\nif 'B_READ' not in os.environ:\n    os.environ['C_SET'] = '1'\n"
        "class K:\n    D = os.environ.get('D_READ')\ndef f():\n    return os.getenv('NOT_AT_IMPORT')\n"
    )
    assert env_read_at_import(source) == {"A_READ", "B_READ", "C_SET", "D_READ"}


@pytest.mark.parametrize("version", REAL_FLOWERS)
def test_every_variable_flower_reads_at_import_keys_the_warm_servers(version: str) -> None:
    flwr = next((venv(version) / "lib").glob("python3*/site-packages/flwr"))
    read: dict[str, str] = {}
    for path in sorted(flwr.rglob("*.py")):
        for name in env_read_at_import(path.read_text(encoding="utf-8")):
            read.setdefault(name, str(path.relative_to(flwr.parent)))
    assert read, "the scan found no read at all: it is blind"
    missing = {n: where for n, where in read.items() if n not in IMPORT_ENV and not n.startswith(IMPORT_ENV_PREFIXES)}
    assert not missing, f"Flower {version} reads these at import; add them to IMPORT_ENV (harness/warm.py): {missing}"


def test_a_dead_servers_directory_is_removed_and_a_live_ones_kept(tmp_path: Path) -> None:
    """A run killed with SIGKILL leaves its servers' directories under /run: the next server's start removes those
    whose server is gone, never a live one's (negative control: this process's pid)."""
    dead = subprocess.Popen(["true"])
    dead.wait()  # reaped: its pid names no process (until reused, which only keeps a directory)
    dirs = {}
    for name, pid in (("dead", dead.pid), ("live", os.getpid())):
        d = Path(f"{RUN_PREFIX}test-{name}-{secrets.token_hex(3)}")
        d.mkdir()
        (d / "pid").write_text(str(pid))
        dirs[name] = d
    try:
        remove_stale()
        assert not dirs["dead"].exists() and dirs["live"].exists()
    finally:
        for d in dirs.values():
            shutil.rmtree(d, ignore_errors=True)
