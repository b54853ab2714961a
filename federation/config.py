"""The `flower-federation:federation` stack config: a superset of the flower-operator
`Federation` CR's `spec`, with the same field names and meanings.

Field-level shape (types, enums, unknown keys) is checked here by pydantic; rules that
span fields (the operator's CEL rules, versions, names) live in `rules.py`. Kubernetes
fragments (`podTemplate`, `env`, `resources`, volumes, ...) are plain data here and are
checked against the Kubernetes OpenAPI schema by `k8s_schema.py`.
"""

from __future__ import annotations

from typing import Any, Literal, Optional

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

class Model(BaseModel):
    # camelCase keys only (the operator's spelling); anything unknown is an error.
    # Strict types: YAML already types values, so "0" or false is never silently a
    # replica count (which would slip past the operator's replicas >= 1 rule).
    model_config = ConfigDict(
        extra="forbid",
        strict=True,
        alias_generator=to_camel,
        validate_by_alias=True,
        validate_by_name=False,
        serialize_by_alias=True,
        frozen=True,
    )


class ServicePorts(Model):
    grpc: Optional[int] = Field(default=None, ge=1, le=65535, description="gRPC era: Fleet API port (default 9092).")
    server_app_io: Optional[int] = Field(
        default=None, ge=1, le=65535, alias="serverAppIO",
        description="gRPC era: ServerAppIo port (default 9091). In-pod only; exposed solely through the internal Service of distributed SuperExec.",
    )
    extra: Optional[int] = Field(default=None, ge=1, le=65535, description="gRPC era: Control API port (default 9093).")
    http: Optional[int] = Field(default=None, ge=1, le=65535, description="HTTP era: the one API port for Fleet, Control and Runtime (default 8000).")


class SuperLinkService(Model):
    type: Literal["ClusterIP", "NodePort", "LoadBalancer"] = "ClusterIP"
    ports: ServicePorts = ServicePorts()
    labels: dict[str, str] = {}
    annotations: dict[str, str] = {}


class Persistence(Model):
    enabled: bool = Field(default=True, description="Keep SuperLink state (runs, registered nodes) on a PVC via --database.")
    size: str = "1Gi"
    storage_class_name: Optional[str] = None


class SuperLink(Model):
    image: Optional[str] = Field(default=None, description="Default flwr/superlink:<version>.")
    superexec_image: Optional[str] = None
    resources: Optional[dict[str, Any]] = None
    superexec_resources: Optional[dict[str, Any]] = None
    env: list[Any] = []
    extra_args: list[str] = []
    pod_template: Optional[dict[str, Any]] = None
    service: SuperLinkService = SuperLinkService()
    volumes: list[Any] = []
    volume_mounts: list[Any] = []
    volume_claim_templates: list[Any] = []
    persistence: Persistence = Persistence()


class PoolImages(Model):
    supernode: Optional[str] = None
    superexec_client_app: Optional[str] = None


class Gpu(Model):
    enabled: bool = False
    vendor: Optional[Literal["nvidia", "amd"]] = None
    resource_name: Optional[str] = Field(default=None, description="Default nvidia.com/gpu or amd.com/gpu by vendor.")
    count: int = Field(default=1, ge=1)
    mount_all: bool = False
    runtime_class_name: str = Field(default="nvidia", description="RuntimeClass set by nvidia mountAll.")
    allow_privileged: bool = Field(
        default=False,
        description="AMD mountAll needs a privileged container to open /dev/kfd and /dev/dri; it must be asked for explicitly.",
    )


class Pool(Model):
    name: str
    replicas: Optional[int] = None
    images: PoolImages = PoolImages()
    gpu: Gpu = Gpu()
    supernode_resources: Optional[dict[str, Any]] = None
    superexec_resources: Optional[dict[str, Any]] = None
    pod_template: Optional[dict[str, Any]] = None
    extra_args: list[str] = []
    env: list[Any] = []
    volumes: list[Any] = []
    volume_mounts: list[Any] = []
    superexec_volume_mounts: list[Any] = []
    volume_claim_templates: list[Any] = []
    # Values keep their YAML types; checked value by value in rules.py.
    node_config: dict[str, Any] = {}


class SuperNodes(Model):
    image: Optional[str] = Field(default=None, description="Default flwr/supernode:<version>.")
    env: list[Any] = []
    pools: list[Pool] = []


class Cli(Model):
    """How the exported `flwr` connection config reaches the SuperLink."""

    connection_name: Optional[str] = Field(default=None, description="Name of the SuperLink connection / federation in the flwr config (default: the federation name).")
    address: Optional[str] = Field(default=None, description="Control API address the CLI dials (default: the in-cluster Service address). Set it to your port-forward or load balancer address.")
    root_certificates: Optional[str] = Field(default=None, description="Absolute path of the CA certificate where flwr runs (default: /etc/flower/ca/ca.crt, where the federation's pods mount it).")


class Federation(Model):
    name: Optional[str] = Field(default=None, description="DNS label, prefix of every object name (default: the stack name).")
    namespace: str = "flower"
    create_namespace: bool = True
    labels: dict[str, str] = Field(default={}, description="Extra labels on every object (never in selectors).")
    mode: Literal["StatefulSet", "DaemonSet"] = "StatefulSet"
    isolation_mode: Literal["subprocess", "process"] = "subprocess"
    superexec_placement: Literal["sidecar", "distributed"] = Field(
        default="sidecar",
        description="process isolation only: SuperExec as a sidecar, or in its own workload (the Helm chart's 'Isolation Distributed').",
    )
    version: Optional[str] = None
    insecure: bool = Field(default=False, description="Turn TLS off. Unlike the operator, TLS is on by default.")
    cluster_domain: str = "cluster.local"
    allow_runtime_dependency_installation: bool = Field(
        default=False,
        description="Flower 1.29+: let Flower `uv sync` app dependencies at run time (needs egress to a package index). Off by default: images carry their dependencies.",
    )
    superlink: SuperLink = SuperLink()
    supernodes: SuperNodes = SuperNodes()
    cli: Cli = Cli()


def json_schema() -> dict[str, Any]:
    return Federation.model_json_schema(by_alias=True)
