"""`monitoring`: the federation exporter in the SuperLink's pod, who may scrape it, and the Prometheus Operator
objects (ServiceMonitor, PrometheusRule) that scrape it and alert on it, and a Grafana dashboard. Opt-in: a stack without `monitoring`
(or with `enabled: false`) renders exactly as before. Every threshold is a number of its own unit, so no string
of the config reaches a rule expression."""

from __future__ import annotations

from typing import Any, Optional

from pydantic import Field

from flower_federation.config.base import Model, ResourcesPreset

# The exporter's default port: 9464 is no port of a Flower API (flower/dialects.py) nor of the Fleet-only proxy.
METRICS_PORT = 9464


class Scrapers(Model):
    """Who may reach the exporter's port: the NetworkPolicy admits pods matching both selectors (the
    Prometheus Operator's own defaults: its `prometheus` pods in a `monitoring` namespace)."""

    namespace_selector: dict[str, str] = Field(
        default={"kubernetes.io/metadata.name": "monitoring"},
        description="Labels of the namespace Prometheus runs in; `{}`: the federation's own namespace only.",
    )
    pod_selector: dict[str, str] = Field(
        default={"app.kubernetes.io/name": "prometheus"},
        description="Labels of the Prometheus pods in it; `{}`: every pod of that namespace.",
    )


class ServiceMonitorSettings(Model):
    """A `monitoring.coreos.com/v1` ServiceMonitor `N-federation-exporter` for the exporter's Service."""

    enabled: bool = Field(default=False, description="Render the ServiceMonitor (the Prometheus Operator's CRD).")
    interval_seconds: int = Field(
        default=60, ge=5, le=3600, description="How often Prometheus scrapes the exporter (`interval`)."
    )
    labels: dict[str, str] = Field(
        default={},
        description="Extra labels on the ServiceMonitor: what your Prometheus' `serviceMonitorSelector` matches.",
    )


class AlertThresholds(Model):
    """The alerts' thresholds (docs/observability.md names the alert each one sets)."""

    site_offline_minutes: int = Field(
        default=10, ge=1, le=10080, description="A site with no online SuperNode this long: FlowerSiteOffline."
    )
    flapping_changes_per_hour: int = Field(
        default=6,
        ge=2,
        le=1000,
        description="A site's online SuperNode count changing this often in an hour: FlowerSiteFlapping.",
    )
    run_running_hours: int = Field(
        default=24, ge=1, le=8760, description="A run still running after this many hours: FlowerRunTooLong."
    )
    volume_free_percent: int = Field(
        default=15, ge=1, le=99, description="The state volume's free space below this: FlowerStateVolumeFilling."
    )
    certificate_warning_days: int = Field(
        default=21, ge=1, le=3650, description="The server certificate or a CA expiring within this: a warning."
    )
    certificate_critical_days: int = Field(
        default=7, ge=1, le=3650, description="... within this: critical (below `certificateWarningDays`)."
    )
    supernode_not_ready_minutes: int = Field(
        default=10,
        ge=1,
        le=10080,
        description="Site stacks: a SuperNode pod of the site not ready this long: FlowerSiteSuperNodeNotReady.",
    )
    supernode_restarts_per_hour: int = Field(
        default=3,
        ge=1,
        le=1000,
        description="Site stacks: a SuperNode container restarting this often in an hour: "
        "FlowerSiteSuperNodeRestarting.",
    )
    backup_max_age_days: int = Field(
        default=30,
        ge=1,
        le=3650,
        description="The newest state-guard backup older than this (or none): FlowerStateBackupStale, an info "
        "alert to read before an upgrade.",
    )


class PrometheusRules(Model):
    """A `monitoring.coreos.com/v1` PrometheusRule: `N-federation-alerts` (federation and hub: the alerts of
    docs/observability.md), or `N-site-alerts` on a site (its SuperNodes' alerts, no hub data needed)."""

    enabled: bool = Field(default=False, description="Render the PrometheusRule (the Prometheus Operator's CRD).")
    labels: dict[str, str] = Field(
        default={},
        description="Extra labels on the PrometheusRule: what your Prometheus' `ruleSelector` matches.",
    )
    thresholds: AlertThresholds = AlertThresholds()
    supernode_log_tail: bool = Field(
        default=False,
        description="Site stacks: keep each SuperNode container's log tail (its last 80 lines, at most 2 KiB) as its "
        "termination message (`terminationMessagePolicy: FallbackToLogsOnError`), so `kubectl describe pod` shows "
        "Flower's refusal line for FlowerSiteSuperNodeExiting's runbook. Anyone who may `get` the pods reads it, "
        "wider than `pods/log`, and it holds what a ClientApp printed: off unless you choose it.",
    )


class DashboardSettings(Model):
    """A ConfigMap `N-federation-dashboard` holding a Grafana dashboard of the exporter's metrics (and cAdvisor's,
    the kubelet's), labelled for the Grafana sidecar, in the federation's namespace: kube-prometheus-stack's sidecar
    searches every namespace (`sidecar.dashboards.searchNamespace: ALL`); Grafana's own chart needs that set."""

    enabled: bool = Field(default=False, description="Render the dashboard's ConfigMap (roles federation and hub).")
    label_key: str = Field(
        default="grafana_dashboard",
        description="The label the Grafana sidecar selects dashboards by (its `sidecar.dashboards.label`).",
    )
    label_value: str = Field(
        default="1", description="That label's value (the sidecar's `sidecar.dashboards.labelValue`)."
    )


class Monitoring(Model):
    """The federation exporter (docs/observability.md): a container `federation-exporter` in the SuperLink's pod,
    in the SuperLink's image, asking its Control API over loopback TLS what Flower knows and serving it as
    Prometheus metrics `flower_federation_*`."""

    enabled: bool = Field(
        default=False,
        description="Turn monitoring on. Roles federation and hub (where the SuperLink runs): the exporter, its "
        "Service `N-federation-exporter` and a NetworkPolicy rule admitting only `scrapers`. A site runs no "
        "exporter: it gets its own alerts (`prometheusRules`) about its SuperNodes.",
    )
    port: int = Field(
        default=METRICS_PORT,
        ge=1024,
        le=65535,
        description="The exporter's metrics port: one the SuperLink's pod does not use (its API and health ports).",
    )
    poll_interval_seconds: int = Field(
        default=30,
        ge=5,
        le=3600,
        description="How often the exporter asks the Control API (each scrape serves the last poll's answer).",
    )
    resources_preset: Optional[ResourcesPreset] = Field(
        default=None,
        description='The exporter container\'s preset (see "Resources"). Unset: `resourcesPreset`, else `nano` (it '
        "holds about 92 MiB with Flower 1.42.0 loaded).",
    )
    resources: Optional[dict[str, Any]] = Field(
        default=None, description="ResourceRequirements of the exporter container, key by key over its preset."
    )
    scrapers: Scrapers = Scrapers()
    service_monitor: ServiceMonitorSettings = ServiceMonitorSettings()
    prometheus_rules: PrometheusRules = PrometheusRules()
    dashboard: DashboardSettings = DashboardSettings()
