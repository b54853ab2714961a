"""The Helm chart's labels, annotations and scheduling settings (docs/helm-parameters.md): the top-level defaults
(the chart's `global.*`) on every pod and object, a component's own merged over them as the chart merges them,
the affinity presets, and `podTemplate` still last. Every render passes the strict Kubernetes schema."""

from __future__ import annotations

import copy
from typing import Any

import yaml

from tests.support.manifests import by_kind, get, pod_spec, workloads
from tests.support.render import core_objects
from tests.support.tls_provider import new_openssh_key
from tests.support.validation import SUPEREXEC, cfg, process_cfg, sts_pool

GPU_TAINT = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
SPOT_TAINT = {"key": "spot", "operator": "Equal", "value": "true", "effect": "NoSchedule"}
NODE_EXPRESSION = {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["eu-1a"]}
GLOBAL = {
    "annotations": {"team.example.org/owner": "ml"},
    "podLabels": {"cost-center": "fl"},
    "nodeSelector": {"kubernetes.io/os": "linux", "tier": "ml"},
    "tolerations": [SPOT_TAINT],
}


def _distributed(**top: Any) -> dict[str, Any]:
    raw = process_cfg(sts_pool("a", 2), nodeAuth={"enabled": True}, **top)
    raw["superexecPlacement"] = "distributed"
    raw["version"] = "1.41.0"
    return raw


def _spread(objects: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    return pod_spec(get(objects, kind, name)).get("affinity", {})


def test_global_settings_reach_every_pod_and_object(k8s_validate):
    objects = core_objects(_distributed(**copy.deepcopy(GLOBAL)))
    pods = [(w["metadata"]["name"], w["spec"]["template"]) for w in workloads(objects)]
    assert {name for name, _ in pods} >= {
        "dev-superlink",
        "dev-supernode-a",
        "dev-superexec-a",
        "dev-superexec-serverapp",
    }
    assert any(w["kind"] == "Job" for w in workloads(objects)), "the registration Job is a pod too"
    for name, template in pods:
        assert template["metadata"]["labels"]["cost-center"] == "fl", name
        assert template["spec"]["nodeSelector"] == GLOBAL["nodeSelector"], name
        assert template["spec"]["tolerations"] == [SPOT_TAINT], name
    for o in objects:
        assert o["metadata"]["annotations"]["team.example.org/owner"] == "ml", (o["kind"], o["metadata"]["name"])
        k8s_validate(o)


def test_our_annotations_win_over_the_global_ones():
    # (A global pod label of ours is refused: tests/test_validation_workload_settings.py.)
    raw = _distributed(annotations={"pulumi.com/replaceUnready": "false"})
    objects = core_objects(raw)
    job = by_kind(objects, "Job")[0]
    assert job["metadata"]["annotations"]["pulumi.com/replaceUnready"] == "true"


def test_component_settings_merge_over_the_global_ones(k8s_validate):
    pool = sts_pool(
        "gpu",
        2,
        labels={"workload": "training"},
        annotations={"example.org/review": "done"},
        podLabels={"gpu": "a100"},
        podAnnotations={"prometheus.io/scrape": "true"},
        nodeSelector={"tier": "gpu", "accelerator": "a100"},
        tolerations=[GPU_TAINT, SPOT_TAINT],
    )
    raw = cfg(pool, **copy.deepcopy(GLOBAL))
    objects = core_objects(raw)
    sts = get(objects, "StatefulSet", "dev-supernode-gpu")
    assert sts["metadata"]["labels"]["workload"] == "training"
    assert sts["metadata"]["annotations"] == {"team.example.org/owner": "ml", "example.org/review": "done"}
    template = sts["spec"]["template"]
    assert {"workload": "training", "gpu": "a100", "cost-center": "fl"}.items() <= template["metadata"][
        "labels"
    ].items()
    assert template["metadata"]["annotations"] == {"prometheus.io/scrape": "true"}
    # The chart's merges: node selector key by key (the pool wins), tolerations appended without repeats.
    assert template["spec"]["nodeSelector"] == {"kubernetes.io/os": "linux", "tier": "gpu", "accelerator": "a100"}
    assert template["spec"]["tolerations"] == [SPOT_TAINT, GPU_TAINT]
    # The selector never takes them (selectors are immutable).
    assert set(sts["spec"]["selector"]["matchLabels"]) == {
        "app.kubernetes.io/instance",
        "app.kubernetes.io/component",
        "flower.flwr.ai/pool",
    }
    # Another component keeps the global settings only.
    superlink = pod_spec(get(objects, "StatefulSet", "dev-superlink"))
    assert superlink["nodeSelector"] == GLOBAL["nodeSelector"] and superlink["tolerations"] == [SPOT_TAINT]
    for o in objects:
        k8s_validate(o)


def test_affinity_presets_render_as_the_chart_renders_them(k8s_validate):
    soft = {"podAntiAffinity": "soft", "nodeAffinity": {"type": "soft", "matchExpressions": [NODE_EXPRESSION]}}
    objects = core_objects(cfg(sts_pool("a", 3), affinity=soft))
    affinity = _spread(objects, "StatefulSet", "dev-supernode-a")
    assert affinity == {
        "podAntiAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {
                    "weight": 1,
                    "podAffinityTerm": {
                        "labelSelector": {
                            "matchLabels": {
                                "app.kubernetes.io/instance": "dev",
                                "app.kubernetes.io/component": "supernode",
                                "flower.flwr.ai/pool": "a",
                            }
                        },
                        "topologyKey": "kubernetes.io/hostname",
                    },
                }
            ]
        },
        "nodeAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 1, "preference": {"matchExpressions": [NODE_EXPRESSION]}}
            ]
        },
    }
    hard = {"podAntiAffinity": "hard", "nodeAffinity": {"matchExpressions": [NODE_EXPRESSION]}}  # type: hard (default)
    objects = core_objects(cfg(sts_pool("a", 3), affinity=hard))
    affinity = _spread(objects, "StatefulSet", "dev-supernode-a")
    assert affinity["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"] == [
        {
            "labelSelector": {
                "matchLabels": {
                    "app.kubernetes.io/instance": "dev",
                    "app.kubernetes.io/component": "supernode",
                    "flower.flwr.ai/pool": "a",
                }
            },
            "topologyKey": "kubernetes.io/hostname",
        }
    ]
    assert affinity["nodeAffinity"] == {
        "requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [NODE_EXPRESSION]}]
        }
    }
    # The SuperLink spreads among its own pods, not the SuperNodes'.
    superlink = _spread(objects, "StatefulSet", "dev-superlink")["podAntiAffinity"]
    term = superlink["requiredDuringSchedulingIgnoredDuringExecution"][0]
    assert term["labelSelector"]["matchLabels"]["app.kubernetes.io/component"] == "superlink"
    for o in objects:
        k8s_validate(o)


def test_presets_off_by_default_and_without_expressions():
    objects = core_objects(cfg(sts_pool("a", 3)))
    assert all("affinity" not in pod_spec(w) for w in workloads(objects))
    # A node affinity type without expressions selects nothing, as in the chart.
    objects = core_objects(cfg(sts_pool("a", 3), affinity={"nodeAffinity": {"type": "hard"}}))
    assert all("affinity" not in pod_spec(w) for w in workloads(objects))


def test_a_components_affinity_replaces_the_presets_key_by_key():
    own = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [{"key": "gpu", "operator": "Exists"}]}]
            }
        }
    }
    presets = {"podAntiAffinity": "soft", "nodeAffinity": {"matchExpressions": [NODE_EXPRESSION]}}
    objects = core_objects(cfg(sts_pool("a", 2, affinity=own), affinity=presets))
    affinity = _spread(objects, "StatefulSet", "dev-supernode-a")
    assert affinity["nodeAffinity"] == own["nodeAffinity"]
    assert "preferredDuringSchedulingIgnoredDuringExecution" in affinity["podAntiAffinity"]


def test_pod_template_still_wins_over_the_settings():
    template = {"spec": {"nodeSelector": {"only": "this"}, "tolerations": []}}
    objects = core_objects(cfg(sts_pool("a", 1, nodeSelector={"tier": "gpu"}, podTemplate=template), **GLOBAL))
    spec = pod_spec(get(objects, "StatefulSet", "dev-supernode-a"))
    assert spec["nodeSelector"] == {"only": "this"} and spec["tolerations"] == []


def test_daemonset_takes_no_spreading_preset_and_keeps_its_key_affinity(k8s_validate):
    raw = cfg(
        {"name": "a"},
        mode="DaemonSet",
        affinity={"podAntiAffinity": "hard", "nodeAffinity": {"matchExpressions": [NODE_EXPRESSION]}},
        nodeAuth={"enabled": True, "keySource": "config"},
    )
    keys = {"a": {"node-1": new_openssh_key()}}
    objects = core_objects(raw, node_auth_keys=keys)
    affinity = pod_spec(get(objects, "DaemonSet", "dev-supernode-a"))["affinity"]
    assert "podAntiAffinity" not in affinity
    # The preset's term, ANDed with the nodes that have a key.
    (term,) = affinity["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert term["matchExpressions"] == [NODE_EXPRESSION]
    assert term["matchFields"] == [{"key": "metadata.name", "operator": "In", "values": ["node-1"]}]
    for o in objects:
        k8s_validate(o)


def test_task_pods_of_the_kubernetes_executor_take_the_global_node_settings():
    raw = _distributed(
        podLabels={"cost-center": "fl"},
        nodeSelector={"tier": "ml"},
        tolerations=[SPOT_TAINT],
        affinity={"podAntiAffinity": "soft", "nodeAffinity": {"matchExpressions": [NODE_EXPRESSION]}},
        executor={"type": "kubernetes", "config": {"node-selector": {"tier": "tasks"}}},
    )
    objects = core_objects(raw)
    configs = [
        yaml.safe_load(o["data"]["executor.yaml"])
        for o in by_kind(objects, "ConfigMap")
        if "executor.yaml" in o["data"]
    ]
    assert len(configs) == 2
    for config in configs:
        assert config["node-selector"] == {"tier": "tasks"}  # executor.config wins
        assert config["tolerations"] == [SPOT_TAINT]
        assert config["labels"]["cost-center"] == "fl"
        assert config["labels"]["app.kubernetes.io/component"] == "taskexecutor"
        # The node preset only: task pods are no workload to spread.
        assert config["affinity"] == {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [{"matchExpressions": [NODE_EXPRESSION]}]
                }
            }
        }


def test_the_namespace_carries_the_global_annotations():
    (namespace,) = by_kind(core_objects(cfg(annotations={"example.org/team": "ml"})), "Namespace")
    assert namespace["metadata"]["annotations"] == {"example.org/team": "ml"}


def test_process_sidecar_superexec_shares_the_pools_pod_settings():
    raw = process_cfg(sts_pool("a", 1, nodeSelector={"tier": "gpu"}, images={"superexecClientApp": SUPEREXEC}))
    spec = pod_spec(get(core_objects(raw), "StatefulSet", "dev-supernode-a"))
    assert [c["name"] for c in spec["containers"]] == ["supernode", "superexec-clientapp"]
    assert spec["nodeSelector"] == {"tier": "gpu"}
