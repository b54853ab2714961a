"""End to end, the SuperExec hop (the HTTP era, see appio.py): TLS and SuperExec auth on
the Runtime API across the pod network; a SuperExec with the wrong auth secret and one
without the CA are refused, the untouched one runs its ClientApp. The gRPC era has
neither (docs/security.md, "The SuperExec hop"), so this runs for the HTTP era only (1.42), after the other
single-federation scenarios."""

from __future__ import annotations

import time

import pytest

from tests.e2e import appio, harness
from tests.e2e.stack import venv
from tests.support.flower import HTTP_ERA


@pytest.mark.scenario(
    "SuperExec hop over TLS with auth (distributed): wrong auth secret and missing CA refused, the right one runs",
    id="7",
)
def test_7_superexec_hop(record_property):
    python = venv(HTTP_ERA) / "bin" / "python"
    if not python.exists():
        pytest.fail(f"{python} missing: run `make test` or `make e2e`, which install flwr=={HTTP_ERA}")
    harness.install_cleanup_handlers()
    start = time.monotonic()
    try:
        phases = appio.run(HTTP_ERA)  # closes its federation whatever happens
    finally:
        record_property("scenario_seconds", time.monotonic() - start)
    record_property("phases", ", ".join(phases))
