"""Before Flower 1.41 the SuperLink creates its SQL state lazily and without a lock, so
concurrent first calls race its Alembic migrations ("table node already exists"); the
rendered SuperLink pod runs an init container that migrates the --database file once.
Here the rendered init command runs with the real Flower of each version."""

from __future__ import annotations

import sqlite3
import subprocess

import pytest

from tests.support.flower import GRPC_ERA, HTTP_ERA, venv_python
from tests.support.render import plan_of, superlink_objects


def _superlink_pod(version: str, persistence: bool = True) -> dict:
    raw = {
        "version": version,
        "superlink": {"persistence": {"enabled": persistence}},
        "supernodes": {"pools": [{"name": "a", "replicas": 1}]},
    }
    sts = next(m for m in superlink_objects(plan_of(raw, "dev")) if m["kind"] == "StatefulSet")
    return sts["spec"]["template"]["spec"]


def _tables(db) -> set[str]:
    with sqlite3.connect(db) as conn:
        return {row[0] for row in conn.execute("select name from sqlite_master where type='table'")}


def test_grpc_era_superlink_migrates_its_database_before_it_starts(tmp_path):
    pod = _superlink_pod(GRPC_ERA)
    (init,) = pod["initContainers"]
    main = next(c for c in pod["containers"] if c["name"] == "superlink")
    db_flag = main["args"][main["args"].index("--database") + 1]
    assert init["args"] == [db_flag]
    assert {m["mountPath"] for m in init["volumeMounts"]} >= {"/var/lib/flower"}
    assert init["command"][0] == "python"
    db = tmp_path / "state.db"
    # The image's `python` is Flower's interpreter: run the command with real flwr 1.26.1.
    subprocess.run([str(venv_python(GRPC_ERA)), *init["command"][1:], str(db)], check=True, timeout=120)
    assert {"alembic_version", "node", "run"} <= _tables(db)
    # Idempotent: a restarted pod runs it again on the same volume.
    subprocess.run([str(venv_python(GRPC_ERA)), *init["command"][1:], str(db)], check=True, timeout=120)


def test_the_migration_command_is_a_no_op_where_flower_has_no_alembic(tmp_path):
    script = _superlink_pod(GRPC_ERA)["initContainers"][0]["command"][2]
    # Python without flwr stands in for a Flower that predates Alembic.
    result = subprocess.run(["python3", "-S", "-c", script, str(tmp_path / "state.db")], timeout=60)
    assert result.returncode == 0
    assert not (tmp_path / "state.db").exists()


@pytest.mark.parametrize("version,persistence", [(HTTP_ERA, True), (GRPC_ERA, False)])
def test_no_init_container_where_there_is_nothing_to_race(version, persistence):
    # 1.41 guards the lazy initialisation with a lock; without --database the state is in memory.
    assert "initContainers" not in _superlink_pod(version, persistence)
