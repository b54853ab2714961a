"""Validation of names: unique DNS-label pool names, at most 16 pools, the federation
name (default: the stack name) and namespace as DNS labels, and every object name within
Kubernetes' limits for its kind (StatefulSets 52, for the revision hash)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from flower_federation.builders.manifests import TooLarge
from tests.support.certificates import ca_pem
from tests.support.render import core_objects
from tests.support.validation import (
    DNS_NAME_MSG,
    POOL_NAME_MSG,
    assert_valid,
    cfg,
    pool,
    problems,
    process_cfg,
    sts_pool,
)


def test_duplicate_pool_name_reported_at_the_second():
    raw = cfg(sts_pool("a"), sts_pool("b"), sts_pool("a"))
    assert problems(raw) == [
        ("federation.supernodes.pools[2].name", "duplicate pool name 'a' (also supernodes.pools[0])"),
    ]


@pytest.mark.parametrize("name", ["Pool", "a_b", "a.b", "-a", "a-", "", "gpu pool"])
def test_pool_name_must_be_dns_label(name):
    assert problems(cfg(sts_pool(name))) == [("federation.supernodes.pools[0].name", POOL_NAME_MSG.format(name))]


def test_at_most_16_pools():
    sixteen = [sts_pool(f"p{i}") for i in range(16)]
    assert_valid(cfg(*sixteen))
    seventeen = sixteen + [sts_pool("p16")]
    assert problems(cfg(*seventeen)) == [("federation.supernodes.pools", "at most 16 pools are allowed, got 17")]


@pytest.mark.parametrize("name", ["1abc", "Demo", "a_b", "a-", "a.b", ""])
def test_federation_name_must_be_dns_1035_label(name):
    assert problems(cfg(name=name)) == [("federation.name", f"name {name!r} {DNS_NAME_MSG}")]


def test_default_name_is_the_stack_name():
    assert assert_valid(cfg(), stack="prod-eu").name == "prod-eu"


def test_invalid_stack_name_is_reported_when_it_is_the_default_name():
    assert problems(cfg(), stack="Prod_EU") == [
        ("federation.name", f"stack name 'Prod_EU' (the default for name) {DNS_NAME_MSG}"),
    ]
    # An explicit name makes the stack name irrelevant.
    assert assert_valid(cfg(name="prod"), stack="Prod_EU").name == "prod"


def test_namespace_must_be_dns_label():
    assert problems(cfg(namespace="Flower_NS")) == [
        ("federation.namespace", "'Flower_NS' must be a DNS label of at most 63 characters"),
    ]


STS_LIMIT = "a StatefulSet name may have at most 52 (Kubernetes adds a revision hash to it)"


def test_federation_name_length_limits():
    # Pool "a" in StatefulSet mode: `<name>-supernode-a` (name + 12) may have 52 characters.
    assert_valid(cfg(name="f" * 40))
    name = "f" * 43
    assert problems(cfg(name=name)) == [
        ("federation.name", f"object name '{name}-superlink' has 53 characters; {STS_LIMIT}"),
        ("federation.supernodes.pools[0].name", f"object name '{name}-supernode-a' has 55 characters; {STS_LIMIT}"),
    ]


def test_federation_name_not_limited_by_objects_that_are_not_rendered():
    # The ServerAppIo Service and ServerApp SuperExec Deployment exist only for distributed
    # SuperExec. DaemonSet pool "a": `<name>-supernode-a` has 54 <= 63; `<name>-superlink` 52.
    assert_valid(cfg(pool("a"), name="f" * 42, mode="DaemonSet"))


def test_distributed_superexec_object_names_are_checked_too():
    name = "f" * 44
    raw = process_cfg(name=name, version="1.26.1", superexecPlacement="distributed")
    raw["superlink"]["superexecImage"] = "flwr/superexec:1.26.1"
    raw["supernodes"]["pools"][0]["images"]["superexecClientApp"] = "flwr/superexec:1.26.1"
    assert problems(raw) == [
        (
            "federation.name",
            f"object name '{name}-superexec-serverapp' has 64 characters; a Deployment name may have at most 63",
        ),
        ("federation.name", f"object name '{name}-superlink' has 54 characters; {STS_LIMIT}"),
        (
            "federation.name",
            f"object name '{name}-superlink-serverappio' has 66 characters; a Service name may have at most 63",
        ),
        ("federation.supernodes.pools[0].name", f"object name '{name}-superexec-a' has 56 characters; {STS_LIMIT}"),
        ("federation.supernodes.pools[0].name", f"object name '{name}-supernode-a' has 56 characters; {STS_LIMIT}"),
    ]


def test_long_pool_name_fails_in_statefulset_mode():
    # Stack "dev": `dev-supernode-<pool>` is 14 + len(pool) characters.
    assert_valid(cfg(sts_pool("p" * 38)))
    pname = "p" * 39
    assert problems(cfg(sts_pool(pname))) == [
        ("federation.supernodes.pools[0].name", f"object name 'dev-supernode-{pname}' has 53 characters; {STS_LIMIT}"),
    ]


def test_same_pool_name_passes_in_daemonset_mode_up_to_63():
    assert_valid(cfg(pool("p" * 39), mode="DaemonSet"))
    assert_valid(cfg(pool("p" * 49), mode="DaemonSet"))
    pname = "p" * 50
    assert problems(cfg(pool(pname), mode="DaemonSet")) == [
        (
            "federation.supernodes.pools[0].name",
            f"object name 'dev-supernode-{pname}' has 64 characters; a DaemonSet name may have at most 63",
        ),
    ]


def test_a_site_is_not_held_to_the_length_of_superlink_objects_it_never_creates():
    # A name whose `-superlink` StatefulSet would be too long, but a site runs no SuperLink; its pools' names still count.
    name = "s" * 45
    site = cfg(sts_pool("a"), name=name)
    site["role"] = "site"
    site["supernodes"]["superlink"] = {"address": "hub.example.org", "certificate": {"pem": ca_pem()}}
    pool_too_long = (
        "federation.supernodes.pools[0].name",
        f"object name '{name}-supernode-a' has 57 characters; {STS_LIMIT}",
    )
    assert problems(site) == [pool_too_long]
    # The same name on a federation: its SuperLink's StatefulSet is refused too.
    assert problems(cfg(sts_pool("a"), name=name)) == [
        ("federation.name", f"object name '{name}-superlink' has 55 characters; {STS_LIMIT}"),
        pool_too_long,
    ]


def test_every_rendered_object_name_is_held_to_its_kinds_limit(tmp_path: Path) -> None:
    """A pool's ClientAppIo Service `N-supernode-P-clientappio` (name 30, pool 11: 64 characters) passed validate
    and render (the attacker's o1). The render checks every object's name against its kind's limit
    (kube/limits.py), so no name is left to a list; validate renders a complete plan the same way."""

    def o1(name: str) -> dict[str, Any]:
        pool = {
            **sts_pool("b" * 11),
            "images": {"superexecClientApp": "flwr/superexec:1.42.0"},
            "service": {"type": "NodePort", "externalNames": ["a1.example.org"]},
            "networkPolicy": {"allowExternal": True},
        }
        return cfg(
            pool,
            name=name,
            version="1.42.0",
            isolationMode="process",
            superexecPlacement="distributed",
            superlink={"superexecImage": "flwr/superexec:1.42.0"},
        )

    names = [m["metadata"]["name"] for m in core_objects(o1("a" * 29))]  # 63 characters: the longest name taken
    assert "a" * 29 + "-supernode-" + "b" * 11 + "-clientappio" in names
    with pytest.raises(TooLarge) as err:
        core_objects(o1("a" * 30))
    (found,) = err.value.problems
    assert found.path == "federation.supernodes.pools[0].name", found
    assert "has 64 characters; a Service name is a DNS label of at most 63" in found.message, found
    stack = tmp_path / "Pulumi.dev.yaml"
    stack.write_text(json.dumps({"config": {"flower-federation:federation": o1("a" * 30)}}), encoding="utf-8")
    run = subprocess.run(
        [sys.executable, "-m", "flower_federation", "validate", "--config-file", str(stack)],
        capture_output=True,
        text=True,
        check=False,
        cwd=Path(__file__).resolve().parents[1],
    )
    assert run.returncode == 1 and "clientappio' has 64 characters" in run.stderr, run.stderr
