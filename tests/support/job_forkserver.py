"""A fork server for the registration Job's script, run by a real-Flower venv's python
(tests/support/registration_job.py `JobPod.forked`): it imports what the script imports once, then
runs each request in a forked child, as `python SCRIPT ARGS...` would run it: the script's own file read
anew (runpy), its directory first on sys.path, its argv, env and cwd, stdout and stderr to the files
named, its exit code. Only the interpreter's start and flwr's import (about 1 CPU-s a run) are shared;
the Job's real command line is run as a subprocess by tests/test_flower_live_registration.py.

Protocol, one JSON line each way: {"argv", "env", "cwd", "stdout", "stderr"} -> {"pid"}, then {"rc"}.
Standard library only: it runs in the Flower venv."""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import runpy
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

# What flower_federation/flower/scripts/register_nodes.py imports (both eras' Control API clients).
PRELOAD = (
    "cryptography.hazmat.primitives.serialization",
    "flwr.supercore.primitives.asymmetric",
    "flwr.cli.flower_config",
    "flwr.cli.utils",
    "flwr.proto.control_pb2",
    "flwr.proto.control_pb2_grpc",
)


def _exit_as_python() -> Callable[[Callable[[], object]], NoReturn]:
    """flwr_forkserver.exit_as_python, loaded by its path: this script's directory is not put on sys.path for
    an import (its children's scripts get it), and the shared ending must not drift."""
    spec = importlib.util.spec_from_file_location("flwr_forkserver", Path(__file__).with_name("flwr_forkserver.py"))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    ending: Callable[[Callable[[], object]], NoReturn] = module.exit_as_python
    return ending


EXIT_AS_PYTHON = _exit_as_python()


def _child(req: dict[str, Any]) -> NoReturn:
    """Become `python SCRIPT ARGS...` and never return."""

    def become() -> object:
        os.setsid()  # its own process group, killed whole on a timeout, as run_bounded does
        os.chdir(req["cwd"])
        os.environ.clear()
        os.environ.update(req["env"])
        for fd, path in ((1, req["stdout"]), (2, req["stderr"])):
            out = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            os.dup2(out, fd)
            os.close(out)
        sys.stdin.close()
        script = req["argv"][1]
        sys.argv = req["argv"][1:]
        sys.path[0] = os.path.dirname(os.path.abspath(script))
        runpy.run_path(script, run_name="__main__")
        return 0

    EXIT_AS_PYTHON(become)


def main() -> None:
    for module in PRELOAD:
        # An era without one: the script falls back the same way.
        with contextlib.suppress(ImportError):
            __import__(module)
    for line in sys.stdin:
        req = json.loads(line)
        pid = os.fork()
        if pid == 0:
            _child(req)
        print(json.dumps({"pid": pid}), flush=True)
        _, status = os.waitpid(pid, 0)
        print(json.dumps({"rc": os.waitstatus_to_exitcode(status)}), flush=True)


if __name__ == "__main__":
    main()
