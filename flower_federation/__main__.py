"""`python -m flower_federation`: the command line (cli/main.py).

Run by a Python that lacks the project's packages (a system `python3`, not `.venv/bin/python`), it says which
module is missing and how to get it, in one paragraph with exit code 2, rather than ending in a traceback. A
missing module of flower_federation itself is a bug and keeps its traceback."""

import sys


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


sys.exit(run())
