"""The Grafana dashboard's panels as plain data (`monitoring.dashboard`): each panel's title, kind, unit and
PromQL queries, so tests parse every expression with promtool and check every metric name without the Grafana
SDK; dashboard.py turns them into Grafana's model.

Series come from the exporter (selected by the scrape's `job`, the Service `N-federation-exporter`, and
`namespace`, as the alerts select them: monitoring_rules.py), cAdvisor (`container_*`, the SuperLink pod's
containers) and the kubelet (`kubelet_volume_stats_*`, its state claim). Flower exposes no rounds: the nearest the
exporter measures is finished runs (`run_duration_seconds`, a histogram recomputed from the SuperLink's state each
poll), so "throughput" is runs finished per hour and their durations. Built from validated values only (the
federation's name and namespace, DNS labels): no other config string reaches a query."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from flower_federation.flower.layout import STATE_VOLUME
from flower_federation.plan import FederationPlan

TIMESERIES, STAT = "timeseries", "stat"
DAY = 86400


@dataclass(frozen=True)
class Query:
    expr: str
    legend: str


@dataclass(frozen=True)
class PanelSpec:
    title: str
    kind: str  # TIMESERIES or STAT
    unit: str  # a Grafana unit id
    description: str
    queries: tuple[Query, ...]
    width: int = 12
    # Colour steps: (from this value, colour), the first from minus infinity (None); none: Grafana's default.
    steps: tuple[tuple[Optional[float], str], ...] = ()


def panels(plan: FederationPlan) -> list[PanelSpec]:
    """Every panel that applies, top to bottom (the state volume's only with `superlink.persistence`, the
    certificates' only with TLS)."""
    t = plan.spec.monitoring.prometheus_rules.thresholds
    sel = f'job="{plan.names.federation_exporter}",namespace="{plan.namespace}"'
    pod = f'namespace="{plan.namespace}",pod="{plan.names.superlink}-0"'
    claim = f'namespace="{plan.namespace}",persistentvolumeclaim="{STATE_VOLUME}-{plan.names.superlink}-0"'
    buckets = f"flower_federation_run_duration_seconds_bucket{{{sel}}}"
    nodes = "flower_federation_supernodes"
    online = f'{nodes}{{{sel},status="online"}}'
    site_online = f'{nodes}{{{sel},status="online",site!="unknown"}}'
    out = [
        PanelSpec("Sites online", STAT, "short", "Sites with at least one online SuperNode, of the sites the hub "
                  "admits (a key it does not list, site `unknown`, is no site).",
                  (Query(f"count(sum by (site) ({site_online}) > 0) or vector(0)", "online"),
                   Query(f'count(count by (site) ({nodes}{{{sel},site!="unknown"}}))', "known")),
                  6),
        PanelSpec("SuperLink up", STAT, "short", "1: the exporter's last poll of the Control API succeeded.",
                  (Query(f"flower_federation_up{{{sel}}}", "up"),), 6),
        PanelSpec("Control API latency", TIMESERIES, "s", "How long the exporter's Control API calls took.",
                  (Query(f"flower_federation_control_api_latency_seconds{{{sel}}}", "latency"),)),
        PanelSpec("Online SuperNodes by site", TIMESERIES, "short",
                  "SuperNodes online per site (their key's site; `unknown`: a key the hub does not list).",
                  (Query(f"sum by (site) ({online})", "{{site}}"),), 24),
        PanelSpec("SuperNodes by status", TIMESERIES, "short", "Every SuperNode the SuperLink knows, by Flower status.",
                  (Query(f"sum by (status) (flower_federation_supernodes{{{sel}}})", "{{status}}"),)),
        PanelSpec("Seconds since a site was last online", TIMESERIES, "s",
                  "Per site: 0 while a SuperNode is online, else the time since the last one went offline.",
                  (Query(f"flower_federation_site_last_online_age_seconds{{{sel}}}", "{{site}}"),)),
        PanelSpec("Runs by status", TIMESERIES, "short", "Runs in the SuperLink's state (a finished one by result).",
                  (Query(f"flower_federation_runs{{{sel}}}", "{{status}}"),)),
        PanelSpec("Runs finished per hour", TIMESERIES, "short",
                  "Flower exposes no rounds: finished runs per hour stand for throughput.",
                  (Query(f"increase(flower_federation_run_duration_seconds_count{{{sel}}}[1h])", "finished"),)),
        PanelSpec("Run duration (finished runs)", TIMESERIES, "s",
                  "Median and 90th percentile of the finished runs' durations, from the exporter's histogram.",
                  (Query(f"histogram_quantile(0.5, sum by (le) ({buckets}))",
                         "median"),
                   Query(f"histogram_quantile(0.9, sum by (le) ({buckets}))",
                         "p90"),
                   Query(f"flower_federation_oldest_running_run_age_seconds{{{sel}}}", "oldest running run"))),
        PanelSpec("SuperLink pod CPU", TIMESERIES, "cores", "CPU of each container of the SuperLink's pod (cAdvisor).",
                  (Query(f'sum by (container) (rate(container_cpu_usage_seconds_total{{{pod},container!=""}}[5m]))',
                         "{{container}}"),)),
        PanelSpec("SuperLink pod memory", TIMESERIES, "bytes",
                  "Working set of each container of the SuperLink's pod (cAdvisor): what its memory limit is held to.",
                  (Query(f'sum by (container) (container_memory_working_set_bytes{{{pod},container!=""}})',
                         "{{container}}"),)),
    ]  # fmt: skip
    if plan.spec.superlink.persistence.enabled:
        out.append(
            PanelSpec("State volume", TIMESERIES, "bytes",
                      "The SuperLink's state claim, used and capacity (kubelet), and its state file (the exporter).",
                      (Query(f"kubelet_volume_stats_used_bytes{{{claim}}}", "used"),
                       Query(f"kubelet_volume_stats_capacity_bytes{{{claim}}}", "capacity"),
                       Query(f"flower_federation_state_file_bytes{{{sel}}}", "state file")))
        )  # fmt: skip
    if plan.trust:
        out.append(
            PanelSpec("Certificate expiry", STAT, "s", "Time left before the server certificate and each trusted CA "
                      "expire, coloured as the alerts' thresholds (orange: a warning, red: critical).",
                      (Query(f"flower_federation_certificate_not_after_timestamp_seconds{{{sel}}} - time()",
                             "{{kind}} {{subject}}"),), 24,
                      ((None, "red"), (t.certificate_critical_days * DAY, "orange"),
                       (t.certificate_warning_days * DAY, "green")))
        )  # fmt: skip
    return out
