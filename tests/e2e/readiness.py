"""When a federation is ready (stack.py's docstring says what that takes) and what gets it
there: node keys registered (the exported register script, re-run after a failure as its
user would; a render's registration and revocation Jobs), every SuperNode online (the
SuperLink's own state first, then `flwr supernode list`), no SuperExec child lost, crashes
noted. A part of stack.Federation (FederationReadiness, a mixin)."""

from __future__ import annotations

import contextlib
import json
import sqlite3
import time
from typing import TYPE_CHECKING, Any, Optional

from tests.e2e.cli_user import CLI_TIMEOUT
from tests.e2e.harness import NotReady

if TYPE_CHECKING:
    from tests.e2e.harness import Pod
    from tests.e2e.harness.jobs import Job


def registration_jobs(jobs: list[Job]) -> tuple[Job, Job]:
    """(registration Job, revocation Job) of one trusted key set, as the render names them."""
    registration, revocation = sorted(jobs, key=lambda j: "-node-revocation-" in j.name)
    assert "-node-registration-" in registration.name and "-node-revocation-" in revocation.name, jobs
    return registration, revocation


def wait_job(job: Job, timeout: float, status: str = "Complete") -> str:
    """The Job's log once it finished with `status` (NotReady if it did not finish within `timeout`)."""
    if not job.wait(timeout):
        raise NotReady(f"{job.describe()} not finished within {timeout:.0f}s:\n{job.log()}")
    log = job.log()
    assert job.status == status, f"{job.describe()}, expected {status}:\n{log}"
    return log


def _first_error(text: str) -> str:
    lines = [line.strip(" │╭╮╰╯─") for line in text.splitlines()]
    for key in ("details =", "Error:", "rror"):
        for line in lines:
            if key in line and line.strip() not in ("Error",):
                return line[:200]
    return text.strip().splitlines()[-1][:200] if text.strip() else ""


class FederationReadiness:
    """stack.Federation's readiness. Uses the federation's cluster, outputs, rendered,
    connection, superlink, supernodes_pods, registered, register_runs, _crashes_seen, sh(),
    flwr(), phase() and incident()."""

    # -- readiness
    def register(self, attempts: int = 5) -> str:
        """Run the exported register script (idempotent, so re-running it after a
        transient failure is what its user would do); each failed attempt is recorded."""
        for attempt in range(1, attempts + 1):
            self.register_runs += 1
            # One `flwr supernode register` per key: each gets the budget of one CLI call.
            keys = sum(len(slots) for slots in self.outputs["nodeAuth"]["publicKeys"].values())
            res = self.sh(["sh", "register.sh"], timeout=CLI_TIMEOUT * max(1, keys))
            if res.returncode == 0:
                self.registered = True
                return res.stdout
            self.incident(
                f"register script failed (attempt {attempt}), re-run: " + _first_error(res.stdout + res.stderr)
            )
            time.sleep(2)
        raise NotReady(f"register script failed {attempts} times:\n{res.stdout}\n{res.stderr}")

    def supernodes(self) -> list[dict[str, Any]]:
        res = self.flwr("supernode", "list", self.connection, "--format", "json")
        text = res.stdout
        if res.returncode != 0 or "{" not in text:
            raise NotReady(f"flwr supernode list failed ({res.returncode}):\n{res.stdout}\n{res.stderr}")
        doc = json.loads(text[text.index("{") :])
        if not doc.get("success"):
            raise NotReady(f"flwr supernode list: {doc}")
        return doc["nodes"]

    def online(self) -> list[dict[str, Any]]:
        return [n for n in self.supernodes() if n.get("status") == "online"]

    def missing_superexecs(self) -> list[tuple[Pod, str]]:
        """Subprocess isolation: the SuperLink and every SuperNode run their own
        `flower-superexec` child; (pod, container) of running ones that lost it. Kubernetes
        cannot see this (the container and its probes stay fine), runs just never start."""
        if self.rendered.raw.get("isolationMode", "subprocess") != "subprocess":
            return []
        have = {
            (pod, c)
            for pod, c, _, argv in self.cluster.processes()
            if any(a.endswith("flower-superexec") for a in argv[:2])
        }
        out = []
        for pod in [self.superlink, *self.supernodes_pods]:
            main = pod.containers[0]
            if main.running and time.monotonic() - main.started_at > 10 and (pod.name, main.name) not in have:
                out.append((pod, main.name))
        return out

    def _note_crashes(self) -> None:
        for pod in self.cluster.pods.values():
            for c in pod.containers:
                seen = self._crashes_seen.get((pod.name, c.name), 0)
                crashes = [code for code in c.exit_codes if code < 0 and code != -9]
                for code in crashes[seen:]:
                    self.incident(f"{pod.name}/{c.name} died of signal {-code} (restarted by the kubelet)")
                self._crashes_seen[(pod.name, c.name)] = len(crashes)

    def wait_ready(self, timeout: float = 120) -> None:
        """SuperLink Ready, keys registered, every pod Ready, every SuperNode online, and
        (subprocess isolation) every SuperLink/SuperNode still has its SuperExec: a lost
        one is a failure (no run could start there), not something to recreate pods for."""
        deadline = time.monotonic() + timeout
        started = time.monotonic()
        self.cluster.wait_pods_ready([self.superlink], timeout)
        if self.outputs.get("nodeAuth") and not self.registered:
            self.register()
        expected = len(self.supernodes_pods)
        nodes: list = []
        online: list = []
        last_cli = 0.0
        while True:
            pods_ready = all(p.is_ready() for p in self.cluster.pods.values())
            # Each SuperNode's current process got its node id (it connected); the
            # SuperLink alone would still list a killed one as online for a while.
            activated = all(
                "SuperNode ID: " in p.containers[0].log(100000).rsplit("=== start #", 1)[-1]
                for p in self.supernodes_pods
                if p.containers
            )
            pods_ready = pods_ready and activated
            # The SuperLink's state says when every node is online (milliseconds); then the CLI, the
            # user's view, confirms it (at most every 3 s: the console script's call costs seconds of CPU).
            states = self.node_states() if pods_ready else None
            state_online = states is not None and sum(states.values()) >= expected
            if pods_ready and (state_online or states is None) and time.monotonic() - last_cli > 3:
                last_cli = time.monotonic()
                try:
                    nodes = self.supernodes()
                except NotReady as exc:
                    nodes = [{"error": str(exc)}]
                online = [n for n in nodes if n.get("status") == "online"]
            lost = self.missing_superexecs() if pods_ready else []
            self._note_crashes()
            if lost:
                raise NotReady(
                    "lost flower-superexec child (runs could never start there): "
                    + "; ".join(f"{pod.name}/{container}. {self._superexec_hint(pod)}" for pod, container in lost)
                    + "\n"
                    + self.cluster.logs(tail=25)
                )
            if pods_ready and len(online) == expected:
                self.phase("ready", time.monotonic() - started)
                return
            if time.monotonic() > deadline:
                raise NotReady(
                    f"federation not ready within {timeout:.0f}s: {len(online)}/{expected} SuperNodes online "
                    f"(last `flwr supernode list`), the SuperLink's state: {self.node_states()}, "
                    f"lost SuperExecs: {[(p.name, c) for p, c in lost]}, nodes: {nodes}\n"
                    + "\n".join(p.describe() for p in self.cluster.pods.values())
                    + "\n"
                    + self.cluster.logs(tail=25)
                )
            time.sleep(0.5)

    def node_states(self) -> Optional[dict[str, bool]]:
        """{node id: online} from the SuperLink's own state (its --database file on the
        PVC, read-only): online while its status is online and online_until is ahead
        (Flower updates the status lazily, on the next access). None when there is no
        such file or it is busy. Costs milliseconds where `flwr supernode list` costs a
        forked call (warm) or seconds of CPU (the console script), polled by several federations at once."""
        dbs = sorted(self.cluster.pvcdir.glob(f"*{self.superlink.name}*/state.db"))
        if not dbs:
            return None
        try:
            # Closed at once (a connection outlives its `with`): state-guard refuses to migrate beside one.
            with contextlib.closing(sqlite3.connect(f"file:{dbs[0]}?mode=ro", uri=True, timeout=0.5)) as db:
                rows = db.execute("SELECT node_id, status, online_until FROM node").fetchall()
        except sqlite3.Error:
            return None
        now = time.time()
        return {
            str(nid & 0xFFFFFFFFFFFFFFFF): status == "online" and (until or 0) > now
            for nid, status, until in rows
            if nid is not None and status != "unregistered"
        }

    @staticmethod
    def _superexec_hint(pod: Pod) -> str:
        log = pod.containers[0].log(400)
        for line in log.splitlines():
            if "details = " in line or "OperationalError" in line:
                return "It died of: " + line.strip()[:200]
        return ""
