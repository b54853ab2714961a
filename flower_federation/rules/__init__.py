"""Rules that span fields: the flower-operator CRD's CEL rules (messages verbatim),
Flower versions, object names, ports, nodeConfig, security settings and Kubernetes
fragments. They read the raw config, tolerating wrong types (pydantic reports those), so
that one run lists every problem at once.

`check` also resolves the Flower version, once: the plan takes the dialect from here."""

from __future__ import annotations

from collections.abc import Generator
from typing import Optional

from flower_federation.config.derived import DEFAULTS
from flower_federation.config.errors import Problem, problem
from flower_federation.flower.dialects import Dialect
from flower_federation.kube.quantity import parse_quantity
from flower_federation.rules.cel import cel_rules
from flower_federation.rules.exported import cli, service_annotations
from flower_federation.rules.fleet_proxy import fleet_proxy_bounds
from flower_federation.rules.fragments import fragments
from flower_federation.rules.images import images
from flower_federation.rules.keys import supplied_key_problems
from flower_federation.rules.label_maps import label_maps
from flower_federation.rules.monitoring import monitoring
from flower_federation.rules.names import names
from flower_federation.rules.pools import disruption_budget, gpu, node_config, placement
from flower_federation.rules.raw import BACKUP_NAME, Raw, as_list, get, pools_of
from flower_federation.rules.references import references
from flower_federation.rules.resources import resources
from flower_federation.rules.security import executor, network_policies, node_auth, probes, runtime_api_secrets, tls
from flower_federation.rules.sites import role_of, roles
from flower_federation.rules.superexec import superexecs
from flower_federation.rules.supernode_api import supernode_apis
from flower_federation.rules.versions import ports, version_gates, versions
from flower_federation.rules.workloads import workloads

__all__ = ["check", "supplied_key_problems"]


def check(raw: Raw, stack: str) -> tuple[list[Problem], Optional[Dialect]]:
    """Every cross-field problem of `raw`, and the dialect of its Flower version (None
    when the version is unusable)."""
    found: list[Problem] = []
    run = _check(raw, stack)
    while True:
        try:
            found.append(next(run))
        except StopIteration as done:
            return found, done.value


def _check(raw: Raw, stack: str) -> Generator[Problem, None, Optional[Dialect]]:
    mode = raw.get("mode", DEFAULTS.mode)
    isolation = raw.get("isolationMode", DEFAULTS.isolation_mode)
    pools = pools_of(raw)

    yield from cel_rules(raw, mode, isolation, pools)
    yield from names(raw, stack, mode, pools)
    dialect = yield from versions(raw, pools)
    if dialect is not None:
        yield from ports(raw, dialect)
        yield from version_gates(raw, dialect)
    size = get(raw, "superlink", "persistence", "size")
    amount = parse_quantity(size) if isinstance(size, str) else None
    if isinstance(size, str) and amount is None:
        yield problem(("superlink", "persistence", "size"), f"'{size}' is not a Kubernetes quantity (e.g. 1Gi)")
    elif amount is not None and amount <= 0:
        yield problem(("superlink", "persistence", "size"), f"'{size}' must be more than 0 (e.g. 1Gi)")
    restore = get(raw, "superlink", "persistence", "restore")
    if isinstance(restore, str) and not BACKUP_NAME.fullmatch(restore):
        yield problem(
            ("superlink", "persistence", "restore"),
            f"'{restore}' is not a backup's file name (e.g. 1.41.0-d90a2f91f23c-20261125T101500Z.db, as state-guard "
            "lists them in /var/lib/flower/backups)",
        )
    if restore is not None and get(raw, "superlink", "persistence", "enabled") is False:
        yield problem(("superlink", "persistence", "restore"), "restores a state volume: needs persistence.enabled")
    yield from placement(raw, mode, isolation)
    for i, pool in pools:
        if mode == "DaemonSet" and as_list(pool.get("volumeClaimTemplates")):
            yield problem(
                ("supernodes", "pools", i, "volumeClaimTemplates"),
                "volumeClaimTemplates need mode=StatefulSet (a DaemonSet has no per-pod claims)",
            )
        yield from node_config(pool, i, mode)
        yield from gpu(pool, i)
        yield from disruption_budget(pool, i)
    yield from fragments(raw, pools, stack)
    yield from resources(raw, pools, isolation)
    yield from workloads(raw, pools, stack)
    yield from label_maps(raw)
    yield from images(raw, pools)
    yield from references(raw, pools)
    yield from cli(raw)
    yield from service_annotations(raw)
    yield from fleet_proxy_bounds(raw)
    yield from tls(raw)
    yield from runtime_api_secrets(raw, stack, pools, dialect)
    yield from node_auth(raw, mode, pools)
    yield from network_policies(raw, pools)
    yield from probes(raw, pools)
    yield from executor(raw, isolation, stack)
    yield from superexecs(raw, pools, isolation, stack)
    yield from supernode_apis(raw, pools, isolation, dialect)
    yield from roles(raw, pools, dialect)
    yield from monitoring(raw, role_of(raw))
    return dialect
