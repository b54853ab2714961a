"""Every selected e2e scenario runs in a thread started with the first e2e test (conftest.py's
`background` fixture), so the federations of all test modules run side by side: the
single-federation lanes (lanes.py), the sites scenarios (sites.py: 6, 6g), the SuperExec hop
(appio.py: 7) and many SuperNodes (scale.py: 19). A test only waits for its scenario's
outcome and reports it.

Before, each module's scenarios started when its first test ran, after the previous module's
had all finished: the sites scenarios, the SuperExec hop and the scale scenario added their
minutes to the suite's, on a machine whose cores the lanes mostly leave idle (Flower polls and
waits). Side by side they share lanes.START_GATE: one federation starts at a time (a start is a
CPU burst), the long single-federation lanes first (they are queued first), and two runs at
most at a time (runs.RUN_SLOTS).
"""

from __future__ import annotations

import threading
import time
import traceback
from collections.abc import Callable

import pytest

from tests.e2e import appio, scale, sites
from tests.e2e.lanes import LANES, START_GATE, Lane
from tests.e2e.scenarios import Outcome
from tests.support.flower import HTTP_ERA

# Scenarios of their own, not single-federation lanes: id -> how it runs for a version.
SITES_EXPOSURES = {"6": "loadBalancer", "6g": "gateway"}


class OutcomeLane(threading.Thread):
    """One scenario in a thread: `run` returns its Outcome."""

    def __init__(self, name: str, scenario: str, run: Callable[[], Outcome]):
        super().__init__(name=name, daemon=True)
        self.scenario = scenario
        self._run = run
        self.outcome = Outcome(scenario)
        self.done = threading.Event()

    def run(self) -> None:
        try:
            self.outcome = self._run()
        except BaseException:  # a scenario's runner reports its failures; this is a bug in one
            self.outcome.status, self.outcome.error = "failed", traceback.format_exc()
        finally:
            self.done.set()

    def wait(self, timeout: float) -> Outcome:
        if not self.done.wait(timeout):
            return Outcome(
                self.scenario, status="failed", error=f"scenario {self.scenario} did not finish in {timeout:.0f}s"
            )
        return self.outcome


def _appio(version: str) -> Outcome:
    outcome = Outcome("7")
    start = time.monotonic()
    try:
        outcome.phases = appio.run(version, START_GATE)
        outcome.status = "passed"
    except BaseException:
        outcome.status, outcome.error = "failed", traceback.format_exc()
    outcome.seconds = time.monotonic() - start
    return outcome


class Background:
    """The lanes of the selected scenarios ({version: {scenario ids}}), started together."""

    def __init__(self, wanted: dict[str, set[str]]):
        self.lanes = [lane for v, ids in wanted.items() for groups in LANES if (lane := Lane(v, ids, groups)).wanted]
        self.others: dict[tuple[str, str], OutcomeLane] = {}
        for version, ids in wanted.items():
            for sid in sorted(ids & set(SITES_EXPOSURES)):
                exposure = SITES_EXPOSURES[sid]
                self.others[(version, sid)] = OutcomeLane(
                    f"e2e-sites-{sid}-{version}",
                    sid,
                    lambda v=version, e=exposure: sites.run_scenario(v, START_GATE, e),
                )
            if "19" in ids:
                n = scale.scale()
                self.others[(version, "19")] = OutcomeLane(
                    f"e2e-scale-{n}-{version}", "19", lambda v=version, n=n: scale.run_scenario(v, n, START_GATE)[0]
                )
        if "7" in wanted.get("-", set()):  # the SuperExec hop: one version (appio.py), no parameter
            self.others[("-", "7")] = OutcomeLane("e2e-appio", "7", lambda: _appio(HTTP_ERA))

    def start(self) -> None:
        # The long single-federation lanes first: they queue first at START_GATE.
        for lane in self.lanes:
            lane.start()
        for other in self.others.values():
            other.start()

    def lane(self, version: str, scenario: str) -> Lane:
        return next(lane for lane in self.lanes if lane.version == version and scenario in lane.wanted)

    def other(self, version: str, scenario: str) -> OutcomeLane:
        return self.others[(version, scenario)]

    def stop(self) -> None:
        """The lanes start no further federation (a session ending early)."""
        for lane in self.lanes:
            lane.stopping = True

    def join(self, timeout: float) -> list[str]:
        """Waits for every thread up to `timeout` in all (a lane's last federation closes after its last
        outcome is reported); the names of those still running."""
        deadline = time.monotonic() + timeout
        every = [*self.lanes, *self.others.values()]
        for t in every:
            t.join(timeout=max(0.0, deadline - time.monotonic()))
        return [t.name for t in every if t.is_alive()]


def report(outcome: Outcome, record_property: Callable[[str, object], None]) -> None:
    """A scenario's outcome as its test's result, with its duration, phases and incidents (conftest.py
    prints them per Flower version)."""
    record_property("scenario_seconds", outcome.seconds)
    record_property("phases", ", ".join(outcome.phases))
    for text in outcome.incidents:
        record_property("incident", text)
    if outcome.status != "passed":
        pytest.fail(outcome.error, pytrace=False)
