"""Monitoring in the sites scenario (sites.py; issue 34 part 5): a real Prometheus scrapes the hub's rendered
exporter through the hub's rendered NetworkPolicy, with the rendered alerts loaded, and sees a site go offline
and come back.

- Where: the gRPC-era run of scenario 6 (one version, its federation: no new one). Not the HTTP era's: there the
  scenario proves that Control calls from outside never reach the SuperLink by the absence of
  `ControlServicer.` in its log (fleet_only.py), which the exporter's own polls (ListNodes, ListRuns every poll)
  would fill; the HTTP era's exporter is proven live by tests/test_monitoring_live.py, the gRPC era's here.
- The hub's `monitoring` (MONITORING): the exporter polling every 5 s, a ServiceMonitor scraping every 5 s, the
  PrometheusRule with `siteOfflineMinutes: 1` (the shortest `for:` the config allows): test settings of the
  config, the objects as rendered.
- Two Prometheus servers (prometheus.py) in the hub's cluster, both with the pod labels `monitoring.scrapers`
  names: `admitted` in the namespace it names, `refused` in another one (the negative control: the
  NetworkPolicy drops its scrapes, its target is down with a timeout while the admitted one's is up).
- Then hospital-b's SuperNode pod is deleted (SIGTERM, its grace period: Flower deactivates the node): its
  FlowerSiteOffline alert fires and hospital-a's does not; the pod is created again: the alert resolves.
- The exporter learns the sites from its ConfigMap, which the hub's second `pulumi up` changed while the
  SuperLink pod ran (the kubelet's in-place update; harness/volumes.py): both sites are counted by name (none as
  "unknown") and the SuperLink pod never restarted.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from flower_federation.config.monitoring import Scrapers
from tests.e2e.harness import Cluster
from tests.e2e.prometheus import Prometheus, scrape_configs
from tests.e2e.site_checks import wait_for
from tests.e2e.site_stacks import ADMITTED, HUB_NAME
from tests.support.flower import GRPC_ERA

ALERT = "FlowerSiteOffline"
MONITORING: dict[str, Any] = {
    "enabled": True,
    "pollIntervalSeconds": 5,
    "serviceMonitor": {"enabled": True, "intervalSeconds": 5},
    "prometheusRules": {"enabled": True, "thresholds": {"siteOfflineMinutes": 1}},
}
SCRAPERS = Scrapers()  # the defaults the hub's `monitoring.scrapers` keeps: who the NetworkPolicy admits
NOT_ADMITTED_NAMESPACE = "elsewhere"
# First scrapes: Prometheus' start plus a scrape interval (5 s) and, for the refused one, its scrape timeout
# (the interval: 5 s) before the dropped connection counts as down.
TARGETS_TIMEOUT = 60
# Pod deleted -> alert firing: deactivation at SIGTERM (else the heartbeat's patience, 2 x 30 s), a poll (5 s),
# a scrape (5 s), an evaluation (5 s), `for: 1m`, an evaluation: ~80 s, 140 s with the heartbeat; bounded for a
# loaded machine.
FIRING_TIMEOUT = 240
# Pod created again -> alert resolved: a SuperNode start and activation (3-10 s), a poll, a scrape, an evaluation.
RESOLVED_TIMEOUT = 120


def wanted(version: str, exposure: str) -> bool:
    return version == GRPC_ERA and exposure == "loadBalancer"


@dataclass
class Watch:
    admitted: Prometheus
    refused: Prometheus
    started: float = field(default_factory=time.time)


def start(cluster: Cluster, manifests: list[dict[str, Any]]) -> Watch:
    """The two Prometheus servers, from the hub's rendered ServiceMonitor and PrometheusRule."""
    (monitor,) = [m for m in manifests if m["kind"] == "ServiceMonitor"]
    (rule,) = [m for m in manifests if m["kind"] == "PrometheusRule"]
    scrape = scrape_configs(cluster, monitor)
    assert [len(j["static_configs"]) for j in scrape] == [1], scrape  # the SuperLink pod, once
    namespace = SCRAPERS.namespace_selector["kubernetes.io/metadata.name"]
    labels = dict(SCRAPERS.pod_selector)
    admitted = Prometheus(cluster, "prometheus", namespace, labels, scrape, rule)
    refused = Prometheus(cluster, "prometheus-elsewhere", NOT_ADMITTED_NAMESPACE, labels, scrape)
    return Watch(admitted, refused)


def _health(p: Prometheus) -> tuple[str, str]:
    (target,) = p.targets()
    return target["health"], target["lastError"]


def prove(watch: Watch, hub: Any, site_cluster: Cluster, node_id: str, online_timeout: float) -> str:
    """The claims above, stopping the SuperNode of `site_cluster` (node `node_id`; `hub` a site_deployments.Hub)
    and waiting up to `online_timeout` for it to be online again (sites.py's bound). Returns the evidence."""
    admitted, refused = watch.admitted, watch.refused
    loaded = {r["name"] for g in admitted.api("rules")["groups"] for r in g["rules"]}
    assert ALERT in loaded, f"the rendered rules were not loaded: {loaded}\n{admitted.log()[-2000:]}"
    wait_for("the admitted Prometheus scraping", lambda: _health(admitted)[0] == "up", TARGETS_TIMEOUT)
    wait_for("the refused Prometheus' scrape failing", lambda: _health(refused)[0] == "down", TARGETS_TIMEOUT)
    refusal = _health(refused)[1]
    assert "deadline exceeded" in refusal or "timeout" in refusal, f"not dropped by the NetworkPolicy: {refusal}"
    assert _health(admitted)[0] == "up", "the admitted Prometheus' target went down"
    online_by_site = 'sum by (site) (flower_federation_supernodes{status="online"})'
    both = dict.fromkeys(ADMITTED, 1.0)
    wait_for("both sites online by name in Prometheus", lambda: admitted.query(online_by_site) == both, 30)
    assert not admitted.alerts(ALERT), admitted.alerts(ALERT)
    superlink = hub.cluster.pod(f"{HUB_NAME}-superlink-0")
    restarts = [c.restarts for c in superlink.containers]

    kept, dropped = ADMITTED
    pod = next(p for p in site_cluster.pods.values() if p.labels.get("app.kubernetes.io/component") == "supernode")
    t = time.monotonic()
    pod.terminate(float(pod.spec.get("terminationGracePeriodSeconds", 30)))
    site_cluster.delete_pod(pod)
    firing = wait_for(
        f"{ALERT} firing for {dropped}",
        lambda: admitted.alerts(ALERT).get(dropped) == "firing" and admitted.alerts(ALERT),
        FIRING_TIMEOUT,
        every=2,
    )
    fired_after = time.monotonic() - t
    assert set(firing) == {dropped}, f"{ALERT} for other sites too: {firing}"
    assert admitted.query(online_by_site) == {kept: 1.0, dropped: 0.0}, admitted.query(online_by_site)

    t = time.monotonic()
    site_cluster.recreate_pod(pod)

    def back_online() -> bool:
        listed = {str(n["node-id"]): n.get("status") for n in hub.supernodes()} if pod.is_ready() else {}
        return listed.get(node_id) == "online"

    wait_for(f"{dropped} online again", back_online, online_timeout, every=3)

    # Resolved because Prometheus sees the site online again (a failed poll serves no node series; the rule holds
    # a firing alert while they are missing: docs/observability.md, "Unknown is not healthy").
    def resolved() -> bool:
        return admitted.query(online_by_site) == both and not admitted.alerts(ALERT)

    wait_for(f"{ALERT} resolved for {dropped}, seen online", resolved, RESOLVED_TIMEOUT, every=2)
    resolved_after = time.monotonic() - t
    assert _health(refused)[0] == "down" and _health(admitted)[0] == "up", "a scraper changed sides"
    assert [c.restarts for c in superlink.containers] == restarts, "the SuperLink pod restarted"
    _dump(watch, online_by_site)
    return (
        f"Prometheus: {dropped}'s {ALERT} fired {fired_after:.0f}s after its SuperNode pod was deleted "
        f"({kept}'s not), resolved {resolved_after:.0f}s after it came back; a Prometheus in namespace "
        f"{NOT_ADMITTED_NAMESPACE!r} refused by the NetworkPolicy ({refusal[:80]})"
    )


def _dump(watch: Watch, online_by_site: str) -> None:
    """With E2E_PROMETHEUS_DUMP=FILE: the admitted Prometheus' range queries of this run as JSON (what
    docs/observability.png is drawn from: docs/plot_observability.py)."""
    target = os.environ.get("E2E_PROMETHEUS_DUMP")
    if not target:
        return
    p, end = watch.admitted, time.time()
    queries = {"online": online_by_site, "alerts": f'ALERTS{{alertname="{ALERT}"}}'}
    data = {name: p.query_range(q, watch.started, end, 2) for name, q in queries.items()}
    Path(target).write_text(json.dumps({"start": watch.started, "end": end, **data}, indent=1) + "\n")
