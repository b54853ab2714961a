"""`nodeAuthKeys`, the secret config holding node keys you supply (nodeAuth.keySource:
config): one key per SuperNode, each a real ECDSA P-384 key, none shared."""

from __future__ import annotations

from typing import Any

from flower_federation.config import Federation
from flower_federation.config.errors import PathPart, Problem, problem
from flower_federation.flower.public_keys import CONFIG_KEY, key_problem, public_key, slot_order
from flower_federation.rules.security import DNS_NAME


def supplied_key_problems(spec: Federation, keys: Any) -> list[Problem]:
    """Problems with `nodeAuthKeys` (paths under that config key), for keySource=config.
    A StatefulSet pool needs exactly one key per ordinal; a DaemonSet pool one per
    Kubernetes node name its pods may run on."""
    out: list[Problem] = []

    def bad(parts: tuple[PathPart, ...], message: str) -> None:
        out.append(problem(parts, message, root=CONFIG_KEY))

    if keys is None:
        return [
            problem(
                (),
                "missing: nodeAuth.keySource is config, so set one key per SuperNode with "
                "`pulumi config set --secret --path 'nodeAuthKeys.<pool>.<slot>' \"$(cat key)\"`",
                root=CONFIG_KEY,
            )
        ]
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
            for slot in sorted(set(map(str, slots_given)) - wanted, key=slot_order):
                bad(
                    (pool_name, slot),
                    f"pool '{pool_name}' has replicas 0..{len(wanted) - 1}; no SuperNode would use this key",
                )
        elif not slots_given:
            bad((pool_name,), "give at least one node name and its key")
        for slot, text in sorted(slots_given.items(), key=lambda kv: slot_order(str(kv[0]))):
            slot = str(slot)
            if spec.mode == "DaemonSet" and not DNS_NAME.fullmatch(slot):
                bad((pool_name, slot), "DaemonSet keys are named by Kubernetes node name")
            why = key_problem(text)
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
