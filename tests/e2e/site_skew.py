"""The skew window end to end (flower/skew.py: a hub on 1.N works with sites on 1.N-1..1.N+1): a hub and two
sites, each its own stack, render and cluster (as sites.py), each cluster on its own Flower, and the consortium
upgraded in the documented order (docs/operations.md, "Version skew between a hub and its sites") on live state,
one federation start for every pairing:

1. hub 1.41.0, sites 1.41.0 and 1.42.0 (a site ahead of its hub): a run completes with both sites in every round.
2. The hub's `pulumi up` to 1.42.0 (its SuperLink rolled; state-guard backs the state up before 1.42 migrates
   it; the sites stay as they are): hub 1.42.0 with a 1.41.0 and a 1.42.0 site, both in every round. And the
   negative control of 3: the crafted push (forged_push.py) is not refused with error 2011 by this hub.
3. hospital-a's `pulumi up` to 1.42.0, then the hub's to the nightly (tests/support/flower.py NEXT): a run
   completes with both 1.42.0 sites through the hub's Fleet-only proxy (the nightly's proxy proof: bytes
   counted in the proxy's access log), and the nightly's new source check is real: a push signed by hospital-b
   whose message names hospital-a as its source is answered 403 with Flower's error 2011, while the same push
   naming hospital-b itself is not (only the source differs; the nightly accepts it).

"Both in every round" is read off the ServerApp's own reply counts per round (scenarios.assert_completed, the
test app prints which node answered in each round); which Flower each side ran is read off its processes (the
venv each runs from), not from the config. The sites' SuperNodes are never restarted for a hub roll: they ride
the hub's SuperLink restart as Flower's retries allow, and must be back online under their node ids.
"""

from __future__ import annotations

import re
import sqlite3
import threading
import time
import tomllib
from typing import Any, Optional

from tests.e2e import fleet_only
from tests.e2e.forged_push import RUN_STATUS_NOT_ALLOWED, SOURCE_MISMATCH, push_as
from tests.e2e.harness import Cluster, NotReady
from tests.e2e.harness.rollout import rolling_update
from tests.e2e.harness.wan import Wan
from tests.e2e.readiness import registration_jobs
from tests.e2e.rendering import Rendered
from tests.e2e.scenarios import Outcome, assert_completed, run_id
from tests.e2e.site_checks import wait_for
from tests.e2e.site_deployments import Hub, SitesRun, deploy_site, registered_by_job, run_jobs, start_hub
from tests.e2e.site_stacks import (
    ADMITTED,
    EXTERNAL_HOST,
    HUB,
    HUB_NAME,
    POOL,
    PulumiState,
    hub_config,
    render_stack,
    secret_text,
    site_config,
    stack_name,
)
from tests.support.flower import PREVIOUS_HTTP_ERA, SKEW_PAIRINGS, venv

PAIRINGS = SKEW_PAIRINGS
ROLLOUT_TIMEOUT = 180  # per StatefulSet: its one pod replaced and Ready (the SuperLink's startupProbe: 24 x 5 s)
# Sites online: their next retry or restart (<= 8 s back-off), one activation; doubled for a loaded machine
# (sites.py ONLINE_TIMEOUT). After the hub's SuperLink restarted, plus what the site's liveness probe takes to
# restart a SuperNode that did not survive it (liveness_bound): a SuperNode whose request meets the load balancer
# closing the TLS handshake while the SuperLink is down (UNEXPECTED_EOF) gives up at once (1.41 and 1.42 alike,
# flwr/supercore/retry/http_retry.py: an error naming ssl or tls is never retried), and its process then hangs in
# its exit (the Runtime API's server thread keeps it) with its health server shut down: only its probe restarts it.
ONLINE_TIMEOUT = 75


def pairing_name(hub: str, sites: tuple[str, ...]) -> str:
    return f"hub {hub}, sites {' + '.join(sites)}"


def running_version(cluster: Cluster, pod: str, container: str) -> str:
    """The Flower a container's processes run: the venv they run from (what its image's tag picked)."""
    argvs = [argv for p, c, _, argv in cluster.processes() if p == pod and c == container]
    found = {m.group(1) for argv in argvs for a in argv[:2] if (m := re.search(r"\.venv-flwr-([^/]+)/", a))}
    assert len(found) == 1, f"{pod}/{container}'s processes: {argvs}"
    return found.pop()


class Skew:
    """The hub, its two sites, their stacks' states, and what each pairing showed."""

    def __init__(self, run: SitesRun, gate: Optional[threading.Semaphore]):
        self.run, self.gate = run, gate
        self.hub_state = PulumiState()
        self.site_states = {s: PulumiState() for s in ADMITTED}
        self.site_outputs: dict[str, dict[str, Any]] = {}
        self.ids: dict[str, str] = {}  # site -> node id (the registration Job's)

    @property
    def hub(self) -> Hub:
        assert self.run.hub is not None
        return self.run.hub

    def render_site(self, name: str, version: str) -> Rendered:
        """The site's stack on Flower `version`, its keys kept (its Pulumi state), reading the hub's current outputs."""
        partition = (2, ADMITTED.index(name))
        rendered = render_stack(
            name,
            site_config(version, name, partition),
            self.site_states[name],
            {stack_name(HUB): self.hub.outputs},
        )
        self.site_outputs[stack_name(name)] = rendered.outputs
        return rendered

    def deploy(self, hub_version: str, site_versions: tuple[str, ...]) -> None:
        """The hub (whose first render gives the sites its address and CA), the sites (their keys), the hub's
        second render with the sites admitted: started, its registration Job run, then the sites' clusters."""
        run = self.run
        hub_v1 = render_stack(HUB, hub_config(hub_version), self.hub_state)
        run.wan = Wan()
        cluster = Cluster(hub_version, venv(hub_version), HUB, warm=True)
        run.hub = Hub(hub_version, hub_v1, cluster)
        sites = {s: self.render_site(s, v) for s, v in zip(ADMITTED, site_versions, strict=True)}
        self.hub.rendered = render_stack(HUB, hub_config(hub_version, ADMITTED), self.hub_state, self.site_outputs)
        assert self.hub.rendered.outputs["caCertificate"] == hub_v1.outputs["caCertificate"], "the hub's CA changed"
        self.hub.manifests, self.hub.outputs = self.hub.rendered.manifests, self.hub.rendered.outputs
        self.hub._prepare_cli(tomllib.loads(self.hub.outputs["flwrConfig"]))  # the register script changed
        cluster.apply(self.hub.manifests)
        cluster.create_pods()
        lb_ip = run.wan.expose(cluster, f"{HUB_NAME}-superlink")
        start_hub(self.hub, self.gate)
        log, _ = run_jobs(run, registration_jobs(list(cluster.jobs.values())))
        by_key = registered_by_job(log)
        self.ids = {s: by_key[f"{s}/{POOL}/0"] for s in ADMITTED}
        for (s, rendered), v in zip(sites.items(), site_versions, strict=True):
            deploy_site(run, s, rendered, lb_ip, version=v)
        self.wait_online("both sites online")

    def liveness_bound(self) -> float:
        """The longest the sites' liveness probes take to find a hung SuperNode and have it killed (from the
        rendered probes: periodSeconds x failureThreshold, plus the last probe's timeout)."""
        bounds = []
        for site in self.run.sites.values():
            probe = site.pod.spec["containers"][0]["livenessProbe"]
            period, failures = probe.get("periodSeconds", 10), probe.get("failureThreshold", 3)
            bounds.append(period * failures + probe.get("timeoutSeconds", 1))
        return max(bounds)

    def heartbeats(self, path: str = "state.db") -> dict[str, float]:
        """{node id: online_until} from the hub's state file at `path` on its volume (read-only, as
        readiness.node_states): a node's next heartbeat, or its activation, moves it on. {} while the file is
        missing or busy."""
        dbs = sorted(self.hub.cluster.pvcdir.glob(f"*{self.hub.superlink.name}*/{path}"))
        try:
            with sqlite3.connect(f"file:{dbs[0]}?mode=ro", uri=True, timeout=0.5) as db:
                rows = db.execute("SELECT node_id, online_until FROM node").fetchall()
        except (IndexError, sqlite3.Error):
            return {}
        return {str(nid & 0xFFFFFFFFFFFFFFFF): float(until or 0) for nid, until in rows if nid is not None}

    def backups(self) -> list[str]:
        """The backups the hub's state-guard said it took, oldest first (its log spans the pod's starts)."""
        return re.findall(r"backed up .* to (backups/\S+\.db) before", self.guard_log())

    def guard_log(self) -> str:
        return self.hub.superlink.init_containers[0].log(100000)

    def restarts(self) -> dict[str, int]:
        return {s: self.run.sites[s].pod.containers[0].restarts for s in ADMITTED}

    def wait_online(self, what: str, timeout: float = ONLINE_TIMEOUT, since: Optional[dict[str, float]] = None) -> None:
        """Both sites online under their node ids; with `since` (the old SuperLink's last state of them: heartbeats()
        of the state-guard's backup), only once each has reached the new SuperLink (a heartbeat or an activation
        after it): the state's `online` outlives a SuperNode that gave up during the restart by its heartbeat
        patience."""

        def online() -> bool:
            if not all(self.run.sites[s].pod.is_ready() and self.run.sites[s].node_id() for s in ADMITTED):
                return False
            if since is not None:
                now = self.heartbeats()
                if not all(now.get(i, 0.0) > since.get(i, 0.0) for i in self.ids.values()):
                    return False
            states = self.hub.node_states()
            if states is not None and not all(states.get(i) for i in self.ids.values()):
                return False
            try:
                listed = {str(n["node-id"]): n.get("status") for n in self.hub.supernodes()}
            except NotReady:
                return False
            return all(listed.get(i) == "online" for i in self.ids.values())

        wait_for(what, online, timeout, every=3)
        for s in ADMITTED:  # under the node ids the hub's Job registered, never new ones
            assert self.run.sites[s].node_id() == self.ids[s], (s, self.run.sites[s].node_id(), self.ids)
        self.run.phase(what)

    def check_versions(self, hub_version: str, site_versions: tuple[str, ...]) -> None:
        ran = running_version(self.hub.cluster, self.hub.superlink.name, "superlink")
        assert ran == hub_version, f"the hub's SuperLink runs Flower {ran}, expected {hub_version}"
        for s, v in zip(ADMITTED, site_versions, strict=True):
            site = self.run.sites[s]
            ran = running_version(site.cluster, site.pod.name, "supernode")
            assert ran == v, f"{s}'s SuperNode runs Flower {ran}, expected {v}"

    def run_both(self) -> str:
        """A two-round run in which both sites answer every round; its run id."""
        hub = self.hub
        proxy_mark = len(fleet_only.proxy_log(hub.superlink))
        result = hub.run_app({"min-nodes": 2, "num-server-rounds": 2})
        assert_completed(result, {f"{s}-supernode-{POOL}-0": [2, i] for i, s in enumerate(ADMITTED)})
        rid = run_id(result)
        assert rid is not None
        runs = {str(r["run-id"]): r["status"] for r in hub.runs()}
        assert runs.get(rid) == "finished:completed", f"run {rid}: {runs}"
        crossed = fleet_only.fleet_bytes(hub.superlink, proxy_mark)
        assert crossed > 0, "no Fleet bytes crossed the hub's Fleet-only proxy"
        self.run.phase(f"run {rid}: 2 rounds, both sites in each ({crossed >> 10} KiB through the Fleet-only proxy)")
        return rid

    def forged(self, rid: str, sources: list[str]) -> dict[str, tuple[int, object, str]]:
        """hospital-b's crafted pushes (forged_push.py) to the hub's public address, for a finished run."""
        b = ADMITTED[1]
        site = self.run.sites[b]
        fleet_port = int(self.hub.outputs["superlink"]["externalAddress"].rsplit(":", 1)[1])
        key = secret_text(site.rendered, f"{b}-supernode-{POOL}-node-keys", "node-0.key")
        assert "PRIVATE KEY" in key, f"{b}'s node key not found in its render"
        return push_as(
            site.cluster,
            site.cluster.version,
            f"{EXTERNAL_HOST}:{fleet_port}",
            self.hub.outputs["caCertificate"],
            key,
            self.ids[b],
            rid,
            sources,
        )

    def roll_hub(self, version: str) -> None:
        """The hub's `pulumi up` with `version`: its SuperLink rolls (the only workload), the sites untouched."""
        hub = self.hub
        rendered = render_stack(HUB, hub_config(version, ADMITTED), self.hub_state, self.site_outputs)
        hub.rendered, hub.manifests, hub.outputs, hub.version = rendered, rendered.manifests, rendered.outputs, version
        hub._prepare_cli(tomllib.loads(hub.outputs["flwrConfig"]))  # the user's flwr follows
        began, restarts, before = time.monotonic(), self.restarts(), self.backups()
        replaced = rolling_update(hub.cluster, rendered.manifests, ROLLOUT_TIMEOUT, first=[hub.superlink.workload])
        assert replaced == [hub.superlink.name], f"the hub's up to {version} replaced {replaced}"
        backups = self.backups()  # named by time: a new one is a name not seen before
        assert backups and backups[-1] not in before, (
            f"state-guard took no backup before Flower {version} opened the state:\n{self.guard_log()}"
        )
        # The old SuperLink's last word on each node: its state as the guard copied it, after that SuperLink ended
        # and before the new one opened it. A snapshot taken before the roll would miss a heartbeat the old
        # SuperLink took while it was being stopped (CI of 627aabe: 1.41 hospital-a, hung after the restart, was
        # thus counted as back; the run went without it).
        heartbeats = self.heartbeats(backups[-1])
        assert set(self.ids.values()) <= set(heartbeats), f"the hub's state: {heartbeats}, the sites' nodes {self.ids}"
        self.run.phase(f"hub rolled to {version} ({time.monotonic() - began:.1f}s; state backed up first)")
        self.wait_online(
            f"both sites online again under hub {version}", ONLINE_TIMEOUT + self.liveness_bound(), heartbeats
        )
        for s, before in restarts.items():  # what Flower did meanwhile, said in the summary, never hidden
            site = self.run.sites[s]
            if site.pod.containers[0].restarts > before:
                said = site.pod.containers[0].log(100000)
                why = "its liveness probe" if "killed: liveness probe failed" in said else "the kubelet (it exited)"
                self.run.incidents.append(
                    f"{s} ({running_version(site.cluster, site.pod.name, 'supernode')}) did not survive the hub's "
                    f"restart to {version}: restarted by {why}"
                )

    def roll_site(self, name: str, version: str) -> None:
        site = self.run.sites[name]
        site.rendered = self.render_site(name, version)
        replaced = rolling_update(site.cluster, site.rendered.manifests, ROLLOUT_TIMEOUT)
        assert replaced == [site.pod.name], f"{name}'s up to {version} replaced {replaced}"
        self.run.phase(f"{name} rolled to {version}")
        self.wait_online(f"{name} online again on {version}")


def scenario(skew: Skew, outcomes: dict[str, Outcome]) -> None:
    """The pairings in order; each one's outcome in `outcomes` (by pairing_name) as soon as it passed."""
    started = time.monotonic()

    def passed(hub: str, sites: tuple[str, ...]) -> None:
        nonlocal started
        name = pairing_name(hub, sites)
        skew.check_versions(hub, sites)
        run = skew.run
        outcomes[name] = Outcome(
            name, "passed", time.monotonic() - started, phases=list(run.phases), incidents=list(run.incidents)
        )
        run.phases.clear()
        run.incidents.clear()
        started = time.monotonic()

    (_, hub1, sites1), (_, hub2, sites2), (_, hub3, sites3) = PAIRINGS
    skew.deploy(hub1, sites1)
    skew.run_both()
    passed(hub1, sites1)

    skew.roll_hub(hub2)
    rid = skew.run_both()
    a, b = (skew.ids[s] for s in ADMITTED)
    answers = skew.forged(rid, [a])
    status, code, body = answers[a]
    # Authenticated (not 401) and refused for the run's status, never for the source: 1.42 has no such check.
    assert code != SOURCE_MISMATCH and (status, code) == (403, RUN_STATUS_NOT_ALLOWED), answers
    skew.run.phase(f"negative control: hospital-b's push as hospital-a answered {status} code {code} by {hub2}")
    passed(hub2, sites2)

    skew.roll_site(ADMITTED[0], sites3[0])  # the consortium's order: every site on 1.N+1 before the hub moves on
    skew.roll_hub(hub3)
    rid = skew.run_both()
    answers = skew.forged(rid, [a, b])
    assert answers[a][:2] == (403, SOURCE_MISMATCH), answers  # another node's source: refused before anything
    # Its own source: authenticated and past the check (the nightly accepts it: it no longer checks the run's status).
    assert answers[b][1] != SOURCE_MISMATCH and answers[b][0] != 401, answers
    skew.run.phase(
        f"hospital-b's push as hospital-a: {answers[a][0]} code {answers[a][1]} ({answers[a][2][:80]}); "
        f"as itself: {answers[b][0]} code {answers[b][1]}"
    )
    passed(hub3, sites3)


def run_scenario(gate: Optional[threading.Semaphore], outcomes: dict[str, Outcome]) -> Outcome:
    """The whole chain as one Outcome (one federation start); each pairing's in `outcomes`, a pairing not reached
    failed with the chain's error."""
    run = SitesRun(PREVIOUS_HTTP_ERA)
    skew = Skew(run, gate)

    overall = run.outcome("6s", lambda: scenario(skew, outcomes))
    failed_at: Optional[str] = None
    for _, hub, sites in PAIRINGS:
        name = pairing_name(hub, sites)
        if name in outcomes:
            continue
        if failed_at is None:  # where the chain stopped: its error, and the phases it got through
            failed_at = name
            outcomes[name] = Outcome(
                name, status="failed", seconds=overall.seconds, error=overall.error, phases=overall.phases
            )
        else:
            outcomes[name] = Outcome(name, status="failed", error=f"not reached: the chain failed at {failed_at}")
    return overall
