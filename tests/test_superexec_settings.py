"""The Helm chart's `superexec.*` (docs/helm-parameters.md) as `superlink.superexec` and
`supernodes.pools[].superexec`: distributed SuperExecs get their own pod settings (the pool's stay with the
SuperNodes, the top level's reach both), container settings reach sidecars too, `replicas` adds SuperExecs per
SuperNode in StatefulSets of their own whose selectors never overlap, and what makes no sense is refused by path."""

from __future__ import annotations

from typing import Any

from flower_federation.flower.layout import TELEMETRY_ENV
from tests.support.manifests import by_kind, container, env_by_name, get, pod_spec, workloads
from tests.support.render import core_objects, plan_of
from tests.support.validation import SUPEREXEC, problems, process_cfg, sts_pool

SPOT = {"key": "spot", "operator": "Exists", "effect": "NoSchedule"}
PRE_STOP = {"preStop": {"sleep": {"seconds": 3}}}
SIDECAR_ONLY = (
    "a sidecar SuperExec runs in the pool's pods (the pool's own keys): set it there, or use superexecPlacement: "
    "distributed"
)


def _superexec_settings(**extra: Any) -> dict[str, Any]:
    return {
        "labels": {"role": "executor"},
        "annotations": {"example.org/note": "superexec"},
        "podLabels": {"gpu": "true"},
        "podAnnotations": {"prometheus.io/scrape": "false"},
        "nodeSelector": {"accelerator": "a100"},
        "tolerations": [SPOT],
        "affinity": {"podAffinity": {}},
        "imagePullSecrets": ["gpu-registry"],
        "serviceAccount": {"annotations": {"eks.amazonaws.com/role-arn": "arn:aws:iam::1:role/fl"}},
        "podSecurityContext": {"fsGroupChangePolicy": "OnRootMismatch"},
        "updateStrategy": {"type": "OnDelete"},
        "lifecycle": PRE_STOP,
        "env": [{"name": "POOL_ENV", "value": "superexec"}, {"name": "ONLY_SUPEREXEC", "value": "1"}],
        "extraArgs": ["--max-retries", "3"],
        "containerPorts": {"health": 9181},
        "probes": {"livenessProbe": {"periodSeconds": 30}},
        **extra,
    }


def _distributed(pool_superexec: dict[str, Any], **top: Any) -> dict[str, Any]:
    pool = sts_pool(
        "a",
        2,
        nodeSelector={"tier": "cpu"},
        env=[{"name": "POOL_ENV", "value": "pool"}],
        superexec=pool_superexec,
    )
    raw = process_cfg(pool, **top)
    raw["superexecPlacement"] = "distributed"
    return raw


def test_a_pools_superexec_settings_reach_its_superexec_pods_only(k8s_validate):
    objects = core_objects(_distributed(_superexec_settings(), nodeSelector={"kubernetes.io/os": "linux"}))
    sts = get(objects, "StatefulSet", "dev-superexec-a")
    assert sts["metadata"]["labels"]["role"] == "executor"
    assert sts["metadata"]["annotations"] == {"example.org/note": "superexec"}
    assert sts["spec"]["updateStrategy"] == {"type": "OnDelete"}
    template = sts["spec"]["template"]
    assert template["metadata"]["labels"]["gpu"] == "true"
    assert template["metadata"]["annotations"] == {"prometheus.io/scrape": "false"}
    spec = template["spec"]
    assert spec["nodeSelector"] == {"kubernetes.io/os": "linux", "accelerator": "a100"}  # not the pool's tier
    assert spec["tolerations"] == [SPOT]
    assert spec["affinity"] == {"podAffinity": {}}
    assert spec["imagePullSecrets"] == [{"name": "gpu-registry"}]
    assert spec["securityContext"]["fsGroupChangePolicy"] == "OnRootMismatch"
    c = container(sts, "superexec-clientapp")
    assert c["lifecycle"] == PRE_STOP
    assert env_by_name(c)["POOL_ENV"]["value"] == "superexec" and "ONLY_SUPEREXEC" in env_by_name(c)
    assert c["args"][-2:] == ["--max-retries", "3"]
    assert c["args"][c["args"].index("--health-server-address") + 1] == "0.0.0.0:9181"
    assert c["livenessProbe"]["grpc"]["port"] == 9181 and c["livenessProbe"]["periodSeconds"] == 30
    assert c["readinessProbe"]["periodSeconds"] == 10
    sa = get(objects, "ServiceAccount", "dev-superexec-a")
    assert sa["metadata"]["annotations"] == {"eks.amazonaws.com/role-arn": "arn:aws:iam::1:role/fl"}
    # The SuperNodes keep the pool's own settings.
    supernodes = get(objects, "StatefulSet", "dev-supernode-a")
    assert pod_spec(supernodes)["nodeSelector"] == {"kubernetes.io/os": "linux", "tier": "cpu"}
    assert "lifecycle" not in container(supernodes, "supernode")
    assert env_by_name(container(supernodes, "supernode"))["POOL_ENV"]["value"] == "pool"
    for o in objects:
        k8s_validate(o)


def test_more_superexecs_per_supernode_get_statefulsets_of_their_own(k8s_validate):
    objects = core_objects(_distributed({"replicas": 3}))
    sets = {o["metadata"]["name"]: o for o in by_kind(objects, "StatefulSet") if "superexec" in o["metadata"]["name"]}
    assert sorted(sets) == ["dev-superexec-a", "dev-superexec-a-1", "dev-superexec-a-2"]
    selectors = []
    for c, name in enumerate(sorted(sets)):
        sts = sets[name]
        selector = sts["spec"]["selector"]["matchLabels"]
        assert selector["flower.flwr.ai/superexec-replica"] == str(c)
        assert sts["spec"]["replicas"] == 2  # one per SuperNode
        assert sts["spec"]["serviceName"] == "dev-supernode-a"
        assert pod_spec(sts)["serviceAccountName"] == "dev-superexec-a"
        host = env_by_name(container(sts, "superexec-clientapp"))["FLOWER_SUPERNODE_HOST"]["value"]
        assert host == "dev-supernode-a-$(FLOWER_POD_INDEX).dev-supernode-a.flower.svc.cluster.local"
        selectors.append(selector)
    # No StatefulSet selects another's pods.
    for sts in sets.values():
        labels = sts["spec"]["template"]["metadata"]["labels"]
        assert [s for s in selectors if s.items() <= labels.items()] == [sts["spec"]["selector"]["matchLabels"]]
    # One ServiceAccount and one policy cover them all.
    assert [sa["metadata"]["name"] for sa in by_kind(objects, "ServiceAccount")].count("dev-superexec-a") == 1
    policy = get(objects, "NetworkPolicy", "dev-superexec-a")
    assert "flower.flwr.ai/superexec-replica" not in policy["spec"]["podSelector"]["matchLabels"]
    for o in objects:
        k8s_validate(o)


def test_one_superexec_per_supernode_keeps_its_selector():
    sts = get(core_objects(_distributed({})), "StatefulSet", "dev-superexec-a")
    assert "flower.flwr.ai/superexec-replica" not in sts["spec"]["selector"]["matchLabels"]


def test_the_serverapp_superexec_deployment_takes_its_settings(k8s_validate):
    settings = {
        "replicas": 2,
        "updateStrategy": {"type": "Recreate"},
        "serviceAccount": {"labels": {"team": "ml"}},
        "env": [{"name": "SL_ONLY", "value": "1"}],
    }
    raw = _distributed(
        {}, superlink={"superexecImage": SUPEREXEC, "superexec": settings, "env": [{"name": "A", "value": "1"}]}
    )
    objects = core_objects(raw)
    deployment = get(objects, "Deployment", "dev-superexec-serverapp")
    assert deployment["spec"]["replicas"] == 2
    assert deployment["spec"]["strategy"] == {"type": "Recreate"}
    assert set(env_by_name(container(deployment, "superexec-serverapp"))) == {"A", "SL_ONLY", TELEMETRY_ENV}
    assert get(objects, "ServiceAccount", "dev-superexec-serverapp")["metadata"]["labels"]["team"] == "ml"
    for o in objects:
        k8s_validate(o)


def test_sidecars_take_the_container_settings():
    settings = {"lifecycle": PRE_STOP, "extraArgs": ["--max-retries", "3"], "containerPorts": {"health": 8090}}
    raw = process_cfg(
        sts_pool("a", 1, superexec=settings), superlink={"superexec": {"env": [{"name": "B", "value": "2"}]}}
    )
    objects = core_objects(raw)
    c = container(get(objects, "StatefulSet", "dev-supernode-a"), "superexec-clientapp")
    assert c["lifecycle"] == PRE_STOP and c["args"][-2:] == ["--max-retries", "3"]
    assert c["startupProbe"]["grpc"]["port"] == 8090
    serverapp = container(get(objects, "StatefulSet", "dev-superlink"), "superexec-serverapp")
    assert env_by_name(serverapp)["B"]["value"] == "2"


def test_a_superexec_policy_layers_over_the_pools():
    raw = _distributed({"networkPolicy": {"allowExternalEgress": True}})
    objects = core_objects(raw)
    assert get(objects, "NetworkPolicy", "dev-superexec-a")["spec"]["egress"] == [{}]
    assert get(objects, "NetworkPolicy", "dev-supernode-a")["spec"]["egress"] != [{}]
    raw = _distributed({"networkPolicy": {"enabled": False}})
    names = {o["metadata"]["name"] for o in by_kind(core_objects(raw), "NetworkPolicy")}
    assert "dev-superexec-a" not in names and "dev-supernode-a" in names


def test_superexec_probes_inherit_from_the_components_probes():
    raw = _distributed(
        {"probes": {"readinessProbe": {"failureThreshold": 9}}},
        supernodes={"probes": {"readinessProbe": {"periodSeconds": 7}}},
    )
    plan = plan_of(raw)
    probes = plan.clientapp_superexec_probes(plan.spec.supernodes.pools[0])
    assert (probes.readiness_probe.period_seconds, probes.readiness_probe.failure_threshold) == (7, 9)
    assert plan.supernode_probes.readiness_probe.failure_threshold == 3


def test_pod_settings_of_a_sidecar_are_refused_where_they_would_be_lost():
    raw = process_cfg(
        sts_pool("a", 1, superexec={"replicas": 2, "nodeSelector": {"a": "b"}, "containerPorts": {"health": 8081}})
    )
    assert problems(raw) == [
        (
            "federation.supernodes.pools[0].superexec.containerPorts.health",
            "port 8081 is the SuperNode's health server's in this shared pod",
        ),
        ("federation.supernodes.pools[0].superexec.nodeSelector", SIDECAR_ONLY),
        ("federation.supernodes.pools[0].superexec.replicas", SIDECAR_ONLY),
    ]


def test_no_superexec_settings_without_superexecs():
    raw = {"superlink": {"superexec": {"env": [{"name": "X", "value": "1"}]}}, "supernodes": {"pools": [sts_pool()]}}
    assert problems(raw) == [
        (
            "federation.superlink.superexec",
            "there is no SuperExec in subprocess isolation: remove it, or set isolationMode: process",
        )
    ]


def test_the_kubernetes_executor_keeps_one_superexec_with_its_token():
    raw = _distributed({"replicas": 2, "automountServiceAccountToken": False}, executor={"type": "kubernetes"})
    assert problems(raw) == [
        (
            "federation.supernodes.pools[0].superexec.automountServiceAccountToken",
            "the Kubernetes executor starts pods through the API: it needs the token",
        ),
        (
            "federation.supernodes.pools[0].superexec.replicas",
            "with the Kubernetes executor one SuperExec starts as many task pods as executor.config allows "
            "(active-pod-budget): more SuperExecs would only compete for them",
        ),
    ]


def test_replica_statefulsets_never_take_another_pools_names():
    raw = _distributed({"replicas": 2})
    raw["supernodes"]["pools"].append(sts_pool("a-1", 1, images={"superexecClientApp": SUPEREXEC}))
    assert problems(raw) == [
        (
            "federation.supernodes.pools[0].superexec.replicas",
            "StatefulSet 'dev-superexec-a-1' would take the name of supernodes.pools[1]'s SuperExecs",
        )
    ]
    long = _distributed({"replicas": 12})
    long["name"] = "f" * 29  # dev-superexec-P-1 .. -9 fit (52 characters), -10 and -11 do not
    long["supernodes"]["pools"][0]["name"] = "p" * 10
    assert problems(long) == [
        (
            "federation.supernodes.pools[0].superexec.replicas",
            f"object name '{'f' * 29}-superexec-{'p' * 10}-11' has 53 characters; a StatefulSet name may have at most "
            "52 (Kubernetes adds a revision hash to it)",
        )
    ]


def test_superexec_network_policy_opens_nothing_it_has_no_api_for():
    raw = _distributed({"networkPolicy": {"allowExternal": True, "ingressPodMatchLabels": {"a": "b"}}})
    message = "a SuperExec serves no API: there is nothing to open"
    assert problems(raw) == [
        ("federation.supernodes.pools[0].superexec.networkPolicy.allowExternal", message),
        ("federation.supernodes.pools[0].superexec.networkPolicy.ingressPodMatchLabels", message),
    ]


def test_every_workload_still_selects_only_its_own_pods():
    objects = core_objects(_distributed({"replicas": 2}))
    for w in workloads(objects):
        selector = w["spec"]["selector"]["matchLabels"]
        owners = [
            o for o in workloads(objects) if selector.items() <= o["spec"]["template"]["metadata"]["labels"].items()
        ]
        assert owners == [w], w["metadata"]["name"]
