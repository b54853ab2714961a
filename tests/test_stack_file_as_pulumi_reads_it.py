"""Stack files as Pulumi reads them (GitHub issue 35, part 2): a key written twice in one mapping is refused with
both lines, as go-yaml v3 (Pulumi's engine) refuses it, where PyYAML silently keeps the last; and `validate` says
which checks it could not run offline, and how to run them."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from flower_federation.kube import goyaml
from tests.test_new_user_cli import cli

FEDERATION = "config:\n  flower-federation:federation:\n    name: demo\n    version: 1.42.0\n    insecure: true\n"


def _file(tmp_path, text: str) -> str:
    path = tmp_path / "Pulumi.dup.yaml"
    path.write_text(text)
    return str(path)


def test_a_key_written_twice_is_refused_naming_both_lines(tmp_path):
    path = _file(tmp_path, FEDERATION + "    namespace: flower\n    namespace: other\n")
    assert (
        yaml.safe_load(Path(path).read_text())["config"]["flower-federation:federation"]["namespace"] == "other"
    )  # PyYAML
    code, out, err = cli("validate", "--config-file", path)
    assert (code, out) == (2, "")
    assert err == (
        f"error: {path}:7: config.flower-federation:federation.namespace: key written twice in one mapping (lines 6 "
        'and 7); Pulumi\'s engine (go-yaml v3) refuses the file: mapping key "namespace" already defined at line 6. '
        "Keep one\n"
    )


def test_every_duplicate_at_once_nested_maps_and_lists_too(tmp_path):
    text = FEDERATION + (
        "    supernodes:\n      pools:\n        - name: a\n          nodeConfig: {lr: 1, 'lr': 2}\n"
        "    superlink:\n      resources: {}\n      resources: {}\n"
    )
    code, _, err = cli("validate", "--config-file", _file(tmp_path, text))
    assert code == 2 and "Traceback" not in err
    lines = err.splitlines()
    assert len(lines) == 2, err
    # Quoting aside, `lr` and 'lr' are one key to go-yaml v3 (it compares the scalars' text).
    assert ":9: config.flower-federation:federation.supernodes.pools[0].nodeConfig.lr: " in lines[0]
    assert "(both on line 9)" in lines[0]
    assert ":12: config.flower-federation:federation.superlink.resources: " in lines[1]
    assert "(lines 11 and 12)" in lines[1]


@pytest.mark.parametrize(
    "text",
    [
        "a: {x: 1}\nb: {x: 2}\n",  # the same key in two mappings
        "a: &base {x: 1}\nb: {<<: *base, x: 2}\n",  # a merge's key overridden: not a duplicate
        "a: [{x: 1}, {x: 2}]\n",
        "a: 1\nA: 2\n",  # keys are case-sensitive
    ],
)
def test_distinct_keys_are_read(text):
    """The negative control: keys that only look alike are read, as go-yaml v3 reads them."""
    assert goyaml.load_stack_file(text) == yaml.safe_load(text)


def test_the_helm_loader_keeps_the_last_as_go_yaml_v2_does():
    """Helm's values (go-yaml v2, non-strict) keep the last of a key written twice; only Pulumi's reading refuses."""
    assert goyaml.load_helm_values("a: 1\na: 2\n") == [{"a": 2}]
    with pytest.raises(goyaml.DuplicateKeys):
        goyaml.load_stack_file("a: 1\na: 2\n")


# --- what validate could not check offline ------------------------------------------------------------------

GOLDEN = Path(__file__).resolve().parent / "golden"
SITE, HUB_STACK = str(GOLDEN / "Pulumi.site-from-hub.yaml"), "acme/flower-federation/hub"


def test_validate_names_each_stack_whose_outputs_it_could_not_check_and_how():
    code, out, err = cli("validate", "--config-file", SITE)
    assert code == 0 and out.startswith("ok: federation 'hospital-b'")
    assert err == (
        f"note: not checked offline, the outputs of stack '{HUB_STACK}' that "
        "federation.supernodes.superlink.certificate.fromStack reads (the hub's address, CA certificate, TLS and "
        f"Flower version): check them with `validate --stack-outputs {HUB_STACK}=FILE.json`, FILE.json written by "
        f"`pulumi stack output --json --stack {HUB_STACK}` (or by `render --outputs` of that stack's config); "
        "`render` needs it too\n"
    )
    hub = cli("validate", "--config-file", str(GOLDEN / "Pulumi.hub.yaml"))[2]
    assert "federation.sites[0].fromStack reads (its SuperNodes' public keys and Flower version)" in hub


def test_validate_checks_the_outputs_it_is_given(tmp_path):
    good = str(GOLDEN / "hub.outputs.json")
    code, _, err = cli("validate", "--config-file", SITE, "--stack-outputs", f"{HUB_STACK}={good}")
    # Checked: nothing is left unchecked; the golden hub's outputs were written offline, which is said.
    assert code == 0 and "not checked offline" not in err
    assert err.startswith("note: federation.supernodes.superlink.certificate.fromStack: stack 'acme/flower-federation/")
    assert "exports a placeholder caCertificate" in err and err.count("\n") == 1
    # The negative control: the same outputs with a caCertificate that is no certificate fail validate, as render.
    bad = tmp_path / "hub.json"
    bad.write_text(Path(good).read_text().replace('"<certPem of fl-tls-ca', '"not a certificate <certPem of fl-tls-ca'))
    code, out, err = cli("validate", "--config-file", SITE, "--stack-outputs", f"{HUB_STACK}={bad}")
    assert (code, out) == (1, "")
    assert "fromStack: stack 'acme/flower-federation/hub' exports a caCertificate that has no -----BEGIN" in err
    # A flag for a stack the config does not read is a usage error, said as validate's.
    code, _, err = cli("validate", "--config-file", SITE, "--stack-outputs", f"acme/flower-federation/hbu={good}")
    assert code == 2 and err.startswith("error: cannot validate (1 problem):\n") and "did you mean" in err
