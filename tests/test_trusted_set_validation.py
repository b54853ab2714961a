"""Issue 32 part 4, at validation: the trusted set is exactly what the config says. The same key material
given twice (two sites, a site twice, a fromStack site and an inline one, a site and a pool's supplied key)
is refused at both holders' paths, since removing one holder could never revoke it; a key holding any
line or Unicode separator (what `str.splitlines()` splits on) is refused at its path, inline or from a
site stack's output, since a keys file line reader would read a second key under this one's label.
Each fails on 048b1d8 (the duplicate was merged silently, and only "\\n" was refused)."""

from __future__ import annotations

from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from flower_federation.flower.public_keys import LINE_BREAKS, public_key_problem
from flower_federation.plan import load_plan
from tests.support.stacks import base
from tests.support.validation import config_error


def new_key(comment: str) -> str:
    key = ec.generate_private_key(ec.SECP384R1()).public_key()
    line = key.public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH).decode()
    return f"{line} {comment}"


A, B, C = new_key("a/0"), new_key("b/0"), new_key("c/0")


def hub(*sites: dict[str, Any]) -> dict[str, Any]:
    raw = base(role="hub", nodeAuth={"enabled": True}, superlink={"ingress": {"host": "fl.example.org"}})
    raw["supernodes"] = {}
    raw["sites"] = list(sites)
    return raw


def test_distinct_keys_are_admitted_as_given() -> None:
    plan = load_plan(hub({"name": "a", "publicKeys": [A]}, {"name": "b", "publicKeys": [B]}), "dev")
    assert plan.site_keys == (("a", (A,)), ("b", (B,)))


def test_one_key_listed_by_two_sites_is_refused_naming_both() -> None:
    # The same key, with another comment and spacing: the key material is what counts.
    again = "  ".join(A.split()[:2]) + " b/7"
    err = config_error(hub({"name": "a", "publicKeys": [A]}, {"name": "b", "publicKeys": [B, again]}))
    [p] = err.problems
    assert p.path == "federation.sites[1].publicKeys[1]", str(err)
    assert f"key ...{A.split()[1][-16:]} is also trusted as federation.sites[0].publicKeys[0]" in p.message
    assert "removing either would not revoke it" in p.message


def test_one_key_twice_in_one_site_and_from_a_site_stack_is_refused() -> None:
    outputs = {"acme/p/b": {"nodeAuth": {"publicKeys": {"ward": {"0": B, "1": A}}}}}
    raw = hub({"name": "a", "publicKeys": [A, A]}, {"name": "b", "fromStack": "acme/p/b"})
    err = config_error(raw, stack_outputs=outputs)
    assert sorted(str(p) for p in err.problems) == [
        f"federation.sites[0].publicKeys[1]: key ...{A.split()[1][-16:]} is also trusted as "
        "federation.sites[0].publicKeys[0]: one key is one SuperNode's, trusted once (removing either would not "
        "revoke it); give each SuperNode its own key pair",
        f"federation.sites[1].fromStack: key ...{A.split()[1][-16:]} (its stack's publicKeys.ward.1) is also "
        "trusted as federation.sites[0].publicKeys[0]: one key is one SuperNode's, trusted once (removing either "
        "would not revoke it); give each SuperNode its own key pair",
    ], str(err)


def test_a_site_key_that_is_a_pools_supplied_key_is_refused() -> None:
    private = ec.generate_private_key(ec.SECP384R1())
    pem = private.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH, serialization.NoEncryption()
    ).decode()
    public = private.public_key().public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
    raw = base(nodeAuth={"enabled": True, "keySource": "config"})
    raw["sites"] = [{"name": "s", "publicKeys": [f"{public.decode()} s/0"]}]
    pools = raw["supernodes"]["pools"]
    keys = {p["name"]: {str(i): _private() for i in range(p.get("replicas", 1))} for p in pools}
    keys[pools[0]["name"]]["0"] = pem
    err = config_error(raw, node_auth_keys=keys)
    [p] = err.problems
    assert p.path == "federation.sites[0].publicKeys[0]", str(err)
    assert f'is also trusted as nodeAuthKeys.{pools[0]["name"]}["0"]' in p.message, str(err)


def _private() -> str:
    return (
        ec.generate_private_key(ec.SECP384R1())
        .private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH, serialization.NoEncryption())
        .decode()
    )


@pytest.mark.parametrize("sep", list(LINE_BREAKS.replace("\n", "")) + ["\r\n"], ids=lambda c: f"U+{ord(c[0]):04X}")
def test_a_key_smuggling_a_second_line_is_refused_inline_and_from_a_stack(sep: str) -> None:
    smuggled = f"{A}{sep}{B}"
    assert len(smuggled.splitlines()) == 2  # what the script's splitlines() read on 048b1d8: two keys
    assert public_key_problem(smuggled) is not None and public_key_problem(smuggled, placeholders=False) is not None
    err = config_error(hub({"name": "a", "publicKeys": [smuggled]}))
    [p] = err.problems
    assert p.path == "federation.sites[0].publicKeys[0]", str(err)
    assert "one key on one line: it holds a line break" in p.message and sep not in p.message, p.message
    outputs = {"acme/p/a": {"nodeAuth": {"publicKeys": {"ward": {"0": smuggled}}}}}
    err = config_error(hub({"name": "a", "fromStack": "acme/p/a"}), stack_outputs=outputs)
    [p] = err.problems
    assert p.path == "federation.sites[0].fromStack" and "(publicKeys.ward.0)" in p.message, str(err)
    assert "one key on one line" in p.message, p.message


@pytest.mark.parametrize("text", [f"{A}\n", f"  {A}", f"{A}\t"])
def test_config_padding_around_one_key_still_passes(text: str) -> None:
    assert public_key_problem(text, placeholders=False) is None


@pytest.mark.parametrize("text", [f"{A}\n\n", f"{A}\x00", f"{A} caf\u00e9", f"x{A}", "<no marker>"])
def test_anything_else_is_refused(text: str) -> None:
    assert public_key_problem(text) is not None


@pytest.mark.parametrize("slot", ["\u00b2", "1\u00b2", "\u0664", "Node A"])
def test_a_site_stack_slot_neither_ordinal_nor_node_name_is_refused(slot: str) -> None:
    # '²' made the sort by slot raise ValueError (str.isdigit() is true of it, int() refuses it).
    outputs = {"acme/p/a": {"nodeAuth": {"publicKeys": {"ward": {"0": A, slot: B}}}}}
    err = config_error(hub({"name": "a", "fromStack": "acme/p/a"}), stack_outputs=outputs)
    [p] = err.problems
    assert p.path == "federation.sites[0].fromStack", str(err)
    assert f"exports a key under slot {slot!r} (publicKeys.ward.{slot})" in p.message, str(err)


def test_a_site_stack_exports_ordinals_and_node_names() -> None:
    outputs = {"acme/p/a": {"nodeAuth": {"publicKeys": {"ward": {"10": A, "2": B}, "edge": {"node-a": C}}}}}
    plan = load_plan(hub({"name": "a", "fromStack": "acme/p/a"}), "dev", stack_outputs=outputs)
    assert plan.site_keys == (("a", (C, B, A)),)


SITE_AT = "federation.sites[0].fromStack"


@pytest.mark.parametrize(
    "ward, says",
    [
        ([A], f"exports publicKeys.ward as {[A]!r}"[:60]),
        ("x", "exports publicKeys.ward as 'x', not a mapping of slot to key"),
    ],
)
def test_a_pool_exported_as_anything_but_slots_is_refused(ward: Any, says: str) -> None:
    """Read as no keys before: at `pulumi up` the hub would have revoked the site's SuperNodes without a word."""
    outputs = {"acme/p/a": {"nodeAuth": {"publicKeys": {"ward": ward}}}}
    err = config_error(hub({"name": "a", "fromStack": "acme/p/a"}), stack_outputs=outputs)
    assert [p.path for p in err.problems] == [SITE_AT] and says in err.problems[0].message, str(err)


@pytest.mark.parametrize("replicas", [2, 2.0])  # a float through a StackReference: Pulumi's numbers are JSON's
def test_a_statefulset_pool_missing_keys_is_refused_and_a_whole_one_is_not(replicas: Any) -> None:
    """A null key vanishes on its way through Pulumi's outputs: the pool's `pools` output still says how many."""
    pools = {"ward": {"kind": "StatefulSet", "replicas": replicas}, "edge": {"kind": "DaemonSet"}}
    missing = {"acme/p/a": {"nodeAuth": {"publicKeys": {"ward": {"1": A}, "edge": {}}}, "pools": pools}}
    err = config_error(hub({"name": "a", "fromStack": "acme/p/a"}), stack_outputs=missing)
    assert [str(p) for p in err.problems] == [
        f"{SITE_AT}: stack 'acme/p/a' exports no key for ordinal 0 of pool 'ward' (2 replicas, its pools output "
        "says): those SuperNodes would be refused"
    ]
    whole = {"acme/p/a": {"nodeAuth": {"publicKeys": {"ward": {"0": B, "1": A}, "edge": {}}}, "pools": pools}}
    plan = load_plan(hub({"name": "a", "fromStack": "acme/p/a"}), "dev", stack_outputs=whole)
    assert plan.site_keys == (("a", (B, A)),)


def test_a_site_claiming_a_billion_replicas_is_answered_at_once() -> None:
    pools = {"ward": {"kind": "StatefulSet", "replicas": 10**9}}
    outputs = {"acme/p/a": {"nodeAuth": {"publicKeys": {"ward": {"0": A}}}, "pools": pools}}
    err = config_error(hub({"name": "a", "fromStack": "acme/p/a"}), stack_outputs=outputs)
    assert "exports no key for ordinal 1, 2, 3 (and 999999996 more) of pool 'ward'" in err.problems[0].message
