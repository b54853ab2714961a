from __future__ import annotations

from typing import Iterator

import pytest

from tests.support.flower import GRPC_ERA, HTTP_ERA, Flower


@pytest.fixture(scope="session")
def flower() -> Iterator[dict[str, Flower]]:
    """Real Flower parsers by version: flower["1.26.1"].parse(...)."""
    workers = {v: Flower(v) for v in (GRPC_ERA, HTTP_ERA)}
    yield workers
    for w in workers.values():
        w.close()
