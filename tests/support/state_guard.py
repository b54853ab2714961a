"""The rendered `state-guard` init container run as its image would run it: by a Flower version's own Python, on
a state file real SuperLinks wrote (tests/test_state_guard.py, tests/test_state_guard_faults.py)."""

from __future__ import annotations

import contextlib
import hashlib
import os
import sqlite3
import subprocess
import sys
import tempfile
import time
import urllib.request
import zipfile
from pathlib import Path
from typing import Any, Optional

from flower_federation.builders import state_guard
from flower_federation.flower.layout import STATE_FILE
from tests.support.flower import HTTP_ERA, venv_bin, venv_python
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


# The last Flower without Alembic (1.21-1.25): its real wheel, pure Python, 727 KB, pinned by digest. Not a 4th
# venv: the guard only imports Flower's package, so the unpacked wheel is put first on the path of HTTP_ERA's venv
# (whose alembic, sqlalchemy, grpc and numpy serve its imports). `pip download` took 6 s, once per clone; unpacked,
# not imported from the zip, so Python caches its bytecode (a guard run: 11 s from the zip, 7 s unpacked, the same
# as with 1.42.0's own package, on this loaded machine).
PRE_ALEMBIC = "1.25.0"
PRE_ALEMBIC_WHEEL = f"flwr-{PRE_ALEMBIC}-py3-none-any.whl"
PRE_ALEMBIC_SHA256 = "997817e63a8317e61909345d9cea6c2b02f10ea33f9c67605290e6ec2b399d38"
WHEEL_CACHE = Path(__file__).resolve().parents[2] / ".cache" / "flwr-wheels"  # gitignored


def pre_alembic_flower() -> Path:
    """A directory holding the real flwr==1.25.0 package: its wheel downloaded once (`pip download --no-deps`) into
    WHEEL_CACHE, its digest checked, unpacked beside it."""
    unpacked = WHEEL_CACHE / f"flwr-{PRE_ALEMBIC}"
    if unpacked.exists():
        return unpacked
    WHEEL_CACHE.mkdir(parents=True, exist_ok=True)
    # Each step in a temporary directory, then renamed: a concurrent run sees all of it or none.
    with tempfile.TemporaryDirectory(dir=WHEEL_CACHE) as tmp:
        pip = [sys.executable, "-m", "pip", "download", "--quiet", "--disable-pip-version-check", "--no-deps"]
        subprocess.run([*pip, "--only-binary=:all:", f"flwr=={PRE_ALEMBIC}", "-d", tmp], check=True, timeout=300)
        wheel = Path(tmp) / PRE_ALEMBIC_WHEEL
        digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
        assert digest == PRE_ALEMBIC_SHA256, f"{wheel}: sha256 {digest}, not the flwr {PRE_ALEMBIC} wheel"
        with zipfile.ZipFile(wheel) as z:
            z.extractall(Path(tmp) / "unpacked")
        try:
            os.replace(Path(tmp) / "unpacked", unpacked)
        except OSError:
            if not unpacked.exists():  # else another run unpacked the same wheel first
                raise
    return unpacked


def guard(
    version: str,
    state: Path,
    restore: str = "",
    keep: Optional[int] = None,
    flower: Optional[Path] = None,
    prefix: tuple[str, ...] = (),
) -> subprocess.CompletedProcess[str]:
    """The guard of `version`'s image on `state` (instead of the pod's /var/lib/flower/state.db), run by `version`'s
    venv; with `flower` (a directory holding another Flower's package), by HTTP_ERA's venv with that Flower
    first on the path, standing in for an image whose venv the tests do not keep (1.25.0: `pre_alembic_flower`);
    `prefix` runs it under another command (e.g. setpriv)."""
    argv = guard_command(version, restore, keep)
    venv_version = version if flower is None else HTTP_ERA
    argv[0] = str(venv_python(venv_version))
    argv[argv.index(STATE_FILE)] = str(state)
    env = process_env(venv_version, state.parent / f"home-{version}")
    if flower is not None:
        env["PYTHONPATH"] = str(flower)
    return run_bounded([*prefix, *argv], env, timeout=120)


def flower_imported(flower: Path) -> tuple[str, str]:
    """(version, package file) of the Flower `guard(..., flower=flower)` imports: what the guard inspects."""
    env = process_env(HTTP_ERA, WHEEL_CACHE / "home")
    env["PYTHONPATH"] = str(flower)
    code = "import flwr, importlib.metadata as m; print(m.version('flwr'), flwr.__file__)"
    done = run_bounded([str(venv_python(HTTP_ERA)), "-c", code], env, timeout=60)
    assert done.returncode == 0, done.stderr
    version, path = done.stdout.split()
    return version, path


def start_guard(version: str, state: Path) -> subprocess.Popen[str]:
    """The same guard, left running (to be killed mid-way)."""
    argv = guard_command(version)
    argv[0] = str(venv_python(version))
    argv[argv.index(STATE_FILE)] = str(state)
    env = process_env(version, state.parent / f"home-{version}")
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def revisions(state: Path) -> list[str]:
    # Closed here, not left to the garbage collector (a connection is in a reference cycle with its statement
    # cache): an open one is a connection the guard rightly refuses to migrate beside.
    with contextlib.closing(sqlite3.connect(state)) as con:
        return sorted(r[0] for r in con.execute("select version_num from alembic_version"))


def tables(state: Path) -> set[str]:
    with contextlib.closing(sqlite3.connect(state)) as con:
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
