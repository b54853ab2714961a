"""The vocabulary of the validation tests: minimal configs to break one rule at a time,
the problems `load_plan` reports for a config, and the messages of the flower-operator
CRD's CEL rules spelled out literally (not imported from `flower_federation.rules`), so a
reworded message fails a test."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from flower_federation.config.errors import ConfigError, Problem
from flower_federation.plan import FederationPlan, load_plan

SUPPORTED = "supported: 1.21-1.34 (gRPC era) or 1.40 - 1.x, not 2.0 (HTTP era)"
DNS_NAME_MSG = "must be a DNS label: up to 63 lowercase letters, digits and '-', starting with a letter"
POOL_NAME_MSG = "'{}': pool names must be DNS labels: lowercase letters, digits and '-'"

# The operator's CEL messages, verbatim but for the subject a message opened with (`spec.supernodes.pools`),
# which the problem's config path names (rules/cel.py's at_path).
CEL_NO_POOLS = "must contain at least one pool"
CEL_DS_REPLICAS = "replicas must not be set for pools when mode is DaemonSet"
CEL_STS_REPLICAS = "replicas must be set (>=1) for every pool when mode is StatefulSet"
CEL_SUPEREXEC_REQUIRED = "is required when isolationMode=process"
CEL_CLIENTAPP_REQUIRED = "is required when isolationMode=process"
CEL_SUPEREXEC_EMPTY = "must be empty when isolationMode=subprocess"
CEL_CLIENTAPP_EMPTY = "must be empty when isolationMode=subprocess"
CEL_GPU_VENDOR = "is required when gpu.mountAll=true"

SUPEREXEC = "flwr/superexec:1.41.0"


# --- configs ---------------------------------------------------------------------------


def pool(name: str = "a", **fields: Any) -> dict[str, Any]:
    return {"name": name, **fields}


def sts_pool(name: str = "a", replicas: int = 1, **fields: Any) -> dict[str, Any]:
    return {"name": name, "replicas": replicas, **fields}


def cfg(*pools: dict[str, Any], **top: Any) -> dict[str, Any]:
    """A federation config; with no pools, the minimal valid one-pool StatefulSet."""
    raw: dict[str, Any] = dict(top)
    supernodes = dict(raw.pop("supernodes", {}))
    supernodes["pools"] = list(pools) if pools else [sts_pool()]
    raw["supernodes"] = supernodes
    return raw


def process_cfg(*pools: dict[str, Any], **top: Any) -> dict[str, Any]:
    """Valid process-isolation config: every pool gets a ClientApp SuperExec image."""
    pools = pools or (sts_pool(),)
    pools = tuple({**p, "images": {"superexecClientApp": SUPEREXEC, **p.get("images", {})}} for p in pools)
    superlink = {"superexecImage": SUPEREXEC, **top.pop("superlink", {})}
    return cfg(*pools, isolationMode="process", superlink=superlink, **top)


# --- what load_plan says ------------------------------------------------------------------


def with_settings(raw: dict[str, Any], **settings: Any) -> dict[str, Any]:
    """A copy of `raw` with each `a__b__c=value` set at a.b.c (config keys, as the stack file spells them)."""
    out = copy.deepcopy(raw)
    for dotted, value in settings.items():
        node = out
        *parents, last = dotted.split("__")
        for key in parents:
            node = node.setdefault(key, {})
        node[last] = value
    return out


def _reported(err: ConfigError) -> list[Problem]:
    found = err.problems
    assert found, "ConfigError without problems"
    assert all(isinstance(p, Problem) for p in found)
    assert len(set(found)) == len(found), f"a problem is listed twice: {found}"
    return found


def problems(raw: Any, stack: str = "dev") -> list[tuple[str, str]]:
    """(path, message) of every problem `load_plan` reports, in its order."""
    with pytest.raises(ConfigError) as info:
        load_plan(raw, stack)
    return [(p.path, p.message) for p in _reported(info.value)]


def messages_by_path(raw: Any, stack: str = "dev") -> dict[str, str]:
    """Each problem's path with its messages joined by " | " (one path may have several); {} when `raw` is valid."""
    try:
        load_plan(raw, stack)
    except ConfigError as err:
        out: dict[str, str] = {}
        for p in _reported(err):
            out[p.path] = (out[p.path] + " | " if p.path in out else "") + p.message
        return out
    return {}


def assert_valid(raw: Any, stack: str = "dev") -> FederationPlan:
    try:
        return load_plan(raw, stack)
    except ConfigError as err:  # pragma: no cover - shows the problems on failure
        pytest.fail(f"expected a valid config, got:\n{err}")


def config_error(raw: Any, **kw: Any) -> ConfigError:
    """The ConfigError `load_plan(raw, "dev", **kw)` must raise."""
    with pytest.raises(ConfigError) as err:
        load_plan(raw, "dev", **kw)
    return err.value


def assert_problems(err: ConfigError, expected: list[str]) -> None:
    """Each expected `path: message` is a line of the error, and there are no others."""
    lines = str(err).splitlines()
    for line in expected:
        assert f"  - {line}" in lines, f"missing {line!r} in:\n{err}"
    assert len(err.problems) == len(expected), str(err)


def not_a_field(name: str) -> str:
    """The message for an unknown field in a Kubernetes fragment."""
    return f"not a Kubernetes field here: Additional properties are not allowed ('{name}' was unexpected)"
