"""The Prometheus Operator objects of `monitoring` (monitoring.coreos.com/v1, as the operator v0.93 serves them):
a ServiceMonitor `N-federation-exporter` that scrapes the exporter's Service, and a PrometheusRule
`N-federation-alerts` with the alerts docs/observability.md explains, each with its runbook there.

Every alert names the federation (`federation` label) and, where it is about one site, the site (one hospital's
outage is one alert). Expressions are built from validated values only: the federation's name and namespace
(DNS labels), object names derived from them, and the thresholds (integers); no other config string reaches them.
Exporter series are selected by the scrape's own labels (`job`, the Service's name; `namespace`), kube-state-metrics
and kubelet series by namespace and the names of our objects (the SuperLink pod `N-superlink-0`, its state claim
`state-N-superlink-0`, the Jobs `N-node-registration-*` / `N-node-revocation-*`).
"""

from __future__ import annotations

from typing import Any

from flower_federation.flower.layout import STATE_VOLUME
from flower_federation.kube.naming import FEDERATION_EXPORTER, selector_labels
from flower_federation.kube.objects import Manifest
from flower_federation.plan import FederationPlan

API_VERSION = "monitoring.coreos.com/v1"
PORT_NAME = "metrics"  # monitoring.PORT_NAME (a test keeps the two equal)
RUNBOOKS = "docs/observability.md"
DAY = 86400


def _selector(plan: FederationPlan) -> str:
    return f'job="{plan.names.federation_exporter}",namespace="{plan.namespace}"'


def alert(
    plan: FederationPlan, name: str, expr: str, minutes: int, severity: str, summary: str, description: str
) -> dict[str, Any]:
    rule: dict[str, Any] = {"alert": name, "expr": expr}
    if minutes:
        rule["for"] = f"{minutes}m"
    rule["labels"] = {"severity": severity, "federation": plan.name}
    rule["annotations"] = {
        "summary": summary,
        "description": description,
        "runbook": f"{RUNBOOKS}#{name.lower()}",
    }
    return rule


def held(plan: FederationPlan, name: str, expr: str, known: str) -> str:
    """`expr`, and, while `known` is not true, whatever of the alert was firing: an alert over the exporter's series
    stays firing while those series are unknown (the exporter not scraped, or its polls failing: they vanish),
    never resolving for want of data; FlowerExporterDown or FlowerSuperLinkDown says why. The alert's own ALERTS
    series, without the labels the rule adds, is its previous label set, so the alert continues (no new `for:`, no
    resolve-and-refire). Only `firing` is held: a pending alert is a claim not yet made, not made while unknown."""
    firing = f'ALERTS{{alertname="{name}",alertstate="firing",federation="{plan.name}"}}'
    return f"({expr}) or (max without (alertname, alertstate, severity, federation) ({firing}) unless on () ({known}))"


# Alerts about the state volume: only where the SuperLink keeps its state on one (`superlink.persistence`).
STATE_ALERTS = ("FlowerStateVolumeFilling", "FlowerStateBackupStale")


def alerts(plan: FederationPlan) -> list[dict[str, Any]]:
    """Every alert that applies, in docs/observability.md's order."""
    every = _every_alert(plan)
    if plan.spec.superlink.persistence.enabled:
        return every
    return [a for a in every if a["alert"] not in STATE_ALERTS]


def _every_alert(plan: FederationPlan) -> list[dict[str, Any]]:
    t = plan.spec.monitoring.prometheus_rules.thresholds
    n, ns, sel = plan.name, plan.namespace, _selector(plan)
    pod = f"{plan.names.superlink}-0"
    claim = f"{STATE_VOLUME}-{pod}"
    volume = f'namespace="{ns}",persistentvolumeclaim="{claim}"'
    ours = f'namespace="{ns}",pod=~"{n}-.*"'
    # What an exporter alert needs to be known: the Control API's series a successful poll; the files' series
    # (certificates, backups, served whatever the poll did) a successful scrape.
    polled, scraped = f"flower_federation_up{{{sel}}} == 1", f"up{{{sel}}} == 1"
    return [
        alert(plan, "FlowerExporterDown", f"up{{{sel}}} == 0 or absent(up{{{sel}}})", 10, "warning",
               f"Federation {n}: the exporter is not scraped", "Prometheus cannot scrape the federation exporter."),
        alert(plan, "FlowerSuperLinkDown",
               held(plan, "FlowerSuperLinkDown", f"flower_federation_up{{{sel}}} == 0", scraped), 5, "critical",
               f"Federation {n}: the SuperLink's Control API does not answer",
               "The exporter's polls of the Control API fail."),
        alert(plan, "FlowerSuperLinkNotReady",
               f'kube_pod_status_ready{{namespace="{ns}",pod="{pod}",condition="true"}} == 0', 10, "critical",
               f"Federation {n}: the SuperLink pod is not ready", "The SuperLink pod has been unready."),
        alert(plan, "FlowerSiteOffline",
               held(plan, "FlowerSiteOffline",
                    f'sum by (site) (flower_federation_supernodes{{{sel},status="online",site!="unknown"}}) == 0',
                    polled), t.site_offline_minutes, "warning",
               f"Federation {n}: site {{{{ $labels.site }}}} has no online SuperNode",
               f"No SuperNode of the site has been online for {t.site_offline_minutes} minutes."),
        alert(plan, "FlowerSiteFlapping",
               held(plan, "FlowerSiteFlapping",
                    f'sum by (site) (changes(flower_federation_supernodes{{{sel},status="online"}}[1h])) '
                    f">= {t.flapping_changes_per_hour}", polled), 0, "warning",
               f"Federation {n}: site {{{{ $labels.site }}}}'s SuperNodes are flapping",
               f"The site's online SuperNode count changed at least {t.flapping_changes_per_hour} times in an hour."),
        alert(plan, "FlowerRunFailed",
               held(plan, "FlowerRunFailed", f'delta(flower_federation_runs{{{sel},status="failed"}}[15m]) > 0',
                    polled), 0,
               "warning", f"Federation {n}: a run failed", "A run finished as failed in the last 15 minutes."),
        alert(plan, "FlowerRunTooLong",
               held(plan, "FlowerRunTooLong",
                    f"flower_federation_oldest_running_run_age_seconds{{{sel}}} > {t.run_running_hours * 3600}",
                    polled), 0,
               "warning", f"Federation {n}: a run is running for too long",
               f"A run has been running for more than {t.run_running_hours} hours."),
        alert(plan, "FlowerRegistrationJobFailed",
               f'kube_job_status_failed{{namespace="{ns}",job_name=~"{n}-node-(registration|revocation)-.*"}} > 0',
               0, "critical", f"Federation {n}: node registration Job {{{{ $labels.job_name }}}} failed",
               "The trusted SuperNode keys are not (all) registered or revoked."),
        alert(plan, "FlowerPodCrashLooping",
               f'max_over_time(kube_pod_container_status_waiting_reason{{{ours},reason="CrashLoopBackOff"}}[5m]) '
               ">= 1", 15, "warning", f"Federation {n}: {{{{ $labels.pod }}}}/{{{{ $labels.container }}}} is "
               "crash-looping", "A container of the federation keeps restarting."),
        alert(plan, "FlowerContainerOOMKilled",
               f'kube_pod_container_status_last_terminated_reason{{{ours},reason="OOMKilled"}} == 1 '
               f"and on (namespace, pod, container) increase(kube_pod_container_status_restarts_total{{{ours}}}[15m])"
               " > 0", 0, "warning", f"Federation {n}: {{{{ $labels.pod }}}}/{{{{ $labels.container }}}} was "
               "OOM-killed", "A container of the federation was killed for exceeding its memory limit."),
        alert(plan, "FlowerStateVolumeFilling",
               f"kubelet_volume_stats_available_bytes{{{volume}}} / kubelet_volume_stats_capacity_bytes{{{volume}}} "
               f"* 100 < {t.volume_free_percent}", 5, "warning", f"Federation {n}: the state volume is filling",
               f"Less than {t.volume_free_percent}% of the SuperLink's state volume is free."),
        alert(plan, "FlowerStateBackupStale",
               held(plan, "FlowerStateBackupStale",
                    f"flower_federation_state_backup_newest_age_seconds{{{sel}}} > {t.backup_max_age_days * DAY} "
                    f"or flower_federation_state_backups{{{sel}}} == 0", scraped), 0, "info",
               f"Federation {n}: no recent state backup", "Read before an upgrade: no state-guard backup is recent."),
        alert(plan, "FlowerCertificateExpiring",
               held(plan, "FlowerCertificateExpiring",
                    f"flower_federation_certificate_not_after_timestamp_seconds{{{sel}}} - time() "
                    f"< {t.certificate_warning_days * DAY}", scraped), 0, "warning",
               f"Federation {n}: a certificate expires within {t.certificate_warning_days} days",
               "{{ $labels.kind }} certificate {{ $labels.subject }} expires soon."),
        alert(plan, "FlowerCertificateExpiryCritical",
               held(plan, "FlowerCertificateExpiryCritical",
                    f"flower_federation_certificate_not_after_timestamp_seconds{{{sel}}} - time() "
                    f"< {t.certificate_critical_days * DAY}", scraped), 0, "critical",
               f"Federation {n}: a certificate expires within {t.certificate_critical_days} days",
               "{{ $labels.kind }} certificate {{ $labels.subject }} expires very soon."),
    ]  # fmt: skip


def service_monitor(plan: FederationPlan) -> Manifest:
    sm = plan.spec.monitoring.service_monitor
    return {
        "apiVersion": API_VERSION,
        "kind": "ServiceMonitor",
        "metadata": plan.meta(plan.names.federation_exporter, FEDERATION_EXPORTER, extra_labels=sm.labels),
        "spec": {
            "selector": {"matchLabels": selector_labels(plan.name, FEDERATION_EXPORTER)},
            "namespaceSelector": {"matchNames": [plan.namespace]},
            "endpoints": [{"port": PORT_NAME, "interval": f"{sm.interval_seconds}s", "path": "/metrics"}],
        },
    }


def prometheus_rule(plan: FederationPlan) -> Manifest:
    rules = plan.spec.monitoring.prometheus_rules
    return {
        "apiVersion": API_VERSION,
        "kind": "PrometheusRule",
        "metadata": plan.meta(plan.names.federation_alerts, FEDERATION_EXPORTER, extra_labels=rules.labels),
        "spec": {"groups": [{"name": f"flower-federation-{plan.name}", "rules": alerts(plan)}]},
    }


def objects(plan: FederationPlan) -> list[Manifest]:
    m = plan.spec.monitoring
    out = [service_monitor(plan)] if m.service_monitor.enabled else []
    return out + ([prometheus_rule(plan)] if m.prometheus_rules.enabled else [])
