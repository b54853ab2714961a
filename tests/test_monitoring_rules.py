"""The Prometheus Operator objects of `monitoring` (issue 34): the ServiceMonitor and PrometheusRule validate
strictly against the vendored Prometheus Operator v0.93.0 CRD schemas (tests/support/prometheus_operator/), every
rule passes `promtool check rules`, and every alert is unit-tested with `promtool test rules`: one series that
fires it (with its exact labels and annotations) and one that must not. Negative controls: an unknown field is
refused by the schema, a broken expression by `promtool check rules`, a wrong expectation by `promtool test
rules`; and a test is required for every alert rendered."""

from __future__ import annotations

import copy
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any
from unittest.mock import ANY

import kubernetes_validate
import pytest
import yaml

from flower_federation.builders import monitoring, monitoring_rules
from flower_federation.cli.offline import run_program
from tests.support.manifests import get
from tests.support.render import core_objects
from tests.support.schema import validate, validate_all
from tests.support.validation import problems
from tests.test_monitoring_exporter import with_monitoring

E = 'job="fl-federation-exporter",namespace="flower-hub"'
OTHER = 'job="fl-federation-exporter",namespace="elsewhere"'
NS = 'namespace="flower-hub"'
DAY = 86400
# alert -> (series that fire it, series that must not, minutes after the start to evaluate at, the alert's labels
# besides severity and federation). Defaults: siteOfflineMinutes 10, flappingChangesPerHour 6, runRunningHours 24,
# volumeFreePercent 15, backupMaxAgeDays 30, certificate warning 21 days, critical 7.
CASES: dict[str, tuple[dict[str, str], dict[str, str], int, dict[str, str]]] = {
    "FlowerExporterDown": ({f"up{{{E}}}": "0x15"}, {f"up{{{E}}}": "1x15"}, 15, {"job": "fl-federation-exporter",
                           "namespace": "flower-hub"}),
    "FlowerSuperLinkDown": ({f"flower_federation_up{{{E}}}": "0x10"}, {f"flower_federation_up{{{OTHER}}}": "0x10"},
                            10, {"job": "fl-federation-exporter", "namespace": "flower-hub"}),
    "FlowerSuperLinkNotReady": (
        {f'kube_pod_status_ready{{{NS},pod="fl-superlink-0",condition="true"}}': "0x15"},
        {f'kube_pod_status_ready{{{NS},pod="fl-supernode-a1-0",condition="true"}}': "0x15"},
        15, {"namespace": "flower-hub", "pod": "fl-superlink-0", "condition": "true"}),
    "FlowerSiteOffline": (
        {f'flower_federation_supernodes{{{E},site="lab-c",pool="a1",status="online"}}': "0x15"},
        {f'flower_federation_supernodes{{{E},site="lab-c",pool="a1",status="online"}}': "0x5 1x10",
         f'flower_federation_supernodes{{{E},site="unknown",pool="unknown",status="online"}}': "0x15"},
        15, {"site": "lab-c"}),
    "FlowerSiteFlapping": (
        {f'flower_federation_supernodes{{{E},site="lab-c",pool="a1",status="online"}}': "1 0 1 0 1 0 1 0 1 0"},
        {f'flower_federation_supernodes{{{E},site="lab-c",pool="a1",status="online"}}': "1 0 1 0 1 1 1 1 1 1"},
        9, {"site": "lab-c"}),
    "FlowerRunFailed": ({f'flower_federation_runs{{{E},status="failed"}}': "0 0 0 1 1 1"},
                        {f'flower_federation_runs{{{E},status="completed"}}': "0 0 0 1 1 1"},
                        5, {"job": "fl-federation-exporter", "namespace": "flower-hub", "status": "failed"}),
    "FlowerRunTooLong": ({f"flower_federation_oldest_running_run_age_seconds{{{E}}}": f"{25 * 3600}x5"},
                         {f"flower_federation_oldest_running_run_age_seconds{{{E}}}": f"{23 * 3600}x5"},
                         5, {"job": "fl-federation-exporter", "namespace": "flower-hub"}),
    "FlowerRegistrationJobFailed": (
        {f'kube_job_status_failed{{{NS},job_name="fl-node-registration-0123456789"}}': "1x5"},
        {f'kube_job_status_failed{{{NS},job_name="fl-node-registration-0123456789"}}': "0x5",
         f'kube_job_status_failed{{{NS},job_name="backup-0123456789"}}': "1x5"},
        5, {"namespace": "flower-hub", "job_name": "fl-node-registration-0123456789"}),
    "FlowerPodCrashLooping": (
        {f'kube_pod_container_status_waiting_reason{{{NS},pod="fl-superlink-0",container="superlink",'
         'reason="CrashLoopBackOff"}': "1x20"},
        {f'kube_pod_container_status_waiting_reason{{{NS},pod="fl-superlink-0",container="superlink",'
         'reason="ContainerCreating"}': "1x20"},
        20, {"namespace": "flower-hub", "pod": "fl-superlink-0", "container": "superlink",
             "reason": "CrashLoopBackOff"}),
    "FlowerContainerOOMKilled": (
        {f'kube_pod_container_status_last_terminated_reason{{{NS},pod="fl-superlink-0",container="superlink",'
         'reason="OOMKilled"}': "1x5",
         f'kube_pod_container_status_restarts_total{{{NS},pod="fl-superlink-0",container="superlink"}}': "0 0 1 1 1 1"},
        {f'kube_pod_container_status_last_terminated_reason{{{NS},pod="fl-superlink-0",container="superlink",'
         'reason="Error"}': "1x5",
         f'kube_pod_container_status_restarts_total{{{NS},pod="fl-superlink-0",container="superlink"}}': "0 0 1 1 1 1"},
        5, {"namespace": "flower-hub", "pod": "fl-superlink-0", "container": "superlink", "reason": "OOMKilled"}),
    "FlowerStateVolumeFilling": (
        {f'kubelet_volume_stats_available_bytes{{{NS},persistentvolumeclaim="state-fl-superlink-0"}}': "10x10",
         f'kubelet_volume_stats_capacity_bytes{{{NS},persistentvolumeclaim="state-fl-superlink-0"}}': "100x10"},
        {f'kubelet_volume_stats_available_bytes{{{NS},persistentvolumeclaim="state-fl-superlink-0"}}': "20x10",
         f'kubelet_volume_stats_capacity_bytes{{{NS},persistentvolumeclaim="state-fl-superlink-0"}}': "100x10"},
        10, {"namespace": "flower-hub", "persistentvolumeclaim": "state-fl-superlink-0"}),
    "FlowerStateBackupStale": ({f"flower_federation_state_backups{{{E}}}": "0x5"},
                               {f"flower_federation_state_backups{{{E}}}": "1x5",
                                f"flower_federation_state_backup_newest_age_seconds{{{E}}}": f"{29 * DAY}x5"},
                               5, {"job": "fl-federation-exporter", "namespace": "flower-hub"}),
    "FlowerCertificateExpiring": (
        {f'flower_federation_certificate_not_after_timestamp_seconds{{{E},kind="ca",subject="CN=x"}}': f"{10 * DAY}x5"},
        {f'flower_federation_certificate_not_after_timestamp_seconds{{{E},kind="ca",subject="CN=x"}}': f"{30 * DAY}x5"},
        5, {"job": "fl-federation-exporter", "namespace": "flower-hub", "kind": "ca", "subject": "CN=x"}),
    "FlowerCertificateExpiryCritical": (
        {f'flower_federation_certificate_not_after_timestamp_seconds{{{E},kind="server",subject="CN=x"}}':
         f"{5 * DAY}x5"},
        {f'flower_federation_certificate_not_after_timestamp_seconds{{{E},kind="server",subject="CN=x"}}':
         f"{10 * DAY}x5"},
        5, {"job": "fl-federation-exporter", "namespace": "flower-hub", "kind": "server", "subject": "CN=x"}),
}  # fmt: skip
ENABLED = {"serviceMonitor": {"enabled": True}, "prometheusRules": {"enabled": True}}


def promtool(*args: str) -> subprocess.CompletedProcess[str]:
    tool = shutil.which("promtool")
    assert tool, "promtool is missing: `make e2e-tools` installs Debian's prometheus package"
    return subprocess.run([tool, *args], capture_output=True, text=True, timeout=120)


def rendered() -> list[dict[str, Any]]:
    return core_objects(with_monitoring(**ENABLED))


def rule_object() -> dict[str, Any]:
    return get(rendered(), "PrometheusRule", "fl-federation-alerts")


def alert_rules() -> dict[str, dict[str, Any]]:
    return {r["alert"]: r for group in rule_object()["spec"]["groups"] for r in group["rules"]}


def expected(rule: dict[str, Any], labels: dict[str, str]) -> dict[str, Any]:
    """The alert as Prometheus sends it: the series' labels and the rule's, its annotations' templates filled."""

    def fill(text: str) -> str:
        return re.sub(r"\{\{ \$labels\.(\w+) \}\}", lambda m: labels[m.group(1)], text)

    return {
        "exp_labels": {**labels, **rule["labels"]},
        "exp_annotations": {k: fill(v) for k, v in rule["annotations"].items()},
    }


def rule_tests(rules_file: Path, cases: dict[str, Any]) -> str:
    rules = alert_rules()
    tests = []
    for alert, (fire, quiet, minutes, labels) in cases.items():
        for series, alerts in ((fire, [expected(rules[alert], labels)]), (quiet, [])):
            tests.append(
                {
                    "interval": "1m",
                    "input_series": [{"series": s, "values": v} for s, v in series.items()],
                    "alert_rule_test": [{"eval_time": f"{minutes}m", "alertname": alert, "exp_alerts": alerts}],
                }
            )
    return yaml.safe_dump({"rule_files": [str(rules_file)], "evaluation_interval": "1m", "tests": tests})


def write_rules(tmp_path: Path, spec: dict[str, Any]) -> Path:
    path = tmp_path / "rules.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


def test_the_operator_objects_validate_strictly_and_a_stray_field_is_refused() -> None:
    objects = rendered()
    validate_all(objects)
    monitor = copy.deepcopy(get(objects, "ServiceMonitor", "fl-federation-exporter"))
    assert monitor["spec"]["endpoints"][0]["port"] == monitoring.PORT_NAME == monitoring_rules.PORT_NAME
    monitor["spec"]["endpoints"][0]["intervall"] = "30s"
    with pytest.raises(kubernetes_validate.ValidationError, match="intervall"):
        validate(monitor)
    bad_rule = copy.deepcopy(rule_object())
    bad_rule["spec"]["groups"][0]["rules"][0]["for"] = 10  # a duration, never a number
    with pytest.raises(kubernetes_validate.ValidationError):
        validate(bad_rule)


def test_without_the_switches_no_operator_objects() -> None:
    kinds = {o["kind"] for o in core_objects(with_monitoring())}
    assert not kinds & {"ServiceMonitor", "PrometheusRule"}


def test_promtool_checks_every_rule_and_refuses_a_broken_one(tmp_path: Path) -> None:
    spec = rule_object()["spec"]
    checked = promtool("check", "rules", str(write_rules(tmp_path, spec)))
    assert checked.returncode == 0 and f"SUCCESS: {len(alert_rules())} rules found" in checked.stdout, checked
    broken = copy.deepcopy(spec)
    broken["groups"][0]["rules"][0]["expr"] = "sum by (site (up)"
    assert promtool("check", "rules", str(write_rules(tmp_path, broken))).returncode != 0


def test_every_alert_fires_on_its_series_and_not_on_the_other(tmp_path: Path) -> None:
    assert set(CASES) == set(alert_rules()), "every alert rendered needs a case here, and no case a missing alert"
    rules = write_rules(tmp_path, rule_object()["spec"])
    (tmp_path / "tests.yaml").write_text(rule_tests(rules, CASES))
    tested = promtool("test", "rules", str(tmp_path / "tests.yaml"))
    assert tested.returncode == 0, tested.stdout + tested.stderr


def test_promtool_test_rules_fails_on_a_wrong_expectation(tmp_path: Path) -> None:
    """Negative control: the site-offline case with the healthy site's series expected to fire fails."""
    rules = write_rules(tmp_path, rule_object()["spec"])
    fire, quiet, minutes, labels = CASES["FlowerSiteOffline"]
    (tmp_path / "tests.yaml").write_text(rule_tests(rules, {"FlowerSiteOffline": (quiet, fire, minutes, labels)}))
    assert promtool("test", "rules", str(tmp_path / "tests.yaml")).returncode != 0


def test_thresholds_are_settings_and_state_alerts_need_a_state_volume() -> None:
    raw = with_monitoring(prometheusRules={"enabled": True, "thresholds": {"siteOfflineMinutes": 3}})
    rules = {
        r["alert"]: r
        for r in get(core_objects(raw), "PrometheusRule", "fl-federation-alerts")["spec"]["groups"][0]["rules"]
    }
    assert rules["FlowerSiteOffline"]["for"] == "3m"
    raw["superlink"] = {**raw["superlink"], "persistence": {"enabled": False}}
    names = {
        r["alert"]
        for r in get(core_objects(raw), "PrometheusRule", "fl-federation-alerts")["spec"]["groups"][0]["rules"]
    }
    assert names == set(CASES) - set(monitoring_rules.STATE_ALERTS)


@pytest.mark.parametrize(
    ("thresholds", "said"),
    [
        ({"certificateCriticalDays": 30}, "30 must be below certificateWarningDays (21)"),
        ({"certificateWarningDays": 5}, "7 must be below certificateWarningDays (5)"),
        ({"certificateWarningDays": 14, "certificateCriticalDays": 14}, "14 must be below certificateWarningDays (14)"),
    ],
)
def test_the_critical_certificate_alert_must_come_after_the_warning(thresholds: dict[str, int], said: str) -> None:
    found = problems(with_monitoring(prometheusRules={"enabled": True, "thresholds": thresholds}))
    assert found == [("federation.monitoring.prometheusRules.thresholds.certificateCriticalDays", ANY)], found
    assert said in found[0][1]


def test_certificate_days_in_order_are_accepted() -> None:  # the negative control of the test above
    raw = with_monitoring(
        prometheusRules={"enabled": True, "thresholds": {"certificateWarningDays": 30, "certificateCriticalDays": 29}}
    )
    assert get(core_objects(raw), "PrometheusRule", "fl-federation-alerts")


def test_the_program_registers_the_operator_objects_as_custom_resources() -> None:
    """Under Pulumi's mocks (the real program): the ServiceMonitor and PrometheusRule are registered as
    `kubernetes:monitoring.coreos.com/v1:*` custom resources, beside the exporter's ConfigMap and Service."""
    run = run_program({"federation": with_monitoring(**ENABLED)}, "dev")
    types = {(r.type, r.name) for r in run.registrations}
    assert ("kubernetes:monitoring.coreos.com/v1:ServiceMonitor", "fl-federation-exporter") in types
    assert ("kubernetes:monitoring.coreos.com/v1:PrometheusRule", "fl-federation-alerts") in types
    assert ("kubernetes:core/v1:Service", "fl-federation-exporter") in types


@pytest.mark.parametrize("section", ["serviceMonitor", "prometheusRules", "dashboard"])
def test_a_switch_without_monitoring_enabled_is_refused_not_ignored(section: str) -> None:
    raw = with_monitoring(**{section: {"enabled": True}})
    raw["monitoring"]["enabled"] = False
    assert problems(raw) == [(f"federation.monitoring.{section}.enabled", ANY)]
    raw["monitoring"]["enabled"] = True  # the negative control: with monitoring on, it renders
    assert not problems_or_none(raw)


def test_a_selector_label_the_stacks_labels_would_override_is_refused() -> None:
    raw = with_monitoring(
        prometheusRules={"enabled": True, "labels": {"release": "prom"}},
        serviceMonitor={"enabled": True, "labels": {"release": "prom"}},
        dashboard={"enabled": True},
    )
    raw["labels"] = {"release": "other", "grafana_dashboard": "0"}
    assert sorted(path for path, _ in problems(raw)) == [
        "federation.monitoring.dashboard.labelKey",
        "federation.monitoring.prometheusRules.labels.release",
        "federation.monitoring.serviceMonitor.labels.release",
    ]
    raw["labels"] = {"release": "prom", "grafana_dashboard": "1"}  # the negative control: the same values agree
    objects = core_objects(raw)
    assert get(objects, "ConfigMap", "fl-federation-dashboard")["metadata"]["labels"]["grafana_dashboard"] == "1"


def problems_or_none(raw: dict[str, Any]) -> list[tuple[str, str]]:
    from flower_federation.config.errors import ConfigError
    from tests.support.render import plan_of

    try:
        plan_of(raw)
    except ConfigError as e:
        return [(p.path, p.message) for p in e.problems]
    return []


# Alerts over the exporter's series, held firing while those are unknown (monitoring_rules.held), and the series
# that say they are known: a successful poll (the Control API's series) or a successful scrape (the files').
POLLED, SCRAPED = f"flower_federation_up{{{E}}}", f"up{{{E}}}"
HELD = {
    "FlowerSuperLinkDown": SCRAPED,
    "FlowerSiteOffline": POLLED,
    "FlowerSiteFlapping": POLLED,
    "FlowerRunFailed": POLLED,
    "FlowerRunTooLong": POLLED,
    "FlowerStateBackupStale": SCRAPED,
    "FlowerCertificateExpiring": SCRAPED,
    "FlowerCertificateExpiryCritical": SCRAPED,
}
GONE = 70  # minutes the series stay missing: past every window the rules look back over (flapping's 1h)


def samples(values: str) -> int:
    """How many samples a promtool series notation gives (`axN` is N+1, a plain value 1)."""
    return sum(int(v.split("x")[1]) + 1 if "x" in v else 1 for v in values.split())


def vanishing(alert: str) -> tuple[dict[str, str], dict[str, str], int, dict[str, str]]:
    """The alert's firing case, then every series gone (the exporter down): evaluated well past the lookback."""
    fire, _, minutes, labels = CASES[alert]
    last = max(samples(v) for v in fire.values())
    series = {s: f"{v} _x{GONE}" for s, v in fire.items()}
    series.setdefault(HELD[alert], f"1x{last - 1} _x{GONE}")
    return series, {}, last - 1 + GONE, labels


def unheld(spec: dict[str, Any]) -> dict[str, Any]:
    """The rules as they were before the hold: each held expression's own part alone."""
    old = copy.deepcopy(spec)
    for rule in old["groups"][0]["rules"]:
        rule["expr"] = re.sub(r"^\((.*)\) or \(max without .*$", r"\1", rule["expr"], flags=re.S)
    return old


def test_an_alert_over_exporter_series_stays_firing_while_they_are_unknown(tmp_path: Path) -> None:
    """Each held alert fires on its case, then every series vanishes (the exporter not scraped, or its polls
    failing) for 70 minutes: it is still firing (an unknown state is never reported as healthy). Negative
    control, the case that failed before: the same series against the rules without the hold resolve, each."""
    assert set(HELD) == {a for a, r in alert_rules().items() if "flower_federation_" in r["expr"]}
    cases = {alert: vanishing(alert) for alert in HELD}
    spec = rule_object()["spec"]
    (tmp_path / "tests.yaml").write_text(rule_tests(write_rules(tmp_path, spec), cases))
    tested = promtool("test", "rules", str(tmp_path / "tests.yaml"))
    assert tested.returncode == 0, tested.stdout + tested.stderr
    (tmp_path / "old.yaml").write_text(rule_tests(write_rules(tmp_path, unheld(spec)), cases))
    old = promtool("test", "rules", str(tmp_path / "old.yaml"))
    assert old.returncode != 0
    assert [a for a in HELD if f"alertname: {a}," not in old.stdout + old.stderr] == [], old.stdout + old.stderr


def test_a_site_offline_then_unknown_resolves_only_once_seen_online(tmp_path: Path) -> None:
    """FlowerSiteOffline through an exporter outage: lab-c offline 15 minutes (firing), its series and the poll's
    `up` gone 10 minutes (still firing), then known again: still offline, it keeps firing; back online, it
    resolves. A site online when the exporter went is not reported offline while unknown (hospital-a)."""
    site = 'flower_federation_supernodes{%s,site="%s",pool="a1",status="online"}'
    rules = alert_rules()
    firing = [expected(rules["FlowerSiteOffline"], {"site": "lab-c"})]
    series = {
        site % (E, "lab-c"): "0x15 _x10 0x5 1x10",
        site % (E, "hospital-a"): "1x15 _x30",
        POLLED: "1x15 _x10 1x15",
    }
    tests = [
        {
            "interval": "1m",
            "input_series": [{"series": s, "values": v} for s, v in series.items()],
            "alert_rule_test": [
                {"eval_time": f"{minutes}m", "alertname": "FlowerSiteOffline", "exp_alerts": alerts}
                for minutes, alerts in ((14, firing), (24, firing), (30, firing), (33, []), (40, []))
            ],
        }
    ]
    path = write_rules(tmp_path, rule_object()["spec"])
    (tmp_path / "tests.yaml").write_text(yaml.safe_dump({"rule_files": [str(path)], "tests": tests}))
    tested = promtool("test", "rules", str(tmp_path / "tests.yaml"))
    assert tested.returncode == 0, tested.stdout + tested.stderr
