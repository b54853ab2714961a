"""Types for the Kubernetes objects the core builds, at the boundaries where a wrong key
would otherwise only show up in a cluster: every object's identity and metadata, pod
templates and containers. Fields the core never reads stay `Any`; the Kubernetes OpenAPI
schema (kubernetes-validate, strict, in tests) checks the rest of each object."""

from __future__ import annotations

from typing import Any, NamedTuple, NotRequired, TypedDict


class ObjectMeta(TypedDict):
    name: str
    namespace: NotRequired[str]
    labels: dict[str, str]
    annotations: NotRequired[dict[str, Any]]


class TemplateMeta(TypedDict):
    labels: dict[str, str]
    annotations: NotRequired[dict[str, Any]]


class Container(TypedDict):
    name: str
    image: str
    imagePullPolicy: str
    args: list[str]
    command: NotRequired[list[str]]
    env: NotRequired[list[dict[str, Any]]]
    ports: NotRequired[list[dict[str, Any]]]
    resources: dict[str, Any]
    securityContext: dict[str, Any]
    volumeMounts: list[dict[str, Any]]
    livenessProbe: NotRequired[dict[str, Any]]
    readinessProbe: NotRequired[dict[str, Any]]
    startupProbe: NotRequired[dict[str, Any]]
    lifecycle: NotRequired[dict[str, Any]]
    terminationMessagePolicy: NotRequired[str]


# A pod volume: every kind Kubernetes has, so left to the schema check.
Volume = dict[str, Any]


class PodTemplate(TypedDict):
    metadata: TemplateMeta
    spec: dict[str, Any]


class Manifest(TypedDict):
    """One Kubernetes object. Kind-specific top-level fields are optional keys."""

    apiVersion: str
    kind: str
    metadata: ObjectMeta
    spec: NotRequired[dict[str, Any]]
    type: NotRequired[str]
    data: NotRequired[dict[str, Any]]
    stringData: NotRequired[dict[str, Any]]
    rules: NotRequired[list[dict[str, Any]]]
    roleRef: NotRequired[dict[str, str]]
    subjects: NotRequired[list[dict[str, str]]]
    automountServiceAccountToken: NotRequired[bool]
    imagePullSecrets: NotRequired[list[dict[str, str]]]
    # A ConfigMap or Secret that can never change: the registration keys (bound to their content by name).
    immutable: NotRequired[bool]


class ObjectKey(NamedTuple):
    """What Kubernetes keys an object by (within one cluster)."""

    api_version: str
    kind: str
    namespace: str
    name: str

    @classmethod
    def of(cls, m: Manifest) -> ObjectKey:
        return cls(m["apiVersion"], m["kind"], m["metadata"].get("namespace", ""), m["metadata"]["name"])

    def __str__(self) -> str:
        where = f"{self.namespace}/" if self.namespace else ""
        return f"{self.kind} {where}{self.name}"


WORKLOAD_KINDS = ("StatefulSet", "DaemonSet", "Deployment", "Job")


def pod_template_of(m: Manifest) -> PodTemplate | None:
    """The pod template of a workload, else None."""
    if m["kind"] not in WORKLOAD_KINDS:
        return None
    template: PodTemplate = m["spec"]["template"]
    return template
