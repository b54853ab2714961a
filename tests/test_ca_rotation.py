"""Rotating the generated CA with an overlap (issue 22, section 4), three `pulumi up`s of
one stack, each with real pulumi-tls key material kept across them as a stack's state
keeps it (tests/support/tls_provider.PulumiState):

1. `trustedCaGenerations: [0, 1]`: CA 1 is made beside CA 0; every client's bundle (the
   `N-ca` Secret, the server Secret's `ca.crt`, the `caCertificate` output sites read)
   holds both; the server certificate is still CA 0's; the pods roll onto the bundle.
2. `caGeneration: 1`: the server certificate is re-issued by CA 1; only the SuperLink's
   Secret and StatefulSet change (every client already trusts CA 1).
3. `trustedCaGenerations: [1]`: CA 0 leaves the bundle and the stack.

At each step the served certificate verifies against the bundle the clients hold then:
no step leaves a client that cannot verify the SuperLink. Bad CA settings are refused. A
renewed or replaced server certificate changes only the SuperLink's side.
tests/e2e/rotation.py (scenario 18) runs the same steps with real Flower.
"""

from __future__ import annotations

import base64
import copy
from typing import Any

import pytest
from cryptography import x509

from flower_federation.cli.offline import run_program
from flower_federation.plan import ConfigError, load_plan
from tests.support.flower import HTTP_ERA
from tests.support.tls_provider import PulumiState

RAW: dict[str, Any] = {
    "name": "rot",
    "namespace": "flower-rot",
    "version": HTTP_ERA,
    "supernodes": {"pools": [{"name": "a", "replicas": 1}]},
}
CA_TYPE = "tls:index/selfSignedCert:SelfSignedCert"


def up(state: PulumiState, **generate: Any) -> Any:
    raw = copy.deepcopy(RAW)
    if generate:
        raw["tls"] = {"generate": generate}
    return run_program({"federation": raw}, "rot", provider=state)


def secret(run: Any, name: str, key: str) -> str:
    m = next(m for m in run.manifests(show_secrets=True) if m["kind"] == "Secret" and m["metadata"]["name"] == name)
    return str(m["stringData"][key]) if key in m.get("stringData", {}) else base64.b64decode(m["data"][key]).decode()


def certs(pem: str) -> list[x509.Certificate]:
    return x509.load_pem_x509_certificates(pem.encode())


def issued_by_one_of(cert_pem: str, bundle: str) -> list[str]:
    """The CAs of `bundle` (by common name) that issued `cert_pem`."""
    (cert,) = certs(cert_pem)
    out = []
    for ca in certs(bundle):
        try:
            cert.verify_directly_issued_by(ca)
        except Exception:  # noqa: BLE001 - not this CA
            continue
        out.append(ca.subject.rfc4514_string())
    return out


def changed(before: Any, after: Any) -> list[tuple[str, str]]:
    old = {(m["kind"], m["metadata"]["name"]): m for m in before.manifests(show_secrets=True)}
    new = {(m["kind"], m["metadata"]["name"]): m for m in after.manifests(show_secrets=True)}
    return sorted(k for k in old.keys() | new.keys() if old.get(k) != new.get(k))


def test_the_ca_rotates_in_three_ups_and_every_client_can_verify_the_superlink_throughout() -> None:
    state = PulumiState()
    start = up(state)
    ca0 = start.outputs["caCertificate"]
    assert len(certs(ca0)) == 1 and issued_by_one_of(secret(start, "rot-superlink-tls", "tls.crt"), ca0)

    # 1. Trust CA 1 too; still signed by CA 0.
    both = up(state, trustedCaGenerations=[0, 1])
    bundle = both.outputs["caCertificate"]
    assert [c.subject for c in certs(bundle)][0] == certs(ca0)[0].subject and len(certs(bundle)) == 2
    assert certs(bundle)[0] == certs(ca0)[0], "CA 0 was replaced"
    for name in ("rot-ca", "rot-superlink-tls"):
        assert secret(both, name, "ca.crt") == bundle
    served = secret(both, "rot-superlink-tls", "tls.crt")
    assert issued_by_one_of(served, bundle) == [certs(ca0)[0].subject.rfc4514_string()]
    assert served == secret(start, "rot-superlink-tls", "tls.crt"), "the server certificate changed in step 1"
    assert sorted(r.name for r in both.registrations if r.type == CA_TYPE) == ["rot-tls-ca", "rot-tls-ca-g1"]
    assert ("StatefulSet", "rot-supernode-a") in changed(start, both), "the pool does not roll onto the bundle"

    # 2. Sign with CA 1: only the SuperLink's side changes.
    moved = up(state, caGeneration=1, trustedCaGenerations=[0, 1])
    assert moved.outputs["caCertificate"] == bundle
    served = secret(moved, "rot-superlink-tls", "tls.crt")
    ca1 = certs(bundle)[1].subject.rfc4514_string()
    assert issued_by_one_of(served, bundle) == [ca1]
    assert issued_by_one_of(served, ca0) == [], "CA 0 alone still verifies the new certificate"
    assert changed(both, moved) == [("Secret", "rot-superlink-tls"), ("StatefulSet", "rot-superlink")]

    # 3. Drop CA 0.
    done = up(state, caGeneration=1, trustedCaGenerations=[1])
    only = done.outputs["caCertificate"]
    assert len(certs(only)) == 1 and certs(only)[0] == certs(bundle)[1]
    assert issued_by_one_of(secret(done, "rot-superlink-tls", "tls.crt"), only) == [ca1]
    assert secret(done, "rot-superlink-tls", "tls.crt") == served, "the server certificate changed in step 3"
    assert sorted(r.name for r in done.registrations if r.type == CA_TYPE) == ["rot-tls-ca-g1"]


@pytest.mark.parametrize(
    ("generate", "tls_source", "said"),
    [
        (
            {"caGeneration": 1, "trustedCaGenerations": [0]},
            None,
            "tls.generate.trustedCaGenerations: [0] leaves out caGeneration 1, the CA that signs",
        ),
        ({"trustedCaGenerations": [0, 0]}, None, "tls.generate.trustedCaGenerations: [0, 0] names a CA twice"),
        ({"caGeneration": 1}, "existingSecret", "tls.generate: CA generations apply to tls.source: generate"),
    ],
)
def test_bad_ca_generations_are_refused_saying_why(generate: dict[str, Any], tls_source: Any, said: str) -> None:
    raw = copy.deepcopy(RAW)
    raw["tls"] = {"generate": generate}
    if tls_source:
        raw["tls"].update(source=tls_source, existingSecret="mine")
    with pytest.raises(ConfigError) as err:
        load_plan(raw, "rot")
    assert said in str(err.value), str(err.value)


def test_a_new_ca_at_once_is_allowed_without_an_overlap() -> None:
    """`caGeneration: 1` alone trusts [1]: every pod moves at once; docs/operations.md says what it breaks."""
    raw = copy.deepcopy(RAW)
    raw["tls"] = {"generate": {"caGeneration": 1}}
    assert load_plan(raw, "rot").spec.tls.generate.trusted == [1]


def test_a_renewed_or_replaced_server_certificate_changes_only_the_superlinks_secret_and_statefulset() -> None:
    """What pulumi-tls does inside `earlyRenewalHours`, or `pulumi up --replace` of the
    certificate: a new certificate from the same CA; only the SuperLink rolls."""
    state = PulumiState()
    before = up(state)
    state.replace("tls:index/locallySignedCert:LocallySignedCert", "rot-tls-server-cert")
    after = up(state)
    assert changed(before, after) == [("Secret", "rot-superlink-tls"), ("StatefulSet", "rot-superlink")]
    new = secret(after, "rot-superlink-tls", "tls.crt")
    assert new != secret(before, "rot-superlink-tls", "tls.crt")
    assert issued_by_one_of(new, after.outputs["caCertificate"]), "not issued by the same CA"
    assert after.outputs["caCertificate"] == before.outputs["caCertificate"]
