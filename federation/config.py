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


class NetworkPolicy(Model):
    """The Helm chart's NetworkPolicy knobs. Set globally (`federation.networkPolicy`,
    whose unset fields take the defaults below) and per component (`superlink`,
    `supernodes`, a pool), where an unset field inherits."""

    enabled: Optional[bool] = Field(default=None, description="Default true: a default-deny policy per component plus exactly what Flower needs.")
    allow_external: Optional[bool] = Field(default=None, description="Default false. SuperLink: accept Fleet traffic from anywhere (SuperNodes in other clusters; in the HTTP era Fleet and Control share the port). Pools (distributed only): accept the SuperNode's plaintext Runtime/ClientAppIo API from anywhere.")
    allow_external_egress: Optional[bool] = Field(default=None, description="Default false: egress only to DNS and the Flower peers. true: unrestricted egress (e.g. ClientApps fetching data).")
    extra_ingress: Optional[list[Any]] = Field(default=None, description="Extra NetworkPolicyIngressRules for this component.")
    extra_egress: Optional[list[Any]] = Field(default=None, description="Extra NetworkPolicyEgressRules (ignored when allowExternalEgress).")
    ingress_pod_match_labels: Optional[dict[str, str]] = Field(default=None, description="Pods of this namespace with these labels may reach the component's API ports (SuperLink: Fleet and Control).")
    ingress_ns_match_labels: Optional[dict[str, str]] = Field(default=None, alias="ingressNSMatchLabels", description="Namespaces with these labels may reach the component's API ports.")
    ingress_ns_pod_match_labels: Optional[dict[str, str]] = Field(default=None, alias="ingressNSPodMatchLabels", description="With ingressNSMatchLabels: only pods with these labels in those namespaces.")


class ProbeSettings(Model):
    enabled: bool = True
    initial_delay_seconds: int = Field(default=0, ge=0)
    period_seconds: int = Field(default=10, ge=1)
    timeout_seconds: int = Field(default=1, ge=1)
    failure_threshold: int = Field(default=3, ge=1)
    success_threshold: int = Field(default=1, ge=1, description="Must be 1 for livenessProbe (a Kubernetes rule).")


class Probes(Model):
    """The Helm chart's probe parameters. Probes hit Flower's real health endpoint: the
    gRPC health server (`--health-server-address`), or `GET /health` on the HTTP-era
    SuperLink's API port (HTTPS when TLS is on)."""

    liveness_probe: ProbeSettings = ProbeSettings()
    readiness_probe: ProbeSettings = ProbeSettings()
    startup_probe: ProbeSettings = Field(
        default=ProbeSettings.model_validate({"periodSeconds": 5, "failureThreshold": 24}),
        description="Holds liveness off while a program starts (up to 2 minutes by default): a SuperLink killed during its first database migration would leave a half-migrated --database behind.",
    )


class DisruptionBudget(Model):
    enabled: bool = True
    max_unavailable: Optional[int | str] = Field(default=None, description="Default 1 when minAvailable is unset.")
    min_available: Optional[int | str] = None


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
    network_policy: NetworkPolicy = NetworkPolicy()
    probes: Optional[Probes] = Field(default=None, description="Default: federation.probes.")


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
    network_policy: NetworkPolicy = NetworkPolicy()
    disruption_budget: DisruptionBudget = Field(default=DisruptionBudget(), description="A PodDisruptionBudget for the pool's SuperNodes (maxUnavailable 1 by default).")


class SuperNodes(Model):
    image: Optional[str] = Field(default=None, description="Default flwr/supernode:<version>.")
    env: list[Any] = []
    pools: list[Pool] = []
    network_policy: NetworkPolicy = NetworkPolicy()
    probes: Optional[Probes] = Field(default=None, description="Default: federation.probes. Also used for the ClientApp SuperExecs.")


class GeneratedCertificate(Model):
    validity_hours: int = Field(default=8760, ge=1, description="Server certificate validity (default one year).")
    early_renewal_hours: int = Field(default=720, ge=0, description="A `pulumi up` this long before expiry issues a new certificate (and rolls the pods).")
    ca_validity_hours: int = Field(default=87600, ge=1, description="CA validity (default ten years).")


class IssuerRef(Model):
    name: str
    kind: Literal["Issuer", "ClusterIssuer"] = "Issuer"
    group: str = "cert-manager.io"


class CertManager(Model):
    issuer_ref: Optional[IssuerRef] = None
    duration: str = Field(default="43800h", description="The chart's default.")
    renew_before: str = Field(default="360h", description="The chart's default.")


class TrustSource(Model):
    """What SuperNodes and SuperExecs trust, kept in a Secret of its own (never the one
    holding the server key)."""

    source: Optional[Literal["generated", "existingSecret", "copyFromServerSecret"]] = Field(
        default=None,
        description="Default: generated for tls.source=generate, else copyFromServerSecret (ca.crt, else tls.crt, as the chart's copyFromExistingSecret).",
    )
    existing_secret: Optional[str] = Field(default=None, description="trust.source=existingSecret: Secret holding the CA certificate.")
    key: str = Field(default="ca.crt", description="trust.source=existingSecret: the key holding the CA certificate.")


class Tls(Model):
    source: Literal["generate", "certManager", "existingSecret"] = Field(
        default="generate",
        description="generate: a CA and server certificate made by pulumi-tls, kept as secrets in Pulumi state. certManager: a cert-manager Certificate. existingSecret: a kubernetes.io/tls Secret you manage.",
    )
    existing_secret: Optional[str] = Field(default=None, description="source=existingSecret: a kubernetes.io/tls Secret (tls.crt, tls.key, optional ca.crt).")
    dns_names: list[str] = Field(default=[], description="Extra names the SuperLink is reached by (load balancer, ingress), added to the certificate.")
    ip_addresses: list[str] = Field(default=[], description="Extra IP addresses added to the certificate.")
    generate: GeneratedCertificate = GeneratedCertificate()
    cert_manager: CertManager = CertManager()
    trust: TrustSource = TrustSource()


class NodeAuth(Model):
    enabled: bool = Field(default=False, description="The SuperLink accepts only registered SuperNodes; each SuperNode replica gets its own ECDSA P-384 key.")
    key_source: Literal["generate", "config"] = Field(
        default="generate",
        description="generate: one pulumi-tls key per replica. config: keys from the secret stack config key `nodeAuthKeys` ({pool: {slot: OpenSSH private key}}, slot = ordinal, or node name for DaemonSets).",
    )


class Executor(Model):
    type: Literal["subprocess", "kubernetes"] = Field(
        default="subprocess",
        description="kubernetes (Flower 1.32+, process isolation, distributed placement): SuperExecs run each ServerApp/ClientApp as a pod.",
    )
    image: Optional[str] = Field(default=None, description="TaskExecutor image (default: the SuperExec's image).")
    config: dict[str, Any] = Field(default={}, description="Extra keys of Flower's executor config (e.g. resources, node-selector, active-pod-budget).")


class Rbac(Model):
    viewer_groups: list[str] = Field(default=[], description="Groups bound to a read-only Role on the federation's namespace (no Secrets).")


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
    tls: Tls = Tls()
    node_auth: NodeAuth = NodeAuth()
    network_policy: NetworkPolicy = NetworkPolicy()
    probes: Probes = Probes()
    executor: Executor = Executor()
    rbac: Rbac = Rbac()
    security_context: dict[str, Any] = Field(default={}, description="Merged over the restricted container securityContext of every managed container (the chart's global.securityContext).")
    pod_security_context: dict[str, Any] = Field(default={}, description="Merged over the restricted pod securityContext (the chart's podSecurityContext).")
    default_resources: dict[str, Any] = Field(
        default={"requests": {"cpu": "100m", "memory": "256Mi"}},
        description="Requests (and limits, if given) for every managed container; a component's own resources override them key by key.",
    )


def json_schema() -> dict[str, Any]:
    return Federation.model_json_schema(by_alias=True)
