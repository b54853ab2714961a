"""What the kubelet does to a container before exec: resolve env (including downward
API fields) and expand `$(VAR)` references in env values and args; and after it exits, the
termination message `FallbackToLogsOnError` keeps from its log.

`expand` follows Kubernetes' own algorithm (third_party/forked/golang/expansion):
`$$` becomes `$`, `$(NAME)` becomes the value of NAME if defined and stays literally
otherwise, any other `$` is kept.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, Optional

from flower_federation.flower.superlink_state import HTTP_ERA_SUPERLINK_ENTRY, SUPERLINK_ENTRY
from tests.support.manifests import WORKLOAD_KINDS


def expand(text: str, env: Mapping[str, str]) -> str:
    out: list[str] = []
    checkpoint = 0
    cursor = 0
    while cursor < len(text):
        if text[cursor] == "$" and cursor + 1 < len(text):
            out.append(text[checkpoint:cursor])
            nxt = text[cursor + 1]
            if nxt == "$":
                out.append("$")
                advance = 1
            elif nxt == "(":
                close = text.find(")", cursor + 2)
                if close == -1:
                    out.append("$(")
                    advance = 1
                else:
                    name = text[cursor + 2 : close]
                    out.append(env.get(name, f"$({name})"))
                    advance = close - cursor
            else:
                out.append("$" + nxt)
                advance = 1
            cursor += advance
            checkpoint = cursor + 1
        cursor += 1
    out.append(text[checkpoint:])
    return "".join(out)


def field_value(path: str, pod: Mapping[str, Any]) -> str:
    """A downward-API fieldRef for a pod described as {"name", "nodeName", "labels"}
    (and, where a pod has them, "namespace", "annotations", "podIP", "hostIP",
    "serviceAccountName", "uid")."""
    if path == "metadata.name":
        return pod["name"]
    if path == "spec.nodeName":
        return pod["nodeName"]
    if path.startswith("metadata.labels['") and path.endswith("']"):
        return pod["labels"][path[len("metadata.labels['") : -2]]
    if path.startswith("metadata.annotations['") and path.endswith("']") and "annotations" in pod:
        return pod["annotations"][path[len("metadata.annotations['") : -2]]
    optional = {
        "metadata.namespace": "namespace",
        "status.podIP": "podIP",
        "status.hostIP": "hostIP",
        "spec.serviceAccountName": "serviceAccountName",
        "metadata.uid": "uid",
    }
    if path in optional and optional[path] in pod:
        return pod[optional[path]]
    raise KeyError(f"unsupported fieldRef {path}")


# What a container's env may read from other objects: lookup(kind, name) returns the
# object's data as text ({key: value}) or None when there is no such object.
Lookup = Callable[[str, str], Optional[Mapping[str, str]]]


class MissingReference(KeyError):
    """A non-optional env reference to a missing object or key: the kubelet refuses to
    start the container (CreateContainerConfigError)."""


def _ref_value(kind: str, ref: Mapping[str, Any], lookup: Lookup) -> Optional[str]:
    data = lookup(kind, ref["name"])
    if data is None or ref["key"] not in data:
        if ref.get("optional"):
            return None
        raise MissingReference(
            f"{kind} {ref['name']} has no key {ref['key']}" if data is not None else f"{kind} {ref['name']} not found"
        )
    return data[ref["key"]]


def container_env(
    container: Mapping[str, Any], pod: Mapping[str, Any], lookup: Optional[Lookup] = None
) -> dict[str, str]:
    """The container's environment as the kubelet builds it: `envFrom` (Secrets and
    ConfigMaps, with prefixes) first, then `env` in order, each value `$(VAR)`-expanded
    against the variables before it. `lookup` resolves Secret/ConfigMap references;
    without it only literal values and fieldRefs are resolved (references to other
    objects are left out)."""
    env: dict[str, str] = {}
    for source in container.get("envFrom", []) if lookup is not None else []:
        for kind, key in (("Secret", "secretRef"), ("ConfigMap", "configMapRef")):
            if key not in source:
                continue
            ref = source[key]
            data = lookup(kind, ref["name"])
            if data is None:
                if ref.get("optional"):
                    continue
                raise MissingReference(f"{kind} {ref['name']} not found")
            for k, v in data.items():
                env[source.get("prefix", "") + k] = v
    for var in container.get("env", []):
        source = var.get("valueFrom", {})
        if "value" in var:
            env[var["name"]] = expand(var["value"], env)
        elif "fieldRef" in source:
            env[var["name"]] = field_value(source["fieldRef"]["fieldPath"], pod)
        elif lookup is None:
            continue
        elif "secretKeyRef" in source or "configMapKeyRef" in source:
            kind, ref = (
                ("Secret", source["secretKeyRef"])
                if "secretKeyRef" in source
                else ("ConfigMap", source["configMapKeyRef"])
            )
            value = _ref_value(kind, ref, lookup)
            if value is not None:
                env[var["name"]] = value
        elif "name" in var and not source:
            env[var["name"]] = ""  # `- name: X` alone sets X to the empty string
    return env


def container_argv(container: Mapping[str, Any], pod: Mapping[str, Any]) -> list[str]:
    """The args the program receives (images' ENTRYPOINT is the program itself, or the
    SuperLink's wrapper (flower_federation/flower/superlink_state.py), which hands them to Flower's own entry point)."""
    env = container_env(container, pod)
    if "command" in container:
        command = container["command"]
        assert command[:2] == ["python", "-c"] and command[2].endswith((SUPERLINK_ENTRY, HTTP_ERA_SUPERLINK_ENTRY)), (
            "unexpected command"
        )
    return [expand(a, env) for a in container.get("args", [])]


def container_command(
    container: Mapping[str, Any], pod: Mapping[str, Any], entrypoint: list[str], lookup: Optional[Lookup] = None
) -> list[str]:
    """The full argv the kubelet has the runtime exec: `command` (else the image's
    `entrypoint`) then `args`, both `$(VAR)`-expanded against the container's env."""
    env = container_env(container, pod, lookup)
    command = [expand(a, env) for a in container["command"]] if "command" in container else list(entrypoint)
    return command + [expand(a, env) for a in container.get("args", [])]


def pod_for(workload: Mapping[str, Any], index: int = 0, node: str = "node-a") -> dict[str, Any]:
    """The identity Kubernetes gives pod `index` of a workload."""
    name = workload["metadata"]["name"]
    labels = dict(workload["spec"]["template"]["metadata"].get("labels", {}))
    if workload["kind"] == "StatefulSet":
        labels["apps.kubernetes.io/pod-index"] = str(index)
        pod_name = f"{name}-{index}"
    else:
        pod_name = f"{name}-x7k2p"
    return {"name": pod_name, "nodeName": node, "labels": labels}


def pods_of(workload: Mapping[str, Any], daemonset_nodes: Sequence[str] = ("node-a", "node-b")) -> list[dict[str, Any]]:
    """The pods a workload's controller makes: every StatefulSet replica, a Deployment's
    pod, a DaemonSet's pod on each of `daemonset_nodes`."""
    if workload["kind"] == "StatefulSet":
        return [pod_for(workload, i) for i in range(workload["spec"]["replicas"])]
    if workload["kind"] == "DaemonSet":
        return [pod_for(workload, node=n) for n in daemonset_nodes]
    return [pod_for(workload)]


def started_containers(
    objects: Iterable[Mapping[str, Any]],
    daemonset_nodes: Callable[[Mapping[str, Any]], Sequence[str]] = lambda workload: ("node-a", "node-b"),
) -> Iterator[tuple[Mapping[str, Any], dict[str, Any], dict[str, Any], list[str]]]:
    """(workload, pod, container, argv) for every container of every pod we start
    (`pods_of` each workload, a DaemonSet on the nodes `daemonset_nodes(workload)` names)."""
    for obj in objects:
        if obj["kind"] not in WORKLOAD_KINDS:
            continue
        nodes = daemonset_nodes(obj) if obj["kind"] == "DaemonSet" else ()
        for pod in pods_of(obj, nodes):
            for c in obj["spec"]["template"]["spec"]["containers"]:
                yield obj, pod, c, container_argv(c, pod)


def mounted_files(pod_spec: Mapping[str, Any], container: Mapping[str, Any]) -> dict[str, tuple[str, Optional[str]]]:
    """Files a container sees from Secret volumes: path -> (secret name, key)."""
    volumes = {v["name"]: v for v in pod_spec.get("volumes", [])}
    files = {}
    for m in container.get("volumeMounts", []):
        secret = volumes.get(m["name"], {}).get("secret")
        if not secret:
            continue
        for item in secret.get("items", []):
            files[f"{m['mountPath'].rstrip('/')}/{item['path']}"] = (secret["secretName"], item["key"])
    return files


# The kubelet's FallbackToLogsOnError (kuberuntime readLastStringFromContainerLogs): the log's last
# MaxContainerTerminationMessageLogLines lines through a circular buffer of MaxContainerTerminationMessageLogLength
# bytes, so the last 2048 bytes of the last 80 lines.
TERMINATION_LOG_LINES = 80
TERMINATION_LOG_BYTES = 2048


def termination_message(log: str) -> str:
    tail = "".join(log.splitlines(keepends=True)[-TERMINATION_LOG_LINES:]).encode()
    return tail[-TERMINATION_LOG_BYTES:].decode(errors="replace")
