"""One SuperNode pool's objects: its StatefulSet (with a headless Service) or DaemonSet,
ServiceAccount and PodDisruptionBudget and, with distributed SuperExec, the paired
ClientApp SuperExec StatefulSet. NetworkPolicies come from `network.py`, the node-keys
Secret from `nodeauth.py`; `manifests.py` puts them all together."""

from __future__ import annotations

import copy
from typing import Any

from . import access, nodeauth, pods, probes
from .config import Pool
from .dialects import ANY_ADDRESS, HEALTH_PORT, LOOPBACK, SIDECAR_HEALTH_PORT, SUPERNODE_APPIO_PORT, health_server_args
from .kube import Container, Manifest, PodTemplate
from .layout import AMD_DEVICES, SUPERNODE_HOST_ENV
from .naming import SUPEREXEC_CLIENTAPP, SUPERNODE, selector_labels
from .nodeconfig import POD_INDEX_ENV, render_node_config, uses_placeholder
from .plan import FederationPlan
from .workload_parts import (
    ExecutorWiring,
    ca_mounts,
    ca_volumes,
    claims_used_by,
    executor_wiring,
    managed_container,
    statefulset,
    superexec_container,
    template,
)

GPU_RESOURCE_BY_VENDOR = {"nvidia": "nvidia.com/gpu", "amd": "amd.com/gpu"}


def _apply_gpu(pool: Pool, c: Container, pod: PodTemplate) -> None:
    """Give the container that runs ClientApps the pool's GPUs."""
    gpu = pool.gpu
    if not gpu.enabled:
        return
    if gpu.mount_all:
        if gpu.vendor == "nvidia":
            pod["spec"]["runtimeClassName"] = gpu.runtime_class_name
            c["env"] = pods.merge_env(c.get("env", []), [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}])
        else:
            c["env"] = pods.merge_env(c.get("env", []), [{"name": "ROCR_VISIBLE_DEVICES", "value": "all"}])
            c["securityContext"] = pods.container_security_context(privileged=True)
            for vol, path in AMD_DEVICES.items():
                pod["spec"]["volumes"].append({"name": vol, "hostPath": {"path": path}})
                c["volumeMounts"].append({"name": vol, "mountPath": path})
        return
    resource = gpu.resource_name or GPU_RESOURCE_BY_VENDOR[str(gpu.vendor)]
    limits = dict(c["resources"].get("limits", {}))
    limits[resource] = gpu.count
    c["resources"] = {**c["resources"], "limits": limits}


def _supernode_env(plan: FederationPlan, pool: Pool) -> list[dict[str, Any]]:
    system = []
    # Node keys are chosen per pod by ordinal (StatefulSet) or node name (DaemonSet).
    if plan.stateful and (uses_placeholder(pool.node_config, "{index}") or plan.node_auth):
        system.append(pods.pod_index_env())
    if uses_placeholder(pool.node_config, "{node}") or (plan.node_auth and not plan.stateful):
        system.append(pods.node_name_env())
    return pods.merge_env(system, plan.spec.supernodes.env, pool.env)


def _clientapp_superexec(
    plan: FederationPlan, pool: Pool, appio_address: str, env: list[dict[str, Any]], wiring: ExecutorWiring
) -> Container:
    return superexec_container(
        plan,
        SUPEREXEC_CLIENTAPP,
        plugin="clientapp",
        image=plan.clientapp_superexec_image(pool),
        # The SuperNode's AppIo/Runtime API is plaintext in both eras.
        appio_address=appio_address,
        ca_file=None,
        health_port=HEALTH_PORT if plan.distributed else SIDECAR_HEALTH_PORT,
        probe_settings=plan.supernode_probes,
        wiring=wiring,
        env=pods.merge_env(env, plan.spec.supernodes.env, pool.env) or None,
        resources=pool.superexec_resources,
        mounts=list(pool.superexec_volume_mounts),
    )


# SuperNodes keep Flower's own retry policy (flwr/common/retry_invoker.py): it retries
# UNAVAILABLE (a SuperLink restarting) without limit by default and gives up at once on
# anything else: a TLS handshake failure, UNAUTHENTICATED for a key the SuperLink does not
# know, UNKNOWN. --max-retries / --max-wait-time only make it give up sooner and cannot
# make it retry UNKNOWN, so we pass neither; an exited SuperNode is restarted by the
# kubelet with back-off (the SuperLink's state race, the UNKNOWN seen in practice, is
# prevented at the SuperLink: superlink_state.py).
def _supernode_container(plan: FederationPlan, pool: Pool) -> Container:
    args = plan.dialect.supernode_args(
        superlink_address=str(plan.pool_fleet_endpoint(pool)),
        ca_file=plan.client_ca_file,
        isolation=plan.spec.isolation_mode,
        appio_bind=ANY_ADDRESS if plan.distributed else LOOPBACK,
        runtime_dependency_installation=plan.spec.allow_runtime_dependency_installation,
    )
    mounts = ca_mounts(plan)
    if plan.node_auth:
        args += ["--auth-supernode-private-key", nodeauth.private_key_path(plan)]
        mounts.append(nodeauth.key_mount())
    node_config = render_node_config(pool.node_config, pool.name, pool.replicas)
    if node_config:
        args += ["--node-config", node_config]
    args += health_server_args(plan.version, HEALTH_PORT) + list(pool.extra_args)
    c = managed_container(
        plan,
        SUPERNODE,
        plan.supernode_image(pool),
        args,
        env=_supernode_env(plan, pool) or None,
        resources=pool.supernode_resources,
        mounts=mounts + list(pool.volume_mounts),
        health=probes.grpc_health(plan.version, HEALTH_PORT, plan.supernode_probes),
    )
    if plan.distributed:
        c["ports"] = [{"name": "clientappio", "containerPort": SUPERNODE_APPIO_PORT, "protocol": "TCP"}]
    return c


def _pod(plan: FederationPlan, pool: Pool, workload: str) -> PodTemplate:
    supernode = _supernode_container(plan, pool)
    containers = [supernode]
    if plan.sidecar_superexec:
        containers.append(
            _clientapp_superexec(plan, pool, f"{LOOPBACK}:{SUPERNODE_APPIO_PORT}", [], ExecutorWiring(False))
        )
    volumes = ca_volumes(plan) + ([nodeauth.key_volume(plan, pool)] if plan.node_auth else []) + list(pool.volumes)
    pod = template(plan, plan.labels(SUPERNODE, pool.name), containers, volumes, service_account=workload)
    if not plan.distributed:  # else the GPU goes to the SuperExec's own pods
        _apply_gpu(pool, containers[-1] if plan.process_isolation else supernode, pod)
    pod = pods.apply_pod_template(pod, pool.pod_template)
    if not plan.stateful and plan.node_auth:
        _only_nodes_with_keys(pod, nodeauth.slots(plan, pool))
    return pod


def _only_nodes_with_keys(pod: PodTemplate, node_names: list[str]) -> None:
    """A DaemonSet SuperNode finds its key by node name: keep it off nodes without one
    (it would crash-loop). ANDed into every required node selector term the user set."""
    match = {"key": "metadata.name", "operator": "In", "values": sorted(node_names)}
    affinity = pod["spec"].setdefault("affinity", {})
    node_affinity = affinity.setdefault("nodeAffinity", {})
    required = node_affinity.setdefault("requiredDuringSchedulingIgnoredDuringExecution", {})
    terms = required.get("nodeSelectorTerms") or [{}]
    required["nodeSelectorTerms"] = [{**t, "matchFields": [*t.get("matchFields", []), match]} for t in terms]


# A rolling update (StatefulSet or DaemonSet) replaces one SuperNode, then the next once
# the new one is available: Ready for minReadySeconds. Ready is Flower's health server,
# which answers before the SuperNode has activated with the SuperLink, so without that
# pause the next one could leave while the new one is not yet back: two offline at once
# although the PodDisruptionBudget allows one (e2e scenario 11 checks both views).
def _disruption_budget(plan: FederationPlan, pool: Pool, workload: str) -> list[Manifest]:
    budget = pool.disruption_budget
    if not budget.enabled:
        return []
    spec: dict[str, Any] = {"selector": {"matchLabels": selector_labels(plan.name, SUPERNODE, pool.name)}}
    if budget.min_available is not None:
        spec["minAvailable"] = budget.min_available
    else:
        spec["maxUnavailable"] = budget.max_unavailable if budget.max_unavailable is not None else 1
    return [
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": plan.meta(workload, SUPERNODE, pool.name),
            "spec": spec,
        }
    ]


def objects(plan: FederationPlan, pool: Pool) -> list[Manifest]:
    """One pool's objects (its NetworkPolicies and node-keys Secret excepted)."""
    workload = plan.names.pool(pool.name)
    pod = _pod(plan, pool, workload)
    out = [access.service_account(plan, workload, SUPERNODE, pool.name)] + _disruption_budget(plan, pool, workload)
    if not plan.stateful:
        out.append(
            {
                "apiVersion": "apps/v1",
                "kind": "DaemonSet",
                "metadata": plan.meta(workload, SUPERNODE, pool.name),
                "spec": {
                    "selector": {"matchLabels": selector_labels(plan.name, SUPERNODE, pool.name)},
                    "template": pod,
                    **({"minReadySeconds": pool.min_ready_seconds} if pool.min_ready_seconds else {}),
                },
            }
        )
        return out
    out.append(
        {
            # Headless: gives SuperNode k the stable name `<workload>-k.<workload>`.
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": plan.meta(workload, SUPERNODE, pool.name),
            "spec": {
                "clusterIP": "None",
                "selector": selector_labels(plan.name, SUPERNODE, pool.name),
                "publishNotReadyAddresses": True,
                "ports": [
                    {
                        "name": "clientappio",
                        "port": SUPERNODE_APPIO_PORT,
                        "targetPort": SUPERNODE_APPIO_PORT,
                        "protocol": "TCP",
                    }
                ],
            },
        }
    )
    claims = (
        claims_used_by(pool.volume_claim_templates, pool.volume_mounts)
        if plan.distributed
        else [copy.deepcopy(c) for c in pool.volume_claim_templates]
    )
    out.append(
        statefulset(
            plan,
            workload,
            SUPERNODE,
            pool.name,
            pod,
            replicas=pool.replicas,
            service_name=workload,
            claims=claims,
            parallel=True,
            min_ready_seconds=pool.min_ready_seconds,
        )
    )
    if plan.distributed:
        out += _distributed_superexec(plan, pool, workload)
    return out


def _distributed_superexec(plan: FederationPlan, pool: Pool, supernode_workload: str) -> list[Manifest]:
    """Distributed SuperExec for a StatefulSet pool: replica k serves SuperNode k, which
    it finds by its stable name behind the pool's headless Service."""
    name = plan.names.pool_superexec(pool.name)
    host = f"{supernode_workload}-$({POD_INDEX_ENV}).{plan.service_host(supernode_workload)}"
    env = [pods.pod_index_env(), {"name": SUPERNODE_HOST_ENV, "value": host}]
    wiring = executor_wiring(plan, name, pool.name, plan.clientapp_superexec_image(pool))
    c = _clientapp_superexec(plan, pool, f"$({SUPERNODE_HOST_ENV}):{SUPERNODE_APPIO_PORT}", env, wiring)
    pod = template(
        plan,
        plan.labels(SUPEREXEC_CLIENTAPP, pool.name),
        [c],
        list(pool.volumes) + wiring.volumes,
        service_account=name,
        api_token=wiring.enabled,
    )
    _apply_gpu(pool, c, pod)
    pod = pods.apply_pod_template(pod, pool.pod_template)
    sa = access.service_account(plan, name, SUPEREXEC_CLIENTAPP, pool.name, api_token=wiring.enabled)
    return (
        [sa]
        + wiring.objects
        + [
            statefulset(
                plan,
                name,
                SUPEREXEC_CLIENTAPP,
                pool.name,
                pod,
                replicas=pool.replicas,
                service_name=supernode_workload,
                parallel=True,
                claims=claims_used_by(pool.volume_claim_templates, pool.superexec_volume_mounts),
            )
        ]
    )
