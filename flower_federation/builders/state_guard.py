"""The SuperLink's state across Flower upgrades: an init container `state-guard` that
runs before the SuperLink, in its image (its own Python and Flower: no image of ours),
on the state volume.

Why: a SuperLink opening a state file that an older Flower wrote migrates it in place
(Alembic, Flower 1.26+), one way: 1.41's state opened by 1.42 is at revision
`d9bd9d502cf9`, which 1.41 then refuses (`Can't locate revision`, exit 105). So, before
Flower starts:

0. Copies cut short by an earlier start (`backups/*.tmp`: a kill, a full volume) are
   removed; a copy is written under a temporary name and renamed when whole.
1. `superlink.persistence.restore: <backup>`, once each time the setting names it (a
   `<backup>.restored` marker says it was done and is dropped when the setting names
   another backup or none; a restart with the setting unchanged says "already restored,
   not applied"): the current state is kept as `backups/replaced-<writer>-<revisions>-<time>.db`,
   the backup takes its place.
2. A state at a schema revision this image's Flower does not know (a downgrade), or an
   Alembic state on an image without Alembic (1.21-1.25), is refused: the log and the
   termination message (`kubectl describe pod`) say which Flower wrote it, the backups
   there are and how to restore one; the SuperLink never starts on it (Init:Error).
3. A state whose recorded writer is another Flower version (an upgrade, a downgrade, a
   state from before the guard) is first copied with SQLite's online backup API,
   consistent even with a SuperLink still holding the file, to
   `backups/<writer>-<revisions>-<time>.db`. Only a change of writer is copied: a retried
   start of the same version (a migration cut short by an OOM, a `pulumi up` retried)
   copies nothing, so it cannot push out the clean backup taken before the upgrade.
   Pruning keeps the newest copy of each of the `keep` newest states (writer and
   revisions); `replaced-*` by the same rule.
4. Before any copy, the volume's free space is checked against the file's size: too
   little is refused (the sizes, the volume and `persistence.size`), as is any other
   I/O or SQLite error: the refusal path, never a traceback.
5. Before a migration (or a restore) the guard makes sure no other process has the state
   open: Flower 1.43's revision `4c9b3f185c5b` copies every message's metadata and must run
   "without concurrent application writes", and no Alembic migration of ours expects a
   writer beside it. Found by SQLite's own locks, which are POSIX byte-range locks on the
   files: the kernel shows them to every process using the volume, whichever container
   or pod it runs in, as root or not. (/proc/*/fd would show only this pod's processes,
   only with shareProcessNamespace, only of the same user, and never another pod's on
   the same ReadWriteOnce volume of the node: an old SuperLink pod still terminating, a
   `kubectl debug` pod.) Two probes, both at once, no waiting: the shared lock every WAL
   connection holds on byte 128 of `state.db-shm` (SQLite's "DMS" lock, walformat.html:
   any open connection, idle or not), and `BEGIN EXCLUSIVE` with no busy timeout (a
   transaction under way, in either journal mode). Refused: the log and termination
   message say what holds it; nothing is copied or migrated; the pod retries the init
   container by itself, and passes once the other process is gone. What starts after
   the check (between the guard and the SuperLink) it cannot see: the StatefulSet runs
   one SuperLink, and nothing of ours opens the file.
6. `state.db.flower-version` records the Flower version that runs next (the writer).

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
import datetime, fcntl, hashlib, os, sqlite3, sys
from pathlib import Path

state, version, keep, restore, size = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5]
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


def footprint(path):
    return sum(q.stat().st_size for q in (path, Path(str(path) + "-wal")) if q.exists())


def room_for(src, what):
    # A copy that cannot finish would leave the volume full and the SuperLink unable to write:
    # refuse before copying, with the sizes and the setting that fixes it.
    need = footprint(src) * 11 // 10 + (1 << 20)
    st = os.statvfs(state.parent)
    free = st.f_bavail * st.f_frsize
    if free < need:
        refuse(
            f"the state volume {state.parent} has {free} bytes free; {what} ({footprint(src)} bytes) needs about "
            f"{need}. Raise superlink.persistence.size (now {size}; the StorageClass must allow volume expansion) "
            f"or copy old backups off and delete them ({listing()}); docs/operations.md"
        )


def copy(src, dst):
    # SQLite's online backup: a consistent copy even while another process writes. Into a temporary
    # name first, so a copy cut short (a kill, a full volume) is never taken for a backup.
    dst.parent.mkdir(parents=True, exist_ok=True)
    tmp = dst.with_name(dst.name + ".tmp")
    tmp.unlink(missing_ok=True)
    source, target = sqlite3.connect(src), sqlite3.connect(tmp)
    try:
        source.backup(target)
    finally:
        target.close()
        source.close()
    os.replace(tmp, dst)


def digest(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()[:16]


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


def holders(path):
    # What shows another process has the state open (flower_federation/builders/state_guard.py, step 5). Run
    # with no connection of the guard's own open: POSIX locks are per process, so a lock of ours would hide theirs.
    held = []
    try:
        fd = os.open(str(path) + "-shm", os.O_RDWR)  # never created here: no -shm, no WAL connection
    except FileNotFoundError:
        fd = None
    if fd is not None:
        try:
            fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, 128)
        except OSError:
            held.append(f"an open connection (SQLite's shared lock on byte 128 of {path.name}-shm)")
        else:
            fcntl.lockf(fd, fcntl.LOCK_UN, 1, 128)
        finally:
            os.close(fd)
    con = sqlite3.connect(path, timeout=0, isolation_level=None)
    try:
        con.execute("BEGIN EXCLUSIVE")
        con.execute("ROLLBACK")
    except sqlite3.OperationalError as e:
        held.append(f"a transaction under way (BEGIN EXCLUSIVE: {e})")
    finally:
        con.close()
    return held


def alone(path, what):
    held = holders(path)
    if held:
        refuse(
            f"another process has the state at {path} open: {'; '.join(held)}. {what} must run without concurrent "
            "writers, so nothing was copied or migrated. Stop it (an older SuperLink pod still running on this "
            "volume, a `kubectl exec`/`kubectl debug` session with sqlite3, a backup Job); this init container is "
            "retried and passes once it is gone (docs/operations.md)."
        )


def identity(revs):
    return "+".join(revs) if revs else "no-revision"


def prune(prefix):
    # Backups are named <writer>-<revisions>-<time>.db: one state per (writer, revisions). The newest copy
    # of each of the `keep` newest states is kept, so copies of one state never push out another state's
    # only backup (the clean one taken before an upgrade). Each replaced-* holds work a restore overwrote:
    # a state of its own, the `keep` newest kept.
    newest = {}
    for p in backups.glob(prefix + "*.db"):
        if not prefix and p.name.startswith("replaced-"):
            continue
        key, _, stamp = p.name[len(prefix):-3].rpartition("-")
        key = p.name if prefix else key
        newest.setdefault(key, []).append((stamp, p.stat().st_mtime, p))
    ranked = sorted(newest.values(), key=lambda copies: max(copies)[:2], reverse=True)
    for rank, copies in enumerate(ranked):
        copies.sort(reverse=True)
        for _, _, old in copies[1:] if rank < keep else copies:
            old.unlink()
            say(f"pruned backups/{old.name}")


def main():
    for leftover in backups.glob("*.tmp") if backups.is_dir() else []:
        leftover.unlink()
        say(f"removed backups/{leftover.name}, a copy that was cut short")
    # A restore applies once each time the setting names it: its marker is dropped when the setting
    # names another backup or none, so setting the same name again later restores again.
    for done in backups.glob("*.restored") if backups.is_dir() else []:
        if done.name != restore + ".restored":
            done.unlink()
    done = backups / (restore + ".restored")
    if restore and done.exists():
        say(f"already restored, not applied: backups/{restore} was restored {done.read_text().strip()}; "
            "remove superlink.persistence.restore from the stack's config")
    elif restore:
        src = backups / restore
        if not src.is_file():
            refuse(f"superlink.persistence.restore names backups/{restore}, which does not exist; backups: {listing()}")
        replaced = ""
        if state.exists():
            alone(state, "Restoring " + restore)
            room_for(state, "keeping the state that the restore replaces")
            old_writer = marker.read_text().strip() if marker.exists() else "unknown"
            replaced = f"replaced-{old_writer}-{identity(revisions(state))}-{now()}.db"
            copy(state, backups / replaced)
            prune("replaced-")
        room_for(src, "restoring " + restore)
        for suffix in ("-wal", "-shm"):
            Path(str(state) + suffix).unlink(missing_ok=True)
        copy(src, state)
        # The backup stays in backups/ as this state's copy: recorded as this Flower's, so it is not copied again.
        marker.write_text(version + "\n")
        kept = f"backups/{replaced or 'none'}"
        done.write_text(f"at {now()} (state {digest(state)}, the one it replaced kept as {kept})\n")
        say(f"restored backups/{restore} (the state it replaced is backups/{replaced or 'none'}); remove "
            "superlink.persistence.restore from the stack's config")

    if not state.exists() or state.stat().st_size == 0:
        say(f"no state yet at {state}: Flower {version} creates it")
        marker.write_text(version + "\n")
        return

    writer = marker.read_text().strip() if marker.exists() else "unknown"
    current = revisions(state)
    heads, known = image_revisions()
    if known is None and current is not None:
        refuse(
            f"the state at {state} is at schema revision {', '.join(current)} (Flower {writer} migrated it with "
            f"Alembic), which Flower {version} cannot read: it predates Alembic (1.21-1.25). Run Flower {writer} "
            f"again, or restore a backup taken before: set superlink.persistence.restore to one of {listing()} "
            "(docs/operations.md)."
        )
    unknown = [r for r in current or [] if known is not None and r not in known]
    if unknown:
        refuse(
            f"the state at {state} is at schema revision {', '.join(unknown)}, which Flower {version} does not "
            f"know: Flower {writer} wrote it, and Flower migrates state one way. Run Flower {writer} again (superlink "
            f"image or version), or restore a backup taken before the upgrade: set superlink.persistence.restore to "
            f"one of {listing()} and `pulumi up` (docs/operations.md)."
        )
    migrating = known is not None and current is not None and set(current) != heads
    if migrating:
        alone(state, f"Flower {version}'s migration from {', '.join(current)} to {', '.join(sorted(heads))}")
    if writer != version:
        # Only a change of writer is backed up: a retried start of the same Flower (a migration cut short,
        # a `pulumi up` retried) finds its own version recorded and copies nothing, so it cannot prune the
        # backup taken before the upgrade.
        name = f"{writer}-{identity(current)}-{now()}.db"
        room_for(state, "the backup before Flower " + version + " opens it")
        copy(state, backups / name)
        prune("")
        say(f"backed up the state of Flower {writer} (revisions {current}) to backups/{name} before Flower {version} "
            f"opens it{' and migrates it to ' + ', '.join(sorted(heads)) if migrating else ''}")
    elif migrating:
        say(f"state at {state}: revisions {current}, which Flower {version} migrates to {sorted(heads)}; it is "
            f"already recorded as their writer (a start cut short, or a restore), so nothing is copied again; "
            f"backups: {listing()}")
    else:
        say(f"state at {state}: Flower {version}, revisions {current}, nothing to back up")
    marker.write_text(version + "\n")


def foreign(path):
    # The state's files this process may not open for writing (another uid's: a SuperLink image of another
    # user, an fsGroup changed), each with its owner: SQLite says only "unable to open database file".
    out = []
    for p in (path, Path(str(path) + "-wal"), Path(str(path) + "-shm")):
        try:
            with open(p, "r+b"):
                pass
        except PermissionError:
            st = p.stat()
            out.append(f"{p.name} (uid {st.st_uid}, gid {st.st_gid}, mode {st.st_mode & 0o777:o})")
        except OSError:
            pass
    return out


try:
    main()
except (OSError, sqlite3.Error) as e:
    if theirs := foreign(state):
        refuse(f"this container (uid {os.getuid()}) may not open the state's {', '.join(theirs)}: another user's "
               f"SuperLink made them, and may still have the state open, so nothing was copied, migrated or started. "
               f"Run the SuperLink as their owner (podSecurityContext.runAsUser), or, with every SuperLink of this "
               f"state stopped, give them to uid {os.getuid()} (SQLite makes a missing -wal or -shm anew).")
    # A full or read-only volume, a corrupt file: the refusal path (exit code, termination message), never
    # a traceback the operator has to decode.
    refuse(f"could not guard the state at {state} ({type(e).__name__}: {e}); nothing was started. Volume "
           f"{state.parent}: superlink.persistence.size is {size}; backups: {listing() if backups.is_dir() else []}")
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
        "args": [
            STATE_FILE,
            str(plan.version),
            str(persistence.backups.keep),
            persistence.restore or "",
            persistence.size,
        ],
        "resources": superlink["resources"],
        "securityContext": superlink["securityContext"],
        "terminationMessagePolicy": "FallbackToLogsOnError",
        "volumeMounts": scratch + state_mount,
    }
