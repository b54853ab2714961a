"""End to end across organisations: a hub and its sites, each its own stack, render and
cluster (see sites.py). Both Flower versions run side by side, one thread each, after
the single-federation scenarios (test_e2e.py) are done; each test waits for its
version's outcome and reports it with the scenario's own duration and phases."""

from __future__ import annotations

import threading

import pytest

from tests.e2e import harness
from tests.e2e.scenarios import Outcome
from tests.e2e.sites import run_scenario
from tests.e2e.stack import VERSIONS, venv

RESULT_TIMEOUT = 600  # the scenario takes 1-3 minutes; this only bounds a hang
# One hub starts at a time (a start is a CPU burst); each version holds it until its
# SuperLink is Ready.
START_GATE = threading.Semaphore(1)


class SitesLane(threading.Thread):
    def __init__(self, version: str):
        super().__init__(name=f"e2e-sites-{version}", daemon=True)
        self.version = version
        self.outcome = Outcome("6")
        self.done = threading.Event()

    def run(self) -> None:
        try:
            self.outcome = run_scenario(self.version, START_GATE)
        finally:
            self.done.set()


@pytest.fixture(scope="module")
def sites_lanes(request):
    harness.install_cleanup_handlers()
    wanted = [
        item.callspec.params["version"]
        for item in request.session.items
        if item.get_closest_marker("scenario") is not None
        and item.get_closest_marker("scenario").kwargs["id"] == "6"
        and hasattr(item, "callspec")
        and not item.get_closest_marker("skip")
    ]
    for version in wanted:
        python = venv(version) / "bin" / "python"
        if not python.exists():
            pytest.fail(f"{python} missing: run `make test` or `make e2e`, which install flwr=={version}")
    lanes = {v: SitesLane(v) for v in wanted}
    for lane in lanes.values():
        lane.start()
    try:
        yield lanes
    finally:
        for lane in lanes.values():
            lane.join(timeout=RESULT_TIMEOUT)
        harness.close_all()


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.scenario(
    "sites: hub + 2 sites, separate stacks and clusters, keys registered by the hub's Job, "
    "run across both sites; an unlisted site refused, a wrong-CA site fails TLS; a dropped site revoked, "
    "its key refused at once when trusted again",
    id="6",
)
def test_6_sites(sites_lanes, version, record_property):
    lane = sites_lanes[version]
    if not lane.done.wait(RESULT_TIMEOUT):
        pytest.fail(f"the sites scenario did not finish within {RESULT_TIMEOUT}s", pytrace=False)
    outcome = lane.outcome
    record_property("scenario_seconds", outcome.seconds)
    record_property("phases", ", ".join(outcome.phases))
    for text in outcome.incidents:
        record_property("incident", text)
    if outcome.status != "passed":
        pytest.fail(outcome.error, pytrace=False)


def test_6_sites_nothing_left_behind(sites_lanes):
    """After both versions' hubs, sites and WANs closed: nothing of ours is left."""
    for lane in sites_lanes.values():
        lane.join(timeout=RESULT_TIMEOUT)
        assert not lane.is_alive(), f"sites lane {lane.version} still running"
    left = harness.leftovers()
    assert left == [], f"left behind: {left}"
