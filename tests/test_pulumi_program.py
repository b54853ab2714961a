"""The real Pulumi program (`flower_federation.program.run`, what __main__.py runs) under the
Pulumi mock runtime, once with preview=True and once with preview=False. Each run has
its own event loop and context (flower_federation/cli/offline.py)."""

from __future__ import annotations

import contextlib
import copy
import json
import os
import subprocess
import sys

import pulumi
import pytest

from flower_federation import program
from flower_federation.cli.offline import Run, run_program
from tests.support.flower import GRPC_ERA, HTTP_ERA
from tests.support.generated import without_generated
from tests.support.paths import ROOT
from tests.support.render import core_objects, plan_of

KEY = "flower-federation:federation"


def base(**extra) -> dict:
    raw = {
        "name": "fed",
        "supernodes": {
            "pools": [
                {"name": "a", "replicas": 2, "nodeConfig": {"partition-id": "{index}"}},
                {"name": "b", "replicas": 1},
            ]
        },
    }
    raw.update(extra)
    return raw


def canonical(objects) -> list[str]:
    return sorted(json.dumps(o, sort_keys=True) for o in objects)


def by_identity(objects) -> dict[tuple[str, str], str]:
    return {(o["kind"], o["metadata"]["name"]): json.dumps(o, sort_keys=True) for o in objects}


@pytest.mark.parametrize("preview", [True, False], ids=["preview", "up"])
def test_program_registers_exactly_the_core_manifests(preview):
    raw = base()
    run = run_program({KEY: raw}, "dev", preview=preview)
    manifests, secrets = without_generated(run.manifests())
    # Not vacuous: the mocks really saw the resources.
    assert len(manifests) == len(core_objects(raw, "dev")) > 5
    assert canonical(manifests) == canonical(core_objects(raw, "dev"))
    # TLS on by default: the shell adds the server and CA Secrets.
    assert sorted(s["metadata"]["name"] for s in secrets) == ["fed-ca", "fed-superlink-tls"]
    types = {r.type for r in run.registrations}
    assert {
        "flower-federation:index:Federation",
        "flower-federation:index:SuperLink",
        "flower-federation:index:SuperNodePool",
        "kubernetes:apps/v1:StatefulSet",
        "kubernetes:core/v1:Service",
        "kubernetes:core/v1:Namespace",
    } <= types


@pytest.mark.parametrize("preview", [True, False], ids=["preview", "up"])
def test_resources_are_parented_by_their_component(preview):
    captured = {}

    def entry():
        fed = program.run()
        captured["fed"] = fed
        pulumi.export(
            "urns",
            {
                "components": [fed.superlink.urn, fed.pools["a"].urn, fed.pools["b"].urn],
                "superlink": [r.urn for r in fed.superlink.resources],
                "pool-a": [r.urn for r in fed.pools["a"].resources],
                "pool-b": [r.urn for r in fed.pools["b"].resources],
            },
        )

    run = run_program({KEY: base()}, "dev", preview=preview, entry=entry)
    urns = run.outputs["urns"]
    assert urns["superlink"] and urns["pool-a"] and urns["pool-b"]
    # (The mock monitor writes only the immediate parent's type into a URN.)
    for urn in urns["components"]:
        assert "::flower-federation:index:Federation$flower-federation:index:" in urn
    for urn in urns["superlink"]:
        assert "::flower-federation:index:SuperLink$kubernetes:" in urn
    for urn in urns["pool-a"] + urns["pool-b"]:
        assert "::flower-federation:index:SuperNodePool$kubernetes:" in urn
    assert any(u.endswith("::fed-supernode-a") for u in urns["pool-a"])


@pytest.mark.parametrize("version", [GRPC_ERA, HTTP_ERA])
def test_outputs_and_flwr_connection_read_by_real_flower(version, flower):
    run = run_program({KEY: base(version=version)}, "dev")
    out = run.outputs
    plan = plan_of(base(version=version), "dev")
    assert out["superlink"]["fleetAddress"] == plan.fleet_address
    assert out["superlink"]["controlAddress"] == plan.control_address
    assert out["pools"] == {"a": {"kind": "StatefulSet", "replicas": 2}, "b": {"kind": "StatefulSet", "replicas": 1}}
    assert out["tls"] == "enabled"
    conn = flower[version].connection(out["flwrConfig"])
    assert conn["name"] == "fed"
    assert conn["address"] == plan.control_address
    assert conn["root_certificates"] == "/etc/flower/ca/ca.crt" and not conn["insecure"]


def test_insecure_says_so_loudly_and_connection_is_insecure(flower):
    run = run_program({KEY: base(insecure=True)}, "dev")
    assert "TLS IS DISABLED" in run.outputs["tls"]
    assert flower[HTTP_ERA].connection(run.outputs["flwrConfig"])["insecure"] is True


def test_before_flwr_1_26_the_connection_is_pyproject_shaped():
    import tomllib

    run = run_program({KEY: base(version="1.25.0")}, "dev")
    doc = tomllib.loads(run.outputs["flwrConfig"])
    fed = doc["tool"]["flwr"]["federations"]
    assert fed["default"] == "fed" and fed["fed"]["address"].endswith(":9093")
    assert run.outputs["flwrConfigFile"] == "pyproject.toml"


def test_invalid_config_registers_nothing():
    run = Run()
    raw = base(mode="DaemonSet")  # pools still carry replicas
    with pytest.raises(pulumi.RunError) as err:
        run_program({KEY: raw}, "dev", into=run)
    assert "replicas must not be set for pools when mode is DaemonSet" in str(err.value)
    assert "federation.supernodes.pools[1].replicas" in str(err.value)
    assert run.registrations == []


def _plans(monkeypatch) -> list[str]:
    """The stack (or name) of every plan made from here on: load_plan checks the config's rules once a plan."""
    from flower_federation import rules

    made: list[str] = []
    check = rules.check

    def counted(raw, stack):
        made.append(stack)
        return check(raw, stack)

    monkeypatch.setattr(rules, "check", counted)
    return made


def test_a_good_config_is_planned_once_a_run_named_clusters_included_and_secret_problems_plan_first(
    monkeypatch, tmp_path
):
    # A hub's thousands of keys are validated once a render: the component's plan is the only one, the CLI's
    # `render` included (it says a config's problems through that plan, the same list as `validate`).
    import yaml

    from flower_federation.cli.main import main
    from tests.support import hub_scale

    plans = _plans(monkeypatch)
    run_program({KEY: base()}, "dev")
    assert len(plans) == 1, plans
    plans.clear()
    stack_file = tmp_path / "Pulumi.hub.yaml"
    stack_file.write_text(yaml.safe_dump({"config": {KEY: hub_scale.hub(3, 2)}}))
    with open(os.devnull, "w") as sink, contextlib.redirect_stdout(sink):
        assert main(["render", "--config-file", str(stack_file)]) == 0
    assert len(plans) == 1, plans
    # Named clusters too: their providers (`cluster-<name>`, at the stack's root) come from that same plan ...
    plans.clear()
    multi = yaml.safe_load((ROOT / "tests" / "golden" / "Pulumi.multi-cluster.yaml").read_text())["config"][KEY]
    assert any(r.name == "cluster-edge" for r in run_program({KEY: multi}, "mc").registrations)
    assert len(plans) == 1, plans
    # ... so a bad config that names them registers nothing, not even a provider, and says every problem.
    plans.clear()
    bad = copy.deepcopy(multi)
    bad["supernodes"]["pools"][0]["replicas"] = -1
    bad["clusters"]["edge"]["context"] = 7
    run = Run()
    with pytest.raises(pulumi.RunError) as err:
        run_program({KEY: bad}, "mc", into=run)
    assert "federation.supernodes.pools[0].replicas" in str(err.value)
    assert "federation.clusters.edge.context" in str(err.value)
    assert run.registrations == [] and len(plans) == 1, plans
    # Negative control, so the count is not blind to the program's own pass: secret config held in plain text
    # is said with every problem of the config, through a plan of the program's, and nothing is registered.
    plans.clear()
    bad["clusters"]["edge"] = {"kubeconfig": "apiVersion: v1\nkind: Config\n"}
    run = Run()
    with pytest.raises(pulumi.RunError) as err:
        run_program({KEY: bad}, "mc", into=run)
    assert "federation.clusters.edge.kubeconfig: holds credentials" in str(err.value)
    assert "federation.supernodes.pools[0].replicas" in str(err.value)
    assert run.registrations == [] and len(plans) == 1, plans


def test_missing_config_is_a_clear_error():
    with pytest.raises(pulumi.RunError, match="missing: set the flower-federation:federation config key"):
        run_program({}, "dev")


def test_name_defaults_to_the_stack():
    raw = base()
    del raw["name"]
    run = run_program({KEY: raw}, "staging")
    names = {m["metadata"]["name"] for m in run.manifests()}
    assert {"staging-superlink", "staging-supernode-a", "staging-supernode-b"} <= names


def test_same_config_same_objects_across_runs():
    first = canonical(run_program({KEY: base()}, "dev").manifests())
    second = canonical(run_program({KEY: base()}, "dev", preview=True).manifests())
    assert first == second


def test_editing_one_pool_changes_only_that_pools_resources():
    before = by_identity(core_objects(base(), "dev"))
    edited = base()
    edited["supernodes"]["pools"][1]["replicas"] = 5
    edited["supernodes"]["pools"][1]["env"] = [{"name": "LOG_LEVEL", "value": "debug"}]
    after = by_identity(core_objects(edited, "dev"))
    assert before.keys() == after.keys()
    changed = {k for k in before if before[k] != after[k]}
    assert changed == {("StatefulSet", "fed-supernode-b")}


def test_adding_a_pool_adds_only_its_resources():
    before = by_identity(core_objects(base(), "dev"))
    grown = base()
    grown["supernodes"]["pools"].append({"name": "c", "replicas": 1})
    after = by_identity(core_objects(grown, "dev"))
    assert {k: v for k, v in after.items() if k in before} == before
    assert set(after) - set(before) == {
        (kind, "fed-supernode-c")
        for kind in ("Service", "StatefulSet", "ServiceAccount", "NetworkPolicy", "PodDisruptionBudget")
    }


def test_two_federations_share_a_namespace_without_colliding():
    one = core_objects(base(name="team-a", createNamespace=False), "dev")
    two = core_objects(base(name="team-b", createNamespace=False), "dev")
    names_one = {(o["kind"], o["metadata"]["name"]) for o in one}
    names_two = {(o["kind"], o["metadata"]["name"]) for o in two}
    assert names_one and not names_one & names_two

    def selectors(objects):
        return [
            o["spec"].get("selector", {}).get("matchLabels") or o["spec"].get("selector")
            for o in objects
            if o["kind"] in ("StatefulSet", "Service", "Deployment", "DaemonSet")
        ]

    pod_labels_two = [o["spec"]["template"]["metadata"]["labels"] for o in two if "template" in o.get("spec", {})]
    for sel in selectors(one):
        assert sel and not any(all(pl.get(k) == v for k, v in sel.items()) for pl in pod_labels_two)


def test_selectors_do_not_change_when_config_changes():
    def sel(raw):
        return {
            o["metadata"]["name"]: o["spec"]["selector"] for o in core_objects(raw, "dev") if o["kind"] == "StatefulSet"
        }

    changed = base(version="1.41.0", labels={"team": "x"})
    changed["supernodes"]["image"] = "example.org/supernode:1.40.0"
    changed["superlink"] = {"image": "flwr/superlink:1.41.0"}
    assert sel(base()) == sel(changed)


@pytest.mark.parametrize("seed", ["0", "1", "12345"])
def test_render_is_byte_identical_across_hash_seeds(seed, tmp_path):
    def render(s):
        env = {**os.environ, "PYTHONHASHSEED": s}
        return subprocess.run(
            [sys.executable, "-m", "flower_federation", "render", "--stack", "dev"],
            cwd=ROOT,
            env=env,
            capture_output=True,
            check=True,
        ).stdout

    reference = render("random")
    assert reference.count(b"\n---\n") >= 5
    assert render(seed) == reference


def test_secret_values_are_masked_unless_asked_for():
    from flower_federation.cli.offline import SECRET_PLACEHOLDER
    from flower_federation.shell.kubernetes import register

    def entry():
        program.run()
        secret = {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "s", "namespace": "flower"},
            "stringData": {"key": pulumi.Output.secret("hush"), "plain": "visible"},
        }
        register(secret, pulumi.ResourceOptions())
        pulumi.export("token", pulumi.Output.secret("t0ken"))

    run = run_program({KEY: base()}, "dev", entry=entry)
    masked = next(m for m in run.manifests() if m["kind"] == "Secret" and m["metadata"]["name"] == "s")
    shown = next(m for m in run.manifests(show_secrets=True) if m["kind"] == "Secret" and m["metadata"]["name"] == "s")
    # pulumi-kubernetes marks a Secret's whole map secret; a render keeps its keys.
    assert masked["stringData"] == {"key": SECRET_PLACEHOLDER, "plain": SECRET_PLACEHOLDER}
    assert shown["stringData"] == {"key": "hush", "plain": "visible"}
    assert "token" in run.secret_outputs and "flwrConfig" not in run.secret_outputs
