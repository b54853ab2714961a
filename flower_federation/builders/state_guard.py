"""The SuperLink's state across Flower upgrades: an init container `state-guard` that
runs before the SuperLink, in its image (its own Python and Flower: no image of ours),
on the state volume.

Why: a SuperLink opening a state file that an older Flower wrote migrates it in place
(Alembic, Flower 1.26+), one way: 1.41's state opened by 1.42 is at revision
`d9bd9d502cf9`, which 1.41 then refuses (`Can't locate revision`, exit 105). So, before
Flower starts:

1. `superlink.persistence.restore: <backup>` (once: a `<backup>.restored` marker says it
   was done): the current state is kept as `backups/replaced-<time>.db`, the backup
   takes its place.
2. A state at a schema revision this image's Flower does not know (a downgrade) is
   refused: the log and the termination message (`kubectl describe pod`) say which
   Flower wrote it, the backups there are and how to restore one; the SuperLink never
   starts on it (its pod stays in Init:Error).
3. A state about to be migrated (its revisions are not the image's heads) or written by
   another Flower version (which covers 1.21-1.25, before Alembic: no revisions to
   compare) is first copied with SQLite's online backup API, consistent even with a
   SuperLink still holding the file, to `backups/<writer>-<revisions>-<time>.db`; the
   `keep` newest backups are kept.
4. `state.db.flower-version` records the Flower version that runs next (the writer).

Everything is read off the wheels of 1.26.1, 1.41.0 and 1.42.0:
`flwr.supercore.state.alembic.utils.build_alembic_config` and the `alembic_version`
table exist in all three; 1.21-1.25 have neither (steps 2 and the revision part of 3 do
not apply).
"""

from __future__ import annotations

from typing import Any

from flower_federation.flower.layout import STATE_DIR, STATE_FILE, STATE_VOLUME
from flower_federation.kube.objects import Container
from flower_federation.plan import FederationPlan

CONTAINER = "state-guard"
BACKUP_DIR = f"{STATE_DIR}/backups"
VERSION_FILE = f"{STATE_FILE}.flower-version"
REFUSED_EXIT = 3

GUARD = r"""
import datetime, os, sqlite3, sys
from pathlib import Path

state, version, keep, restore = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3]), sys.argv[4]
backups = state.parent / "backups"
marker = state.with_name(state.name + ".flower-version")


def say(msg):
    print("state-guard: " + msg, flush=True)


def now():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")


def listing():
    return sorted(p.name for p in backups.glob("*.db")) if backups.is_dir() else []


def refuse(msg):
    text = "state-guard: " + msg
    print(text, file=sys.stderr, flush=True)
    try:
        Path("/dev/termination-log").write_text(text[:4000])
    except OSError:
        pass
    sys.exit(EXIT)


def copy(src, dst):
    # SQLite's online backup: a consistent copy even while another process writes.
    dst.parent.mkdir(parents=True, exist_ok=True)
    tmp = dst.with_name(dst.name + ".tmp")
    source, target = sqlite3.connect(src), sqlite3.connect(tmp)
    try:
        source.backup(target)
    finally:
        target.close()
        source.close()
    os.replace(tmp, dst)


def revisions(path):
    con = sqlite3.connect(path)
    try:
        return sorted(r[0] for r in con.execute("SELECT version_num FROM alembic_version"))
    except sqlite3.OperationalError:
        return None  # no Alembic here (Flower 1.21-1.25)
    finally:
        con.close()


def image_revisions():
    try:
        from alembic.script import ScriptDirectory
        from sqlalchemy import create_engine
        from flwr.supercore.state.alembic.utils import build_alembic_config
    except ImportError:
        return None, None
    script = ScriptDirectory.from_config(build_alembic_config(create_engine("sqlite://")))
    return set(script.get_heads()), {r.revision for r in script.walk_revisions()}


if restore and not (backups / (restore + ".restored")).exists():
    src = backups / restore
    if not src.is_file():
        refuse(f"superlink.persistence.restore names backups/{restore}, which does not exist; backups: {listing()}")
    if state.exists():
        copy(state, backups / f"replaced-{now()}.db")
    for suffix in ("-wal", "-shm"):
        Path(str(state) + suffix).unlink(missing_ok=True)
    copy(src, state)
    marker.unlink(missing_ok=True)
    (backups / (restore + ".restored")).write_text(now() + "\n")
    say(f"restored backups/{restore} (the state it replaced is backups/replaced-*.db); remove "
        "superlink.persistence.restore from the stack's config")

if not state.exists() or state.stat().st_size == 0:
    say(f"no state yet at {state}: Flower {version} creates it")
    marker.write_text(version + "\n")
    sys.exit(0)

writer = marker.read_text().strip() if marker.exists() else "unknown"
current = revisions(state)
heads, known = image_revisions()
unknown = [r for r in current or [] if known is not None and r not in known]
if unknown:
    refuse(
        f"the state at {state} is at schema revision {', '.join(unknown)}, which Flower {version} does not know: "
        f"Flower {writer} wrote it, and Flower migrates state one way. Run Flower {writer} again (superlink image "
        f"or version), or restore a backup taken before the upgrade: set superlink.persistence.restore to one of "
        f"{listing()} and `pulumi up` (docs/operations.md)."
    )
migrating = known is not None and current is not None and set(current) != heads
if migrating or writer != version:
    name = f"{writer}-{'+'.join(current) if current else 'no-revision'}-{now()}.db"
    copy(state, backups / name)
    ours = sorted(
        (p for p in backups.glob("*.db") if not p.name.startswith("replaced-")), key=lambda p: p.stat().st_mtime
    )
    for old in ours[:-keep] if keep > 0 else []:
        old.unlink()
    say(f"backed up the state of Flower {writer} (revisions {current}) to backups/{name} before Flower {version} "
        f"opens it{' and migrates it to ' + ', '.join(sorted(heads)) if migrating else ''}")
else:
    say(f"state at {state}: Flower {version}, revisions {current}, nothing to back up")
marker.write_text(version + "\n")
""".replace("EXIT", str(REFUSED_EXIT))


def container(plan: FederationPlan, superlink: Container) -> dict[str, Any]:
    """The init container: the SuperLink container's image, user, resources and state
    mount, Python instead of Flower's entry point."""
    persistence = plan.spec.superlink.persistence
    state_mount = [m for m in superlink["volumeMounts"] if m["name"] == STATE_VOLUME]
    scratch = [m for m in superlink["volumeMounts"] if m["mountPath"] == "/tmp"]
    return {
        "name": CONTAINER,
        "image": superlink["image"],
        "imagePullPolicy": superlink["imagePullPolicy"],
        "command": ["python", "-c", GUARD],
        "args": [STATE_FILE, str(plan.version), str(persistence.backups.keep), persistence.restore or ""],
        "resources": superlink["resources"],
        "securityContext": superlink["securityContext"],
        "terminationMessagePolicy": "FallbackToLogsOnError",
        "volumeMounts": scratch + state_mount,
    }
