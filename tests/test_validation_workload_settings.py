"""Validation of the Helm chart's workload settings (docs/helm-parameters.md): labels and annotations spelled as
Kubernetes takes them, selector labels kept ours, tolerations, affinity and the presets' match expressions checked
against the Kubernetes schema; every problem at once, by config path, quoting the value."""

from __future__ import annotations

import pytest

from tests.support.validation import assert_valid, cfg, not_a_field, problems, sts_pool

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


@pytest.mark.parametrize("key", ["app.kubernetes.io/instance", "app.kubernetes.io/component", "flower.flwr.ai/pool"])
def test_selector_labels_stay_ours_in_pod_labels(key):
    raw = cfg(sts_pool("a", podLabels={key: "x"}), podLabels={key: "y"})
    assert problems(raw) == [
        (f'federation.podLabels["{key}"]', "selector labels are set by flower-federation"),
        (f'federation.supernodes.pools[0].podLabels["{key}"]', "selector labels are set by flower-federation"),
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
        ("federation.nodeSelector", "must be a mapping"),
        ("federation.supernodes.pools[0].podAnnotations.a", "Input should be a valid string"),
        ("federation.supernodes.pools[0].tolerations", "Input should be a valid list"),
    ]
