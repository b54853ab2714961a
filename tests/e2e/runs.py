"""Runs of the test app (tests/e2e/app): `flwr run` bounded by the app's own deadline, at
most two at a time (RUN_SLOTS), recording which containers ran ServerApps and ClientApps and
their peak memory; and the runs `flwr list` shows. A part of stack.Federation (AppRuns, a
mixin), kept apart from its rollout and readiness."""

from __future__ import annotations

import json
import re
import threading
import time
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

APP_DIR = Path(__file__).resolve().parent / "app"
APP_CONFIG = tomllib.loads((APP_DIR / "pyproject.toml").read_text())["tool"]["flwr"]["app"]["config"]
# A run's deadline only bounds a hang: the app ends each round by its `round-timeout` at
# the latest, so a run lasts at most its rounds times that, plus the ServerApp's start
# (a new process importing Flower, the FAB installed) and the wait for `min-nodes`.
RUN_START_ALLOWANCE = 60
# Runs are the e2e's CPU bursts: every ClientApp is a new process importing Flower (about
# 2.1 s of CPU, process accounting of a whole e2e run), so a two-round run on four SuperNodes costs about 20 s. Four
# lanes running theirs at once on two cores stretched runs past their deadline and
# starved SuperLinks past the SuperNodes' 30 s HTTP timeout (CI, 2026-11-23): at most two
# runs at a time; the wait for a slot is reported as a phase, outside the run's deadline.
RUN_SLOTS = threading.BoundedSemaphore(2)
# A run's rounds unless its scenario asks for more. One round proves that a run completes with every node (each
# round is a new ClientApp process per node, ~2 CPU-s each, and a round's wall time of every process idling);
# the scenarios that claim more than one round ask for two: the first run of scenario 1 (the model carried from a
# round to the next), the sites and skew runs (both sites in every round), the many-SuperNodes run (its round
# times), and scenario 8's run interrupted mid-training (its kill comes in the first of two).
ROUNDS = 1
APP_PROGRAMS = ("flwr-serverapp", "flwr-clientapp")


@dataclass
class RunResult:
    returncode: int
    output: str
    rounds: list[dict[str, list[int]]]  # per round: {pod name: [num-partitions, partition-id]}
    done: bool
    seconds: float
    ran: set  # (pod, container, program) seen running flwr-serverapp / flwr-clientapp
    planned_rounds: int  # the run's num-server-rounds
    during_error: Optional[BaseException] = None
    # (pod, container) -> the most resident memory its processes held together, in bytes
    peak_rss: dict[tuple[str, str], int] = field(default_factory=dict)
    round_seconds: list[float] = field(default_factory=list)  # each round's time, the ServerApp's clock

    def summary(self) -> str:
        return f"exit {self.returncode}, {len(self.rounds)} rounds, done={self.done}, {self.seconds:.1f}s"


def run_deadline(run_config: Optional[dict[str, Any]] = None) -> float:
    """The longest a run of the test app can last (see RUN_START_ALLOWANCE)."""
    conf = {**APP_CONFIG, **(run_config or {})}
    return int(conf["num-server-rounds"]) * float(conf["round-timeout"]) + RUN_START_ALLOWANCE


class AppRuns:
    """stack.Federation's runs. Uses the federation's cluster, connection, supernodes_pods, sh(), flwr() and
    phase()."""

    # -- runs
    def run_app(
        self,
        run_config: Optional[dict[str, Any]] = None,
        timeout: Optional[float] = None,
        during: Optional[Callable[[], None]] = None,
    ) -> RunResult:
        """`flwr run <app> <connection> --stream`, bounded by `timeout` (default: the
        app's own bound, run_deadline), once one of RUN_SLOTS is free; `during` runs in a
        thread meanwhile. Records which containers ran ServerApps and ClientApps, and the
        peak memory of each container."""
        # Every SuperNode of the federation's own cluster in each round unless the scenario says otherwise (a
        # hub's SuperNodes are its sites': its scenarios name their count).
        defaults: dict[str, Any] = {"num-server-rounds": ROUNDS}
        if self.supernodes_pods:
            defaults["min-nodes"] = len(self.supernodes_pods)
        run_config = {**defaults, **(run_config or {})}
        waited = time.monotonic()
        with RUN_SLOTS:
            if time.monotonic() - waited > 1:
                self.phase("waited for a run slot", time.monotonic() - waited)
            return self._run_app(run_config, run_deadline(run_config) if timeout is None else timeout, during)

    def _run_app(
        self,
        run_config: dict[str, Any],
        timeout: float,
        during: Optional[Callable[[], None]],
    ) -> RunResult:
        args = ["flwr", "run", str(APP_DIR), self.connection, "--stream"]
        args += ["--run-config", " ".join(f"{k}={json.dumps(v)}" for k, v in run_config.items())]
        start = time.monotonic()
        stop, ran, peak_rss = threading.Event(), set(), {}
        sampler = threading.Thread(
            target=self.cluster.sample_programs,
            args=(APP_PROGRAMS, stop, ran),
            kwargs={"peak_rss": peak_rss},
            daemon=True,
        )
        sampler.start()
        errors: list[BaseException] = []

        def run_during() -> None:
            try:
                during()
            except BaseException as exc:  # reported with the result
                errors.append(exc)

        helper = threading.Thread(target=run_during, daemon=True) if during else None
        if helper:
            helper.start()
        try:
            res = self.sh(args, timeout=timeout)
        finally:
            if helper:
                helper.join(timeout=timeout)
            stop.set()
            sampler.join(timeout=5)
        output = res.stdout + res.stderr
        lines = list(re.finditer(r"E2E round=\d+ seconds=([\d.]+) clients=(\{.*?\})$", output, re.M))
        rounds = [json.loads(m.group(2)) for m in lines]
        self.phase("run", time.monotonic() - start)
        return RunResult(
            res.returncode,
            output,
            rounds,
            "E2E done" in output,
            time.monotonic() - start,
            ran,
            int(run_config["num-server-rounds"]),
            errors[0] if errors else None,
            peak_rss,
            [float(m.group(1)) for m in lines],
        )

    def runs(self) -> list[dict[str, Any]]:
        res = self.flwr("list", self.connection, "--format", "json")
        text = res.stdout
        if res.returncode != 0 or "{" not in text:
            raise AssertionError(f"flwr list failed ({res.returncode}):\n{res.stdout}\n{res.stderr}")
        doc = json.loads(text[text.index("{") :])
        assert doc.get("success"), doc
        return doc["runs"]
