"""ServiceAccounts and RBAC: every workload runs under its own token-less
ServiceAccount, the Kubernetes executor's Role has exactly the verbs Flower calls and
its task pods stay confined, and the viewer Role is read-only without Secrets."""

from __future__ import annotations

import pytest

from flower_federation.kube.naming import POOL_LABEL, SUPEREXEC_REPLICA_LABEL
from tests.support.defaults import PRESETS, RESTRICTED_CONTAINER_SC, RESTRICTED_POD_SC, TASK_POD_PRESET
from tests.support.manifests import arg_after, by_kind, get, mounts_by_name, volumes_by_name, workloads
from tests.support.netpol import selects
from tests.support.render import core_objects
from tests.support.security_matrix import (
    DEV,
    EXECUTOR_STACK_IDS,
    KNOB_STACK_IDS,
    NAME,
    NS,
    STACK_IDS,
    executor_configs,
    security_objects,
    security_plan,
)
from tests.support.stacks import EXECUTOR_GRPC, HTTP_ERA, base

INSTANCE = "app.kubernetes.io/instance"
COMPONENT = "app.kubernetes.io/component"
TASK_ROLE = "flower.flwr.ai/task-role"


@pytest.mark.parametrize("sid", STACK_IDS + [DEV])
def test_every_workload_runs_under_its_own_service_account(sid):
    plan, objects = security_plan(sid), security_objects(sid)
    accounts = {sa["metadata"]["name"]: sa for sa in by_kind(objects, "ServiceAccount")}
    k8s_executor = plan.kubernetes_executor
    used = set()
    for w in workloads(objects):
        spec = w["spec"]["template"]["spec"]
        sa_name = spec["serviceAccountName"]
        # A pool's further SuperExec StatefulSets (superexec.replicas) share its SuperExecs' account.
        labels = w["metadata"]["labels"]
        own = w["metadata"]["name"]
        if own == plan.names.node_revocation:  # the registration's second Job, under its account
            own = plan.names.node_registration
        if SUPEREXEC_REPLICA_LABEL in w["spec"].get("selector", {}).get("matchLabels", {}):
            own = plan.names.pool_superexec(labels[POOL_LABEL])
        assert sa_name == own and sa_name in accounts
        assert accounts[sa_name]["metadata"]["namespace"] == w["metadata"]["namespace"]
        used.add(sa_name)
        is_superexec = w["metadata"]["labels"][COMPONENT].startswith("superexec")
        token = k8s_executor and is_superexec
        assert spec["automountServiceAccountToken"] is token, w["metadata"]["name"]
        assert accounts[sa_name]["automountServiceAccountToken"] is token
    # The only other account is the task pods', which never gets a token.
    assert set(accounts) - used == ({f"{NAME}-taskexecutor"} if k8s_executor else set())
    for name in set(accounts) - used:
        assert accounts[name]["automountServiceAccountToken"] is False
    assert not by_kind(objects, "ClusterRole") and not by_kind(objects, "ClusterRoleBinding")
    if not k8s_executor and not plan.spec.rbac.viewer_groups:
        assert not by_kind(objects, "Role") and not by_kind(objects, "RoleBinding")


@pytest.mark.parametrize("sid", EXECUTOR_STACK_IDS)
def test_kubernetes_executor_rbac_is_exact_and_namespaced(sid):
    objects = security_objects(sid)
    role = get(objects, "Role", f"{NAME}-executor")
    assert role["metadata"]["namespace"] == NS
    assert role["rules"] == [
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["create", "delete", "list", "patch"]},
        {"apiGroups": [""], "resources": ["pods/exec"], "verbs": ["create", "get"]},
        {"apiGroups": [""], "resources": ["secrets"], "verbs": ["create", "delete", "list"]},
    ]
    superexecs = sorted(
        w["metadata"]["name"] for w in workloads(objects) if w["metadata"]["labels"][COMPONENT].startswith("superexec")
    )
    assert superexecs == [f"{NAME}-superexec-alpha", f"{NAME}-superexec-beta", f"{NAME}-superexec-serverapp"]
    bindings = [b for b in by_kind(objects, "RoleBinding") if b["roleRef"]["name"] == f"{NAME}-executor"]
    assert sorted(b["subjects"][0]["name"] for b in bindings) == superexecs
    for b in bindings:
        assert b["metadata"]["namespace"] == NS
        assert b["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": f"{NAME}-executor"}
        assert b["subjects"] == [{"kind": "ServiceAccount", "name": b["subjects"][0]["name"], "namespace": NS}]
    # The SuperExecs run the executor from the mounted config.
    for name in superexecs:
        kind = "Deployment" if name.endswith("serverapp") else "StatefulSet"
        w = get(objects, kind, name)
        c = w["spec"]["template"]["spec"]["containers"][0]
        assert arg_after(c["args"], "--executor") == "kubernetes"
        assert arg_after(c["args"], "--executor-config") == "/etc/flower/executor/executor.yaml"
        assert mounts_by_name(c)["executor-config"] == {
            "name": "executor-config",
            "mountPath": "/etc/flower/executor",
            "readOnly": True,
        }
        cm = volumes_by_name(w)["executor-config"]["configMap"]["name"]
        assert cm == f"{name}-executor" and get(objects, "ConfigMap", cm)


@pytest.mark.parametrize("sid", EXECUTOR_STACK_IDS)
def test_executor_config_keeps_task_pods_confined(sid):
    plan, objects = security_plan(sid), security_objects(sid)
    configs = executor_configs(objects)
    assert set(configs) == {
        f"{NAME}-superexec-serverapp-executor",
        f"{NAME}-superexec-alpha-executor",
        f"{NAME}-superexec-beta-executor",
    }
    task_sa = get(objects, "ServiceAccount", configs[f"{NAME}-superexec-alpha-executor"]["service-account-name"])
    assert task_sa["automountServiceAccountToken"] is False
    bound = {s["name"] for b in by_kind(objects, "RoleBinding") for s in b["subjects"]}
    assert task_sa["metadata"]["name"] not in bound
    for name, cfg in configs.items():
        role = "serverapp" if "serverapp" in name else name.split("-")[2]
        assert cfg["namespace"] == NS
        assert cfg["image"] == f"flwr/superexec:{plan.version}"
        assert cfg["service-account-name"] == f"{NAME}-taskexecutor"
        assert cfg["pod-security-context"] == RESTRICTED_POD_SC
        assert cfg["container-security-context"] == RESTRICTED_CONTAINER_SC
        assert cfg["resources"] == PRESETS[TASK_POD_PRESET]
        assert cfg["labels"] == {INSTANCE: NAME, COMPONENT: "taskexecutor", TASK_ROLE: role}
        policy = get(objects, "NetworkPolicy", f"{NAME}-taskexecutor-{role}")
        assert selects(policy["spec"]["podSelector"], cfg["labels"])
        # ...and no other workload's policy selects them.
        others = [
            p
            for p in by_kind(objects, "NetworkPolicy")
            if p is not policy and selects(p["spec"]["podSelector"], cfg["labels"])
        ]
        assert others == []
    if sid.startswith("http"):
        assert all(cfg["active-pod-budget"] == 4 for cfg in configs.values())


def test_executor_image_and_user_config_reach_the_executor_config():
    raw = base(
        EXECUTOR_GRPC,
        isolation="process",
        placement="distributed",
        executor={
            "type": "kubernetes",
            "image": "registry.example.com/tasks:1.32.1",
            "config": {"labels": {"team": "ml"}, "node-selector": {"pool": "cpu"}},
        },
    )
    for cfg in executor_configs(core_objects(raw)).values():
        assert cfg["image"] == "registry.example.com/tasks:1.32.1"
        assert cfg["node-selector"] == {"pool": "cpu"}
        # User labels are added; the ones the NetworkPolicy selects stay.
        assert cfg["labels"]["team"] == "ml" and cfg["labels"][COMPONENT] == "taskexecutor"


@pytest.mark.parametrize("sid", KNOB_STACK_IDS)
def test_viewer_role_is_read_only_without_secrets(sid):
    objects = security_objects(sid)
    role = get(objects, "Role", f"{NAME}-viewer")
    assert role["metadata"]["namespace"] == NS
    resources = [r for rule in role["rules"] for r in rule["resources"]]
    assert {"pods", "pods/log", "statefulsets", "networkpolicies"} <= set(resources)
    assert "secrets" not in resources and "*" not in resources
    for rule in role["rules"]:
        assert set(rule["verbs"]) <= {"get", "list", "watch"}
        assert "*" not in rule["apiGroups"]
    binding = get(objects, "RoleBinding", f"{NAME}-viewer")
    assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": f"{NAME}-viewer"}
    assert binding["subjects"] == [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "ml-team"}]
    two = core_objects(base(HTTP_ERA, rbac={"viewerGroups": ["ml-team", "auditors"]}))
    assert [s["name"] for s in get(two, "RoleBinding", f"{NAME}-viewer")["subjects"]] == ["ml-team", "auditors"]
