"""The Helm chart's per-component ServiceAccount (annotations and labels for workload identity, its token
setting), `automountServiceAccountToken`, pod securityContext, `updateStrategy` and `lifecycle`
(docs/helm-parameters.md): rendered where the chart puts them, tokens still off unless asked for, the namespace's
Pod Security level following a weakened context, bad values reported by path."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.manifests import container, get, pod_spec
from tests.support.render import core_objects, namespace_of, plan_of
from tests.support.validation import assert_valid, cfg, not_a_field, problems, sts_pool

WORKLOAD_IDENTITY = {"iam.gke.io/gcp-service-account": "fl@project.iam.gserviceaccount.com"}
PRE_STOP = {"preStop": {"exec": {"command": ["/bin/sh", "-c", "sleep 5"]}}}


def test_service_account_carries_workload_identity_without_a_token(k8s_validate):
    pool = sts_pool(
        "a",
        2,
        serviceAccount={"annotations": WORKLOAD_IDENTITY, "labels": {"azure.workload.identity/use": "true"}},
    )
    objects = core_objects(cfg(pool, superlink={"serviceAccount": {"annotations": {"example.org/x": "y"}}}))
    sa = get(objects, "ServiceAccount", "dev-supernode-a")
    assert sa["metadata"]["annotations"] == WORKLOAD_IDENTITY
    assert sa["metadata"]["labels"]["azure.workload.identity/use"] == "true"
    assert sa["automountServiceAccountToken"] is False
    assert pod_spec(get(objects, "StatefulSet", "dev-supernode-a"))["automountServiceAccountToken"] is False
    assert get(objects, "ServiceAccount", "dev-superlink")["metadata"]["annotations"] == {"example.org/x": "y"}
    for o in objects:
        k8s_validate(o)


def test_tokens_are_an_explicit_opt_in_on_the_pod_and_the_service_account():
    pool = sts_pool("a", automountServiceAccountToken=True, serviceAccount={"automountServiceAccountToken": True})
    objects = core_objects(cfg(pool))
    assert pod_spec(get(objects, "StatefulSet", "dev-supernode-a"))["automountServiceAccountToken"] is True
    assert get(objects, "ServiceAccount", "dev-supernode-a")["automountServiceAccountToken"] is True
    # Only where asked for.
    assert pod_spec(get(objects, "StatefulSet", "dev-superlink"))["automountServiceAccountToken"] is False
    assert get(objects, "ServiceAccount", "dev-superlink")["automountServiceAccountToken"] is False


def test_a_components_pod_security_context_merges_and_the_namespace_follows():
    objects = core_objects(cfg(sts_pool("a", podSecurityContext={"fsGroupChangePolicy": "OnRootMismatch"})))
    context = pod_spec(get(objects, "StatefulSet", "dev-supernode-a"))["securityContext"]
    assert context == {
        "fsGroup": 49999,
        "fsGroupChangePolicy": "OnRootMismatch",
        "runAsGroup": 49999,
        "runAsNonRoot": True,
        "runAsUser": 49999,
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    plan = plan_of(cfg(sts_pool("a", podSecurityContext={"fsGroupChangePolicy": "OnRootMismatch"})))
    assert namespace_of(plan)["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
    # Root in one pool's pods: the namespace we create admits only what they still meet.
    weakened = plan_of(cfg(sts_pool("a", podSecurityContext={"runAsNonRoot": False, "runAsUser": 0})))
    assert namespace_of(weakened)["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "baseline"
    superlink = pod_spec(
        get(core_objects(cfg(sts_pool("a", podSecurityContext={"runAsUser": 0}))), "StatefulSet", "dev-superlink")
    )
    assert superlink["securityContext"]["runAsUser"] == 49999


def test_update_strategies_land_on_each_workload_kind(k8s_validate):
    rolling = {"type": "RollingUpdate", "rollingUpdate": {"partition": 1}}
    objects = core_objects(
        cfg(sts_pool("a", 3, updateStrategy=rolling), superlink={"updateStrategy": {"type": "OnDelete"}})
    )
    assert get(objects, "StatefulSet", "dev-supernode-a")["spec"]["updateStrategy"] == rolling
    assert get(objects, "StatefulSet", "dev-superlink")["spec"]["updateStrategy"] == {"type": "OnDelete"}
    daemon = {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "25%"}}
    objects += core_objects(cfg({"name": "a", "updateStrategy": daemon}, mode="DaemonSet"))
    assert get(objects, "DaemonSet", "dev-supernode-a")["spec"]["updateStrategy"] == daemon
    for o in objects:
        k8s_validate(o)


def test_unset_update_strategy_renders_nothing():
    objects = core_objects(cfg(sts_pool("a")))
    assert "updateStrategy" not in get(objects, "StatefulSet", "dev-supernode-a")["spec"]


def test_lifecycle_goes_to_the_components_own_container(k8s_validate):
    raw = cfg(sts_pool("a", lifecycle=PRE_STOP), superlink={"lifecycle": {"postStart": {"sleep": {"seconds": 1}}}})
    objects = core_objects(raw)
    assert container(get(objects, "StatefulSet", "dev-supernode-a"), "supernode")["lifecycle"] == PRE_STOP
    assert container(get(objects, "StatefulSet", "dev-superlink"), "superlink")["lifecycle"] == {
        "postStart": {"sleep": {"seconds": 1}}
    }
    for o in objects:
        k8s_validate(o)


@pytest.mark.parametrize(
    "kind_cfg, strategy, problem",
    [
        (
            {},
            {"type": "Recreate"},
            (
                "federation.supernodes.pools[0].updateStrategy.type",
                "a StatefulSet takes RollingUpdate or OnDelete, not 'Recreate'",
            ),
        ),
        (
            {"mode": "DaemonSet"},
            {"type": "OnDelete", "rollingUpdate": {"maxUnavailable": 1}},
            (
                "federation.supernodes.pools[0].updateStrategy.rollingUpdate",
                "only with type RollingUpdate, not OnDelete",
            ),
        ),
        (
            {},
            {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1}},
            ("federation.supernodes.pools[0].updateStrategy.rollingUpdate", not_a_field("maxSurge")),
        ),
        *(
            (
                {},
                {"rollingUpdate": {"maxUnavailable": zero}},
                (
                    "federation.supernodes.pools[0].updateStrategy.rollingUpdate.maxUnavailable",
                    f"{zero!r}: a StatefulSet must update at least one pod at a time (Kubernetes refuses 0); leave it "
                    "out (1) or set 1 or more",
                ),
            )
            for zero in (0, "0%")
        ),
        (
            {"mode": "DaemonSet"},
            {"rollingUpdate": {"maxUnavailable": 0}},
            (
                "federation.supernodes.pools[0].updateStrategy.rollingUpdate.maxUnavailable",
                "0: a DaemonSet must update at least one pod at a time (Kubernetes refuses 0 unless maxSurge is above "
                "0); leave it out (1) or set 1 or more",
            ),
        ),
    ],
)
def test_update_strategy_is_checked_for_the_workloads_kind(kind_cfg: dict[str, Any], strategy, problem):
    pool: dict[str, Any] = {"name": "a", "updateStrategy": strategy}
    if kind_cfg.get("mode") != "DaemonSet":
        pool["replicas"] = 1
    assert problems(cfg(pool, **kind_cfg)) == [problem]


def test_a_daemonset_may_hold_every_pod_while_it_surges():
    pool = {"name": "a", "updateStrategy": {"rollingUpdate": {"maxUnavailable": 0, "maxSurge": 1}}}
    assert_valid(cfg(pool, mode="DaemonSet"))


@pytest.mark.parametrize("surge", ["\u00b2", "\u00b2%"])
def test_a_surge_of_non_ascii_digits_is_no_surge(surge):
    # str.isdigit() is true of '²' and int() refused it: a ValueError, not the config's problem.
    pool = {"name": "a", "updateStrategy": {"rollingUpdate": {"maxUnavailable": 0, "maxSurge": surge}}}
    at = "federation.supernodes.pools[0].updateStrategy.rollingUpdate"
    assert [path for path, _ in problems(cfg(pool, mode="DaemonSet"))] == [f"{at}.maxSurge", f"{at}.maxUnavailable"]


@pytest.mark.parametrize(
    "kind, rolling, says",
    [
        (
            "DaemonSet",
            {"maxSurge": "abc"},
            ("maxSurge", "'abc' must be a whole number or a percentage (e.g. 1 or '25%')"),
        ),
        (
            "DaemonSet",
            {"maxSurge": "5%%"},
            ("maxSurge", "'5%%' must be a whole number or a percentage (e.g. 1 or '25%')"),
        ),
        ("DaemonSet", {"maxSurge": "150%"}, ("maxSurge", "'150%' must not be more than 100%")),
        ("StatefulSet", {"maxUnavailable": "101%"}, ("maxUnavailable", "'101%' must not be more than 100%")),
        ("StatefulSet", {"maxUnavailable": -1}, ("maxUnavailable", "-1 must be 0 or more")),
    ],
)
def test_an_amount_of_pods_is_a_whole_number_or_a_percentage(kind, rolling, says):
    """What the API server's ValidatePositiveIntOrPercent refuses; beside each, 25% or 2 is taken."""
    pool: dict[str, Any] = {"name": "a", "updateStrategy": {"rollingUpdate": rolling}}
    if kind == "StatefulSet":
        pool["replicas"] = 1
    at = "federation.supernodes.pools[0].updateStrategy.rollingUpdate"
    assert problems(cfg(pool, mode=kind)) == [(f"{at}.{says[0]}", says[1])]
    pool["updateStrategy"]["rollingUpdate"] = {says[0]: "25%"} if kind == "DaemonSet" else {says[0]: 2}
    assert_valid(cfg(pool, mode=kind))


def test_lifecycle_security_context_and_service_account_are_checked():
    raw = cfg(
        sts_pool(
            "a",
            lifecycle={"preStop": {"exec": {"cmd": ["x"]}}},
            podSecurityContext={"runAsUser": "root"},
            serviceAccount={"labels": {"bad key": "x"}, "annotations": {"ok": "x"}, "token": True},
        )
    )
    assert problems(raw) == [
        ("federation.supernodes.pools[0].lifecycle.preStop.exec", not_a_field("cmd")),
        ("federation.supernodes.pools[0].podSecurityContext.runAsUser", "'root' is not of type 'integer', 'null'"),
        (
            'federation.supernodes.pools[0].serviceAccount.labels["bad key"]',
            "'bad key' is not a Kubernetes key: an optional DNS subdomain prefix and '/', then at most 63 letters, "
            "digits, '-', '_' or '.', starting and ending with a letter or digit",
        ),
        (
            "federation.supernodes.pools[0].serviceAccount.token",
            "unknown key 'token'; valid keys: annotations, automountServiceAccountToken, labels",
        ),
    ]


def test_the_settings_are_accepted_on_the_superlink_too():
    assert_valid(
        cfg(
            superlink={
                "serviceAccount": {"annotations": WORKLOAD_IDENTITY, "automountServiceAccountToken": False},
                "automountServiceAccountToken": False,
                "podSecurityContext": {"supplementalGroups": [1000]},
                "updateStrategy": {"type": "RollingUpdate"},
                "lifecycle": PRE_STOP,
            }
        )
    )
