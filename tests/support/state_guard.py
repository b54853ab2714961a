"""The rendered `state-guard` init container run as its image would run it: by a Flower version's own Python, on
a state file real SuperLinks wrote (tests/test_state_guard.py, tests/test_state_guard_faults.py)."""

from __future__ import annotations

import sqlite3
import subprocess
import time
import urllib.request
from pathlib import Path
from typing import Any, Optional

from flower_federation.builders import state_guard
from flower_federation.flower.layout import STATE_FILE
from tests.support.flower import venv_bin, venv_python
from tests.support.processes import Processes, free_port, process_env, run_bounded
from tests.support.render import plan_of, superlink_objects

START_TIMEOUT = 60


def guard_command(version: str, restore: str = "", keep: Optional[int] = None) -> list[str]:
    """The init container's command and args, as the dev stack on `version` renders them."""
    persistence: dict[str, Any] = {"restore": restore} if restore else {}
    if keep is not None:
        persistence["backups"] = {"keep": keep}
    raw = {
        "version": version,
        "superlink": {"persistence": persistence},
        "supernodes": {"pools": [{"name": "a", "replicas": 1}]},
    }
    sts = next(m for m in superlink_objects(plan_of(raw, "dev")) if m["kind"] == "StatefulSet")
    (init,) = sts["spec"]["template"]["spec"]["initContainers"]
    assert init["name"] == state_guard.CONTAINER and init["command"][:2] == ["python", "-c"]
    return [*init["command"], *init["args"]]


def guard(
    version: str, state: Path, restore: str = "", keep: Optional[int] = None, python: Optional[Path] = None
) -> subprocess.CompletedProcess[str]:
    """The guard of `version`'s image on `state` (instead of the pod's /var/lib/flower/state.db); `python`: another
    interpreter standing in for the image's (one without Flower's Alembic modules)."""
    argv = guard_command(version, restore, keep)
    argv[0] = str(python or venv_python(version))
    argv[argv.index(STATE_FILE)] = str(state)
    env_version = version if python is None else "1.42.0"
    return run_bounded(argv, process_env(env_version, state.parent / f"home-{version}"), timeout=120)


def start_guard(version: str, state: Path) -> subprocess.Popen[str]:
    """The same guard, left running (to be killed mid-way)."""
    argv = guard_command(version)
    argv[0] = str(venv_python(version))
    argv[argv.index(STATE_FILE)] = str(state)
    env = process_env(version, state.parent / f"home-{version}")
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def revisions(state: Path) -> list[str]:
    with sqlite3.connect(state) as con:
        return sorted(r[0] for r in con.execute("select version_num from alembic_version"))


def tables(state: Path) -> set[str]:
    with sqlite3.connect(state) as con:
        return {r[0] for r in con.execute("select name from sqlite_master where type = 'table'")}


def serve(version: str, state: Path, procs: Processes, name: str) -> str:
    """A real SuperLink on `state` until /health answers; returns its log so far."""
    port = free_port()
    argv = [
        str(venv_bin(version) / "flower-superlink"),
        "--insecure",
        "--isolation",
        "process",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--database",
        str(state),
    ]
    proc = procs.start(name, argv, process_env(version, state.parent / f"home-{name}"))
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            return f"exited {proc.returncode}\n" + procs.log(name)
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as r:
                if r.status == 200:
                    return "serving\n" + procs.log(name)
        except OSError:
            time.sleep(0.3)
    raise AssertionError(f"{name} neither served nor exited within {START_TIMEOUT}s:\n{procs.log(name)}")


def stop(procs: Processes) -> None:
    procs.stop()
    procs.procs.clear()


def state_of(version: str, directory: Path) -> Path:
    """A state file a real SuperLink of `version` created (guarded first, as in its pod), stopped."""
    directory.mkdir(parents=True, exist_ok=True)
    state = directory / "state.db"
    procs = Processes(directory)
    try:
        assert guard(version, state).returncode == 0
        served = serve(version, state, procs, f"sl-{version}")
        assert served.startswith("serving"), served[-2000:]
    finally:
        procs.stop()
    return state
