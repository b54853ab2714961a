"""Kubernetes resource quantities (`500m`, `1Gi`, `2e3`) as exact numbers."""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation
from typing import Optional

# resource.Quantity's grammar (k8s.io/apimachinery): number, then a binary/decimal SI
# suffix or an exponent.
QUANTITY = re.compile(
    r"^[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)"
    r"(?:[KMGTPE]i|[numkMGTPE]|[eE][+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))?$"
)
_SUFFIX: dict[str, int | Decimal] = {
    "Ki": 2**10,
    "Mi": 2**20,
    "Gi": 2**30,
    "Ti": 2**40,
    "Pi": 2**50,
    "Ei": 2**60,
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "": 1,
    "k": 10**3,
    "M": 10**6,
    "G": 10**9,
    "T": 10**12,
    "P": 10**15,
    "E": 10**18,
}


def parse_quantity(text: str) -> Optional[Decimal]:
    if not QUANTITY.fullmatch(text):
        return None
    m = re.fullmatch(r"([+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))(.*)", text, re.DOTALL)
    assert m is not None  # QUANTITY matched
    number, suffix = m.group(1), m.group(2)
    try:
        if suffix in _SUFFIX:  # `E` and `Ei` are suffixes (exa, exbi), an exponent has digits after the `e`
            return Decimal(number) * Decimal(_SUFFIX[suffix])
        return Decimal(number + suffix)
    except (InvalidOperation, KeyError):
        return None
