"""Settings every component has (at the top level, then per component or pool): NetworkPolicies, probes,
disruption budgets, the executor."""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal, Optional

from pydantic import Field

from flower_federation.config.base import Int32, Model, ResourcesPreset
from flower_federation.config.images import Image
from flower_federation.flower.dialects import SUPERNODE_APPIO_PORT

# What a networkPolicy key set nowhere (top level, component, pool) means. Stated here once: the descriptions
# below quote it, and NETWORK_POLICY_DEFAULTS is made of it.
_NETWORK_POLICY_DEFAULTS: dict[str, Any] = {
    "enabled": True,
    "allowExternal": False,
    "allowExternalEgress": False,
    "extraIngress": [],
    "extraEgress": [],
    "ingressPodMatchLabels": {},
    "ingressNSMatchLabels": {},
    "ingressNSPodMatchLabels": {},
    # The Kubernetes API server: its in-cluster Service's port and the apiserver's usual own port.
    "apiServerPorts": [443, 6443],
}


def _default(key: str) -> str:
    return f"Default `{json.dumps(_NETWORK_POLICY_DEFAULTS[key], separators=(', ', ': '))}`"


Port = Annotated[int, Field(ge=1, le=65535)]


class NetworkPolicy(Model):
    """The Helm chart's NetworkPolicy knobs. Set at the top level for every component, and under
    `superlink`, `supernodes` or a pool for that component: a key set there wins over the top level (a pool's
    over `supernodes`'), and a key set nowhere takes the default given here. The ServerApp SuperExec (and its
    task pods) follows `superlink`; a pool's SuperExecs and task pods follow the pool."""

    enabled: Optional[bool] = Field(
        default=None,
        description=(
            f"{_default('enabled')}: a NetworkPolicy per component that denies ingress and egress except what Flower needs. "
            "`false`: the component's traffic is not restricted."
        ),
    )
    allow_external: Optional[bool] = Field(
        default=None,
        description=(
            f"{_default('allowExternal')}. SuperLink: accept the Fleet API from anywhere (SuperNodes in other clusters; in the HTTP era "
            "Fleet and Control share the port). A pool, with distributed SuperExec only: accept the SuperNodes' "
            f"ClientAppIo/Runtime API ({SUPERNODE_APPIO_PORT}; plaintext in the gRPC era) from anywhere."
        ),
    )
    allow_external_egress: Optional[bool] = Field(
        default=None,
        description=(
            f"{_default('allowExternalEgress')}: egress only to cluster DNS and the Flower peers. `true`: any egress (e.g. ClientApps "
            "fetching data)."
        ),
    )
    extra_ingress: Optional[list[Any]] = Field(
        default=None,
        description=f"{_default('extraIngress')}. NetworkPolicyIngressRules (schema-checked) added to the component's policy.",
    )
    extra_egress: Optional[list[Any]] = Field(
        default=None,
        description=(
            f"{_default('extraEgress')}. NetworkPolicyEgressRules (schema-checked) added to the component's policy (no effect with "
            "`allowExternalEgress`)."
        ),
    )
    ingress_pod_match_labels: Optional[dict[str, str]] = Field(
        default=None,
        description=(
            f"{_default('ingressPodMatchLabels')}. Pods of the federation's namespace with these labels may reach the component's API ports "
            f"(SuperLink: Fleet and Control; a pool, with distributed SuperExec only: {SUPERNODE_APPIO_PORT})."
        ),
    )
    ingress_ns_match_labels: Optional[dict[str, str]] = Field(
        default=None,
        alias="ingressNSMatchLabels",
        description=f"{_default('ingressNSMatchLabels')}. Pods in namespaces with these labels may reach the component's API ports.",
    )
    ingress_ns_pod_match_labels: Optional[dict[str, str]] = Field(
        default=None,
        alias="ingressNSPodMatchLabels",
        description=(
            f"{_default('ingressNSPodMatchLabels')}. Only with `ingressNSMatchLabels`: of those namespaces, only pods "
            "with these labels."
        ),
    )
    api_server_ports: Optional[list[Port]] = Field(
        default=None,
        min_length=1,
        description=(
            f"{_default('apiServerPorts')}. Ports of the Kubernetes API server a SuperExec with the Kubernetes executor "
            "may reach (to start task pods): the in-cluster Service's port and the apiserver's own. Some distributions "
            "serve it elsewhere (e.g. 8443)."
        ),
    )


NETWORK_POLICY_DEFAULTS = NetworkPolicy.model_validate(_NETWORK_POLICY_DEFAULTS)


class ProbeSettings(Model):
    """One probe's parameters, as the Helm chart names them."""

    enabled: bool = Field(default=True, description="Give the managed containers this probe.")
    initial_delay_seconds: Int32 = Field(default=0, ge=0, description="Seconds before the first probe.")
    period_seconds: Int32 = Field(default=10, ge=1, description="Seconds between probes.")
    timeout_seconds: Int32 = Field(default=1, ge=1, description="Seconds before a probe counts as failed.")
    failure_threshold: Int32 = Field(default=3, ge=1, description="Failures in a row before the probe fails.")
    success_threshold: Int32 = Field(
        default=1,
        ge=1,
        description=(
            "Successes in a row before the probe passes again; must be 1 for livenessProbe and startupProbe (a Kubernetes "
            "rule)."
        ),
    )


class Probes(Model):
    """The Helm chart's probe parameters. Probes hit Flower's real health endpoint: the
    gRPC health server (`--health-server-address`), or `GET /health` on the HTTP-era
    SuperLink's API port (HTTPS when TLS is on). Flower 1.43 removes the gRPC health server:
    from then on a SuperNode's probe runs the image's Python to GET its loopback Runtime API's
    `/health`, and a SuperExec's checks that its process is not stopped. `superlink.probes` and `supernodes.probes`
    inherit key by key, as the Helm chart's do: a key set there wins, a key left out takes
    the top level's value, and a key set nowhere the default given here."""

    liveness_probe: ProbeSettings = Field(
        default=ProbeSettings.model_validate({"timeoutSeconds": 5, "failureThreshold": 6}),
        description=(
            "Failing it restarts the container. By default a program must fail to answer within 5 s six times in a "
            "row (a minute) before it is killed: a restart loses the SuperLink's running runs, and a busy SuperLink "
            "(Python, one event loop) missed the Helm chart's 1 s three times with 30 SuperNodes in a round on a "
            'loaded 2-core machine (docs/benchmarks.md, "Many SuperNodes"). Readiness keeps 1 s: it only takes the '
            "pod out of its Service's endpoints for a while."
        ),
    )
    readiness_probe: ProbeSettings = Field(default=ProbeSettings(), description="Failing it marks the pod not ready.")
    startup_probe: ProbeSettings = Field(
        default=ProbeSettings.model_validate({"periodSeconds": 5, "failureThreshold": 24}),
        description=(
            "Holds liveness off while a program starts, up to 2 minutes by default (5 s × 24): a SuperLink killed "
            "during its first database migration would leave a half-migrated `--database` behind (seen by the e2e "
            "harness on a loaded machine)."
        ),
    )


# A pool's PodDisruptionBudget when it sets neither maxUnavailable nor minAvailable: one SuperNode at a time.
DEFAULT_MAX_UNAVAILABLE = 1


class DisruptionBudget(Model):
    enabled: bool = Field(default=True, description="Create the PodDisruptionBudget.")
    max_unavailable: Optional[Int32 | str] = Field(
        default=None,
        description=f'A count or a percentage (`"25%"`). Unset: {DEFAULT_MAX_UNAVAILABLE}, unless minAvailable is set.',
    )

    @property
    def effective(self) -> dict[str, int | str]:
        """The budget's one key, as the PodDisruptionBudget gets it."""
        if self.min_available is not None:
            return {"minAvailable": self.min_available}
        return {"maxUnavailable": DEFAULT_MAX_UNAVAILABLE if self.max_unavailable is None else self.max_unavailable}

    min_available: Optional[Int32 | str] = Field(
        default=None, description=("A count or a percentage; instead of maxUnavailable (setting both is an error).")
    )


class Executor(Model):
    """How SuperExecs run ServerApps and ClientApps."""

    type: Literal["subprocess", "kubernetes"] = Field(
        default="subprocess",
        description=(
            "kubernetes (Flower 1.32+, process isolation, distributed placement): each SuperExec runs every app as a pod "
            '(see "Kubernetes executor").'
        ),
    )
    image: Optional[Image] = Field(
        default=None,
        description=(
            "Only with type kubernetes: the task pods' image (and pull policy). Unset: the SuperExec's image."
        ),
    )
    resources_preset: Optional[ResourcesPreset] = Field(
        default=None,
        description=(
            "Only with type kubernetes: the task pods' preset. Unset: `resourcesPreset`, else `small`; "
            "`config.resources` merges over it key by key."
        ),
    )
    config: dict[str, Any] = Field(
        default={},
        description=(
            "Only with type kubernetes: keys of Flower's executor config over ours (e.g. `node-selector`, "
            "`active-pod-budget`); `labels` merge, and `resources` (ResourceRequirements) merges key by key over the task "
            "pods' preset and `defaultResources`; `namespace` and `service-account-name` may not be set."
        ),
    )
