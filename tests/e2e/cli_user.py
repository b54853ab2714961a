"""The `flwr` CLI's user: a pod of the federation's namespace labelled CLI_LABELS (which the
SuperLink's NetworkPolicy admits), whose machine has the exported `flwr` config verbatim,
the CA where it says and the register script, and who runs `flwr` with a budget per call
(CLI_TIMEOUT). A part of stack.Federation (FlwrCli, a mixin), kept apart from its rollout
and readiness."""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
from pathlib import Path
from typing import Any, Optional

from tests.e2e.harness.host import children, kill
from tests.support.flower import venv

SHIM = Path(__file__).resolve().parents[1] / "support" / "flwr_shim.py"
FORKSERVER = SHIM.with_name("flwr_forkserver.py")

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
    cli_netns. With `warm` (the default), `flwr` on the user's PATH is the warm CLI
    (tests/support/flwr_forkserver.py): Flower's own CLI entry point imported once, each call
    run in a child forked from it, with the call's argv, environment and descriptors."""

    warm = True
    _warm: Optional[tuple[tuple[Any, ...], subprocess.Popen]] = None

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
        mounts = [{"source": str(ca_dir), "target": str(ca_path.parent), "readOnly": True}]
        env = cli_env(self.version, home)
        if self.warm:
            env["PATH"] = f"{home / 'bin'}:{env['PATH']}"
            self._start_warm_cli(home, mounts, env)
        # Assigned whole, last: a `flwr` call in another thread (scenario 16's runs during a rollout) sees the old
        # user's machine or the new one, never the real `flwr` first on a warm user's PATH.
        self.cli_home, self.cli_mounts, self.cli_env = home, mounts, env

    def _start_warm_cli(self, home: Path, mounts: list[dict[str, Any]], env: dict[str, str]) -> None:
        """The warm `flwr` for this version and these mounts (a new one after a version change: the user
        upgraded `flwr`; the old one ends once its calls have), and the shim that calls it, first on PATH."""
        key = (self.version, tuple(sorted((m["source"], m["target"]) for m in mounts)))
        if self._warm is not None and self._warm[0] == key:
            return
        if self._warm is not None:
            for server in children(self._warm[1].pid):  # unshare's child: the server, PID 1 of its namespace
                kill(server, signal.SIGTERM)
        address = f"flwr-{self.cli_netns}-{secrets.token_hex(4)}"
        python = venv(self.version) / "bin" / "python"
        proc = self.cluster.start_in(
            self.cli_netns,
            [str(python), "-I", str(FORKSERVER), address, "flwr.cli.app:app"],
            self.cluster.logdir / f"warm-flwr-{self.version}.log",  # kept with the containers' (E2E_KEEP_LOGS)
            env=env,
            mounts=mounts,
            cwd=str(home),
            name="warm-flwr",
        )
        self._warm = (key, proc)
        shim = SHIM.read_text().replace('ADDRESS = ""', f"ADDRESS = {address!r}", 1)
        assert address in shim, "the shim's ADDRESS line changed: tests/support/flwr_shim.py"
        bindir = home / "bin"
        bindir.mkdir(exist_ok=True)
        tmp = bindir / ".flwr.new"
        tmp.write_text(f"#!{python} -IS\n{shim}")
        tmp.chmod(0o755)
        os.replace(tmp, bindir / "flwr")

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
