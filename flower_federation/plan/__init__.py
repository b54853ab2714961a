"""From raw stack config to a validated, resolved federation plan (or a ConfigError
listing every problem). Nothing here touches Pulumi.

The plan is where every later step looks things up: the Flower version and its dialect,
ports, names, labels, images, probe settings, TLS trust (tls_sources.py) and node keys are resolved here
once, so builders never re-read raw config or restate a default (defaults live in the
config model, `config/`)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Optional

import pydantic

from flower_federation import rules
from flower_federation.config import Federation, Image, ImageRef, Pool, Probes
from flower_federation.config.derived import (
    Exposure,
    SuperExecLayout,
    cluster_key,
    federation_name,
    runs_superlink,
    superexec_layout,
    superlink_exposure,
)
from flower_federation.config.errors import ConfigError, Problem, problem_order
from flower_federation.config.images import reference
from flower_federation.config.pydantic_errors import pydantic_problems
from flower_federation.flower.dialects import HEALTH_PORT, SUPERNODE_APPIO_PORT, Dialect, Ports
from flower_federation.flower.layout import CA_FILE, RUNTIME_CA_FILE
from flower_federation.flower.versions import APPIO_PROTECTION_SINCE, REGISTRATION_JOB_SINCE, FlowerVersion
from flower_federation.kube.naming import Names, common_labels
from flower_federation.kube.objects import ObjectMeta
from flower_federation.plan import probes
from flower_federation.plan.sites import (
    Endpoint,
    RemoteSuperLink,
    StackOutputs,
    external_endpoint,
    remote_superlink,
    site_keys,
    site_versions,
)
from flower_federation.plan.tls_sources import RuntimeTrust, Trust, resolve_runtime_trust, resolve_trust


@dataclass(frozen=True)
class FederationPlan:
    spec: Federation
    name: str
    version: FlowerVersion
    dialect: Dialect
    ports: Ports
    trust: Optional[Trust]
    names: Names
    superlink_probes: Probes
    supernode_probes: Probes
    # nodeAuth.keySource=config: {pool: {slot: OpenSSH private key}} from secret config.
    node_auth_keys: Optional[dict[str, dict[str, str]]] = None
    # Role site: the hub's SuperLink. Hub/federation: where it is dialled from outside.
    remote: Optional[RemoteSuperLink] = None
    external: Optional[Endpoint] = None
    # Public keys of other organisations' SuperNodes to admit, by site name (inline or
    # resolved from the site stacks' outputs).
    site_keys: tuple[tuple[str, tuple[str, ...]], ...] = ()
    # (site, the Flower version its stack reports), for sites read with fromStack.
    site_versions: tuple[tuple[str, str], ...] = ()
    runtime_trust: Optional[RuntimeTrust] = None

    @property
    def role(self) -> str:
        return self.spec.role

    @property
    def runs_superlink(self) -> bool:
        return runs_superlink(self.role)

    @property
    def superlink_cluster(self) -> str:
        """ "" is the stack's ambient cluster."""
        return cluster_key(self.spec.superlink.cluster)

    def pool_cluster(self, pool: Pool) -> str:
        return cluster_key(pool.cluster)

    @property
    def home_cluster(self) -> str:
        """Where the stack's shared objects live (TLS trust, registration): the SuperLink's
        cluster; a site's ambient cluster if a pool runs there, else its first named one.
        Never the order of pools, so reordering them moves nothing."""
        if self.runs_superlink:
            return self.superlink_cluster
        pool_clusters = {self.pool_cluster(p) for p in self.spec.supernodes.pools}
        return "" if "" in pool_clusters else min(pool_clusters, default="")

    @property
    def clusters(self) -> list[str]:
        """Every cluster this stack deploys into: the home cluster first, then the others by name."""
        found = {self.pool_cluster(p) for p in self.spec.supernodes.pools} - {self.home_cluster}
        return [self.home_cluster, *sorted(found)]

    def pools_in(self, cluster: str) -> list[Pool]:
        return [p for p in self.spec.supernodes.pools if self.pool_cluster(p) == cluster]

    def dials_from_outside(self, pool: Pool) -> bool:
        """The pool reaches the SuperLink through its external address (a site's pools, or
        a pool in another cluster than the SuperLink's)."""
        return not self.runs_superlink or self.pool_cluster(pool) != self.superlink_cluster

    @property
    def exposure(self) -> Exposure:
        """How the SuperLink is reached from outside its cluster (config/derived.py)."""
        return exposure(self.spec)

    @property
    def exposed(self) -> bool:
        """The SuperLink is reachable from outside its cluster: something the config names dials it from there,
        or its Service is a LoadBalancer or NodePort."""
        return self.exposure.reachable

    @property
    def fleet_proxy(self) -> bool:
        """HTTP era: the Fleet-only proxy serves the Fleet port, and the SuperLink its own API on `ports.control`
        (see fleet_proxy.py). Rules make an exposed SuperLink have it unless `exposeControlApi`."""
        return fleet_proxy_on(self.spec, self.exposed, self.grpc_era)

    @property
    def control_apart(self) -> bool:
        """Control has ClusterIP Service `N-superlink-control`, off the Service that may leave the cluster: behind the
        Fleet-only proxy, and in the gRPC era (Fleet, Control: two ports) when exposed, unless `exposeControlApi`."""
        return self.fleet_proxy or (self.grpc_era and self.exposed and not self.spec.superlink.expose_control_api)

    @property
    def registers_nodes(self) -> bool:
        """`pulumi up` registers the trusted node keys with the SuperLink (a Job)."""
        return self.node_auth and self.runs_superlink and self.version >= REGISTRATION_JOB_SINCE

    def pool_fleet_endpoint(self, pool: Pool) -> Endpoint:
        if self.remote is not None:
            return self.remote.endpoint
        if self.dials_from_outside(pool):
            assert self.external is not None, "rules require an external address for pools in other clusters"
            return self.external
        return Endpoint(self.superlink_host, self.ports.fleet)

    @property
    def namespace(self) -> str:
        return self.spec.namespace

    @property
    def stateful(self) -> bool:
        return self.spec.mode == "StatefulSet"

    @property
    def node_auth(self) -> bool:
        return self.spec.node_auth.enabled

    @property
    def superexecs(self) -> SuperExecLayout:
        return superexec_layout(self.spec.isolation_mode, self.spec.superexec_placement)

    @property
    def process_isolation(self) -> bool:
        return self.superexecs.process_isolation

    @property
    def distributed(self) -> bool:
        return self.superexecs.distributed

    @property
    def sidecar_superexec(self) -> bool:
        return self.superexecs.sidecar

    @property
    def superexec_auth(self) -> bool:
        """SuperExecs sign their requests with a shared secret the API they dial checks
        (one per pool, one for the SuperLink): Flower 1.40+, process isolation."""
        return self.process_isolation and self.version >= APPIO_PROTECTION_SINCE

    @property
    def runtime_ca_file(self) -> Optional[str]:
        """The CA file a ClientApp SuperExec verifies its SuperNode's Runtime API with
        (None: that API is plaintext): the federation's CA, or a site's own CA for that hop."""
        return None if self.runtime_trust is None else RUNTIME_CA_FILE if self.runtime_trust.own_ca else CA_FILE

    @property
    def kubernetes_executor(self) -> bool:
        # Rules require distributed placement: task pods dial the SuperExec's API address,
        # which a sidecar has only on the pod's loopback.
        return self.distributed and self.spec.executor.type == "kubernetes"

    @property
    def grpc_era(self) -> bool:
        """The gRPC era has a separate plaintext ServerAppIo port; the HTTP era serves the
        Runtime API on the one TLS port."""
        return self.ports.serverappio is not None

    @property
    def client_ca_file(self) -> Optional[str]:
        """The CA file clients of the SuperLink verify it with (None: TLS off)."""
        return CA_FILE if self.trust else None

    def service_host(self, service: str) -> str:
        return f"{service}.{self.namespace}.svc.{self.spec.cluster_domain}"

    @property
    def superlink_host(self) -> str:
        return self.service_host(self.names.superlink)

    @property
    def fleet_address(self) -> str:
        return f"{self.superlink_host}:{self.ports.fleet}"

    @property
    def control_host(self) -> str:
        """The in-cluster name of the SuperLink's Control API (behind the proxy: its own API port)."""
        return self.service_host(self.names.superlink_control) if self.control_apart else self.superlink_host

    @property
    def control_address(self) -> str:
        return f"{self.control_host}:{self.ports.control}"

    def default_image(self, repository: str) -> str:
        return f"flwr/{repository}:{self.version}"

    def pull_policy(self, image: Optional[Image]) -> str:
        """The `imagePullPolicy` of a container running `image` (None: a default image)."""
        own = image.pull_policy if isinstance(image, ImageRef) else None
        return own or self.spec.image_pull_policy

    @property
    def superlink_image(self) -> str:
        image = self.spec.superlink.image
        return reference(image) if image else self.default_image("superlink")

    def supernode_image_config(self, pool: Pool) -> Optional[Image]:
        """The configured image a pool's SuperNodes run (None: the default)."""
        return pool.images.supernode or self.spec.supernodes.image

    def supernode_image(self, pool: Pool) -> str:
        image = self.supernode_image_config(pool)
        return reference(image) if image else self.default_image("supernode")

    @property
    def serverapp_superexec_image(self) -> str:
        """Process isolation only (the operator's rule makes it required there)."""
        image = self.spec.superlink.superexec_image
        assert image, "rules require superlink.superexecImage with isolationMode process"
        return reference(image)

    def clientapp_superexec_image(self, pool: Pool) -> str:
        """Process isolation only (the operator's rule makes it required there)."""
        image = pool.images.superexec_client_app
        assert image, "rules require images.superexecClientApp with isolationMode process"
        return reference(image)

    def supernode_appio_port(self, pool: Pool) -> int:
        return pool.container_ports.client_app_io or SUPERNODE_APPIO_PORT

    def supernode_health_port(self, pool: Pool) -> int:
        return pool.container_ports.health or HEALTH_PORT

    @property
    def serverapp_superexec_probes(self) -> Probes:
        sl = self.spec.superlink
        return probes.inherit(self.spec.probes, sl.probes, sl.superexec.probes)

    def clientapp_superexec_probes(self, pool: Pool) -> Probes:
        return probes.inherit(self.spec.probes, self.spec.supernodes.probes, pool.superexec.probes)

    def image_pull_secrets(self, own: Optional[list[str]]) -> list[dict[str, str]]:
        """A pod's `imagePullSecrets`: the component's list if it sets one, else the federation's."""
        return [{"name": n} for n in (own if own is not None else self.spec.image_pull_secrets)]

    def labels(self, component: str, pool: Optional[str] = None) -> dict[str, str]:
        """Every label of one of our objects (selector labels plus identity and the
        user's extra labels)."""
        return common_labels(self.name, component, str(self.version), pool, self.spec.labels)

    def meta(
        self,
        name: str,
        component: str,
        pool: Optional[str] = None,
        annotations: Optional[dict[str, str]] = None,
        extra_labels: Optional[dict[str, str]] = None,
        extra_annotations: Optional[dict[str, str]] = None,
    ) -> ObjectMeta:
        """Metadata of one of our objects: `annotations` are ours; `extra_labels` and `extra_annotations` the
        component's own from config, over the top-level `annotations`; ours win on a clash."""
        meta: ObjectMeta = {
            "name": name,
            "namespace": self.namespace,
            "labels": {**(extra_labels or {}), **self.labels(component, pool)},
        }
        merged = {**self.spec.annotations, **(extra_annotations or {}), **(annotations or {})}
        if merged:
            meta["annotations"] = merged
        return meta


def exposure(spec: Federation) -> Exposure:
    """How the SuperLink is reached from outside its cluster, as the rules read it (config/derived.py)."""
    sl = spec.superlink
    clusters = [p.cluster for p in spec.supernodes.pools]
    return superlink_exposure(spec.role, sl.service.type, sl.ingress, sl.gateway, sl.cluster, clusters)


def fleet_proxy_on(spec: Federation, exposed: bool, grpc_era: bool) -> bool:
    """Whether the Fleet-only proxy runs (HTTP era only): as configured, else whenever the SuperLink is reachable
    from outside its cluster (`exposed`: a hub, an ingress, a gateway, pools in other clusters, a LoadBalancer or
    NodePort Service) and the Control API is not."""
    if grpc_era or spec.role == "site":
        return False
    enabled = spec.superlink.fleet_proxy.enabled
    if enabled is not None:
        return enabled
    return exposed and not spec.superlink.expose_control_api


class _Encrypted:
    def __repr__(self) -> str:
        return "ENCRYPTED"


# A secret config value only Pulumi can decrypt (`secure:` in a stack file read offline): present, not checkable.
ENCRYPTED: Any = _Encrypted()


def load_plan(
    raw: Any, stack: str, node_auth_keys: Any = None, stack_outputs: Optional[StackOutputs] = None
) -> FederationPlan:
    """Validate `raw` (the `federation` config value) and resolve it, or raise
    ConfigError with every problem found. `node_auth_keys` is the `nodeAuthKeys` secret
    config value (only read when nodeAuth.keySource is config; ENCRYPTED: present, not checked). `stack_outputs`
    holds the outputs of every stack the config names with `fromStack` (see `referenced_stacks`)."""
    if raw is None:
        raise ConfigError([Problem("federation", "missing: set the flower-federation:federation config key")])
    if not isinstance(raw, dict):
        raise ConfigError([Problem("federation", f"must be a mapping, not {type(raw).__name__}")])

    problems: list[Problem] = []
    spec: Optional[Federation] = None
    try:
        spec = Federation.model_validate(raw, by_alias=True, by_name=False)  # a stack file: camelCase only
    except pydantic.ValidationError as err:
        problems += pydantic_problems(err)
    found, dialect = rules.check(raw, stack)
    problems += found
    uses_supplied_keys = spec is not None and spec.node_auth.enabled and spec.node_auth.key_source == "config"
    if node_auth_keys is ENCRYPTED:  # `validate` of a stack file whose keys only Pulumi can decrypt
        uses_supplied_keys = False
    if spec is not None and uses_supplied_keys and not problems:
        problems += rules.supplied_key_problems(spec, node_auth_keys)
    if problems:
        raise ConfigError(sorted(set(problems), key=problem_order))
    assert spec is not None and dialect is not None

    name = federation_name(spec.name, stack)
    names = Names(name)
    ports = dialect.resolve_ports(spec.superlink.service.ports.model_dump(by_alias=True))
    if fleet_proxy_on(spec, exposure(spec).reachable, ports.serverappio is not None):
        # The proxy takes the Fleet port; the SuperLink serves its whole API on its own port.
        ports = dataclasses.replace(ports, control=spec.superlink.control_service.port)
    remote_problems, remote = remote_superlink(spec, ports.fleet, stack_outputs, dialect.version)
    keys = None
    if uses_supplied_keys:
        keys = {pool: {str(slot): text for slot, text in slots.items()} for pool, slots in node_auth_keys.items()}
    key_problems, admitted = site_keys(spec, stack_outputs, keys)
    if remote_problems or key_problems:
        raise ConfigError(sorted(set(remote_problems + key_problems), key=problem_order))
    trust = None if spec.insecure else resolve_trust(spec, names)
    return FederationPlan(
        spec=spec,
        name=name,
        version=dialect.version,
        dialect=dialect,
        ports=ports,
        trust=trust,
        names=names,
        superlink_probes=probes.inherit(spec.probes, spec.superlink.probes),
        supernode_probes=probes.inherit(spec.probes, spec.supernodes.probes),
        node_auth_keys=keys,
        remote=remote,
        external=external_endpoint(spec, ports.fleet) if spec.role != "site" else None,
        site_keys=admitted,
        site_versions=site_versions(spec, stack_outputs),
        runtime_trust=resolve_runtime_trust(spec, names, trust, dialect.version),
    )


__all__ = ["ConfigError", "Endpoint", "FederationPlan", "RemoteSuperLink", "RuntimeTrust", "Trust", "load_plan"]
