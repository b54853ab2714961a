"""TLS in the real Pulumi program (under mocks): the generated server certificate is
signed by the CA with the configured names, use and lifetime; checksum annotations
digest the certificates each pod mounts and roll it on a change; certificates from
elsewhere (a user's Secret, a trust Secret, cert-manager) are read, copied or waited for,
never recreated, and their keys never copied."""

from __future__ import annotations

import datetime
import ipaddress
import json

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID
from pulumi.runtime import rpc

from flower_federation.builders import trust
from flower_federation.cli.offline import SECRET_TYPE, Run, reveal, run_program
from flower_federation.plan import FederationPlan
from tests.support.manifests import WORKLOAD_KINDS
from tests.support.program import (
    CERTIFICATE_TYPE,
    HEX64,
    NS,
    PREVIEW,
    b64,
    checksum_of,
    created_secrets,
    default_run,
    ec_public_numbers,
    load_cert,
    manifest,
    mounted_secret_names,
    plan_for,
    recording_entry,
    secret_files,
    secret_volumes,
    supernode_workloads,
    tree,
    workloads_of,
)
from tests.support.render import plan_of
from tests.support.stacks import HTTP_ERA, base, program_config
from tests.support.tls_provider import RealTlsProvider


def test_generated_server_certificate_is_what_clients_verify():
    raw = base(
        HTTP_ERA,
        tls={
            "dnsNames": ["flower.example.com"],
            "ipAddresses": ["10.0.0.5"],
            "generate": {"validityHours": 2000, "earlyRenewalHours": 100, "caValidityHours": 9000},
        },
    )
    plan = plan_of(raw, "tls")
    run = run_program({"federation": raw}, "tls", provider=RealTlsProvider())
    secrets = created_secrets(run)
    server_files = secret_files(secrets[plan.trust.server_secret])
    assert manifest(run, "Secret", plan.trust.server_secret)["type"] == "kubernetes.io/tls"
    cert, ca = load_cert(server_files["tls.crt"]), load_cert(server_files["ca.crt"])
    assert (
        secret_files(secrets[plan.trust.ca_secret])["ca.crt"] == server_files["ca.crt"] == run.outputs["caCertificate"]
    )

    # Signed by the CA.
    cert.verify_directly_issued_by(ca)
    assert cert.issuer == ca.subject
    # The CA is a CA, and signs certificates.
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca is True
    assert ca.extensions.get_extension_for_class(x509.KeyUsage).value.key_cert_sign is True
    assert ca.not_valid_after_utc - ca.not_valid_before_utc == datetime.timedelta(hours=9000)
    # The server certificate: names, use and lifetime as configured.
    assert cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca is False
    san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert san.get_values_for_type(x509.DNSName) == trust.superlink_dns_names(plan)
    assert "flower.example.com" in san.get_values_for_type(x509.DNSName)
    assert f"{plan.names.superlink}.{NS}.svc.cluster.local" in san.get_values_for_type(x509.DNSName)
    assert san.get_values_for_type(x509.IPAddress) == [
        ipaddress.ip_address("127.0.0.1"),
        ipaddress.ip_address("10.0.0.5"),
    ]
    eku = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert ExtendedKeyUsageOID.SERVER_AUTH in eku
    assert cert.not_valid_after_utc - cert.not_valid_before_utc == datetime.timedelta(hours=2000)
    signed = next(r for r in run.registrations if r.type == "tls:index/locallySignedCert:LocallySignedCert")
    assert reveal(signed.inputs, True)["earlyRenewalHours"] == 100
    assert reveal(signed.inputs, True)["validityPeriodHours"] == 2000
    # tls.key is the certificate's own key, on the server curve.
    key = serialization.load_pem_private_key(server_files["tls.key"].encode(), None)
    assert isinstance(key, ec.EllipticCurvePrivateKey) and isinstance(key.curve, ec.SECP256R1)
    assert ec_public_numbers(key.public_key()) == ec_public_numbers(cert.public_key())


def checksums(run: Run, plan: FederationPlan) -> tuple[str, dict[str, str]]:
    superlink = checksum_of(manifest(run, "StatefulSet", plan.names.superlink))
    pools = {name: checksum_of(w) for name, w in supernode_workloads(run, plan).items()}
    return superlink, pools


def test_tls_checksum_annotations_digest_the_mounted_certificates_and_roll_on_change():
    stack = "http-nodeauth"
    plan = plan_for(program_config(stack), stack)
    first = run_program(program_config(stack), stack, provider=RealTlsProvider())
    second = run_program(program_config(stack), stack, provider=RealTlsProvider())
    sums = []
    for run in (first, second):
        files = secret_files(created_secrets(run)[plan.trust.server_secret])
        ca = secret_files(created_secrets(run)[plan.trust.ca_secret])["ca.crt"]
        assert ca == files["ca.crt"]
        superlink, pools = checksums(run, plan)
        assert superlink == trust.checksum([files["tls.crt"], files["ca.crt"]])
        assert pools == {p: trust.checksum([ca]) for p in pools} and len(pools) == 2
        assert superlink != pools["alpha"]
        sums.append((superlink, pools))
    # A new certificate (and CA) changes every pod template: the workloads roll.
    assert sums[0][0] != sums[1][0]
    assert sums[0][1]["alpha"] != sums[1][1]["alpha"]

    # The placeholder provider renders byte-identical output, run after run.
    a = run_program(program_config(stack), stack)
    b = run_program(program_config(stack), stack, preview=True)
    dump = lambda run: sorted(json.dumps(m, sort_keys=True) for m in run.manifests(True))  # noqa: E731
    assert dump(a) == dump(b)
    assert json.dumps(a.outputs, sort_keys=True) == json.dumps(b.outputs, sort_keys=True)


@pytest.mark.parametrize(
    "stack",
    [
        "http-process-distributed",
        "http-executor-kubernetes",
        "grpc-process-distributed",
        "http-process-sidecar-nodeauth",
    ],
)
def test_every_pod_that_mounts_tls_material_carries_a_checksum(stack):
    cfg, run = default_run(stack)
    plan = plan_for(cfg, stack)
    superlink, pools = checksums(run, plan)
    assert HEX64.match(superlink) and all(HEX64.match(c) for c in pools.values())
    tls_secrets = {plan.trust.server_secret, plan.trust.ca_secret}
    for w in workloads_of(run):
        mounts_tls = bool(mounted_secret_names(w["spec"]["template"]["spec"]) & tls_secrets)
        value = checksum_of(w)
        if mounts_tls:
            assert value in {superlink, *pools.values()}, f"{w['metadata']['name']} mounts TLS without checksum"
        else:
            assert value is None, w["metadata"]["name"]


# --- certificates from elsewhere ------------------------------------------------------


CRT = "-----BEGIN CERTIFICATE-----\nserver\n-----END CERTIFICATE-----\n"
CA = "-----BEGIN CERTIFICATE-----\nca\n-----END CERTIFICATE-----\n"
KEY = "-----BEGIN EC PRIVATE KEY-----\nkey\n-----END EC PRIVATE KEY-----\n"
ROOT = "-----BEGIN CERTIFICATE-----\nroot\n-----END CERTIFICATE-----\n"


def _user_tls(with_ca: bool) -> dict:
    data = {"tls.crt": b64(CRT), "tls.key": b64(KEY)}
    if with_ca:
        data["ca.crt"] = b64(CA)
    return {(SECRET_TYPE, f"{NS}/my-tls"): {"data": data}}


@PREVIEW
@pytest.mark.parametrize("with_ca", [False, True], ids=["no-ca-crt", "ca-crt"])
def test_copy_from_server_secret_copies_the_ca_and_never_the_key(with_ca, preview):
    stack = "http-existing-copy"
    plan = plan_for(program_config(stack), stack)
    run = run_program(program_config(stack), stack, preview=preview, existing=_user_tls(with_ca))
    reads = [r for r in run.registrations if r.read_id is not None]
    assert [(r.type, r.read_id) for r in reads] == [(SECRET_TYPE, f"{NS}/my-tls")]
    assert not any(r.read_id for r in run.kubernetes)
    assert not [r for r in run.kubernetes if r.name == "my-tls"]
    secrets = created_secrets(run)
    assert set(secrets) == {plan.trust.ca_secret}  # the server Secret is the user's
    ca_secret = secrets[plan.trust.ca_secret]
    assert rpc.is_rpc_secret(ca_secret.inputs["data"])
    expected = CA if with_ca else CRT  # the chart's fallback: ca.crt, else tls.crt
    assert reveal(ca_secret.inputs, True)["data"] == {"ca.crt": b64(expected)}
    assert KEY not in json.dumps(run.manifests(True))
    superlink, pools = checksums(run, plan)
    assert pools == {"alpha": trust.checksum([expected]), "beta": trust.checksum([expected])}
    if with_ca:
        assert superlink == trust.checksum([CRT, CA])
    sl = manifest(run, "StatefulSet", plan.names.superlink)
    assert plan.trust.server_secret == "my-tls" and "my-tls" in mounted_secret_names(sl["spec"]["template"]["spec"])


@PREVIEW
def test_existing_trust_secret_is_mounted_as_is_and_not_recreated(preview):
    stack = "http-existing-ca"
    plan = plan_for(program_config(stack), stack)
    existing = {**_user_tls(True), (SECRET_TYPE, f"{NS}/my-ca"): {"data": {"root.pem": b64(ROOT)}}}
    run = run_program(program_config(stack), stack, preview=preview, existing=existing)
    assert sorted(r.read_id for r in run.registrations if r.read_id) == [f"{NS}/my-ca", f"{NS}/my-tls"]
    assert created_secrets(run) == {}  # neither a server nor a CA Secret of ours
    assert plan.trust.ca_secret == "my-ca" and plan.trust.ca_key == "root.pem"
    for _name, w in supernode_workloads(run, plan).items():
        volumes = secret_volumes(w["spec"]["template"]["spec"])
        assert list(volumes.values()) == [[("my-ca", ["root.pem"])]]
        assert checksum_of(w) == trust.checksum([ROOT])


def test_superlink_checksum_covers_the_trust_secret_it_mounts():
    """The SuperLink mounts the user's CA Secret (my-ca/root.pem) as its CA; a new CA
    there must roll it like it rolls the SuperNodes."""
    stack = "http-existing-ca"
    plan = plan_for(program_config(stack), stack)

    def superlink_sum(root: str) -> str:
        existing = {**_user_tls(True), (SECRET_TYPE, f"{NS}/my-ca"): {"data": {"root.pem": b64(root)}}}
        run = run_program(program_config(stack), stack, existing=existing)
        sl = manifest(run, "StatefulSet", plan.names.superlink)
        assert ("my-ca", ["root.pem"]) in [
            ref for refs in secret_volumes(sl["spec"]["template"]["spec"]).values() for ref in refs
        ]
        return checksum_of(sl)

    assert superlink_sum(ROOT) == trust.checksum([CRT, ROOT])
    assert superlink_sum(ROOT) != superlink_sum(ROOT.replace("root", "rotated"))


@PREVIEW
@pytest.mark.parametrize("stack", ["http-certmanager", "grpc-certmanager"])
def test_cert_manager_certificate_is_waited_for_before_its_secret_is_read(stack, preview):
    plan = plan_for(program_config(stack), stack)
    run = run_program(
        program_config(stack),
        stack,
        preview=preview,
        entry=recording_entry(),
        existing={
            (SECRET_TYPE, f"{NS}/{plan.trust.server_secret}"): {
                "data": {"tls.crt": b64(CRT), "tls.key": b64(KEY), "ca.crt": b64(CA)}
            }
        },
    )
    certs = [r for r in run.kubernetes if r.type == CERTIFICATE_TYPE]
    assert len(certs) == 1
    spec = reveal(certs[0].inputs, True)["spec"]
    assert spec["secretName"] == plan.trust.server_secret
    assert spec["dnsNames"] == trust.superlink_dns_names(plan) and "flower.example.com" in spec["dnsNames"]
    assert spec["ipAddresses"] == ["127.0.0.1"]
    assert spec["issuerRef"] == {"name": "ca-issuer", "kind": "ClusterIssuer", "group": "cert-manager.io"}
    assert "server auth" in spec["usages"]
    [read] = [r for r in run.registrations if r.read_id is not None]
    assert read.read_id == f"{NS}/{plan.trust.server_secret}" and read.type == SECRET_TYPE
    assert read not in run.kubernetes
    nodes = tree(run)
    cert_urn = nodes[f"{certs[0].name}@{CERTIFICATE_TYPE}"]["urn"]
    assert cert_urn in nodes[f"{read.name}@{SECRET_TYPE}"]["depends_on"]
    # cert-manager holds the key; we create only the CA copy for clients.
    secrets = created_secrets(run)
    assert set(secrets) == {plan.trust.ca_secret}
    for reg in secrets.values():
        assert "tls.key" not in secret_files(reg)
    assert secret_files(secrets[plan.trust.ca_secret]) == {"ca.crt": CA}
    assert not [r for r in run.registrations if r.type.startswith("tls:")]


@pytest.mark.parametrize("stack", ["http-certmanager", "http-existing-copy", "http-existing-ca"])
def test_certificate_checksums_do_not_hide_workload_specs(stack):
    """The checksum digests certificates, not keys: a workload's spec stays plain, so
    `pulumi preview --diff` shows what changes in it."""
    run = run_program(program_config(stack), stack)
    for reg in run.kubernetes:
        if reg.type.split(":")[-1] in WORKLOAD_KINDS:
            assert not rpc.is_rpc_secret(reg.inputs["spec"]), f"{reg.name}: whole spec is secret"
    for w in (m for m in run.manifests() if m["kind"] in WORKLOAD_KINDS):
        value = checksum_of(w) if isinstance(w["spec"], dict) and isinstance(w["spec"].get("template"), dict) else None
        assert value is not None and HEX64.match(value), (w["metadata"]["name"], str(w["spec"])[:120])
