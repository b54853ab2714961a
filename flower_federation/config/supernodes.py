"""SuperNode pools: images, GPUs, resources, volumes, nodeConfig."""

from __future__ import annotations

from typing import Any, Literal, Optional

from pydantic import Field

from flower_federation.config.base import Int32, Model, ResourcesPreset
from flower_federation.config.images import Image
from flower_federation.config.shared_settings import DisruptionBudget, NetworkPolicy, Probes
from flower_federation.config.sites import RemoteSuperLink
from flower_federation.config.superexec import SuperExecSettings
from flower_federation.config.workloads import PodSettings
from flower_federation.flower.dialects import HEALTH_PORT, SUPERNODE_APPIO_PORT


class PoolImages(Model):
    supernode: Optional[Image] = Field(
        default=None, description=("Unset: `supernodes.image`, else `flwr/supernode:<version>`.")
    )
    superexec_client_app: Optional[Image] = Field(
        default=None,
        description=("ClientApp SuperExec image: required in `process` isolation, forbidden in `subprocess`."),
    )


class SuperNodeService(Model):
    """The pool's SuperNodes' ClientAppIo API (the Runtime API in the HTTP era), the Helm chart's
    `supernode.service.*`. gRPC era: plaintext by Flower's design; Flower 1.40+: TLS with the pool's certificate
    and SuperExec auth (unless `insecure`). It leaves the SuperNodes' pods only with distributed SuperExecs.
    ClusterIP: the pool's headless Service `N-supernode-P` (stable names for the SuperExecs). NodePort or
    LoadBalancer: also Service `N-supernode-P-clientappio` of that type, for a SuperExec outside the cluster (the
    chart's 'Isolation Distributed'); it needs distributed placement, one SuperNode (a SuperExec must stay with
    one) and `networkPolicy.allowExternal: true` (say you accept the API reachable from outside)."""

    type: Literal["ClusterIP", "NodePort", "LoadBalancer"] = Field(default="ClusterIP", description="Service type.")
    port: int = Field(default=SUPERNODE_APPIO_PORT, ge=1, le=65535, description="The Service's port.")
    node_port: Optional[int] = Field(
        default=None,
        ge=30000,
        le=32767,
        description="NodePort or LoadBalancer: the node port. Unset: Kubernetes picks one.",
    )
    port_name: str = Field(default="clientappio", description="Name of the Service's port (an IANA service name).")
    external_names: list[str] = Field(
        default=[],
        description=(
            "NodePort or LoadBalancer: the DNS names and IP addresses SuperExecs outside the cluster dial the Service "
            "by. Where the Runtime API is served over TLS (Flower 1.40+ on a hub with TLS) the pool's certificate "
            "must name them: they are added to the one made for the pool (`tls.source` generate or certManager, "
            "where they are required); with existingSecret the pool's `runtimeApiSecret` must carry them."
        ),
    )


class SuperNodePorts(Model):
    """Ports the SuperNode container listens on (the chart's `supernode.containerPorts.*`)."""

    client_app_io: Optional[int] = Field(
        default=None,
        ge=1,
        le=65535,
        description=(
            f"The ClientAppIo API (gRPC era) / Runtime API (HTTP era) that SuperExecs dial. Unset: {SUPERNODE_APPIO_PORT}. "
            "Bound to "
            "127.0.0.1 unless the SuperExecs are distributed."
        ),
    )
    health: Optional[int] = Field(
        default=None,
        ge=1,
        le=65535,
        description=f"The gRPC health server the probes check (Flower up to 1.42). Unset: {HEALTH_PORT}.",
    )


class Gpu(Model):
    """GPUs for the container that runs ClientApps: the SuperNode in `subprocess` isolation, the
    ClientApp SuperExec in `process` isolation."""

    enabled: bool = Field(default=False, description="Give the pool GPUs; the other `gpu` keys act only with it.")
    vendor: Optional[Literal["nvidia", "amd"]] = Field(
        default=None, description=("Picks the default `resourceName` and what `mountAll` does; required with mountAll.")
    )
    resource_name: Optional[str] = Field(
        default=None,
        description=(
            "Extended resource put in the container's limits. Unset: `nvidia.com/gpu` or `amd.com/gpu` by vendor (without "
            "mountAll, set one of the two)."
        ),
    )
    count: Int32 = Field(default=1, ge=1, description="How many of `resourceName` the limits ask for.")
    mount_all: bool = Field(
        default=False,
        description=(
            "Every GPU of the node instead of a resource limit. nvidia: the pod's `runtimeClassName` and "
            "`NVIDIA_VISIBLE_DEVICES=all`; amd: hostPath mounts of /dev/kfd and /dev/dri, `ROCR_VISIBLE_DEVICES=all` and a "
            "privileged container (needs allowPrivileged)."
        ),
    )
    runtime_class_name: str = Field(default="nvidia", description="RuntimeClass that nvidia mountAll sets.")
    allow_privileged: bool = Field(
        default=False,
        description=(
            "AMD mountAll needs a privileged container to open /dev/kfd and /dev/dri; it must be asked for explicitly."
        ),
    )


class Pool(PodSettings):
    """A pool of SuperNodes, `P`: StatefulSet `N-supernode-P` with a headless Service of that name (mode
    StatefulSet) or DaemonSet `N-supernode-P` (mode DaemonSet), with its ServiceAccount, NetworkPolicy and
    PodDisruptionBudget. In `process` isolation each SuperNode gets a ClientApp SuperExec: a sidecar or
    (distributed) replica k of StatefulSet `N-superexec-P`. As in the Helm chart, the pool's pod settings (labels,
    annotations, scheduling, pull secrets, ServiceAccount, ...) are its SuperNodes' pods' (a sidecar's too);
    distributed SuperExecs take `superexec.*` instead; `podTemplate` patches both."""

    name: str = Field(description="Unique DNS-1123 label (lowercase letters, digits and `-`).")
    replicas: Optional[Int32] = Field(
        default=None,
        description=("Number of SuperNodes: required (≥ 1) in StatefulSet mode, forbidden in DaemonSet mode."),
    )
    cluster: Optional[str] = Field(
        default=None,
        description=(
            "A key of `clusters` to run in. Unset: the stack's ambient cluster. In another cluster than the SuperLink's, "
            "the pool dials its external address."
        ),
    )
    images: PoolImages = PoolImages()
    gpu: Gpu = Gpu()
    supernode_resources_preset: Optional[ResourcesPreset] = Field(
        default=None,
        description=(
            "The SuperNode container's preset. Unset: `resourcesPreset`, else `small` in `subprocess` isolation (it runs "
            'the ClientApps: size it for training, see "Resources"), `micro` in `process` isolation.'
        ),
    )
    supernode_resources: Optional[dict[str, Any]] = Field(
        default=None,
        description=(
            "ResourceRequirements of the SuperNode container, key by key over its preset and `defaultResources`."
        ),
    )
    superexec_resources_preset: Optional[ResourcesPreset] = Field(
        default=None,
        description=(
            "The ClientApp SuperExec's preset. Unset: `resourcesPreset`, else `small` (`micro` with the Kubernetes "
            "executor, whose task pods run the ClientApps)."
        ),
    )
    superexec_resources: Optional[dict[str, Any]] = Field(
        default=None,
        description=(
            "ResourceRequirements of the ClientApp SuperExec, key by key over its preset and `defaultResources`."
        ),
    )
    pod_template: Optional[dict[str, Any]] = Field(
        default=None,
        description=(
            "PodTemplateSpec merged into the pool's pods, distributed SuperExecs' too, each of which then gets those "
            "of its `volumes` its containers mount or use as a device (see `podTemplate` below)."
        ),
    )
    node_key_generation: Int32 = Field(
        default=0,
        ge=0,
        description=(
            "Raise it by one to rotate the pool's generated node keys (nodeAuth) with no SuperNode refused: in one "
            "`pulumi up` new keys are made and registered, the pool rolls onto them, then the old keys are revoked "
            "(each SuperNode comes back under a new node id). Supplied keys rotate by changing them in `nodeAuthKeys`, "
            "in the same order."
        ),
    )
    extra_args: list[str] = Field(
        default=[], description=("Appended to the SuperNode's args; Kubernetes expands `$(VAR)` in them.")
    )
    env: list[Any] = Field(
        default=[], description=("EnvVars of the pool's SuperNodes and ClientApp SuperExecs, over `supernodes.env`.")
    )
    volumes: list[Any] = Field(
        default=[],
        description="Volumes added to the pool's pods, distributed SuperExecs' too: each pod gets those its containers (podTemplate patches included) mount or use as a device, as a PVC a pod lists is attached even if unmounted.",
    )
    volume_mounts: list[Any] = Field(default=[], description="VolumeMounts added to the SuperNode container.")
    superexec_volume_mounts: list[Any] = Field(
        default=[], description=("VolumeMounts added to the ClientApp SuperExec container.")
    )
    volume_claim_templates: list[Any] = Field(
        default=[],
        description=(
            "PersistentVolumeClaims of the pool's StatefulSet (StatefulSet mode only); with distributed SuperExec each "
            "StatefulSet gets the claims its own mounts use."
        ),
    )
    # Values keep their YAML types; checked value by value in rules/pools.py (node_config).
    node_config: dict[str, Any] = Field(
        default={},
        description=(
            "`--node-config` of every SuperNode of the pool, YAML types kept, with placeholders `{index}`, `{replicas}`, "
            "`{pool}`, `{node}` (see `nodeConfig` below)."
        ),
    )
    network_policy: NetworkPolicy = Field(
        default=NetworkPolicy(),
        description=("For the pool's SuperNodes, SuperExecs and task pods, over `supernodes.networkPolicy`."),
    )
    disruption_budget: DisruptionBudget = Field(
        default=DisruptionBudget(), description=("PodDisruptionBudget `N-supernode-P` over the pool's SuperNodes.")
    )
    runtime_api_secret: Optional[str] = Field(
        default=None,
        description=(
            "Required with `tls.source: existingSecret`, `isolationMode: process` and Flower 1.40+, else forbidden: the "
            "kubernetes.io/tls Secret (`tls.crt`, `tls.key`) the pool's SuperNodes serve their Runtime API with, signed "
            "by the CA the federation trusts; SANs: `localhost`, `127.0.0.1`, the pool's Service names and "
            '`*.N-supernode-P.NS.svc.<clusterDomain>` (the error lists them). See "The SuperExec hop".'
        ),
    )
    superexec: SuperExecSettings = Field(
        default=SuperExecSettings(), description="The pool's ClientApp SuperExecs (the Helm chart's `superexec.*`)."
    )
    service: SuperNodeService = SuperNodeService()
    container_ports: SuperNodePorts = SuperNodePorts()
    min_ready_seconds: Int32 = Field(
        default=10,
        ge=0,
        description=(
            "`minReadySeconds` of the pool's StatefulSet or DaemonSet: how long a replaced SuperNode must be Ready "
            "before a rolling update replaces the next. Its readiness is Flower's health server, which answers before "
            "the SuperNode has connected to the SuperLink; 10 s cover Flower's first connection attempts (retried "
            "after at most 1, 2 and 4 s), so the update keeps the PodDisruptionBudget in the federation too (never "
            "two SuperNodes of a pool offline at once). 0: the next as soon as one is Ready."
        ),
    )


class SuperNodes(Model):
    """Settings of every pool, and the pools."""

    image: Optional[Image] = Field(
        default=None,
        description="A reference string or an object. Unset: `flwr/supernode:<version>`.",
    )
    superlink: Optional[RemoteSuperLink] = Field(
        default=None, description="Role site only (and required there): the hub's SuperLink."
    )
    env: list[Any] = Field(
        default=[],
        description=(
            "EnvVars of every pool's SuperNodes and ClientApp SuperExecs (a pool's `env` wins by name; the order stays "
            "stable)."
        ),
    )
    pools: list[Pool] = Field(default=[], description="1 to 16 pools.")
    network_policy: NetworkPolicy = Field(default=NetworkPolicy(), description="For every pool, over `networkPolicy`.")
    probes: Optional[Probes] = Field(
        default=None,
        description=(
            "For SuperNodes and ClientApp SuperExecs, over `probes` key by key (a key left out takes `probes`' value)."
        ),
    )
