from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.support.flower import REAL_FLOWERS, Flower
from tests.support.schema import validate


class _Workers(dict[str, Flower]):
    """A worker per real Flower, started when first asked for: a run that needs one version does not
    import the others."""

    def __missing__(self, version: str) -> Flower:
        if version not in REAL_FLOWERS:
            raise KeyError(f"Flower {version} is not one of requirements-flwr.txt's: {REAL_FLOWERS}")
        worker = self[version] = Flower(version)
        return worker


@pytest.fixture(scope="session")
def flower() -> Iterator[dict[str, Flower]]:
    """Real Flower parsers by version: flower["1.26.1"].parse(...)."""
    workers = _Workers()
    yield workers
    for w in workers.values():
        w.close()


@pytest.fixture(scope="module")
def k8s_validate() -> Iterator[Callable[[dict[str, Any]], None]]:
    """Strict Kubernetes 1.34 validation (tests/support/schema.py `validate`)."""
    yield validate
