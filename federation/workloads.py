"""Every Kubernetes object of a federation, as plain manifests (dicts).

The Pulumi components register exactly these; `render` prints them. Keeping them plain
data makes them testable without Pulumi and byte-for-byte deterministic.
"""

from __future__ import annotations

import copy
from typing import Any, Optional

from . import pods
from .config import Pool
from .dialects import ANY_ADDRESS, LOOPBACK, SUPERNODE_APPIO_PORT, ServerTls
from .naming import (
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


def _secret_volume(name: str, secret: str, keys: list[str], mode: int) -> dict[str, Any]:
    return {"name": name, "secret": {"secretName": secret, "defaultMode": mode,
                                     "items": [{"key": k, "path": k} for k in keys]}}


def _ca_volume(plan: FederationPlan) -> list[dict]:
    return [_secret_volume(pods.CA_VOLUME, plan.trust.ca_secret, ["ca.crt"], 0o444)] if plan.trust else []


def _ca_mount(plan: FederationPlan) -> list[dict]:
    return [{"name": pods.CA_VOLUME, "mountPath": pods.CA_DIR, "readOnly": True}] if plan.trust else []


def _client_ca_file(plan: FederationPlan) -> Optional[str]:
    return pods.CA_FILE if plan.trust else None


def namespace(plan: FederationPlan) -> Manifest:
    privileged = any(p.gpu.enabled and p.gpu.mount_all and p.gpu.vendor == "amd" for p in plan.spec.supernodes.pools)
    level = "privileged" if privileged else "restricted"
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


def _superexec_serverapp_container(plan: FederationPlan) -> dict:
    sl = plan.spec.superlink
    args = plan.dialect.superexec_args(
        plugin="serverapp",
        appio_address=superlink_appio_address(plan),
        ca_file=_serverapp_ca(plan),
        runtime_dependency_installation=plan.spec.allow_runtime_dependency_installation,
    )
    mounts = _ca_mount(plan) if _serverapp_ca(plan) else []
    return pods.container(SUPEREXEC_SERVERAPP, sl.superexec_image, args,
                          env=list(sl.env) or None, resources=sl.superexec_resources, mounts=mounts)


def superlink(plan: FederationPlan) -> list[Manifest]:
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
    ) + list(sl.extra_args)

    mounts: list[dict] = []
    volumes: list[dict] = []
    if plan.trust:
        mounts.append({"name": pods.TLS_VOLUME, "mountPath": pods.TLS_DIR, "readOnly": True})
        volumes.append(_secret_volume(pods.TLS_VOLUME, plan.trust.server_secret, ["tls.crt", "tls.key"], 0o440))
    mounts += _ca_mount(plan)
    volumes += _ca_volume(plan)
    if persist:
        mounts.append({"name": pods.STATE_VOLUME, "mountPath": pods.STATE_DIR})
    mounts += sl.volume_mounts
    volumes += sl.volumes

    service_ports = plan.dialect.service_ports(plan.ports)
    main = pods.container(SUPERLINK, plan.superlink_image, args, env=list(sl.env) or None,
                          resources=sl.resources, mounts=mounts)
    main["ports"] = [{"name": p.name, "containerPort": p.port, "protocol": "TCP"} for p in service_ports]
    if plan.distributed and plan.ports.serverappio is not None:
        main["ports"].append({"name": "serverappio", "containerPort": plan.ports.serverappio, "protocol": "TCP"})
    containers = [main]
    if plan.process_isolation and not plan.distributed:
        containers.append(_superexec_serverapp_container(plan))

    selector = selector_labels(plan.name, SUPERLINK)
    labels = _labels(plan, SUPERLINK)
    template = pods.apply_pod_template(pods.pod_template(labels, containers, volumes), sl.pod_template)

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
    if plan.distributed:
        objects += _superlink_distributed(plan, selector)
    return objects


def _superlink_distributed(plan: FederationPlan, superlink_selector: dict) -> list[Manifest]:
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
    template = pods.pod_template(labels, [_superexec_serverapp_container(plan)],
                                 _ca_volume(plan) if _serverapp_ca(plan) else [])
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
    if stateful and uses_placeholder(pool.node_config, "{index}"):
        system.append(pods.pod_index_env())
    if uses_placeholder(pool.node_config, "{node}"):
        system.append(pods.node_name_env())
    return pods.merge_env(system, plan.spec.supernodes.env, pool.env)


def _superexec_clientapp_container(plan: FederationPlan, pool: Pool, appio_address: str,
                                   env: list[dict]) -> dict:
    args = plan.dialect.superexec_args(
        plugin="clientapp",
        appio_address=appio_address,
        # The SuperNode's AppIo/Runtime API is plaintext in both eras.
        ca_file=None,
        runtime_dependency_installation=plan.spec.allow_runtime_dependency_installation,
    )
    return pods.container(SUPEREXEC_CLIENTAPP, pool.images.superexec_client_app, args,
                          env=pods.merge_env(env, plan.spec.supernodes.env, pool.env) or None,
                          resources=pool.superexec_resources, mounts=pool.superexec_volume_mounts)


def _claims_for(pool: Pool, mounts: list[dict]) -> list[dict]:
    used = {m.get("name") for m in mounts}
    return [copy.deepcopy(c) for c in pool.volume_claim_templates if c.get("metadata", {}).get("name") in used]


def pool(plan: FederationPlan, pool: Pool) -> list[Manifest]:
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
    if node_config:
        args += ["--node-config", node_config]
    args += list(pool.extra_args)

    supernode = pods.container(SUPERNODE, plan.supernode_image(pool), args,
                               env=_supernode_env(plan, pool, stateful) or None,
                               resources=pool.supernode_resources,
                               mounts=_ca_mount(plan) + list(pool.volume_mounts))
    containers = [supernode]
    if plan.process_isolation and not plan.distributed:
        containers.append(_superexec_clientapp_container(plan, pool, f"{LOOPBACK}:{SUPERNODE_APPIO_PORT}", []))
    if plan.distributed:
        supernode["ports"] = [{"name": "clientappio", "containerPort": SUPERNODE_APPIO_PORT, "protocol": "TCP"}]

    labels = _labels(plan, SUPERNODE, pool.name)
    selector = selector_labels(plan.name, SUPERNODE, pool.name)
    template = pods.pod_template(labels, containers, _ca_volume(plan) + list(pool.volumes))
    if not plan.distributed:
        target = next(c for c in containers if c["name"] == _gpu_target(plan))
        _apply_gpu(pool, target, template)
    template = pods.apply_pod_template(template, pool.pod_template)

    meta = _meta(plan, workload_name, labels)
    objects: list[Manifest] = []
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
        objects.append(_pool_superexec(plan, pool, workload_name))
    return objects


def _pool_superexec(plan: FederationPlan, pool: Pool, supernode_workload: str) -> Manifest:
    """Distributed SuperExec for a StatefulSet pool: replica k serves SuperNode k, which
    it finds by its stable name behind the pool's headless Service."""
    name = plan.names.pool_superexec(pool.name)
    host = f"{supernode_workload}-$({POD_INDEX_ENV}).{plan.service_host(supernode_workload)}"
    env = [pods.pod_index_env(), {"name": pods.SUPERNODE_HOST_ENV, "value": host}]
    c = _superexec_clientapp_container(plan, pool, f"$({pods.SUPERNODE_HOST_ENV}):{SUPERNODE_APPIO_PORT}", env)
    labels = _labels(plan, SUPEREXEC_CLIENTAPP, pool.name)
    template = pods.pod_template(labels, [c], list(pool.volumes))
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
    return {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": _meta(plan, name, labels), "spec": spec}


def all_objects(plan: FederationPlan) -> list[Manifest]:
    objects = [namespace(plan)] if plan.spec.create_namespace else []
    objects += superlink(plan)
    for p in plan.spec.supernodes.pools:
        objects += pool(plan, p)
    return objects
