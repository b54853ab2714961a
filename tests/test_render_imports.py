"""`render` loads only what a render needs (issue 36: its own cost within 1.2x of the Pulumi SDK's): every
command builds the one argument parser, so `check`'s policies (and crossplane, the nginx parser they use),
`import`'s importers and `diff`'s review layer are imported inside those commands, never at start. One
subprocess render of the bench's stack with those modules blocked (`sys.modules[name] = None`: importing one
raises ImportError, a traceback and exit 1), and its negative control."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import yaml

from bench import stacks

ROOT = Path(__file__).resolve().parent.parent
# What a render of a stack without those features must never import.
UNNEEDED = (
    "flower_federation.checks",
    "flower_federation.importers",
    "flower_federation.review",
    "crossplane",
    "jsonschema",
)


def _render(stack_file: Path, blocked: tuple[str, ...]) -> subprocess.CompletedProcess[str]:
    script = (
        "import runpy, sys\n"
        f"for name in {list(blocked)!r}:\n"
        "    sys.modules[name] = None\n"
        f"sys.argv = ['flower_federation', 'render', '--config-file', {str(stack_file)!r}]\n"
        "runpy.run_module('flower_federation', run_name='__main__', alter_sys=True)\n"
    )
    return subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=120)


def _stack(tmp_path: Path) -> Path:
    path = tmp_path / "Pulumi.bench.yaml"
    federation = stacks.federation(pools=2, replicas=2, node_auth=True)
    path.write_text(yaml.safe_dump({"config": {"flower-federation:federation": federation}}))
    return path


def test_render_imports_no_checks_importers_or_review(tmp_path: Path) -> None:
    done = _render(_stack(tmp_path), UNNEEDED)
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("\nkind: StatefulSet\n") == 3  # the SuperLink's and two pools'


def test_negative_control_a_blocked_module_the_render_needs_fails_it(tmp_path: Path) -> None:
    """The blocking works: with a module the render does import blocked (the render command's own), it fails."""
    done = _render(_stack(tmp_path), ("flower_federation.cli.render",))
    assert done.returncode == 1
    assert "import of flower_federation.cli.render halted; None in sys.modules" in done.stderr


# pulumi-kubernetes' typed classes' modules: the render registers Kubernetes objects by token
# (flower_federation/shell/kubernetes.py), and these were most of its imports (docs/benchmarks.md, issue 36). The
# package registers them lazily (a stand-in module until first use), so they are found loaded, not blocked.
TYPED_GROUPS = ("core", "apps", "networking", "batch", "policy", "rbac", "apiextensions", "meta")
LOADED = (
    "import runpy, sys, json\n"
    "sys.argv = ['flower_federation', 'render', '--config-file', sys.argv[1]]\n"
    "try:\n"
    "    runpy.run_module('flower_federation', run_name='__main__', alter_sys=True)\n"
    "finally:\n"
    "    loaded = [n for n, m in sys.modules.items() if m is not None and type(m).__name__ != '_LazyModule']\n"
    "    sys.stderr.write(json.dumps(sorted(n for n in loaded if n.startswith('pulumi_kubernetes.'))))\n"
)


def _loaded_kubernetes_modules(stack_file: Path, before: str = "") -> list[str]:
    done = subprocess.run(
        [sys.executable, "-c", before + LOADED, str(stack_file)], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("\nkind: StatefulSet\n") == 3
    return json.loads(done.stderr.strip().splitlines()[-1])


def test_render_loads_no_typed_kubernetes_class(tmp_path: Path) -> None:
    loaded = _loaded_kubernetes_modules(_stack(tmp_path))
    assert [n for n in loaded if n.split(".")[1] in TYPED_GROUPS] == [], loaded
    assert "pulumi_kubernetes.provider" in loaded  # not vacuous: the package itself is used


def test_negative_control_a_typed_class_used_is_found(tmp_path: Path) -> None:
    loaded = _loaded_kubernetes_modules(_stack(tmp_path), "import pulumi_kubernetes as k\nk.apps.v1.StatefulSet\n")
    assert "pulumi_kubernetes.apps.v1.StatefulSet" in loaded, loaded
