"""A component's SuperExec (process isolation), with the Helm chart's `superexec.*` names: `superlink.superexec` for
the ServerApp SuperExec, `supernodes.pools[].superexec` for a pool's ClientApp SuperExecs. Their images and
resources keep the flower-operator's names (`superexecImage`, `images.superexecClientApp`, `superexecResources`)."""

from __future__ import annotations

from typing import Any, Optional

from pydantic import Field

from flower_federation.config.base import Int32, Model
from flower_federation.config.shared_settings import NetworkPolicy, Probes
from flower_federation.config.workloads import PodSettings
from flower_federation.flower.dialects import HEALTH_PORT, SIDECAR_HEALTH_PORT


class SuperExecPorts(Model):
    health: Optional[int] = Field(
        default=None,
        ge=1,
        le=65535,
        description=(
            "Port of the SuperExec's gRPC health server (Flower up to 1.42), which its probes check. Unset: "
            f"{HEALTH_PORT} in a workload of its own, {SIDECAR_HEALTH_PORT} as a sidecar (next to the main container's "
            f"{HEALTH_PORT})."
        ),
    )


class SuperExecSettings(PodSettings):
    """Only in `process` isolation. Container settings (`env`, `extraArgs`, `lifecycle`, `probes`, `containerPorts`)
    apply to sidecars too; the pod and workload settings (`replicas`, labels and annotations, scheduling,
    `imagePullSecrets`, `serviceAccount`, `automountServiceAccountToken`, `podSecurityContext`, `updateStrategy`,
    `networkPolicy`) need `superexecPlacement: distributed`, where the SuperExecs run in workloads of their own:
    a sidecar shares its pod with the SuperLink or SuperNode, so set those there."""

    replicas: Int32 = Field(
        default=1,
        ge=1,
        description=(
            "SuperExecs that share the work: the ServerApp SuperExec Deployment's replicas; for a pool, SuperExecs per "
            "SuperNode (each takes tasks as it is free), in StatefulSets `N-superexec-P` and `N-superexec-P-<c>` for "
            "c = 1 .. replicas-1 (replica k of each serves SuperNode k). Going from 1 to more replaces "
            "`N-superexec-P` once (its selector gains the `flower.flwr.ai/superexec-replica` label). Not with the "
            "Kubernetes executor, whose one SuperExec starts as many task pods as `executor.config` allows."
        ),
    )
    env: list[Any] = Field(
        default=[], description="EnvVars of the SuperExec containers, over the component's `env` (by name)."
    )
    extra_args: list[str] = Field(
        default=[], description="Appended to the SuperExec's args; Kubernetes expands `$(VAR)` in them."
    )
    container_ports: SuperExecPorts = SuperExecPorts()
    probes: Optional[Probes] = Field(
        default=None,
        description=(
            "For the SuperExec containers, over the component's probes key by key (`superlink.probes`, "
            "`supernodes.probes`)."
        ),
    )
    network_policy: NetworkPolicy = Field(
        default=NetworkPolicy(),
        description=(
            "Distributed SuperExecs' own policy, over the component's (`superlink.networkPolicy`, the pool's) key by "
            "key. A SuperExec serves no API: `allowExternal` and the `ingress*MatchLabels` have nothing to open."
        ),
    )
