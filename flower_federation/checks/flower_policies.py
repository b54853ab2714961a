"""The promises about Flower's own APIs: TLS where the version has it, node authentication on a
SuperLink reached from outside its cluster, and no Control API reachable from outside.

Per version (the image tag, `flower/versions.py`, `flower/dialects.py`, `../shared/flower-cli/`):
- SuperLink `--ssl-ca-certfile/--ssl-certfile/--ssl-keyfile` and SuperNode `--root-certificates`:
  every version whose command line we hold (1.20 on); older ones are not judged.
- The SuperExec hop (a SuperNode's Runtime API, the SuperExec dialling it) carries TLS from
  `APPIO_PROTECTION_SINCE` (1.40): the gRPC era's AppIo APIs are plaintext by Flower's design.
- Node authentication: `--enable-supernode-auth` from `NODE_AUTH_SINCE` (1.23), before it
  `--auth-list-public-keys`.
- The Control API: gRPC era (`GrpcEra`, and before it) its own port, `--control-api-address`
  (`--exec-api-address` before 1.21), default 9093; HTTP era (`HttpEra`) the one API port,
  `--host`/`--port`, default 127.0.0.1:8000, shared with Fleet. Between the two (1.35-1.39) the
  flags tell which.
A digest-only image has no version: every check that depends on one assumes the newest.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Optional

from flower_federation.checks import exposure as exp
from flower_federation.checks.model import ADVISORY, MANDATORY, Objects, Policy, Violation
from flower_federation.checks.pods import (
    CLIENTAPP,
    LOOPBACK_HOSTS,
    SERVERAPP,
    SUPEREXEC,
    SUPERLINK,
    SUPERNODE,
    FlowerContainer,
    flower_containers,
    host_of,
    pod_sites,
    port_of,
)
from flower_federation.flower.dialects import GRPC_CONTROL_PORT, HTTP_PORT, GrpcEra, HttpEra, dialect_for
from flower_federation.flower.versions import APPIO_PROTECTION_SINCE, NODE_AUTH_SINCE, FlowerVersion

# The oldest Flower whose `--help` we hold (../shared/flower-cli/1.20.0) has TLS on both sides.
FLEET_TLS_SINCE = FlowerVersion(1, 20, 0)
SERVER_TLS_FLAGS = ("--ssl-ca-certfile", "--ssl-certfile", "--ssl-keyfile")
APPIO_ADDRESS_FLAGS = (
    "--runtime-api-address",
    "--appio-api-address",
    "--serverappio-api-address",
    "--clientappio-api-address",
)


def _since(fc: FlowerContainer, version: FlowerVersion) -> bool:
    return fc.version is None or fc.version >= version


def _args(fc: FlowerContainer) -> str:
    return f"{fc.path}.args"


def _flower(fc: FlowerContainer) -> str:
    return f"Flower {fc.version}" if fc.version else "this Flower (no version tag)"


def _missing(fc: FlowerContainer, flags: tuple[str, ...]) -> list[str]:
    """Flags absent from a command line read whole (none when a word of it is not known yet)."""
    return [] if fc.flags.unknown else [f for f in flags if not fc.flags.has(f)]


def check_fleet_tls(objects: Objects) -> Iterator[Violation]:
    for fc in flower_containers(objects, SUPERLINK, SUPERNODE):
        if not _since(fc, FLEET_TLS_SINCE):
            continue
        who = "the SuperLink's Fleet and Control APIs" if fc.program == SUPERLINK else "the SuperNode's Fleet calls"
        if fc.flags.has("--insecure"):
            yield Violation(fc.pod.ref, _args(fc), f"--insecure: {who} are plaintext ({_flower(fc)} has TLS)")
            continue
        if fc.program == SUPERLINK:
            missing = _missing(fc, SERVER_TLS_FLAGS)
            if missing:
                yield Violation(fc.pod.ref, _args(fc), f"{who} without {', '.join(missing)}")
        elif _missing(fc, ("--root-certificates",)):
            yield Violation(
                fc.pod.ref,
                _args(fc),
                "no --root-certificates: the SuperNode does not verify the SuperLink against the federation's CA",
            )


def _runtime_api_exposed(fc: FlowerContainer) -> bool:
    """A SuperNode's Runtime API (HTTP era) listens beyond the pod's loopback (`--host`, default 127.0.0.1)."""
    host = fc.flags.value("--host") if fc.flags.has("--host") else "127.0.0.1"
    return host is not None and host not in LOOPBACK_HOSTS


def _appio_address(fc: FlowerContainer) -> Optional[str]:
    for flag in APPIO_ADDRESS_FLAGS:
        if fc.flags.has(flag):
            return fc.flags.value(flag)
    return None


def check_runtime_tls(objects: Objects) -> Iterator[Violation]:
    for fc in flower_containers(objects, SUPERNODE, SUPEREXEC, SERVERAPP, CLIENTAPP):
        if fc.version is None or fc.version < APPIO_PROTECTION_SINCE:
            continue
        if fc.program == SUPERNODE:
            missing = _missing(fc, SERVER_TLS_FLAGS)
            if missing and _runtime_api_exposed(fc):
                yield Violation(
                    fc.pod.ref,
                    _args(fc),
                    f"the SuperNode's Runtime API listens on {fc.flags.value('--host')} without {', '.join(missing)}: "
                    "its SuperExecs' traffic (tasks, model updates) crosses the network in plaintext",
                )
        elif fc.flags.has("--insecure"):
            host = host_of(_appio_address(fc))
            if host is not None and host not in LOOPBACK_HOSTS:
                yield Violation(
                    fc.pod.ref,
                    _args(fc),
                    f"--insecure towards {_appio_address(fc)}: the {fc.program} hop crosses the network in plaintext "
                    f"({_flower(fc)} serves it over TLS)",
                )


def _auth_flags(fc: FlowerContainer) -> tuple[str, ...]:
    if fc.version is None:
        return ("--enable-supernode-auth", "--auth-list-public-keys")
    return ("--enable-supernode-auth",) if fc.version >= NODE_AUTH_SINCE else ("--auth-list-public-keys",)


def check_node_auth(objects: Objects) -> Iterator[Violation]:
    exposures = list(exp.exposures(objects))
    for fc in flower_containers(objects, SUPERLINK):
        flags = _auth_flags(fc)
        if fc.flags.unknown or any(fc.flags.has(f) for f in flags):
            continue
        reached = sorted({f"{e.how} ({e.source} port {e.port_label})" for e in exposures if exp.selects(e, fc.pod)})
        if reached:
            yield Violation(
                fc.pod.ref,
                _args(fc),
                f"reached from outside the cluster by {'; '.join(reached)} without {flags[0]}: any host that reaches "
                "its Fleet API (and trusts its CA) may join the federation as a SuperNode",
            )


def control_listener(fc: FlowerContainer) -> Optional[tuple[int, bool]]:
    """(port, shared with Fleet) where a SuperLink serves its Control API beyond the pod's loopback;
    None when it listens on loopback only or the port is not known."""
    dialect = dialect_for(fc.version) if fc.version else None
    if isinstance(dialect, HttpEra):
        http = True
    elif isinstance(dialect, GrpcEra) or (fc.version is not None and fc.version < GrpcEra.min_version):
        http = False
    else:
        http = fc.flags.has("--port") or fc.flags.has("--host")
    if http:
        host = fc.flags.value("--host") if fc.flags.has("--host") else "127.0.0.1"
        port = fc.flags.value("--port")
        number = int(port) if port and port.isdigit() else (HTTP_PORT if not fc.flags.has("--port") else None)
        return None if host in LOOPBACK_HOSTS or host is None or number is None else (number, True)
    flag = "--control-api-address" if not fc.flags.has("--exec-api-address") else "--exec-api-address"
    address = fc.flags.value(flag) if fc.flags.has(flag) else None
    if fc.flags.has(flag) and address is None:
        return None
    host = host_of(address) or "0.0.0.0"
    number = port_of(address, GRPC_CONTROL_PORT)
    return None if host in LOOPBACK_HOSTS or number is None else (number, False)


def check_control_api(objects: Objects) -> Iterator[Violation]:
    links = [
        (pod, fc, listener)
        for pod in pod_sites(objects)
        for fc in pod.flower_containers()
        if fc.program == SUPERLINK and (listener := control_listener(fc)) is not None
    ]
    for e in exp.exposures(objects):
        for pod, fc, (port, shared) in links:
            if not exp.selects(e, pod):
                continue
            reached = exp.target(e, pod)
            if reached is None or reached[1] != port or reached[0] not in (None, fc.name):
                continue
            what = (
                f"port {port} of {pod.ref}, where the SuperLink ({_flower(fc)}) serves Fleet, Control and Runtime "
                "alike, with no Fleet-only proxy in front"
                if shared
                else f"the Control API port ({port}) of {pod.ref}"
            )
            yield Violation(
                e.source,
                e.path,
                f"{e.how} exposes {what}: whoever reaches it can `flwr run` code at every site and register SuperNodes",
            )


POLICIES = (
    Policy(
        "flower-tls",
        "No plaintext Fleet or Control API: every SuperLink serves TLS, every SuperNode verifies it with the "
        "federation's CA",
        MANDATORY,
        "Remove --insecure. Give the SuperLink --ssl-ca-certfile, --ssl-certfile and --ssl-keyfile and each "
        "SuperNode --root-certificates with the federation's CA (our config: remove `insecure: true`).",
        check_fleet_tls,
    ),
    Policy(
        "flower-runtime-api-tls",
        "No plaintext SuperExec hop where Flower has TLS for it (1.40+): a SuperNode's Runtime API served beyond "
        "its pod carries TLS, and no SuperExec dials another pod with --insecure",
        ADVISORY,
        "Serve the SuperNode's Runtime API with --ssl-certfile/--ssl-keyfile/--ssl-ca-certfile and give its "
        "SuperExecs --root-certificates; or keep the SuperExec in the SuperNode's pod (superexecPlacement: sidecar), "
        "where the hop stays on loopback.",
        check_runtime_tls,
    ),
    Policy(
        "flower-node-auth",
        "A SuperLink reached from outside its cluster authenticates its SuperNodes",
        MANDATORY,
        "Run the SuperLink with --enable-supernode-auth and register each SuperNode's public key (our config: "
        "nodeAuth.enabled: true), or keep it inside the cluster (a ClusterIP Service, no Ingress or route).",
        check_node_auth,
        whole_stack=True,
    ),
    Policy(
        "flower-control-api-internal",
        "No Control API reachable from outside the cluster",
        MANDATORY,
        "Expose only the Fleet API: in the HTTP era put the Fleet-only proxy in front of the exposed port (our "
        "config: remove superlink.exposeControlApi), in the gRPC era expose only the Fleet port (a TLSRoute or a "
        "Service without the Control port); give operators the Control API inside the cluster "
        "(Service N-superlink-control, kubectl port-forward).",
        check_control_api,
        whole_stack=True,
    ),
)
