"""The public API: `Federation(name, args, opts)` in a user's own Pulumi program, next to the
providers it creates, run under Pulumi's mocks. The user's program and the stack-config program
must register the same objects; providers arrive the Pulumi way; Inputs in the config are
resolved before planning, and one still unknown at preview stops everything by its path."""

from __future__ import annotations

import asyncio
import copy
import json
from typing import Any

import pulumi
import pulumi_kubernetes as k8s
import pytest

from flower_federation import Federation, FederationArgs, __version__
from flower_federation.cli.offline import Run, reveal, run_program
from flower_federation.shell.federation import OUTPUT_ATTRIBUTES
from tests.support.certificates import ca_pem
from tests.support.golden import GOLDENS
from tests.support.urns import identities

MULTI = next(g for g in GOLDENS if g.name == "multi-cluster")
CONFIG_KEY = "flower-federation:federation"


def golden_config(name: str) -> dict[str, Any]:
    from flower_federation.kube.goyaml import load_stack_file as read

    golden = next(g for g in GOLDENS if g.name == name)
    return read(golden.settings.read_text())["config"][CONFIG_KEY]


def user_run(entry: Any, *, preview: bool = False, into: Run | None = None) -> Run:
    """`entry` as a user's whole program (no stack config at all)."""
    return run_program({}, "prod", entry=entry, preview=preview, into=into)


def program_run(config: dict[str, Any], stack: str = "prod") -> Run:
    return run_program({CONFIG_KEY: config}, stack)


def by_object(run: Run) -> dict[tuple[str, str], Any]:
    return {(r.type, r.name): r for r in run.kubernetes}


def inputs(run: Run) -> dict[tuple[str, str], Any]:
    """What each object is registered with (Pulumi registers them in no fixed order)."""
    return {key: registration.inputs for key, registration in by_object(run).items()}


def test_the_version_is_the_packages() -> None:
    import tomllib
    from pathlib import Path

    project = tomllib.loads((Path(__file__).parents[1] / "pyproject.toml").read_text())["project"]
    assert project["dynamic"] == ["version"] and __version__.count(".") == 2


def test_a_users_program_with_its_own_providers_registers_what_the_stack_program_does() -> None:
    config = golden_config("multi-cluster")
    expected = program_run(config, "mc")

    def entry() -> None:
        home = k8s.Provider("home", kubeconfig="home-kubeconfig")
        edge = k8s.Provider("edge-eks", kubeconfig="edge-kubeconfig")
        Federation("mc", config, pulumi.ResourceOptions(provider=home), cluster_providers={"edge": edge})

    run = user_run(entry)
    ours, theirs = by_object(run), by_object(expected)
    assert sorted(ours) == sorted(theirs)
    providers = {r.name: r for r in run.registrations if r.type == "pulumi:providers:kubernetes"}
    assert sorted(providers) == ["edge-eks", "home"]  # no kubeconfig provider made beside the given ones
    for key, registration in ours.items():
        want = "edge-eks" if theirs[key].cluster == "edge" else "home"
        assert registration.provider.split("::")[-2] == want, key
        assert registration.inputs == theirs[key].inputs, key


def test_without_cluster_providers_a_named_cluster_gets_a_kubeconfig_provider_of_its_own() -> None:
    config = golden_config("multi-cluster")
    run = user_run(lambda: Federation("mc", config))
    edge = [r for r in run.kubernetes if r.cluster == "edge"]
    providers = [r for r in run.registrations if r.type == "pulumi:providers:kubernetes"]
    # A child of the component, named after it: two federations in one program never clash.
    assert [(r.name, r.inputs.get("context")) for r in providers] == [("mc-cluster-edge", "edge-admin")]
    urns = identities({}, "prod", entry=lambda: Federation("mc", config))
    assert "flower-federation:index:Federation$pulumi:providers:kubernetes::mc-cluster-edge" in urns
    assert edge and all(r.provider.split("::")[-2] == "mc-cluster-edge" for r in edge)
    # Negative control: the home cluster's objects use the default provider.
    assert all("cluster-edge" not in r.provider for r in run.kubernetes if r.cluster != "edge")


def test_two_federations_in_one_program_register_no_resource_twice() -> None:
    config = golden_config("multi-cluster")

    def entry() -> None:
        Federation("mc", config)
        Federation("mc-b", {**config, "name": "mc-b", "namespace": "flower-b"})

    run = user_run(entry)
    keys = [(r.type, r.name, r.parent_urn) for r in run.registrations]
    assert len(keys) == len(set(keys)) and len(keys) > 40


def test_args_as_the_model_or_its_dict_shape_give_the_same_objects() -> None:
    config = golden_config("dev")
    model = FederationArgs.model_validate(config)
    runs = [user_run(lambda args=args: Federation("demo", args)) for args in (config, model)]
    assert inputs(runs[0]) == inputs(runs[1])
    # Keyword arguments by field name (what type checkers see) or by the config's camelCase name build the
    # same model; a stack file takes the camelCase names only.
    by_name = FederationArgs(namespace="flower", create_namespace=False)
    assert by_name == FederationArgs(namespace="flower", createNamespace=False)
    assert by_name.model_dump(exclude_unset=True) == {"namespace": "flower", "createNamespace": False}
    parts = {key: config[key] for key in ("name", "namespace", "superlink", "supernodes")}
    typed = FederationArgs(**parts, create_namespace=False)
    runs = [
        user_run(lambda args=args: Federation("demo", args)) for args in (parts | {"createNamespace": False}, typed)
    ]
    assert inputs(runs[0]) == inputs(runs[1])
    assert not [r for r in runs[1].kubernetes if r.type == "kubernetes:core/v1:Namespace"]
    with pytest.raises(pulumi.RunError, match=r"federation.create_namespace: unknown key 'create_namespace'"):
        user_run(lambda: Federation("demo", config | {"create_namespace": False}))


def test_typed_outputs_hold_what_the_stack_exports() -> None:
    config = golden_config("dev")
    expected = program_run(config, "dev").outputs
    found: dict[str, Any] = {}

    def entry() -> None:
        federation = Federation(config["name"], config)
        for output, attribute in OUTPUT_ATTRIBUTES.items():
            getattr(federation, attribute).apply(lambda value, output=output: found.__setitem__(output, value))

    user_run(entry)
    assert found["fleetAddress"] == expected["superlink"]["fleetAddress"]
    assert found["controlAddress"] == expected["superlink"]["controlAddress"]
    assert found["flwrConfig"] == expected["flwrConfig"]
    assert found["flwrConfigFile"] == expected["flwrConfigFile"]
    assert found["caCertificate"] == expected["caCertificate"]
    assert (found["namespace"], found["role"], found["flowerVersion"]) == (
        expected["namespace"],
        expected["role"],
        expected["flowerVersion"],
    )
    assert found["externalAddress"] is None
    assert found["nodePublicKeys"] == expected["nodeAuth"]["publicKeys"] and len(found["nodePublicKeys"]["cpu"]) == 3


def site_with(address: Any, pem: Any) -> dict[str, Any]:
    config = copy.deepcopy(golden_config("site-from-hub"))
    config["supernodes"]["superlink"] = {"address": address, "port": 443, "certificate": {"pem": pem}}
    return config


def test_inputs_in_the_config_are_resolved_before_planning() -> None:
    pem = ca_pem()
    plain = user_run(lambda: Federation("hospital-b", site_with("fl.example.org", pem)))

    def entry() -> None:
        address = pulumi.Output.from_input("fl.example.org")
        Federation("hospital-b", site_with(address, pulumi.Output.secret(pem)))

    run = user_run(entry)
    assert inputs(run) == inputs(plain)
    # Negative control: another address gives other objects.
    other = user_run(lambda: Federation("hospital-b", site_with(pulumi.Output.from_input("hub.example.net"), pem)))
    assert inputs(other) != inputs(plain)


def unknown() -> pulumi.Output[str]:
    loop = asyncio.get_event_loop()
    value: asyncio.Future[str] = loop.create_future()
    value.set_result("")
    known: asyncio.Future[bool] = loop.create_future()
    known.set_result(False)
    return pulumi.Output(set(), value, known)


def test_a_value_unknown_at_preview_is_a_problem_by_its_path_and_nothing_is_registered() -> None:
    into = Run()

    def entry() -> None:
        Federation("hospital-b", site_with(unknown(), pulumi.Output.secret(ca_pem())), node_auth_keys=unknown())

    with pytest.raises(pulumi.RunError) as err:
        user_run(entry, preview=True, into=into)
    message = str(err.value)
    assert "federation.supernodes.superlink.address: is unknown until `pulumi up`" in message
    assert "nodeAuthKeys: is unknown until `pulumi up`" in message
    assert "certificate" not in message  # a known secret is fine
    assert "required" not in message  # the unknown address is not also reported missing
    assert message.count("federation.supernodes.superlink.address") == 1
    assert into.registrations == []


def test_providers_for_clusters_the_federation_does_not_have_are_refused_with_nothing_registered() -> None:
    into = Run()

    def entry() -> None:
        edge = k8s.Provider("edge-eks")
        Federation("mc", golden_config("multi-cluster"), cluster_providers={"edge": edge, "egde": edge})

    with pytest.raises(pulumi.RunError) as err:
        user_run(entry, into=into)
    assert "clusterProviders.egde: no cluster 'egde' is deployed into (named clusters: edge)" in str(err.value)
    assert "clusterProviders.edge" not in str(err.value)
    assert [r.type for r in into.registrations] == ["pulumi:providers:kubernetes"]  # the user's own provider only


def test_config_problems_stop_the_component_before_anything_is_registered() -> None:
    into = Run()
    config = golden_config("dev") | {"namespace": "Not A Label"}
    with pytest.raises(pulumi.RunError) as err:
        user_run(lambda: Federation("dev", config), into=into)
    assert "federation.namespace: 'Not A Label' must be a DNS label" in str(err.value)
    assert into.registrations == []


def test_a_secret_input_stays_secret_in_every_object_and_output_that_holds_it() -> None:
    config = golden_config("dev")

    def entry(secret: bool) -> None:
        token = pulumi.Output.secret("s3cr3t-token") if secret else "s3cr3t-token"
        address = pulumi.Output.secret("fl.internal.example.org") if secret else "fl.internal.example.org"
        superlink = {**config["superlink"], "env": [{"name": "TOKEN", "value": token}], "externalAddress": address}
        federation = Federation("demo", {**config, "superlink": superlink})
        pulumi.export("externalAddress", federation.external_address)

    run = user_run(lambda: entry(True))
    holding = {r.name for r in run.registrations if "s3cr3t-token" in json.dumps(reveal(r.inputs, True))}
    assert holding == {"demo-superlink"}
    assert all("s3cr3t-token" not in json.dumps(reveal(r.inputs, False)) for r in run.registrations)
    assert "fl.internal.example.org" not in json.dumps([reveal(r.inputs, False) for r in run.registrations])
    assert run.secret_outputs == {"externalAddress"}
    assert run.outputs["externalAddress"].startswith("fl.internal.example.org:")
    # Negative control: the same values given plainly are registered plainly.
    plain = user_run(lambda: entry(False))
    assert any("s3cr3t-token" in json.dumps(reveal(r.inputs, False)) for r in plain.registrations)
    assert plain.secret_outputs == set()
