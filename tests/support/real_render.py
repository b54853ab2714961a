"""A security stack rendered by the real Pulumi program with real key material
(`RealTlsProvider`), as a pod would see it: objects with Secrets shown, what each
container mounts from Secrets and ConfigMaps (path -> source, mode), and the pods of
every workload with their command lines expanded as the kubelet would."""

from __future__ import annotations

import functools
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Optional

from flower_federation.cli.offline import run_program
from flower_federation.plan import FederationPlan
from tests.support.kube import started_containers as kubelet_started_containers
from tests.support.manifests import object_data, workloads
from tests.support.render import plan_of
from tests.support.stacks import program_config
from tests.support.tls_provider import RealTlsProvider


@dataclass
class Rendered:
    stack_id: str
    raw: dict[str, Any]
    plan: FederationPlan
    objects: list[dict[str, Any]]  # manifests, secrets shown
    outputs: dict[str, Any]
    reads: set[str]  # "namespace/name" of existing Secrets the program reads
    node_keys: Optional[dict[str, dict[str, str]]]

    def find(self, kind: str, name: str) -> Optional[dict[str, Any]]:
        return next((o for o in self.objects if o["kind"] == kind and o["metadata"]["name"] == name), None)

    def data(self, kind: str, name: str) -> Optional[dict[str, str]]:
        """A rendered Secret's/ConfigMap's files as text (stringData and decoded data)."""
        obj = self.find(kind, name)
        return None if obj is None else object_data(obj)

    def workloads(self) -> list[dict[str, Any]]:
        return workloads(self.objects)

    def workload(self, name: str) -> dict[str, Any]:
        return next(o for o in self.workloads() if o["metadata"]["name"] == name)


def render_fresh(stack_id: str) -> Rendered:
    """A new render of a security stack: new keys and certificates every time."""
    config = program_config(stack_id)
    raw, keys = config["federation"], config.get("nodeAuthKeys")
    run = run_program(config, "dev", provider=RealTlsProvider())
    plan = plan_of(raw, "dev", keys)
    reads = {r.read_id for r in run.registrations if r.read_id}
    return Rendered(stack_id, raw, plan, run.manifests(show_secrets=True), run.outputs, reads, keys)


# The render of a security stack, made once per test session (read it, never mutate it).
render = functools.lru_cache(maxsize=None)(render_fresh)


@dataclass(frozen=True)
class Mounted:
    kind: str  # Secret / ConfigMap
    name: str
    key: str
    mode: int


def pod_files(r: Rendered, pod_spec: dict[str, Any], container: dict[str, Any]) -> dict[str, Mounted]:
    """Files a container sees from Secret and ConfigMap volumes: path -> source. A
    volume without `items` projects every key of the object (which must be rendered)."""
    volumes = {v["name"]: v for v in pod_spec.get("volumes", [])}
    files: dict[str, Mounted] = {}
    for m in container.get("volumeMounts", []):
        vol = volumes.get(m["name"], {})
        for kind, src_key, name_key in (("Secret", "secret", "secretName"), ("ConfigMap", "configMap", "name")):
            src = vol.get(src_key)
            if not src:
                continue
            name = src[name_key]
            default = src.get("defaultMode", 0o644)
            if "items" in src:
                items = [(i["key"], i["path"], i.get("mode", default)) for i in src["items"]]
            else:
                data = r.data(kind, name)
                assert data is not None, f"{kind} {name} is mounted whole but not rendered: its keys are unknown"
                items = [(k, k, default) for k in data]
            assert "subPath" not in m, "a subPath mount of a Secret/ConfigMap never sees updates"
            for key, path, mode in items:
                files[f"{m['mountPath'].rstrip('/')}/{path}"] = Mounted(kind, name, key, mode)
    return files


def claim_mounts(workload: dict[str, Any], container: dict[str, Any]) -> set[str]:
    """Mount paths backed by a PersistentVolumeClaim (StatefulSet claim templates)."""
    claims = {t["metadata"]["name"] for t in workload["spec"].get("volumeClaimTemplates", [])}
    claims |= {
        v["name"] for v in workload["spec"]["template"]["spec"].get("volumes", []) if "persistentVolumeClaim" in v
    }
    return {m["mountPath"].rstrip("/") for m in container.get("volumeMounts", []) if m["name"] in claims}


def key_slots(r: Rendered, pool: str) -> list[str]:
    """The nodes a DaemonSet pool has keys for (else one ordinary node)."""
    if r.node_keys and pool in r.node_keys:
        return sorted(r.node_keys[pool])
    return ["node-a"]


def started_containers(r: Rendered) -> Iterator[tuple[Mapping[str, Any], dict[str, Any], dict[str, Any], list[str]]]:
    """(workload, pod, container, argv) for every Flower program of every pod we start: a
    DaemonSet's pods on the nodes its pool has keys for. The node-registration Job runs
    our script, not a Flower CLI: tests/test_flower_live_registration.py runs it."""
    return kubelet_started_containers(
        [w for w in r.workloads() if w["kind"] != "Job"],
        lambda ds: key_slots(r, ds["spec"]["template"]["metadata"]["labels"]["flower.flwr.ai/pool"]),
    )


def secret_provides(r: Rendered, name: str, key: str) -> None:
    """The Secret a pod mounts exists at deploy time and has `key`: rendered by us,
    issued by our cert-manager Certificate, or the user's Secret the program reads."""
    data = r.data("Secret", name)
    if data is not None:
        assert key in data, f"Secret {name} has no key {key} ({sorted(data)})"
        return
    certs = [o for o in r.objects if o["kind"] == "Certificate" and o["spec"]["secretName"] == name]
    if certs:
        assert key in ("tls.crt", "tls.key", "ca.crt"), f"cert-manager writes no key {key}"
        return
    assert f"{r.plan.namespace}/{name}" in r.reads, f"Secret {name} is neither rendered, issued nor an existing one"


def check_mounted(
    r: Rendered, files: dict[str, Mounted], path: Optional[str], kind: str, name: str, key: str
) -> Mounted:
    """The file at `path` comes from `kind` `name`/`key`, which exists at deploy time."""
    assert path in files, f"{path} is not mounted ({sorted(files)})"
    got = files[path]
    assert (got.kind, got.name, got.key) == (kind, name, key), f"{path} comes from {got}, not {kind} {name}/{key}"
    if kind == "Secret":
        secret_provides(r, name, key)
    else:
        data = r.data(kind, name)
        assert data is not None and key in data, f"ConfigMap {name} with key {key} is not rendered"
    return got
