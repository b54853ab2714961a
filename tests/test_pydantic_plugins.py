"""`python -m flower_federation` loads no pydantic plugin (flower_federation/__main__.py): no third-party code
hooks into validating a stack's config (it holds the stack's secrets), and finding plugins scanned every installed
distribution's metadata on each command (issue 36). One subprocess `validate` with a plugin installed (a
dist-info whose `pydantic` entry point, when loaded, writes a file), and its negative control: the same with
PYDANTIC_DISABLE_PLUGINS set to "" (load all, the explicit opt-in) loads it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import yaml

from bench import stacks

ROOT = Path(__file__).resolve().parent.parent


def _validate(tmp_path: Path, env: dict[str, str]) -> tuple[subprocess.CompletedProcess[str], Path]:
    site = tmp_path / "site"
    (site / "spy_plugin-1.0.dist-info").mkdir(parents=True)
    (site / "spy_plugin-1.0.dist-info" / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: spy-plugin\nVersion: 1.0\n"
    )
    (site / "spy_plugin-1.0.dist-info" / "entry_points.txt").write_text("[pydantic]\nspy = spy_plugin:plugin\n")
    marker = tmp_path / "loaded"
    (site / "spy_plugin.py").write_text(f"open({str(marker)!r}, 'w').close()\nplugin = object()\n")
    stack = tmp_path / "Pulumi.bench.yaml"
    federation = stacks.federation(pools=1, replicas=1, node_auth=False)
    stack.write_text(yaml.safe_dump({"config": {"flower-federation:federation": federation}}))
    inherited = {k: v for k, v in os.environ.items() if k != "PYDANTIC_DISABLE_PLUGINS"}
    run_env = {**inherited, "PYTHONPATH": os.pathsep.join([str(ROOT), str(site)]), **env}
    argv = [sys.executable, "-m", "flower_federation", "validate", "--config-file", str(stack)]
    return subprocess.run(argv, cwd=ROOT, env=run_env, capture_output=True, text=True, timeout=120), marker


def test_the_cli_loads_no_pydantic_plugin(tmp_path: Path) -> None:
    done, marker = _validate(tmp_path, {})
    assert done.returncode == 0, done.stderr
    assert not marker.exists()


def test_negative_control_an_explicit_opt_in_loads_the_plugin(tmp_path: Path) -> None:
    done, marker = _validate(tmp_path, {"PYDANTIC_DISABLE_PLUGINS": ""})
    assert marker.exists(), done.stderr
