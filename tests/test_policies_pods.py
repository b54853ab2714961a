"""Negative controls of the pod policies (flower_federation/checks/pod_policies.py): a golden render
with one promise broken reports exactly that violation; tests/test_policies.py has the goldens and
the Flower API policies."""

from __future__ import annotations

import pytest

from flower_federation.checks.model import ADVISORY, MANDATORY
from flower_federation.checks.policies import run
from tests.support.policy_objects import container, find, found, golden, pod_spec, summary

# --- flower-network-policies --------------------------------------------------------------------


def test_a_flower_pod_without_network_policies() -> None:
    objects = [
        o for o in golden("dev") if (o["kind"], o["metadata"]["name"]) != ("NetworkPolicy", "demo-supernode-cpu")
    ]
    violations = run(objects)
    assert summary(violations) == {
        (
            MANDATORY,
            "flower-network-policies",
            "StatefulSet flower-dev/demo-supernode-cpu",
            "spec.template.metadata.labels",
        )
    }
    assert "policyTypes Ingress and Egress" in violations[0].message


def test_an_ingress_only_network_policy_leaves_egress_open() -> None:
    objects = golden("dev")
    np = find(objects, "NetworkPolicy", "demo-node-registration")
    np["spec"]["policyTypes"] = ["Ingress"]
    violations = run(objects)
    assert summary(violations) == {
        (MANDATORY, "flower-network-policies", f"Job flower-dev/{name}", "spec.template.metadata.labels")
        for name in ("demo-node-registration-bc9cab6adf", "demo-node-revocation-bc9cab6adf")
    }
    assert all("policyTypes Egress" in v.message for v in violations)


# --- flower-pod-security-restricted -------------------------------------------------------------


def test_privilege_escalation_host_network_and_host_path() -> None:
    objects = golden("dev")
    sl = find(objects, "StatefulSet", "demo-superlink")
    container(sl, "superlink")["securityContext"]["allowPrivilegeEscalation"] = True
    pod_spec(sl)["hostNetwork"] = True
    pod_spec(sl)["volumes"].append({"name": "host", "hostPath": {"path": "/"}})
    p, ref, at = "flower-pod-security-restricted", "StatefulSet flower-dev/demo-superlink", "spec.template.spec."
    assert found(objects) == {
        (MANDATORY, p, ref, at + "containers[superlink].securityContext.allowPrivilegeEscalation"),
        (MANDATORY, p, ref, at + "hostNetwork"),
        (MANDATORY, p, ref, at + "volumes[host]"),
    }


def test_capabilities_and_seccomp() -> None:
    objects = golden("dev")
    sc = container(find(objects, "StatefulSet", "demo-supernode-cpu"), "supernode")["securityContext"]
    sc["capabilities"] = {"drop": ["NET_RAW"]}
    pod_spec(find(objects, "StatefulSet", "demo-supernode-cpu"))["securityContext"].pop("seccompProfile", None)
    sc.pop("seccompProfile", None)
    at = "spec.template.spec.containers[supernode].securityContext."
    assert found(objects) == {
        (MANDATORY, "flower-pod-security-restricted", "StatefulSet flower-dev/demo-supernode-cpu", at + "capabilities"),
        (
            MANDATORY,
            "flower-pod-security-restricted",
            "StatefulSet flower-dev/demo-supernode-cpu",
            at + "seccompProfile",
        ),
    }


# --- flower-memory-limits -----------------------------------------------------------------------


def test_an_init_container_without_a_memory_limit() -> None:
    objects = golden("dev")
    del container(find(objects, "StatefulSet", "demo-superlink"), "state-guard", "initContainers")["resources"][
        "limits"
    ]["memory"]
    assert found(objects) == {
        (
            ADVISORY,
            "flower-memory-limits",
            "StatefulSet flower-dev/demo-superlink",
            "spec.template.spec.initContainers[state-guard].resources.limits.memory",
        )
    }


# --- flower-no-service-account-token ------------------------------------------------------------


def test_an_unused_token_and_one_a_role_binding_explains() -> None:
    objects = golden("dev")
    pod_spec(find(objects, "StatefulSet", "demo-supernode-cpu"))["automountServiceAccountToken"] = True
    expected = {
        (
            ADVISORY,
            "flower-no-service-account-token",
            "StatefulSet flower-dev/demo-supernode-cpu",
            "spec.template.spec.automountServiceAccountToken",
        )
    }
    assert found(objects) == expected
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": {"name": "executor", "namespace": "flower-dev"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "executor"},
        "subjects": [{"kind": "ServiceAccount", "name": "demo-supernode-cpu", "namespace": "flower-dev"}],
    }
    assert found(objects + [binding]) == set()


def test_the_default_is_a_token_unless_the_service_account_says_no() -> None:
    objects = golden("dev")
    del pod_spec(find(objects, "StatefulSet", "demo-supernode-site-b"))["automountServiceAccountToken"]
    assert found(objects) == set()  # its ServiceAccount has automountServiceAccountToken: false
    find(objects, "ServiceAccount", "demo-supernode-site-b").pop("automountServiceAccountToken")
    assert {p for _, p, _, _ in found(objects)} == {"flower-no-service-account-token"}


# --- flower-images-pinned -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("image", "pinned"),
    [
        ("flwr/supernode", False),
        ("flwr/supernode:latest", False),
        ("flwr/supernode:nightly", False),
        ("registry:5000/flwr/supernode", False),
        ("flwr/supernode@sha256:" + "a" * 64, True),
        ("registry:5000/flwr/supernode:1.42.0-py3.11", True),
    ],
)
def test_images_pinned_to_a_version(image: str, pinned: bool) -> None:
    objects = golden("dev")
    container(find(objects, "StatefulSet", "demo-supernode-cpu"), "supernode")["image"] = image
    expected = {
        (
            MANDATORY,
            "flower-images-pinned",
            "StatefulSet flower-dev/demo-supernode-cpu",
            "spec.template.spec.containers[supernode].image",
        )
    }
    assert found(objects) == (set() if pinned else expected)


def test_pods_that_are_not_flower_are_not_judged() -> None:
    other = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "flower-dev"},
        "spec": {
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"hostNetwork": True, "containers": [{"name": "web", "image": "nginx"}]},
            }
        },
    }
    assert found(golden("dev") + [other]) == set()
