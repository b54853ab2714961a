"""Sites end to end: a hub and the sites it admits, each its own stack, its own render
and its own cluster, run on the harness with real Flower (test_e2e_sites.py reports it
per Flower version).

The stacks (a hub, two admitted sites, an intruder and a misconfigured site) and how
each is rendered by itself are in site_stacks.py; their deployments (the hub, the sites'
clusters, the hub's `pulumi up`s with their Jobs) in site_deployments.py; what the scenario
looks for (refusals in logs, what a site reaches) in site_checks.py. The order is a real
team's: the hub is deployed, the sites are deployed (reading the hub's outputs), the hub is
deployed again with the sites' keys (reading their outputs), with the same CA, server
certificate and SuperLink (asserted: Pulumi state).

Each stack runs in a cluster of its own (own node, bridge, subnet, cluster DNS); the
clusters meet only on a WAN (harness/wan.py): the hub's LoadBalancer Service gets a WAN
address (a TCP relay to the SuperLink pod, TLS passed through), and public DNS answers
`fl.example.test` with it in the sites' clusters. A site can resolve neither the hub's
in-cluster Service name nor route to the hub's pods, nor reach a Control port at the
public address: the hub's Control API is its ClusterIP Service `N-superlink-control` in
both eras, where its Job and `flwr` (the exported flwrConfig) dial it (checked). The keys reach the
SuperLink only through what the hub rendered: its node-registration Job runs as a Job's
pod in the hub's cluster (harness/jobs.py), created once the SuperLink is Ready (what
Pulumi does: the Job depends on the SuperLink). Then `flwr run` (a user in the hub's
cluster, with the hub's exported flwrConfig and CA) must complete with one node of each
admitted site in every round, while the intruder is refused and the misconfigured site
fails its TLS handshake. In the HTTP era hospital-a runs its ClientApps in a distributed SuperExec, which dials its
SuperNode's Runtime API over TLS with a certificate of the site's own CA (the run's ClientApp must have run in
that SuperExec's pod; runtime_tls.py checks the hop refuses plaintext). Last, the hub drops hospital-b (a third
`pulumi up`): the Job revokes its node, which is refused from then on while hospital-a stays online; and
trusting hospital-b's same key again (a fourth) is said by the registration Job (STALE), which completes; the
revocation Job then fails at once, naming the key (Flower never registers a revoked key again; its
podFailurePolicy).

Timeouts, from Flower's own behaviour (constants below): a SuperNode whose key is not
registered is refused at activation (1.26: gRPC FAILED_PRECONDITION "No SuperNode found
with the given public key"; 1.41: HTTP 412, "[code: 2004] Failed to activate SuperNode")
and one that fails its TLS handshake (CERTIFICATE_VERIFY_FAILED) gives up at once: it
exits (1.41: exit code 305) instead of retrying (flwr.common.retry_invoker retries only
UNAVAILABLE without a handshake failure, with back-off capped at MAX_RETRY_DELAY = 20 s).
The kubelet restarts it (this harness: back-off 1 s doubling to 8 s, reset after 16 s of
running; a kubelet's reaches 5 min). So a site admitted after it started comes online at
its next restart: at most 8 s of back-off plus one SuperNode start (3-10 s on a busy
2-core machine) after the registration Job completed, and an intruder shows its refusal
within the same time. `flwr supernode list` shows a node online from its activation,
long before the 30 s heartbeat interval (HEARTBEAT_DEFAULT_INTERVAL) matters.
"""

from __future__ import annotations

import re
import threading
from typing import Any, Optional

from tests.e2e import fleet_only, gateway_objects, netpol_controls, runtime_tls, site_monitoring
from tests.e2e.harness import Cluster, NotReady
from tests.e2e.harness.gateway import expose_gateway
from tests.e2e.harness.wan import Wan
from tests.e2e.readiness import registration_jobs
from tests.e2e.scenarios import Outcome, assert_completed, run_id
from tests.e2e.site_checks import REFUSED, UNKNOWN_KEY, UNTRUSTED, line_of, reach_from, wait_for
from tests.e2e.site_deployments import Hub, SitesRun, deploy_site, hub_up, registered_by_job, run_jobs, start_hub
from tests.e2e.site_stacks import (
    ADMITTED,
    EXTERNAL_HOST,
    GATEWAY_NAME,
    GATEWAY_NAMESPACE,
    HUB,
    HUB_NAME,
    HUB_NAMESPACE,
    INTRUDER,
    MISCONFIGURED,
    POOL,
    SITE_NAMESPACE,
    PulumiState,
    hub_config,
    other_ca,
    pem_body,
    render_stack,
    secret_text,
    site_config,
    stack_name,
    workload,
)
from tests.support.flower import venv
from tests.support.manifests import bound

# Registration Job complete -> an admitted site online: its next restart (<= 8 s back-off)
# plus one SuperNode start and activation, doubled for a loaded machine.
ONLINE_TIMEOUT = 75
# A refused / misconfigured SuperNode shows it in its first attempt (one start).
NEGATIVE_TIMEOUT = 45
# HTTP era: the run's model, 3M float64 = 24 MB (tens of MB through the Fleet-only proxy).
LARGE_MODEL_FLOATS = 3_000_000


def scenario_sites(run: SitesRun, gate: Optional[threading.Semaphore] = None) -> None:
    v = run.version
    hub_state = PulumiState()
    via_gateway = run.exposure == "gateway"

    monitored = site_monitoring.wanted(v, run.exposure)  # a real Prometheus watches the hub (one run of 6)

    def hub_settings(sites: tuple[str, ...] = ()) -> dict[str, Any]:
        return hub_config(v, sites, run.exposure, site_monitoring.MONITORING if monitored else None)

    # 1. The hub's first `pulumi up`: no site admitted yet.
    hub_v1 = render_stack(HUB, hub_settings(), hub_state)
    run.wan = Wan()
    hub_cluster = Cluster(v, venv(v), HUB, warm=True)
    hub_cluster.apply(hub_v1.manifests)
    hub_cluster.create_pods()
    run.hub = hub = Hub(v, hub_v1, hub_cluster)
    if via_gateway:  # the platform's Gateway, presenting its own certificate from the federation's CA
        listener_cert = f"{HUB_NAME}-gateway-tls"  # the one Secret the hub's ReferenceGrant names
        platform = gateway_objects.gateway(GATEWAY_NAME, GATEWAY_NAMESPACE, EXTERNAL_HOST, listener_cert, HUB_NAMESPACE)
        run.gateway = expose_gateway(run.wan, hub_cluster, platform)
        lb_ip = run.gateway.address
    else:
        lb_ip = run.wan.expose(hub_cluster, f"{HUB_NAME}-superlink")
    fleet_port = int(hub_v1.outputs["superlink"]["externalAddress"].rsplit(":", 1)[1])
    assert hub_v1.outputs["superlink"]["externalAddress"] == f"{EXTERNAL_HOST}:{fleet_port}", hub_v1.outputs
    start_hub(hub, gate)
    job_v1 = registration_jobs(list(hub_cluster.jobs.values()))  # Pulumi creates them once the SuperLink is ready
    log_v1, _ = run_jobs(run, job_v1)
    assert "done (register): 0 trusted keys" in log_v1, log_v1
    watch = site_monitoring.start(hub_cluster, hub_v1.manifests) if monitored else None
    run.phase("hub up (SuperLink Ready, registration Job with no site)" + (", 2 Prometheus" if watch else ""))

    # 2. The sites' `pulumi up`s: each reads the hub stack's outputs.
    hub_outputs = {stack_name(HUB): hub_v1.outputs}
    # HTTP era: hospital-a runs its ClientApps in a SuperExec pod of its own, which dials its SuperNode's Runtime API
    # over TLS with a certificate of the site's own CA (the site has the hub's CA certificate, never its key).
    distributed = not v.startswith("1.2")
    configs = {
        ADMITTED[0]: site_config(v, ADMITTED[0], (2, 0), distributed=distributed),
        ADMITTED[1]: site_config(v, ADMITTED[1], (2, 1)),
        INTRUDER: site_config(v, INTRUDER, (1, 0)),
        MISCONFIGURED: site_config(
            v,
            MISCONFIGURED,
            (1, 0),
            {"address": EXTERNAL_HOST, "port": fleet_port, "certificate": {"pem": other_ca()}},
        ),
    }
    rendered = {name: render_stack(name, raw, PulumiState(), hub_outputs) for name, raw in configs.items()}
    for name, r in rendered.items():
        sts = workload(r, "StatefulSet", f"{name}-supernode-{POOL}")
        args = sts["spec"]["template"]["spec"]["containers"][0]["args"]
        assert args[args.index("--superlink") + 1] == f"{EXTERNAL_HOST}:{fleet_port}", args
    for name in ADMITTED + (INTRUDER,):
        assert secret_text(rendered[name], f"{name}-ca", "ca.crt") == hub_v1.outputs["caCertificate"], name
    if distributed:
        site_ca = secret_text(rendered[ADMITTED[0]], f"{ADMITTED[0]}-supernode-{POOL}-runtime-ca", "ca.crt")
        assert site_ca and site_ca != hub_v1.outputs["caCertificate"], "the site's Runtime API CA is the hub's"
        superexec = workload(rendered[ADMITTED[0]], "StatefulSet", f"{ADMITTED[0]}-superexec-{POOL}")
        assert "--insecure" not in superexec["spec"]["template"]["spec"]["containers"][0]["args"], superexec
    for name in configs:
        deploy_site(run, name, rendered[name], lb_ip)
    run.phase("sites up (4 clusters, read the hub's outputs)")

    # 3. The hub's second `pulumi up`: it admits the two sites, reading their outputs.
    site_outputs = {stack_name(s): rendered[s].outputs for s in ADMITTED}
    job_v2 = hub_up(run, hub_settings(ADMITTED), hub_state, site_outputs)
    assert job_v2[0].name != job_v1[0].name, job_v1[0].name
    # The keys' ConfigMap is named after its content (builders/registration.bound_name).
    trusted = bound(hub.rendered.manifests, "ConfigMap", f"{HUB_NAME}-node-registration")["data"]["trusted-keys"]
    for s in ADMITTED:
        for key in rendered[s].outputs["nodeAuth"]["publicKeys"][POOL].values():
            assert key.strip() in trusted, f"{s}'s key is not in the hub's trusted keys:\n{trusted}"
    for s in (INTRUDER, MISCONFIGURED):
        for key in rendered[s].outputs["nodeAuth"]["publicKeys"][POOL].values():
            assert key.split()[1] not in trusted, f"{s}'s key is trusted"
    log_v2, _ = run_jobs(run, job_v2)
    by_key = registered_by_job(log_v2)
    expected_keys = {f"{s}/{POOL}/0" for s in ADMITTED}
    assert set(by_key) == expected_keys, f"the Job registered {by_key}, expected {expected_keys}:\n{log_v2}"
    superlink = hub.superlink.containers[0]
    marks = {INTRUDER: len(run.sites[INTRUDER].log()), HUB: len(superlink.log(100000))}
    run.phase("hub up again (registration Job: the two sites' keys)")

    # 4. The admitted sites come online by themselves (their next restart).
    def both_online() -> Optional[list[dict[str, Any]]]:
        if not all(run.sites[s].pod.is_ready() and run.sites[s].node_id() for s in ADMITTED):
            return None
        states = hub.node_states()  # cheap; the CLI (seconds of CPU) only once it agrees
        if states is not None and not all(states.get(by_key[k]) for k in expected_keys):
            return None
        try:
            nodes = hub.supernodes()
        except NotReady:
            return None
        online = {str(n["node-id"]) for n in nodes if n.get("status") == "online"}
        return nodes if online >= {by_key[k] for k in expected_keys} else None

    nodes = wait_for("both admitted sites online", both_online, ONLINE_TIMEOUT, every=3)
    run.phase("both sites online")
    listed = {str(n["node-id"]): n.get("status") for n in nodes}
    assert set(listed) == set(by_key.values()), f"listed {listed}, registered by the Job {by_key}"
    for s in ADMITTED:
        assert run.sites[s].node_id() == by_key[f"{s}/{POOL}/0"], (s, run.sites[s].node_id(), by_key)

    # 5. Negative controls, seen while the admitted sites are online.
    intruder, misconfigured = run.sites[INTRUDER], run.sites[MISCONFIGURED]
    after = ""

    def refused() -> Optional[re.Match]:
        nonlocal after
        after = intruder.log()[marks[INTRUDER] :]
        return REFUSED.search(after)

    refusal = wait_for("the intruder refused after the registration", refused, NEGATIVE_TIMEOUT)
    assert intruder.node_id() is None, "the intruder got a node id"
    on_hub = ""

    def hub_refused() -> bool:
        # Its own attempt, not the intruder's: the refusal the intruder logged after its mark may answer an
        # attempt the SuperLink logged before its own (the marks are taken one after the other); the intruder's
        # next attempt, after its restart back-off, is logged after it.
        nonlocal on_hub
        on_hub = superlink.log(100000)[marks[HUB] :]
        return UNKNOWN_KEY in on_hub

    try:
        wait_for("the SuperLink logged refusing an unknown key", hub_refused, NEGATIVE_TIMEOUT)
    except NotReady:
        raise AssertionError(f"the SuperLink did not log refusing an unknown key:\n{on_hub[-3000:]}") from None
    if "with public key: b'" in on_hub:  # 1.41 names the key: the intruder's
        (intruder_key,) = rendered[INTRUDER].outputs["nodeAuth"]["publicKeys"][POOL].values()
        assert pem_body(intruder_key) in on_hub, f"the refused key is not the intruder's:\n{on_hub[-3000:]}"
    untrusted = misconfigured.log()
    tls = wait_for("the misconfigured site's TLS failure", lambda: UNTRUSTED.search(untrusted), 0)
    evidence = f"intruder: {line_of(after, refusal)!r}, misconfigured: {line_of(untrusted, tls)!r}"
    assert misconfigured.node_id() is None, "the misconfigured site got a node id"
    nodes = hub.supernodes()
    assert {str(n["node-id"]) for n in nodes} == set(by_key.values()), f"other nodes listed: {nodes}"
    # Only through the load balancer: the hub's in-cluster name does not resolve from a
    # site, its SuperLink pod is not routable, the public name and port are.
    site_a = run.sites[ADMITTED[0]].cluster
    internal = f"{HUB_NAME}-superlink.{HUB_NAMESPACE}.svc.cluster.local"
    # The Control API is the hub's ClusterIP Service N-superlink-control in both eras (gRPC: its own port, 9093;
    # HTTP: the SuperLink's own port behind the proxy, 9095): the public address relays no Control port.
    control_host, control_port = hub.outputs["superlink"]["controlAddress"].rsplit(":", 1)
    assert control_host == f"{HUB_NAME}-superlink-control.{HUB_NAMESPACE}.svc.cluster.local", hub.outputs["superlink"]
    dials = [(hub.superlink.ip, fleet_port), (EXTERNAL_HOST, fleet_port), (EXTERNAL_HOST, int(control_port))]
    seen = reach_from(site_a, [internal, EXTERNAL_HOST], dials)
    assert seen["resolves"] == {internal: None, EXTERNAL_HOST: lb_ip}, seen
    assert seen["connects"][f"{EXTERNAL_HOST}:{fleet_port}"] == "ok", seen
    assert seen["connects"][f"{hub.superlink.ip}:{fleet_port}"] != "ok", seen
    assert seen["connects"][f"{EXTERNAL_HOST}:{control_port}"] != "ok", seen
    if run.gateway is not None:
        clients = {r["client"] for r in run.gateway.requests() if r["uri"].startswith("/v1/fleet/")}
        for s in ADMITTED:
            assert run.sites[s].pod.ip in clients, f"{s} did not come through the gateway: {sorted(clients)}"
    else:
        relayed = run.wan.balancer_log(f"{HUB_NAME}-superlink")
        for s in ADMITTED:
            assert f"{run.sites[s].pod.ip}:" in relayed, f"{s} did not come through the load balancer:\n{relayed}"
    # The site's NetworkPolicy: its SuperNode may dial the hub's port and nothing else
    # outside (the probe namespace, which no policy selects, reaches that outside host).
    probe_ns = next(n for n, _ in site_a.clients if n.endswith("-probe"))
    assert site_a.netpol is not None
    # Another port than the hub's: without supernodes.superlink.cidrs a site may reach the
    # hub's port at any address (a warning says so), which is 443 behind a gateway.
    other_port = netpol_controls.OUTSIDE_PORT if fleet_port != netpol_controls.OUTSIDE_PORT else 8443
    outside = site_a.netpol.outside(other_port)
    site_node = run.sites[ADMITTED[0]].pod.netns
    run.phases.append(
        netpol_controls.expect(
            site_a,
            [
                ("site SuperNode to the hub's port", site_node, lb_ip, fleet_port, netpol_controls.OK),
                ("site SuperNode to the outside world", site_node, outside, other_port, netpol_controls.DROPPED),
                ("unselected pod to the outside world", probe_ns, outside, other_port, netpol_controls.OK),
            ],
        )
    )
    for s in (INTRUDER, MISCONFIGURED):  # done: their crash loops only cost CPU now
        run.sites[s].cluster.close()
    restarts = {s: run.sites[s].pod.containers[0].restarts for s in ADMITTED}
    run.phase(
        f"negative controls ({evidence}, hub: {UNKNOWN_KEY!r}; admitted sites restarted before admission: {restarts})"
    )

    # 6. A federated run across both sites, by a user of the hub. HTTP era: the model is
    # tens of MB, and every byte of it crosses the hub's Fleet-only proxy.
    proxied = any(c["name"] == "fleet-proxy" for c in hub.superlink.spec["containers"])
    assert proxied == (not hub_cluster.version.startswith("1.2")), "the hub's Fleet-only proxy: HTTP era only"
    proxy_mark = len(fleet_only.proxy_log(hub.superlink)) if proxied else 0
    run_config: dict[str, Any] = {"min-nodes": 2, "num-server-rounds": 2}
    if proxied:
        run_config["model-floats"] = LARGE_MODEL_FLOATS
    result = hub.run_app(run_config)
    expected = {f"{s}-supernode-{POOL}-0": [2, i] for i, s in enumerate(ADMITTED)}
    if distributed:  # hospital-a's ClientApp runs in its SuperExec's pod
        expected[f"{ADMITTED[0]}-superexec-{POOL}-0"] = expected.pop(f"{ADMITTED[0]}-supernode-{POOL}-0")
    assert_completed(result, expected)
    rid = run_id(result)
    runs = {str(r["run-id"]): r["status"] for r in hub.runs()}
    assert runs.get(rid) == "finished:completed", f"run {rid}: {runs}"
    if proxied:
        floats = run_config["model-floats"]
        # FedAvg of two +1 updates per round from zeros: every float ends at 2.0.
        assert f"model={2.0 * floats} floats={floats}" in result.output, result.output[-2000:]
        crossed = fleet_only.fleet_bytes(hub.superlink, proxy_mark)
        # Objects are content-addressed (an identical array crosses once): at least the model to both sites.
        assert crossed > 2 * 8 * floats, f"only {crossed} bytes crossed the proxy for a {8 * floats}-byte model"
        run.phase(f"run (2 rounds, both sites, a {8 * floats >> 20} MiB model; {crossed >> 20} MiB through the proxy)")
    else:
        run.phase("run (2 rounds, both sites)")
    if distributed:  # the run crossed hospital-a's SuperExec hop: TLS only, verified with the site's own CA
        site_a_pods = run.sites[ADMITTED[0]].cluster.pods.values()
        (site_superexec,) = [
            p for p in site_a_pods if p.labels.get("app.kubernetes.io/component") == "superexec-clientapp"
        ]
        run.phase(f"{ADMITTED[0]}: " + runtime_tls.assert_pair_is_tls(run.sites[ADMITTED[0]].pod, site_superexec))

    # 6b. HTTP era: the public address serves the Fleet API only. Control commands from
    # outside fail at the proxy and never reach the SuperLink; from inside they work.
    if proxied:
        outside = fleet_only.OutsideCli(
            v,
            run.sites[ADMITTED[0]].cluster,
            SITE_NAMESPACE,
            hub.outputs["flwrConfig"],
            hub.outputs["caCertificate"],
            f"{EXTERNAL_HOST}:{fleet_port}",
        )
        (intruder_key,) = rendered[INTRUDER].outputs["nodeAuth"]["publicKeys"][POOL].values()
        front = (
            fleet_only.gateway_front(run.gateway) if run.gateway is not None else fleet_only.proxy_front(hub.superlink)
        )
        evidence = fleet_only.outside_control_refused(outside, hub.superlink, intruder_key, front)
        mark = len(fleet_only.superlink_log(hub.superlink))
        assert hub.runs(), "flwr ls in the hub's cluster listed nothing"
        inside = fleet_only.superlink_log(hub.superlink)[mark:]
        assert "ControlServicer.ListRuns" in inside, f"in-cluster flwr ls not seen by the SuperLink:\n{inside[-2000:]}"
        run.phase(f"{evidence}; in-cluster flwr ls served (ControlServicer.ListRuns)")

    if watch is not None:  # hospital-b offline and back: its alert fires and resolves (site_monitoring.py)
        b = ADMITTED[1]
        run.phase(site_monitoring.prove(watch, hub, run.sites[b].cluster, by_key[f"{b}/{POOL}/0"], ONLINE_TIMEOUT))

    if via_gateway:  # revocation does not depend on how the hub is reached: proven by the LoadBalancer variant
        return

    # 7. The hub's third `pulumi up` no longer lists hospital-b: the Job revokes its node,
    # which is refused from then on; hospital-a stays online.
    kept, dropped = ADMITTED
    dropped_site, dropped_id = run.sites[dropped], by_key[f"{dropped}/{POOL}/0"]
    mark = len(dropped_site.log())
    job_v3 = hub_up(run, hub_settings((kept,)), hub_state, {stack_name(kept): rendered[kept].outputs})
    registered_v3, log_v3 = run_jobs(run, job_v3)
    assert "done (register): 1 trusted keys; 0 registered, 0 revoked, 1 unchanged" in registered_v3, registered_v3
    assert log_v3 is not None and f"revoked node {dropped_id}" in log_v3, log_v3
    assert "done (revoke): 1 trusted keys; 0 registered, 1 revoked, 1 unchanged" in log_v3, log_v3

    def dropped_refused() -> Optional[re.Match]:
        return REFUSED.search(dropped_site.log()[mark:])

    wait_for(f"{dropped} refused once revoked", dropped_refused, NEGATIVE_TIMEOUT)
    status = {str(n["node-id"]): n.get("status") for n in hub.supernodes()}
    assert status.get(by_key[f"{kept}/{POOL}/0"]) == "online", status
    assert status.get(dropped_id) != "online", status
    run.phase(f"hub up without {dropped} (its node revoked, refused from then on)")

    # 8. Trusting hospital-b's same key again cannot work (Flower never registers a revoked key again), and
    # must never block a revocation (issue 32 (c)): the registration Job reports the stale key and completes;
    # the revocation Job runs, revokes what is no longer trusted, then fails at once (its podFailurePolicy)
    # saying why, instead of retrying until its deadline; nothing else changes on the SuperLink.
    job_v4 = hub_up(run, hub_settings(ADMITTED), hub_state, site_outputs)
    log_v4, revoked_v4 = run_jobs(run, job_v4, revocation_status="Failed")
    stale = f"STALE: trusted keys revoked earlier (nodes {dropped_id}): {dropped}/{POOL}/0"
    assert stale in log_v4 and "registered " not in log_v4.split("STALE", 1)[0], log_v4
    assert revoked_v4 is not None and stale in revoked_v4, revoked_v4
    assert f"REFUSED: trusted keys revoked earlier (nodes {dropped_id})" in revoked_v4, revoked_v4
    assert "PodFailurePolicy" in job_v4[1].reason and len(job_v4[1].pods) == 1, job_v4[1].describe()
    after = {str(n["node-id"]): n.get("status") for n in hub.supernodes()}
    assert after.get(by_key[f"{kept}/{POOL}/0"]) == "online" and after.get(dropped_id) != "online", after
    run.phase(
        f"hub up trusting {dropped}'s revoked key again: reported, the revocation Job failed at once after it ran"
    )


def run_scenario(version: str, gate: Optional[threading.Semaphore] = None, exposure: str = "loadBalancer") -> Outcome:
    """The scenario for one Flower version and way of reaching the hub, as an Outcome (passed / failed)."""
    run = SitesRun(version, exposure)
    return run.outcome("6" if exposure == "loadBalancer" else "6g", lambda: scenario_sites(run, gate))
