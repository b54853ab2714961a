"""`validate` of a stack file with `secure:` values (node keys supplied as a secret, a cluster's kubeconfig): it
checks everything else and says what it could not check; `render` still refuses, since it would print placeholders
as if they were values. Before, validate refused the whole file (exit 2), so the stacks that most need a check
could not be checked offline."""

from __future__ import annotations

from pathlib import Path

from tests.test_new_user_cli import cli

SECURE = "{secure: AAABAKq8...}"  # the shape Pulumi writes; only Pulumi can decrypt it

STACK = f"""config:
  flower-federation:federation:
    name: demo
    version: 1.42.0
    superlink:
      externalAddress: flower.example.org
    nodeAuth:
      enabled: true
      keySource: config
    clusters:
      edge:
        kubeconfig: {SECURE}
    supernodes:
      pools:
        - name: a
          replicas: 2
          cluster: edge
  flower-federation:nodeAuthKeys: {SECURE}
"""


def write(tmp_path: Path, text: str) -> str:
    path = tmp_path / "Pulumi.prod.yaml"
    path.write_text(text)
    return str(path)


def test_validate_checks_the_rest_and_names_what_it_could_not_check(tmp_path: Path) -> None:
    code, out, err = cli("validate", "--config-file", write(tmp_path, STACK))
    assert code == 0, err
    assert out.startswith("ok: federation 'demo'")
    assert "not checked offline, encrypted (secure:)" in err
    assert "config.flower-federation:federation.clusters.edge.kubeconfig" in err
    assert "config.flower-federation:nodeAuthKeys" in err


def test_a_problem_beside_encrypted_values_is_still_found(tmp_path: Path) -> None:
    # Negative control: the placeholders do not make the config pass.
    code, _, err = cli("validate", "--config-file", write(tmp_path, STACK.replace("replicas: 2", "replicas: -1")))
    assert code == 1
    assert "federation.supernodes.pools[0].replicas" in err


def test_render_still_refuses_encrypted_values(tmp_path: Path) -> None:
    code, out, err = cli("render", "--config-file", write(tmp_path, STACK))
    assert code == 2 and out == ""
    assert "encrypted (secure:) values cannot be decrypted offline" in err
