"""The lanes that run the e2e scenarios: threads, several per Flower version, so the
versions' federations run side by side (most of a scenario's time is Flower waiting:
SuperNodes poll every 3 s, heartbeats expire after tens of seconds), which keeps the whole
suite within minutes on two cores. Within a lane everything is sequential: one federation
at a time. The federations and what each scenario proves: scenarios.py, faults.py, liveness.py,
upgrade.py, rotation.py.
"""

from __future__ import annotations

import copy
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Optional

from tests.e2e import faults, liveness, rotation, upgrade
from tests.e2e.harness import NotReady
from tests.e2e.rendering import config
from tests.e2e.scenarios import (
    Outcome,
    distributed_config,
    scenario_1,
    scenario_2,
    scenario_2b,
    scenario_3,
    scenario_4,
    scenario_5,
    wrong_ca,
)
from tests.e2e.stack import Federation


@dataclass
class Group:
    name: str
    scenarios: list[tuple[str, Callable[[Federation, dict], None]]]
    make: Callable[[str], Federation]
    comes_online: bool = True  # False: the negative control, whose SuperNodes never do


GROUPS = [
    Group(
        "subprocess",
        [
            ("1", scenario_1),
            ("3", scenario_3),
            ("4", scenario_4),
            ("11", faults.scenario_11),
            ("8", faults.scenario_8),
        ],
        lambda v: Federation(v, config(v), label="subprocess"),
    ),
    Group(
        "process",
        [("2", scenario_2), ("10", faults.scenario_10), ("12", faults.scenario_12)],
        # Pools 2+1: each claim here needs a pool of several and one of one (a SuperNode and its SuperExec
        # sidecar fewer than 3+1: their start, their polling, a ClientApp a run). The one federation of each
        # version (every version runs it) whose `flwr` user and containers run Flower's console scripts themselves,
        # the others' warm ones (cli_user.py, harness/warm.py): the register script, readiness, runs and listings,
        # every SuperNode and SuperExec through the real executables.
        lambda v: Federation(
            v, config(v, isolation="process", pools=[("a", 2), ("b", 1)]), label="process", warm=False
        ),
    ),
    Group("distributed", [("2b", scenario_2b)], lambda v: Federation(v, distributed_config(v), label="distributed")),
    Group("upgrade", [("13", upgrade.scenario_13), ("14", upgrade.scenario_14)], upgrade.make),
    Group("era", [("15", upgrade.scenario_15)], upgrade.make_era),
    Group("keys", [("16", rotation.scenario_16)], rotation.make),
    Group("ca", [("18", rotation.scenario_18)], rotation.make),
    Group("probes", [("17", liveness.scenario_17)], liveness.make_probed),
    Group(
        "negative",
        [("5", scenario_5)],
        lambda v: Federation(v, config(v, pools=[("a", 1)]), label="negative", tamper=wrong_ca(v)),
        comes_online=False,
    ),
]
SCENARIOS = [s for g in GROUPS for s, _ in g.scenarios]
# Lanes per Flower version (threads): the subprocess federation's scenarios take longest;
# the other federations share a lane (the process one carries the 60 s partition,
# mostly waiting); a version runs only the lanes holding its wanted scenarios (the next Flower's: 1+3, 2,
# 13+14). So at most three federations per version run at once: mostly idle processes
# (Flower polls), which two cores handle. (Four lanes a version, the rolling update on a federation of
# its own, overloaded two cores in CI: SuperNodes' activations timed out, Flower's code 2004.)
LANES = [["subprocess"], ["process", "distributed", "negative", "probes"], ["upgrade", "era", "keys", "ca"]]
# One federation starts at a time: a start is a burst of CPU (every container imports
# Flower, the register script runs `flwr` once per key), and several at once on two cores
# slow a SuperLink past its liveness probe (killed at ~20-30 s) or past the SuperNodes'
# HTTP timeout (30 s: the retried activation then meets "already online" and the
# SuperNode exits, Flower's code 2004). A lane holds the gate until its federation is
# ready (every SuperNode online; the negative control's SuperLink Ready), GATE_HOLD at
# most; runs take one of runs.RUN_SLOTS.
START_GATE = threading.Semaphore(1)
GATE_HOLD = 90
# A bound on the wait for a turn, which only a hang should reach: every other federation start of the session may
# come first, each holding the gate GATE_HOLD at most plus its own start (render, namespaces, processes: ~30 s on a
# loaded machine). Three versions' lanes start up to 21 federations, the followers 6 more; 600 s (two versions'
# lanes) left a 1.26.1 day-2 federation without a turn in CI once the next Flower's lanes joined.
GATE_TIMEOUT = (GATE_HOLD + 30) * 27


class Lane(threading.Thread):
    """Runs the wanted scenarios of some groups of one Flower version, in order, in a
    thread, one federation at a time."""

    def __init__(self, version: str, wanted: set[str], groups: list[str]):
        super().__init__(name=f"e2e-{version}-{'+'.join(groups)}", daemon=True)
        self.version = version
        self.groups = [g for g in GROUPS if g.name in groups]
        self.wanted = {sid for g in self.groups for sid, _ in g.scenarios} & wanted
        self.outcomes = {s: Outcome(s) for s in SCENARIOS if s in self.wanted}
        self.events = {s: threading.Event() for s in self.outcomes}
        self.memo: dict[str, Any] = {}
        self.current: Optional[Federation] = None
        self.stopping = False
        self.when_done: list[Callable[[], None]] = []  # called once the lane's last federation closed

    def run(self) -> None:
        try:
            self._run_groups()
        finally:
            for hook in self.when_done:
                hook()

    def _run_groups(self) -> None:
        for group in self.groups:
            todo = [(s, fn) for s, fn in group.scenarios if s in self.wanted]
            if not todo:
                continue
            if self.stopping:
                break
            if not START_GATE.acquire(timeout=GATE_TIMEOUT):
                for s, _ in todo:
                    self._finish(s, "failed", 0.0, f"no turn to start a federation within {GATE_TIMEOUT}s", [])
                continue
            start = time.monotonic()
            try:
                fed = group.make(self.version)
            except BaseException:
                START_GATE.release()
                err = f"starting the {group.name} federation failed:\n{traceback.format_exc()}"
                for s, _ in todo:
                    self._finish(s, "failed", time.monotonic() - start, err, [])
                continue
            try:  # hold the gate while its processes start (the first scenario checks readiness)
                if group.comes_online:
                    fed.wait_ready(GATE_HOLD)
                else:
                    fed.cluster.wait_pods_ready([fed.superlink], GATE_HOLD)
            except NotReady:
                pass  # the first scenario goes on waiting, with its own deadline
            finally:
                START_GATE.release()
            self.current = fed
            try:
                for s, fn in todo:
                    seen = len(fed.incidents)
                    if s != todo[0][0]:  # the first scenario's phases include the start
                        fed.phases = []
                    try:
                        fn(fed, self.memo)
                    except BaseException:
                        self._finish(s, "failed", time.monotonic() - start, self._explain(fed), fed.incidents[seen:])
                    else:
                        self._finish(s, "passed", time.monotonic() - start, "", fed.incidents[seen:])
                    start = time.monotonic()
            finally:
                self.current = None
                fed.close()

    @staticmethod
    def _explain(fed: Federation) -> str:
        return (
            traceback.format_exc()
            + "\n--- pods ---\n"
            + "\n".join(p.describe() for p in fed.cluster.pods.values())
            + "\n--- container logs (tails) ---\n"
            + fed.cluster.logs(tail=40)
        )

    def _finish(self, scenario: str, status: str, seconds: float, error: str, incidents: list[str]) -> None:
        o = self.outcomes[scenario]
        o.status, o.seconds, o.error, o.incidents = status, seconds, error, list(incidents)
        o.phases = list(self.current.phases) if self.current is not None else []
        self.events[scenario].set()

    def outcome(self, scenario: str, timeout: float) -> Outcome:
        if not self.events[scenario].wait(timeout):
            o = copy.copy(self.outcomes[scenario])
            o.status, o.error = "failed", f"scenario {scenario} did not finish within {timeout:.0f}s"
            return o
        return self.outcomes[scenario]
