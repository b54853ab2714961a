"""The benchmark's floor (bench/floor.py) replays exactly what the render registers. No
timing here: speed is measured only by `make bench`."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import yaml

from bench import stacks
from flower_federation.cli.offline import run_program

ROOT = Path(__file__).resolve().parents[1]


def test_floor_replays_the_render_registrations(tmp_path):
    settings = {"config": {"flower-federation:federation": stacks.federation(pools=1, replicas=2, node_auth=True)}}
    stack_file = tmp_path / "Pulumi.bench.yaml"
    stack_file.write_text(yaml.safe_dump(settings))
    regs = tmp_path / "regs.json"
    subprocess.run(
        [sys.executable, str(ROOT / "bench" / "registrations.py"), str(stack_file), str(regs)], cwd=ROOT, check=True
    )
    recorded = json.loads(regs.read_text())

    render = run_program(settings["config"], "bench")
    # (The order the monitor sees registrations in may vary between runs: it serves them
    # on executor threads.)
    assert sorted((r["type"], r["name"]) for r in recorded["registrations"]) == sorted(
        (r.type, r.name) for r in render.registrations
    )
    types = {r.type for r in render.registrations}
    # Not vacuous: components, Kubernetes objects and pulumi-tls keys, secrets among the inputs.
    assert {
        "flower-federation:index:Federation",
        "kubernetes:apps/v1:StatefulSet",
        "tls:index/privateKey:PrivateKey",
    } <= types
    assert '"$secret"' in regs.read_text()
    assert all(r["parent"] is not None for r in recorded["registrations"][1:])

    # --check: the monitor saw the same URNs (parents' types included) and inputs, from either floor: the typed
    # SDK's (its classes' modules on top of what the render imports: the render registers by token) and the
    # by-token one (exactly the render's SDK modules).
    for flags in ((), ("--by-token",)):
        floor = subprocess.run(
            [sys.executable, str(ROOT / "bench" / "floor.py"), "--check", *flags, str(regs)],
            cwd=ROOT,
            check=True,
            capture_output=True,
            text=True,
        )
        report = json.loads(floor.stdout)
        assert report["registrations"] == len(render.registrations)
        if flags:
            assert report["sdk_modules"] == len(recorded["modules"]), report
        else:
            assert report["sdk_modules"] > len(recorded["modules"]), report
        assert report["project_modules"] == 0
