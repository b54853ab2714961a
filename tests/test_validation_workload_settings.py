"""Validation of the Helm chart's workload settings (docs/helm-parameters.md): labels and annotations spelled as
Kubernetes takes them, selector labels kept ours, tolerations, affinity and the presets' match expressions checked
against the Kubernetes schema; every problem at once, by config path, quoting the value."""

from __future__ import annotations

import pytest

from flower_federation import rules
from flower_federation.flower.versions import DEFAULT_VERSION
from tests.support.validation import assert_valid, cfg, not_a_field, problems, process_cfg, sts_pool

KEY_RULE = (
    "is not a Kubernetes key: an optional DNS subdomain prefix and '/', then at most 63 letters, digits, '-', '_' or "
    "'.', starting and ending with a letter or digit"
)
VALUE_RULE = (
    "is not valid in Kubernetes: at most 63 letters, digits, '-', '_' or '.', starting and ending with a letter or "
    "digit (or empty)"
)


def test_valid_settings_everywhere_are_accepted():
    settings = {
        "labels": {"example.org/team": "ml"},
        "annotations": {"example.org/owner": "anything at all: {json} too"},
        "podLabels": {"tier": ""},
        "podAnnotations": {"prometheus.io/port": "9090"},
        "nodeSelector": {"kubernetes.io/arch": "amd64"},
        "tolerations": [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}],
        "affinity": {"podAffinity": {}},
    }
    top = {k: v for k, v in settings.items() if k not in ("podAnnotations", "affinity")}
    assert_valid(
        cfg(
            sts_pool("a", **settings),
            superlink=dict(settings),
            affinity={
                "podAntiAffinity": "hard",
                "nodeAffinity": {"type": "soft", "matchExpressions": [{"key": "zone", "operator": "Exists"}]},
            },
            **top,
        )
    )


@pytest.mark.parametrize("at", ["", "superlink.", "supernodes.pools[0]."])
def test_label_keys_and_values_are_checked_where_they_are_set(at):
    settings = {"labels": {"bad key": "x"}, "podLabels": {"ok": "-starts-with-dash"}, "nodeSelector": {"a/b/c": "x"}}
    if at == "":
        raw = cfg(**settings)
    elif at == "superlink.":
        raw = cfg(superlink=settings)
    else:
        raw = cfg(sts_pool("a", **settings))
    assert problems(raw) == [
        (f'federation.{at}labels["bad key"]', f"'bad key' {KEY_RULE}"),
        (f'federation.{at}nodeSelector["a/b/c"]', f"'a/b/c' {KEY_RULE}"),
        (f"federation.{at}podLabels.ok", f"label value '-starts-with-dash' {VALUE_RULE}"),
    ]


def test_label_value_longer_than_63_characters():
    raw = cfg(podLabels={"x": "a" * 64})
    assert problems(raw) == [("federation.podLabels.x", f"label value '{'a' * 64}' {VALUE_RULE}")]


def test_annotation_keys_are_checked_values_are_free():
    raw = cfg(annotations={"UPPER.example.org/x": "1"}, superlink={"podAnnotations": {"ok": "any: thing"}})
    assert problems(raw) == [('federation.annotations["UPPER.example.org/x"]', f"'UPPER.example.org/x' {KEY_RULE}")]


OURS = "selector/ownership label set by flower-federation"
VARIES = f"{OURS} (its value differs among the objects this reaches)"


@pytest.mark.parametrize(
    "key, pools",
    [("app.kubernetes.io/instance", "dev"), ("app.kubernetes.io/component", "supernode"), ("flower.flwr.ai/pool", "a")],
)
def test_selector_labels_stay_ours_in_pod_labels(key, pools):
    raw = cfg(sts_pool("a", podLabels={key: "x"}), podLabels={key: "y"})
    top = f"'y': {OURS} (here 'dev')" if key == "app.kubernetes.io/instance" else f"'y': {VARIES}"
    assert problems(raw) == [
        (f'federation.podLabels["{key}"]', top),
        (f'federation.supernodes.pools[0].podLabels["{key}"]', f"'x': {OURS} (here '{pools}')"),
    ]


def test_our_labels_keep_their_values_wherever_labels_reach_pods():
    """Ownership labels too (the Helm chart user's `app.kubernetes.io/part-of: fl-site-b` was kept in the stack and
    overwritten in the render), in labels, podLabels and podTemplate labels; our own value passes."""
    same = {"flower.flwr.ai/pool": "a", "app.kubernetes.io/managed-by": "pulumi", "app.kubernetes.io/instance": "dev"}
    raw = cfg(
        sts_pool(
            "a",
            podLabels={"app.kubernetes.io/part-of": "fl-site-b", **same},
            labels={"app.kubernetes.io/version": "0.1"},
            podTemplate={"metadata": {"labels": {"flower.flwr.ai/component": "supernode", "team": "ml"}}},
        ),
        podLabels={"flower.flwr.ai/federation": "other", "team": "ml"},
        labels={"app.kubernetes.io/component": "supernode"},
        superlink={"podTemplate": {"metadata": {"labels": {"app.kubernetes.io/name": "mine"}}}},
    )
    assert problems(raw) == [
        ('federation.labels["app.kubernetes.io/component"]', f"'supernode': {VARIES}"),
        ('federation.podLabels["flower.flwr.ai/federation"]', f"'other': {OURS} (here 'dev')"),
        (
            'federation.superlink.podTemplate.metadata.labels["app.kubernetes.io/name"]',
            f"'mine': {OURS} (here 'flower')",
        ),
        (
            'federation.supernodes.pools[0].labels["app.kubernetes.io/version"]',
            f"'0.1': {OURS} (here '{DEFAULT_VERSION}')",
        ),
        (
            'federation.supernodes.pools[0].podLabels["app.kubernetes.io/part-of"]',
            f"'fl-site-b': {OURS} (here 'flower-federation')",
        ),
    ]


def test_our_labels_on_superexec_and_task_pods():
    """A pool's podTemplate reaches its SuperNode and its distributed SuperExec pods (two components); the SuperExecs'
    replica label and the Kubernetes executor's task labels are ours too."""
    pool = sts_pool(
        "a",
        podTemplate={"metadata": {"labels": {"app.kubernetes.io/component": "supernode"}}},
        superexec={
            "podLabels": {"app.kubernetes.io/component": "superexec-clientapp", "flower.flwr.ai/superexec-replica": "0"}
        },
    )
    raw = process_cfg(
        pool,
        superexecPlacement="distributed",
        executor={"type": "kubernetes", "config": {"labels": {"app.kubernetes.io/component": "mine", "team": "ml"}}},
    )
    assert problems(raw) == [
        ('federation.executor.config.labels["app.kubernetes.io/component"]', f"'mine': {OURS} (here 'taskexecutor')"),
        (
            'federation.supernodes.pools[0].podTemplate.metadata.labels["app.kubernetes.io/component"]',
            f"'supernode': {VARIES}",
        ),
        ('federation.supernodes.pools[0].superexec.podLabels["flower.flwr.ai/superexec-replica"]', f"'0': {VARIES}"),
    ]


def test_tolerations_affinity_and_match_expressions_follow_the_kubernetes_schema():
    raw = cfg(
        sts_pool("a", tolerations=[{"key": "gpu", "efect": "NoSchedule"}], affinity={"nodeAfinity": {}}),
        tolerations=[{"key": "spot", "tolerationSeconds": "60"}],
        affinity={"nodeAffinity": {"matchExpressions": [{"key": "zone", "operator": "In", "values": "eu"}]}},
    )
    assert problems(raw) == [
        ("federation.affinity.nodeAffinity.matchExpressions[0].values", "'eu' is not of type 'array', 'null'"),
        ("federation.supernodes.pools[0].affinity", not_a_field("nodeAfinity")),
        ("federation.supernodes.pools[0].tolerations[0]", not_a_field("efect")),
        ("federation.tolerations[0].tolerationSeconds", "'60' is not of type 'integer', 'null'"),
    ]


def test_presets_take_only_the_charts_words():
    raw = cfg(affinity={"podAntiAffinity": "strict", "nodeAffinity": {"type": "required", "key": "zone"}})
    assert problems(raw) == [
        ("federation.affinity.nodeAffinity.key", "unknown key 'key'; valid keys: matchExpressions, type"),
        ("federation.affinity.nodeAffinity.type", "Input should be 'none', 'soft' or 'hard', not 'required'"),
        ("federation.affinity.podAntiAffinity", "Input should be 'none', 'soft' or 'hard', not 'strict'"),
    ]


def test_wrong_types_are_reported_by_path():
    raw = cfg(sts_pool("a", tolerations={"key": "x"}, podAnnotations={"a": 1}), nodeSelector=["x"])
    assert problems(raw) == [
        ("federation.nodeSelector", "must be a mapping, not ['x']"),
        ("federation.supernodes.pools[0].podAnnotations.a", "Input should be a valid string, not 1"),
        ("federation.supernodes.pools[0].tolerations", "Input should be a valid list, not {'key': 'x'}"),
    ]


def test_service_and_gateway_metadata_each_reported_once_by_the_rules():
    """The SuperLink's Services' labels and the Gateway's selectors are label maps (rules/label_maps.py), their
    annotations rules/exported.py's `service_annotations`: every problem is found once by the rules themselves
    (ConfigError would hide a second finding), and none is lost."""
    bad = {"app": "a.", "bad key!": "x"}
    superlink = {
        "service": {"labels": bad, "annotations": {"bad key!": "x"}},
        "controlService": {"labels": bad, "annotations": {"bad key!": "x"}},
        "ingress": {"host": "fl.example.org", "annotations": {"bad key!": "x"}},
        "gateway": {
            "parentRefs": [{"name": "p", "sectionName": "s"}],
            "hostname": "fl.example.org",
            "namespaceSelector": bad,
            "podSelector": bad,
        },
    }
    raw = cfg(superlink=superlink)
    found, _ = rules.check(raw, "dev")
    assert len(found) == len(set(found)), found
    maps = [("service", "labels"), ("controlService", "labels"), ("gateway", "namespaceSelector")]
    maps.append(("gateway", "podSelector"))
    expected = [(f"federation.superlink.{a}.{b}.app", f"label value 'a.' {VALUE_RULE}") for a, b in maps]
    expected += [(f'federation.superlink.{a}.{b}["bad key!"]', f"'bad key!' {KEY_RULE}") for a, b in maps]
    for owner in ("service", "controlService", "ingress"):
        expected.append((f'federation.superlink.{owner}.annotations["bad key!"]', f"'bad key!' {KEY_RULE}"))
    assert sorted(problems(raw)) == sorted(expected)
