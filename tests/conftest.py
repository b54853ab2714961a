from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.support.flower import GRPC_ERA, HTTP_ERA, Flower  # noqa: E402


@pytest.fixture(scope="session")
def flower():
    """Real Flower parsers by version: flower["1.26.1"].parse(...)."""
    workers = {v: Flower(v) for v in (GRPC_ERA, HTTP_ERA)}
    yield workers
    for w in workers.values():
        w.close()
