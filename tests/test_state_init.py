"""The SuperLink of Flower versions with unsafe concurrent state access runs through a
wrapper (flower_federation/flower/superlink_state.py): before 1.28 it creates the state once, before
Flower starts its servers (lazily, from several gRPC threads at once, Alembic fails with
KeyError 'script' / "database is locked" or crashes the process); 1.26-1.30 get an
atomic object preregistration (per-node transactions race a concurrent delete of a
shared child: FOREIGN KEY constraint failed). Then it calls Flower's own entry point with
the rendered args. Here the rendered command runs with real flwr 1.26.1."""

from __future__ import annotations

import socket
import sqlite3
import subprocess
import time

import pytest

from flower_federation.flower.superlink_state import (
    ATOMIC_PREREGISTER,
    BODY_CYCLES_SINCE,
    BOUNDED_BODIES,
    PREREGISTER_ATOMIC_SINCE,
    STATE_INIT_LOCKED_SINCE,
)
from flower_federation.flower.versions import FlowerVersion
from tests.support.flower import GRPC_ERA, HTTP_ERA, venv_python
from tests.support.processes import Processes, free_port, process_env
from tests.support.render import plan_of, superlink_objects

# Real Flower servers waited for against wall-clock deadlines: `make test` runs these
# beside the e2e tests, at normal priority, and the rest niced (Makefile).
pytestmark = pytest.mark.live


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


@pytest.mark.parametrize(
    "version", ["1.21.0", "1.25.0", "1.26.1", "1.27.0", "1.28.0", "1.30.0", "1.31.0", "1.34.0", HTTP_ERA]
)
@pytest.mark.parametrize("persistence", [True, False])
def test_versions_with_unsafe_state_access_start_the_superlink_through_the_wrapper(version, persistence):
    pod = _superlink_pod(version, persistence)
    # No state-creating init container any more: migrating beforehand did not stop the
    # race, since every lazy creation runs Alembic again. With persistence, only the
    # state guard (backups before an upgrade, tests/test_state_guard.py) runs before it.
    assert [c["name"] for c in pod.get("initContainers", [])] == (["state-guard"] if persistence else [])
    c = _superlink(version, persistence)
    v = FlowerVersion.parse(version)
    assert v is not None
    eager = v < STATE_INIT_LOCKED_SINCE  # in-memory state is created lazily too
    atomic = FlowerVersion(1, 26, 0) <= v < PREREGISTER_ATOMIC_SINCE
    bodies = v >= BODY_CYCLES_SINCE  # the collector of refused bodies (HTTP Fleet API)
    assert ("command" in c) is (eager or atomic or bodies)
    if "command" in c:
        assert c["command"][:2] == ["python", "-c"]
        script = c["command"][2]
        assert ("LinkStateFactory" in script) is eager
        assert (ATOMIC_PREREGISTER in script) is atomic
        assert (BOUNDED_BODIES in script) is bodies
        assert c["args"][0].startswith("--")  # the args are Flower's, unchanged


@pytest.mark.parametrize("version", [GRPC_ERA, HTTP_ERA])
def test_the_wrapper_calls_flowers_own_superlink_entry_point(version):
    script = _superlink(version)["command"][2]
    entry = subprocess.run(
        [
            str(venv_python(version)),
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


@pytest.mark.parametrize("version", [GRPC_ERA, HTTP_ERA])
def test_a_bad_flag_still_fails_loudly_in_flowers_parser(version):
    command = _superlink(version)["command"]
    res = subprocess.run(
        [str(venv_python(version)), *command[1:], "--no-such-flag"], capture_output=True, text=True, timeout=120
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


_PREREGISTER_RACE = """
import hashlib, sys, threading, time
from sqlalchemy.exc import IntegrityError
from flwr.proto.message_pb2 import ObjectTree
from flwr.supercore.object_store.sql_object_store import SqlObjectStore
exec(sys.argv[3])
store = SqlObjectStore(sys.argv[1])
store.initialize()
h = lambda s: hashlib.sha256(s.encode()).hexdigest()
shared = ObjectTree(object_id=h("child"), children=[ObjectTree(object_id=h("grandchild"))])
errors, done = [], time.monotonic() + float(sys.argv[2])
def messages(name):
    i = 0
    while time.monotonic() < done and not errors:
        i += 1
        parent = h(f"{name}-{i}")
        try:
            store.preregister(1, ObjectTree(object_id=parent, children=[shared]))
            store.delete(parent)
        except IntegrityError as exc:
            errors.append(exc)
threads = [threading.Thread(target=messages, args=(k,)) for k in range(4)]
[t.start() for t in threads]
[t.join() for t in threads]
print(len(errors))
"""


def _preregister_errors(tmp_path, name: str, patch: str, seconds: float) -> int:
    res = subprocess.run(
        [str(venv_python(GRPC_ERA)), "-c", _PREREGISTER_RACE, str(tmp_path / name), str(seconds), patch],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 0, res.stderr[-2000:]
    return int(res.stdout.split()[-1])


def test_the_wrapper_makes_object_preregistration_atomic(tmp_path):
    """Messages sharing a child, each preregistered then deleted, from four threads."""
    script = _superlink(GRPC_ERA)["command"][2]
    assert ATOMIC_PREREGISTER in script
    # Negative control: Flower 1.26.1 as it is fails within seconds (stops at the first).
    assert _preregister_errors(tmp_path, "plain.db", "", 20) > 0
    assert _preregister_errors(tmp_path, "patched.db", ATOMIC_PREREGISTER, 8) == 0
