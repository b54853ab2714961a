"""How a SuperLink of a Flower version without a lock around its state is started.

Flower 1.21-1.27 create the SuperLink's state (LinkStateFactory.state(),
ObjectStoreFactory.store()) from whichever gRPC worker thread first needs it, without a
lock: 1.26-1.27 create and cache it lazily, 1.21-1.25 build a new SQL state on every call
(and cache the in-memory one lazily). From 1.26 that creation runs Alembic (SqlMixin.
initialize -> run_migrations -> alembic command.upgrade), whose `alembic.context` is a
module-level proxy each EnvironmentContext installs and deletes: threads creating the
state at once (SuperNodes, the CLI and the SuperLink's own SuperExec calling as it starts
or restarts) fail with KeyError 'script', "database is locked" or "table ... already
exists", or crash the process (SIGSEGV). The caller gets gRPC UNKNOWN, which neither a
SuperNode nor a SuperExec retries: they exit, and the SuperLink never restarts its
SuperExec child. Migrating the file beforehand (the former init container) does not
help: every creation runs Alembic again.

Flower 1.28 took a lock and creates the state before it starts its servers. For older
versions the SuperLink runs through the wrapper below: it makes both factories create
their instance when they are constructed (in run_superlink's main thread, before any
server starts; true of 1.21-1.27) and then calls Flower's own entry point, whose parser
reads the unchanged command line.
"""

from __future__ import annotations

from typing import Optional

from .dialects import FlowerVersion

STATE_INIT_LOCKED_SINCE = FlowerVersion(1, 28, 0)
# flower-superlink is flwr.server.app:run_superlink in every version that needs this, and
# both factories are importable from these modules there (read off the 1.21-1.27 wheels).
SUPERLINK_EAGER_STATE_SCRIPT = (
    "import sys\n"
    "from flwr.server.superlink.linkstate import LinkStateFactory\n"
    "from flwr.supercore.object_store import ObjectStoreFactory\n"
    "from flwr.server.app import run_superlink\n"
    "def eager(cls, create):\n"
    "    init = cls.__init__\n"
    "    def __init__(self, *args, **kwargs):\n"
    "        init(self, *args, **kwargs)\n"
    "        create(self)\n"
    "    cls.__init__ = __init__\n"
    "eager(ObjectStoreFactory, ObjectStoreFactory.store)\n"
    "eager(LinkStateFactory, LinkStateFactory.state)\n"
    "sys.argv[0] = 'flower-superlink'\n"
    "sys.exit(run_superlink())\n"
)


def superlink_command(version: FlowerVersion) -> Optional[list[str]]:
    """The SuperLink container's `command`, or None for the image's entrypoint
    (flower-superlink). `python` is the image's interpreter, the one Flower runs on."""
    if version < STATE_INIT_LOCKED_SINCE:
        return ["python", "-c", SUPERLINK_EAGER_STATE_SCRIPT]
    return None
