"""What the API server refuses of a config fragment that its OpenAPI schema lets through (kube/api_rules.py):
each refused at its config path, quoting the value, at validate time instead of half-way through `pulumi up`;
beside each, the nearest value Kubernetes 1.34 takes, accepted (the negative control)."""

from __future__ import annotations

from typing import Any

import pytest

from flower_federation.kube.openapi import fragment_errors
from tests.support.validation import assert_valid, cfg, problems, sts_pool

POOL = "federation.supernodes.pools[0]"


def spec(**fields: Any) -> dict[str, Any]:
    return cfg(sts_pool("a", podTemplate={"spec": fields}))


def container(**fields: Any) -> dict[str, Any]:
    return spec(containers=[{"name": "supernode", **fields}])


# (refused config, its problem's path, a part of its message, the accepted neighbour)
CASES = {
    "env name with '='": (
        cfg(sts_pool("a", env=[{"name": "A=B", "value": "x"}])),
        f"{POOL}.env[0].name",
        "'A=B' must be printable ASCII",
        cfg(sts_pool("a", env=[{"name": "A.B-c_1", "value": "x"}])),
    ),
    "env name with a line break": (
        cfg(sts_pool("a", env=[{"name": "A\nB", "value": "x"}])),
        f"{POOL}.env[0].name",
        "must be printable ASCII",
        cfg(sts_pool("a", env=[{"name": "A B", "value": "x"}])),  # a space is printable: 1.34 takes it
    ),
    "empty env name": (
        cfg(sts_pool("a", env=[{"name": "", "value": "x"}])),
        f"{POOL}.env[0].name",
        "(and not empty)",
        cfg(sts_pool("a", env=[{"name": "X", "value": ""}])),
    ),
    "quantity with a space": (
        cfg(sts_pool("a", volumes=[{"name": "x", "emptyDir": {"sizeLimit": "5 Gi"}}])),
        f"{POOL}.volumes[0].emptyDir.sizeLimit",
        "'5 Gi' is not a Kubernetes quantity",
        cfg(sts_pool("a", volumes=[{"name": "x", "emptyDir": {"sizeLimit": "5Gi"}}])),
    ),
    "quantity of an unknown suffix": (
        cfg(sts_pool("a", volumes=[{"name": "x", "emptyDir": {"sizeLimit": "1Zi"}}])),
        f"{POOL}.volumes[0].emptyDir.sizeLimit",
        "'1Zi' is not a Kubernetes quantity",
        cfg(sts_pool("a", volumes=[{"name": "x", "emptyDir": {"sizeLimit": "1Ei"}}])),
    ),
    "volume name with a capital": (
        cfg(sts_pool("a", volumes=[{"name": "Data", "emptyDir": {}}])),
        f"{POOL}.volumes[0].name",
        "'Data' must be a DNS-1123 label",
        cfg(sts_pool("a", volumes=[{"name": "data", "emptyDir": {}}])),
    ),
    "container port above 65535": (
        container(ports=[{"containerPort": 70000}]),
        f"{POOL}.podTemplate.spec.containers[0].ports[0].containerPort",
        "70000 must be a port number, 1 to 65535",
        container(ports=[{"containerPort": 65535}]),
    ),
    "port name with '--'": (
        container(ports=[{"containerPort": 80, "name": "we--b"}]),
        f"{POOL}.podTemplate.spec.containers[0].ports[0].name",
        "'we--b' must be a port name",
        container(ports=[{"containerPort": 80, "name": "web-1"}]),
    ),
    "negative user id": (
        spec(securityContext={"runAsUser": -1}),
        f"{POOL}.podTemplate.spec.securityContext.runAsUser",
        "-1 must be between 0 and 2147483647",
        spec(securityContext={"runAsUser": 2147483647}),
    ),
    "user id beyond int32": (
        cfg(sts_pool("a"), podSecurityContext={"runAsUser": 99999999999}),
        "federation.podSecurityContext.runAsUser",
        "99999999999 must be between 0 and 2147483647",
        cfg(sts_pool("a"), podSecurityContext={"runAsUser": 49999}),
    ),
    "Exists toleration with a value": (
        spec(tolerations=[{"key": "gpu", "operator": "Exists", "value": "b"}]),
        f"{POOL}.podTemplate.spec.tolerations[0].value",
        "'b' must be empty when operator is Exists",
        spec(tolerations=[{"key": "gpu", "operator": "Exists"}]),
    ),
    "toleration without a key, Equal": (
        spec(tolerations=[{"operator": "Equal", "value": "b"}]),
        f"{POOL}.podTemplate.spec.tolerations[0].operator",
        "without a key must have operator Exists",
        spec(tolerations=[{"operator": "Exists"}]),
    ),
    "tolerationSeconds without NoExecute": (
        spec(tolerations=[{"key": "k", "effect": "NoSchedule", "tolerationSeconds": 5}]),
        f"{POOL}.podTemplate.spec.tolerations[0].tolerationSeconds",
        "only a NoExecute toleration",
        spec(tolerations=[{"key": "k", "effect": "NoExecute", "tolerationSeconds": 5}]),
    ),
    "env fieldPath the downward API does not expose": (
        cfg(sts_pool("a", env=[{"name": "X", "valueFrom": {"fieldRef": {"fieldPath": "spec.bogus"}}}])),
        f"{POOL}.env[0].valueFrom.fieldRef.fieldPath",
        "'spec.bogus' is not a field the downward API exposes here",
        cfg(sts_pool("a", env=[{"name": "X", "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['app']"}}}])),
    ),
    "a volume's fieldPath only an env var has": (
        spec(
            volumes=[
                {"name": "d", "downwardAPI": {"items": [{"path": "n", "fieldRef": {"fieldPath": "spec.nodeName"}}]}}
            ]
        ),
        f"{POOL}.podTemplate.spec.volumes[0].downwardAPI.items[0].fieldRef.fieldPath",
        "'spec.nodeName' is not a field the downward API exposes here",
        spec(
            volumes=[
                {"name": "d", "downwardAPI": {"items": [{"path": "n", "fieldRef": {"fieldPath": "metadata.labels"}}]}}
            ]
        ),
    ),
    "priorityClassName with a space": (
        spec(priorityClassName="Bad Name"),
        f"{POOL}.podTemplate.spec.priorityClassName",
        "'Bad Name' must be a DNS-1123 subdomain",
        spec(priorityClassName="high-priority.example"),
    ),
}


@pytest.mark.parametrize("case", CASES)
def test_what_the_api_server_refuses_is_refused_at_its_path(case: str) -> None:
    refused, path, says, accepted = CASES[case]
    found = problems(refused)
    assert [p for p, _ in found] == [path] and says in found[0][1], found
    assert_valid(accepted)


def test_numbers_beyond_their_format_are_refused_wherever_they_appear() -> None:
    """An int32 field (a probe's period) holding 2^31: beyond what the API server decodes."""
    found = list(fragment_errors({"periodSeconds": 2**31, "timeoutSeconds": 2**31 - 1}, "probe-v1.json"))
    assert found == [(("periodSeconds",), "2147483648 is beyond int32's range, -2147483648 to 2147483647")]


def test_each_rule_holds_where_its_type_appears_and_nowhere_else() -> None:
    """A Volume's name rule in a pod template's volumes and in a pool's `volumes`; a ConfigMap key named like a
    bad volume is no volume (the walk follows the schema, not key names)."""
    assert problems(spec(volumes=[{"name": "A", "emptyDir": {}}]))[0][0] == f"{POOL}.podTemplate.spec.volumes[0].name"
    assert_valid(spec(volumes=[{"name": "c", "configMap": {"name": "cm", "items": [{"key": "Name", "path": "N"}]}}]))


@pytest.mark.parametrize(
    "text, value",
    [
        ("1Ei", 2**60),
        ("2E", 2 * 10**18),
        ("1.5E", 15 * 10**17),
        ("3E2", 300),
        ("2e3", 2000),
        ("1e", None),
        ("1Zi", None),
    ],
)
def test_exa_and_exbi_are_suffixes_not_exponents(text: str, value: Any) -> None:
    """`E`/`Ei` are resource.Quantity's exa and exbi (they were read as an exponent without digits, and refused)."""
    from flower_federation.kube.quantity import parse_quantity

    assert parse_quantity(text) == value


@pytest.mark.parametrize(
    "raw",
    [
        spec(priorityClassName="", serviceAccountName=""),  # checked only when set
        container(ports=[{"containerPort": 8080, "name": ""}]),
        cfg(sts_pool("a", env=[{"name": "N", "valueFrom": {"fieldRef": {"fieldPath": "spec.host"}}}])),  # nodeName
        cfg(
            sts_pool(
                "a",
                env=[{"name": "O", "valueFrom": {"fieldRef": {"fieldPath": "metadata.annotations['Example.COM/o']"}}}],
            )
        ),
        cfg(
            sts_pool(
                "a",
                volumeClaimTemplates=[
                    {
                        "metadata": {"name": "data"},
                        "spec": {
                            "storageClassName": "",
                            "accessModes": ["ReadWriteOnce"],
                            "resources": {"requests": {"storage": "1Gi"}},
                        },
                    }
                ],
                volumeMounts=[{"name": "data", "mountPath": "/data"}],
            )
        ),
    ],
    ids=[
        "empty priority class and service account",
        "empty port name",
        "spec.host",
        "annotation key in capitals",
        "claim of no class",
    ],
)
def test_what_kubernetes_takes_is_not_refused(raw: dict[str, Any]) -> None:
    """A review's finds: each of these was refused by the first version of these rules, and Kubernetes takes it."""
    assert_valid(raw)


def test_an_empty_runtime_class_is_still_refused() -> None:
    """Unlike the names above, Kubernetes checks a runtimeClassName whenever it is given: "" names no RuntimeClass."""
    assert [p for p, _ in problems(spec(runtimeClassName=""))] == [f"{POOL}.podTemplate.spec.runtimeClassName"]


def test_every_type_schema_the_rules_name_resolves_to_its_type() -> None:
    """Each `*-v1.json` the source passes to fragment_errors names one OpenAPI type, group-qualified files too
    (`statefulsetupdatestrategy-apps-v1.json`), so a type's own rules apply at a fragment's top as well."""
    import re
    from pathlib import Path

    from flower_federation.kube.openapi import _type_name

    source = "\n".join(p.read_text() for p in Path("flower_federation").rglob("*.py"))
    files = sorted(set(re.findall(r'"([a-z0-9]+(?:-[a-z0-9]+)*-v1\.json)"', source)))
    assert len(files) > 10, files
    assert [f for f in files if not _type_name(f)] == []


def test_a_qualified_name_has_a_prefix_before_its_slash_or_no_slash() -> None:
    """One predicate (kube/limits.py) for every label key, toleration key and field-path subscript: `/x` has an
    empty prefix, which IsQualifiedName refuses (the render's label check had let it through)."""
    from flower_federation.kube.api_rules import is_qualified_name

    assert [is_qualified_name(k) for k in ("x", "example.org/x", "/x", "a/b/c", "Example.org/x")] == [
        True,
        True,
        False,
        False,
        False,
    ]
