"""Node keys rotate with no SuperNode refused (issue 22, section 4): the order of the
resources `pulumi up` creates, read off the program under mocks, and what
`nodeKeyGeneration` changes. tests/e2e/rotation.py shows the same with real Flower.

- The registration Job waits for the SuperLink; each pool's node-keys Secret and
  workloads wait for the registration Job (a SuperNode never starts on a key the
  SuperLink does not know); the revocation Job waits for every pool's workloads
  (pulumi-kubernetes waits for a StatefulSet's rollout), so no SuperNode running an old
  key is cut off.
- Raising a pool's `nodeKeyGeneration` makes new keys for that pool only (new pulumi-tls
  resources), a new key set, new Jobs; nothing else of the stack changes.
"""

from __future__ import annotations

import copy
from typing import Any

import pulumi
import pytest

from flower_federation.cli.offline import run_program
from flower_federation.plan import ConfigError, load_plan
from flower_federation.shell import node_keys, supernode_pool
from flower_federation.shell import registration as registration_component
from tests.support.flower import HTTP_ERA
from tests.support.tls_provider import PulumiState

RAW: dict[str, Any] = {
    "name": "rot",
    "namespace": "flower-rot",
    "version": HTTP_ERA,
    "nodeAuth": {"enabled": True},
    "supernodes": {"pools": [{"name": "a", "replicas": 2}, {"name": "b", "replicas": 1}]},
}


def _recording(monkeypatch: pytest.MonkeyPatch) -> dict[str, list[str]]:
    """{object registered: the objects it waits for} (kind/name; components by their own name)."""
    seen: dict[str, list[str]] = {}
    names: dict[int, str] = {}

    def wrap(module: Any) -> None:
        real = module.register

        def register(manifest: dict[str, Any], opts: pulumi.ResourceOptions, **kw: Any) -> Any:
            res = real(manifest, opts, **kw)
            key = f"{manifest['kind']}/{manifest['metadata']['name']}"
            names[id(res)] = key
            seen[key] = [names.get(id(d), type(d).__name__) for d in (opts.depends_on or [])]  # type: ignore[union-attr]
            return res

        monkeypatch.setattr(module, "register", register)

    for module in (node_keys, registration_component, supernode_pool):
        wrap(module)
    return seen


def test_keys_are_registered_before_the_pools_use_them_and_revoked_after_they_rolled(monkeypatch) -> None:
    seen = _recording(monkeypatch)
    run_program({"federation": copy.deepcopy(RAW)}, "rot")
    job = "Job/rot-node-registration"
    assert "ConfigMap/rot-node-registration" in seen[job], seen[
        job
    ]  # its keys first (the component waits for the SuperLink)
    for pool in ("a", "b"):
        assert job in seen[f"Secret/rot-supernode-{pool}-node-keys"], seen
        assert job in seen[f"StatefulSet/rot-supernode-{pool}"], seen
        assert f"Secret/rot-supernode-{pool}-node-keys" in seen[f"StatefulSet/rot-supernode-{pool}"], seen
    revocation = seen["Job/rot-node-revocation"]
    assert job in revocation
    assert {"StatefulSet/rot-supernode-a", "StatefulSet/rot-supernode-b"} <= set(revocation), revocation


def test_a_new_key_generation_rotates_that_pools_keys_only() -> None:
    state = PulumiState()

    def up(raw: dict[str, Any]) -> Any:
        return run_program({"federation": copy.deepcopy(raw)}, "rot", provider=state)

    before = up(RAW)
    raw = copy.deepcopy(RAW)
    raw["supernodes"]["pools"][0]["nodeKeyGeneration"] = 1
    after = up(raw)
    keys_before, keys_after = before.outputs["nodeAuth"]["publicKeys"], after.outputs["nodeAuth"]["publicKeys"]
    assert keys_after["b"] == keys_before["b"]
    assert all(keys_after["a"][s] != keys_before["a"][s] for s in keys_before["a"]), "pool a kept a key"
    tls_keys = sorted(
        r.name for r in after.registrations if r.type == "tls:index/privateKey:PrivateKey" and "node-keys" in r.name
    )
    assert tls_keys == ["rot-pool-a-node-keys-0-g1", "rot-pool-a-node-keys-1-g1", "rot-pool-b-node-keys-0"]

    def by_name(run: Any) -> dict[tuple[str, str], Any]:
        return {(m["kind"], m["metadata"]["name"]): m for m in run.manifests(show_secrets=True)}

    old, new = by_name(before), by_name(after)
    changed = sorted(k for k in old.keys() | new.keys() if old.get(k) != new.get(k))
    jobs = sorted(k for k in changed if k[0] == "Job")
    assert [k[1].rsplit("-", 1)[0] for k in jobs] == ["rot-node-registration"] * 2 + ["rot-node-revocation"] * 2
    # The keys' ConfigMap is bound to its content (issue 32 (d)): a new one beside the old, by name.
    maps = [k for k in changed if k[0] == "ConfigMap"]
    assert [k[1].rsplit("-", 1)[0] for k in maps] == ["rot-node-registration"] * 2, maps
    others = [k for k in changed if k[0] not in ("Job", "ConfigMap")]
    assert others == [
        ("Secret", "rot-supernode-a-node-keys"),
        ("StatefulSet", "rot-supernode-a"),
    ], others


@pytest.mark.parametrize(
    ("change", "said"),
    [
        ({"nodeAuth": {"enabled": False}}, "1 rotates generated node keys, and this stack has none (nodeAuth.enabled"),
        (
            {"nodeAuth": {"enabled": True, "keySource": "config"}},
            "1 rotates generated node keys, and this stack has none (nodeAuth.keySource is config: rotate by "
            "changing the pool's keys in nodeAuthKeys)",
        ),
    ],
)
def test_a_key_generation_without_generated_keys_is_refused_saying_why(change: dict[str, Any], said: str) -> None:
    raw = {**copy.deepcopy(RAW), **change}
    raw["supernodes"]["pools"][0]["nodeKeyGeneration"] = 1
    with pytest.raises(ConfigError) as err:
        load_plan(raw, "rot", node_auth_keys={"a": {"0": "x", "1": "x"}, "b": {"0": "x"}})
    assert f"supernodes.pools[0].nodeKeyGeneration: {said}" in str(err.value), str(err.value)


def _openssh_key() -> str:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    key = ec.generate_private_key(ec.SECP384R1())
    pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH, serialization.NoEncryption()
    )
    return pem.decode()


def test_supplied_keys_rotate_the_same_way_by_changing_them_in_node_auth_keys(monkeypatch) -> None:
    """`keySource: config`: new keys for pool a in `nodeAuthKeys` change the same objects as a new
    generation (pool a's Secret and StatefulSet, the key set and its Jobs), in the same order."""
    raw = copy.deepcopy(RAW)
    raw["nodeAuth"] = {"enabled": True, "keySource": "config"}
    keys = {"a": {"0": _openssh_key(), "1": _openssh_key()}, "b": {"0": _openssh_key()}}

    def up(node_keys: dict[str, dict[str, str]]) -> Any:
        config = {"federation": copy.deepcopy(raw), "nodeAuthKeys": copy.deepcopy(node_keys)}
        return run_program(config, "rot", secret_config=("nodeAuthKeys",))

    before = up(keys)
    rotated = {**keys, "a": {"0": _openssh_key(), "1": _openssh_key()}}
    seen = _recording(monkeypatch)
    after = up(rotated)
    old = {(m["kind"], m["metadata"]["name"]): m for m in before.manifests(show_secrets=True)}
    new = {(m["kind"], m["metadata"]["name"]): m for m in after.manifests(show_secrets=True)}
    changed = sorted(
        (k[0], k[1].rsplit("-", 1)[0] if k[0] in ("Job", "ConfigMap") else k[1])
        for k in old.keys() | new.keys()
        if old.get(k) != new.get(k)
    )
    assert changed == [
        ("ConfigMap", "rot-node-registration"),
        ("ConfigMap", "rot-node-registration"),
        ("Job", "rot-node-registration"),
        ("Job", "rot-node-registration"),
        ("Job", "rot-node-revocation"),
        ("Job", "rot-node-revocation"),
        ("Secret", "rot-supernode-a-node-keys"),
        ("StatefulSet", "rot-supernode-a"),
    ], changed
    assert "Job/rot-node-registration" in seen["StatefulSet/rot-supernode-a"]
    assert "StatefulSet/rot-supernode-a" in seen["Job/rot-node-revocation"]
