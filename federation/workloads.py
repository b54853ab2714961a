"""Every Kubernetes object of a federation, as plain manifests (dicts).

The Pulumi components register exactly these; `render` prints them. Keeping them plain
data makes them testable without Pulumi and byte-for-byte deterministic.
"""

from __future__ import annotations

import copy
from typing import Any, Optional

from . import access, network, nodeauth, pods, probes, pss
from .config import Pool
from .dialects import (
    ANY_ADDRESS,
    HEALTH_PORT,
    LOOPBACK,
    SIDECAR_HEALTH_PORT,
    STATE_MIGRATION_SCRIPT,
    SUPERNODE_APPIO_PORT,
    ServerTls,
    health_server_args,
    needs_state_init,
)
from .naming import (
    INIT_STATE,
    SUPEREXEC_CLIENTAPP,
    SUPEREXEC_SERVERAPP,
    SUPERLINK,
    SUPERNODE,
    common_labels,
    selector_labels,
)
from .nodeconfig import POD_INDEX_ENV, render_node_config, uses_placeholder
from .plan import FederationPlan

Manifest = dict[str, Any]

GPU_RESOURCE_BY_VENDOR = {"nvidia": "nvidia.com/gpu", "amd": "amd.com/gpu"}


def _meta(plan: FederationPlan, name: str, labels: dict[str, str], annotations: Optional[dict] = None) -> dict:
    meta: dict[str, Any] = {"name": name, "namespace": plan.namespace, "labels": labels}
    if annotations:
        meta["annotations"] = dict(annotations)
    return meta


def _labels(plan: FederationPlan, component: str, pool: Optional[str] = None) -> dict[str, str]:
    return common_labels(plan.name, component, str(plan.version), pool, plan.spec.labels)


def _secret_volume(name: str, secret: str, items: dict[str, str], mode: int) -> dict[str, Any]:
    """A Secret volume exposing exactly `items` (key -> file name)."""
    return {"name": name, "secret": {"secretName": secret, "defaultMode": mode,
                                     "items": [{"key": k, "path": path} for k, path in items.items()]}}


def _ca_volume(plan: FederationPlan) -> list[dict]:
    if not plan.trust:
        return []
    return [_secret_volume(pods.CA_VOLUME, plan.trust.ca_secret, {plan.trust.ca_key: "ca.crt"}, 0o444)]


def _container(plan: FederationPlan, name: str, image: str, args: list[str], *, env=None, resources=None,
               mounts=None, privileged: bool = False, health: Optional[dict] = None) -> dict:
    """A managed container: default resources under the component's own, the restricted
    securityContext with the user's overrides, and probes."""
    c = pods.container(name, image, args, env=env,
                       resources=pods.merge_resources(plan.spec.default_resources, resources),
                       mounts=mounts, privileged=privileged, security_overrides=plan.spec.security_context)
    c.update(health or {})
    return c


def _template(plan: FederationPlan, labels: dict, containers: list[dict], volumes: list[dict], *,
              service_account: str, api_token: bool = False, annotations: Optional[dict] = None,
              init_containers: Optional[list[dict]] = None) -> dict:
    return pods.pod_template(labels, containers, volumes, annotations, service_account=service_account,
                             api_token=api_token, security_overrides=plan.spec.pod_security_context,
                             init_containers=init_containers)


def _state_init_container(plan: FederationPlan) -> dict:
    """Creates the SuperLink's database schema before it starts (see dialects)."""
    c = _container(plan, INIT_STATE, plan.superlink_image, [f"{pods.STATE_DIR}/state.db"],
                   resources=plan.spec.superlink.resources,
                   mounts=[{"name": pods.STATE_VOLUME, "mountPath": pods.STATE_DIR}])
    # The image's Python (the entrypoint is flower-superlink, which cannot only migrate).
    c["command"] = ["python", "-c", STATE_MIGRATION_SCRIPT]
    return c


def _superlink_probes(plan: FederationPlan):
    return probes.pick(plan.spec.probes, plan.spec.superlink.probes)


def _supernode_probes(plan: FederationPlan):
    return probes.pick(plan.spec.probes, plan.spec.supernodes.probes)


def _node_auth(plan: FederationPlan) -> bool:
    return plan.spec.node_auth.enabled


def _ca_mount(plan: FederationPlan) -> list[dict]:
    return [{"name": pods.CA_VOLUME, "mountPath": pods.CA_DIR, "readOnly": True}] if plan.trust else []


def _client_ca_file(plan: FederationPlan) -> Optional[str]:
    return pods.CA_FILE if plan.trust else None


def namespace(plan: FederationPlan) -> Manifest:
    """Enforces the strictest Pod Security level every pod of the federation meets:
    `restricted` unless something (AMD mountAll, a weakened securityContext) needs more."""
    level = pss.namespace_level([t for t in pod_templates(plan)])
    labels = {**plan.spec.labels, "app.kubernetes.io/managed-by": "pulumi",
              "pod-security.kubernetes.io/enforce": level, "pod-security.kubernetes.io/warn": level}
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": plan.namespace, "labels": labels}}


# --- SuperLink ---------------------------------------------------------------------

def superlink_appio_address(plan: FederationPlan) -> str:
    """Where a SuperExec for ServerApps reaches the SuperLink's in-cluster API."""
    if not plan.distributed:
        return f"{LOOPBACK}:{plan.ports.serverappio or plan.ports.fleet}"
    if plan.ports.serverappio is not None:  # gRPC era: internal plaintext Service
        return f"{plan.service_host(plan.names.superlink_appio_service)}:{plan.ports.serverappio}"
    return plan.fleet_address  # HTTP era: the Runtime API shares the TLS port


def _serverapp_ca(plan: FederationPlan) -> Optional[str]:
    # HTTP era: the SuperExec dials the SuperLink's TLS port; gRPC era: plaintext AppIo.
    return _client_ca_file(plan) if plan.ports.serverappio is None else None


def _superexec_health_port(plan: FederationPlan) -> int:
    # A sidecar shares the pod's network namespace with the SuperLink/SuperNode.
    return HEALTH_PORT if plan.distributed else SIDECAR_HEALTH_PORT


def _superexec_serverapp_container(plan: FederationPlan) -> dict:
    sl = plan.spec.superlink
    port = _superexec_health_port(plan)
    args = plan.dialect.superexec_args(
        plugin="serverapp",
        appio_address=superlink_appio_address(plan),
        ca_file=_serverapp_ca(plan),
        runtime_dependency_installation=plan.spec.allow_runtime_dependency_installation,
    ) + health_server_args(plan.version, port)
    mounts = _ca_mount(plan) if _serverapp_ca(plan) else []
    if access.kubernetes_executor(plan):
        args += access.executor_args()
        mounts = mounts + [access.executor_config_mount()]
    return _container(plan, SUPEREXEC_SERVERAPP, sl.superexec_image, args, env=list(sl.env) or None,
                      resources=sl.superexec_resources, mounts=mounts,
                      health=probes.grpc_health(plan.version, port, _superlink_probes(plan)))


def superlink(plan: FederationPlan, pod_annotations: Optional[dict] = None) -> list[Manifest]:
    """The SuperLink's objects. `pod_annotations` (e.g. a checksum of the certificates
    it mounts, possibly a Pulumi Output) go on its pod template."""
    sl = plan.spec.superlink
    names = plan.names
    persist = sl.persistence.enabled
    tls = None
    if plan.trust:
        tls = ServerTls(ca_file=pods.CA_FILE, cert_file=f"{pods.TLS_DIR}/tls.crt", key_file=f"{pods.TLS_DIR}/tls.key")
    args = plan.dialect.superlink_args(
        isolation=plan.spec.isolation_mode,
        ports=plan.ports,
        serverappio_bind=ANY_ADDRESS if plan.distributed else LOOPBACK,
        database=f"{pods.STATE_DIR}/state.db" if persist else None,
        tls=tls,
        runtime_dependency_installation=plan.spec.allow_runtime_dependency_installation,
    )
    if _node_auth(plan):
        args.append("--enable-supernode-auth")
    grpc_era = plan.ports.serverappio is not None
    if grpc_era:
        args += health_server_args(plan.version, HEALTH_PORT)
        health = probes.grpc_health(plan.version, HEALTH_PORT, _superlink_probes(plan))
    else:
        health = probes.http_health("api", plan.trust is not None, _superlink_probes(plan))
    args += list(sl.extra_args)

    mounts: list[dict] = []
    volumes: list[dict] = []
    if plan.trust:
        mounts.append({"name": pods.TLS_VOLUME, "mountPath": pods.TLS_DIR, "readOnly": True})
        volumes.append(_secret_volume(pods.TLS_VOLUME, plan.trust.server_secret,
                                      {"tls.crt": "tls.crt", "tls.key": "tls.key"}, 0o440))
    mounts += _ca_mount(plan)
    volumes += _ca_volume(plan)
    if persist:
        mounts.append({"name": pods.STATE_VOLUME, "mountPath": pods.STATE_DIR})
    mounts += sl.volume_mounts
    volumes += sl.volumes

    service_ports = plan.dialect.service_ports(plan.ports)
    main = _container(plan, SUPERLINK, plan.superlink_image, args, env=list(sl.env) or None,
                      resources=sl.resources, mounts=mounts, health=health)
    main["ports"] = [{"name": p.name, "containerPort": p.port, "protocol": "TCP"} for p in service_ports]
    if plan.distributed and plan.ports.serverappio is not None:
        main["ports"].append({"name": "serverappio", "containerPort": plan.ports.serverappio, "protocol": "TCP"})
    containers = [main]
    if plan.process_isolation and not plan.distributed:
        containers.append(_superexec_serverapp_container(plan))

    init = []
    if persist and needs_state_init(plan.version):
        init.append(_state_init_container(plan))
    selector = selector_labels(plan.name, SUPERLINK)
    labels = _labels(plan, SUPERLINK)
    template = _template(plan, labels, containers, volumes, service_account=names.superlink,
                         annotations=pod_annotations, init_containers=init)
    template = pods.apply_pod_template(template, sl.pod_template)

    claims = []
    if persist:
        claim_spec: dict[str, Any] = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": sl.persistence.size}}}
        if sl.persistence.storage_class_name:
            claim_spec["storageClassName"] = sl.persistence.storage_class_name
        claims.append({"metadata": {"name": pods.STATE_VOLUME}, "spec": claim_spec})
    claims += [copy.deepcopy(c) for c in sl.volume_claim_templates]

    sts_spec: dict[str, Any] = {
        "replicas": 1,
        "serviceName": names.superlink,
        "selector": {"matchLabels": selector},
        "template": template,
    }
    if claims:
        sts_spec["volumeClaimTemplates"] = claims
    objects: list[Manifest] = [
        {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": _meta(plan, names.superlink, labels), "spec": sts_spec},
        {
            "apiVersion": "v1", "kind": "Service",
            "metadata": _meta(plan, names.superlink, {**sl.service.labels, **labels}, sl.service.annotations),
            "spec": {
                "type": sl.service.type,
                "selector": selector,
                "ports": [{"name": p.name, "port": p.port, "targetPort": p.name, "protocol": "TCP"} for p in service_ports],
            },
        },
    ]
    objects.append(access.service_account(plan, names.superlink, SUPERLINK))
    if plan.distributed:
        objects += _superlink_distributed(plan, selector, pod_annotations)
    objects += [p for p in network.policies(plan) if p["metadata"]["name"] in network.superlink_policy_names(plan)]
    return objects


def _superlink_distributed(plan: FederationPlan, superlink_selector: dict,
                           pod_annotations: Optional[dict]) -> list[Manifest]:
    names = plan.names
    out: list[Manifest] = []
    if plan.ports.serverappio is not None:
        # The plaintext ServerAppIo API, for the SuperExec only: never on the public Service.
        out.append({
            "apiVersion": "v1", "kind": "Service",
            "metadata": _meta(plan, names.superlink_appio_service, _labels(plan, SUPERLINK)),
            "spec": {"type": "ClusterIP", "selector": superlink_selector,
                     "ports": [{"name": "serverappio", "port": plan.ports.serverappio,
                                "targetPort": "serverappio", "protocol": "TCP"}]},
        })
    labels = _labels(plan, SUPEREXEC_SERVERAPP)
    volumes = _ca_volume(plan) if _serverapp_ca(plan) else []
    k8s_executor = access.kubernetes_executor(plan)
    if k8s_executor:
        volumes.append(access.executor_config_volume(plan, names.superexec_serverapp))
        out.append(access.executor_config_map(plan, names.superexec_serverapp, "serverapp",
                                              plan.spec.superlink.superexec_image))
        out.append(access.executor_role_binding(plan, names.superexec_serverapp))
    template = _template(plan, labels, [_superexec_serverapp_container(plan)], volumes,
                         service_account=names.superexec_serverapp, api_token=k8s_executor,
                         annotations=pod_annotations if _serverapp_ca(plan) else None)
    out.append(access.service_account(plan, names.superexec_serverapp, SUPEREXEC_SERVERAPP, api_token=k8s_executor))
    out.append({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": _meta(plan, names.superexec_serverapp, labels),
        "spec": {"replicas": 1, "selector": {"matchLabels": selector_labels(plan.name, SUPEREXEC_SERVERAPP)},
                 "template": template},
    })
    return out


# --- SuperNode pools -----------------------------------------------------------------

def _gpu_target(plan: FederationPlan) -> str:
    """The container that runs ClientApps gets the GPU."""
    return SUPEREXEC_CLIENTAPP if plan.process_isolation else SUPERNODE


def _apply_gpu(pool: Pool, c: dict, template: dict) -> None:
    gpu = pool.gpu
    if not gpu.enabled:
        return
    if gpu.mount_all:
        if gpu.vendor == "nvidia":
            template["spec"]["runtimeClassName"] = gpu.runtime_class_name
            c["env"] = pods.merge_env(c.get("env", []), [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}])
        else:
            c["env"] = pods.merge_env(c.get("env", []), [{"name": "ROCR_VISIBLE_DEVICES", "value": "all"}])
            c["securityContext"] = pods.container_security_context(privileged=True)
            for vol, path in pods.AMD_DEVICES.items():
                template["spec"]["volumes"].append({"name": vol, "hostPath": {"path": path}})
                c["volumeMounts"].append({"name": vol, "mountPath": path})
        return
    resource = gpu.resource_name or GPU_RESOURCE_BY_VENDOR[gpu.vendor]
    limits = dict(c["resources"].get("limits", {}))
    limits[resource] = gpu.count
    c["resources"] = {**c["resources"], "limits": limits}


def _supernode_env(plan: FederationPlan, pool: Pool, stateful: bool) -> list[dict]:
    system = []
    # Node keys are chosen per pod by ordinal (StatefulSet) or node name (DaemonSet).
    if stateful and (uses_placeholder(pool.node_config, "{index}") or _node_auth(plan)):
        system.append(pods.pod_index_env())
    if uses_placeholder(pool.node_config, "{node}") or (_node_auth(plan) and not stateful):
        system.append(pods.node_name_env())
    return pods.merge_env(system, plan.spec.supernodes.env, pool.env)


def _superexec_clientapp_container(plan: FederationPlan, pool: Pool, appio_address: str,
                                   env: list[dict]) -> dict:
    port = _superexec_health_port(plan)
    args = plan.dialect.superexec_args(
        plugin="clientapp",
        appio_address=appio_address,
        # The SuperNode's AppIo/Runtime API is plaintext in both eras.
        ca_file=None,
        runtime_dependency_installation=plan.spec.allow_runtime_dependency_installation,
    ) + health_server_args(plan.version, port)
    mounts = list(pool.superexec_volume_mounts)
    if access.kubernetes_executor(plan):
        args += access.executor_args()
        mounts.append(access.executor_config_mount())
    return _container(plan, SUPEREXEC_CLIENTAPP, pool.images.superexec_client_app, args,
                      env=pods.merge_env(env, plan.spec.supernodes.env, pool.env) or None,
                      resources=pool.superexec_resources, mounts=mounts,
                      health=probes.grpc_health(plan.version, port, _supernode_probes(plan)))


def _claims_for(pool: Pool, mounts: list[dict]) -> list[dict]:
    used = {m.get("name") for m in mounts}
    return [copy.deepcopy(c) for c in pool.volume_claim_templates if c.get("metadata", {}).get("name") in used]


def pool(plan: FederationPlan, pool: Pool, pod_annotations: Optional[dict] = None) -> list[Manifest]:
    """One pool's objects. `pod_annotations` go on the pod templates of pods that mount
    the CA (e.g. its checksum, possibly a Pulumi Output)."""
    names = plan.names
    stateful = plan.spec.mode == "StatefulSet"
    workload_name = names.pool(pool.name)
    node_config = render_node_config(pool.node_config, pool.name, pool.replicas)
    args = plan.dialect.supernode_args(
        superlink_address=plan.fleet_address,
        ca_file=_client_ca_file(plan),
        isolation=plan.spec.isolation_mode,
        appio_bind=ANY_ADDRESS if plan.distributed else LOOPBACK,
        runtime_dependency_installation=plan.spec.allow_runtime_dependency_installation,
    )
    mounts = _ca_mount(plan)
    volumes = _ca_volume(plan)
    if _node_auth(plan):
        args += ["--auth-supernode-private-key", nodeauth.private_key_path(plan)]
        mounts.append(nodeauth.key_mount())
        volumes.append(nodeauth.key_volume(plan, pool))
    if node_config:
        args += ["--node-config", node_config]
    args += health_server_args(plan.version, HEALTH_PORT)
    args += list(pool.extra_args)

    supernode = _container(plan, SUPERNODE, plan.supernode_image(pool), args,
                           env=_supernode_env(plan, pool, stateful) or None,
                           resources=pool.supernode_resources,
                           mounts=mounts + list(pool.volume_mounts),
                           health=probes.grpc_health(plan.version, HEALTH_PORT, _supernode_probes(plan)))
    containers = [supernode]
    if plan.process_isolation and not plan.distributed:
        containers.append(_superexec_clientapp_container(plan, pool, f"{LOOPBACK}:{SUPERNODE_APPIO_PORT}", []))
    if plan.distributed:
        supernode["ports"] = [{"name": "clientappio", "containerPort": SUPERNODE_APPIO_PORT, "protocol": "TCP"}]

    labels = _labels(plan, SUPERNODE, pool.name)
    selector = selector_labels(plan.name, SUPERNODE, pool.name)
    template = _template(plan, labels, containers, volumes + list(pool.volumes), service_account=workload_name,
                         annotations=pod_annotations)
    if not plan.distributed:
        target = next(c for c in containers if c["name"] == _gpu_target(plan))
        _apply_gpu(pool, target, template)
    template = pods.apply_pod_template(template, pool.pod_template)

    if not stateful and _node_auth(plan):
        _only_nodes_with_keys(template, nodeauth.slots(plan, pool, plan.node_auth_keys))
    meta = _meta(plan, workload_name, labels)
    objects: list[Manifest] = [access.service_account(plan, workload_name, SUPERNODE, pool.name)]
    objects += _pool_extras(plan, pool, workload_name, selector, labels)
    if not stateful:
        objects.append({"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": meta,
                        "spec": {"selector": {"matchLabels": selector}, "template": template}})
        return objects

    objects.append({
        # Headless: gives SuperNode k the stable name `<workload>-k.<workload>`.
        "apiVersion": "v1", "kind": "Service", "metadata": _meta(plan, workload_name, labels),
        "spec": {"clusterIP": "None", "selector": selector, "publishNotReadyAddresses": True,
                 "ports": [{"name": "clientappio", "port": SUPERNODE_APPIO_PORT,
                            "targetPort": SUPERNODE_APPIO_PORT, "protocol": "TCP"}]},
    })
    spec: dict[str, Any] = {
        "replicas": pool.replicas,
        "serviceName": workload_name,
        # SuperNodes are independent of each other: start and replace them in parallel.
        "podManagementPolicy": "Parallel",
        "selector": {"matchLabels": selector},
        "template": template,
    }
    claims = _claims_for(pool, pool.volume_mounts) if plan.distributed else [copy.deepcopy(c) for c in pool.volume_claim_templates]
    if claims:
        spec["volumeClaimTemplates"] = claims
    objects.append({"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": meta, "spec": spec})
    if plan.distributed:
        objects += _pool_superexec(plan, pool, workload_name)
    return objects


def _only_nodes_with_keys(template: dict, node_names: list[str]) -> None:
    """A DaemonSet SuperNode finds its key by node name: keep it off nodes without one
    (it would crash-loop). ANDed into every required node selector term the user set."""
    field = {"key": "metadata.name", "operator": "In", "values": sorted(node_names)}
    affinity = template["spec"].setdefault("affinity", {})
    node_affinity = affinity.setdefault("nodeAffinity", {})
    required = node_affinity.setdefault("requiredDuringSchedulingIgnoredDuringExecution", {})
    terms = required.get("nodeSelectorTerms") or [{}]
    required["nodeSelectorTerms"] = [{**t, "matchFields": [*t.get("matchFields", []), field]} for t in terms]


def _pool_extras(plan: FederationPlan, pool: Pool, workload_name: str, selector: dict, labels: dict) -> list[Manifest]:
    """The pool's PodDisruptionBudget and NetworkPolicies."""
    out: list[Manifest] = []
    budget = pool.disruption_budget
    if budget.enabled:
        spec: dict[str, Any] = {"selector": {"matchLabels": selector}}
        if budget.min_available is not None:
            spec["minAvailable"] = budget.min_available
        else:
            spec["maxUnavailable"] = budget.max_unavailable if budget.max_unavailable is not None else 1
        out.append({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                    "metadata": _meta(plan, workload_name, labels), "spec": spec})
    names = network.pool_policy_names(plan, pool)
    out += [p for p in network.policies(plan) if p["metadata"]["name"] in names]
    return out


def _pool_superexec(plan: FederationPlan, pool: Pool, supernode_workload: str) -> list[Manifest]:
    """Distributed SuperExec for a StatefulSet pool: replica k serves SuperNode k, which
    it finds by its stable name behind the pool's headless Service."""
    name = plan.names.pool_superexec(pool.name)
    host = f"{supernode_workload}-$({POD_INDEX_ENV}).{plan.service_host(supernode_workload)}"
    env = [pods.pod_index_env(), {"name": pods.SUPERNODE_HOST_ENV, "value": host}]
    c = _superexec_clientapp_container(plan, pool, f"$({pods.SUPERNODE_HOST_ENV}):{SUPERNODE_APPIO_PORT}", env)
    labels = _labels(plan, SUPEREXEC_CLIENTAPP, pool.name)
    volumes = list(pool.volumes)
    k8s_executor = access.kubernetes_executor(plan)
    extra: list[Manifest] = [access.service_account(plan, name, SUPEREXEC_CLIENTAPP, pool.name, api_token=k8s_executor)]
    if k8s_executor:
        volumes.append(access.executor_config_volume(plan, name))
        extra.append(access.executor_config_map(plan, name, pool.name, pool.images.superexec_client_app))
        extra.append(access.executor_role_binding(plan, name))
    template = _template(plan, labels, [c], volumes, service_account=name, api_token=k8s_executor)
    _apply_gpu(pool, c, template)
    template = pods.apply_pod_template(template, pool.pod_template)
    spec: dict[str, Any] = {
        "replicas": pool.replicas,
        "serviceName": supernode_workload,
        "podManagementPolicy": "Parallel",
        "selector": {"matchLabels": selector_labels(plan.name, SUPEREXEC_CLIENTAPP, pool.name)},
        "template": template,
    }
    claims = _claims_for(pool, pool.superexec_volume_mounts)
    if claims:
        spec["volumeClaimTemplates"] = claims
    return extra + [{"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": _meta(plan, name, labels), "spec": spec}]


def pod_templates(plan: FederationPlan) -> list[dict]:
    """Every pod template of the federation's workloads."""
    objects = superlink(plan) + [m for p in plan.spec.supernodes.pools for m in pool(plan, p)]
    return [m["spec"]["template"] for m in objects if m["kind"] in WORKLOAD_KINDS]


WORKLOAD_KINDS = ("StatefulSet", "DaemonSet", "Deployment")


def all_objects(plan: FederationPlan) -> list[Manifest]:
    """Every object, as `render` prints it. TLS and node-key Secrets hold material
    Pulumi generates, so the components add those (see components/)."""
    objects = [namespace(plan)] if plan.spec.create_namespace else []
    objects += access.federation_objects(plan)
    objects += superlink(plan)
    for p in plan.spec.supernodes.pools:
        objects += pool(plan, p)
    return objects
