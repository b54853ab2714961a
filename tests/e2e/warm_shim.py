"""A Flower console script (`flower-superexec`, `flwr-clientapp`, ...) in a warm cluster's container
(harness/warm.py): bound over the venv's script of that name in the container, so a process that starts the
program (Flower's SuperNode its SuperExec, a SuperExec its ClientApps) runs this with the same command line. It
asks the warm Flower (warm_flower.py, ADDRESS) to run the program in this container as a fork of a process that
imported Flower once: with this process's namespaces, user, groups, no_new_privs, capabilities, niceness,
working directory, stdin/stdout/stderr, environment and argv. Then it waits, and ends as the program ended.

Refused (an environment Flower was not imported with, a root caller), or with no server, it runs the program
itself, as the console script does (TARGET): never a failure the real script would not have. Filled in and
installed by harness/warm.py; `#!` the venv's python, like the script it stands for.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import sys

ADDRESS = ""  # the warm Flower's socket, filled in when installed
TARGET = ""  # the console script's `module:attr`, filled in when installed
NAMESPACES = ("uts", "ipc", "net", "pid", "mnt")  # as warm_flower.py joins them


def _cold() -> int:
    from importlib import import_module

    module, _, attr = TARGET.partition(":")
    result = getattr(import_module(module), attr)()
    return result if isinstance(result, int) else 0


def _warm() -> int | None:
    """The program's exit code as a shell reports it (a signal's: the process ends by it below), or None when
    the server did not take the call."""
    try:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        sock.connect(ADDRESS)
    except OSError:
        return None
    with sock:
        fds = [0, 1, 2, os.open(".", os.O_PATH | os.O_DIRECTORY)]
        fds += [os.open(f"/proc/self/ns/{name}", os.O_RDONLY) for name in NAMESPACES]
        request = {"kind": "join", "script": sys.argv[0], "argv": sys.argv, "env": dict(os.environ)}
        socket.send_fds(sock, [json.dumps(request).encode()], fds)
        for fd in fds[3:]:
            os.close(fd)
        first = json.loads(sock.recv(4096) or b"{}")
        if "pid" not in first:
            return None
        msg = sock.recv(4096)
    # The program's end unknown (its server went away): as if it was killed.
    return int(json.loads(msg)["rc"]) if msg else -signal.SIGKILL


def main() -> None:
    rc = _warm()
    if rc is None:
        sys.exit(_cold())
    if rc < 0:  # killed by a signal: so is this process, as the caller would see the program end
        signal.signal(-rc, signal.SIG_DFL)
        os.kill(os.getpid(), -rc)
    sys.exit(rc)


if __name__ == "__main__":
    main()
