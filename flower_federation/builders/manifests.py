"""The whole federation rendered once: every object, grouped per cluster, each with the
component that owns (registers) it.

The builders (builders/__init__.py lists them) each build their objects once; what
depends on several of them is derived here from what they built (the namespace's Pod
Security level from the rendered pod templates), never by building again. The result is
plain data: Pulumi Outputs (generated certificates, keys, checksums) are added by the
shell when it registers an object.

`render` also checks what must hold of any render before anything is registered: one
object per (apiVersion, kind, namespace, name) and cluster; every selector selects the
pods it is meant to; every Secret or ConfigMap a pod mounts is rendered or named by the
config as the user's own (InvariantError: a bug); and every object fits the API server's
size and length limits (builders/limits.py; TooLarge: config problems naming the setting that breaks one).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, NamedTuple, Optional

from flower_federation.builders import (
    access,
    appio,
    gateway_tls,
    limits,
    network,
    network_links,
    node_auth,
    registration,
    site_alerts,
    superlink,
    supernodes,
    trust,
)
from flower_federation.config.errors import ConfigError, Problem
from flower_federation.kube import pod_security
from flower_federation.kube.naming import SERVERAPP_ROLE
from flower_federation.kube.objects import WORKLOAD_KINDS, Manifest, ObjectKey, ObjectMeta, PodTemplate, pod_template_of
from flower_federation.plan import FederationPlan


class Owner(NamedTuple):
    """The component that registers an object: `federation` (namespace, shared RBAC),
    `tls`, `superlink`, or a pool's `pool` / `node-keys` component; `appio` (the
    SuperLink's, or a pool's) the SuperExec hop's certificate and auth secret."""

    component: str
    pool: Optional[str] = None

    def __str__(self) -> str:
        return self.component if self.pool is None else f"{self.component}/{self.pool}"


FEDERATION = Owner("federation")
TLS = Owner("tls")
SUPERLINK = Owner("superlink")
REGISTRATION = Owner("node-registration")


def pool_owner(pool: str) -> Owner:
    return Owner("pool", pool)


def node_keys_owner(pool: str) -> Owner:
    return Owner("node-keys", pool)


APPIO = Owner("appio")


def appio_owner(pool: str) -> Owner:
    return Owner("appio", pool)


@dataclass(frozen=True)
class Entry:
    owner: Owner
    manifest: Manifest


@dataclass(frozen=True)
class ClusterManifests:
    """One cluster's objects in registration order."""

    name: str
    entries: tuple[Entry, ...]

    def objects(self) -> list[Manifest]:
        return [e.manifest for e in self.entries]

    def owned_by(self, owner: Owner) -> list[Manifest]:
        return [e.manifest for e in self.entries if e.owner == owner]


@dataclass(frozen=True)
class Manifests:
    clusters: tuple[ClusterManifests, ...]

    def objects(self) -> list[Manifest]:
        """Every object of every cluster."""
        return [m for c in self.clusters for m in c.objects()]

    def owned_by(self, owner: Owner) -> list[Manifest]:
        return [m for c in self.clusters for m in c.owned_by(owner)]

    def pod_templates(self) -> list[PodTemplate]:
        return [t for m in self.objects() if (t := pod_template_of(m)) is not None]


class InvariantError(Exception):
    """A render broke an invariant: a bug in flower-federation (or a config rule that is
    missing), never something to register."""

    def __init__(self, broken: list[str]):
        self.broken = broken
        super().__init__(
            "flower-federation rendered an inconsistent set of objects (please report this):\n"
            + "\n".join(f"  - {b}" for b in broken)
        )


class TooLarge(InvariantError):
    """Objects past the API server's limits (builders/limits.py): config problems, each naming the setting
    that breaks a limit, reported as a config error (not a bug). An InvariantError, so that whatever stops a
    render on a broken invariant (the shell's `_render`: pulumi.RunError, nothing registered) stops it on
    this too."""

    def __init__(self, problems: list[Problem]):
        error = ConfigError(problems)
        self.problems = error.problems
        self.broken = [str(p) for p in self.problems]
        Exception.__init__(self, str(error))


def render(plan: FederationPlan) -> Manifests:
    """Every object, once, grouped by the cluster it goes to: the SuperLink's cluster
    first (the SuperLink, its TLS, registration), then each other cluster its pools run
    in; each cluster gets its own namespace, CA Secret, RBAC and NetworkPolicies."""
    superlink_side = superlink.objects(plan) if plan.runs_superlink else []
    registering = registration.objects(plan)
    pools = {p.name: supernodes.objects(plan, p) for p in plan.spec.supernodes.pools}
    policies = network.policies(plan)
    clusters = []
    too_big: list[Problem] = []
    for cluster in plan.clusters:
        entries: list[Entry] = []
        here = plan.runs_superlink and cluster == plan.superlink_cluster
        pools_here = plan.pools_in(cluster)
        own = [*superlink_side, *registering] if here else []
        own += [m for p in pools_here for m in pools[p.name]]
        if plan.spec.create_namespace:
            templates = [t for m in own if (t := pod_template_of(m)) is not None]
            entries.append(Entry(FEDERATION, namespace(plan, templates)))
        entries += [Entry(TLS, m) for m in _trust_objects(plan, here)]
        entries += [Entry(FEDERATION, m) for m in access.federation_objects(plan)]
        entries += [Entry(FEDERATION, m) for m in site_alerts.objects(plan, cluster)]
        if here:
            entries += [Entry(APPIO, m) for m in appio.superlink_objects(plan)]
            entries += [Entry(SUPERLINK, m) for m in superlink_side]
            entries += [Entry(SUPERLINK, m) for pool, m in policies if pool is None and not _registration(plan, m)]
            entries += [Entry(REGISTRATION, m) for m in registering]
            entries += [Entry(REGISTRATION, m) for pool, m in policies if pool is None and _registration(plan, m)]
        for pool in pools_here:
            if plan.node_auth:
                entries.append(Entry(node_keys_owner(pool.name), node_auth.key_secret(plan, pool)))
            entries += [Entry(appio_owner(pool.name), m) for m in appio.pool_objects(plan, pool)]
            entries += [Entry(pool_owner(pool.name), m) for m in pools[pool.name]]
            entries += [Entry(pool_owner(pool.name), m) for owner_pool, m in policies if owner_pool == pool.name]
        check_invariants(plan, [e.manifest for e in entries])
        too_big += limits.problems(plan, [(_section_of(e.owner), e.manifest) for e in entries])
        clusters.append(ClusterManifests(cluster, tuple(entries)))
    if too_big:  # config problems (the setting named), not a bug: every object checked first
        raise TooLarge(too_big)
    return Manifests(tuple(clusters))


def _section_of(owner: Owner) -> Optional[str]:
    """Which part of the config an object comes from, for naming the setting a limit's breach comes from."""
    if owner.pool is not None:
        return owner.pool
    return limits.SUPERLINK if owner in (SUPERLINK, APPIO) else None


def _registration(plan: FederationPlan, policy: Manifest) -> bool:
    return bool(policy["metadata"]["name"] == plan.names.node_registration)


def _trust_objects(plan: FederationPlan, superlink_here: bool) -> list[Manifest]:
    """The SuperLink's cluster (or a site's) gets every TLS object; another cluster of
    a federation only the CA Secret its pools trust (unless the user provides it)."""
    if plan.trust is None:
        return []
    if superlink_here or not plan.trust.serves:
        return trust.objects(plan) + gateway_tls.objects(plan)
    return [trust.trust_secret(plan)] if plan.trust.creates_ca_secret else []


def namespace(plan: FederationPlan, templates: list[PodTemplate]) -> Manifest:
    """Enforces the strictest Pod Security level every pod of the federation meets:
    `restricted` unless something (AMD mountAll, a weakened securityContext) needs more."""
    level = pod_security.namespace_level(templates)
    labels = {
        **plan.spec.labels,
        "app.kubernetes.io/managed-by": "pulumi",
        "pod-security.kubernetes.io/enforce": level,
        "pod-security.kubernetes.io/warn": level,
    }
    meta: ObjectMeta = {"name": plan.namespace, "labels": labels}
    if plan.spec.annotations:
        meta["annotations"] = dict(plan.spec.annotations)
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": meta}


# --- invariants ------------------------------------------------------------------------


def check_invariants(plan: FederationPlan, objects: list[Manifest]) -> None:
    broken = _duplicates(objects) + _selectors(plan, objects) + _mounted_sources(plan, objects)
    if broken:
        raise InvariantError(broken)


def _duplicates(objects: list[Manifest]) -> list[str]:
    counts = Counter(ObjectKey.of(m) for m in objects)
    return [f"{key} is rendered {n} times" for key, n in sorted(counts.items()) if n > 1]


def _matches(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return all(labels.get(k) == v for k, v in selector.items())


class _StatefulPods(NamedTuple):
    """A StatefulSet's pods: its template's labels, and the pod-name label the StatefulSet controller adds to each
    (`NAME-0` ... `NAME-(replicas-1)`, what pair policies select by). Matched without a labels dict per pod: a
    selector's work must not grow with `replicas` (issue 36: 10,000 replicas a pool made 160,000 dicts)."""

    labels: dict[str, str]
    name: str
    replicas: int

    def selected_by(self, selector: dict[str, str]) -> bool:
        if network_links.POD_NAME_LABEL not in selector:
            return False  # the template's labels, which every StatefulSet's entry in `pod_labels` covers
        rest = {k: v for k, v in selector.items() if k != network_links.POD_NAME_LABEL}
        if not _matches(rest, self.labels):
            return False
        prefix, _, ordinal = selector[network_links.POD_NAME_LABEL].rpartition("-")
        # The controller's ordinal: a decimal without leading zeros (`NAME-0`, `NAME-12`), below `replicas`.
        canonical = ordinal.isdecimal() and ordinal.isascii() and str(int(ordinal)) == ordinal
        return prefix == self.name and canonical and int(ordinal) < self.replicas


def _selectors(plan: FederationPlan, objects: list[Manifest]) -> list[str]:
    pod_labels = [t["metadata"]["labels"] for m in objects if (t := pod_template_of(m)) is not None]
    stateful = [
        _StatefulPods(
            m["spec"]["template"]["metadata"]["labels"], m["metadata"]["name"], m["spec"].get("replicas") or 0
        )
        for m in objects
        if m["kind"] == "StatefulSet"
    ]
    if plan.kubernetes_executor:  # pods the executor starts carry these
        roles = [SERVERAPP_ROLE] + [p.name for p in plan.spec.supernodes.pools]
        pod_labels += [network_links.task_labels(plan, role) for role in roles]
    broken = []
    for m in objects:
        selector = _selector_of(m)
        if selector is None:
            continue
        template = pod_template_of(m)
        if template is not None:
            if not _matches(selector, template["metadata"]["labels"]):
                broken.append(f"{ObjectKey.of(m)}: its selector {selector} does not select its own pods")
        elif not selector or not (
            any(_matches(selector, labels) for labels in pod_labels) or any(p.selected_by(selector) for p in stateful)
        ):
            broken.append(f"{ObjectKey.of(m)}: its selector {selector} selects none of the federation's pods")
    return broken


def _selector_of(m: Manifest) -> Optional[dict[str, str]]:
    spec: dict[str, Any] = m.get("spec", {})
    if m["kind"] == "Service":
        return dict(spec.get("selector", {}))
    if m["kind"] == "NetworkPolicy":
        return dict(spec["podSelector"].get("matchLabels", {}))
    if m["kind"] == "PodDisruptionBudget" or m["kind"] in WORKLOAD_KINDS:
        return dict(spec.get("selector", {}).get("matchLabels", {}))
    return None


def _mounted_sources(plan: FederationPlan, objects: list[Manifest]) -> list[str]:
    rendered = {("Secret", m["metadata"]["name"]) for m in objects if m["kind"] == "Secret"}
    rendered |= {("ConfigMap", m["metadata"]["name"]) for m in objects if m["kind"] == "ConfigMap"}
    # cert-manager writes the Secret a Certificate names.
    rendered |= {("Secret", m["spec"]["secretName"]) for m in objects if m["kind"] == "Certificate"}
    external = {("Secret", name) for name in (plan.trust.external_secrets if plan.trust else ())}
    runtime = plan.runtime_trust
    if runtime is not None and runtime.source == "existingSecret":  # the user's, per pool
        external |= {("Secret", name) for _, name in runtime.pool_secrets}
    external |= set(volume_sources(_config_volumes(plan)))
    broken = []
    for m in objects:
        template = pod_template_of(m)
        if template is None:
            continue
        for kind, name in volume_sources(template["spec"].get("volumes", [])):
            if (kind, name) not in rendered and (kind, name) not in external:
                broken.append(f"{ObjectKey.of(m)} mounts {kind} {name}, which is neither rendered nor named in config")
    return broken


def _config_volumes(plan: FederationPlan) -> list[dict[str, Any]]:
    """Volumes the user wrote into config: whatever they mount is theirs to provide."""
    sl = plan.spec.superlink
    volumes = list(sl.volumes) + list(((sl.pod_template or {}).get("spec") or {}).get("volumes", []))
    for pool in plan.spec.supernodes.pools:
        volumes += list(pool.volumes) + list(((pool.pod_template or {}).get("spec") or {}).get("volumes", []))
    return volumes


def volume_sources(volumes: Iterable[dict[str, Any]]) -> Iterable[tuple[str, str]]:
    """(kind, name) of every Secret and ConfigMap the volumes read."""
    for v in volumes:
        if "secret" in v:
            yield "Secret", v["secret"].get("secretName", "")
        if "configMap" in v:
            yield "ConfigMap", v["configMap"].get("name", "")
        for source in (v.get("projected") or {}).get("sources", []):
            if "secret" in source:
                yield "Secret", source["secret"].get("name", "")
            if "configMap" in source:
                yield "ConfigMap", source["configMap"].get("name", "")
