"""Images, wherever config takes one: the Helm chart's parts (registry, repository, tag, digest) spelled as an image
reference needs them, a tag or a digest on every image given in parts, and pull-secret names."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from flower_federation.config.errors import Problem, problem
from flower_federation.flower.versions import VERSION_LIKE_TAG, VERSION_TAG_FORM
from flower_federation.flower.versions import VERSION_TAG as FLOWER_VERSION_TAG
from flower_federation.rules.raw import At, Pools, Raw, as_list, get

# The grammar of the OCI distribution reference (github.com/distribution/reference, regexp.go), matched whole
# (`fullmatch`): `[registry[:port]/]path[:tag][@digest]`, path components lowercase.
_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_REGISTRY = (
    r"(?:[A-Za-z0-9](?:[-A-Za-z0-9]*[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[-A-Za-z0-9]*[A-Za-z0-9])?)*|\[[0-9A-Fa-f:.]+\])"
    r"(?::[0-9]{1,5})?"
)
# ASCII, as the Go grammar's \w is: Python's \w also takes 'é' and '٤', which FlowerVersion read as 4.
_TAG = r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}"
_DIGEST = r"(?:sha256:[0-9a-f]{64}|sha512:[0-9a-f]{128})"
REPOSITORY = re.compile(rf"{_COMPONENT}(?:/{_COMPONENT})*")
TAG = re.compile(_TAG)
REGISTRY = re.compile(_REGISTRY)
DIGEST = re.compile(_DIGEST)
REFERENCE = re.compile(
    rf"(?:(?P<registry>{_REGISTRY})/)?(?P<repository>{_COMPONENT}(?:/{_COMPONENT})*)"
    rf"(?::(?P<tag>{_TAG}))?(?:@(?P<digest>{_DIGEST}))?"
)
DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
DIGEST_RULE = "a digest is `sha256:` and 64 lowercase hex digits (or `sha512:` and 128)"
REFERENCE_RULE = (
    "an image reference is `[registry[:port]/]repository[:tag][@digest]`, the repository lowercase path components "
    "(e.g. flwr/superlink:1.42.0)"
)
# What `check`'s mandatory policy flower-images-pinned accepts (checks/pod_policies.py): a tag that names a
# version, or a digest. validate gives the same verdict, so nothing it passes fails `check`.
VERSION_TAG = re.compile(r"v?[0-9].*")
UNPINNED = "an unplanned Flower upgrade migrates the SuperLink's state one way (the policy flower-images-pinned)"


def version_tag_problem(tag: Any) -> str:
    """Why a tag that starts like a version (`X.Y`) is no Flower version, or '' (any other tag: pinning_problem).
    Such a tag is read as the image's Flower version, so `1.43.0.dev` must not pass for 1.43.0."""
    if isinstance(tag, str) and VERSION_LIKE_TAG.fullmatch(tag) and not FLOWER_VERSION_TAG.fullmatch(tag):
        return (
            f"has tag `{tag}`, which starts like a Flower version but is not one: a version tag is {VERSION_TAG_FORM}"
        )
    return ""


def pinning_problem(tag: Any, digest: Any) -> str:
    """Why an image with this tag and digest is not pinned to a version, or '' when it is."""
    if isinstance(digest, str):
        return ""
    if tag is None:
        return f"has no tag: it pulls `latest`, whatever that is on the day a pod starts; {UNPINNED}"
    if tag == "latest":
        return f"is `latest`: it pulls whatever that is on the day a pod starts; {UNPINNED}"
    if isinstance(tag, str) and not VERSION_TAG.fullmatch(tag):
        return f"has tag `{tag}`, which names no version; {UNPINNED}"
    return ""


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
        if isinstance(value, str) and not pattern.fullmatch(value):
            yield problem(at + (key,), f"'{value}' is not valid here: {rule}")
    if image.get("tag") is None and image.get("digest") is None:
        yield problem(
            at,
            "give a tag or a digest: without either the image is `latest`, which moves under a running federation",
        )
    elif why := version_tag_problem(image.get("tag")) or pinning_problem(image.get("tag"), image.get("digest")):
        yield problem(at + ("tag",), f"'{image.get('tag')}' {why}")


def images(raw: Raw, pools: Pools) -> Iterator[Problem]:
    for at, image in image_locations(raw, pools):
        if isinstance(image, dict):
            yield from _parts(at, image)
        elif isinstance(image, str):
            ref = REFERENCE.fullmatch(image)
            registry = ref.group("registry") if ref else None
            if registry and not (any(c in registry for c in ".:[") or registry == "localhost"):
                # Not a registry (docker/distribution: a domain has a '.' or a port, or is localhost): a path
                # component, lowercase.
                ref = ref if ref and re.fullmatch(_COMPONENT, registry) else None
            if ref is None:
                rule = DIGEST_RULE if "@" in image and not DIGEST.fullmatch(image.rsplit("@", 1)[1]) else REFERENCE_RULE
                yield problem(at, f"{image!r} is not an image reference: {rule}")
            elif why := version_tag_problem(ref.group("tag")) or pinning_problem(ref.group("tag"), ref.group("digest")):
                yield problem(at, f"'{image}' {why}")


def pull_secrets(raw: Raw, sections: list[tuple[At, Raw]]) -> Iterator[Problem]:
    for at, section in [((), raw), *sections]:
        for j, name in enumerate(as_list(section.get("imagePullSecrets"))):
            if isinstance(name, str) and not (DNS_SUBDOMAIN.fullmatch(name) and len(name) <= 253):
                yield problem(
                    at + ("imagePullSecrets", j), f"'{name}' is not a Secret name (a lowercase DNS subdomain)"
                )
