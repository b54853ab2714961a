"""Flower 1.21-1.27 create the SuperLink's state lazily, on the first call, from whichever
gRPC thread makes it, without a lock; from 1.26 on that runs Alembic, whose module-level
context breaks when two threads do it at once (KeyError 'script', "database is locked",
SIGSEGV), and the caller gets UNKNOWN and exits. The rendered SuperLink of those
versions runs through a wrapper that creates the state once, before Flower starts its
servers, then calls Flower's own entry point with the rendered args. Here the rendered
command runs with real flwr 1.26.1."""

from __future__ import annotations

import socket
import sqlite3
import subprocess
import time

import pytest

from federation.dialects import FlowerVersion
from federation.superlink_state import STATE_INIT_LOCKED_SINCE
from tests.support.flower import GRPC_ERA, HTTP_ERA, venv_python
from tests.support.processes import Processes, free_port, process_env
from tests.support.render import plan_of, superlink_objects


def _superlink_pod(version: str, persistence: bool = True) -> dict:
    raw = {
        "version": version,
        "superlink": {"persistence": {"enabled": persistence}},
        "supernodes": {"pools": [{"name": "a", "replicas": 1}]},
    }
    sts = next(m for m in superlink_objects(plan_of(raw, "dev")) if m["kind"] == "StatefulSet")
    return sts["spec"]["template"]["spec"]


def _superlink(version: str, persistence: bool = True) -> dict:
    return next(c for c in _superlink_pod(version, persistence)["containers"] if c["name"] == "superlink")


def _tables(db) -> set[str]:
    with sqlite3.connect(db) as conn:
        return {row[0] for row in conn.execute("select name from sqlite_master where type='table'")}


@pytest.mark.parametrize("version", ["1.21.0", "1.26.1", "1.27.0", "1.28.0", "1.34.0", HTTP_ERA])
@pytest.mark.parametrize("persistence", [True, False])
def test_versions_without_the_lock_start_the_superlink_through_the_wrapper(version, persistence):
    pod = _superlink_pod(version, persistence)
    # No init container any more: migrating beforehand did not stop the race, since every
    # lazy creation runs Alembic again.
    assert "initContainers" not in pod
    c = _superlink(version, persistence)
    racy = FlowerVersion.parse(version) < STATE_INIT_LOCKED_SINCE
    # In-memory state is created lazily too (two instances, one of them lost).
    assert ("command" in c) is racy
    if racy:
        assert c["command"][:2] == ["python", "-c"]
        assert c["args"][0] != "python"  # the args are Flower's, unchanged


def test_the_wrapper_calls_flowers_own_superlink_entry_point():
    script = _superlink(GRPC_ERA)["command"][2]
    entry = subprocess.run(
        [
            str(venv_python(GRPC_ERA)),
            "-c",
            "from importlib.metadata import entry_points\n"
            "(ep,) = entry_points(group='console_scripts', name='flower-superlink')\n"
            "print(ep.value)",
        ],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout.strip()
    module, func = entry.split(":")
    assert f"from {module} import {func}\n" in script and f"sys.exit({func}())" in script


def test_a_bad_flag_still_fails_loudly_in_flowers_parser():
    command = _superlink(GRPC_ERA)["command"]
    res = subprocess.run(
        [str(venv_python(GRPC_ERA)), *command[1:], "--no-such-flag"], capture_output=True, text=True, timeout=120
    )
    assert res.returncode == 2
    assert "flower-superlink: error: unrecognized arguments: --no-such-flag" in res.stderr


def test_the_state_exists_before_the_superlink_serves(tmp_path):
    """With the rendered command the schema is there the moment the Fleet port accepts
    connections (Flower 1.26.1 itself would create it on the first request)."""
    c = _superlink(GRPC_ERA)
    db = tmp_path / "state.db"
    fleet = free_port()
    args = [
        "--insecure",
        "--isolation",
        "process",  # no SuperExec child that would call in at once
        "--fleet-api-address",
        f"127.0.0.1:{fleet}",
        "--control-api-address",
        f"127.0.0.1:{free_port()}",
        "--serverappio-api-address",
        f"127.0.0.1:{free_port()}",
        "--database",
        str(db),
    ]
    procs = Processes(tmp_path)
    try:
        proc = procs.start(
            "superlink", [str(venv_python(GRPC_ERA)), *c["command"][1:], *args], process_env(GRPC_ERA, tmp_path)
        )
        deadline = time.monotonic() + 60
        while True:
            assert proc.poll() is None, procs.log("superlink")
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", fleet)) == 0:
                    break
            assert time.monotonic() < deadline, procs.log("superlink")
            time.sleep(0.05)
        assert {"alembic_version", "node", "run", "objects"} <= _tables(db)
    finally:
        procs.stop()
