"""End to end, the SuperExec hop (the HTTP era, see appio.py): TLS and SuperExec auth on
the Runtime API across the pod network; a SuperExec with the wrong auth secret and one
without the CA are refused, the untouched one runs its ClientApp. The gRPC era has
neither (docs/security.md, "The SuperExec hop"), so this runs for the HTTP era only (1.42), following
the lanes (background.py)."""

from __future__ import annotations

import pytest

from tests.e2e.background import report

RESULT_TIMEOUT = 900  # the scenario takes under a minute, once its turn to start came; this only bounds a hang


@pytest.mark.scenario(
    "SuperExec hop over TLS with auth (distributed): wrong auth secret and missing CA refused, the right one runs",
    id="7",
)
def test_7_superexec_hop(background, record_property):
    report(background.follower("-", "7").wait(RESULT_TIMEOUT), record_property)
