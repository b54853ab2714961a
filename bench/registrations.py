"""Run the render path for a stack settings file and write its registration list as JSON,
for `bench/floor.py` to replay.

    python bench/registrations.py STACK_FILE OUT.json

It runs `flower_federation.cli.offline.run_program` (what `python -m flower_federation render` runs) on
the file's config and writes, in the order the mock monitor saw them:

    {"project", "stack",
     "modules": [pulumi / pulumi_kubernetes / pulumi_tls / pulumi_random modules the run loaded],
     "registrations": [{"type", "name", "urn", "custom", "parent", "read_id", "inputs"}]}

`parent` is the index of the parent registration in the list (null: the stack);
`read_id` is set for `.get()` reads of existing objects. `inputs` are as the monitor
received them (wire names, numbers as floats); a Pulumi secret is written as
{"$secret": value}, so the floor wraps it as a secret again.
"""

from __future__ import annotations

import json
import sys
import threading
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

SECRET_KEY = "$secret"
SDK_PACKAGES = ("pulumi", "pulumi_kubernetes", "pulumi_tls", "pulumi_random")


def _record_parents() -> dict[tuple[str, str], tuple[str, str]]:
    """Patch the mock monitor (in this process only) to note each registration's URN
    and parent URN: the mocks' new_resource is not told the parent."""
    from pulumi.runtime.mocks import MockMonitor

    seen: dict[tuple[str, str], tuple[str, str]] = {}
    lock = threading.Lock()

    def wrap(method):
        def wrapper(self, request):
            response = method(self, request)
            with lock:
                seen[(request.type, request.name)] = (response.urn, request.parent)
            return response

        return wrapper

    MockMonitor.RegisterResource = wrap(MockMonitor.RegisterResource)
    MockMonitor.ReadResource = wrap(MockMonitor.ReadResource)
    return seen


def encode(value: Any) -> Any:
    from pulumi.runtime import rpc

    if rpc.is_rpc_secret(value):
        return {SECRET_KEY: encode(rpc.unwrap_rpc_secret(value))}
    if isinstance(value, dict):
        if rpc._special_sig_key in value:
            raise ValueError(f"cannot replay a special Pulumi value (unknown, asset, resource reference): {value!r}")
        return {k: encode(v) for k, v in value.items()}
    if isinstance(value, list):
        return [encode(v) for v in value]
    if value == rpc.UNKNOWN:
        raise ValueError("unknown value in inputs: render with preview=False")
    return value


def loaded_sdk_modules() -> list[str]:
    """SDK modules really executed (a lazily registered subpackage nobody touched does
    not count)."""
    return sorted(
        name
        for name, module in list(sys.modules.items())
        if name.split(".")[0] in SDK_PACKAGES and module is not None and not is_lazy(module)
    )


def is_lazy(module: Any) -> bool:
    # importlib's and pulumi._utils' lazy modules turn into plain modules when loaded;
    # type() does not trigger the load.
    return type(module).__name__ == "_LazyModule"


def registrations(stack_file: Path) -> dict[str, Any]:
    import argparse

    from flower_federation.cli.stack_file import read_stack_file  # the CLI's own reader

    config, stack = read_stack_file(argparse.Namespace(config_file=str(stack_file), stack=None))
    seen = _record_parents()
    from flower_federation import program
    from flower_federation.cli.offline import run_program

    run = run_program(config, stack)
    index_by_urn: dict[str, int] = {}
    out = []
    for i, r in enumerate(run.registrations):
        urn, parent_urn = seen[(r.type, r.name)]
        index_by_urn[urn] = i
        parent = index_by_urn.get(parent_urn) if parent_urn else None
        if parent_urn and parent is None and not parent_urn.split("::")[2].endswith("pulumi:pulumi:Stack"):
            raise RuntimeError(f"{r.type} {r.name}: parent {parent_urn} registered after it")
        out.append(
            {
                "type": r.type,
                "name": r.name,
                "urn": urn,
                "custom": bool(r.custom),
                "parent": parent,
                "read_id": r.read_id,
                "inputs": encode(r.inputs),
            }
        )
    return {"project": program.PROJECT, "stack": stack, "modules": loaded_sdk_modules(), "registrations": out}


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    data = registrations(Path(argv[0]))
    Path(argv[1]).write_text(json.dumps(data, indent=1, sort_keys=False) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
