"""The Grafana dashboard of `monitoring.dashboard` (issue 34 part 4): a ConfigMap that validates strictly, far under
the API server's data limit, labelled for the Grafana sidecar; its JSON deterministic (sorted keys, ids 1..n, a
stable uid per federation) and loaded back by Grafana's own model (grafana-foundation-sdk's types: a round trip);
every panel's PromQL parsed by `promtool check rules`, and every metric name it reads either one the real exporter
serves or a documented cAdvisor/kubelet one. Negative controls: a broken query fails promtool, a misspelled metric
fails the name check, a field Grafana's model does not know does not survive the round trip, a bad label key is
refused by its path. A stack without the dashboard never imports the SDK."""

from __future__ import annotations

import copy
import json
import re
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models.dashboard import Dashboard

from flower_federation.builders.dashboard_panels import panels
from flower_federation.config.errors import ConfigError
from flower_federation.kube.limits import DATA_MAX, data_size
from tests.support.manifests import get
from tests.support.render import core_objects, plan_of
from tests.support.schema import validate
from tests.test_monitoring_exporter import families, sample_exposition, with_monitoring
from tests.test_monitoring_rules import promtool, write_rules

NAME = "fl-federation-dashboard"
# Metrics of other exporters the panels read, each as documented: cAdvisor's container metrics (the kubelet's
# /metrics/cadvisor) and the kubelet's volume stats (kubernetes.io/docs/reference/instrumentation/metrics/).
DOCUMENTED = {
    "container_cpu_usage_seconds_total",
    "container_memory_working_set_bytes",
    "kubelet_volume_stats_used_bytes",
    "kubelet_volume_stats_capacity_bytes",
}
# A metric name in a selector (`name{`): every query here selects by labels. PromQL functions and aggregations are
# followed by `(`, never `{`.
SELECTED = re.compile(r"([a-zA-Z_:][a-zA-Z0-9_:]*)\{")


def dashboard_text(raw: dict[str, Any]) -> str:
    name = f"{raw['name']}-federation-dashboard"
    data = get(core_objects(raw), "ConfigMap", name)["data"]
    assert list(data) == [name + ".json"]
    return str(data[name + ".json"])


def round_trip(board: dict[str, Any]) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(json.dumps(Dashboard.from_json(board), cls=JSONEncoder))
    return loaded


def exporter_names(tmp_path: Path) -> set[str]:
    """The metric names the real exporter serves (its exposition, read by prometheus-client), histograms' series
    included."""
    text = sample_exposition(tmp_path)
    return {s.name for f in families(text).values() for s in f.samples}


def unknown_metrics(exprs: list[str], known: set[str]) -> list[str]:
    return sorted({name for e in exprs for name in SELECTED.findall(e)} - known)


def test_the_configmap_validates_is_labelled_for_the_sidecar_and_far_under_the_limit() -> None:
    objects = core_objects(with_monitoring(dashboard={"enabled": True}))
    cm = get(objects, "ConfigMap", NAME)
    validate(cm)
    assert cm["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert data_size(cm) < DATA_MAX // 32, data_size(cm)  # ~12 KB: it does not grow with sites or nodes
    custom = core_objects(
        with_monitoring(dashboard={"enabled": True, "labelKey": "grafana.com/dash", "labelValue": ""})
    )
    assert get(custom, "ConfigMap", NAME)["metadata"]["labels"]["grafana.com/dash"] == ""


def test_no_dashboard_without_its_switch_and_never_silently_without_monitoring() -> None:
    assert all(o["metadata"]["name"] != NAME for o in core_objects(with_monitoring()))
    raw = with_monitoring(dashboard={"enabled": True})
    raw["monitoring"]["enabled"] = False
    with pytest.raises(ConfigError) as caught:  # the switch alone would render nothing: refused by its path
        core_objects(raw)
    assert [p.path for p in caught.value.problems] == ["federation.monitoring.dashboard.enabled"]


def test_the_json_is_deterministic_with_stable_ids_and_a_uid_per_federation() -> None:
    raw = with_monitoring(dashboard={"enabled": True})
    text = dashboard_text(raw)
    assert text == dashboard_text(copy.deepcopy(raw))
    board = json.loads(text)
    assert text == json.dumps(board, sort_keys=True, indent=1) + "\n"
    assert [p["id"] for p in board["panels"]] == list(range(1, len(board["panels"]) + 1))
    other = {**copy.deepcopy(raw), "name": "fl2"}
    assert json.loads(dashboard_text(other))["uid"] != board["uid"] and len(board["uid"]) <= 40
    titles = [p["title"] for p in board["panels"]]
    assert {"Online SuperNodes by site", "Runs by status", "SuperLink pod CPU", "State volume"} <= set(titles)


def test_grafanas_model_loads_the_dashboard_and_drops_what_it_does_not_know() -> None:
    board = json.loads(dashboard_text(with_monitoring(dashboard={"enabled": True})))
    assert round_trip(board) == board
    stray = copy.deepcopy(board)
    stray["panels"][0]["gridPoz"] = {"h": 1}  # negative control: no such field in Grafana's model
    assert round_trip(stray) != stray


def test_every_query_parses_and_reads_only_known_metrics(tmp_path: Path) -> None:
    plan = plan_of(with_monitoring(dashboard={"enabled": True}, prometheusRules={"enabled": True}))
    board = json.loads(dashboard_text(with_monitoring(dashboard={"enabled": True})))
    exprs = [t["expr"] for p in board["panels"] for t in p["targets"]]
    assert exprs == [q.expr for p in panels(plan) for q in p.queries]
    group = {"name": "dashboard", "rules": [{"record": f"dashboard:query_{i}", "expr": e} for i, e in enumerate(exprs)]}
    checked = promtool("check", "rules", str(write_rules(tmp_path, {"groups": [group]})))
    assert checked.returncode == 0 and f"SUCCESS: {len(exprs)} rules found" in checked.stdout, checked
    known = exporter_names(tmp_path) | DOCUMENTED
    assert unknown_metrics(exprs, known) == []
    # Negative controls: a broken query, a misspelled metric.
    group["rules"][0]["expr"] = "sum by (site (up)"
    assert promtool("check", "rules", str(write_rules(tmp_path, {"groups": [group]}))).returncode != 0
    assert unknown_metrics(['flower_federation_supernode{job="x"}'], known) == ["flower_federation_supernode"]


def test_a_bad_sidecar_label_is_refused_by_its_path_quoting_it() -> None:
    raw = with_monitoring(dashboard={"enabled": True, "labelKey": "grafana dashboard", "labelValue": "yes!"})
    with pytest.raises(ConfigError) as caught:
        plan_of(raw)
    found = {p.path: p.message for p in caught.value.problems}
    assert sorted(found) == ["federation.monitoring.dashboard.labelKey", "federation.monitoring.dashboard.labelValue"]
    assert "'grafana dashboard'" in found["federation.monitoring.dashboard.labelKey"]
    assert "'yes!'" in found["federation.monitoring.dashboard.labelValue"]
    with pytest.raises(ConfigError, match="a label flower-federation sets itself"):
        plan_of(with_monitoring(dashboard={"enabled": True, "labelKey": "app.kubernetes.io/name"}))


def test_a_stack_without_the_dashboard_never_imports_the_sdk(monkeypatch: pytest.MonkeyPatch) -> None:
    """With the SDK made unimportable (every module of it None in sys.modules: an import of it raises), the hub with
    monitoring on but no dashboard renders; with the dashboard the render needs it (the negative control)."""
    for module in [m for m in sys.modules if m.split(".")[0] == "grafana_foundation_sdk"] + ["grafana_foundation_sdk"]:
        monkeypatch.setitem(sys.modules, module, None)
    core_objects(with_monitoring(serviceMonitor={"enabled": True}, prometheusRules={"enabled": True}))
    with pytest.raises(ImportError):
        core_objects(with_monitoring(dashboard={"enabled": True}))


def test_the_dashboards_json_is_yaml_safe_in_the_configmap() -> None:
    """The ConfigMap as YAML (what Pulumi and kubectl write) carries the JSON byte for byte."""
    cm = get(core_objects(with_monitoring(dashboard={"enabled": True})), "ConfigMap", NAME)
    assert yaml.safe_load(yaml.safe_dump(cm)) == cm


def series_of(text: str, scrape: dict[str, str]) -> list[dict[str, str]]:
    """An exposition's samples as promtool input series, with the labels the scrape adds (job, namespace)."""
    out = []
    for family in families(text).values():
        for s in family.samples:
            labels = {**s.labels, **scrape}
            body = ",".join(f"{k}={json.dumps(v)}" for k, v in sorted(labels.items()))
            out.append({"series": f"{s.name}{{{body}}}", "values": f"{s.value}x5"})
    return out


def test_the_panels_queries_compute_what_they_claim_on_the_real_exposition(tmp_path: Path) -> None:
    """promtool evaluates the panels' queries over the real exporter's exposition (lab-c online, hospital-a offline,
    a stranger's key online; a run of 1,000 s and one of 100 s finished): a wrong expectation fails (the negative
    control)."""
    by_title = {p.title: p for p in panels(plan_of(with_monitoring(dashboard={"enabled": True})))}
    scrape = {"job": "fl-federation-exporter", "namespace": "flower-hub"}
    sites_online, sites_known = (q.expr for q in by_title["Sites online"].queries)
    per_site = by_title["Online SuperNodes by site"].queries[0].expr
    median = by_title["Run duration (finished runs)"].queries[0].expr
    checks = [
        (sites_online, [{"labels": "{}", "value": 1}]),  # lab-c; the stranger's key is no site
        (sites_known, [{"labels": "{}", "value": 2}]),
        (per_site, [{"labels": f'{{site="{s}"}}', "value": v} for s, v in (("hospital-a", 0), ("lab-c", 1),
                                                                             ("unknown", 1))]),
        (median, [{"labels": "{}", "value": 300}]),  # the 100 s run's bucket (60, 300], interpolated to its top
    ]  # fmt: skip

    series = series_of(sample_exposition(tmp_path), scrape)

    def evaluate(cases: list[tuple[str, list[dict[str, Any]]]]) -> int:
        test = {
            "interval": "1m",
            "input_series": series,
            "promql_expr_test": [{"expr": e, "eval_time": "4m", "exp_samples": exp} for e, exp in cases],
        }
        rules = write_rules(tmp_path, {"groups": []})
        (tmp_path / "tests.yaml").write_text(yaml.safe_dump({"rule_files": [str(rules)], "tests": [test]}))
        run = promtool("test", "rules", str(tmp_path / "tests.yaml"))
        assert run.returncode == 0 or "FAILED" in run.stdout + run.stderr, run
        return run.returncode

    assert evaluate(checks) == 0
    assert evaluate([(sites_online, [{"labels": "{}", "value": 2}])]) != 0
