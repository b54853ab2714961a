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
import json
import os
import runpy
import sys
from typing import Any

# What flower_federation/flower/scripts/register_nodes.py imports (both eras' Control API clients).
PRELOAD = (
    "cryptography.hazmat.primitives.serialization",
    "flwr.supercore.primitives.asymmetric",
    "flwr.cli.flower_config",
    "flwr.cli.utils",
    "flwr.proto.control_pb2",
    "flwr.proto.control_pb2_grpc",
)


def _child(req: dict[str, Any]) -> None:
    """Become `python SCRIPT ARGS...` and never return."""
    code = 1
    try:
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
        code = 0
    except SystemExit as exit_:
        code = exit_.code if isinstance(exit_.code, int) else (0 if exit_.code is None else 1)
    except BaseException:  # noqa: BLE001 - a traceback, as python prints it, and exit 1
        import traceback

        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


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
