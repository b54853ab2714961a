"""CA certificates as Flower's clients load them (`--root-certificates`, `root-certificates`): the PEM a site
trusts a hub with, given inline or read from the hub stack's `caCertificate` output. Parsed whole (cryptography),
not looked at for its header only, so a certificate cut short or a placeholder is refused where it is given
rather than failing at run time as CERTIFICATE_VERIFY_FAILED. A bundle of several (a CA rotation's overlap) is
read certificate by certificate."""

from __future__ import annotations

from typing import Any, Optional

HEADER = "-----BEGIN CERTIFICATE-----"
# How much of a bad value a message quotes: enough to recognise it, never a whole certificate.
QUOTED = 40


def quoted_start(text: str) -> str:
    """The start of a value, quoted (newlines shown as \\n), with `...` when there is more."""
    return repr(text[:QUOTED]) + ("..." if len(text) > QUOTED else "")


def certificate_problem(text: Any) -> Optional[str]:
    """Why `text` is not PEM certificates a TLS client can load, or None; says how the value starts."""
    from cryptography import x509

    if not isinstance(text, str):
        return f"must be PEM text ({HEADER} ...), not {type(text).__name__}"
    start = f"it starts {quoted_start(text.strip())}"
    count = text.count(HEADER)
    if count == 0:
        return f"has no {HEADER} line; {start}"
    try:
        read = len(x509.load_pem_x509_certificates(text.encode()))
    except ValueError:
        read = 0
    if read == 0:
        return f"could not be read as a PEM certificate (cut short, or a placeholder?); {start}"
    if read < count:
        return f"holds {count} {HEADER} blocks of which only {read} could be read (one cut short?); {start}"
    return None
