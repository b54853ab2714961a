"""Settings every workload of ours takes, with the Helm chart's names: labels and annotations, scheduling (node
selector, tolerations, affinity), and the federation-wide defaults of the chart's `global.*`.

A component's setting merges with the federation-wide one as the chart's does: node selectors key by key (the
component wins), tolerations appended, affinity over the presets key by key. `podTemplate` comes last and still
wins (its scheduling fields are taken as given)."""

from __future__ import annotations

from typing import Any, Literal, Optional

from pydantic import Field

from flower_federation.config.base import Model

Preset = Literal["none", "soft", "hard"]


class NodeAffinityPreset(Model):
    """The chart's node affinity preset: the pods go (hard) or prefer to go (soft) to nodes matching
    `matchExpressions`; nothing without expressions."""

    type: Preset = Field(
        default="hard",
        description=(
            "hard: `requiredDuringSchedulingIgnoredDuringExecution`; soft: `preferredDuringScheduling...` (weight 1); "
            "none: no node affinity."
        ),
    )
    match_expressions: list[Any] = Field(
        default=[],
        description="NodeSelectorRequirements (schema-checked), e.g. `{key: pool, operator: In, values: [gpu]}`.",
    )


class AffinityPresets(Model):
    """The chart's `global.affinity` presets, for every pod of the federation (the registration Job takes the node
    affinity only). A component's own `affinity` (a Kubernetes Affinity) wins over them key by key (`nodeAffinity`,
    `podAffinity`, `podAntiAffinity`)."""

    pod_anti_affinity: Preset = Field(
        default="none",
        description=(
            "Spread a workload's pods over nodes (topology `kubernetes.io/hostname`, the workload's selector labels): "
            "soft prefers it, hard requires it (a pod stays Pending rather than share a node). The chart's default is "
            "soft; ours none, so a flower-operator spec renders the same pods."
        ),
    )
    node_affinity: NodeAffinityPreset = NodeAffinityPreset()


class ServiceAccountSettings(Model):
    """The component's own ServiceAccount (never the namespace's `default`, which every pod shares)."""

    annotations: dict[str, str] = Field(
        default={},
        description=(
            "e.g. workload identity: `iam.gke.io/gcp-service-account`, `eks.amazonaws.com/role-arn`, "
            "`azure.workload.identity/client-id` (those hand out their own tokens; no API token needed)."
        ),
    )
    labels: dict[str, str] = Field(
        default={}, description="Extra labels on it (e.g. `azure.workload.identity/use`; ours win on a clash)."
    )
    automount_service_account_token: Optional[bool] = Field(
        default=None,
        description=(
            "The ServiceAccount's own `automountServiceAccountToken`. Unset: false, except for a SuperExec with the "
            "Kubernetes executor (it starts pods); the pod's setting wins over it."
        ),
    )


class PodSettings(Model):
    """Labels and annotations of one workload and its pods, and where its pods run."""

    labels: dict[str, str] = Field(
        default={},
        description="Extra labels on the workload and its pods; never in selectors; a label flower-federation sets itself (its `app.kubernetes.io/*` and `flower.flwr.ai/*` ones) only with its value.",
    )
    annotations: dict[str, str] = Field(default={}, description="Annotations on the workload object.")
    pod_labels: dict[str, str] = Field(
        default={},
        description="Extra labels on the pods, over the top-level `podLabels`; a label flower-federation sets itself (its `app.kubernetes.io/*` and `flower.flwr.ai/*` ones) only with its value.",
    )
    pod_annotations: dict[str, str] = Field(default={}, description="Annotations on the pods.")
    node_selector: dict[str, str] = Field(default={}, description="Over the top-level `nodeSelector`, key by key.")
    tolerations: list[Any] = Field(
        default=[], description="Tolerations (schema-checked), after the top-level `tolerations`."
    )
    affinity: dict[str, Any] = Field(
        default={},
        description=(
            "A Kubernetes Affinity (schema-checked); each of its keys (`nodeAffinity`, `podAffinity`, "
            "`podAntiAffinity`) replaces what the top-level `affinity` presets make of it."
        ),
    )
    image_pull_secrets: Optional[list[str]] = Field(
        default=None,
        description="Names of Secrets to pull the images with; replaces the top-level `imagePullSecrets`.",
    )
    service_account: ServiceAccountSettings = ServiceAccountSettings()
    automount_service_account_token: Optional[bool] = Field(
        default=None,
        description=(
            "Mount an API token into the pods. Unset: false (no component needs the Kubernetes API), except for a "
            "SuperExec with the Kubernetes executor, which needs it (false is refused there). `true` is an explicit "
            "opt-in: anything in the pod may then call the API as its ServiceAccount."
        ),
    )
    pod_security_context: dict[str, Any] = Field(
        default={},
        description=(
            "Over the top-level `podSecurityContext`, key by key (schema-checked); the namespace's Pod Security level "
            "follows what the pods still meet."
        ),
    )
    update_strategy: Optional[dict[str, Any]] = Field(
        default=None,
        description=(
            "The workload's update strategy (schema-checked for its kind): a StatefulSet's or DaemonSet's "
            "`updateStrategy` (`RollingUpdate` or `OnDelete`), a Deployment's `strategy` (`RollingUpdate` or "
            "`Recreate`). Unset: Kubernetes' default, RollingUpdate."
        ),
    )
    lifecycle: Optional[dict[str, Any]] = Field(
        default=None,
        description="The main container's `lifecycle` (postStart/preStop hooks; schema-checked).",
    )
