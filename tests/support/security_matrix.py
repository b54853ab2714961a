"""The security stacks (`tests.support.stacks.security_stacks()`) and the dev stack as
the core renders them, cached per stack id: tests read, and never mutate, what the
caches hold. NAME and NS are every security stack's name and namespace."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import yaml

from flower_federation.plan import FederationPlan
from tests.support.manifests import by_kind
from tests.support.render import plan_objects, plan_of
from tests.support.stacks import daemonset_node_keys, dev_config, security_stacks
from tests.support.tls_provider import new_openssh_key

NAME, NS = "sec", "flower-sec"
STACKS: dict[str, dict[str, Any]] = security_stacks()
STACK_IDS = sorted(STACKS)
DEV = "dev"
TLS_STACK_IDS = [s for s in STACK_IDS if not s.endswith("insecure")]
EXECUTOR_STACK_IDS = ["grpc-executor-kubernetes", "http-executor-kubernetes"]
KNOB_STACK_IDS = ["grpc-networkpolicy-knobs", "http-networkpolicy-knobs"]
EXECUTOR_CONFIG_FILE = "executor.yaml"  # the file a Kubernetes-executor ConfigMap holds


@functools.cache
def supplied_keys() -> dict[str, dict[str, str]]:
    """The `nodeAuthKeys` of the stacks whose keys are supplied (one set, reused)."""
    return daemonset_node_keys(new_openssh_key)


@functools.cache
def security_plan(sid: str) -> FederationPlan:
    if sid == DEV:
        return plan_of(dev_config(), "dev")
    keys = supplied_keys() if STACKS[sid].get("nodeAuth", {}).get("keySource") == "config" else None
    return plan_of(STACKS[sid], "dev", node_auth_keys=keys)


@functools.cache
def security_objects(sid: str) -> tuple[dict[str, Any], ...]:
    return tuple(plan_objects(security_plan(sid)))


def stacks_where(predicate: Callable[[FederationPlan], bool]) -> list[str]:
    return [sid for sid in STACK_IDS if predicate(security_plan(sid))]


def executor_configs(objects: Any) -> dict[str, dict[str, Any]]:
    """ConfigMap name -> parsed Flower executor config."""
    return {
        cm["metadata"]["name"]: yaml.safe_load(cm["data"][EXECUTOR_CONFIG_FILE])
        for cm in by_kind(objects, "ConfigMap")
        if EXECUTOR_CONFIG_FILE in cm.get("data", {})
    }
