"""Strings that reach the exported `flwr` connection config (stack output `flwrConfig`, TOML a user pastes) and the
annotations of our Services: each by a full-match grammar, so none can change the structure of what is generated
(tests/test_injection_invariant.py)."""

from __future__ import annotations

import re
from collections.abc import Iterator

from flower_federation.config.errors import Problem, problem
from flower_federation.kube.naming import is_ip_address
from flower_federation.rules.raw import At, Raw, get
from flower_federation.rules.security import DNS_NAME
from flower_federation.rules.workloads import annotation_keys

# A TOML bare key (what `flwr run . NAME` takes), never the table's own `default` key.
CONNECTION_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,62}")
HOST_PORT = re.compile(r"(?P<host>\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]+):(?P<port>[0-9]{1,5})")
# A file path: printable, no line or paragraph separator (Python's splitlines() splits on them too).
PATH = re.compile(r"[^\x00-\x1f\x7f\x85\u2028\u2029]+")


def _host_port(value: str) -> bool:
    m = HOST_PORT.fullmatch(value)
    if m is None or not 0 < int(m["port"]) <= 65535:
        return False
    host = m["host"].strip("[]")
    return is_ip_address(host) or bool(DNS_NAME.fullmatch(host) and not host.startswith("*"))


def cli(raw: Raw) -> Iterator[Problem]:
    name = get(raw, "cli", "connectionName")
    if isinstance(name, str) and (not CONNECTION_NAME.fullmatch(name) or name == "default"):
        yield problem(
            ("cli", "connectionName"),
            f"{name!r} is not a connection name: up to 63 letters, digits, '-' or '_', starting with a letter or "
            "digit, not `default` (flwr's config keeps the default connection under that key)",
        )
    address = get(raw, "cli", "address")
    if isinstance(address, str) and not _host_port(address):
        yield problem(("cli", "address"), f"{address!r} is not HOST:PORT (a DNS name, an IPv4 or [IPv6] address)")
    roots = get(raw, "cli", "rootCertificates")
    if isinstance(roots, str) and not PATH.fullmatch(roots):
        yield problem(("cli", "rootCertificates"), f"{roots!r} is not a file path (no control or line characters)")


SERVICES: tuple[At, ...] = (("superlink", "service"), ("superlink", "controlService"))


def service_annotations(raw: Raw) -> Iterator[Problem]:
    """Annotation keys of the SuperLink's Services and Ingress (the Helm chart's `service.*`). Their labels, and the
    Gateway's selectors, are label maps: label_maps.py finds those in the schema and checks them."""
    for at in SERVICES:
        yield from annotation_keys(at + ("annotations",), get(raw, *at, "annotations"))
    yield from annotation_keys(("superlink", "ingress", "annotations"), get(raw, "superlink", "ingress", "annotations"))
