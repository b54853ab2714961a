"""Which Flower a container is checked as: one rule for every policy that depends on the version.

- An image whose tag names a version (`flwr/superlink:1.41.0`, `1.21.0-py3.11-ubuntu24.04`) is
  checked as that version, whatever its command line says.
- An image reference that names none (`:latest`, `:nightly`, no tag, digest-only) is checked as
  the newest Flower known (`flower/versions.py`'s `DEFAULT_VERSION`): what such a reference pulls
  today.
- Unless its command line holds a flag the newest Flower's program no longer accepts (argparse
  would make it exit): then it cannot be running the newest, and is checked as the newest Flower
  whose command line we hold that accepts every such flag (`RETIRED_FLAGS`).

`RETIRED_FLAGS` was read off `../shared/flower-cli/<version>/<program>.help.txt` (1.20.0, 1.26.1,
1.32.1, 1.36.0, 1.38.0, 1.40.0, 1.41.0, 1.42.0; tests/test_policies_versions.py compares them):
each flag the newest's `--help` lacks, with the newest version held whose `--help` has it. Flags
that only some eras *use* but the newest still accepts say nothing: 1.42 accepts
`--fleet-api-address` and `--control-api-address` (deprecated: "Use `--host` and `--port`"), so
they do not make a versionless SuperLink a gRPC-era one; nor does `--auth-list-public-keys` (1.42:
"deprecated"), so a versionless SuperLink authenticates nodes only with `--enable-supernode-auth`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from flower_federation.checks.pods import SUPEREXEC, SUPERLINK, SUPERNODE, FlowerContainer
from flower_federation.flower.versions import DEFAULT_VERSION, FlowerVersion

NEWEST = FlowerVersion.parse(DEFAULT_VERSION) or FlowerVersion(1, 42, 0)

_V1_20, _V1_26, _V1_32, _V1_36, _V1_38 = (
    FlowerVersion(1, 20, 0),
    FlowerVersion(1, 26, 1),
    FlowerVersion(1, 32, 1),
    FlowerVersion(1, 36, 0),
    FlowerVersion(1, 38, 0),
)
_APPIO_SSL = ("--appio-ssl-ca-certfile", "--appio-ssl-certfile", "--appio-ssl-keyfile")
# program -> flag the newest Flower rejects -> the newest version held that accepts it.
RETIRED_FLAGS: dict[str, dict[str, FlowerVersion]] = {
    SUPERLINK: {
        **dict.fromkeys(_APPIO_SSL, _V1_36),
        **dict.fromkeys(("--exec-api-address", "--executor", "--executor-config", "--executor-dir"), _V1_36),
        **dict.fromkeys(("--serverappio-api-address", "--simulationio-api-address"), _V1_32),
        "--fleet-api-num-workers": _V1_32,
        **dict.fromkeys(("--flwr-dir", "--storage-dir"), _V1_26),
        **dict.fromkeys(("--auth-superlink-private-key", "--auth-superlink-public-key"), _V1_20),
    },
    SUPERNODE: {
        **dict.fromkeys(_APPIO_SSL, _V1_36),
        **dict.fromkeys(("--grpc-adapter", "--grpc-rere"), _V1_38),
        **dict.fromkeys(("--clientappio-api-address", "--rest"), _V1_32),
        "--flwr-dir": _V1_26,
    },
    SUPEREXEC: {"--plugin-type": _V1_36, "--appio-api-address": _V1_32, "--flwr-dir": _V1_26},
}


@dataclass(frozen=True)
class CheckedVersion:
    """The version a container is checked as; `image` set when its image reference names none,
    `retired` the flags that rule out the newest."""

    version: FlowerVersion
    image: Optional[str] = None
    retired: tuple[str, ...] = ()

    def __str__(self) -> str:
        return f"Flower {self.version}"

    @property
    def note(self) -> str:
        """Why this version, when the image does not say: "" when it does."""
        if self.image is None:
            return ""
        why = f"the newest known that accepts {', '.join(self.retired)}" if self.retired else "the newest known"
        return f"no Flower version in the image reference `{self.image}`: checked as {self}, {why}"

    def at_least(self, version: FlowerVersion) -> bool:
        return self.version >= version


def checked_version(fc: FlowerContainer) -> CheckedVersion:
    if fc.version is not None:
        return CheckedVersion(fc.version)
    image = fc.container.get("image")
    shown = image if isinstance(image, str) else ("(none)" if image is None else "(not known yet)")
    retired = RETIRED_FLAGS.get(fc.program, {})
    present = tuple(sorted(f for f in retired if fc.flags.has(f)))
    if not present:
        return CheckedVersion(NEWEST, shown)
    return CheckedVersion(min(retired[f] for f in present), shown, present)
