"""A CA certificate a site trusts the hub with (GitHub issue 23): given inline (`certificate.pem`) or read from the
hub stack's `caCertificate` output, it is parsed, not only looked at for its header, so a truncated or placeholder
PEM is a config problem at its path (quoting how the value starts) instead of CERTIFICATE_VERIFY_FAILED at run
time. A bundle of several CAs (the hub's CA rotation) is read whole; an offline render's stand-in is taken as given."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from flower_federation.config.errors import ConfigError
from flower_federation.flower.certificates import certificate_problem
from flower_federation.plan import load_plan
from tests.support.certificates import ca_pem
from tests.support.stacks import base
from tests.support.validation import assert_valid, problems

GOLDEN = Path(__file__).resolve().parent / "golden"
HUB_STACK = "acme/flower-federation/hub"
AT_PEM = "federation.supernodes.superlink.certificate.pem"
AT_STACK = "federation.supernodes.superlink.certificate.fromStack"


def _truncated() -> str:
    lines = ca_pem().splitlines()
    return "\n".join(lines[:3]) + "\n"  # copied from a terminal that cut it short


BAD = {
    "truncated": _truncated(),
    "placeholder body": "-----BEGIN CERTIFICATE-----\n...\n-----END CERTIFICATE-----\n",
    "body of another certificate cut": ca_pem().replace(ca_pem().splitlines()[2], ca_pem().splitlines()[2][:20]),
    "no header": "MIIBfzCCASWgAwIBAgIUZnV6emVyIGh1YiBDQQ==",
    "a public key": "-----BEGIN PUBLIC KEY-----\nMFkwEwYHKoZIzj0CAQ==\n-----END PUBLIC KEY-----\n",
}


def site(pem: str) -> dict:
    raw = base(role="site")
    raw["supernodes"]["superlink"] = {"address": "hub.example.org", "certificate": {"pem": pem}}
    return raw


def test_a_real_certificate_and_a_bundle_of_two_pass():
    assert certificate_problem(ca_pem()) is None
    assert certificate_problem(ca_pem() + ca_pem("next CA", seed=2)) is None
    assert_valid(site(ca_pem()))
    assert_valid(site(ca_pem() + ca_pem("next CA", seed=2)))


@pytest.mark.parametrize("case", list(BAD))
def test_an_inline_pem_that_is_no_certificate_is_a_problem_at_its_path_quoting_its_start(case):
    pem = BAD[case]
    ((path, message),) = [p for p in problems(site(pem)) if p[0] == AT_PEM]
    assert repr(pem[:20])[1:-1] in message, message
    assert "certificate" in message


def test_the_message_says_what_is_wrong_and_never_quotes_the_whole_value():
    message = certificate_problem(_truncated())
    assert message is not None and "could not be read" in message
    assert _truncated() not in message and len(message) < 300


def _hub_outputs(ca: str) -> dict:
    outputs = json.loads((GOLDEN / "hub.outputs.json").read_text())
    return {**outputs, "caCertificate": ca}


def _site_from_hub() -> dict:
    import yaml

    return yaml.safe_load((GOLDEN / "Pulumi.site-from-hub.yaml").read_text())["config"]["flower-federation:federation"]


def test_a_truncated_ca_certificate_output_of_the_hub_is_a_problem_at_from_stack():
    with pytest.raises(ConfigError) as err:
        load_plan(_site_from_hub(), "site-b", None, {HUB_STACK: _hub_outputs(_truncated())})
    (problem,) = err.value.problems
    assert problem.path == AT_STACK
    assert f"stack '{HUB_STACK}' exports a caCertificate that" in problem.message
    assert "-----BEGIN CERTIFICATE-----" in problem.message


def test_a_real_or_offline_ca_certificate_output_passes():
    load_plan(_site_from_hub(), "site-b", None, {HUB_STACK: _hub_outputs(ca_pem())})
    offline = json.loads((GOLDEN / "hub.outputs.json").read_text())  # `render --outputs`: a stand-in
    load_plan(_site_from_hub(), "site-b", None, {HUB_STACK: offline})
