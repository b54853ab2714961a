"""Nothing a config string can do changes a generated file's structure (issue 32 part 1), as an invariant over
every string field of the config schema rather than case by case.

For each string field (walked from flower_federation/config/config.schema.json, so a new field is covered the day
it is added: list items, map values and image parts included) in a stack where it applies, the field is set to a
benign value, then to hostile ones (`;{}#"'$\\``, whitespace, `\\n\\r\\v\\f\\x85\\u2028\\u2029`, `$(...)`, `%2e`, very
long). Each hostile value is either refused by validation at that field's path, or renders objects and stack
outputs whose structure (tests/support/structure.py: nginx.conf parsed by crossplane, Python by its AST, TOML by
tomllib, shell by its words, YAML by its objects) is the benign render's. The negative control takes the
clusterDomain rule away and sees the invariant catch the Fleet-only proxy's nginx.conf being rewritten.
"""

from __future__ import annotations

import copy
import functools
import importlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Optional

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from flower_federation.config.errors import ConfigError, format_path
from flower_federation.plan import load_plan
from tests.support.certificates import ca_pem
from tests.support.fuzz_stacks import private_keys
from tests.support.render import plan_objects, stack_outputs_of
from tests.support.structure import shape

name_rules = importlib.import_module("flower_federation.rules.names")
ROOT = Path(__file__).resolve().parents[1]
SCHEMA = ROOT / "flower_federation" / "config" / "config.schema.json"
PEM = ca_pem("injection hub CA")
DIGEST = "sha256:" + "ab" * 32
MAP_KEY = "example.org/injected"
CLUSTER = "east"  # a map key that must be a cluster name

HOSTILE_SUFFIXES = (
    "\n",
    "\r",
    "\n  extra: 1",
    "; location /v1/ { proxy_pass https://127.0.0.1:9095; } #",
    "}",
    "{",
    " #",
    '"',
    "'",
    "$(id)",
    "`id`",
    "${HOME}",
    "%2e%2e",
    "\x85",
    "\u2028",
    "\u2029",
    "\v",
    "\f",
    "\t",
    " ",
    "\\",
)


def hostile(benign: str) -> list[str]:
    return [benign + s for s in HOSTILE_SUFFIXES] + ["\n" + benign, "x" * 300, benign * 40 + "\n"]


def public_key_of(i: int) -> str:
    from flower_federation.flower.public_keys import public_key

    return public_key(private_keys()[i])


def stacks() -> dict[str, dict[str, Any]]:
    """Stacks in which every string field applies: a hub with the Fleet-only proxy (ingress, gateway), a plain
    federation with distributed SuperExecs, a site, a gRPC-era stack and one with named clusters."""
    pools = [{"name": "a1", "replicas": 1}]
    hub = {
        "role": "hub",
        "name": "fl",
        "namespace": "flower-hub",
        "version": "1.42.0",
        "nodeAuth": {"enabled": True},
        "tls": {"dnsNames": ["fl.example.org"], "ipAddresses": ["10.0.0.1"]},
        "superlink": {"ingress": {"host": "fl.example.org"}},
        "sites": [{"name": "lab-c", "publicKeys": [public_key_of(0)]}],
        "cli": {"address": "127.0.0.1:8000", "rootCertificates": "/etc/ca.crt"},
        # The federation exporter: its ConfigMap's key labels, its selectors; the dashboard's sidecar label (issue 34).
        "monitoring": {
            "enabled": True,
            "serviceMonitor": {"enabled": True},
            "prometheusRules": {"enabled": True},
            "dashboard": {"enabled": True},
        },
    }
    single = {
        "name": "demo",
        "namespace": "flower-dev",
        "version": "1.42.0",
        "isolationMode": "process",
        "superexecPlacement": "distributed",
        "superlink": {"superexecImage": "flwr/superexec:1.42.0"},
        "supernodes": {
            "pools": [{"name": "a1", "replicas": 1, "images": {"superexecClientApp": "flwr/superexec:1.42.0"}}]
        },
    }
    site = {
        "role": "site",
        "name": "hospital-a",
        "namespace": "flower",
        "version": "1.42.0",
        "nodeAuth": {"enabled": True},
        "supernodes": {
            "superlink": {"address": "fl.example.org", "port": 443, "certificate": {"pem": PEM}},
            "pools": copy.deepcopy(pools),
        },
        "monitoring": {"enabled": True, "prometheusRules": {"enabled": True}},  # the site's own alerts (issue 34)
    }
    grpc = {"name": "old", "namespace": "flower-old", "version": "1.26.1", "supernodes": {"pools": pools}}
    clusters = {
        "name": "multi",
        "namespace": "flower-multi",
        "version": "1.42.0",
        "clusters": {"east": {"kubeconfig": "apiVersion: v1\nkind: Config\n", "context": "east"}},
        "superlink": {"cluster": "east"},
        "supernodes": {"pools": [{"name": "a1", "replicas": 1, "cluster": "east"}]},
    }
    gateway = copy.deepcopy(hub)
    gateway["superlink"] = {
        "gateway": {"hostname": "fl.example.org", "parentRefs": [{"name": "gw", "sectionName": "tls"}]}
    }
    gateway_existing = copy.deepcopy(gateway)
    gateway_existing["tls"] = {"source": "existingSecret", "existingSecret": "server-tls"}
    gateway_existing["superlink"]["gateway"]["listenerSecretName"] = "gateway-tls"
    kubernetes = copy.deepcopy(single)
    kubernetes["executor"] = {"type": "kubernetes", "image": "flwr/superexec:1.42.0"}
    cert_manager = copy.deepcopy(single)
    cert_manager["tls"] = {"source": "certManager", "certManager": {"issuerRef": {"name": "ca-issuer"}}}
    existing = copy.deepcopy(single)
    existing["tls"] = {
        "source": "existingSecret",
        "existingSecret": "server-tls",
        "trust": {"source": "existingSecret", "existingSecret": "ca"},
    }
    existing["supernodes"]["pools"][0]["runtimeApiSecret"] = "a1-runtime"
    node_port = copy.deepcopy(single)
    node_port["supernodes"]["pools"][0]["service"] = {"type": "NodePort", "externalNames": ["a1.example.org"]}
    node_port["supernodes"]["pools"][0]["networkPolicy"] = {"allowExternal": True}
    site_secret = copy.deepcopy(site)
    site_secret["createNamespace"] = False
    site_secret["supernodes"]["superlink"]["certificate"] = {"existingSecret": "hub-ca"}
    return {
        "hub": hub,
        "nodePort": node_port,
        "siteSecret": site_secret,
        "single": single,
        "site": site,
        "grpc": grpc,
        "clusters": clusters,
        "gateway": gateway,
        "gatewayExistingSecret": gateway_existing,
        "kubernetes": kubernetes,
        "certManager": cert_manager,
        "existingSecret": existing,
    }


def string_fields() -> list[str]:
    """Every string field of the config schema, as a path: `.` keys, `[]` a list item, `.*` a map value."""
    schema = json.loads(SCHEMA.read_text(encoding="utf-8"))
    defs = schema.get("$defs", {})
    found: list[str] = []

    def walk(node: Any, path: str, seen: frozenset[str]) -> None:
        if not isinstance(node, dict):
            return
        if "$ref" in node:
            name = node["$ref"].rsplit("/", 1)[-1]
            if name not in seen:
                walk(defs[name], path, seen | {name})
            return
        for key in ("anyOf", "oneOf", "allOf"):
            for sub in node.get(key, []):
                walk(sub, path, seen)
        if node.get("type") == "string" and "enum" not in node and "const" not in node:
            found.append(path)
        for key, sub in node.get("properties", {}).items():
            walk(sub, f"{path}.{key}", seen)
        if "items" in node:
            walk(node["items"], path + "[]", seen)
        if isinstance(node.get("additionalProperties"), dict):
            walk(node["additionalProperties"], path + ".*", seen)

    walk(schema, "", frozenset())
    return sorted(set(found))


# A value each field accepts, where the default "a1" is not one.
BENIGN = {
    "version": "1.42.0",
    "superlink.persistence.size": "1Gi",
    "superlink.persistence.restore": "1.41.0-d90a2f91f23c-20261125T101500Z.db",
    "superlink.fleetProxy.maxRequestBodySize": "8m",
    "superlink.fleetProxy.headerBufferSize": "8k",
    "tls.ipAddresses[]": "10.0.0.2",
    "tls.certManager.duration": "2160h",
    "tls.certManager.renewBefore": "360h",
    "tls.certManager.issuerRef.group": "cert-manager.io",
    "cli.address": "127.0.0.1:8000",
    "cli.rootCertificates": "/etc/ca.crt",
    "supernodes.superlink.address": "fl.example.org",
    "supernodes.superlink.cidrs[]": "10.0.0.0/8",
    "supernodes.superlink.certificate.pem": PEM,
    "superlink.service.loadBalancerSourceRanges[]": "10.0.0.0/8",
    "superlink.controlService.loadBalancerSourceRanges[]": "10.0.0.0/8",
    "superlink.externalAddress": "fl.example.org:443",
    "supernodes.pools[].disruptionBudget.maxUnavailable": "50%",
    "supernodes.pools[].disruptionBudget.minAvailable": "50%",
    "supernodes.pools[].gpu.resourceName": "nvidia.com/gpu",
    "sites[].publicKeys[]": "",  # filled by public_key_of at use
    "sites[].fromStack": "acme/flower-federation/site-a",
    "clusters.*.kubeconfig": "apiVersion: v1\nkind: Config\n",
    "tls.trust.key": "ca.crt",
    "superlink.cluster": "east",
    "supernodes.pools[].cluster": "east",
}
IMAGE_PARTS = {"registry": "docker.io", "repository": "flwr/x", "tag": "1.42.0", "digest": DIGEST}


def benign_for(field: str) -> str:
    field = field.lstrip(".")
    if field == "sites[].publicKeys[]":
        return public_key_of(1)
    if field in BENIGN:
        return BENIGN[field]
    last = field.rsplit(".", 1)[-1]
    if last in IMAGE_PARTS:
        return IMAGE_PARTS[last]
    if field.endswith(("image", "Image", "superexecClientApp", "supernode")):
        return "flwr/superlink:1.42.0"
    return "zq9"  # a DNS label, label value and name that no stack here uses for anything else


def place(raw: dict[str, Any], field: str, value: str) -> Optional[tuple[Any, ...]]:
    """Sets `field` to `value` in `raw` (list items: the first; map values: key MAP_KEY; image parts: the image as
    an object); returns the concrete path, or None where the stack has no place for it."""
    parts = field.lstrip(".").replace("[]", ".[]").split(".")
    node: Any = raw
    path: list[Any] = []
    for i, part in enumerate(parts):
        last = i == len(parts) - 1
        if part == "[]":
            if not isinstance(node, list):
                return None
            if not node:
                node.append({} if not last else value)
            if last:
                node[0] = value
            path.append(0)
            node = node[0]
            continue
        key = (CLUSTER if path == ["clusters"] else MAP_KEY) if part == "*" else part
        if not isinstance(node, dict):
            return None
        if last:
            node[key] = value
        else:
            following = parts[i + 1]
            if part == "ingressNSPodMatchLabels":  # only used beside it
                node.setdefault("ingressNSMatchLabels", {"team": "a1"})
            if part == "certificate":  # exactly one source of the hub's CA
                node[key] = {}
            if key not in node or (following in IMAGE_PARTS and isinstance(node.get(key), str)):
                image_object = following in IMAGE_PARTS
                node[key] = (
                    [] if following == "[]" else ({"repository": "flwr/x", "tag": "1.42.0"} if image_object else {})
                )
            node = node[key]
        path.append(key)
    return tuple(path)


def problems_of(raw: dict[str, Any], stack: str) -> Optional[list[Any]]:
    try:
        load_plan(copy.deepcopy(raw), stack, None)
    except ConfigError as e:
        return e.problems
    return None


def structure(raw: dict[str, Any], stack: str, value: str) -> Any:
    """The render's structure, the value under test standing as `<value>` where it is a key (a connection's name)."""
    plan = load_plan(copy.deepcopy(raw), stack, None)
    objects = sorted(
        plan_objects(plan), key=lambda m: (m["kind"], m["metadata"].get("namespace", ""), m["metadata"]["name"])
    )
    return shape({"objects": objects, "outputs": stack_outputs_of(plan)}, value=value)


@functools.cache
def applicable() -> dict[str, list[str]]:
    """For each string field, the stacks where its benign value validates."""
    out: dict[str, list[str]] = {}
    for field in string_fields():
        for name, base in stacks().items():
            raw = copy.deepcopy(base)
            if place(raw, field, benign_for(field)) is not None and problems_of(raw, name) is None:
                out.setdefault(field, []).append(name)
    return out


@functools.cache
def benign_structure(field: str, stack: str) -> Any:
    raw = copy.deepcopy(stacks()[stack])
    place(raw, field, benign_for(field))
    return structure(raw, stack, benign_for(field))


def violations(field: str, stack: str, values: Optional[list[str]] = None) -> Iterator[str]:
    base = stacks()[stack]
    expected = benign_structure(field, stack)
    for value in hostile(benign_for(field)) if values is None else values:
        raw = copy.deepcopy(base)
        at = place(raw, field, value)
        assert at is not None
        problems = problems_of(raw, stack)
        where = format_path(at)
        if problems is not None:
            if not any(
                p.path == where or p.path.startswith(where + ".") or p.path.startswith(where + "[") for p in problems
            ):
                yield f"{where} = {value!r}: refused, but not at its path: {[str(p) for p in problems]}"
            continue
        if structure(raw, stack, value) != expected:
            yield f"{where} = {value!r}: accepted, and the render's structure changed"


# Fields no stack here can hold, each with the reason.
NOT_EXERCISED = {
    **dict.fromkeys(
        (".sites[].fromStack", ".supernodes.superlink.certificate.fromStack"),
        "another stack's output names it (a StackReference): tests/test_sites*.py and the golden site stacks",
    ),
    **{
        f"{at}.superexec.networkPolicy.{key}.*": "refused whatever its value: a SuperExec serves no API to open"
        for at in (".superlink", ".supernodes.pools[]")
        for key in ("ingressNSMatchLabels", "ingressNSPodMatchLabels", "ingressPodMatchLabels")
    },
}


def test_every_string_field_is_exercised() -> None:
    missing = sorted(set(string_fields()) - set(applicable()) - set(NOT_EXERCISED))
    assert missing == [], f"string fields no stack of this test accepts a benign value for: {missing}"


def test_a_superexec_policy_field_is_refused_whatever_its_value() -> None:
    """What NOT_EXERCISED says of the SuperExec's networkPolicy fields: no stack accepts any value of one, and the
    stacks that have a SuperExec refuse it at its own map (a SuperExec serves no API to open)."""
    fields = [f for f in NOT_EXERCISED if ".superexec.networkPolicy." in f]
    assert len(fields) == 6, fields
    for field in fields:
        at_its_map = []
        for name, base in stacks().items():
            for value in (benign_for(field), *hostile(benign_for(field))[:3]):
                raw = copy.deepcopy(base)
                at = place(raw, field, value)
                problems = problems_of(raw, name) if at is not None else []
                assert problems is not None, f"{name}: {field} = {value!r} accepted"
                where = format_path(at[:-1]) if at is not None else ""
                at_its_map += [name for p in problems or [] if p.path == where and "serves no API" in p.message]
        assert at_its_map, f"{field}: no stack refused it at its own map"


@pytest.mark.parametrize("field", sorted(set(string_fields()) - set(NOT_EXERCISED)))
def test_no_config_string_changes_a_generated_files_structure(field: str) -> None:
    # Its first stack, and the hub (the Fleet-only proxy's nginx.conf, the registration Job's script) where it applies:
    # every stack for every field takes minutes.
    where = applicable().get(field, [])
    found = [
        v for stack in dict.fromkeys(where[:1] + [s for s in where if s == "hub"]) for v in violations(field, stack)
    ]
    assert found == [], "\n".join(found)


def test_the_invariant_catches_the_cluster_domain_injection(monkeypatch: pytest.MonkeyPatch) -> None:
    """The negative control: without the clusterDomain grammar (048b1d8), the injection is accepted and rewrites the
    Fleet-only proxy's nginx.conf, which the invariant sees."""
    original = name_rules.DNS1123_SUBDOMAIN

    class Anything:
        @staticmethod
        def fullmatch(value: str) -> bool:
            return True

    monkeypatch.setattr(name_rules, "DNS1123_SUBDOMAIN", Anything)
    found = list(violations(".clusterDomain", "hub"))
    assert any("location /v1/" in v and "structure changed" in v for v in found), found
    monkeypatch.setattr(name_rules, "DNS1123_SUBDOMAIN", original)
    assert list(violations(".clusterDomain", "hub")) == []


# Hostile fragments drawn, not listed: the characters that end or nest an nginx directive, a shell word, a TOML key or
# a YAML scalar, every line and paragraph separator Python's splitlines() knows, and any other character.
DANGEROUS = list(";{}#\"'$`\\ \t\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029%()[]=:,*&|<>!")
FRAGMENTS = st.text(alphabet=st.sampled_from(DANGEROUS) | st.characters(), min_size=1, max_size=12)


@settings(max_examples=120, derandomize=True, deadline=None, suppress_health_check=list(HealthCheck), database=None)
@given(
    field=st.sampled_from(sorted(set(string_fields()) - set(NOT_EXERCISED))), fragment=FRAGMENTS, at_end=st.booleans()
)
def test_drawn_hostile_values_change_no_structure(field: str, fragment: str, at_end: bool) -> None:
    """The same invariant on values hypothesis draws (deterministic: derandomized, no example database)."""
    stack = applicable()[field][0]
    benign = benign_for(field)
    value = benign + fragment if at_end else fragment + benign
    found = list(violations(field, stack, [value]))
    assert found == [], "\n".join(found)


# Fields whose value reaches an object as free text by design, each with the reason: every other string field
# either has a grammar (a newline, a space or `;` in it is refused) or reaches no object.
FREE_TEXT = {
    "annotations.*": "an annotation's value is any string (Kubernetes sets no grammar)",
    "Annotations.*": "an annotation's value is any string (Kubernetes sets no grammar)",
    "extraArgs[]": "one argv word of the program, passed as a list item (no shell)",
    ".rbac.viewerGroups[]": "a Kubernetes group name in a RoleBinding subject: any string the authenticator gives",
}


def _free_text(field: str) -> bool:
    return any(field.endswith(suffix) for suffix in FREE_TEXT)


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from _strings(k)
            yield from _strings(v)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


@pytest.mark.parametrize("field", sorted(set(string_fields()) - set(NOT_EXERCISED)))
def test_a_string_with_a_newline_is_refused_or_reaches_no_object(field: str) -> None:
    """A field without a grammar cannot hide behind YAML: a newline inside a scalar leaves YAML's structure as it
    was, so the structural invariant above missed `gpu.runtimeClassName: "x\\n"`. Each string field given
    `<benign>\\n; x` is refused, or the value is in no rendered object and no stack output (FREE_TEXT: the fields
    that are free text by design)."""
    if _free_text(field):
        return
    stack = applicable()[field][0]
    value = benign_for(field) + "\n; x"
    raw = copy.deepcopy(stacks()[stack])
    place(raw, field, value)
    if problems_of(raw, stack) is not None:
        return
    plan = load_plan(copy.deepcopy(raw), stack, None)
    rendered = {"objects": plan_objects(plan), "outputs": stack_outputs_of(plan)}
    assert not any(value in text for text in _strings(rendered)), f"{field} = {value!r} reaches an object unchecked"
