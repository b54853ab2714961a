"""The command lines each Flower version's programs accept (the versions: versions.py).

Flower changed its command lines and ports between 1.2x and 1.4x (see
`../shared/flower-cli.md`); everything here was read off the real `--help` output and is
checked in tests against the real argparse parsers of flwr 1.26.1, 1.41.0 and 1.42.0.

Two dialects are supported:
- gRPC era (1.21 - 1.34): separate gRPC ports for Fleet (9092), Control (9093) and the
  plaintext in-pod ServerAppIo API (9091); SuperExec takes `--plugin-type`.
- HTTP era (1.40 and later): one HTTP(S) port (8000) for Fleet, Control and Runtime;
  SuperExec dials `--runtime-api-address`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from flower_federation.flower.versions import (
    GRPC_HEALTH_UNTIL,
    RUNTIME_DEPS_SINCE,
    SUPERLINK_INSTALLS_BY_DEFAULT_SINCE,
    FlowerVersion,
)

ANY_ADDRESS = "0.0.0.0"
LOOPBACK = "127.0.0.1"
# Every default port, here and only here: the config model's descriptions and the rules quote these.
HTTP_PORT = 8000  # HTTP era: the SuperLink's one API port (the Fleet port sites dial)
GRPC_FLEET_PORT = 9092  # gRPC era: Fleet API
GRPC_CONTROL_PORT = 9093  # gRPC era: Control API (what `flwr` dials)
GRPC_SERVERAPPIO_PORT = 9091  # gRPC era: ServerAppIo API
# SuperNode's ClientAppIo (gRPC era) / Runtime API (HTTP era) port; both eras use 9094.
SUPERNODE_APPIO_PORT = 9094
# With the Fleet-only proxy on the Fleet port: the SuperLink's own API port and its control Service's.
CONTROL_SERVICE_PORT = 9095


@dataclass(frozen=True)
class Ports:
    """Ports the SuperLink listens on and its Service exposes, resolved for a dialect.
    In the HTTP era there is no separate ServerAppIo port (the Runtime API shares the
    SuperLink's one port, `control`); `fleet` is that same port, unless the Fleet-only
    proxy serves it (fleet_proxy.py) and the SuperLink listens on `control` behind it."""

    fleet: int
    control: int
    serverappio: Optional[int]


@dataclass(frozen=True)
class ServicePort:
    name: str
    port: int


@dataclass(frozen=True)
class ServerTls:
    """Where a server (the SuperLink; a SuperNode's Runtime API) finds its TLS files."""

    ca_file: str
    cert_file: str
    key_file: str


def runtime_dependency_args(version: FlowerVersion, program: str, allow: bool) -> list[str]:
    """Flags that make `program` install app dependencies exactly when `allow`
    (versions.RUNTIME_DEPS_SINCE)."""
    if version < RUNTIME_DEPS_SINCE:
        return []
    if program == "superlink" and version >= SUPERLINK_INSTALLS_BY_DEFAULT_SINCE:
        return [] if allow else ["--disable-runtime-dependency-installation"]
    return ["--allow-runtime-dependency-installation"] if allow else []


# Health: every program serves the gRPC health protocol (always SERVING) when given
# --health-server-address, up to 1.42 (versions.GRPC_HEALTH_UNTIL). The HTTP-era
# SuperLink also answers `GET /health` on its API port, which is what its probes use.
HEALTH_PORT = 8081
SIDECAR_HEALTH_PORT = 8082  # the SuperExec next to a SuperLink or SuperNode in one pod


def health_server_args(version: FlowerVersion, port: int) -> list[str]:
    """Start the gRPC health server on the pod's address (the kubelet probes the pod
    IP), or nothing where this version has none."""
    if version >= GRPC_HEALTH_UNTIL:
        return []
    return ["--health-server-address", f"{ANY_ADDRESS}:{port}"]


class Dialect:
    """A Flower version's command lines. Instances are bound to one version, since a
    few flags appear within a dialect's range (see runtime_dependency_args)."""

    name: str
    min_version: FlowerVersion
    max_version: Optional[FlowerVersion]
    # Config keys under `superlink.service.ports` this dialect uses.
    port_keys: tuple[str, ...]

    def __init__(self, version: FlowerVersion):
        self.version = version

    @classmethod
    def contains(cls, v: FlowerVersion) -> bool:
        return cls.min_version <= v and (cls.max_version is None or v <= cls.max_version)

    def _deps(self, program: str, allow: bool) -> list[str]:
        return runtime_dependency_args(self.version, program, allow)

    @classmethod
    def describe(cls) -> str:
        raise NotImplementedError

    # --- ports -------------------------------------------------------------------
    def resolve_ports(self, configured: dict[str, Optional[int]]) -> Ports:
        raise NotImplementedError

    def service_ports(self, ports: Ports) -> list[ServicePort]:
        """Ports of the SuperLink's public Service. Never a plaintext in-pod API."""
        raise NotImplementedError

    # --- command lines (container `args`; the images' ENTRYPOINT is the program) ---
    def superlink_args(
        self,
        *,
        isolation: str,
        ports: Ports,
        serverappio_bind: str,
        database: Optional[str],
        tls: Optional[ServerTls],
        runtime_dependency_installation: bool,
        auth_secret_file: Optional[str] = None,
    ) -> list[str]:
        """`auth_secret_file`: the SuperExec auth secret its SuperExec signs with."""
        raise NotImplementedError

    def supernode_args(
        self,
        *,
        superlink_address: str,
        ca_file: Optional[str],
        isolation: str,
        appio_bind: str,
        appio_port: int,
        runtime_dependency_installation: bool,
        runtime_tls: Optional[ServerTls] = None,
        auth_secret_file: Optional[str] = None,
    ) -> list[str]:
        """`runtime_tls`: serve the Runtime API over TLS with these files;
        `auth_secret_file`: the auth secret its SuperExec signs with."""
        raise NotImplementedError

    def superexec_args(
        self,
        *,
        plugin: str,
        appio_address: str,
        ca_file: Optional[str],
        runtime_dependency_installation: bool,
        auth_secret_file: Optional[str] = None,
    ) -> list[str]:
        """`plugin` is `serverapp` or `clientapp`. `ca_file` is set when the API the
        SuperExec dials is served over TLS; `auth_secret_file` when it signs its requests."""
        raise NotImplementedError


def _tls_server_args(tls: Optional[ServerTls]) -> list[str]:
    if tls is None:
        return ["--insecure"]
    return [
        "--ssl-ca-certfile",
        tls.ca_file,
        "--ssl-certfile",
        tls.cert_file,
        "--ssl-keyfile",
        tls.key_file,
    ]


def _tls_client_args(ca_file: Optional[str]) -> list[str]:
    return ["--insecure"] if ca_file is None else ["--root-certificates", ca_file]


def _auth_secret_args(auth_secret_file: Optional[str]) -> list[str]:
    return [] if auth_secret_file is None else ["--superexec-auth-secret-file", auth_secret_file]


def _no_appio_protection(*values: object) -> None:
    # The gRPC era has no such flags that a real parser here checks (APPIO_PROTECTION_SINCE).
    assert all(v is None for v in values), "AppIo TLS and SuperExec auth need the HTTP era"


class GrpcEra(Dialect):
    name = "gRPC era"
    min_version = FlowerVersion(1, 21, 0)
    max_version = FlowerVersion(1, 34, 999)
    port_keys = ("grpc", "serverAppIO", "extra")

    @classmethod
    def describe(cls) -> str:
        return "1.21-1.34 (gRPC era)"

    def resolve_ports(self, configured: dict[str, Optional[int]]) -> Ports:
        return Ports(
            fleet=configured.get("grpc") or GRPC_FLEET_PORT,
            control=configured.get("extra") or GRPC_CONTROL_PORT,
            serverappio=configured.get("serverAppIO") or GRPC_SERVERAPPIO_PORT,
        )

    def service_ports(self, ports: Ports) -> list[ServicePort]:
        return [ServicePort("fleet", ports.fleet), ServicePort("control", ports.control)]

    def superlink_args(
        self,
        *,
        isolation: str,
        ports: Ports,
        serverappio_bind: str,
        database: Optional[str],
        tls: Optional[ServerTls],
        runtime_dependency_installation: bool,
        auth_secret_file: Optional[str] = None,
    ) -> list[str]:
        _no_appio_protection(auth_secret_file)
        args = _tls_server_args(tls) + [
            "--isolation",
            isolation,
            "--fleet-api-address",
            f"{ANY_ADDRESS}:{ports.fleet}",
            "--control-api-address",
            f"{ANY_ADDRESS}:{ports.control}",
            "--serverappio-api-address",
            f"{serverappio_bind}:{ports.serverappio}",
        ]
        if database:
            args += ["--database", database]
        return args + self._deps("superlink", runtime_dependency_installation)

    def supernode_args(
        self,
        *,
        superlink_address: str,
        ca_file: Optional[str],
        isolation: str,
        appio_bind: str,
        appio_port: int,
        runtime_dependency_installation: bool,
        runtime_tls: Optional[ServerTls] = None,
        auth_secret_file: Optional[str] = None,
    ) -> list[str]:
        _no_appio_protection(runtime_tls, auth_secret_file)
        return (
            _tls_client_args(ca_file)
            + [
                "--superlink",
                superlink_address,
                "--isolation",
                isolation,
                "--clientappio-api-address",
                f"{appio_bind}:{appio_port}",
            ]
            + self._deps("supernode", runtime_dependency_installation)
        )

    def superexec_args(
        self,
        *,
        plugin: str,
        appio_address: str,
        ca_file: Optional[str],
        runtime_dependency_installation: bool,
        auth_secret_file: Optional[str] = None,
    ) -> list[str]:
        # gRPC-era AppIo APIs are plaintext (flower-superexec 1.2x has no
        # --root-certificates); they stay in the pod or behind a restricted Service.
        _no_appio_protection(auth_secret_file)
        return ["--insecure", "--plugin-type", plugin, "--appio-api-address", appio_address] + self._deps(
            "superexec", runtime_dependency_installation
        )


class HttpEra(Dialect):
    name = "HTTP era"
    min_version = FlowerVersion(1, 40, 0)
    # Flower 2 may change its command lines again: refuse rather than guess.
    max_version = FlowerVersion(1, 999, 999)
    port_keys = ("http",)

    @classmethod
    def describe(cls) -> str:
        return "1.40 - 1.x, not 2.0 (HTTP era)"

    def resolve_ports(self, configured: dict[str, Optional[int]]) -> Ports:
        api = configured.get("http") or HTTP_PORT
        return Ports(fleet=api, control=api, serverappio=None)

    def service_ports(self, ports: Ports) -> list[ServicePort]:
        return [ServicePort("api", ports.fleet)]

    def superlink_args(
        self,
        *,
        isolation: str,
        ports: Ports,
        serverappio_bind: str,
        database: Optional[str],
        tls: Optional[ServerTls],
        runtime_dependency_installation: bool,
        auth_secret_file: Optional[str] = None,
    ) -> list[str]:
        # --host defaults to 127.0.0.1, which no other pod can reach.
        args = _tls_server_args(tls) + [
            "--isolation",
            isolation,
            "--host",
            ANY_ADDRESS,
            "--port",
            # Its own API port: the Fleet port itself, unless the Fleet-only proxy holds that.
            str(ports.control),
        ]
        if database:
            args += ["--database", database]
        return args + _auth_secret_args(auth_secret_file) + self._deps("superlink", runtime_dependency_installation)

    def supernode_args(
        self,
        *,
        superlink_address: str,
        ca_file: Optional[str],
        isolation: str,
        appio_bind: str,
        appio_port: int,
        runtime_dependency_installation: bool,
        runtime_tls: Optional[ServerTls] = None,
        auth_secret_file: Optional[str] = None,
    ) -> list[str]:
        # --insecure/--root-certificates: toward the SuperLink; --ssl-*: the Runtime API
        # this SuperNode serves its SuperExec (all three, or Flower refuses to start).
        args = _tls_client_args(ca_file) + [
            "--superlink",
            superlink_address,
            "--isolation",
            isolation,
            "--host",
            appio_bind,
            "--port",
            str(appio_port),
        ]
        if runtime_tls is not None:
            args += [
                "--ssl-certfile",
                runtime_tls.cert_file,
                "--ssl-keyfile",
                runtime_tls.key_file,
                "--ssl-ca-certfile",
                runtime_tls.ca_file,
            ]
        return args + _auth_secret_args(auth_secret_file) + self._deps("supernode", runtime_dependency_installation)

    def superexec_args(
        self,
        *,
        plugin: str,
        appio_address: str,
        ca_file: Optional[str],
        runtime_dependency_installation: bool,
        auth_secret_file: Optional[str] = None,
    ) -> list[str]:
        return (
            _tls_client_args(ca_file)
            + ["--runtime-api-address", appio_address]
            + _auth_secret_args(auth_secret_file)
            + self._deps("superexec", runtime_dependency_installation)
        )


DIALECTS: tuple[type[Dialect], ...] = (GrpcEra, HttpEra)


def dialect_for(version: FlowerVersion) -> Optional[Dialect]:
    for cls in DIALECTS:
        if cls.contains(version):
            return cls(version)
    return None


def supported_ranges() -> str:
    return " or ".join(cls.describe() for cls in DIALECTS)
