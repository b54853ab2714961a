"""The Pulumi SDK's floor for a render: replay a render's registrations with no logic.

    python bench/floor.py [--check] [--by-token] REGS.json      (written by bench/registrations.py)

Imports the pulumi / pulumi_kubernetes / pulumi_tls / pulumi_random modules the render loaded
(listed in the file), installs a mock runtime equivalent to the offline renderer's
(flower_federation/cli/offline.py: a `pulumi.runtime.Mocks` whose new_resource returns
`(name-id, inputs)`, one fresh event loop and contextvars.Context, preview=False), and
registers the same resources in the same order with the same parents: components as
`pulumi.ComponentResource(type, name, None, opts)`, custom resources through the SDK class
of their type token (`pulumi_kubernetes.apps.v1.StatefulSet`, `pulumi_tls.PrivateKey`,
`pulumi_random.RandomPassword`, ...: what those classes do with inputs, aliases and
secret outputs is the SDK's cost, not the program's), with the recorded inputs as keyword arguments
(reads through the class's `.get`), secrets wrapped as secrets again; then waits for
every registration: the typed SDK's floor, which also imports the Kubernetes classes' modules (the render
registers Kubernetes objects by token, without them). Nothing from this project
(`components`, `federation`) is imported: their import time belongs to the render.

`--by-token` registers every Kubernetes object as a bare `pulumi.CustomResource` of its type token (reads by
id), importing no Kubernetes class, and the pulumi-tls and pulumi-random resources through their classes, as
the render does: the floor of the render's way of registering, for the same registrations (a little below it:
without the provider version, aliases and secret outputs flower_federation/shell/kubernetes.py adds to each).

Prints the number of registrations the mock monitor saw, and the number of SDK modules
loaded, to stdout. `--check` (not timed) also compares what the monitor received with
the file: the same URNs (a URN names the parent's type) and the same inputs, secrets
still secret; it exits 1 on any difference.
"""

from __future__ import annotations

import gc

# The collector as `python -m flower_federation` sets it (flower_federation/__main__.py: no automatic full
# collection, none at exit), before the SDK is imported: the floor's own imports and registrations are spared the
# same walks, so render / floor compares the work, not the collector.
_young, _middle, _ = gc.get_threshold()
gc.set_threshold(_young, _middle, 1 << 30)


import asyncio  # noqa: E402
import contextvars  # noqa: E402
import importlib  # noqa: E402
import json  # noqa: E402
import sys  # noqa: E402
from typing import Any  # noqa: E402

import pulumi  # noqa: E402
from pulumi.runtime.stack import run_pulumi_func  # noqa: E402

SECRET_KEY = "$secret"


def import_sdk_modules(names: list[str]) -> None:
    for name in names:
        module = importlib.import_module(name)
        if type(module).__name__ == "_LazyModule":
            # A lazily registered module the render really executed: load it too.
            getattr(module, "__bench_force_load__", None)


class FloorMocks(pulumi.runtime.Mocks):
    def __init__(self, keep: bool = False) -> None:
        self.seen = 0
        self.keep = keep
        self.received: dict[tuple[str, str], Any] = {}
        self.thread_loops: set[asyncio.AbstractEventLoop] = set()

    def new_resource(self, args: pulumi.runtime.MockResourceArgs):
        self.thread_loops.add(asyncio.get_event_loop())
        self.seen += 1
        if self.keep:
            self.received[(args.typ, args.name)] = args.inputs
        if args.resource_id:
            return args.resource_id, {}
        return f"{args.name}-id", dict(args.inputs)

    def call(self, args: pulumi.runtime.MockCallArgs):
        return {}, None


def decode(value: Any) -> Any:
    if isinstance(value, dict):
        if len(value) == 1 and SECRET_KEY in value:
            return pulumi.Output.secret(decode(value[SECRET_KEY]))
        return {k: decode(v) for k, v in value.items()}
    if isinstance(value, list):
        return [decode(v) for v in value]
    return value


def sdk_class(token: str) -> Any:
    """The SDK class registered under a type token, e.g. `kubernetes:apps/v1:StatefulSet`
    -> pulumi_kubernetes.apps.v1.StatefulSet, `tls:index/privateKey:PrivateKey` ->
    pulumi_tls.PrivateKey; None for a token without one (custom resources of a CRD)."""
    package, module, kind = token.split(":")
    if package in ("tls", "random"):  # pulumi_tls.PrivateKey, pulumi_random.RandomPassword
        return getattr(importlib.import_module(f"pulumi_{package}"), kind, None)
    group, _, version = module.rpartition("/")
    group = group.split(".")[0] or "core"
    try:
        return getattr(importlib.import_module(f"pulumi_kubernetes.{group}.{version}"), kind, None)
    except ImportError:
        return None


def snake(key: str) -> str:
    return "".join("_" + c.lower() if c.isupper() else c for c in key)


def replay(registrations: list[dict[str, Any]], by_token: bool = False) -> None:
    made: list[pulumi.Resource] = []
    for r in registrations:
        parent = made[r["parent"]] if r["parent"] is not None else None
        opts = pulumi.ResourceOptions(parent=parent)
        if not r["custom"]:
            made.append(pulumi.ComponentResource(r["type"], r["name"], None, opts))
            continue
        inputs = decode(r["inputs"])
        cls = None if by_token and r["type"].startswith("kubernetes:") else sdk_class(r["type"])
        if r["read_id"] is not None and cls is None:
            made.append(
                pulumi.CustomResource(r["type"], r["name"], {}, pulumi.ResourceOptions(parent=parent, id=r["read_id"]))
            )
        elif r["read_id"] is not None:
            made.append(cls.get(r["name"], r["read_id"], opts=opts))
        elif cls is not None:
            kwargs = {snake(k): v for k, v in inputs.items() if k not in ("apiVersion", "kind")}
            made.append(cls(r["name"], **kwargs, opts=opts))
        else:
            made.append(pulumi.CustomResource(r["type"], r["name"], inputs, opts))


def run(data: dict[str, Any], check: bool = False, by_token: bool = False) -> tuple[int, list[str]]:
    mocks = FloorMocks(keep=check)
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    problems: list[str] = []
    try:
        pulumi.runtime.set_mocks(mocks, project=data["project"], stack=data["stack"], preview=False)
        loop.run_until_complete(run_pulumi_func(lambda: replay(data["registrations"], by_token)))
        if check:
            problems = compare(data, mocks)
    finally:
        loop.run_until_complete(loop.shutdown_asyncgens())
        loop.run_until_complete(loop.shutdown_default_executor())
        asyncio.set_event_loop(None)
        loop.close()
        for thread_loop in mocks.thread_loops:
            if not thread_loop.is_closed():
                thread_loop.close()
    return mocks.seen, problems


def compare(data: dict[str, Any], mocks: FloorMocks) -> list[str]:
    from pulumi.runtime import rpc
    from pulumi.runtime.settings import get_monitor

    def encode(value: Any) -> Any:
        if rpc.is_rpc_secret(value):
            return {SECRET_KEY: encode(rpc.unwrap_rpc_secret(value))}
        if isinstance(value, dict):
            return {k: encode(v) for k, v in value.items()}
        if isinstance(value, list):
            return [encode(v) for v in value]
        return value

    problems = []
    urns = set(get_monitor().get_registered_resources())
    for r in data["registrations"]:
        if r["urn"] not in urns:
            problems.append(f"missing URN {r['urn']}")
        got = mocks.received.get((r["type"], r["name"]))
        if got is None:
            problems.append(f"{r['type']} {r['name']}: not registered")
        elif encode(got) != r["inputs"]:
            problems.append(f"{r['type']} {r['name']}: different inputs")
    return problems


def main(argv: list[str]) -> int:
    check, by_token = "--check" in argv, "--by-token" in argv
    argv = [a for a in argv if a not in ("--check", "--by-token")]
    if len(argv) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    with open(argv[0]) as f:
        data = json.load(f)
    import_sdk_modules(data["modules"])
    seen, problems = contextvars.Context().run(run, data, check, by_token)
    for problem in problems:
        print(f"floor: {problem}", file=sys.stderr)
    loaded = [name for name, m in list(sys.modules.items()) if m is not None and type(m).__name__ != "_LazyModule"]
    print(
        json.dumps(
            {
                "registrations": seen,
                "sdk_modules": sum(
                    1
                    for n in loaded
                    if n.split(".")[0] in ("pulumi", "pulumi_kubernetes", "pulumi_tls", "pulumi_random")
                ),
                # Must stay 0: the project's own import time belongs to the render.
                "project_modules": sum(1 for n in loaded if n.split(".")[0] in ("components", "federation")),
            }
        )
    )
    return 0 if seen == len(data["registrations"]) and not problems else 1


if __name__ == "__main__":
    code = main(sys.argv[1:])
    gc.freeze()  # as the CLI: no collection at exit
    sys.exit(code)
