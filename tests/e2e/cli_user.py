"""The `flwr` CLI's user: a pod of the federation's namespace labelled CLI_LABELS (which the
SuperLink's NetworkPolicy admits), whose machine has the exported `flwr` config verbatim,
the CA where it says and the register script, and who runs `flwr` with a budget per call
(CLI_TIMEOUT). A part of stack.Federation (FlwrCli, a mixin), kept apart from its rollout
and readiness."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Optional

from tests.support.flower import venv

CLI_TIMEOUT = 60
# The `flwr` user is a pod of the federation's namespace with these labels, which the
# SuperLink's NetworkPolicy admits to its Fleet and Control ports (configured sources:
# `superlink.networkPolicy.ingressPodMatchLabels`); any other pod is refused there.
CLI_LABELS = {"app.kubernetes.io/name": "flwr-cli"}


def cli_env(version: str, home: Path) -> dict[str, str]:
    """The environment of a `flwr` user with Flower `version` and home `home` (FLWR_HOME
    `home/flwr`): plain output, wide enough that tables do not wrap."""
    return {
        "PATH": f"{venv(version) / 'bin'}:/usr/local/bin:/usr/bin:/bin",
        "HOME": str(home),
        "FLWR_HOME": str(home / "flwr"),
        "LANG": "C.UTF-8",
        "NO_COLOR": "1",
        "COLUMNS": "200",
        "TERM": "dumb",
    }


def _replace(path: Path, text: str) -> None:
    """`path` holds `text`, swapped in at once (a rename), so a reader sees the old file or the new one."""
    tmp = path.with_name(f".{path.name}.new")
    tmp.write_text(text)
    os.replace(tmp, path)


class FlwrCli:
    """stack.Federation's `flwr` user. Uses the federation's cluster, outputs, version and
    cli_netns."""

    # -- the user's machine
    def _prepare_cli(self, doc: dict[str, Any]) -> None:
        """The user's machine: the exported `flwr` config verbatim, the CA where it says,
        the register script (again after a rollout: the user takes the new outputs)."""
        home = self.cluster.workdir / "cli"
        (home / "flwr").mkdir(parents=True, exist_ok=True)
        # Replaced, never rewritten in place: during a rollout (scenario 16) runs go on in another thread, and a
        # `flwr run` that read a half-written file, or a CA directory removed and made again, failed ("Failed to
        # read certificate file"), which a user whose files change under a running command never sees.
        _replace(home / "flwr" / "config.toml", self.outputs["flwrConfig"])  # verbatim
        self.connection = doc["superlink"]["default"]
        ca_path = Path(doc["superlink"][self.connection]["root-certificates"])
        ca_dir = home / "ca"
        ca_dir.mkdir(exist_ok=True)
        _replace(ca_dir / ca_path.name, self.outputs["caCertificate"])
        for other in ca_dir.iterdir():
            if other.name != ca_path.name:
                other.unlink()
        _replace(home / "register.sh", self.outputs["nodeAuth"]["registerScript"])
        self.cli_home = home
        self.cli_mounts = [{"source": str(ca_dir), "target": str(ca_path.parent), "readOnly": True}]
        self.cli_env = cli_env(self.version, home)

    def sh(self, argv: list[str], timeout: float = CLI_TIMEOUT, cwd: Optional[str] = None):
        return self.cluster.exec_in(
            self.cli_netns,
            argv,
            env=self.cli_env,
            mounts=self.cli_mounts,
            cwd=cwd or str(self.cli_home),
            timeout=timeout,
            name="cli",
        )

    def flwr(self, *args: str, timeout: float = CLI_TIMEOUT):
        return self.sh(["flwr", *args], timeout=timeout)
