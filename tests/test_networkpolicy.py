"""NetworkPolicies, checked generically from selectors and pod labels over every
security stack: one default-deny policy per component, both sides of every flow agree,
the in-pod APIs are unreachable from elsewhere, SuperNodes reach only the Fleet API and
DNS, and the Helm chart's knobs (allowExternal, extra rules, per-pool switches) do what
they say."""

from __future__ import annotations

import pytest

from flower_federation.plan import FederationPlan
from tests.support.manifests import arg_after, by_kind, get, workload_container
from tests.support.netpol import allowed, pod_groups, port_matches, selects
from tests.support.render import core_objects
from tests.support.security_matrix import (
    KNOB_STACK_IDS,
    NAME,
    NS,
    STACK_IDS,
    security_objects,
    security_plan,
    stacks_where,
)
from tests.support.stacks import EXECUTOR_GRPC, GRPC_ERA, HTTP_ERA, base

INSTANCE = "app.kubernetes.io/instance"
COMPONENT = "app.kubernetes.io/component"
POOL = "flower.flwr.ai/pool"
TASK_ROLE = "flower.flwr.ai/task-role"
DNS_PEER = {
    "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "kube-system"}},
    "podSelector": {"matchLabels": {"k8s-app": "kube-dns"}},
}
DNS_RULE = {"to": [DNS_PEER], "ports": [{"port": 53, "protocol": "UDP"}, {"port": 53, "protocol": "TCP"}]}


def pair_policy_names(plan: FederationPlan) -> set[str]:
    """gRPC era, distributed: per replica, an Ingress policy for the SuperNode (from its own
    SuperExecs) and an Egress policy for each of its SuperExecs (to their own SuperNode)."""
    if not (plan.distributed and plan.grpc_era):
        return set()
    out = set()
    for p in plan.spec.supernodes.pools:
        superexecs = [plan.names.pool_superexec_replica(p.name, c) for c in range(p.superexec.replicas)]
        for k in range(p.replicas or 0):
            out |= {f"{NAME}-supernode-{p.name}-{k}-pair"} | {f"{s}-{k}-pair" for s in superexecs}
    return out


def _is_pair(policy: dict) -> bool:
    return policy["metadata"]["name"].endswith("-pair")


def expected_policy_names(plan: FederationPlan) -> set[str]:
    pools = [p.name for p in plan.spec.supernodes.pools]
    names = {f"{NAME}-superlink"} | {f"{NAME}-supernode-{p}" for p in pools}
    if plan.distributed:
        names |= {f"{NAME}-superexec-serverapp"} | {f"{NAME}-superexec-{p}" for p in pools}
    if plan.kubernetes_executor:
        names |= {f"{NAME}-taskexecutor-serverapp"} | {f"{NAME}-taskexecutor-{p}" for p in pools}
    if plan.registers_nodes:
        names.add(f"{NAME}-node-registration")
    return names


@pytest.mark.parametrize("sid", STACK_IDS)
def test_one_default_deny_policy_per_component(sid):
    plan, objects = security_plan(sid), security_objects(sid)
    pairs = [p for p in by_kind(objects, "NetworkPolicy") if _is_pair(p)]
    assert {p["metadata"]["name"] for p in pairs} == pair_policy_names(plan)
    for p in pairs:  # Ingress to one SuperNode pod, Egress from one SuperExec pod
        role = "Ingress" if "-supernode-" in p["metadata"]["name"] else "Egress"
        assert p["spec"]["policyTypes"] == [role] and len(p["spec"][role.lower()]) == 1
        selected = [
            gid
            for gid, labels in pod_groups(objects, per_pod=True).items()
            if selects(p["spec"]["podSelector"], labels)
        ]
        assert selected == [f"StatefulSet/{p['metadata']['name'].removesuffix('-pair')}"], selected
    policies = [p for p in by_kind(objects, "NetworkPolicy") if not _is_pair(p)]
    assert {p["metadata"]["name"] for p in policies} == expected_policy_names(plan)
    assert len(policies) == len(expected_policy_names(plan))
    for p in policies:
        assert p["spec"]["policyTypes"] == ["Ingress", "Egress"]
        assert isinstance(p["spec"]["ingress"], list) and isinstance(p["spec"]["egress"], list)
        assert p["metadata"]["namespace"] == NS
    # Every pod group is selected by exactly one policy, and every policy selects pods.
    groups = pod_groups(objects, per_pod=True)
    for gid, labels in groups.items():
        selecting = [p["metadata"]["name"] for p in policies if selects(p["spec"]["podSelector"], labels)]
        assert len(selecting) == 1, (gid, selecting)
    for p in policies:
        assert any(selects(p["spec"]["podSelector"], labels) for labels in groups.values()), p["metadata"]["name"]


@pytest.mark.parametrize("sid", STACK_IDS)
def test_both_sides_of_every_flow_agree(sid):
    """For every rule naming our own pods, the other side's policy allows the same flow
    on the same port and protocol, in both directions."""
    objects = security_objects(sid)
    groups = pod_groups(objects, per_pod=True)
    checked = 0
    for policy in by_kind(objects, "NetworkPolicy"):
        own = [labels for labels in groups.values() if selects(policy["spec"]["podSelector"], labels)]
        for kind, direction, other_kind in (("egress", "to", "ingress"), ("ingress", "from", "egress")):
            for rule in policy["spec"].get(kind, []):  # a pair policy has one side only
                for peer in rule.get(direction, []):
                    if set(peer) != {"podSelector"} or peer["podSelector"]["matchLabels"].get(INSTANCE) != NAME:
                        continue  # DNS, the API server, configured sources: not our pods
                    others = {gid: labels for gid, labels in groups.items() if selects(peer["podSelector"], labels)}
                    assert others, f"{policy['metadata']['name']} {kind} names pods that do not exist: {peer}"
                    for port in rule["ports"]:
                        for gid, other in others.items():
                            for mine in own:
                                assert allowed(objects, other, other_kind, mine, port["port"], port["protocol"], NS), (
                                    policy["metadata"]["name"],
                                    kind,
                                    gid,
                                    port,
                                )
                                checked += 1
    assert checked >= 2  # at least: the SuperLink and both pools agree on the Fleet API


def _superlink_policy(objects) -> dict:
    return get(objects, "NetworkPolicy", f"{NAME}-superlink")


def _superlink_selector() -> dict:
    return {"podSelector": {"matchLabels": {INSTANCE: NAME, COMPONENT: "superlink"}}}


@pytest.mark.parametrize("sid", STACK_IDS)
def test_in_pod_apis_are_never_reachable_from_elsewhere(sid):
    plan, objects = security_plan(sid), security_objects(sid)
    link_args = workload_container(objects, "StatefulSet", f"{NAME}-superlink", "superlink")["args"]
    # ServerAppIo (gRPC era): bound to loopback unless distributed; only the SuperExec
    # for ServerApps (and its task pods) may reach it.
    if plan.ports.serverappio is not None:
        appio = plan.ports.serverappio
        assert (
            arg_after(link_args, "--serverappio-api-address")
            == f"{'0.0.0.0' if plan.distributed else '127.0.0.1'}:{appio}"
        )
        allowed = [
            {INSTANCE: NAME, COMPONENT: "superexec-serverapp"},
            {INSTANCE: NAME, COMPONENT: "taskexecutor", TASK_ROLE: "serverapp"},
        ]
        rules = [r for r in _superlink_policy(objects)["spec"]["ingress"] if port_matches(r, appio, "TCP")]
        assert bool(rules) == plan.distributed  # the distributed SuperExec must get through
        for r in rules:
            assert r.get("from"), r
            for peer in r["from"]:
                assert set(peer) == {"podSelector"} and peer["podSelector"]["matchLabels"] in allowed, peer
        public = get(objects, "Service", f"{NAME}-superlink")
        assert appio not in {p["port"] for p in public["spec"]["ports"]}
    # The SuperNodes' ClientAppIo / Runtime API (9094 unless moved): only their own pool's SuperExec, and anyone
    # only for a pool whose API is exposed on purpose (a NodePort/LoadBalancer Service with allowExternal).
    for pool in plan.spec.supernodes.pools:
        port = plan.supernode_appio_port(pool)
        node_args = workload_container(
            objects,
            "DaemonSet" if plan.spec.mode == "DaemonSet" else "StatefulSet",
            f"{NAME}-supernode-{pool.name}",
            "supernode",
        )["args"]
        bind = "0.0.0.0" if plan.distributed else "127.0.0.1"
        if plan.ports.serverappio is not None:
            assert arg_after(node_args, "--clientappio-api-address") == f"{bind}:{port}"
        else:
            assert (arg_after(node_args, "--host"), arg_after(node_args, "--port")) == (bind, str(port))
        policy = get(objects, "NetworkPolicy", f"{NAME}-supernode-{pool.name}")
        rules = [r for r in policy["spec"]["ingress"] if port_matches(r, port, "TCP")]
        # gRPC era: the pool's SuperExecs get in only through the per-replica pair
        # policies (tests/test_appio.py), task pods through the pool's own.
        assert bool(rules) == (plan.distributed and (not plan.grpc_era or plan.kubernetes_executor))
        if not plan.distributed:
            assert policy["spec"]["ingress"] == []
        allowed = [{INSTANCE: NAME, COMPONENT: "taskexecutor", TASK_ROLE: pool.name}]
        if not plan.grpc_era:
            allowed.append({INSTANCE: NAME, COMPONENT: "superexec-clientapp", POOL: pool.name})
        for r in rules:
            if not r.get("from"):
                assert pool.service.type != "ClusterIP", r
                continue
            for peer in r["from"]:
                assert set(peer) == {"podSelector"} and peer["podSelector"]["matchLabels"] in allowed, peer


@pytest.mark.parametrize(
    "sid",
    stacks_where(
        lambda p: (
            not p.spec.allow_runtime_dependency_installation
            and not p.spec.network_policy.allow_external_egress
            and not p.spec.supernodes.network_policy.allow_external_egress
        )
    ),
)
def test_supernodes_reach_only_the_fleet_api_and_dns(sid):
    plan, objects = security_plan(sid), security_objects(sid)
    to_superlink = {"to": [_superlink_selector()], "ports": [{"port": plan.ports.fleet, "protocol": "TCP"}]}
    for pool in plan.spec.supernodes.pools:
        policy = get(objects, "NetworkPolicy", f"{NAME}-supernode-{pool.name}")
        assert policy["spec"]["egress"] == [to_superlink, DNS_RULE]


@pytest.mark.parametrize("sid", STACK_IDS)
def test_superlink_accepts_outside_traffic_only_with_allow_external(sid):
    plan, objects = security_plan(sid), security_objects(sid)
    ingress = _superlink_policy(objects)["spec"]["ingress"]
    extra = plan.spec.superlink.network_policy.extra_ingress or []
    managed = ingress[: len(ingress) - len(extra)]
    assert ingress[len(managed) :] == extra
    open_rules = [r for r in managed if not r.get("from")]
    for r in managed:
        for peer in r.get("from", []):
            assert "ipBlock" not in peer
    if sid.endswith("networkpolicy-knobs"):
        assert open_rules == [{"ports": [{"port": plan.ports.fleet, "protocol": "TCP"}]}]
    else:
        assert open_rules == []


@pytest.mark.parametrize("sid", KNOB_STACK_IDS)
def test_networkpolicy_knobs(sid):
    plan, objects = security_plan(sid), security_objects(sid)
    api_ports = [{"port": p, "protocol": "TCP"} for p in sorted({plan.ports.fleet, plan.ports.control})]
    assert len(api_ports) == (2 if sid.startswith("grpc") else 1)
    ingress = _superlink_policy(objects)["spec"]["ingress"]
    # ingressPodMatchLabels (superlink) and ingressNSMatchLabels + ingressNSPodMatchLabels
    # (global) reach the Fleet and Control ports.
    assert {"from": [{"podSelector": {"matchLabels": {"role": "flwr-cli"}}}], "ports": api_ports} in ingress
    assert {
        "from": [
            {"namespaceSelector": {"matchLabels": {"team": "ml"}}, "podSelector": {"matchLabels": {"role": "flwr-cli"}}}
        ],
        "ports": api_ports,
    } in ingress
    # extraIngress is appended last.
    assert ingress[-1] == {"ports": [{"port": 9100, "protocol": "TCP"}]}
    # supernodes.allowExternalEgress: unrestricted egress for every pool, not for the SuperLink.
    for pool in ("alpha", "beta"):
        assert get(objects, "NetworkPolicy", f"{NAME}-supernode-{pool}")["spec"]["egress"] == [{}]
    assert _superlink_policy(objects)["spec"]["egress"] == [DNS_RULE]


def test_extra_egress_is_appended_and_ignored_with_allow_external_egress():
    extra = {"to": [{"ipBlock": {"cidr": "10.0.0.0/8"}}], "ports": [{"port": 5432, "protocol": "TCP"}]}
    plain = _superlink_policy(core_objects(base(GRPC_ERA)))["spec"]["egress"]
    with_extra = _superlink_policy(core_objects(base(GRPC_ERA, superlink={"networkPolicy": {"extraEgress": [extra]}})))
    assert with_extra["spec"]["egress"] == plain + [extra]
    opened = _superlink_policy(
        core_objects(base(GRPC_ERA, superlink={"networkPolicy": {"extraEgress": [extra], "allowExternalEgress": True}}))
    )
    assert opened["spec"]["egress"] == [{}]
    # A pool-level extraIngress reaches that pool only.
    raw = base(GRPC_ERA)
    raw["supernodes"]["pools"][0]["networkPolicy"] = {"extraIngress": [{"ports": [{"port": 9400, "protocol": "TCP"}]}]}
    objects = core_objects(raw)
    assert get(objects, "NetworkPolicy", f"{NAME}-supernode-alpha")["spec"]["ingress"] == [
        {"ports": [{"port": 9400, "protocol": "TCP"}]}
    ]
    assert get(objects, "NetworkPolicy", f"{NAME}-supernode-beta")["spec"]["ingress"] == []


@pytest.mark.parametrize(
    "version,isolation,placement",
    [
        (GRPC_ERA, "subprocess", "sidecar"),
        (HTTP_ERA, "process", "distributed"),
        (EXECUTOR_GRPC, "process", "distributed"),
    ],
)
def test_disabling_one_pools_policy_drops_only_that_pools_policies(version, isolation, placement):
    extra = {"executor": {"type": "kubernetes"}} if version == EXECUTOR_GRPC else {}
    raw = base(version, isolation=isolation, placement=placement, **extra)
    before = {p["metadata"]["name"]: p for p in by_kind(core_objects(raw), "NetworkPolicy")}
    raw["supernodes"]["pools"][1]["networkPolicy"] = {"enabled": False}
    after = {p["metadata"]["name"]: p for p in by_kind(core_objects(raw), "NetworkPolicy")}
    beta = {f"{NAME}-supernode-beta"}
    if placement == "distributed":
        beta.add(f"{NAME}-superexec-beta")
    if extra:
        beta.add(f"{NAME}-taskexecutor-beta")
    if placement == "distributed" and version != HTTP_ERA:  # gRPC era: its pair policy too
        beta |= {f"{NAME}-supernode-beta-0-pair", f"{NAME}-superexec-beta-0-pair"}
    assert set(before) - set(after) == beta and beta <= set(before)
    assert after == {k: v for k, v in before.items() if k not in beta}
    # Globally disabled: no policy at all.
    assert (
        by_kind(
            core_objects(
                base(version, isolation=isolation, placement=placement, networkPolicy={"enabled": False}, **extra)
            ),
            "NetworkPolicy",
        )
        == []
    )


@pytest.mark.parametrize("version", [GRPC_ERA, HTTP_ERA])
def test_adding_a_pool_leaves_the_superlink_policy_unchanged(version):
    raw = base(version)
    before = _superlink_policy(core_objects(raw))
    raw["supernodes"]["pools"].append({"name": "gamma", "replicas": 2})
    objects = core_objects(raw)
    assert _superlink_policy(objects) == before
    gamma = get(objects, "NetworkPolicy", f"{NAME}-supernode-gamma")
    assert gamma["spec"]["podSelector"] == {"matchLabels": {INSTANCE: NAME, COMPONENT: "supernode", POOL: "gamma"}}
