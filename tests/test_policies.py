"""The federation's promises (flower_federation/checks/) on the golden renders, and one mutated
render per policy that breaks it (negative controls): every golden passes the mandatory policies
(one has advisory findings, asserted exactly); a config's opt-in that weakens a promise is reported."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from flower_federation.checks.model import ADVISORY, LEVELS, MANDATORY
from flower_federation.checks.policies import POLICIES, run
from tests.support.policy_objects import (
    GOLDEN_NAMES,
    container,
    drop_flag,
    find,
    found,
    golden,
    golden_clusters,
    pod_spec,
    summary,
)

SUPERLINK_ARGS = "spec.template.spec.containers[superlink].args"
# Goldens that opt into something a policy reports (or that the render does without saying so).
# None since a site signs its pools' Runtime API certificates with a CA of its own (site-chart-values: its
# distributed SuperExec hop was plaintext before, flagged by flower-runtime-api-tls).
EXPECTED: dict[str, set[tuple[str, str, str, str]]] = {}


def test_policies_are_named_leveled_and_remediated() -> None:
    names = [p.name for p in POLICIES]
    assert len(set(names)) == len(names) == 10
    for p in POLICIES:
        assert p.level in LEVELS and p.description and p.remediation.endswith(".")


@pytest.mark.parametrize("name", GOLDEN_NAMES)
def test_every_golden_render_keeps_its_promises(name: str) -> None:
    got = set()
    for _, objects in golden_clusters(name):
        got |= found(objects)
    assert got == EXPECTED.get(name, set())


def test_the_goldens_hold_flower_pods_of_both_eras() -> None:
    # The pass above means something: the goldens have SuperLinks, SuperNodes, SuperExecs, Jobs, both eras.
    images = {
        c["image"]
        for name in GOLDEN_NAMES
        for _, objects in golden_clusters(name)
        for o in objects
        if "template" in o.get("spec", {})
        for c in pod_spec(o)["containers"]
    }
    assert {
        "flwr/superlink:1.26.1",
        "flwr/superexec:1.26.1",
        "flwr/superlink:1.42.0",
        "flwr/supernode:1.41.0",
    } <= images


# --- flower-tls ---------------------------------------------------------------------------------


def test_a_superlink_with_insecure_is_plaintext() -> None:
    objects = golden("dev")
    sl = find(objects, "StatefulSet", "demo-superlink")
    args = container(sl, "superlink")["args"]
    for flag in ("--ssl-ca-certfile", "--ssl-certfile", "--ssl-keyfile"):
        drop_flag(args, flag)
    args.insert(0, "--insecure")
    assert found(objects) == {(MANDATORY, "flower-tls", "StatefulSet flower-dev/demo-superlink", SUPERLINK_ARGS)}


def test_a_superlink_missing_one_tls_file_and_a_supernode_without_the_ca() -> None:
    objects = golden("grpc-era")
    drop_flag(container(find(objects, "StatefulSet", "legacy-superlink"), "superlink")["args"], "--ssl-keyfile")
    drop_flag(
        container(find(objects, "StatefulSet", "legacy-supernode-site-b"), "supernode")["args"], "--root-certificates"
    )
    violations = run(objects)
    assert summary(violations) == {
        (MANDATORY, "flower-tls", "StatefulSet flower-legacy/legacy-superlink", SUPERLINK_ARGS),
        (
            MANDATORY,
            "flower-tls",
            "StatefulSet flower-legacy/legacy-supernode-site-b",
            "spec.template.spec.containers[supernode].args",
        ),
    }
    assert "without --ssl-keyfile" in violations[0].message


def test_insecure_is_reported_in_a_wrapper_script_and_by_image() -> None:
    objects = golden("dev")
    node = container(find(objects, "StatefulSet", "demo-supernode-cpu"), "supernode")
    node["command"] = ["sh", "-c", "exec flower-supernode --insecure --superlink x:8000"]
    node["args"] = []
    assert found(objects) == {
        (
            MANDATORY,
            "flower-tls",
            "StatefulSet flower-dev/demo-supernode-cpu",
            "spec.template.spec.containers[supernode].args",
        )
    }


def test_tls_is_judged_only_where_the_version_is_known_to_have_it() -> None:
    objects = golden("dev")
    sl = container(find(objects, "StatefulSet", "demo-superlink"), "superlink")
    sl["args"].insert(0, "--insecure")
    sl["image"] = "flwr/superlink:1.19.0"  # older than any command line we hold (1.20)
    assert {p for _, p, _, _ in found(objects)} == set()
    sl["image"] = "flwr/superlink:1.20.0"
    assert {p for _, p, _, _ in found(objects)} == {"flower-tls"}


# --- flower-runtime-api-tls --------------------------------------------------------------------


def test_a_plaintext_superexec_hop_in_the_http_era() -> None:
    objects = golden("process-distributed")
    node = container(find(objects, "StatefulSet", "dist-supernode-train"), "supernode")["args"]
    for flag in ("--ssl-certfile", "--ssl-keyfile", "--ssl-ca-certfile"):
        drop_flag(node, flag)
    exe = container(find(objects, "StatefulSet", "dist-superexec-train"), "superexec-clientapp")["args"]
    exe[exe.index("--root-certificates") : exe.index("--root-certificates") + 2] = ["--insecure"]
    got = found(objects) - EXPECTED.get("process-distributed", set())
    assert got == {
        (
            ADVISORY,
            "flower-runtime-api-tls",
            "StatefulSet flower-dist/dist-supernode-train",
            "spec.template.spec.containers[supernode].args",
        ),
        (
            ADVISORY,
            "flower-runtime-api-tls",
            "StatefulSet flower-dist/dist-superexec-train",
            "spec.template.spec.containers[superexec-clientapp].args",
        ),
    }


def test_the_hop_is_not_judged_on_loopback_nor_in_the_grpc_era() -> None:
    objects = golden("process-distributed")
    node = container(find(objects, "StatefulSet", "dist-supernode-train"), "supernode")["args"]
    for flag in ("--ssl-certfile", "--ssl-keyfile", "--ssl-ca-certfile"):
        drop_flag(node, flag)
    node[node.index("--host") + 1] = "127.0.0.1"
    assert found(objects) == EXPECTED.get("process-distributed", set())
    # The gRPC-era golden's SuperExecs run --insecure towards 127.0.0.1 already, and pass.
    assert (
        "--insecure"
        in container(find(golden("grpc-era"), "StatefulSet", "legacy-supernode-site-a"), "superexec-clientapp")["args"]
    )


# --- flower-node-auth ---------------------------------------------------------------------------


def _expose(objects: list[dict[str, Any]], service: str, kind: str = "LoadBalancer") -> None:
    find(objects, "Service", service)["spec"]["type"] = kind


def test_an_exposed_superlink_without_node_auth() -> None:
    objects = golden("grpc-era")
    drop_flag(
        container(find(objects, "StatefulSet", "legacy-superlink"), "superlink")["args"],
        "--enable-supernode-auth",
        False,
    )
    assert found(objects) == set()  # a ClusterIP Service: in the cluster only
    _expose(objects, "legacy-superlink", "NodePort")
    assert found(objects) == {
        (MANDATORY, "flower-node-auth", "StatefulSet flower-legacy/legacy-superlink", SUPERLINK_ARGS),
        (MANDATORY, "flower-control-api-internal", "Service flower-legacy/legacy-superlink", "spec.ports[control]"),
    }


def test_a_superlink_behind_an_ingress_without_node_auth() -> None:
    objects = golden("hub")
    drop_flag(
        container(find(objects, "StatefulSet", "fl-superlink"), "superlink")["args"], "--enable-supernode-auth", False
    )
    violations = run(objects)
    assert summary(violations) == {
        (MANDATORY, "flower-node-auth", "StatefulSet flower-hub/fl-superlink", SUPERLINK_ARGS)
    }
    assert "Ingress flower-hub/fl-superlink" in violations[0].message
    assert "Ingress Ingress" not in violations[0].message  # a Ref says its kind once


def test_node_auth_flags_per_version() -> None:
    objects = golden("grpc-era")
    _expose(objects, "legacy-superlink")
    args = container(find(objects, "StatefulSet", "legacy-superlink"), "superlink")
    drop_flag(args["args"], "--enable-supernode-auth", False)
    args["args"] += ["--auth-list-public-keys", "/keys.csv"]
    args["image"] = "flwr/superlink:1.22.0"  # before --enable-supernode-auth: the key list is node auth
    assert "flower-node-auth" not in {p for _, p, _, _ in found(objects)}
    args["image"] = "flwr/superlink:1.26.1"
    assert "flower-node-auth" in {p for _, p, _, _ in found(objects)}


# --- flower-control-api-internal ----------------------------------------------------------------


def test_the_http_era_port_exposed_without_the_fleet_proxy() -> None:
    objects = golden("dev")
    _expose(objects, "demo-superlink")
    violations = run(objects)
    assert summary(violations) == {
        (MANDATORY, "flower-control-api-internal", "Service flower-dev/demo-superlink", "spec.ports[api]")
    }
    assert "Flower 1.42.0" in violations[0].message and "no Fleet-only proxy" in violations[0].message


def test_behind_the_fleet_proxy_only_the_control_service_counts() -> None:
    objects = golden("hub")
    _expose(objects, "fl-superlink")  # the proxy's port: Fleet only
    assert found(objects) == set()
    _expose(objects, "fl-superlink-control", "NodePort")
    assert found(objects) == {
        (MANDATORY, "flower-control-api-internal", "Service flower-hub/fl-superlink-control", "spec.ports[api]")
    }


def test_a_route_to_the_control_port() -> None:
    objects = golden("hub")
    route = {
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "HTTPRoute",
        "metadata": {"name": "ops", "namespace": "flower-hub"},
        "spec": {"rules": [{"backendRefs": [{"name": "fl-superlink-control", "port": 9095}]}]},
    }
    assert found(objects + [route]) == {
        (MANDATORY, "flower-control-api-internal", "HTTPRoute flower-hub/ops", "spec.rules[0].backendRefs[0]")
    }
    drop_flag(
        container(find(objects, "StatefulSet", "fl-superlink"), "superlink")["args"], "--enable-supernode-auth", False
    )
    node_auth = [v.message for v in run(objects + [route]) if v.policy == "flower-node-auth"]
    assert len(node_auth) == 1 and "HTTPRoute flower-hub/ops" in node_auth[0], node_auth
    assert "HTTPRoute HTTPRoute" not in node_auth[0]  # a Ref says its kind once


def test_a_loopback_control_api_is_not_reachable() -> None:
    objects = golden("dev")
    _expose(objects, "demo-superlink")
    args = container(find(objects, "StatefulSet", "demo-superlink"), "superlink")["args"]
    args[args.index("--host") + 1] = "127.0.0.1"
    assert found(objects) == set()


@pytest.mark.parametrize(
    ("setting", "policy"),
    [
        ({"insecure": True, "nodeAuth": {"enabled": False}}, "flower-tls"),
        ({"superlink": {"image": "flwr/superlink:1.42.0", "exposeControlApi": True}}, "flower-control-api-internal"),
    ],
    ids=["insecure", "exposeControlApi"],
)
def test_an_opt_in_that_weakens_a_promise_is_reported(setting: dict[str, Any], policy: str) -> None:
    """Our own render of a stack that opts out is not excused: the policy reports what the stack chose."""
    from tests.support.render import core_objects
    from tests.support.stacks import dev_config

    config = dev_config()
    exposed = {"superlink": {**config["superlink"], "service": {"type": "LoadBalancer"}}}
    merged = {**config, **exposed, **{k: v for k, v in setting.items() if k != "superlink"}}
    merged["superlink"] = {**merged["superlink"], **setting.get("superlink", {})}
    names = {v.policy for v in run(core_objects(merged)) if v.level == MANDATORY}
    assert policy in names
    assert policy not in {v.policy for v in run(core_objects({**config, **exposed})) if v.level == MANDATORY}


def test_the_docs_list_each_policys_severity_link_and_controls_as_defined():
    from flower_federation.checks.policies import metadata_table

    text = (Path(__file__).resolve().parent.parent / "docs" / "policies.md").read_text(encoding="utf-8")
    assert metadata_table() in text, "docs/policies.md: paste metadata_table()'s output:\n" + metadata_table()


def test_a_policy_must_say_its_severity_and_link():
    """The negative control of the metadata: a policy without either is refused where it is defined."""
    import dataclasses

    from flower_federation.checks.policies import POLICIES

    for change in ({"severity": ""}, {"severity": "urgent"}, {"url": ""}, {"url": "http://example.org"}):
        with pytest.raises(AssertionError):
            dataclasses.replace(POLICIES[0], **change)
