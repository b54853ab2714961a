"""What the kubelet does to a container before exec: resolve env (including downward
API fields) and expand `$(VAR)` references in env values and args.

`expand` follows Kubernetes' own algorithm (third_party/forked/golang/expansion):
`$$` becomes `$`, `$(NAME)` becomes the value of NAME if defined and stays literally
otherwise, any other `$` is kept.
"""

from __future__ import annotations

from typing import Any, Mapping, Optional


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
                    out.append(env[name] if name in env else f"$({name})")
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
    """A downward-API fieldRef for a pod described as {"name", "nodeName", "labels"}."""
    if path == "metadata.name":
        return pod["name"]
    if path == "spec.nodeName":
        return pod["nodeName"]
    if path.startswith("metadata.labels['") and path.endswith("']"):
        return pod["labels"][path[len("metadata.labels['") : -2]]
    raise KeyError(f"unsupported fieldRef {path}")


def container_env(container: Mapping[str, Any], pod: Mapping[str, Any]) -> dict[str, str]:
    env: dict[str, str] = {}
    for var in container.get("env", []):
        if "value" in var:
            env[var["name"]] = expand(var["value"], env)
        elif "fieldRef" in var.get("valueFrom", {}):
            env[var["name"]] = field_value(var["valueFrom"]["fieldRef"]["fieldPath"], pod)
    return env


def container_argv(container: Mapping[str, Any], pod: Mapping[str, Any]) -> list[str]:
    """The args the program receives (images' ENTRYPOINT is the program itself)."""
    env = container_env(container, pod)
    assert "command" not in container, "flower containers rely on the image entrypoint"
    return [expand(a, env) for a in container.get("args", [])]


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
