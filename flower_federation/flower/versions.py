"""Flower versions, and the version from which Flower has each feature this program uses.

Every gate below was read off the real wheels (`--help`, the modules); `dialects.py`
turns a version into command lines, `rules/versions.py` checks a config against them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Optional

DEFAULT_VERSION = "1.42.0"

_VERSION_RE = re.compile(r"^v?(\d+)\.(\d+)(?:\.(\d+))?")


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


# Runtime dependency installation (`uv sync` of app dependencies), read off the wheels:
# 1.29-1.31: opt-in `--allow-runtime-dependency-installation` on every program;
# 1.32+: the SuperLink installs by default (`--disable-runtime-dependency-installation`
# turns it off), SuperNode and SuperExec still opt in with `--allow-...`.
RUNTIME_DEPS_SINCE = FlowerVersion(1, 29, 0)
SUPERLINK_INSTALLS_BY_DEFAULT_SINCE = FlowerVersion(1, 32, 0)
# Every program serves the gRPC health protocol when given --health-server-address, up
# to 1.42 (removed in 1.43).
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
# `flwr` reads SuperLink connections from $FLWR_HOME/config.toml from 1.26 on; before,
# from `[tool.flwr.federations]` in the app's pyproject.toml.
FLWR_CONFIG_TOML_SINCE = FlowerVersion(1, 26, 0)
