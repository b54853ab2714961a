"""End to end across organisations: a hub and its sites, each its own stack, render and
cluster (see sites.py). Scenario 6 reaches the hub through a LoadBalancer Service, for
both Flower versions; scenario 6g through a Gateway API route (the emulated Gateway,
harness/gateway.py), for the HTTP era, whose hub needs the Fleet-only proxy. The lanes
run side by side, one thread each, after the single-federation scenarios (test_e2e.py)
are done; each test waits for its lane's outcome and reports it with the scenario's own
duration and phases."""

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


EXPOSURES = {"6": "loadBalancer", "6g": "gateway"}
HTTP_ERA_VERSIONS = tuple(v for v in VERSIONS if not v.startswith("1.2"))


class SitesLane(threading.Thread):
    def __init__(self, version: str, scenario: str):
        super().__init__(name=f"e2e-sites-{scenario}-{version}", daemon=True)
        self.version = version
        self.scenario = scenario
        self.outcome = Outcome(scenario)
        self.done = threading.Event()

    def run(self) -> None:
        try:
            self.outcome = run_scenario(self.version, START_GATE, EXPOSURES[self.scenario])
        finally:
            self.done.set()


@pytest.fixture(scope="module")
def sites_lanes(request):
    harness.install_cleanup_handlers()
    wanted = [
        (item.callspec.params["version"], item.get_closest_marker("scenario").kwargs["id"])
        for item in request.session.items
        if item.get_closest_marker("scenario") is not None
        and item.get_closest_marker("scenario").kwargs["id"] in EXPOSURES
        and hasattr(item, "callspec")
        and not item.get_closest_marker("skip")
    ]
    for version, _ in wanted:
        python = venv(version) / "bin" / "python"
        if not python.exists():
            pytest.fail(f"{python} missing: run `make test` or `make e2e`, which install flwr=={version}")
    lanes = {key: SitesLane(*key) for key in wanted}
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
    _report(sites_lanes[(version, "6")], record_property)


@pytest.mark.parametrize("version", HTTP_ERA_VERSIONS)
@pytest.mark.scenario(
    "sites through a Gateway API route: the hub's HTTPRoute and BackendTLSPolicy programmed into the emulated "
    "Gateway (TLS with the federation's certificate, verified hop to the Fleet-only proxy); sites train through it, "
    "Control commands from outside get 404 at the gateway and never reach the SuperLink",
    id="6g",
)
def test_6g_sites_through_a_gateway(sites_lanes, version, record_property):
    _report(sites_lanes[(version, "6g")], record_property)


def _report(lane: SitesLane, record_property) -> None:
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
