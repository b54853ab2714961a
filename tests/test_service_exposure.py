"""A SuperLink exposed by its own Service (docs/exposure.md): a `LoadBalancer` or `NodePort` Service makes it
reachable from outside its cluster, so on HTTP-era Flower (1.41, 1.42) the render puts the Fleet-only proxy in
front, and on gRPC-era Flower (1.26: Fleet and Control are separate ports) the Service that leaves the cluster
carries the Fleet port alone, Control moving to ClusterIP Service `N-superlink-control`; either way no Control port
leaves the cluster, as the policies of `flower_federation.checks` judge the rendered objects (no mandatory
violation, `python -m flower_federation check` too). Negative controls: a ClusterIP Service (nothing exposed, no
proxy, Control on `N-superlink`); `exposeControlApi: true` (no proxy, Control stays on the exposed Service, the
preview's warning for the era, and the policy reports the Control API)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from flower_federation.builders import trust
from flower_federation.checks.model import MANDATORY
from flower_federation.checks.policies import mandatory
from flower_federation.checks.policies import run as check
from flower_federation.cli.main import main
from flower_federation.config.errors import ConfigError
from flower_federation.plan import load_plan
from flower_federation.plan.outputs import warnings as preview_warnings
from tests.support.manifests import bound, by_kind, get
from tests.test_sites import run

HTTP_VERSIONS = ("1.41.0", "1.42.0")
GRPC_VERSION = "1.26.1"
OUTSIDE = ("LoadBalancer", "NodePort")
CONTROL_WARNING = "superlink.exposeControlApi is true"
CONTROL_POLICY = "flower-control-api-internal"


def federation(version: str, service_type: str, **superlink: Any) -> dict[str, Any]:
    """A plain federation (no hub, ingress, gateway or pool in another cluster): only its Service can expose it."""
    return {
        "name": "ex",
        "namespace": "flower-ex",
        "version": version,
        "nodeAuth": {"enabled": True},
        "superlink": {"service": {"type": service_type}, **superlink},
        "supernodes": {"pools": [{"name": "alpha", "replicas": 2}]},
    }


def render(raw: dict[str, Any]) -> tuple[list[dict[str, Any]], dict[str, Any], list[str]]:
    result = run(copy.deepcopy(raw), "ex")
    return result.manifests(), result.outputs, preview_warnings(load_plan(copy.deepcopy(raw), "ex"))


def containers(objects: list[dict[str, Any]]) -> list[str]:
    sts = get(objects, "StatefulSet", "ex-superlink")
    return [c["name"] for c in sts["spec"]["template"]["spec"]["containers"]]


def service_names(objects: list[dict[str, Any]]) -> set[str]:
    return {s["metadata"]["name"] for s in by_kind(objects, "Service")}


def outside_services(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [s for s in by_kind(objects, "Service") if s["spec"].get("type") in OUTSIDE]


def violations(objects: list[dict[str, Any]]) -> set[tuple[str, str]]:
    return {(v.level, v.policy) for v in check(objects)}


@pytest.mark.parametrize("service_type", OUTSIDE)
@pytest.mark.parametrize("version", HTTP_VERSIONS)
def test_a_loadbalancer_or_nodeport_superlink_gets_the_fleet_only_proxy(
    version: str, service_type: str, k8s_validate: Any
) -> None:
    plan = load_plan(federation(version, service_type), "ex")
    assert plan.exposed and plan.exposure.by_service and not plan.exposure.by_config and plan.fleet_proxy
    objects, outputs, warnings = render(federation(version, service_type))
    for obj in objects:
        k8s_validate(obj)
    assert containers(objects) == ["superlink", "fleet-proxy"]
    # The Service that leaves the cluster carries the proxy's port alone; the SuperLink's own port stays in it.
    (public,) = outside_services(objects)
    assert public["metadata"]["name"] == "ex-superlink" and public["spec"]["type"] == service_type
    assert [(p["name"], p["port"], p["targetPort"]) for p in public["spec"]["ports"]] == [("fleet", 8000, "fleet")]
    control = get(objects, "Service", "ex-superlink-control")
    assert control["spec"]["type"] == "ClusterIP" and [p["port"] for p in control["spec"]["ports"]] == [9095]
    assert get(objects, "ConfigMap", "ex-superlink-fleet-proxy")
    assert outputs["superlink"]["controlAddress"] == "ex-superlink-control.flower-ex.svc.cluster.local:9095"
    # The policies read the objects alone: no Control port reachable from outside, nothing mandatory broken.
    assert mandatory(check(objects)) == []
    assert not any(CONTROL_WARNING in w for w in warnings)
    # The Service names no client: the NetworkPolicy admits no one from anywhere (allowExternal would).
    rules = get(objects, "NetworkPolicy", "ex-superlink")["spec"]["ingress"]
    assert rules and all("from" in rule for rule in rules)


@pytest.mark.parametrize("version", HTTP_VERSIONS)
def test_negative_control_a_clusterip_superlink_has_no_proxy(version: str) -> None:
    plan = load_plan(federation(version, "ClusterIP"), "ex")
    assert not plan.exposed and not plan.fleet_proxy
    objects, outputs, warnings = render(federation(version, "ClusterIP"))
    assert containers(objects) == ["superlink"]
    assert outside_services(objects) == [] and "ex-superlink-control" not in service_names(objects)
    assert [p["port"] for p in get(objects, "Service", "ex-superlink")["spec"]["ports"]] == [8000]
    assert outputs["superlink"]["controlAddress"] == "ex-superlink.flower-ex.svc.cluster.local:8000"
    assert mandatory(check(objects)) == [] and warnings == []


@pytest.mark.parametrize("service_type", OUTSIDE)
@pytest.mark.parametrize("version", HTTP_VERSIONS)
def test_negative_control_expose_control_api_keeps_the_old_objects_and_its_warning(
    version: str, service_type: str
) -> None:
    raw = federation(version, service_type, exposeControlApi=True)
    assert not load_plan(copy.deepcopy(raw), "ex").fleet_proxy
    objects, _, warnings = render(raw)
    assert containers(objects) == ["superlink"] and "ex-superlink-control" not in service_names(objects)
    (public,) = outside_services(objects)
    assert [(p["name"], p["port"]) for p in public["spec"]["ports"]] == [("api", 8000)]
    assert [w for w in warnings if CONTROL_WARNING in w]
    # The opt-in's cost, which the policy still names (the check is not fooled by our config).
    assert (MANDATORY, CONTROL_POLICY) in violations(objects)


@pytest.mark.parametrize("service_type", OUTSIDE)
@pytest.mark.parametrize("version", HTTP_VERSIONS)
def test_turning_the_proxy_off_on_such_a_service_needs_expose_control_api(version: str, service_type: str) -> None:
    # The rule and the plan read one meaning (config/derived.superlink_exposure).
    raw = federation(version, service_type, fleetProxy={"enabled": False})
    with pytest.raises(ConfigError) as err:
        load_plan(raw, "ex")
    assert [p.path for p in err.value.problems] == ["federation.superlink.fleetProxy.enabled"]


CONTROL_HOST = "ex-superlink-control.flower-ex.svc.cluster.local"
GRPC_CONTROL_WARNING = "superlink.exposeControlApi is true: Service ex-superlink"


def ports(service: dict[str, Any]) -> list[tuple[str, int, Any]]:
    return [(p["name"], p["port"], p["targetPort"]) for p in service["spec"]["ports"]]


def registration_address(objects: list[dict[str, Any]]) -> str:
    """The Control API address the registration Job's `flwr` config dials."""
    (config,) = [
        v for k, v in bound(objects, "ConfigMap", "ex-node-registration")["data"].items() if k.endswith(".toml")
    ]
    (address,) = [line.split('"')[1] for line in config.splitlines() if line.startswith("address")]
    return address


@pytest.mark.parametrize("service_type", OUTSIDE)
def test_the_grpc_era_external_service_carries_fleet_only(service_type: str, k8s_validate: Any) -> None:
    raw = federation(GRPC_VERSION, service_type)
    plan = load_plan(copy.deepcopy(raw), "ex")
    assert plan.exposed and plan.grpc_era and not plan.fleet_proxy and plan.control_apart
    objects, outputs, warnings = render(raw)
    for obj in objects:
        k8s_validate(obj)
    # No proxy in the gRPC era: the SuperLink serves Fleet (9092) and Control (9093) itself, on ports of their own.
    assert containers(objects) == ["superlink"]
    (public,) = outside_services(objects)
    assert public["metadata"]["name"] == "ex-superlink" and public["spec"]["type"] == service_type
    assert ports(public) == [("fleet", 9092, "fleet")]
    control = get(objects, "Service", "ex-superlink-control")
    assert control["spec"]["type"] == "ClusterIP" and ports(control) == [("control", 9093, "control")]
    assert control["spec"]["selector"] == public["spec"]["selector"]
    # Everything that dials Control follows it there: the outputs, `flwr`'s config, the registration Job, and
    # the server certificate names it.
    assert outputs["superlink"]["controlAddress"] == f"{CONTROL_HOST}:9093"
    assert outputs["superlink"]["fleetAddress"] == "ex-superlink.flower-ex.svc.cluster.local:9092"
    assert f'address = "{CONTROL_HOST}:9093"' in outputs["flwrConfig"]
    assert registration_address(objects) == f"{CONTROL_HOST}:9093"
    assert CONTROL_HOST in trust.superlink_dns_names(plan)
    assert not any("exposeControlApi" in w for w in warnings)
    # The policies read the objects alone: nothing mandatory broken (flower-control-api-internal included).
    assert mandatory(check(objects)) == []
    # The NetworkPolicy is the pod's, unchanged: Control from the registration Job and the configured sources only.
    rules = get(objects, "NetworkPolicy", "ex-superlink")["spec"]["ingress"]
    assert all("from" in rule for rule in rules if 9093 in {p["port"] for p in rule["ports"]})


def test_check_passes_a_grpc_era_hub_behind_a_load_balancer(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """`python -m flower_federation check` over the render of a gRPC-era hub (the shape e2e scenario 6 runs)."""
    raw = {
        "role": "hub",
        "name": "ex",
        "namespace": "flower-ex",
        "version": GRPC_VERSION,
        "nodeAuth": {"enabled": True},
        "superlink": {"service": {"type": "LoadBalancer"}, "externalAddress": "fl.example.org"},
    }
    objects, _, _ = render(raw)
    path = tmp_path / "hub.yaml"
    path.write_text(yaml.safe_dump_all(objects))
    code = main(["check", str(path)])
    out, _ = capsys.readouterr()
    assert code == 0 and "MANDATORY" not in out, out
    # The negative control: the same hub with exposeControlApi, which check refuses (exit 1).
    raw["superlink"]["exposeControlApi"] = True
    path.write_text(yaml.safe_dump_all(render(raw)[0]))
    code = main(["check", str(path)])
    out, _ = capsys.readouterr()
    assert code == 1 and f"MANDATORY {CONTROL_POLICY}" in out, out


@pytest.mark.parametrize("service_type", OUTSIDE)
def test_negative_control_grpc_era_expose_control_api_keeps_9093_on_the_external_service(service_type: str) -> None:
    raw = federation(GRPC_VERSION, service_type, exposeControlApi=True)
    plan = load_plan(copy.deepcopy(raw), "ex")
    assert plan.exposed and not plan.control_apart
    objects, outputs, warnings = render(raw)
    assert "ex-superlink-control" not in service_names(objects)
    (public,) = outside_services(objects)
    assert ports(public) == [("fleet", 9092, "fleet"), ("control", 9093, "control")]
    assert outputs["superlink"]["controlAddress"] == "ex-superlink.flower-ex.svc.cluster.local:9093"
    assert registration_address(objects) == "ex-superlink.flower-ex.svc.cluster.local:9093"
    assert CONTROL_HOST not in trust.superlink_dns_names(plan)
    # The gRPC era's own warning: Control is a port of its own on that Service, not the HTTP era's one port.
    (warning,) = [w for w in warnings if "exposeControlApi" in w]
    assert warning.startswith(f"{GRPC_CONTROL_WARNING} (type {service_type}) carries Flower 1.26.1's Control API port")
    assert "(9093) next to its Fleet port (9092)" in warning and "one port" not in warning
    assert "moves to the ClusterIP Service ex-superlink-control" in warning
    assert (MANDATORY, CONTROL_POLICY) in violations(objects)


@pytest.mark.parametrize("expose_control_api", [False, True])
def test_negative_control_a_grpc_era_clusterip_superlink_is_unchanged(expose_control_api: bool) -> None:
    raw = federation(GRPC_VERSION, "ClusterIP", exposeControlApi=expose_control_api)
    plan = load_plan(copy.deepcopy(raw), "ex")
    assert not plan.exposed and not plan.control_apart
    objects, outputs, warnings = render(raw)
    assert containers(objects) == ["superlink"] and "ex-superlink-control" not in service_names(objects)
    assert outside_services(objects) == []
    assert ports(get(objects, "Service", "ex-superlink")) == [("fleet", 9092, "fleet"), ("control", 9093, "control")]
    assert outputs["superlink"]["controlAddress"] == "ex-superlink.flower-ex.svc.cluster.local:9093"
    assert registration_address(objects) == "ex-superlink.flower-ex.svc.cluster.local:9093"
    assert CONTROL_HOST not in trust.superlink_dns_names(plan)
    assert mandatory(check(objects)) == [] and warnings == []


@pytest.mark.parametrize("expose_control_api", [False, True])
@pytest.mark.parametrize("service_type", (*OUTSIDE, "ClusterIP"))
@pytest.mark.parametrize("version", HTTP_VERSIONS)
def test_negative_control_the_http_era_keeps_control_apart_exactly_behind_the_proxy(
    version: str, service_type: str, expose_control_api: bool
) -> None:
    # The HTTP era's Control Service is the proxy's, as before: the gRPC era's rule does not reach it.
    raw = federation(version, service_type, exposeControlApi=expose_control_api)
    plan = load_plan(copy.deepcopy(raw), "ex")
    assert plan.control_apart == plan.fleet_proxy == (service_type != "ClusterIP" and not expose_control_api)
    objects, outputs, _ = render(raw)
    if plan.fleet_proxy:
        assert ports(get(objects, "Service", "ex-superlink-control")) == [("api", 9095, "api")]
        assert outputs["superlink"]["controlAddress"] == f"{CONTROL_HOST}:9095"
    else:
        assert "ex-superlink-control" not in service_names(objects)
        assert ports(get(objects, "Service", "ex-superlink")) == [("api", 8000, "api")]
        assert outputs["superlink"]["controlAddress"] == "ex-superlink.flower-ex.svc.cluster.local:8000"
