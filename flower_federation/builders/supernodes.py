"""One SuperNode pool's objects: its StatefulSet (with a headless Service) or DaemonSet,
ServiceAccount and PodDisruptionBudget and, with distributed SuperExec, the paired
ClientApp SuperExec StatefulSet. NetworkPolicies come from `network.py`, the node-keys
Secret from `node_auth.py`; `manifests.py` puts them all together."""

from __future__ import annotations

import copy
from typing import Any

from flower_federation.builders import access, appio, node_auth, pods, pool_superexec, resources, site_alerts
from flower_federation.builders.pod_pipeline import PodRecipe, claims_used_by, finish_pod
from flower_federation.builders.workload_parts import (
    ExecutorWiring,
    ca_mounts,
    ca_volumes,
    managed_container,
    statefulset,
    workload_meta,
)
from flower_federation.config import Pool
from flower_federation.flower.dialects import ANY_ADDRESS, LOOPBACK, health_server_args
from flower_federation.flower.node_config import render_node_config, uses_placeholder
from flower_federation.kube.naming import SUPERNODE, selector_labels
from flower_federation.kube.objects import Container, Manifest, PodTemplate
from flower_federation.plan import FederationPlan, probes


def _supernode_env(plan: FederationPlan, pool: Pool) -> list[dict[str, Any]]:
    system = []
    # Node keys are chosen per pod by ordinal (StatefulSet) or node name (DaemonSet).
    if plan.stateful and (uses_placeholder(pool.node_config, "{index}") or plan.node_auth):
        system.append(pods.pod_index_env())
    if uses_placeholder(pool.node_config, "{node}") or (plan.node_auth and not plan.stateful):
        system.append(pods.node_name_env())
    return pods.merge_env(system, plan.spec.supernodes.env, pool.env)


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
        appio_port=plan.supernode_appio_port(pool),
        runtime_dependency_installation=plan.spec.allow_runtime_dependency_installation,
        runtime_tls=appio.runtime_server_tls(plan),
        auth_secret_file=appio.auth_file(plan),
    )
    mounts = ca_mounts(plan) + appio.runtime_tls_mounts(plan) + appio.own_ca_mounts(plan) + appio.auth_mounts(plan)
    if plan.node_auth:
        args += ["--auth-supernode-private-key", node_auth.private_key_path(plan)]
        mounts.append(node_auth.key_mount())
    node_config = render_node_config(pool.node_config, pool.name, pool.replicas)
    if node_config:
        args += ["--node-config", node_config]
    health_port = plan.supernode_health_port(pool)
    args += health_server_args(plan.version, health_port) + list(pool.extra_args)
    c = managed_container(
        plan,
        SUPERNODE,
        plan.supernode_image(pool),
        args,
        env=_supernode_env(plan, pool) or None,
        resources=resources.supernode(plan, pool),
        mounts=mounts + list(pool.volume_mounts),
        health=probes.supernode_health(
            plan.version,
            health_port,
            plan.supernode_appio_port(pool),
            appio.runtime_server_tls(plan) is not None,
            plan.supernode_probes,
        ),
        pull_policy=plan.pull_policy(plan.supernode_image_config(pool)),
    )
    if site_alerts.enabled(plan) and plan.spec.monitoring.prometheus_rules.supernode_log_tail:
        # The log's tail (Flower's exit message: why the SuperLink refused it) as the last termination message;
        # an opt-in, since the pod's status is readable more widely than its log.
        c["terminationMessagePolicy"] = "FallbackToLogsOnError"
    if plan.distributed:
        c["ports"] = [{"name": "clientappio", "containerPort": plan.supernode_appio_port(pool), "protocol": "TCP"}]
    return c


def _services(plan: FederationPlan, pool: Pool, workload: str) -> list[Manifest]:
    """The headless Service that gives SuperNode k the stable name `<workload>-k.<workload>`, and with a NodePort or
    LoadBalancer `service.type` the Service that exposes the (one) SuperNode's ClientAppIo API."""
    service = pool.service
    port = {
        "name": service.port_name,
        "port": service.port,
        "targetPort": plan.supernode_appio_port(pool),
        "protocol": "TCP",
    }
    selector = selector_labels(plan.name, SUPERNODE, pool.name)
    out: list[Manifest] = [
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": plan.meta(workload, SUPERNODE, pool.name),
            "spec": {"clusterIP": "None", "selector": selector, "publishNotReadyAddresses": True, "ports": [port]},
        }
    ]
    if service.type != "ClusterIP":
        exposed = {**port, **({"nodePort": service.node_port} if service.node_port else {})}
        out.append(
            {
                "apiVersion": "v1",
                "kind": "Service",
                "metadata": plan.meta(plan.names.pool_appio_service(pool.name), SUPERNODE, pool.name),
                "spec": {"type": service.type, "selector": selector, "ports": [exposed]},
            }
        )
    return out


def _pod(plan: FederationPlan, pool: Pool, workload: str) -> PodTemplate:
    supernode = _supernode_container(plan, pool)
    containers = [supernode]
    if plan.sidecar_superexec:
        containers.append(
            pool_superexec.clientapp_superexec(
                plan, pool, f"{LOOPBACK}:{plan.supernode_appio_port(pool)}", [], ExecutorWiring(False)
            )
        )
    # The container that runs ClientApps takes the pool's GPUs (distributed: the SuperExecs' own pods do).
    clientapps = containers[-1] if plan.process_isolation else supernode
    volumes = (
        ca_volumes(plan)
        + appio.runtime_tls_volumes(plan, pool)
        + appio.own_ca_volumes(plan, pool)
        + appio.auth_volumes(plan, appio.pool_auth_secret_name(plan, pool))
        + ([node_auth.key_volume(plan, pool)] if plan.node_auth else [])
        + list(pool.volumes)
    )
    return finish_pod(
        plan,
        PodRecipe(
            labels=plan.labels(SUPERNODE, pool.name),
            containers=containers,
            volumes=volumes,
            service_account=workload,
            selector=selector_labels(plan.name, SUPERNODE, pool.name),
            settings=pool,
            spread=plan.stateful,  # a DaemonSet has one pod per node already
            main_container=SUPERNODE,
            gpus_for=None if plan.distributed else (pool, clientapps["name"]),
            user_template=pool.pod_template,
            user_volumes=list(pool.volumes),
            shared_template=plan.distributed,
            only_nodes=node_auth.slots(plan, pool) if not plan.stateful and plan.node_auth else None,
        ),
    )


# A rolling update (StatefulSet or DaemonSet) replaces one SuperNode, then the next once
# the new one is available: Ready for minReadySeconds. Ready is Flower's health server,
# which answers before the SuperNode has activated with the SuperLink, so without that
# pause the next one could leave while the new one is not yet back: two offline at once
# although the PodDisruptionBudget allows one (e2e scenario 11 checks both views).
def _disruption_budget(plan: FederationPlan, pool: Pool, workload: str) -> list[Manifest]:
    budget = pool.disruption_budget
    if not budget.enabled:
        return []
    spec: dict[str, Any] = {
        "selector": {"matchLabels": selector_labels(plan.name, SUPERNODE, pool.name)},
        **budget.effective,
    }
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
    sa = access.service_account(plan, workload, SUPERNODE, pool.name, settings=pool.service_account)
    out = [sa] + _disruption_budget(plan, pool, workload)
    if not plan.stateful:
        out.append(
            {
                "apiVersion": "apps/v1",
                "kind": "DaemonSet",
                "metadata": workload_meta(plan, workload, SUPERNODE, pool.name, pool),
                "spec": {
                    "selector": {"matchLabels": selector_labels(plan.name, SUPERNODE, pool.name)},
                    "template": pod,
                    **({"updateStrategy": copy.deepcopy(pool.update_strategy)} if pool.update_strategy else {}),
                    **({"minReadySeconds": pool.min_ready_seconds} if pool.min_ready_seconds else {}),
                },
            }
        )
        return out
    out += _services(plan, pool, workload)
    claims = (
        claims_used_by(pool.volume_claim_templates, pod)
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
            settings=pool,
            min_ready_seconds=pool.min_ready_seconds,
        )
    )
    if plan.distributed:
        out += pool_superexec.distributed_objects(plan, pool, workload)
    return out
