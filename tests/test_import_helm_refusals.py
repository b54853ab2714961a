"""`python -m flower_federation import helm`, what it will not do silently: values without a counterpart
refused at once by their chart paths, --allow-drop and what it lists, contradictions, the defaults
that differ said (and set with --preserve-behaviour), the same values giving the same bytes."""

from __future__ import annotations

import copy
import os
import subprocess
import sys

from flower_federation.importers.chart import CHART
from flower_federation.importers.helm_parameters import mappings
from flower_federation.plan import load_plan
from tests.support.importing import (
    header,
    render,
    run_import,
    stack_config,
    write,
)
from tests.support.manifests import get, pod_spec
from tests.support.paths import ROOT


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


# REFUSED with its misspelt key replaced by one like no parameter: all of it droppable.
DROPPABLE = copy.deepcopy(REFUSED)
DROPPABLE["supernode"]["replicsaa_unrelated_key"] = DROPPABLE["supernode"].pop("replicsa")


def test_every_value_without_a_counterpart_is_refused_at_once(tmp_path, capsys):
    code, out, err = run_import(capsys, "helm", write(tmp_path, "v.yaml", REFUSED))
    assert code == 1 and out == ""
    table = {m.parameter: m.note for m in mappings()}
    for line in [
        f"supernode.selectorLabels: {table['supernode.selectorLabels']}",
        f"superexec.selectorLabels: {table['superexec.selectorLabels']}",
        "supernode.serviceAccount.enabled: false: pods under the namespace's `default` ServiceAccount",
        "superexec.supernode.port: 9999: the SuperNode serves its ClientAppIo API on 9094",
        "supernode.replicsa: not a parameter of the SuperNode Helm chart; did you mean supernode.replicas? Fix the "
        "key there",
    ]:
        assert f"  - {line}" in err, err
    assert err.startswith("cannot import the SuperNode Helm chart's values in ")
    assert "(5 problems)" in err.splitlines()[0]


def test_a_misspelt_key_is_never_dropped_and_no_allow_drop_is_suggested(tmp_path, capsys):
    """A key close to a parameter is that parameter misspelt: --allow-drop would silently lose its value."""
    values = {"supernode": {"replicsa": 2}}
    for extra in ((), ("--allow-drop",)):
        code, out, err = run_import(capsys, "helm", write(tmp_path, "v.yaml", values), *extra)
        assert (code, out) == (1, "")
        assert "did you mean supernode.replicas? Fix the key there" in err and "--allow-drop" not in err
    # The negative control: a key like no parameter may be dropped, and the report says how.
    code, _, err = run_import(capsys, "helm", write(tmp_path, "v.yaml", {"supernode": {"zzz": 2}}))
    assert code == 1 and err.rstrip().endswith("(rerun with --allow-drop to leave these out; the output lists each)")


def test_allow_drop_lists_each_dropped_path_and_the_rest_validates(tmp_path, capsys):
    code, out, err = run_import(capsys, "helm", write(tmp_path, "v.yaml", DROPPABLE), "--allow-drop", "--release", "r")
    assert code == 0, err
    dropped = header(out).split("# Dropped (--allow-drop), not in this stack:\n", 1)[1].split("\n#\n")[0]
    paths = [line.split(":")[0].removeprefix("#   - ") for line in dropped.splitlines()]
    assert paths == sorted(
        [
            "superexec.selectorLabels",
            "superexec.supernode.port",
            "supernode.replicsaa_unrelated_key",
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
    values = {"supernode": {"replicas": "two", "superlink": {"address": "hub:443"}, "image": {"tag": "1.26.1"}}}
    code, _, err = run_import(capsys, "helm", write(tmp_path, "v.yaml", values))
    assert code == 1
    assert "federation.supernodes.pools[0].replicas (from supernode.replicas): Input should be a valid integer" in err
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


def test_same_values_same_bytes(tmp_path):
    path = write(tmp_path, "values.yaml", DROPPABLE)
    outs = set()
    for seed in ("0", "12345"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        cmd = [
            sys.executable,
            "-m",
            "flower_federation",
            "import",
            "helm",
            path,
            "--allow-drop",
            "--preserve-behaviour",
        ]
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
    # In-process training: the SuperNode's preset and its memory limit, as rendered, and how to lift it
    # (tests/test_new_user_import.py checks every figure against the render).
    code, out, err = run_import(capsys, "helm", write(tmp_path, "w.yaml", BASE))
    text = header(out)
    assert "-supernode-supernode: requests cpu 500m and memory 512Mi, limits memory 768Mi." in text
    assert "OOM-killed at its container's limit: raise it with supernode.resources (supernodeResources here)" in text
    assert "--preserve-behaviour sets resourcesPreset: none." in text


def _notes(out: str) -> str:
    """The Notes section, one line per note."""
    return header(out).split("# Notes:\n", 1)[1].split("\n#\n")[0]


def test_superexecs_per_supernode_are_said_whenever_the_count_differs(tmp_path, capsys):
    """superexec.replicas left at the chart's 1 with 3 SuperNodes: the chart runs 1 SuperExec pod, this stack 3;
    and the GPUs each requests come 3 times too."""
    gpu = {"limits": {"nvidia.com/gpu": 1, "memory": "8Gi"}}
    values = _process(supernode={"replicas": 3}, superexec={"resources": gpu})
    code, out, err = run_import(capsys, "helm", write(tmp_path, "v.yaml", values), "--release", "r")
    assert code == 0, err
    notes = _notes(out)
    assert "superexec.replicas: 1 (the chart's default) is SuperExecs per SuperNode here" in notes
    assert "supernode.replicas x superexec.replicas = 3 x 1 = 3 SuperExec pods" in notes
    assert "the chart runs superexec.replicas SuperExec pods in total" in notes
    assert "nvidia.com/gpu: 1 per SuperExec pod (superexec.resources), so 3 nvidia.com/gpu in all" in notes
    assert "where the chart's 1 SuperExec pod requested 1" in notes
    # Without GPUs: the count alone. One SuperNode: the chart's count, nothing to say.
    code, out, _ = run_import(capsys, "helm", write(tmp_path, "v.yaml", _process(supernode={"replicas": 3})))
    assert "3 x 1 = 3 SuperExec pods" in _notes(out) and "gpu" not in _notes(out)
    code, out, _ = run_import(capsys, "helm", write(tmp_path, "v.yaml", _process(superexec={"resources": gpu})))
    assert code == 0 and "SuperExecs per SuperNode" not in header(out)


def test_a_proxy_in_the_env_is_said_with_the_egress_it_needs(tmp_path, capsys):
    """The SuperNodes dial the SuperLink through a proxy the env names, which their NetworkPolicy here does not
    admit (DNS and the SuperLink's port only): said, with what admits it, and whether --preserve-behaviour does."""
    values = copy.deepcopy(BASE)
    values["global"] = {"env": [{"name": "https_proxy", "value": "http://proxy.corp:3128"}]}
    values["supernode"]["env"] = [{"name": "GRPC_PROXY", "value": "http://10.0.0.9:8080"}, {"name": "A", "value": "1"}]
    path = write(tmp_path, "v.yaml", values)
    code, out, err = run_import(capsys, "helm", path, "--release", "r")
    assert code == 0, err
    notes = _notes(out)
    assert "global.env sets https_proxy: 'http://proxy.corp:3128'" in notes
    assert "supernode.env sets GRPC_PROXY: 'http://10.0.0.9:8080'" in notes
    assert "admits only cluster DNS and the SuperLink's port" in notes
    assert "supernodes.pools[0].networkPolicy.extraEgress with the proxy's address and port" in notes
    assert "or allowExternalEgress: true, which --preserve-behaviour sets (the chart's default)" in notes
    code, out, err = run_import(capsys, "helm", path, "--release", "r", "--preserve-behaviour")
    assert code == 0, err
    assert "Covered here: --preserve-behaviour set supernodes.pools[0].networkPolicy.allowExternalEgress" in _notes(out)
    # Egress the values close themselves: said, without --preserve-behaviour; open or without a policy: nothing.
    values["supernode"]["networkPolicy"] = {"allowExternalEgress": False}
    code, out, err = run_import(capsys, "helm", write(tmp_path, "v.yaml", values), "--preserve-behaviour")
    assert code == 0 and "https_proxy" in _notes(out) and "Covered here" not in _notes(out), err
    for policy in ({"allowExternalEgress": True}, {"enabled": False}):
        values["supernode"]["networkPolicy"] = policy
        code, out, err = run_import(capsys, "helm", write(tmp_path, "v.yaml", values))
        assert code == 0 and "https_proxy" not in header(out), err


def test_a_label_of_ours_set_otherwise_is_refused_or_dropped(tmp_path, capsys):
    """A chart value that sets one of our selector/ownership labels to another value would be kept in the stack and
    lost in the render: refused by its path, or dropped and listed; the same value as ours is kept."""
    values = _process(
        supernode={"podLabels": {"app.kubernetes.io/part-of": "fl-site-b", "team": "ml"}},
        superexec={"podLabels": {"app.kubernetes.io/managed-by": "pulumi"}},
    )
    values["global"] = {"labels": {"flower.flwr.ai/component": "x"}}
    path = write(tmp_path, "v.yaml", values)
    code, out, err = run_import(capsys, "helm", path, "--release", "r")
    assert code == 1 and out == ""
    owned = "selector/ownership label set by flower-federation"
    assert (
        f"""  - supernode.podLabels["app.kubernetes.io/part-of"]: 'fl-site-b': {owned} (here 'flower-federation')"""
        in err
    )
    assert f"""  - global.labels["flower.flwr.ai/component"]: 'x': {owned} (its value differs""" in err
    assert "(2 problems)" in err.splitlines()[0], err
    code, out, err = run_import(capsys, "helm", path, "--release", "r", "--allow-drop")
    assert code == 0, err
    assert f"""#   - supernode.podLabels["app.kubernetes.io/part-of"]: 'fl-site-b': {owned}""" in header(out)
    config = stack_config(out)
    pool = config["supernodes"]["pools"][0]
    assert pool["podLabels"] == {"team": "ml"} and "labels" not in config
    assert pool["superexec"]["podLabels"] == {"app.kubernetes.io/managed-by": "pulumi"}
    labels = get(render(config, "r"), "StatefulSet", "r-flower-client-supernode-supernode")["spec"]["template"]
    assert labels["metadata"]["labels"]["team"] == "ml"


def test_a_superexec_of_another_flower_is_said(tmp_path, capsys):
    # The chart's defaults pair a raised supernode.image.tag with its SuperExec's 1.21.0: kept, and said.
    values = _process()
    del values["superexec"]["image"]
    code, out, err = run_import(capsys, "helm", write(tmp_path, "v.yaml", values))
    assert code == 0, err
    notes = header(out).split("# Notes:\n", 1)[1]
    said = (
        "The SuperExecs run Flower 1.21.0 (superexec.image.tag, the chart's default) beside SuperNodes of Flower 1.26.1"
    )
    assert said in " ".join(line.strip("# ") for line in notes.splitlines())
    assert stack_config(out)["supernodes"]["pools"][0]["images"]["superexecClientApp"]["tag"].startswith("1.21.0")
    # Same Flower on both (what _process sets): nothing to say.
    code, out, err = run_import(capsys, "helm", write(tmp_path, "w.yaml", _process()))
    assert code == 0 and "SuperExecs run Flower" not in out, err


def test_every_problem_at_once_with_the_validation_of_what_would_be_written(tmp_path, capsys):
    values = copy.deepcopy(BASE)
    values["supernode"].update({"selectorLabels": {"tier": "edge"}, "replicas": "two"})
    path = write(tmp_path, "v.yaml", values)
    code, out, err = run_import(capsys, "helm", path)
    assert code == 1 and out == ""
    assert f"  - supernode.selectorLabels: {CHART['supernode.selectorLabels'].note}" in err
    assert "  - federation.supernodes.pools[0].replicas (from supernode.replicas): Input should be a valid" in err
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


def test_a_release_scaled_to_zero_is_refused_in_the_charts_terms(tmp_path, capsys):
    # flower-operator's CRD, which the config keeps, wants a pool of at least one SuperNode; a site has a pool.
    for replicas, said in ((0, "0 (scaled to zero)"), (-1, "-1")):
        values = {
            "global": {"nodeAuth": {"enabled": True, "authSupernodePrivateKey": "key"}},
            "supernode": {"replicas": replicas, "image": {"tag": "1.26.1"}},
        }
        for flags in ((), ("--allow-drop",)):
            code, out, err = run_import(capsys, "helm", write(tmp_path, "v.yaml", values), *flags)
            assert code == 1 and out == ""
            assert f"supernode.replicas: {said}: a site's pool runs 1 SuperNode or more here" in err
            assert "import it with supernode.replicas set to the SuperNodes you want to run" in err
            assert "`pulumi destroy` the stack while none should run" in err
            assert "when mode is StatefulSet" not in err and "one key for all" not in err
