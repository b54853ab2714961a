"""SuperNode authentication as plain data: which key each SuperNode replica uses, the
Secret that holds a pool's keys, and the registration script for the SuperLink.

Each replica has its own ECDSA P-384 key. Kubernetes cannot mount a different Secret
into each pod of one StatefulSet, so a pool's keys share one Secret and each pod picks
its own file by its ordinal (StatefulSet) or node name (DaemonSet) through `$(VAR)`
expansion in its args.
"""

from __future__ import annotations

import shlex
from typing import TYPE_CHECKING, Any, Optional

from .config import Pool
from .naming import SUPERNODE, common_labels
from .nodeconfig import NODE_NAME_ENV, POD_INDEX_ENV

if TYPE_CHECKING:  # plan.py imports this module to check supplied keys
    from .plan import FederationPlan

KEY_DIR = "/etc/flower/node-auth"
KEY_VOLUME = "node-auth"
KEY_ALGORITHM = "ECDSA"
KEY_CURVE = "P384"
# What Flower's SuperNode loads (cryptography's load_ssh_private_key).
OPENSSH_HEADER = "-----BEGIN OPENSSH PRIVATE KEY-----"
CONFIG_KEY = "nodeAuthKeys"
# Digest of a pool's public keys on its pod template: a rotated key rolls the pool.
CHECKSUM_ANNOTATION = "flower.flwr.ai/node-keys-checksum"


def keys_checksum(public_keys: dict[str, str]) -> str:
    import hashlib

    text = "\n".join(f"{slot}={public_keys[slot]}" for slot in sorted(public_keys, key=_slot_order))
    return hashlib.sha256(text.encode()).hexdigest()


def stateful(plan: FederationPlan) -> bool:
    return plan.spec.mode == "StatefulSet"


def slots(plan: FederationPlan, pool: Pool, supplied: Optional[dict[str, Any]] = None) -> list[str]:
    """One slot per SuperNode: its ordinal, or (DaemonSet) the node names keys were
    supplied for."""
    if stateful(plan):
        return [str(i) for i in range(pool.replicas or 0)]
    return sorted((supplied or {}).get(pool.name, {}))


def key_file(slot: str) -> str:
    return f"node-{slot}.key"


def private_key_path(plan: FederationPlan) -> str:
    """The pod's own key, chosen when the kubelet expands `$(VAR)` in its args."""
    var = POD_INDEX_ENV if stateful(plan) else NODE_NAME_ENV
    return f"{KEY_DIR}/{key_file(f'$({var})')}"


def key_secret(plan: FederationPlan, pool: Pool, private_keys: dict[str, Any]) -> dict[str, Any]:
    labels = common_labels(plan.name, SUPERNODE, str(plan.version), pool.name, plan.spec.labels)
    return {
        "apiVersion": "v1", "kind": "Secret", "type": "Opaque",
        "metadata": {"name": plan.names.node_keys_secret(pool.name), "namespace": plan.namespace, "labels": labels},
        "stringData": {key_file(slot): private_keys[slot] for slot in sorted(private_keys, key=_slot_order)},
    }


def key_volume(plan: FederationPlan, pool: Pool) -> dict[str, Any]:
    # 0440 with fsGroup: readable by the Flower user only.
    return {"name": KEY_VOLUME, "secret": {"secretName": plan.names.node_keys_secret(pool.name), "defaultMode": 0o440}}


def key_mount() -> dict[str, Any]:
    return {"name": KEY_VOLUME, "mountPath": KEY_DIR, "readOnly": True}


def key_comment(plan: FederationPlan, pool: str, slot: str) -> str:
    return f"{plan.name}/{pool}/{slot}"


def _slot_order(slot: str):
    return (0, int(slot), "") if slot.isdigit() else (1, 0, slot)


def register_script(connection: str, public_keys: dict[str, dict[str, str]]) -> str:
    """A POSIX shell script that registers every SuperNode public key with the SuperLink
    through `flwr supernode register` (Flower 1.23+), skipping keys already registered.
    Run it wherever `flwr` reaches the Control API with the exported connection config."""
    lines = [
        "#!/bin/sh",
        "# Registers every SuperNode public key with the SuperLink (flwr 1.23+).",
        "# Safe to re-run: keys already registered are reported and skipped.",
        "set -eu",
        'dir=$(mktemp -d); trap \'rm -rf "$dir"\' EXIT',
        "register() {",
        '  printf \'%s\\n\' "$2" > "$dir/key.pub"',
        f'  if out=$(flwr supernode register "$dir/key.pub" {shlex.quote(connection)} 2>&1); then',
        '    echo "registered $1"',
        "  else",
        '    case "$out" in',
        '      *"already in use"*) echo "already registered: $1" ;;',
        '      *) echo "$out" >&2; echo "failed to register $1" >&2; exit 1 ;;',
        "    esac",
        "  fi",
        "}",
    ]
    for pool in sorted(public_keys):
        for slot in sorted(public_keys[pool], key=_slot_order):
            lines.append(f"register {shlex.quote(f'{pool}/{slot}')} {shlex.quote(public_keys[pool][slot])}")
    return "\n".join(lines) + "\n"


# --- keys supplied through secret stack config ---------------------------------------

def public_key(private_key_openssh: str, comment: str = "") -> str:
    """The OpenSSH public key line Flower registers, from an OpenSSH private key."""
    from cryptography.hazmat.primitives import serialization

    key = serialization.load_ssh_private_key(private_key_openssh.encode(), None)
    line = key.public_key().public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH).decode()
    return f"{line} {comment}".strip()


def _key_problem(text: Any) -> Optional[str]:
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.hazmat.primitives.serialization import load_ssh_private_key

    hint = "must be an ECDSA P-384 private key in OpenSSH format (ssh-keygen -t ecdsa -b 384 -N '' -f key)"
    if not isinstance(text, str) or OPENSSH_HEADER not in text:
        return hint
    try:
        key = load_ssh_private_key(text.encode(), None)
    except (ValueError, TypeError):
        return f"{hint}; it could not be read (passphrase-protected keys are not supported)"
    if not isinstance(key, ec.EllipticCurvePrivateKey) or not isinstance(key.curve, ec.SECP384R1):
        return hint
    return None


def supplied_key_problems(spec, keys: Any) -> list:
    """Problems with `nodeAuthKeys` (paths under that config key), for keySource=config.
    A StatefulSet pool needs exactly one key per ordinal; a DaemonSet pool one per
    Kubernetes node name its pods may run on."""
    from .errors import problem
    from .rules import DNS_NAME

    out: list = []

    def bad(parts: tuple, message: str) -> None:
        out.append(problem(parts, message, root=CONFIG_KEY))

    if keys is None:
        return [problem((), "missing: nodeAuth.keySource is config, so set one key per SuperNode with "
                            "`pulumi config set --secret --path 'nodeAuthKeys.<pool>.<slot>' \"$(cat key)\"`",
                        root=CONFIG_KEY)]
    if not isinstance(keys, dict):
        return [problem((), "must be a mapping {pool: {slot: private key}}", root=CONFIG_KEY)]
    pools = {p.name: p for p in spec.supernodes.pools}
    seen: dict[str, str] = {}
    for pool_name in sorted(keys):
        if pool_name not in pools:
            bad((pool_name,), f"no pool named '{pool_name}' (pools: {', '.join(sorted(pools))})")
            continue
        slots_given = keys[pool_name]
        if not isinstance(slots_given, dict):
            bad((pool_name,), "must be a mapping {slot: private key}")
            continue
        if spec.mode == "StatefulSet":
            wanted = {str(i) for i in range(pools[pool_name].replicas or 0)}
            for slot in sorted(set(map(str, slots_given)) - wanted, key=_slot_order):
                bad((pool_name, slot), f"pool '{pool_name}' has replicas 0..{len(wanted) - 1}; "
                                       f"no SuperNode would use this key")
        elif not slots_given:
            bad((pool_name,), "give at least one node name and its key")
        for slot, text in sorted(slots_given.items(), key=lambda kv: _slot_order(str(kv[0]))):
            slot = str(slot)
            if spec.mode == "DaemonSet" and not DNS_NAME.match(slot):
                bad((pool_name, slot), "DaemonSet keys are named by Kubernetes node name")
            why = _key_problem(text)
            if why:
                bad((pool_name, slot), why)
                continue
            identity = public_key(text)  # the same key however it is written
            if identity in seen:
                bad((pool_name, slot), f"the same key as {seen[identity]}: every SuperNode needs its own")
            else:
                seen[identity] = f"{pool_name}.{slot}"
    for name, pool in sorted(pools.items()):
        if spec.mode == "StatefulSet":
            given = {str(s) for s in keys.get(name, {})} if isinstance(keys.get(name), dict) else set()
            missing = [str(i) for i in range(pool.replicas or 0) if str(i) not in given]
            if missing:
                bad((name,), f"missing keys for replicas {', '.join(missing)}")
        elif name not in keys:
            bad((name,), "missing: give one key per Kubernetes node name")
    return out
