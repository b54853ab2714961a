"""`python -m flower_federation import operator CR.yaml`: flower-operator `Federation` CRs (one or
several YAML documents) as federation stacks, one per CR.

The config is a superset of the CR's `spec`, field for field, so a spec is copied as it is,
with `name` and `namespace` from `metadata`. Only fields of the operator's CRD are taken: the
API server prunes any other field of a CR, so the operator never acted on it. Where our
defaults differ from the operator's (TLS, NetworkPolicies, restricted pods, the SuperLink's
state), the stack file says so, and --preserve-behaviour sets the operator's behaviour."""

from __future__ import annotations

from typing import Any, Optional

from flower_federation.config.shared_settings import DEFAULT_MAX_UNAVAILABLE
from flower_federation.importers import resources_note
from flower_federation.importers.common import (
    TELEMETRY,
    ImportRefused,
    Refusal,
    Stack,
    flow,
    problems,
    telemetry_set_in,
    validate,
)

API_VERSION = "flwr.exalsius.ai/v1"
KIND = "Federation"

# The operator CRD's spec, as its README's Configuration Reference gives it: a field's
# sub-fields, or None for a value taken whole (Kubernetes fragments, maps, scalars).
_GPU = {"enabled": None, "vendor": None, "resourceName": None, "count": None, "mountAll": None}
_POOL = {
    "name": None,
    "replicas": None,
    "images": {"supernode": None, "superexecClientApp": None},
    "gpu": _GPU,
    "supernodeResources": None,
    "superexecResources": None,
    "podTemplate": None,
    "extraArgs": None,
    "env": None,
    "nodeConfig": None,
}
SPEC: dict[str, Any] = {
    "mode": None,
    "isolationMode": None,
    "version": None,
    "insecure": None,
    "superlink": {
        "image": None,
        "superexecImage": None,
        "resources": None,
        "superexecResources": None,
        "env": None,
        "extraArgs": None,
        "podTemplate": None,
        "service": {
            "type": None,
            "ports": {"grpc": None, "serverAppIO": None, "extra": None},
            "labels": None,
            "annotations": None,
        },
    },
    "supernodes": {"image": None, "env": None, "pools": [_POOL]},
}
# Set by the API server, not by whoever wrote the CR (a `kubectl get -o yaml` copy has them).
SERVER_METADATA = {"uid", "resourceVersion", "generation", "creationTimestamp", "managedFields", "selfLink"}
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"


def _spec_fields(value: Any, shape: Any, path: str, stack: Stack) -> Any:
    """`value` with only the CRD's fields; every other field refused at its path."""
    if shape is None:
        return value
    if isinstance(shape, list):
        if not isinstance(value, list):
            return value  # a wrong type: validation reports it at its path
        return [_spec_fields(item, shape[0], f"{path}[{i}]", stack) for i, item in enumerate(value)]
    if not isinstance(value, dict):
        return value
    out = {}
    for key, item in value.items():
        if key in shape:
            out[key] = _spec_fields(item, shape[key], f"{path}.{key}", stack)
        else:
            stack.refuse(
                f"{path}.{key}",
                "not a field of the flower-operator's Federation CRD: the API server prunes it, so the operator never "
                "acted on it",
            )
    return out


def import_documents(
    documents: list[Any], *, source: str, command: str, allow_drop: bool = False, preserve: bool = False
) -> list[Stack]:
    """A stack per Federation CR; every document that is not one is refused."""
    stacks = []
    refused: list[Refusal] = []
    several = len(documents) > 1
    for i, doc in enumerate(documents):
        if doc is None:
            continue  # an empty document (a trailing `---`)
        where = f"{source}, document {i + 1}" if several else source
        try:
            stacks.append(import_cr(doc, where=where, command=command, allow_drop=allow_drop, preserve=preserve))
        except ImportRefused as err:  # every document's problems at once
            prefix = f"document {i + 1}: " if several else ""
            refused += [Refusal(prefix + r.path, r.reason, r.droppable) for r in err.refusals]
    if refused:
        raise ImportRefused(source, refused)
    return stacks


def import_cr(doc: Any, *, where: str, command: str, allow_drop: bool = False, preserve: bool = False) -> Stack:
    meta = doc.get("metadata") if isinstance(doc, dict) else None
    name = meta.get("name") if isinstance(meta, dict) else None
    stack = Stack(
        stack=str(name or "federation"), origin=f"the flower-operator Federation '{name}' ({where})", command=command
    )
    if not isinstance(doc, dict) or doc.get("apiVersion") != API_VERSION or doc.get("kind") != KIND:
        kind = f"{doc.get('apiVersion')} {doc.get('kind')}" if isinstance(doc, dict) else type(doc).__name__
        stack.refuse("kind", f"{kind} is not a {API_VERSION} {KIND}", droppable=False)
        stack.settle(allow_drop)
    _metadata(doc, stack)
    spec = doc.get("spec")
    if not isinstance(spec, dict):
        stack.refuse("spec", "missing: a Federation needs its spec", droppable=False)
        stack.settle(allow_drop)
    kept = _spec_fields(spec, SPEC, "spec", stack)
    for key, value in kept.items():
        stack.set((key,), value, f"spec.{key}")
    _node_config(kept, stack)
    stack.differences += differences(kept, stack, preserve)
    for key in sorted(k for k in doc if k not in ("apiVersion", "kind", "metadata", "spec", "status")):
        stack.refuse(str(key), "not part of a Federation object")
    meta = doc.get("metadata") if isinstance(doc.get("metadata"), dict) else {}
    server = sorted(k for k in meta if k in SERVER_METADATA) + (
        [f"metadata.annotations[{LAST_APPLIED}]"] if LAST_APPLIED in (meta.get("annotations") or {}) else []
    )
    ignored = (["status"] if "status" in doc else []) + [k if "[" in k else f"metadata.{k}" for k in server]
    if ignored:
        stack.notes.append(
            f"Ignored: {', '.join(ignored)} (what the API server and the operator record, not what the CR asks)."
        )
    stack.settle(allow_drop, problems)
    validate(stack)
    return stack


def _metadata(doc: dict[str, Any], stack: Stack) -> None:
    meta = doc.get("metadata")
    if not isinstance(meta, dict) or not isinstance(meta.get("name"), str):
        stack.refuse("metadata.name", "missing: the Federation's name names every object", droppable=False)
        return
    stack.set(("name",), meta["name"], "metadata.name")
    stack.name_settings = ("metadata.name", "spec.supernodes.pools[{pool}].name")
    namespace: Optional[str] = meta.get("namespace")
    if namespace:
        stack.set(("namespace",), namespace, "metadata.namespace")
    else:
        stack.set(("namespace",), "default", "kubectl's default namespace")
        stack.notes.append("metadata.namespace is unset: the namespace is 'default', as `kubectl apply` would use.")
    stack.set(("createNamespace",), False, "the CR's namespace exists already")
    name = meta["name"]
    stack.names.append(
        f"As the operator names them: {name}-superlink (a StatefulSet with a `state` PVC here, the operator's is a "
        f"Deployment) and {name}-supernode-<pool> per pool."
    )
    stack.notes.append(
        "createNamespace: false, as the namespace holding the CR exists already; this stack then does not label it "
        "with a Pod Security level (its pods meet `restricted` all the same)."
    )
    annotations = {k: v for k, v in (meta.get("annotations") or {}).items() if k != LAST_APPLIED}
    for key in sorted(k for k in meta if k not in ("name", "namespace", "annotations", *SERVER_METADATA)):
        stack.refuse(f"metadata.{key}", "belongs to the CR object itself, which has no counterpart here")
    for key in sorted(annotations):
        stack.refuse(f'metadata.annotations["{key}"]', "belongs to the CR object itself, which has no counterpart here")


def _node_config(spec: dict[str, Any], stack: Stack) -> None:
    """The CRD's nodeConfig is map[string]string: the API server rejects anything else, so a
    CR with a number there never reached the operator (ours would pass it on as a number)."""
    pools = (spec.get("supernodes") or {}).get("pools") if isinstance(spec.get("supernodes"), dict) else None
    for i, pool in enumerate(pools if isinstance(pools, list) else []):
        config = pool.get("nodeConfig") if isinstance(pool, dict) else None
        for key, value in (config or {}).items() if isinstance(config, dict) else ():
            if not isinstance(value, str):
                stack.refuse(
                    f"spec.supernodes.pools[{i}].nodeConfig.{key}",
                    f"{value!r}: the operator's nodeConfig takes strings only (the API server rejects this CR); quote "
                    "it for the operator's meaning",
                    droppable=False,
                )


def differences(spec: dict[str, Any], stack: Stack, preserve: bool) -> list[str]:
    def preserved(path: tuple[str, ...], value: Any) -> str:
        shown = f"{'.'.join(path)}: {flow(value)}"
        if preserve:
            stack.set(path, value, "--preserve-behaviour")
            return f"--preserve-behaviour set {shown}."
        return f"--preserve-behaviour sets {shown}."

    out = []
    if "insecure" not in spec:
        out.append(
            "TLS: the operator serves plaintext unless told otherwise (insecure: true by default); here TLS is on, "
            "with a generated CA that `flwr` trusts through the stack output flwrConfig. "
            + preserved(("insecure",), True)
        )
    service = ((spec.get("superlink") or {}).get("service") or {}).get("type", "ClusterIP")
    reach = f" (its {service} Service took any client)" if service != "ClusterIP" else ""
    out.append(
        "NetworkPolicies: the operator creates none; here each component denies what Flower does not need: only the "
        f"federation's SuperNodes reach the SuperLink's Fleet API{reach}, `kubectl port-forward` still works. "
        + preserved(("networkPolicy", "enabled"), False)
    )
    out.append(
        "Pods: the operator's have no securityContext; here they are restricted (non-root, no privilege escalation, "
        "no capabilities, RuntimeDefault seccomp, no API token), with a read-only root filesystem and writable "
        "emptyDirs where Flower writes. " + preserved(("securityContext",), {"readOnlyRootFilesystem": False})
    )
    out.append(
        "SuperLink state: the operator's Deployment keeps it in memory (a restart forgets runs and nodes); here a "
        "StatefulSet keeps it on a 1Gi PVC (a default StorageClass is needed). "
        + preserved(("superlink", "persistence"), {"enabled": False})
    )
    superlink_env = (spec.get("superlink") or {}).get("env")
    pools = (spec.get("supernodes") or {}).get("pools") or []
    envs = [superlink_env, (spec.get("supernodes") or {}).get("env")]
    envs += [p.get("env") for p in pools if isinstance(p, dict)]
    if not telemetry_set_in(envs):
        out.append(TELEMETRY.format(where="the operator") + preserved(("telemetry",), True))
    # Last, as the config is complete here: the render of the written stack is what the figures are.
    no_presets = preserved(("resourcesPreset",), "none")
    found = resources_note.rendered(stack)
    resources = resources_note.difference(
        stack,
        found,
        source="the operator",
        does="gives a container only the resources the CR sets (none by default)",
        own="the CR's",
        lift="supernodeResources / superexecResources (superlink.resources / superexecResources)",
        preserved=no_presets,
    )
    out += [resources] if resources else []
    out.append(
        "Kept, as nothing is lost by them: probes on Flower's health endpoints, a PodDisruptionBudget per pool "
        f"(maxUnavailable {DEFAULT_MAX_UNAVAILABLE})."
    )
    stack.notes += resources_note.gpu_notes(stack, found, "the operator")
    return out
