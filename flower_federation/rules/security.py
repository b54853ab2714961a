"""TLS, node authentication, NetworkPolicy knobs, probes and the Kubernetes executor."""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterator
from typing import Any, Optional

from flower_federation.config.derived import DEFAULTS, runtime_api_sans, runtime_api_tls
from flower_federation.config.errors import Problem, problem
from flower_federation.flower.dialects import Dialect
from flower_federation.rules.fragments import list_fragment
from flower_federation.rules.labels import label_problems, our_labels
from flower_federation.rules.raw import At, Pools, Raw, as_dict, as_list, effective_name, get

GO_DURATION = re.compile(r"^([0-9]+(\.[0-9]+)?(h|m|s|ms|us|ns))+$")

DNS_NAME = re.compile(r"^(\*\.)?[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")

EXECUTOR_MANAGED_KEYS = ("namespace", "service-account-name")


def go_duration_seconds(text: str) -> float:
    units = {"h": 3600, "m": 60, "s": 1, "ms": 1e-3, "us": 1e-6, "ns": 1e-9}
    return sum(float(n) * units[u] for n, _, u in re.findall(r"([0-9]+(\.[0-9]+)?)(h|ms|us|ns|m|s)", text))


def is_cidr(value: Any) -> bool:
    """An IP range as the API server parses one (Go's net.ParseCIDR): address and prefix."""
    if not isinstance(value, str) or "/" not in value:
        return False
    try:
        ipaddress.ip_network(value, strict=False)
        return True
    except ValueError:
        return False


def tls(raw: Raw) -> Iterator[Problem]:
    tls = raw.get("tls")
    if not isinstance(tls, dict):
        return
    if raw.get("insecure") is True and tls:
        yield problem(("tls",), "TLS settings have no effect with insecure: true; remove one of the two")
        return
    source = tls.get("source", DEFAULTS.tls.source)
    if source == "existingSecret" and not tls.get("existingSecret"):
        yield problem(
            ("tls", "existingSecret"),
            "name the kubernetes.io/tls Secret (tls.crt, tls.key, optional ca.crt) for source existingSecret",
        )
    if source != "existingSecret" and tls.get("existingSecret"):
        yield problem(("tls", "existingSecret"), f"only used with tls.source: existingSecret (source is {source})")
    if source == "certManager" and not get(tls, "certManager", "issuerRef"):
        yield problem(
            ("tls", "certManager", "issuerRef"), "name the cert-manager Issuer or ClusterIssuer for source certManager"
        )
    durations = {}
    cert_manager = DEFAULTS.tls.cert_manager
    for key, default in (("duration", cert_manager.duration), ("renewBefore", cert_manager.renew_before)):
        value = get(tls, "certManager", key, default=default)
        if isinstance(value, str) and not GO_DURATION.fullmatch(value):
            yield problem(("tls", "certManager", key), f"'{value}' is not a duration (e.g. 43800h, 360h)")
        elif isinstance(value, str):
            durations[key] = go_duration_seconds(value)
    if len(durations) == 2 and durations["renewBefore"] >= durations["duration"]:
        yield problem(("tls", "certManager", "renewBefore"), "must be shorter than duration (cert-manager refuses it)")
    gen = as_dict(tls.get("generate"))
    validity, renewal = (
        gen.get("validityHours", DEFAULTS.tls.generate.validity_hours),
        gen.get("earlyRenewalHours", DEFAULTS.tls.generate.early_renewal_hours),
    )
    if isinstance(validity, int) and isinstance(renewal, int) and renewal >= validity:
        yield problem(("tls", "generate", "earlyRenewalHours"), f"must be less than validityHours ({validity})")
    yield from _ca_generations(gen, source)
    trust = as_dict(tls.get("trust"))
    trust_source = trust.get("source")
    if trust_source == "generated" and source != "generate":
        yield problem(
            ("tls", "trust", "source"),
            f"there is no generated CA with tls.source {source}; use copyFromServerSecret or existingSecret",
        )
    if trust_source == "existingSecret" and source == "generate":
        # The generated CA signs the server certificate, and no Secret of the user's can hold it before
        # `pulumi up` makes it: SuperNodes trusting another CA would refuse the SuperLink.
        yield problem(
            ("tls", "trust", "source"),
            "'existingSecret' cannot verify a generated server certificate (only the generated CA signs it); "
            "leave trust unset (generated) or use tls.source existingSecret/certManager with your own CA",
        )
    if trust_source == "existingSecret" and not trust.get("existingSecret"):
        yield problem(
            ("tls", "trust", "existingSecret"),
            "name the Secret holding the CA certificate for trust.source existingSecret",
        )
    if trust.get("existingSecret") and trust_source != "existingSecret":
        yield problem(("tls", "trust", "existingSecret"), "only used with trust.source: existingSecret")
    for j, name in enumerate(as_list(tls.get("dnsNames"))):
        if isinstance(name, str) and not (DNS_NAME.fullmatch(name) and len(name) <= 253):
            yield problem(("tls", "dnsNames", j), f"'{name}' is not a DNS name")
    for j, ip in enumerate(as_list(tls.get("ipAddresses"))):
        if isinstance(ip, str):
            try:
                ipaddress.ip_address(ip)
            except ValueError:
                yield problem(("tls", "ipAddresses", j), f"'{ip}' is not an IP address")


def _ca_generations(gen: dict[str, Any], source: Any) -> Iterator[Problem]:
    """The CA overlap of `tls.generate`: the signing CA among the trusted ones, no repeats."""
    signing, trusted = gen.get("caGeneration", 0), gen.get("trustedCaGenerations")
    if ("caGeneration" in gen or trusted is not None) and source not in (None, "generate"):
        yield problem(("tls", "generate"), f"CA generations apply to tls.source: generate (source is {source})")
    if not isinstance(trusted, list) or not isinstance(signing, int):
        return
    if len(set(map(str, trusted))) != len(trusted):
        yield problem(("tls", "generate", "trustedCaGenerations"), f"{trusted} names a CA twice")
    if signing not in trusted:
        yield problem(
            ("tls", "generate", "trustedCaGenerations"),
            f"{trusted} leaves out caGeneration {signing}, the CA that signs the SuperLink's certificate: no client "
            "would trust it",
        )


def runtime_api_secrets(raw: Raw, stack: str, pools: Pools, dialect: Optional[Dialect]) -> Iterator[Problem]:
    """`pools[].runtimeApiSecret`: each pool's Runtime API certificate when the user
    manages TLS (tls.source existingSecret) and the hop can carry TLS (process
    isolation, Flower 1.40+); anywhere else it would be ignored, so it is an error."""
    needed = get(raw, "tls", "source", default=DEFAULTS.tls.source) == "existingSecret" and runtime_api_tls(
        raw.get("insecure"), raw.get("role"), raw.get("isolationMode"), dialect.version if dialect else None
    )
    name = effective_name(raw, stack)
    namespace = raw.get("namespace", DEFAULTS.namespace)
    domain = raw.get("clusterDomain", DEFAULTS.cluster_domain)
    for i, pool in pools:
        at = ("supernodes", "pools", i, "runtimeApiSecret")
        secret = pool.get("runtimeApiSecret")
        if needed and not secret:
            outside = [str(n) for n in as_list(get(pool, "service", "externalNames"))]
            dns, ips = runtime_api_sans(str(name), str(pool.get("name")), str(namespace), str(domain), outside)
            yield problem(
                at,
                "required with tls.source existingSecret and isolationMode process (Flower 1.40+): the "
                "kubernetes.io/tls Secret this pool's SuperNodes serve their Runtime API with, signed by the CA "
                f"the federation trusts, with SANs {', '.join(dns + ips)}",
            )
        elif secret and not needed:
            yield problem(
                at,
                f"'{secret}' would be ignored: only used with tls.source existingSecret, isolationMode process and "
                "Flower 1.40+ (otherwise the certificate is made for you, or the hop has no TLS)",
            )
        elif isinstance(secret, str) and not (
            DNS_NAME.fullmatch(secret) and not secret.startswith("*") and len(secret) <= 253
        ):
            yield problem(at, f"'{secret}' is not a Secret name")


def node_auth(raw: Raw, mode: str, pools: Pools) -> Iterator[Problem]:
    enabled = get(raw, "nodeAuth", "enabled") is True
    generated = get(raw, "nodeAuth", "keySource", default=DEFAULTS.node_auth.key_source) == "generate"
    for i, pool in pools:
        if pool.get("nodeKeyGeneration") not in (None, 0) and not (enabled and generated):
            yield problem(
                ("supernodes", "pools", i, "nodeKeyGeneration"),
                f"{pool.get('nodeKeyGeneration')!r} rotates generated node keys, and this stack has none "
                + (
                    "(nodeAuth.keySource is config: rotate by changing the pool's keys in nodeAuthKeys)"
                    if enabled
                    else "(nodeAuth.enabled is not true)"
                ),
            )
    if not enabled:
        return
    if raw.get("insecure") is True:
        yield problem(
            ("nodeAuth", "enabled"), "node authentication needs TLS (the SuperLink refuses it with insecure: true)"
        )
    if mode == "DaemonSet" and generated:
        yield problem(
            ("nodeAuth", "keySource"),
            "a DaemonSet's pods are not known in advance, so per-node keys cannot be generated; "
            "set keySource: config and supply one key per Kubernetes node name in the secret config "
            "nodeAuthKeys ({pool: {node-name: key}})",
        )


def network_policies(raw: Raw, pools: Pools) -> Iterator[Problem]:
    sections: list[tuple[At, Any]] = [
        (("networkPolicy",), raw.get("networkPolicy")),
        (("superlink", "networkPolicy"), get(raw, "superlink", "networkPolicy")),
        (("supernodes", "networkPolicy"), get(raw, "supernodes", "networkPolicy")),
    ]
    sections += [(("supernodes", "pools", i, "networkPolicy"), p.get("networkPolicy")) for i, p in pools]
    sections.append((("superlink", "superexec", "networkPolicy"), get(raw, "superlink", "superexec", "networkPolicy")))
    sections += [
        (("supernodes", "pools", i, "superexec", "networkPolicy"), get(p, "superexec", "networkPolicy"))
        for i, p in pools
    ]
    for at, np in sections:
        np = as_dict(np)
        yield from list_fragment(
            at + ("extraIngress",), np.get("extraIngress"), "networkpolicyingressrule-networking-v1.json"
        )
        yield from list_fragment(
            at + ("extraEgress",), np.get("extraEgress"), "networkpolicyegressrule-networking-v1.json"
        )
        yield from _ip_blocks(at + ("extraIngress",), np.get("extraIngress"), "from")
        yield from _ip_blocks(at + ("extraEgress",), np.get("extraEgress"), "to")
        if np.get("ingressNSPodMatchLabels") and not np.get("ingressNSMatchLabels"):
            yield problem(at + ("ingressNSPodMatchLabels",), "only used together with ingressNSMatchLabels")


def _ip_blocks(at: At, rules: Any, peers_key: str) -> Iterator[Problem]:
    """ipBlocks as the API server checks them beyond the schema: `cidr` and each `except`
    a CIDR, each `except` strictly inside `cidr`."""
    for i, rule in enumerate(as_list(rules)):
        for j, peer in enumerate(as_list(as_dict(rule).get(peers_key))):
            block = as_dict(as_dict(peer).get("ipBlock"))
            where = at + (i, peers_key, j, "ipBlock")
            cidr = block.get("cidr")
            if isinstance(cidr, str) and not is_cidr(cidr):
                yield problem(where + ("cidr",), f"'{cidr}' is not a CIDR (e.g. 10.0.0.0/8)")
            for k, inner in enumerate(as_list(block.get("except"))):
                if not isinstance(inner, str):
                    continue
                if not is_cidr(inner):
                    yield problem(where + ("except", k), f"'{inner}' is not a CIDR (e.g. 10.1.0.0/16)")
                elif isinstance(cidr, str) and is_cidr(cidr) and not _strictly_inside(inner, cidr):
                    yield problem(where + ("except", k), f"'{inner}' is not strictly inside cidr '{cidr}'")


def _strictly_inside(inner: str, outer: str) -> bool:
    a, b = ipaddress.ip_network(inner, strict=False), ipaddress.ip_network(outer, strict=False)
    return a.version == b.version and a != b and a.subnet_of(b)  # type: ignore[arg-type]


def probes(raw: Raw, pools: Pools) -> Iterator[Problem]:
    sections: list[At] = [("probes",), ("superlink", "probes"), ("supernodes", "probes")]
    sections += [("superlink", "superexec", "probes")] + [
        ("supernodes", "pools", i, "superexec", "probes") for i, _ in pools
    ]
    for at in sections:
        for probe in ("livenessProbe", "startupProbe"):
            value = get(raw, *at, probe, "successThreshold")
            if isinstance(value, int) and value != 1:
                yield problem(
                    at + (probe, "successThreshold"), f"must be 1 for a {probe[:-5]} probe (a Kubernetes rule)"
                )


def executor(raw: Raw, isolation: str, stack: str) -> Iterator[Problem]:
    executor = as_dict(raw.get("executor"))
    kind = executor.get("type", DEFAULTS.executor.type)
    if kind != "kubernetes":
        for key in ("image", "config", "resourcesPreset"):
            if executor.get(key):
                yield problem(("executor", key), "only used with executor.type: kubernetes")
        return
    if isolation != "process":
        yield problem(
            ("executor", "type"), "the Kubernetes executor runs in the SuperExecs: it needs isolationMode=process"
        )
    elif raw.get("superexecPlacement") != "distributed":
        yield problem(
            ("executor", "type"),
            "the Kubernetes executor's pods dial the SuperExec's API address, which a sidecar "
            "has only on its pod's loopback: set superexecPlacement: distributed",
        )
    config = as_dict(executor.get("config"))
    # Here the user's labels win over ours (access.py), which policies select the task pods by.
    ours = our_labels(raw, stack, ("executor",))
    yield from label_problems(("executor", "config", "labels"), config.get("labels"), ours)
    for key in config:
        if key in EXECUTOR_MANAGED_KEYS:
            yield problem(
                ("executor", "config", key), "set by flower-federation (RBAC and NetworkPolicies depend on it)"
            )
