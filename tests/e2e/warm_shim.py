"""A Flower console script (`flower-superexec`, `flwr-clientapp`, `flwr-serverapp`) in a warm cluster's
container (harness/warm.py): bound over the venv's script of that name in the container, so a process that starts
the program (Flower's SuperNode its SuperExec, a SuperExec its ClientApps) runs this with the same command line.
It asks the warm Flower (warm_flower.py, ADDRESS) to run the program in this container as a fork of a process that
imported Flower once: with this process's namespaces, user, groups, no_new_privs, capabilities, niceness,
working directory, stdin/stdout/stderr, environment and argv. Then it waits, passing on the signals a process can
catch (SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGTSTP, SIGCONT: Flower's SuperLink terminates its
SuperExec so), and ends as the program ended (a signal's end by that signal). Killed itself (SIGKILL, or the
container's end), its connection closes and the server kills the program.

Refused (an environment Flower was not imported with, a root caller), with no server, or with no answer within
ANSWER_SECONDS, it runs the program itself, as the console script does (TARGET): the program never runs twice (the
server lets it start only after its answer was taken) and never fails where the real script would not. Filled in
and installed by harness/warm.py; `#!` the venv's python, like the script it stands for.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import sys

ADDRESS = ""  # the warm Flower's socket, filled in when installed
TARGET = ""  # the console script's `module:attr`, filled in when installed
NAMESPACES = ("uts", "ipc", "net", "pid", "mnt")  # as warm_flower.py joins them
PASSED_ON = ("SIGTERM", "SIGINT", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2", "SIGTSTP", "SIGCONT")
# The server's answer (a fork and a few setns) on a loaded machine; past it the program runs here.
ANSWER_SECONDS = 60.0


def _cold() -> None:
    from importlib import import_module

    module, _, attr = TARGET.partition(":")
    sys.exit(getattr(import_module(module), attr)())


def _warm() -> int | None:
    """The program's exit code (negative: the signal that ended it), or None when the server did not take it."""
    try:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        sock.connect(ADDRESS)
    except OSError:
        return None
    with sock:
        fds = [0, 1, 2]
        request = {"kind": "join", "script": sys.argv[0], "argv": sys.argv, "env": dict(os.environ)}
        try:
            fds.append(os.open(".", os.O_PATH | os.O_DIRECTORY))
            fds += [os.open(f"/proc/self/ns/{name}", os.O_RDONLY) for name in NAMESPACES]
            socket.send_fds(sock, [json.dumps(request).encode()], fds)
        except OSError:
            return None
        finally:
            for fd in fds[3:]:
                os.close(fd)
        sock.settimeout(ANSWER_SECONDS)
        try:
            first = json.loads(sock.recv(4096) or b"{}")
        except (OSError, ValueError):
            return None  # closing the connection before the go: the server kills what it forked, unrun
        if "pid" not in first:
            return None
        sock.settimeout(None)
        program = int(first["nspid"])

        def pass_on(sig: int, _frame: object) -> None:
            with contextlib.suppress(ProcessLookupError):  # it has just ended: its exit code follows
                os.kill(program, sig)

        if program:
            for name in PASSED_ON:
                signal.signal(getattr(signal, name), pass_on)
        while True:
            try:
                msg = sock.recv(4096)
                break
            except InterruptedError:  # a signal passed on: keep waiting for the end
                continue
    answer = json.loads(msg) if msg else {}
    # No exit code (the server's child failed after the start, or went away): as if the program was killed.
    return int(answer["rc"]) if "rc" in answer else -signal.SIGKILL


def main() -> None:
    rc = _warm()
    if rc is None:
        _cold()
    elif rc < 0:  # killed by a signal: so is this process, as the caller would see the program end
        if -rc not in (signal.SIGKILL, signal.SIGSTOP):  # the two that cannot be caught have no handler to reset
            signal.signal(-rc, signal.SIG_DFL)
        os.kill(os.getpid(), -rc)
    sys.exit(rc)


if __name__ == "__main__":
    main()
