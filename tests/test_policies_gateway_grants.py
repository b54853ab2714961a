"""`flower-superlink-key-not-granted` (issue 32, part 6, on any manifests): a ReferenceGrant that hands
Gateways of another namespace the SuperLink's own server-certificate Secret, found by following its
container's `--ssl-certfile`/`--ssl-keyfile` through the pod's volumes, fails; so does one that names no
Secret (every Secret of the namespace) while that Secret lives there. Our render (the listener's own
Secret `N-gateway-tls`) passes. Negative controls both ways: a grant in another namespace, for another
kind, or from something other than a Gateway is not flagged; the Secret is the mounted one, not a name."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from flower_federation.checks.model import MANDATORY
from flower_federation.checks.policies import run
from tests.support.policy_objects import find, pod_spec
from tests.support.render import core_objects
from tests.support.stacks import HTTP_ERA, base
from tests.test_policies_pack import everything

POLICY = "flower-superlink-key-not-granted"
GATEWAY = {
    "parentRefs": [{"name": "public", "namespace": "gateway-system", "sectionName": "fleet"}],
    "hostname": "fl.example.org",
}
NS = "flower-sec"
GRANT = "ReferenceGrant flower-sec/sec-gateway-tls"
SERVER_SECRET = "sec-superlink-tls"


def _render() -> list[dict[str, Any]]:
    raw = base(HTTP_ERA)
    raw["superlink"] = {**raw.get("superlink", {}), "gateway": GATEWAY}
    return core_objects(raw)


RENDER = _render()  # one render, copied by each test


def objects_with(**to: Any) -> list[dict[str, Any]]:
    """Our render with the grant's one `to` entry replaced by `to`."""
    objects = copy.deepcopy(RENDER)
    find(objects, "ReferenceGrant", "sec-gateway-tls")["spec"]["to"] = [to]
    return objects


def flagged(objects: list[dict[str, Any]]) -> list[tuple[str, str, str]]:
    return [(str(v.ref), v.path, v.message) for v in run(objects) if v.policy == POLICY]


def test_our_render_passes_though_it_grants_the_listeners_secret() -> None:
    grant = find(RENDER, "ReferenceGrant", "sec-gateway-tls")
    assert grant["spec"]["to"] == [{"group": "", "kind": "Secret", "name": "sec-gateway-tls"}]
    assert flagged(RENDER) == []
    assert not any(policy == POLICY for policy, _, _ in everything(copy.deepcopy(RENDER)))


def test_a_grant_naming_the_superlinks_secret_fails_by_check_and_pack() -> None:
    objects = objects_with(group="", kind="Secret", name=SERVER_SECRET)
    ((ref, path, message),) = flagged(objects)
    assert (ref, path) == (GRANT, "spec.to[0]")
    assert f"hands the Secret {SERVER_SECRET}, the SuperLink's server certificate and key" in message
    assert "--ssl-certfile /etc/flower/tls/tls.crt" in message and "--ssl-keyfile /etc/flower/tls/tls.key" in message
    assert "Gateways of namespace gateway-system" in message
    assert [v.level for v in run(objects) if v.policy == POLICY] == [MANDATORY]
    # The policy pack runs the same function: one mandatory diagnostic, on the grant's resource.
    assert {d for d in everything(objects) if d[0] == POLICY} == {(POLICY, MANDATORY, "sec-gateway-tls")}


def test_a_grant_of_every_secret_in_the_namespace_fails() -> None:
    ((ref, path, message),) = flagged(objects_with(group="", kind="Secret"))
    assert (ref, path) == (GRANT, "spec.to[0]")
    assert f"every Secret of its namespace (no `name`), among them {SERVER_SECRET}" in message


@pytest.mark.parametrize(
    "case",
    ["another namespace", "a ConfigMap", "another group", "from HTTPRoutes", "another Secret"],
)
def test_grants_that_do_not_reach_the_superlinks_key_are_not_flagged(case: str) -> None:
    objects = objects_with(group="", kind="Secret")  # every Secret: flagged as it stands (checked last)
    grant = find(objects, "ReferenceGrant", "sec-gateway-tls")
    if case == "another namespace":
        grant["metadata"]["namespace"] = "elsewhere"
    elif case == "a ConfigMap":
        grant["spec"]["to"] = [{"group": "", "kind": "ConfigMap"}]
    elif case == "another group":
        grant["spec"]["to"] = [{"group": "example.org", "kind": "Secret"}]
    elif case == "from HTTPRoutes":
        grant["spec"]["from"] = [{"group": "gateway.networking.k8s.io", "kind": "HTTPRoute", "namespace": "x"}]
    else:
        grant["spec"]["to"] = [{"group": "", "kind": "Secret", "name": "sec-gateway-tls"}]
    assert flagged(objects) == []
    assert flagged(objects_with(group="", kind="Secret")) != []  # the same objects before the edit fail


def test_the_secret_is_the_one_the_superlink_mounts_not_a_name() -> None:
    # A foreign manifest set (kubectl get -o yaml of another install): the key comes from a projected volume
    # of a Secret with an unrelated name. Granting that Secret fails; granting `sec-superlink-tls`, which no
    # SuperLink then loads, does not.
    objects = objects_with(group="", kind="Secret", name="wildcard-cert")
    spec = pod_spec(find(objects, "StatefulSet", "sec-superlink"))
    (tls,) = [v for v in spec["volumes"] if v["name"] == "tls"]
    del tls["secret"]
    tls["projected"] = {"sources": [{"secret": {"name": "wildcard-cert"}}]}
    ((_, _, message),) = flagged(objects)
    assert "hands the Secret wildcard-cert" in message
    find(objects, "ReferenceGrant", "sec-gateway-tls")["spec"]["to"] = [{"kind": "Secret", "name": SERVER_SECRET}]
    assert flagged(objects) == []
