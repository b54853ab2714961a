"""ServiceAccounts and RBAC, and the Kubernetes executor's config.

Every component runs under a ServiceAccount of its own with no API token: none of them
needs the Kubernetes API. The one exception is a SuperExec with `executor.type:
kubernetes` (Flower 1.32+), which starts each ServerApp/ClientApp as a pod; it gets a
token and a namespace-scoped Role with exactly the verbs Flower's kubernetes_executor
uses (read off flwr/supercore/superexec/executor/kubernetes_executor.py, 1.41):

- pods: create, list, patch, delete (launch, capacity checks, warm dispatch, sweeping)
- pods/exec: create, get (warm-executor hand-off; the API server authorizes the
  WebSocket upgrade as `create` since Kubernetes 1.30, `get` before)
- secrets: create, list, delete (a per-task AppIo credential Secret)

NVFLARE's launcher Role asks for more (get/watch on pods, get/update on Secrets);
Flower's executor polls with list and never reads a Secret back.
"""

from __future__ import annotations

from typing import Any, Optional

import yaml

from flower_federation.builders import network_links, pod_settings, pods, resources
from flower_federation.config import ServiceAccountSettings
from flower_federation.config.images import reference
from flower_federation.flower.layout import EXECUTOR_CONFIG_DIR, EXECUTOR_CONFIG_FILE, WRITABLE_PATHS
from flower_federation.kube.naming import TASK_EXECUTOR
from flower_federation.kube.objects import Manifest
from flower_federation.plan import FederationPlan

EXECUTOR_CONFIG_PATH = f"{EXECUTOR_CONFIG_DIR}/{EXECUTOR_CONFIG_FILE}"

EXECUTOR_RULES = [
    {"apiGroups": [""], "resources": ["pods"], "verbs": ["create", "delete", "list", "patch"]},
    {"apiGroups": [""], "resources": ["pods/exec"], "verbs": ["create", "get"]},
    {"apiGroups": [""], "resources": ["secrets"], "verbs": ["create", "delete", "list"]},
]
# Read-only view of the federation, never its Secrets.
VIEWER_RULES = [
    {
        "apiGroups": [""],
        "resources": [
            "pods",
            "pods/log",
            "services",
            "endpoints",
            "configmaps",
            "persistentvolumeclaims",
            "serviceaccounts",
            "events",
        ],
        "verbs": ["get", "list", "watch"],
    },
    {
        "apiGroups": ["apps"],
        "resources": ["statefulsets", "daemonsets", "deployments", "replicasets"],
        "verbs": ["get", "list", "watch"],
    },
    {"apiGroups": ["networking.k8s.io"], "resources": ["networkpolicies"], "verbs": ["get", "list", "watch"]},
    {"apiGroups": ["policy"], "resources": ["poddisruptionbudgets"], "verbs": ["get", "list", "watch"]},
]


def service_account(
    plan: FederationPlan,
    name: str,
    component: str,
    pool: Optional[str] = None,
    api_token: bool = False,
    image_pull_secrets: Optional[list[dict[str, str]]] = None,
    settings: Optional[ServiceAccountSettings] = None,
) -> Manifest:
    """A component's own ServiceAccount; with an API token only if the component needs one (`api_token`) or its
    settings ask for one."""
    own = settings or ServiceAccountSettings()
    automount = own.automount_service_account_token
    sa: Manifest = {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": plan.meta(name, component, pool, extra_labels=own.labels, extra_annotations=own.annotations),
        "automountServiceAccountToken": api_token if automount is None else automount,
    }
    if image_pull_secrets:
        sa["imagePullSecrets"] = image_pull_secrets
    return sa


def executor_config(plan: FederationPlan, role: str, superexec_image: str, pull_policy: str) -> dict[str, Any]:
    """Flower's Kubernetes executor config (its YAML keys): task pods run restricted,
    under a token-less ServiceAccount, labelled so NetworkPolicies select them."""
    user = dict(plan.spec.executor.config)
    own_image = plan.spec.executor.image
    config: dict[str, Any] = {
        "namespace": plan.namespace,
        "image": reference(own_image) if own_image else superexec_image,
        "image-pull-policy": plan.pull_policy(own_image) if own_image else pull_policy,
        "labels": network_links.task_labels(plan, role),
        "service-account-name": plan.names.task_executor,
        "pod-security-context": pods.pod_security_context(plan.spec.pod_security_context),
        "container-security-context": pods.container_security_context(False, plan.spec.security_context),
        # Read-only root filesystem: Flower's writable paths on an emptyDir.
        "volumes": [{"name": "scratch", "emptyDir": {}}],
        "volume-mounts": [
            {"name": "scratch", "mountPath": path, "subPath": sub} for sub, path in WRITABLE_PATHS.items()
        ],
    }
    # Flower's executor takes literal env for its task pods from the HTTP era (1.41's factory).
    telemetry = pods.telemetry_env(plan.spec.telemetry)
    if telemetry and not plan.grpc_era:
        config["env"] = telemetry
    task_resources = resources.task_pods(plan)  # `resources` of the user's config merged in there
    if task_resources:
        config["resources"] = task_resources
    # The federation's pod settings (the chart's global.*) reach task pods too; `executor.config` wins.
    if plan.spec.pod_labels:
        config["labels"] = {**plan.spec.pod_labels, **config["labels"]}
    if plan.spec.node_selector:
        config["node-selector"] = dict(plan.spec.node_selector)
    if plan.spec.tolerations:
        config["tolerations"] = list(plan.spec.tolerations)
    node_affinity = pod_settings.preset_affinity(plan.spec.affinity, {}, spread=False)
    if node_affinity:
        config["affinity"] = node_affinity
    for key, value in user.items():
        if key == "labels" and isinstance(value, dict):
            config[key] = {**config.get(key, {}), **value}
        elif key == "env" and isinstance(value, list):  # the user's vars win by name
            config[key] = pods.merge_env(config.get(key, []), value)
        elif key != "resources":
            config[key] = value
    return config


def executor_config_map(
    plan: FederationPlan, superexec_workload: str, role: str, superexec_image: str, pull_policy: str
) -> Manifest:
    text = yaml.safe_dump(executor_config(plan, role, superexec_image, pull_policy), sort_keys=True)
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": plan.meta(plan.names.executor_config(superexec_workload), TASK_EXECUTOR),
        "data": {EXECUTOR_CONFIG_FILE: text},
    }


def executor_role_binding(plan: FederationPlan, superexec_workload: str) -> Manifest:
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": plan.meta(superexec_workload, TASK_EXECUTOR),
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": plan.names.executor_role},
        "subjects": [{"kind": "ServiceAccount", "name": superexec_workload, "namespace": plan.namespace}],
    }


def federation_objects(plan: FederationPlan) -> list[Manifest]:
    """Objects shared by the whole federation: the executor Role and the task pods'
    ServiceAccount, and the optional viewer Role."""
    out: list[Manifest] = []
    names = plan.names
    if plan.kubernetes_executor:
        # Flower's executor config has no pull secrets: its pods get them from their ServiceAccount.
        out.append(
            service_account(plan, names.task_executor, TASK_EXECUTOR, image_pull_secrets=plan.image_pull_secrets(None))
        )
        out.append(
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "Role",
                "metadata": plan.meta(names.executor_role, TASK_EXECUTOR),
                "rules": EXECUTOR_RULES,
            }
        )
    groups = plan.spec.rbac.viewer_groups
    if groups:
        out.append(
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "Role",
                "metadata": plan.meta(names.viewer_role, "viewer"),
                "rules": VIEWER_RULES,
            }
        )
        out.append(
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "RoleBinding",
                "metadata": plan.meta(names.viewer_role, "viewer"),
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": names.viewer_role},
                "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": g} for g in groups],
            }
        )
    return out
