"""Images, wherever config takes one: the Helm chart's parts (registry, repository, tag, digest) spelled as an image
reference needs them, a tag or a digest on every image given in parts, and pull-secret names. Every image is pinned
as `check`'s mandatory flower-images-pinned demands of every container of a Flower pod: the Fleet-only proxy's nginx
too, a container of the SuperLink's pod, though its tag is no Flower version."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from flower_federation.config.errors import Problem, problem
from flower_federation.flower.versions import VERSION_LIKE_TAG, VERSION_TAG_FORM
from flower_federation.flower.versions import VERSION_TAG as FLOWER_VERSION_TAG
from flower_federation.kube.naming import is_dns_subdomain
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
DIGEST_RULE = "a digest is `sha256:` and 64 lowercase hex digits (or `sha512:` and 128)"
REFERENCE_RULE = (
    "an image reference is `[registry[:port]/]repository[:tag][@digest]`, the repository lowercase path components "
    "(e.g. flwr/superlink:1.42.0)"
)
# What `check`'s mandatory policy flower-images-pinned accepts (checks/pod_policies.py): a tag that names a
# version, or a digest. validate gives the same verdict, so nothing it passes fails `check`.
VERSION_TAG = re.compile(r"v?[0-9].*")
UNPINNED = "an unplanned Flower upgrade migrates the SuperLink's state one way (the policy flower-images-pinned)"
# The same policy on an image that is not Flower's (the Fleet-only proxy's): it judges every container of a Flower pod.
UNPINNED_OTHER = "what runs changes under a running federation (the policy flower-images-pinned)"
FLEET_PROXY_IMAGE_AT: At = ("superlink", "fleetProxy", "image")


def version_tag_problem(tag: Any) -> str:
    """Why a tag that starts like a version (`X.Y`) is no Flower version, or '' (any other tag: pinning_problem).
    Such a tag is read as the image's Flower version, so `1.43.0.dev` must not pass for 1.43.0."""
    if isinstance(tag, str) and VERSION_LIKE_TAG.fullmatch(tag) and not FLOWER_VERSION_TAG.fullmatch(tag):
        return (
            f"has tag `{tag}`, which starts like a Flower version but is not one: a version tag is {VERSION_TAG_FORM}"
        )
    return ""


def pinning_problem(tag: Any, digest: Any, unpinned: str = UNPINNED) -> str:
    """Why an image with this tag and digest is not pinned to a version, or '' when it is; `unpinned` says what
    that risks."""
    if isinstance(digest, str):
        return ""
    if tag is None:
        return f"has no tag: it pulls `latest`, whatever that is on the day a pod starts; {unpinned}"
    if tag == "latest":
        return f"is `latest`: it pulls whatever that is on the day a pod starts; {unpinned}"
    if isinstance(tag, str) and not VERSION_TAG.fullmatch(tag):
        return f"has tag `{tag}`, which names no version; {unpinned}"
    return ""


def image_locations(raw: Raw, pools: Pools) -> list[tuple[At, Any]]:
    """(path, raw value) of every image config takes: the Flower images, then the Fleet-only proxy's (not Flower's:
    its tag says no Flower version)."""
    return [*flower_image_locations(raw, pools), (FLEET_PROXY_IMAGE_AT, get(raw, *FLEET_PROXY_IMAGE_AT))]


def flower_image_locations(raw: Raw, pools: Pools) -> list[tuple[At, Any]]:
    """(path, raw value) of every Flower image config takes: a tag of each is read as a Flower version."""
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


def _tag_problem(at: At, tag: Any, digest: Any) -> str:
    if at == FLEET_PROXY_IMAGE_AT:
        return pinning_problem(tag, digest, UNPINNED_OTHER)
    return version_tag_problem(tag) or pinning_problem(tag, digest)


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
    elif why := _tag_problem(at, image.get("tag"), image.get("digest")):
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
            elif why := _tag_problem(at, ref.group("tag"), ref.group("digest")):
                yield problem(at, f"'{image}' {why}")


def pull_secrets(sections: list[tuple[At, Raw]]) -> Iterator[Problem]:
    """The `imagePullSecrets` of each (path, section): Secret names."""
    for at, section in sections:
        for j, name in enumerate(as_list(section.get("imagePullSecrets"))):
            if isinstance(name, str) and not is_dns_subdomain(name):
                yield problem(
                    at + ("imagePullSecrets", j), f"'{name}' is not a Secret name (a lowercase DNS subdomain)"
                )
