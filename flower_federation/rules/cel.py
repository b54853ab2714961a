"""The flower-operator CRD's CEL rules, their messages verbatim: a CR the operator refuses is refused here in the
same words, so a team moving off the operator meets nothing new. A message that opens with the field it is about
(`spec.superlink.superexecImage is required ...`) is said without that subject (`at_path`): the problem's config
path names the field, and one report never names fields two ways (`federation.` and `spec.`)."""

from __future__ import annotations

from collections.abc import Iterator

from flower_federation.config.derived import runs_superlink
from flower_federation.config.errors import Problem, problem
from flower_federation.rules.raw import Pools, Raw, get

MAX_POOLS = 16

# CEL rules of the operator's CRD, verbatim.

MSG_NO_POOLS = "spec.supernodes.pools must contain at least one pool"

MSG_DS_REPLICAS = "replicas must not be set for pools when mode is DaemonSet"

MSG_STS_REPLICAS = "replicas must be set (>=1) for every pool when mode is StatefulSet"

MSG_SUPEREXEC_REQUIRED = "spec.superlink.superexecImage is required when isolationMode=process"

MSG_CLIENTAPP_REQUIRED = "spec.supernodes.pools[*].images.superexecClientApp is required when isolationMode=process"

MSG_SUPEREXEC_EMPTY = "spec.superlink.superexecImage must be empty when isolationMode=subprocess"

MSG_CLIENTAPP_EMPTY = "spec.supernodes.pools[*].images.superexecClientApp must be empty when isolationMode=subprocess"

MSG_GPU_VENDOR = "spec.supernodes.pools[*].gpu.vendor is required when gpu.mountAll=true"


def at_path(verbatim: str) -> str:
    """The operator's message as said after the config path of the field it is about: without its `spec.` subject."""
    return verbatim.split(" ", 1)[1] if verbatim.startswith("spec.") else verbatim


def cel_rules(raw: Raw, mode: str, isolation: str, pools: Pools) -> Iterator[Problem]:
    raw_pools = get(raw, "supernodes", "pools")
    # A hub runs the SuperLink only: "at least one pool" is the other roles' rule.
    if (not isinstance(raw_pools, list) or len(raw_pools) == 0) and raw.get("role") != "hub":
        yield problem(("supernodes", "pools"), at_path(MSG_NO_POOLS))
    elif isinstance(raw_pools, list) and len(raw_pools) > MAX_POOLS:
        yield problem(("supernodes", "pools"), f"at most {MAX_POOLS} pools are allowed, got {len(raw_pools)}")
    for i, pool in pools:
        at = ("supernodes", "pools", i)
        replicas = pool.get("replicas")
        if mode == "DaemonSet" and replicas is not None:
            yield problem(at + ("replicas",), MSG_DS_REPLICAS)
        if mode == "StatefulSet" and (
            replicas is None or (isinstance(replicas, int) and not isinstance(replicas, bool) and replicas < 1)
        ):
            # The operator's words, then the value given (none when replicas is left out).
            yield problem(at + ("replicas",), MSG_STS_REPLICAS + ("" if replicas is None else f", not {replicas!r}"))
        clientapp = get(pool, "images", "superexecClientApp")
        if isolation == "process" and not clientapp:
            yield problem(at + ("images", "superexecClientApp"), at_path(MSG_CLIENTAPP_REQUIRED))
        if isolation == "subprocess" and clientapp:
            yield problem(at + ("images", "superexecClientApp"), at_path(MSG_CLIENTAPP_EMPTY))
        if get(pool, "gpu", "mountAll") is True and not get(pool, "gpu", "vendor"):
            yield problem(at + ("gpu", "vendor"), at_path(MSG_GPU_VENDOR))
    superexec = get(raw, "superlink", "superexecImage")
    if not runs_superlink(raw.get("role")):
        # A site runs no SuperLink, so no ServerApp SuperExec; its superlink.* keys are
        # refused by the role rules (rules/sites.py), once.
        return
    if isolation == "process" and not superexec:
        yield problem(("superlink", "superexecImage"), at_path(MSG_SUPEREXEC_REQUIRED))
    if isolation == "subprocess" and superexec:
        yield problem(("superlink", "superexecImage"), at_path(MSG_SUPEREXEC_EMPTY))
