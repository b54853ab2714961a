"""A rendered federation running on the harness, driven by the real `flwr` CLI.

- Rendering is the project's own path: `components.offline.run_program` with
  `RealTlsProvider` (real CA, server certificate and node keys, made by the program's own
  pulumi-tls resources), then `manifests(show_secrets=True)` and the stack outputs.
- Every workload's pods run on a `harness.Cluster` (see harness/).
- The CLI runs as a user would, in its own network namespace `cli` in the federation's
  namespace (same cluster DNS; a pod labelled CLI_LABELS, which the SuperLink's
  NetworkPolicy admits as a configured source: every NetworkPolicy is enforced), with
  `FLWR_HOME/config.toml` = the exported `flwrConfig` verbatim and the exported
  `caCertificate` mounted at the `root-certificates` path that config names; node keys
  are registered by running the exported `nodeAuth.registerScript` with `sh`, with the
  real `flwr` on PATH.
- The federation is ready when the SuperLink's pod is Ready (its probes), the register
  script succeeded, every pod is Ready, every SuperNode's current process logged its node
  id, the SuperLink's state file shows every node online (polled: milliseconds) and then
  `flwr supernode list --format json` confirms it (at most every 3 s: each call costs
  seconds of CPU), and, with subprocess isolation,
  the SuperLink and SuperNodes still have their `flower-superexec` child (Kubernetes
  cannot see one die, and nothing restarts it: a lost one fails the scenario).
- Rollout order: all pods at once, as the StatefulSets would. Flower before 1.28 creates
  the SuperLink's state lazily without a lock; the product starts such a SuperLink
  through a wrapper that creates it before serving (flower_federation/flower/superlink_state.py), so no
  ordering or retry here hides that race.
"""

from __future__ import annotations

import copy
import json
import re
import shutil
import sqlite3
import threading
import time
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from flower_federation.cli.offline import run_program
from tests.e2e.harness import Cluster, NotReady, Pod
from tests.e2e.harness.jobs import Job
from tests.e2e.harness.rollout import rolling_update
from tests.support.flower import GRPC_ERA, HTTP_ERA, venv
from tests.support.tls_provider import PulumiState, RealTlsProvider

VERSIONS = (GRPC_ERA, HTTP_ERA)
APP_DIR = Path(__file__).resolve().parent / "app"
NAME = "e2e"
NAMESPACE = "flower-e2e"
CLI_TIMEOUT = 60
APP_CONFIG = tomllib.loads((APP_DIR / "pyproject.toml").read_text())["tool"]["flwr"]["app"]["config"]
# A run's deadline only bounds a hang: the app ends each round by its `round-timeout` at
# the latest, so a run lasts at most its rounds times that, plus the ServerApp's start
# (a new process importing Flower, the FAB installed) and the wait for `min-nodes`.
RUN_START_ALLOWANCE = 60
# Runs are the e2e's CPU bursts: every ClientApp is a new process importing Flower (about
# 2.5 s of CPU), so a two-round run on four SuperNodes costs about 30 s of CPU. Four
# lanes running theirs at once on two cores stretched runs past their deadline and
# starved SuperLinks past the SuperNodes' 30 s HTTP timeout (CI, 2026-11-23): at most two
# runs at a time; the wait for a slot is reported as a phase, outside the run's deadline.
RUN_SLOTS = threading.BoundedSemaphore(2)
APP_PROGRAMS = ("flwr-serverapp", "flwr-clientapp")
# The `flwr` user is a pod of the federation's namespace with these labels, which the
# SuperLink's NetworkPolicy admits to its Fleet and Control ports (configured sources:
# `superlink.networkPolicy.ingressPodMatchLabels`); any other pod is refused there.
CLI_LABELS = {"app.kubernetes.io/name": "flwr-cli"}


def config(version: str, *, isolation: str = "subprocess", pools: Optional[list[tuple[str, int]]] = None) -> dict:
    """The federation config the scenarios deploy: TLS (generated) and node
    authentication on; pool `a` numbers its partitions by ordinal, pool `b` is one node;
    the CLI's pod admitted to the SuperLink (CLI_LABELS)."""
    pools = pools or [("a", 3), ("b", 1)]
    raw: dict[str, Any] = {
        "name": NAME,
        "namespace": NAMESPACE,
        "version": version,
        "nodeAuth": {"enabled": True},
        "isolationMode": isolation,
        "supernodes": {"pools": []},
        "superlink": {"networkPolicy": {"ingressPodMatchLabels": dict(CLI_LABELS)}},
    }
    for name, replicas in pools:
        node_config = (
            {"partition-id": "{index}", "num-partitions": "{replicas}"}
            if replicas > 1
            else {"partition-id": 0, "num-partitions": 1}
        )
        pool: dict[str, Any] = {"name": name, "replicas": replicas, "nodeConfig": node_config}
        if isolation == "process":
            pool["images"] = {"superexecClientApp": f"flwr/superexec:{version}"}
        raw["supernodes"]["pools"].append(pool)
    if isolation == "process":
        raw["superlink"]["superexecImage"] = f"flwr/superexec:{version}"
    return raw


def cli_env(version: str, home: Path) -> dict[str, str]:
    """The environment of a `flwr` user with Flower `version` and home `home` (FLWR_HOME
    `home/flwr`): plain output, wide enough that tables do not wrap."""
    return {
        "PATH": f"{venv(version) / 'bin'}:/usr/local/bin:/usr/bin:/bin",
        "HOME": str(home),
        "FLWR_HOME": str(home / "flwr"),
        "LANG": "C.UTF-8",
        "NO_COLOR": "1",
        "COLUMNS": "200",
        "TERM": "dumb",
    }


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


@dataclass
class Rendered:
    raw: dict[str, Any]
    manifests: list[dict[str, Any]]
    outputs: dict[str, Any]


def _first_error(text: str) -> str:
    lines = [line.strip(" │╭╮╰╯─") for line in text.splitlines()]
    for key in ("details =", "Error:", "rror"):
        for line in lines:
            if key in line and line.strip() not in ("Error",):
                return line[:200]
    return text.strip().splitlines()[-1][:200] if text.strip() else ""


_RENDER_LOCK = threading.Lock()


def render(raw: dict[str, Any], provider: Optional[Callable[..., dict[str, Any]]] = None) -> Rendered:
    """The project's render path, with real key material (`provider`: a PulumiState to
    keep it across renders, as a stack's state does). One at a time: the Pulumi SDK's
    lazy imports are not thread-safe (lanes render concurrently)."""
    with _RENDER_LOCK:
        run = run_program({"federation": copy.deepcopy(raw)}, "e2e", provider=provider or RealTlsProvider())
        return Rendered(raw, run.manifests(show_secrets=True), run.outputs)


@dataclass
class RunResult:
    returncode: int
    output: str
    rounds: list[dict[str, list[int]]]  # per round: {pod name: [num-partitions, partition-id]}
    done: bool
    seconds: float
    ran: set  # (pod, container, program) seen running flwr-serverapp / flwr-clientapp
    during_error: Optional[BaseException] = None
    # (pod, container) -> the most resident memory its processes held together, in bytes
    peak_rss: dict[tuple[str, str], int] = field(default_factory=dict)

    def summary(self) -> str:
        return f"exit {self.returncode}, {len(self.rounds)} rounds, done={self.done}, {self.seconds:.1f}s"


def run_deadline(run_config: Optional[dict[str, Any]] = None) -> float:
    """The longest a run of the test app can last (see RUN_START_ALLOWANCE)."""
    conf = {**APP_CONFIG, **(run_config or {})}
    return int(conf["num-server-rounds"]) * float(conf["round-timeout"]) + RUN_START_ALLOWANCE


class Federation:
    """A rendered stack running on its own Cluster. Use as a context manager."""

    def __init__(
        self,
        version: str,
        raw: dict[str, Any],
        *,
        label: str = "e2e",
        tamper: Optional[Callable[[list[dict[str, Any]]], None]] = None,
    ):
        self.version = version
        self.state = PulumiState()  # the stack's state: a later render keeps its keys
        self.rendered = render(raw, self.state)
        self.manifests = copy.deepcopy(self.rendered.manifests)
        if tamper is not None:
            tamper(self.manifests)
        self.outputs = self.rendered.outputs
        doc = tomllib.loads(self.outputs["flwrConfig"])
        self.connection = doc["superlink"]["default"]
        self.registered = False
        self.register_runs = 0
        self._rest_started = False
        self.phases: list[str] = []
        self.incidents: list[str] = []
        self._crashes_seen: dict[tuple[str, str], int] = {}
        self.cluster = Cluster(version, venv(version), label)
        try:
            self.cluster.apply(self.manifests)
            self.cluster.create_pods()
            self.cli_netns = self.cluster.add_client("cli", NAMESPACE, CLI_LABELS)
            self._prepare_cli(doc)
            # All pods at once, as the StatefulSets would. (superlink_first: a
            # SuperLink-first rollout, kept for comparison, off.)
            self.superlink_first = False
            if self.superlink_first:
                self.cluster.start_pods([self.superlink])
            else:
                self.cluster.start_pods()
        except BaseException:
            self.cluster.close()
            raise

    def rerender(self, raw: dict[str, Any]) -> Rendered:
        """The same stack after a config edit (the next `pulumi up`): keys and
        certificates kept by its state."""
        return render(raw, self.state)

    def roll_out(
        self,
        raw: dict[str, Any],
        timeout: float,
        event: Optional[Callable[[str], None]] = None,
        before_roll: Optional[Callable[[list[Any]], None]] = None,
    ) -> list[str]:
        """The next `pulumi up` with config `raw`, in Pulumi's order (flower_federation/shell/federation.py:
        the SuperLink's StatefulSet rolls first, then the Jobs' hook `before_roll`, then the
        pools, which wait for both), each rolled as its controller would (harness/rollout.py);
        the CLI follows the stack's `version` (its user upgrades `flwr` too). Returns the pods
        replaced; NotReady names a rollout that got stuck, after the new render became the
        current one."""
        new = self.rerender(raw)
        self.rendered, self.manifests, self.outputs = new, copy.deepcopy(new.manifests), new.outputs
        self.version = raw["version"]
        self._prepare_cli(tomllib.loads(self.outputs["flwrConfig"]))
        return rolling_update(
            self.cluster, self.manifests, timeout, event, before_roll, first=[self.superlink.workload]
        )

    def start_rest(self, timeout: float) -> None:
        """SuperLink-first rollout: once the SuperLink is Ready and the keys are
        registered, start the other pods (idempotent)."""
        if not self.superlink_first or self._rest_started:
            return
        try:
            self.cluster.wait_pods_ready([self.superlink], timeout)
            # The SuperLink's SuperExec (its child, or the sidecar) asks for runs as soon
            # as it is up: that first state access must be over before the next one.
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline and not any(
                pod == self.superlink.name and any(a.endswith("flower-superexec") for a in argv[:2])
                for pod, _, _, argv in self.cluster.processes()
            ):
                time.sleep(0.5)
            time.sleep(4)
            if self.outputs.get("nodeAuth") and not self.registered:
                self.register()
        finally:
            self._rest_started = True
            self.cluster.start_pods([p for p in self.cluster.pods.values() if p is not self.superlink])

    # -- the user's machine
    def _prepare_cli(self, doc: dict[str, Any]) -> None:
        """The user's machine: the exported `flwr` config verbatim, the CA where it says,
        the register script (again after a rollout: the user takes the new outputs)."""
        home = self.cluster.workdir / "cli"
        (home / "flwr").mkdir(parents=True, exist_ok=True)
        (home / "flwr" / "config.toml").write_text(self.outputs["flwrConfig"])  # verbatim
        self.connection = doc["superlink"]["default"]
        ca_path = Path(doc["superlink"][self.connection]["root-certificates"])
        ca_dir = home / "ca"
        shutil.rmtree(ca_dir, ignore_errors=True)
        ca_dir.mkdir()
        (ca_dir / ca_path.name).write_text(self.outputs["caCertificate"])
        (home / "register.sh").write_text(self.outputs["nodeAuth"]["registerScript"])
        self.cli_home = home
        self.cli_mounts = [{"source": str(ca_dir), "target": str(ca_path.parent), "readOnly": True}]
        self.cli_env = cli_env(self.version, home)

    def sh(self, argv: list[str], timeout: float = CLI_TIMEOUT, cwd: Optional[str] = None):
        return self.cluster.exec_in(
            self.cli_netns,
            argv,
            env=self.cli_env,
            mounts=self.cli_mounts,
            cwd=cwd or str(self.cli_home),
            timeout=timeout,
            name="cli",
        )

    def flwr(self, *args: str, timeout: float = CLI_TIMEOUT):
        return self.sh(["flwr", *args], timeout=timeout)

    # -- pods
    def pods(self, component: str) -> list[Pod]:
        return [p for p in self.cluster.pods.values() if p.labels.get("app.kubernetes.io/component") == component]

    @property
    def superlink(self) -> Pod:
        (pod,) = self.pods("superlink")
        return pod

    @property
    def supernodes_pods(self) -> list[Pod]:
        return self.pods("supernode")

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

    def phase(self, name: str, seconds: float) -> None:
        """Where a scenario's time went (printed in the summary)."""
        self.phases.append(f"{name} {seconds:.1f}s")

    def incident(self, text: str) -> None:
        """Something real Flower did that a test should not hide: printed in the summary."""
        self.incidents.append(text)

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
        self.start_rest(timeout)
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
            # The SuperLink's state says when every node is online (milliseconds); then the
            # CLI, the user's view, confirms it (seconds of CPU a call: at most every 3 s).
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
        such file or it is busy. Costs milliseconds where `flwr supernode list` costs
        seconds of CPU, which, polled by several federations at once, starved the CPU."""
        dbs = sorted(self.cluster.pvcdir.glob(f"*{self.superlink.name}*/state.db"))
        if not dbs:
            return None
        try:
            with sqlite3.connect(f"file:{dbs[0]}?mode=ro", uri=True, timeout=0.5) as db:
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
        waited = time.monotonic()
        with RUN_SLOTS:
            if time.monotonic() - waited > 1:
                self.phase("waited for a run slot", time.monotonic() - waited)
            return self._run_app(run_config, run_deadline(run_config) if timeout is None else timeout, during)

    def _run_app(
        self,
        run_config: Optional[dict[str, Any]],
        timeout: float,
        during: Optional[Callable[[], None]],
    ) -> RunResult:
        args = ["flwr", "run", str(APP_DIR), self.connection, "--stream"]
        if run_config:
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
        rounds = [json.loads(m.group(1)) for m in re.finditer(r"E2E round=\d+ clients=(\{.*?\})$", output, re.M)]
        self.phase("run", time.monotonic() - start)
        return RunResult(
            res.returncode,
            output,
            rounds,
            "E2E done" in output,
            time.monotonic() - start,
            ran,
            errors[0] if errors else None,
            peak_rss,
        )

    def runs(self) -> list[dict[str, Any]]:
        res = self.flwr("list", self.connection, "--format", "json")
        text = res.stdout
        if res.returncode != 0 or "{" not in text:
            raise AssertionError(f"flwr list failed ({res.returncode}):\n{res.stdout}\n{res.stderr}")
        doc = json.loads(text[text.index("{") :])
        assert doc.get("success"), doc
        return doc["runs"]

    def close(self) -> None:
        self.cluster.close()

    def __enter__(self) -> Federation:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
