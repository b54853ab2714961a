"""A consortium hub at scale: `sites` x `keys` inline site keys, for the scale tests and the benchmark's
hub rows. Keys are real OpenSSH ECDSA P-384 public keys (points on the curve, which the plan checks as
Flower loads them), made by adding the curve's generator to itself in pure Python: a point addition is
one modular inverse, so 10,000 distinct keys take a fraction of a second where 10,000 scalar
multiplications (a private key each) take many. Deterministic: the same keys on every run."""

from __future__ import annotations

import base64
import functools
import struct
from typing import Any

# NIST P-384 (SEC 2, section 2.5.1 / FIPS 186-4 D.1.2.4).
P = 2**384 - 2**128 - 2**96 + 2**32 - 1
A = P - 3
GX = 0xAA87CA22BE8B05378EB1C71EF320AD746E1D3B628BA79B9859F741E082542A385502F25DBF55296C3A545E3872760AB7
GY = 0x3617DE4A96262C6F5D9E98BF9292DC29F8F41DBD289A147CE9DA3113B5F0B8C00A60B1CE1D7E819D7A431D7C90EA0E5F
VERSION = "1.41.0"


def _add(p: tuple[int, int], q: tuple[int, int]) -> tuple[int, int]:
    (x1, y1), (x2, y2) = p, q
    doubling = p == q
    slope = (3 * x1 * x1 + A) * pow(2 * y1, -1, P) % P if doubling else (y2 - y1) * pow(x2 - x1, -1, P) % P
    x3 = (slope * slope - x1 - x2) % P
    return x3, (slope * (x1 - x3) - y1) % P


def _ssh_string(data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + data


def _openssh(point: tuple[int, int], comment: str) -> str:
    q = b"\x04" + point[0].to_bytes(48, "big") + point[1].to_bytes(48, "big")
    blob = _ssh_string(b"ecdsa-sha2-nistp384") + _ssh_string(b"nistp384") + _ssh_string(q)
    return f"ecdsa-sha2-nistp384 {base64.b64encode(blob).decode()} {comment}"


@functools.cache
def _points(n: int) -> tuple[tuple[int, int], ...]:
    """2G, 3G, ..., (n+1)G: distinct points on the curve."""
    g = (GX, GY)
    out, point = [], _add(g, g)
    for _ in range(n):
        out.append(point)
        point = _add(point, g)
    return tuple(out)


def site_name(i: int) -> str:
    return f"site-{i:04d}"


def public_key(i: int, comment: str) -> str:
    """The i-th key (0-based) of the sequence; `comment` names it as a site's key would be."""
    return _openssh(_points(i + 1)[i], comment)


def site_keys(sites: int, keys: int, offset: int = 0) -> list[list[str]]:
    points = _points(offset + sites * keys)[offset:]
    return [[_openssh(points[s * keys + k], f"{site_name(s)}/pool/{k}") for k in range(keys)] for s in range(sites)]


def hub(sites: int, keys: int, **extra: Any) -> dict[str, Any]:
    """A hub admitting `sites` sites of `keys` inline keys each (no pools of its own)."""
    return {
        "role": "hub",
        "name": "hub",
        "namespace": "flower-hub",
        "version": VERSION,
        "nodeAuth": {"enabled": True},
        "superlink": {"ingress": {"host": "fl.example.org"}},
        "sites": [{"name": site_name(s), "publicKeys": k} for s, k in enumerate(site_keys(sites, keys))],
        **extra,
    }
