"""The SuperNode Helm chart's parameters and where each goes: THE mapping table of
`import helm` (federation/importers/helm.py reads it; nothing else decides).

One entry per parameter of the chart's documented values (its README's Parameters tables),
with the chart's default and exactly one of:

- `to`: the config path the value goes to. Without `via` the value is copied there as is;
  several parameters naming one path combine as the chart combines them (`global.*` first, a
  component's own values over it; dicts merge, lists add up). `via` names the step of
  helm.py that computes the value (names, images, TLS, node keys, isolation, ...).
- `refuse`: why a value other than the chart's default cannot be imported; `import helm`
  stops with this reason at the parameter's path (`--allow-drop` drops it, listed).

A parameter that gains a counterpart in the config is a one-line change here: replace its
`refuse=` with `to=`. Paths under `supernodes.pools[0]` are the one pool a chart install
becomes. `*.podTemplate.spec.containers[NAME]` is a patch of that managed container.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

# Parameters the config has no field for today (the chart-parameters work adds them).
NO_COUNTERPART_YET = "no counterpart yet"

POOL = "supernodes.pools[0]"
POD = f"{POOL}.podTemplate"
SUPERNODE_CONTAINER = f"{POD}.spec.containers[supernode]"
SUPEREXEC_CONTAINER = f"{POD}.spec.containers[superexec-clientapp]"

# The chart's nameOverride default: the name its objects carry after the release's.
CHART_NAME = "flower-client"


@dataclass(frozen=True)
class Param:
    default: Any
    to: Optional[str] = None
    via: Optional[str] = None
    refuse: Optional[str] = None


def _probe(component: str, default_enabled: bool = True) -> dict[str, Param]:
    """livenessProbe / readinessProbe of a component: the keys of our `probes`."""
    out: dict[str, Param] = {}
    for probe in ("livenessProbe", "readinessProbe"):
        for key, default in (
            ("enabled", default_enabled),
            ("initialDelaySeconds", 0),
            ("periodSeconds", 10),
            ("timeoutSeconds", 1),
            ("failureThreshold", 3),
            ("successThreshold", 1),
        ):
            out[f"{component}.{probe}.{key}"] = Param(default, to=f"supernodes.probes.{probe}.{key}")
    return out


def _service_account(component: str) -> dict[str, Param]:
    return {
        f"{component}.automountServiceAccountToken": Param(
            True, to=f"{POD}.spec.automountServiceAccountToken", via="automount"
        ),
        f"{component}.serviceAccount.enabled": Param(
            True, refuse="every workload gets a ServiceAccount of its own (without an API token)"
        ),
        f"{component}.serviceAccount.annotations": Param({}, refuse=NO_COUNTERPART_YET),
        f"{component}.serviceAccount.labels": Param({}, refuse=NO_COUNTERPART_YET),
        # The pod's own automountServiceAccountToken decides (the chart sets it on every pod): this one
        # changes nothing, whatever its value.
        f"{component}.serviceAccount.automountServiceAccountToken": Param(
            True, to=f"{POD}.spec.automountServiceAccountToken", via="automount"
        ),
    }


def _scheduling(component: str, container: str) -> dict[str, Param]:
    """What the chart sets per component on its Deployment and pods."""
    return {
        f"{component}.labels": Param({}, to=f"{POD}.metadata.labels"),
        f"{component}.podLabels": Param({}, to=f"{POD}.metadata.labels"),
        f"{component}.podAnnotations": Param({}, to=f"{POD}.metadata.annotations"),
        f"{component}.annotations": Param({}, refuse=NO_COUNTERPART_YET),
        f"{component}.selectorLabels": Param(
            {}, refuse="selectors are fixed (instance, component, pool), so config changes never replace workloads"
        ),
        f"{component}.nodeSelector": Param({}, to=f"{POD}.spec.nodeSelector"),
        f"{component}.tolerations": Param([], to=f"{POD}.spec.tolerations"),
        f"{component}.affinity": Param({}, to=f"{POD}.spec.affinity"),
        f"{component}.imagePullSecrets": Param([], to=f"{POD}.spec.imagePullSecrets"),
        f"{component}.updateStrategy.type": Param("RollingUpdate", refuse=NO_COUNTERPART_YET),
        f"{component}.updateStrategy.rollingUpdate": Param({}, refuse=NO_COUNTERPART_YET),
        f"{component}.lifecycle": Param({}, to=f"{container}.lifecycle", via="container"),
        f"{component}.podSecurityContext": Param({}, to=f"{POD}.spec.securityContext", via="securityContext"),
        f"{component}.env": Param([], to=f"{container}.env", via="env"),
        f"{component}.image.pullPolicy": Param("IfNotPresent", to=f"{container}.imagePullPolicy", via="container"),
    }


def _image(component: str, target: str, repository: str, tag: str) -> dict[str, Param]:
    return {
        f"{component}.image.registry": Param("registry.hub.docker.com", to=target, via="image"),
        f"{component}.image.repository": Param(repository, to=target, via="image"),
        f"{component}.image.tag": Param(tag, to=target, via="image"),
        f"{component}.image.digest": Param("", to=target, via="image"),
    }


CHART: dict[str, Param] = {
    # --- Helm parameters: the chart's fullname (release, nameOverride, fullnameOverride) is `name`.
    "nameOverride": Param(CHART_NAME, to="name", via="name"),
    "fullnameOverride": Param("", to="name", via="name"),
    # --- global
    "global.annotations": Param({}, refuse=NO_COUNTERPART_YET),
    "global.labels": Param({}, to="labels"),
    "global.podLabels": Param({}, to=f"{POD}.metadata.labels"),
    "global.nodeSelector": Param({}, to=f"{POD}.spec.nodeSelector"),
    "global.tolerations": Param([], to=f"{POD}.spec.tolerations"),
    "global.affinity.podAntiAffinity": Param("soft", refuse=NO_COUNTERPART_YET),
    "global.affinity.nodeAffinity.type": Param("hard", refuse=NO_COUNTERPART_YET),
    "global.affinity.nodeAffinity.matchExpressions": Param([], refuse=NO_COUNTERPART_YET),
    "global.nodeAuth.enabled": Param(False, to="nodeAuth.enabled", via="nodeAuth"),
    "global.nodeAuth.authSupernodePrivateKey": Param("", to="nodeAuthKeys (secret config)", via="nodeAuth"),
    "global.nodeAuth.authSupernodePublicKey": Param("", to="stack output nodeAuth.publicKeys", via="nodeAuth"),
    # The chart's global security contexts are whole mappings (any key of Kubernetes'): each key
    # goes where Kubernetes takes it, container or pod.
    "global.securityContext": Param(
        {"runAsUser": 49999, "runAsGroup": 49999, "fsGroup": 49999},
        to="securityContext / podSecurityContext",
        via="securityContext",
    ),
    "global.podSecurityContext": Param(
        {
            "runAsNonRoot": True,
            "readOnlyRootFilesystem": True,
            "allowPrivilegeEscalation": False,
            "seccompProfile": {"type": "RuntimeDefault"},
            "capabilities": {"drop": ["ALL"]},
        },
        to="securityContext / podSecurityContext",
        via="securityContext",
    ),
    "global.env": Param([], to="supernodes.env"),
    "global.image.pullPolicy": Param("IfNotPresent", to="*.imagePullPolicy", via="container"),
    # --- TLS
    "tls.enabled": Param(True, to="insecure", via="tls"),
    # --- SuperNode: one pool, named supernode.name
    "supernode.name": Param("supernode", to=f"{POOL}.name", via="name"),
    "supernode.enabled": Param(True, to="isolationMode", via="isolation"),
    "supernode.resources": Param({}, to=f"{POOL}.supernodeResources"),
    "supernode.node.config": Param({}, to=f"{POOL}.nodeConfig", via="nodeConfig"),
    "supernode.isolationMode": Param("subprocess", to="isolationMode", via="isolation"),
    "supernode.superlink.address": Param(
        "my-superlink.example.com", to="supernodes.superlink.address", via="superlink"
    ),
    "supernode.superlink.port": Param(9092, to="supernodes.superlink.port", via="superlink"),
    "supernode.superlink.certificate.existingSecret": Param(
        "", to="supernodes.superlink.certificate.existingSecret", via="tls"
    ),
    "supernode.superlink.certificate.copyFromExistingSecret.enabled": Param(
        False, to="supernodes.superlink.certificate.existingSecret", via="tls"
    ),
    "supernode.superlink.certificate.copyFromExistingSecret.secretName": Param(
        "", to="Secret N-ca (the copy's name)", via="tls"
    ),
    "supernode.volumes": Param([], to=f"{POOL}.volumes"),
    "supernode.volumeMounts": Param([], to=f"{POOL}.volumeMounts"),
    **_service_account("supernode"),
    "supernode.service.type": Param("ClusterIP", refuse=NO_COUNTERPART_YET),
    "supernode.service.servicePortClientAppIoName": Param("clientappio", refuse=NO_COUNTERPART_YET),
    "supernode.service.servicePortClientAppIo": Param(9094, refuse=NO_COUNTERPART_YET),
    "supernode.service.nodePortClientAppIo": Param("", refuse=NO_COUNTERPART_YET),
    "supernode.containerPorts.clientAppIo": Param(9094, refuse="the ClientAppIo/Runtime API port is 9094"),
    "supernode.containerPorts.health": Param(8081, refuse="the health server port is 8081"),
    "supernode.replicas": Param(1, to=f"{POOL}.replicas", via="replicas"),
    "supernode.extraArgs": Param([], to=f"{POOL}.extraArgs"),
    **_scheduling("supernode", SUPERNODE_CONTAINER),
    **_probe("supernode"),
    **_image("supernode", "supernodes.image", "flwr/supernode-ee", "1.21.0-ubuntu"),
    "supernode.networkPolicy.enabled": Param(True, to="supernodes.networkPolicy.enabled"),
    "supernode.networkPolicy.allowExternal": Param(True, to="supernodes.networkPolicy.allowExternal"),
    "supernode.networkPolicy.allowExternalEgress": Param(True, to="supernodes.networkPolicy.allowExternalEgress"),
    "supernode.networkPolicy.extraIngress": Param([], to="supernodes.networkPolicy.extraIngress"),
    "supernode.networkPolicy.extraEgress": Param([], to="supernodes.networkPolicy.extraEgress"),
    "supernode.networkPolicy.ingressPodMatchLabels": Param({}, to="supernodes.networkPolicy.ingressPodMatchLabels"),
    "supernode.networkPolicy.ingressNSMatchLabels": Param({}, to="supernodes.networkPolicy.ingressNSMatchLabels"),
    "supernode.networkPolicy.ingressNSPodMatchLabels": Param({}, to="supernodes.networkPolicy.ingressNSPodMatchLabels"),
    # --- SuperExec: the pool's ClientApp SuperExecs (process isolation), one per SuperNode
    "superexec.name": Param("superexec-clientapp", to="workload N-superexec-P / container", via="name"),
    "superexec.enabled": Param(False, to="isolationMode", via="isolation"),
    "superexec.resources": Param({}, to=f"{POOL}.superexecResources"),
    "superexec.supernode": Param({}, to="superexecPlacement", via="isolation"),
    "superexec.volumes": Param([], to=f"{POOL}.volumes"),
    "superexec.volumeMounts": Param([], to=f"{POOL}.superexecVolumeMounts"),
    **_service_account("superexec"),
    "superexec.containerPorts.health": Param(8081, refuse="the SuperExec's health server port is fixed (8081/8082)"),
    **_probe("superexec"),
    "superexec.replicas": Param(1, refuse=f"{NO_COUNTERPART_YET}: each SuperNode gets one SuperExec"),
    "superexec.extraArgs": Param([], refuse=NO_COUNTERPART_YET),
    **_scheduling("superexec", SUPEREXEC_CONTAINER),
    **_image("superexec", f"{POOL}.images.superexecClientApp", "flwr/superexec", "1.21.0-py3.11-ubuntu24.04"),
    "superexec.networkPolicy.enabled": Param(True, to="supernodes.networkPolicy.enabled"),
    "superexec.networkPolicy.allowExternalEgress": Param(True, to="supernodes.networkPolicy.allowExternalEgress"),
    "superexec.networkPolicy.extraEgress": Param([], to="supernodes.networkPolicy.extraEgress"),
}


def known_prefixes() -> frozenset[str]:
    """Every proper prefix of a parameter path (`supernode`, `supernode.superlink`, ...):
    where a values file may hold a mapping of further parameters."""
    out = set()
    for path in CHART:
        parts = path.split(".")
        out |= {".".join(parts[:i]) for i in range(1, len(parts))}
    return frozenset(out)
