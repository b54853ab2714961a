"""The Flower version (from `version`, else the SuperLink image tag, else the default),
its dialect, the images and ports that must agree with it, and features gated by it."""

from __future__ import annotations

from collections.abc import Generator, Iterator
from typing import Any, Optional

from ..dialects import (
    DEFAULT_VERSION,
    FLWR_CONFIG_TOML_SINCE,
    KUBERNETES_EXECUTOR_SINCE,
    NODE_AUTH_SINCE,
    RUNTIME_DEPS_SINCE,
    Dialect,
    FlowerVersion,
    dialect_for,
    supported_ranges,
    version_from_image,
)
from ..errors import Problem, problem
from .raw import At, Pools, Raw, as_dict, get


def resolve_version(raw: Raw) -> tuple[Optional[FlowerVersion], Optional[str]]:
    """(version, where it came from): `version`, else the SuperLink image tag, else the default."""
    text = raw.get("version")
    if isinstance(text, str):
        return FlowerVersion.parse(text), "version"
    image = get(raw, "superlink", "image")
    if isinstance(image, str):
        v = version_from_image(image)
        if v is not None:
            return v, "superlink.image"
    return FlowerVersion.parse(DEFAULT_VERSION), None


def versions(raw: Raw, pools: Pools) -> Generator[Problem, None, Optional[Dialect]]:
    """Yields problems; returns the dialect when the version is usable."""
    version, source = resolve_version(raw)
    if version is None:
        yield problem(("version",), f"'{raw.get('version')}' is not a Flower version (expected X.Y.Z)")
        return None
    dialect = dialect_for(version)
    if dialect is None:
        where: At = ("version",) if source == "version" else ("superlink", "image")
        yield problem(where, f"Flower {version} is not supported; supported: {supported_ranges()}")
        return None
    images: list[tuple[At, Any]] = [
        (("superlink", "image"), get(raw, "superlink", "image")),
        (("superlink", "superexecImage"), get(raw, "superlink", "superexecImage")),
        (("supernodes", "image"), get(raw, "supernodes", "image")),
    ]
    for i, pool in pools:
        at: At = ("supernodes", "pools", i, "images")
        images += [
            (at + ("supernode",), get(pool, "images", "supernode")),
            (at + ("superexecClientApp",), get(pool, "images", "superexecClientApp")),
        ]
    for at, image in images:
        if not isinstance(image, str):
            continue
        v = version_from_image(image)
        if v is not None and not dialect.contains(v):
            yield problem(
                at,
                f"image tag {v} speaks a different Flower dialect than this federation's "
                f"version {version} ({dialect.name}); supported: {supported_ranges()}",
            )
    return dialect


def ports(raw: Raw, dialect: Dialect) -> Iterator[Problem]:
    ports = as_dict(get(raw, "superlink", "service", "ports"))
    for key, value in ports.items():
        if value is not None and key not in dialect.port_keys and key in ("grpc", "serverAppIO", "extra", "http"):
            hint = (
                "Flower 1.40+ serves Fleet, Control and Runtime on one port: set superlink.service.ports.http"
                if key != "http"
                else "superlink.service.ports.http is for Flower 1.40+; use grpc (Fleet), extra (Control), serverAppIO"
            )
            yield problem(("superlink", "service", "ports", key), f"not used by the {dialect.name}: {hint}")
    resolved = dialect.resolve_ports({k: v for k, v in ports.items() if isinstance(v, int)})
    if resolved.serverappio is None:  # one shared port (HTTP era)
        return
    used = [resolved.fleet, resolved.control, resolved.serverappio]
    if len(set(used)) != len(used):
        yield problem(("superlink", "service", "ports"), f"ports must be distinct, got {used}")


def version_gates(raw: Raw, dialect: Dialect) -> Iterator[Problem]:
    """Features and spellings that depend on the Flower version."""
    v = dialect.version
    root_certs = get(raw, "cli", "rootCertificates")
    if isinstance(root_certs, str) and not root_certs.startswith("/") and v >= FLWR_CONFIG_TOML_SINCE:
        yield problem(("cli", "rootCertificates"), f"flwr {v} needs an absolute path here")
    if raw.get("allowRuntimeDependencyInstallation") is True and v < RUNTIME_DEPS_SINCE:
        yield problem(
            ("allowRuntimeDependencyInstallation",),
            f"runtime dependency installation needs Flower {RUNTIME_DEPS_SINCE} or later; this federation runs {v}",
        )
    if get(raw, "nodeAuth", "enabled") is True and v < NODE_AUTH_SINCE:
        yield problem(
            ("nodeAuth", "enabled"),
            f"node authentication with `flwr supernode register` needs Flower "
            f"{NODE_AUTH_SINCE} or later; this federation runs {v}",
        )
    if get(raw, "executor", "type") == "kubernetes" and v < KUBERNETES_EXECUTOR_SINCE:
        yield problem(
            ("executor", "type"),
            f"the Kubernetes executor needs Flower {KUBERNETES_EXECUTOR_SINCE} or later; this federation runs {v}",
        )
