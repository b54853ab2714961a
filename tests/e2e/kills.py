"""A container killed while a run trains, and its restart by the kubelet: the fault of
scenarios 4 (a SuperNode), 8 (the SuperLink) and 10 (a ClientApp SuperExec)."""

from __future__ import annotations

import time
from typing import Optional

from tests.e2e.harness.containers import Container
from tests.e2e.stack import Federation

# `flwr run` starts the first ClientApps within seconds; this only bounds a run that
# never trains.
KILL_WINDOW = 60
# The harness's kubelet counts a restart once the killed process is reaped (then waits
# out its back-off): seen within a second; this bounds a container that never exits.
RESTART_WINDOW = 30


class KillWhileTraining:
    """`during` for Federation.run_app: once a ClientApp runs in one of `pods` (in their
    container `container`, if given), kill `victim`; `at` is when."""

    def __init__(self, fed: Federation, victim: Container, pods: set[str], container: Optional[str] = None):
        self.fed, self.victim, self.pods, self.container = fed, victim, pods, container
        self.restarts = victim.restarts
        self.at: Optional[float] = None

    def training(self) -> bool:
        return any(
            pod in self.pods
            and (self.container is None or c == self.container)
            and any(a.endswith("flwr-clientapp") for a in argv[:2])
            for pod, c, _, argv in self.fed.cluster.processes()
        )

    def __call__(self) -> None:
        deadline = time.monotonic() + KILL_WINDOW
        while time.monotonic() < deadline:
            if self.training():
                self.victim.kill()
                self.at = time.monotonic()
                return
            time.sleep(0.1)
        raise AssertionError(f"no ClientApp of {sorted(self.pods)} seen running within {KILL_WINDOW}s")

    def since(self) -> float:
        """Seconds since the kill."""
        assert self.at is not None, "nothing was killed"
        return time.monotonic() - self.at

    def wait_restarted(self) -> None:
        deadline = time.monotonic() + RESTART_WINDOW
        while self.victim.restarts == self.restarts and time.monotonic() < deadline:
            time.sleep(0.2)
        assert self.victim.restarts > self.restarts, f"the killed {self.victim.name} was not restarted"
