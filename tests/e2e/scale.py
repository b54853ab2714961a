"""Scenario 19, many SuperNodes: a hub and the sites it admits, each site its own stack and
cluster (as in the sites scenario, sites.py), with E2E_SCALE SuperNodes in all (10 by
default: what CI's two cores carry beside the rest of the suite; `make e2e-scale` runs 30, and
`make e2e-scale E2E_SCALE=200` larger where more memory and cores exist: every site runs on this host, about 0.5 GiB a
SuperNode), at most SITE_NODES to a site.

The order is a team's that admits its sites in one go: the sites' stacks are rendered
(reading the hub's outputs), the hub's stack admits them all (reading theirs), the hub is
deployed and its registration Job registers every key, then every site starts at once. It
passes when every SuperNode is online under the node id the Job registered for its key
and a federated run has every SuperNode in every round; it measures what a team sizing a
larger federation needs (docs/benchmarks.md, "Many SuperNodes"):

- the registration Job's time for the N keys;
- time to all online: from the sites' pods starting to the SuperLink's state holding every
  node online (each SuperNode imports Flower, starts its SuperExec and activates);
- the SuperLink's CPU with every node online and no run (the heartbeat and poll load:
  each SuperNode polls for messages every few seconds), as a share of one core over
  IDLE_WINDOW seconds, and its resident memory;
- each round's time (the ServerApp's own clock: every node's ClientApp is a new process)
  and the SuperLink's CPU and peak memory over the run (the `flower-superlink` process
  alone: with subprocess isolation the ServerApp runs beside it in the same container).

With E2E_SCALE_EXPORTER=1 (`make e2e-scale`, by hand; not in `make test`) the hub runs the federation exporter
(`monitoring`, polling every EXPORTER_POLL seconds, the shortest the config allows: its dearest setting), and the
scenario also measures what it costs: its own CPU in the idle window and over the run, and the SuperLink's CPU in
a second idle window with the exporter stopped (SIGSTOP: no polls, as without it) against the first, in the same
run so nothing else differs.

The SuperLink must stay under its rendered memory limit (its default preset). The figures
are reported as the scenario's phases; what to read from them is in docs/benchmarks.md.
"""

from __future__ import annotations

import contextlib
import math
import os
import signal
import threading
import time
from typing import Any, Optional

from flower_federation.kube.quantity import parse_quantity
from tests.e2e.harness import Cluster, NotReady
from tests.e2e.harness.wan import Wan
from tests.e2e.lanes import GATE_HOLD, GATE_TIMEOUT
from tests.e2e.readiness import registration_jobs
from tests.e2e.scenarios import Outcome, assert_completed, run_id
from tests.e2e.site_checks import wait_for
from tests.e2e.site_deployments import (
    Hub,
    SitesRun,
    deploy_site,
    logged_node_id,
    registered_by_job,
    run_jobs,
    start_hub,
)
from tests.e2e.site_stacks import (
    HUB,
    HUB_NAME,
    POOL,
    PulumiState,
    hub_config,
    render_stack,
    site_config,
    stack_name,
)
from tests.support.flower import venv

# In `make test`: 30 SuperNodes (make e2e-scale's default) ran on a quiet 2-core machine (docs/benchmarks.md), but in
# CI, beside the unit tests' lane, their ClientApps (at SITE_NICE) answered no round within 135 s (clean-clone runs
# of 5200d12 and e169bcc, 2026-11-26).
DEFAULT_SCALE = 10
SITE_NODES = 10  # SuperNodes to a site (one pool): N = 30 is three sites
JOB_SECONDS_PER_KEY = 0.5  # the Job: one RegisterNode a key, ~5 ms each; its start dominates at this size
# The sites are other organisations' machines; here they share two cores with the hub. At this niceness their
# SuperNodes and ClientApps yield the CPU to the hub's SuperLink, as its own node would give it the CPU it requests:
# without it, 30 ClientApps starting at once starved the SuperLink past its liveness probe (an emulation artifact).
SITE_NICE = 10
IDLE_WINDOW = 20.0  # seconds of SuperLink CPU sampled with every node online and no run
# Every site runs on this host: a SuperNode pod holds about 0.5 GiB while it trains (the SuperNode, its SuperExec
# and a ClientApp, each a Python process importing Flower); at 45 and 60 SuperNodes a 24 GiB host ran out of memory.
POD_MEMORY = 512 * 2**20
HUB_MEMORY = 2**30
EXPORTER_POLL = 5  # monitoring.pollIntervalSeconds' minimum
TICKS = os.sysconf("SC_CLK_TCK")
PAGE = os.sysconf("SC_PAGE_SIZE")


def scale() -> int:
    """E2E_SCALE, the SuperNodes in all (at least 2: two sites of one)."""
    value = os.environ.get("E2E_SCALE", str(DEFAULT_SCALE))
    if not value.isdigit() or int(value) < 2:
        raise ValueError(f"E2E_SCALE={value!r}: a number of SuperNodes, at least 2")
    return int(value)


def sites_for(n: int) -> dict[str, int]:
    """{site name: SuperNodes}: N spread over ceil(N / SITE_NODES) sites, at least two."""
    count = max(2, math.ceil(n / SITE_NODES))
    return {f"site-{i:02d}": n // count + (i < n % count) for i in range(count)}


def check_memory(n: int) -> None:
    """Refuses, saying why, an N whose sites this host's available memory cannot hold: better than the kernel's
    out-of-memory killer taking SuperNodes (or the test) mid-round."""
    need = HUB_MEMORY + n * POD_MEMORY
    with open("/proc/meminfo") as f:
        available = next(int(line.split()[1]) * 1024 for line in f if line.startswith("MemAvailable:"))
    if need > available:
        raise NotReady(
            f"E2E_SCALE={n} needs about {need / 2**30:.1f} GiB of memory on this host (every site runs here: about "
            f"{POD_MEMORY >> 20} MiB a SuperNode while it trains, {HUB_MEMORY >> 30} GiB for the hub) and "
            f"{available / 2**30:.1f} GiB is available: run fewer SuperNodes, or on a larger host"
        )


def online_timeout(n: int) -> float:
    """Every SuperNode's start is a Flower import (2-3 s of CPU): N of them on two cores,
    plus their activation, doubled for a loaded machine."""
    return 60 + 3.0 * n


def round_timeout(n: int) -> float:
    """A round starts a ClientApp process on every node (~2.5 s of CPU each) on two cores, which the scenario
    shares with what else `make test` runs: at 60 + 2.5 s a node, 10 SuperNodes beside the live tests' floods got
    5 replies within the 85 s (CI of 78543ea: the e2e, faster, now ends beside them). A bound only: a round ends
    when every node replied."""
    return 90 + 6.0 * n


def exporter_measured() -> bool:
    return os.environ.get("E2E_SCALE_EXPORTER") == "1"


def exporter_pids(hub: Hub) -> list[int]:
    """The host pids of the federation exporter's processes (its container's `python federation_exporter.py`)."""
    pids = [pid for _, container, pid, _ in hub.cluster.processes() if container == "federation-exporter"]
    if not pids:
        raise NotReady("no federation-exporter process in the hub's SuperLink pod")
    return pids


def scaled_site(version: str, name: str, nodes: int, total: int) -> dict[str, Any]:
    raw = site_config(version, name, (nodes, 0))
    raw["supernodes"]["pools"][0].update(
        replicas=nodes, nodeConfig={"partition-id": "{index}", "num-partitions": "{replicas}"}
    )
    # Every site's SuperNodes start at once on the same two cores, at a lower priority (SITE_NICE): each site
    # gives them the time a slow machine would need, as its team may: the default's 2 minutes (24 x 5 s) and 5 s
    # more per SuperNode starting beside them.
    raw["supernodes"]["probes"] = {"startupProbe": {"failureThreshold": 24 + total}}
    return raw


# --- the SuperLink process, read from /proc ---------------------------------------------------------------


def superlink_pid(hub: Hub) -> int:
    """The host pid of the SuperLink's `flower-superlink` process (not its SuperExec, not a ServerApp): the
    image's entry point, or the SuperLink's start-up wrapper (`python -c`, flower/superlink_state.py), which
    hands over to Flower's own entry point in the same process."""
    for pod, _, pid, argv in hub.cluster.processes():
        entry = any(os.path.basename(a) == "flower-superlink" for a in argv[:2])
        wrapper = argv[1:2] == ["-c"] and len(argv) > 2 and "sys.argv[0] = 'flower-superlink'" in argv[2]
        if pod == hub.superlink.name and (entry or wrapper):
            return pid
    raise NotReady("no flower-superlink process in the hub's SuperLink pod")


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS  # utime, stime


def rss_bytes(pid: int) -> int:
    with open(f"/proc/{pid}/statm") as f:
        return int(f.read().split()[1]) * PAGE


class PeakRss:
    """The most resident memory one process held, sampled every `every` seconds while in `with`."""

    def __init__(self, pid: int, every: float = 0.5):
        self.pid, self.every, self.peak, self.vanished = pid, every, 0, False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while not self._stop.is_set():
            try:
                self.peak = max(self.peak, rss_bytes(self.pid))
            except OSError:  # the process ended (restarted?): its peak is not known, which the scenario fails on
                self.vanished = True
                return
            self._stop.wait(self.every)

    def __enter__(self) -> PeakRss:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)


# --- the scenario -----------------------------------------------------------------------------------------


def scenario_scale(run: SitesRun, n: int, gate: Optional[threading.Semaphore] = None) -> dict[str, float]:
    """The scenario (see the module's docstring); returns its figures."""
    check_memory(n)
    v = run.version
    sites = sites_for(n)
    hub_state = PulumiState()
    figures: dict[str, float] = {"nodes": n, "sites": len(sites)}

    # The stacks: the hub's outputs for the sites, the sites' outputs for the hub (same CA, as Pulumi keeps it).
    hub_v1 = render_stack(HUB, hub_config(v), hub_state)
    hub_outputs = {stack_name(HUB): hub_v1.outputs}
    rendered = {s: render_stack(s, scaled_site(v, s, k, n), PulumiState(), hub_outputs) for s, k in sites.items()}
    monitoring = {"enabled": True, "pollIntervalSeconds": EXPORTER_POLL} if exporter_measured() else None
    hub_v2 = render_stack(
        HUB,
        hub_config(v, tuple(sites), monitoring=monitoring),
        hub_state,
        {stack_name(s): r.outputs for s, r in rendered.items()},
    )
    assert hub_v2.outputs["caCertificate"] == hub_v1.outputs["caCertificate"], "the hub's CA changed across renders"
    keys = {
        f"{s}/{POOL}/{slot}": key.strip()
        for s, r in rendered.items()
        for slot, key in r.outputs["nodeAuth"]["publicKeys"][POOL].items()
    }
    assert len(keys) == n, f"{len(keys)} node keys rendered for {n} SuperNodes"

    # The hub: its SuperLink, then its registration Job with every site's keys.
    run.wan = Wan()
    hub_cluster = Cluster(v, venv(v), HUB, warm=True)
    hub_cluster.apply(hub_v2.manifests)
    hub_cluster.create_pods()
    run.hub = hub = Hub(v, hub_v2, hub_cluster)
    lb_ip = run.wan.expose(hub_cluster, f"{HUB_NAME}-superlink")
    start_hub(hub, gate)
    t = time.monotonic()
    registration = registration_jobs(list(hub_cluster.jobs.values()))
    log, _ = run_jobs(run, registration)
    figures["registration_s"] = time.monotonic() - t
    by_key = registered_by_job(log)
    assert set(by_key) == set(keys), f"the Job registered {sorted(by_key)}, expected {sorted(keys)}:\n{log[-3000:]}"
    assert f"done (register): {n} trusted keys; {n} registered, 0 revoked, 0 unchanged" in log, log[-2000:]
    run.phase(f"hub up: SuperLink Ready, its Job registered {n} keys in {figures['registration_s']:.1f}s")

    # Every site at once, each its own cluster; all online is the SuperLink's own state (cheap to poll), then
    # `flwr supernode list` once.
    pid = superlink_pid(hub)
    want = set(by_key.values())

    def all_online() -> Optional[dict[str, bool]]:
        states = hub.node_states()
        return states if states is not None and want <= {i for i, up in states.items() if up} else None

    # The start is the burst: the gate is held while it lasts, lanes.GATE_HOLD at most (as a lane holds it).
    if gate is not None and not gate.acquire(timeout=GATE_TIMEOUT):
        raise NotReady(f"no turn to start the sites within {GATE_TIMEOUT}s")
    t = time.monotonic()
    try:
        for s, r in rendered.items():
            deploy_site(run, s, r, lb_ip, nice=SITE_NICE)
        with contextlib.suppress(NotReady):
            wait_for(f"all {n} SuperNodes online", all_online, min(GATE_HOLD, online_timeout(n)), every=1)
    finally:
        if gate is not None:
            gate.release()
    wait_for(f"all {n} SuperNodes online", all_online, max(0.0, online_timeout(n) - (time.monotonic() - t)), every=1)
    figures["all_online_s"] = time.monotonic() - t
    nodes = hub.supernodes()
    listed = {str(x["node-id"]): x.get("status") for x in nodes}
    assert listed == dict.fromkeys(want, "online"), f"listed {listed}, registered by the Job {sorted(want)}"
    pods = {p.name: p for s in rendered for p in run.sites[s].cluster.pods.values()}
    assert len(pods) == n, sorted(pods)
    logged = {name: logged_node_id(p) for name, p in pods.items()}
    for s, k in sites.items():
        for slot in range(k):
            name = f"{s}-supernode-{POOL}-{slot}"
            assert logged.get(name) == by_key[f"{s}/{POOL}/{slot}"], (name, logged.get(name), by_key)
    run.phase(f"{len(sites)} sites up, all {n} SuperNodes online {figures['all_online_s']:.1f}s after their start")

    # The SuperLink with every node online and no run: heartbeats and polls.
    exporter = exporter_pids(hub) if monitoring else []
    exporter0 = sum(cpu_seconds(p) for p in exporter)
    cpu0, t0 = cpu_seconds(pid), time.monotonic()
    time.sleep(IDLE_WINDOW)
    figures["idle_cpu_pct"] = 100 * (cpu_seconds(pid) - cpu0) / (time.monotonic() - t0)
    figures["idle_rss_mib"] = rss_bytes(pid) / 2**20
    run.phase(
        f"SuperLink idle with {n} online: {figures['idle_cpu_pct']:.1f}% of a core, "
        f"RSS {figures['idle_rss_mib']:.0f} MiB"
    )
    if exporter:
        figures["exporter_idle_cpu_pct"] = 100 * (sum(cpu_seconds(p) for p in exporter) - exporter0) / IDLE_WINDOW
        for p in exporter:
            os.kill(p, signal.SIGSTOP)
        try:
            cpu0, t0 = cpu_seconds(pid), time.monotonic()
            time.sleep(IDLE_WINDOW)
            figures["idle_cpu_pct_exporter_stopped"] = 100 * (cpu_seconds(pid) - cpu0) / (time.monotonic() - t0)
        finally:
            for p in exporter:
                os.kill(p, signal.SIGCONT)
        run.phase(
            f"exporter (poll every {EXPORTER_POLL}s) idle: {figures['exporter_idle_cpu_pct']:.1f}% of a core; "
            f"SuperLink {figures['idle_cpu_pct']:.1f}% with it polling, "
            f"{figures['idle_cpu_pct_exporter_stopped']:.1f}% with it stopped"
        )
        exporter0 = sum(cpu_seconds(p) for p in exporter)

    # A run with every node in every round.
    run_config = {"min-nodes": n, "num-server-rounds": 2, "round-timeout": round_timeout(n)}
    cpu0 = cpu_seconds(pid)
    with PeakRss(pid) as peak:
        result = hub.run_app(run_config)
    expected = {f"{s}-supernode-{POOL}-{slot}": [k, slot] for s, k in sites.items() for slot in range(k)}
    assert_completed(result, expected)
    runs = {str(r["run-id"]): r["status"] for r in hub.runs()}
    rid = run_id(result)
    assert runs.get(rid) == "finished:completed", f"run {rid}: {runs}"
    figures["run_s"] = result.seconds
    figures["run_cpu_s"] = cpu_seconds(pid) - cpu0
    figures["run_peak_rss_mib"] = peak.peak / 2**20
    if exporter:
        figures["exporter_run_cpu_s"] = sum(cpu_seconds(p) for p in exporter) - exporter0
        run.phase(f"exporter over the run: {figures['exporter_run_cpu_s']:.2f} CPU-s")
    for i, seconds in enumerate(result.round_seconds, 1):
        figures[f"round{i}_s"] = seconds
    assert not peak.vanished, "the SuperLink's process ended during the run (a restart?): its memory is not known"
    limit = hub.superlink.container("superlink").spec["resources"]["limits"]["memory"]
    assert peak.peak < parse_quantity(limit), f"the SuperLink held {peak.peak >> 20} MiB, over its {limit} limit"
    run.phase(
        f"run ({len(result.rounds)} rounds, all {n} in each; rounds "
        + ", ".join(f"{s:.1f}s" for s in result.round_seconds)
        + f"): SuperLink {figures['run_cpu_s']:.1f} CPU-s, peak RSS {figures['run_peak_rss_mib']:.0f} MiB of {limit}"
    )
    return figures


def run_scenario(version: str, n: int, gate: Optional[threading.Semaphore] = None) -> Outcome:
    """The scenario for one Flower version, as an Outcome (passed / failed); its figures are its phases."""
    run = SitesRun(version)
    return run.outcome("19", lambda: scenario_scale(run, n, gate))
