"""What the config fuzzer (tests/test_config_fuzzing.py) holds every run of the program to.

A refused config: exactly the validation report (`invalid flower-federation config (N
problems):` then N lines `  - <config path>: <message>`), no traceback, nothing created
(StackReference reads aside) and no output.

A rendered config, per cluster: every object passes the strict Kubernetes 1.34 schema
(the schema files kubernetes-validate ships, one validator per kind, built as
kubernetes-validate builds it; an object seen before is not validated again); the render
invariants of `manifests.check_invariants` hold over what was registered (the shell's
Secrets and Certificates included); every pod meets the Pod Security level its namespace
enforces; and the rules the API server applies to pods and Services beyond the schema
(`api_problems`), which would otherwise fail half-way through `pulumi up`.
"""

from __future__ import annotations

import functools
import ipaddress
import json
import re
from collections import Counter
from typing import Any

import jsonschema
import referencing

from flower_federation.builders import manifests
from flower_federation.kube import pod_security
from flower_federation.kube.objects import ObjectKey, pod_template_of
from flower_federation.kube.openapi import _load
from flower_federation.kube.quantity import parse_quantity

REPORT_HEAD = re.compile(r"invalid flower-federation config \((\d+) problems?\):")
# A problem's config path: under the federation config, or the secret nodeAuthKeys.
PROBLEM_LINE = re.compile(r"  - (federation|nodeAuthKeys)([.\[][^ ]*|[.\[].*?\]|): \S.*")
# Custom resources kubernetes-validate has no schema for (tests/test_tls_manifests.py checks them).
NO_SCHEMA = {("cert-manager.io/v1", "Certificate")}


def report_problems(message: str) -> list[str]:
    """Why `message` is not exactly a validation report (empty if it is)."""
    lines = message.splitlines()
    head = REPORT_HEAD.fullmatch(lines[0]) if lines else None
    if head is None:
        return [f"not a validation report: {message[:300]!r}"]
    found = []
    if int(head.group(1)) != len(lines) - 1:
        found.append(f"the header counts {head.group(1)} problems, {len(lines) - 1} lines follow")
    found += [f"not a `  - path: message` line: {line!r}" for line in lines[1:] if not PROBLEM_LINE.fullmatch(line)]
    if "Traceback" in message:
        found.append("a traceback in the report")
    return found


@functools.cache
def _validator(api_version: str, kind: str) -> jsonschema.protocols.Validator:
    # kubernetes_validate.validate's own file naming and registry, built once per kind.
    group_version = re.sub(r"^([^./]*)(?:\.[^/]*)?/", r"\1-", api_version)
    schema = _load(f"{kind.lower()}-{group_version}.json")
    registry = referencing.Resource.from_contents(schema) @ referencing.Registry()
    registry = referencing.Resource.from_contents(_load("_definitions.json")) @ registry
    return jsonschema.validators.Draft202012Validator(schema, registry=registry)


@functools.lru_cache(maxsize=4096)
def _schema_errors(api_version: str, kind: str, text: str) -> tuple[str, ...]:
    errors = _validator(api_version, kind).iter_errors(json.loads(text))
    return tuple(f"{'.'.join(map(str, e.absolute_path)) or '(root)'}: {e.message}" for e in errors)


def schema_problems(obj: dict[str, Any]) -> list[str]:
    """Strict Kubernetes 1.34 schema violations of one object."""
    if (obj["apiVersion"], obj["kind"]) in NO_SCHEMA:
        return []
    text = json.dumps(obj, sort_keys=True)
    return [f"{ObjectKey.of(obj)}: {e}" for e in _schema_errors(obj["apiVersion"], obj["kind"], text)]


def is_cidr(text: Any) -> bool:
    """As the API server parses CIDRs (Go's net.ParseCIDR): an address and a prefix."""
    try:
        return isinstance(text, str) and "/" in text and bool(ipaddress.ip_network(text, strict=False))
    except ValueError:
        return False


def _containers(spec: dict[str, Any]) -> list[dict[str, Any]]:
    return [*spec.get("initContainers", []), *spec.get("containers", [])]


def _resource_problems(where: str, resources: dict[str, Any]) -> list[str]:
    found = []
    amounts = {
        section: {name: parse_quantity(str(v)) for name, v in (resources.get(section) or {}).items()}
        for section in ("requests", "limits")
    }
    for section, values in amounts.items():
        for name, value in values.items():
            if value is None or value < 0:
                found.append(f"{where}: {section}.{name} {resources[section][name]!r} is not a quantity >= 0")
    for name, request in amounts["requests"].items():
        limit = amounts["limits"].get(name)
        if request is not None and limit is not None and request > limit:
            found.append(f"{where}: request {name} exceeds its limit")
    return found


def pod_problems(template: dict[str, Any], claims: tuple[str, ...] = ()) -> list[str]:
    """Rules the API server applies to a pod spec beyond its OpenAPI schema."""
    spec = template["spec"]
    found = []
    volumes = [v.get("name") for v in spec.get("volumes", [])]
    found += [f"volume {n!r} is declared {c} times" for n, c in Counter(volumes).items() if c > 1]
    containers = _containers(spec)
    names = [c.get("name") for c in containers]
    found += [f"container {n!r} is declared {c} times" for n, c in Counter(names).items() if c > 1]
    for c in containers:
        where = f"container {c.get('name')!r}"
        if not c.get("image"):
            found.append(f"{where} has no image")
        mounts = c.get("volumeMounts", [])
        for m in mounts:
            if m.get("name") not in volumes and m.get("name") not in claims:
                found.append(f"{where} mounts volume {m.get('name')!r}, which the pod does not have")
        paths = Counter(m.get("mountPath") for m in mounts)
        found += [f"{where} mounts {p!r} {n} times" for p, n in paths.items() if n > 1]
        ports = Counter(p["name"] for p in c.get("ports", []) if "name" in p)
        found += [f"{where} names port {p!r} {n} times" for p, n in ports.items() if n > 1]
        security = c.get("securityContext") or {}
        if security.get("privileged") is True and security.get("allowPrivilegeEscalation") is False:
            found.append(f"{where} is privileged with allowPrivilegeEscalation: false")
        found += _resource_problems(where, c.get("resources") or {})
    return found


def api_problems(obj: dict[str, Any]) -> list[str]:
    """Rules the API server applies to an object beyond its OpenAPI schema."""
    found = []
    template = pod_template_of(obj)
    if template is not None:
        claims = tuple((c.get("metadata") or {}).get("name") for c in obj["spec"].get("volumeClaimTemplates", []))
        found += pod_problems(template, claims)
    if obj["kind"] == "NetworkPolicy":
        for rule in [*obj["spec"].get("ingress", []), *obj["spec"].get("egress", [])]:
            for peer in [*rule.get("from", []), *rule.get("to", [])]:
                block = peer.get("ipBlock") or {}
                for cidr in [block["cidr"], *block.get("except", [])] if block else []:
                    if not is_cidr(cidr):
                        found.append(f"ipBlock: {cidr!r} is not a CIDR")
    if obj["kind"] == "Service":
        for cidr in obj["spec"].get("loadBalancerSourceRanges", []):
            if not is_cidr(cidr):
                found.append(f"loadBalancerSourceRanges: {cidr!r} is not a CIDR")
    return [f"{ObjectKey.of(obj)}: {p}" for p in found]


def security_problems(objects: list[dict[str, Any]]) -> list[str]:
    """Every pod meets the Pod Security level its namespace enforces (when we create it)."""
    namespaces = [o for o in objects if o["kind"] == "Namespace"]
    if not namespaces:
        return []
    enforced = namespaces[0]["metadata"]["labels"]["pod-security.kubernetes.io/enforce"]
    found = []
    for obj in objects:
        template = pod_template_of(obj)
        if template is not None and pod_security.LEVELS.index(pod_security.level(template)) > pod_security.LEVELS.index(
            enforced
        ):
            found.append(
                f"{ObjectKey.of(obj)}: its pods are {pod_security.level(template)}; the namespace enforces {enforced}"
            )
    return found


def render_problems(plan: Any, objects: list[dict[str, Any]]) -> list[str]:
    """Everything wrong with one cluster's registered objects."""
    found: list[str] = []
    for obj in objects:
        found += schema_problems(obj)
        found += api_problems(obj)
    try:
        manifests.check_invariants(plan, objects)
    except manifests.InvariantError as err:
        found += err.broken
    return found + security_problems(objects)
