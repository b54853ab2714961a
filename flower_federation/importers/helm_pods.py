"""`import helm`: the steps about pods that are more than a copy (helm.py copies the rest as
docs/helm-parameters.md says): the chart's global security contexts, key by key where
Kubernetes takes each; the ServiceAccounts it can leave out; the SuperExecs' probes, which
are the chart's own, not the SuperNodes'; its spreading preset; and labels of ours the values set otherwise."""

from __future__ import annotations

from typing import TYPE_CHECKING

from flower_federation.builders.pods import container_security_context, pod_security_context
from flower_federation.importers.chart import CHART, POOL
from flower_federation.importers.common import get_path, parts_of
from flower_federation.importers.helm_parameters import mappings
from flower_federation.rules import labels as rules_labels

if TYPE_CHECKING:
    from flower_federation.importers.helm_state import ChartImport

# Where Kubernetes takes a securityContext key: only in a container's, only in a pod's.
CONTAINER_ONLY = {"allowPrivilegeEscalation", "capabilities", "privileged", "procMount", "readOnlyRootFilesystem"}
POD_ONLY = {"fsGroup", "fsGroupChangePolicy", "supplementalGroups", "supplementalGroupsPolicy", "sysctls"}
POD, CONTAINER = "podSecurityContext", "securityContext"
# The chart's labels that reach our objects and pods (where ours are applied over them).
LABELS = (
    "global.labels",
    "global.podLabels",
    "supernode.labels",
    "supernode.podLabels",
    "superexec.labels",
    "superexec.podLabels",
)
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


def our_labels(steps: ChartImport) -> None:
    """A label the values set, on pods or on every object, under a key flower-federation sets itself (a selector or
    ownership label) to another value: ours would overwrite it in the render. Refused by its path (what
    --allow-drop writes goes without it); run after the labels are copied to their config paths."""
    v, s = steps.vals, steps.stack
    for path in LABELS:
        target = CHART[path].to
        if not steps.active(path) or not v.set_by_user(path) or target is None:
            continue
        parts = parts_of(target)
        ours = rules_labels.our_labels(s.config, s.stack, parts[:-1])
        copied = get_path(s.config, parts)
        for key, value in (v.get(path) or {}).items():
            why = rules_labels.our_label_problem(str(key), value, ours)
            if why:
                s.refuse(f'{path}["{key}"]', why)
                if isinstance(copied, dict):
                    copied.pop(key, None)
        if copied == {}:  # nothing of it left to write
            parent = get_path(s.config, parts[:-1]) if len(parts) > 1 else s.config
            if isinstance(parent, dict):
                parent.pop(str(parts[-1]), None)


def spreading(steps: ChartImport) -> None:
    """`global.affinity.podAntiAffinity` differs only in taste (the chart's `soft`, ours `none`):
    the chart's value is written (helm.py copies one the values file sets)."""
    path = "global.affinity.podAntiAffinity"
    if not steps.vals.set_by_user(path):
        steps.stack.set("affinity.podAntiAffinity", steps.vals.get(path), f"{path} (the chart's default)")
