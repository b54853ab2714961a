"""How an exposed SuperLink is reached (docs/exposure.md), rendered: the Fleet-only proxy
on by default in the HTTP era and never in the gRPC era; the Gateway API objects; the
Ingress; the Control API's Service; the NetworkPolicy on the SuperLink's two ports; the
addresses every client is given. Every object passes the strict Kubernetes 1.34 schema,
and the Gateway API objects the CRD schemas of Gateway API v1.4.1, v1.5.1 and v1.6.1
(tests/support/gateway_api)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from flower_federation.plan import load_plan
from flower_federation.plan.outputs import warnings as preview_warnings
from tests.support.manifests import by_kind, get
from tests.support.schema import gateway_api_releases_serving
from tests.test_sites import run

GATEWAY = {
    "parentRefs": [{"name": "public", "namespace": "gateway-system", "sectionName": "fleet"}],
    "hostname": "fl.example.org",
}


def hub(version: str = "1.41.0", **superlink: Any) -> dict[str, Any]:
    return {
        "role": "hub",
        "name": "fl",
        "namespace": "flower-hub",
        "version": version,
        "nodeAuth": {"enabled": True},
        "superlink": superlink or {"service": {"type": "LoadBalancer"}, "externalAddress": "fl.example.org"},
    }


def render(raw: dict[str, Any]) -> tuple[list[dict[str, Any]], dict[str, Any], list[str]]:
    result = run(copy.deepcopy(raw), "hub")
    return result.manifests(), result.outputs, preview_warnings(load_plan(copy.deepcopy(raw), "hub"))


def containers(objects: list[dict[str, Any]]) -> list[str]:
    (sts,) = by_kind(objects, "StatefulSet")
    return [c["name"] for c in sts["spec"]["template"]["spec"]["containers"]]


def ingress_rules(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return get(objects, "NetworkPolicy", "fl-superlink")["spec"]["ingress"]


def test_an_http_era_hub_renders_safe_without_expose_control_api(k8s_validate) -> None:
    objects, outputs, warnings = render(hub())
    for obj in objects:
        k8s_validate(obj)
    assert containers(objects) == ["superlink", "fleet-proxy"]
    (sts,) = by_kind(objects, "StatefulSet")
    superlink = sts["spec"]["template"]["spec"]["containers"][0]
    assert superlink["args"][superlink["args"].index("--port") + 1] == "9095"
    assert superlink["ports"] == [{"name": "api", "containerPort": 9095, "protocol": "TCP"}]
    control = get(objects, "Service", "fl-superlink-control")
    assert control["spec"]["type"] == "ClusterIP" and control["spec"]["ports"][0]["port"] == 9095
    # Anyone reaches the proxy's port; only the registration Job the SuperLink's own.
    rules = ingress_rules(objects)
    assert [r for r in rules if "from" not in r] == [{"ports": [{"port": 8000, "protocol": "TCP"}]}]
    (job_rule,) = [r for r in rules if "from" in r]
    assert job_rule["ports"] == [{"port": 9095, "protocol": "TCP"}]
    assert job_rule["from"][0]["podSelector"]["matchLabels"]["app.kubernetes.io/component"] == "node-registration"
    assert outputs["superlink"]["externalAddress"] == "fl.example.org:8000"
    assert outputs["superlink"]["controlAddress"] == "fl-superlink-control.flower-hub.svc.cluster.local:9095"
    assert "fl-superlink-control.flower-hub.svc.cluster.local:9095" in outputs["flwrConfig"]
    assert not [w for w in warnings if "Control API" in w]


def test_expose_control_api_is_the_old_hub_with_its_warning() -> None:
    raw = hub()
    raw["superlink"]["exposeControlApi"] = True
    objects, outputs, warnings = render(raw)
    assert containers(objects) == ["superlink"]
    assert not [o for o in objects if o["metadata"]["name"] == "fl-superlink-control"]
    assert {"ports": [{"port": 8000, "protocol": "TCP"}]} in ingress_rules(objects)
    assert outputs["superlink"]["controlAddress"] == "fl-superlink.flower-hub.svc.cluster.local:8000"
    assert any(w.startswith("superlink.exposeControlApi is true") for w in warnings)


def test_the_grpc_era_hub_has_no_proxy_and_its_load_balancer_carries_the_fleet_port_only() -> None:
    objects, outputs, warnings = render(hub("1.26.1"))
    assert containers(objects) == ["superlink"]
    assert [p["port"] for p in get(objects, "Service", "fl-superlink")["spec"]["ports"]] == [9092]
    control = get(objects, "Service", "fl-superlink-control")
    assert control["spec"]["type"] == "ClusterIP" and [p["port"] for p in control["spec"]["ports"]] == [9093]
    assert [r for r in ingress_rules(objects) if "from" not in r] == [{"ports": [{"port": 9092, "protocol": "TCP"}]}]
    assert outputs["superlink"]["externalAddress"] == "fl.example.org:9092"
    assert outputs["superlink"]["controlAddress"] == "fl-superlink-control.flower-hub.svc.cluster.local:9093"
    assert not [w for w in warnings if "Control API" in w]


def test_the_grpc_era_hub_with_expose_control_api_keeps_control_on_its_load_balancer() -> None:
    raw = hub("1.26.1")
    raw["superlink"]["exposeControlApi"] = True
    objects, outputs, warnings = render(raw)
    assert not [o for o in objects if o["metadata"]["name"] == "fl-superlink-control"]
    assert [p["port"] for p in get(objects, "Service", "fl-superlink")["spec"]["ports"]] == [9092, 9093]
    assert outputs["superlink"]["controlAddress"] == "fl-superlink.flower-hub.svc.cluster.local:9093"
    assert any(w.startswith("superlink.exposeControlApi is true: Service fl-superlink") for w in warnings)


def test_a_federation_in_one_cluster_gets_no_proxy() -> None:
    plan = load_plan({"name": "f", "version": "1.41.0", "supernodes": {"pools": [{"name": "a", "replicas": 1}]}}, "dev")
    assert not plan.exposed and not plan.fleet_proxy and plan.ports.control == plan.ports.fleet == 8000


def test_gateway_http_era_routes_only_the_fleet_api_verified_with_the_federations_ca(k8s_validate) -> None:
    objects, outputs, _ = render(hub(gateway=GATEWAY, networkPolicy={"ingressPodMatchLabels": {"a": "b"}}))
    for obj in objects:
        k8s_validate(obj)
    route = get(objects, "HTTPRoute", "fl-superlink")
    assert route["spec"]["hostnames"] == ["fl.example.org"]
    (rule,) = route["spec"]["rules"]
    assert rule["matches"] == [{"path": {"type": "PathPrefix", "value": "/v1/fleet/"}}]
    assert rule["backendRefs"] == [{"group": "", "kind": "Service", "name": "fl-superlink", "port": 8000}]
    policy = get(objects, "BackendTLSPolicy", "fl-superlink")
    assert policy["spec"]["targetRefs"] == [
        {"group": "", "kind": "Service", "name": "fl-superlink", "sectionName": "fleet"}
    ]
    assert policy["spec"]["validation"] == {
        "caCertificateRefs": [{"group": "", "kind": "ConfigMap", "name": "fl-ca-bundle"}],
        "hostname": "fl-superlink.flower-hub.svc.cluster.local",
    }
    bundle = get(objects, "ConfigMap", "fl-ca-bundle")
    assert set(bundle["data"]) == {"ca.crt"}  # filled by the shell with the CA the pods trust
    # The grant hands the Gateway its own listener certificate (public hostname only), never the SuperLink's
    # Secret fl-superlink-tls (was: that one).
    (grant,) = by_kind(objects, "ReferenceGrant")
    assert grant["metadata"]["name"] == "fl-gateway-tls"
    assert grant["spec"] == {
        "from": [{"group": "gateway.networking.k8s.io", "kind": "Gateway", "namespace": "gateway-system"}],
        "to": [{"group": "", "kind": "Secret", "name": "fl-gateway-tls"}],
    }
    assert get(objects, "Secret", "fl-gateway-tls")["type"] == "kubernetes.io/tls"
    assert get(objects, "Service", "fl-superlink")["spec"]["type"] == "ClusterIP"
    assert outputs["superlink"]["externalAddress"] == "fl.example.org:443"


def test_gateway_selectors_narrow_the_proxy_port_to_the_gateways_pods() -> None:
    gw = {
        **GATEWAY,
        "namespaceSelector": {"kubernetes.io/metadata.name": "gateway-system"},
        "podSelector": {"app": "gw"},
    }
    objects, _, _ = render(hub(gateway=gw))
    fleet_rules = [r for r in ingress_rules(objects) if r["ports"] == [{"port": 8000, "protocol": "TCP"}]]
    assert fleet_rules == [
        {
            "from": [
                {
                    "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "gateway-system"}},
                    "podSelector": {"matchLabels": {"app": "gw"}},
                }
            ],
            "ports": [{"port": 8000, "protocol": "TCP"}],
        }
    ]
    # A LoadBalancer next to the gateway: the world again.
    objects, _, _ = render(hub(gateway=gw, service={"type": "LoadBalancer"}))
    assert {"ports": [{"port": 8000, "protocol": "TCP"}]} in ingress_rules(objects)


def test_gateway_grpc_era_passes_tls_through_to_the_fleet_port(k8s_validate) -> None:
    objects, outputs, _ = render(hub("1.26.1", gateway=GATEWAY))
    for obj in objects:
        k8s_validate(obj)
    route = get(objects, "TLSRoute", "fl-superlink")
    # Gateway API v1.5+ serves TLSRoute v1 in the standard channel, no longer v1alpha2 (was: v1alpha2).
    assert route["apiVersion"] == "gateway.networking.k8s.io/v1"
    assert gateway_api_releases_serving(route) == ["v1.5.1", "v1.6.1"]
    assert route["spec"]["rules"] == [
        {"backendRefs": [{"group": "", "kind": "Service", "name": "fl-superlink", "port": 9092}]}
    ]
    assert not by_kind(objects, "BackendTLSPolicy") and not by_kind(objects, "HTTPRoute")
    assert containers(objects) == ["superlink"]


def test_gateway_grpc_era_tlsroute_v1alpha2_for_an_older_gateway_api_on_request(k8s_validate) -> None:
    objects, _, _ = render(hub("1.26.1", gateway={**GATEWAY, "tlsRouteVersion": "v1alpha2"}))
    route = get(objects, "TLSRoute", "fl-superlink")
    assert route["apiVersion"] == "gateway.networking.k8s.io/v1alpha2"
    assert gateway_api_releases_serving(route) == ["v1.4.1"]
    k8s_validate(route)


@pytest.mark.parametrize("version", ["1.41.0", "1.26.1"])
def test_every_gateway_api_object_passes_the_current_releases(version: str, k8s_validate) -> None:
    """Each rendered Gateway API object is served by Gateway API v1.5 and v1.6 (standard channel) and passes both
    strict schemas (validate checks it against every vendored release that serves it, v1.4.1 too where it does)."""
    objects, _, _ = render(hub(version, gateway=GATEWAY))
    gateway_objects = [o for o in objects if o["apiVersion"].startswith("gateway.networking.k8s.io/")]
    assert gateway_objects
    for obj in gateway_objects:
        assert {"v1.5.1", "v1.6.1"} <= set(gateway_api_releases_serving(obj)), obj["kind"]
        k8s_validate(obj)


@pytest.mark.parametrize("version", ["1.41.0", "1.26.1"])
def test_ingress_default_is_fleet_only_in_the_http_era_and_passthrough_in_the_grpc_era(
    version: str, k8s_validate
) -> None:
    objects, outputs, _ = render(hub(version, ingress={"host": "fl.example.org"}))
    ingress = get(objects, "Ingress", "fl-superlink")
    k8s_validate(ingress)
    (path,) = ingress["spec"]["rules"][0]["http"]["paths"]
    annotations = ingress["metadata"].get("annotations", {})
    if version == "1.41.0":
        assert path["path"] == "/v1/fleet/" and "ingressClassName" not in ingress["spec"]
        assert not annotations and ingress["spec"]["tls"][0]["secretName"] == "fl-superlink-tls"
    else:
        assert path["path"] == "/" and annotations["nginx.ingress.kubernetes.io/ssl-passthrough"] == "true"
        assert annotations["nginx.ingress.kubernetes.io/backend-protocol"] == "GRPCS"
    assert outputs["superlink"]["externalAddress"] == "fl.example.org:443"


def test_ingress_passthrough_on_request_still_goes_through_the_proxy() -> None:
    objects, _, _ = render(hub(ingress={"host": "fl.example.org", "passthrough": True, "className": "nginx"}))
    ingress = get(objects, "Ingress", "fl-superlink")
    assert ingress["metadata"]["annotations"]["nginx.ingress.kubernetes.io/backend-protocol"] == "HTTPS"
    assert ingress["spec"]["ingressClassName"] == "nginx"
    assert ingress["spec"]["rules"][0]["http"]["paths"][0]["backend"]["service"]["port"] == {"name": "fleet"}
    assert containers(objects) == ["superlink", "fleet-proxy"]


def test_control_service_load_balancer_for_operators_with_its_warning(k8s_validate) -> None:
    raw = hub()
    raw["superlink"]["controlService"] = {"type": "LoadBalancer", "loadBalancerSourceRanges": ["198.51.100.0/24"]}
    objects, _, warnings = render(raw)
    control = get(objects, "Service", "fl-superlink-control")
    k8s_validate(control)
    assert control["spec"]["type"] == "LoadBalancer"
    assert control["spec"]["loadBalancerSourceRanges"] == ["198.51.100.0/24"]
    assert control["spec"]["externalTrafficPolicy"] == "Local"  # clients keep their addresses
    # The SuperLink's own port: the registration Job and those ranges, never every pod.
    control_rules = [r for r in ingress_rules(objects) if r["ports"] == [{"port": 9095, "protocol": "TCP"}]]
    assert all("from" in r for r in control_rules)
    assert {"from": [{"ipBlock": {"cidr": "198.51.100.0/24"}}], "ports": [{"port": 9095, "protocol": "TCP"}]} in (
        control_rules
    )
    assert any("reachable from outside the cluster by 198.51.100.0/24" in w for w in warnings)


def test_distributed_superexec_dials_the_superlinks_own_port_through_the_control_service() -> None:
    raw = {
        "name": "fl",
        "namespace": "flower-hub",
        "version": "1.41.0",
        "isolationMode": "process",
        "superexecPlacement": "distributed",
        "superlink": {"superexecImage": "flwr/superexec:1.41.0", "ingress": {"host": "fl.example.org"}},
        "supernodes": {
            "pools": [{"name": "a", "replicas": 1, "images": {"superexecClientApp": "flwr/superexec:1.41.0"}}]
        },
    }
    objects, _, _ = render(raw)
    deployment = get(objects, "Deployment", "fl-superexec-serverapp")
    args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args[args.index("--runtime-api-address") + 1] == "fl-superlink-control.flower-hub.svc.cluster.local:9095"
    # In-cluster SuperNodes dial the Fleet port: the proxy.
    (pool,) = [s for s in by_kind(objects, "StatefulSet") if s["metadata"]["name"] == "fl-supernode-a"]
    sn_args = pool["spec"]["template"]["spec"]["containers"][0]["args"]
    assert sn_args[sn_args.index("--superlink") + 1] == "fl-superlink.flower-hub.svc.cluster.local:8000"


def test_the_grpc_era_refuses_http_era_exposure_settings() -> None:
    from flower_federation.config.errors import ConfigError

    raw = hub("1.26.1")
    raw["superlink"]["fleetProxy"] = {"enabled": True}
    raw["superlink"]["controlService"] = {"port": 9100}
    with pytest.raises(ConfigError) as err:
        load_plan(raw, "hub")
    text = str(err.value)
    for key in ("fleetProxy", "controlService"):
        assert f"federation.superlink.{key}: HTTP era only (Flower 1.40+): Flower 1.26.1 serves the Fleet API" in text


def test_the_proxy_body_limit_is_a_setting_and_checked() -> None:
    from flower_federation.config.errors import ConfigError

    raw = hub()
    raw["superlink"]["fleetProxy"] = {"maxRequestBodySize": "256m"}
    objects, _, _ = render(raw)
    assert "client_max_body_size 256m;" in get(objects, "ConfigMap", "fl-superlink-fleet-proxy")["data"]["nginx.conf"]
    raw["superlink"]["fleetProxy"] = {"maxRequestBodySize": "1 GB"}
    with pytest.raises(ConfigError) as err:
        load_plan(raw, "hub")
    assert "federation.superlink.fleetProxy.maxRequestBodySize" in str(err.value)


def test_every_exposure_setting_reaches_what_it_names(k8s_validate) -> None:
    """Each new setting changes what it says, and only that."""
    raw = hub(
        service={"type": "LoadBalancer"},
        externalAddress="fl.example.org",
        fleetProxy={
            "image": {"registry": "registry.example.org", "repository": "mirror/nginx", "tag": "1.28.0"},
            "resourcesPreset": "micro",
            "resources": {"limits": {"memory": "300Mi"}},
            "timeoutSeconds": 600,
        },
        controlService={"port": 9200, "annotations": {"a": "b"}, "labels": {"team": "ops"}},
        persistence={"backups": {"keep": 7}},
    )
    objects, outputs, _ = render(raw)
    for obj in objects:
        k8s_validate(obj)
    (sts,) = by_kind(objects, "StatefulSet")
    spec = sts["spec"]["template"]["spec"]
    proxy = next(c for c in spec["containers"] if c["name"] == "fleet-proxy")
    assert proxy["image"] == "registry.example.org/mirror/nginx:1.28.0"
    assert proxy["resources"] == {"requests": {"cpu": "250m", "memory": "256Mi"}, "limits": {"memory": "300Mi"}}
    conf = get(objects, "ConfigMap", "fl-superlink-fleet-proxy")["data"]["nginx.conf"]
    assert "proxy_read_timeout 600s;" in conf and "server 127.0.0.1:9200;" in conf
    control = get(objects, "Service", "fl-superlink-control")
    assert control["metadata"]["annotations"] == {"a": "b"} and control["metadata"]["labels"]["team"] == "ops"
    assert control["spec"]["ports"][0]["port"] == 9200
    assert outputs["superlink"]["controlAddress"].endswith(":9200")
    (guard,) = spec["initContainers"]
    assert guard["name"] == "state-guard" and guard["args"][2] == "7"


def test_gateway_without_the_federations_certificate_and_ingress_with_its_own() -> None:
    objects, _, _ = render(hub(gateway={**GATEWAY, "presentFederationCertificate": False}))
    assert not by_kind(objects, "ReferenceGrant") and by_kind(objects, "HTTPRoute")
    objects, _, _ = render(hub(ingress={"host": "fl.example.org", "tlsSecretName": "public-cert"}))
    assert get(objects, "Ingress", "fl-superlink")["spec"]["tls"] == [
        {"hosts": ["fl.example.org"], "secretName": "public-cert"}
    ]
