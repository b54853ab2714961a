"""Looking things up in rendered manifests (plain dicts): objects by kind and name,
workloads and their containers, volumes, mounts, env, a flag's value, a Secret's or
ConfigMap's files."""

from __future__ import annotations

import base64
from collections.abc import Iterable, Iterator
from typing import Any

from flower_federation.kube.objects import WORKLOAD_KINDS

Manifest = dict[str, Any]
__all__ = ["WORKLOAD_KINDS"]


def by_kind(objects: Iterable[Manifest], kind: str) -> list[Manifest]:
    return [o for o in objects if o["kind"] == kind]


def get(objects: Iterable[Manifest], kind: str, name: str) -> Manifest:
    """The one object of that kind and name."""
    found = [o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name]
    assert len(found) == 1, f"{kind}/{name}: {len(found)} found"
    return found[0]


def index(objects: list[Manifest]) -> dict[tuple[str, str], Manifest]:
    """(kind, name) -> object; no two objects may share a kind and name."""
    out = {(o["kind"], o["metadata"]["name"]): o for o in objects}
    assert len(out) == len(objects), "two objects share a kind and name"
    return out


def workloads(objects: Iterable[Manifest]) -> list[Manifest]:
    return [o for o in objects if o["kind"] in WORKLOAD_KINDS]


def pod_spec(workload: Manifest) -> dict[str, Any]:
    return workload["spec"]["template"]["spec"]


def containers(objects: Iterable[Manifest]) -> Iterator[tuple[Manifest, dict[str, Any]]]:
    """(workload, container) for every container of every workload."""
    for w in workloads(objects):
        for c in pod_spec(w)["containers"]:
            yield w, c


def container(workload: Manifest, name: str) -> dict[str, Any]:
    """The one container of that name in a workload's pod template."""
    found = [c for c in pod_spec(workload)["containers"] if c["name"] == name]
    assert len(found) == 1, (
        f"expected one container {name!r}, got {[c['name'] for c in pod_spec(workload)['containers']]}"
    )
    return found[0]


def workload_container(objects: Iterable[Manifest], kind: str, workload: str, name: str) -> dict[str, Any]:
    """Container `name` of the workload `kind`/`workload`."""
    return container(get(objects, kind, workload), name)


def volume(spec: dict[str, Any], name: str) -> dict[str, Any]:
    """The one volume of that name in a pod spec."""
    found = [v for v in spec["volumes"] if v["name"] == name]
    assert len(found) == 1, f"expected one volume {name!r}"
    return found[0]


def volumes_by_name(workload: Manifest) -> dict[str, dict[str, Any]]:
    return {v["name"]: v for v in pod_spec(workload)["volumes"]}


def mounts_by_name(c: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {m["name"]: m for m in c.get("volumeMounts", [])}


def env_by_name(c: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {e["name"]: e for e in c.get("env", [])}


def arg_after(args: list[str], flag: str) -> str:
    """The value after a flag that must appear exactly once."""
    assert args.count(flag) == 1, f"{flag} appears {args.count(flag)} times in {args}"
    return args[args.index(flag) + 1]


def object_data(obj: Manifest) -> dict[str, str]:
    """A Secret's or ConfigMap's files as text: `data` (base64-decoded for a Secret),
    then `stringData` over it, as the API server merges them."""
    data = obj.get("data") or {}
    out = {k: base64.b64decode(v).decode() for k, v in data.items()} if obj["kind"] == "Secret" else dict(data)
    out.update(obj.get("stringData") or {})
    return out


def bound(objects: Iterable[Manifest], kind: str, base: str) -> Manifest:
    """The one object of `kind` whose name is `base` and a content digest (the registration ConfigMaps,
    builders/registration.bound_name; the registration Jobs, job_name): `base-<10 hex digits>`."""
    import re

    pattern = re.compile(re.escape(base) + r"-[0-9a-f]{10}")
    found = [m for m in objects if m["kind"] == kind and pattern.fullmatch(m["metadata"]["name"])]
    assert len(found) == 1, f"{kind}/{base}-<digest>: {len(found)} found"
    return found[0]
