"""The offline hub -> site chain for every hub (GitHub issue 35, part 3): a hub whose CA is known only at `up`
(`tls.source: certManager` or `existingSecret`) writes a marked placeholder into its offline `--outputs`; a site's
render takes exactly that placeholder as the hub's CA, says so on stderr and renders with it, while an output that
is neither a certificate nor such a placeholder stays refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from flower_federation.cli.offline import placeholder_outputs, placeholder_read
from flower_federation.flower.certificates import is_offline_ca_placeholder
from tests.test_new_user_cli import cli

GOLDEN = Path(__file__).resolve().parent / "golden"
HUB = "acme/flower-federation/hub"
CERT_MANAGER = {"source": "certManager", "certManager": {"issuerRef": {"name": "ca-issuer", "kind": "ClusterIssuer"}}}


def test_every_stand_in_an_offline_render_writes_for_a_ca_is_recognised():
    import base64

    read = placeholder_read("kubernetes:core/v1:Secret", "flower-hub/my-tls")["data"]["ca.crt"]
    generated = placeholder_outputs("tls:index/selfSignedCert:SelfSignedCert", "fl-tls-ca", {})["certPem"]
    for text in (base64.b64decode(read).decode(), generated):
        assert is_offline_ca_placeholder(text), text
    for text in ("<read from Secret my-tls at deploy time>", f"{generated}\n", f"x{generated}", "", None, "<>"):
        assert not is_offline_ca_placeholder(text), text


def test_a_site_renders_against_the_offline_outputs_of_a_cert_manager_hub(tmp_path):
    settings = yaml.safe_load((GOLDEN / "Pulumi.hub.yaml").read_text())
    federation = settings["config"]["flower-federation:federation"]
    federation["tls"] = CERT_MANAGER
    del federation["sites"]  # reads no other stack
    hub_file, outputs = tmp_path / "Pulumi.hub.yaml", tmp_path / "hub.json"
    hub_file.write_text(yaml.safe_dump(settings))
    assert cli("render", "--config-file", str(hub_file), "--outputs", str(outputs))[0] == 0
    ca = json.loads(outputs.read_text())["caCertificate"]
    assert ca == "<read from Secret flower-hub/fl-superlink-tls at deploy time>"

    site = str(GOLDEN / "Pulumi.site-from-hub.yaml")
    code, out, err = cli("render", "--config-file", site, "--show-secrets", "--stack-outputs", f"{HUB}={outputs}")
    assert code == 0, err
    assert err == (
        f"note: federation.supernodes.superlink.certificate.fromStack: stack '{HUB}' exports a placeholder "
        f"caCertificate, {ca}: its outputs were written offline and its CA is made at deploy time; taken as the CA "
        f"SuperNodes trust. pulumi preview reads the real one (or pass outputs written by `pulumi stack output --json "
        f"--stack {HUB}`)\n"
    )
    trusted = [d for d in yaml.safe_load_all(out) if d["kind"] == "Secret" and "ca.crt" in d.get("stringData", {})]
    assert [d["stringData"]["ca.crt"] for d in trusted] == [ca]


@pytest.mark.parametrize(
    "ca",
    [
        "<read from Secret flower-hub/fl-superlink-tls at deploy time> and more",  # not the placeholder, whole
        "<read from Secret fl-superlink-tls at deploy time>",  # no namespace: no render writes this
        "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n",  # cut short
    ],
)
def test_an_output_that_is_neither_a_certificate_nor_the_placeholder_is_refused(tmp_path, ca):
    """The negative control: only the exact stand-in is taken; a real output that is not a certificate is not."""
    outputs = json.loads((GOLDEN / "hub.outputs.json").read_text())
    outputs["caCertificate"] = ca
    path = tmp_path / "hub.json"
    path.write_text(json.dumps(outputs))
    code, out, err = cli(
        "validate", "--config-file", str(GOLDEN / "Pulumi.site-from-hub.yaml"), "--stack-outputs", f"{HUB}={path}"
    )
    assert (code, out) == (1, "")
    assert f"fromStack: stack '{HUB}' exports a caCertificate that " in err and "note:" not in err


def test_a_hub_whose_ca_is_its_own_secret_and_key_exports_the_stand_in_too(tmp_path):
    """`tls.trust.existingSecret` with a key of its own (root.pem): the offline read holds that key too, so the
    hub's outputs carry the stand-in (they held "" before, which a site refuses as no caCertificate)."""
    settings = yaml.safe_load((GOLDEN / "Pulumi.hub.yaml").read_text())
    federation = settings["config"]["flower-federation:federation"]
    federation["tls"] = {
        "source": "existingSecret",
        "existingSecret": "my-tls",
        "trust": {"source": "existingSecret", "existingSecret": "my-ca", "key": "root.pem"},
    }
    del federation["sites"]
    hub_file, outputs = tmp_path / "Pulumi.hub.yaml", tmp_path / "hub.json"
    hub_file.write_text(yaml.safe_dump(settings))
    assert cli("render", "--config-file", str(hub_file), "--outputs", str(outputs))[0] == 0
    assert json.loads(outputs.read_text())["caCertificate"] == "<read from Secret flower-hub/my-ca at deploy time>"
    site = str(GOLDEN / "Pulumi.site-from-hub.yaml")
    code, _, err = cli("validate", "--config-file", site, "--stack-outputs", f"{HUB}={outputs}")
    assert code == 0 and "exports a placeholder caCertificate, <read from Secret flower-hub/my-ca" in err
