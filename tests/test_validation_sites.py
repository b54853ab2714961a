"""Validation of roles, sites and clusters: a key that makes no sense for the stack's role
is an error at its own path; a site needs the hub's address and exactly one CA source; a
hub must be reachable; sites need node authentication and real public keys; clusters are
named and referenced correctly. Every problem at once, each by its path."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.certificates import ca_pem
from tests.support.stacks import HTTP_ERA, base
from tests.support.validation import assert_problems, config_error

PEM = ca_pem()
KEY = (
    "ecdsa-sha2-nistp384 AAAAE2VjZHNhLXNoYTItbmlzdHAzODQAAAAIbmlzdHAzODQAAABhBIirZgKjeR0m5MgxKUn8eFbLryve2CNpA1qLQGM82bvzl"
    "HpxQW84o24AYn2SP9/GEzmBsxRtAfZWaCQ+e9nb5567JpaFy0swNW9qBtOGJ15NUURyR1hZ7dHLOehaaoG/jg== lab-c/0"
)


def site(**remote: Any) -> dict[str, Any]:
    raw = base(role="site")
    raw["supernodes"]["superlink"] = remote
    return raw


def hub(version: str = HTTP_ERA, **extra: Any) -> dict[str, Any]:
    """A hub that passes the exposure and node-auth rules unless a test says otherwise."""
    raw = base(version, role="hub", nodeAuth={"enabled": True}, **extra)
    raw["supernodes"] = {}
    return raw


CASES = {
    "hub-with-pools-and-no-way-in": (
        {**base(role="hub")},
        [
            "federation.nodeAuth.enabled: a hub accepts SuperNodes from other organisations: set nodeAuth.enabled: "
            "true, so only the keys it registers may join",
            "federation.supernodes.pools: a hub runs no SuperNodes: put pools in site stacks (role: site), or use "
            "role: federation",
            "federation.superlink.externalAddress: a hub is dialled from other clusters: set superlink.externalAddress, "
            "superlink.gateway, superlink.ingress or tls.dnsNames",
            "federation.superlink.service.type: a hub must be reachable from other clusters: set LoadBalancer or "
            "NodePort, or add superlink.gateway (or superlink.ingress)",
        ],
    ),
    "hub-with-supernode-settings": (
        {**hub(superlink={"ingress": {"host": "fl.example.org"}}), "supernodes": {"image": "flwr/supernode:1.41.0"}},
        ["federation.supernodes.image: a hub runs no SuperNodes: this belongs in a site stack"],
    ),
    "site-with-superlink-keys-and-tls": (
        {
            **site(address="fl.example.org", certificate={"pem": PEM}),
            "superlink": {"image": "flwr/superlink:1.41.0"},
            "tls": {"dnsNames": ["a"]},
        },
        [
            "federation.superlink.image: a site runs no SuperLink: its SuperNodes dial supernodes.superlink",
            "federation.tls: a site takes no TLS settings: it trusts the hub's CA (supernodes.superlink.certificate) "
            "and generates its own CA for its SuperNodes' Runtime API (isolationMode process)",
        ],
    ),
    "site-without-remote": (
        base(role="site"),
        [
            "federation.supernodes.superlink: required for role site: the hub's address and CA (address, port, "
            "certificate.pem | existingSecret | fromStack)"
        ],
    ),
    "site-two-ca-sources-and-a-port-in-the-address": (
        site(address="fl.example.org:443", certificate={"pem": PEM, "existingSecret": "hub-ca"}),
        [
            "federation.createNamespace: certificate.existingSecret lives in the site's namespace, which must exist "
            "before the stack: set createNamespace: false (or give the CA as certificate.pem)",
            "federation.supernodes.superlink.address: 'fl.example.org:443' is not a host name or IP address (the port "
            "goes in `port`)",
            "federation.supernodes.superlink.certificate: set exactly one of pem, existingSecret, fromStack (the hub's "
            "CA certificate); found: pem, existingSecret",
        ],
    ),
    "site-no-address-no-ca-bad-cidr": (
        site(cidrs=["10.0.0.0/33"]),
        [
            "federation.supernodes.superlink.address: required: the hub's SuperLink host (or certificate.fromStack)",
            "federation.supernodes.superlink.certificate: set exactly one of pem, existingSecret, fromStack (the hub's "
            "CA certificate); found: none",
            "federation.supernodes.superlink.cidrs[0]: '10.0.0.0/33' is not a CIDR (e.g. 203.0.113.0/24)",
        ],
    ),
    "remote-superlink-outside-a-site": (
        {**base(), "supernodes": {**base()["supernodes"], "superlink": {"address": "x"}}},
        [
            "federation.supernodes.superlink: supernodes.superlink is for role site only: a hub or federation runs the SuperLink itself"
        ],
    ),
    "sites-need-node-auth-and-real-keys": (
        {
            **hub(superlink={"ingress": {"host": "fl.example.org"}}),
            "nodeAuth": {"enabled": False},
            "sites": [
                {"name": "a", "publicKeys": ["ssh-rsa AAAA nope"]},
                {"name": "a", "publicKeys": [KEY], "fromStack": "acme/p/a"},
            ],
        },
        [
            "federation.nodeAuth.enabled: a hub accepts SuperNodes from other organisations: set nodeAuth.enabled: "
            "true, so only the keys it registers may join",
            "federation.sites: sites are admitted by their node keys: set nodeAuth.enabled: true",
            "federation.sites[0].publicKeys[0]: 'ssh-rsa AAAA nope' must be an OpenSSH ECDSA public key line "
            "(ecdsa-sha2-nistp384 AAAA... comment)",
            "federation.sites[1]: set exactly one of publicKeys (inline) and fromStack (the site stack's output)",
            "federation.sites[1].name: duplicate site name 'a' (also sites[0])",
        ],
    ),
    "clusters": (
        {
            **base(superlink={"cluster": "nowhere"}),
            "clusters": {"default": {"context": "x"}, "east": {}},
        },
        [
            "federation.clusters.default: 'default' names the stack's ambient cluster; choose another name",
            "federation.clusters.east: set kubeconfig (a secret) or context",
            "federation.superlink.cluster: 'nowhere' is not a key of clusters (known: default, east)",
            # and so every pool is in another cluster than the SuperLink's
            "federation.supernodes.pools[0].cluster: this pool runs in another cluster than the SuperLink and dials "
            "its external address: set superlink.externalAddress, superlink.ingress or tls.dnsNames",
        ],
    ),
    "a-pool-in-another-cluster-needs-an-external-address": (
        {**base(), "clusters": {"east": {"context": "east"}}},
        [],  # filled below
    ),
}
_remote_pool = CASES["a-pool-in-another-cluster-needs-an-external-address"][0]
_remote_pool["supernodes"]["pools"][1]["cluster"] = "east"
CASES["a-pool-in-another-cluster-needs-an-external-address"] = (
    _remote_pool,
    [
        "federation.supernodes.pools[1].cluster: this pool runs in another cluster than the SuperLink and dials its "
        "external address: set superlink.externalAddress, superlink.ingress or tls.dnsNames",
    ],
)


CASES["http-era-hub-without-the-fleet-proxy-must-accept-the-control-api"] = (
    {**hub(superlink={"ingress": {"host": "fl.example.org"}, "fleetProxy": {"enabled": False}})},
    [
        f"federation.superlink.fleetProxy.enabled: Flower {HTTP_ERA} serves Fleet and Control on one port: without the "
        "Fleet-only proxy, exposing this SuperLink outside its cluster exposes its Control API too (`flwr run` runs "
        "code at every site). Remove fleetProxy.enabled: false, or set superlink.exposeControlApi: true to accept that",
    ],
)
CASES["control-service-and-gateway-mistakes"] = (
    hub(
        superlink={
            "controlService": {"type": "LoadBalancer", "port": 8000},
            "gateway": {"parentRefs": [{"name": "Public_GW", "namespace": "gw.system"}], "hostname": "*.example.org"},
        }
    ),
    [
        "federation.superlink.controlService.loadBalancerSourceRanges: required with type LoadBalancer: the CIDRs "
        "allowed to reach the Control API (`flwr run` runs code at every site), e.g. your operators' egress addresses",
        "federation.superlink.controlService.port: 8000 is the Fleet port (superlink.service.ports.http), which the "
        "Fleet-only proxy serves: choose another port for the SuperLink's own API",
        "federation.superlink.gateway.hostname: '*.example.org' is not a DNS name (sites dial it; no wildcard)",
        "federation.superlink.gateway.parentRefs[0].name: 'Public_GW' is not a Gateway API object name",
        "federation.superlink.gateway.parentRefs[0].namespace: 'gw.system' is not a namespace name",
        "federation.superlink.gateway.parentRefs[0].sectionName: unset: the route would attach to every listener of "
        "Gateway 'Public_GW', plain-HTTP ones included (the Fleet API in clear); name the listener sites dial (HTTPS, "
        "or TLS passthrough in the gRPC era), or set allListeners: true",
    ],
)
CASES["gateway-parent-ref-names-its-listener"] = (
    hub(
        superlink={
            "gateway": {
                "parentRefs": [
                    {"name": "public", "sectionName": "fleet"},
                    {"name": "edge", "namespace": "gateway-system", "port": 443},
                    {"name": "tls-only", "allListeners": True},  # the explicit opt-in
                ],
                "hostname": "fl.example.org",
            }
        }
    ),
    [
        "federation.superlink.gateway.parentRefs[1].sectionName: unset: the route would attach to every listener of "
        "Gateway 'edge', plain-HTTP ones included (the Fleet API in clear); name the listener sites dial (HTTPS, or "
        "TLS passthrough in the gRPC era), or set allListeners: true",
    ],
)
CASES["gateway-hostname-is-a-name-without-port"] = (
    hub(
        superlink={
            "gateway": {"parentRefs": [{"name": "public", "sectionName": "fleet"}], "hostname": "fl.example.org:443"}
        }
    ),
    [
        "federation.superlink.gateway.hostname: 'fl.example.org:443': give the name only (sites dial it on the "
        "listener's port, 443)"
    ],
)
CASES["control-service-source-ranges-are-cidrs"] = (
    hub(
        superlink={
            "ingress": {"host": "fl.example.org"},
            "controlService": {"type": "LoadBalancer", "loadBalancerSourceRanges": ["10.0.0.1/40"]},
        }
    ),
    [
        "federation.superlink.controlService.loadBalancerSourceRanges[0]: '10.0.0.1/40' is not a CIDR (e.g. "
        "198.51.100.0/24)"
    ],
)


CASES["grpc-era-hub-on-a-node-port-needs-the-node-port"] = (
    hub("1.26.1", superlink={"service": {"type": "NodePort"}, "externalAddress": "fl.example.org"}),
    [
        "federation.superlink.externalAddress: with a NodePort Service, give the node address and the node port sites "
        "dial (host:port); Kubernetes picks the node port (30000-32767), not the Fleet port"
    ],
)


@pytest.mark.parametrize("case", sorted(CASES))
def test_role_site_and_cluster_problems_are_reported_by_path(case: str) -> None:
    raw, expected = CASES[case]
    assert_problems(config_error(raw), expected)


def test_a_hub_needs_no_pools_and_a_site_no_superlink() -> None:
    # The operator's "at least one pool" rule is for federation and site stacks only.
    from flower_federation.plan import load_plan

    plan = load_plan(hub(superlink={"ingress": {"host": "fl.example.org"}}), "dev")
    assert plan.role == "hub" and plan.clusters == [""] and not plan.spec.supernodes.pools
    site_plan = load_plan(site(address="fl.example.org", port=443, certificate={"pem": PEM}), "dev")
    assert not site_plan.runs_superlink and str(site_plan.remote.endpoint) == "fl.example.org:443"


@pytest.mark.parametrize("placement", ["sidecar", "distributed"])
def test_a_site_runs_process_isolation_without_a_superlink_image(placement: str) -> None:
    # The operator's superexecImage rule is about the SuperLink's SuperExec, which a site does not run
    # (the SuperNode chart's "Isolated Setup" is a site in process isolation). Its pools still need
    # their ClientApp SuperExec images, and a superlink.superexecImage is refused once, by the role rules.
    from flower_federation.plan import load_plan

    raw = base(isolation="process", placement=placement, role="site")
    raw.pop("superlink")
    raw["supernodes"]["superlink"] = {"address": "fl.example.org", "certificate": {"pem": PEM}}
    images = [pool.pop("images") for pool in raw["supernodes"]["pools"]]
    assert_problems(
        config_error(raw),
        [
            f"federation.supernodes.pools[{i}].images.superexecClientApp: is required when isolationMode=process"
            for i in range(len(images))
        ],
    )
    for pool, own in zip(raw["supernodes"]["pools"], images, strict=True):
        pool["images"] = own
    plan = load_plan(raw, "dev")
    assert plan.process_isolation and plan.distributed is (placement == "distributed")
    raw["superlink"] = {"superexecImage": "flwr/superexec:1.41.0"}
    assert_problems(
        config_error(raw),
        ["federation.superlink.superexecImage: a site runs no SuperLink: its SuperNodes dial supernodes.superlink"],
    )


def test_load_balancer_source_ranges_must_be_cidrs() -> None:
    # Found by the config fuzzer: any string reached the Service, which the API server refuses.
    raw = hub(
        superlink={
            "externalAddress": "fl.example.org",
            "service": {"type": "LoadBalancer", "loadBalancerSourceRanges": ["198.51.100.0/24", "nope", "10.0.0.1"]},
        }
    )
    assert_problems(
        config_error(raw),
        [
            "federation.superlink.service.loadBalancerSourceRanges[1]: 'nope' is not a CIDR (e.g. 198.51.100.0/24)",
            "federation.superlink.service.loadBalancerSourceRanges[2]: '10.0.0.1' is not a CIDR (e.g. 198.51.100.0/24)",
        ],
    )


def test_site_cidrs_need_a_prefix() -> None:
    # They become NetworkPolicy ipBlocks, which the API server refuses without one.
    raw = site(address="fl.example.org", certificate={"pem": PEM}, cidrs=["203.0.113.9", "203.0.113.0/24"])
    assert_problems(
        config_error(raw),
        ["federation.supernodes.superlink.cidrs[0]: '203.0.113.9' is not a CIDR (e.g. 203.0.113.0/24)"],
    )
