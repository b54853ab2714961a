"""A site's own alerts (issue 34 part 3): a site stack with `monitoring` gets a PrometheusRule `N-site-alerts`
over kube-state-metrics alone (no hub data), which validates against the vendored Prometheus Operator CRD schema and
`promtool check rules`; each alert is unit-tested with `promtool test rules`, one series that fires it and one that
must not (another pool's pods whose name starts like this one's, another namespace, a healthy container). With it,
the SuperNode container keeps its log's tail (Flower's exit message) as its termination message; without it the
site renders as before. A site cannot have a ServiceMonitor or dashboard (no exporter there): refused by path."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from flower_federation.checks.model import MANDATORY
from flower_federation.checks.policies import run
from flower_federation.cli.offline import run_program
from flower_federation.config.errors import ConfigError
from tests.support.certificates import ca_pem
from tests.support.kube import termination_message
from tests.support.manifests import get, workload_container
from tests.support.render import core_objects, plan_of
from tests.support.schema import validate_all
from tests.test_monitoring_exporter import with_monitoring
from tests.test_monitoring_rules import expected, promtool, write_rules

SITE: dict[str, Any] = {
    "role": "site",
    "name": "hospital-a",
    "namespace": "flower",
    "version": "1.42.0",
    "nodeAuth": {"enabled": True},
    "supernodes": {
        "superlink": {"address": "fl.example.org", "port": 443, "certificate": {"pem": ca_pem()}},
        "pools": [{"name": "a", "replicas": 2}, {"name": "a-b", "replicas": 1}],
    },
}
ON = {"enabled": True, "prometheusRules": {"enabled": True}}
NS = 'namespace="flower"'
POD = f'{NS},pod="hospital-a-supernode-a-1"'
# A pod of the site that is no SuperNode's (pool a's SuperExec), its name close to one.
OTHER = f'{NS},pod="hospital-a-superexec-a-1"'
CASES: dict[str, tuple[dict[str, str], dict[str, str], int, dict[str, str]]] = {
    "FlowerSiteSuperNodeNotReady": (
        {f'kube_pod_status_ready{{{POD},condition="true"}}': "0x15"},
        {f'kube_pod_status_ready{{{POD},condition="true"}}': "0x5 1x10",
         f'kube_pod_status_ready{{{OTHER},condition="true"}}': "0x15",
         'kube_pod_status_ready{namespace="elsewhere",pod="hospital-a-supernode-a-1",condition="true"}': "0x15"},
        15, {"namespace": "flower", "pod": "hospital-a-supernode-a-1", "condition": "true"}),
    "FlowerSiteSuperNodeRestarting": (
        {f'kube_pod_container_status_restarts_total{{{POD},container="supernode"}}': "0 1 2 3 3 3"},
        {f'kube_pod_container_status_restarts_total{{{POD},container="supernode"}}': "0 1 2 2 2 2",
         f'kube_pod_container_status_restarts_total{{{OTHER},container="supernode"}}': "0 1 2 3 3 3"},
        5, {"namespace": "flower", "pod": "hospital-a-supernode-a-1", "container": "supernode"}),
    "FlowerSiteSuperNodeExiting": (
        {f'kube_pod_container_status_last_terminated_reason{{{POD},container="supernode",reason="Error"}}': "1x5",
         f'kube_pod_container_status_restarts_total{{{POD},container="supernode"}}': "0 0 1 1 1 1"},
        {f'kube_pod_container_status_last_terminated_reason{{{POD},container="supernode",reason="OOMKilled"}}': "1x5",
         f'kube_pod_container_status_restarts_total{{{POD},container="supernode"}}': "0 0 1 1 1 1"},
        5, {"namespace": "flower", "pod": "hospital-a-supernode-a-1", "container": "supernode", "reason": "Error"}),
}  # fmt: skip


def site(**monitoring: Any) -> dict[str, Any]:
    return {**copy.deepcopy(SITE), "monitoring": monitoring} if monitoring else copy.deepcopy(SITE)


def rule_object(raw: dict[str, Any]) -> dict[str, Any]:
    return get(core_objects(raw), "PrometheusRule", "hospital-a-site-alerts")


def rule_tests(rules_file: Path, rule: dict[str, Any], cases: dict[str, Any]) -> str:
    by_name = {r["alert"]: r for g in rule["spec"]["groups"] for r in g["rules"]}
    tests = [
        {
            "interval": "1m",
            "input_series": [{"series": s, "values": v} for s, v in series.items()],
            "alert_rule_test": [{"eval_time": f"{minutes}m", "alertname": alert, "exp_alerts": alerts}],
        }
        for alert, (fire, quiet, minutes, labels) in cases.items()
        for series, alerts in ((fire, [expected(by_name[alert], labels)]), (quiet, []))
    ]
    return yaml.safe_dump({"rule_files": [str(rules_file)], "evaluation_interval": "1m", "tests": tests})


def test_the_site_rule_validates_and_promtool_checks_it(tmp_path: Path) -> None:
    objects = core_objects(site(**ON))
    validate_all(objects)  # the rule, and the SuperNode pods with their termination message policy
    assert [v for v in run(objects) if v.level == MANDATORY] == []
    rule = get(objects, "PrometheusRule", "hospital-a-site-alerts")
    assert {r["alert"] for r in rule["spec"]["groups"][0]["rules"]} == set(CASES)
    checked = promtool("check", "rules", str(write_rules(tmp_path, rule["spec"])))
    assert checked.returncode == 0 and f"SUCCESS: {len(CASES)} rules found" in checked.stdout, checked


def test_every_site_alert_fires_on_its_series_and_not_on_the_other(tmp_path: Path) -> None:
    rule = rule_object(site(**ON))
    rules = write_rules(tmp_path, rule["spec"])
    (tmp_path / "tests.yaml").write_text(rule_tests(rules, rule, CASES))
    tested = promtool("test", "rules", str(tmp_path / "tests.yaml"))
    assert tested.returncode == 0, tested.stdout + tested.stderr
    # Negative control: the quiet series expected to fire fails.
    fire, quiet, minutes, labels = CASES["FlowerSiteSuperNodeExiting"]
    swapped = {"FlowerSiteSuperNodeExiting": (quiet, fire, minutes, labels)}
    (tmp_path / "tests.yaml").write_text(rule_tests(rules, rule, swapped))
    assert promtool("test", "rules", str(tmp_path / "tests.yaml")).returncode != 0


def test_pods_are_matched_per_mode_and_thresholds_are_settings() -> None:
    raw = site(enabled=True, prometheusRules={"enabled": True, "thresholds": {"supernodeRestartsPerHour": 5}})
    raw["mode"], raw["nodeAuth"] = "DaemonSet", {"enabled": False}
    for pool in raw["supernodes"]["pools"]:
        del pool["replicas"]
    rules = {r["alert"]: r["expr"] for r in rule_object(raw)["spec"]["groups"][0]["rules"]}
    pods = 'pod=~"(hospital-a-supernode-a|hospital-a-supernode-a-b)-[a-z0-9]{5}"'
    assert pods in rules["FlowerSiteSuperNodeNotReady"] and rules["FlowerSiteSuperNodeRestarting"].endswith(">= 5")


def test_the_supernode_keeps_flowers_exit_message_only_when_chosen() -> None:
    """The log tail as termination message is readable by whoever may `get` pods: an explicit opt-in."""
    tail = {"enabled": True, "prometheusRules": {"enabled": True, "supernodeLogTail": True}}
    chosen = workload_container(core_objects(site(**tail)), "StatefulSet", "hospital-a-supernode-a", "supernode")
    assert chosen["terminationMessagePolicy"] == "FallbackToLogsOnError"
    plain = core_objects(site())
    rule_only = core_objects(site(**ON))  # the negative control: the site's alerts alone keep the default
    assert "terminationMessagePolicy" not in workload_container(
        rule_only, "StatefulSet", "hospital-a-supernode-a", "supernode"
    )
    assert [o for o in rule_only if o["kind"] != "PrometheusRule"] == plain


@pytest.mark.parametrize(
    ("settings", "where"),
    [
        ({"enabled": True}, "federation.monitoring.enabled"),  # a site's monitoring without its alerts: nothing
        ({"prometheusRules": {"enabled": True, "supernodeLogTail": True}}, "federation.monitoring.prometheusRules"),
    ],
)
def test_a_site_switch_that_would_render_nothing_is_refused(settings: dict[str, Any], where: str) -> None:
    with pytest.raises(ConfigError) as caught:
        plan_of(site(**settings))
    assert caught.value.problems and all(p.path.startswith(where) for p in caught.value.problems), caught.value


def test_a_site_cannot_scrape_or_chart_what_it_does_not_run() -> None:
    raw = site(**ON, serviceMonitor={"enabled": True}, dashboard={"enabled": True})
    with pytest.raises(ConfigError) as caught:
        plan_of(raw)
    assert sorted(p.path for p in caught.value.problems) == [
        "federation.monitoring.dashboard.enabled",
        "federation.monitoring.serviceMonitor.enabled",
    ], caught.value.problems


def test_the_program_registers_the_site_rule_and_the_hub_dashboard() -> None:
    """Under Pulumi's mocks (the real program): the site's PrometheusRule as a custom resource; the hub's dashboard
    ConfigMap beside the exporter's."""
    site_run = run_program({"federation": site(**ON)}, "site")
    assert ("kubernetes:monitoring.coreos.com/v1:PrometheusRule", "hospital-a-site-alerts") in {
        (r.type, r.name) for r in site_run.registrations
    }
    hub_run = run_program({"federation": with_monitoring(dashboard={"enabled": True})}, "dev")
    assert ("kubernetes:core/v1:ConfigMap", "fl-federation-dashboard") in {
        (r.type, r.name) for r in hub_run.registrations
    }


def test_the_termination_message_is_the_logs_last_80_lines_and_2048_bytes() -> None:
    """The kubelet's rule the live registration test applies to Flower's real log (tests/support/kube.py): a line
    followed by 80 more, or by more than 2048 bytes, is not kept (the negative controls)."""
    refused = "[code: 2004] Failed to activate SuperNode.\n"
    assert refused in termination_message("starting\n" * 200 + refused + "For more information, visit: <url>\n")
    assert refused not in termination_message(refused + "x\n" * 80)
    assert refused not in termination_message(refused + "x" * 2048 + "\n")


def missing_runbooks(rules: list[dict[str, Any]], anchors: set[str]) -> list[str]:
    return [r["annotations"]["runbook"] for r in rules if r["annotations"]["runbook"].split("#")[1] not in anchors]


def test_every_alert_has_its_runbook_section() -> None:
    """The `runbook` annotation of every hub and site alert names a heading of docs/observability.md; a runbook
    without one is reported (the negative control)."""
    doc = (Path(__file__).resolve().parents[1] / "docs" / "observability.md").read_text()
    anchors = {line[4:].strip().lower() for line in doc.splitlines() if line.startswith("### ")}
    hub = get(
        core_objects(with_monitoring(prometheusRules={"enabled": True})), "PrometheusRule", "fl-federation-alerts"
    )
    rules = [r for rule in (hub, rule_object(site(**ON))) for g in rule["spec"]["groups"] for r in g["rules"]]
    assert len(rules) == 17 and missing_runbooks(rules, anchors) == []
    stray = {"annotations": {"runbook": "docs/observability.md#flowernosuchalert"}}
    assert missing_runbooks([stray], anchors) == ["docs/observability.md#flowernosuchalert"]
