"""Images, wherever config takes one: the Helm chart's parts (registry, repository, tag, digest) spelled as an image
reference needs them, a tag or a digest on every image given in parts, and pull-secret names."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from flower_federation.config.errors import Problem, problem
from flower_federation.rules.raw import At, Pools, Raw, as_list, get

# The grammar of docker/distribution's reference package.
_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
REPOSITORY = re.compile(rf"^{_COMPONENT}(?:/{_COMPONENT})*$")
TAG = re.compile(r"^[\w][\w.-]{0,127}$")
REGISTRY = re.compile(
    r"^(?:[A-Za-z0-9]([-A-Za-z0-9]*[A-Za-z0-9])?(?:\.[A-Za-z0-9]([-A-Za-z0-9]*[A-Za-z0-9])?)*|\[[0-9A-Fa-f:.]+\])"
    r"(?::[0-9]{1,5})?$"
)
DIGEST = re.compile(r"^(?:sha256:[0-9a-f]{64}|sha512:[0-9a-f]{128})$")
DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
DIGEST_RULE = "a digest is `sha256:` and 64 lowercase hex digits (or `sha512:` and 128)"


def image_locations(raw: Raw, pools: Pools) -> list[tuple[At, Any]]:
    """(path, raw value) of every image config takes."""
    out: list[tuple[At, Any]] = [
        (("superlink", "image"), get(raw, "superlink", "image")),
        (("superlink", "superexecImage"), get(raw, "superlink", "superexecImage")),
        (("supernodes", "image"), get(raw, "supernodes", "image")),
        (("executor", "image"), get(raw, "executor", "image")),
    ]
    for i, pool in pools:
        at: At = ("supernodes", "pools", i, "images")
        out += [
            (at + ("supernode",), get(pool, "images", "supernode")),
            (at + ("superexecClientApp",), get(pool, "images", "superexecClientApp")),
        ]
    return out


def _parts(at: At, image: dict[str, Any]) -> Iterator[Problem]:
    checks = (
        ("registry", REGISTRY, "a registry is a host name or IP, with an optional `:port` (no scheme, no path)"),
        ("repository", REPOSITORY, "a repository is lowercase path components (`flwr/supernode`), no tag or digest"),
        ("tag", TAG, "a tag is up to 128 letters, digits, '_', '.' or '-', not starting with '.' or '-'"),
        ("digest", DIGEST, DIGEST_RULE),
    )
    for key, pattern, rule in checks:
        value = image.get(key)
        if isinstance(value, str) and not pattern.match(value):
            yield problem(at + (key,), f"'{value}' is not valid here: {rule}")
    if image.get("tag") is None and image.get("digest") is None:
        yield problem(
            at,
            "give a tag or a digest: without either the image is `latest`, which moves under a running federation",
        )


def images(raw: Raw, pools: Pools) -> Iterator[Problem]:
    for at, image in image_locations(raw, pools):
        if isinstance(image, dict):
            yield from _parts(at, image)
        elif isinstance(image, str) and "@" in image and not DIGEST.match(image.rsplit("@", 1)[1]):
            yield problem(at, f"'{image}': {DIGEST_RULE}")


def pull_secrets(raw: Raw, sections: list[tuple[At, Raw]]) -> Iterator[Problem]:
    for at, section in [((), raw), *sections]:
        for j, name in enumerate(as_list(section.get("imagePullSecrets"))):
            if isinstance(name, str) and not (DNS_SUBDOMAIN.match(name) and len(name) <= 253):
                yield problem(
                    at + ("imagePullSecrets", j), f"'{name}' is not a Secret name (a lowercase DNS subdomain)"
                )
