"""The `flower-federation:federation` stack config: a superset of the flower-operator
`Federation` CR's `spec`, with the same field names and meanings.

Field-level shape (types, enums, unknown keys) is checked here by pydantic; rules that
span fields (the operator's CEL rules, versions, names) live in `rules.py`. Kubernetes
fragments (`podTemplate`, `env`, `resources`, volumes, ...) are plain data here and are
checked against the Kubernetes OpenAPI schema by `k8s_schema.py`.

Field descriptions and model docstrings are the README's config reference (`make docs`, `reference.py`):
they say what the code does. `N` stands for the federation's name, `P` for a pool's.
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
    """Ports of the SuperLink's container and Service; the SuperNodes' address follows. Only the keys of the
    federation's Flower dialect may be set; gRPC-era ports must be distinct."""

    grpc: Optional[int] = Field(default=None, ge=1, le=65535, description="gRPC era: Fleet API port. Unset: 9092.")
    server_app_io: Optional[int] = Field(default=None, ge=1, le=65535, alias="serverAppIO", description=(
        "gRPC era: ServerAppIo API port. Unset: 9091. Bound to 127.0.0.1 in the SuperLink's pod, except with "
        "distributed SuperExec, which reaches it through the ClusterIP Service `N-superlink-serverappio`; never on "
        "`N-superlink`."))
    extra: Optional[int] = Field(default=None, ge=1, le=65535, description=(
        "gRPC era: Control API port (what `flwr` dials). Unset: 9093."))
    http: Optional[int] = Field(default=None, ge=1, le=65535, description=(
        "HTTP era: the one API port for Fleet, Control and the Runtime API. Unset: 8000."))


class NetworkPolicy(Model):
    """The Helm chart's NetworkPolicy knobs. Set at the top level for every component, and under
    `superlink`, `supernodes` or a pool for that component: a key set there wins over the top level (a pool's
    over `supernodes`'), and a key set nowhere takes the default given here. The ServerApp SuperExec (and its
    task pods) follows `superlink`; a pool's SuperExecs and task pods follow the pool."""

    enabled: Optional[bool] = Field(default=None, description=(
        "Default `true`: a NetworkPolicy per component that denies ingress and egress except what Flower needs. "
        "`false`: the component's traffic is not restricted."))
    allow_external: Optional[bool] = Field(default=None, description=(
        "Default `false`. SuperLink: accept the Fleet API from anywhere (SuperNodes in other clusters; in the HTTP era "
        "Fleet and Control share the port). A pool, with distributed SuperExec only: accept the SuperNodes' plaintext "
        "ClientAppIo/Runtime API (9094) from anywhere."))
    allow_external_egress: Optional[bool] = Field(default=None, description=(
        "Default `false`: egress only to cluster DNS and the Flower peers. `true`: any egress (e.g. ClientApps "
        "fetching data)."))
    extra_ingress: Optional[list[Any]] = Field(default=None, description=(
        "Default `[]`. NetworkPolicyIngressRules (schema-checked) added to the component's policy."))
    extra_egress: Optional[list[Any]] = Field(default=None, description=(
        "Default `[]`. NetworkPolicyEgressRules (schema-checked) added to the component's policy (no effect with "
        "`allowExternalEgress`)."))
    ingress_pod_match_labels: Optional[dict[str, str]] = Field(default=None, description=(
        "Default `{}`. Pods of the federation's namespace with these labels may reach the component's API ports "
        "(SuperLink: Fleet and Control; a pool, with distributed SuperExec only: 9094)."))
    ingress_ns_match_labels: Optional[dict[str, str]] = Field(default=None, alias="ingressNSMatchLabels", description=(
        "Default `{}`. Pods in namespaces with these labels may reach the component's API ports."))
    ingress_ns_pod_match_labels: Optional[dict[str, str]] = Field(
        default=None, alias="ingressNSPodMatchLabels", description=(
            "Default `{}`. Only with `ingressNSMatchLabels`: of those namespaces, only pods with these labels."))


class ProbeSettings(Model):
    """One probe's parameters, as the Helm chart names them."""

    enabled: bool = Field(default=True, description="Give the managed containers this probe.")
    initial_delay_seconds: int = Field(default=0, ge=0, description="Seconds before the first probe.")
    period_seconds: int = Field(default=10, ge=1, description="Seconds between probes.")
    timeout_seconds: int = Field(default=1, ge=1, description="Seconds before a probe counts as failed.")
    failure_threshold: int = Field(default=3, ge=1, description="Failures in a row before the probe fails.")
    success_threshold: int = Field(default=1, ge=1, description=(
        "Successes in a row before the probe passes again; must be 1 for livenessProbe and startupProbe (a Kubernetes "
        "rule)."))


class Probes(Model):
    """The Helm chart's probe parameters. Probes hit Flower's real health endpoint: the
    gRPC health server (`--health-server-address`), or `GET /health` on the HTTP-era
    SuperLink's API port (HTTPS when TLS is on). Flower 1.43 removes the gRPC health server:
    from then on only the SuperLink gets probes. `superlink.probes` and `supernodes.probes`
    replace these settings as a whole for their side: keys left out there take the defaults
    given here, not the top level's values."""

    liveness_probe: ProbeSettings = Field(default=ProbeSettings(), description="Failing it restarts the container.")
    readiness_probe: ProbeSettings = Field(default=ProbeSettings(), description="Failing it marks the pod not ready.")
    startup_probe: ProbeSettings = Field(
        default=ProbeSettings.model_validate({"periodSeconds": 5, "failureThreshold": 24}), description=(
            "Holds liveness off while a program starts, up to 2 minutes by default (5 s × 24): a SuperLink killed "
            "during its first database migration would leave a half-migrated `--database` behind (seen by the e2e "
            "harness on a loaded machine)."))


class DisruptionBudget(Model):
    enabled: bool = Field(default=True, description="Create the PodDisruptionBudget.")
    max_unavailable: Optional[int | str] = Field(default=None, description=(
        "A count or a percentage (`\"25%\"`). Unset: 1, unless minAvailable is set."))
    min_available: Optional[int | str] = Field(default=None, description=(
        "A count or a percentage; instead of maxUnavailable (setting both is an error)."))


class SuperLinkService(Model):
    type: Literal["ClusterIP", "NodePort", "LoadBalancer"] = Field(default="ClusterIP", description="Service type.")
    ports: ServicePorts = ServicePorts()
    labels: dict[str, str] = Field(default={}, description="Extra labels on the Service (ours win on a clash).")
    annotations: dict[str, str] = Field(default={}, description="Annotations on the Service (e.g. a load balancer's).")


class Persistence(Model):
    enabled: bool = Field(default=True, description=(
        "Keep the SuperLink's state (runs, registered SuperNodes) across restarts: a PVC `state` at /var/lib/flower "
        "and `--database /var/lib/flower/state.db`. `false`: state lives in memory."))
    size: str = Field(default="1Gi", description="Storage the `state` PVC requests (a Kubernetes quantity).")
    storage_class_name: Optional[str] = Field(default=None, description=(
        "StorageClass of the `state` PVC. Unset: the cluster's default."))


class SuperLink(Model):
    """The SuperLink: StatefulSet `N-superlink` (one replica) and Service `N-superlink`; in `process`
    isolation also the ServerApp SuperExec, as a sidecar or (distributed) Deployment `N-superexec-serverapp`."""

    image: Optional[str] = Field(default=None, description=(
        "Unset: `flwr/superlink:<version>`. Its tag, if it is a version, must be of the federation's Flower dialect."))
    superexec_image: Optional[str] = Field(default=None, description=(
        "ServerApp SuperExec image: required in `process` isolation, forbidden in `subprocess`."))
    resources: Optional[dict[str, Any]] = Field(default=None, description=(
        "ResourceRequirements of the SuperLink container (and of its `init-state` init container), over "
        "`defaultResources`."))
    superexec_resources: Optional[dict[str, Any]] = Field(default=None, description=(
        "ResourceRequirements of the ServerApp SuperExec, over `defaultResources`."))
    env: list[Any] = Field(default=[], description="EnvVars of the SuperLink and its ServerApp SuperExec.")
    extra_args: list[str] = Field(default=[], description=(
        "Appended to the SuperLink's args; Kubernetes expands `$(VAR)` in them."))
    pod_template: Optional[dict[str, Any]] = Field(default=None, description=(
        "PodTemplateSpec merged into the SuperLink's pod (see `podTemplate` below)."))
    service: SuperLinkService = Field(default=SuperLinkService(), description=(
        "Service `N-superlink`: Fleet and Control (gRPC era) or the one API port (HTTP era), never a plaintext in-pod "
        "API."))
    volumes: list[Any] = Field(default=[], description="Volumes added to the SuperLink's pod.")
    volume_mounts: list[Any] = Field(default=[], description="VolumeMounts added to the SuperLink container.")
    volume_claim_templates: list[Any] = Field(default=[], description=(
        "PersistentVolumeClaims added to the SuperLink's StatefulSet, next to `state`."))
    persistence: Persistence = Persistence()
    network_policy: NetworkPolicy = Field(default=NetworkPolicy(), description=(
        "For the SuperLink and its ServerApp SuperExec, over `networkPolicy`."))
    probes: Optional[Probes] = Field(default=None, description=(
        "Replaces `probes` for the SuperLink and its ServerApp SuperExec. Unset: `probes`."))


class PoolImages(Model):
    supernode: Optional[str] = Field(default=None, description=(
        "Unset: `supernodes.image`, else `flwr/supernode:<version>`."))
    superexec_client_app: Optional[str] = Field(default=None, description=(
        "ClientApp SuperExec image: required in `process` isolation, forbidden in `subprocess`."))


class Gpu(Model):
    """GPUs for the container that runs ClientApps: the SuperNode in `subprocess` isolation, the
    ClientApp SuperExec in `process` isolation."""

    enabled: bool = Field(default=False, description="Give the pool GPUs; the other `gpu` keys act only with it.")
    vendor: Optional[Literal["nvidia", "amd"]] = Field(default=None, description=(
        "Picks the default `resourceName` and what `mountAll` does; required with mountAll."))
    resource_name: Optional[str] = Field(default=None, description=(
        "Extended resource put in the container's limits. Unset: `nvidia.com/gpu` or `amd.com/gpu` by vendor (without "
        "mountAll, set one of the two)."))
    count: int = Field(default=1, ge=1, description="How many of `resourceName` the limits ask for.")
    mount_all: bool = Field(default=False, description=(
        "Every GPU of the node instead of a resource limit. nvidia: the pod's `runtimeClassName` and "
        "`NVIDIA_VISIBLE_DEVICES=all`; amd: hostPath mounts of /dev/kfd and /dev/dri, `ROCR_VISIBLE_DEVICES=all` and a "
        "privileged container (needs allowPrivileged)."))
    runtime_class_name: str = Field(default="nvidia", description="RuntimeClass that nvidia mountAll sets.")
    allow_privileged: bool = Field(default=False, description=(
        "AMD mountAll needs a privileged container to open /dev/kfd and /dev/dri; it must be asked for explicitly."))


class Pool(Model):
    """A pool of SuperNodes, `P`: StatefulSet `N-supernode-P` with a headless Service of that name (mode
    StatefulSet) or DaemonSet `N-supernode-P` (mode DaemonSet), with its ServiceAccount, NetworkPolicy and
    PodDisruptionBudget. In `process` isolation each SuperNode gets a ClientApp SuperExec: a sidecar or
    (distributed) replica k of StatefulSet `N-superexec-P`."""

    name: str = Field(description="Unique DNS-1123 label (lowercase letters, digits and `-`).")
    replicas: Optional[int] = Field(default=None, description=(
        "Number of SuperNodes: required (≥ 1) in StatefulSet mode, forbidden in DaemonSet mode."))
    images: PoolImages = PoolImages()
    gpu: Gpu = Gpu()
    supernode_resources: Optional[dict[str, Any]] = Field(default=None, description=(
        "ResourceRequirements of the SuperNode container, over `defaultResources`."))
    superexec_resources: Optional[dict[str, Any]] = Field(default=None, description=(
        "ResourceRequirements of the ClientApp SuperExec, over `defaultResources`."))
    pod_template: Optional[dict[str, Any]] = Field(default=None, description=(
        "PodTemplateSpec merged into the pool's pods, distributed SuperExecs' too (see `podTemplate` below)."))
    extra_args: list[str] = Field(default=[], description=(
        "Appended to the SuperNode's args; Kubernetes expands `$(VAR)` in them."))
    env: list[Any] = Field(default=[], description=(
        "EnvVars of the pool's SuperNodes and ClientApp SuperExecs, over `supernodes.env`."))
    volumes: list[Any] = Field(default=[], description="Volumes added to the pool's pods, distributed SuperExecs' too.")
    volume_mounts: list[Any] = Field(default=[], description="VolumeMounts added to the SuperNode container.")
    superexec_volume_mounts: list[Any] = Field(default=[], description=(
        "VolumeMounts added to the ClientApp SuperExec container."))
    volume_claim_templates: list[Any] = Field(default=[], description=(
        "PersistentVolumeClaims of the pool's StatefulSet (StatefulSet mode only); with distributed SuperExec each "
        "StatefulSet gets the claims its own mounts use."))
    # Values keep their YAML types; checked value by value in rules.py.
    node_config: dict[str, Any] = Field(default={}, description=(
        "`--node-config` of every SuperNode of the pool, YAML types kept, with placeholders `{index}`, `{replicas}`, "
        "`{pool}`, `{node}` (see `nodeConfig` below)."))
    network_policy: NetworkPolicy = Field(default=NetworkPolicy(), description=(
        "For the pool's SuperNodes, SuperExecs and task pods, over `supernodes.networkPolicy`."))
    disruption_budget: DisruptionBudget = Field(default=DisruptionBudget(), description=(
        "PodDisruptionBudget `N-supernode-P` over the pool's SuperNodes."))


class SuperNodes(Model):
    """Settings of every pool, and the pools."""

    image: Optional[str] = Field(default=None, description="Unset: `flwr/supernode:<version>`.")
    env: list[Any] = Field(default=[], description=(
        "EnvVars of every pool's SuperNodes and ClientApp SuperExecs (a pool's `env` wins by name; the order stays "
        "stable)."))
    pools: list[Pool] = Field(default=[], description="1 to 16 pools.")
    network_policy: NetworkPolicy = Field(default=NetworkPolicy(), description="For every pool, over `networkPolicy`.")
    probes: Optional[Probes] = Field(default=None, description=(
        "Replaces `probes` for SuperNodes and ClientApp SuperExecs. Unset: `probes`."))


class GeneratedCertificate(Model):
    """`source: generate`: lifetimes of the pulumi-tls CA and server certificate."""

    validity_hours: int = Field(default=8760, ge=1, description="Server certificate validity (one year).")
    early_renewal_hours: int = Field(default=720, ge=0, description=(
        "A `pulumi up` this close to a certificate's expiry issues a new one (and rolls the pods); less than "
        "validityHours."))
    ca_validity_hours: int = Field(default=87600, ge=1, description="CA validity (ten years).")


class IssuerRef(Model):
    """The cert-manager issuer of the SuperLink certificate; required for `source: certManager`."""

    name: str = Field(description="Name of the Issuer or ClusterIssuer.")
    kind: Literal["Issuer", "ClusterIssuer"] = Field(default="Issuer", description="Its kind.")
    group: str = Field(default="cert-manager.io", description="Its API group.")


class CertManager(Model):
    """`source: certManager`: a cert-manager Certificate `N-superlink`; Pulumi waits until it is Ready."""

    issuer_ref: Optional[IssuerRef] = None
    duration: str = Field(default="43800h", description="Certificate lifetime, a Go duration (the chart's default).")
    renew_before: str = Field(default="360h", description=(
        "cert-manager renews this long before expiry; shorter than duration (the chart's default)."))


class TrustSource(Model):
    """What SuperNodes and SuperExecs trust, kept in a Secret of its own (never the one
    holding the server key)."""

    source: Optional[Literal["generated", "existingSecret", "copyFromServerSecret"]] = Field(default=None, description=(
        "generated: the CA pulumi-tls made (only with source generate). copyFromServerSecret: the server Secret's "
        "`ca.crt` (else `tls.crt`) copied into Secret `N-ca` at deploy time, as the chart's copyFromExistingSecret. "
        "existingSecret: a CA Secret you manage. Unset: generated for source generate, else copyFromServerSecret."))
    existing_secret: Optional[str] = Field(default=None, description=(
        "`trust.source: existingSecret`: the Secret holding the CA certificate."))
    key: str = Field(default="ca.crt", description="`trust.source: existingSecret`: the CA certificate's key in it.")


class Tls(Model):
    """TLS on the SuperLink's Fleet and Control APIs (HTTP era: also the Runtime API its SuperExecs dial). Plaintext
    by Flower's design: the gRPC-era ServerAppIo API and the SuperNodes' ClientAppIo/Runtime API, which leave a pod
    only with distributed SuperExecs. The SuperLink mounts the server certificate and key; SuperNodes and
    SuperExecs mount only the CA. Any `tls` key together with `insecure: true` is an error."""

    source: Literal["generate", "certManager", "existingSecret"] = Field(default="generate", description=(
        "generate: a CA and a server certificate (ECDSA P-256) made by pulumi-tls, kept as secrets in Pulumi state, in "
        "Secrets `N-superlink-tls` and `N-ca`. certManager: a cert-manager Certificate. existingSecret: a "
        "kubernetes.io/tls Secret you manage."))
    existing_secret: Optional[str] = Field(default=None, description=(
        "Only with source existingSecret: the kubernetes.io/tls Secret (`tls.crt`, `tls.key`, optional `ca.crt`)."))
    dns_names: list[str] = Field(default=[], description=(
        "Extra DNS names of a generated or cert-manager certificate (load balancer, ingress), besides the Service's "
        "in-cluster names and localhost."))
    ip_addresses: list[str] = Field(default=[], description=(
        "Extra IP addresses of a generated or cert-manager certificate, besides 127.0.0.1."))
    generate: GeneratedCertificate = GeneratedCertificate()
    cert_manager: CertManager = CertManager()
    trust: TrustSource = TrustSource()


class NodeAuth(Model):
    """SuperNode authentication (Flower 1.23+, needs TLS): see "Node authentication, step by step"."""

    enabled: bool = Field(default=False, description=(
        "The SuperLink runs with `--enable-supernode-auth` and accepts only registered SuperNodes; each SuperNode gets "
        "its own ECDSA P-384 key from Secret `N-supernode-P-node-keys`."))
    key_source: Literal["generate", "config"] = Field(default="generate", description=(
        "generate: one pulumi-tls key per replica. config: keys from the secret stack config key `nodeAuthKeys` (see "
        "below); required for DaemonSets."))


class Executor(Model):
    """How SuperExecs run ServerApps and ClientApps."""

    type: Literal["subprocess", "kubernetes"] = Field(default="subprocess", description=(
        "kubernetes (Flower 1.32+, process isolation, distributed placement): each SuperExec runs every app as a pod "
        "(see \"Kubernetes executor\")."))
    image: Optional[str] = Field(default=None, description=(
        "Only with type kubernetes: the task pods' image. Unset: the SuperExec's image."))
    config: dict[str, Any] = Field(default={}, description=(
        "Only with type kubernetes: keys of Flower's executor config over ours (e.g. `resources`, `node-selector`, "
        "`active-pod-budget`); `labels` merge; `namespace` and `service-account-name` may not be set."))


class Rbac(Model):
    viewer_groups: list[str] = Field(default=[], description=(
        "Groups bound to Role `N-viewer`: get/list/watch on the namespace's pods and their logs, Services, ConfigMaps, "
        "PVCs, workloads, NetworkPolicies, PDBs and events; never Secrets."))


class Cli(Model):
    """How the exported `flwr` connection config (stack output `flwrConfig`) reaches the SuperLink."""

    connection_name: Optional[str] = Field(default=None, description=(
        "Name of the connection (federation) in the flwr config. Unset: `name`."))
    address: Optional[str] = Field(default=None, description=(
        "Control API address `flwr` dials, e.g. a port-forward's or load balancer's. Unset: the in-cluster Service "
        "address."))
    root_certificates: Optional[str] = Field(default=None, description=(
        "Path of the CA certificate where `flwr` runs; absolute for Flower 1.26+. Unset: /etc/flower/ca/ca.crt, where "
        "the federation's pods mount it."))


class Federation(Model):
    """The value of the `flower-federation:federation` stack config key."""

    name: Optional[str] = Field(default=None, description=(
        "`N`, the prefix of every object name: a DNS-1035 label (lowercase letters, digits and `-`, starting with a "
        "letter). Unset: the stack name."))
    namespace: str = Field(default="flower", description="Namespace of every object; a DNS-1123 label.")
    create_namespace: bool = Field(default=True, description=(
        "Create the namespace, labelled with the strictest Pod Security level its pods meet "
        "(`pod-security.kubernetes.io/enforce` and `warn`)."))
    labels: dict[str, str] = Field(default={}, description=(
        "Extra labels on every object (ours win on a clash); never in selectors."))
    mode: Literal["StatefulSet", "DaemonSet"] = Field(default="StatefulSet", description=(
        "Workload of every pool: StatefulSet (`replicas` SuperNodes) or DaemonSet (one SuperNode per eligible node)."))
    isolation_mode: Literal["subprocess", "process"] = Field(default="subprocess", description=(
        "subprocess: the SuperLink and SuperNodes run ServerApps and ClientApps as child processes. process: "
        "SuperExecs run them."))
    superexec_placement: Literal["sidecar", "distributed"] = Field(default="sidecar", description=(
        "process isolation only: SuperExecs as sidecars, or in workloads of their own (StatefulSet mode; the Helm "
        "chart's 'Isolation Distributed')."))
    version: Optional[str] = Field(default=None, description=(
        "Flower version, a string (YAML reads `1.41` as a number; `1.41.0` is fine): picks the dialect of every "
        "command line and port. Unset: `superlink.image`'s tag, else 1.41.0."))
    insecure: bool = Field(default=False, description=(
        "`true` turns TLS off (operator-compatible; the operator's default is `true`)."))
    cluster_domain: str = Field(default="cluster.local", description=(
        "Used in in-cluster addresses and the certificate's names."))
    allow_runtime_dependency_installation: bool = Field(default=False, description=(
        "Flower 1.29+: let Flower `uv sync` app dependencies at run time (egress to port 443 anywhere). Off: images "
        "carry their dependencies."))
    superlink: SuperLink = SuperLink()
    supernodes: SuperNodes = SuperNodes()
    cli: Cli = Cli()
    tls: Tls = Tls()
    node_auth: NodeAuth = NodeAuth()
    network_policy: NetworkPolicy = NetworkPolicy()
    probes: Probes = Probes()
    executor: Executor = Executor()
    rbac: Rbac = Rbac()
    security_context: dict[str, Any] = Field(default={}, description=(
        "Merged key by key over the restricted securityContext of every managed container (the chart's "
        "`global.securityContext`)."))
    pod_security_context: dict[str, Any] = Field(default={}, description=(
        "Merged key by key over the restricted pod securityContext (the chart's `podSecurityContext`)."))
    default_resources: dict[str, Any] = Field(default={"requests": {"cpu": "100m", "memory": "256Mi"}}, description=(
        "ResourceRequirements of every managed container and task pod; a component's own resources win key by key (a "
        "limit below a default request lowers the request)."))


def json_schema() -> dict[str, Any]:
    return Federation.model_json_schema(by_alias=True)
