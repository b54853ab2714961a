"""A stand-in for the pulumi-tls (and pulumi-random) provider under Pulumi mocks that does the real work:
real ECDSA keys (PEM and OpenSSH), a real self-signed CA, real CSRs and certificates
signed by it, honouring the inputs the program passes (curve, subject, SANs, validity,
key usages). Tests see exactly the key material and file layout a deployment gets."""

from __future__ import annotations

import datetime
import ipaddress
import json
import secrets
import string
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from pulumi.runtime import rpc

from flower_federation.cli.offline import placeholder_outputs

CURVES = {"P224": ec.SECP224R1, "P256": ec.SECP256R1, "P384": ec.SECP384R1, "P521": ec.SECP521R1}


def new_openssh_key(curve: str = "P384") -> str:
    key = ec.generate_private_key(CURVES[curve]())
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH, serialization.NoEncryption()
    ).decode()


def _name(subject: dict | None) -> x509.Name:
    subject = subject or {}
    attrs = []
    if subject.get("organization"):
        attrs.append(x509.NameAttribute(NameOID.ORGANIZATION_NAME, subject["organization"]))
    if subject.get("commonName"):
        attrs.append(x509.NameAttribute(NameOID.COMMON_NAME, subject["commonName"]))
    return x509.Name(attrs)


def _load_key(pem: str):
    return serialization.load_pem_private_key(pem.encode(), None)


def _add_uses(builder: x509.CertificateBuilder, uses: list[str], is_ca: bool) -> x509.CertificateBuilder:
    builder = builder.add_extension(x509.BasicConstraints(ca=is_ca, path_length=None), critical=True)
    builder = builder.add_extension(
        x509.KeyUsage(
            digital_signature="digital_signature" in uses,
            content_commitment=False,
            key_encipherment="key_encipherment" in uses,
            data_encipherment=False,
            key_agreement=False,
            key_cert_sign="cert_signing" in uses,
            crl_sign="crl_signing" in uses,
            encipher_only=False,
            decipher_only=False,
        ),
        critical=True,
    )
    if "server_auth" in uses:
        builder = builder.add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
    return builder


def _validity(builder: x509.CertificateBuilder, hours: int) -> x509.CertificateBuilder:
    now = datetime.datetime.now(datetime.UTC) - datetime.timedelta(minutes=1)
    return builder.not_valid_before(now).not_valid_after(now + datetime.timedelta(hours=hours))


def self_signed(common_name: str, is_ca: bool = False, hours: int = 24) -> tuple[str, str]:
    """(certificate, private key) PEM of a throwaway self-signed P-256 certificate: a CA nobody trusts, or a
    server certificate a test's stand-in serves."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    builder = x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
    builder = _validity(builder.serial_number(x509.random_serial_number()), hours)
    if is_ca:
        builder = builder.add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
    cert = builder.sign(key, hashes.SHA256())
    key_pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    return cert.public_bytes(serialization.Encoding.PEM).decode(), key_pem.decode()


def _unwrap(value: Any) -> Any:
    if rpc.is_rpc_secret(value):
        return _unwrap(rpc.unwrap_rpc_secret(value))
    if isinstance(value, dict):
        return {k: _unwrap(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_unwrap(v) for v in value]
    return value


class RealTlsProvider:
    """Call as the `provider` of flower_federation.cli.offline.run_program. Keeps what it made in
    `made` (resource name -> outputs) for assertions."""

    def __init__(self):
        self.made: dict[str, dict[str, Any]] = {}
        self._csrs: dict[str, x509.CertificateSigningRequest] = {}

    def __call__(self, typ: str, name: str, raw_inputs: dict[str, Any]) -> dict[str, Any]:
        # Secret inputs (a key passed on to a certificate) arrive wrapped.
        inputs = _unwrap(raw_inputs)
        out = dict(raw_inputs)
        if typ == "tls:index/privateKey:PrivateKey":
            assert inputs.get("algorithm") == "ECDSA", inputs
            key = ec.generate_private_key(CURVES[inputs.get("ecdsaCurve", "P224")]())
            pub = key.public_key()
            out.update(
                privateKeyPem=key.private_bytes(
                    serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
                ).decode(),
                privateKeyOpenssh=key.private_bytes(
                    serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH, serialization.NoEncryption()
                ).decode(),
                publicKeyPem=pub.public_bytes(
                    serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
                ).decode(),
                publicKeyOpenssh=pub.public_bytes(
                    serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH
                ).decode()
                + "\n",
            )
        elif typ == "tls:index/selfSignedCert:SelfSignedCert":
            key = _load_key(inputs["privateKeyPem"])
            subject = _name(inputs.get("subject"))
            builder = (
                x509.CertificateBuilder()
                .subject_name(subject)
                .issuer_name(subject)
                .public_key(key.public_key())
                .serial_number(x509.random_serial_number())
            )
            builder = _validity(builder, int(inputs["validityPeriodHours"]))
            builder = _add_uses(builder, inputs.get("allowedUses", []), bool(inputs.get("isCaCertificate")))
            builder = builder.add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
            cert = builder.sign(key, hashes.SHA256())
            out["certPem"] = cert.public_bytes(serialization.Encoding.PEM).decode()
        elif typ == "tls:index/certRequest:CertRequest":
            key = _load_key(inputs["privateKeyPem"])
            sans: list[x509.GeneralName] = [x509.DNSName(n) for n in inputs.get("dnsNames", [])]
            sans += [x509.IPAddress(ipaddress.ip_address(ip)) for ip in inputs.get("ipAddresses", [])]
            csr = (
                x509.CertificateSigningRequestBuilder()
                .subject_name(_name(inputs.get("subject")))
                .add_extension(x509.SubjectAlternativeName(sans), critical=False)
                .sign(key, hashes.SHA256())
            )
            out["certRequestPem"] = csr.public_bytes(serialization.Encoding.PEM).decode()
        elif typ == "tls:index/locallySignedCert:LocallySignedCert":
            csr = x509.load_pem_x509_csr(inputs["certRequestPem"].encode())
            ca_cert = x509.load_pem_x509_certificate(inputs["caCertPem"].encode())
            ca_key = _load_key(inputs["caPrivateKeyPem"])
            builder = (
                x509.CertificateBuilder()
                .subject_name(csr.subject)
                .issuer_name(ca_cert.subject)
                .public_key(csr.public_key())
                .serial_number(x509.random_serial_number())
            )
            builder = _validity(builder, int(inputs["validityPeriodHours"]))
            builder = _add_uses(builder, inputs.get("allowedUses", []), False)
            san = csr.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
            builder = builder.add_extension(san, critical=False)
            cert = builder.sign(ca_key, hashes.SHA256())
            out["certPem"] = cert.public_bytes(serialization.Encoding.PEM).decode()
        elif typ == "random:index/randomPassword:RandomPassword":
            alphabet = string.ascii_letters + string.digits
            out["result"] = "".join(secrets.choice(alphabet) for _ in range(int(inputs["length"])))
        else:
            out = placeholder_outputs(typ, name, inputs)
        self.made[name] = out
        return out


class PulumiState:
    """A stack's state across `pulumi up`s, for the generated key material: a resource
    whose inputs did not change keeps its outputs (same keys, same certificates); one
    whose inputs changed is replaced (new ones). The provider behind it is real."""

    def __init__(self) -> None:
        self.real = RealTlsProvider()
        self.kept: dict[tuple[str, str], tuple[str, dict[str, Any]]] = {}

    def __call__(self, typ: str, name: str, inputs: dict[str, Any]) -> dict[str, Any]:
        digest = json.dumps(_unwrap(inputs), sort_keys=True, default=str)
        kept = self.kept.get((typ, name))
        if kept is not None and kept[0] == digest:
            return dict(kept[1])
        out = self.real(typ, name, inputs)
        self.kept[(typ, name)] = (digest, out)
        return dict(out)

    def replace(self, typ: str, name: str) -> None:
        """`pulumi up --replace` of one resource, or pulumi-tls renewing a certificate inside
        its early-renewal window: the next `up` makes it anew (and what depends on it)."""
        del self.kept[(typ, name)]
