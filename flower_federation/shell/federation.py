"""Federation: the public component. A Pulumi program, ours (program.py, from stack config)
or a user's own (`Federation(name, args, opts)` next to the cluster it creates), hands it the
federation's config; it plans and renders everything first (config problems and objects the
API server would refuse stop it there, before anything is registered), then registers every
object, cluster by cluster, by the component that owns it in the core's render.

The first cluster (the SuperLink's, or a site's first) gets the namespace, TLS trust,
shared RBAC, the SuperLink and node registration; every other cluster a ClusterComponent
(namespace, CA Secret, RBAC) with its own Kubernetes provider. Pools follow the cluster
they run in. Pods are created only after the Secrets they mount exist (TLS trust first),
and carry a checksum of the certificates and keys they mount, so new ones roll them
(rollout.py).

Providers the Pulumi way: `opts.provider` (or `opts.providers`) is the home cluster's,
inherited by every child; `cluster_providers` maps each named cluster (a key of `clusters`)
to its own. A named cluster without one gets a provider made from its `kubeconfig`/`context`
settings, a child named `<name>-cluster-<cluster>` (program.py's are `cluster-<cluster>`, at the
stack's root: see `_kubeconfig_provider`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any, Optional

import pulumi
import pulumi_kubernetes as k8s

from flower_federation.builders import manifests, monitoring
from flower_federation.builders.manifests import (
    APPIO,
    FEDERATION,
    REGISTRATION,
    SUPERLINK,
    TLS,
    Manifests,
    appio_owner,
    node_keys_owner,
    pool_owner,
)
from flower_federation.config import Federation as FederationArgs
from flower_federation.config.derived import cluster_label
from flower_federation.config.errors import ConfigError, Problem
from flower_federation.plan import FederationPlan, load_plan
from flower_federation.plan.outputs import stack_outputs, warnings
from flower_federation.plan.sites import referenced_stacks
from flower_federation.shell import stack_refs
from flower_federation.shell.appio import AppIoComponent
from flower_federation.shell.cluster import ClusterComponent
from flower_federation.shell.inputs import plain_config, plain_value
from flower_federation.shell.kubernetes import register
from flower_federation.shell.registration import RegistrationComponent
from flower_federation.shell.rollout import Rollout
from flower_federation.shell.runtime_ca import RuntimeCaComponent
from flower_federation.shell.superlink import SuperLinkComponent
from flower_federation.shell.supernode_pool import SuperNodePoolComponent
from flower_federation.shell.tls import TlsTrustComponent

TYPE = "flower-federation:index:Federation"
# The Kubernetes provider made for a named cluster from its kubeconfig is `cluster-<name>` (offline.py reads it back).
CLUSTER_PROVIDER_PREFIX = "cluster-"
NODE_KEYS_ROOT = "nodeAuthKeys"
CLUSTER_PROVIDERS_ROOT = "clusterProviders"


class Federation(pulumi.ComponentResource):
    """A Flower federation: a SuperLink and its SuperNode pools (`role: federation`), a hub that
    sites dial (`role: hub`), or a site's pools dialling a hub (`role: site`), in one or more
    clusters. `args` is the config model (`FederationArgs`) or the same shape as a dict, as in
    the stack config's `federation` value (docs/config-reference.md); a dict's values may be
    Inputs (see shell/inputs.py). `node_auth_keys` ({pool: {slot: private key}}, a secret) are the
    keys of `nodeAuth.keySource: config`."""

    fleet_address: pulumi.Output[str]
    """Where SuperNodes reach the Fleet API: the SuperLink's in-cluster address, or the hub's (a site)."""
    control_address: pulumi.Output[Optional[str]]
    """Where `flwr` reaches the Control API, in the cluster (none on a site)."""
    external_address: pulumi.Output[Optional[str]]
    """The address sites dial (`superlink.externalAddress`), when set."""
    ca_certificate: pulumi.Output[Optional[str]]
    """The CA certificate (PEM, public) that SuperNodes and `flwr` trust; none without TLS."""
    node_public_keys: pulumi.Output[dict[str, dict[str, str]]]
    """Every pool's node public keys, {pool: {slot: key}} (node authentication)."""
    flwr_config: pulumi.Output[Optional[str]]
    """The `flwr` CLI's connection config (TOML) for this federation (none on a site)."""
    flwr_config_file: pulumi.Output[Optional[str]]
    """Where that config goes (`~/.flwr/config.toml`, or `pyproject.toml` before Flower 1.23)."""
    namespace: pulumi.Output[str]
    role: pulumi.Output[str]
    flower_version: pulumi.Output[str]

    def __init__(
        self,
        name: str,
        args: FederationArgs | Mapping[str, Any],
        opts: Optional[pulumi.ResourceOptions] = None,
        *,
        cluster_providers: Optional[Mapping[str, pulumi.ProviderResource]] = None,
        node_auth_keys: pulumi.Input[Mapping[str, Mapping[str, str]]] | None = None,
    ):
        cluster_providers = dict(cluster_providers or {})
        self.plan, self._secrets = _plan(name, args, node_auth_keys, cluster_providers)
        rendered = _render(self.plan)
        for warning in warnings(self.plan):
            pulumi.log.warn(warning)
        if self._secrets:
            opts = pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(transformations=[self._keep_secret]))
        super().__init__(TYPE, name, None, opts)
        providers = {**self._kubeconfig_providers(name, cluster_providers), **cluster_providers}
        self._register(name, self.plan, rendered, providers)
        self._set_outputs()

    def _keep_secret(self, args: pulumi.ResourceTransformationArgs) -> Optional[pulumi.ResourceTransformationResult]:
        """Each input of this component's resources that holds a value given as a secret Input (an env value, an
        address) is registered as a secret, so Pulumi encrypts it in state and masks it in previews."""
        props = {key: _secret_if(value, self._secrets) for key, value in args.props.items()}
        if all(props[key] is args.props[key] for key in props):
            return None
        return pulumi.ResourceTransformationResult(props, args.opts)

    def _kubeconfig_providers(
        self, name: str, given: Mapping[str, pulumi.ProviderResource]
    ) -> dict[str, pulumi.ProviderResource]:
        """A Kubernetes provider for each named cluster not given one, from its kubeconfig (a secret input, which
        pulumi-kubernetes keeps secret in state) and context."""
        return {c: self._kubeconfig_provider(name, c) for c in self.plan.clusters if c and c not in given}

    def _kubeconfig_provider(self, name: str, cluster: str) -> pulumi.ProviderResource:
        """A child, named after the component, so two federations in one program never clash (program.py's
        stack Federation names its own otherwise)."""
        return kubeconfig_provider(
            self.plan, cluster, f"{name}-{CLUSTER_PROVIDER_PREFIX}{cluster}", pulumi.ResourceOptions(parent=self)
        )

    def _register(
        self, name: str, plan: FederationPlan, rendered: Manifests, providers: dict[str, pulumi.ProviderResource]
    ) -> None:
        """`providers` maps a named cluster to its Kubernetes provider; the unnamed one
        ("") is the home provider (`opts`'), which children inherit."""
        home, *others = rendered.clusters

        def in_cluster(cluster: str, depends: list[pulumi.Resource]) -> pulumi.ResourceOptions:
            provider = providers.get(cluster)
            return pulumi.ResourceOptions(
                parent=self, depends_on=list(depends), providers=[provider] if provider else None
            )

        shared = home.owned_by(FEDERATION)
        namespaces = [m for m in shared if m["kind"] == "Namespace"]
        depends: list[pulumi.Resource] = []
        self.namespace_resource = None
        if namespaces:
            self.namespace_resource = register(namespaces[0], in_cluster(home.name, []))
            depends.append(self.namespace_resource)
        self.tls: Optional[TlsTrustComponent] = None
        rollout = Rollout()
        if plan.trust is not None:
            self.tls = TlsTrustComponent(f"{name}-tls", plan, home.owned_by(TLS), in_cluster(home.name, depends))
            depends.append(self.tls)
            rollout = dataclasses.replace(
                rollout,
                tls=plan.trust,
                superlink_checksum=self.tls.superlink_checksum,
                client_checksum=self.tls.client_checksum,
            )
        self.access: list[pulumi.CustomResource] = []
        for m in shared:  # a loop, not a comprehension: see supernode_pool.deploy
            if m["kind"] != "Namespace":
                self.access.append(register(m, in_cluster(home.name, depends)))
        ready = {home.name: [*depends, *self.access]}
        self.clusters = {}
        for cluster in others:
            component = ClusterComponent(
                f"{name}-cluster-{cluster_label(cluster.name)}",
                cluster,
                self.tls.ca_pem if self.tls else None,
                in_cluster(cluster.name, [self.tls] if self.tls else []),
            )
            self.clusters[cluster.name] = component
            ready[cluster.name] = [component]

        signer = self.tls.signer if self.tls else None
        self.runtime_ca: Optional[RuntimeCaComponent] = None
        if plan.runtime_trust is not None and plan.runtime_trust.own_ca:
            # A site signs its pools' Runtime API certificates with a CA of its own (it has no key of the hub's).
            self.runtime_ca = RuntimeCaComponent(f"{name}-runtime-ca", plan, pulumi.ResourceOptions(parent=self))
            signer = self.runtime_ca.signer
        self.superlink: Optional[SuperLinkComponent] = None
        # The exporter labels the own pools' nodes by their keys, made with the pools below: resolved once they are.
        own_keys: Optional[pulumi.Output[dict[str, dict[str, str]]]] = None
        resolve_own_keys: Optional[Callable[[pulumi.Output[dict[str, dict[str, str]]]], None]] = None
        if monitoring.enabled(plan):
            own_keys, resolve_own_keys = pulumi.deferred_output()
        if plan.runs_superlink:
            superlink_ready = list(ready[home.name])
            appio_objects = home.owned_by(APPIO)
            if appio_objects:
                auth = AppIoComponent(
                    f"{name}-superlink-appio", plan, None, appio_objects, None, in_cluster(home.name, superlink_ready)
                )
                superlink_ready.append(auth)
            self.superlink = SuperLinkComponent(
                f"{name}-superlink",
                plan,
                home.owned_by(SUPERLINK),
                rollout,
                in_cluster(home.name, superlink_ready),
                pool_keys=own_keys,
            )
        self.pools = {}
        for cluster in rendered.clusters:
            for p in plan.pools_in(cluster.name):
                key_secrets = cluster.owned_by(node_keys_owner(p.name))
                self.pools[p.name] = SuperNodePoolComponent(
                    f"{name}-pool-{p.name}",
                    plan,
                    p,
                    cluster.owned_by(pool_owner(p.name)),
                    key_secrets[0] if key_secrets else None,
                    rollout,
                    in_cluster(cluster.name, ready[cluster.name]),
                    appio_objects=cluster.owned_by(appio_owner(p.name)),
                    signer=signer,
                )
        if resolve_own_keys is not None:
            resolve_own_keys(self.public_keys())
        # Key-set changes in the order that never refuses a SuperNode: new keys registered,
        # then the pools roll onto them, then keys no longer trusted are revoked.
        self.registration: Optional[RegistrationComponent] = None
        registration = home.owned_by(REGISTRATION)
        if registration and self.superlink is not None:
            self.registration = RegistrationComponent(
                f"{name}-node-registration",
                plan,
                registration,
                self.public_keys(),
                rollout,
                in_cluster(home.name, [*ready[home.name], self.superlink]),
            )
        # Pools roll after the SuperLink's rollout: a SuperNode stopping then tells a running SuperLink it leaves, so
        # its successor is admitted at once (a SuperLink that missed it holds the node online for 60 s).
        registered = [self.registration.registered] if self.registration else []
        registered += [self.superlink] if self.superlink is not None else []
        rolled: list[pulumi.Resource] = []
        for pool in self.pools.values():  # a loop, not a comprehension: see supernode_pool.deploy
            rolled += pool.deploy(registered)
        if self.registration is not None:
            self.registration.revoke_after(rolled)

    def _set_outputs(self) -> None:
        """The typed outputs, from the same values the program exports as stack outputs."""
        plan, exported = self.plan, stack_outputs(self.plan)
        superlink = exported.get("superlink", {})
        self.fleet_address = pulumi.Output.from_input(superlink.get("fleetAddress", ""))
        self.control_address = pulumi.Output.from_input(superlink.get("controlAddress"))
        self.external_address = pulumi.Output.from_input(superlink.get("externalAddress"))
        self.ca_certificate = self.tls.ca_pem if self.tls is not None and self.tls.ca_pem is not None else _none()
        self.node_public_keys = self.public_keys()
        self.flwr_config = pulumi.Output.from_input(exported.get("flwrConfig"))
        self.flwr_config_file = pulumi.Output.from_input(exported.get("flwrConfigFile"))
        self.namespace = pulumi.Output.from_input(plan.namespace)
        self.role = pulumi.Output.from_input(str(plan.role))
        self.flower_version = pulumi.Output.from_input(str(plan.version))
        for attribute in OUTPUT_ATTRIBUTES.values() if self._secrets else ():  # an address given as a secret stays one
            setattr(self, attribute, getattr(self, attribute).apply(lambda v: _secret_if(v, self._secrets)))
        self.register_outputs({name: getattr(self, attribute) for name, attribute in OUTPUT_ATTRIBUTES.items()})

    def public_keys(self) -> pulumi.Output[dict[str, dict[str, str]]]:
        """Every pool's node public keys, {pool: {slot: key}} (pools without keys left out)."""
        keys = {name: pool.public_keys for name, pool in self.pools.items() if pool.public_keys is not None}
        return pulumi.Output.all(**keys) if keys else pulumi.Output.from_input({})


# The typed outputs by their schema names (what other languages see; the package schema lists the same).
OUTPUT_ATTRIBUTES = {
    "fleetAddress": "fleet_address",
    "controlAddress": "control_address",
    "externalAddress": "external_address",
    "caCertificate": "ca_certificate",
    "nodePublicKeys": "node_public_keys",
    "flwrConfig": "flwr_config",
    "flwrConfigFile": "flwr_config_file",
    "namespace": "namespace",
    "role": "role",
    "flowerVersion": "flower_version",
}


def _none() -> pulumi.Output[Optional[str]]:
    return pulumi.Output.from_input(None)


def _plan(
    name: str,
    args: FederationArgs | Mapping[str, Any],
    node_auth_keys: Any,
    cluster_providers: Mapping[str, pulumi.ProviderResource],
) -> tuple[FederationPlan, set[str]]:
    """The validated plan and the values given as secret Inputs, or pulumi.RunError with every problem at once
    and nothing registered. Stacks named by `fromStack` are read only once the config is otherwise valid."""
    config, supplied = plain_config(args), plain_value(node_auth_keys, NODE_KEYS_ROOT)
    raw, keys, problems = config.value, supplied.value, config.problems + supplied.problems
    try:
        try:
            plan = load_plan(raw, name, keys)
        except ConfigError as err:
            # A value unknown at preview is planned as missing: what that alone causes is not said twice.
            raise ConfigError(problems + [p for p in err.problems if not _under_any(p.path, problems)]) from None
        problems += _unknown_clusters(plan, cluster_providers)
        if problems:
            raise ConfigError(problems)
        stacks = referenced_stacks(raw)
        if stacks:
            plan = load_plan(raw, name, keys, stack_refs.read(stacks))
        return plan, config.secrets
    except ConfigError as err:
        raise pulumi.RunError(str(err)) from None


def _under_any(path: str, problems: list[Problem]) -> bool:
    return any(path == p.path or path.startswith((f"{p.path}.", f"{p.path}[")) for p in problems)


def _unknown_clusters(plan: FederationPlan, cluster_providers: Mapping[str, Any]) -> list[Problem]:
    named = sorted(n for n in plan.clusters if n)
    return [
        Problem(
            f"{CLUSTER_PROVIDERS_ROOT}.{cluster}",
            f"no cluster '{cluster}' is deployed into (named clusters: {', '.join(named) or 'none'})",
        )
        for cluster in sorted(cluster_providers)
        if cluster not in named
    ]


def _render(plan: FederationPlan) -> Manifests:
    """Every object, rendered once and checked, before anything is registered."""
    try:
        return manifests.render(plan)
    except manifests.InvariantError as err:
        raise pulumi.RunError(str(err)) from None


def kubeconfig_provider(
    plan: FederationPlan, cluster: str, name: str, opts: Optional[pulumi.ResourceOptions] = None
) -> pulumi.ProviderResource:
    """The Kubernetes provider of a named cluster from its `kubeconfig` (kept secret) and `context` settings."""
    settings = plan.spec.clusters[cluster]
    kubeconfig = pulumi.Output.secret(settings.kubeconfig) if settings.kubeconfig else None
    return k8s.Provider(name, kubeconfig=kubeconfig, context=settings.context, opts=opts)


def _secret_if(value: Any, secrets: set[str]) -> Any:
    return pulumi.Output.secret(value) if _holds(value, secrets) else value


def _holds(value: Any, secrets: set[str]) -> bool:
    if isinstance(value, str):
        return any(secret in value for secret in secrets)
    if isinstance(value, Mapping):
        return any(_holds(key, secrets) or _holds(item, secrets) for key, item in value.items())
    if isinstance(value, (list, tuple)):
        return any(_holds(item, secrets) for item in value)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value) in secrets
    return False  # an Output: made here, from generated material or public values
