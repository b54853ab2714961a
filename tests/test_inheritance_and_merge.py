"""Probe settings inherit key by key (as the Helm chart's do), and podTemplate patches merge
lists by their Kubernetes merge keys (as a strategic merge patch would). Before, a
component's `probes` replaced the top level's whole, and patch lists merged by `name`
only (a volumeMount at one of our paths was added twice, a volume of the same name too)."""

from __future__ import annotations

from typing import Any

import pytest

from flower_federation.config.errors import ConfigError
from flower_federation.plan import load_plan
from tests.support.render import core_objects
from tests.support.stacks import base


def _container(objects: list[dict[str, Any]], workload: str, name: str) -> dict[str, Any]:
    w = next(o for o in objects if o["kind"] in ("StatefulSet", "DaemonSet") and o["metadata"]["name"] == workload)
    return next(c for c in w["spec"]["template"]["spec"]["containers"] if c["name"] == name)


def test_a_component_probe_key_overrides_only_itself() -> None:
    raw = base(
        probes={"readinessProbe": {"failureThreshold": 6}, "livenessProbe": {"timeoutSeconds": 4}},
        superlink={"probes": {"livenessProbe": {"periodSeconds": 30}}},
    )
    superlink = _container(core_objects(raw), "sec-superlink", "superlink")
    assert superlink["livenessProbe"]["periodSeconds"] == 30  # the SuperLink's own key
    assert superlink["livenessProbe"]["timeoutSeconds"] == 4  # the top level's, same probe
    assert superlink["readinessProbe"]["failureThreshold"] == 6  # the top level's, other probe
    assert superlink["startupProbe"]["failureThreshold"] == 24  # the model's default
    supernode = _container(core_objects(raw), "sec-supernode-alpha", "supernode")
    assert supernode["livenessProbe"]["periodSeconds"] == 10  # the SuperLink's key is its own
    assert supernode["readinessProbe"]["failureThreshold"] == 6


def test_a_partial_startup_probe_keeps_the_model_defaults_of_its_other_keys() -> None:
    plan = load_plan(base(probes={"startupProbe": {"periodSeconds": 3}}), "dev")
    assert plan.superlink_probes.startup_probe.period_seconds == 3
    assert plan.superlink_probes.startup_probe.failure_threshold == 24  # not ProbeSettings' 3


def test_disabling_a_probe_on_one_side_keeps_it_on_the_other() -> None:
    raw = base(supernodes={"probes": {"livenessProbe": {"enabled": False}}})
    objects = core_objects(raw)
    assert "livenessProbe" not in _container(objects, "sec-supernode-alpha", "supernode")
    assert "livenessProbe" in _container(objects, "sec-superlink", "superlink")


POD_PATCH = {
    "spec": {
        "volumes": [{"name": "data", "emptyDir": {"medium": "Memory"}}, {"name": "extra", "emptyDir": {}}],
        "containers": [
            {
                "name": "supernode",
                # "data" mounted elsewhere too: a distributed pod leaves out a volume none of its containers uses.
                "volumeMounts": [
                    {"name": "extra", "mountPath": "/data", "readOnly": True},
                    {"name": "data", "mountPath": "/cache"},
                ],
                "ports": [{"containerPort": 9094, "name": "appio", "protocol": "TCP"}],
                "env": [{"name": "MODE", "value": "patched"}],
            }
        ],
    }
}


@pytest.fixture
def patched() -> dict[str, Any]:
    pool = {
        "name": "p",
        "replicas": 1,
        "volumes": [{"name": "data", "emptyDir": {}}],
        "volumeMounts": [{"name": "data", "mountPath": "/data"}],
        "env": [{"name": "MODE", "value": "config"}],
        "podTemplate": POD_PATCH,
    }
    raw = base(isolation="process", placement="distributed", supernodes={"pools": [pool]})
    raw["supernodes"]["pools"][0]["images"] = {"superexecClientApp": "flwr/superexec:1.41.0"}
    objects = core_objects(raw)
    return next(o for o in objects if o["kind"] == "StatefulSet" and o["metadata"]["name"] == "sec-supernode-p")


def test_volume_mounts_merge_by_mount_path(patched: dict[str, Any]) -> None:
    container = next(c for c in patched["spec"]["template"]["spec"]["containers"] if c["name"] == "supernode")
    at_data = [m for m in container["volumeMounts"] if m["mountPath"] == "/data"]
    assert at_data == [{"name": "extra", "mountPath": "/data", "readOnly": True}]


def test_ports_merge_by_container_port_and_env_by_name(patched: dict[str, Any]) -> None:
    container = next(c for c in patched["spec"]["template"]["spec"]["containers"] if c["name"] == "supernode")
    assert [p for p in container["ports"] if p["containerPort"] == 9094] == [
        {"containerPort": 9094, "name": "appio", "protocol": "TCP"}
    ]
    assert [e for e in container["env"] if e["name"] == "MODE"] == [{"name": "MODE", "value": "patched"}]


def test_volumes_merge_by_name(patched: dict[str, Any]) -> None:
    volumes = patched["spec"]["template"]["spec"]["volumes"]
    names = [v["name"] for v in volumes]
    assert len(names) == len(set(names))
    assert next(v for v in volumes if v["name"] == "data") == {"name": "data", "emptyDir": {"medium": "Memory"}}
    assert "extra" in names


def test_a_patch_mount_at_one_of_our_paths_is_refused() -> None:
    patch = {
        "spec": {
            "containers": [{"name": "supernode", "volumeMounts": [{"name": "x", "mountPath": "/tmp"}]}],
            "volumes": [{"name": "x", "emptyDir": {}}],
        }
    }
    raw = base(supernodes={"pools": [{"name": "p", "replicas": 1, "podTemplate": patch}]})
    with pytest.raises(
        ConfigError,
        match=r"containers\[0\]\.volumeMounts\[0\]\.mountPath: /tmp is already a writable emptyDir mounted by "
        r"flower-federation; leave this mount out",
    ):
        load_plan(raw, "dev")
