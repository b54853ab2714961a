"""Pod Security: every pod template of every stack (and the Kubernetes executor's task
pods) meets `restricted`, the namespace enforces the strictest level its pods meet, and
the checker (`flower_federation.kube.pod_security`) catches each control it is meant to (negative controls)."""

from __future__ import annotations

import copy

import pytest

from flower_federation.kube import pod_security
from tests.support.defaults import RESTRICTED_CONTAINER_SC, RESTRICTED_POD_SC
from tests.support.manifests import get, workloads
from tests.support.render import namespace_of, plan_objects, plan_of, pod_templates_of
from tests.support.security_matrix import (
    DEV,
    EXECUTOR_STACK_IDS,
    NAME,
    STACK_IDS,
    executor_configs,
    security_objects,
    security_plan,
)
from tests.support.stacks import GRPC_ERA, HTTP_ERA, base

POOL = "flower.flwr.ai/pool"
COMPONENT = "app.kubernetes.io/component"


@pytest.mark.parametrize("sid", STACK_IDS + [DEV])
def test_every_pod_template_is_restricted_and_the_namespace_enforces_it(sid):
    plan = security_plan(sid)
    templates = pod_templates_of(plan)
    assert len(templates) == len(workloads(security_objects(sid))) >= 2
    for t in templates:
        assert pod_security.restricted_violations(t) == [], t["metadata"]["labels"]
        assert t["spec"]["securityContext"] == RESTRICTED_POD_SC
        for c in t["spec"]["containers"]:
            assert c["securityContext"] == RESTRICTED_CONTAINER_SC
    labels = get(security_objects(sid), "Namespace", plan.namespace)["metadata"]["labels"]
    assert labels["pod-security.kubernetes.io/enforce"] == "restricted"
    assert labels["pod-security.kubernetes.io/warn"] == "restricted"


@pytest.mark.parametrize("sid", EXECUTOR_STACK_IDS)
def test_task_pods_of_the_kubernetes_executor_are_restricted(sid):
    for name, cfg in executor_configs(security_objects(sid)).items():
        template = {
            "metadata": {"labels": cfg["labels"]},
            "spec": {
                "securityContext": cfg["pod-security-context"],
                "containers": [
                    {
                        "name": "task",
                        "image": cfg["image"],
                        "securityContext": cfg["container-security-context"],
                        "volumeMounts": cfg["volume-mounts"],
                    }
                ],
                "volumes": cfg["volumes"],
            },
        }
        assert pod_security.restricted_violations(template) == [], name
        assert cfg["pod-security-context"] == RESTRICTED_POD_SC
        assert cfg["container-security-context"] == RESTRICTED_CONTAINER_SC
        assert {m["mountPath"] for m in cfg["volume-mounts"]} >= {"/tmp", "/app/.flwr"}


def _template() -> dict:
    """A deep copy of a real restricted pod template (SuperNode + sidecar SuperExec)."""
    objects = security_objects("grpc-process-sidecar-nodeauth")
    t = copy.deepcopy(get(objects, "StatefulSet", f"{NAME}-supernode-alpha")["spec"]["template"])
    assert pod_security.level(t) == "restricted" and len(t["spec"]["containers"]) == 2
    return t


def _sc(t: dict, i: int = 0) -> dict:
    return t["spec"]["containers"][i]["securityContext"]


def _privileged(t):
    _sc(t)["privileged"] = True


def _escalation(t):
    _sc(t, 1)["allowPrivilegeEscalation"] = True


def _no_escalation_field(t):
    del _sc(t)["allowPrivilegeEscalation"]


def _pod_root(t):
    t["spec"]["securityContext"]["runAsUser"] = 0


def _container_root(t):
    _sc(t, 1)["runAsUser"] = 0


def _no_seccomp(t):
    del t["spec"]["securityContext"]["seccompProfile"]
    del _sc(t)["seccompProfile"]


def _unconfined(t):
    _sc(t)["seccompProfile"] = {"type": "Unconfined"}


def _no_drop(t):
    _sc(t)["capabilities"] = {"drop": ["NET_RAW"]}


def _sys_admin(t):
    _sc(t)["capabilities"] = {"drop": ["ALL"], "add": ["SYS_ADMIN"]}


def _chown(t):
    _sc(t)["capabilities"] = {"drop": ["ALL"], "add": ["CHOWN"]}


def _host_path(t):
    t["spec"]["volumes"].append({"name": "dev", "hostPath": {"path": "/dev"}})


def _host_network(t):
    t["spec"]["hostNetwork"] = True


def _host_port(t):
    t["spec"]["containers"][0]["ports"] = [{"containerPort": 9092, "hostPort": 9092}]


def _container_non_root_false(t):
    _sc(t, 1)["runAsNonRoot"] = False


def _bare_init_container(t):
    t["spec"]["initContainers"] = [{"name": "init", "image": "busybox"}]


NEGATIVE_CONTROLS = [
    # (mutation, a violation it must produce, level)
    (_privileged, "privileged: containers[supernode]", "privileged"),
    (
        _escalation,
        "privilege escalation: containers[superexec-clientapp] must set allowPrivilegeEscalation false",
        "baseline",
    ),
    (
        _no_escalation_field,
        "privilege escalation: containers[supernode] must set allowPrivilegeEscalation false",
        "baseline",
    ),
    (_pod_root, "running as non-root user: spec.securityContext.runAsUser 0", "baseline"),
    (_container_root, "running as non-root user: containers[superexec-clientapp] runAsUser 0", "baseline"),
    (_no_seccomp, "seccomp: containers[supernode] needs RuntimeDefault or Localhost", "baseline"),
    (_unconfined, "seccomp: containers[supernode].securityContext.seccompProfile Unconfined", "privileged"),
    (_no_drop, "capabilities: containers[supernode] must drop ALL", "baseline"),
    (_sys_admin, "capabilities: containers[supernode] adds ['SYS_ADMIN']", "privileged"),
    (_chown, "capabilities: containers[supernode] may add only NET_BIND_SERVICE, adds ['CHOWN']", "baseline"),
    (_host_path, "hostPath volumes: volumes[dev]", "privileged"),
    (_host_network, "host namespaces: spec.hostNetwork", "privileged"),
    (_host_port, "host ports: containers[supernode] hostPort 9092", "privileged"),
    (_container_non_root_false, "running as non-root: containers[superexec-clientapp]", "baseline"),
    (
        _bare_init_container,
        "privilege escalation: initContainers[init] must set allowPrivilegeEscalation false",
        "baseline",
    ),
]


@pytest.mark.parametrize(
    "mutate,violation,expected_level", NEGATIVE_CONTROLS, ids=[m.__name__.strip("_") for m, _, _ in NEGATIVE_CONTROLS]
)
def test_pss_checker_catches(mutate, violation, expected_level):
    t = _template()
    mutate(t)
    assert violation in pod_security.restricted_violations(t)
    assert pod_security.level(t) == expected_level
    assert pod_security.namespace_level([_template(), t]) == expected_level


def test_pss_checker_accepts_what_restricted_allows():
    t = _template()
    del _sc(t)["seccompProfile"]  # inherited from the pod
    del _sc(t, 1)["runAsNonRoot"]  # inherited from the pod
    _sc(t)["capabilities"] = {"drop": ["ALL"], "add": ["NET_BIND_SERVICE"]}
    _sc(t)["readOnlyRootFilesystem"] = False  # not a PSS control
    t["spec"]["volumes"].append({"name": "data", "persistentVolumeClaim": {"claimName": "data"}})
    assert pod_security.restricted_violations(t) == []
    assert pod_security.namespace_level([]) == "restricted"


def test_pss_checker_catches_pod_level_run_as_non_root_false():
    """Pod Security admission (check runAsNonRoot) rejects a pod whose
    spec.securityContext.runAsNonRoot is explicitly false under `restricted`, even when
    every container sets true. The checker must too, or the namespace we create is
    labelled restricted and its pods are refused."""
    t = _template()
    t["spec"]["securityContext"]["runAsNonRoot"] = False
    assert any(v.startswith("running as non-root") for v in pod_security.restricted_violations(t)), (
        pod_security.restricted_violations(t)
    )
    assert pod_security.level(t) == "baseline"


def _namespace_level(raw: dict) -> str:
    labels = namespace_of(plan_of(raw))["metadata"]["labels"]
    assert labels["pod-security.kubernetes.io/warn"] == labels["pod-security.kubernetes.io/enforce"]
    return labels["pod-security.kubernetes.io/enforce"]


def test_namespace_is_privileged_only_for_an_amd_mount_all_pool():
    raw = base(HTTP_ERA)
    raw["supernodes"]["pools"][1]["gpu"] = {"enabled": True, "vendor": "amd", "mountAll": True, "allowPrivileged": True}
    plan = plan_of(raw)
    assert _namespace_level(raw) == "privileged"
    levels = {
        t["metadata"]["labels"].get(POOL, t["metadata"]["labels"][COMPONENT]): pod_security.level(t)
        for t in pod_templates_of(plan)
    }
    assert levels == {"superlink": "restricted", "alpha": "restricted", "beta": "privileged"}
    beta = get(plan_objects(plan), "StatefulSet", f"{NAME}-supernode-beta")["spec"]["template"]["spec"]
    assert beta["containers"][0]["securityContext"]["privileged"] is True
    assert {v["hostPath"]["path"] for v in beta["volumes"] if "hostPath" in v} == {"/dev/kfd", "/dev/dri"}
    # An NVIDIA mountAll pool stays restricted (a RuntimeClass, no privileges).
    raw["supernodes"]["pools"][1]["gpu"] = {"enabled": True, "vendor": "nvidia", "mountAll": True}
    assert _namespace_level(raw) == "restricted"


@pytest.mark.parametrize(
    "security_context,pod_security_context,expected",
    [
        ({"readOnlyRootFilesystem": False}, {}, "restricted"),
        ({"runAsUser": 1000}, {"runAsUser": 1000, "runAsGroup": 1000, "fsGroup": 1000}, "restricted"),
        ({"allowPrivilegeEscalation": True}, {}, "baseline"),
        ({"seccompProfile": {"type": "Unconfined"}}, {}, "privileged"),
        ({}, {"runAsUser": 0}, "baseline"),
        ({"capabilities": {"drop": ["ALL"], "add": ["NET_RAW"]}}, {}, "privileged"),
    ],
)
def test_namespace_level_follows_weakened_security_contexts(security_context, pod_security_context, expected):
    raw = base(GRPC_ERA, isolation="process", securityContext=security_context, podSecurityContext=pod_security_context)
    assert _namespace_level(raw) == expected
    for t in pod_templates_of(plan_of(raw)):
        for c in t["spec"]["containers"]:
            for key, value in security_context.items():
                assert c["securityContext"][key] == value
