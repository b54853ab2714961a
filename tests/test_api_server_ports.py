"""`networkPolicy.apiServerPorts`: where a SuperExec with the Kubernetes executor reaches the API server.
Default 443 and 6443; a distribution that serves it elsewhere (e.g. 8443) sets it, at the top level or for
one component, layered as every networkPolicy key is."""

from __future__ import annotations

from typing import Any

import pytest

from flower_federation.config.errors import ConfigError
from tests.support.manifests import by_kind
from tests.support.render import core_objects, plan_of
from tests.support.stacks import HTTP_ERA, base

ANY_ADDRESS = {"ipBlock": {"cidr": "0.0.0.0/0"}}


def api_server_ports(objects: list[dict[str, Any]]) -> dict[str, list[int]]:
    """Per NetworkPolicy, the ports of its egress rules to any address (the API server's)."""
    out = {}
    for policy in by_kind(objects, "NetworkPolicy"):
        for rule in policy["spec"].get("egress", []):
            if rule.get("to") == [ANY_ADDRESS]:
                out[policy["metadata"]["name"]] = sorted(p["port"] for p in rule["ports"])
    return out


def executor_stack(**extra: Any) -> dict[str, Any]:
    return base(HTTP_ERA, isolation="process", placement="distributed", executor={"type": "kubernetes"}, **extra)


def test_the_default_is_443_and_6443_for_every_superexec() -> None:
    ports = api_server_ports(core_objects(executor_stack()))
    assert ports == {
        "sec-superexec-serverapp": [443, 6443],
        "sec-superexec-alpha": [443, 6443],
        "sec-superexec-beta": [443, 6443],
    }


def test_a_top_level_setting_reaches_every_superexec_and_a_pools_only_that_pool() -> None:
    raw = executor_stack(networkPolicy={"apiServerPorts": [8443]})
    raw["supernodes"]["pools"][1]["networkPolicy"] = {"apiServerPorts": [6443, 16443]}
    ports = api_server_ports(core_objects(raw))
    assert ports == {
        "sec-superexec-serverapp": [8443],
        "sec-superexec-alpha": [8443],
        "sec-superexec-beta": [6443, 16443],
    }


def test_without_the_kubernetes_executor_nothing_reaches_the_api_server() -> None:
    # Negative control for the helper above: no SuperExec starts pods, so no rule to any address.
    raw = base(HTTP_ERA, isolation="process", placement="distributed", networkPolicy={"apiServerPorts": [8443]})
    assert api_server_ports(core_objects(raw)) == {}


@pytest.mark.parametrize("value", [[], [0], [70000], ["https"]])
def test_a_port_list_that_is_not_ports_is_refused_at_its_path(value: Any) -> None:
    with pytest.raises(ConfigError) as err:
        plan_of(executor_stack(networkPolicy={"apiServerPorts": value}))
    assert [p.path for p in err.value.problems] == [
        "federation.networkPolicy.apiServerPorts" + ("" if value == [] else "[0]")
    ]
