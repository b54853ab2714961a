"""`python -m federation import helm`: every YAML example of the SuperNode chart's guide
(tests/seeds, read from the markdown) imports, validates and renders, and the render means
what the chart would have run: names, the SuperLink dialled, the CA, images, replicas,
isolation, node auth and node config as real Flower parses the rendered command lines.
Then refusals, --allow-drop, --preserve-behaviour and determinism."""

from __future__ import annotations

import copy
import os
import subprocess
import sys

import pytest

from federation.dialects import FlowerVersion
from federation.importers.chart import CHART, NO_COUNTERPART_YET
from federation.importers.helm_steps import fullname
from federation.plan import load_plan
from tests.support.flower import GRPC_ERA, PROGRAMS
from tests.support.importing import (
    chart_fullname,
    chart_image,
    chart_values,
    header,
    reads,
    render,
    run,
    run_import,
    stack_config,
    write,
)
from tests.support.kube import started_containers
from tests.support.manifests import get, pod_spec
from tests.support.paths import ROOT
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


def test_the_mapping_table_is_the_guides_parameter_list():
    """Every parameter row of the guide has its entry (a row under a mapping-valued entry
    belongs to it), with the guide's default; the table has nothing the guide lacks."""
    rows = chart_parameters()
    for path, default in rows.items():
        if path in CHART:
            assert CHART[path].default == default, path
        else:
            parent = next(p for p in CHART if path.startswith(p + "."))
            node = CHART[parent].default
            for key in path[len(parent) + 1 :].split("."):
                node = node[key]
            assert node == default, path
    for path in CHART:
        assert path in rows or any(r.startswith(path + ".") for r in rows), path
    for path, param in CHART.items():  # each entry: a target, or a reason to refuse
        assert (param.to is None) != (param.refuse is None), path


def _bumped(example: HelmExample) -> dict:
    """The example with its images rebuilt on Flower 1.26.1 (tag suffixes kept)."""
    values = copy.deepcopy(example.values)
    v = chart_values(values)
    for component in ("supernode", "superexec"):
        tag = v[f"{component}.image.tag"]
        suffix = tag.split("-", 1)[1] if "-" in tag else ""
        values.setdefault(component, {}).setdefault("image", {})["tag"] = "-".join(filter(None, [GRPC_ERA, suffix]))
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
    assert len(superexecs) == (v["supernode.replicas"] if process else 0)
    distributed = process and bool((v["superexec.supernode"] or {}).get("address"))
    for w, c, argv in superexecs:
        assert c["image"] == chart_image(v, "superexec")
        cli.parse(PROGRAMS["superexec-clientapp"], argv)
        assert w["metadata"]["name"] == (f"{name}-superexec-{pool}" if distributed else workload["metadata"]["name"])


def test_node_keys_are_never_inlined(tmp_path, capsys):
    example = next(e for e in EXAMPLES if e.id == "node-authentication")
    values = _bumped(example)
    secret = new_openssh_key()
    values["global"]["nodeAuth"]["authSupernodePrivateKey"] = secret
    code, out, err = _import(example, tmp_path, capsys, values)
    assert code == 0, err
    body = secret.splitlines()[1]
    assert body not in out and "PRIVATE KEY" not in out.split("\nconfig:")[1]
    assert stack_config(out)["nodeAuth"] == {"enabled": True, "keySource": "config"}
    assert 'pulumi config set --secret --path nodeAuthKeys.supernode.0 "$(cat supernode-0.key)"' in out


def test_one_key_for_several_replicas_is_refused_or_dropped(tmp_path, capsys):
    values = {
        "global": {"nodeAuth": {"enabled": True, "authSupernodePrivateKey": "key"}},
        "supernode": {"replicas": 3, "image": {"tag": "1.26.1"}},
    }
    code, out, err = run_import(capsys, "helm", write(tmp_path, "v.yaml", values))
    assert code == 1 and out == ""
    assert "global.nodeAuth.authSupernodePrivateKey: one key for all 3 replicas" in err
    code, out, err = run_import(capsys, "helm", write(tmp_path, "v.yaml", values), "--allow-drop")
    assert code == 0, err
    assert stack_config(out)["nodeAuth"] == {"enabled": True}  # keys generated, one per SuperNode
    assert "# Dropped (--allow-drop), not in this stack:\n#   - global.nodeAuth.authSupernodePrivateKey: one key" in out


REFUSED = {
    "global": {"annotations": {"team": "ml"}, "affinity": {"podAntiAffinity": "hard"}},
    "supernode": {
        "image": {"tag": "1.26.1"},
        "updateStrategy": {"type": "Recreate"},
        "service": {"type": "NodePort"},
        "containerPorts": {"health": 9000},
        "serviceAccount": {"annotations": {"iam": "role"}},
        "replicsa": 2,
    },
}


def test_every_value_without_a_counterpart_is_refused_at_once(tmp_path, capsys):
    code, out, err = run_import(capsys, "helm", write(tmp_path, "v.yaml", REFUSED))
    assert code == 1 and out == ""
    for line in [
        f"global.annotations: {NO_COUNTERPART_YET}",
        f"global.affinity.podAntiAffinity: {NO_COUNTERPART_YET}",
        f"supernode.updateStrategy.type: {NO_COUNTERPART_YET}",
        f"supernode.service.type: {NO_COUNTERPART_YET}",
        f"supernode.serviceAccount.annotations: {NO_COUNTERPART_YET}",
        "supernode.containerPorts.health: the health server port is 8081",
        "supernode.replicsa: not a parameter of the SuperNode Helm chart (it would ignore it); did you mean "
        "supernode.replicas?",
    ]:
        assert f"  - {line}" in err, err
    assert err.startswith("cannot import the SuperNode Helm chart's values in ")
    assert "(7 problems)" in err.splitlines()[0]


def test_allow_drop_lists_each_dropped_path_and_the_rest_validates(tmp_path, capsys):
    code, out, err = run_import(capsys, "helm", write(tmp_path, "v.yaml", REFUSED), "--allow-drop", "--release", "r")
    assert code == 0, err
    dropped = header(out).split("# Dropped (--allow-drop), not in this stack:\n", 1)[1].split("\n#\n")[0]
    paths = [line.split(":")[0].removeprefix("#   - ") for line in dropped.splitlines()]
    assert paths == sorted(
        [
            "global.affinity.podAntiAffinity",
            "global.annotations",
            "supernode.containerPorts.health",
            "supernode.replicsa",
            "supernode.service.type",
            "supernode.serviceAccount.annotations",
            "supernode.updateStrategy.type",
        ]
    )
    load_plan(stack_config(out), "r")


def test_undroppable_values_stay_errors_with_allow_drop(tmp_path, capsys):
    values = {"supernode": {"enabled": False, "image": {"tag": "1.20.0"}}, "nameOverride": ""}
    code, out, err = run_import(capsys, "helm", write(tmp_path, "v.yaml", values), "--allow-drop")
    assert code == 1 and out == ""
    assert "  - supernode.enabled: false: a release of SuperExecs only" in err
    assert "  - supernode.image.tag: '1.20.0' is Flower 1.20.0, which flower-federation does not run" in err
    assert "  - nameOverride: empty: the chart then names objects after the name in its Chart.yaml" in err


def test_contradictory_isolation_is_refused(tmp_path, capsys):
    values = {"supernode": {"isolationMode": "process"}}
    code, _, err = run_import(capsys, "helm", write(tmp_path, "v.yaml", values))
    assert code == 1 and "supernode.isolationMode: process without superexec.enabled" in err
    values = {"supernode": {"isolationMode": "subprocess"}, "superexec": {"enabled": True}}
    code, _, err = run_import(capsys, "helm", write(tmp_path, "v.yaml", values))
    assert code == 1 and "supernode.isolationMode: subprocess with superexec.enabled: true" in err


def test_validation_problems_name_the_chart_path(tmp_path, capsys):
    values = {"supernode": {"replicas": 0, "superlink": {"address": "hub:443"}, "image": {"tag": "1.26.1"}}}
    code, _, err = run_import(capsys, "helm", write(tmp_path, "v.yaml", values))
    assert code == 1
    assert "federation.supernodes.pools[0].replicas (from supernode.replicas): replicas must be set (>=1)" in err
    assert "federation.supernodes.superlink.address (from supernode.superlink.address): 'hub:443' is not" in err


def test_defaults_that_differ_are_said_and_preserved_on_request(tmp_path, capsys):
    values = {"supernode": {"image": {"tag": "1.26.1"}, "superlink": {"address": "fl.example.org"}}}
    path = write(tmp_path, "v.yaml", values)
    code, out, _ = run_import(capsys, "helm", path, "--release", "site-a")
    assert code == 0
    config = stack_config(out)
    assert "networkPolicy" not in config["supernodes"] and "podTemplate" not in config["supernodes"]["pools"][0]
    text = header(out)
    for said in [
        "--preserve-behaviour sets supernodes.networkPolicy.allowExternalEgress: true.",
        "--preserve-behaviour sets supernodes.pools[0].podTemplate.spec.automountServiceAccountToken: true.",
        "--preserve-behaviour sets supernodes.pools[0].podTemplate.spec.affinity.",
    ]:
        assert said in text, text
    code, out, _ = run_import(capsys, "helm", path, "--release", "site-a", "--preserve-behaviour")
    assert code == 0
    config = stack_config(out)
    assert config["supernodes"]["networkPolicy"] == {"allowExternalEgress": True}
    spec = config["supernodes"]["pools"][0]["podTemplate"]["spec"]
    assert spec["automountServiceAccountToken"] is True
    term = spec["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"][0]
    assert term["podAffinityTerm"]["topologyKey"] == "kubernetes.io/hostname"
    objects = render(config, "site-a")
    pod = pod_spec(get(objects, "StatefulSet", "site-a-flower-client-supernode-supernode"))
    assert pod["automountServiceAccountToken"] is True and pod["affinity"] == spec["affinity"]
    # The affinity term selects this pool's own pods.
    labels = get(objects, "StatefulSet", "site-a-flower-client-supernode-supernode")["spec"]["template"]["metadata"]
    assert term["podAffinityTerm"]["labelSelector"]["matchLabels"].items() <= labels["labels"].items()
    policy = get(objects, "NetworkPolicy", "site-a-flower-client-supernode-supernode")
    assert policy["spec"]["egress"] == [{}]  # any egress, as the chart's NetworkPolicy allowed


def test_scheduling_security_and_probes_reach_the_pods(tmp_path, capsys):
    values = {
        "global": {
            "labels": {"team": "ml"},
            "nodeSelector": {"zone": "a"},
            "tolerations": [{"key": "gpu", "operator": "Exists"}],
            "env": [{"name": "A", "value": "1"}],
            "podSecurityContext": {"readOnlyRootFilesystem": False},
            "securityContext": {"fsGroup": 1000},
        },
        "supernode": {
            "image": {"tag": "1.26.1", "digest": "sha256:" + "a" * 64, "pullPolicy": "Always"},
            "nodeSelector": {"disk": "ssd"},
            "podLabels": {"app": "x"},
            "resources": {"limits": {"memory": "2Gi"}},
            "env": [{"name": "B", "value": "2"}],
            "livenessProbe": {"periodSeconds": 20},
            "networkPolicy": {"allowExternalEgress": False, "extraEgress": [{"ports": [{"port": 443}]}]},
        },
        "superexec": {
            "enabled": True,
            "nodeSelector": {"disk": "ssd"},
            "livenessProbe": {"periodSeconds": 20},
            "networkPolicy": {"allowExternalEgress": False},
        },
        "tls": {"enabled": False},
    }
    code, out, err = run_import(capsys, "helm", write(tmp_path, "v.yaml", values), "--release", "r")
    assert code == 0, err
    config = stack_config(out)
    assert config["insecure"] is True and config["isolationMode"] == "process"
    objects = render(config, "r")
    workload = get(objects, "StatefulSet", "r-flower-client-supernode-supernode")
    pod = pod_spec(workload)
    assert pod["nodeSelector"] == {"zone": "a", "disk": "ssd"}
    assert pod["tolerations"] == [{"key": "gpu", "operator": "Exists"}]
    assert pod["securityContext"]["fsGroup"] == 1000
    assert workload["spec"]["template"]["metadata"]["labels"]["app"] == "x"
    assert workload["metadata"]["labels"]["team"] == "ml"
    supernode = next(c for c in pod["containers"] if c["name"] == "supernode")
    superexec = next(c for c in pod["containers"] if c["name"] == "superexec-clientapp")
    assert supernode["image"].endswith("flwr/supernode-ee:1.26.1@sha256:" + "a" * 64)
    assert supernode["imagePullPolicy"] == "Always" and superexec["imagePullPolicy"] == "IfNotPresent"
    assert supernode["securityContext"]["readOnlyRootFilesystem"] is False
    assert supernode["resources"]["limits"] == {"memory": "2Gi"}
    assert {e["name"] for e in supernode["env"]} >= {"A", "B"} and "B" not in {e["name"] for e in superexec["env"]}
    assert supernode["livenessProbe"]["periodSeconds"] == 20 == superexec["livenessProbe"]["periodSeconds"]
    egress = get(objects, "NetworkPolicy", "r-flower-client-supernode-supernode")["spec"]["egress"]
    assert {"ports": [{"port": 443}]} in egress


def test_superexec_settings_that_a_pool_shares_must_agree(tmp_path, capsys):
    values = {
        "supernode": {"image": {"tag": "1.26.1"}, "livenessProbe": {"periodSeconds": 20}},
        "superexec": {"enabled": True, "nodeSelector": {"disk": "ssd"}},
    }
    values["supernode"]["nodeSelector"] = {"disk": "hdd"}
    code, _, err = run_import(capsys, "helm", write(tmp_path, "v.yaml", values))
    assert code == 1
    assert "  - superexec.nodeSelector: 'disk' differs from supernode.nodeSelector's" in err
    assert "  - supernode.livenessProbe.periodSeconds: 20 here, 10 in superexec.livenessProbe.periodSeconds" in err


def test_node_config_placeholders_are_not_guessed(tmp_path, capsys):
    values = {"supernode": {"image": {"tag": "1.26.1"}, "node": {"config": {"name": "client_{index}"}}}}
    code, _, err = run_import(capsys, "helm", write(tmp_path, "v.yaml", values))
    assert code == 1 and "supernode.node.config.name: 'client_{index}': the chart passes it literally" in err


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


def test_same_values_same_bytes(tmp_path):
    path = write(tmp_path, "values.yaml", REFUSED)
    outs = set()
    for seed in ("0", "12345"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        cmd = [sys.executable, "-m", "federation", "import", "helm", path, "--allow-drop", "--preserve-behaviour"]
        outs.add(subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, check=True).stdout)
    assert len(outs) == 1
