"""Which changes replace an object instead of updating it in place.

Two sources, each rule saying which:

- **pulumi-kubernetes** replaces (deletes and re-creates; the same name, so delete first) an object when a
  "force new" property changes. The table below is `forceNew` and `forceNewProperties` of
  github.com/pulumi/pulumi-kubernetes `provider/pkg/provider/diff.go` at commit
  94977969d64112b04e19945818a7d5d5f38f631d (the file is identical at tag v4.32.0, and requirements.txt pins
  4.34.2, between the two), with `.metadata.name` and `.metadata.namespace` for every kind ("changing the identity
  of the resource always causes a replacement", `provider.go` Diff). Secrets and ConfigMaps: the provider's
  `enableSecretMutable` and `enableConfigMapMutable` are off by default, and program.py's providers leave them
  so; then any change to a Secret's `type`, `data` or `stringData`, or to a ConfigMap's `data` or `binaryData`,
  replaces it.
- **Kubernetes** refuses to update some fields Pulumi's table does not list (the API server's validation): a
  Service's `clusterIPs` and a change of its type to or from ExternalName (which sets or drops its cluster IP), a
  PersistentVolumeClaim's spec other than `resources.requests`, the data of a Secret or ConfigMap marked
  `immutable: true`. `pulumi up` then fails until the object is replaced (`pulumi up --replace URN`).

A rule's path matches a change at or under it; `*` stands for any element of a list.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Optional

from flower_federation.review.fields import FieldChange, Item, Path, at

PULUMI = "pulumi-kubernetes"
KUBERNETES = "Kubernetes"
Manifest = dict[str, Any]


@dataclass(frozen=True)
class Rule:
    group: str  # API group ("" the core group)
    kinds: tuple[str, ...]  # "*": every kind
    paths: tuple[str, ...]  # dotted, `*` any list element
    by: str
    why: str
    versions: tuple[str, ...] = ()  # only these API versions (empty: any)
    unless: tuple[str, ...] = ()  # changes under these paths do not count
    when: Optional[Callable[[Manifest, Manifest], bool]] = None  # only if (old, new) ...


@dataclass(frozen=True, order=True)
class Reason:
    """Why an object is replaced: a field (or `URN`), who replaces it, and why."""

    field: str
    by: str
    why: str

    @property
    def text(self) -> str:
        return f"`{self.field}`: {self.why} ({self.by})"


_CONTAINER = [
    "args",
    "command",
    "env",
    "env.value",
    "image",
    "imagePullPolicy",
    "lifecycle",
    "livenessProbe",
    "ports",
    "readinessProbe",
    "resources",
    "securityContext",
    "stdin",
    "stdinOnce",
    "terminationMessagePath",
    "terminationMessagePolicy",
    "tty",
    "volumeDevices",
    "volumeMounts",
    "workingDir",
]
_POD = [
    "affinity",
    "automountServiceAccountToken",
    "dnsConfig",
    "dnsPolicy",
    "enableServiceLinks",
    "hostAliases",
    "hostIPC",
    "hostNetwork",
    "hostPID",
    "hostname",
    "imagePullSecrets",
    "nodeName",
    "nodeSelector",
    "overhead",
    "preemptionPolicy",
    "priority",
    "priorityClassName",
    "readinessGates",
    "restartPolicy",
    "runtimeClassName",
    "schedulerName",
    "securityContext",
    "serviceAccount",
    "serviceAccountName",
    "shareProcessNamespace",
    "subdomain",
    "terminationGracePeriodSeconds",
    "volumes",
]
_PV = [
    "awsElasticBlockStore",
    "azureDisk",
    "azureFile",
    "cephfs",
    "cinder",
    "csi",
    "fc",
    "flexVolume",
    "flocker",
    "gcePersistentDisk",
    "glusterfs",
    "hostPath",
    "iscsi",
    "local",
    "nfs",
    "photonPersistentDisk",
    "portworxVolume",
    "quobyte",
    "rbd",
    "scaleIO",
    "storageos",
    "vsphereVolume",
]
_SELECTOR = ("spec.selector",)  # with its matchLabels and matchExpressions (labelSelectorForceNewProperties)
_WORKLOAD = "a workload's selector is immutable: it is deleted and created anew"


def _immutable(old: Manifest, new: Manifest) -> bool:
    return bool(old.get("immutable") or new.get("immutable"))


def _external_name(old: Manifest, new: Manifest) -> bool:
    types = {(m.get("spec") or {}).get("type", "ClusterIP") for m in (old, new)}
    return len(types) == 2 and "ExternalName" in types


RULES: tuple[Rule, ...] = (
    Rule("*", ("*",), ("metadata.name", "metadata.namespace"), PULUMI, "the object's identity changes"),
    Rule(
        "apps",
        ("StatefulSet",),
        (
            "spec.podManagementPolicy",
            "spec.revisionHistoryLimit",
            *_SELECTOR,
            "spec.serviceName",
            "spec.volumeClaimTemplates",
        ),
        PULUMI,
        "immutable in a StatefulSet: it is deleted and created anew (its PVCs stay and are re-bound by name; "
        "a new size or class does not reach them)",
    ),
    Rule("apps", ("Deployment", "DaemonSet"), _SELECTOR, PULUMI, _WORKLOAD, versions=("v1beta2", "v1")),
    Rule(
        "batch",
        ("Job",),
        ("spec.completions", "spec.parallelism", *_SELECTOR, "spec.template"),
        PULUMI,
        "a Job is not updated in place: it is deleted and runs anew",
    ),
    Rule(
        "",
        ("PersistentVolumeClaim",),
        ("spec.accessModes", "spec.selector", "spec.storageClassName", "spec.volumeName"),
        PULUMI,
        "the claim is deleted and created anew (its volume's data is lost unless retained)",
    ),
    Rule(
        "",
        ("PersistentVolumeClaim",),
        ("spec",),
        KUBERNETES,
        "a claim's spec is immutable but for resources.requests: the update is refused",
        unless=("spec.resources.requests", "spec.volumeAttributesClassName"),
    ),
    Rule(
        "",
        ("Pod",),
        (
            *(f"spec.{p}" for p in _POD),
            *(f"spec.{c}.*.{f}" for c in ("containers", "initContainers") for f in _CONTAINER),
        ),
        PULUMI,
        "a Pod's spec is immutable: it is deleted and created anew",
    ),
    Rule("", ("PersistentVolume",), tuple(f"spec.{v}" for v in _PV), PULUMI, "a volume's source is immutable"),
    Rule("", ("ResourceQuota",), ("spec.scopes",), PULUMI, "a quota's scopes are immutable"),
    Rule(
        "",
        ("Secret",),
        ("type", "data", "stringData"),
        PULUMI,
        "a Secret whose data or type changes is replaced (the provider's enableSecretMutable is off)",
    ),
    Rule(
        "",
        ("ConfigMap",),
        ("data", "binaryData"),
        PULUMI,
        "a ConfigMap whose data changes is replaced (the provider's enableConfigMapMutable is off)",
    ),
    Rule(
        "",
        ("Secret", "ConfigMap"),
        ("data", "stringData", "binaryData"),
        KUBERNETES,
        "the object is marked immutable: Kubernetes refuses to update its data",
        when=_immutable,
    ),
    Rule("", ("Service",), ("spec.clusterIP",), PULUMI, "a Service's cluster IP is immutable"),
    Rule("", ("Service",), ("spec.clusterIPs",), KUBERNETES, "a Service's cluster IPs are immutable"),
    Rule(
        "",
        ("Service",),
        ("spec.type",),
        KUBERNETES,
        "to or from ExternalName drops or allocates the Service's immutable cluster IP",
        when=_external_name,
    ),
    Rule("policy", ("PodDisruptionBudget",), ("spec",), PULUMI, "a v1beta1 PDB's spec is immutable", ("v1beta1",)),
    Rule(
        "rbac.authorization.k8s.io",
        ("RoleBinding", "ClusterRoleBinding"),
        ("roleRef",),
        PULUMI,
        "a binding's roleRef is immutable",
    ),
    Rule("storage.k8s.io", ("StorageClass",), ("parameters", "provisioner"), PULUMI, "immutable in a StorageClass"),
)


def group_version(manifest: Manifest) -> tuple[str, str]:
    api = str(manifest.get("apiVersion", ""))
    group, _, version = api.rpartition("/")
    return group, version


def _pattern(path: Path) -> tuple[str, ...]:
    return tuple("*" if isinstance(seg, Item) else seg for seg in path)


def _under(path: tuple[str, ...], prefix: tuple[str, ...]) -> bool:
    return path[: len(prefix)] == prefix


def _matches(rule_path: tuple[str, ...], change: FieldChange, old: Manifest, new: Manifest) -> bool:
    path = _pattern(change.path)
    if _under(path, rule_path):
        return True
    # The change is above the rule's field (e.g. the whole spec added): it counts if the field differs.
    return _under(rule_path, path) and ("*" in rule_path or at(old, rule_path) != at(new, rule_path))


def reasons(old: Manifest, new: Manifest, changed: list[FieldChange]) -> list[Reason]:
    """Why the change from `old` to `new` (whose differences are `changed`) replaces the object, sorted; empty:
    an update in place."""
    group, version = group_version(new)
    kind = str(new.get("kind", ""))
    found: set[Reason] = set()
    for rule in RULES:
        if rule.group != "*" and (rule.group != group or kind not in rule.kinds):
            continue
        if rule.versions and version not in rule.versions:
            continue
        if rule.when is not None and not rule.when(old, new):
            continue
        for text in rule.paths:
            rule_path = tuple(text.split("."))
            hits = [
                c
                for c in changed
                if _matches(rule_path, c, old, new)
                and not any(_under(_pattern(c.path), tuple(u.split("."))) for u in rule.unless)
            ]
            if hits:
                found.add(Reason(text, rule.by, rule.why))
    return sorted(found)
