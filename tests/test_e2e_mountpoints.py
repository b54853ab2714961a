"""The e2e harness's host mountpoints (tests/e2e/harness/volumes.py `_Mountpoints`): created where a container
mounts over a missing path, removed when this process's last cluster closed, but never while another mount
namespace mounts over one (another test process's container on the same host: removing the directory would detach
that mount, Linux >= 3.18); such a one is not reported as left behind either."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from tests.e2e.harness.volumes import _Mountpoints

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("unshare") is None, reason="needs root and unshare(1) to mount"
)


def test_a_mountpoint_another_namespace_mounts_over_is_kept_until_it_is_free(tmp_path):
    points = _Mountpoints()
    points.acquire()
    target = tmp_path / "host" / "app" / ".flwr"
    points.ensure(str(target))
    source = tmp_path / "emptydir"
    source.mkdir()
    # Another process's container: a mount namespace of its own, the target mounted over, still running.
    holder = subprocess.Popen(
        [
            "unshare",
            "-m",
            "--propagation",
            "private",
            "sh",
            "-c",
            f"mount --bind {source} {target} && echo up && exec sleep 60",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "up"
        points.release()
        assert target.is_dir(), "removed while another namespace mounts over it"
        assert points.leftovers() == [], "another process's mountpoint reported as ours, left behind"
    finally:
        holder.kill()
        holder.wait()
    # The negative control: once nothing mounts over it, this process's next last close removes it, and what it made.
    points.acquire()
    points.release()
    assert not (tmp_path / "host").exists()
    assert points.leftovers() == []
