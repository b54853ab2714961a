"""One meaning per setting: where a rule needs a derived fact (the federation's name, where SuperExecs run, a
component's effective networkPolicy), it calls the function the plan and the render use (config/derived.py).
These tests hold the two sides against each other over every combination, so they cannot drift."""

from __future__ import annotations

import itertools
import re
from pathlib import Path
from typing import Any, Optional

import pytest

from flower_federation.builders import appio, network_links
from flower_federation.config import Federation
from flower_federation.config.derived import network_policy_settings
from flower_federation.config.errors import ConfigError
from flower_federation.plan import exposure as plan_exposure
from flower_federation.rules import sites
from flower_federation.rules.raw import effective_name, pools_of, superexecs_of
from tests.support.render import plan_of
from tests.support.stacks import HTTP_ERA, base

LAYER_VALUES: list[Optional[bool]] = [None, True, False]


@pytest.mark.parametrize("name", [None, "fed-a"])
def test_rules_and_plan_name_the_federation_alike(name: Optional[str]) -> None:
    raw = base(HTTP_ERA)
    if name is not None:
        raw["name"] = name
    assert effective_name(raw, "stack-s") == plan_of(raw, "stack-s").name


def test_an_empty_name_is_the_name_given_and_refused_not_the_stacks() -> None:
    raw = base(HTTP_ERA, name="")
    assert effective_name(raw, "stack-s") == ""
    with pytest.raises(ConfigError) as err:
        plan_of(raw, "stack-s")
    assert [p.path for p in err.value.problems] == ["federation.name"]


@pytest.mark.parametrize(
    "isolation,placement", [("subprocess", "sidecar"), ("process", "sidecar"), ("process", "distributed")]
)
def test_rules_and_plan_place_superexecs_alike(isolation: str, placement: str) -> None:
    raw = base(HTTP_ERA, isolation=isolation, placement=placement)
    plan = plan_of(raw)
    assert superexecs_of(raw) == plan.superexecs
    assert (plan.process_isolation, plan.distributed, plan.sidecar_superexec) == (
        isolation == "process",
        placement == "distributed" and isolation == "process",
        placement == "sidecar" and isolation == "process",
    )


def layered(top: Optional[bool], supernodes: Optional[bool], pool: Optional[bool]) -> dict[str, Any]:
    raw = base(HTTP_ERA, isolation="process", placement="distributed")
    for where, value in ((raw, top), (raw.setdefault("supernodes", {}), supernodes)):
        if value is not None:
            where["networkPolicy"] = {"allowExternal": value}
    beta = raw["supernodes"]["pools"][1]  # one replica, so it may be exposed
    beta["service"] = {"type": "NodePort", "externalNames": ["beta.example.org"]}
    if pool is not None:
        beta["networkPolicy"] = {"allowExternal": pool}
    return raw


@pytest.mark.parametrize("top,supernodes,pool", list(itertools.product(LAYER_VALUES, repeat=3)))
def test_the_rule_on_an_exposed_pool_reads_the_layering_the_render_applies(
    top: Optional[bool], supernodes: Optional[bool], pool: Optional[bool]
) -> None:
    raw = layered(top, supernodes, pool)
    expected = next((v for v in (pool, supernodes, top) if v is not None), False)
    try:
        plan = plan_of(raw)
    except ConfigError as err:
        # Refused: exactly because the pool's effective policy keeps outside SuperExecs out.
        assert not expected
        assert [p.path for p in err.problems] == ["federation.supernodes.pools[1].networkPolicy.allowExternal"]
        return
    assert expected
    components, _ = network_links.components_and_links(plan)
    (beta,) = [c for c in components if c.key == "sec-supernode-beta"]
    assert beta.settings.allow_external is True


def test_layering_takes_later_set_keys_and_fills_the_rest_with_defaults() -> None:
    merged = network_policy_settings({"enabled": False, "allowExternal": True}, None, {"allowExternal": None}, "x")
    assert merged["enabled"] is False and merged["allowExternal"] is True
    assert merged["apiServerPorts"] == [443, 6443]


# Flower's default ports live in flower/dialects.py only; config descriptions and rules quote the constants.
PORT_LITERAL = re.compile(r"(?<![\w.])(8000|8081|8082|9091|9092|9093|9094|9095)(?!\w|\.\d)")
PACKAGE = Path(network_links.__file__).resolve().parents[1]


def port_literals(text: str) -> list[str]:
    return PORT_LITERAL.findall(text)


def test_default_ports_are_stated_once() -> None:
    layers = [PACKAGE / layer for layer in ("config", "rules", "plan", "builders")]
    assert all(layer.is_dir() for layer in layers)
    found = {
        str(p.relative_to(PACKAGE)): lits
        for layer in layers
        for p in sorted(layer.glob("*.py"))
        if (lits := port_literals(p.read_text(encoding="utf-8")))
    }
    assert found == {}
    # Negative control: a restated default is found.
    assert port_literals('description="Unset: 9094."') == ["9094"]


def test_the_runtime_secret_rule_asks_for_the_sans_the_render_certifies() -> None:
    # The same pool with TLS made here (the render's certificate) and with the user's Secrets (the rule's ask).
    raw = base(HTTP_ERA, isolation="process", placement="distributed")
    raw["supernodes"]["pools"][1]["service"] = {
        "type": "NodePort",
        "externalNames": ["edge.example.org", "203.0.113.7"],
    }
    raw["supernodes"]["pools"][1]["networkPolicy"] = {"allowExternal": True}
    plan = plan_of(raw)
    pool = plan.spec.supernodes.pools[1]
    certified = appio.pool_dns_names(plan, pool) + appio.pool_ip_addresses(plan, pool)
    raw["tls"] = {"source": "existingSecret", "existingSecret": "sl-tls"}
    with pytest.raises(ConfigError) as err:
        plan_of(raw)
    (asked,) = [p.message for p in err.value.problems if p.path == "federation.supernodes.pools[1].runtimeApiSecret"]
    assert asked.endswith("with SANs " + ", ".join(certified))
    assert "*.sec-supernode-beta.flower-sec" in certified and "203.0.113.7" in certified


@pytest.mark.parametrize(
    "version,isolation,insecure",
    list(itertools.product(["1.26.1", HTTP_ERA], ["subprocess", "process"], [False, True])),
)
def test_the_rule_asks_for_a_runtime_secret_exactly_where_the_plan_protects_the_runtime_api(
    version: str, isolation: str, insecure: bool
) -> None:
    raw = base(version, isolation=isolation, placement="distributed" if isolation == "process" else "sidecar")
    if insecure:
        raw["insecure"] = True
    protected = plan_of(raw).runtime_trust is not None
    if not insecure:
        raw["tls"] = {"source": "existingSecret", "existingSecret": "sl-tls"}
    try:
        plan_of(raw)
        asked = False
    except ConfigError as err:
        asked = any(p.path.endswith("runtimeApiSecret") for p in err.problems)
    assert asked == protected


@pytest.mark.parametrize(
    "role,service_type,front,remote_pool",
    list(
        itertools.product(
            ["federation", "hub", "site"],
            ["ClusterIP", "LoadBalancer", "NodePort"],
            [None, "ingress", "gateway"],
            [False, True],
        )
    ),
)
def test_rules_and_plan_read_one_exposure(
    role: str, service_type: str, front: Optional[str], remote_pool: bool
) -> None:
    # What puts the Fleet-only proxy in front (the plan) is what refuses turning it off (the rule).
    raw = base(HTTP_ERA, role=role, superlink={"service": {"type": service_type}})
    if front == "ingress":
        raw["superlink"]["ingress"] = {"host": "fl.example.org"}
    elif front == "gateway":
        raw["superlink"]["gateway"] = {
            "parentRefs": [{"name": "public", "sectionName": "fleet"}],
            "hostname": "fl.example.org",
        }
    if remote_pool:
        raw["supernodes"]["pools"][1]["cluster"] = "edge"
    got = plan_exposure(Federation.model_validate(raw))
    assert sites.exposure(raw, pools_of(raw)) == got
    runs_superlink = role != "site"  # a site runs no SuperLink: nothing of its own is exposed
    assert got.by_config == (runs_superlink and (role == "hub" or front is not None or remote_pool))
    assert got.by_service == (runs_superlink and service_type != "ClusterIP")
    assert got.reachable == (got.by_config or got.by_service)
