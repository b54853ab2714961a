"""Validation of roles, sites and clusters: a key that makes no sense for the stack's role
is an error at its own path; a site needs the hub's address and exactly one CA source; a
hub must be reachable; sites need node authentication and real public keys; clusters are
named and referenced correctly. Every problem at once, each by its path."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.stacks import base
from tests.support.validation import assert_problems, config_error

PEM = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"
KEY = (
    "ecdsa-sha2-nistp384 AAAAE2VjZHNhLXNoYTItbmlzdHAzODQAAAAIbmlzdHAzODQAAABhBIirZgKjeR0m5MgxKUn8eFbLryve2CNpA1qLQGM82bvzl"
    "HpxQW84o24AYn2SP9/GEzmBsxRtAfZWaCQ+e9nb5567JpaFy0swNW9qBtOGJ15NUURyR1hZ7dHLOehaaoG/jg== lab-c/0"
)


def site(**remote: Any) -> dict[str, Any]:
    raw = base(role="site")
    raw["supernodes"]["superlink"] = remote
    return raw


def hub(**extra: Any) -> dict[str, Any]:
    raw = base(role="hub", **extra)
    raw["supernodes"] = {}
    return raw


CASES = {
    "hub-with-pools-and-no-way-in": (
        {**base(role="hub")},
        [
            "federation.supernodes.pools: a hub runs no SuperNodes: put pools in site stacks (role: site), or use "
            "role: federation",
            "federation.superlink.externalAddress: a hub is dialled from other clusters: set superlink.externalAddress, "
            "superlink.ingress or tls.dnsNames",
            "federation.superlink.service.type: a hub must be reachable from other clusters: set LoadBalancer or "
            "NodePort, or add superlink.ingress",
        ],
    ),
    "hub-with-supernode-settings": (
        {**hub(superlink={"ingress": {"host": "fl.example.org"}}), "supernodes": {"image": "flwr/supernode:1.41.0"}},
        ["federation.supernodes.image: a hub runs no SuperNodes: this belongs in a site stack"],
    ),
    "site-with-superlink-keys-and-tls": (
        {
            **site(address="fl.example.org", certificate={"pem": PEM}),
            "superlink": {"image": "x"},
            "tls": {"dnsNames": ["a"]},
        },
        [
            "federation.superlink.image: a site runs no SuperLink: its SuperNodes dial supernodes.superlink",
            "federation.tls: a site serves no TLS; it trusts the hub's CA (supernodes.superlink.certificate)",
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
            "sites": [
                {"name": "a", "publicKeys": ["ssh-rsa AAAA nope"]},
                {"name": "a", "publicKeys": [KEY], "fromStack": "acme/p/a"},
            ],
        },
        [
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
        "external address: set superlink.externalAddress, superlink.ingress or tls.dnsNames"
    ],
)


@pytest.mark.parametrize("case", sorted(CASES))
def test_role_site_and_cluster_problems_are_reported_by_path(case: str) -> None:
    raw, expected = CASES[case]
    assert_problems(config_error(raw), expected)


def test_a_hub_needs_no_pools_and_a_site_no_superlink() -> None:
    # The operator's "at least one pool" rule is for federation and site stacks only.
    from federation.plan import load_plan

    plan = load_plan(hub(superlink={"ingress": {"host": "fl.example.org"}}), "dev")
    assert plan.role == "hub" and plan.clusters == [""] and not plan.spec.supernodes.pools
    site_plan = load_plan(site(address="fl.example.org", port=443, certificate={"pem": PEM}), "dev")
    assert not site_plan.runs_superlink and str(site_plan.remote.endpoint) == "fl.example.org:443"
