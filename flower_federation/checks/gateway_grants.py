"""Which Secrets a Gateway API `ReferenceGrant` hands to Gateways of other namespaces, and whether
one of them holds the SuperLink's own server key.

A Gateway presents the Secrets its listeners name (`certificateRefs`); one in another namespace
only when a ReferenceGrant in the Secret's namespace lets Gateways of the Gateway's namespace
(`from`) read it (`to`: a Secret by `name`, or every Secret there when `to` names none). The
SuperLink's server-certificate Secret is the one its container loads as `--ssl-certfile` and
`--ssl-keyfile`: found by following those paths through the container's volume mounts to a
`secret` (or `projected` secret) volume, never by guessing from a name. Its certificate also
carries localhost and the in-cluster Control Service, so whoever runs a Gateway in a granted
namespace could impersonate the Control API to in-cluster `flwr` and the registration Job. The
Gateway listener should present a certificate of its own (our render: Secret `N-gateway-tls`).

Unknown values (Pulumi preview) report nothing: a grant whose `to` name is not known yet may name
any Secret, and the update judges it.
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Optional

from flower_federation.checks.model import (
    MANDATORY,
    Objects,
    Policy,
    Ref,
    Violation,
    as_dict,
    as_list,
    as_str,
    has_unknown,
    same_namespace,
)
from flower_federation.checks.pods import SUPERLINK, FlowerContainer, flower_containers

GATEWAY_GROUP = "gateway.networking.k8s.io"
KEY_FLAGS = ("--ssl-certfile", "--ssl-keyfile")


@dataclass(frozen=True, order=True)
class ServerSecret:
    """A Secret a SuperLink container loads its server certificate or key from."""

    namespace: str
    name: str
    how: str  # "StatefulSet flower/fl-superlink spec.template.spec.containers[superlink] --ssl-keyfile /etc/...; ..."


def _mounted_secrets(fc: FlowerContainer, path: str) -> list[str]:
    """The Secrets behind the volume mounted where `path` lives (the deepest mount holding it)."""
    mounts = []
    for m in map(as_dict, as_list(fc.container.get("volumeMounts"))):
        at = as_str(m.get("mountPath"))
        if at and (path == at or path.startswith(at.rstrip("/") + "/")):
            mounts.append((len(at), as_str(m.get("name"))))
    if not mounts:
        return []
    _, volume_name = max(mounts)
    for volume in map(as_dict, as_list(fc.pod.spec.get("volumes"))):
        if as_str(volume.get("name")) != volume_name:
            continue
        names = [as_str(as_dict(volume.get("secret")).get("secretName"))]
        sources = as_list(as_dict(volume.get("projected")).get("sources"))
        names += [as_str(as_dict(as_dict(s).get("secret")).get("name")) for s in sources]
        return [n for n in names if n]
    return []


def server_secrets(objects: Objects) -> list[ServerSecret]:
    """Every Secret a SuperLink container reads its `--ssl-certfile`/`--ssl-keyfile` from."""
    loaded: dict[tuple[str, str], list[str]] = {}  # (namespace, name) -> where and as what it is loaded
    for fc in flower_containers(objects, SUPERLINK):
        for flag in KEY_FLAGS:
            path = fc.flags.value(flag)
            if path is None:
                continue
            path = posixpath.normpath(path)
            for name in _mounted_secrets(fc, path):
                loaded.setdefault((fc.pod.ref.namespace, name), []).append(f"{fc.pod.ref} {fc.path} {flag} {path}")
    return [ServerSecret(ns, name, "; ".join(how)) for (ns, name), how in sorted(loaded.items())]


def _gateway_sources(grant: dict[str, Any]) -> list[str]:
    """`spec.from[i] (namespace N)` for each entry that lets Gateways in."""
    out = []
    for i, entry in enumerate(as_list(as_dict(grant.get("spec")).get("from"))):
        e = as_dict(entry)
        if has_unknown(e) or e.get("group") != GATEWAY_GROUP or e.get("kind") != "Gateway":
            continue
        out.append(f"spec.from[{i}] (Gateways of namespace {e.get('namespace')})")
    return out


def _granted(entry: dict[str, Any], secrets: list[ServerSecret], namespace: str) -> tuple[list[ServerSecret], str]:
    """The SuperLink Secrets a `to` entry hands out, and how ("" when none)."""
    if has_unknown(entry) or entry.get("group", "") not in ("", "core") or entry.get("kind") != "Secret":
        return [], ""
    here = [s for s in secrets if same_namespace(s.namespace, namespace)]
    name: Optional[str] = as_str(entry.get("name"))
    if name is None:
        return here, "every Secret of its namespace (no `name`), among them"
    return [s for s in here if s.name == name], "the Secret"


def check_superlink_key_not_granted(objects: Objects) -> Iterator[Violation]:
    secrets = server_secrets(objects)
    if not secrets:
        return
    for grant in objects.of_kind("ReferenceGrant"):
        api = as_str(grant.get("apiVersion")) or ""
        if not api.startswith(GATEWAY_GROUP + "/"):
            continue
        ref = Ref.of(grant)
        sources = _gateway_sources(grant)
        if not sources:
            continue
        for t, entry in enumerate(as_list(as_dict(grant.get("spec")).get("to"))):
            granted, how = _granted(as_dict(entry), secrets, ref.namespace)
            for s in granted:
                yield Violation(
                    ref,
                    f"spec.to[{t}]",
                    f"hands {how} {s.name}, the SuperLink's server certificate and key ({s.how}), to "
                    f"{'; '.join(sources)}: whoever runs a Gateway there holds the key whose certificate also serves "
                    "localhost and the in-cluster Control API, and can impersonate the SuperLink to in-cluster `flwr`",
                )


POLICIES = (
    Policy(
        "flower-superlink-key-not-granted",
        "No ReferenceGrant hands the SuperLink's own server key (the Secret its --ssl-certfile/--ssl-keyfile come "
        "from) to Gateways of another namespace",
        MANDATORY,
        "Give the Gateway listener a certificate of its own from the federation's CA, for the public hostname only, "
        "and let the ReferenceGrant name that Secret alone (our config: superlink.gateway with "
        "presentFederationCertificate, Secret N-gateway-tls).",
        check_superlink_key_not_granted,
        whole_stack=True,
        severity="critical",
        url="https://gateway-api.sigs.k8s.io/api-types/referencegrant/",
    ),
)
