"""review/: the diff of two lists of Kubernetes objects, the replace-on-change rules (pulumi-kubernetes'
forceNew table and Kubernetes' immutable fields), secret values never printed, deterministic Markdown."""

from __future__ import annotations

import base64
import copy
from typing import Any

import pytest

from flower_federation.review import changes, markdown
from flower_federation.review.changes import Resource, from_manifest, review

NS = "flower"


def _sts(name: str = "demo-supernode-cpu", pool: str = "cpu") -> dict[str, Any]:
    labels = {"app.kubernetes.io/component": "supernode", "flower.flwr.ai/pool": pool}
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": name, "namespace": NS, "labels": labels},
        "spec": {
            "replicas": 2,
            "serviceName": name,
            "selector": {"matchLabels": dict(labels)},
            "template": {
                "metadata": {"labels": dict(labels)},
                "spec": {"containers": [{"name": "supernode", "image": "flwr/supernode:1.41.0"}]},
            },
        },
    }


def _secret(value: str, immutable: bool = False, kind: str = "Secret") -> dict[str, Any]:
    m: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": kind,
        "metadata": {"name": "creds", "namespace": NS},
        "data": {"password": base64.b64encode(value.encode()).decode()},
    }
    if immutable:
        m["immutable"] = True
    return m


def _diff(old: list[dict[str, Any]], new: list[dict[str, Any]]) -> changes.Review:
    return review([from_manifest(m) for m in old], [from_manifest(m) for m in new])


def _fields(r: changes.Review) -> list[str]:
    return [f.text for c in r.changed for f in c.fields]


def test_a_statefulset_selector_change_is_a_replacement_and_a_replica_change_is_not() -> None:
    old = _sts()
    new = copy.deepcopy(old)
    new["spec"]["selector"]["matchLabels"]["tier"] = "gpu"
    new["spec"]["template"]["metadata"]["labels"]["tier"] = "gpu"
    r = _diff([old], [new])
    ((change,),) = [r.changed]
    assert [(x.field, x.by) for x in change.reasons] == [("spec.selector", "pulumi-kubernetes")]
    assert '`spec.selector.matchLabels.tier`: (absent) → `"gpu"`' in _fields(r)
    # Negative control: replicas and the image are updated in place.
    scaled = copy.deepcopy(old)
    scaled["spec"]["replicas"] = 5
    scaled["spec"]["template"]["spec"]["containers"][0]["image"] = "flwr/supernode:1.42.0"
    r = _diff([old], [scaled])
    assert [c.reasons for c in r.changed] == [()]
    assert _fields(r) == [
        "`spec.replicas`: `2` → `5`",
        '`spec.template.spec.containers[supernode].image`: `"flwr/supernode:1.41.0"` → `"flwr/supernode:1.42.0"`',
    ]


@pytest.mark.parametrize(
    ("path", "value", "field"),
    [
        (("spec", "serviceName"), "other", "spec.serviceName"),
        (("spec", "podManagementPolicy"), "Parallel", "spec.podManagementPolicy"),
        (("spec", "volumeClaimTemplates"), [{"metadata": {"name": "data"}}], "spec.volumeClaimTemplates"),
    ],
)
def test_every_immutable_statefulset_field_replaces(path: tuple[str, ...], value: Any, field: str) -> None:
    new = _sts()
    new[path[0]][path[1]] = value
    (change,) = _diff([_sts()], [new]).changed
    assert [x.field for x in change.reasons] == [field]


def test_a_job_template_and_service_cluster_ip_and_pvc_spec_replace() -> None:
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j", "namespace": NS}, "spec": {}}
    job["spec"] = {"template": {"spec": {"containers": [{"name": "c", "image": "a"}]}}}
    job2 = copy.deepcopy(job)
    job2["spec"]["template"]["spec"]["containers"][0]["image"] = "b"
    svc = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "s", "namespace": NS},
        "spec": {"clusterIP": "None"},
    }
    svc2 = copy.deepcopy(svc)
    svc2["spec"] = {"type": "ExternalName", "externalName": "x.example.org"}
    pvc = {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "p", "namespace": NS}}
    pvc["spec"] = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}
    grown = copy.deepcopy(pvc)
    grown["spec"]["resources"]["requests"]["storage"] = "2Gi"
    moved = copy.deepcopy(pvc)
    moved["spec"]["accessModes"] = ["ReadWriteMany"]
    reasons = {c.new.title: [x.field for x in c.reasons] for c in _diff([job, svc], [job2, svc2]).changed}
    assert reasons == {"Job flower/j": ["spec.template"], "Service flower/s": ["spec.clusterIP", "spec.type"]}
    # A claim may grow (resources.requests), nothing else of its spec changes in place.
    assert [c.reasons for c in _diff([pvc], [grown]).changed] == [()]
    ((access, spec),) = [[(x.field, x.by) for x in c.reasons] for c in _diff([pvc], [moved]).changed]
    assert sorted([access, spec]) == [("spec", "Kubernetes"), ("spec.accessModes", "pulumi-kubernetes")]


def test_secret_values_are_never_printed_and_a_changed_secret_is_replaced() -> None:
    text = markdown.render(_diff([_secret("hunter2-old")], [_secret("hunter2-new")]), "s")
    assert "`data.password`: changed (secret, value not shown)" in text
    assert "replaced (the provider's enableSecretMutable is off)" in text
    for leaked in ("hunter2", base64.b64encode(b"hunter2-old").decode(), base64.b64encode(b"hunter2-new").decode()):
        assert leaked not in text
    # Negative control: the same data in a ConfigMap is printed, so the Secret's was hidden, not lost.
    shown = markdown.render(
        _diff([_secret("hunter2-old", kind="ConfigMap")], [_secret("hunter2-new", kind="ConfigMap")]), "s"
    )
    assert base64.b64encode(b"hunter2-new").decode() in shown


def test_a_value_the_render_holds_as_a_pulumi_secret_is_hidden_in_any_kind() -> None:
    old, new = _sts(), _sts()
    new["spec"]["template"]["spec"]["containers"][0]["env"] = [{"name": "TOKEN", "value": "s3cr3t-token"}]
    redacted = copy.deepcopy(new)
    redacted["spec"]["template"]["spec"]["containers"][0]["env"][0]["value"] = "[secret]"
    r = review([from_manifest(old)], [Resource(from_manifest(new).type, "x", new, redacted)])
    text = markdown.render(r, "s")
    assert "s3cr3t-token" not in text and "(secret, value not shown)" in text
    # Negative control: without the redacted copy, the value is shown.
    assert "s3cr3t-token" in markdown.render(review([from_manifest(old)], [from_manifest(new)]), "s")


def test_immutable_configmap_data_is_refused_by_kubernetes() -> None:
    (change,) = _diff([_secret("a", True, "ConfigMap")], [_secret("b", True, "ConfigMap")]).changed
    assert sorted(x.by for x in change.reasons) == ["Kubernetes", "pulumi-kubernetes"]


def test_a_renamed_object_and_a_changed_urn_are_replacements() -> None:
    r = _diff([_sts("demo-supernode-cpu", "cpu")], [_sts("demo-supernode-gpu", "gpu")])
    assert [(m.old.title, m.new.title, m.why) for m in r.moved] == [
        ("StatefulSet flower/demo-supernode-cpu", "StatefulSet flower/demo-supernode-gpu", "renamed")
    ]
    assert "renamed or moved" in markdown.summary(r, "s")
    old = from_manifest(_sts(), urn="A$kubernetes:apps/v1:StatefulSet::x")
    new = from_manifest(_sts(), urn="B$kubernetes:apps/v1:StatefulSet::x")
    (change,) = review([old], [new]).changed
    assert [x.field for x in change.reasons] == ["URN"] and change.fields == ()


def test_no_change_is_one_line_and_the_markdown_is_deterministic() -> None:
    objs = [_sts(), _secret("x")]
    assert markdown.render(_diff(objs, list(reversed(objs))), "prod").count("\n") == 1
    a, b = [_sts(), _secret("x")], [_sts("demo-supernode-gpu", "gpu"), _secret("y")]
    assert markdown.render(_diff(a, b), "s") == markdown.render(_diff(list(reversed(a)), list(reversed(b))), "s")
