"""The sites scenario's deployments (sites.py runs it): the hub (a stack.Federation deployed
step by step, for its `flwr` user, runs and listings), each site's cluster, the record of one
version's run (its clusters, WAN, gateway, Jobs, phases; what explains a failure), and the
hub's `pulumi up`s with their registration and revocation Jobs."""

from __future__ import annotations

import re
import threading
import time
import tomllib
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Optional

from tests.e2e.cli_user import CLI_LABELS
from tests.e2e.harness import Cluster, NotReady
from tests.e2e.harness.gateway import ExposedGateway
from tests.e2e.harness.jobs import Job
from tests.e2e.harness.wan import Wan
from tests.e2e.lanes import GATE_TIMEOUT
from tests.e2e.readiness import registration_jobs, wait_job
from tests.e2e.rendering import Rendered
from tests.e2e.scenarios import Outcome
from tests.e2e.site_stacks import EXTERNAL_HOST, HUB, HUB_NAME, HUB_NAMESPACE, PulumiState, render_stack, workload
from tests.e2e.stack import Federation
from tests.support.flower import venv

SUPERLINK_READY_TIMEOUT = 120  # the product's startupProbe allows 24 x 5 s
JOB_TIMEOUT = 90  # a Ready SuperLink: one pass of the script (Python + flwr imports, 3-10 s on a busy CPU)


# --- the deployments ------------------------------------------------------------------------


class Hub(Federation):
    """The hub's cluster and a `flwr` user in it: stack.Federation's CLI, runs and
    listings (`sh`, `flwr`, `supernodes`, `run_app`, `runs`), over a hub deployed here
    step by step (not Federation.__init__, which renders and starts a whole federation)."""

    def __init__(self, version: str, rendered: Rendered, cluster: Cluster):
        self.version = version
        self.rendered = rendered
        self.manifests = rendered.manifests
        self.outputs = rendered.outputs
        doc = tomllib.loads(self.outputs["flwrConfig"])
        self.connection = doc["superlink"]["default"]
        self.registered = False
        self.register_runs = 0
        self.phases: list[str] = []
        self.incidents: list[str] = []
        self._crashes_seen: dict[tuple[str, str], int] = {}
        self.cluster = cluster
        self.cli_netns = cluster.add_client("cli", HUB_NAMESPACE, CLI_LABELS)
        self._prepare_cli(doc)


@dataclass
class Site:
    name: str
    rendered: Rendered
    cluster: Cluster

    @property
    def pod(self):  # noqa: ANN201  (a harness Pod)
        """The site's SuperNode (a site with distributed SuperExecs has their pods too)."""
        (pod,) = [p for p in self.cluster.pods.values() if p.labels.get("app.kubernetes.io/component") == "supernode"]
        return pod

    def log(self) -> str:
        return self.pod.containers[0].log(100000) if self.pod.containers else ""

    def node_id(self) -> Optional[str]:
        return logged_node_id(self.pod)


def logged_node_id(pod: Any) -> Optional[str]:
    """The node id a SuperNode pod's latest incarnation logged (None before it activated)."""
    ids = re.findall(r"SuperNode ID: (\d+)", pod.containers[0].log(100000)) if pod.containers else []
    return ids[-1] if ids else None


def start_hub(hub: Hub, gate: Optional[threading.Semaphore]) -> None:
    """The hub's pods started and its SuperLink Ready, holding `gate` (one start at a time) meanwhile."""
    if gate is not None and not gate.acquire(timeout=GATE_TIMEOUT):
        raise NotReady(f"no turn to start the hub within {GATE_TIMEOUT}s")
    try:
        hub.cluster.start_pods()
        hub.cluster.wait_pods_ready([hub.superlink], SUPERLINK_READY_TIMEOUT)
    finally:
        if gate is not None:
            gate.release()


@dataclass
class SitesRun:
    """One version's hub, sites and WAN, and what happened (for the report)."""

    version: str
    # How the hub is reached: "loadBalancer" (a LoadBalancer Service) or "gateway" (a
    # Gateway API route through the emulated Gateway, harness/gateway.py).
    exposure: str = "loadBalancer"
    phases: list[str] = field(default_factory=list)
    incidents: list[str] = field(default_factory=list)
    wan: Optional[Wan] = None
    gateway: Optional[ExposedGateway] = None
    hub: Optional[Hub] = None
    sites: dict[str, Site] = field(default_factory=dict)
    jobs: list[Job] = field(default_factory=list)
    _t: float = field(default_factory=time.monotonic)

    def phase(self, name: str) -> None:
        now = time.monotonic()
        self.phases.append(f"{name} {now - self._t:.1f}s")
        self._t = now

    def clusters(self) -> list[Cluster]:
        return [c for c in [self.hub.cluster if self.hub else None, *(s.cluster for s in self.sites.values())] if c]

    def explain(self) -> str:
        out = [traceback.format_exc(), "--- jobs ---", *(j.describe() for j in self.jobs)]
        for c in self.clusters():
            out += [f"--- cluster {c.label} ---", *(p.describe() for p in c.pods.values()), c.logs(tail=40)]
        for j in self.jobs:
            out.append(j.log(60))
        if self.wan is not None:
            out += ["--- load balancer ---", self.wan.balancer_log(f"{HUB_NAME}-superlink")[-2000:]]
        if self.gateway is not None:
            out += ["--- gateway ---", self.gateway.log()[-2000:], self.gateway.access_log()[-3000:]]
        return "\n".join(out)

    def close(self) -> None:
        for c in self.clusters():
            c.close()
        if self.wan is not None:
            self.wan.close()

    def outcome(self, scenario: str, body: Callable[[], None]) -> Outcome:
        """`body` (the scenario on this run) as an Outcome: passed, or failed with what explains it; closed either
        way, with its duration, phases and incidents."""
        outcome = Outcome(scenario)
        start = time.monotonic()
        try:
            body()
        except BaseException:
            outcome.status, outcome.error = "failed", self.explain()
        else:
            outcome.status = "passed"
        finally:
            self.close()
            outcome.seconds = time.monotonic() - start
            outcome.phases, outcome.incidents = self.phases, self.incidents
        return outcome


def deploy_site(
    run: SitesRun, name: str, rendered: Rendered, lb_ip: str, nice: int = 0, version: Optional[str] = None
) -> Site:
    """A site's cluster on Flower `version` (the run's unless given: a site may run another than its hub)."""
    version = version or run.version
    cluster = Cluster(version, venv(version), name, nice=nice, warm=True)
    site = Site(name, rendered, cluster)
    run.sites[name] = site
    cluster.apply(rendered.manifests)
    cluster.create_pods()
    run.wan.connect(cluster)
    run.wan.publish(cluster, EXTERNAL_HOST, lb_ip)
    cluster.start_pods()
    return site


def run_jobs(
    run: SitesRun, jobs: tuple[Job, Job], status: str = "Complete", revocation_status: str = "Complete"
) -> tuple[str, Optional[str]]:
    """What `pulumi up` does with the hub's two Jobs (the hub has no pools to roll between
    them): the registration Job, then, once it completed, the revocation Job. A failed
    registration Job stops the up: the revocation Job never runs. Returns their logs."""
    registration, revocation = jobs
    registration.cluster.start_jobs([registration.name])
    run.jobs.append(registration)
    log = wait_job(registration, JOB_TIMEOUT, status)
    if status != "Complete":
        return log, None
    revocation.cluster.start_jobs([revocation.name])
    run.jobs.append(revocation)
    return log, wait_job(revocation, JOB_TIMEOUT, revocation_status)


def hub_up(
    run: SitesRun, raw: dict[str, Any], state: PulumiState, outputs: dict[str, dict[str, Any]]
) -> tuple[Job, Job]:
    """Another `pulumi up` of the hub: same CA, same SuperLink, a new registration and
    revocation Job (created once the SuperLink is Ready, which it is), not started."""
    rendered = render_stack(HUB, raw, state, outputs)
    before = run.hub.rendered
    assert rendered.outputs["caCertificate"] == before.outputs["caCertificate"], "the hub's CA changed across ups"
    sts = f"{HUB_NAME}-superlink"
    assert workload(rendered, "StatefulSet", sts) == workload(before, "StatefulSet", sts), "the SuperLink would roll"
    jobs = registration_jobs(run.hub.cluster.update(rendered.manifests))
    assert set(run.hub.cluster.jobs) == {j.name for j in jobs}, "the previous Jobs were not deleted"
    run.hub.rendered = rendered
    return jobs


def registered_by_job(log: str) -> dict[str, str]:
    """{key comment (site/pool/slot): node id} the registration Job's log reports."""
    return dict(re.findall(r"node-registration: registered (\S+) as node (\d+)", log))
