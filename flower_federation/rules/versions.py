"""The Flower version (from `version`, else the SuperLink's or the SuperNodes' image tag, else the default),
its dialect, the images and ports that must agree with it, and features gated by it."""

from __future__ import annotations

from collections.abc import Generator, Iterator
from typing import Optional

from flower_federation.config.derived import DEFAULTS
from flower_federation.config.errors import Problem, problem
from flower_federation.config.images import raw_reference
from flower_federation.flower.dialects import HEALTH_PORT, SIDECAR_HEALTH_PORT, Dialect, dialect_for, supported_ranges
from flower_federation.flower.versions import (
    DEFAULT_VERSION,
    FLWR_CONFIG_TOML_SINCE,
    KUBERNETES_EXECUTOR_SINCE,
    NODE_AUTH_SINCE,
    RUNTIME_DEPS_SINCE,
    VERSION,
    VERSION_FORM,
    FlowerVersion,
    version_from_image,
)
from flower_federation.rules.images import flower_image_locations
from flower_federation.rules.raw import At, Pools, Raw, as_dict, get


def version_source(raw: Raw) -> Optional[At]:
    """The image whose tag gives the Flower version when `version` is unset: the SuperLink's, else (no SuperLink
    image: a site, or a SuperLink on the default image) `supernodes.image`."""
    for at in (("superlink", "image"), ("supernodes", "image")):
        if raw_reference(get(raw, *at)) is not None:
            return at
    return None


def resolve_version(raw: Raw) -> tuple[Optional[FlowerVersion], Optional[At]]:
    """(version, where it came from): `version`, else the tag of the image `version_source` names, else the
    default (source None)."""
    text = raw.get("version")
    if isinstance(text, str):
        # The whole string (`X.Y[.Z]`, a pre-release suffix, no build suffix): a version is written into labels,
        # command lines, image tags and outputs.
        return (FlowerVersion.parse(text) if VERSION.fullmatch(text) else None), ("version",)
    source = version_source(raw)
    if source is not None:
        v = version_from_image(str(raw_reference(get(raw, *source))))
        if v is not None:
            return v, source
    return FlowerVersion.parse(DEFAULT_VERSION), None


def versions(raw: Raw, pools: Pools) -> Generator[Problem, None, Optional[Dialect]]:
    """Yields problems; returns the dialect when the version is usable."""
    version, source = resolve_version(raw)
    if version is None:
        yield problem(("version",), f"'{raw.get('version')}' is not a Flower version: expected {VERSION_FORM}")
        return None
    unpinned = version_source(raw) if source is None else None
    if unpinned is not None and "@" in str(raw_reference(get(raw, *unpinned))):
        # A digest pins the image but says nothing of its Flower version: never guess the dialect.
        yield problem(
            unpinned,
            "pinned by a digest without a version tag, so the Flower version (the dialect of every command line) is "
            "unknown: set `version`, or give the tag too",
        )
        return None
    dialect = dialect_for(version)
    if dialect is None:
        yield problem(source or ("version",), f"Flower {version} is not supported; supported: {supported_ranges()}")
        return None
    for at, image in flower_image_locations(raw, pools):
        text = raw_reference(image)
        if text is None:
            continue
        v = version_from_image(text)
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
    metrics = get(raw, "monitoring", "port")
    # Behind the Fleet-only proxy the SuperLink's own port is the Control Service's (plan/__init__.py).
    behind_proxy = get(raw, "superlink", "controlService", "port", default=DEFAULTS.superlink.control_service.port)
    taken = {resolved.fleet, resolved.control, resolved.serverappio, behind_proxy, HEALTH_PORT, SIDECAR_HEALTH_PORT}
    if get(raw, "monitoring", "enabled") is True and isinstance(metrics, int) and metrics in taken:
        # The exporter is a container of the SuperLink's pod: one port space with the SuperLink's (and its proxy's).
        yield problem(
            ("monitoring", "port"),
            f"{metrics} is a port of the SuperLink's pod (its APIs, its own port behind the Fleet-only proxy, the "
            "health ports: "
            f"{sorted(p for p in taken if p is not None)}); choose another",
        )
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
        tilde = '; `~` is not expanded here (in a shell, write "$HOME/...")' if root_certs.startswith("~") else ""
        yield problem(("cli", "rootCertificates"), f"{root_certs!r}: flwr {v} needs an absolute path here{tilde}")
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
