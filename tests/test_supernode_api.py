"""The Helm chart's SuperNode ClientAppIo Service (`supernode.service.*`) and container ports
(`supernode.containerPorts.*`; docs/helm-parameters.md): the ports reach every place that names them (the
SuperNode's bind, its health server and probes, the SuperExecs' address, the Services, the NetworkPolicies), and
an exposed plaintext API is refused unless it can reach a SuperExec, serves one SuperNode and is allowed by the
pool's policy; every problem by path."""

from __future__ import annotations

from typing import Any

from flower_federation.builders import appio
from flower_federation.plan.outputs import warnings
from tests.support.manifests import container, get
from tests.support.netpol import allowed, pod_groups
from tests.support.render import core_objects, plan_of
from tests.support.validation import problems, process_cfg, sts_pool


def _distributed(pool: dict[str, Any], **top: Any) -> dict[str, Any]:
    raw = process_cfg(pool, **top)
    raw["superexecPlacement"] = "distributed"
    return raw


def _arg(c: dict[str, Any], flag: str) -> str:
    return c["args"][c["args"].index(flag) + 1]


def test_container_ports_reach_the_supernode_its_superexecs_services_and_policies(k8s_validate):
    pool = sts_pool(
        "a", 2, containerPorts={"clientAppIo": 9300, "health": 9301}, service={"port": 19094, "portName": "appio"}
    )
    objects = core_objects(_distributed(pool))
    supernode = container(get(objects, "StatefulSet", "dev-supernode-a"), "supernode")
    assert (_arg(supernode, "--host"), _arg(supernode, "--port")) == ("0.0.0.0", "9300")  # HTTP era
    assert _arg(supernode, "--health-server-address") == "0.0.0.0:9301"
    assert supernode["readinessProbe"]["grpc"]["port"] == 9301
    assert supernode["ports"] == [{"name": "clientappio", "containerPort": 9300, "protocol": "TCP"}]
    superexec = container(get(objects, "StatefulSet", "dev-superexec-a"), "superexec-clientapp")
    assert _arg(superexec, "--runtime-api-address") == "$(FLOWER_SUPERNODE_HOST):9300"
    headless = get(objects, "Service", "dev-supernode-a")
    assert headless["spec"]["clusterIP"] == "None"
    assert headless["spec"]["ports"] == [{"name": "appio", "port": 19094, "targetPort": 9300, "protocol": "TCP"}]
    # The SuperExec reaches the new port, and nothing else does.
    groups = pod_groups(objects)
    superexecs, supernodes = groups["StatefulSet/dev-superexec-a"], groups["StatefulSet/dev-supernode-a"]
    for kind, here, there in (("egress", superexecs, supernodes), ("ingress", supernodes, superexecs)):
        assert allowed(objects, here, kind, there, 9300, "TCP", "flower")
        assert not allowed(objects, here, kind, there, 9094, "TCP", "flower")
    for o in objects:
        k8s_validate(o)


def test_grpc_era_binds_the_clientappio_port_too():
    pool = sts_pool("a", 1, containerPorts={"clientAppIo": 9300})
    raw = _distributed(pool, version="1.26.1")
    raw["superlink"]["superexecImage"] = "flwr/superexec:1.26.1"
    raw["supernodes"]["pools"][0]["images"]["superexecClientApp"] = "flwr/superexec:1.26.1"
    objects = core_objects(raw)
    supernode = container(get(objects, "StatefulSet", "dev-supernode-a"), "supernode")
    assert _arg(supernode, "--clientappio-api-address") == "0.0.0.0:9300"
    superexec = container(get(objects, "StatefulSet", "dev-superexec-a"), "superexec-clientapp")
    assert _arg(superexec, "--appio-api-address") == "$(FLOWER_SUPERNODE_HOST):9300"


def test_a_sidecar_dials_the_port_on_loopback():
    objects = core_objects(process_cfg(sts_pool("a", 1, containerPorts={"clientAppIo": 9300})))
    pod = get(objects, "StatefulSet", "dev-supernode-a")
    assert _arg(container(pod, "supernode"), "--host") == "127.0.0.1"
    assert _arg(container(pod, "superexec-clientapp"), "--runtime-api-address") == "127.0.0.1:9300"


def test_a_nodeport_service_exposes_one_supernode_to_superexecs_outside(k8s_validate):
    pool = sts_pool(
        "edge",
        1,
        service={
            "type": "NodePort",
            "port": 9094,
            "nodePort": 30094,
            "externalNames": ["edge.example.org", "203.0.113.7"],
        },
        networkPolicy={"allowExternal": True},
    )
    raw = _distributed(pool)
    objects = core_objects(raw)
    service = get(objects, "Service", "dev-supernode-edge-clientappio")
    assert service["spec"] == {
        "type": "NodePort",
        "selector": {
            "app.kubernetes.io/instance": "dev",
            "app.kubernetes.io/component": "supernode",
            "flower.flwr.ai/pool": "edge",
        },
        "ports": [{"name": "clientappio", "port": 9094, "targetPort": 9094, "protocol": "TCP", "nodePort": 30094}],
    }
    assert get(objects, "Service", "dev-supernode-edge")["spec"]["clusterIP"] == "None"  # still there
    policy = get(objects, "NetworkPolicy", "dev-supernode-edge")
    assert {"ports": [{"port": 9094, "protocol": "TCP"}]} in policy["spec"]["ingress"]  # from anywhere
    # Flower 1.41 on a hub with TLS: the Runtime API is served with the pool's certificate, which names what the
    # SuperExecs outside dial (tests/test_appio.py checks the generated certificate).
    plan = plan_of(raw)
    assert "edge.example.org" in appio.pool_dns_names(plan, plan.spec.supernodes.pools[0])
    assert appio.pool_ip_addresses(plan, plan.spec.supernodes.pools[0]) == ["127.0.0.1", "203.0.113.7"]
    assert any("over TLS" in w and "edge" in w for w in warnings(plan))
    for o in objects:
        k8s_validate(o)


def test_outside_names_are_required_where_the_pool_certificate_is_made_here():
    exposed = {"type": "LoadBalancer"}
    pool = sts_pool("edge", 1, service=exposed, networkPolicy={"allowExternal": True})
    message = (
        "name the DNS names or IPs SuperExecs outside the cluster dial the LoadBalancer Service by: the pool's "
        "Runtime API is served over TLS with a certificate made here for the in-cluster names, which must carry "
        "them too"
    )
    assert problems(_distributed(pool)) == [("federation.supernodes.pools[0].service.externalNames", message)]
    cert_manager = {"source": "certManager", "certManager": {"issuerRef": {"name": "ca", "kind": "ClusterIssuer"}}}
    assert problems(_distributed(pool, tls=cert_manager)) == [
        ("federation.supernodes.pools[0].service.externalNames", message)
    ]
    # Not made here (the user's certificate), or no TLS on the hop: nothing to name.
    existing = _distributed(
        {**pool, "runtimeApiSecret": "edge-runtime"}, tls={"source": "existingSecret", "existingSecret": "tls"}
    )
    plan_of(existing)
    plan_of(_distributed(pool, insecure=True))
    grpc = _distributed(pool, version="1.26.1")
    grpc["superlink"]["superexecImage"] = "flwr/superexec:1.26.1"
    grpc["supernodes"]["pools"][0]["images"]["superexecClientApp"] = "flwr/superexec:1.26.1"
    assert any("plaintext" in w for w in warnings(plan_of(grpc)))
    insecure = plan_of(_distributed(pool, insecure=True))
    assert any("without TLS" in w for w in warnings(insecure))


def test_outside_names_are_names_of_an_exposed_service():
    pool = sts_pool(
        "a", 1, service={"externalNames": ["ok.example.org", "Not A Name", "*.example.org", "edge_1.example.org"]}
    )
    assert problems(_distributed(pool)) == [
        (
            "federation.supernodes.pools[0].service.externalNames",
            "only with service.type NodePort or LoadBalancer (what SuperExecs outside dial)",
        ),
        ("federation.supernodes.pools[0].service.externalNames[1]", "'Not A Name' is not a DNS name or an IP address"),
        (
            "federation.supernodes.pools[0].service.externalNames[2]",
            "'*.example.org' is not a DNS name or an IP address",
        ),
        (
            "federation.supernodes.pools[0].service.externalNames[3]",
            "'edge_1.example.org' is not a DNS name or an IP address",
        ),
    ]


def test_the_default_is_the_headless_service_only():
    objects = core_objects(_distributed(sts_pool("a", 1)))
    services = [
        o["metadata"]["name"] for o in objects if o["kind"] == "Service" and "supernode" in o["metadata"]["name"]
    ]
    assert services == ["dev-supernode-a"]
    assert not [w for w in warnings(plan_of(_distributed(sts_pool("a", 1)))) if "ClientAppIo" in w]


def test_an_exposed_api_is_refused_where_it_reaches_nothing_several_or_is_blocked():
    pool = sts_pool("a", 3, service={"type": "LoadBalancer"})
    raw = process_cfg(pool)  # sidecars: the API binds 127.0.0.1
    assert problems(raw) == [
        (
            "federation.supernodes.pools[0].networkPolicy.allowExternal",
            "the LoadBalancer Service is for SuperExecs outside the cluster, which the pool's NetworkPolicy keeps out: "
            "set networkPolicy.allowExternal: true to accept that the Runtime API is reachable from outside (a "
            "SuperExec there needs the pool's SuperExec auth secret)",
        ),
        (
            "federation.supernodes.pools[0].service.type",
            "a LoadBalancer Service reaches the ClientAppIo API only with distributed SuperExecs (isolationMode: "
            "process, superexecPlacement: distributed); otherwise it binds 127.0.0.1 in the SuperNode's pod",
        ),
        (
            "federation.supernodes.pools[0].service.type",
            "a LoadBalancer Service spreads connections over the pool's SuperNodes, but a SuperExec must stay with "
            "one: use replicas: 1 (a pool per exposed SuperNode)",
        ),
    ]
    # A policy turned off (for the pool, or above it) lets it through as well.
    exposed = {"type": "LoadBalancer", "externalNames": ["a.example.org"]}
    ok = _distributed(sts_pool("a", 1, service=exposed), networkPolicy={"enabled": False})
    assert core_objects(ok)


def test_service_and_port_values_are_checked():
    pool = sts_pool(
        "a",
        1,
        service={"type": "ClusterIP", "nodePort": 30000, "portName": "client_app_io", "port": 0},
        containerPorts={"clientAppIo": 8081},
    )
    assert problems(_distributed(pool)) == [
        ("federation.supernodes.pools[0].containerPorts", "clientAppIo and health are both 8081"),
        ("federation.supernodes.pools[0].service.nodePort", "only with service.type NodePort or LoadBalancer"),
        ("federation.supernodes.pools[0].service.port", "Input should be greater than or equal to 1, not 0"),
        (
            "federation.supernodes.pools[0].service.portName",
            "'client_app_io' is not a port name: at most 15 lowercase letters, digits and '-', with a letter",
        ),
    ]


def test_sidecar_health_port_stays_free_in_the_shared_pod():
    raw = process_cfg(sts_pool("a", 1, containerPorts={"health": 8082}))
    assert problems(raw) == [
        (
            "federation.supernodes.pools[0].containerPorts.health",
            "port 8082 is the SuperExec sidecar's health server's in this shared pod (or move it: "
            "superexec.containerPorts.health)",
        )
    ]
    moved = process_cfg(
        sts_pool("a", 1, containerPorts={"health": 8082}, superexec={"containerPorts": {"health": 8083}})
    )
    pod = get(core_objects(moved), "StatefulSet", "dev-supernode-a")
    assert container(pod, "supernode")["livenessProbe"]["grpc"]["port"] == 8082
    assert container(pod, "superexec-clientapp")["livenessProbe"]["grpc"]["port"] == 8083
