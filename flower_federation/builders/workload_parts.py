"""Parts the SuperLink and SuperNode builders share: managed containers and pod
templates under the federation's security settings, Secret volumes, the SuperExec
container, the Kubernetes executor's wiring and the StatefulSet shape."""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any, Optional

from flower_federation.builders import access, pods
from flower_federation.config import PodSettings, Probes, SuperExecSettings
from flower_federation.flower.dialects import health_server_args
from flower_federation.flower.layout import (
    CA_DIR,
    CA_VOLUME,
    EXECUTOR_CONFIG_DIR,
    EXECUTOR_CONFIG_VOLUME,
)
from flower_federation.kube.naming import selector_labels
from flower_federation.kube.objects import Container, Manifest, ObjectMeta, PodTemplate, Volume
from flower_federation.plan import FederationPlan, probes

Mount = dict[str, Any]


def managed_container(
    plan: FederationPlan,
    name: str,
    image: str,
    args: list[str],
    *,
    resources: dict[str, Any],
    env: Optional[list[dict[str, Any]]] = None,
    mounts: Optional[list[Mount]] = None,
    privileged: bool = False,
    health: Optional[dict[str, Any]] = None,
    pull_policy: Optional[str] = None,
) -> Container:
    """A container of ours running Flower: its resources (resolved by `resources.py`),
    the restricted securityContext with the user's overrides, probes, and Flower's
    telemetry off unless asked for (the user's own env, after ours, wins)."""
    c = pods.container(
        name,
        image,
        args,
        env=pods.merge_env(pods.telemetry_env(plan.spec.telemetry), env or []) or None,
        resources=resources,
        mounts=mounts,
        privileged=privileged,
        security_overrides=plan.spec.security_context,
        pull_policy=pull_policy or plan.spec.image_pull_policy,
    )
    c.update(health or {})  # type: ignore[typeddict-item]  # probe keys only
    return c


def secret_volume(name: str, secret: str, items: dict[str, str], mode: int) -> Volume:
    """A Secret volume exposing exactly `items` (key -> file name)."""
    return {
        "name": name,
        "secret": {
            "secretName": secret,
            "defaultMode": mode,
            "items": [{"key": k, "path": path} for k, path in items.items()],
        },
    }


def ca_volumes(plan: FederationPlan) -> list[Volume]:
    if not plan.trust:
        return []
    return [secret_volume(CA_VOLUME, plan.trust.ca_secret, {plan.trust.ca_key: "ca.crt"}, 0o444)]


def ca_mounts(plan: FederationPlan) -> list[Mount]:
    return [{"name": CA_VOLUME, "mountPath": CA_DIR, "readOnly": True}] if plan.trust else []


@dataclass
class ExecutorWiring:
    """What a SuperExec with the Kubernetes executor needs: its config (a ConfigMap,
    mounted), an API token and a RoleBinding to the executor Role."""

    enabled: bool
    args: list[str] = field(default_factory=list)
    mounts: list[Mount] = field(default_factory=list)
    volumes: list[Volume] = field(default_factory=list)
    objects: list[Manifest] = field(default_factory=list)


def executor_wiring(
    plan: FederationPlan, workload: str, role: str, superexec_image: str, pull_policy: str
) -> ExecutorWiring:
    if not plan.kubernetes_executor:
        return ExecutorWiring(False)
    return ExecutorWiring(
        True,
        args=["--executor", "kubernetes", "--executor-config", access.EXECUTOR_CONFIG_PATH],
        mounts=[{"name": EXECUTOR_CONFIG_VOLUME, "mountPath": EXECUTOR_CONFIG_DIR, "readOnly": True}],
        volumes=[
            {
                "name": EXECUTOR_CONFIG_VOLUME,
                "configMap": {"name": plan.names.executor_config(workload), "defaultMode": 0o444},
            }
        ],
        objects=[
            access.executor_config_map(plan, workload, role, superexec_image, pull_policy),
            access.executor_role_binding(plan, workload),
        ],
    )


def superexec_container(
    plan: FederationPlan,
    container_name: str,
    *,
    plugin: str,
    image: str,
    pull_policy: str,
    appio_address: str,
    ca_file: Optional[str],
    default_health_port: int,
    probe_settings: Probes,
    wiring: ExecutorWiring,
    env: list[dict[str, Any]],
    resources: dict[str, Any],
    mounts: list[Mount],
    settings: SuperExecSettings,
    auth_secret_file: Optional[str] = None,
) -> Container:
    """A SuperExec (`plugin` serverapp or clientapp) dialling `appio_address`, verifying
    it with `ca_file` where that API is served over TLS and signing its requests with
    `auth_secret_file` where the API checks them; `settings` are its component's
    `superexec.*` (env over `env`, extra args, health port, lifecycle)."""
    health_port = settings.container_ports.health or default_health_port
    args = (
        plan.dialect.superexec_args(
            plugin=plugin,
            appio_address=appio_address,
            ca_file=ca_file,
            runtime_dependency_installation=plan.spec.allow_runtime_dependency_installation,
            auth_secret_file=auth_secret_file,
        )
        + health_server_args(plan.version, health_port)
        + wiring.args
        + list(settings.extra_args)
    )
    c = managed_container(
        plan,
        container_name,
        image,
        args,
        env=pods.merge_env(env, settings.env) or None,
        resources=resources,
        mounts=mounts + wiring.mounts,
        health=probes.superexec_health(plan.version, health_port, probe_settings),
        pull_policy=pull_policy,
    )
    if settings.lifecycle:
        c["lifecycle"] = copy.deepcopy(settings.lifecycle)
    return c


def statefulset(
    plan: FederationPlan,
    name: str,
    component: str,
    pool: Optional[str],
    template: PodTemplate,
    *,
    replicas: Optional[int],
    service_name: str,
    claims: list[dict[str, Any]],
    parallel: bool = False,
    settings: Optional[PodSettings] = None,
    extra_selector: Optional[dict[str, str]] = None,
    min_ready_seconds: int = 0,
) -> Manifest:
    spec: dict[str, Any] = {"replicas": replicas, "serviceName": service_name}
    if parallel:
        # Independent peers (SuperNodes, their SuperExecs): start and replace them in parallel.
        spec["podManagementPolicy"] = "Parallel"
    if min_ready_seconds:
        spec["minReadySeconds"] = min_ready_seconds
    spec["selector"] = {"matchLabels": {**selector_labels(plan.name, component, pool), **(extra_selector or {})}}
    spec["template"] = template
    if settings is not None and settings.update_strategy:
        spec["updateStrategy"] = copy.deepcopy(settings.update_strategy)
    if claims:
        spec["volumeClaimTemplates"] = claims
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": workload_meta(plan, name, component, pool, settings),
        "spec": spec,
    }


def workload_meta(
    plan: FederationPlan, name: str, component: str, pool: Optional[str], settings: Optional[PodSettings]
) -> ObjectMeta:
    """A workload's metadata, with the component's own labels and annotations."""
    if settings is None:
        return plan.meta(name, component, pool)
    return plan.meta(name, component, pool, extra_labels=settings.labels, extra_annotations=settings.annotations)
