"""Warnings a preview prints (flower_federation/plan/outputs.py `warnings`): what is deployed as asked but a reviewer
should know. Here: images of another Flower version than the federation's, within its dialect (validation
admits them: a command line is the same across a dialect)."""

from __future__ import annotations

import pytest

from flower_federation.plan.outputs import warnings
from tests.support.flower import GRPC_ERA, HTTP_ERA
from tests.support.render import plan_of
from tests.support.stacks import base


def _skew(plan_warnings: list[str]) -> list[str]:
    return [w for w in plan_warnings if "talk across Flower versions" in w]


@pytest.mark.parametrize("version", [GRPC_ERA, HTTP_ERA])
def test_one_flower_everywhere_says_nothing(version):
    for isolation in ("subprocess", "process"):
        assert _skew(warnings(plan_of(base(version, isolation=isolation)))) == []


def test_each_image_of_another_flower_is_named_with_the_fix():
    raw = base(GRPC_ERA, isolation="process")
    older = "1.21.0"
    raw["supernodes"]["pools"][1]["images"] = {
        "supernode": f"flwr/supernode:{older}",
        "superexecClientApp": f"flwr/superexec:{older}-py3.11-ubuntu24.04",
    }
    raw["superlink"]["image"] = {"repository": "flwr/superlink", "tag": older}
    said = _skew(warnings(plan_of(raw)))
    assert [w.split(" Flower ", 1)[0] for w in said] == [
        "The SuperLink runs",
        "Pool beta's SuperNodes run",
        "Pool beta's SuperExecs run",
    ]
    assert said[2].startswith(
        f"Pool beta's SuperExecs run Flower {older} (flwr/superexec:{older}-py3.11-ubuntu24.04) in a federation of "
        f"Flower {GRPC_ERA}: their command lines are written for {GRPC_ERA}"
    )
    assert all(
        w.endswith(f"Give every image a {GRPC_ERA} tag, or set `version` to the Flower they all run.") for w in said
    )
