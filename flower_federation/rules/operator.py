"""The flower-operator CRD's CEL rules (messages verbatim), object names, SuperExec
placement, nodeConfig values, GPUs and disruption budgets."""

from __future__ import annotations

import re
from collections.abc import Iterator

from flower_federation.config.derived import runs_superlink
from flower_federation.config.errors import Problem, problem
from flower_federation.flower.node_config import KEY_RE, STATEFULSET_ONLY, value_problem
from flower_federation.kube.naming import (
    DNS_LABEL_MAX,
    REGISTRATION_DIGEST_LENGTH,
    SERVERAPP_ROLE,
    STATEFULSET_NAME_MAX,
    Names,
)
from flower_federation.rules.raw import DEFAULTS, Pools, Raw, as_dict, effective_name, get, superexecs_of

DNS1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")

DNS1123 = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")

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

PERCENT = re.compile(r"^[0-9]+%$")
# Keys of Flower's executor config that RBAC and NetworkPolicies depend on.


def cel_rules(raw: Raw, mode: str, isolation: str, pools: Pools) -> Iterator[Problem]:
    raw_pools = get(raw, "supernodes", "pools")
    # A hub runs the SuperLink only: "at least one pool" is the other roles' rule.
    if (not isinstance(raw_pools, list) or len(raw_pools) == 0) and raw.get("role") != "hub":
        yield problem(("supernodes", "pools"), MSG_NO_POOLS)
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
            yield problem(at + ("replicas",), MSG_STS_REPLICAS)
        clientapp = get(pool, "images", "superexecClientApp")
        if isolation == "process" and not clientapp:
            yield problem(at + ("images", "superexecClientApp"), MSG_CLIENTAPP_REQUIRED)
        if isolation == "subprocess" and clientapp:
            yield problem(at + ("images", "superexecClientApp"), MSG_CLIENTAPP_EMPTY)
        if get(pool, "gpu", "mountAll") is True and not get(pool, "gpu", "vendor"):
            yield problem(at + ("gpu", "vendor"), MSG_GPU_VENDOR)
    superexec = get(raw, "superlink", "superexecImage")
    if raw.get("role") == "site":
        # A site runs no SuperLink, so no ServerApp SuperExec; its superlink.* keys are
        # refused by the role rules (rules/sites.py), once.
        return
    if isolation == "process" and not superexec:
        yield problem(("superlink", "superexecImage"), MSG_SUPEREXEC_REQUIRED)
    if isolation == "subprocess" and superexec:
        yield problem(("superlink", "superexecImage"), MSG_SUPEREXEC_EMPTY)


def names(raw: Raw, stack: str, mode: str, pools: Pools) -> Iterator[Problem]:
    name = effective_name(raw, stack)
    name_ok = isinstance(name, str) and bool(DNS1035.match(name))
    if not name_ok:
        where = "name" if "name" in raw else f"stack name '{stack}' (the default for name)"
        yield problem(
            ("name",), f"{where} must be a DNS label: lowercase letters, digits and '-', starting with a letter"
        )
    namespace = raw.get("namespace", DEFAULTS.namespace)
    if isinstance(namespace, str) and not (DNS1123.match(namespace) and len(namespace) <= DNS_LABEL_MAX):
        yield problem(("namespace",), "must be a DNS label of at most 63 characters")

    names = Names(name if name_ok else "x")
    fixed = []
    superlink_here = runs_superlink(raw.get("role"))  # a site creates none of the SuperLink's objects
    if superlink_here:
        fixed.append((names.superlink, STATEFULSET_NAME_MAX, "StatefulSet"))
    if superlink_here and get(raw, "nodeAuth", "enabled") is True:  # the registration Job, named after its keys
        fixed.append((f"{names.node_registration}-{'0' * REGISTRATION_DIGEST_LENGTH}", DNS_LABEL_MAX, "Job"))
    distributed = superexecs_of(raw).distributed
    if superlink_here and distributed:  # objects that exist only then
        fixed += [
            (names.superlink_appio_service, DNS_LABEL_MAX, "Service"),
            (names.superexec_serverapp, DNS_LABEL_MAX, "Deployment"),
        ]
    if name_ok:
        for obj, limit, kind in fixed:
            if len(obj) > limit:
                yield problem(("name",), _too_long(obj, limit, kind))

    seen: dict[str, int] = {}
    for i, pool in pools:
        at = ("supernodes", "pools", i, "name")
        pname = pool.get("name")
        if not isinstance(pname, str):
            continue
        if not DNS1123.match(pname):
            yield problem(at, f"'{pname}': pool names must be DNS labels: lowercase letters, digits and '-'")
            continue
        if pname in seen:
            yield problem(at, f"duplicate pool name '{pname}' (also supernodes.pools[{seen[pname]}])")
        seen.setdefault(pname, i)
        if pname == SERVERAPP_ROLE and distributed:
            # The pool's SuperExec and task-pod objects would take the ServerApp SuperExec's names.
            yield problem(
                at,
                f"pool name '{pname}' is taken by the ServerApp SuperExec when superexecPlacement "
                "is distributed; choose another name",
            )
        if name_ok:
            limit, kind = (
                (STATEFULSET_NAME_MAX, "StatefulSet") if mode == "StatefulSet" else (DNS_LABEL_MAX, "DaemonSet")
            )
            objs = [names.pool(pname)] + ([names.pool_superexec(pname)] if distributed else [])
            for obj in objs:
                if len(obj) > limit:
                    yield problem(at, _too_long(obj, limit, kind))


def _too_long(obj: str, limit: int, kind: str) -> str:
    why = " (Kubernetes adds a revision hash to it)" if kind == "StatefulSet" else ""
    return f"object name '{obj}' has {len(obj)} characters; a {kind} name may have at most {limit}{why}"


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
        if not KEY_RE.match(str(key)):
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
        if isinstance(value, str) and not (PERCENT.match(value) and int(value[:-1]) <= 100):
            yield problem(at + (key,), f"'{value}' must be a count or a percentage from 0% to 100%")
        if isinstance(value, int) and not isinstance(value, bool) and value < 0:
            yield problem(at + (key,), "must not be negative")
