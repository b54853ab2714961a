"""Run the Pulumi program offline under the Pulumi mock runtime.

The mocks stand in for the engine and the Kubernetes provider: every resource the
program registers is recorded with the exact inputs the provider would receive. Each
run gets its own thread, event loop and a fresh `contextvars.Context` (Pulumi keeps its
runtime state in context variables), so runs never leak into each other.
"""

from __future__ import annotations

import asyncio
import base64
import contextvars
import hashlib
import json
import logging
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Optional

import pulumi
from pulumi.runtime import rpc
from pulumi.runtime.stack import run_pulumi_func

from flower_federation import program
from flower_federation.cli.thread_loops import close_at_exit
from flower_federation.config.derived import AMBIENT_CLUSTER
from flower_federation.flower.certificates import SECRET_READ_PLACEHOLDER
from flower_federation.flower.public_keys import DEPLOY_TIME_MARKER, issued_placeholder

SECRET_PLACEHOLDER = "[secret]"


# What a provider would compute, for the resources whose outputs the program reads.
# Deterministic placeholders, so a render is byte-identical; tests pass `provider` to
# get real keys and certificates instead (tests/support/tls_provider.py).
_PLACEHOLDER_OUTPUTS = {
    "tls:index/privateKey:PrivateKey": ("privateKeyPem", "privateKeyOpenssh", "publicKeyPem", "publicKeyOpenssh"),
    "tls:index/selfSignedCert:SelfSignedCert": ("certPem",),
    "tls:index/certRequest:CertRequest": ("certRequestPem",),
    "tls:index/locallySignedCert:LocallySignedCert": ("certPem",),
    "random:index/randomPassword:RandomPassword": ("result", "bcryptHash"),
}
SECRET_TYPE = "kubernetes:core/v1:Secret"
STACK_REFERENCE_TYPE = "pulumi:pulumi:StackReference"

# A real, parseable CA certificate whose private key was thrown away when it was made: what a user's unit test under
# mocks gets as another stack's `caCertificate`, so a program that passes it on as `pem` plans as under `up`.
MOCK_CA_CERTIFICATE = """\
-----BEGIN CERTIFICATE-----
MIIBfDCCASKgAwIBAgIBATAKBggqhkjOPQQDAjA8MTowOAYDVQQDDDFmbG93ZXIt
ZmVkZXJhdGlvbiB1bml0LXRlc3QgbW9ja3MgKG5vIGtleSBleGlzdHMpMCAXDTI1
MDEwMTAwMDAwMFoYDzIxMjUwMTAxMDAwMDAwWjA8MTowOAYDVQQDDDFmbG93ZXIt
ZmVkZXJhdGlvbiB1bml0LXRlc3QgbW9ja3MgKG5vIGtleSBleGlzdHMpMFkwEwYH
KoZIzj0CAQYIKoZIzj0DAQcDQgAENHwytdsnVLQYyGwDJckZGAg81oY0+bsn0wpG
PrQCyZu6efbFDIGmLfC3VaNKfi1DkCa/8Zg91B7bd3DN/wmBKqMTMBEwDwYDVR0T
AQH/BAUwAwEB/zAKBggqhkjOPQQDAgNIADBFAiEA7WNz41WO2oiei3SQ2UVK/omh
tLS54jGOjopj/dkgyxoCIHUFe4ewiKAmUneWdHLBFTb68SX8vR6X3jjqpxi6Oo7b
-----END CERTIFICATE-----
"""
# What a StackReference reads under a user's mocks: the outputs another federation stack exports (a hub's address and
# CA, a site's public keys, none), so what the program reads exists. A test needing others returns its own.
MOCK_STACK_OUTPUTS: dict[str, Any] = {
    "caCertificate": MOCK_CA_CERTIFICATE,
    "superlink": {"externalAddress": "hub.example.invalid:443"},
    "nodeAuth": {"publicKeys": {}},
}


def placeholder_outputs(typ: str, name: str, inputs: dict[str, Any]) -> dict[str, Any]:
    """Outputs for a created resource: its inputs plus placeholders for what the provider generates; for a
    StackReference, MOCK_STACK_OUTPUTS (a user's mocks: `render` reads the `--stack-outputs` given instead)."""
    close_at_exit(asyncio.get_event_loop())  # this thread's, the SDK's (thread_loops.py)
    if typ == STACK_REFERENCE_TYPE:
        stack = inputs.get("name", name)
        return {"name": stack, "outputs": json.loads(json.dumps(MOCK_STACK_OUTPUTS)), "secretOutputNames": []}
    out = dict(inputs)
    for prop in _PLACEHOLDER_OUTPUTS.get(typ, ()):
        out[prop] = f"<{prop} of {name}: {DEPLOY_TIME_MARKER}>"
    return out


def issued_outputs(typ: str, name: str, inputs: dict[str, Any]) -> dict[str, Any]:
    """Placeholders that change exactly when the resource's inputs change, for `diff`: every pulumi-tls and
    pulumi-random input forces a new resource, so changed inputs mean a new key, certificate or password, and the
    Secrets, trust bundles and checksums the program builds from it change with it, as they do at `up` (the
    plain placeholders stay the same text and hid that). `issue` is a digest of the inputs, secrets included,
    never the inputs themselves."""
    out = placeholder_outputs(typ, name, inputs)
    if typ in _PLACEHOLDER_OUTPUTS:
        digest = hashlib.sha256(json.dumps(reveal(inputs, True), sort_keys=True).encode()).hexdigest()[:12]
        for prop in _PLACEHOLDER_OUTPUTS[typ]:
            out[prop] = issued_placeholder(prop, name, digest)
    return out


def placeholder_read(typ: str, resource_id: str, keys: tuple[str, ...] = ()) -> dict[str, Any]:
    """What reading an existing object returns offline: for a Secret, placeholder data
    under the keys a kubernetes.io/tls Secret has, and `keys` (a CA Secret's own key,
    `tls.trust.key`), so that a hub's offline outputs carry its CA's stand-in too."""
    if typ != SECRET_TYPE:
        return {}
    text = SECRET_READ_PLACEHOLDER.format(resource_id)
    value = base64.b64encode(text.encode()).decode()
    return {"data": dict.fromkeys(("tls.crt", "ca.crt", *keys), value)}


def _read_keys(config: dict[str, Any]) -> tuple[str, ...]:
    """The CA key `tls.trust.key` names in the raw config (validated before any read is made), if any."""
    federation = next((config[k] for k in ("flower-federation:federation", "federation") if k in config), None)
    tls = federation.get("tls") if isinstance(federation, dict) else None
    trust = tls.get("trust") if isinstance(tls, dict) else None
    key = trust.get("key") if isinstance(trust, dict) else None
    return (key,) if isinstance(key, str) and key else ()


@dataclass
class Registration:
    type: str
    name: str
    inputs: dict[str, Any]
    custom: bool
    parent_urn: str = ""
    read_id: Optional[str] = None  # set for `.get()` reads of existing objects
    cluster: str = AMBIENT_CLUSTER  # the cluster whose provider registers it
    provider: str = ""  # the provider reference (`URN::ID`) it is registered with, "" for the default one


@dataclass
class Run:
    registrations: list[Registration] = field(default_factory=list)
    outputs: dict[str, Any] = field(default_factory=dict)
    secret_outputs: set[str] = field(default_factory=set)
    # Existing objects for reads, by (type, "namespace/name"): what the cluster holds.
    existing: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    # Other stacks' outputs, by stack name, for StackReferences.
    stack_outputs: dict[str, dict[str, Any]] = field(default_factory=dict)
    # What the program logged as warnings (`pulumi.log.warn`), which `pulumi preview` prints as such.
    warnings: list[str] = field(default_factory=list)
    # Extra keys a read Secret's placeholder data holds (placeholder_read).
    read_keys: tuple[str, ...] = ()

    @property
    def kubernetes(self) -> list[Registration]:
        """Kubernetes objects the program creates (reads of existing ones excluded)."""
        return [r for r in self.registrations if r.type.startswith("kubernetes:") and r.read_id is None]

    def manifests(self, show_secrets: bool = False, cluster: Optional[str] = None) -> list[dict[str, Any]]:
        """Objects to create, of one cluster when `cluster` is given."""
        return [reveal(r.inputs, show_secrets) for r in self.kubernetes if cluster in (None, r.cluster)]

    @property
    def clusters(self) -> list[str]:
        """Clusters objects go to, in registration order."""
        return list(dict.fromkeys(r.cluster for r in self.kubernetes))

    @property
    def ambient_only(self) -> bool:
        """Every object goes to the stack's ambient cluster (a render then prints no `# cluster:` headers)."""
        return self.clusters in ([], [AMBIENT_CLUSTER])

    def stack_outputs_json(self, show_secrets: bool = False) -> dict[str, Any]:
        """The stack's outputs as `pulumi stack output --json` prints them."""
        return {
            key: reveal(value, show_secrets) if key not in self.secret_outputs or show_secrets else SECRET_PLACEHOLDER
            for key, value in self.outputs.items()
        }


def reveal(value: Any, show_secrets: bool) -> Any:
    """Inputs with Pulumi secrets unwrapped, or replaced by a placeholder."""
    if rpc.is_rpc_secret(value):
        inner = rpc.unwrap_rpc_secret(value)
        if show_secrets:
            return reveal(inner, show_secrets)
        # A secret mapping (a Secret's data) keeps its keys: they are not secret.
        if isinstance(inner, dict):
            return dict.fromkeys(inner, SECRET_PLACEHOLDER)
        return SECRET_PLACEHOLDER
    if isinstance(value, dict):
        return {k: reveal(v, show_secrets) for k, v in value.items()}
    if isinstance(value, list):
        return [reveal(v, show_secrets) for v in value]
    if isinstance(value, float) and value.is_integer():
        # Pulumi's wire format carries every number as a double; the provider turns
        # them back into the integers the Kubernetes schema asks for, and so do we.
        return int(value)
    return value


Provider = Callable[[str, str, dict[str, Any]], dict[str, Any]]


class _Recorder(pulumi.runtime.Mocks):
    def __init__(self, run: Run, provider: Provider):
        self.run = run
        self.provider = provider
        # The mock monitor serves registrations on executor threads and gives each
        # thread an event loop of its own, which nobody closes; we close them.
        self.thread_loops: set[asyncio.AbstractEventLoop] = set()

    def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[Optional[str], dict[str, Any]]:
        self.thread_loops.add(asyncio.get_event_loop())
        if args.typ == STACK_REFERENCE_TYPE:
            stack = args.inputs.get("name", args.name)
            self.run.registrations.append(Registration(args.typ, args.name, args.inputs, True, read_id=stack))
            outputs = self.run.stack_outputs.get(stack, {})
            return stack, {"name": stack, "outputs": outputs, "secretOutputNames": []}
        if args.resource_id:  # a read of an existing object
            self.run.registrations.append(
                Registration(args.typ, args.name, args.inputs, True, read_id=args.resource_id)
            )
            found = self.run.existing.get((args.typ, args.resource_id))
            if found is None:
                found = placeholder_read(args.typ, args.resource_id, self.run.read_keys)
            return args.resource_id, dict(found)
        self.run.registrations.append(
            Registration(
                args.typ,
                args.name,
                args.inputs,
                bool(args.custom),
                cluster=_cluster_of(args.provider),
                provider=args.provider or "",
            )
        )
        return f"{args.name}-id", self.provider(args.typ, args.name, args.inputs)

    def call(self, args: pulumi.runtime.MockCallArgs) -> tuple[dict[str, Any], Optional[list[tuple[str, str]]]]:
        return {}, None


def _cluster_of(provider_ref: Optional[str]) -> str:
    """The named cluster of a provider reference (`urn...::cluster-NAME::id`, or `...::FEDERATION-cluster-NAME::id`
    when a Federation made it from the cluster's kubeconfig)."""
    name = (provider_ref or "").split("::")[-2] if "::" in (provider_ref or "") else ""
    prefix = program.CLUSTER_PROVIDER_PREFIX
    if name.startswith(prefix) or f"-{prefix}" in name:
        return name.rpartition(prefix)[2]
    return AMBIENT_CLUSTER


def run_program(
    config: dict[str, Any],
    stack: str,
    *,
    preview: bool = False,
    entry: Callable[[], Any] = program.run,
    into: Optional[Run] = None,
    provider: Provider = placeholder_outputs,
    existing: Optional[dict[tuple[str, str], dict[str, Any]]] = None,
    stack_outputs: Optional[dict[str, dict[str, Any]]] = None,
    secret_config: tuple[str, ...] = (),
) -> Run:
    """Run `entry` with `config` (keys as in a stack file, e.g.
    `flower-federation:federation`, values as parsed YAML). Raises pulumi.RunError for
    invalid config, with nothing registered; pass `into` to inspect a run that raised.
    `provider` computes created resources' outputs; `existing` holds objects that reads
    (e.g. of a user's TLS Secret) find; `stack_outputs` what StackReferences read.
    `nodeAuthKeys` and the keys in `secret_config` are treated as secret config."""
    result = into if into is not None else Run()
    result.existing.update(existing or {})
    result.stack_outputs.update(stack_outputs or {})
    result.read_keys = _read_keys(config)
    # On a thread of its own: for every resource the SDK walks the whole stack it was created from (source positions),
    # and a caller's stack can be deep (under pytest and hypothesis, ~50 frames: a fifth of a small render's CPU).
    thread = _ProgramThread((_run, config, stack, preview, entry, result, provider, secret_config))
    thread.start()
    thread.join()
    if thread.error is not None:
        raise thread.error
    return result


class _ProgramThread(threading.Thread):
    """Runs `call` in a fresh contextvars.Context, keeping what it raised. A bare thread, not an executor's:
    registrations then sit on 4 frames (threading's 3, `_run`), not 6, and the SDK makes a source position of
    every frame under each registration (~1% of a 16-pool render's CPU)."""

    def __init__(self, call: tuple[Any, ...]):
        super().__init__(name="offline-pulumi")
        self._call = call
        self.error: Optional[BaseException] = None

    def run(self) -> None:
        try:  # Context.run is C: no frame between this one and `_run`
            contextvars.Context().run(*self._call)
        except BaseException as err:  # noqa: BLE001 re-raised on the caller's thread, as a Future's result() does
            self.error = err


def _run(
    config: dict[str, Any],
    stack: str,
    preview: bool,
    entry: Callable[[], Any],
    result: Run,
    provider: Provider,
    secret_config: tuple[str, ...],
) -> Run:
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    recorder = _Recorder(result, provider)
    try:
        pulumi.runtime.set_mocks(
            recorder, project=program.PROJECT, stack=stack, preview=preview, logger=_logger(result)
        )
        # The engine hands structured config to programs as JSON strings.
        qualified = {_qualified(k): v if isinstance(v, str) else json.dumps(v) for k, v in config.items()}
        secret = {_qualified(program.NODE_KEYS_KEY), *(_qualified(k) for k in secret_config)}
        secret_keys = [k for k in qualified if k in secret]
        pulumi.runtime.set_all_config(qualified, secret_keys)
        loop.run_until_complete(run_pulumi_func(entry))
        root = pulumi.runtime.settings.get_root_resource()
        outputs: dict[str, Any] = getattr(root, "outputs", None) or {}  # the stack's exports
        for key, value in outputs.items():
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


class _Warnings(logging.Handler):
    def __init__(self, into: list[str]):
        super().__init__(logging.WARNING)
        self.into = into

    def emit(self, record: logging.LogRecord) -> None:
        if record.levelno == logging.WARNING:
            self.into.append(record.getMessage())
        else:  # errors: as the mocks would print them, with what they are
            print(f"{record.levelname.lower()}: {record.getMessage()}", file=sys.stderr)


def _logger(result: Run) -> logging.Logger:
    """The mocks' log (pulumi.log.* under mocks): warnings kept in `result.warnings`, for the caller to print."""
    logger = logging.Logger(f"{__name__}.run")  # not registered: one per run, nothing propagates
    # Warnings and errors only: the SDK logs a debug line or more per registration, and an unregistered logger's
    # level (NOTSET) would make a record of each, its caller found by walking the stack, for the handler to drop
    # (issue 36: a tenth of the 16-pool render's program thread).
    logger.setLevel(logging.WARNING)
    logger.addHandler(_Warnings(result.warnings))
    return logger


def _qualified(key: str) -> str:
    return key if ":" in key else f"{program.PROJECT}:{key}"


def run_with_urns(
    config: dict[str, Any],
    stack: str,
    *,
    stack_outputs: Optional[dict[str, dict[str, Any]]] = None,
    program_entry: Callable[[], Any] = program.run,
    secret_config: tuple[str, ...] = (),
    provider: Provider = placeholder_outputs,
) -> tuple[Run, list[tuple[str, str, str]]]:
    """One run of the program, and what Pulumi knows each registered resource by: (type, name,
    `T1$...$TYPE::NAME`), T1... the types of its ancestors (components) from the stack down, i.e. its URN without
    `urn:pulumi:STACK::PROJECT::`. The mock monitor writes only the immediate parent's type into a URN, so the
    chain is rebuilt from each resource's parent, as a stack transformation sees it. Renaming a resource or moving
    it under another parent changes this, and `pulumi up` then deletes it and creates it anew. `program_entry`:
    another program than the stack-config one (the component provider's construct path, in the tests); `provider`
    the generated resources' outputs (run_program)."""
    seen: list[tuple[pulumi.Resource, str, str, Optional[pulumi.Resource]]] = []

    def entry() -> Any:
        def record(args: pulumi.ResourceTransformationArgs) -> None:
            parent = args.opts.parent if args.opts is not None else None
            seen.append((args.resource, args.type_, args.name, parent))
            return None

        pulumi.runtime.register_stack_transformation(record)
        return program_entry()

    run = run_program(
        config, stack, entry=entry, stack_outputs=stack_outputs, secret_config=secret_config, provider=provider
    )
    by_resource = {id(resource): (typ, parent) for resource, typ, _, parent in seen}

    def chain(typ: str, parent: Optional[pulumi.Resource]) -> str:
        types = [typ]
        while parent is not None and id(parent) in by_resource:  # the Stack itself is not in a URN
            typ, parent = by_resource[id(parent)]
            types.append(typ)
        return "$".join(reversed(types))

    return run, [(typ, name, f"{chain(typ, parent)}::{name}") for _, typ, name, parent in seen]
