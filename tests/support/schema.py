"""Strict Kubernetes 1.34 schema validation of rendered objects (kubernetes-validate)."""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import kubernetes_validate
import kubernetes_validate.utils
import pytest

K8S_VERSION = "1.34.0"


def validate(obj: dict[str, Any]) -> None:
    """Raise kubernetes_validate.ValidationError unless `obj` is valid, strictly."""
    kubernetes_validate.validate(obj, K8S_VERSION, strict=True)


def validate_all(objects: Iterable[dict[str, Any]]) -> None:
    objects = list(objects)
    assert objects
    for obj in objects:
        validate(obj)


@contextlib.contextmanager
def schemas_read_once() -> Iterator[Callable[[dict[str, Any]], None]]:
    """`validate`, with kubernetes-validate's schema files read once instead of per
    object while the context lasts (the validation itself is unchanged)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(
            kubernetes_validate.utils,
            "schema_contents",
            functools.lru_cache(maxsize=None)(kubernetes_validate.utils.schema_contents),
        )
        yield validate
