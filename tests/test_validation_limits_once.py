"""One cause, one problem, in `validate` and `render` alike: the federation's annotations reach every object, so
annotations over the API server's 262,144 bytes were one line per object (12 for a small stack), each at
`federation.annotations`. They are one problem naming the first object and how many more."""

from __future__ import annotations

from pathlib import Path

import yaml

from tests.test_new_user_cli import cli

POOL = {"supernodes": {"pools": [{"name": "cpu", "replicas": 1}]}}


def _stack(tmp_path: Path, federation: dict[str, object]) -> str:
    path = tmp_path / "Pulumi.dev.yaml"
    path.write_text(yaml.safe_dump({"config": {"flower-federation:federation": federation}}))
    return str(path)


def _both(file: str) -> list[tuple[int, str]]:
    return [cli(command, "--config-file", file)[::2] for command in ("validate", "render")]


def test_annotations_over_the_limit_are_one_problem_in_validate_and_render(tmp_path: Path) -> None:
    file = _stack(tmp_path, {"name": "demo", "annotations": {"big": "x" * 300_000}, **POOL})
    (v_code, v_err), (r_code, r_err) = _both(file)
    assert (v_code, r_code) == (1, 1) and v_err == r_err, (v_err, r_err)
    assert v_err.splitlines() == [
        "invalid flower-federation config (1 problem):",
        "  - federation.annotations: Namespace flower (and 11 more objects): annotations total 300,003 bytes (keys "
        "and values); the API server refuses more than 262,144: make it smaller",
    ], v_err


def test_annotations_just_under_the_limit_pass_both(tmp_path: Path) -> None:
    file = _stack(tmp_path, {"name": "demo", "annotations": {"big": "x" * 262_000}, **POOL})
    (v_code, v_err), (r_code, r_err) = _both(file)
    assert (v_code, r_code) == (0, 0), (v_err, r_err)


def test_a_pool_overfilling_the_key_configmaps_is_one_problem_at_its_replicas(tmp_path: Path) -> None:
    pools = [{"name": "cpu", "replicas": 1_000_000}]
    file = _stack(tmp_path, {"name": "demo", "nodeAuth": {"enabled": True}, "supernodes": {"pools": pools}})
    (v_code, v_err), (r_code, r_err) = _both(file)
    assert (v_code, r_code) == (1, 1) and v_err == r_err, (v_err, r_err)
    lines = v_err.splitlines()
    assert lines[0] == "invalid flower-federation config (1 problem):" and len(lines) == 2, v_err
    assert lines[1].startswith("  - federation.supernodes.pools[0].replicas: 0 trusted site keys and 1,000,000"), v_err
