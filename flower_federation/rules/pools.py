"""A pool's settings that span fields (nodeConfig values, GPUs, its disruption budget), and the SuperExec
placement the pools' mode allows."""

from __future__ import annotations

import re
from collections.abc import Iterator

from flower_federation.config.errors import Problem, problem
from flower_federation.flower.node_config import KEY_RE, STATEFULSET_ONLY, value_problem
from flower_federation.rules.raw import Raw, as_dict

PERCENT = re.compile(r"^[0-9]+%$")


def placement(raw: Raw, mode: str, isolation: str) -> Iterator[Problem]:
    if raw.get("superexecPlacement") != "distributed":
        return
    if isolation != "process":
        yield problem(("superexecPlacement",), "distributed SuperExec needs isolationMode=process")
    if mode == "DaemonSet":
        yield problem(
            ("superexecPlacement",),
            "distributed SuperExec pairs SuperExec replica k with SuperNode k, which needs mode=StatefulSet",
        )


def node_config(pool: Raw, i: int, mode: str) -> Iterator[Problem]:
    config = pool.get("nodeConfig")
    if not isinstance(config, dict):
        return
    at = ("supernodes", "pools", i, "nodeConfig")
    for key, value in config.items():
        if not KEY_RE.fullmatch(str(key)):
            yield problem(at + (key,), "keys may only hold letters, digits, '_' and '-'")
        why = value_problem(value)
        if why:
            yield problem(at + (key,), why)
        if mode == "DaemonSet" and isinstance(value, str):
            for ph in STATEFULSET_ONLY:
                if ph in value:
                    yield problem(
                        at + (key,),
                        f"{ph} is only available when mode is StatefulSet; pool '{pool.get('name')}' has mode "
                        "DaemonSet (one SuperNode per node, no ordinal)",
                    )


def gpu(pool: Raw, i: int) -> Iterator[Problem]:
    gpu = as_dict(pool.get("gpu"))
    at = ("supernodes", "pools", i, "gpu")
    if gpu.get("enabled") is not True:
        return
    if not gpu.get("mountAll") and not gpu.get("resourceName") and not gpu.get("vendor"):
        yield problem(at + ("resourceName",), "set resourceName (or vendor) so the GPU can be requested")
    if gpu.get("mountAll") is True and gpu.get("vendor") == "amd" and gpu.get("allowPrivileged") is not True:
        yield problem(
            at + ("allowPrivileged",),
            "AMD mountAll runs the container privileged (hostPath /dev/kfd, /dev/dri); "
            "set allowPrivileged: true to accept that",
        )


def disruption_budget(pool: Raw, i: int) -> Iterator[Problem]:
    budget = as_dict(pool.get("disruptionBudget"))
    at = ("supernodes", "pools", i, "disruptionBudget")
    if budget.get("maxUnavailable") is not None and budget.get("minAvailable") is not None:
        yield problem(at, "set maxUnavailable or minAvailable, not both")
    for key in ("maxUnavailable", "minAvailable"):
        value = budget.get(key)
        if isinstance(value, str) and not (PERCENT.fullmatch(value) and int(value[:-1]) <= 100):
            yield problem(at + (key,), f"'{value}' must be a count or a percentage from 0% to 100%")
        if isinstance(value, int) and not isinstance(value, bool) and value < 0:
            yield problem(at + (key,), "must not be negative")
