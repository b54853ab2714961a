"""Run the Pulumi program offline under the Pulumi mock runtime.

The mocks stand in for the engine and the Kubernetes provider: every resource the
program registers is recorded with the exact inputs the provider would receive. Each
run gets its own event loop and a fresh `contextvars.Context` (Pulumi keeps its runtime
state in context variables), so runs never leak into each other.
"""

from __future__ import annotations

import asyncio
import contextvars
import json
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

import pulumi
from pulumi.runtime import rpc
from pulumi.runtime.stack import run_pulumi_func

from . import program

SECRET_PLACEHOLDER = "[secret]"


@dataclass
class Registration:
    type: str
    name: str
    inputs: dict[str, Any]
    custom: bool
    parent_urn: str = ""


@dataclass
class Run:
    registrations: list[Registration] = field(default_factory=list)
    outputs: dict[str, Any] = field(default_factory=dict)
    secret_outputs: set[str] = field(default_factory=set)

    @property
    def kubernetes(self) -> list[Registration]:
        return [r for r in self.registrations if r.type.startswith("kubernetes:")]

    def manifests(self, show_secrets: bool = False) -> list[dict[str, Any]]:
        return [reveal(r.inputs, show_secrets) for r in self.kubernetes]


def reveal(value: Any, show_secrets: bool) -> Any:
    """Inputs with Pulumi secrets unwrapped, or replaced by a placeholder."""
    if rpc.is_rpc_secret(value):
        return reveal(rpc.unwrap_rpc_secret(value), show_secrets) if show_secrets else SECRET_PLACEHOLDER
    if isinstance(value, dict):
        return {k: reveal(v, show_secrets) for k, v in value.items()}
    if isinstance(value, list):
        return [reveal(v, show_secrets) for v in value]
    if isinstance(value, float) and value.is_integer():
        # Pulumi's wire format carries every number as a double; the provider turns
        # them back into the integers the Kubernetes schema asks for, and so do we.
        return int(value)
    return value


class _Recorder(pulumi.runtime.Mocks):
    def __init__(self, run: Run):
        self.run = run
        # The mock monitor serves registrations on executor threads and gives each
        # thread an event loop of its own, which nobody closes; we close them.
        self.thread_loops: set[asyncio.AbstractEventLoop] = set()

    def new_resource(self, args: pulumi.runtime.MockResourceArgs):
        self.thread_loops.add(asyncio.get_event_loop())
        self.run.registrations.append(Registration(args.typ, args.name, args.inputs, bool(args.custom)))
        return f"{args.name}-id", args.inputs

    def call(self, args: pulumi.runtime.MockCallArgs):
        return {}, None


def run_program(
    config: dict[str, Any],
    stack: str,
    *,
    preview: bool = False,
    entry: Callable[[], Any] = program.run,
    into: Optional[Run] = None,
) -> Run:
    """Run `entry` with `config` (keys as in a stack file, e.g.
    `flower-federation:federation`, values as parsed YAML). Raises pulumi.RunError for
    invalid config, with nothing registered; pass `into` to inspect a run that raised."""
    result = into if into is not None else Run()
    return contextvars.Context().run(_run, config, stack, preview, entry, result)


def _run(config: dict[str, Any], stack: str, preview: bool, entry: Callable[[], Any], result: Run) -> Run:
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    recorder = _Recorder(result)
    try:
        pulumi.runtime.set_mocks(recorder, project=program.PROJECT, stack=stack, preview=preview)
        # The engine hands structured config to programs as JSON strings.
        pulumi.runtime.set_all_config(
            {_qualified(k): v if isinstance(v, str) else json.dumps(v) for k, v in config.items()}
        )
        loop.run_until_complete(run_pulumi_func(entry))
        root = pulumi.runtime.settings.get_root_resource()
        for key, value in (root.outputs if root is not None else {}).items():
            out = pulumi.Output.from_input(value)
            result.outputs[key] = loop.run_until_complete(out.future())
            if loop.run_until_complete(out.is_secret()):
                result.secret_outputs.add(key)
    finally:
        loop.run_until_complete(loop.shutdown_asyncgens())
        loop.run_until_complete(loop.shutdown_default_executor())
        asyncio.set_event_loop(None)
        loop.close()
        for thread_loop in recorder.thread_loops:
            if not thread_loop.is_closed():
                thread_loop.close()
    return result


def _qualified(key: str) -> str:
    return key if ":" in key else f"{program.PROJECT}:{key}"

