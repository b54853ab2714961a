"""The order the e2e lanes start in (tests/e2e/background.py): they queue at the start gate in that order, so the
current era's lanes, the longest, start their federations first. No root, no process: the lanes are built, not
started."""

from __future__ import annotations

from tests.e2e.background import Background
from tests.support.flower import GRPC_ERA, HTTP_ERA


def _versions(wanted: dict[str, set[str]]) -> list[str]:
    return [lane.version for lane in Background(wanted).lanes]


def test_the_current_eras_lanes_start_first_then_newest_first():
    # listed as the tests are collected, the gRPC era first: that order is not what decides
    wanted = {GRPC_ERA: {"1", "2", "15"}, "1.43.0.dev20261026": {"1", "2"}, HTTP_ERA: {"1", "2", "13"}}
    assert _versions(wanted) == [HTTP_ERA] * 3 + ["1.43.0.dev20261026"] * 2 + [GRPC_ERA] * 3
