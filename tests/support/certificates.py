"""Real CA certificates for config that takes one (`supernodes.superlink.certificate.pem`, a hub's `caCertificate`
output): self-signed ECDSA P-256, the same bytes every run (a key derived from `seed`, fixed dates), so a config
holding one is the same config each time."""

from __future__ import annotations

import datetime
import functools

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

NOT_BEFORE = datetime.datetime(2025, 1, 1, tzinfo=datetime.UTC)


@functools.cache
def ca_pem(name: str = "hub CA", seed: int = 1) -> str:
    key = ec.derive_private_key(104729 * seed, ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(seed)
        .not_valid_before(NOT_BEFORE)
        .not_valid_after(NOT_BEFORE + datetime.timedelta(days=3650))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    return cert.public_bytes(serialization.Encoding.PEM).decode()
