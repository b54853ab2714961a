"""Resources: every container (init containers, the registration Job's and the Kubernetes
executor's task pods included) gets requests and a memory limit by default, sized per
role; presets are Bitnami's table without CPU limits; layers merge key by key (preset:
component's, else top level, else the role's; then `defaultResources`; then the
component's own `resources`); no request is ever rendered above its limit."""

from __future__ import annotations

from typing import Any

import pytest

from flower_federation.kube.quantity import parse_quantity
from tests.support.defaults import ADDED_CONTAINER_PRESET, PRESETS, TASK_POD_PRESET, role_preset
from tests.support.manifests import by_kind, container, index, pod_spec, workloads
from tests.support.render import core_objects
from tests.support.security_matrix import DEV, NAME, STACK_IDS, executor_configs, security_objects, security_plan
from tests.support.stacks import GRPC_ERA, HTTP_ERA, base
from tests.support.validation import problems


def all_containers(objects) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """(workload, container) of every container and init container of every workload."""
    return [
        (w, c) for w in workloads(objects) for c in pod_spec(w)["containers"] + pod_spec(w).get("initContainers", [])
    ]


def by_container(objects) -> dict[tuple[str, str], dict[str, Any]]:
    return {(w["metadata"]["name"], c["name"]): c["resources"] for w, c in all_containers(objects)}


def assert_requests_within_limits(where: str, resources: dict[str, Any]) -> None:
    limits, requests = resources.get("limits", {}), resources.get("requests", {})
    for name, amount in requests.items():
        if name in limits:
            assert parse_quantity(str(amount)) <= parse_quantity(str(limits[name])), (where, name, amount, limits[name])


def protected(where: str, resources: dict[str, Any]) -> None:
    """What the cluster needs of every container: CPU and memory requests, a memory limit."""
    assert {"cpu", "memory"} <= set(resources.get("requests", {})), (where, resources)
    assert "memory" in resources.get("limits", {}), (where, resources)
    assert_requests_within_limits(where, resources)


# --- by default ---------------------------------------------------------------------------------


@pytest.mark.parametrize("sid", [*STACK_IDS, DEV])
def test_every_container_and_task_pod_gets_requests_and_a_memory_limit(sid):
    objects = security_objects(sid)
    count = 0
    for w, c in all_containers(objects):
        protected(f"{w['metadata']['name']}/{c['name']}", c["resources"])
        # CPU limits stay opt-in (CFS throttling slows training).
        assert "cpu" not in c["resources"]["limits"], (w["metadata"]["name"], c["name"])
        count += 1
    assert count >= 3
    for name, config in executor_configs(objects).items():
        protected(f"task pods of {name}", config["resources"])


@pytest.mark.parametrize("sid", STACK_IDS)
def test_each_role_gets_its_default_preset(sid):
    """SuperLink small; SuperNode small where its ClientApps train in it, micro where a
    SuperExec runs them; SuperExecs small, micro when task pods run the apps; the
    registration Job micro; task pods small."""
    plan = security_plan(sid)
    objects = security_objects(sid)
    roles = set()
    for w, c in all_containers(objects):
        want = role_preset(
            c["name"], process_isolation=plan.process_isolation, kubernetes_executor=plan.kubernetes_executor
        )
        assert c["resources"] == PRESETS[want], (w["metadata"]["name"], c["name"], want)
        roles.add((c["name"], want))
    assert ("superlink", "small") in roles
    for config in executor_configs(objects).values():
        assert config["resources"] == PRESETS[TASK_POD_PRESET]


def test_the_roles_defaults_across_the_matrix():
    """The matrix holds every role default: a SuperNode that trains and one that relays, a
    SuperExec that runs apps and one that launches pods, the registration Job."""
    seen = set()
    for sid in STACK_IDS:
        for _, c in all_containers(security_objects(sid)):
            seen.add((c["name"], c["resources"]["limits"]["memory"]))
    assert {
        ("superlink", "768Mi"),
        ("supernode", "768Mi"),
        ("supernode", "384Mi"),
        ("superexec-clientapp", "768Mi"),
        ("superexec-clientapp", "384Mi"),
        ("superexec-serverapp", "384Mi"),
        ("node-registration", "384Mi"),
    } <= seen


# --- presets --------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_each_preset_renders_bitnamis_requests_and_memory_limit(name):
    raw = base(HTTP_ERA, superlink={"resourcesPreset": name})
    res = by_container(core_objects(raw))
    assert res[(f"{NAME}-superlink", "superlink")] == PRESETS[name]
    assert res[(f"{NAME}-supernode-alpha", "supernode")] == PRESETS["small"]  # only the SuperLink changed


def test_the_top_level_preset_sizes_every_container_without_its_own():
    raw = base(
        HTTP_ERA,
        isolation="process",
        placement="distributed",
        resourcesPreset="medium",
        nodeAuth={"enabled": True},
        executor={"type": "kubernetes"},
        superlink={"podTemplate": {"spec": {"initContainers": [{"name": "fetch", "image": "busybox:1.36"}]}}},
    )
    raw["supernodes"]["pools"][1]["supernodeResourcesPreset"] = "nano"
    objects = core_objects(raw)
    for (workload, name), resources in by_container(objects).items():
        want = "nano" if (workload, name) == (f"{NAME}-supernode-beta", "supernode") else "medium"
        assert resources == PRESETS[want], (workload, name)
    for config in executor_configs(objects).values():
        assert config["resources"] == PRESETS["medium"]
    assert any(w["kind"] == "Job" for w in workloads(objects))


def test_preset_none_leaves_only_what_config_sets():
    raw = base(
        GRPC_ERA,
        resourcesPreset="none",
        defaultResources={"requests": {"cpu": "50m"}},
        superlink={"resourcesPreset": "micro"},
    )
    raw["supernodes"]["pools"][0]["supernodeResources"] = {"limits": {"memory": "1Gi"}}
    res = by_container(core_objects(raw))
    assert res[(f"{NAME}-superlink", "superlink")] == {
        "requests": {"cpu": "50m", "memory": "256Mi"},
        "limits": {"memory": "384Mi"},
    }
    assert res[(f"{NAME}-supernode-alpha", "supernode")] == {"requests": {"cpu": "50m"}, "limits": {"memory": "1Gi"}}
    assert res[(f"{NAME}-supernode-beta", "supernode")] == {"requests": {"cpu": "50m"}}


# --- layers, key by key -------------------------------------------------------------------------------


def test_component_resources_override_their_preset_key_by_key():
    raw = base(
        GRPC_ERA,
        isolation="process",
        superlink={
            "superexecImage": f"flwr/superexec:{GRPC_ERA}",
            "resources": {"requests": {"cpu": "2"}},
            "superexecResources": {"limits": {"cpu": "1"}},
            "superexecResourcesPreset": "large",
        },
    )
    raw["supernodes"]["pools"][0]["supernodeResources"] = {"limits": {"memory": "128Mi"}}
    raw["supernodes"]["pools"][0]["superexecResources"] = {
        "requests": {"memory": "1Gi"},
        "limits": {"nvidia.com/gpu": 1},
    }
    objects = core_objects(raw)
    res = by_container(objects)
    assert res[(f"{NAME}-superlink", "superlink")] == {
        "requests": {"cpu": "2", "memory": "512Mi"},
        "limits": {"memory": "768Mi"},
    }
    # An opt-in CPU limit, over the component's own preset.
    assert res[(f"{NAME}-superlink", "superexec-serverapp")] == {
        "requests": {"cpu": "1", "memory": "2Gi"},
        "limits": {"cpu": "1", "memory": "3Gi"},
    }
    # A memory limit below the preset's request lowers the request (micro: a relaying SuperNode).
    assert res[(f"{NAME}-supernode-alpha", "supernode")] == {
        "requests": {"cpu": "250m", "memory": "128Mi"},
        "limits": {"memory": "128Mi"},
    }
    assert res[(f"{NAME}-supernode-alpha", "superexec-clientapp")] == {
        "requests": {"cpu": "500m", "memory": "1Gi"},
        "limits": {"memory": "1Gi", "nvidia.com/gpu": 1},
    }
    assert res[(f"{NAME}-supernode-beta", "supernode")] == PRESETS["micro"]
    for where, resources in res.items():
        assert_requests_within_limits(str(where), resources)


def test_default_resources_sit_between_the_preset_and_the_components_own():
    raw = base(
        HTTP_ERA,
        defaultResources={
            "requests": {"cpu": "100m"},
            "limits": {"cpu": "2", "ephemeral-storage": "4Gi"},
        },
        superlink={"resources": {"limits": {"cpu": "500m", "memory": "100Mi"}}},
    )
    raw["supernodes"]["pools"][1]["supernodeResourcesPreset"] = "large"
    res = by_container(core_objects(raw))
    assert res[(f"{NAME}-superlink", "superlink")] == {
        "requests": {"cpu": "100m", "memory": "100Mi"},
        "limits": {"cpu": "500m", "memory": "100Mi", "ephemeral-storage": "4Gi"},
    }
    assert res[(f"{NAME}-supernode-alpha", "supernode")] == {
        "requests": {"cpu": "100m", "memory": "512Mi"},
        "limits": {"cpu": "2", "memory": "768Mi", "ephemeral-storage": "4Gi"},
    }
    assert res[(f"{NAME}-supernode-beta", "supernode")] == {
        "requests": {"cpu": "100m", "memory": "2Gi"},
        "limits": {"cpu": "2", "memory": "3Gi", "ephemeral-storage": "4Gi"},
    }


def test_a_request_above_the_presets_limit_raises_the_limit():
    """An operator-style `requests.memory: 2Gi` without limits: the pod would be refused
    if the preset's 768Mi limit stayed; the request the user wrote wins."""
    raw = base(GRPC_ERA)
    raw["supernodes"]["pools"][0]["supernodeResources"] = {"requests": {"memory": "2Gi"}}
    res = by_container(core_objects(raw))
    assert res[(f"{NAME}-supernode-alpha", "supernode")] == {
        "requests": {"cpu": "500m", "memory": "2Gi"},
        "limits": {"memory": "2Gi"},
    }


def test_containers_a_pod_template_adds_get_the_helper_preset_under_their_own():
    added = PRESETS[ADDED_CONTAINER_PRESET]
    pod_template = {
        "spec": {
            "initContainers": [{"name": "fetch-data", "image": "busybox:1.36"}],
            "containers": [
                {"name": "log-shipper", "image": "fluent/fluent-bit:3.0", "resources": {"limits": {"memory": "64Mi"}}},
                {"name": "supernode", "resources": {"limits": {"cpu": "4"}}},
            ],
        }
    }
    raw = base(
        HTTP_ERA, superlink={"podTemplate": {"spec": {"initContainers": [{"name": "wait", "image": "busybox:1.36"}]}}}
    )
    raw["supernodes"]["pools"][0]["podTemplate"] = pod_template
    objects = core_objects(raw)
    sts = index(objects)[("StatefulSet", f"{NAME}-supernode-alpha")]
    init = {c["name"]: c for c in pod_spec(sts)["initContainers"]}
    assert init["fetch-data"]["resources"] == added
    assert container(sts, "log-shipper")["resources"] == {
        "requests": {"cpu": "100m", "memory": "64Mi"},
        "limits": {"memory": "64Mi"},
    }
    # Ours keep their role's preset, patched key by key.
    assert container(sts, "supernode")["resources"] == {
        "requests": PRESETS["small"]["requests"],
        "limits": {"memory": "768Mi", "cpu": "4"},
    }
    superlink = index(objects)[("StatefulSet", f"{NAME}-superlink")]
    inits = {c["name"]: c for c in pod_spec(superlink)["initContainers"]}
    assert inits["wait"]["resources"] == added


# --- task pods ------------------------------------------------------------------------------------------


def executor_stack(**executor: Any) -> dict[str, Any]:
    return base(HTTP_ERA, isolation="process", placement="distributed", executor={"type": "kubernetes", **executor})


def test_task_pods_take_executor_preset_and_config_resources_key_by_key():
    raw = executor_stack(
        resourcesPreset="large",
        config={"resources": {"limits": {"nvidia.com/gpu": 1, "memory": "8Gi"}}, "active-pod-budget": 2},
    )
    configs = executor_configs(core_objects(raw))
    assert len(configs) == 3  # the ServerApp SuperExec and one per pool
    for config in configs.values():
        assert config["resources"] == {
            "requests": {"cpu": "1", "memory": "2Gi"},
            "limits": {"memory": "8Gi", "nvidia.com/gpu": 1},
        }
        assert config["active-pod-budget"] == 2


def test_task_pods_and_launching_superexecs_by_default():
    objects = core_objects(executor_stack())
    for config in executor_configs(objects).values():
        assert config["resources"] == PRESETS["small"]
    res = by_container(objects)
    assert res[(f"{NAME}-superexec-serverapp", "superexec-serverapp")] == PRESETS["micro"]
    assert res[(f"{NAME}-superexec-alpha", "superexec-clientapp")] == PRESETS["micro"]
    assert res[(f"{NAME}-supernode-alpha", "supernode")] == PRESETS["micro"]


def test_task_pods_without_any_resources_get_no_resources_key():
    configs = executor_configs(core_objects(executor_stack(resourcesPreset="none")))
    assert configs and all("resources" not in c for c in configs.values())


def test_registration_job_takes_the_top_level_preset_and_default_resources():
    raw = base(HTTP_ERA, nodeAuth={"enabled": True}, resourcesPreset="nano", defaultResources={"limits": {"cpu": "1"}})
    jobs = by_kind(core_objects(raw), "Job")
    assert len(jobs) == 2  # registration, then revocation
    for job in jobs:
        assert pod_spec(job)["containers"][0]["resources"] == {
            "requests": {"cpu": "100m", "memory": "128Mi"},
            "limits": {"cpu": "1", "memory": "192Mi"},
        }


# --- bad values -----------------------------------------------------------------------------------------

PRESET_NAMES = "'none', 'nano', 'micro', 'small', 'medium', 'large', 'xlarge' or '2xlarge'"


def test_bad_presets_and_conflicting_requests_are_reported_together_by_path():
    raw = base(
        GRPC_ERA,
        resourcesPreset="huge",
        defaultResources={"requests": {"memory": "2Gi"}, "limits": {"memory": "1Gi"}},
        superlink={"resourcesPreset": 2, "superexecResourcesPreset": "small"},
    )
    raw["supernodes"]["pools"][1]["supernodeResourcesPreset"] = "Small"
    raw["supernodes"]["pools"][1]["superexecResourcesPreset"] = "small"
    raw["supernodes"]["pools"][0]["supernodeResources"] = {"requests": {"cpu": "2"}, "limits": {"cpu": "1500m"}}
    subprocess_only = "only used with isolationMode: process (a SuperExec runs the apps only there)"
    assert problems(raw) == [
        ("federation.defaultResources.requests.memory", "'2Gi' is above limits.memory '1Gi'"),
        ("federation.resourcesPreset", f"Input should be {PRESET_NAMES}, not 'huge'"),
        ("federation.superlink.resourcesPreset", f"Input should be {PRESET_NAMES}, not 2"),
        ("federation.superlink.superexecResourcesPreset", subprocess_only),
        ("federation.supernodes.pools[0].supernodeResources.requests.cpu", "'2' is above limits.cpu '1500m'"),
        ("federation.supernodes.pools[1].superexecResourcesPreset", subprocess_only),
        ("federation.supernodes.pools[1].supernodeResourcesPreset", f"Input should be {PRESET_NAMES}, not 'Small'"),
    ]


def test_task_pod_resources_are_checked_before_flower_copies_them_into_pods():
    raw = executor_stack(config={"resources": {"requests": {"cpu": "1x"}, "limit": {}}})
    assert problems(raw) == [
        (
            "federation.executor.config.resources",
            "not a Kubernetes field here: Additional properties are not allowed ('limit' was unexpected)",
        ),
        ("federation.executor.config.resources.requests.cpu", "'1x' is not a Kubernetes quantity (e.g. 500m, 2, 1Gi)"),
    ]
    assert problems(executor_stack(config={"resources": "large"})) == [
        ("federation.executor.config.resources", "must be a mapping (ResourceRequirements: requests, limits)")
    ]
    assert problems(
        executor_stack(config={"resources": {"requests": {"memory": "1Gi"}, "limits": {"memory": "1G"}}})
    ) == [("federation.executor.config.resources.requests.memory", "'1Gi' is above limits.memory '1G'")]


def test_executor_preset_needs_the_kubernetes_executor():
    assert problems(base(HTTP_ERA, executor={"resourcesPreset": "small"})) == [
        ("federation.executor.resourcesPreset", "only used with executor.type: kubernetes")
    ]
