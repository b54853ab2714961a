"""`python -m flower_federation`: the command line (cli/main.py).

Run by a Python that lacks the project's packages (a system `python3`, not `.venv/bin/python`), it says which
module is missing and how to get it, in one paragraph with exit code 2, rather than ending in a traceback. A
missing module of flower_federation itself is a bug and keeps its traceback."""

import gc
import os
import sys

# A command runs once and exits, and nearly everything it makes lives until then: the Pulumi SDK's classes,
# pydantic's models, the render. Python's full collections walk all of it, again
# each time the long-lived objects grew by a quarter while importing, and once more at exit: about a quarter of a
# 16-pool render's CPU (issue 36: 2.4 s -> 1.8 s of one core), for cyclic garbage a one-shot command never needs
# back. So no automatic full collection (young objects are still collected as by default), and none at exit
# (`gc.freeze()`: the operating system frees the process's memory; a finalizer of an object in a cycle then does
# not run, and no command relies on one). Peak memory: +1 to +3 MiB on `make bench`'s rows, +10 MiB on a 10,000-key
# hub's `diff` (140 -> 149 MiB, 2.68 -> 2.18 s of CPU).
FULL_COLLECTION_NEVER = 1 << 30


def missing_module(name: str) -> str:
    return (
        f"error: this Python ({sys.executable}) has no module '{name}', which flower_federation needs "
        "(requirements.txt). Run it with the project's venv: `make render` (or `make validate`) sets up .venv and "
        "runs it there; after that, `.venv/bin/python -m flower_federation ...` runs any command."
    )


def run() -> int:
    try:
        from flower_federation.cli.main import main

        return main()
    except ModuleNotFoundError as err:
        if not err.name or err.name.partition(".")[0] == "flower_federation":
            raise
        print(missing_module(err.name), file=sys.stderr)
        return 2


# No pydantic plugins (entry points of the `pydantic` group, e.g. an observability SDK's) hook into validating the
# stack's config, which holds its secrets (node keys, kubeconfigs); finding them scanned every installed
# distribution's metadata on each command (~15 ms, issue 36). An explicit PYDANTIC_DISABLE_PLUGINS (`""` loads all)
# is kept.
os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")
young, middle, _ = gc.get_threshold()
gc.set_threshold(young, middle, FULL_COLLECTION_NEVER)
code = run()
gc.freeze()
sys.exit(code)
