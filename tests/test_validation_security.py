"""Validation of the security settings: every rule reports its config path and
message (node auth needs TLS and Flower 1.23+, TLS and trust sources have what they
need, durations, names and addresses are well formed, the Kubernetes executor's
requirements, NetworkPolicy fragments, probes, disruption budgets, security contexts)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from tests.support.stacks import GRPC_ERA, base
from tests.support.validation import assert_problems, config_error


def _pool_field(raw: dict, i: int, **fields: Any) -> dict:
    raw["supernodes"]["pools"][i].update(fields)
    return raw


CM = {"issuerRef": {"name": "ca"}}
DAEMONSET_GENERATE = (
    "a DaemonSet's pods are not known in advance, so per-node keys cannot be generated; set "
    "keySource: config and supply one key per Kubernetes node name in the secret config "
    "nodeAuthKeys ({pool: {node-name: key}})"
)

CONFIG_CASES = {
    "node-auth-insecure": (
        base(insecure=True, nodeAuth={"enabled": True}),
        ["federation.nodeAuth.enabled: node authentication needs TLS (the SuperLink refuses it with insecure: true)"],
    ),
    "node-auth-daemonset-generate": (
        base(mode="DaemonSet", nodeAuth={"enabled": True}),
        [f"federation.nodeAuth.keySource: {DAEMONSET_GENERATE}"],
    ),
    "node-auth-before-1.23": (
        base("1.21.0", nodeAuth={"enabled": True}),
        [
            "federation.nodeAuth.enabled: node authentication with `flwr supernode register` needs Flower 1.23.0 "
            "or later; this federation runs 1.21.0"
        ],
    ),
    "tls-with-insecure": (
        base(insecure=True, tls={"source": "generate"}),
        ["federation.tls: TLS settings have no effect with insecure: true; remove one of the two"],
    ),
    "existing-secret-unnamed": (
        base(tls={"source": "existingSecret"}),
        [
            "federation.tls.existingSecret: name the kubernetes.io/tls Secret (tls.crt, tls.key, optional ca.crt) "
            "for source existingSecret"
        ],
    ),
    "existing-secret-without-its-source": (
        base(tls={"existingSecret": "my-tls"}),
        ["federation.tls.existingSecret: only used with tls.source: existingSecret (source is generate)"],
    ),
    "cert-manager-without-issuer": (
        base(tls={"source": "certManager"}),
        ["federation.tls.certManager.issuerRef: name the cert-manager Issuer or ClusterIssuer for source certManager"],
    ),
    "bad-durations": (
        base(tls={"source": "certManager", "certManager": {**CM, "duration": "1y", "renewBefore": "15d"}}),
        [
            "federation.tls.certManager.duration: '1y' is not a duration (e.g. 43800h, 360h)",
            "federation.tls.certManager.renewBefore: '15d' is not a duration (e.g. 43800h, 360h)",
        ],
    ),
    "early-renewal-not-below-validity": (
        base(tls={"generate": {"validityHours": 720}}),
        ["federation.tls.generate.earlyRenewalHours: must be less than validityHours (720)"],
    ),
    "generated-trust-without-generated-ca": (
        base(tls={"source": "existingSecret", "existingSecret": "my-tls", "trust": {"source": "generated"}}),
        [
            "federation.tls.trust.source: there is no generated CA with tls.source existingSecret; use "
            "copyFromServerSecret or existingSecret"
        ],
    ),
    "generated-certificate-with-another-ca": (
        # Found by the config fuzzer: this reached the Pulumi shell and crashed it (KeyError).
        base(tls={"trust": {"source": "existingSecret", "existingSecret": "my-ca"}}),
        [
            "federation.tls.trust.source: 'existingSecret' cannot verify a generated server certificate (only the "
            "generated CA signs it); leave trust unset (generated) or use tls.source existingSecret/certManager with "
            "your own CA"
        ],
    ),
    "trust-existing-secret-unnamed": (
        base(tls={"source": "existingSecret", "existingSecret": "my-tls", "trust": {"source": "existingSecret"}}),
        [
            "federation.tls.trust.existingSecret: name the Secret holding the CA certificate for trust.source "
            "existingSecret"
        ],
    ),
    "bad-dns-names-and-ips": (
        base(
            tls={
                "dnsNames": ["flower.example.com", "Bad_Name", "-x"],
                "ipAddresses": ["10.0.0.1", "999.1.1.1", "::1", "nope"],
            }
        ),
        [
            "federation.tls.dnsNames[1]: 'Bad_Name' is not a DNS name",
            "federation.tls.dnsNames[2]: '-x' is not a DNS name",
            "federation.tls.ipAddresses[1]: '999.1.1.1' is not an IP address",
            "federation.tls.ipAddresses[3]: 'nope' is not an IP address",
        ],
    ),
    "extra-rules-unknown-field": (
        _pool_field(
            base(),
            1,
            networkPolicy={
                "extraIngress": [{"ports": [{"port": 1}]}, {"from": [], "bogus": 1}],
                "extraEgress": [{"to": "x"}],
            },
        ),
        [
            "federation.supernodes.pools[1].networkPolicy.extraIngress[1]: not a Kubernetes field here: Additional "
            "properties are not allowed ('bogus' was unexpected)",
            "federation.supernodes.pools[1].networkPolicy.extraEgress[0].to: 'x' is not of type 'array', 'null'",
        ],
    ),
    # ipBlocks as the API server checks them (the schema takes any string).
    "extra-rules-ip-blocks": (
        base(
            networkPolicy={
                "extraIngress": [{"from": [{"ipBlock": {"cidr": "10.0.0.0", "except": ["10.1.0.0/16"]}}]}],
                "extraEgress": [
                    {
                        "to": [
                            {
                                "ipBlock": {
                                    "cidr": "10.0.0.0/8",
                                    "except": ["10.1.0.0/16", "10.0.0.0/8", "192.168.0.0/16", "x"],
                                }
                            }
                        ]
                    }
                ],
            },
        ),
        [
            "federation.networkPolicy.extraIngress[0].from[0].ipBlock.cidr: '10.0.0.0' is not a CIDR (e.g. 10.0.0.0/8)",
            "federation.networkPolicy.extraEgress[0].to[0].ipBlock.except[1]: '10.0.0.0/8' is not strictly inside cidr '10.0.0.0/8'",
            "federation.networkPolicy.extraEgress[0].to[0].ipBlock.except[2]: '192.168.0.0/16' is not strictly inside cidr '10.0.0.0/8'",
            "federation.networkPolicy.extraEgress[0].to[0].ipBlock.except[3]: 'x' is not a CIDR (e.g. 10.1.0.0/16)",
        ],
    ),
    "ns-pod-labels-without-ns-labels": (
        base(superlink={"networkPolicy": {"ingressNSPodMatchLabels": {"role": "cli"}}}),
        ["federation.superlink.networkPolicy.ingressNSPodMatchLabels: only used together with ingressNSMatchLabels"],
    ),
    "liveness-success-threshold": (
        base(
            probes={"livenessProbe": {"successThreshold": 2}},
            superlink={"probes": {"livenessProbe": {"successThreshold": 3}, "readinessProbe": {"successThreshold": 3}}},
        ),
        [
            "federation.probes.livenessProbe.successThreshold: must be 1 for a liveness probe (a Kubernetes rule)",
            "federation.superlink.probes.livenessProbe.successThreshold: must be 1 for a liveness probe (a Kubernetes rule)",
        ],
    ),
    "executor-with-subprocess-isolation": (
        base(executor={"type": "kubernetes"}),
        ["federation.executor.type: the Kubernetes executor runs in the SuperExecs: it needs isolationMode=process"],
    ),
    "executor-with-sidecar": (
        base(isolation="process", executor={"type": "kubernetes"}),
        [
            "federation.executor.type: the Kubernetes executor's pods dial the SuperExec's API address, which a "
            "sidecar has only on its pod's loopback: set superexecPlacement: distributed"
        ],
    ),
    "executor-before-1.32-and-managed-keys": (
        base(
            GRPC_ERA,
            isolation="process",
            placement="distributed",
            executor={"type": "kubernetes", "config": {"namespace": "other", "service-account-name": "admin"}},
        ),
        [
            "federation.executor.type: the Kubernetes executor needs Flower 1.32.0 or later; this federation runs 1.26.1",
            "federation.executor.config.namespace: set by flower-federation (RBAC and NetworkPolicies depend on it)",
            "federation.executor.config.service-account-name: set by flower-federation (RBAC and NetworkPolicies "
            "depend on it)",
        ],
    ),
    "executor-settings-without-executor": (
        base(executor={"image": "x:1", "config": {"a": 1}}),
        [
            "federation.executor.image: only used with executor.type: kubernetes",
            "federation.executor.config: only used with executor.type: kubernetes",
        ],
    ),
    "disruption-budget": (
        _pool_field(
            _pool_field(base(), 0, disruptionBudget={"maxUnavailable": 1, "minAvailable": "50%"}),
            1,
            disruptionBudget={"maxUnavailable": "half", "minAvailable": -1},
        ),
        [
            "federation.supernodes.pools[0].disruptionBudget: set maxUnavailable or minAvailable, not both",
            "federation.supernodes.pools[1].disruptionBudget: set maxUnavailable or minAvailable, not both",
            "federation.supernodes.pools[1].disruptionBudget.maxUnavailable: 'half' must be a count or a percentage "
            "from 0% to 100%",
            "federation.supernodes.pools[1].disruptionBudget.minAvailable: must not be negative",
        ],
    ),
    "security-context-not-a-mapping": (
        base(securityContext="restricted"),
        ["federation.securityContext: must be a mapping, not 'restricted'"],
    ),
    "security-contexts-wrong-types": (
        base(securityContext={"runAsUser": "root"}, podSecurityContext={"runAsNonRoot": "yes"}),
        [
            "federation.securityContext.runAsUser: 'root' is not of type 'integer', 'null'",
            "federation.podSecurityContext.runAsNonRoot: 'yes' is not of type 'boolean', 'null'",
        ],
    ),
    # Kubernetes refuses a privileged container that may not escalate.
    "privileged-without-escalation": (
        base(
            securityContext={"privileged": True, "allowPrivilegeEscalation": False},
            superlink={
                "podTemplate": {
                    "spec": {
                        "containers": [
                            {
                                "name": "superlink",
                                "securityContext": {"privileged": True, "allowPrivilegeEscalation": False},
                            }
                        ]
                    }
                }
            },
        ),
        [
            "federation.securityContext.allowPrivilegeEscalation: Kubernetes refuses false for a privileged container",
            "federation.superlink.podTemplate.spec.containers[0].securityContext.allowPrivilegeEscalation: Kubernetes "
            "refuses false for a privileged container",
        ],
    ),
}


@pytest.mark.parametrize("case", sorted(CONFIG_CASES))
def test_config_rules(case):
    raw, expected = CONFIG_CASES[case]
    assert_problems(config_error(copy.deepcopy(raw)), expected)


def test_cert_manager_renew_before_must_be_shorter_than_duration():
    """cert-manager's webhook refuses renewBefore >= duration; like earlyRenewalHours for
    generated certificates, validation should report it at the config path."""
    err = config_error(
        base(tls={"source": "certManager", "certManager": {**CM, "duration": "240h", "renewBefore": "360h"}})
    )
    assert [p.path for p in err.problems] == ["federation.tls.certManager.renewBefore"]


@pytest.mark.parametrize("where", ["securityContext", "podTemplate"])
def test_privileged_asks_for_privilege_escalation_too(where):
    # Found by the config fuzzer: `privileged: true` over our restricted context rendered
    # privileged with allowPrivilegeEscalation false, which the API server refuses.
    from flower_federation.builders import manifests
    from flower_federation.plan import load_plan

    privileged = {"privileged": True}
    if where == "securityContext":
        raw = base(securityContext=privileged)
    else:
        raw = base(
            superlink={"podTemplate": {"spec": {"containers": [{"name": "superlink", "securityContext": privileged}]}}}
        )
    for obj in manifests.render(load_plan(raw, "dev")).objects():
        for c in obj.get("spec", {}).get("template", {}).get("spec", {}).get("containers", []):
            security = c["securityContext"]
            if security.get("privileged") or (where == "securityContext"):
                assert security["privileged"] is True and security["allowPrivilegeEscalation"] is True, c["name"]
