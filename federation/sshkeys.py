"""SuperNode keys as data: the secret config key that holds keys you supply
(`nodeAuthKeys`), the order of key slots (ordinals, then node names), and reading
OpenSSH ECDSA P-384 private keys, which is what Flower's SuperNode loads (cryptography's
load_ssh_private_key)."""

from __future__ import annotations

from typing import Any, Optional

# cryptography is imported where keys are read: only stacks with nodeAuth.keySource config need it.

CONFIG_KEY = "nodeAuthKeys"
OPENSSH_HEADER = "-----BEGIN OPENSSH PRIVATE KEY-----"


def slot_order(slot: str) -> tuple[int, int, str]:
    """Ordinals numerically, then node names."""
    return (0, int(slot), "") if slot.isdigit() else (1, 0, slot)


def public_key(private_key_openssh: str, comment: str = "") -> str:
    """The OpenSSH public key line Flower registers, from an OpenSSH private key."""
    from cryptography.hazmat.primitives import serialization

    key = serialization.load_ssh_private_key(private_key_openssh.encode(), None)
    line = key.public_key().public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH).decode()
    return f"{line} {comment}".strip()


def key_problem(text: Any) -> Optional[str]:
    """Why `text` is not a key a SuperNode can use, or None."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    hint = "must be an ECDSA P-384 private key in OpenSSH format (ssh-keygen -t ecdsa -b 384 -N '' -f key)"
    if not isinstance(text, str) or OPENSSH_HEADER not in text:
        return hint
    try:
        key = serialization.load_ssh_private_key(text.encode(), None)
    except (ValueError, TypeError):
        return f"{hint}; it could not be read (passphrase-protected keys are not supported)"
    if not isinstance(key, ec.EllipticCurvePrivateKey) or not isinstance(key.curve, ec.SECP384R1):
        return hint
    return None
