"""The e2e harness's Prometheus pieces on their own, no root (the sites scenario runs them live:
tests/e2e/site_monitoring.py): the ServiceMonitor -> scrape config translation against the rendered hub (the
operator's endpoints role: the selected Service's named port, resolved to the SuperLink pod's container port),
accepted by `promtool check config` with the rendered rules; a field it does not translate refused (negative
control); the kubelet's in-place update of a ConfigMap volume (tests/e2e/harness/volumes.py), which a subPath
mount does not see; and the mount targets a harness process holds against another's cleanup."""

from __future__ import annotations

import copy
import os
import shutil
import subprocess
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import yaml

from tests.e2e.harness.volumes import refresh_config_maps
from tests.e2e.prometheus import TranslationError, scrape_configs
from tests.e2e.site_monitoring import MONITORING
from tests.support.manifests import get
from tests.support.render import core_objects
from tests.test_monitoring_exporter import with_monitoring

POD_IP = "10.20.30.40"


def hub_cluster(objects: list[dict[str, Any]]) -> SimpleNamespace:
    """What scrape_configs reads of a harness Cluster: its objects, and the SuperLink's pod as its StatefulSet
    makes it (the template's labels and spec, an address)."""
    sts = get(objects, "StatefulSet", "fl-superlink")
    template = sts["spec"]["template"]
    pod = SimpleNamespace(
        name="fl-superlink-0",
        namespace=sts["metadata"]["namespace"],
        labels=dict(template["metadata"]["labels"]),
        spec=template["spec"],
        ip=POD_IP,
    )
    return SimpleNamespace(objects={(o["kind"], o["metadata"]["name"]): o for o in objects}, pods={pod.name: pod})


def rendered() -> list[dict[str, Any]]:
    return core_objects(with_monitoring(**{k: v for k, v in MONITORING.items() if k != "enabled"}))


def test_the_service_monitor_becomes_the_operators_scrape_job_and_promtool_accepts_it(tmp_path: Path) -> None:
    objects = rendered()
    monitor = get(objects, "ServiceMonitor", "fl-federation-exporter")
    (job,) = scrape_configs(hub_cluster(objects), monitor)  # type: ignore[arg-type]
    port = MONITORING.get("port", 9464)
    labels = {"job": "fl-federation-exporter", "namespace": "flower-hub", "service": "fl-federation-exporter"}
    assert job == {
        "job_name": "serviceMonitor/flower-hub/fl-federation-exporter/0",
        "scrape_interval": "5s",
        "metrics_path": "/metrics",
        "scheme": "http",
        "static_configs": [
            {"targets": [f"{POD_IP}:{port}"], "labels": {**labels, "pod": "fl-superlink-0", "endpoint": "metrics"}}
        ],
    }
    rule = get(objects, "PrometheusRule", "fl-federation-alerts")
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump({"groups": rule["spec"]["groups"]}))
    config = {"global": {"evaluation_interval": "5s"}, "rule_files": ["rules.yaml"], "scrape_configs": [job]}
    (tmp_path / "prometheus.yml").write_text(yaml.safe_dump(config))
    tool = shutil.which("promtool")
    assert tool, "promtool is missing: `make e2e-tools` installs Debian's prometheus package"
    res = subprocess.run([tool, "check", "config", str(tmp_path / "prometheus.yml")], capture_output=True, text=True)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "SUCCESS: 1 rule files found" in res.stdout + res.stderr, res.stdout + res.stderr
    site_offline = next(r for g in rule["spec"]["groups"] for r in g["rules"] if r["alert"] == "FlowerSiteOffline")
    assert site_offline["for"] == "1m"  # the test setting siteOfflineMinutes: 1, rendered


@pytest.mark.parametrize(
    "change",
    [
        lambda m: m["spec"]["endpoints"][0].update(tlsConfig={"insecureSkipVerify": True}),
        lambda m: m["spec"].update(jobLabel="app"),
        lambda m: m["spec"]["selector"]["matchLabels"].update(missing="yes"),
    ],
    ids=["endpoint field", "spec field", "selects nothing"],
)
def test_what_the_translation_does_not_cover_fails_it(change: Any) -> None:
    objects = rendered()
    monitor = copy.deepcopy(get(objects, "ServiceMonitor", "fl-federation-exporter"))
    change(monitor)
    with pytest.raises(TranslationError):
        scrape_configs(hub_cluster(objects), monitor)  # type: ignore[arg-type]


def test_a_changed_config_map_reaches_a_mounted_volume_but_not_a_subpath_mount(tmp_path: Path) -> None:
    volume = tmp_path / "exporter"
    volume.mkdir()
    (volume / "key-labels").write_text("old\n")
    (volume / "key-labels").chmod(0o444)
    held = os.open(volume / "key-labels", os.O_RDONLY)  # what a subPath bind mount holds: the old inode
    spec = {"volumes": [{"name": "exporter", "configMap": {"name": "cm", "defaultMode": 0o444}}]}
    data = {"key-labels": "hospital-a ward ssh-ed25519 AAAA\n", "added": "x"}
    try:
        refresh_config_maps("p", spec, lambda kind, name: data if (kind, name) == ("ConfigMap", "cm") else None,
                            {"exporter": volume})  # fmt: skip
        assert (volume / "key-labels").read_text() == data["key-labels"]
        assert (volume / "added").read_text() == "x" and (volume / "added").stat().st_mode & 0o777 == 0o444
        assert os.read(held, 100) == b"old\n"
        assert sorted(p.name for p in volume.iterdir()) == ["added", "key-labels"]  # nothing staged left
    finally:
        os.close(held)
    before = (volume / "key-labels").stat().st_ino
    refresh_config_maps("p", spec, lambda kind, name: data, {"exporter": volume})
    assert (volume / "key-labels").stat().st_ino == before  # unchanged content: not rewritten
