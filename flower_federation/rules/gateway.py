"""`superlink.gateway`'s listener certificate over the raw config: the Secret a Gateway's TLS listener presents is
named by the user only with their own TLS Secrets, and is never the SuperLink's (whose key also serves localhost and
the in-cluster Control API). The route's names and parentRefs are checked in sites.py, with the other exposure."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Optional

from flower_federation.config.derived import DEFAULTS
from flower_federation.config.errors import Problem, problem
from flower_federation.flower.dialects import Dialect
from flower_federation.kube.naming import DNS1123_SUBDOMAIN
from flower_federation.rules.raw import Raw, get


def gateway_listener(raw: Raw, dialect: Optional[Dialect]) -> Iterator[Problem]:
    """The listener's own certificate: named by the user only with their own TLS Secrets, never the SuperLink's."""
    gw = get(raw, "superlink", "gateway")
    if not isinstance(gw, dict):
        return
    at = ("superlink", "gateway", "listenerSecretName")
    name = gw.get("listenerSecretName")
    source = get(raw, "tls", "source", default=DEFAULTS.tls.source)
    http_era = dialect is not None and dialect.resolve_ports({}).serverappio is None
    terminates = http_era and raw.get("insecure") is not True and gw.get("presentFederationCertificate") is not False
    if name is None:
        if terminates and source == "existingSecret":
            yield problem(
                at,
                "required with tls.source existingSecret: the kubernetes.io/tls Secret the Gateway's listener "
                f"presents, a certificate for '{gw.get('hostname')}' only from the CA sites trust (the ReferenceGrant "
                "names it; the SuperLink's own key must not reach the Gateway), or presentFederationCertificate: false",
            )
        return
    if not (isinstance(name, str) and DNS1123_SUBDOMAIN.fullmatch(name) and len(name) <= 253):
        yield problem(at, f"'{name}' is not a Secret name")
    elif source != "existingSecret":
        yield problem(
            at,
            f"'{name}': only with tls.source existingSecret (source is {source}: Secret N-gateway-tls is made for you)",
        )
    elif name == get(raw, "tls", "existingSecret"):
        yield problem(
            at,
            f"'{name}' is the SuperLink's own Secret (tls.existingSecret): its key also serves localhost and the "
            "in-cluster Control API; give the listener a certificate of its own for the public hostname only",
        )
    elif not terminates:
        yield problem(
            at,
            f"'{name}': no Gateway listener certificate here (gRPC era: TLS passes through to the SuperLink; or "
            "insecure, or presentFederationCertificate: false); remove this",
        )
