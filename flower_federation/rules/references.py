"""Names of things the stack refers to but does not create: Secrets, an IngressClass, a StorageClass, a RuntimeClass,
cert-manager's issuer, a GPU's extended resource, a Secret's data key. Each reaches an object as written, where the
API server (or cert-manager) holds it to a grammar: checked here at its config path, full-match, so a newline, a space
or a `;` is refused by validate rather than by `pulumi up` half-way (or never, inside a free-form field).

A cluster's `context` (clusters.*) names a kubeconfig context: it reaches no object, and kubeconfig allows any name
but a control character (a newline, NUL), which is all it is refused."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Any

from flower_federation.config.errors import Problem, problem
from flower_federation.kube.api_rules import is_qualified_name
from flower_federation.kube.naming import is_dns_subdomain
from flower_federation.rules.raw import At, Pools, Raw, as_dict, get

_DATA_KEY = re.compile(r"[-._a-zA-Z0-9]+")  # a Secret's or ConfigMap's key (validation.IsConfigMapKey)
_DATA_KEY_MAX = 253
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def is_data_key(value: str) -> bool:
    return len(value) <= _DATA_KEY_MAX and bool(_DATA_KEY.fullmatch(value)) and not value.startswith("..")


def is_resource_name(value: str) -> bool:
    """An extended resource's name (a GPU's): a qualified name with a domain prefix (`nvidia.com/gpu`); one without
    is no extended resource, and a container may request only the standard ones (cpu, memory) unprefixed."""
    return "/" in value and is_qualified_name(value)


SUBDOMAIN_RULE = "a DNS subdomain: at most 253 lowercase letters, digits, '-' and '.', alphanumeric at both ends"
# What a field names, its grammar, the rule a refusal quotes.
Grammar = tuple[str, Callable[[str], bool], str]
_SECRET: Grammar = ("a Secret name", is_dns_subdomain, SUBDOMAIN_RULE)
REFERENCES: dict[At, Grammar] = {
    ("superlink", "ingress", "className"): ("an IngressClass name", is_dns_subdomain, SUBDOMAIN_RULE),
    ("superlink", "ingress", "tlsSecretName"): _SECRET,
    ("superlink", "persistence", "storageClassName"): ("a StorageClass name", is_dns_subdomain, SUBDOMAIN_RULE),
    ("tls", "existingSecret"): _SECRET,
    ("tls", "trust", "existingSecret"): _SECRET,
    ("tls", "trust", "key"): (
        "a Secret's data key",
        is_data_key,
        "at most 253 letters, digits, '-', '_' and '.', not starting with '..'",
    ),
    ("tls", "certManager", "issuerRef", "name"): ("an Issuer's name", is_dns_subdomain, SUBDOMAIN_RULE),
    ("tls", "certManager", "issuerRef", "group"): ("an API group", is_dns_subdomain, SUBDOMAIN_RULE),
}
POOL_REFERENCES: dict[At, Grammar] = {
    ("gpu", "runtimeClassName"): ("a RuntimeClass name", is_dns_subdomain, SUBDOMAIN_RULE),
    ("gpu", "resourceName"): (
        "an extended resource's name",
        is_resource_name,
        "a DNS subdomain prefix and '/', then at most 63 letters, digits, '-', '_' or '.', alphanumeric at both ends "
        "(e.g. nvidia.com/gpu)",
    ),
}


# Fields whose empty string means unset, as it always has: the builders leave it out (the cluster's default class,
# the generated Secret), or its reader defaults it (cert-manager reads an issuerRef's group "" as cert-manager.io).
# A config that says "" is taken, not refused; the other fields' "" would reach an object the API server refuses.
EMPTY_IS_UNSET = frozenset(
    {
        ("superlink", "ingress", "className"),
        ("superlink", "ingress", "tlsSecretName"),
        ("superlink", "persistence", "storageClassName"),
        ("tls", "existingSecret"),
        ("tls", "trust", "existingSecret"),
        ("tls", "certManager", "issuerRef", "group"),
    }
)


def _named(at: At, value: Any, grammar: Grammar) -> Iterator[Problem]:
    what, ok, rule = grammar
    if isinstance(value, str) and not ok(value):
        yield problem(at, f"{value!r} is not {what}: {rule}")


def references(raw: Raw, pools: Pools) -> Iterator[Problem]:
    for at, grammar in REFERENCES.items():
        if get(raw, *at) == "" and at in EMPTY_IS_UNSET:
            continue
        yield from _named(at, get(raw, *at), grammar)
    for i, pool in pools:
        for at, grammar in POOL_REFERENCES.items():
            yield from _named(("supernodes", "pools", i, *at), get(pool, *at), grammar)
    for cluster, settings in as_dict(raw.get("clusters")).items():
        context = get(settings, "context")
        if isinstance(context, str) and _CONTROL.search(context):
            yield problem(
                ("clusters", cluster, "context"),
                f"{context!r} is not a kubeconfig context's name: it has a control character (a newline, NUL, ...)",
            )
