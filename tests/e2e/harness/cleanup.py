"""Every cluster (and WAN) this process made, and their end: closed at interpreter exit and
on SIGTERM/SIGHUP as well as by the fixtures, and the leftover check (anything of theirs
that still exists). Apart from the Cluster itself (cluster.py), which registers here."""

from __future__ import annotations

import atexit
import os
import signal
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tests.e2e.harness.network import NETNS_INODES, our_netns
from tests.e2e.harness.volumes import MOUNTPOINTS

if TYPE_CHECKING:
    from tests.e2e.harness.cluster import Cluster

# Every cluster id and work directory this process made, for the leftover check.
CREATED: list[tuple[str, Path]] = []


_LIVE: set[Cluster] = set()
_LIVE_LOCK = threading.Lock()


def close_all() -> None:
    with _LIVE_LOCK:
        clusters = list(_LIVE)
    for c in clusters:
        c.close()


def _on_signal(signum: int, frame: Any) -> None:
    close_all()
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)


_HANDLERS_INSTALLED = False


def install_cleanup_handlers() -> None:
    """Close every cluster at exit and on SIGTERM/SIGHUP (call from the main thread)."""
    _install_handlers()


def leftovers() -> list[str]:
    """Anything of any cluster this process made that still exists."""
    out = []
    for cid, workdir in CREATED:
        out += [f"netns {ns}" for ns in our_netns(cid)]
        etc = Path("/etc/netns")
        if etc.exists():
            out += [f"{d}" for d in etc.iterdir() if d.name.startswith(cid)]
        if workdir.exists():
            out.append(f"work dir {workdir}")
    out += [f"mountpoint {p}" for p in MOUNTPOINTS.leftovers()]
    if NETNS_INODES:
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                try:
                    if os.readlink(f"/proc/{entry}/ns/net") in NETNS_INODES:
                        out.append(f"process {entry} in one of our network namespaces")
                except OSError:
                    pass
    return out


def _install_handlers() -> None:
    global _HANDLERS_INSTALLED
    if _HANDLERS_INSTALLED:
        return
    _HANDLERS_INSTALLED = True
    atexit.register(close_all)
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, _on_signal)
    # SIGINT raises KeyboardInterrupt: the fixtures' finally blocks close the clusters.
