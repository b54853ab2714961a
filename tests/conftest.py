from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.support.flower import REAL_FLOWERS, Flower
from tests.support.schema import schemas_read_once


@pytest.fixture(scope="session")
def flower() -> Iterator[dict[str, Flower]]:
    """Real Flower parsers by version: flower["1.26.1"].parse(...)."""
    workers = {v: Flower(v) for v in REAL_FLOWERS}
    yield workers
    for w in workers.values():
        w.close()


@pytest.fixture(scope="module")
def k8s_validate() -> Iterator[Callable[[dict[str, Any]], None]]:
    """Strict Kubernetes 1.34 validation, with the schema files read once per module."""
    with schemas_read_once() as validate:
        yield validate
