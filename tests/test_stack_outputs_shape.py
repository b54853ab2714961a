"""What one stack reads from another (`fromStack`) in another shape than that stack's program exports is refused,
naming the site (or the hub), the stack, the output's path and what it holds. Before, a wrong type read as no value:
a malformed `pools` output skipped the count of a site's keys, a hub's malformed `externalAddress` let the site dial
its own address at the Fleet port, and a null key (which Pulumi drops on its way through a StackReference) was
refused by `validate` but rendered by `render`, the hub trusting the site's other keys only."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from flower_federation.plan import load_plan
from tests.support.validation import config_error
from tests.test_new_user_cli import cli

GOLDEN = Path(__file__).parent / "golden"
SITE_STACK = "acme/flower-federation/site-chart"
HUB_STACK = "acme/flower-federation/hub"
SITE_AT = "federation.sites[0].fromStack"
HUB_AT = "federation.supernodes.superlink.certificate.fromStack"


def federation(name: str) -> dict[str, Any]:
    return yaml.safe_load((GOLDEN / f"Pulumi.{name}.yaml").read_text())["config"]["flower-federation:federation"]


def outputs(name: str) -> dict[str, Any]:
    return json.loads((GOLDEN / f"{name}.outputs.json").read_text())


def both(tmp_path: Path, site_outputs: dict[str, Any]) -> list[tuple[int, str]]:
    """(exit code, stderr) of validate and render of the golden hub reading `site_outputs` as its site's."""
    file = tmp_path / "site.json"
    file.write_text(json.dumps(site_outputs))
    flags = ["--config-file", str(GOLDEN / "Pulumi.hub.yaml"), "--stack-outputs", f"{SITE_STACK}={file}"]
    return [cli(command, *flags)[::2] for command in ("validate", "render")]


def test_the_golden_site_outputs_pass_both() -> None:
    plan = load_plan(federation("hub"), "hub", stack_outputs={SITE_STACK: outputs("site-chart")})
    assert plan.site_keys[0][0] == "hospital-a"


@pytest.mark.parametrize("kind", ["StatefulSet", "DaemonSet"])
def test_a_null_key_is_refused_by_validate_and_render_alike(tmp_path: Path, kind: str) -> None:
    """A DaemonSet pool (keys by node name) has no count to miss it by: render exited 0, trusting node-b only."""
    site = outputs("site-chart")
    key = site["nodeAuth"]["publicKeys"]["ward"]["1"]
    slots = {"0": None, "1": key} if kind == "StatefulSet" else {"node-a": None, "node-b": key}
    site["nodeAuth"]["publicKeys"]["ward"] = slots
    site["pools"]["ward"] = {"kind": kind, **({"replicas": 2} if kind == "StatefulSet" else {})}
    (v_code, v_err), (r_code, r_err) = both(tmp_path, site)
    assert (v_code, r_code) == (1, 1) and v_err == r_err, (v_err, r_err)
    slot = next(iter(slots))
    assert (
        f"  - {SITE_AT}: site 'hospital-a': stack '{SITE_STACK}' exports nodeAuth.publicKeys.ward.{slot} as null, "
        "which Pulumi drops"
    ) in v_err, v_err
    assert "Traceback" not in v_err + r_err


@pytest.mark.parametrize(
    "pools, says",
    [
        ("x", 'exports pools as "x", not a mapping of pool to its kind and replicas'),
        ({"ward": [2]}, "exports pools.ward as [2], not a mapping (kind, replicas)"),
        ({"ward": {"kind": "StatefulSet", "replicas": "2"}}, 'exports pools.ward.replicas as "2", not a whole number'),
        ({"ward": {"kind": "StatefulSet", "replicas": 1.5}}, "exports pools.ward.replicas as 1.5, not a whole number"),
        ({"ward": {"kind": 7, "replicas": 2}}, "exports pools.ward.kind as 7, not one of StatefulSet, DaemonSet"),
    ],
)
def test_a_malformed_pools_output_is_refused_not_read_as_none(pools: Any, says: str) -> None:
    """Read as no pools before: the count of the site's keys was skipped, a missing key went unnoticed."""
    site = outputs("site-chart")
    site["pools"] = pools
    err = config_error(federation("hub"), stack_outputs={SITE_STACK: site})
    assert any(
        p.path == SITE_AT and f"site 'hospital-a': stack '{SITE_STACK}' {says}" in p.message for p in err.problems
    ), str(err)


@pytest.mark.parametrize("value", [[], "x", 5])
def test_a_key_export_that_is_no_mapping_is_quoted(value: Any) -> None:
    site = copy.deepcopy(outputs("site-chart"))
    site["nodeAuth"]["publicKeys"] = value
    err = config_error(federation("hub"), stack_outputs={SITE_STACK: site})
    assert [p.path for p in err.problems] == [SITE_AT], str(err)
    assert f"has {json.dumps(value)} as its output nodeAuth.publicKeys" in err.problems[0].message, str(err)


def test_a_site_flower_version_that_is_no_string_is_refused() -> None:
    site = outputs("site-chart")
    site["flowerVersion"] = 1.41
    err = config_error(federation("hub"), stack_outputs={SITE_STACK: site})
    assert [str(p) for p in err.problems] == [
        f"{SITE_AT}: site 'hospital-a': stack '{SITE_STACK}' exports flowerVersion as 1.41, not a version string"
    ]


def site_dialling(address: str) -> dict[str, Any]:
    raw = federation("site-from-hub")
    raw["supernodes"]["superlink"]["address"] = address
    return raw


@pytest.mark.parametrize("exported", ["fl.example.org:abc", "fl.example.org:0", 443, ["fl.example.org:443"]])
def test_a_hub_address_export_that_is_malformed_is_refused_though_the_site_sets_its_address(exported: Any) -> None:
    """The site's own address was dialled at the Fleet port (8000), not the hub's 443, without a word."""
    hub = outputs("hub")
    hub["superlink"]["externalAddress"] = exported
    err = config_error(site_dialling("fl.example.org"), stack_outputs={HUB_STACK: hub})
    assert [str(p) for p in err.problems] == [
        f"{HUB_AT}: the hub: stack '{HUB_STACK}' exports superlink.externalAddress as {json.dumps(exported)}, "
        "not a host[:port]"
    ]


@pytest.mark.parametrize("name, value", [("tls", True), ("flowerVersion", 1), ("superlink", "fl.example.org:443")])
def test_a_hub_export_of_another_type_is_refused(name: str, value: Any) -> None:
    hub = outputs("hub")
    hub[name] = value
    err = config_error(site_dialling("fl.example.org"), stack_outputs={HUB_STACK: hub})
    assert any(
        p.path == HUB_AT and f"stack '{HUB_STACK}' exports {name} as {json.dumps(value)}" in p.message
        for p in err.problems
    ), str(err)


def test_the_golden_hub_outputs_pass_a_site_setting_its_address() -> None:
    plan = load_plan(site_dialling("fl.example.org"), "dev", stack_outputs={HUB_STACK: outputs("hub")})
    assert plan.remote is not None and plan.remote.endpoint.port == 443
