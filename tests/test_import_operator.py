"""`python -m flower_federation import operator`: every Federation CR of the flower-operator README
(tests/seeds, read from the markdown) imports as its spec under our key with the name and
namespace of its metadata, validates, renders, and the render runs what the operator would
have: one workload per pool of the CR's mode and replicas, its images, its isolation, the
SuperLink's ports and the address SuperNodes dial, node config as real Flower parses it.
Then several documents at once, refusals, --allow-drop, --preserve-behaviour, determinism."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from flower_federation.kube.goyaml import load_stack_file
from flower_federation.plan import load_plan
from tests.support.flower import GRPC_ERA, PROGRAMS
from tests.support.importing import header, render, run_import, stack_config, write
from tests.support.kube import started_containers
from tests.support.manifests import get, pod_spec
from tests.support.paths import ROOT
from tests.support.seeds import operator_crs

ALL_CRS = operator_crs()


def _unpinned(cr: str) -> bool:
    """A CR whose images are `latest` (two README examples): refused, as `check`'s mandatory flower-images-pinned
    would fail their render (a deliberate difference, docs/migrating.md)."""
    return ":latest" in cr


CRS = [cr for cr in ALL_CRS if not _unpinned(cr)]
UNPINNED = [cr for cr in ALL_CRS if _unpinned(cr)]
IDS = [yaml.safe_load(cr)["metadata"]["name"] for cr in CRS]


def test_the_readme_has_crs():
    assert len(CRS) >= 10 and len(UNPINNED) == 2


@pytest.mark.parametrize("cr", UNPINNED, ids=[yaml.safe_load(cr)["metadata"]["name"] for cr in UNPINNED])
def test_a_cr_with_a_latest_image_is_refused_naming_it(cr: str, tmp_path, capsys):
    code, out, err = run_import(capsys, "operator", write(tmp_path, "cr.yaml", cr))
    assert code != 0 and out == ""
    assert "federation.supernodes.image (from spec.supernodes): 'my-app/client:latest' is `latest`" in err, err
    assert "flower-images-pinned" in err, err


@pytest.mark.parametrize("cr", CRS, ids=IDS)
def test_cr_round_trip(cr: str, tmp_path, capsys, flower):
    code, out, err = run_import(capsys, "operator", write(tmp_path, "cr.yaml", cr))
    assert code == 0, err
    source = yaml.safe_load(cr)
    spec, name = source["spec"], source["metadata"]["name"]
    config = stack_config(out)
    # The spec, field for field, plus what the metadata says; nothing else unless asked.
    assert config == {"name": name, "namespace": "default", "createNamespace": False, **spec}
    assert out.startswith(f"# Pulumi.{name}.yaml\n# The flower-operator Federation '{name}'")
    load_plan(config, name)
    objects = render(config, name)
    _check_meaning(spec, name, objects, flower[GRPC_ERA])


def _resolved(value: str, pool: str, replicas, pod: dict) -> object:
    """The operator's placeholders: exactly {index}/{replicas} is an integer, inside a string
    each is substituted."""
    subs = {"index": pod["labels"].get("apps.kubernetes.io/pod-index", ""), "replicas": str(replicas)}
    subs |= {"pool": pool, "node": pod["nodeName"]}
    if value in ("{index}", "{replicas}"):
        return int(subs[value[1:-1]])
    return re.sub(r"\{(index|replicas|pool|node)\}", lambda m: subs[m.group(1)], value)


def _check_meaning(spec: dict, name: str, objects: list, cli) -> None:
    process = spec["isolationMode"] == "process"
    superlink = get(objects, "StatefulSet", f"{name}-superlink")
    images = {c["name"]: c["image"] for c in pod_spec(superlink)["containers"]}
    want = {"superlink": spec["superlink"]["image"]}
    if process:
        want["superexec-serverapp"] = spec["superlink"]["superexecImage"]
    assert images == want
    service = get(objects, "Service", f"{name}-superlink")
    assert service["spec"]["type"] == spec["superlink"].get("service", {}).get("type", "ClusterIP")
    assert {p["port"] for p in service["spec"]["ports"]} == {9092, 9093}  # Fleet and Control, as the operator's
    fleet = f"{name}-superlink.default.svc.cluster.local:9092"
    for pool in spec["supernodes"]["pools"]:
        workload = get(objects, spec["mode"], f"{name}-supernode-{pool['name']}")
        if spec["mode"] == "StatefulSet":
            assert workload["spec"]["replicas"] == pool["replicas"]
        containers = {c["name"]: c["image"] for c in pod_spec(workload)["containers"]}
        want = {"supernode": pool.get("images", {}).get("supernode") or spec["supernodes"]["image"]}
        if process:
            want["superexec-clientapp"] = pool["images"]["superexecClientApp"]
        assert containers == want
        for _, pod, c, argv in started_containers([workload]):
            parsed = cli.parse(PROGRAMS[c["name"]], argv)  # real Flower accepts each command line
            if c["name"] != "supernode":
                continue
            assert parsed["superlink"] == fleet and parsed["isolation"] == spec["isolationMode"]
            node_config = pool.get("nodeConfig") or {}
            if node_config:
                replicas = pool.get("replicas")
                want_config = {k: _resolved(v, pool["name"], replicas, pod) for k, v in node_config.items()}
                assert cli.node_config(parsed["node_config"]) == want_config
            else:
                assert parsed["node_config"] is None


def test_several_documents_give_a_stack_each(tmp_path, capsys):
    path = write(tmp_path, "all.yaml", "---\n".join(CRS))
    code, out, err = run_import(capsys, "operator", path)
    assert code == 0, err
    stacks = out.split("\n---\n")
    assert [re.match(r"# Pulumi\.([\w-]+)\.yaml\n", s).group(1) for s in stacks] == IDS
    assert [stack_config(s)["name"] for s in stacks] == IDS
    code, out, err = run_import(capsys, "operator", path, "--output-dir", str(tmp_path))
    assert code == 0 and out.splitlines() == [f"wrote {tmp_path / f'Pulumi.{n}.yaml'}" for n in IDS]
    assert (tmp_path / f"Pulumi.{IDS[0]}.yaml").read_text() == stacks[0] + "\n"


CR = yaml.safe_load(CRS[0])


def _cr(**changes) -> dict:
    doc = yaml.safe_load(CRS[0])
    for path, value in changes.items():
        node = doc
        *parents, last = path.split("__")
        for key in parents:
            node = node.setdefault(key, {})
        node[last] = value
    return doc


def test_fields_the_operator_never_saw_are_refused_or_dropped(tmp_path, capsys):
    doc = _cr(
        spec__nodeAuth={"enabled": True}, spec__superlink__persistence={"size": "5Gi"}, metadata__labels={"a": "b"}
    )
    doc["spec"]["supernodes"]["pools"][0]["cluster"] = "edge"
    doc["spex"] = {"mode": "DaemonSet"}
    path = write(tmp_path, "cr.yaml", doc)
    code, out, err = run_import(capsys, "operator", path)
    assert code == 1 and out == ""
    crd = "not a field of the flower-operator's Federation CRD: the API server prunes it"
    for line in [
        f"spec.nodeAuth: {crd}",
        f"spec.superlink.persistence: {crd}",
        f"spec.supernodes.pools[0].cluster: {crd}",
        "metadata.labels: belongs to the CR object itself, which has no counterpart here",
        "spex: not part of a Federation object",
    ]:
        assert f"  - {line}" in err, err
    code, out, err = run_import(capsys, "operator", path, "--allow-drop")
    assert code == 0, err
    config = stack_config(out)
    assert "nodeAuth" not in config and "persistence" not in config["superlink"]
    assert "cluster" not in config["supernodes"]["pools"][0]
    text = header(out)
    for dropped in (
        "spec.nodeAuth",
        "spec.superlink.persistence",
        "spec.supernodes.pools[0].cluster",
        "metadata.labels",
    ):
        assert f"#   - {dropped}: " in text


def test_what_cannot_be_dropped(tmp_path, capsys):
    doc = _cr()
    doc["spec"]["supernodes"]["pools"][0]["nodeConfig"] = {"batch-size": 32}
    other = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "x"}}
    path = write(tmp_path, "cr.yaml", yaml.safe_dump(doc) + "---\n" + yaml.safe_dump(other))
    code, out, err = run_import(capsys, "operator", path, "--allow-drop")
    assert code == 1 and out == ""
    assert "  - document 1: spec.supernodes.pools[0].nodeConfig.batch-size: 32: the operator's nodeConfig" in err
    assert "  - document 2: kind: v1 Namespace is not a flwr.exalsius.ai/v1 Federation" in err
    assert err.startswith("cannot import cr.yaml (2 problems):")  # the file by its name (tests/test_new_user_import.py)


def test_spec_problems_name_the_cr_path(tmp_path, capsys):
    code, _, err = run_import(capsys, "operator", write(tmp_path, "cr.yaml", _cr(spec__mode="Deployment")))
    assert code == 1
    assert "  - federation.mode (from spec.mode): " in err


def test_a_kubectl_get_copy_imports(tmp_path, capsys):
    doc = _cr(
        metadata__namespace="ml",
        metadata__uid="1234",
        metadata__resourceVersion="99",
        metadata__annotations={"kubectl.kubernetes.io/last-applied-configuration": "{}"},
        status={"supernodes": "2/2"},
    )
    code, out, err = run_import(capsys, "operator", write(tmp_path, "cr.yaml", doc))
    assert code == 0, err
    assert stack_config(out)["namespace"] == "ml"
    assert (
        "Ignored: status, metadata.resourceVersion, metadata.uid, "
        "metadata.annotations[kubectl.kubernetes.io/last-applied-configuration] (what the API server and the "
        "operator record, not what the CR asks)." in header(out)
    )


def test_a_cr_is_read_as_kubectl_reads_it(tmp_path, capsys):
    """kubectl reads a manifest with go-yaml v2 (sigs.k8s.io/yaml), where `1e-3` is a float, which the CRD's
    string-only nodeConfig rejects; quoted, it is the string the operator passes on."""
    text = CRS[0].replace("replicas: 2", "replicas: 2\n        nodeConfig: {lr: 1e-3}")
    code, out, err = run_import(capsys, "operator", write(tmp_path, "cr.yaml", text))
    assert code == 1 and "  - spec.supernodes.pools[0].nodeConfig.lr: 0.001: the operator's nodeConfig takes" in err
    code, out, err = run_import(capsys, "operator", write(tmp_path, "cr.yaml", text.replace("1e-3", "'1e-3'")))
    assert code == 0, err
    assert stack_config(out)["supernodes"]["pools"][0]["nodeConfig"] == {"lr": "1e-3"}
    # And Pulumi reads the string back from the stack file (written quoted: unquoted, it reads a float).
    pool = load_stack_file(out)["config"]["flower-federation:federation"]["supernodes"]["pools"][0]
    assert pool["nodeConfig"] == {"lr": "1e-3"}


def test_defaults_that_differ_are_said_and_preserved_on_request(tmp_path, capsys):
    path = write(tmp_path, "cr.yaml", CRS[0])
    code, out, _ = run_import(capsys, "operator", path)
    text = header(out)
    for said in [
        "--preserve-behaviour sets insecure: true.",
        "--preserve-behaviour sets networkPolicy.enabled: false.",
        "--preserve-behaviour sets securityContext: {readOnlyRootFilesystem: false}.",
        "--preserve-behaviour sets superlink.persistence: {enabled: false}.",
    ]:
        assert said in text, text
    code, out, _ = run_import(capsys, "operator", path, "--preserve-behaviour")
    config = stack_config(out)
    assert config["insecure"] is True and config["networkPolicy"] == {"enabled": False}
    assert config["securityContext"] == {"readOnlyRootFilesystem": False}
    assert config["superlink"]["persistence"] == {"enabled": False}
    objects = render(config, "my-federation")
    assert not [o for o in objects if o["kind"] == "NetworkPolicy"]
    superlink = get(objects, "StatefulSet", "my-federation-superlink")
    assert "volumeClaimTemplates" not in superlink["spec"]
    for _, _, c, argv in started_containers([o for o in objects if o["kind"] == "StatefulSet"]):
        assert "--insecure" in argv and c["securityContext"]["readOnlyRootFilesystem"] is False
    # A CR that says insecure: false keeps TLS; nothing to preserve there.
    code, out, _ = run_import(
        capsys, "operator", write(tmp_path, "cr.yaml", _cr(spec__insecure=False)), "--preserve-behaviour"
    )
    assert stack_config(out)["insecure"] is False and "insecure: true" not in header(out)


def test_same_cr_same_bytes(tmp_path):
    path = write(tmp_path, "all.yaml", "---\n".join(CRS))
    outs = set()
    for seed in ("0", "4242"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        cmd = [sys.executable, "-m", "flower_federation", "import", "operator", path, "--preserve-behaviour"]
        outs.add(subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, check=True).stdout)
    assert len(outs) == 1


def test_unreadable_input_is_a_usage_error(tmp_path, capsys):
    code, out, err = run_import(capsys, "operator", str(tmp_path / "missing.yaml"))
    assert code == 2 and out == "" and err.startswith("error: cannot read ")
    code, out, err = run_import(capsys, "operator", write(tmp_path, "bad.yaml", "a: [b"))
    assert code == 2 and f"{tmp_path / 'bad.yaml'}:2:1: not valid YAML" in err


def test_seed_copies_are_current():
    """tests/seeds/ copies ../shared/seeds/ (a clean clone has no ../shared): refresh it when it changes. (The
    chart's guide is docs/reference/'s copy: tests/test_helm_parameters.py checks it.)"""
    shared = ROOT.parent / "shared" / "seeds"
    if not shared.is_dir():
        pytest.skip("no ../shared/seeds next to this checkout")
    for name in ("flower-operator-readme.md",):
        assert (Path(ROOT) / "tests" / "seeds" / name).read_bytes() == (shared / name).read_bytes(), name
