"""Many SuperNodes (scale.py): E2E_SCALE SuperNodes (10 by default) across sites of their own,
admitted by one hub, on the newest Flower, following the lanes (background.py); its
figures are the scenario's phases (docs/benchmarks.md, "Many SuperNodes"). `make e2e-scale
E2E_SCALE=N` runs it alone."""

from __future__ import annotations

import pytest

from tests.e2e import scale
from tests.e2e.background import report
from tests.support.flower import HTTP_ERA

# Bounds a hang only: its start waits for its turn, then each step is bounded by scale.py.
RESULT_TIMEOUT = 900 + 10 * scale.scale()


@pytest.mark.parametrize("version", [HTTP_ERA])
@pytest.mark.scenario(
    f"many SuperNodes: {scale.scale()} across {len(scale.sites_for(scale.scale()))} sites (E2E_SCALE), "
    "registered by the hub's Job, all online, every one in every round of a run; "
    "time to all online, round times, SuperLink CPU and memory",
    id="19",
)
def test_19_many_supernodes(background, version, record_property):
    report(background.follower(version, "19").wait(RESULT_TIMEOUT), record_property)
