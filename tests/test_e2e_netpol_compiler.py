"""The e2e harness's NetworkPolicy compiler (tests/e2e/harness/netpol.py) on its own, no
root: the Kubernetes semantics it implements, each on a small hand-written policy, then
the policies the product renders for the e2e federations (both dialects, sidecar and
distributed SuperExecs) and the NetworkPolicy knobs stack, compiled for pods with the
labels their controllers give them: what Flower needs passes, everything else is dropped.
The e2e tests load the same rulesets into the pods' network namespaces and probe them
with real connections."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from tests.e2e.harness import enforce
from tests.e2e.harness.enforce import DNS_LABELS, OUTSIDE_IP
from tests.e2e.harness.host import HarnessError
from tests.e2e.harness.netpol import (
    Endpoint,
    PolicyError,
    compile_policies,
    flow_allowed,
    policy_types,
    ruleset,
    selector_matches,
)
from tests.e2e.stack import CLI_LABELS, NAMESPACE, config
from tests.support.manifests import by_kind
from tests.support.render import core_objects
from tests.support.security_matrix import NS, security_objects
from tests.support.stacks import GRPC_ERA, HTTP_ERA

NODE = "10.9.0.1"


def policy(name: str, spec: dict[str, Any], namespace: str = "ns") -> dict[str, Any]:
    return {"kind": "NetworkPolicy", "metadata": {"name": name, "namespace": namespace}, "spec": spec}


def ep(name: str, ip: str, labels: dict[str, str] | None = None, namespace: str = "ns", **ports: int) -> Endpoint:
    return Endpoint(name, f"netns-{name}", namespace, ip, labels or {}, {k: (v, "TCP") for k, v in ports.items()})


# --- semantics ----------------------------------------------------------------------------


def test_selectors_match_labels_and_expressions():
    labels = {"app": "web", "tier": "front"}
    assert selector_matches({}, labels) and selector_matches(None, {})
    assert selector_matches({"matchLabels": {"app": "web"}}, labels)
    assert not selector_matches({"matchLabels": {"app": "db"}}, labels)
    expr = lambda op, *values: {"matchExpressions": [{"key": "tier", "operator": op, "values": list(values)}]}  # noqa: E731
    assert selector_matches(expr("In", "front", "back"), labels)
    assert not selector_matches(expr("In", "back"), labels)
    assert selector_matches(expr("NotIn", "back"), labels) and selector_matches(expr("NotIn", "x"), {})
    assert not selector_matches(expr("NotIn", "front"), labels)
    assert selector_matches(expr("Exists"), labels) and not selector_matches(expr("Exists"), {})
    assert selector_matches(expr("DoesNotExist"), {}) and not selector_matches(expr("DoesNotExist"), labels)
    with pytest.raises(PolicyError):
        selector_matches(expr("Gt", "1"), labels)


def test_policy_types_default_as_the_api_server_sets_them():
    assert policy_types(policy("p", {"podSelector": {}})) == ["Ingress"]
    assert policy_types(policy("p", {"podSelector": {}, "egress": [{}]})) == ["Ingress", "Egress"]
    assert policy_types(policy("p", {"podSelector": {}, "policyTypes": ["Egress"]})) == ["Egress"]


def test_unselected_pods_and_directions_are_open():
    web, other = ep("web", "10.9.0.10", {"app": "web"}), ep("other", "10.9.0.11")
    # Selects web for ingress only: web's egress stays open, `other` is not selected at all.
    rules = compile_policies([policy("p", {"podSelector": {"matchLabels": {"app": "web"}}})], [web, other])
    assert rules[web.netns].ingress.isolated and not rules[web.netns].egress.isolated
    assert not rules[other.netns].ingress.isolated and not rules[other.netns].egress.isolated
    assert flow_allowed(rules, web, other.ip, "TCP", 80)
    assert not flow_allowed(rules, other, web.ip, "TCP", 80)  # isolated, no rule: default deny


def test_rules_add_up_across_policies_and_need_both_ends():
    a, b = ep("a", "10.9.0.10", {"app": "a"}), ep("b", "10.9.0.11", {"app": "b"})
    policies = [
        policy("b-in-80", {"podSelector": {"matchLabels": {"app": "b"}}, "ingress": [{"ports": [{"port": 80}]}]}),
        policy("b-in-81", {"podSelector": {"matchLabels": {"app": "b"}}, "ingress": [{"ports": [{"port": 81}]}]}),
        policy(
            "a-out",
            {
                "podSelector": {"matchLabels": {"app": "a"}},
                "policyTypes": ["Egress"],
                "egress": [{"to": [{"podSelector": {"matchLabels": {"app": "b"}}}], "ports": [{"port": 80}]}],
            },
        ),
    ]
    rules = compile_policies(policies, [a, b])
    assert flow_allowed(rules, a, b.ip, "TCP", 80)
    assert not flow_allowed(rules, a, b.ip, "TCP", 81)  # b admits it, a's egress does not
    assert not flow_allowed(rules, a, b.ip, "UDP", 80)  # the protocol defaults to TCP
    assert not flow_allowed(rules, a, "10.9.0.99", "TCP", 80)  # only to b


def test_namespace_selectors_use_namespace_labels_and_the_name_label():
    server = ep("server", "10.9.0.10", {"app": "s"})
    same_ns = ep("peer", "10.9.0.11", {"role": "cli"})
    ml = ep("ml", "10.9.0.12", {"role": "cli"}, namespace="ml")
    ml_other = ep("ml-other", "10.9.0.13", {"role": "x"}, namespace="ml")
    system = ep("dns", "10.9.0.14", {"k8s-app": "kube-dns"}, namespace="kube-system")
    spec = {
        "podSelector": {},
        "ingress": [
            {
                "from": [
                    {
                        "namespaceSelector": {"matchLabels": {"team": "ml"}},
                        "podSelector": {"matchLabels": {"role": "cli"}},
                    }
                ]
            },
            {"from": [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "kube-system"}}}]},
        ],
    }
    rules = compile_policies([policy("p", spec)], [server, same_ns, ml, ml_other, system], {"ml": {"team": "ml"}})
    assert flow_allowed(rules, ml, server.ip, "TCP", 1)
    assert not flow_allowed(rules, ml_other, server.ip, "TCP", 1)  # both selectors must match
    assert not flow_allowed(rules, same_ns, server.ip, "TCP", 1)  # its namespace has no team label
    assert flow_allowed(rules, system, server.ip, "UDP", 53)  # every pod of kube-system, any port
    # The policy lives in "ns": it selects no pod of "ml".
    assert not rules[ml.netns].ingress.isolated


def test_ip_blocks_with_exceptions_and_port_ranges():
    pod = ep("pod", "10.9.0.10", {"app": "p"})
    spec = {
        "podSelector": {},
        "policyTypes": ["Egress"],
        "egress": [
            {
                "to": [{"ipBlock": {"cidr": "192.0.2.0/24", "except": ["192.0.2.128/25"]}}],
                "ports": [{"port": 8000, "endPort": 8010}, {"protocol": "UDP"}],
            }
        ],
    }
    rules = compile_policies([policy("p", spec)], [pod])
    assert flow_allowed(rules, pod, "192.0.2.1", "TCP", 8005)
    assert flow_allowed(rules, pod, "192.0.2.1", "UDP", 9)  # a protocol without a port: every port
    assert not flow_allowed(rules, pod, "192.0.2.1", "TCP", 8011)
    assert not flow_allowed(rules, pod, "192.0.2.200", "TCP", 8005)  # excepted
    assert not flow_allowed(rules, pod, "198.51.100.1", "TCP", 8005)
    text = ruleset(rules[pod.netns])
    assert "ip daddr 192.0.2.0/24 ip daddr != { 192.0.2.128/25 } tcp dport { 8000-8010 } accept" in text
    assert "ip daddr 192.0.2.0/24 ip daddr != { 192.0.2.128/25 } meta l4proto udp accept" in text


def test_named_ports_resolve_against_the_pod_that_has_them():
    server_a = ep("a", "10.9.0.10", {"app": "srv"}, api=8000)
    server_b = ep("b", "10.9.0.11", {"app": "srv"}, api=9000)
    nameless = ep("c", "10.9.0.12", {"app": "srv"})
    client = ep("client", "10.9.0.20", {"app": "cli"})
    policies = [
        policy("srv", {"podSelector": {"matchLabels": {"app": "srv"}}, "ingress": [{"ports": [{"port": "api"}]}]}),
        policy(
            "cli",
            {
                "podSelector": {"matchLabels": {"app": "cli"}},
                "policyTypes": ["Egress"],
                "egress": [{"to": [{"podSelector": {"matchLabels": {"app": "srv"}}}], "ports": [{"port": "api"}]}],
            },
        ),
    ]
    rules = compile_policies(policies, [server_a, server_b, nameless, client])
    # Ingress: each selected pod's own number; egress: each destination's.
    assert flow_allowed(rules, client, server_a.ip, "TCP", 8000)
    assert flow_allowed(rules, client, server_b.ip, "TCP", 9000)
    assert not flow_allowed(rules, client, server_a.ip, "TCP", 9000)
    assert not flow_allowed(rules, client, server_b.ip, "TCP", 8000)
    # A pod without the name: the rule allows it nothing (not "every port").
    assert rules[nameless.netns].ingress.isolated and rules[nameless.netns].ingress.allows == ()
    assert not flow_allowed(rules, client, nameless.ip, "TCP", 8000)


def test_selectors_matching_no_pod_allow_nothing():
    pod = ep("pod", "10.9.0.10", {"app": "p"})
    spec = {"podSelector": {}, "ingress": [{"from": [{"podSelector": {"matchLabels": {"app": "nobody"}}}]}]}
    rules = compile_policies([policy("p", spec)], [pod, ep("x", "10.9.0.11")])
    assert rules[pod.netns].ingress.isolated and rules[pod.netns].ingress.allows == ()


def test_the_ruleset_replaces_the_table_and_admits_the_node_and_loopback():
    server = ep("server", "10.9.0.10", {"app": "s"})
    peers = [ep(f"p{i}", f"10.9.0.{20 + i}", {"role": "c"}) for i in range(3)]
    spec = {
        "podSelector": {"matchLabels": {"app": "s"}},
        "policyTypes": ["Ingress", "Egress"],
        "ingress": [
            {"from": [{"podSelector": {"matchLabels": {"role": "c"}}}], "ports": [{"port": 9092}, {"port": 9093}]}
        ],
    }
    text = ruleset(compile_policies([policy("srv", spec)], [server, *peers])[server.netns], exempt=[NODE])
    assert text.splitlines()[:2] == ["table inet k8s-netpol", "delete table inet k8s-netpol"]
    assert (
        "    isolated by srv\n"
        "    ct state established,related accept\n"
        '    iif "lo" accept\n'
        '    ip saddr 10.9.0.1 accept comment "the node (kubelet probes)"\n'
        '    ip saddr { 10.9.0.20/31, 10.9.0.22 } tcp dport { 9092-9093 } accept comment "srv ingress[0]"\n'
        "    counter drop\n"
    ).replace("    isolated", "    # isolated") in text
    assert '    oif "lo" accept\n    counter drop\n' in text  # egress isolated, nothing allowed


# --- the product's policies ---------------------------------------------------------------


def pods_of(objects: list[dict[str, Any]]) -> list[Endpoint]:
    """A pod per replica of every workload, with the labels its controller adds (a
    StatefulSet's pod name and index: the gRPC era's pair policies select by the name)
    and its named container ports."""
    out = []
    ip = iter(range(10, 250))
    for w in objects:
        if w["kind"] not in ("StatefulSet", "Deployment", "Job", "DaemonSet"):
            continue
        name, template = w["metadata"]["name"], w["spec"]["template"]
        ports = {
            p["name"]: (p["containerPort"], p.get("protocol", "TCP"))
            for c in template["spec"]["containers"]
            for p in c.get("ports", [])
            if p.get("name")
        }
        for k in range(w["spec"].get("replicas", 1)):
            labels = dict(template["metadata"]["labels"])
            pod = f"{name}-{k}"
            if w["kind"] == "StatefulSet":  # what the StatefulSet controller labels its pods with
                labels["apps.kubernetes.io/pod-index"] = str(k)
                labels["statefulset.kubernetes.io/pod-name"] = pod
            if w["kind"] == "Job":
                labels["job-name"] = name
            out.append(Endpoint(pod, pod, w["metadata"]["namespace"], f"10.9.0.{next(ip)}", labels, ports))
    return out


class Federation:
    """The e2e federation's render compiled for its pods, the CLI's pod and an intruder."""

    def __init__(self, raw: dict[str, Any]):
        objects = core_objects(raw, "e2e")
        self.pods = {e.name: e for e in pods_of(objects)}
        namespace = raw.get("namespace", NAMESPACE)
        self.pods["cli"] = Endpoint("cli", "cli", namespace, "10.9.0.2", CLI_LABELS)
        self.pods["intruder"] = Endpoint("intruder", "intruder", namespace, "10.9.0.3", {"app": "intruder"})
        self.pods["kube-dns"] = Endpoint("kube-dns", "kube-dns", "kube-system", "10.9.0.4", DNS_LABELS)
        self.rules = compile_policies(by_kind(objects, "NetworkPolicy"), self.pods.values())

    def pod(self, prefix: str) -> Endpoint:
        return next(e for name, e in self.pods.items() if name.startswith(prefix))

    def can(self, src: str, dst: str, port: int, protocol: str = "TCP") -> bool:
        target = self.pod(dst).ip if not dst[0].isdigit() else dst
        return flow_allowed(self.rules, self.pod(src), target, protocol, port)


DIALECT_PORTS = {
    GRPC_ERA: {"fleet": 9092, "control": 9093, "appio": 9091},
    HTTP_ERA: dict.fromkeys(("fleet", "control", "appio"), 8000),
}


@pytest.mark.parametrize("version", [GRPC_ERA, HTTP_ERA])
def test_e2e_federation_admits_what_flower_needs_and_nothing_else(version):
    fed = Federation(config(version))
    p = DIALECT_PORTS[version]
    for sn in ("e2e-supernode-a-0", "e2e-supernode-a-2", "e2e-supernode-b-0"):
        assert fed.can(sn, "e2e-superlink", p["fleet"])
        assert not fed.can(sn, OUTSIDE_IP, 443), "a SuperNode's egress is closed"
        assert not fed.can("intruder", sn, 9094), "the Runtime/ClientAppIo port is closed"
        assert not fed.can("e2e-superlink", sn, 9094)
    assert fed.can("e2e-node-registration", "e2e-superlink", p["control"])
    assert fed.can("cli", "e2e-superlink", p["control"]) and fed.can("cli", "e2e-superlink", p["fleet"])
    assert not fed.can("intruder", "e2e-superlink", p["fleet"])
    assert not fed.can("intruder", "e2e-superlink", p["control"])
    assert fed.can("intruder", OUTSIDE_IP, 443), "no policy selects the intruder: its egress is open"
    for pod in ("e2e-superlink", "e2e-supernode-b-0", "e2e-node-registration"):
        assert fed.can(pod, "kube-dns", 53, "UDP") and fed.can(pod, "kube-dns", 53, "TCP")
        assert not fed.can(pod, "kube-dns", 54, "UDP")
    assert not fed.can("e2e-superlink", OUTSIDE_IP, 443)
    if version == GRPC_ERA:  # separate ports: least privilege is visible per port
        assert not fed.can("e2e-supernode-a-0", "e2e-superlink", p["control"])
        assert not fed.can("e2e-node-registration", "e2e-superlink", p["fleet"])
    superlink = fed.rules["e2e-superlink-0"]
    assert superlink.ingress.isolated and superlink.egress.isolated
    assert not fed.rules["intruder"].ingress.isolated and not fed.rules["cli"].egress.isolated


@pytest.mark.parametrize("version", [GRPC_ERA, HTTP_ERA])
def test_distributed_superexecs_reach_their_apis_and_only_those(version):
    raw = config(version, isolation="process", pools=[("a", 2), ("b", 1)])
    raw["superexecPlacement"] = "distributed"
    fed = Federation(raw)
    p = DIALECT_PORTS[version]
    assert fed.can("e2e-superexec-serverapp", "e2e-superlink", p["appio"])
    assert fed.can("e2e-superexec-a-1", "e2e-supernode-a-1", 9094)
    assert fed.can("e2e-superexec-b-0", "e2e-supernode-b-0", 9094)
    assert not fed.can("e2e-superexec-b-0", "e2e-supernode-a-0", 9094), "another pool's SuperNode"
    # gRPC era: a plaintext API, so SuperExec k may reach SuperNode k alone (the pair
    # policies, which select pods by their StatefulSet pod name); HTTP era: TLS and auth.
    assert fed.can("e2e-superexec-a-0", "e2e-supernode-a-1", 9094) is (version == HTTP_ERA)
    assert not fed.can("intruder", "e2e-supernode-a-0", 9094)
    assert not fed.can("e2e-superlink", "e2e-supernode-a-0", 9094)
    assert not fed.can("intruder", "e2e-superlink", p["appio"])
    assert not fed.can("e2e-superexec-a-0", "e2e-superlink", p["fleet"])
    assert not fed.can("e2e-superexec-a-0", OUTSIDE_IP, 443)


def test_knobs_stack_namespaces_extra_rules_and_open_egress():
    """The NetworkPolicy knobs (gRPC era: Fleet and Control apart): a pod labelled
    role=flwr-cli in a namespace labelled team=ml (ingressNSMatchLabels +
    ingressNSPodMatchLabels) or in the federation's namespace (ingressPodMatchLabels)
    reaches the Control API, no other pod does; allowExternal opens Fleet to anyone,
    extraIngress 9100; allowExternalEgress opens the SuperNodes' egress."""
    objects = list(security_objects("grpc-networkpolicy-knobs"))
    pods = pods_of(objects)
    ml_cli = Endpoint("ml-cli", "ml-cli", "ml", "10.9.1.1", {"role": "flwr-cli"})
    ml_other = Endpoint("ml-other", "ml-other", "ml", "10.9.1.2", {"role": "x"})
    local_cli = Endpoint("local-cli", "local-cli", NS, "10.9.1.3", {"role": "flwr-cli"})
    stranger = Endpoint("stranger", "stranger", NS, "10.9.1.4", {"role": "x"})
    extra = [ml_cli, ml_other, local_cli, stranger]
    rules = compile_policies(by_kind(objects, "NetworkPolicy"), [*pods, *extra], {"ml": {"team": "ml"}})
    superlink = next(e for e in pods if e.name.startswith("sec-superlink"))
    supernode = next(e for e in pods if e.name.startswith("sec-supernode-alpha"))
    assert flow_allowed(rules, ml_cli, superlink.ip, "TCP", 9093)
    assert flow_allowed(rules, local_cli, superlink.ip, "TCP", 9093)
    assert not flow_allowed(rules, ml_other, superlink.ip, "TCP", 9093)
    assert not flow_allowed(rules, stranger, superlink.ip, "TCP", 9093)
    assert flow_allowed(rules, stranger, superlink.ip, "TCP", 9092)  # allowExternal
    assert flow_allowed(rules, stranger, superlink.ip, "TCP", 9100)  # extraIngress without peers
    assert flow_allowed(rules, supernode, OUTSIDE_IP, "TCP", 443)  # allowExternalEgress
    assert not flow_allowed(rules, stranger, supernode.ip, "TCP", 9094)


def test_compiling_leaves_the_policies_alone():
    objects = core_objects(config(HTTP_ERA), "e2e")
    policies = by_kind(objects, "NetworkPolicy")
    before = copy.deepcopy(policies)
    compile_policies(policies, pods_of(objects))
    assert policies == before


def test_without_nft_the_harness_refuses_to_run_a_cluster(monkeypatch):
    """No silent run without enforcement: a cluster cannot be made without `nft`."""
    monkeypatch.setattr(enforce.shutil, "which", lambda name: None)
    monkeypatch.setattr(enforce.os, "access", lambda path, mode: False)
    assert enforce.nft_path() is None
    with pytest.raises(HarnessError, match="nftables"):
        enforce.Enforcer(cluster=None)  # type: ignore[arg-type]  (refused before it looks at one)
