"""Validation of Kubernetes fragments (podTemplate, env, resources, volumes, mounts,
claims) against the Kubernetes 1.34 schema, as quantities, and against what
flower-federation manages itself (reserved env names, volumes, mount paths, the managed
containers' image/command/args and the selector labels)."""

from __future__ import annotations

import pytest

from tests.support.validation import assert_valid, cfg, not_a_field, pool, problems, sts_pool


def test_pod_template_typo_superlink():
    raw = cfg(superlink={"podTemplate": {"spec": {"nodeSelectr": {"pool": "gpu"}}}})
    assert problems(raw) == [("federation.superlink.podTemplate.spec", not_a_field("nodeSelectr"))]


def test_pod_template_typo_pool():
    raw = cfg(
        sts_pool("a"), sts_pool("b", podTemplate={"spec": {"tolerations": [{"key": "gpu", "efect": "NoSchedule"}]}})
    )
    assert problems(raw) == [
        ("federation.supernodes.pools[1].podTemplate.spec.tolerations[0]", not_a_field("efect")),
    ]


def test_pod_template_valid_patch_is_accepted():
    assert_valid(
        cfg(
            superlink={
                "podTemplate": {
                    "metadata": {"labels": {"team": "ml"}, "annotations": {"a": "b"}},
                    "spec": {
                        "nodeSelector": {"pool": "cpu"},
                        "tolerations": [{"key": "k", "effect": "NoSchedule"}],
                        "containers": [
                            {"name": "superlink", "env": [{"name": "X", "value": "1"}]},
                            {"name": "sidecar", "image": "busybox", "args": ["sleep", "inf"]},
                        ],
                    },
                }
            }
        )
    )


@pytest.mark.parametrize(
    "where, raw",
    [
        ("federation.superlink.env[0]", cfg(superlink={"env": [{"value": "x"}]})),
        ("federation.supernodes.env[1]", cfg(supernodes={"env": [{"name": "A", "value": "1"}, {"value": "x"}]})),
        ("federation.supernodes.pools[0].env[0]", cfg(sts_pool("a", env=[{"value": "x"}]))),
    ],
)
def test_env_entry_without_name(where, raw):
    assert problems(raw) == [(where, "'name' is a required property")]


def test_env_value_from_typo():
    raw = cfg(superlink={"env": [{"name": "A", "valueFrom": {"secretKeyRef": {"name": "s", "kee": "k"}}}]})
    assert problems(raw) == [
        ("federation.superlink.env[0].valueFrom.secretKeyRef", "'key' is a required property"),
        ("federation.superlink.env[0].valueFrom.secretKeyRef", not_a_field("kee")),
    ]


def test_bad_resources():
    raw = cfg(superlink={"resources": {"request": {"cpu": "1"}, "limits": {"cpu": "2 cores"}}})
    assert problems(raw) == [
        ("federation.superlink.resources", not_a_field("request")),
        ("federation.superlink.resources.limits.cpu", "'2 cores' is not a Kubernetes quantity (e.g. 500m, 2, 1Gi)"),
    ]


def test_resource_quantity_of_wrong_type():
    raw = cfg(superlink={"resources": {"limits": {"cpu": [1]}}})
    found = problems(raw)
    assert {p for p, _ in found} == {"federation.superlink.resources.limits.cpu"}
    assert "[1] is not of type 'string', 'null'" in [m for _, m in found]


@pytest.mark.parametrize("key", ["supernodeResources", "superexecResources"])
def test_bad_pool_resources(key):
    raw = cfg(sts_pool("a", **{key: {"limts": {"cpu": "1"}}}))
    assert problems(raw) == [(f"federation.supernodes.pools[0].{key}", not_a_field("limts"))]


def test_resources_in_usual_yaml_spellings_are_valid():
    assert_valid(
        cfg(
            sts_pool(
                "a",
                supernodeResources={
                    "requests": {"cpu": "500m", "memory": "1Gi"},
                    "limits": {"cpu": 2, "memory": 1073741824, "nvidia.com/gpu": 1, "ephemeral-storage": "1.5e3"},
                },
            )
        )
    )


@pytest.mark.parametrize("quantity", ["2 cores", "1x", "-", "1.5.0", "Gi", "1.5e3M"])
@pytest.mark.parametrize("section", ["limits", "requests"])
def test_invalid_resource_quantity_is_reported(section, quantity):
    raw = cfg(sts_pool("a", supernodeResources={section: {"cpu": quantity}}))
    assert problems(raw) == [
        (
            f"federation.supernodes.pools[0].supernodeResources.{section}.cpu",
            f"'{quantity}' is not a Kubernetes quantity (e.g. 500m, 2, 1Gi)",
        ),
    ]


@pytest.mark.parametrize("size", ["1 GB", "lots"])
def test_invalid_persistence_size_is_reported(size):
    assert problems(cfg(superlink={"persistence": {"size": size}})) == [
        ("federation.superlink.persistence.size", f"'{size}' is not a Kubernetes quantity (e.g. 1Gi)"),
    ]


@pytest.mark.parametrize("env_name", ["FLOWER_POD_INDEX", "FLOWER_NODE_NAME", "FLOWER_SUPERNODE_HOST"])
@pytest.mark.parametrize(
    "section, make",
    [
        ("federation.superlink.env", lambda env: cfg(superlink={"env": env})),
        ("federation.supernodes.env", lambda env: cfg(supernodes={"env": env})),
        ("federation.supernodes.pools[0].env", lambda env: cfg(sts_pool("a", env=env))),
    ],
    ids=["superlink", "supernodes", "pool"],
)
def test_reserved_env_names(section, make, env_name):
    raw = make([{"name": "OK", "value": "1"}, {"name": env_name, "value": "3"}])
    assert problems(raw) == [
        (f"{section}[1].name", f"{env_name} is set by flower-federation (node config placeholders)"),
    ]


@pytest.mark.parametrize("key", ["volumeMounts", "superexecVolumeMounts"])
def test_volume_mount_of_unknown_volume(key):
    raw = cfg(
        sts_pool(
            "a",
            volumes=[{"name": "data", "emptyDir": {}}],
            **{key: [{"name": "data", "mountPath": "/data"}, {"name": "dataa", "mountPath": "/d2"}]},
        )
    )
    assert problems(raw) == [
        (f"federation.supernodes.pools[0].{key}[1].name", "no volume named 'dataa' in volumes or volumeClaimTemplates"),
    ]


def test_superlink_volume_mount_of_unknown_volume():
    raw = cfg(superlink={"volumeMounts": [{"name": "models", "mountPath": "/models"}]})
    assert problems(raw) == [
        ("federation.superlink.volumeMounts[0].name", "no volume named 'models' in volumes or volumeClaimTemplates"),
    ]


def test_volume_mounts_of_declared_volumes_are_valid():
    claim = {
        "metadata": {"name": "claim"},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
    }
    assert_valid(
        cfg(
            sts_pool(
                "a",
                volumes=[{"name": "vol", "emptyDir": {}}],
                volumeClaimTemplates=[claim],
                podTemplate={"spec": {"volumes": [{"name": "tpl", "emptyDir": {}}]}},
                volumeMounts=[
                    {"name": "vol", "mountPath": "/v"},
                    {"name": "claim", "mountPath": "/c"},
                    {"name": "tpl", "mountPath": "/t"},
                ],
            )
        )
    )


def test_volume_claim_templates_rejected_in_daemonset_mode():
    claim = {
        "metadata": {"name": "data"},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
    }
    raw = cfg(
        pool("a", volumeClaimTemplates=[claim], volumeMounts=[{"name": "data", "mountPath": "/data"}]), mode="DaemonSet"
    )
    assert problems(raw) == [
        (
            "federation.supernodes.pools[0].volumeClaimTemplates",
            "volumeClaimTemplates need mode=StatefulSet (a DaemonSet has no per-pod claims)",
        ),
    ]
    assert_valid(
        cfg(sts_pool("a", volumeClaimTemplates=[claim], volumeMounts=[{"name": "data", "mountPath": "/data"}]))
    )


def test_reserved_volume_name_and_mount_path():
    raw = cfg(
        sts_pool(
            "a",
            volumes=[{"name": "state", "emptyDir": {}}, {"name": "d", "emptyDir": {}}],
            volumeMounts=[{"name": "d", "mountPath": "/tmp"}],
        )
    )
    assert problems(raw) == [
        (
            "federation.supernodes.pools[0].volumeMounts[0].mountPath",
            "/tmp is already a writable emptyDir mounted by flower-federation; leave this mount out",
        ),
        ("federation.supernodes.pools[0].volumes[0].name", "volume name 'state' is used by flower-federation"),
    ]


@pytest.mark.parametrize("field, hint", [("args", "extraArgs"), ("command", "extraArgs"), ("image", "images")])
def test_pod_template_cannot_override_managed_container(field, hint):
    container = {"name": "supernode", field: ["x"] if field != "image" else "evil/supernode:1"}
    raw = cfg(sts_pool("a", podTemplate={"spec": {"containers": [container]}}))
    assert problems(raw) == [
        (
            f"federation.supernodes.pools[0].podTemplate.spec.containers[0].{field}",
            f"the supernode container's {field} is managed; use {hint} instead",
        ),
    ]


def test_superlink_pod_template_cannot_override_superlink_args():
    raw = cfg(
        superlink={
            "podTemplate": {
                "spec": {
                    "containers": [
                        {"name": "sidecar", "image": "busybox:1.36"},
                        {"name": "superlink", "args": ["--insecure"]},
                    ]
                }
            }
        }
    )
    assert problems(raw) == [
        (
            "federation.superlink.podTemplate.spec.containers[1].args",
            "the superlink container's args is managed; use extraArgs instead",
        ),
    ]


@pytest.mark.parametrize(
    "label, ours",
    [("app.kubernetes.io/instance", "dev"), ("app.kubernetes.io/component", "supernode"), ("flower.flwr.ai/pool", "a")],
)
def test_pod_template_labels_cannot_override_selector_labels(label, ours):
    raw = cfg(sts_pool("a", podTemplate={"metadata": {"labels": {"team": "ml", label: "other"}}}))
    assert problems(raw) == [
        (
            f'federation.supernodes.pools[0].podTemplate.metadata.labels["{label}"]',
            f"'other': selector/ownership label set by flower-federation (here '{ours}')",
        ),
    ]


def test_superlink_pod_template_instance_label():
    raw = cfg(superlink={"podTemplate": {"metadata": {"labels": {"app.kubernetes.io/instance": "x"}}}})
    assert problems(raw) == [
        (
            'federation.superlink.podTemplate.metadata.labels["app.kubernetes.io/instance"]',
            "'x': selector/ownership label set by flower-federation (here 'dev')",
        ),
    ]


@pytest.mark.parametrize("key", ["volumes", "volumeClaimTemplates"])
def test_a_volume_or_claim_that_is_not_a_mapping_is_reported(key):
    # Found by the config fuzzer: the reserved-name check read `.get` of a string (a traceback).
    raw = cfg(sts_pool("a", **{key: ["data"]}))
    assert problems(raw) == [(f"federation.supernodes.pools[0].{key}[0]", "'data' is not of type 'object'")]


def test_duplicate_volumes_claims_and_mount_paths_are_reported():
    # Found by the config fuzzer: both copies reached the pod, which the API server refuses.
    claim = {
        "metadata": {"name": "cache"},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
    }
    raw = cfg(
        sts_pool(
            "a",
            volumes=[{"name": "data", "emptyDir": {}}, {"name": "data", "configMap": {"name": "cfg"}}],
            volumeClaimTemplates=[claim, claim],
            volumeMounts=[{"name": "data", "mountPath": "/data"}, {"name": "cache", "mountPath": "/data"}],
        ),
        superlink={"volumes": [{"name": "x", "emptyDir": {}}] * 2},
    )
    assert problems(raw) == [
        ("federation.superlink.volumes[1].name", "duplicate volume name 'x' (also volumes[0])"),
        (
            "federation.supernodes.pools[0].volumeClaimTemplates[1].metadata.name",
            "duplicate claim name 'cache' (also volumeClaimTemplates[0])",
        ),
        (
            "federation.supernodes.pools[0].volumeMounts[1].mountPath",
            "duplicate mountPath '/data' (also volumeMounts[0])",
        ),
        ("federation.supernodes.pools[0].volumes[1].name", "duplicate volume name 'data' (also volumes[0])"),
    ]


def test_pod_template_containers_merge_into_ours_or_are_complete_containers():
    # Found by the config fuzzer: a patch of a container the pod does not run, or a container
    # of the user's without an image, reached the pod as a container without an image.
    patch = {
        "spec": {
            "containers": [
                {"name": "superexec-clientapp", "env": [{"name": "A", "value": "1"}]},
                {"name": "sidecar"},
                {"name": "supernode", "env": [{"name": "A", "value": "1"}]},
            ],
            "initContainers": [{"name": "supernode", "image": "busybox:1.36"}, {"name": "fetch"}],
        }
    }
    raw = cfg(
        sts_pool("a", podTemplate=patch),
        superlink={"podTemplate": {"spec": {"containers": [{"name": "superexec-serverapp"}]}}},
    )
    at = "federation.supernodes.pools[0].podTemplate.spec"
    assert problems(raw) == [
        (
            "federation.superlink.podTemplate.spec.containers[0].name",
            "these pods run no superexec-serverapp container (theirs: superlink)",
        ),
        (f"{at}.containers[0].name", "these pods run no superexec-clientapp container (theirs: supernode)"),
        (f"{at}.containers[1].image", "required: 'sidecar' is a container of your own (ours: supernode)"),
        (f"{at}.initContainers[0].name", "'supernode' is the name of a container of flower-federation's"),
        (f"{at}.initContainers[1].image", "required: 'fetch' is a container of your own (ours: supernode)"),
    ]


def test_pod_template_container_mounts_name_a_declared_volume():
    # Found by the config fuzzer: a patch's mount of a volume the pod does not have reached the pod.
    patch = {
        "spec": {
            "volumes": [{"name": "tpl", "emptyDir": {}}],
            "containers": [
                {
                    "name": "supernode",
                    "volumeMounts": [{"name": "tpl", "mountPath": "/t"}, {"name": "data", "mountPath": "/d"}],
                }
            ],
            "initContainers": [
                {"name": "fetch", "image": "busybox:1.36", "volumeMounts": [{"name": "ca", "mountPath": "/c"}]}
            ],
        }
    }
    assert problems(cfg(sts_pool("a", podTemplate=patch))) == [
        (
            "federation.supernodes.pools[0].podTemplate.spec.containers[0].volumeMounts[1].name",
            "no volume named 'data' in volumes, volumeClaimTemplates or podTemplate.spec.volumes",
        ),
        (
            "federation.supernodes.pools[0].podTemplate.spec.initContainers[0].volumeMounts[0].name",
            "no volume named 'ca' in volumes, volumeClaimTemplates or podTemplate.spec.volumes",
        ),
    ]


@pytest.mark.parametrize("where", ["superlink", "pool"])
def test_a_claim_needs_a_name(where):
    # Found by the config fuzzer: a claim template without metadata.name reached the StatefulSet.
    claim = {"spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}
    raw = (
        cfg(sts_pool("a", volumeClaimTemplates=[claim]))
        if where == "pool"
        else cfg(superlink={"volumeClaimTemplates": [claim]})
    )
    at = "federation.supernodes.pools[0]" if where == "pool" else "federation.superlink"
    assert problems(raw) == [
        (f"{at}.volumeClaimTemplates[0].metadata.name", "required: the name mounts use for the claim")
    ]


def test_amounts_are_not_negative_and_no_request_exceeds_its_own_limit():
    # Found by the config fuzzer: a negative amount, or a request above the limit set next to
    # it, reached the pod (the API server refuses both); a podTemplate container's amounts
    # were not checked at all. (A component's request above a *default* limit raises the limit.)
    patch = {
        "spec": {
            "containers": [
                {"name": "supernode", "resources": {"requests": {"cpu": "lots"}}},
                {
                    "name": "sidecar",
                    "image": "busybox:1.36",
                    "resources": {"requests": {"memory": "2Gi"}, "limits": {"memory": "1Gi"}},
                },
            ]
        }
    }
    raw = cfg(
        sts_pool("a", supernodeResources={"requests": {"memory": "-1Gi"}}, podTemplate=patch),
        defaultResources={"requests": {"cpu": "2"}, "limits": {"cpu": "1"}},
        superlink={"persistence": {"size": "0"}},
    )
    at = "federation.supernodes.pools[0]"
    assert problems(raw) == [
        ("federation.defaultResources.requests.cpu", "'2' is above limits.cpu '1'"),
        ("federation.superlink.persistence.size", "'0' must be more than 0 (e.g. 1Gi)"),
        (
            f"{at}.podTemplate.spec.containers[0].resources.requests.cpu",
            "'lots' is not a Kubernetes quantity (e.g. 500m, 2, 1Gi)",
        ),
        (f"{at}.podTemplate.spec.containers[1].resources.requests.memory", "'2Gi' is above limits.memory '1Gi'"),
        (f"{at}.supernodeResources.requests.memory", "'-1Gi' is negative"),
    ]
