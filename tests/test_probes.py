"""Probes: liveness and readiness on Flower's real health endpoints (gRPC health
server, or HTTP(S) GET /health on the HTTP-era SuperLink), configurable globally and per
side, and a startup probe that holds liveness off while a program starts."""

from __future__ import annotations

from typing import Optional

import pytest

from flower_federation.config.errors import ConfigError
from flower_federation.flower.layout import MANAGED_CONTAINERS
from flower_federation.plan import load_plan
from tests.support.manifests import arg_after, containers, workload_container, workloads
from tests.support.render import core_objects, plan_of, pod_templates_of
from tests.support.security_matrix import DEV, NAME, STACK_IDS, security_objects, security_plan
from tests.support.stacks import GRPC_ERA, HTTP_ERA, base


def _health_port(c: dict) -> Optional[int]:
    if "--health-server-address" not in c["args"]:
        return None
    host, port = arg_after(c["args"], "--health-server-address").rsplit(":", 1)
    assert host == "0.0.0.0"  # the kubelet probes the pod IP
    return int(port)


@pytest.mark.parametrize("sid", STACK_IDS + [DEV])
def test_probes_hit_the_real_health_endpoints(sid):
    plan, objects = security_plan(sid), security_objects(sid)
    grpc_era = plan.ports.serverappio is not None
    seen = set()
    for w in workloads(objects):
        if w["kind"] == "Job":
            continue  # runs to completion: nothing to probe
        pod_ports = []
        for c in w["spec"]["template"]["spec"]["containers"]:
            assert c["name"] in MANAGED_CONTAINERS
            seen.add(c["name"])
            for probe in ("livenessProbe", "readinessProbe"):
                assert probe in c, (w["metadata"]["name"], c["name"], probe)
            if c["name"] == "superlink" and not grpc_era:
                assert _health_port(c) is None
                scheme = "HTTP" if plan.spec.insecure else "HTTPS"
                for probe in ("livenessProbe", "readinessProbe"):
                    assert c[probe]["httpGet"] == {"path": "/health", "port": "api", "scheme": scheme}
                assert "api" in {p["name"] for p in c["ports"]}
                continue
            port = _health_port(c)
            sidecar = c["name"].startswith("superexec") and len(w["spec"]["template"]["spec"]["containers"]) > 1
            expected = _configured_health_port(plan, w, c["name"]) or (8082 if sidecar else 8081)
            assert port == expected, (w["metadata"]["name"], c["name"])
            pod_ports.append(port)
            for probe in ("livenessProbe", "readinessProbe"):
                assert c[probe]["grpc"] == {"port": port}
                assert "httpGet" not in c[probe]
        assert len(pod_ports) == len(set(pod_ports)), w["metadata"]["name"]  # no clash within a pod
    assert {"superlink", "supernode"} <= seen


def _configured_health_port(plan, workload: dict, container: str) -> Optional[int]:
    """A health port config moved (`containerPorts.health`), else None."""
    pool_name = workload["metadata"]["labels"].get("flower.flwr.ai/pool")
    pool = next((p for p in plan.spec.supernodes.pools if p.name == pool_name), None)
    if container == "supernode" and pool is not None:
        return pool.container_ports.health
    if container == "superexec-clientapp" and pool is not None:
        return pool.superexec.container_ports.health
    if container == "superexec-serverapp":
        return plan.spec.superlink.superexec.container_ports.health
    return None


def _probe_settings(c: dict, probe: str) -> Optional[tuple]:
    p = c.get(probe)
    if p is None:
        return None
    return (
        p["initialDelaySeconds"],
        p["periodSeconds"],
        p["timeoutSeconds"],
        p["failureThreshold"],
        p["successThreshold"],
    )


def test_probe_settings_are_configurable_globally_and_per_side():
    custom = {
        "livenessProbe": {"initialDelaySeconds": 5, "periodSeconds": 20, "timeoutSeconds": 2, "failureThreshold": 6},
        "readinessProbe": {"periodSeconds": 5, "successThreshold": 2},
    }
    objects = core_objects(base(GRPC_ERA, isolation="process", probes=custom))
    for _, c in containers(objects):
        assert _probe_settings(c, "livenessProbe") == (5, 20, 2, 6, 1)
        assert _probe_settings(c, "readinessProbe") == (0, 5, 1, 3, 2)
    # Per side, key by key: superlink.probes over the global settings for the SuperLink
    # side (and its sidecar SuperExec); supernodes.probes for SuperNodes and their SuperExecs.
    raw = base(GRPC_ERA, isolation="process", probes=custom)
    raw["superlink"]["probes"] = {"readinessProbe": {"enabled": False}}
    raw["supernodes"]["probes"] = {"livenessProbe": {"enabled": False}, "readinessProbe": {"timeoutSeconds": 4}}
    objects = core_objects(raw)
    sts = f"{NAME}-superlink"
    for name in ("superlink", "superexec-serverapp"):
        c = workload_container(objects, "StatefulSet", sts, name)
        assert _probe_settings(c, "livenessProbe") == (5, 20, 2, 6, 1)  # the global settings, inherited
        assert "readinessProbe" not in c
    for pool in ("alpha", "beta"):
        for name in ("supernode", "superexec-clientapp"):
            c = workload_container(objects, "StatefulSet", f"{NAME}-supernode-{pool}", name)
            assert "livenessProbe" not in c
            assert _probe_settings(c, "readinessProbe") == (0, 5, 4, 3, 2)  # global, with its own timeout


def test_http_era_superlink_probe_is_plain_http_when_insecure():
    c = workload_container(security_objects("http-insecure"), "StatefulSet", f"{NAME}-superlink", "superlink")
    assert c["readinessProbe"]["httpGet"]["scheme"] == "HTTP"
    c = workload_container(security_objects("http-generate"), "StatefulSet", f"{NAME}-superlink", "superlink")
    assert c["readinessProbe"]["httpGet"]["scheme"] == "HTTPS"


@pytest.mark.parametrize("version", [GRPC_ERA, HTTP_ERA])
def test_startup_probe_holds_liveness_off_while_a_program_starts(version):
    # A SuperLink killed by liveness during its first migration would leave a
    # half-migrated --database on the PVC; the startup probe gives it 2 minutes.
    templates = pod_templates_of(plan_of(base(version, nodeAuth={"enabled": True})))
    probed = [c for t in templates for c in t["spec"]["containers"] if "livenessProbe" in c]
    assert probed
    for c in probed:
        startup = c["startupProbe"]
        handler = {k: v for k, v in c["livenessProbe"].items() if k in ("grpc", "httpGet")}
        assert handler and handler.items() <= startup.items()
        assert startup["periodSeconds"] * startup["failureThreshold"] == 120
        assert startup["successThreshold"] == 1


def test_startup_probe_is_configurable_and_checked():
    raw = base(HTTP_ERA, probes={"startupProbe": {"enabled": False}})
    templates = pod_templates_of(plan_of(raw))
    assert not any("startupProbe" in c for t in templates for c in t["spec"]["containers"])
    with pytest.raises(ConfigError) as err:
        load_plan(base(HTTP_ERA, superlink={"probes": {"startupProbe": {"successThreshold": 2}}}), "dev")
    assert (
        "federation.superlink.probes.startupProbe.successThreshold: must be 1 for a startup probe (a Kubernetes rule)"
        in str(err.value)
    )
