"""The package reads top-down: each layer imports only itself and the layers before it, so a
newcomer can follow config -> rules -> plan -> build -> shell -> program from the folder names,
and nothing in the core reaches up into Pulumi, the CLI or the importers. No module grows past
what one reading holds."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "flower_federation"
# Lowest first. `importers` and `shell` do not use each other; the order between them is arbitrary.
LAYERS = ("kube", "flower", "config", "rules", "plan", "builders", "shell", "program", "importers", "cli", "__main__")
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
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("flower_federation"):
            out.append((node.lineno, node.module or ""))
        elif isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names if a.name.startswith("flower_federation")]
    return out


def violations() -> list[str]:
    found = []
    for module, path in modules().items():
        if module == "flower_federation":
            continue
        own = LAYERS.index(layer_of(module))
        for line, target in imported(path):
            if target == "flower_federation":
                continue  # `from flower_federation import <layer>`: checked through what it names below
            if LAYERS.index(layer_of(target)) > own:
                found.append(f"{path.relative_to(ROOT)}:{line}: {layer_of(module)} imports {target} (a layer above it)")
    return found


def test_every_module_is_in_a_known_layer() -> None:
    unknown = sorted(m for m in modules() if m != "flower_federation" and layer_of(m) not in LAYERS)
    assert unknown == []


def test_no_layer_imports_a_layer_above_it() -> None:
    assert violations() == []


def test_the_layer_check_fails_on_an_upward_import(tmp_path: Path) -> None:
    # Negative control: a builder that reached into the Pulumi shell would be reported.
    bad = tmp_path / "bad.py"
    bad.write_text("from flower_federation.shell.federation import FederationComponent\n", encoding="utf-8")
    ((line, target),) = imported(bad)
    assert LAYERS.index(layer_of(target)) > LAYERS.index(layer_of("flower_federation.builders.superlink"))


def test_no_module_is_longer_than_one_reading() -> None:
    long = {
        str(p.relative_to(ROOT)): n
        for p in PACKAGE.rglob("*.py")
        if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    }
    assert long == {}
