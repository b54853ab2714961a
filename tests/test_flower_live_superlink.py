"""Real processes: the rendered SuperLink (both dialects) started with the rendered
certificate, key and CA, only paths and listen addresses rewritten; `/health` (or the
gRPC TLS handshake) verified against the rendered CA for both `localhost` and
`127.0.0.1`; the exported register script registers every SuperNode key with the real
`flwr` CLI (and is idempotent); a real SuperNode with its own rendered key and args comes
online. Negative controls: a CA that did not sign the server certificate, and a name the
certificate does not cover, fail verification against the same live SuperLink."""

from __future__ import annotations

import ssl
from collections.abc import Iterator

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization

from tests.support.live_flower import (
    LIVE_STACKS,
    VERSIONS,
    LiveSuperLink,
    cli_home,
    live_superlink,
    start_supernode,
    wait_online,
)
from tests.support.processes import run_bounded
from tests.support.real_render import render_fresh

# Real Flower servers waited for against wall-clock deadlines: `make test` runs these
# beside the e2e tests, at normal priority, and the rest niced (Makefile).
pytestmark = pytest.mark.live


@pytest.fixture(scope="module", params=VERSIONS)
def live(request, tmp_path_factory) -> Iterator[LiveSuperLink]:
    with live_superlink(request.param, tmp_path_factory.mktemp(f"live-{request.param}")) as link:
        yield link


def test_real_superlink_serves_the_rendered_certificate(live, flower):
    r = live.r
    server = r.data("Secret", r.plan.trust.server_secret)
    assert r.outputs["caCertificate"] == r.data("Secret", r.plan.trust.ca_secret)["ca.crt"]
    served = x509.load_pem_x509_certificate(server["tls.crt"].encode()).public_bytes(serialization.Encoding.DER)
    for port in live.api_ports:
        for name in ("localhost", "127.0.0.1"):  # both SANs verify, hostname check on
            status, der = live.probe(port, live.ca_file, name)
            assert der == served
            if live.http:
                assert status == 200, f"GET https://{name}:{port}/health -> {status}"
    if live.health_port is not None:  # gRPC era: what the kubelet's grpc probe asks
        assert flower[live.version].grpc_health(f"127.0.0.1:{live.health_port}") == "SERVING"
    assert live.procs.procs[0][1].poll() is None


def test_a_ca_that_did_not_sign_the_certificate_is_refused(live):
    """Negative control: the same check fails with another deployment's CA, and for a
    name the certificate does not cover."""
    other = render_fresh(LIVE_STACKS[live.version])
    assert other.outputs["caCertificate"] != live.r.outputs["caCertificate"]
    wrong_ca = live.workdir / "other-ca.crt"
    wrong_ca.write_text(other.outputs["caCertificate"])
    for port in live.api_ports:
        for name in ("localhost", "127.0.0.1"):
            with pytest.raises(
                ssl.SSLCertVerificationError, match="unable to get local issuer|certificate verify failed"
            ):
                live.probe(port, wrong_ca, name)
        with pytest.raises(ssl.SSLCertVerificationError, match="mismatch|doesn't match"):
            live.probe(port, live.ca_file, "flower.example.com")
    # ...while the right CA still works (the SuperLink did not just go away).
    live.probe(live.api_ports[0], live.ca_file, "localhost")


def test_register_script_and_a_real_supernode(live, flower):
    r = live.r
    name, env = cli_home(live)
    script = live.workdir / "register.sh"
    script.write_text(r.outputs["nodeAuth"]["registerScript"])
    expected = [
        f"{pool}/{slot}"
        for pool, keys in sorted(r.outputs["nodeAuth"]["publicKeys"].items())
        for slot in sorted(keys, key=int)
    ]
    assert len(expected) == 4

    # A hang guard, not a speed claim: the script starts the `flwr` CLI once per key.
    script_timeout = 60 * len(expected)
    first = run_bounded(["sh", str(script)], env, timeout=script_timeout)
    assert first.returncode == 0, first.stdout + first.stderr
    assert first.stdout.splitlines() == [f"registered {k}" for k in expected], first.stdout + first.stderr

    # SuperNode alpha-1, with its rendered args and only its own key file.
    node = start_supernode(live, "alpha", 1)

    again = run_bounded(["sh", str(script)], env, timeout=script_timeout)  # idempotent
    assert again.returncode == 0, again.stdout + again.stderr
    suffix = " (if revoked, its SuperNode needs a new key pair)"
    assert again.stdout.splitlines() == [f"already registered or revoked: {k}{suffix}" for k in expected], again.stdout

    nodes = wait_online(live, node, name, env)
    assert len(nodes) == 4, nodes
    assert sorted(n["status"] for n in nodes) == ["online", "registered", "registered", "registered"]
    assert flower[live.version].grpc_health(node.health_address()) == "SERVING"
