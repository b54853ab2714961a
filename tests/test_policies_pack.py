"""The CrossGuard pack (policy/) driven in-process as the engine drives it: pulumi_policy's analyzer
servicer (what `pulumi preview --policy-pack policy/` talks to over gRPC) gets Analyze and
AnalyzeStack requests whose properties are protobuf Structs of camelCase pulumi-kubernetes inputs,
numbers as doubles, and values unknown during preview as the engine's sentinel strings."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from google.protobuf import json_format, struct_pb2
from pulumi.runtime.proto import analyzer_pb2 as proto
from pulumi_policy import EnforcementLevel, StackValidationPolicy
from pulumi_policy.policy import _PolicyAnalyzerServicer
from pulumi_policy.proxy import UNKNOWN_ARRAY_VALUE, UNKNOWN_BOOLEAN_VALUE, UNKNOWN_OBJECT_VALUE, UNKNOWN_STRING_VALUE

from flower_federation.checks.model import UNKNOWN
from flower_federation.checks.policies import POLICIES
from policy.pack import PACK_NAME, manifest, policies
from tests.support.policy_objects import container, drop_flag, find, golden, golden_clusters, pod_spec

STACK = "urn:pulumi:dev::flower-federation"


def _type(obj: dict[str, Any]) -> str:
    group = obj["apiVersion"] if "/" in obj["apiVersion"] else f"core/{obj['apiVersion']}"
    return f"kubernetes:{group}:{obj['kind']}"


def _name(obj: dict[str, Any]) -> str:
    meta = obj["metadata"]
    return str(meta["name"]) if isinstance(meta, dict) else "unknown-metadata"


def _urn(obj: dict[str, Any]) -> str:
    return f"{STACK}::{_type(obj)}::{_name(obj)}"


def _struct(obj: dict[str, Any]) -> struct_pb2.Struct:
    props = {k: v for k, v in obj.items() if k not in ("apiVersion", "kind")}  # the type token says them
    return json_format.ParseDict(props, struct_pb2.Struct())


def _provider(cluster: str) -> proto.AnalyzerProviderResource:
    return proto.AnalyzerProviderResource(
        type="pulumi:providers:kubernetes", urn=f"{STACK}::pulumi:providers:kubernetes::{cluster}", name=cluster
    )


def _servicer() -> _PolicyAnalyzerServicer:
    return _PolicyAnalyzerServicer(PACK_NAME, "0.1.0", policies(), EnforcementLevel.ADVISORY)


def analyze_stack(clusters: list[tuple[str, list[dict[str, Any]]]]) -> set[tuple[str, str, str]]:
    request = proto.AnalyzeStackRequest(
        resources=[
            proto.AnalyzerResource(
                type=_type(o), properties=_struct(o), urn=_urn(o), name=_name(o), provider=_provider(c)
            )
            for c, objects in clusters
            for o in objects
        ]
    )
    return _diagnostics(_servicer().AnalyzeStack(request, None))


def analyze(objects: list[dict[str, Any]]) -> set[tuple[str, str, str]]:
    out: set[tuple[str, str, str]] = set()
    for o in objects:
        request = proto.AnalyzeRequest(type=_type(o), properties=_struct(o), urn=_urn(o), name=_name(o))
        out |= _diagnostics(_servicer().Analyze(request, None))
    return out


def _diagnostics(response: proto.AnalyzeResponse) -> set[tuple[str, str, str]]:
    levels = {proto.MANDATORY: "mandatory", proto.ADVISORY: "advisory"}
    # A diagnostic without a urn would be the pack failing ("can't run policy ... during preview").
    return {
        (d.policyName, levels[d.enforcementLevel], d.urn.rsplit("::", 1)[-1] or d.message) for d in response.diagnostics
    }


def everything(objects: list[dict[str, Any]]) -> set[tuple[str, str, str]]:
    return analyze(objects) | analyze_stack([("default", objects)])


def test_the_pack_holds_every_policy_at_its_level() -> None:
    made = policies()
    assert [p.name for p in made] == [p.name for p in POLICIES]
    for ours, theirs in zip(POLICIES, made, strict=True):
        assert theirs.enforcement_level.value == ours.level
        assert isinstance(theirs, StackValidationPolicy) == ours.whole_stack


@pytest.mark.parametrize("name", ["dev", "grpc-era", "hub", "site-chart-values"])
def test_goldens_as_the_engine_hands_them(name: str) -> None:
    # site-chart-values: a site's distributed SuperExec hop, TLS with the site's own CA (was an advisory violation).
    assert analyze(golden(name)) | analyze_stack(golden_clusters(name)) == set()


def test_the_multi_cluster_golden_per_provider() -> None:
    clusters = golden_clusters("multi-cluster")
    assert analyze_stack(clusters) == set()
    # Two clusters, two providers: the edge cluster's objects never meet the default cluster's. The edge pool's
    # NetworkPolicy moved into the default cluster covers no edge pod (negative control: one stack of both
    # clusters' objects, as if one provider, would find it covered).
    (home_name, home), (edge_name, edge) = copy.deepcopy(clusters)
    policy = find(edge, "NetworkPolicy", "mc-supernode-edge")
    edge.remove(policy)
    moved = [(home_name, [*home, policy]), (edge_name, edge)]
    assert analyze_stack(moved) == {("flower-network-policies", "mandatory", "mc-supernode-edge")}
    assert analyze_stack([(home_name, [*home, policy, *edge])]) == set()


def test_resource_policies_report_on_the_resource() -> None:
    objects = golden("dev")
    sl = find(objects, "StatefulSet", "demo-superlink")
    container(sl, "superlink")["args"].insert(0, "--insecure")
    container(sl, "superlink")["image"] = "flwr/superlink:latest"
    response = _servicer().Analyze(
        proto.AnalyzeRequest(type=_type(sl), properties=_struct(sl), urn=_urn(sl), name="demo-superlink"), None
    )
    messages = {d.policyName: d.message for d in response.diagnostics}
    assert set(messages) == {"flower-tls", "flower-images-pinned"}
    assert "spec.template.spec.containers[superlink].args: --insecure" in messages["flower-tls"]
    assert "Remediation: Remove --insecure" in messages["flower-tls"]


def test_stack_policies_find_the_exposed_port_through_doubles() -> None:
    # Struct numbers are doubles (port 8000.0): the adapter makes integers of them, or no port would match.
    objects = golden("dev")
    find(objects, "Service", "demo-superlink")["spec"]["type"] = "LoadBalancer"
    assert everything(objects) == {("flower-control-api-internal", "mandatory", "demo-superlink")}


def _unknown(objects: list[dict[str, Any]], kind: str, name: str, path: str, sentinel: str) -> None:
    *keys, last = path.split(".")
    target: Any = find(objects, kind, name)
    for key in keys:
        target = target[int(key)] if isinstance(target, list) else target[key]
    target[int(last) if isinstance(target, list) else last] = sentinel


# Each: a mutation that breaks a promise, and the value that decides it made unknown (preview).
BROKEN_THEN_UNKNOWN = [
    (
        lambda o: drop_flag(
            container(find(o, "StatefulSet", "demo-supernode-cpu"), "supernode")["args"], "--root-certificates"
        ),
        ("StatefulSet", "demo-supernode-cpu", "spec.template.spec.containers.0.args.2", UNKNOWN_STRING_VALUE),
    ),
    (
        lambda o: find(o, "Service", "demo-superlink")["spec"].update(type="LoadBalancer"),
        ("Service", "demo-superlink", "spec.type", UNKNOWN_STRING_VALUE),
    ),
    (
        lambda o: find(o, "Service", "demo-superlink")["spec"].update(type="LoadBalancer"),
        ("Service", "demo-superlink", "spec.selector", UNKNOWN_OBJECT_VALUE),
    ),
    (
        lambda o: find(o, "NetworkPolicy", "demo-superlink")["spec"].update(policyTypes=["Ingress"]),
        ("NetworkPolicy", "demo-superlink", "spec.policyTypes", UNKNOWN_ARRAY_VALUE),
    ),
    (
        lambda o: container(find(o, "StatefulSet", "demo-superlink"), "superlink")["securityContext"].update(
            allowPrivilegeEscalation=True
        ),
        (
            "StatefulSet",
            "demo-superlink",
            "spec.template.spec.containers.0.securityContext.allowPrivilegeEscalation",
            UNKNOWN_BOOLEAN_VALUE,
        ),
    ),
    (
        lambda o: container(find(o, "StatefulSet", "demo-superlink"), "superlink")["resources"]["limits"].pop("memory"),
        ("StatefulSet", "demo-superlink", "spec.template.spec.containers.0.resources.limits", UNKNOWN_OBJECT_VALUE),
    ),
    (
        lambda o: pod_spec(find(o, "StatefulSet", "demo-supernode-cpu")).update(automountServiceAccountToken=True),
        ("StatefulSet", "demo-supernode-cpu", "spec.template.spec.automountServiceAccountToken", UNKNOWN_BOOLEAN_VALUE),
    ),
    (
        lambda o: container(find(o, "StatefulSet", "demo-supernode-cpu"), "supernode").update(image="flwr/supernode"),
        ("StatefulSet", "demo-supernode-cpu", "spec.template.spec.containers.0.image", UNKNOWN_STRING_VALUE),
    ),
]


@pytest.mark.parametrize(("break_it", "unknown"), BROKEN_THEN_UNKNOWN)
def test_an_unknown_value_is_cannot_tell_yet(break_it: Any, unknown: tuple[str, str, str, str]) -> None:
    objects = golden("dev")
    break_it(objects)
    broken = everything(objects)
    assert len(broken) == 1  # the negative control: known, it is a violation
    _unknown(objects, *unknown)
    assert everything(objects) == set()  # unknown: no violation, and no policy failed to run


def test_insecure_is_a_violation_whatever_the_unknowns() -> None:
    objects = golden("dev")
    args = container(find(objects, "StatefulSet", "demo-supernode-cpu"), "supernode")["args"]
    args[args.index("--root-certificates")] = "--insecure"
    args[args.index("--superlink") + 1] = UNKNOWN_STRING_VALUE  # e.g. a load balancer's address, not known yet
    assert everything(objects) == {("flower-tls", "mandatory", "demo-supernode-cpu")}


def test_unknown_names_and_metadata_do_not_break_the_stack_policies() -> None:
    objects = golden("dev")
    for o in objects:
        if o["kind"] in ("ConfigMap", "Secret"):
            o["metadata"] = UNKNOWN_OBJECT_VALUE
        elif o["kind"] == "ServiceAccount":
            o["metadata"]["name"] = UNKNOWN_STRING_VALUE
    assert analyze_stack([("default", objects)]) == set()


def test_the_adapter_reads_types_and_skips_what_is_not_an_object() -> None:
    sts = copy.deepcopy(find(golden("dev"), "StatefulSet", "demo-superlink"))
    made = manifest("kubernetes:apps/v1:StatefulSet", {"metadata": {}, "spec": sts["spec"]}, "sl")
    assert made is not None and (made["apiVersion"], made["kind"], made["metadata"]["name"]) == (
        "apps/v1",
        "StatefulSet",
        UNKNOWN,
    )
    route = manifest("kubernetes:gateway.networking.k8s.io/v1:HTTPRoute", {"metadata": {"name": "r"}}, "r")
    assert route is not None and route["apiVersion"] == "gateway.networking.k8s.io/v1"
    assert manifest("kubernetes:core/v1:Service", {"metadata": {"name": "s"}}, "s")["apiVersion"] == "v1"  # type: ignore[index]
    for other in (
        "tls:index/privateKey:PrivateKey",
        "kubernetes:apps/v1:DeploymentPatch",
        "kubernetes:core/v1:ServiceList",
    ):
        assert manifest(other, {"metadata": {"name": "x"}}, "x") is None


def test_the_engine_gets_each_policys_severity_remediation_url_and_controls():
    """GetAnalyzerInfo, what `pulumi preview --policy-pack` reads once: every policy's metadata as defined."""
    info = _servicer().GetAnalyzerInfo(None, None)
    by_name = {p.name: p for p in info.policies}
    assert list(by_name) == [p.name for p in POLICIES]
    for policy in POLICIES:
        sent = by_name[policy.name]
        assert proto.PolicySeverity.Name(sent.severity) == f"POLICY_SEVERITY_{policy.severity.upper()}"
        assert (sent.remediation_steps, sent.url) == (policy.remediation, policy.url)
        cis = [c.reference for c in policy.controls if c.framework == "CIS Kubernetes Benchmark"]
        if policy.controls:
            assert sent.framework.name == policy.controls[0].framework
            assert all(f"cis-kubernetes-1.9.0:{ref}" in sent.tags for ref in cis)
        else:
            assert not sent.HasField("framework") and list(sent.tags) == []
    assert by_name["flower-network-policies"].framework.reference == "5.3.2"
    assert by_name["flower-pod-security-restricted"].framework.reference == "restricted"
