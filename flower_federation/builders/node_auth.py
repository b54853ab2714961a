"""SuperNode authentication as plain data: which key each SuperNode replica uses, the
Secret that holds a pool's keys, and the registration script for the SuperLink.

Each replica has its own ECDSA P-384 key. Kubernetes cannot mount a different Secret
into each pod of one StatefulSet, so a pool's keys share one Secret and each pod picks
its own file by its ordinal (StatefulSet) or node name (DaemonSet) through `$(VAR)`
expansion in its args.
"""

from __future__ import annotations

import hashlib
import shlex
from typing import Any

from flower_federation.config import Pool
from flower_federation.flower.layout import NODE_KEY_DIR, NODE_KEY_VOLUME
from flower_federation.flower.node_config import NODE_NAME_ENV, POD_INDEX_ENV
from flower_federation.flower.public_keys import slot_order
from flower_federation.kube.naming import SUPERNODE
from flower_federation.kube.objects import Manifest
from flower_federation.plan import FederationPlan

KEY_ALGORITHM = "ECDSA"
KEY_CURVE = "P384"
# Digest of a pool's public keys on its pod template: a rotated key rolls the pool.
CHECKSUM_ANNOTATION = "flower.flwr.ai/node-keys-checksum"


def keys_checksum(public_keys: dict[str, str]) -> str:
    text = "\n".join(f"{slot}={public_keys[slot]}" for slot in sorted(public_keys, key=slot_order))
    return hashlib.sha256(text.encode()).hexdigest()


def slots(plan: FederationPlan, pool: Pool) -> list[str]:
    """One slot per SuperNode: its ordinal, or (DaemonSet) the node names keys were
    supplied for."""
    if plan.stateful:
        return [str(i) for i in range(pool.replicas or 0)]
    return sorted((plan.node_auth_keys or {}).get(pool.name, {}))


def key_file(slot: str) -> str:
    return f"node-{slot}.key"


def private_key_path(plan: FederationPlan) -> str:
    """The pod's own key, chosen when the kubelet expands `$(VAR)` in its args."""
    var = POD_INDEX_ENV if plan.stateful else NODE_NAME_ENV
    return f"{NODE_KEY_DIR}/{key_file(f'$({var})')}"


def key_secret(plan: FederationPlan, pool: Pool) -> Manifest:
    """The pool's node-keys Secret without its data: the shell fills `stringData` with
    `key_files` of the private keys it generates or reads from secret config."""
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "Opaque",
        "metadata": plan.meta(plan.names.node_keys_secret(pool.name), SUPERNODE, pool.name),
    }


def key_files(private_keys: dict[str, Any]) -> dict[str, Any]:
    """`stringData` of a node-keys Secret: one file per slot, in slot order."""
    return {key_file(slot): private_keys[slot] for slot in sorted(private_keys, key=slot_order)}


def key_volume(plan: FederationPlan, pool: Pool) -> dict[str, Any]:
    # 0440 with fsGroup: readable by the Flower user only.
    return {
        "name": NODE_KEY_VOLUME,
        "secret": {"secretName": plan.names.node_keys_secret(pool.name), "defaultMode": 0o440},
    }


def key_mount() -> dict[str, Any]:
    return {"name": NODE_KEY_VOLUME, "mountPath": NODE_KEY_DIR, "readOnly": True}


def key_comment(plan: FederationPlan, pool: str, slot: str) -> str:
    return f"{plan.name}/{pool}/{slot}"


def register_script(connection: str, public_keys: dict[str, dict[str, str]]) -> str:
    """A POSIX shell script that registers every SuperNode public key with the SuperLink
    through `flwr supernode register` (Flower 1.23+), skipping keys already registered.
    Run it wherever `flwr` reaches the Control API with the exported connection config."""
    lines = [
        "#!/bin/sh",
        "# Registers every SuperNode public key with the SuperLink (flwr 1.23+).",
        "# Safe to re-run: keys already registered (or revoked earlier) are reported and skipped.",
        "set -eu",
        "dir=$(mktemp -d); trap 'rm -rf \"$dir\"' EXIT",
        "register() {",
        '  printf \'%s\\n\' "$2" > "$dir/key.pub"',
        f'  if out=$(flwr supernode register "$dir/key.pub" {shlex.quote(connection)} 2>&1); then',
        '    echo "registered $1"',
        "  else",
        '    case "$out" in',
        # Flower answers "Public key already in use" for a registered key and for a revoked one alike (it keeps
        # a revoked node's key and never registers it again): the line says both, and what to do if revoked.
        '      *"already in use"*) echo "already registered or revoked: $1 (if revoked, its SuperNode needs a new key'
        ' pair)" ;;',
        '      *) echo "$out" >&2; echo "failed to register $1" >&2; exit 1 ;;',
        "    esac",
        "  fi",
        "}",
    ]
    for pool in sorted(public_keys):
        for slot in sorted(public_keys[pool], key=slot_order):
            lines.append(f"register {shlex.quote(f'{pool}/{slot}')} {shlex.quote(public_keys[pool][slot])}")
    return "\n".join(lines) + "\n"
