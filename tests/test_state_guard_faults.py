"""`state-guard` under faults (issue 32 part 5), with real Flower on real files: the rendered init container's
command run by each version's own Python on state files real SuperLinks wrote.

- Retries of a migration cut short (an OOM, a `pulumi up` retried) copy nothing: the clean backup taken before
  the upgrade survives any number of them, even with `backups.keep: 1`, and restores a state real Flower serves.
- A full volume (a small tmpfs; then one out of inodes) is refused through the refusal path: exit 3, the
  volume, the sizes and `persistence.size`, no traceback, the state untouched; the negative control: the same
  state on a roomier volume is backed up.
- A guard killed mid-backup leaves a temporary copy, never a backup; the next start removes it and backs up whole.
- `restore` applies once each time the setting names it: a restart with it unchanged says "already restored, not
  applied"; unset and set again, it restores again.
- An Alembic state on an image without Alembic (Flower 1.21-1.25; real flwr 1.25.0 importable) is refused; a state
  from before Alembic is not, nor the Alembic state where Flower 1.42.0 is what the guard imports.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import sqlite3
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from flower_federation.builders import state_guard
from tests.support.flower import HTTP_ERA, PREVIOUS_HTTP_ERA
from tests.support.processes import Processes
from tests.support.state_guard import (
    PRE_ALEMBIC,
    flower_imported,
    guard,
    pre_alembic_flower,
    revisions,
    serve,
    start_guard,
    state_of,
    tables,
)

pytestmark = pytest.mark.live
REV_141 = "d90a2f91f23c"


@pytest.fixture(scope="module")
def state_141(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A state file a real 1.41.0 SuperLink created (copied by each test that changes it)."""
    return state_of(PREVIOUS_HTTP_ERA, tmp_path_factory.mktemp("state-141"))


def copy_state(src: Path, directory: Path) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    for f in src.parent.glob(src.name + "*"):
        shutil.copy2(f, directory / f.name)
    return directory / src.name


def backup_names(state: Path, prefix: str = "") -> list[str]:
    names = sorted(p.name for p in (state.parent / "backups").glob(prefix + "*.db"))
    return [n for n in names if prefix or not n.startswith("replaced-")]


def pad(state: Path, mib: int) -> None:
    """Grows a state file by `mib` MiB in a table of its own (Flower's tables are left alone)."""
    with contextlib.closing(sqlite3.connect(state)) as con, con:
        con.execute("create table padding (b blob)")
        con.executemany("insert into padding values (zeroblob(1048576))", [()] * mib)
    checkpoint(state)


def checkpoint(state: Path) -> None:
    """Folds the write-ahead log into the file (Flower's state is in WAL mode), as a stopped SuperLink leaves it."""
    con = sqlite3.connect(state)
    try:
        con.execute("pragma wal_checkpoint(TRUNCATE)")
    finally:
        con.close()


def add_table(state: Path, name: str) -> None:
    # Closed at once, not by the garbage collector: the guard refuses to migrate beside an open connection.
    with contextlib.closing(sqlite3.connect(state)) as con, con:
        con.execute(f"create table {name} (x)")


def test_retries_of_a_migration_cut_short_keep_the_clean_backup(state_141: Path, tmp_path: Path) -> None:
    state = copy_state(state_141, tmp_path)
    procs = Processes(tmp_path)
    try:
        first = guard(HTTP_ERA, state, keep=1)
        assert first.returncode == 0 and "backed up the state of Flower 1.41.0" in first.stdout, first.stdout
        (clean,) = backup_names(state)
        assert clean.startswith(f"{PREVIOUS_HTTP_ERA}-{REV_141}-")
        # Flower 1.42.0 starts migrating and is killed half-way: Alembic's batch mode on SQLite leaves its copy of
        # a table behind, the revision not yet moved.
        add_table(state, "_alembic_tmp_run")
        for _ in range(3):  # the pod restarted, `pulumi up` retried
            retry = guard(HTTP_ERA, state, keep=1)
            assert retry.returncode == 0, retry.stdout + retry.stderr
            assert "nothing is copied again" in retry.stdout, retry.stdout
            time.sleep(1.1)  # backups are named by the second: a copy each retry would have its own name
        assert backup_names(state) == [clean]
        assert "_alembic_tmp_run" not in tables(state.parent / "backups" / clean)
        # The clean backup is what a restore needs: real 1.42.0 migrates and serves it.
        restored = guard(HTTP_ERA, state, restore=clean, keep=1)
        assert restored.returncode == 0 and f"restored backups/{clean}" in restored.stdout, restored.stdout
        assert "_alembic_tmp_run" not in tables(state) and revisions(state) == [REV_141]
        assert serve(HTTP_ERA, state, procs, "sl-142").startswith("serving")
        # The state it replaced (the half-migrated one) is kept under its identity.
        (replaced,) = backup_names(state, "replaced-")
        assert replaced.startswith(f"replaced-{HTTP_ERA}-{REV_141}-")
    finally:
        procs.stop()


def test_pruning_keeps_the_newest_copy_of_each_of_the_newest_states(tmp_path: Path) -> None:
    state = tmp_path / "state.db"
    add_table(state, "t")
    backups = tmp_path / "backups"
    backups.mkdir()
    # Two copies of an old state, then a change of writer: the copies of one state count once.
    for stamp in ("20260101T000000Z", "20260102T000000Z"):
        shutil.copy(state, backups / f"1.0.0-no-revision-{stamp}.db")
    for stamp in ("20260103T000000Z", "20260104T000000Z"):
        shutil.copy(state, backups / f"replaced-1.0.0-no-revision-{stamp}.db")
    (tmp_path / "state.db.flower-version").write_text("1.0.1\n")
    res = guard(HTTP_ERA, state, keep=2)
    assert res.returncode == 0, res.stdout + res.stderr
    (new,) = [n for n in backup_names(state) if n.startswith("1.0.1-")]
    assert backup_names(state) == ["1.0.0-no-revision-20260102T000000Z.db", new]
    assert "pruned backups/1.0.0-no-revision-20260101T000000Z.db" in res.stdout
    assert backup_names(state, "replaced-") == [f"replaced-1.0.0-no-revision-{s}.db" for s in ("20260103T000000Z",)] + [
        "replaced-1.0.0-no-revision-20260104T000000Z.db"
    ], "replaced-* are pruned only when a restore adds one"


@pytest.fixture
def small_volume(tmp_path: Path) -> Iterator[Path]:
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root (CI runs as root)")
    mount = tmp_path / "volume"
    mount.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(mount)], check=True)
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def test_a_full_volume_is_refused_through_the_refusal_path(state_141: Path, small_volume: Path) -> None:
    big = copy_state(state_141, small_volume.parent / "big")
    pad(big, 3)  # about 3 MiB of state on a 4 MiB volume: no room for its backup
    state = copy_state(big, small_volume)
    before = state.read_bytes()
    res = guard(HTTP_ERA, state)
    assert res.returncode == state_guard.REFUSED_EXIT, res.stdout + res.stderr
    for said in (f"the state volume {small_volume} has", "bytes free", "superlink.persistence.size (now 1Gi"):
        assert said in res.stderr, (said, res.stderr)
    assert "Traceback" not in res.stderr + res.stdout
    assert state.read_bytes() == before and (small_volume / "state.db.flower-version").read_text() == "1.41.0\n"
    assert not list(small_volume.glob("backups/*"))
    # The negative control: room for it, and the same guard backs it up.
    subprocess.run(["mount", "-o", "remount,size=16m", str(small_volume)], check=True)
    ok = guard(HTTP_ERA, state)
    assert ok.returncode == 0 and "backed up the state of Flower 1.41.0" in ok.stdout, ok.stdout + ok.stderr


def test_a_volume_out_of_inodes_is_refused_through_the_refusal_path(state_141: Path, small_volume: Path) -> None:
    state = copy_state(state_141, small_volume)
    (small_volume / f"home-{HTTP_ERA}" / ".flwr").mkdir(parents=True)  # the test's HOME for the guard, not its volume
    used = os.statvfs(small_volume).f_files - os.statvfs(small_volume).f_ffree
    subprocess.run(["mount", "-o", f"remount,nr_inodes={used}", str(small_volume)], check=True)
    res = guard(HTTP_ERA, state)
    assert res.returncode == state_guard.REFUSED_EXIT, res.stdout + res.stderr
    # SQLite cannot make the state's -shm file: the error it raises (no traceback) names what failed.
    assert "could not guard the state" in res.stderr and "OperationalError: unable to open" in res.stderr, res.stderr
    assert "superlink.persistence.size is 1Gi" in res.stderr and "Traceback" not in res.stderr + res.stdout


def test_a_guard_killed_mid_backup_leaves_no_backup_and_the_next_start_backs_up_whole(
    state_141: Path, tmp_path: Path
) -> None:
    state = copy_state(state_141, tmp_path)
    pad(state, 256)
    tmp_copies = tmp_path / "backups"
    proc = start_guard(HTTP_ERA, state)
    try:
        deadline = time.monotonic() + 60
        while not list(tmp_copies.glob("*.tmp")) and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.001)
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.wait(timeout=10)
    (partial,) = tmp_copies.glob("*.tmp")  # the kill landed mid-copy (else this test proves nothing)
    assert partial.stat().st_size < state.stat().st_size
    assert backup_names(state) == [] and (tmp_path / "state.db.flower-version").read_text() == "1.41.0\n"
    again = guard(HTTP_ERA, state)
    assert again.returncode == 0, again.stdout + again.stderr
    assert f"removed backups/{partial.name}, a copy that was cut short" in again.stdout
    (backup,) = backup_names(state)
    assert not list(tmp_copies.glob("*.tmp")) and revisions(tmp_copies / backup) == [REV_141]
    with sqlite3.connect(tmp_copies / backup) as con:
        assert con.execute("pragma integrity_check").fetchone() == ("ok",)
        assert con.execute("select count(*) from padding").fetchone() == (256,)


def test_restore_applies_once_each_time_the_setting_names_it(state_141: Path, tmp_path: Path) -> None:
    state = copy_state(state_141, tmp_path)
    assert guard(HTTP_ERA, state).returncode == 0
    (backup,) = backup_names(state)
    add_table(state, "work_1")  # runs after the backup
    first = guard(HTTP_ERA, state, restore=backup)
    assert first.returncode == 0 and f"restored backups/{backup}" in first.stdout, first.stdout
    assert "work_1" not in tables(state)
    add_table(state, "work_2")  # the SuperLink ran on the restored state; its pod restarts, setting unchanged
    restart = guard(HTTP_ERA, state, restore=backup)
    assert restart.returncode == 0 and "already restored, not applied" in restart.stdout, restart.stdout
    assert "work_2" in tables(state)
    assert guard(HTTP_ERA, state).returncode == 0  # the setting removed at the next `pulumi up`
    add_table(state, "work_3")
    second = guard(HTTP_ERA, state, restore=backup)  # set again, weeks later: restored again
    assert second.returncode == 0 and f"restored backups/{backup}" in second.stdout, second.stdout
    assert not {"work_2", "work_3"} & tables(state)
    replaced = backup_names(state, "replaced-")
    assert len(replaced) == 2 and "work_3" in tables(tmp_path / "backups" / replaced[-1])


def test_an_alembic_state_on_an_image_without_alembic_is_refused(state_141: Path, tmp_path: Path) -> None:
    """Real Flower 1.25.0 (its wheel, unpacked: `pre_alembic_flower`) is what the guard imports: it finds no
    `flwr.supercore.state.alembic` there, as in the 1.25 image, and refuses the state 1.41.0 migrated."""
    flwr_125 = pre_alembic_flower()
    version, package = flower_imported(flwr_125)
    assert version == PRE_ALEMBIC and package.startswith(str(flwr_125)), (version, package)
    state = copy_state(state_141, tmp_path / "alembic")
    res = guard(PRE_ALEMBIC, state, flower=flwr_125)
    assert res.returncode == state_guard.REFUSED_EXIT, res.stdout + res.stderr
    for said in (REV_141, "Flower 1.41.0 migrated it with Alembic", "Flower 1.25.0 cannot read", "predates Alembic"):
        assert said in res.stderr, (said, res.stderr)
    assert revisions(state) == [REV_141] and not (state.parent / "backups").exists()  # nothing touched
    # Negative controls. The same interpreter and command with no Flower on the path but its venv's own (1.42.0,
    # which has Alembic and knows the revision) does not refuse: the refusal comes from the Flower the guard
    # imports, not from the version it is told.
    nothing = tmp_path / "no-flower"
    nothing.mkdir()
    other = copy_state(state_141, tmp_path / "with-alembic")
    passed = guard(PRE_ALEMBIC, other, flower=nothing)
    assert passed.returncode == 0 and f"revisions ['{REV_141}']" in passed.stdout, passed.stdout + passed.stderr
    # A state from before Alembic is the 1.25 image's own, and is backed up as usual.
    old = tmp_path / "pre-alembic" / "state.db"
    old.parent.mkdir()
    add_table(old, "run")
    ok = guard(PRE_ALEMBIC, old, flower=flwr_125)
    assert ok.returncode == 0 and "backed up the state of Flower unknown" in ok.stdout, ok.stdout + ok.stderr
