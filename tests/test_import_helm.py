"""`python -m federation import helm`: every YAML example of the SuperNode chart's guide
(tests/seeds, read from the markdown) imports, validates and renders, and the render means
what the chart would have run: names, the SuperLink dialled, the CA, images, replicas,
isolation, node auth and node config as real Flower parses the rendered command lines.
Then refusals, --allow-drop, --preserve-behaviour and determinism."""

from __future__ import annotations

import copy
import dataclasses
import os
import subprocess
import sys
from unittest.mock import patch

import pytest

from federation.helm_parameters import mappings
from federation.importers import helm
from federation.importers.chart import CHART, WHOLE
from federation.importers.common import Stack, get_path, parts_of
from federation.importers.helm import Values
from federation.importers.helm_steps import COMPUTED, Steps, fullname
from federation.plan import load_plan
from federation.versions import FlowerVersion
from tests.support.flower import GRPC_ERA, HTTP_ERA, PROGRAMS
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
from tests.support.manifests import by_kind, get, pod_spec
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
    secret = new_openssh_key()
    values["global"]["nodeAuth"]["authSupernodePrivateKey"] = secret
    code, out, err = _import(example, tmp_path, capsys, values)
    assert code == 0, err
    body = secret.splitlines()[1]
    assert body not in out and "PRIVATE KEY" not in out.split("\nconfig:")[1]
    assert stack_config(out)["nodeAuth"] == {"enabled": True, "keySource": "config"}
    assert 'pulumi config set --secret --path nodeAuthKeys.supernode.0 "$(cat supernode-0.key)"' in out
    # Nothing writes the file: the comment says the user does, first.
    assert "first write the key of global.nodeAuth.authSupernodePrivateKey (its text, as in the values file) to" in out


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
    "supernode": {
        "image": {"tag": "1.26.1"},
        "selectorLabels": {"tier": "edge"},
        "serviceAccount": {"enabled": False},
        "replicsa": 2,
    },
    "superexec": {"enabled": True, "selectorLabels": {"tier": "edge"}, "supernode": {"port": 9999}},
}


def test_every_value_without_a_counterpart_is_refused_at_once(tmp_path, capsys):
    code, out, err = run_import(capsys, "helm", write(tmp_path, "v.yaml", REFUSED))
    assert code == 1 and out == ""
    table = {m.parameter: m.note for m in mappings()}
    for line in [
        f"supernode.selectorLabels: {table['supernode.selectorLabels']}",
        f"superexec.selectorLabels: {table['superexec.selectorLabels']}",
        "supernode.serviceAccount.enabled: false: pods under the namespace's `default` ServiceAccount",
        "superexec.supernode.port: 9999: the SuperNode serves its ClientAppIo API on 9094",
        "supernode.replicsa: not a parameter of the SuperNode Helm chart (it would ignore it); did you mean "
        "supernode.replicas?",
    ]:
        assert f"  - {line}" in err, err
    assert err.startswith("cannot import the SuperNode Helm chart's values in ")
    assert "(5 problems)" in err.splitlines()[0]


def test_allow_drop_lists_each_dropped_path_and_the_rest_validates(tmp_path, capsys):
    code, out, err = run_import(capsys, "helm", write(tmp_path, "v.yaml", REFUSED), "--allow-drop", "--release", "r")
    assert code == 0, err
    dropped = header(out).split("# Dropped (--allow-drop), not in this stack:\n", 1)[1].split("\n#\n")[0]
    paths = [line.split(":")[0].removeprefix("#   - ") for line in dropped.splitlines()]
    assert paths == sorted(
        [
            "superexec.selectorLabels",
            "superexec.supernode.port",
            "supernode.replicsa",
            "supernode.selectorLabels",
            "supernode.serviceAccount.enabled",
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
    pool = config["supernodes"]["pools"][0]
    assert "networkPolicy" not in pool and "automountServiceAccountToken" not in pool
    assert "resourcesPreset" not in config
    # A difference of taste only: the chart's spreading preset is written.
    assert config["affinity"] == {"podAntiAffinity": "soft"}
    text = header(out)
    for said in [
        "--preserve-behaviour sets supernodes.pools[0].networkPolicy.allowExternalEgress: true.",
        "--preserve-behaviour sets supernodes.pools[0].automountServiceAccountToken: true.",
        "--preserve-behaviour sets resourcesPreset: none.",
    ]:
        assert said in text, text
    code, out, _ = run_import(capsys, "helm", path, "--release", "site-a", "--preserve-behaviour")
    assert code == 0
    config = stack_config(out)
    pool = config["supernodes"]["pools"][0]
    assert pool["networkPolicy"] == {"allowExternalEgress": True} and pool["automountServiceAccountToken"] is True
    assert config["resourcesPreset"] == "none"
    objects = render(config, "site-a")
    workload = get(objects, "StatefulSet", "site-a-flower-client-supernode-supernode")
    pod = pod_spec(workload)
    assert pod["automountServiceAccountToken"] is True
    supernode = next(c for c in pod["containers"] if c["name"] == "supernode")
    assert not supernode.get("resources"), "the chart sets no resources"
    term = pod["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"][0]
    assert term["podAffinityTerm"]["topologyKey"] == "kubernetes.io/hostname"
    # The affinity term selects this pool's own pods.
    labels = workload["spec"]["template"]["metadata"]["labels"]
    assert term["podAffinityTerm"]["labelSelector"]["matchLabels"].items() <= labels.items()
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
    assert config["superexecPlacement"] == "distributed"
    objects = render(config, "r")
    workload = get(objects, "StatefulSet", "r-flower-client-supernode-supernode")
    pod = pod_spec(workload)
    assert pod["nodeSelector"] == {"zone": "a", "disk": "ssd"}
    assert pod["tolerations"] == [{"key": "gpu", "operator": "Exists"}]
    assert pod["securityContext"]["fsGroup"] == 1000
    assert workload["spec"]["template"]["metadata"]["labels"]["app"] == "x"
    assert workload["metadata"]["labels"]["team"] == "ml"
    (supernode,) = pod["containers"]
    superexec_pod = pod_spec(get(objects, "StatefulSet", "r-flower-client-superexec-supernode"))
    (superexec,) = superexec_pod["containers"]
    assert superexec_pod["nodeSelector"] == {"zone": "a", "disk": "ssd"}
    assert supernode["image"].endswith("flwr/supernode-ee:1.26.1@sha256:" + "a" * 64)
    assert supernode["imagePullPolicy"] == "Always" and superexec["imagePullPolicy"] == "IfNotPresent"
    assert supernode["securityContext"]["readOnlyRootFilesystem"] is False
    assert superexec["securityContext"]["readOnlyRootFilesystem"] is False
    assert supernode["resources"]["limits"]["memory"] == "2Gi"
    # Here a pool's env reaches its SuperExecs too (under their own superexec.env).
    assert {e["name"] for e in supernode["env"]} >= {"A", "B"} and {e["name"] for e in superexec["env"]} >= {"A", "B"}
    assert supernode["livenessProbe"]["periodSeconds"] == 20 == superexec["livenessProbe"]["periodSeconds"]
    egress = get(objects, "NetworkPolicy", "r-flower-client-supernode-supernode")["spec"]["egress"]
    assert {"ports": [{"port": 443}]} in egress


def test_superexec_settings_are_their_own(tmp_path, capsys):
    """The chart's superexec.* apply to the SuperExecs alone, which keep the chart's own probe
    values where only the SuperNode's are set (here they would inherit the SuperNodes')."""
    values = {
        "supernode": {
            "image": {"tag": "1.26.1"},
            "nodeSelector": {"disk": "hdd"},
            "livenessProbe": {"periodSeconds": 20},
        },
        "superexec": {"enabled": True, "nodeSelector": {"disk": "ssd"}},
    }
    code, out, err = run_import(capsys, "helm", write(tmp_path, "v.yaml", values), "--release", "r")
    assert code == 0, err
    objects = render(stack_config(out), "r")
    supernode = pod_spec(get(objects, "StatefulSet", "r-flower-client-supernode-supernode"))
    superexec = pod_spec(get(objects, "StatefulSet", "r-flower-client-superexec-supernode"))
    assert supernode["nodeSelector"] == {"disk": "hdd"} and superexec["nodeSelector"] == {"disk": "ssd"}
    assert supernode["containers"][0]["livenessProbe"]["periodSeconds"] == 20
    assert superexec["containers"][0]["livenessProbe"]["periodSeconds"] == 10


CHART_SETTINGS = {
    "global": {
        "annotations": {"example.org/owner": "ml-platform"},
        "podLabels": {"team": "ml"},
        "nodeSelector": {"kubernetes.io/os": "linux"},
        "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "flower", "effect": "NoSchedule"}],
        "affinity": {
            "podAntiAffinity": "hard",
            "nodeAffinity": {
                "type": "soft",
                "matchExpressions": [{"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["eu-1a"]}],
            },
        },
        "image": {"pullPolicy": "Always"},
    },
    "supernode": {
        "superlink": {"address": "fl.example.org", "port": 443},
        "image": {
            "registry": "registry.example.org",
            "repository": "flwr/supernode",
            "tag": "1.41.0",
            "digest": "sha256:" + "4f" * 32,
            "pullPolicy": "IfNotPresent",
        },
        "imagePullSecrets": ["regcred"],
        "labels": {"tier": "edge"},
        "annotations": {"example.org/rollout": "manual"},
        "podAnnotations": {"prometheus.io/scrape": "false"},
        "updateStrategy": {"type": "OnDelete"},
        "lifecycle": {"preStop": {"sleep": {"seconds": 5}}},
        "serviceAccount": {
            "annotations": {"iam.gke.io/gcp-service-account": "sn@p.iam.gserviceaccount.com"},
            "labels": {"azure.workload.identity/use": "true"},
        },
        "automountServiceAccountToken": True,
        "service": {"type": "NodePort", "servicePortClientAppIo": 19094, "nodePortClientAppIo": 30094},
        "containerPorts": {"clientAppIo": 9300, "health": 9301},
        "networkPolicy": {"allowExternal": True},
    },
    "superexec": {
        "enabled": True,
        "replicas": 2,
        "extraArgs": ["--allow-runtime-dependency-installation"],
        "image": {"repository": "flwr/superexec", "tag": "1.41.0", "pullPolicy": "Never"},
        "imagePullSecrets": ["superexec-cred"],
        "podLabels": {"role": "executor"},
        "nodeSelector": {"node.example.org/pool": "gpu"},
        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
        "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"partition": 0}},
        "lifecycle": {"postStart": {"exec": {"command": ["true"]}}},
        "serviceAccount": {"annotations": {"iam.gke.io/gcp-service-account": "se@p.iam.gserviceaccount.com"}},
        "containerPorts": {"health": 9181},
    },
}


def test_the_charts_settings_reach_the_render(tmp_path, capsys, flower):
    """issue 12 §2's settings, imported from the chart's names (docs/helm-parameters.md), are in the rendered
    objects, and real Flower 1.41 parses the command lines they shape."""
    code, out, err = run_import(capsys, "helm", write(tmp_path, "v.yaml", CHART_SETTINGS), "--release", "r")
    assert code == 0, err
    config = stack_config(out)
    objects = render(config, "r")
    name = "r-flower-client"
    for o in objects:  # global.annotations: on every object
        assert o["metadata"]["annotations"]["example.org/owner"] == "ml-platform", o["metadata"]["name"]
    supernodes = get(objects, "StatefulSet", f"{name}-supernode-supernode")
    assert supernodes["metadata"]["annotations"]["example.org/rollout"] == "manual"
    assert supernodes["spec"]["updateStrategy"] == {"type": "OnDelete"}
    template = supernodes["spec"]["template"]
    assert template["metadata"]["labels"]["team"] == "ml" and template["metadata"]["labels"]["tier"] == "edge"
    assert template["metadata"]["annotations"]["prometheus.io/scrape"] == "false"
    pod = template["spec"]
    assert pod["nodeSelector"] == {"kubernetes.io/os": "linux"}
    assert pod["tolerations"] == CHART_SETTINGS["global"]["tolerations"]
    assert pod["imagePullSecrets"] == [{"name": "regcred"}] and pod["automountServiceAccountToken"] is True
    assert "requiredDuringSchedulingIgnoredDuringExecution" in pod["affinity"]["podAntiAffinity"]  # hard
    node_terms = pod["affinity"]["nodeAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]  # soft
    assert node_terms[0]["preference"]["matchExpressions"][0]["values"] == ["eu-1a"]
    (supernode,) = pod["containers"]
    assert supernode["image"] == "registry.example.org/flwr/supernode:1.41.0@sha256:" + "4f" * 32
    assert supernode["imagePullPolicy"] == "IfNotPresent"
    assert supernode["lifecycle"] == {"preStop": {"sleep": {"seconds": 5}}}
    parsed = flower[HTTP_ERA].parse(PROGRAMS["supernode"], supernode["args"])
    assert parsed["superlink"] == "fl.example.org:443"
    assert supernode["readinessProbe"]["grpc"]["port"] == 9301
    account = get(objects, "ServiceAccount", f"{name}-supernode-supernode")
    assert account["metadata"]["annotations"]["iam.gke.io/gcp-service-account"] == "sn@p.iam.gserviceaccount.com"
    assert account["metadata"]["labels"]["azure.workload.identity/use"] == "true"
    service = get(objects, "Service", f"{name}-supernode-supernode-clientappio")
    assert service["spec"]["type"] == "NodePort"
    assert service["spec"]["ports"][0] | {"name": "x"} == {
        "name": "x",
        "port": 19094,
        "targetPort": 9300,
        "nodePort": 30094,
        "protocol": "TCP",
    }
    superexecs = [o for o in by_kind(objects, "StatefulSet") if o["metadata"]["name"].startswith(f"{name}-superexec-")]
    assert sorted(o["metadata"]["name"] for o in superexecs) == [
        f"{name}-superexec-supernode",
        f"{name}-superexec-supernode-1",
    ]
    for workload in superexecs:
        assert workload["spec"]["updateStrategy"] == {"type": "RollingUpdate", "rollingUpdate": {"partition": 0}}
        template = workload["spec"]["template"]
        assert template["metadata"]["labels"]["role"] == "executor"
        pod = template["spec"]
        assert pod["nodeSelector"] == {"kubernetes.io/os": "linux", "node.example.org/pool": "gpu"}
        assert (
            pod["tolerations"] == CHART_SETTINGS["global"]["tolerations"] + CHART_SETTINGS["superexec"]["tolerations"]
        )
        assert pod["imagePullSecrets"] == [{"name": "superexec-cred"}]
        (superexec,) = pod["containers"]
        assert superexec["image"] == "registry.hub.docker.com/flwr/superexec:1.41.0"
        assert superexec["imagePullPolicy"] == "Never"
        assert superexec["lifecycle"] == CHART_SETTINGS["superexec"]["lifecycle"]
        assert superexec["args"][-1] == "--allow-runtime-dependency-installation"
        parsed = flower[HTTP_ERA].parse(PROGRAMS["superexec-clientapp"], superexec["args"])
        assert parsed["runtime_api_address"].endswith(":9300")
        assert parsed["health_server_address"].endswith(":9181")
    account = get(objects, "ServiceAccount", f"{name}-superexec-supernode")
    assert account["metadata"]["annotations"]["iam.gke.io/gcp-service-account"] == "se@p.iam.gserviceaccount.com"


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


BASE = {"supernode": {"image": {"tag": "1.26.1"}, "superlink": {"address": "hub"}}}


def _process(**more) -> dict:
    values = copy.deepcopy(BASE)
    values["supernode"]["isolationMode"] = "process"
    values["superexec"] = {"enabled": True, "image": {"tag": "1.26.1"}}
    for component, settings in more.items():
        values[component].update(settings)
    return values


def test_each_components_chart_default_is_judged_on_its_own(tmp_path, capsys):
    """Values that set only the SuperNode's egress and token leave the SuperExec's at the
    chart's (true): said, and set with --preserve-behaviour at the SuperExec's own path."""
    egress = [{"to": [{"ipBlock": {"cidr": "10.50.0.0/16"}}]}]
    values = _process(
        supernode={
            "networkPolicy": {"allowExternalEgress": False, "extraEgress": egress},
            "automountServiceAccountToken": False,
        }
    )
    path = write(tmp_path, "v.yaml", values)
    code, out, err = run_import(capsys, "helm", path, "--release", "r")
    assert code == 0, err
    text = header(out)
    assert "--preserve-behaviour sets supernodes.pools[0].superexec.networkPolicy.allowExternalEgress: true." in text
    assert "--preserve-behaviour sets supernodes.pools[0].superexec.automountServiceAccountToken: true." in text
    assert "supernodes.pools[0].networkPolicy.allowExternalEgress: true" not in text
    assert "supernodes.pools[0].automountServiceAccountToken: true" not in text
    code, out, err = run_import(capsys, "helm", path, "--release", "r", "--preserve-behaviour")
    assert code == 0, err
    pool = stack_config(out)["supernodes"]["pools"][0]
    assert pool["networkPolicy"]["allowExternalEgress"] is False and pool["networkPolicy"]["extraEgress"] == egress
    assert pool["automountServiceAccountToken"] is False
    assert pool["superexec"]["networkPolicy"] == {"allowExternalEgress": True}
    assert pool["superexec"]["automountServiceAccountToken"] is True
    # Both left at the chart's default: one sentence names both paths, the phrase said once.
    code, out, _ = run_import(capsys, "helm", write(tmp_path, "w.yaml", _process()), "--release", "r")
    text = header(out)
    assert (
        "--preserve-behaviour sets supernodes.pools[0].automountServiceAccountToken: true and "
        "supernodes.pools[0].superexec.automountServiceAccountToken: true." in text
    )
    assert all(line.count("--preserve-behaviour") <= 1 for line in text.splitlines()), text


def test_image_pull_secrets_as_names_or_object_references(tmp_path, capsys):
    values = copy.deepcopy(BASE)
    values["supernode"]["imagePullSecrets"] = [{"name": "gar-pull"}, "other"]
    values["global"] = {"imagePullSecrets": [{"name": "global-pull"}]}
    code, out, err = run_import(capsys, "helm", write(tmp_path, "v.yaml", values), "--release", "r")
    assert code == 0, err
    config = stack_config(out)
    assert config["imagePullSecrets"] == ["global-pull"]
    assert config["supernodes"]["pools"][0]["imagePullSecrets"] == ["gar-pull", "other"]
    values["supernode"]["imagePullSecrets"] = [{"name": "a", "namespace": "x"}, 3]
    code, out, err = run_import(capsys, "helm", write(tmp_path, "v.yaml", values))
    assert code == 1 and out == ""
    assert "  - supernode.imagePullSecrets[0]: must be a Secret's name or {name: <Secret>}, not {'name'" in err
    assert "  - supernode.imagePullSecrets[1]: must be a Secret's name or {name: <Secret>}, not 3" in err


def test_what_means_otherwise_here_is_said(tmp_path, capsys):
    values = _process(
        supernode={"replicas": 3, "env": [{"name": "LOG_LEVEL", "value": "DEBUG"}, {"name": "A", "value": "1"}]},
        superexec={"replicas": 2, "env": [{"name": "A", "value": "2"}]},
    )
    code, out, err = run_import(capsys, "helm", write(tmp_path, "v.yaml", values), "--release", "r")
    assert code == 0, err
    notes = header(out).split("# Notes:\n", 1)[1]
    assert "superexec.replicas: 2 is SuperExecs per SuperNode here" in notes
    assert "supernode.replicas x superexec.replicas = 3 x 2 = 6 SuperExec pods" in notes
    assert "the chart runs superexec.replicas SuperExec pods in total" in notes
    assert "supernode.env reaches the SuperExec containers too here, where ClientApp code runs" in notes
    assert "by name): LOG_LEVEL; the chart" in notes  # A is the SuperExecs' own
    # In-process training: the SuperNode's preset and its memory limit, and how to lift it.
    code, out, err = run_import(capsys, "helm", write(tmp_path, "w.yaml", BASE))
    text = header(out)
    assert "the SuperNode container, where ClientApps train in-process, requests cpu 500m, memory 512Mi" in text
    assert "a memory limit of 768Mi (preset small)" in text
    assert "--preserve-behaviour sets resourcesPreset: none." in text


def test_every_problem_at_once_with_the_validation_of_what_would_be_written(tmp_path, capsys):
    values = copy.deepcopy(BASE)
    values["supernode"].update({"selectorLabels": {"tier": "edge"}, "replicas": 0})
    path = write(tmp_path, "v.yaml", values)
    code, out, err = run_import(capsys, "helm", path)
    assert code == 1 and out == ""
    assert f"  - supernode.selectorLabels: {CHART['supernode.selectorLabels'].note}" in err
    assert "  - federation.supernodes.pools[0].replicas (from supernode.replicas): replicas must be set" in err
    code, out, err = run_import(capsys, "helm", path, "--allow-drop")
    assert code == 1 and "(1 problem)" in err and "pools[0].replicas (from supernode.replicas)" in err
    # An object name too long comes of the names that make it, not of the setting reported at.
    long = _process(superexec={"replicas": 2})
    long["fullnameOverride"] = "a" * 40
    code, _, err = run_import(capsys, "helm", write(tmp_path, "l.yaml", long))
    assert code == 1
    assert "superexec.replicas (from fullnameOverride; supernode.name): object name 'aaaa" in err


def test_an_exposed_service_keeps_the_charts_allow_external(tmp_path, capsys):
    values = _process(supernode={"service": {"type": "NodePort", "nodePortClientAppIo": 30994}})
    code, out, err = run_import(capsys, "helm", write(tmp_path, "v.yaml", values), "--release", "r")
    assert code == 0, err
    assert stack_config(out)["supernodes"]["pools"][0]["networkPolicy"] == {"allowExternal": True}
    assert "so this stack sets supernodes.pools[0].networkPolicy.allowExternal: true" in header(out)
    values["supernode"]["networkPolicy"] = {"allowExternal": False}
    code, _, err = run_import(capsys, "helm", write(tmp_path, "v.yaml", values), "--release", "r")
    assert code == 1
    assert "networkPolicy.allowExternal (from supernode.networkPolicy.allowExternal): the NodePort Service" in err


def test_smaller_things_a_chart_user_meets(tmp_path, capsys):
    values = {"global": {"nodeAuth": {"enabled": True}}, "supernode": {"superlink": {"port": "9092"}}}
    code, out, err = run_import(capsys, "helm", write(tmp_path, "v.yaml", values))
    assert code == 1
    assert "global.nodeAuth.enabled: true: node authentication (`flwr supernode register`) needs Flower 1.23.0" in err
    assert "use an image of Flower 1.23.0 or later (supernode.image.tag" in err
    assert "or --allow-drop to import without node auth" in err
    code, out, err = run_import(capsys, "helm", write(tmp_path, "v.yaml", values), "--allow-drop")
    assert code == 0, err
    config = stack_config(out)
    assert config["supernodes"]["superlink"]["port"] == 9092 and "nodeAuth" not in config
    assert "supernode.superlink.address is 'my-superlink.example.com', the chart's placeholder" in header(out)
