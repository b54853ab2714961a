"""Client for tests/support/flower_worker.py running in a real-Flower venv."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

from flower_federation.flower.versions import DEFAULT_VERSION, FlowerVersion
from tests.support.paths import ROOT

WORKER = Path(__file__).with_name("flower_worker.py")
REQUIREMENTS = ROOT / "requirements-flwr.txt"


def _tested() -> tuple[str, ...]:
    """The Flower versions of requirements-flwr.txt, in its order: `flwr==X` (a release) and
    `flwr-nightly==X.devN` (Flower's nightly of the next release) lines, one venv each (the Makefile)."""
    lines = REQUIREMENTS.read_text(encoding="utf-8").splitlines()
    return tuple(m[2] for line in lines if (m := re.fullmatch(r"(flwr|flwr-nightly)==(\S+)", line.strip())))


# `make test-canary` (tests/support/canary.py): the newest flwr and flwr-nightly the registry serves, each in a venv of
# its own, named in this variable (space-separated paths); their versions are tested beside requirements-flwr.txt's.
CANARY_VENVS = "FLOWER_CANARY_VENVS"


def _canary() -> dict[str, Path]:
    """{version: venv} of the canary's venvs, the version read off the installed distribution's metadata directory."""
    out = {}
    for path in os.environ.get(CANARY_VENVS, "").split():
        for info in Path(path).glob("lib/python*/site-packages/flwr*.dist-info"):
            m = re.fullmatch(r"flwr(?:_nightly)?-(.+)\.dist-info", info.name)
            if m:
                out[m[1]] = Path(path)
    return out


CANARY = _canary()

# Real Flowers (see requirements-flwr.txt): one per dialect, the HTTP era's the default version (the newest
# release, the e2e's); the HTTP-era release before it, whose parsers are checked too and from which upgrades
# start; and the next Flower, the nightly until its release is served (then its `flwr==` line replaces the
# nightly's: nothing here changes).
GRPC_ERA = "1.26.1"
HTTP_ERA = DEFAULT_VERSION
PREVIOUS_HTTP_ERA = "1.41.0"
REAL_FLOWERS = _tested() + tuple(v for v in CANARY if v not in _tested())
NEXT = max(REAL_FLOWERS, key=lambda v: FlowerVersion.parse(v) or FlowerVersion(0, 0, 0))
assert {GRPC_ERA, PREVIOUS_HTTP_ERA, HTTP_ERA} <= set(REAL_FLOWERS), f"{REQUIREMENTS} lacks a version named here"
# The skew window's pairings the e2e runs (tests/e2e/site_skew.py), in the order a consortium reaches them on one hub
# rolled on live state: (scenario id, the hub's Flower, its two sites' Flowers). docs/operations.md names them.
SKEW_PAIRINGS = (
    ("6s", PREVIOUS_HTTP_ERA, (PREVIOUS_HTTP_ERA, HTTP_ERA)),  # a site a minor ahead of its hub
    ("6s", HTTP_ERA, (PREVIOUS_HTTP_ERA, HTTP_ERA)),  # a site a minor behind
    ("6n", NEXT, (HTTP_ERA, HTTP_ERA)),  # the next Flower's hub: its Fleet source check (403, error 2011)
)


# The Flower program each managed container runs (its image's entrypoint).
PROGRAMS = {
    "superlink": "flower-superlink",
    "supernode": "flower-supernode",
    "superexec-serverapp": "flower-superexec",
    "superexec-clientapp": "flower-superexec",
}


def venv(version: str) -> Path:
    """The venv holding real Flower `version` (made by `make test`; a canary's by `make test-canary`)."""
    return CANARY.get(version) or ROOT / f".venv-flwr-{version}"


def venv_bin(version: str) -> Path:
    return venv(version) / "bin"


def venv_python(version: str) -> Path:
    return venv_bin(version) / "python"


class FlowerError(Exception):
    pass


class Flower:
    """A long-lived worker process, so each parse costs a round trip, not an import."""

    def __init__(self, version: str):
        python = venv_python(version)
        if not python.exists():
            raise RuntimeError(
                f"{python} missing: run `make test`, which installs Flower {version} ({REQUIREMENTS.name})"
            )
        self.version = version
        self.proc = subprocess.Popen(
            [str(python), str(WORKER)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            cwd=str(ROOT),
        )
        installed = self._call({"op": "version"})
        if installed != version:
            raise RuntimeError(f"venv has flwr {installed}, expected {version}")

    def _call(self, req: dict[str, Any]) -> Any:
        assert self.proc.stdin and self.proc.stdout
        self.proc.stdin.write(json.dumps(req) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError("flower worker died")
        reply = json.loads(line)
        if not reply["ok"]:
            raise FlowerError(reply["error"])
        return reply["result"]

    def parse(self, program: str, args: list[str]) -> dict[str, Any]:
        return self._call({"op": "parse", "program": program, "args": args})

    def node_config(self, value: str) -> dict[str, Any]:
        return self._call({"op": "node_config", "value": value})

    def connection(self, toml_text: str) -> dict[str, Any]:
        return self._call({"op": "connection", "toml": toml_text})

    def executor_config(self, yaml_text: str, executor: str = "kubernetes") -> dict[str, Any]:
        """The Kubernetes executor config Flower builds from this executor.yaml text."""
        return self._call({"op": "executor_config", "yaml": yaml_text, "executor": executor})

    def grpc_health(self, address: str, timeout: float = 5) -> str:
        """grpc.health.v1 status at `address` (e.g. "SERVING"), as a kubelet grpc probe sees it."""
        return self._call({"op": "grpc_health", "address": address, "timeout": timeout})

    def close(self) -> None:
        if self.proc.stdin:
            self.proc.stdin.close()
        self.proc.wait(timeout=30)
