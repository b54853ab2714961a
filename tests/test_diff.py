"""`python -m flower_federation diff`: two stack files rendered through the CLI's own path (the program under the
mocks), compared. A pool added shows only that pool's objects; a change that replaces an object says so; no change
is one line; secret values never appear; an invalid side is named; the output is byte-identical run to run."""

from __future__ import annotations

import copy
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from flower_federation.cli.diff_command import resources
from flower_federation.cli.main import main as cli
from flower_federation.cli.stack_file import StackFile
from flower_federation.kube.naming import POOL_LABEL
from flower_federation.review import changes, markdown
from tests.support.golden import GOLDEN_DIR, ROOT

KEY = "flower-federation:federation"


def _settings(name: str) -> dict[str, Any]:
    path = ROOT / "Pulumi.dev.yaml" if name == "dev" else GOLDEN_DIR / f"Pulumi.{name}.yaml"
    return yaml.safe_load(path.read_text())


def _write(tmp: Path, name: str, settings: dict[str, Any]) -> Path:
    path = tmp / name
    path.write_text(yaml.safe_dump(settings))
    return path


def _review(old: dict[str, Any], new: dict[str, Any], stack: str = "s") -> changes.Review:
    return changes.review(
        resources(StackFile(old["config"], stack), {}), resources(StackFile(new["config"], stack), {})
    )


def _diff(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = cli(["diff", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def _with_pool(settings: dict[str, Any], pool: dict[str, Any]) -> dict[str, Any]:
    new = copy.deepcopy(settings)
    new["config"][KEY]["supernodes"]["pools"].append(pool)
    return new


def _pool_objects(found: list[changes.Resource], pool: str) -> set[tuple[str, str, str, str, str]]:
    """The objects of one pool in a render, by its pool label (the builders' own marking)."""
    return {r.key for r in found if r.kubernetes and (r.inputs["metadata"].get("labels") or {}).get(POOL_LABEL) == pool}


def test_a_pool_added_shows_only_that_pools_objects(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # multi-cluster without node authentication (with it, the registration changes too: the next test), two
    # clusters; the pool goes to the ambient one.
    old = _settings("multi-cluster")
    old["config"][KEY]["nodeAuth"] = {"enabled": False}
    new = _with_pool(old, {"name": "gpu", "replicas": 2})
    r = _review(old, new)
    added = {x.key for x in r.added}
    assert added == _pool_objects(resources(StackFile(new["config"], "s"), {}), "gpu")
    assert {k[1] for k in added} == {"NetworkPolicy", "PodDisruptionBudget", "Service", "ServiceAccount", "StatefulSet"}
    # Nothing else: the SuperLink's policy admits every SuperNode of the federation by one selector, not per pool.
    assert (r.removed, r.changed, r.moved, r.other_removed, r.other_changed) == ((), (), (), (), ())
    assert [x.type for x in r.other_added] == ["flower-federation:index:SuperNodePool"]
    code, out, _ = _diff(
        capsys, "--base", str(_write(tmp_path, "a.yaml", old)), "--config-file", str(_write(tmp_path, "b.yaml", new))
    )
    assert code == 0
    assert "5 objects to create, 0 to delete, 0 to update (0 of them replaced)" in out
    assert "| default | `StatefulSet` | `flower` | `mc-supernode-gpu` |" in out  # per cluster: a Cluster column


def test_with_node_auth_a_pool_added_also_registers_its_keys(tmp_path: Path) -> None:
    """dev (node authentication): besides the pool's objects and its keys, exactly the registration changes: a new
    ConfigMap (named after its content, immutable) lists the new pool's public keys, and the Jobs named after
    the key set are new ones (registration and revocation), the old ones deleted."""
    old = _settings("dev")
    new = _with_pool(old, {"name": "gpu", "replicas": 2})
    r = _review(old, new, "dev")
    pool = _pool_objects(resources(StackFile(new["config"], "dev"), {}), "gpu")
    # The Jobs named after the key set, and its ConfigMap bound to its content (issue 32 (d)): new ones, the old
    # ones deleted; the ConfigMap reads as renamed (its Pulumi name is stable), its keys' change shown.
    jobs = {k for k in (x.key for x in r.added) if k[1] in ("Job", "ConfigMap")}
    assert {x.key for x in r.added} == pool | jobs
    assert sorted(k[3].rsplit("-", 1)[0] for k in jobs) == [
        "demo-node-registration",
        "demo-node-registration",
        "demo-node-revocation",
    ]
    assert sorted((k[1], k[3].rsplit("-", 1)[0]) for k in (x.key for x in r.removed)) == [
        ("ConfigMap", "demo-node-registration"),
        ("Job", "demo-node-registration"),
        ("Job", "demo-node-revocation"),
    ]
    assert r.changed == ()
    ((moved_old, moved_new, why),) = [(m.old, m.new, m.why) for m in r.moved]
    assert why == "renamed" and moved_old.key[1] == moved_new.key[1] == "ConfigMap", (moved_old.key, moved_new.key)
    keys_old = moved_old.inputs["data"]["trusted-keys"].splitlines()
    keys_new = moved_new.inputs["data"]["trusted-keys"].splitlines()
    assert len(keys_new) == len(keys_old) + 2 and set(keys_old) < set(keys_new)
    assert sorted(x.name for x in r.other_added) == [
        "demo-pool-gpu",
        "demo-pool-gpu-node-keys",
        "demo-pool-gpu-node-keys-0",
        "demo-pool-gpu-node-keys-1",
    ]


def test_a_new_volume_size_replaces_the_superlink_statefulset(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    old = _settings("dev")
    new = copy.deepcopy(old)
    new["config"][KEY]["superlink"]["persistence"]["size"] = "2Gi"
    code, out, _ = _diff(
        capsys, "--base", str(_write(tmp_path, "a.yaml", old)), "--config-file", str(_write(tmp_path, "b.yaml", new))
    )
    assert code == 0
    assert (
        "- **StatefulSet flower-dev/demo-superlink**\n  - `spec.volumeClaimTemplates`: immutable in a StatefulSet"
        in out
    )
    assert '`spec.volumeClaimTemplates[0].spec.resources.requests.storage`: `"1Gi"` → `"2Gi"`' in out


def test_a_renamed_pool_replaces_its_statefulset_and_generates_new_keys() -> None:
    old = _settings("dev")
    new = copy.deepcopy(old)
    new["config"][KEY]["supernodes"]["pools"][0]["name"] = "cpu2"
    r = _review(old, new, "dev")
    renamed = {(m.old.title, m.new.title) for m in r.moved}
    assert ("StatefulSet flower-dev/demo-supernode-cpu", "StatefulSet flower-dev/demo-supernode-cpu2") in renamed
    text = markdown.render(r, "dev")
    assert "**StatefulSet flower-dev/demo-supernode-cpu → StatefulSet flower-dev/demo-supernode-cpu2**: renamed" in text
    assert "demo-pool-cpu2-node-keys-0` (a key or certificate: generated anew)" in text


def test_no_change_is_one_line_and_runs_are_byte_identical(tmp_path: Path) -> None:
    stack = str(ROOT / "Pulumi.dev.yaml")
    argv = [sys.executable, "-m", "flower_federation", "diff", "--base", "-", "--config-file", stack]
    same = subprocess.run(argv, input=Path(stack).read_text(), capture_output=True, text=True, cwd=ROOT)
    assert (same.returncode, same.stdout) == (
        0,
        "No changes: stack `dev` renders the same objects and Pulumi resources on both sides.\n",
    )
    changed = _write(tmp_path, "Pulumi.dev.yaml", _with_pool(_settings("dev"), {"name": "gpu", "replicas": 1}))
    argv[-1] = str(changed)
    runs = [subprocess.run(argv, input=Path(stack).read_bytes(), capture_output=True, cwd=ROOT) for _ in range(2)]
    assert [r.returncode for r in runs] == [0, 0] and runs[0].stdout == runs[1].stdout
    assert b"```mermaid\nflowchart LR\n" in runs[0].stdout


def test_secret_values_never_appear(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    def key() -> str:
        pem = ec.generate_private_key(ec.SECP384R1()).private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH, serialization.NoEncryption()
        )
        return pem.decode()

    old = _settings("dev")
    old["config"][KEY]["nodeAuth"] = {"enabled": True, "keySource": "config"}
    old["config"]["flower-federation:nodeAuthKeys"] = {"cpu": {str(i): key() for i in range(3)}, "site-b": {"0": key()}}
    new = copy.deepcopy(old)
    new["config"]["flower-federation:nodeAuthKeys"]["cpu"]["1"] = secret = key()
    r = _review(old, new, "dev")
    text = markdown.render(r, "dev")
    body = [line for line in secret.splitlines()[1:-1] if len(line) > 20]
    assert body and not [line for line in body if line in text]
    assert '`stringData["node-1.key"]`: changed (secret, value not shown)' in text
    # Negative control: the same change, with the secret marking off, is printed.
    monkeypatch.setattr(changes, "SECRET_FIELDS", ())
    bare = [
        [
            changes.Resource(x.type, x.name, x.inputs, None, x.urn, x.cluster)
            for x in resources(StackFile(s["config"], "dev"), {})
        ]
        for s in (old, new)
    ]
    leaked = markdown.render(changes.review(*bare), "dev")
    assert '`stringData["node-1.key"]`: (text of' in leaked


def test_an_invalid_side_is_named_with_its_problems(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good = _settings("dev")
    bad = copy.deepcopy(good)
    bad["config"][KEY]["supernodes"]["pools"][0]["replicas"] = -1
    ok, broken = str(_write(tmp_path, "ok.yaml", good)), str(_write(tmp_path, "bad.yaml", bad))
    code, out, err = _diff(capsys, "--base", broken, "--config-file", ok)
    assert (code, out) == (1, "")
    assert f"error: the base side ({broken}) is invalid: invalid flower-federation config (1 problem):" in err
    assert "supernodes.pools[0].replicas" in err and "the new side" not in err
    code, _, err = _diff(capsys, "--base", ok, "--config-file", broken)
    assert code == 1 and f"the new side ({broken}) is invalid" in err and "the base side" not in err
    code, _, err = _diff(capsys, "--base", broken, "--config-file", broken)
    assert code == 1 and "the base side" in err and "the new side" in err


def test_usage_errors_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli(["diff", "--base", str(tmp_path / "missing.yaml")]) == 2
    assert "no such stack settings file" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_:
        cli(["diff"])
    assert exit_.value.code == 2
    code, _, err = _diff(capsys, "--base", str(ROOT / "Pulumi.dev.yaml"), "--stack-outputs", "a/b/c=x.json")
    assert code == 2 and "the config reads no stack 'a/b/c'" in err


def test_a_kubeconfig_held_as_a_secure_value_stands_in_as_a_placeholder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A production stack file holds a cluster's kubeconfig encrypted: diff still reviews it (the kubeconfig
    is a placeholder on both sides, secret config as Pulumi holds it), and says nothing of its value."""
    old = _settings("multi-cluster")
    old["config"][KEY]["clusters"]["edge"]["kubeconfig"] = {"secure": "AAABAKq8base"}
    new = copy.deepcopy(old)
    new["config"][KEY]["supernodes"]["pools"][1]["replicas"] = 3
    code, out, err = _diff(
        capsys, "--base", str(_write(tmp_path, "old", old)), "--config-file", str(_write(tmp_path, "new", new))
    )
    assert code == 0, err
    assert "`spec.replicas`: `2` → `3`" in out
    assert "AAABAKq8" not in out and "kubeconfig" not in out


def test_node_keys_held_as_secure_values_are_refused_with_the_reason(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    settings = _settings("dev")
    settings["config"]["flower-federation:nodeAuthKeys"] = {"cpu": {"0": {"secure": "AAAB"}}}
    path = str(_write(tmp_path, "keys", settings))
    code, _, err = _diff(capsys, "--base", path, "--config-file", path)
    assert code == 2
    assert "encrypted (secure:) node keys cannot be read offline: config.flower-federation:nodeAuthKeys.cpu.0" in err


def test_the_stack_is_named_by_stack_or_by_the_files_name(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = str(_write(tmp_path, "candidate.yaml", _settings("dev")))
    code, out, _ = _diff(capsys, "--base", path, "--config-file", path, "--stack", "prod")
    assert code == 0 and "stack `prod`" in out
    named = str(_write(tmp_path, "Pulumi.staging.yaml", _settings("dev")))
    code, out, _ = _diff(capsys, "--base", path, "--config-file", named)
    assert code == 0 and "stack `staging`" in out
