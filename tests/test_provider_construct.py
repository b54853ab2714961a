"""The component provider (plugin/, flower_federation/provider/server.py) as the engine drives it
for a TypeScript, Go, C# or YAML program: `construct` with the inputs as the engine hands them
(the config's camelCase keys, a secret as a secret Output, provider references), under Pulumi's
mocks. For every golden stack it must register the very resources, by the very URNs, the
stack-config program does (tests/golden/*.urns.txt), and the same objects."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pulumi
import pulumi_kubernetes as k8s
import pytest

from flower_federation import __version__
from flower_federation.cli.offline import run_program
from flower_federation.kube.goyaml import load_stack_file
from flower_federation.provider.schema import OUTPUTS, SCHEMA_FILE
from flower_federation.provider.server import FederationProvider
from flower_federation.shell.federation import OUTPUT_ATTRIBUTES, TYPE
from tests.support.golden import GOLDEN_DIR, GOLDENS, URNS_HEADER, Golden
from tests.support.urns import identities

ROOT = Path(__file__).resolve().parents[1]
CONFIG_KEY = "flower-federation:federation"
NODE_KEYS_KEY = "flower-federation:nodeAuthKeys"


def stack_config(golden: Golden) -> dict[str, Any]:
    config: dict[str, Any] = load_stack_file(golden.settings.read_text())["config"]
    return config


def reads(golden: Golden) -> dict[str, dict[str, Any]]:
    return {stack: json.loads((GOLDEN_DIR / f"{name}.outputs.json").read_text()) for stack, name in golden.reads}


def engine_inputs(config: dict[str, Any], extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """The component's inputs as the engine's Construct hands them: the stack config's keys as they are, a
    secret (the node keys) as a secret Output."""
    inputs = dict(config[CONFIG_KEY])
    if NODE_KEYS_KEY in config:
        inputs["nodeAuthKeys"] = pulumi.Output.secret(config[NODE_KEYS_KEY])
    return {**inputs, **(extra or {})}


def constructed(config: dict[str, Any], stack: str, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """What construct returns, resolved: {"urn": ..., output: value}."""
    found: dict[str, Any] = {}

    def entry() -> None:
        name = config[CONFIG_KEY].get("name", stack)
        result = FederationProvider().construct(name, TYPE, engine_inputs(config, extra), pulumi.ResourceOptions())
        pulumi.Output.all(result.urn, *result.state.values()).apply(
            lambda values: found.update(urn=values[0], **dict(zip(result.state, values[1:], strict=True)))
        )

    run_program({}, stack, entry=entry, stack_outputs=reads_by_stack.get(stack, {}))
    return found


reads_by_stack: dict[str, dict[str, dict[str, Any]]] = {golden.name: reads(golden) for golden in GOLDENS}


@pytest.mark.parametrize("golden", GOLDENS, ids=lambda g: g.name)
def test_construct_registers_the_golden_urns(golden: Golden) -> None:
    config = stack_config(golden)

    def entry() -> None:
        # A program in another language makes its clusters' providers itself (named as the stack-config program
        # names its own) and hands them over.
        clusters = config[CONFIG_KEY].get("clusters", {})
        providers = {c: k8s.Provider(f"cluster-{c}", context=s.get("context")) for c, s in clusters.items()}
        extra = {"clusterProviders": providers} if providers else {}
        name = config[CONFIG_KEY].get("name", golden.name)
        FederationProvider().construct(name, TYPE, engine_inputs(config, extra), pulumi.ResourceOptions())

    found = URNS_HEADER + "".join(f"{line}\n" for line in identities({}, golden.name, reads(golden), entry=entry))
    assert found == golden.urns.read_text(encoding="utf-8")


def test_construct_returns_every_output_the_schema_declares() -> None:
    dev = next(g for g in GOLDENS if g.name == "dev")
    found = constructed(stack_config(dev), "dev")
    assert set(found) - {"urn"} == set(OUTPUTS) == set(OUTPUT_ATTRIBUTES)
    # (The mock monitor writes the parent's type, the Stack, into the URN; the engine does not.)
    assert found["urn"].endswith("flower-federation:index:Federation::demo")
    expected = json.loads(dev.outputs.read_text())
    assert found["fleetAddress"] == expected["superlink"]["fleetAddress"]
    assert found["flwrConfig"] == expected["flwrConfig"]
    required = json.loads(SCHEMA_FILE.read_text())["resources"][TYPE]["required"]
    assert all(found[name] is not None for name in required)


def test_cluster_providers_arrive_as_provider_references() -> None:
    golden = next(g for g in GOLDENS if g.name == "multi-cluster")
    config = stack_config(golden)
    in_edge = {(r.type, r.name) for r in run_program(config, golden.name).kubernetes if r.cluster == "edge"}

    def entry() -> None:
        edge = k8s.Provider("edge-eks")
        # The engine hands a map that depends on the providers it holds as an Output.
        providers = pulumi.Output.from_input({"edge": edge})
        FederationProvider().construct("mc", TYPE, engine_inputs(config, {"clusterProviders": providers}))

    run = run_program({}, golden.name, entry=entry)
    by_edge = {(r.type, r.name) for r in run.kubernetes if r.provider.split("::")[-2:-1] == ["edge-eks"]}
    assert in_edge and by_edge == in_edge
    assert "cluster-edge" not in {r.name for r in run.registrations}  # no provider made from the kubeconfig


def test_an_unknown_component_type_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown resource type flower-federation:index:SuperLink"):
        FederationProvider(schema="{}").construct("x", "flower-federation:index:SuperLink", {})


def test_a_cluster_provider_that_is_no_provider_is_refused() -> None:
    golden = next(g for g in GOLDENS if g.name == "multi-cluster")
    config = stack_config(golden)

    def entry() -> None:
        FederationProvider().construct("mc", TYPE, engine_inputs(config, {"clusterProviders": {"edge": "kubeconfig"}}))

    with pytest.raises(pulumi.RunError, match="clusterProviders.edge: must be a Kubernetes provider, not str"):
        run_program({}, "multi-cluster", entry=entry)


def test_the_provider_serves_the_committed_schema() -> None:
    assert FederationProvider().schema == SCHEMA_FILE.read_text(encoding="utf-8")
    assert json.loads(FederationProvider().schema or "")["resources"][TYPE]["isComponent"] is True


def test_the_plugin_starts_as_the_engine_starts_it_and_serves_its_schema(tmp_path: Path) -> None:
    """plugin/__main__.py as a real process: it prints the port of its gRPC server, as the engine expects,
    and answers GetPluginInfo and GetSchema there."""
    import grpc
    from google.protobuf import empty_pb2
    from pulumi.runtime.proto import provider_pb2, provider_pb2_grpc

    env = {**os.environ, "PYTHONPATH": str(ROOT)}  # what the plugin's own venv holds, installed
    server = subprocess.Popen(
        [sys.executable, str(ROOT / "plugin" / "__main__.py"), "127.0.0.1:1"],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stdout is not None
        port = int(server.stdout.readline().strip())
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            stub = provider_pb2_grpc.ResourceProviderStub(channel)
            info = stub.GetPluginInfo(empty_pb2.Empty(), timeout=60)
            schema = stub.GetSchema(provider_pb2.GetSchemaRequest(version=0), timeout=60)
        assert info.version == __version__
        assert schema.schema == SCHEMA_FILE.read_text(encoding="utf-8")
    finally:
        server.kill()
        server.communicate(timeout=30)
