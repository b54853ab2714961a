"""Every selected e2e scenario runs in a thread started with the first e2e test (conftest.py's
`background` fixture); a test only waits for its scenario's outcome and reports it. The
single-federation lanes (lanes.py) start at once; the scenarios of their own follow them: the skew window's
chain (site_skew.py: 6s and 6n) first, the sites scenarios (sites.py: 6, 6g) and the SuperExec hop (appio.py:
7) each as soon as a lane has ended, many
SuperNodes (scale.py: 19) once every lane has ended.

Why followers, not all at once: two cores are the limit. Started with the lanes, the followers' hubs
and the scale scenario's thirty SuperNodes slowed the lanes by minutes (their last outcome at 1,000 s
instead of 780 s) and starved the scale scenario's sites past their startup probes; started as the first
lane ended, the thirty slowed the last lanes past a deadline and their own run past its bound (CI, 2026-11-26).
Started when their module's first test ran, as before, they waited for every lane to end and then
for each other. All share lanes.START_GATE (one federation starts at a time: a start is a CPU burst)
and runs.RUN_SLOTS (two runs at a time).
"""

from __future__ import annotations

import re
import threading
import time
import traceback
from collections.abc import Callable

import pytest

from tests.e2e import appio, scale, site_skew, sites
from tests.e2e.lanes import LANES, START_GATE, Lane
from tests.e2e.scenarios import Outcome
from tests.support.flower import HTTP_ERA

SITES_EXPOSURES = {"6": "loadBalancer", "6g": "gateway"}  # the sites scenarios: id -> how the hub is reached
SKEW = {"6s", "6n"}  # the skew window's pairings (site_skew.py): one federation, the hub rolled between them


class Follower(threading.Thread):
    """One scenario of its own in a thread (Background starts it when its turn comes): `run` returns its
    Outcome; `then` is called when it ended, whatever happened."""

    def __init__(self, name: str, scenario: str, run: Callable[[], Outcome], then: Callable[[], None]):
        super().__init__(name=name, daemon=True)
        self.scenario = scenario
        self._run = run
        self._then = then
        self.outcome = Outcome(scenario)
        self.done = threading.Event()

    def run(self) -> None:
        try:
            self.outcome = self._run()
        except BaseException:  # a scenario's runner reports its failures; this is a bug in one
            self.outcome.status, self.outcome.error = "failed", traceback.format_exc()
        finally:
            self.done.set()
            self._then()

    def wait(self, timeout: float) -> Outcome:
        if not self.done.wait(timeout):
            return Outcome(
                self.scenario, status="failed", error=f"scenario {self.scenario} not done within {timeout:.0f}s"
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


def _newest_first(version: str) -> tuple[int, ...]:
    """A sort key putting newer Flower versions first ("1.43.0.dev20261026" after "1.42.0" in release order is
    enough here: the lanes' order only decides who starts a federation first)."""
    return tuple(-int(part) for part in re.findall(r"\d+", version)[:3])


class Background:
    """The lanes of the selected scenarios ({version: {scenario ids}}), and the followers: the scenarios of
    their own. The sites scenarios and the SuperExec hop start one each time a lane or a follower ends; many
    SuperNodes, the heaviest by far, once every lane has ended."""

    def __init__(self, wanted: dict[str, set[str]]):
        # The lanes queue at START_GATE in the order they start (a Semaphore wakes its waiters first come, first
        # served): the current era's first, the longest (it alone runs 10-14 and 18, CONTRIBUTING.md's Lanes),
        # then the others newest first. With the gRPC era's lanes first (the order the tests are collected in),
        # the 1.42.0 lanes waited for three federation starts before their own and ended last (CI of 7b5f365).
        order = sorted(wanted, key=lambda v: (v != HTTP_ERA, _newest_first(v)))
        self.lanes = [lane for v in order for groups in LANES if (lane := Lane(v, wanted[v], groups)).wanted]
        runs: list[tuple[str, str, str, Callable[[], Outcome]]] = []  # (version, id, thread name, run)
        for version, ids in sorted(wanted.items(), reverse=True):  # the newest Flower first
            for sid in sorted(ids & set(SITES_EXPOSURES)):
                run = lambda v=version, e=SITES_EXPOSURES[sid]: sites.run_scenario(v, START_GATE, e)  # noqa: E731
                runs.append((version, sid, f"e2e-sites-{sid}-{version}", run))
        # The skew window: one chain of pairings on one hub (no version parameter: each pairing names its own). First
        # in the queue: the longest follower (three runs, two hub rolls with their sites' reconnection: 4-8 minutes),
        # mostly waiting on Flower's heartbeats and the probes' bounds, so it costs the least started with the first
        # lane's end, beside the others, rather than lengthening the suite's tail.
        self.pairings: dict[str, Outcome] = {}
        if wanted.get("-", set()) & SKEW:
            run = lambda: site_skew.run_scenario(START_GATE, self.pairings)  # noqa: E731
            runs.insert(0, ("-", "6s", "e2e-sites-skew", run))
        if "7" in wanted.get("-", set()):  # the SuperExec hop: one version (appio.py), no parameter
            runs.append(("-", "7", "e2e-appio", lambda: _appio(HTTP_ERA)))
        heavy: list[tuple[str, str, str, Callable[[], Outcome]]] = []
        for version, ids in wanted.items():
            if "19" in ids:
                n = scale.scale()
                run = lambda v=version, n=n: scale.run_scenario(v, n, START_GATE)  # noqa: E731
                heavy.append((version, "19", f"e2e-scale-{n}-{version}", run))
        self.followers = {(v, sid): Follower(name, sid, run, self._next) for v, sid, name, run in runs + heavy}
        self._queue = [self.followers[(v, sid)] for v, sid, _, _ in runs]
        self._last = [self.followers[(v, sid)] for v, sid, _, _ in heavy]
        self._lanes_left = len(self.lanes)
        self._lock = threading.Lock()
        self.stopping = False
        for lane in self.lanes:
            lane.when_done.append(self._lane_ended)

    def _lane_ended(self) -> None:
        with self._lock:
            self._lanes_left -= 1
        self._next()

    def _next(self) -> None:
        """A lane or a follower ended: the next follower starts, and the heavy ones once no lane is left (in CI,
        thirty SuperNodes beside the last lanes slowed them past their own deadlines); none once stopping."""
        with self._lock:
            if self.stopping:
                return
            starting = self._queue[:1]
            del self._queue[:1]
            if self._lanes_left == 0:
                starting += self._last
                self._last = []
        for follower in starting:
            follower.start()

    def start(self) -> None:
        for lane in self.lanes:
            lane.start()
        if not self.lanes:  # nothing to follow: every follower at once
            for _ in range(len(self.followers)):
                self._next()

    def lane(self, version: str, scenario: str) -> Lane:
        return next(lane for lane in self.lanes if lane.version == version and scenario in lane.wanted)

    def follower(self, version: str, scenario: str) -> Follower:
        return self.followers[(version, scenario)]

    def pairing(self, name: str, timeout: float) -> Outcome:
        """A skew pairing's outcome (site_skew.pairing_name), once the chain that reaches it ended."""
        chain = self.followers[("-", "6s")].wait(timeout)
        return self.pairings.get(name) or Outcome(name, status="failed", error=chain.error or "the chain never ran")

    def stop(self) -> None:
        """The lanes start no further federation and no follower starts (a session ending early); a follower
        not started reports nothing, and its test (if it runs) fails by its timeout."""
        with self._lock:
            self.stopping = True
        for lane in self.lanes:
            lane.stopping = True

    def join(self, timeout: float) -> list[str]:
        """Waits up to `timeout` for every lane and every follower to end (a lane's last federation closes after
        its last outcome is reported; a queued follower starts as others end, unless stopped); the names of the
        threads still running or still queued."""
        deadline = time.monotonic() + timeout
        while True:
            with self._lock:
                queued = [] if self.stopping else [f.name for f in self._queue + self._last]
            running = [t.name for t in [*self.lanes, *self.followers.values()] if t.is_alive()]
            if not (queued or running) or time.monotonic() > deadline:
                return running + queued
            time.sleep(0.5)


def report(outcome: Outcome, record_property: Callable[[str, object], None]) -> None:
    """A scenario's outcome as its test's result, with its duration, phases and incidents (conftest.py
    prints them per Flower version)."""
    record_property("scenario_seconds", outcome.seconds)
    record_property("phases", ", ".join(outcome.phases))
    for text in outcome.incidents:
        record_property("incident", text)
    if outcome.status != "passed":
        pytest.fail(outcome.error, pytrace=False)
