"""A warm `flwr`: the real Flower CLI's entry point (the `flwr` console script's target, `flwr.cli.app:app`),
imported once by a Flower venv's python, each call run in a child forked from it. The e2e's `flwr` user
(tests/e2e/cli_user.py) calls it through tests/support/flwr_shim.py, installed as `flwr` first on its PATH: the
shim hands over its argv, environment, working directory and its own stdin, stdout and stderr (SCM_RIGHTS), and
exits with the child's exit code. Only the interpreter's start and Flower's import (about 1.2-1.7 CPU-s a call,
the e2e's largest single cost after Flower's own processes: CONTRIBUTING.md, CI time) are shared; what runs is
Flower's code with the user's command line. One federation per version calls the real executable instead
(tests/e2e/lanes.py: the `process` federation, on every version), so the console script itself stays proven.

Protocol on an abstract unix socket (SOCK_SEQPACKET: one message each, whole): the client sends one JSON
request {"argv", "env", "cwd"} with three descriptors (its stdin, stdout, stderr); the server answers {"pid"}
once forked, then {"rc"} (os.waitstatus_to_exitcode) when the child ended. A client that goes away first (its
`flwr` killed at its timeout) has its child's process group killed. SIGTERM: no new calls; the server exits
once its children have ended (a version change starts another server beside it).

Standard library only, one thread of its own (children are forked from a process whose threads hold no lock: numpy's
OpenBLAS, which Flower imports, is kept to the calling thread): it runs in the Flower venv as
`python -I flwr_forkserver.py ADDRESS ENTRY`; "ready" on stdout once it listens.
"""

from __future__ import annotations

import atexit
import contextlib
import importlib
import json
import os
import re
import select
import signal
import socket
import sys
import threading
import traceback
from collections.abc import Callable
from typing import Any, NoReturn


def exit_as_python(body: Callable[[], object]) -> NoReturn:
    """Run `body` in a forked child and end the process as `python` would end it after the same code: a
    SystemExit's code (a string printed to stderr, exit 1), an uncaught exception's traceback and exit 1 (a
    KeyboardInterrupt's: the end by SIGINT); then
    what the interpreter's own exit does, which `os._exit` alone skips: non-daemon threads joined (Flower's CLI
    starts one to check for updates), atexit handlers run, stdout and stderr flushed (exit 120 if that fails).
    tests/support/job_forkserver.py ends its children here too."""
    code = 1
    interrupted = False
    try:
        result = body()
        code = result if isinstance(result, int) else 0
    except SystemExit as exit_:
        code = exit_.code if isinstance(exit_.code, int) else (0 if exit_.code is None else 1)
        if exit_.code is not None and not isinstance(exit_.code, int):
            print(exit_.code, file=sys.stderr)
    except KeyboardInterrupt:  # a traceback, then python ends by SIGINT itself (a shell sees 130, as for Ctrl-C)
        traceback.print_exc()
        interrupted = True
    except BaseException:  # noqa: BLE001 - a traceback, as python prints it, and exit 1
        traceback.print_exc()
    finally:
        with contextlib.suppress(BaseException):
            threading._shutdown()  # type: ignore[attr-defined]  # what Py_Finalize calls first
        with contextlib.suppress(BaseException):
            atexit._run_exitfuncs()
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        except BaseException:  # noqa: BLE001 - as python: exit 120 when its streams cannot be flushed
            code = 120
        if interrupted:
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGINT)
        os._exit(code)


def _child(entry: Any, req: dict[str, Any], fds: list[int]) -> NoReturn:
    """Become `flwr ARGS...` as the console script runs it, and never return."""

    def become() -> object:
        os.setpgid(0, 0)  # its own process group, killed whole when its client goes away
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
            os.close(fd)
        os.chdir(req["cwd"])
        os.environ.clear()
        os.environ.update(req["env"])
        sys.argv = list(req["argv"])
        sys.argv[0] = re.sub(r"(-script\.pyw|\.exe)?$", "", sys.argv[0])  # as the console script does
        return entry()

    exit_as_python(become)


def _load(spec: str) -> Any:
    module, _, attr = spec.partition(":")
    return getattr(importlib.import_module(module), attr)


def serve(address: bytes, entry: Any) -> None:
    listening = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    listening.bind(address)
    listening.listen(64)
    listener: socket.socket | None = listening
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)  # only to wake select() through the wakeup fd
    stopping = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))
    clients: dict[int, socket.socket] = {}  # child pid -> its client's connection
    killed: set[int] = set()  # children whose client went away, killed, not yet reaped
    print("ready", flush=True)
    while listener is not None or clients:
        if stopping and listener is not None:
            listener.close()
            listener = None
            if not clients:  # nothing left to wait for: no SIGCHLD would wake select() again
                break
        watched: list[Any] = [wake_r, *(c for pid, c in clients.items() if pid not in killed)]
        if listener is not None:
            watched.append(listener)
        readable = select.select(watched, [], [])[0]  # retried on signals (PEP 475); SIGTERM's shows at the top
        if listener is not None and listener in readable:
            _accept(listener, entry, clients, wake_r)
        for pid, conn in clients.items():
            if conn in readable and pid not in killed:  # a client sends nothing more: readable means it went away
                with contextlib.suppress(OSError):
                    os.killpg(pid, signal.SIGKILL)
                killed.add(pid)
        if wake_r in readable:
            with contextlib.suppress(BlockingIOError):
                os.read(wake_r, 4096)
        while True:  # every child that ended, the orphans it left (reparented to this PID 1) too
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            killed.discard(pid)
            conn = clients.pop(pid, None)  # None: an orphan of a call's child (this is PID 1 of its namespace)
            if conn is None:
                continue
            with contextlib.suppress(OSError):
                conn.send(json.dumps({"rc": os.waitstatus_to_exitcode(status)}).encode())
            conn.close()


def _accept(listener: socket.socket, entry: Any, clients: dict[int, socket.socket], wake_r: int) -> None:
    """One call: its request and descriptors read, a child forked to run it."""
    conn, _ = listener.accept()
    msg, fds, _, _ = socket.recv_fds(conn, 1 << 20, 3)
    if len(fds) != 3 or not msg:  # not a client of ours, or one that went away at once
        for fd in fds:
            os.close(fd)
        conn.close()
        return
    req = json.loads(msg)
    pid = os.fork()
    if pid == 0:
        listener.close()
        for other in clients.values():
            other.close()
        conn.close()
        os.close(wake_r)
        signal.set_wakeup_fd(-1)
        for sig in (signal.SIGCHLD, signal.SIGTERM):
            signal.signal(sig, signal.SIG_DFL)
        _child(entry, req, fds)
    with contextlib.suppress(OSError):  # as the child does too: whichever runs first
        os.setpgid(pid, pid)
    for fd in fds:
        os.close(fd)
    clients[pid] = conn
    with contextlib.suppress(OSError):
        conn.send(json.dumps({"pid": pid}).encode())


def main() -> None:
    address, spec = sys.argv[1], sys.argv[2]
    # Before Flower's import: OpenBLAS would start worker threads, which a fork copies without their state. The
    # children run with the caller's environment, not this one.
    os.environ["OPENBLAS_NUM_THREADS"] = "1"
    entry = _load(spec)
    serve(b"\0" + address.encode(), entry)


if __name__ == "__main__":
    main()
