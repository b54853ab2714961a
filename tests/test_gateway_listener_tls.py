"""The Gateway listener's own certificate (issue 32, part 6): in the HTTP era the Gateway
terminates TLS with a certificate from the federation's CA that carries the public
hostname only, in its own Secret, and the ReferenceGrant hands a Gateway of another
namespace that Secret and no other. Before, the grant named the SuperLink's own Secret,
whose certificate also serves localhost and the in-cluster Control Service: whoever runs a
Gateway in the granted namespace could impersonate the Control API to in-cluster `flwr`
and the registration Job. Real Pulumi program under mocks, real pulumi-tls crypto
(RealTlsProvider); every Gateway API object strictly valid against v1.4.1, v1.5.1, v1.6.1."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.x509.oid import ExtendedKeyUsageOID
from pulumi.runtime import rpc

from flower_federation.cli.offline import SECRET_TYPE, reveal, run_program
from flower_federation.config.errors import ConfigError
from flower_federation.plan import load_plan
from tests.support.manifests import by_kind
from tests.support.program import (
    CERTIFICATE_TYPE,
    NS,
    b64,
    created_secrets,
    ec_public_numbers,
    load_cert,
    manifest,
    secret_files,
)
from tests.support.schema import gateway_api_releases_serving
from tests.support.stacks import GRPC_ERA, HTTP_ERA, base
from tests.support.tls_provider import RealTlsProvider
from tests.support.validation import assert_problems

HOST = "fl.example.org"
GATEWAY = {"parentRefs": [{"name": "public", "namespace": "gateway-system", "sectionName": "fleet"}], "hostname": HOST}
CERT_MANAGER = {"source": "certManager", "certManager": {"issuerRef": {"name": "ca-issuer", "kind": "ClusterIssuer"}}}


def hub(version: str = HTTP_ERA, gateway: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    raw = base(version, **extra)
    raw["superlink"] = {**raw.get("superlink", {}), "gateway": copy.deepcopy(gateway or GATEWAY)}
    return raw


def grants(objects: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """(from namespace, Secret name) of every ReferenceGrant."""
    return [
        (f["namespace"], t["name"])
        for g in by_kind(objects, "ReferenceGrant")
        for f in g["spec"]["from"]
        for t in g["spec"]["to"]
        if t["kind"] == "Secret"
    ]


def test_generated_listener_certificate_carries_the_public_hostname_only(k8s_validate) -> None:
    raw = hub()
    plan = load_plan(copy.deepcopy(raw), "gw")
    run = run_program({"federation": raw}, "gw", provider=RealTlsProvider())
    secrets = created_secrets(run)
    listener_secret = f"{plan.name}-gateway-tls"
    files = secret_files(secrets[listener_secret])
    assert set(files) == {"tls.crt", "tls.key"}  # no CA key, no SuperLink key
    assert manifest(run, "Secret", listener_secret)["type"] == "kubernetes.io/tls"
    cert = load_cert(files["tls.crt"])
    ca = load_cert(secret_files(secrets[plan.trust.ca_secret])["ca.crt"])
    cert.verify_directly_issued_by(ca)  # sites verify it with the CA they already trust
    san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert san.get_values_for_type(x509.DNSName) == [HOST]
    assert san.get_values_for_type(x509.IPAddress) == []
    assert ExtendedKeyUsageOID.SERVER_AUTH in cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca is False
    key = serialization.load_pem_private_key(files["tls.key"].encode(), None)
    assert ec_public_numbers(key.public_key()) == ec_public_numbers(cert.public_key())
    # Its own key, not the SuperLink's.
    server = secret_files(secrets[plan.trust.server_secret])
    assert server["tls.key"] != files["tls.key"]
    # Secret in Pulumi state.
    assert rpc.is_rpc_secret(secrets[listener_secret].inputs["stringData"])
    assert "BEGIN" not in str(reveal(secrets[listener_secret].inputs, False))
    # The grant names that Secret and nothing else; the negative control: the SuperLink's Secret, which the grant
    # named before, carries what a Gateway must never present (localhost and the in-cluster Control Service).
    objects = run.manifests(False)
    assert grants(objects) == [("gateway-system", listener_secret)]
    server_sans = load_cert(server["tls.crt"]).extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert {"localhost", f"{plan.names.superlink_control}.{NS}.svc"} <= set(
        server_sans.get_values_for_type(x509.DNSName)
    )
    assert not {"localhost", f"{plan.names.superlink_control}.{NS}.svc"} & set(san.get_values_for_type(x509.DNSName))
    for obj in objects:
        if obj["apiVersion"].startswith("gateway.networking.k8s.io/"):
            assert {"v1.5.1", "v1.6.1"} <= set(gateway_api_releases_serving(obj))
            k8s_validate(obj)


def test_cert_manager_listener_certificate_from_the_same_issuer(k8s_validate) -> None:
    raw = hub(tls=CERT_MANAGER)
    plan = load_plan(copy.deepcopy(raw), "gw")
    existing = {(SECRET_TYPE, f"{NS}/{plan.trust.server_secret}"): {"data": {"tls.crt": b64("c"), "ca.crt": b64("a")}}}
    run = run_program({"federation": raw}, "gw", existing=existing)
    certs = {reveal(r.inputs, True)["metadata"]["name"]: r for r in run.kubernetes if r.type == CERTIFICATE_TYPE}
    assert set(certs) == {plan.names.certificate, f"{plan.name}-gateway"}
    listener = reveal(certs[f"{plan.name}-gateway"].inputs, True)["spec"]
    server = reveal(certs[plan.names.certificate].inputs, True)["spec"]
    assert listener["secretName"] == f"{plan.name}-gateway-tls"
    assert listener["dnsNames"] == [HOST] and "ipAddresses" not in listener
    assert listener["issuerRef"] == server["issuerRef"]
    assert "localhost" in server["dnsNames"]  # the SuperLink's, which the grant no longer hands out
    objects = run.manifests(False)
    assert grants(objects) == [("gateway-system", f"{plan.name}-gateway-tls")]
    for obj in objects:
        if obj["kind"] == "ReferenceGrant":  # (no cert-manager schema is vendored)
            k8s_validate(obj)
    # cert-manager holds the listener's key: no tls resource, no key of ours.
    assert not [r for r in run.registrations if r.type.startswith("tls:")]


def test_existing_secret_names_the_listener_secret_and_the_grant_names_only_it() -> None:
    tls = {"source": "existingSecret", "existingSecret": "my-tls"}
    raw = hub(tls=tls, gateway={**GATEWAY, "listenerSecretName": "fl-public-tls"})
    existing = {(SECRET_TYPE, f"{NS}/my-tls"): {"data": {"tls.crt": b64("c"), "ca.crt": b64("a")}}}
    run = run_program({"federation": raw}, "gw", existing=existing)
    objects = run.manifests(False)
    assert grants(objects) == [("gateway-system", "fl-public-tls")]
    assert "fl-public-tls" not in created_secrets(run)  # the user's


def test_a_gateway_in_the_federations_namespace_gets_the_certificate_and_no_grant() -> None:
    raw = hub(gateway={**GATEWAY, "parentRefs": [{"name": "public", "sectionName": "fleet"}]})
    run = run_program({"federation": raw}, "gw", provider=RealTlsProvider())
    assert "sec-gateway-tls" in created_secrets(run)
    assert not by_kind(run.manifests(False), "ReferenceGrant")


@pytest.mark.parametrize(
    "version,gateway,insecure",
    [(GRPC_ERA, {}, False), (HTTP_ERA, {"presentFederationCertificate": False}, False), (HTTP_ERA, {}, True)],
    ids=["grpc-era-passthrough", "own-listener-certificate", "insecure"],
)
def test_no_listener_certificate_where_the_gateway_presents_none_of_ours(
    version: str, gateway: dict[str, Any], insecure: bool
) -> None:
    raw = hub(version, gateway={**GATEWAY, **gateway})
    if insecure:
        raw["insecure"] = True
    run = run_program({"federation": raw}, "gw")
    objects = run.manifests(False)
    assert not [o for o in objects if o["metadata"]["name"] in ("sec-gateway-tls", "sec-gateway")]
    assert not by_kind(objects, "ReferenceGrant")


def _problems(raw: dict[str, Any]) -> ConfigError:
    with pytest.raises(ConfigError) as caught:
        load_plan(raw, "gw")
    return caught.value


def test_listener_secret_name_is_required_with_existing_secret_and_never_the_superlinks() -> None:
    at = "federation.superlink.gateway.listenerSecretName"
    existing = {"source": "existingSecret", "existingSecret": "my-tls"}
    assert_problems(
        _problems(hub(tls=existing)),
        [
            f"{at}: required with tls.source existingSecret: the kubernetes.io/tls Secret the Gateway's listener "
            f"presents, a certificate for '{HOST}' only from the CA sites trust (the ReferenceGrant names it; the "
            "SuperLink's own key must not reach the Gateway), or presentFederationCertificate: false"
        ],
    )
    assert_problems(
        _problems(hub(tls=existing, gateway={**GATEWAY, "listenerSecretName": "my-tls"})),
        [
            f"{at}: 'my-tls' is the SuperLink's own Secret (tls.existingSecret): its key also serves localhost and "
            "the in-cluster Control API; give the listener a certificate of its own for the public hostname only"
        ],
    )
    assert_problems(
        _problems(hub(gateway={**GATEWAY, "listenerSecretName": "mine"})),
        [
            f"{at}: 'mine': only with tls.source existingSecret (source is generate: Secret N-gateway-tls is made "
            "for you)"
        ],
    )
    assert_problems(
        _problems(hub(tls=existing, gateway={**GATEWAY, "listenerSecretName": "Bad_Name"})),
        [f"{at}: 'Bad_Name' is not a Secret name"],
    )
    assert_problems(
        _problems(hub(GRPC_ERA, tls=existing, gateway={**GATEWAY, "listenerSecretName": "mine"})),
        [
            f"{at}: 'mine': no Gateway listener certificate here (gRPC era: TLS passes through to the SuperLink; or "
            "insecure, or presentFederationCertificate: false); remove this"
        ],
    )
