"""`import helm`: the steps about pods that are more than a copy (helm.py copies the rest as
docs/helm-parameters.md says): the chart's global security contexts, key by key where
Kubernetes takes each; the ServiceAccounts it can leave out; the SuperExecs' probes, which
are the chart's own, not the SuperNodes'; and its spreading preset."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..helm_parameters import mappings
from ..pods import container_security_context, pod_security_context
from .chart import POOL

if TYPE_CHECKING:
    from .helm_state import ChartImport

# Where Kubernetes takes a securityContext key: only in a container's, only in a pod's.
CONTAINER_ONLY = {"allowPrivilegeEscalation", "capabilities", "privileged", "procMount", "readOnlyRootFilesystem"}
POD_ONLY = {"fsGroup", "fsGroupChangePolicy", "supplementalGroups", "supplementalGroupsPolicy", "sysctls"}
POD, CONTAINER = "podSecurityContext", "securityContext"
PROBE_KEYS = (
    "enabled",
    "initialDelaySeconds",
    "periodSeconds",
    "timeoutSeconds",
    "failureThreshold",
    "successThreshold",
)

COMPUTED = frozenset(
    {
        "global.securityContext",
        "global.podSecurityContext",
        "supernode.serviceAccount.enabled",
        "superexec.serviceAccount.enabled",
    }
)


def run(steps: ChartImport) -> None:
    security_contexts(steps)
    service_accounts(steps)
    if steps.process:
        superexec_probes(steps)
    spreading(steps)


def security_contexts(steps: ChartImport) -> None:
    """The chart's `global.securityContext` holds pod-level ids and `global.podSecurityContext`
    container fields: each key goes where the table's row for it says, else where Kubernetes
    takes it (a key only a pod or only a container has), else beside its siblings. Keys equal
    to our restricted defaults are left out."""
    v, s = steps.vals, steps.stack
    ours = {**pod_security_context(), **container_security_context()}
    rows = {r.parameter: r.config_path for r in mappings()}
    for path, side in (("global.securityContext", POD), ("global.podSecurityContext", CONTAINER)):
        given = v.get(path)
        if not isinstance(given, dict):
            s.refuse(path, "must be a mapping (a Kubernetes SecurityContext)", droppable=False)
            continue
        for key, value in given.items():
            if ours.get(key) == value:
                continue
            row = rows.get(f"{path}.{key}")
            target = (
                row.split(".")[0] if row else POD if key in POD_ONLY else CONTAINER if key in CONTAINER_ONLY else side
            )
            s.set((target, key), value, f"{path}.{key}")


def service_accounts(steps: ChartImport) -> None:
    """`serviceAccount.enabled: false` (the namespace's shared `default`) has no counterpart."""
    for component in ("supernode", "superexec"):
        path = f"{component}.serviceAccount.enabled"
        value = steps.vals.get(path)
        if not steps.active(path) or value is True:
            continue
        if value is False:
            steps.stack.refuse(
                path,
                "false: pods under the namespace's `default` ServiceAccount (which every pod there shares) have no "
                "counterpart: here every component has a ServiceAccount of its own (least privilege)",
            )
        else:
            steps.stack.refuse(path, f"must be true or false, not {value!r}", droppable=False)


def superexec_probes(steps: ChartImport) -> None:
    """Here a pool's SuperExecs inherit the SuperNodes' probes (`supernodes.probes`) key by
    key; the chart's have their own. Where only the SuperNode's key is set, the SuperExecs'
    keeps the chart's value."""
    v, s = steps.vals, steps.stack
    for probe in ("livenessProbe", "readinessProbe"):
        for key in PROBE_KEYS:
            own = f"superexec.{probe}.{key}"
            if v.set_by_user(f"supernode.{probe}.{key}") and not v.set_by_user(own):
                s.set(f"{POOL}.superexec.probes.{probe}.{key}", v.get(own), f"{own} (the chart's default)")


def spreading(steps: ChartImport) -> None:
    """`global.affinity.podAntiAffinity` differs only in taste (the chart's `soft`, ours `none`):
    the chart's value is written (helm.py copies one the values file sets)."""
    path = "global.affinity.podAntiAffinity"
    if not steps.vals.set_by_user(path):
        steps.stack.set("affinity.podAntiAffinity", steps.vals.get(path), f"{path} (the chart's default)")
