"""Container images: a reference string (`flwr/supernode:1.41.0`, the flower-operator's spelling) or the Helm chart's
parts (`registry`, `repository`, `tag`, `digest`, `pullPolicy`), wherever config takes an image."""

from __future__ import annotations

from typing import Annotated, Any, Literal, Optional, Union

from pydantic import Discriminator, Field, Tag

from flower_federation.config.base import Model

PullPolicy = Literal["Always", "IfNotPresent", "Never"]
# Union members' tags: pydantic puts them in error locations, which config/pydantic_errors.py leaves out of config paths.
STRING_TAG = "<image string>"
OBJECT_TAG = "<image object>"


class ImageRef(Model):
    """An image as the Helm chart gives it: rendered `registry/repository:tag@digest`. A digest pins the image (what
    runs is exactly that digest); the tag, if it is a Flower version, still tells the Flower dialect. Anywhere an
    image is taken, a reference string (`flwr/supernode:1.41.0`) is fine too."""

    registry: Optional[str] = Field(
        default=None, description="`host` or `host:port`, e.g. `registry.example.org`. Unset: Docker Hub."
    )
    repository: str = Field(description="e.g. `flwr/supernode`.")
    tag: Optional[str] = Field(
        default=None,
        description=(
            "e.g. `1.41.0` or `1.41.0-py3.11-ubuntu24.04`; a version tag must be of the federation's Flower dialect. A "
            "tag or a digest is required."
        ),
    )
    digest: Optional[str] = Field(
        default=None,
        description=(
            "`sha256:<64 hex digits>` (or sha512): pins the image. Without a tag, an image that decides the Flower "
            "version (see `version`) needs `version` set."
        ),
    )
    pull_policy: Optional[PullPolicy] = Field(
        default=None, description="The container's `imagePullPolicy`. Unset: the top-level `imagePullPolicy`."
    )


def _image_kind(value: Any) -> Optional[str]:
    if isinstance(value, str):
        return STRING_TAG
    if isinstance(value, (dict, ImageRef)):
        return OBJECT_TAG
    return None


Image = Annotated[
    Union[Annotated[str, Tag(STRING_TAG)], Annotated[ImageRef, Tag(OBJECT_TAG)]],
    Discriminator(
        _image_kind,
        custom_error_type="image_type",
        custom_error_message="must be an image reference (a string) or a mapping (registry, repository, tag, digest, pullPolicy)",
    ),
]


def reference(image: str | ImageRef) -> str:
    """What a container's `image` says."""
    if isinstance(image, str):
        return image
    out = f"{image.registry}/{image.repository}" if image.registry else image.repository
    if image.tag:
        out += f":{image.tag}"
    if image.digest:
        out += f"@{image.digest}"
    return out


def raw_reference(value: Any) -> Optional[str]:
    """`reference` of a raw config value, None if it is not one (pydantic reports why)."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and isinstance(value.get("repository"), str):
        parts = {k: value.get(k) for k in ("registry", "tag", "digest")}
        if all(v is None or isinstance(v, str) for v in parts.values()):
            return reference(ImageRef.model_construct(repository=value["repository"], **parts))
    return None
