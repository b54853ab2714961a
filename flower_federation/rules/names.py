"""Object names: the federation's and the namespace's shape, every pool's name, and each object name within its
kind's limit (a StatefulSet's 52, a label's 63), for the objects this stack creates."""

from __future__ import annotations

from collections.abc import Iterator

from flower_federation.config.derived import DEFAULTS, runs_superlink
from flower_federation.config.errors import Problem, problem
from flower_federation.kube.naming import (
    DNS1035_LABEL,
    DNS1123_LABEL,
    DNS1123_SUBDOMAIN,
    DNS_LABEL_MAX,
    DNS_SUBDOMAIN_MAX,
    REGISTRATION_DIGEST_LENGTH,
    SERVERAPP_ROLE,
    STATEFULSET_NAME_MAX,
    Names,
)
from flower_federation.rules.raw import Pools, Raw, effective_name, get, superexecs_of


def names(raw: Raw, stack: str, mode: str, pools: Pools) -> Iterator[Problem]:
    name = effective_name(raw, stack)
    name_ok = isinstance(name, str) and bool(DNS1035_LABEL.fullmatch(name)) and len(name) <= DNS_LABEL_MAX
    if not name_ok:
        where = f"name {name!r}" if "name" in raw else f"stack name '{stack}' (the default for name)"
        yield problem(
            ("name",),
            f"{where} must be a DNS label: up to 63 lowercase letters, digits and '-', starting with a letter",
        )
    namespace = raw.get("namespace", DEFAULTS.namespace)
    if isinstance(namespace, str) and not (DNS1123_LABEL.fullmatch(namespace) and len(namespace) <= DNS_LABEL_MAX):
        yield problem(("namespace",), f"{namespace!r} must be a DNS label of at most 63 characters")
    domain = raw.get("clusterDomain", DEFAULTS.cluster_domain)
    # It ends every in-cluster name: certificate SANs, the Fleet-only proxy's `proxy_ssl_name`, SuperNodes' addresses.
    if isinstance(domain, str) and not (DNS1123_SUBDOMAIN.fullmatch(domain) and len(domain) <= DNS_SUBDOMAIN_MAX):
        yield problem(
            ("clusterDomain",),
            f"{domain!r} is not a DNS domain: lowercase labels of letters, digits and '-', joined by '.' "
            "(e.g. cluster.local)",
        )

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
        if not DNS1123_LABEL.fullmatch(pname):
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
