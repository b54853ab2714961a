"""The shell registers Kubernetes objects by type token, without importing pulumi-kubernetes' typed classes
(flower_federation/shell/kubernetes.py: their modules are most of a render's SDK import time). Here the
registrations are held to what the typed classes send, request for request: every RegisterResourceRequest and
ReadResourceRequest the mock monitor receives (type, name, parent, inputs, secrets, aliases, provider version,
dependencies, options), all but the source position (where the call was made), for every golden stack and
the every-feature stack with each TLS source, and for one object of every kind the shell knows, with every
field it takes set; negative controls show a wrong table or origin caught. The comparison's other side is the
shell's own way with another pulumi-kubernetes than the table's: through its classes. Bumping the pinned
pulumi-kubernetes fails `test_the_table_is_for_the_pinned_pulumi_kubernetes` until the table is checked again
(TABLE_VERSION), and then the comparisons say what changed."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pulumi
import pytest
from google.protobuf import json_format
from pulumi.runtime.mocks import MockMonitor

from flower_federation.cli.offline import run_program
from flower_federation.shell import kubernetes
from tests.support.golden import GOLDENS, ROOT, render
from tests.test_every_feature import TLS_SOURCES, USER_SECRETS, every_feature

REGISTERING = "/flower_federation/shell/kubernetes.py"


def _registering(uri: str) -> bool:
    return uri.endswith(REGISTERING) or "/pulumi_kubernetes/" in uri


Requests = dict[tuple[str, str, str], dict[str, Any]]


@pytest.fixture
def requests(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[tuple[str, Any]]]:
    """Every request the mock monitor receives, in this test."""
    seen: list[tuple[str, Any]] = []
    lock = threading.Lock()

    def wrap(method: Any, kind: str) -> Any:
        def wrapper(self: Any, request: Any) -> Any:
            with lock:
                seen.append((kind, json_format.MessageToDict(request)))
            return method(self, request)

        return wrapper

    monkeypatch.setattr(MockMonitor, "RegisterResource", wrap(MockMonitor.RegisterResource, "register"))
    monkeypatch.setattr(MockMonitor, "ReadResource", wrap(MockMonitor.ReadResource, "read"))
    yield seen


def _kubernetes_requests(seen: list[tuple[str, Any]]) -> Requests:
    out: Requests = {}
    for kind, request in seen:
        if not request["type"].startswith("kubernetes:") or request["type"] == "pulumi:providers:kubernetes":
            continue
        # A set in the SDK (of Resource objects, ordered by where they sit in memory): compared as a set.
        request["dependencies"] = sorted(request.get("dependencies", []))
        for deps in request.get("propertyDependencies", {}).values():
            deps["urns"] = sorted(deps.get("urns", []))
        # Where it was made: the same calls outside the registering code (ours or the class's module). The source
        # position is the first frame, in the registering code: a line of ours
        # or of the class's.
        request.pop("sourcePosition", None)
        frames = request.get("stackTrace", {}).get("frames", [])
        request["stackTrace"] = [f["pc"] for f in frames if not _registering(f["pc"]["uri"])]
        key = (kind, request["type"], request["name"])
        assert key not in out, f"registered twice: {key}"
        out[key] = request
    return out


def _both_ways(monkeypatch: pytest.MonkeyPatch, seen: list[tuple[str, Any]], run: Any) -> tuple[Requests, Requests]:
    """`run` as the shell registers (by token), then through the typed classes (the shell's way with another
    pulumi-kubernetes than the table's)."""
    run()
    ours = _kubernetes_requests(seen)
    seen.clear()
    with monkeypatch.context() as typed:
        typed.setattr(kubernetes, "TABLE_VERSION", "another")  # as with another pulumi-kubernetes: its classes
        run()
    return ours, _kubernetes_requests(seen)


def _assert_same(ours: Requests, theirs: Requests) -> None:
    assert ours.keys() == theirs.keys()
    different = [key for key in ours if ours[key] != theirs[key]]
    assert not different, f"{len(different)} differ, e.g. {different[0]}:\nours   {ours[different[0]]}\n" + (
        f"typed  {theirs[different[0]]}"
    )


@pytest.mark.parametrize("golden", GOLDENS, ids=lambda g: g.name)
def test_golden_stacks_register_as_the_typed_classes_would(golden, monkeypatch, requests):
    ours, theirs = _both_ways(monkeypatch, requests, lambda: render(golden))
    assert len(ours) >= 5, ours.keys()
    _assert_same(ours, theirs)


@pytest.mark.parametrize("tls", list(TLS_SOURCES), ids=str)
def test_every_feature_registers_as_the_typed_classes_would(tls, monkeypatch, requests):
    config = {"flower-federation:federation": every_feature(TLS_SOURCES[tls])}
    ours, theirs = _both_ways(monkeypatch, requests, lambda: run_program(config, "dev", existing=USER_SECRETS))
    reads = {key for key in ours if key[0] == "read"}
    if tls != "generate":  # the user's Secrets (and cert-manager's) read, as the typed class's `.get` reads
        assert reads, "no read"
    assert any(key[1] == "kubernetes:core/v1:Secret" for key in ours), "no Secret registered"
    _assert_same(ours, theirs)


# A value of each field's type (the typed classes check their outputs' types: the mocks echo inputs).
FIELD_VALUES: dict[str, Any] = {
    "automountServiceAccountToken": False,
    "immutable": True,
    "type": "Opaque",
    "imagePullSecrets": [{"name": "regcred"}],
    "secrets": [{"name": "token"}],
    "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}],
    "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "x-role"},
    "subjects": [{"kind": "ServiceAccount", "name": "x-serviceaccount"}],
}


def _every_kind() -> None:
    """One object of every kind the shell registers, every field its class takes set (an Output among them),
    and one read."""
    after = pulumi.CustomResource("test:index:Marker", "marker", {})
    opts = pulumi.ResourceOptions(depends_on=[after])
    for key, kind in kubernetes._KINDS.items():
        manifest: dict[str, Any] = {"apiVersion": key[0], "kind": key[1]}
        for field in kind.inputs:
            manifest[field] = FIELD_VALUES.get(field, {"k": field})
        manifest["metadata"] = {"name": f"x-{key[1].lower()}"}
        fields = {"stringData": pulumi.Output.from_input({"key": "value"})} if key[1] == "Secret" else {}
        kubernetes.register(manifest, opts, fields=fields)
    for api_version, kind_name in sorted(kubernetes._CUSTOM_KINDS):
        name = f"x-{kind_name.lower()}-{api_version.rsplit('/', 1)[1]}"
        kubernetes.register({"apiVersion": api_version, "kind": kind_name, "metadata": {"name": name}}, opts)
    kubernetes.read(("v1", "Secret"), "read-secret", after.id.apply(lambda _: "ns/secret"), opts)


def _run_every_kind() -> None:
    run_program({}, "dev", entry=_every_kind, existing={("kubernetes:core/v1:Secret", "ns/secret"): {"data": {}}})


def test_every_kind_registers_as_its_typed_class_would(monkeypatch, requests):
    ours, theirs = _both_ways(monkeypatch, requests, _run_every_kind)
    kinds = {key[1] for key in ours}
    assert len(kinds) == len(kubernetes._KINDS) + len(kubernetes._CUSTOM_KINDS), kinds
    secret = ours[("register", "kubernetes:core/v1:Secret", "x-secret")]
    assert secret["additionalSecretOutputs"] == ["data", "stringData"]
    aliases = ours[("register", "kubernetes:apps/v1:StatefulSet", "x-statefulset")]["aliases"]
    assert [a["spec"]["type"] for a in aliases] == [
        "kubernetes:apps/v1beta1:StatefulSet",
        "kubernetes:apps/v1beta2:StatefulSet",
    ]
    _assert_same(ours, theirs)


def test_a_field_the_class_does_not_take_is_refused(monkeypatch, requests):
    def entry() -> None:
        kubernetes.register(
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "n"}, "data": {}}, pulumi.ResourceOptions()
        )

    with pytest.raises(Exception, match=r"Namespace n: no such fields \['data'\]"):
        run_program({}, "dev", entry=entry)


@pytest.mark.parametrize(
    "key, wrong",
    [
        (("apps/v1", "StatefulSet"), {"aliases": ()}),
        (("v1", "Secret"), {"secrets": ()}),
        (("networking.k8s.io/v1", "Ingress"), {"aliases": ("extensions/v1beta1",)}),
    ],
    ids=["no aliases", "no secrets", "an alias missing"],
)
def test_negative_control_a_wrong_table_is_caught(key, wrong, monkeypatch, requests):
    import dataclasses

    monkeypatch.setitem(kubernetes._KINDS, key, dataclasses.replace(kubernetes._KINDS[key], **wrong))
    ours, theirs = _both_ways(monkeypatch, requests, _run_every_kind)
    with pytest.raises(AssertionError, match="differ"):
        _assert_same(ours, theirs)


def test_negative_control_a_bare_custom_resource_records_another_origin(monkeypatch, requests):
    """Without `_AsTypedClass`, the SDK records where an object was made from the wrong frame (none, here)."""
    monkeypatch.setattr(kubernetes, "_AsTypedClass", pulumi.CustomResource)
    ours, theirs = _both_ways(monkeypatch, requests, _run_every_kind)
    with pytest.raises(AssertionError, match="differ"):
        _assert_same(ours, theirs)


def test_the_table_is_for_the_pinned_pulumi_kubernetes():
    """By token only with the version the table was checked against; requirements.txt pins the same, so the
    tests above ran by token (a bump of the pin without the table's check fails here)."""
    pins = dict(line.split("==") for line in (ROOT / "requirements.txt").read_text().split() if "==" in line)
    assert pins["pulumi-kubernetes"] == kubernetes.TABLE_VERSION == kubernetes._VERSION
