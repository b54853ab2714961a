"""The host the harness runs on: whether it can run at all, running its tools, and
signalling processes. Everything the harness creates carries ID_PREFIX in its name."""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Optional

ID_PREFIX = "fe2e"  # every namespace, veth and directory we create starts with it
HERE = Path(__file__).resolve().parents[1]  # tests/e2e: the scripts run inside namespaces
PODINIT = HERE / "podinit.py"
PROBER = HERE / "prober.py"


class HarnessError(Exception):
    """The harness cannot run what it was given (an unsupported field, a broken object)."""


class NotReady(AssertionError):
    """Something did not become ready within its bounded wait."""


def skip_reason() -> Optional[str]:
    """Why the e2e tests cannot run here, or None."""
    if sys.platform != "linux":
        return "e2e tests need Linux network namespaces"
    if os.geteuid() != 0:
        return "e2e tests need root (network and mount namespaces, setpriv); CI runs them as root"
    for tool in ("ip", "unshare", "setpriv", "mount"):
        if shutil.which(tool) is None:
            return f"e2e tests need `{tool}` on PATH"
    probe = f"{ID_PREFIX}-check-{secrets.token_hex(3)}"
    res = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True, timeout=10)
    if res.returncode != 0:
        return f"`ip netns add` does not work here: {res.stderr.strip()}"
    subprocess.run(["ip", "netns", "del", probe], capture_output=True, timeout=10)
    return None


def run_cmd(argv: list[str], check: bool = True, timeout: float = 20) -> subprocess.CompletedProcess:
    res = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    if check and res.returncode != 0:
        raise HarnessError(f"{' '.join(argv)} failed ({res.returncode}): {res.stderr.strip()}")
    return res


def kill(pid: Optional[int], sig: int = signal.SIGKILL) -> None:
    if not pid:
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, sig)


def children(pid: int) -> list[int]:
    try:
        return [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def ns_exec(netns: str, spec_file: Path) -> list[str]:
    """The command that runs podinit.py with `spec_file` in network namespace `netns`,
    in new PID (it is PID 1), mount and UTS namespaces."""
    return [
        "ip",
        "netns",
        "exec",
        netns,
        "unshare",
        "--pid",
        "--fork",
        "--kill-child",
        "--mount-proc",
        "--uts",
        sys.executable,
        str(PODINIT),
        str(spec_file),
    ]
