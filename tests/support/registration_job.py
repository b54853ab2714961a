"""The rendered node-registration (or revocation) Job's container, runnable here against a live
SuperLink (tests/support/live_flower.py): its command and args with the Flower venv's python as the
image's `python`; the ConfigMap's files and the CA at their mount paths under a tmp root; its env with
FLWR_HOME localized; in the ConfigMap's `flwr` config only the address and the CA path rewritten.
Shared by tests/test_flower_live_registration.py and bench/node_registration.py."""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import time
import tomllib
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Optional

from flower_federation.builders import registration
from flower_federation.builders.registration import REGISTER
from tests.support.flower import venv_python
from tests.support.kube import container_command, container_env, pod_for
from tests.support.live_flower import LiveSuperLink, localize, localize_path, materialize, rewrite
from tests.support.processes import PortMap, process_env, run_bounded, send_signal
from tests.support.real_render import check_mounted

# The Job's deadline (rendered: 540 s), shortened: a ready SuperLink needs one attempt.
TIMEOUT_SECONDS = 20
FORKSERVER = Path(__file__).with_name("job_forkserver.py")


class ForkServer:
    """tests/support/job_forkserver.py in a Flower venv: the Job's script run in a forked child of a
    process that imported flwr once (the cost of a run is the script, not the interpreter and flwr)."""

    def __init__(self, python: Path, env: dict[str, str], cwd: Path):
        self.proc = subprocess.Popen(
            [str(python), str(FORKSERVER)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env, cwd=cwd
        )
        self._pending = b""  # read from the server's stdout, not yet a whole line

    def _reply(self, timeout: Optional[float] = None) -> dict[str, int]:
        """The server's next line, or {} if none came within `timeout`. Read from the pipe's descriptor with a
        buffer of our own: select() on the buffered file object waited out the timeout while the `rc` line sat
        in that object's buffer, read with the `pid` line when the child ended at once (seen in CI as a job that
        printed everything, then "timed out")."""
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        deadline = None if timeout is None else time.monotonic() + timeout
        while b"\n" not in self._pending:
            wait = None if deadline is None else max(0.0, deadline - time.monotonic())
            if not select.select([fd], [], [], wait)[0]:
                return {}
            chunk = os.read(fd, 65536)
            assert chunk, f"the fork server exited ({self.proc.poll()})"
            self._pending += chunk
        line, self._pending = self._pending.split(b"\n", 1)
        reply: dict[str, int] = json.loads(line)
        return reply

    def run(self, argv: list[str], env: dict[str, str], cwd: Path, timeout: float) -> subprocess.CompletedProcess[str]:
        out, err = cwd / "forked.stdout", cwd / "forked.stderr"
        assert self.proc.stdin is not None
        req = {"argv": argv, "env": env, "cwd": str(cwd), "stdout": str(out), "stderr": str(err)}
        self.proc.stdin.write(json.dumps(req) + "\n")
        self.proc.stdin.flush()
        pid = self._reply()["pid"]
        reply = self._reply(timeout)
        if not reply:  # as run_bounded: the whole process group killed, then a failure
            send_signal(pid, signal.SIGKILL, group=True)
            self._reply()
            raise AssertionError(f"{argv} timed out after {timeout}s:\n{out.read_text()}\n{err.read_text()}")
        return subprocess.CompletedProcess(argv, reply["rc"], out.read_text(), err.read_text())

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=30)


# What a run may take beyond the script's own deadline, which starts once it runs: the interpreter's start and
# Flower's import come first, and on a loaded two-core CI machine (e2e lanes beside it) they took over 30 s (CI of
# 6617a47: the wrong-CA Job printed its FAILED line, then was cut at 12 + 30 s). Only a hang reaches this bound.
START_MARGIN_SECONDS = 120


@dataclass
class JobPod:
    """The registration Job's container, runnable here."""

    root: Path
    argv: list[str]
    env: dict[str, str]
    keys_file: Path  # the materialized trusted-keys file
    # Set by `forked()`: runs go through a fork server instead of a new `python` each.
    server: Optional[ForkServer] = field(default=None, repr=False)

    def run(self, timeout_seconds: float = TIMEOUT_SECONDS, **env: str) -> subprocess.CompletedProcess[str]:
        env = {**self.env, "REGISTRATION_TIMEOUT_SECONDS": str(timeout_seconds), **env}
        bound = timeout_seconds + START_MARGIN_SECONDS
        if self.server is not None:
            return self.server.run(self.argv, env, Path(self.env["HOME"]), bound)
        return run_bounded(self.argv, env, timeout=bound, cwd=Path(self.env["HOME"]))

    def forked(self) -> JobPod:
        """The same container, its runs forked from a process that imported flwr once (ForkServer): for
        tests that run the Job many times once its real command line is proven (the caller closes it)."""
        return replace(self, server=ForkServer(Path(self.argv[0]), self.env, Path(self.env["HOME"])))

    def trust(self, lines: list[str]) -> None:
        """What a new key set does to the ConfigMap's trusted-keys file."""
        rewrite(self.keys_file, "".join(f"{line}\n" for line in lines))

    def sharded(self, lines: list[str]) -> JobPod:
        """The same container as a hub's sharded Job runs it (builders/registration.py, `keys_sharded`):
        the trusted set (sorted, as the shell writes it) split by `shard_texts` into SHARDS files
        `trusted-keys-NN` beside the script (one projected volume), all of them in its args in place of
        the one keys file."""
        keys = str(self.keys_file)
        assert self.argv.count(keys) == 1, self.argv
        shards = []
        text = "".join(f"{line}\n" for line in sorted(set(lines)))
        for i, shard in enumerate(registration.shard_texts(text)):
            shards.append(self.keys_file.parent / registration.shard_file(i))
            shards[-1].write_text(shard)
            shards[-1].chmod(0o444)
        at = self.argv.index(keys)
        return replace(self, argv=[*self.argv[:at], *map(str, shards), *self.argv[at + 1 :]])


def job_pod(live: LiveSuperLink, label: str, ca_text: Optional[str] = None, phase: str = REGISTER) -> JobPod:
    """The rendered registration (or revocation) Job's container under `live.workdir/label`:
    its files materialized, its `flwr` config dialing the live SuperLink through the
    mounted CA (or, for the negative control, a CA file holding `ca_text`)."""
    r = live.r
    registration_job, revocation = (w for w in r.workloads() if w["kind"] == "Job")
    assert registration_job["metadata"]["name"] == r.outputs["nodeAuth"]["registrationJob"]
    job = registration_job if phase == REGISTER else revocation
    (c,) = job["spec"]["template"]["spec"]["containers"]
    pod = pod_for(job)
    root = live.workdir / label
    files = materialize(r, job, c, root)

    argv = container_command(c, pod, entrypoint=[], lookup=r.data)
    assert argv[0] == "python", argv  # the SuperLink image's python
    script, connection, config, keys, job_phase = argv[1:]
    assert job_phase == phase, argv
    # The ConfigMap bound to its content (builders/registration.bound_name), as the Job mounts it.
    (cm,) = [v["configMap"]["name"] for v in job["spec"]["template"]["spec"]["volumes"] if "configMap" in v]
    assert cm.startswith(f"{r.plan.names.node_registration}-"), cm
    check_mounted(r, files, script, "ConfigMap", cm, "register_nodes.py")
    check_mounted(r, files, config, "ConfigMap", cm, "config.toml")
    check_mounted(r, files, keys, "ConfigMap", cm, "trusted-keys")

    rendered = r.data("ConfigMap", cm)["config.toml"]
    doc = tomllib.loads(rendered)
    assert doc["superlink"]["default"] == connection
    ca = doc["superlink"][connection]["root-certificates"]
    check_mounted(r, files, ca, "Secret", r.plan.trust.ca_secret, "ca.crt")
    ca_local = Path(localize_path(ca, c, root))
    if ca_text is not None:
        rewrite(ca_local, ca_text)
    rewrite(Path(localize_path(config, c, root)), live.localize_connection(rendered, ca_local))

    env = process_env(live.version, root / "app")
    rendered_env = container_env(c, pod, r.data)
    assert set(rendered_env) == {"FLWR_TELEMETRY_ENABLED", "FLWR_HOME", "REGISTRATION_TIMEOUT_SECONDS"}, rendered_env
    env.update({k: localize_path(v, c, root) for k, v in rendered_env.items()})
    assert env["FLWR_HOME"].startswith(f"{root}/"), env["FLWR_HOME"]
    argv = [str(venv_python(live.version)), *localize(argv[1:], c, root, PortMap())]
    return JobPod(root, argv, env, Path(localize_path(keys, c, root)))
