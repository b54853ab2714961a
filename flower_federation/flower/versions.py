"""Flower versions, and the version from which Flower has each feature this program uses.

Every gate below was read off the real wheels (`--help`, the modules); `dialects.py`
turns a version into command lines, `rules/versions.py` checks a config against them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Optional

DEFAULT_VERSION = "1.42.0"

# A Flower version as PEP 440 normalises it (https://peps.python.org/pep-0440/): the release `X.Y[.Z]`, then
# an optional pre-release `aN`, `bN` or `rcN` and an optional development release `.devN` (Flower's nightly:
# the wheel flwr-nightly==1.43.0.dev20261026, the images flwr/superlink:1.43.0.dev20261026). Matched whole.
# Digits are ASCII: Python's \d also takes '٤', and int() reads it as 4.
_RELEASE = r"v?(?P<major>[0-9]+)\.(?P<minor>[0-9]+)(?:\.(?P<patch>[0-9]+))?"
_PRE = r"(?P<pre>(?:(?:a|b|rc)[0-9]+)?(?:\.dev[0-9]+)?)"
VERSION = re.compile(_RELEASE + _PRE)
# An image tag that names a Flower version: the version, then an optional build suffix after `-` (Flower's
# `1.42.0-py3.13-ubuntu24.04`). Matched whole. A suffix that spells a pre-release (`-rc1`, `-dev`, `-beta`: PEP
# 440 reads `1.43.0-rc1` as 1.43.0rc1) is refused rather than taken for a build of the release.
_BUILD = r"(?:-(?!(?:alpha|beta|preview|pre|rc|dev|a|b|c)[0-9]*(?:[._-]|$))[A-Za-z0-9_.-]+)?"
VERSION_TAG = re.compile(_RELEASE + _PRE + _BUILD)
# A tag that starts like a version (`X.Y`): it is read as one, so it must be well formed (VERSION_TAG), or it
# is refused rather than read as the release it starts with (`1.43.0.dev` is no 1.43.0).
VERSION_LIKE_TAG = re.compile(r"v?[0-9]+\.[0-9]+.*")
# The forms a refusal quotes.
VERSION_FORM = "X.Y.Z, optionally then a pre-release aN, bN, rcN or .devN: e.g. 1.42.0, 1.43.0rc1, 1.43.0.dev20261026"
VERSION_TAG_FORM = (
    "X.Y.Z, optionally then a pre-release aN, bN, rcN or .devN, optionally then -build: e.g. 1.42.0, 1.43.0rc1, "
    "1.43.0.dev20261026, 1.42.0-py3.13-ubuntu24.04"
)


@dataclass(frozen=True)
class FlowerVersion:
    """A Flower release, or a pre-release of it (`pre`: `rc1`, `.dev20261026`, ...).

    Comparisons (`<`, `>=`) see the release only: a pre-release gets every feature gate and rule of
    the release it leads to (the nightly of 1.43.0 is built from the code 1.43.0 ships), and a
    warning names it (plan/outputs.py). Equality sees `pre` too: 1.43.0.dev20261026 is not 1.43.0."""

    major: int
    minor: int
    patch: int
    pre: str = ""

    @classmethod
    def parse(cls, text: str) -> Optional[FlowerVersion]:
        """A version string or a version image tag (`1.21.0-py3.11-ubuntu24.04`), matched whole; None for
        anything else (`nightly`, `1.43.0.dev`)."""
        m = VERSION_TAG.fullmatch(text.strip())
        if not m:
            return None
        return cls(int(m["major"]), int(m["minor"]), int(m["patch"] or 0), m["pre"])

    @property
    def release(self) -> FlowerVersion:
        return FlowerVersion(self.major, self.minor, self.patch)

    @property
    def is_prerelease(self) -> bool:
        return bool(self.pre)

    @property
    def prerelease_kind(self) -> str:
        """What `pre` makes of the release, in words ('' for a release)."""
        if ".dev" in self.pre:
            return "a development build, as Flower's nightlies are"
        kinds = {"rc": "a release candidate", "a": "an alpha", "b": "a beta"}
        return next((kind for prefix, kind in kinds.items() if self.pre.startswith(prefix)), "")

    def _key(self) -> tuple[int, int, int]:
        return (self.major, self.minor, self.patch)

    def __lt__(self, other: FlowerVersion) -> bool:
        return self._key() < other._key()

    def __le__(self, other: FlowerVersion) -> bool:
        return self._key() <= other._key()

    def __gt__(self, other: FlowerVersion) -> bool:
        return self._key() > other._key()

    def __ge__(self, other: FlowerVersion) -> bool:
        return self._key() >= other._key()

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}.{self.patch}{self.pre}"


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
# to 1.42: the 1.43.0 release notes remove it (and the gRPC Fleet/Control services behind
# FLWR_INTERNAL_GRPC_*_API). The nightly flwr-nightly==1.43.0.dev20261026 still has both
# (flwr/supercore/grpc_health, superlink/cli/flower_superlink.py); as a pre-release of
# 1.43.0 it is planned without them, which it accepts, and probed as 1.43.0 is
# (plan/probes.py: the Runtime API's `GET /health`, which it serves too). Its other wire
# changes gate nothing here: Alembic revision 4c9b3f185c5b (after 1.42's d9bd9d502cf9; the
# state guard backs the state up before it runs), and the Fleet API's refusal of a pushed
# message whose source node is not the authenticated one (403, error 2011), which an honest
# SuperNode of any release never sends (flower/skew.py).
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
# The Alembic head of the SuperLink's state each known Flower leaves a state file at (read off the wheels with
# Flower's own Alembic configuration: tests/support/flower_surface.py). A SuperLink migrates its state to its
# head when it starts, one way (builders/state_guard.py backs it up first). The CI canary
# (tests/support/canary.py) fails on a head not listed here: a migration nobody here has read yet. The nightly's
# 4c9b3f185c5b ("Migrate legacy message metadata", after 1.42's d9bd9d502cf9) asks for no concurrent writers.
KNOWN_STATE_HEADS = {
    "1.26.1": "8e65d8ae60b0",
    "1.41.0": "d90a2f91f23c",
    "1.42.0": "d9bd9d502cf9",
    "1.43.0.dev20261026": "4c9b3f185c5b",
}
