"""A site's own alerts (`monitoring` on a `role: site` stack, issue 34 part 3): a PrometheusRule `N-site-alerts`
in each cluster the site's pools run in, over kube-state-metrics alone, so an organisation is alerted about its
SuperNodes without any access to the hub (whose exporter only the hub scrapes).

What a site can see of its registration: a SuperNode whose key the SuperLink refuses exits at once, Flower's
`flwr_exit` logging (1.41 to 1.43, HTTP era) `Exit Code: 305` / `Failed to initialize the connection to the
SuperLink.` / `[code: 2004] Failed to activate SuperNode.`, and the gRPC era `No SuperNode found with the given
public key.`; then the kubelet restarts it. No metric carries that line: every `flwr_exit` error exits 1 (so
`kube_pod_container_status_last_terminated_exitcode` cannot tell a refusal from another error), and
kube-state-metrics exposes no termination message. So FlowerSiteSuperNodeExiting fires on the `supernode`
container exiting with an error (`last_terminated_reason="Error"`, restarted), and the SuperNode container gets
`terminationMessagePolicy: FallbackToLogsOnError` (supernodes.py, with this rule only): the kubelet then keeps the
log's tail, Flower's exit message, as the container's last termination message, which the runbook reads. The
exact line is a Loki alert in docs/observability.md.

Pods are selected by the names their workload gives them (kube-state-metrics exposes no pod labels by default):
`N-supernode-POOL-<ordinal>` (StatefulSet) or `-<5 characters>` (DaemonSet): the suffix holds no '-', so pool `a`
never matches pool `a-b`'s pods (`N-supernode-a-b-0`), and the regex of the site's pools matches nothing else.
Names are validated DNS labels; thresholds are integers: no other config string reaches an expression."""

from __future__ import annotations

from typing import Any

from flower_federation.builders import monitoring_rules
from flower_federation.kube.naming import SITE_ALERTS, SUPERNODE
from flower_federation.kube.objects import Manifest
from flower_federation.plan import FederationPlan

# The suffix a pod's name gets from its workload, by `mode` (Prometheus regexes match whole values).
# A DaemonSet's pods get five characters of apimachinery's rand.String (utilrand.String(5)).
POD_SUFFIX = {"StatefulSet": "[0-9]+", "DaemonSet": "[a-z0-9]{5}"}


def enabled(plan: FederationPlan) -> bool:
    m = plan.spec.monitoring
    return plan.role == "site" and m.enabled and m.prometheus_rules.enabled


def pods_regex(plan: FederationPlan, pools: list[str]) -> str:
    names = "|".join(plan.names.pool(p) for p in sorted(pools))
    return f"({names})-{POD_SUFFIX[plan.spec.mode]}"


def alerts(plan: FederationPlan, pools: list[str]) -> list[dict[str, Any]]:
    t = plan.spec.monitoring.prometheus_rules.thresholds
    n = plan.name
    pods = f'namespace="{plan.namespace}",pod=~"{pods_regex(plan, pools)}"'
    node = f'{pods},container="{SUPERNODE}"'
    alert = monitoring_rules.alert
    return [
        alert(plan, "FlowerSiteSuperNodeNotReady", f'kube_pod_status_ready{{{pods},condition="true"}} == 0',
              t.supernode_not_ready_minutes, "warning", f"Site {n}: SuperNode pod {{{{ $labels.pod }}}} is not ready",
              f"A SuperNode pod of the site has not been ready for {t.supernode_not_ready_minutes} minutes."),
        alert(plan, "FlowerSiteSuperNodeRestarting",
              f"increase(kube_pod_container_status_restarts_total{{{pods}}}[1h]) >= {t.supernode_restarts_per_hour}",
              0, "warning", f"Site {n}: {{{{ $labels.pod }}}}/{{{{ $labels.container }}}} keeps restarting",
              f"The container restarted at least {t.supernode_restarts_per_hour} times in an hour."),
        alert(plan, "FlowerSiteSuperNodeExiting",
              f'kube_pod_container_status_last_terminated_reason{{{node},reason="Error"}} == 1 '
              f"and on (namespace, pod, container) increase(kube_pod_container_status_restarts_total{{{node}}}[15m])"
              " > 0", 0, "warning", f"Site {n}: SuperNode {{{{ $labels.pod }}}} exits with an error",
              "Flower's SuperNode exited with an error; its termination message says why (a refused key: "
              "[code: 2004] Failed to activate SuperNode.)."),
    ]  # fmt: skip


def prometheus_rule(plan: FederationPlan, pools: list[str]) -> Manifest:
    rules = plan.spec.monitoring.prometheus_rules
    return {
        "apiVersion": monitoring_rules.API_VERSION,
        "kind": "PrometheusRule",
        "metadata": plan.meta(plan.names.site_alerts, SITE_ALERTS, extra_labels=rules.labels),
        "spec": {"groups": [{"name": f"flower-site-{plan.name}", "rules": alerts(plan, pools)}]},
    }


def objects(plan: FederationPlan, cluster: str) -> list[Manifest]:
    """The site's PrometheusRule for the pools of `cluster` (each cluster's kube-state-metrics sees its own)."""
    pools = [p.name for p in plan.pools_in(cluster)]
    return [prometheus_rule(plan, pools)] if enabled(plan) and pools else []
