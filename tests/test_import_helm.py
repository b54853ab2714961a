"""`python -m flower_federation import helm`: every YAML example of the SuperNode chart's guide
(tests/seeds, read from the markdown) imports, validates and renders, and the render means
what the chart would have run: names, the SuperLink dialled, the CA, images, replicas,
isolation, node auth and node config as real Flower parses the rendered command lines;
the one mapping table the importer reads, and the chart's names. Refusals and the
defaults that differ: test_import_helm_refusals.py; settings reaching the pods:
test_import_helm_settings.py."""

from __future__ import annotations

import copy
import dataclasses
from unittest.mock import patch

import pytest

from flower_federation.flower.public_keys import public_key
from flower_federation.flower.versions import FlowerVersion
from flower_federation.importers import helm
from flower_federation.importers.chart import CHART, WHOLE, Values
from flower_federation.importers.common import Stack, get_path, parts_of
from flower_federation.importers.helm_parameters import mappings
from flower_federation.importers.helm_steps import COMPUTED, Steps, fullname
from flower_federation.plan import load_plan
from tests.support.flower import GRPC_ERA, PROGRAMS
from tests.support.importing import (
    chart_fullname,
    chart_image,
    chart_values,
    reads,
    run,
    run_import,
    stack_config,
    write,
)
from tests.support.kube import started_containers
from tests.support.manifests import get
from tests.support.seeds import HelmExample, chart_parameters, helm_examples
from tests.support.tls_provider import new_openssh_key

EXAMPLES = helm_examples()
# Why an example of the guide does not import as it is: its Flower (the image tag, or the
# chart's default image, Flower 1.21) lacks what it asks for. Each then imports once its
# images are rebuilt on Flower 1.26.1 (same dialect), which is what is rendered below.
VERSION_REFUSALS = ("which flower-federation does not run", "needs Flower 1.23.0 or later")


def test_the_guide_has_examples():
    assert len(EXAMPLES) >= 10
    assert {e.id for e in EXAMPLES} >= {"multi-project-setup-pytorch", "node-authentication", "isolation-distributed"}


def test_the_importer_reads_the_one_mapping_table():
    """What the importer takes each parameter to is docs/helm-parameters.md's row (the one pool
    for `pools[]`), with the guide's default; a row under a mapping taken whole belongs to it.
    The importer has no parameter the guide lacks."""
    rows = chart_parameters()
    table = {m.parameter: m for m in mappings()}
    for path, default in rows.items():
        if path in CHART:
            assert CHART[path].default == default, path
            row = table[path]
            assert (CHART[path].status, CHART[path].note) == (row.status, row.note), path
            assert CHART[path].to == (row.config_path.replace("[]", "[0]") if row.config_path else None), path
        else:
            parent = next(p for p in WHOLE if path.startswith(p + "."))
            node = CHART[parent].default
            for key in path[len(parent) + 1 :].split("."):
                node = node[key]
            assert node == default, path
    for path in CHART:
        assert path in rows or any(r.startswith(path + ".") for r in rows), path


def _sample(default):
    """A value other than a parameter's default, of its type."""
    if isinstance(default, bool):
        return not default
    if isinstance(default, int):
        return default + 1
    if isinstance(default, dict):
        return {"example.org/key": "value"}
    return ["example"] if isinstance(default, list) else "example"


def test_each_carried_row_is_copied_to_its_path_as_it_is():
    """Set alone, every carried or partial parameter no step computes lands at its row's config path (the one
    pool's): the table decides where, not the importer (a negative control moves one row)."""
    plain = [
        path
        for path, param in CHART.items()
        if param.status in ("carried", "partial") and param.to and path not in COMPUTED
    ]
    assert len(plain) > 80 and set(CHART) >= COMPUTED, COMPUTED - set(CHART)

    def imported(chart: dict, path: str, value: object) -> dict:
        stack = Stack(stack="site", origin="test", command="test")
        steps = Steps(Values({path: value}), stack, release=None, namespace=None, preserve=False)
        steps.process = True  # superexec.* act
        with patch.dict(helm.CHART, chart, clear=True):
            helm._copy_plain(steps.vals, stack, steps)
        assert list(stack.provenance.values()) == [path], path
        return stack.config

    for path in plain:
        value = _sample(CHART[path].default)
        assert get_path(imported(CHART, path, value), parts_of(str(CHART[path].to))) == value, path
    moved = {**CHART, "supernode.labels": dataclasses.replace(CHART["supernode.labels"], to="labels")}
    assert imported(moved, "supernode.labels", {"a": "b"}) == {"labels": {"a": "b"}}


def _bumped(example: HelmExample) -> dict:
    """The example with its images rebuilt on Flower 1.26.1 (tag suffixes kept), and a real key pair where the
    guide writes `[...]` (such a key is refused: test_import_helm_node_keys.py)."""
    values = copy.deepcopy(example.values)
    v = chart_values(values)
    for component in ("supernode", "superexec"):
        tag = v[f"{component}.image.tag"]
        suffix = tag.split("-", 1)[1] if "-" in tag else ""
        values.setdefault(component, {}).setdefault("image", {})["tag"] = "-".join(filter(None, [GRPC_ERA, suffix]))
    auth = values.get("global", {}).get("nodeAuth", {})
    if "[...]" in auth.get("authSupernodePrivateKey", ""):
        auth["authSupernodePrivateKey"] = new_openssh_key()
        auth["authSupernodePublicKey"] = public_key(auth["authSupernodePrivateKey"], "site-a")
    return values


def _import(example: HelmExample, tmp_path, capsys, values=None, *flags):
    release = ["--release", example.release] if example.release else []
    path = write(tmp_path, "values.yaml", values if values is not None else example.values)
    return run_import(capsys, "helm", path, *release, *flags)


@pytest.mark.parametrize("example", EXAMPLES, ids=[e.id for e in EXAMPLES])
def test_example_round_trip(example: HelmExample, tmp_path, capsys, flower):
    code, out, err = _import(example, tmp_path, capsys)
    values = example.values
    if code != 0:
        # Only a Flower the project does not run may stop an example; then say so by path.
        assert code == 1 and out == "", err
        problems = [line for line in err.splitlines() if line.startswith("  - ")]
        assert problems and all(any(r in p for r in VERSION_REFUSALS) for p in problems), err
        assert "image.tag" in err or "global.nodeAuth.enabled" in err
        values = _bumped(example)
        code, out, err = _import(example, tmp_path, capsys, values)
    assert code == 0, err
    v = chart_values(values)
    config = stack_config(out)
    load_plan(config, "site", _node_keys(config))  # validates
    result = run(config, "site", _node_keys(config))
    _check_meaning(example, v, config, result.manifests(), flower[GRPC_ERA])
    if v["tls.enabled"]:  # the hub's CA: read from the Secret the chart would have mounted or copied
        source = v["supernode.superlink.certificate.existingSecret"] or f"{v['nameOverride']}-tls"
        assert config["supernodes"]["superlink"]["certificate"] == {"existingSecret": source}
        assert reads(result) == {f"default/{source}"}
        get(result.manifests(), "Secret", f"{config['name']}-ca")
    else:
        assert not reads(result) and "certificate" not in config["supernodes"]["superlink"]


def _node_keys(config: dict):
    if config.get("nodeAuth", {}).get("keySource") != "config":
        return None
    pool = config["supernodes"]["pools"][0]
    return {pool["name"]: {str(i): new_openssh_key() for i in range(pool["replicas"])}}


def _check_meaning(example, v, config, objects, cli):
    name = chart_fullname(v, example.release)
    pool = v["supernode.name"]
    assert config["role"] == "site" and config["name"] == name
    workload = get(objects, "StatefulSet", f"{name}-supernode-{pool}")
    assert workload["spec"]["replicas"] == v["supernode.replicas"]
    assert FlowerVersion.parse(config["version"]).minor == FlowerVersion.parse(v["supernode.image.tag"]).minor
    started = [(w, c, argv) for w, _, c, argv in started_containers([o for o in objects if o["kind"] == "StatefulSet"])]
    supernodes = [(c, argv) for w, c, argv in started if c["name"] == "supernode"]
    assert len(supernodes) == v["supernode.replicas"]
    process = v["superexec.enabled"] is True
    for c, argv in supernodes:
        assert c["image"] == chart_image(v, "supernode")
        parsed = cli.parse(PROGRAMS["supernode"], argv)  # real Flower accepts the command line
        assert parsed["superlink"] == f"{v['supernode.superlink.address']}:{v['supernode.superlink.port']}"
        assert parsed["insecure"] is (not v["tls.enabled"])
        assert bool(parsed["root_certificates"]) is v["tls.enabled"]
        assert parsed["isolation"] == ("process" if process else "subprocess")
        assert bool(parsed["auth_supernode_private_key"]) is v["global.nodeAuth.enabled"]
        if v["supernode.node.config"]:
            # Read back through Flower's own parser: same keys, values and YAML types.
            got = cli.node_config(parsed["node_config"])
            want = v["supernode.node.config"]
            assert got == want and [type(got[k]) for k in want] == [type(x) for x in want.values()]
        else:
            assert parsed["node_config"] is None
    superexecs = [(w, c, argv) for w, c, argv in started if c["name"] == "superexec-clientapp"]
    # The chart's SuperExecs run in workloads of their own: `superexecPlacement: distributed`.
    assert len(superexecs) == (v["supernode.replicas"] * v["superexec.replicas"] if process else 0)
    assert config.get("superexecPlacement") == ("distributed" if process else None)
    for w, c, argv in superexecs:
        assert c["image"] == chart_image(v, "superexec")
        cli.parse(PROGRAMS["superexec-clientapp"], argv)
        assert w["metadata"]["name"].startswith(f"{name}-superexec-{pool}")


def test_node_keys_are_never_inlined(tmp_path, capsys):
    example = next(e for e in EXAMPLES if e.id == "node-authentication")
    values = _bumped(example)
    secret = values["global"]["nodeAuth"]["authSupernodePrivateKey"]
    code, out, err = _import(example, tmp_path, capsys, values)
    assert code == 0, err
    body = secret.splitlines()[1]
    assert body not in out and "PRIVATE KEY" not in out.split("\nconfig:")[1]
    assert stack_config(out)["nodeAuth"] == {"enabled": True, "keySource": "config"}
    assert 'pulumi config set --secret --path nodeAuthKeys.supernode.0 "$(cat supernode-0.key)"' in out
    # Nothing writes the file: the comment says the user does, first.
    assert "first write the key of global.nodeAuth.authSupernodePrivateKey (its text, as in the values file) to" in out


# A values file as a user writes it: `1e-3` is a float to Helm (go-yaml), a string to YAML 1.1 as
# PyYAML reads it (a float needs a dot there); `1_0` is 10 to both.
NUMBERS = """\
supernode:
  image: {tag: 1.26.1}
  node:
    config: {lr: 1e-3, decay: 5E-4, epochs: 1_0, when: 2024-01-01}
"""


def test_node_config_numbers_are_read_as_helm_reads_them(tmp_path, capsys, flower):
    code, out, err = run_import(capsys, "helm", write(tmp_path, "values.yaml", NUMBERS), "--release", "r")
    assert code == 0, err
    want = {"lr": 0.001, "decay": 0.0005, "epochs": 10, "when": "2024-01-01"}
    config = stack_config(out)
    assert config["supernodes"]["pools"][0]["nodeConfig"] == want
    objects = run(config, "r").manifests()
    (argv,) = [a for _, _, c, a in started_containers(objects) if c["name"] == "supernode"]
    # Read back through Flower's own parser: the types Helm would have passed.
    got = flower[GRPC_ERA].node_config(flower[GRPC_ERA].parse(PROGRAMS["supernode"], argv)["node_config"])
    assert got == want and [type(got[k]) for k in want] == [float, float, int, str]


@pytest.mark.parametrize(
    "release,name,override,want",
    [
        ("pytorch", "flower-client", "", "pytorch-flower-client"),
        ("my-flower-client-prod", "flower-client", "", "my-flower-client-prod"),  # contains the name
        ("r", "flower-client", "custom", "custom"),
        ("r", "x", "a" * 62 + "-b", "a" * 62),  # cut to 63, then one '-' trimmed
        ("r" * 70, "x", "", "r" * 63),
    ],
)
def test_fullname_as_the_charts_helpers(release, name, override, want):
    assert fullname(release, name, override) == want
