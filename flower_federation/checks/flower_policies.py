"""The promises about Flower's own APIs: TLS where the version has it, node authentication on a
SuperLink reached from outside its cluster, and no Control API reachable from outside.

Per version (the image tag, `flower/versions.py`, `flower/dialects.py`, `../shared/flower-cli/`):
- SuperLink `--ssl-ca-certfile/--ssl-certfile/--ssl-keyfile` and SuperNode `--root-certificates`:
  every version whose command line we hold (1.20 on); older ones are not judged.
- The SuperExec hop (a SuperNode's Runtime API, the SuperExec dialling it) carries TLS from
  `APPIO_PROTECTION_SINCE` (1.40): the gRPC era's AppIo APIs are plaintext by Flower's design.
- Node authentication: `--enable-supernode-auth` from `NODE_AUTH_SINCE` (1.23), before it
  `--auth-list-public-keys`.
- The Control API: up to 1.36 its own gRPC port, `--control-api-address` (or `--exec-api-address`),
  default 0.0.0.0:9093 (1.36's `--help`); from 1.38 (its `--help`: "The Control API now operates over
  HTTP") the one API port, `--host`/`--port`, default 127.0.0.1:8000, shared with Fleet. 1.37, whose
  `--help` we do not hold: `--host`/`--port` on the command line say HTTP.
An image reference with no version (`:latest`, digest-only) is checked as the newest Flower, unless
its flags rule that out (`flower_version.py`): one rule for every check here.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Optional

from flower_federation.checks import exposure as exp
from flower_federation.checks import proxy_config
from flower_federation.checks.flower_version import checked_version
from flower_federation.checks.model import ADVISORY, MANDATORY, Objects, Policy, Violation
from flower_federation.checks.pods import (
    CLIENTAPP,
    LOOPBACK_HOSTS,
    SERVERAPP,
    SUPEREXEC,
    SUPERLINK,
    SUPERNODE,
    FlowerContainer,
    PodSite,
    flower_containers,
    host_of,
    pod_sites,
    port_of,
)
from flower_federation.flower.dialects import GRPC_CONTROL_PORT, HTTP_PORT
from flower_federation.flower.versions import APPIO_PROTECTION_SINCE, NODE_AUTH_SINCE, FlowerVersion

# The oldest Flower whose `--help` we hold (../shared/flower-cli/1.20.0) has TLS on both sides.
FLEET_TLS_SINCE = FlowerVersion(1, 20, 0)
SERVER_TLS_FLAGS = ("--ssl-ca-certfile", "--ssl-certfile", "--ssl-keyfile")
# The Control API's own gRPC port up to 1.36; on the one HTTP API port from 1.38 (their `--help`).
CONTROL_GRPC_BEFORE = FlowerVersion(1, 37, 0)
CONTROL_HTTP_SINCE = FlowerVersion(1, 38, 0)
# Fleet joins it from 1.40 (`--fleet-api-address`: "Deprecated. Use `--host` and `--port`").
FLEET_HTTP_SINCE = FlowerVersion(1, 40, 0)
APPIO_ADDRESS_FLAGS = (
    "--runtime-api-address",
    "--appio-api-address",
    "--serverappio-api-address",
    "--clientappio-api-address",
)


def _since(fc: FlowerContainer, version: FlowerVersion) -> bool:
    return checked_version(fc).at_least(version)


def _args(fc: FlowerContainer) -> str:
    return f"{fc.path}.args"


def _flower(fc: FlowerContainer, what: str = "") -> str:
    """`Flower 1.41.0 WHAT`; when the image names no version, why the one it is checked as."""
    checked = checked_version(fc)
    if not checked.note:
        return f"{checked} {what}" if what else str(checked)
    return f"{checked.note}, which {what}" if what else checked.note


def _note(fc: FlowerContainer) -> str:
    """` (why this version)` when the image names none, else ""."""
    note = checked_version(fc).note
    return f" ({note})" if note else ""


def _missing(fc: FlowerContainer, flags: tuple[str, ...]) -> list[str]:
    """Flags absent from a command line read whole (none when a word of it is not known yet)."""
    return [] if fc.flags.unknown else [f for f in flags if not fc.flags.has(f)]


def check_fleet_tls(objects: Objects) -> Iterator[Violation]:
    for fc in flower_containers(objects, SUPERLINK, SUPERNODE):
        if not _since(fc, FLEET_TLS_SINCE):
            continue
        who = "the SuperLink's Fleet and Control APIs" if fc.program == SUPERLINK else "the SuperNode's Fleet calls"
        if fc.flags.has("--insecure"):
            yield Violation(fc.pod.ref, _args(fc), f"--insecure: {who} are plaintext ({_flower(fc, 'has TLS')})")
            continue
        if fc.program == SUPERLINK:
            missing = _missing(fc, SERVER_TLS_FLAGS)
            if missing:
                yield Violation(fc.pod.ref, _args(fc), f"{who} without {', '.join(missing)}{_note(fc)}")
        elif _missing(fc, ("--root-certificates",)):
            yield Violation(
                fc.pod.ref,
                _args(fc),
                "no --root-certificates: the SuperNode does not verify the SuperLink against the federation's CA"
                + _note(fc),
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
        if not _since(fc, APPIO_PROTECTION_SINCE):
            continue
        if fc.program == SUPERNODE:
            missing = _missing(fc, SERVER_TLS_FLAGS)
            if missing and _runtime_api_exposed(fc):
                yield Violation(
                    fc.pod.ref,
                    _args(fc),
                    f"the SuperNode's Runtime API listens on {fc.flags.value('--host')} without {', '.join(missing)}: "
                    "its SuperExecs' traffic (tasks, model updates) crosses the network in plaintext" + _note(fc),
                )
        elif fc.flags.has("--insecure"):
            host = host_of(_appio_address(fc))
            if host is not None and host not in LOOPBACK_HOSTS:
                yield Violation(
                    fc.pod.ref,
                    _args(fc),
                    f"--insecure towards {_appio_address(fc)}: the {fc.program} hop crosses the network in plaintext "
                    f"({_flower(fc, 'serves it over TLS')})",
                )


def _auth_flag(fc: FlowerContainer) -> str:
    return "--enable-supernode-auth" if _since(fc, NODE_AUTH_SINCE) else "--auth-list-public-keys"


def check_node_auth(objects: Objects) -> Iterator[Violation]:
    exposures = list(exp.exposures(objects))
    for fc in flower_containers(objects, SUPERLINK):
        flag = _auth_flag(fc)
        if fc.flags.unknown or fc.flags.has(flag):
            continue
        reached = sorted({f"{e.how} ({e.source} port {e.port_label})" for e in exposures if exp.selects(e, fc.pod)})
        if reached:
            yield Violation(
                fc.pod.ref,
                _args(fc),
                f"reached from outside the cluster by {'; '.join(reached)} without {flag}: any host that reaches "
                f"its Fleet API (and trusts its CA) may join the federation as a SuperNode{_note(fc)}",
            )


def control_listener(fc: FlowerContainer) -> Optional[tuple[int, bool]]:
    """(port, shared with Fleet) where a SuperLink serves its Control API beyond the pod's loopback;
    None when it listens on loopback only or the port is not known. The era is the checked
    version's (`flower_version.py`); only for 1.37 do the flags tell."""
    if _since(fc, CONTROL_HTTP_SINCE):
        http = True
    elif not _since(fc, CONTROL_GRPC_BEFORE):
        http = False
    else:
        http = fc.flags.has("--port") or fc.flags.has("--host")
    if http:
        host = fc.flags.value("--host") if fc.flags.has("--host") else "127.0.0.1"
        port = fc.flags.value("--port")
        number = (
            int(port) if port and re.fullmatch(r"[0-9]+", port) else (HTTP_PORT if not fc.flags.has("--port") else None)
        )
        shared = _since(fc, FLEET_HTTP_SINCE)
        return None if host in LOOPBACK_HOSTS or host is None or number is None else (number, shared)
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
            if reached is not None and shared and reached[0] not in (None, fc.name):
                yield from _proxy_violations(objects, e, pod, reached[0])
            if reached is None or reached[1] != port or reached[0] not in (None, fc.name):
                continue
            what = (
                f"port {port} of {pod.ref}, where the SuperLink ({_flower(fc)}) serves Fleet, Control and Runtime "
                "alike, with no Fleet-only proxy in front"
                if shared
                else f"the Control API port ({port}) of {pod.ref}{_note(fc)}"
            )
            yield Violation(
                e.source,
                e.path,
                f"{e.how} exposes {what}: whoever reaches it can `flwr run` code at every site and register SuperNodes",
            )


def _proxy_violations(objects: Objects, e: exp.Exposure, pod: PodSite, name: Optional[str]) -> Iterator[Violation]:
    """An exposed nginx beside a SuperLink that serves Fleet, Control and Runtime on one port: its
    nginx.conf, parsed, must forward nothing but the Fleet API (`proxy_config.py` states the rule).
    A config the objects do not hold cannot be judged, so it is reported too."""
    for path, c in pod.containers(("containers",)):
        if c.get("name") != name or not proxy_config.runs_nginx(c):
            continue
        text, source = proxy_config.config_text(objects, pod, c)
        found = proxy_config.problems(text) if text is not None else [f"its nginx.conf cannot be read: {source}"]
        for problem in found:
            yield Violation(
                e.source,
                e.path,
                f"{e.how} exposes container {name} of {pod.ref} ({path}), an nginx in front of the SuperLink's "
                f"shared Fleet/Control/Runtime port, whose config ({source}) may forward more than the Fleet API: "
                f"{problem}",
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
        severity="critical",
        url="https://flower.ai/docs/framework/how-to-enable-tls-connections.html",
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
        severity="medium",
        url="https://flower.ai/docs/framework/how-to-enable-tls-connections.html",
    ),
    Policy(
        "flower-node-auth",
        "A SuperLink reached from outside its cluster authenticates its SuperNodes",
        MANDATORY,
        "Run the SuperLink with --enable-supernode-auth and register each SuperNode's public key (our config: "
        "nodeAuth.enabled: true), or keep it inside the cluster (a ClusterIP Service, no Ingress or route).",
        check_node_auth,
        whole_stack=True,
        severity="critical",
        url="https://flower.ai/docs/framework/how-to-authenticate-supernodes.html",
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
        severity="critical",
        url="https://flower.ai/docs/framework/explanation-flower-architecture.html",
    ),
)
