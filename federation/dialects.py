"""Flower versions and the command lines each version's programs accept.

Flower changed its command lines and ports between 1.2x and 1.4x (see
`../shared/flower-cli.md`); everything here was read off the real `--help` output and is
checked in tests against the real argparse parsers of flwr 1.26.1 and 1.41.0.

Two dialects are supported:
- gRPC era (1.21 - 1.34): separate gRPC ports for Fleet (9092), Control (9093) and the
  plaintext in-pod ServerAppIo API (9091); SuperExec takes `--plugin-type`.
- HTTP era (1.40 and later): one HTTP(S) port (8000) for Fleet, Control and Runtime;
  SuperExec dials `--runtime-api-address`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Optional

DEFAULT_VERSION = "1.41.0"

_VERSION_RE = re.compile(r"^v?(\d+)\.(\d+)(?:\.(\d+))?")

ANY_ADDRESS = "0.0.0.0"
LOOPBACK = "127.0.0.1"
# SuperNode's ClientAppIo (gRPC era) / Runtime API (HTTP era) port; both eras use 9094.
SUPERNODE_APPIO_PORT = 9094


@dataclass(frozen=True, order=True)
class FlowerVersion:
    major: int
    minor: int
    patch: int

    @classmethod
    def parse(cls, text: str) -> Optional[FlowerVersion]:
        """Leading `X.Y[.Z]` of a version or image tag (`1.21.0-py3.11-ubuntu24.04`)."""
        m = _VERSION_RE.match(text.strip())
        if not m:
            return None
        return cls(int(m.group(1)), int(m.group(2)), int(m.group(3) or 0))

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}.{self.patch}"


def image_tag(image: str) -> Optional[str]:
    """Tag of an image reference, ignoring a registry port and a digest."""
    ref = image.split("@", 1)[0]
    last = ref.rsplit("/", 1)[-1]
    if ":" not in last:
        return None
    return last.rsplit(":", 1)[1]


def version_from_image(image: str) -> Optional[FlowerVersion]:
    tag = image_tag(image)
    return FlowerVersion.parse(tag) if tag else None


@dataclass(frozen=True)
class Ports:
    """Ports the SuperLink listens on and its Service exposes, resolved for a dialect.
    In the HTTP era Fleet and Control are the same port and there is no separate
    ServerAppIo port (the Runtime API shares it)."""

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


# Runtime dependency installation (`uv sync` of app dependencies), read off the wheels:
# 1.29-1.31: opt-in `--allow-runtime-dependency-installation` on every program;
# 1.32+: the SuperLink installs by default (`--disable-runtime-dependency-installation`
# turns it off), SuperNode and SuperExec still opt in with `--allow-...`.
RUNTIME_DEPS_SINCE = FlowerVersion(1, 29, 0)
SUPERLINK_INSTALLS_BY_DEFAULT_SINCE = FlowerVersion(1, 32, 0)


def runtime_dependency_args(version: FlowerVersion, program: str, allow: bool) -> list[str]:
    """Flags that make `program` install app dependencies exactly when `allow`."""
    if version < RUNTIME_DEPS_SINCE:
        return []
    if program == "superlink" and version >= SUPERLINK_INSTALLS_BY_DEFAULT_SINCE:
        return [] if allow else ["--disable-runtime-dependency-installation"]
    return ["--allow-runtime-dependency-installation"] if allow else []


# Health: every program serves the gRPC health protocol (always SERVING) when given
# --health-server-address, up to 1.42 (removed in 1.43). The HTTP-era SuperLink also
# answers `GET /health` on its API port, which is what its probes use.
HEALTH_PORT = 8081
SIDECAR_HEALTH_PORT = 8082  # the SuperExec next to a SuperLink or SuperNode in one pod
GRPC_HEALTH_UNTIL = FlowerVersion(1, 43, 0)
# Node authentication: SuperLink --enable-supernode-auth, SuperNode
# --auth-supernode-private-key, keys registered with `flwr supernode register`.
NODE_AUTH_SINCE = FlowerVersion(1, 23, 0)
# Declarative registration (a Job reconciling the SuperLink's registered keys) uses
# Flower's CLI modules as `flwr supernode register/unregister/list` do; their connection
# API (config.toml, read_superlink_connection) exists from 1.26. Older versions get the
# register script only.
REGISTRATION_JOB_SINCE = FlowerVersion(1, 26, 0)
# SuperExec --executor kubernetes --executor-config.
KUBERNETES_EXECUTOR_SINCE = FlowerVersion(1, 32, 0)
# The hop between a SuperExec and the API it dials (the SuperNode's Runtime API, the
# SuperLink's Runtime API): from the HTTP era the SuperNode serves it over TLS
# (--ssl-certfile/--ssl-keyfile/--ssl-ca-certfile) and SuperLink, SuperNode and SuperExec
# share a secret that signs every SuperExec request (--superexec-auth-secret-file, HMAC).
# 1.32-1.34 have the gRPC-era forerunners (--appio-ssl-*), which no real parser here
# checks, so the gRPC era keeps its AppIo hops plaintext, confined by NetworkPolicy.
APPIO_PROTECTION_SINCE = FlowerVersion(1, 40, 0)


def health_server_args(version: FlowerVersion, port: int) -> list[str]:
    """Start the gRPC health server on the pod's address (the kubelet probes the pod
    IP), or nothing where this version has none."""
    if version >= GRPC_HEALTH_UNTIL:
        return []
    return ["--health-server-address", f"{ANY_ADDRESS}:{port}"]


# `flwr` reads SuperLink connections from $FLWR_HOME/config.toml from 1.26 on; before,
# from `[tool.flwr.federations]` in the app's pyproject.toml.
FLWR_CONFIG_TOML_SINCE = FlowerVersion(1, 26, 0)


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
            fleet=configured.get("grpc") or 9092,
            control=configured.get("extra") or 9093,
            serverappio=configured.get("serverAppIO") or 9091,
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
        api = configured.get("http") or 8000
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
            str(ports.fleet),
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
