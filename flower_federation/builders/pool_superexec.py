"""A pool's ClientApp SuperExecs: the container (a sidecar's, or a distributed SuperExec's) and, with distributed
placement, the StatefulSets `N-superexec-P` (and `N-superexec-P-<c>` for more SuperExecs per SuperNode) whose
replica k serves SuperNode k, found by its stable name behind the pool's headless Service."""

from __future__ import annotations

from typing import Any

from flower_federation.builders import access, appio, pods, resources
from flower_federation.builders.pod_pipeline import PodRecipe, claims_used_by, finish_pod
from flower_federation.builders.workload_parts import (
    ExecutorWiring,
    ca_mounts,
    ca_volumes,
    executor_wiring,
    statefulset,
    superexec_container,
)
from flower_federation.config import Pool
from flower_federation.flower.dialects import HEALTH_PORT, SIDECAR_HEALTH_PORT
from flower_federation.flower.layout import SUPERNODE_HOST_ENV
from flower_federation.flower.node_config import POD_INDEX_ENV
from flower_federation.kube.naming import SUPEREXEC_CLIENTAPP, SUPEREXEC_REPLICA_LABEL, selector_labels
from flower_federation.kube.objects import Container, Manifest, PodTemplate
from flower_federation.plan import FederationPlan


def clientapp_superexec(
    plan: FederationPlan, pool: Pool, appio_address: str, env: list[dict[str, Any]], wiring: ExecutorWiring
) -> Container:
    return superexec_container(
        plan,
        SUPEREXEC_CLIENTAPP,
        plugin="clientapp",
        image=plan.clientapp_superexec_image(pool),
        pull_policy=plan.pull_policy(pool.images.superexec_client_app),
        # HTTP era with TLS: the SuperNode serves its Runtime API over TLS (appio.py);
        # gRPC era: its ClientAppIo API is plaintext, confined by NetworkPolicy.
        appio_address=appio_address,
        ca_file=plan.runtime_ca_file,
        default_health_port=HEALTH_PORT if plan.distributed else SIDECAR_HEALTH_PORT,
        probe_settings=plan.clientapp_superexec_probes(pool),
        wiring=wiring,
        env=pods.merge_env(env, plan.spec.supernodes.env, pool.env),
        resources=resources.clientapp_superexec(plan, pool),
        mounts=_hop_ca_mounts(plan) + appio.auth_mounts(plan) + list(pool.superexec_volume_mounts),
        auth_secret_file=appio.auth_file(plan),
        settings=pool.superexec,
    )


def _hop_ca_mounts(plan: FederationPlan) -> list[dict[str, Any]]:
    """The CA that verifies the pool's Runtime API certificate: the federation's, or a site's own (a SuperExec
    dials only its SuperNode, so a site's SuperExecs need nothing of the hub's)."""
    if plan.runtime_trust is None:
        return []
    return appio.own_ca_mounts(plan) if plan.runtime_trust.own_ca else ca_mounts(plan)


def _hop_ca_volumes(plan: FederationPlan, pool: Pool) -> list[dict[str, Any]]:
    if plan.runtime_trust is None:
        return []
    return appio.own_ca_volumes(plan, pool) if plan.runtime_trust.own_ca else ca_volumes(plan)


def distributed_objects(plan: FederationPlan, pool: Pool, supernode_workload: str) -> list[Manifest]:
    """The pool's SuperExec workloads: one StatefulSet per SuperExec replica, each with a replica per SuperNode, and
    the ServiceAccount (and executor objects) they share."""
    name = plan.names.pool_superexec(pool.name)
    settings = pool.superexec
    wiring = executor_wiring(
        plan, name, pool.name, plan.clientapp_superexec_image(pool), plan.pull_policy(pool.images.superexec_client_app)
    )
    sa = access.service_account(
        plan, name, SUPEREXEC_CLIENTAPP, pool.name, api_token=wiring.enabled, settings=settings.service_account
    )
    out = [sa, *wiring.objects]
    for replica in range(settings.replicas):
        # More than one: each StatefulSet selects its own pods (selectors must not overlap).
        extra = {SUPEREXEC_REPLICA_LABEL: str(replica)} if settings.replicas > 1 else {}
        pod = _pod(plan, pool, supernode_workload, wiring, extra)
        out.append(
            statefulset(
                plan,
                plan.names.pool_superexec_replica(pool.name, replica),
                SUPEREXEC_CLIENTAPP,
                pool.name,
                pod,
                replicas=pool.replicas,
                service_name=supernode_workload,
                parallel=True,
                claims=claims_used_by(pool.volume_claim_templates, pod),
                settings=settings,
                extra_selector=extra,
            )
        )
    return out


def _pod(
    plan: FederationPlan, pool: Pool, supernode_workload: str, wiring: ExecutorWiring, extra_labels: dict[str, str]
) -> PodTemplate:
    """Replica k of a SuperExec StatefulSet dials SuperNode k by its stable name."""
    host = f"{supernode_workload}-$({POD_INDEX_ENV}).{plan.service_host(supernode_workload)}"
    env = [pods.pod_index_env(), {"name": SUPERNODE_HOST_ENV, "value": host}]
    c = clientapp_superexec(plan, pool, f"$({SUPERNODE_HOST_ENV}):{plan.supernode_appio_port(pool)}", env, wiring)
    return finish_pod(
        plan,
        PodRecipe(
            labels={**plan.labels(SUPEREXEC_CLIENTAPP, pool.name), **extra_labels},
            containers=[c],
            volumes=_hop_ca_volumes(plan, pool)
            + appio.auth_volumes(plan, appio.pool_auth_secret_name(plan, pool))
            + list(pool.volumes)
            + wiring.volumes,
            service_account=plan.names.pool_superexec(pool.name),
            api_token=wiring.enabled,
            # Spread among all of the pool's SuperExecs, whichever StatefulSet they belong to.
            selector=selector_labels(plan.name, SUPEREXEC_CLIENTAPP, pool.name),
            settings=pool.superexec,
            gpus_for=(pool, c["name"]),
            user_template=pool.pod_template,
            user_volumes=list(pool.volumes),
            shared_template=True,
        ),
    )
