"""The config fuzzer's stacks around a config (tests/support/fuzz_configs.py): the other
stacks a hub or site reads through StackReferences (their outputs, right and wrong), a
site's `supernodes.superlink` and a hub's `sites`, and the secret `nodeAuthKeys`: real
P-384 keys, the same every run, and now and then a wrong one.
"""

from __future__ import annotations

import functools
from typing import Any

from hypothesis import strategies as st

from flower_federation.flower.public_keys import public_key
from tests.support.certificates import ca_pem
from tests.support.fuzz_fragments import Draw, chance, one, pick

PEM = ca_pem("fuzzer hub CA")
HUB = "acme/flower-federation/hub"
GRPC_HUB = "acme/flower-federation/hub-grpc"
PLAIN_HUB = "acme/flower-federation/hub-plain"
SITE = "acme/flower-federation/site-a"
NOT_A_SITE = "acme/flower-federation/plain"
UNREAD = "acme/flower-federation/nowhere"  # a stack with no outputs


@functools.cache
def private_keys() -> tuple[str, ...]:
    """Distinct ECDSA P-384 keys in OpenSSH format, the same keys every run."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    return tuple(
        ec.derive_private_key(7919 * (i + 1), ec.SECP384R1())
        .private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH, serialization.NoEncryption())
        .decode()
        for i in range(6)
    )


@functools.cache
def public_keys() -> tuple[str, ...]:
    return tuple(public_key(k, f"fuzz/{i}") for i, k in enumerate(private_keys()))


def stack_outputs() -> dict[str, dict[str, Any]]:
    """What other stacks export, as a StackReference reads it."""
    hub = {
        "superlink": {"externalAddress": "fl.example.org:443"},
        "caCertificate": PEM,
        "flowerVersion": "1.41.0",
        "tls": "enabled",
    }
    return {
        HUB: hub,
        GRPC_HUB: {**hub, "superlink": {"externalAddress": "fl.example.org:9092"}, "flowerVersion": "1.26.1"},
        PLAIN_HUB: {
            "superlink": {"externalAddress": "fl.example.org:8000"},
            "flowerVersion": "1.41.0",
            "tls": "disabled",
        },
        SITE: {"nodeAuth": {"publicKeys": {"ward": {"0": public_keys()[4], "1": public_keys()[5]}}}},
        NOT_A_SITE: {"namespace": "flower"},
    }


def site_superlink(draw: Draw[Any], raw: dict[str, Any], insecure: bool, http: bool) -> None:
    supernodes = raw.setdefault("supernodes", {})
    if chance(draw, 4):
        return  # no supernodes.superlink
    source = one(draw, ["pem", "existingSecret", "fromStack"])
    cert: dict[str, Any] = {}
    if not insecure or chance(draw, 10):
        value = {
            "pem": PEM,
            "existingSecret": "hub-ca",
            # The hub of this site's era; now and then one of the other era, or no hub at all.
            "fromStack": pick(
                draw, [HUB if http else GRPC_HUB], [GRPC_HUB if http else HUB, UNREAD, PLAIN_HUB, "a b"], 8
            ),
        }[source]
        cert[source] = value
        if chance(draw, 4):
            cert["pem"] = "not a certificate"
    elif chance(draw, 50):
        cert["fromStack"] = PLAIN_HUB
    remote: dict[str, Any] = {"certificate": cert} if cert else {}
    if "fromStack" not in cert or chance(draw, 20):
        remote["address"] = pick(draw, ["hub.example.org", "203.0.113.9"], ["hub.example.org:9092", "Hub Example"])
    if chance(draw, 30):
        remote["port"] = pick(draw, [9092, 443], [0])
    if chance(draw, 20):
        remote["cidrs"] = pick(draw, [["203.0.113.0/24"], ["203.0.113.9/32", "2001:db8::/64"]], [["203.0.113.9"]])
    supernodes["superlink"] = remote
    if source == "existingSecret" and not chance(draw, 10):
        raw["createNamespace"] = False
    if chance(draw, 3):
        raw[one(draw, ["superlink", "tls", "cli", "sites"])] = one(
            draw, [{"image": "flwr/superlink:1.41.0"}, {"source": "generate"}, [{"name": "x"}]]
        )


def hub_sites(draw: Draw[Any], raw: dict[str, Any]) -> None:
    def site(d: Draw[Any], i: int) -> Any:
        name = pick(d, ["lab-c", "hospital-b"][i : i + 1], ["Lab C", "lab-c"])
        if chance(d, 40):
            return {"name": name, "fromStack": pick(d, [SITE], [NOT_A_SITE, UNREAD, "a/b/c/d"], 15)}
        if chance(d, 5):
            return one(d, [{"name": name}, {"name": name, "fromStack": SITE, "publicKeys": [public_keys()[3]]}])
        keys = [public_keys()[one(d, [2, 3])]]
        if chance(d, 8):
            keys = [one(d, ["ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIFuzz", "not a key", public_keys()[2] + "\nx"])]
        return {"name": name, "publicKeys": keys}

    sites = [site(draw, i) for i in range(draw(st.integers(0, 2)))]
    if sites:
        raw["sites"] = sites


def node_auth_keys(draw: Draw[Any], pools: list[dict[str, Any]], mode: str) -> Any:
    if chance(draw, 4):
        return one(draw, [None, "a key", {"ghost": {"0": private_keys()[0]}}])
    keys = iter(private_keys())
    out: dict[str, Any] = {}
    for pool in pools:
        name = pool.get("name")
        if not isinstance(name, str) or name in out:
            continue
        replicas = pool.get("replicas")
        count = replicas if isinstance(replicas, int) and not isinstance(replicas, bool) and replicas > 0 else 0
        slots = [str(i) for i in range(count)] if mode == "StatefulSet" else ["node-1", "node-2"][: one(draw, [1, 2])]
        out[name] = {slot: next(keys, private_keys()[0]) for slot in slots}
    if out and chance(draw, 8):
        pool_keys = out[next(iter(out))]
        if pool_keys:
            slot = next(iter(pool_keys))
            pool_keys[slot] = one(draw, ["not a key", private_keys()[5], None])
    return out
