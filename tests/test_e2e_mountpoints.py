"""The e2e harness leaves a host mountpoint it created to another mount namespace that still mounts there
(tests/e2e/harness/volumes.py): another session's pods on the same host mount their volumes at the same paths,
and removing the directory detaches their mounts (Linux 3.18+). Real namespaces: a process in a mount namespace
of its own bind-mounts a directory at the mountpoint; the harness's release keeps it and does not report it as
left behind; the negative control: removing it, as the harness did before, takes the mount away from that
process."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.e2e.harness.volumes import _Mountpoints

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("unshare") is None, reason="needs root and unshare (mount namespaces)"
)


def mounts_of(pid: int) -> set[str]:
    with open(f"/proc/{pid}/mountinfo", encoding="utf-8") as f:
        return {line.split()[4] for line in f}


def holder(source: Path, target: Path) -> subprocess.Popen[str]:
    """A process in a mount namespace of its own with `source` bind-mounted at `target`, as a pod's container."""
    script = f"mount --bind {source} {target} && echo mounted && exec sleep 120"
    proc = subprocess.Popen(
        ["unshare", "--mount", "--propagation", "private", "sh", "-c", script], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == "mounted"
    return proc


def test_a_mountpoint_mounted_in_another_namespace_is_left_to_it(tmp_path: Path) -> None:
    source, target = tmp_path / "volume", tmp_path / "host" / "var-lib-flower"
    source.mkdir()
    (source / "state.db").write_text("state")
    points = _Mountpoints()
    points.acquire()
    points.ensure(str(target))  # created by this session, as for a container's mountPath
    proc = holder(source, target)
    try:
        points.release()  # this session's last cluster closed while another session's pod runs
        assert target.is_dir() and str(target) in mounts_of(proc.pid)
        assert points.leftovers() == []  # not ours any more: nothing reported as left behind

        # The negative control: removed anyway (the harness before), the other namespace loses its volume.
        target.rmdir()
        assert str(target) not in mounts_of(proc.pid)
    finally:
        proc.kill()
        proc.wait()
    # Once no namespace mounts there, the next release removes what this session created.
    again = _Mountpoints()
    again.acquire()
    again.ensure(str(target))
    again.release()
    assert not target.exists() and again.leftovers() == []
