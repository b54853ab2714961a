"""Deterministic multi-document YAML for a set of Kubernetes objects.

Objects come in install order (namespaces first, workloads last, as Helm orders them),
then by namespace and name; keys are sorted below the top level. The same objects give
the same bytes whatever order they were registered in and whatever PYTHONHASHSEED is.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import yaml

KIND_ORDER = (
    "Namespace",
    "NetworkPolicy",
    "ResourceQuota",
    "LimitRange",
    "PodDisruptionBudget",
    "ServiceAccount",
    "Secret",
    "ConfigMap",
    "PersistentVolumeClaim",
    "ClusterRole",
    "ClusterRoleBinding",
    "Role",
    "RoleBinding",
    "Service",
    "Certificate",
    "Issuer",
    "Ingress",
    "DaemonSet",
    "Deployment",
    "StatefulSet",
    "Job",
)
TOP_LEVEL = ("apiVersion", "kind", "metadata")


def sort_key(obj: dict[str, Any]) -> tuple[int, str, str, str]:
    kind = obj.get("kind", "")
    rank = KIND_ORDER.index(kind) if kind in KIND_ORDER else len(KIND_ORDER)
    meta = obj.get("metadata", {})
    return (rank, kind, meta.get("namespace", ""), meta.get("name", ""))


def _ordered(obj: dict[str, Any]) -> dict[str, Any]:
    head = {k: obj[k] for k in TOP_LEVEL if k in obj}
    tail = {k: obj[k] for k in sorted(obj) if k not in TOP_LEVEL}
    return {**head, **tail}


# libyaml's C emitter where PyYAML was built with it (the wheels are): the pure-Python
# emitter was the largest single cost of a render. Both emit the same bytes.
_BaseDumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


class _Dumper(_BaseDumper):  # type: ignore[misc,valid-type]
    pass


def _represent_dict(dumper: yaml.SafeDumper, data: dict[str, Any]) -> yaml.Node:
    # Keys of nested dicts sorted; the top level keeps apiVersion/kind/metadata first.
    items = data.items() if getattr(data, "_keep_order", False) else sorted(data.items())
    return dumper.represent_mapping("tag:yaml.org,2002:map", items)


class _TopLevel(dict[str, Any]):
    _keep_order = True


def _represent_str(dumper: yaml.SafeDumper, data: str) -> yaml.Node:
    # Files in ConfigMaps (scripts, configs) as literal blocks, readable in a review; a
    # string YAML cannot keep literally (trailing spaces, tabs) falls back to quoting.
    if "\n" in data and not any(line != line.rstrip() or "\t" in line for line in data.splitlines()):
        return dumper.represent_scalar("tag:yaml.org,2002:str", data, style="|")
    return dumper.represent_str(data)


_Dumper.add_representer(dict, _represent_dict)
_Dumper.add_representer(str, _represent_str)
_Dumper.add_representer(_TopLevel, _represent_dict)


def dump_all(objects: Iterable[dict[str, Any]]) -> str:
    docs = [_TopLevel(_ordered(o)) for o in sorted(objects, key=sort_key)]
    return yaml.dump_all(docs, Dumper=_Dumper, default_flow_style=False, sort_keys=False, allow_unicode=True, width=120)
