"""`flwr` for the e2e's CLI user: hands this call (argv, environment, working directory, and this process's
stdin, stdout and stderr) to a warm Flower CLI (tests/support/flwr_forkserver.py) and exits with its exit code.
Installed by tests/e2e/cli_user.py as an executable `flwr` first on the user's PATH, with the server's address
filled in (ADDRESS below) and `#!<the Flower venv's python> -IS` as its first line: it starts in milliseconds, and
the real `flwr` it replaces runs in the server's child.

If the server is not listening yet (it imports Flower while the federation starts), the call waits for it up to
CONNECT_SECONDS; a server that never comes, or goes away mid-call, is an error naming it (exit 1), never a silent
fallback. Killed (its caller's timeout), this process's connection closes and the server kills the call's child.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import time

ADDRESS = ""  # the server's abstract socket name, filled in when installed
# The server's start (an interpreter and Flower's import on a loaded machine), below the e2e's budget for a call
# (tests/e2e/cli_user.py CLI_TIMEOUT, 60 s), so a server that never came is named, not a generic timeout.
CONNECT_SECONDS = 30.0


def _connect(address: str) -> socket.socket:
    deadline = time.monotonic() + CONNECT_SECONDS
    while True:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            sock.connect(b"\0" + address.encode())
            return sock
        except (ConnectionRefusedError, FileNotFoundError):
            sock.close()
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def call(address: str, argv: list[str], env: dict[str, str], cwd: str, fds: tuple[int, int, int]) -> int:
    """Runs `argv` in the warm CLI at `address` with `fds` as its stdin, stdout and stderr; its exit code (a
    signal's as a shell reports it, 128 + the number)."""
    with _connect(address) as sock:
        socket.send_fds(sock, [json.dumps({"argv": argv, "env": env, "cwd": cwd}).encode()], list(fds))
        replies = []
        while len(replies) < 2:
            msg = sock.recv(4096)
            if not msg:
                raise ConnectionError(f"the warm flwr at @{address} went away mid-call (replies: {replies})")
            replies.append(json.loads(msg))
    rc = int(replies[1]["rc"])
    return 128 - rc if rc < 0 else rc


def main() -> None:
    try:
        rc = call(ADDRESS, ["flwr", *sys.argv[1:]], dict(os.environ), os.getcwd(), (0, 1, 2))
    except OSError as exc:
        print(f"flwr (warm, tests/support/flwr_shim.py), server @{ADDRESS}: {exc}", file=sys.stderr)
        rc = 1
    sys.exit(rc)


if __name__ == "__main__":
    main()
