"""The SuperLink: image, Service, state, its SuperExec, and how the `flwr` CLI reaches it."""

from __future__ import annotations

from typing import Any, Literal, Optional

from pydantic import Field

from flower_federation.config.base import Model, ResourcesPreset
from flower_federation.config.exposure import ControlService, FleetProxy, Gateway, Ingress
from flower_federation.config.images import Image
from flower_federation.config.shared_settings import NetworkPolicy, Probes
from flower_federation.config.superexec import SuperExecSettings
from flower_federation.config.workloads import PodSettings
from flower_federation.flower.dialects import GRPC_CONTROL_PORT, GRPC_FLEET_PORT, GRPC_SERVERAPPIO_PORT, HTTP_PORT


class ServicePorts(Model):
    """Ports of the SuperLink's container and Service; the SuperNodes' address follows. Only the keys of the
    federation's Flower dialect may be set; gRPC-era ports must be distinct."""

    grpc: Optional[int] = Field(
        default=None, ge=1, le=65535, description=f"gRPC era: Fleet API port. Unset: {GRPC_FLEET_PORT}."
    )
    server_app_io: Optional[int] = Field(
        default=None,
        ge=1,
        le=65535,
        alias="serverAppIO",
        description=(
            f"gRPC era: ServerAppIo API port. Unset: {GRPC_SERVERAPPIO_PORT}. Bound to 127.0.0.1 in the SuperLink's pod, except with "
            "distributed SuperExec, which reaches it through the ClusterIP Service `N-superlink-serverappio`; never on "
            "`N-superlink`."
        ),
    )
    extra: Optional[int] = Field(
        default=None,
        ge=1,
        le=65535,
        description=f"gRPC era: Control API port (what `flwr` dials). Unset: {GRPC_CONTROL_PORT}.",
    )
    http: Optional[int] = Field(
        default=None,
        ge=1,
        le=65535,
        description=f"HTTP era: the one API port for Fleet, Control and the Runtime API. Unset: {HTTP_PORT}.",
    )


class SuperLinkService(Model):
    type: Literal["ClusterIP", "NodePort", "LoadBalancer"] = Field(
        default="ClusterIP",
        description=(
            "Service type. `LoadBalancer` or `NodePort` makes the SuperLink reachable from outside its cluster: in the "
            "HTTP era the Fleet-only proxy then serves this Service's port (`fleetProxy`); in the gRPC era this "
            "Service carries the Fleet port alone and the Control port moves to ClusterIP Service "
            "`N-superlink-control` (unless `exposeControlApi`). Its NetworkPolicy still admits the Fleet API from "
            "anywhere only for a hub, an ingress, a gateway, pools in other clusters or "
            "`networkPolicy.allowExternal: true`."
        ),
    )
    ports: ServicePorts = ServicePorts()
    labels: dict[str, str] = Field(default={}, description="Extra labels on the Service (ours win on a clash).")
    annotations: dict[str, str] = Field(default={}, description="Annotations on the Service (e.g. a load balancer's).")
    load_balancer_source_ranges: list[str] = Field(
        default=[],
        description=(
            "`type: LoadBalancer`: the CIDRs the load balancer accepts (spec.loadBalancerSourceRanges); what limits who "
            "reaches an exposed SuperLink (sites' egress addresses)."
        ),
    )


class Backups(Model):
    keep: int = Field(
        default=3,
        ge=1,
        le=100,
        description=(
            "How many states `state-guard` keeps backups of in `backups/` on the state volume (the newest copy of "
            "each of the newest states, a state being its writer and schema revisions; one is taken when the Flower "
            "version that wrote the state changes, never on a retried start); as many `replaced-*` a restore kept."
        ),
    )


class Persistence(Model):
    enabled: bool = Field(
        default=True,
        description=(
            "Keep the SuperLink's state (runs, registered SuperNodes) across restarts: a PVC `state` at /var/lib/flower "
            "and `--database /var/lib/flower/state.db`. `false`: state lives in memory."
        ),
    )
    size: str = Field(default="1Gi", description="Storage the `state` PVC requests (a Kubernetes quantity).")
    storage_class_name: Optional[str] = Field(
        default=None, description=("StorageClass of the `state` PVC. Unset: the cluster's default.")
    )
    backups: Backups = Field(
        default=Backups(),
        description=(
            "Before the SuperLink opens a state file another Flower version wrote (an upgrade migrates it one way), the "
            "init container `state-guard` copies it to `/var/lib/flower/backups/<writer>-<revision>-<time>.db`; a "
            "state a newer Flower wrote is refused, saying how to restore (docs/operations.md)."
        ),
    )
    restore: Optional[str] = Field(
        default=None,
        description=(
            "A file name in `/var/lib/flower/backups/` (as the refusal or `state-guard`'s log lists them): the state "
            'is replaced by it before the SuperLink starts, once each time this names it (a restart says "already '
            'restored, not applied"; removed and set again, it restores again), the replaced state kept as '
            "`replaced-<writer>-<revisions>-<time>.db`. Remove it afterwards."
        ),
    )


class SuperLink(PodSettings):
    """The SuperLink: StatefulSet `N-superlink` (one replica) and Service `N-superlink`; in `process`
    isolation also the ServerApp SuperExec, as a sidecar or (distributed) Deployment `N-superexec-serverapp`."""

    image: Optional[Image] = Field(
        default=None,
        description=(
            "A reference string or an object (keys below). Unset: `flwr/superlink:<version>`. Its tag, if it is a "
            "version, must be of the federation's Flower dialect."
        ),
    )
    superexec_image: Optional[Image] = Field(
        default=None,
        description=(
            "ServerApp SuperExec image: required in `process` isolation (a site runs none), forbidden in `subprocess`."
        ),
    )
    resources_preset: Optional[ResourcesPreset] = Field(
        default=None,
        description=('The SuperLink container\'s preset (see "Resources"). Unset: `resourcesPreset`, else `small`.'),
    )
    resources: Optional[dict[str, Any]] = Field(
        default=None,
        description=(
            "ResourceRequirements of the SuperLink container, key by key over its preset and `defaultResources`."
        ),
    )
    superexec_resources_preset: Optional[ResourcesPreset] = Field(
        default=None,
        description=(
            "The ServerApp SuperExec's preset. Unset: `resourcesPreset`, else `small` (`micro` with the Kubernetes "
            "executor, whose task pods run the ServerApps)."
        ),
    )
    superexec_resources: Optional[dict[str, Any]] = Field(
        default=None,
        description=(
            "ResourceRequirements of the ServerApp SuperExec, key by key over its preset and `defaultResources`."
        ),
    )
    env: list[Any] = Field(default=[], description="EnvVars of the SuperLink and its ServerApp SuperExec.")
    extra_args: list[str] = Field(
        default=[], description=("Appended to the SuperLink's args; Kubernetes expands `$(VAR)` in them.")
    )
    pod_template: Optional[dict[str, Any]] = Field(
        default=None, description=("PodTemplateSpec merged into the SuperLink's pod (see `podTemplate` below).")
    )
    service: SuperLinkService = Field(
        default=SuperLinkService(),
        description=(
            "Service `N-superlink`: Fleet and Control (gRPC era; Fleet alone when exposed, see `exposeControlApi`) or "
            "the one API port (HTTP era), never a plaintext in-pod API."
        ),
    )
    volumes: list[Any] = Field(default=[], description="Volumes added to the SuperLink's pod.")
    volume_mounts: list[Any] = Field(default=[], description="VolumeMounts added to the SuperLink container.")
    volume_claim_templates: list[Any] = Field(
        default=[], description=("PersistentVolumeClaims added to the SuperLink's StatefulSet, next to `state`.")
    )
    persistence: Persistence = Persistence()
    cluster: Optional[str] = Field(
        default=None, description="A key of `clusters` to run in. Unset: the stack's ambient cluster."
    )
    ingress: Optional[Ingress] = None
    gateway: Optional[Gateway] = None
    fleet_proxy: FleetProxy = FleetProxy()
    control_service: ControlService = ControlService()
    expose_control_api: bool = Field(
        default=False,
        description=(
            "`true`: an exposed SuperLink (a `LoadBalancer` or `NodePort` Service, an ingress, a gateway, pools in "
            "other clusters) keeps its Control API on Service `N-superlink`, so whoever reaches what exposes it "
            "reaches the Control API too (`flwr run` runs code at every site, `flwr supernode register` admits "
            "nodes), with a warning at every preview; limit who reaches it (`service.loadBalancerSourceRanges`). "
            "HTTP era (Flower 1.40+, one port for Fleet and Control): no Fleet-only proxy; prefer `controlService` "
            "for `flwr` from outside. gRPC era (1.21-1.34): the Control port stays next to Fleet, guarded only by "
            "the NetworkPolicy; unset, it moves to ClusterIP Service `N-superlink-control`."
        ),
    )
    external_address: Optional[str] = Field(
        default=None,
        description=(
            "`host` or `host:port` that sites, pools in other clusters and `flwr` outside the cluster dial (stack output "
            "`superlink.externalAddress`). Unset: the gateway hostname, else the ingress host (port 443), else the first "
            "`tls.dnsNames` entry, with the Fleet port the Service exposes. Added to the server certificate."
        ),
    )
    network_policy: NetworkPolicy = Field(
        default=NetworkPolicy(), description=("For the SuperLink and its ServerApp SuperExec, over `networkPolicy`.")
    )
    probes: Optional[Probes] = Field(
        default=None,
        description=(
            "For the SuperLink and its ServerApp SuperExec, over `probes` key by key (a key left out takes `probes`' value)."
        ),
    )
    superexec: SuperExecSettings = Field(
        default=SuperExecSettings(),
        description="The ServerApp SuperExec's settings (the Helm chart's `superexec.*`).",
    )


class Cli(Model):
    """How the exported `flwr` connection config (stack output `flwrConfig`) reaches the SuperLink."""

    connection_name: Optional[str] = Field(
        default=None, description=("Name of the connection (federation) in the flwr config. Unset: `name`.")
    )
    address: Optional[str] = Field(
        default=None,
        description=(
            "Control API address `flwr` dials, e.g. a port-forward's or load balancer's. Unset: the in-cluster Service "
            "address."
        ),
    )
    root_certificates: Optional[str] = Field(
        default=None,
        description=(
            "Path of the CA certificate where `flwr` runs; absolute for Flower 1.26+. Unset: /etc/flower/ca/ca.crt, where "
            "the federation's pods mount it."
        ),
    )
