"""Gateway API objects (gateway.networking.k8s.io) are checked by `validate` against the
vendored strict schemas of every Gateway API release that serves them (tests/support/gateway_api/): the
kinds the project renders pass in realistic shapes, and unknown fields at any depth,
wrong types, missing required fields and kinds or versions without a schema are refused
at their path. Core kinds still go to kubernetes-validate."""

from __future__ import annotations

import copy
import json
from typing import Any

import jsonschema
import kubernetes_validate
import pytest

from tests.support.gateway_api import generate
from tests.support.schema import (
    GATEWAY_API_DIR,
    GatewayAPISchemaNotFoundError,
    GatewayAPIValidationError,
    gateway_api_releases_serving,
    validate,
    validate_all,
)

GW = "gateway.networking.k8s.io"


def _meta(name: str, namespace: str = "flwr") -> dict[str, Any]:
    return {"name": name, "namespace": namespace, "labels": {"app.kubernetes.io/part-of": "fed"}}


HTTP_ROUTE: dict[str, Any] = {
    "apiVersion": f"{GW}/v1",
    "kind": "HTTPRoute",
    "metadata": _meta("fed-superlink-fleet"),
    "spec": {
        "parentRefs": [{"name": "edge", "namespace": "gateways", "sectionName": "https"}],
        "hostnames": ["fleet.example.org"],
        "rules": [
            {
                "matches": [{"path": {"type": "PathPrefix", "value": "/v1/fleet/"}}],
                "backendRefs": [{"name": "fed-superlink", "port": 9095}],
                "timeouts": {"request": "30s"},
            }
        ],
    },
}

BACKEND_TLS_POLICY: dict[str, Any] = {
    "apiVersion": f"{GW}/v1",
    "kind": "BackendTLSPolicy",
    "metadata": _meta("fed-superlink-fleet"),
    "spec": {
        "targetRefs": [{"group": "", "kind": "Service", "name": "fed-superlink", "sectionName": "fleet"}],
        "validation": {
            "caCertificateRefs": [{"group": "", "kind": "ConfigMap", "name": "fed-ca"}],
            "hostname": "fed-superlink.flwr.svc.cluster.local",
        },
    },
}

GRPC_ROUTE: dict[str, Any] = {
    "apiVersion": f"{GW}/v1",
    "kind": "GRPCRoute",
    "metadata": _meta("fed-superlink-fleet-grpc"),
    "spec": {
        "parentRefs": [{"name": "edge", "namespace": "gateways", "sectionName": "grpc"}],
        "hostnames": ["fleet.example.org"],
        "rules": [
            {
                "matches": [{"method": {"type": "Exact", "service": "flwr.proto.Fleet"}}],
                "backendRefs": [{"name": "fed-superlink", "port": 9092}],
            }
        ],
    },
}


def _tls_route(version: str) -> dict[str, Any]:
    return {
        "apiVersion": f"{GW}/{version}",
        "kind": "TLSRoute",
        "metadata": _meta("fed-superlink-fleet-tls"),
        "spec": {
            "parentRefs": [{"name": "edge", "namespace": "gateways", "sectionName": "tls-passthrough"}],
            "hostnames": ["fleet.example.org"],
            "rules": [{"backendRefs": [{"name": "fed-superlink", "port": 9092}]}],
        },
    }


REFERENCE_GRANT: dict[str, Any] = {
    "apiVersion": f"{GW}/v1beta1",
    "kind": "ReferenceGrant",
    "metadata": _meta("gateways-read-fleet-cert"),
    "spec": {
        "from": [{"group": GW, "kind": "Gateway", "namespace": "gateways"}],
        "to": [{"group": "", "kind": "Secret", "name": "fed-fleet-tls"}],
    },
}

VALID = {
    "httproute": HTTP_ROUTE,
    "backendtlspolicy": BACKEND_TLS_POLICY,
    "grpcroute": GRPC_ROUTE,
    "tlsroute-v1alpha2": _tls_route("v1alpha2"),
    "tlsroute-v1alpha3": _tls_route("v1alpha3"),
    "tlsroute-v1": _tls_route("v1"),
    "referencegrant": REFERENCE_GRANT,
}


@pytest.mark.parametrize("name", VALID)
def test_each_rendered_kind_passes(name, k8s_validate):
    k8s_validate(copy.deepcopy(VALID[name]))


def test_fuller_shapes_pass(k8s_validate):
    route = copy.deepcopy(HTTP_ROUTE)
    rule = route["spec"]["rules"][0]
    rule["name"] = "fleet"
    rule["matches"].append({"path": {"type": "Exact", "value": "/health"}, "method": "GET"})
    rule["filters"] = [
        {"type": "RequestHeaderModifier", "requestHeaderModifier": {"set": [{"name": "X-Fed", "value": "fed"}]}}
    ]
    rule["backendRefs"][0].update(group="", kind="Service", weight=1)
    k8s_validate(route)
    policy = copy.deepcopy(BACKEND_TLS_POLICY)
    del policy["spec"]["validation"]["caCertificateRefs"]
    policy["spec"]["validation"]["wellKnownCACertificates"] = "System"
    policy["spec"]["validation"]["subjectAltNames"] = [{"type": "Hostname", "hostname": "*.flwr.example.org"}]
    policy["spec"]["options"] = {"example.com/min-tls": "1.3"}
    k8s_validate(policy)


def test_core_and_gateway_objects_validate_together():
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "fed-superlink", "namespace": "flwr"},
        "spec": {"selector": {"app": "superlink"}, "ports": [{"name": "fleet", "port": 9092}]},
    }
    validate_all([service, *VALID.values()])


def _set(obj: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    """A copy of `obj` with `value` at the dotted `path` (integers index lists)."""
    obj = copy.deepcopy(obj)
    *parents, last = [int(p) if p.isdigit() else p for p in path.split(".")]
    node: Any = obj
    for part in parents:
        node = node[part]
    node[last] = value
    return obj


def _without(obj: dict[str, Any], path: str) -> dict[str, Any]:
    obj = copy.deepcopy(obj)
    *parents, last = [int(p) if p.isdigit() else p for p in path.split(".")]
    node: Any = obj
    for part in parents:
        node = node[part]
    del node[last]
    return obj


def _refused(obj: dict[str, Any]) -> GatewayAPIValidationError:
    with pytest.raises(GatewayAPIValidationError) as caught:
        validate(obj)
    return caught.value


@pytest.mark.parametrize(
    "obj,where",
    [
        (_set(HTTP_ROUTE, "extra", 1), "(object)"),
        (_set(HTTP_ROUTE, "metadata.nmae", "x"), "metadata"),
        (_set(HTTP_ROUTE, "spec.backendRefs", []), "spec"),
        (_set(HTTP_ROUTE, "spec.rules.0.backendRef", {"name": "x"}), "spec.rules[0]"),
        (_set(HTTP_ROUTE, "spec.rules.0.matches.0.path.prefix", "/"), "spec.rules[0].matches[0].path"),
        (_set(HTTP_ROUTE, "spec.parentRefs.0.listener", "https"), "spec.parentRefs[0]"),
        (_set(BACKEND_TLS_POLICY, "spec.validation.sni", "x"), "spec.validation"),
        (
            _set(BACKEND_TLS_POLICY, "spec.validation.caCertificateRefs.0.key", "ca.crt"),
            "spec.validation.caCertificateRefs[0]",
        ),
        (_set(GRPC_ROUTE, "spec.rules.0.matches.0.method.name", "Pull"), "spec.rules[0].matches[0].method"),
        (_set(REFERENCE_GRANT, "spec.to.0.namespace", "flwr"), "spec.to[0]"),
        (_set(_tls_route("v1alpha3"), "spec.rules.0.backendRefs.0.protocol", "TLS"), "spec.rules[0].backendRefs[0]"),
        (_set(HTTP_ROUTE, "status", {"parents": []}), "(object)"),
    ],
)
def test_an_unknown_field_is_refused_at_its_depth(obj, where):
    error = _refused(obj)
    assert error.validator == "additionalProperties"
    assert f" at {where}: Additional properties are not allowed" in str(error)


@pytest.mark.parametrize(
    "obj,where,validator",
    [
        (_set(HTTP_ROUTE, "spec.hostnames", "fleet.example.org"), "spec.hostnames", "type"),
        (_set(HTTP_ROUTE, "spec.rules.0.backendRefs.0.port", "9095"), "spec.rules[0].backendRefs[0].port", "type"),
        (_set(HTTP_ROUTE, "spec.rules.0.backendRefs.0.port", 9095.0), "spec.rules[0].backendRefs[0].port", "type"),
        (_set(HTTP_ROUTE, "spec.rules.0.backendRefs.0.port", 70000), "spec.rules[0].backendRefs[0].port", "maximum"),
        (_set(HTTP_ROUTE, "spec.rules.0.matches.0.path.type", "Prefix"), "spec.rules[0].matches[0].path.type", "enum"),
        (_set(HTTP_ROUTE, "spec.hostnames.0", "Fleet.example.org"), "spec.hostnames[0]", "pattern"),
        # The API server's (Go) patterns end at the end of the text, not before a final newline.
        (_set(HTTP_ROUTE, "spec.hostnames.0", "fleet.example.org\n"), "spec.hostnames[0]", "pattern"),
        (_set(HTTP_ROUTE, "spec.rules.0.timeouts.request", "30 s"), "spec.rules[0].timeouts.request", "pattern"),
        (_set(BACKEND_TLS_POLICY, "spec.targetRefs", {"kind": "Service"}), "spec.targetRefs", "type"),
        (_set(BACKEND_TLS_POLICY, "spec.validation.hostname", "10.0.0.1:443"), "spec.validation.hostname", "pattern"),
        (
            _set(GRPC_ROUTE, "spec.rules.0.matches.0.method.type", "Prefix"),
            "spec.rules[0].matches[0].method.type",
            "enum",
        ),
        (_set(REFERENCE_GRANT, "spec.from", []), "spec.from", "minItems"),
        (_set(HTTP_ROUTE, "metadata.labels", ["a"]), "metadata.labels", "type"),
    ],
)
def test_a_wrong_type_or_value_is_refused_at_its_path(obj, where, validator):
    error = _refused(obj)
    assert error.validator == validator
    assert f" at {where}: " in str(error)


@pytest.mark.parametrize(
    "obj,where,field",
    [
        (_without(HTTP_ROUTE, "spec.rules.0.backendRefs.0.name"), "spec.rules[0].backendRefs[0]", "name"),
        (_without(HTTP_ROUTE, "spec.parentRefs.0.name"), "spec.parentRefs[0]", "name"),
        (_without(HTTP_ROUTE, "spec"), "(object)", "spec"),
        (_without(HTTP_ROUTE, "metadata.name"), "metadata", "name"),
        (_without(HTTP_ROUTE, "metadata"), "(object)", "metadata"),
        (_without(BACKEND_TLS_POLICY, "spec.validation.hostname"), "spec.validation", "hostname"),
        (_without(BACKEND_TLS_POLICY, "spec.targetRefs.0.group"), "spec.targetRefs[0]", "group"),
        (_without(BACKEND_TLS_POLICY, "spec.targetRefs"), "spec", "targetRefs"),
        (_without(REFERENCE_GRANT, "spec.from.0.namespace"), "spec.from[0]", "namespace"),
        (_without(_tls_route("v1alpha3"), "spec.hostnames"), "spec", "hostnames"),
        (_without(_tls_route("v1alpha2"), "spec.rules"), "spec", "rules"),
    ],
)
def test_a_missing_required_field_is_refused(obj, where, field):
    error = _refused(obj)
    assert error.validator == "required"
    assert f" at {where}: '{field}' is a required property" in str(error)


def test_versions_differ_where_the_release_says():
    """TLSRoute v1alpha2 takes no hostnames and up to 16 rules; v1alpha3 wants hostnames and one rule."""
    two_rules = _set(_tls_route("v1alpha2"), "spec.rules", _tls_route("v1alpha2")["spec"]["rules"] * 2)
    validate(_without(two_rules, "spec.hostnames"))
    error = _refused(_set(two_rules, "apiVersion", f"{GW}/v1alpha3"))
    assert error.validator == "maxItems" and " at spec.rules: " in str(error)


def test_list_map_keys_and_sets_refuse_duplicates():
    route = copy.deepcopy(HTTP_ROUTE)
    route["spec"]["rules"][0]["matches"][0]["headers"] = [
        {"name": "X-Fed", "value": "a"},
        {"name": "X-Fed", "value": "b"},
    ]
    error = _refused(route)
    assert str(error).startswith(
        "HTTPRoute/fed-superlink-fleet at spec.rules[0].matches[0].headers[1]: Duplicate value"
    )
    route = copy.deepcopy(HTTP_ROUTE)
    route["spec"]["rules"][0]["filters"] = [
        {"type": "RequestHeaderModifier", "requestHeaderModifier": {"remove": ["X-A", "X-A"]}}
    ]
    assert _refused(route).validator == "uniqueItems"


@pytest.mark.parametrize(
    "api_version,kind",
    [
        (f"{GW}/v2", "HTTPRoute"),
        (f"{GW}/v1beta1", "HTTPRoute"),  # served by the release, not vendored: we render v1
        (f"{GW}/v1alpha3", "BackendTLSPolicy"),  # not served by the standard channel
        (f"{GW}/v1beta1", "TLSRoute"),  # TLSRoute went from v1alpha3 to v1 (Gateway API v1.5)
        (f"{GW}/v1", "ReferenceGrant"),
        (f"{GW}/v1", "Gateway"),  # a kind of the group without a vendored schema
        (f"{GW}/v1", "httproute"),
    ],
)
def test_a_kind_or_version_of_the_group_without_a_schema_is_refused(api_version, kind):
    obj = {**copy.deepcopy(HTTP_ROUTE), "apiVersion": api_version, "kind": kind}
    with pytest.raises(GatewayAPISchemaNotFoundError) as caught:
        validate(obj)
    assert isinstance(caught.value, kubernetes_validate.SchemaNotFoundError)
    assert f"kind {kind!r} with apiVersion {api_version!r}" in str(caught.value)


def test_errors_are_kubernetes_validate_errors_and_core_kinds_still_go_there():
    with pytest.raises(kubernetes_validate.ValidationError):
        validate(_set(HTTP_ROUTE, "spec.rules.0.extra", 1))
    service = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"}, "spec": {"extra": 1}}
    with pytest.raises(kubernetes_validate.ValidationError) as caught:
        validate(service)
    assert type(caught.value) is kubernetes_validate.ValidationError
    # Another group is not the Gateway API's (e.g. its experimental x-k8s.io group).
    with pytest.raises(kubernetes_validate.SchemaNotFoundError) as not_found:
        validate({**HTTP_ROUTE, "apiVersion": "gateway.networking.x-k8s.io/v1alpha1", "kind": "XListenerSet"})
    assert type(not_found.value) is kubernetes_validate.SchemaNotFoundError


def _vendored() -> dict[str, dict[str, Any]]:
    return {
        str(f.relative_to(GATEWAY_API_DIR)): json.loads(f.read_text()) for f in sorted(GATEWAY_API_DIR.glob("*/*.json"))
    }


def test_the_vendored_schemas_are_the_selection_of_each_release():
    schemas = _vendored()
    for release, selection in generate.RELEASES.items():
        mine = {name: s for name, s in schemas.items() if name.startswith(f"{release}/")}
        for channel, plural, versions in selection:
            path = generate.crd_path(channel, plural)
            for version in versions:
                owners = [
                    name
                    for name, s in mine.items()
                    if s["properties"]["apiVersion"]["const"] == f"{GW}/{version}" and path in s["$comment"]
                ]
                assert len(owners) == 1, (release, path, version, owners)
        for name, schema in mine.items():
            assert schema["$comment"].startswith(f"Gateway API {release} ("), name
            jsonschema.Draft202012Validator.check_schema(schema)
        assert len(mine) == sum(len(versions) for _c, _p, versions in selection), release
    assert sorted(generate.RELEASES) == ["v1.4.1", "v1.5.1", "v1.6.1"]
    assert len(schemas) == 6 + 5 + 5
    readme = (GATEWAY_API_DIR / "README.md").read_text()
    assert all(f"**{release}** (commit `" in readme for release in generate.RELEASES)


def test_tlsroute_v1_is_the_current_releases_and_v1alpha2_only_the_oldest():
    """Gateway API v1.5 moved TLSRoute to v1 (standard channel); its standard CRD keeps v1alpha2/v1alpha3
    listed but unserved, so a cluster on v1.5+ standard refuses the v1alpha2 route we rendered before."""
    assert gateway_api_releases_serving(_tls_route("v1")) == ["v1.5.1", "v1.6.1"]
    assert gateway_api_releases_serving(_tls_route("v1alpha2")) == ["v1.4.1"]
    for release in ("v1.5.1", "v1.6.1"):
        crd = (GATEWAY_API_DIR / release / "tlsroute-v1.json").read_text()
        assert "standard channel: config/crd/standard/" in crd, release
    # v1 wants hostnames (v1alpha2 did not) and exactly one rule, in both current releases.
    error = _refused(_without(_tls_route("v1"), "spec.hostnames"))
    assert error.validator == "required" and error.version == "v1.5.1"
    error = _refused(_set(_tls_route("v1"), "spec.rules", _tls_route("v1")["spec"]["rules"] * 2))
    assert error.validator == "maxItems" and " at spec.rules: " in str(error)


def test_the_vendored_schemas_are_closed_everywhere():
    """Every object schema allows no field it does not name (none of these preserves unknown fields)."""

    def objects(node: Any, path: str):
        if isinstance(node, dict):
            if node.get("type") == "object" or "properties" in node:
                yield path, node
            for key, sub in node.get("properties", {}).items():
                yield from objects(sub, f"{path}.{key}")
            for key in ("items", "additionalProperties"):
                yield from objects(node.get(key), f"{path}[{key}]")

    for name, schema in _vendored().items():
        for path, node in objects(schema, name):
            if path.endswith(".metadata"):
                assert node["$ref"].endswith("io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"), path
                continue
            assert node.get("additionalProperties") is False or isinstance(node.get("additionalProperties"), dict), path
