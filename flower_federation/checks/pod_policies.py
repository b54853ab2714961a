"""The promises about the federation's pods: NetworkPolicies on both directions, restricted Pod
Security, a memory limit on every container, no API token a pod does not use, images pinned.

They hold for Flower pods (`pods.PodSite.is_flower`: a container runs a Flower program or image,
so the SuperLink's Fleet-only proxy and the registration Job count too); other workloads in the
same stack or file are not the federation's and are not judged.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from flower_federation.checks.model import (
    ADVISORY,
    CIS,
    CIS_VERSION,
    MANDATORY,
    PSS,
    UNKNOWN,
    Control,
    Objects,
    Policy,
    Ref,
    Violation,
    as_dict,
    as_list,
    has_unknown,
    same_namespace,
    selector_matches,
)
from flower_federation.checks.pods import PodSite, flower_pods
from flower_federation.flower.versions import image_tag
from flower_federation.kube.pod_security import restricted_violations
from flower_federation.rules.images import VERSION_TAG

DIRECTIONS = ("Ingress", "Egress")


def _policy_types(np: dict[str, Any]) -> frozenset[str]:
    """What a NetworkPolicy governs: its policyTypes, defaulted as the API server does (Ingress,
    and Egress when it has egress rules); both when that is not known yet."""
    spec = as_dict(np.get("spec"))
    if has_unknown(spec.get("policyTypes")) or has_unknown(spec.get("egress")) or np.get("spec") is UNKNOWN:
        return frozenset(DIRECTIONS)
    types = as_list(spec.get("policyTypes"))
    if types:
        return frozenset(t for t in types if t in DIRECTIONS)
    return frozenset({"Ingress", "Egress"} if "egress" in spec else {"Ingress"})


def check_network_policies(objects: Objects) -> Iterator[Violation]:
    policies = list(objects.of_kind("NetworkPolicy"))
    for pod in flower_pods(objects):
        if has_unknown(pod.labels):
            continue
        covered: set[str] = set()
        for np in policies:
            if same_namespace(Ref.of(np).namespace, pod.ref.namespace) and selector_matches(
                as_dict(np.get("spec")).get("podSelector"), pod.labels
            ):
                covered |= _policy_types(np)
        missing = [d for d in DIRECTIONS if d not in covered]
        if missing:
            yield Violation(
                pod.ref,
                pod.at("metadata.labels"),
                f"no NetworkPolicy with policyTypes {' and '.join(missing)} selects these pods: "
                f"{'their ' + ' and '.join(m.lower() for m in missing)} traffic is open to and from anywhere",
            )


_WHERE = re.compile(
    r"spec\.[\w.]+|(?:initContainers|containers|ephemeralContainers|volumes)\[[^\]]*\](?:\.securityContext[\w.]*)?"
)
# The field of a container's a Pod Security control reads (kube/pod_security.py names the container).
_CONTAINER_FIELD = {
    "privilege escalation": "securityContext.allowPrivilegeEscalation",
    "running as non-root": "securityContext.runAsNonRoot",
    "running as non-root user": "securityContext.runAsUser",
    "seccomp": "securityContext.seccompProfile",
    "capabilities": "securityContext.capabilities",
    "privileged": "securityContext.privileged",
    "host ports": "ports",
    "/proc mount": "securityContext.procMount",
    "HostProcess": "securityContext.windowsOptions.hostProcess",
}


def _security_path(pod: PodSite, text: str) -> str:
    control = text.split(":", 1)[0]
    if control == "sysctls":
        return pod.at("spec.securityContext.sysctls")
    m = _WHERE.search(text.split(":", 1)[-1])
    where = m.group(0) if m else "spec"
    if where.startswith("spec"):
        return pod.at(where)
    if not where.startswith("volumes") and ".securityContext" not in where and control in _CONTAINER_FIELD:
        where += "." + _CONTAINER_FIELD[control]
    return pod.at(f"spec.{where}")


def _security_view(spec: dict[str, Any]) -> dict[str, Any]:
    """The fields Pod Security reads: none of them may be unknown for a verdict."""
    view = {k: spec.get(k) for k in ("hostNetwork", "hostPID", "hostIPC", "securityContext", "volumes")}
    for kind in ("initContainers", "containers", "ephemeralContainers"):
        items = spec.get(kind)
        view[kind] = (
            UNKNOWN
            if items is UNKNOWN
            else [{k: as_dict(c).get(k) for k in ("name", "securityContext", "ports")} for c in as_list(items)]
        )
    return view


def check_pod_security(objects: Objects) -> Iterator[Violation]:
    for pod in flower_pods(objects):
        if has_unknown(_security_view(pod.spec)):
            continue
        for text in restricted_violations({"spec": pod.spec}):
            yield Violation(pod.ref, _security_path(pod, text), f"Pod Security restricted: {text}")


def check_memory_limits(objects: Objects) -> Iterator[Violation]:
    for pod in flower_pods(objects):
        for path, c in pod.containers(("initContainers", "containers")):
            resources = c.get("resources")
            if has_unknown(resources):
                continue
            if "memory" not in as_dict(as_dict(resources).get("limits")):
                yield Violation(
                    pod.ref,
                    f"{path}.resources.limits.memory",
                    "no memory limit: one ClientApp or run can take the node's memory and have its neighbours evicted",
                )


def _bound(objects: Objects, namespace: str, account: str) -> bool:
    """Whether a RoleBinding or ClusterRoleBinding among the objects grants the ServiceAccount
    anything (unknown subjects count as granting)."""
    for binding in objects.of_kind("RoleBinding", "ClusterRoleBinding"):
        own_ns = Ref.of(binding).namespace
        if binding.get("kind") == "RoleBinding" and not same_namespace(own_ns, namespace):
            continue
        subjects = binding.get("subjects")
        if has_unknown(subjects):
            return True
        for s in as_list(subjects):
            s = as_dict(s)
            same_account = s.get("kind") == "ServiceAccount" and s.get("name") == account
            if same_account and same_namespace(s.get("namespace") or own_ns, namespace):
                return True
            if s.get("kind") == "Group" and s.get("name") in (
                "system:serviceaccounts",
                f"system:serviceaccounts:{namespace}",
            ):
                return True
    return False


def check_service_account_token(objects: Objects) -> Iterator[Violation]:
    for pod in flower_pods(objects):
        automount = pod.spec.get("automountServiceAccountToken")
        account = pod.spec.get("serviceAccountName") or pod.spec.get("serviceAccount") or "default"
        if automount is UNKNOWN or account is UNKNOWN or automount is False or not isinstance(account, str):
            continue
        if automount is None:
            accounts = [
                sa
                for sa in objects.of_kind("ServiceAccount")
                if Ref.of(sa).name == account and same_namespace(Ref.of(sa).namespace, pod.ref.namespace)
            ]
            if any(sa.get("automountServiceAccountToken") in (False, UNKNOWN) for sa in accounts):
                continue
        if _bound(objects, pod.ref.namespace, account):
            continue
        yield Violation(
            pod.ref,
            pod.at("spec.automountServiceAccountToken"),
            f"mounts an API token of ServiceAccount {account}, which no Role or ClusterRole here is bound to: "
            "code in the pod (a ClientApp, a ServerApp) gets Kubernetes credentials it does not need",
        )


def check_images_pinned(objects: Objects) -> Iterator[Violation]:
    for pod in flower_pods(objects):
        for path, c in pod.containers(("initContainers", "containers")):
            image = c.get("image")
            if not isinstance(image, str) or "@" in image:
                continue  # not known yet, or pinned by digest
            tag = image_tag(image)
            if tag is None:
                problem = "has no tag: it pulls `latest`, whatever that is on the day a pod starts"
            elif tag == "latest":
                problem = "is `latest`: it pulls whatever that is on the day a pod starts"
            elif not VERSION_TAG.fullmatch(tag):
                problem = f"has tag `{tag}`, which names no version"
            else:
                continue
            yield Violation(
                pod.ref,
                f"{path}.image",
                f"{image} {problem}; an unplanned Flower upgrade migrates the SuperLink's state one way",
            )


# The CIS Kubernetes Benchmark's Pod Security recommendations that Pod Security `restricted` (kube/pod_security.py)
# meets, each: 5.2.1 (an active policy control mechanism) is the cluster's, not a pod's.
CIS_POD_CONTROLS = tuple(
    Control(CIS, CIS_VERSION, reference, title)
    for reference, title in (
        ("5.2.2", "Minimize the admission of privileged containers"),
        ("5.2.3", "Minimize the admission of containers wishing to share the host process ID namespace"),
        ("5.2.4", "Minimize the admission of containers wishing to share the host IPC namespace"),
        ("5.2.5", "Minimize the admission of containers wishing to share the host network namespace"),
        ("5.2.6", "Minimize the admission of containers with allowPrivilegeEscalation"),
        ("5.2.7", "Minimize the admission of root containers"),
        ("5.2.8", "Minimize the admission of containers with the NET_RAW capability"),
        ("5.2.9", "Minimize the admission of containers with added capabilities"),
        ("5.2.10", "Minimize the admission of containers with capabilities assigned"),
        ("5.2.11", "Minimize the admission of Windows HostProcess containers"),
        ("5.2.12", "Minimize the admission of HostPath volumes"),
        ("5.2.13", "Minimize the admission of containers which use HostPorts"),
    )
)

POLICIES = (
    Policy(
        "flower-network-policies",
        "Every Flower pod is selected by a NetworkPolicy for ingress and one for egress",
        MANDATORY,
        "Add a NetworkPolicy whose podSelector selects the pods with policyTypes [Ingress, Egress] (default deny), "
        "then allow only what Flower needs (our render: one per component, builders/network.py).",
        check_network_policies,
        whole_stack=True,
        severity="high",
        url="https://kubernetes.io/docs/concepts/services-networking/network-policies/",
        controls=(Control(CIS, CIS_VERSION, "5.3.2", "Ensure that all Namespaces have Network Policies defined"),),
    ),
    Policy(
        "flower-pod-security-restricted",
        "Every Flower pod meets Pod Security restricted (non-root, no privilege escalation, all capabilities "
        "dropped, seccomp RuntimeDefault or Localhost, no host namespaces, hostPath or privileged containers)",
        MANDATORY,
        "Set runAsNonRoot: true, allowPrivilegeEscalation: false, capabilities.drop [ALL] and seccompProfile "
        "RuntimeDefault on every container (or the pod), and remove host namespaces, hostPath volumes and "
        "privileged: true.",
        check_pod_security,
        severity="high",
        url="https://kubernetes.io/docs/concepts/security/pod-security-standards/#restricted",
        controls=(Control(PSS, "v1.34", "restricted", "the Restricted profile"), *CIS_POD_CONTROLS),
    ),
    Policy(
        "flower-memory-limits",
        "Every container of a Flower pod, init containers too, has a memory limit",
        ADVISORY,
        "Set resources.limits.memory on every container (our config: the resources presets or *Resources).",
        check_memory_limits,
        severity="low",
        url="https://kubernetes.io/docs/concepts/configuration/manage-resources-containers/",
    ),
    Policy(
        "flower-no-service-account-token",
        "No Flower pod mounts a ServiceAccount token it does not use",
        ADVISORY,
        "Set automountServiceAccountToken: false on the pod or its ServiceAccount; a pod that uses the Kubernetes "
        "API (the Kubernetes executor's SuperExec) keeps its token and a RoleBinding that says why.",
        check_service_account_token,
        whole_stack=True,
        severity="medium",
        url="https://kubernetes.io/docs/tasks/configure-pod-container/configure-service-account/",
        controls=(
            Control(CIS, CIS_VERSION, "5.1.6", "Ensure that Service Account Tokens are only mounted where necessary"),
        ),
    ),
    Policy(
        "flower-images-pinned",
        "Every image of a Flower pod is pinned to a version (a version tag or a digest)",
        MANDATORY,
        "Give each image a version tag (flwr/superlink:1.42.0) or a digest (@sha256:...), never `latest` or none.",
        check_images_pinned,
        severity="medium",
        url="https://kubernetes.io/docs/concepts/containers/images/#image-names",
    ),
)
