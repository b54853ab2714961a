"""The `flower-federation:federation` stack config: a superset of the flower-operator
`Federation` CR's `spec`, with the same field names and meanings.

Field-level shape (types, enums, unknown keys) is checked here by pydantic; rules that
span fields (the operator's CEL rules, versions, names) live in `rules/`. Kubernetes
fragments (`podTemplate`, `env`, `resources`, volumes, ...) are plain data here and are
checked against the Kubernetes OpenAPI schema by `kube/openapi.py`.

Field descriptions and model docstrings are the config reference in docs/config-reference.md
(`make docs`, `reference.py`): they say what the code does. `N` stands for the federation's
name, `P` for a pool's.
"""

from __future__ import annotations

from typing import Any, Literal, Optional

from pydantic import Field

from flower_federation.config.base import Model, ResourcesPreset
from flower_federation.config.exposure import FLEET_PROXY_IMAGE, ControlService, FleetProxy, Gateway, Ingress, ParentRef
from flower_federation.config.images import Image, ImageRef, PullPolicy
from flower_federation.config.monitoring import Monitoring
from flower_federation.config.security import (
    CertManager,
    GeneratedCertificate,
    IssuerRef,
    NodeAuth,
    Rbac,
    Tls,
    TrustSource,
)
from flower_federation.config.shared_settings import (
    NETWORK_POLICY_DEFAULTS,
    DisruptionBudget,
    Executor,
    NetworkPolicy,
    Probes,
    ProbeSettings,
)
from flower_federation.config.sites import Cluster, RemoteCertificate, RemoteSuperLink, Role, Site
from flower_federation.config.superexec import SuperExecPorts, SuperExecSettings
from flower_federation.config.superlink import Cli, Persistence, ServicePorts, SuperLink, SuperLinkService
from flower_federation.config.supernodes import Gpu, Pool, PoolImages, SuperNodePorts, SuperNodes, SuperNodeService
from flower_federation.config.workloads import AffinityPresets, NodeAffinityPreset, PodSettings, ServiceAccountSettings
from flower_federation.flower.versions import DEFAULT_VERSION

__all__ = [
    "NETWORK_POLICY_DEFAULTS",
    "AffinityPresets",
    "CertManager",
    "Cli",
    "Cluster",
    "ControlService",
    "FLEET_PROXY_IMAGE",
    "FleetProxy",
    "Gateway",
    "ParentRef",
    "DisruptionBudget",
    "Executor",
    "Federation",
    "GeneratedCertificate",
    "Image",
    "ImageRef",
    "Gpu",
    "Ingress",
    "IssuerRef",
    "Model",
    "Monitoring",
    "NetworkPolicy",
    "NodeAffinityPreset",
    "NodeAuth",
    "Persistence",
    "PodSettings",
    "Pool",
    "PoolImages",
    "ProbeSettings",
    "PullPolicy",
    "Probes",
    "Rbac",
    "ResourcesPreset",
    "RemoteCertificate",
    "RemoteSuperLink",
    "Role",
    "ServiceAccountSettings",
    "ServicePorts",
    "Site",
    "SuperExecPorts",
    "SuperExecSettings",
    "SuperLink",
    "SuperLinkService",
    "SuperNodePorts",
    "SuperNodeService",
    "SuperNodes",
    "Tls",
    "TrustSource",
    "json_schema",
]


class Federation(Model):
    """The value of the `flower-federation:federation` stack config key."""

    role: Role = Field(
        default="federation",
        description=(
            "federation: the SuperLink and its pools in one stack (clusters may differ). hub: the SuperLink only, reached "
            "by sites from outside. site: SuperNode pools only, dialling `supernodes.superlink`."
        ),
    )
    name: Optional[str] = Field(
        default=None,
        description=(
            "`N`, the prefix of every object name: a DNS-1035 label (lowercase letters, digits and `-`, starting with a "
            "letter). Unset: the stack name."
        ),
    )
    namespace: str = Field(default="flower", description="Namespace of every object; a DNS-1123 label.")
    create_namespace: bool = Field(
        default=True,
        description=(
            "Create the namespace, labelled with the strictest Pod Security level its pods meet "
            "(`pod-security.kubernetes.io/enforce` and `warn`)."
        ),
    )
    labels: dict[str, str] = Field(
        default={},
        description=(
            "Extra labels on every object; never in selectors; a label flower-federation sets itself (its `app.kubernetes.io/*` and `flower.flwr.ai/*` ones) only with its value."
        ),
    )
    annotations: dict[str, str] = Field(
        default={}, description="Annotations on every object (ours, and a component's own, win on a clash)."
    )
    pod_labels: dict[str, str] = Field(
        default={},
        description="Extra labels on every pod, the registration Job's and task pods' too; a label flower-federation sets itself (its `app.kubernetes.io/*` and `flower.flwr.ai/*` ones) only with its value.",
    )
    node_selector: dict[str, str] = Field(
        default={},
        description=(
            "Node selector of every pod (the registration Job's and the Kubernetes executor's task pods' too); a "
            "component's `nodeSelector` wins key by key."
        ),
    )
    tolerations: list[Any] = Field(
        default=[],
        description="Tolerations (schema-checked) of every pod; a component's own are added after them.",
    )
    image_pull_policy: PullPolicy = Field(
        default="IfNotPresent",
        description="`imagePullPolicy` of every container (and task pod) whose image sets no `pullPolicy`.",
    )
    image_pull_secrets: list[str] = Field(
        default=[],
        description=(
            "Names of Secrets (kubernetes.io/dockerconfigjson, yours) every pod pulls its images with, unless its "
            "component sets `imagePullSecrets`; task pods get them through their ServiceAccount."
        ),
    )
    mode: Literal["StatefulSet", "DaemonSet"] = Field(
        default="StatefulSet",
        description=(
            "Workload of every pool: StatefulSet (`replicas` SuperNodes) or DaemonSet (one SuperNode per eligible node)."
        ),
    )
    isolation_mode: Literal["subprocess", "process"] = Field(
        default="subprocess",
        description=(
            "subprocess: the SuperLink and SuperNodes run ServerApps and ClientApps as child processes. process: "
            "SuperExecs run them."
        ),
    )
    superexec_placement: Literal["sidecar", "distributed"] = Field(
        default="sidecar",
        description=(
            "process isolation only: SuperExecs as sidecars, or in workloads of their own (StatefulSet mode; the Helm "
            "chart's 'Isolation Distributed')."
        ),
    )
    version: Optional[str] = Field(
        default=None,
        description=(
            "Flower version, a string (YAML reads `1.42` as a number; `1.42.0` is fine): picks the dialect of every "
            "command line and port. Unset: `superlink.image`'s tag, else (no SuperLink image) `supernodes.image`'s, else "
            f"{DEFAULT_VERSION}. An image that decides it and is pinned by a digest without a tag needs `version`."
        ),
    )
    insecure: bool = Field(
        default=False, description=("`true` turns TLS off (operator-compatible; the operator's default is `true`).")
    )
    cluster_domain: str = Field(
        default="cluster.local", description=("Used in in-cluster addresses and the certificate's names.")
    )
    telemetry: bool = Field(
        default=False,
        description=(
            "Flower's usage telemetry: `false` sets `FLWR_TELEMETRY_ENABLED=0` in every Flower container (and the "
            "Kubernetes executor's task pods), so none sends events to telemetry.flower.ai (Flower's default is to "
            "send: the event, Flower's version, CPU count, OS and Python details, a random id kept in FLWR_HOME). "
            "`true`: Flower's default; the NetworkPolicies still deny that egress unless you add it."
        ),
    )
    allow_runtime_dependency_installation: bool = Field(
        default=False,
        description=(
            "Flower 1.29+: let Flower `uv sync` app dependencies at run time (egress to port 443 anywhere). Off: images "
            "carry their dependencies."
        ),
    )
    superlink: SuperLink = SuperLink()
    supernodes: SuperNodes = SuperNodes()
    sites: list[Site] = Field(
        default=[],
        description=(
            "Roles hub and federation, with nodeAuth: other organisations' SuperNodes to admit; `pulumi up` registers "
            'exactly their keys and the pools\' own (see "A federation across organisations").'
        ),
    )
    clusters: dict[str, Cluster] = Field(
        default={},
        description=(
            "Named clusters besides the stack's ambient one; `superlink.cluster` and a pool's `cluster` pick one. Each "
            "gets its own namespace, CA Secret, NetworkPolicies and node keys."
        ),
    )
    cli: Cli = Cli()
    tls: Tls = Tls()
    node_auth: NodeAuth = NodeAuth()
    network_policy: NetworkPolicy = NetworkPolicy()
    probes: Probes = Probes()
    executor: Executor = Executor()
    rbac: Rbac = Rbac()
    security_context: dict[str, Any] = Field(
        default={},
        description=(
            "Merged key by key over the restricted securityContext of every managed container (the chart's "
            "`global.podSecurityContext`, whose keys are container fields)."
        ),
    )
    pod_security_context: dict[str, Any] = Field(
        default={},
        description=(
            "Merged key by key over the restricted pod securityContext (the chart's `global.securityContext`: "
            "`runAsUser`, `runAsGroup`, `fsGroup`); a component's `podSecurityContext` merges over it."
        ),
    )
    resources_preset: Optional[ResourcesPreset] = Field(
        default=None,
        description=(
            "Preset of every container whose component sets none of its own: `none` (no preset), `nano` ... `2xlarge` "
            '(see "Resources"). Unset: each role\'s own default.'
        ),
    )
    default_resources: dict[str, Any] = Field(
        default={},
        description=(
            "ResourceRequirements merged key by key over every container's preset (task pods' too), under the "
            "component's own resources: for keys every container shares (`limits.ephemeral-storage`, an opt-in "
            "`limits.cpu`, lower requests on a small cluster)."
        ),
    )
    affinity: AffinityPresets = AffinityPresets()
    monitoring: Monitoring = Monitoring()


def json_schema() -> dict[str, Any]:
    return Federation.model_json_schema(by_alias=True)
