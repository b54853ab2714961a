"""`python -m flower_federation check`: exit codes (0 clean or advisory only, 1 mandatory or --strict,
2 unreadable), the report by object and field, stdin, `kind: List`, cluster marks, and a `helm
template` of Flower's SuperNode chart."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
import yaml

from flower_federation.cli.main import main
from tests.support.golden import GOLDEN_DIR
from tests.support.policy_objects import container, find, golden, write

ROOT = Path(__file__).resolve().parent.parent
CHART = ROOT / "tests" / "seeds" / "helm-template-supernode.yaml"


def check(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["check", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_a_golden_render_passes(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = check(capsys, str(GOLDEN_DIR / "dev.rendered.yaml"))
    assert (code, out, err) == (0, "check: no violations (10 policies, 24 objects)\n", "")


def test_a_mandatory_violation_by_object_and_field(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    objects = golden("dev")
    container(find(objects, "StatefulSet", "demo-supernode-cpu"), "supernode")["args"].insert(0, "--insecure")
    code, out, _ = check(capsys, str(write(tmp_path / "dev.yaml", yaml.safe_dump_all(objects))))
    assert code == 1
    assert out.splitlines() == [
        "MANDATORY flower-tls: StatefulSet flower-dev/demo-supernode-cpu spec.template.spec.containers[supernode].args",
        "  --insecure: the SuperNode's Fleet calls are plaintext (Flower 1.42.0 has TLS)",
        "  remediation: Remove --insecure. Give the SuperLink --ssl-ca-certfile, --ssl-certfile and --ssl-keyfile and "
        "each SuperNode --root-certificates with the federation's CA (our config: remove `insecure: true`).",
        "check: 1 mandatory and 0 advisory violations (10 policies, 24 objects)",
    ]


def test_the_multi_cluster_render_is_checked_per_cluster(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    text = (GOLDEN_DIR / "multi-cluster.rendered.yaml").read_text()
    code, out, _ = check(capsys, str(GOLDEN_DIR / "multi-cluster.rendered.yaml"))
    assert code == 0 and out.splitlines()[-1].startswith("check: no violations")
    # One violation in each cluster's half of the render, each reported under its cluster.
    home, edge = text.split("# cluster: edge\n")
    home = home.replace("        - --enable-supernode-auth\n", "", 1)
    edge = edge.replace("image: flwr/supernode:1.41.0", "image: flwr/supernode:latest", 1)
    mutated = tmp_path / "multi-cluster.yaml"
    mutated.write_text(home + "# cluster: edge\n" + edge)
    code, out, _ = check(capsys, str(mutated))
    assert code == 1
    heads = [line for line in out.splitlines() if not line.startswith(" ")]
    assert heads == [
        "MANDATORY flower-node-auth: [cluster default] StatefulSet flower/mc-superlink "
        "spec.template.spec.containers[superlink].args",
        "MANDATORY flower-images-pinned: [cluster edge] StatefulSet flower/mc-supernode-edge "
        "spec.template.spec.containers[supernode].image",
        "check: 2 mandatory and 0 advisory violations (10 policies, 28 objects)",
    ]


def test_stdin_and_a_kubectl_list(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    objects = golden("dev")
    del container(find(objects, "StatefulSet", "demo-superlink"), "superlink")["resources"]["limits"]["memory"]
    listing = {"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": ""}, "items": objects}
    monkeypatch.setattr("sys.stdin", io.StringIO(yaml.safe_dump(listing)))
    code, out, _ = check(capsys, "-")
    assert code == 0  # advisory only
    assert out.splitlines()[0] == (
        "ADVISORY flower-memory-limits: StatefulSet flower-dev/demo-superlink "
        "spec.template.spec.containers[superlink].resources.limits.memory"
    )
    assert out.splitlines()[-1] == "check: 0 mandatory and 1 advisory violations (10 policies, 24 objects)"
    monkeypatch.setattr("sys.stdin", io.StringIO(yaml.safe_dump(listing)))
    assert check(capsys, "--strict", "-")[0] == 1


def test_files_are_one_set_of_objects(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    # The NetworkPolicies in one file cover the pods of the other, as `kubectl apply -f a -f b` would.
    objects = golden("dev")
    policies = [o for o in objects if o["kind"] == "NetworkPolicy"]
    rest = [o for o in objects if o["kind"] != "NetworkPolicy"]
    a = write(tmp_path / "a.yaml", yaml.safe_dump_all(rest))
    b = write(tmp_path / "b.yaml", yaml.safe_dump_all(policies))
    assert check(capsys, str(a), str(b))[0] == 0
    code, out, _ = check(capsys, str(a))
    assert code == 1 and out.count("MANDATORY flower-network-policies") == 5


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "error: {path}: no such file\n"),
        ("kind: [\n", "error: {path}:2:1: not valid YAML: did not find expected node content"),
        ("- a\n- b\n", "error: {path}: document 1 of cluster default is not a Kubernetes object (no kind)\n"),
        ("# nothing\n", "error: {path}: holds no Kubernetes object\n"),
        (b"\xff\xfe", "error: {path}: not UTF-8 text\n"),
    ],
)
def test_unreadable_input_is_exit_2_without_a_traceback(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, content: str | bytes | None, message: str
) -> None:
    path = tmp_path / "in.yaml"
    if isinstance(content, bytes):
        path.write_bytes(content)
    elif content is not None:
        path.write_text(content, encoding="utf-8")
    code, out, err = check(capsys, str(path))
    assert (code, out) == (2, "")
    assert err.startswith(message.format(path=path)) and "Traceback" not in err


def test_the_supernode_helm_chart_defaults(capsys: pytest.CaptureFixture[str]) -> None:
    # TLS towards the SuperLink (--root-certificates), restricted pods, NetworkPolicies both ways and a pinned
    # image, but no memory limit and an unused API token: advisory, so exit 0 (1 with --strict).
    code, out, _ = check(capsys, str(CHART))
    heads = [line for line in out.splitlines() if not line.startswith(" ")]
    assert (code, heads) == (
        0,
        [
            "ADVISORY flower-memory-limits: Deployment flower/flower-supernode "
            "spec.template.spec.containers[supernode].resources.limits.memory",
            "ADVISORY flower-no-service-account-token: Deployment flower/flower-supernode "
            "spec.template.spec.automountServiceAccountToken",
            "check: 0 mandatory and 2 advisory violations (10 policies, 4 objects)",
        ],
    )
    assert check(capsys, "--strict", str(CHART))[0] == 1


def test_the_chart_with_tls_off(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    # tls.enabled: false renders --insecure in place of --root-certificates: mandatory.
    text = CHART.read_text(encoding="utf-8").replace(
        "- --root-certificates\n            - /app/cert/ca.crt", "- --insecure"
    )
    assert "--insecure" in text
    code, out, _ = check(capsys, str(write(tmp_path / "chart.yaml", text)))
    assert code == 1 and "MANDATORY flower-tls: Deployment flower/flower-supernode" in out
