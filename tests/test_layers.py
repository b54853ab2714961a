"""The package reads top-down: each layer imports only itself and the layers before it, so a
newcomer can follow config -> rules -> plan -> builders -> shell -> program from the folder names,
and nothing in the core reaches up into Pulumi, the CLI or the importers. No module grows past
what one reading holds."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "flower_federation"
# Lowest first. `importers` and `shell` do not use each other; the order between them is arbitrary,
# as it is between `checks` and `review` (both read rendered objects).
LAYERS = (
    "kube",
    "flower",
    "config",
    "rules",
    "plan",
    "builders",
    "checks",
    "review",
    "shell",
    "program",
    "provider",
    "importers",
    "cli",
    "__main__",
)
MAX_LINES = 400


def layer_of(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__main__"


def modules() -> dict[str, Path]:
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def imported(path: Path) -> list[tuple[int, str]]:
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.level:
            raise AssertionError(f"{path.relative_to(ROOT)}:{node.lineno}: a relative import; write it absolute")
        if isinstance(node, ast.ImportFrom) and node.module == "flower_federation":
            # `from flower_federation import program`: each name is a module of the package.
            # (`__version__` and the public names of flower_federation/__init__.py are no modules.)
            out += [(node.lineno, f"flower_federation.{a.name}") for a in node.names if _is_module(a.name)]
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("flower_federation"):
            out.append((node.lineno, node.module or ""))
        elif isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names if a.name.startswith("flower_federation")]
    return out


def _is_module(name: str) -> bool:
    return (PACKAGE / name).is_dir() or (PACKAGE / f"{name}.py").is_file()


def violations() -> list[str]:
    found = []
    for module, path in modules().items():
        if module == "flower_federation":
            continue
        own = LAYERS.index(layer_of(module))
        for line, target in imported(path):
            if LAYERS.index(layer_of(target)) > own:
                found.append(f"{path.relative_to(ROOT)}:{line}: {layer_of(module)} imports {target} (a layer above it)")
    return found


def test_every_module_is_in_a_known_layer() -> None:
    unknown = sorted(m for m in modules() if m != "flower_federation" and layer_of(m) not in LAYERS)
    assert unknown == []


def test_no_layer_imports_a_layer_above_it() -> None:
    assert violations() == []


@pytest.mark.parametrize(
    "statement",
    [
        "from flower_federation.shell.federation import Federation",
        "from flower_federation import program",
        "from flower_federation.cli import main",
        "import flower_federation.shell.tls",
    ],
)
def test_the_layer_check_fails_on_an_upward_import(tmp_path: Path, statement: str) -> None:
    # Negative control: a builder that reached into the shell, the program or the CLI would be reported.
    bad = tmp_path / "bad.py"
    bad.write_text(statement + "\n", encoding="utf-8")
    ((_, target),) = imported(bad)
    assert LAYERS.index(layer_of(target)) > LAYERS.index(layer_of("flower_federation.builders.superlink"))


def test_no_module_is_longer_than_one_reading() -> None:
    long = {
        str(p.relative_to(ROOT)): n
        for p in PACKAGE.rglob("*.py")
        if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    }
    assert long == {}


# What the package was called before it moved (federation/ and components/): a name a newcomer would search for in
# vain. Only module names that are not also config keys (`federation.probes` is a config path).
OLD_NAMES = re.compile(
    r"(?<![\w/.-])(?:federation|components)/\w+\.py"
    r"|(?<![\w.])components\.(?:offline|program|federation|tls|cluster|kubernetes|supernode_pool|node_keys|certs|rollout)\b"
    r"|(?<![\w.])federation\.(?:pss|sshkeys|nodeauth|k8s_schema|config_errors|goyaml|documents|tls_sources|nodeconfig"
    r"|workload_parts|pod_settings|superlink_state|pool_superexec|helm_parameters|fleet_proxy|state_guard|dialects"
    r"|naming|layout|plan|rules|reference|manifests)\b"
)
# Rendered into every registration ConfigMap and Fleet-only proxy config: kept byte for byte (see the comments there).
RENDERED_AS_BEFORE = {"flower_federation/flower/scripts/register_nodes.py", "flower_federation/builders/fleet_proxy.py"}


def old_names(text: str) -> list[str]:
    return [m.group(0) for m in OLD_NAMES.finditer(text)]


def test_no_code_or_comment_names_the_package_before_it_moved() -> None:
    found = {
        str(p.relative_to(ROOT)): names
        for folder in ("flower_federation", "tests", "bench")
        for p in sorted((ROOT / folder).rglob("*.py"))
        if p.name not in ("test_layers.py", "test_docs.py")
        and str(p.relative_to(ROOT)) not in RENDERED_AS_BEFORE
        and (names := old_names(p.read_text(encoding="utf-8")))
    }
    assert found == {}


def test_the_old_names_are_found() -> None:
    # Negative control; and config paths that share a module's old name are left alone.
    text = "(components.offline.run_program) reads federation/plan.py and `federation.pss`; federation.probes.x"
    assert old_names(text) == ["components.offline", "federation/plan.py", "federation.pss"]
