"""How a SuperLink of a Flower version with unsafe concurrent state access is started.

1. State creation (Flower 1.21-1.27). LinkStateFactory.state() and
   ObjectStoreFactory.store() create the state from whichever gRPC worker thread first
   needs it, without a lock: 1.26-1.27 create and cache it lazily, 1.21-1.25 build a new
   SQL state on every call (and cache the in-memory one lazily). From 1.26 that creation
   runs Alembic (SqlMixin.initialize -> run_migrations -> alembic command.upgrade), whose
   `alembic.context` is a module-level proxy each EnvironmentContext installs and
   deletes: threads creating the state at once (SuperNodes, the CLI and the SuperLink's
   own SuperExec calling as it starts or restarts) fail with KeyError 'script', "database
   is locked" or "table ... already exists", or crash the process (SIGSEGV). The caller
   gets gRPC UNKNOWN, which neither a SuperNode nor a SuperExec retries: they exit, and
   the SuperLink never restarts its SuperExec child. Migrating the file beforehand (the
   former init container) does not help: every creation runs Alembic again. Flower 1.28
   took a lock and creates the state before it starts its servers; the wrapper makes both
   factories create their instance when they are constructed (in run_superlink's main
   thread, before any server starts; true of 1.21-1.27).

2. Object preregistration (Flower 1.26-1.30). SqlObjectStore.preregister commits each
   node of a message's object tree in its own transaction, children first. Objects are
   content-addressed, so messages share children; a concurrent delete() of another
   message (ConfirmMessageReceived) can remove a shared child between the child's and
   the parent's transaction: "FOREIGN KEY constraint failed" on INSERT INTO
   object_children, UNKNOWN to the SuperNode pushing a reply, a round that never gets it.
   Flower 1.31 runs the whole tree in one session; the wrapper does the same by opening
   the session around the original method (SqlMixin.session() is re-entrant: the
   per-node sessions join it).

3. Refused request bodies (Flower 1.40+, the HTTP Fleet API). A body that fails to parse
   (any unauthenticated POST from the internet) leaves a reference cycle (the FlowerError's
   traceback, Starlette's BaseHTTPMiddleware frames, the Request with its cached body) that
   only a full garbage collection frees, and CPython runs one only once its long-lived
   objects grew by a quarter: behind the Fleet-only proxy's bounds (5 uploads of 8 MiB at
   a time), a sustained flood piled up ~11 waves of bodies, the SuperLink crept from 141 to
   777 MiB and its container past its 768Mi limit while a round ran (docs/benchmarks.md,
   tests/test_fleet_proxy_abuse.py). glibc then keeps the freed heap. The wrapper runs a full
   collection on a daemon thread whenever the resident memory grew by GROWTH_BYTES since the
   last, and has glibc serve allocations of 128 KiB and more with mmap (returned when freed).

The wrapper then calls Flower's own entry point (what the image's `flower-superlink` console
script runs), whose parser reads the unchanged command line.
Imports and construction order were read off the 1.21-1.30 wheels.
"""

from __future__ import annotations

from typing import Optional

from flower_federation.flower.versions import FlowerVersion

STATE_INIT_LOCKED_SINCE = FlowerVersion(1, 28, 0)
SQL_OBJECT_STORE_SINCE = FlowerVersion(1, 26, 0)
PREREGISTER_ATOMIC_SINCE = FlowerVersion(1, 31, 0)
BODY_CYCLES_SINCE = FlowerVersion(1, 40, 0)  # the HTTP Fleet API (Starlette)
# A full collection of a SuperLink's heap takes ~100 ms (150,000 objects, 2 cores of 2026): run one when the
# resident memory grew by GROWTH_BYTES since the last (looked at every WATCH_SECONDS), never on a timer, so an
# idle SuperLink pays nothing and a flooded one about one collection per 64 MiB of refused bodies.
WATCH_SECONDS = 0.5
GROWTH_BYTES = 64 * 1024 * 1024
M_MMAP_THRESHOLD = -3  # glibc's mallopt parameter
MMAP_THRESHOLD_BYTES = 128 * 1024

_EAGER_STATE = (
    "from flwr.server.superlink.linkstate import LinkStateFactory\n"
    "from flwr.supercore.object_store import ObjectStoreFactory\n"
    "def eager(cls, create):\n"
    "    init = cls.__init__\n"
    "    def __init__(self, *args, **kwargs):\n"
    "        init(self, *args, **kwargs)\n"
    "        create(self)\n"
    "    cls.__init__ = __init__\n"
    "eager(ObjectStoreFactory, ObjectStoreFactory.store)\n"
    "eager(LinkStateFactory, LinkStateFactory.state)\n"
)
ATOMIC_PREREGISTER = (
    "from flwr.supercore.object_store.sql_object_store import SqlObjectStore\n"
    "preregister = SqlObjectStore.preregister\n"
    "def atomic_preregister(self, *args, **kwargs):\n"
    "    with self.session():\n"
    "        return preregister(self, *args, **kwargs)\n"
    "SqlObjectStore.preregister = atomic_preregister\n"
)
BOUNDED_BODIES = (
    "import ctypes, gc, os, threading, time\n"
    "try:\n"
    f"    ctypes.CDLL(None).mallopt({M_MMAP_THRESHOLD}, {MMAP_THRESHOLD_BYTES})\n"
    "except (OSError, AttributeError):\n"
    "    pass  # not glibc: the collections alone\n"
    "def resident():\n"
    "    with open('/proc/self/statm') as statm:\n"
    "        return int(statm.read().split()[1]) * os.sysconf('SC_PAGE_SIZE')\n"
    "def collect():\n"
    "    after = resident()\n"
    "    while True:\n"
    f"        time.sleep({WATCH_SECONDS})\n"
    f"        if resident() - after > {GROWTH_BYTES}:\n"
    "            gc.collect()\n"
    "            after = resident()\n"
    "threading.Thread(target=collect, name='collect-refused-bodies', daemon=True).start()\n"
)
# The image's `flower-superlink` console script: flwr.server.app:run_superlink before the HTTP era,
# flwr.superlink.cli:flower_superlink since (read off the 1.40.0-1.42.0 and 1.43 nightly wheels).
SUPERLINK_ENTRY = (
    "from flwr.server.app import run_superlink\nsys.argv[0] = 'flower-superlink'\nsys.exit(run_superlink())\n"
)
HTTP_ERA_SUPERLINK_ENTRY = (
    "from flwr.superlink.cli import flower_superlink\nsys.argv[0] = 'flower-superlink'\nsys.exit(flower_superlink())\n"
)


def superlink_wrapper(version: FlowerVersion) -> Optional[str]:
    """The Python the SuperLink runs before Flower's entry point, or None if this
    version needs none."""
    parts = []
    if version < STATE_INIT_LOCKED_SINCE:
        parts.append(_EAGER_STATE)
    if SQL_OBJECT_STORE_SINCE <= version < PREREGISTER_ATOMIC_SINCE:
        parts.append(ATOMIC_PREREGISTER)
    if version >= BODY_CYCLES_SINCE:
        parts.append(BOUNDED_BODIES)
    if not parts:
        return None
    entry = HTTP_ERA_SUPERLINK_ENTRY if version >= BODY_CYCLES_SINCE else SUPERLINK_ENTRY
    return "import sys\n" + "".join(parts) + entry


def superlink_command(version: FlowerVersion) -> Optional[list[str]]:
    """The SuperLink container's `command`, or None for the image's entrypoint
    (flower-superlink). `python` is the image's interpreter, the one Flower runs on."""
    script = superlink_wrapper(version)
    return ["python", "-c", script] if script else None
