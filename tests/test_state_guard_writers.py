"""`state-guard` lets a migration start only when no other process has the state open (issue 33): Flower 1.43's
revision 4c9b3f185c5b must run "without concurrent application writes". Real processes on a state a real 1.42.0
SuperLink wrote, the nightly's rendered guard run by the nightly's own Python:

1. A writer (the sqlite3 shell) in an open write transaction: refused (exit 3), naming the transaction and the
   revisions; nothing copied, nothing migrated.
2. The same writer, its transaction committed, its connection still open (an idle older SuperLink): refused too,
   by SQLite's connection lock on the -shm file.
3. A restore under that writer: refused as well (it would replace the file under an open connection).
4. The negative control: the writer gone (killed mid-transaction, its -wal and -shm files left behind: a crash
   wedges nothing), the guard backs up and the nightly SuperLink migrates to 4c9b3f185c5b.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from flower_federation.builders import state_guard
from tests.support.flower import HTTP_ERA, NEXT
from tests.support.processes import Processes
from tests.support.state_guard import guard, revisions, serve, state_of

pytestmark = pytest.mark.live
REV_142, REV_NEXT = "d9bd9d502cf9", "4c9b3f185c5b"  # read off the wheels (alembic heads)


class Sqlite3Shell:
    """The sqlite3 command-line shell on the state, fed one statement at a time."""

    def __init__(self, state: Path) -> None:
        self.proc = subprocess.Popen(
            ["sqlite3", str(state)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )

    def run(self, sql: str) -> None:
        # The shell answers each statement in order: a marker read back means the statements before it are done.
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(f"{sql}\nselect 'done';\n")
        self.proc.stdin.flush()
        said = self.proc.stdout.readline()
        assert said.strip() == "done", said

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        self.proc.wait(timeout=30)


def test_a_migration_waits_for_no_other_writer(tmp_path: Path) -> None:
    state = state_of(HTTP_ERA, tmp_path / "volume")
    backups = state.parent / "backups"
    shell = Sqlite3Shell(state)
    try:
        shell.run("begin immediate; create table written_by_sqlite3 (x);")
        held = guard(NEXT, state)
        assert held.returncode == state_guard.REFUSED_EXIT, held.stdout + held.stderr
        for said in ("another process has the state", "a transaction under way", REV_142, REV_NEXT):
            assert said in held.stderr, (said, held.stderr)
        assert "Traceback" not in held.stderr

        shell.run("rollback;")  # idle, its connection open
        idle = guard(NEXT, state)
        assert idle.returncode == state_guard.REFUSED_EXIT, idle.stdout + idle.stderr
        assert "an open connection (SQLite's shared lock on byte 128 of state.db-shm)" in idle.stderr, idle.stderr
        assert "a transaction under way" not in idle.stderr

        backups.mkdir()
        (backups / "none.db").write_bytes(state.read_bytes())
        restore = guard(NEXT, state, restore="none.db")
        assert restore.returncode == state_guard.REFUSED_EXIT and "Restoring none.db" in restore.stderr, restore.stderr
        (backups / "none.db").unlink()

        # A writer that crashes mid-transaction (SIGKILL: a node lost, an OOM kill) leaves its -wal and -shm files
        # behind, but its locks die with it: the guard below must not be wedged by what a dead process left.
        shell.run("begin immediate; create table written_by_a_crashed_writer (x);")
        shell.proc.kill()
        shell.proc.wait(timeout=30)
        assert Path(f"{state}-shm").exists() and Path(f"{state}-wal").exists()
    finally:
        if shell.proc.poll() is None:
            shell.close()
    # Nothing was copied, recorded or migrated while the writer was there.
    assert revisions(state) == [REV_142] and not list(backups.glob("*.db"))
    assert (state.parent / "state.db.flower-version").read_text().strip() == HTTP_ERA

    # The negative control: the writer gone, the same guard backs up and the nightly migrates.
    alone = guard(NEXT, state)
    assert alone.returncode == 0, alone.stdout + alone.stderr
    assert f"and migrates it to {REV_NEXT}" in alone.stdout, alone.stdout
    procs = Processes(tmp_path)
    try:
        served = serve(NEXT, state, procs, "sl-next")
        assert served.startswith("serving"), served[-2000:]
    finally:
        procs.stop()
    assert revisions(state) == [REV_NEXT]
    (backup,) = backups.glob("*.db")
    assert backup.name.startswith(f"{HTTP_ERA}-{REV_142}-") and revisions(backup) == [REV_142]


def _files(state: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in state.parent.glob(f"{state.name}*")}


NOBODY = 65534
# Root without capabilities (CAP_DAC_OVERRIDE above all): file permissions hold for it as for any other uid.
WITHOUT_CAPABILITIES = ("setpriv", "--bounding-set=-all", "--inh-caps=-all")


def test_a_shm_of_another_user_is_refused_naming_its_owner(tmp_path: Path) -> None:
    """The guard runs as the SuperLink's user; a -shm another uid owns (an image of another user, an fsGroup
    changed) leaves SQLite "unable to open database file": refused, naming the file, its owner and the guard's uid,
    nothing copied or migrated. The negative control: the same -shm given to the guard's user, the guard migrates."""
    state = state_of(HTTP_ERA, tmp_path / "volume")
    shm = Path(f"{state}-shm")
    shm.write_bytes(b"")  # as another user's WAL connection would leave it
    shm.chmod(0o600)
    os.chown(shm, NOBODY, NOBODY)
    before = _files(state)
    refused = guard(NEXT, state, prefix=WITHOUT_CAPABILITIES)
    assert refused.returncode == state_guard.REFUSED_EXIT, refused.stdout + refused.stderr
    said = f"this container (uid 0) may not open the state's state.db-shm (uid {NOBODY}, gid {NOBODY}, mode 600)"
    assert said in refused.stderr and "Traceback" not in refused.stderr, refused.stderr
    # Nothing written (read byte for byte: a connection of root's would remove the -shm as it closed).
    assert _files(state) == before and not list(state.parent.glob("backups/*.db"))

    os.chown(shm, 0, 0)
    alone = guard(NEXT, state, prefix=WITHOUT_CAPABILITIES)
    assert alone.returncode == 0, alone.stdout + alone.stderr
    assert f"and migrates it to {REV_NEXT}" in alone.stdout, alone.stdout
