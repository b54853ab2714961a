"""Resources: every managed container requests the defaults, a component's own
resources override them key by key, and no request is ever rendered above its limit."""

from __future__ import annotations

import pytest

from federation.errors import ConfigError
from federation.quantity import parse_quantity
from tests.support.defaults import DEFAULT_REQUESTS
from tests.support.manifests import containers
from tests.support.render import core_objects
from tests.support.security_matrix import NAME, STACK_IDS, security_objects
from tests.support.stacks import GRPC_ERA, HTTP_ERA, base


@pytest.mark.parametrize("sid", STACK_IDS)
def test_every_managed_container_requests_the_defaults(sid):
    count = 0
    for _, c in containers(security_objects(sid)):
        assert c["resources"] == {"requests": DEFAULT_REQUESTS}, c["name"]
        count += 1
    assert count >= 3


def _requests_within_limits(objects) -> None:
    for w, c in containers(objects):
        limits, requests = c["resources"].get("limits", {}), c["resources"].get("requests", {})
        for name, amount in requests.items():
            if name in limits:
                assert parse_quantity(str(amount)) <= parse_quantity(str(limits[name])), (
                    w["metadata"]["name"],
                    c["name"],
                    name,
                    amount,
                    limits[name],
                )


def test_component_resources_override_the_defaults_key_by_key():
    raw = base(
        GRPC_ERA,
        isolation="process",
        superlink={
            "superexecImage": f"flwr/superexec:{GRPC_ERA}",
            "resources": {"requests": {"cpu": "2"}},
            "superexecResources": {"limits": {"cpu": "1"}},
        },
    )
    raw["supernodes"]["pools"][0]["supernodeResources"] = {"limits": {"memory": "128Mi"}}
    raw["supernodes"]["pools"][0]["superexecResources"] = {
        "requests": {"memory": "1Gi"},
        "limits": {"nvidia.com/gpu": 1},
    }
    objects = core_objects(raw)
    res = {(w["metadata"]["name"], c["name"]): c["resources"] for w, c in containers(objects)}
    assert res[(f"{NAME}-superlink", "superlink")] == {"requests": {"cpu": "2", "memory": "256Mi"}}
    assert res[(f"{NAME}-superlink", "superexec-serverapp")] == {"requests": DEFAULT_REQUESTS, "limits": {"cpu": "1"}}
    # A memory limit below the default request lowers the request.
    assert res[(f"{NAME}-supernode-alpha", "supernode")] == {
        "requests": {"cpu": "100m", "memory": "128Mi"},
        "limits": {"memory": "128Mi"},
    }
    assert res[(f"{NAME}-supernode-alpha", "superexec-clientapp")] == {
        "requests": {"cpu": "100m", "memory": "1Gi"},
        "limits": {"nvidia.com/gpu": 1},
    }
    assert res[(f"{NAME}-supernode-beta", "supernode")] == {"requests": DEFAULT_REQUESTS}
    _requests_within_limits(objects)


def test_default_resources_are_configurable_and_lowered_under_own_limits():
    raw = base(
        HTTP_ERA,
        defaultResources={"requests": {"cpu": "1", "memory": "512Mi"}, "limits": {"memory": "2Gi"}},
        superlink={"resources": {"limits": {"cpu": "500m", "memory": "100Mi"}}},
    )
    objects = core_objects(raw)
    res = {(w["metadata"]["name"], c["name"]): c["resources"] for w, c in containers(objects)}
    assert res[(f"{NAME}-superlink", "superlink")] == {
        "requests": {"cpu": "500m", "memory": "100Mi"},
        "limits": {"cpu": "500m", "memory": "100Mi"},
    }
    assert res[(f"{NAME}-supernode-alpha", "supernode")] == {
        "requests": {"cpu": "1", "memory": "512Mi"},
        "limits": {"memory": "2Gi"},
    }
    _requests_within_limits(objects)


def test_a_request_is_never_rendered_above_its_limit():
    """A component's own request above an inherited default limit (defaults give every
    container a 1Gi memory limit, one pool needs 2Gi) renders a pod the API server
    refuses (requests must be <= limits). Either the limit follows the request, or
    validation reports it before anything is applied."""
    raw = base(GRPC_ERA, defaultResources={"requests": {"cpu": "100m", "memory": "256Mi"}, "limits": {"memory": "1Gi"}})
    raw["supernodes"]["pools"][0]["supernodeResources"] = {"requests": {"memory": "2Gi"}}
    try:
        objects = core_objects(raw)
    except ConfigError as err:
        assert any(p.path.startswith("federation.supernodes.pools[0].supernodeResources") for p in err.problems)
        return
    _requests_within_limits(objects)
