"""The SuperLink's state across a Flower upgrade (flower_federation/builders/state_guard.py), with real
Flower: the rendered `state-guard` init container's command, run by each version's own
Python, on a state file real SuperLinks wrote.

1. A 1.41.0 SuperLink creates its state (revision d90a2f91f23c) and stops.
2. The 1.42.0 guard backs it up (SQLite's online backup) and records the writer; the
   1.42.0 SuperLink then migrates it (d9bd9d502cf9).
3. The 1.41.0 guard refuses the migrated state (exit 3), naming the revision, the writer
   and the backup; the negative control: the 1.41.0 SuperLink itself refuses that file
   (`Can't locate revision`), so the refusal prevents a real failure, not an imagined one.
4. `persistence.restore` with that backup: the 1.41.0 guard restores it (the migrated state
   kept as `replaced-*.db`) and the 1.41.0 SuperLink serves on it again; a second start
   does not restore again.
"""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

import pytest

from flower_federation.builders import state_guard
from tests.support.flower import HTTP_ERA, PREVIOUS_HTTP_ERA
from tests.support.processes import Processes
from tests.support.state_guard import guard, revisions, serve, stop

pytestmark = pytest.mark.live
REV_141, REV_142 = "d90a2f91f23c", "d9bd9d502cf9"  # read off the wheels (alembic heads)


def test_upgrade_backs_up_downgrade_is_refused_restore_brings_it_back(tmp_path: Path) -> None:
    state = tmp_path / "state.db"
    backups = tmp_path / "backups"
    procs = Processes(tmp_path)
    try:
        # 1. Flower 1.41.0 writes its state.
        assert guard(PREVIOUS_HTTP_ERA, state).returncode == 0  # no state yet
        assert serve(PREVIOUS_HTTP_ERA, state, procs, "sl-141").startswith("serving")
        stop(procs)
        assert revisions(state) == [REV_141]

        # 2. The upgrade: the 1.42.0 guard backs up, then 1.42.0 migrates.
        up = guard(HTTP_ERA, state)
        assert up.returncode == 0, up.stderr
        (backup,) = sorted(p.name for p in backups.glob("*.db"))
        assert backup.startswith(f"{PREVIOUS_HTTP_ERA}-{REV_141}-") and "backed up" in up.stdout
        assert revisions(backups / backup) == [REV_141]
        assert serve(HTTP_ERA, state, procs, "sl-142").startswith("serving")
        stop(procs)
        assert revisions(state) == [REV_142]
        again = guard(HTTP_ERA, state)  # a restart of the same version: nothing to back up
        assert again.returncode == 0 and "nothing to back up" in again.stdout
        assert sorted(p.name for p in backups.glob("*.db")) == [backup]

        # 3. The downgrade is refused, saying why and how to go back ...
        down = guard(PREVIOUS_HTTP_ERA, state)
        assert down.returncode == state_guard.REFUSED_EXIT, down.stdout + down.stderr
        for said in (REV_142, f"Flower {HTTP_ERA} wrote it", backup, "superlink.persistence.restore"):
            assert said in down.stderr, (said, down.stderr)
        # ... and Flower 1.41.0 itself cannot open it (the negative control).
        refused = serve(PREVIOUS_HTTP_ERA, state, procs, "sl-141-on-142")
        stop(procs)
        assert refused.startswith("exited ") and not refused.startswith("exited 0"), refused[-2000:]
        assert f"Can't locate revision identified by '{REV_142}'" in refused, refused[-2000:]

        # 4. Restore the backup: 1.41.0 serves on it again; a restart does not restore twice.
        restored = guard(PREVIOUS_HTTP_ERA, state, restore=backup)
        assert restored.returncode == 0, restored.stdout + restored.stderr
        assert revisions(state) == [REV_141]
        (replaced,) = backups.glob("replaced-*.db")
        assert revisions(replaced) == [REV_142]
        assert serve(PREVIOUS_HTTP_ERA, state, procs, "sl-141-restored").startswith("serving")
        stop(procs)
        twice = guard(PREVIOUS_HTTP_ERA, state, restore=backup)
        assert twice.returncode == 0 and "already restored, not applied" in twice.stdout, twice.stdout
        assert len(list(backups.glob("replaced-*.db"))) == 1
    finally:
        procs.stop()


def test_a_restore_of_a_backup_that_is_not_there_is_refused(tmp_path: Path) -> None:
    res = guard(HTTP_ERA, tmp_path / "state.db", restore="1.41.0-nothing-20260101T000000Z.db")
    assert res.returncode == state_guard.REFUSED_EXIT
    assert "names backups/1.41.0-nothing-20260101T000000Z.db, which does not exist" in res.stderr


def test_only_the_newest_backups_are_kept(tmp_path: Path) -> None:
    state = tmp_path / "state.db"
    sqlite3.connect(state).execute("create table t (x)").connection.commit()
    for writer in ("1.0.0", "1.0.1", "1.0.2", "1.0.3", "1.0.4"):
        (tmp_path / "state.db.flower-version").write_text(writer + "\n")
        assert guard(HTTP_ERA, state).returncode == 0
        time.sleep(0.01)
    kept = sorted(p.name.split("-")[0] for p in (tmp_path / "backups").glob("*.db"))
    assert kept == ["1.0.2", "1.0.3", "1.0.4"]  # persistence.backups.keep: 3
