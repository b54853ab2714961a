"""End to end across organisations: a hub and its sites, each its own stack, render and
cluster (see sites.py). Scenario 6 reaches the hub through a LoadBalancer Service, for
both Flower versions; scenario 6g through a Gateway API route (the emulated Gateway,
harness/gateway.py), for the HTTP era, whose hub needs the Fleet-only proxy. Each runs in
a thread of its own, following the lanes (background.py); each test waits for
its outcome and reports it with the scenario's own duration and phases."""

from __future__ import annotations

import pytest

from tests.e2e.background import report
from tests.e2e.stack import VERSIONS

RESULT_TIMEOUT = 900  # the scenario takes 1-3 minutes, once its turn to start came; this only bounds a hang
HTTP_ERA_VERSIONS = tuple(v for v in VERSIONS if not v.startswith("1.2"))


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.scenario(
    "sites: hub + 2 sites, separate stacks and clusters, keys registered by the hub's Job, "
    "run across both sites (HTTP era: one site's ClientApps in distributed SuperExecs, its hop TLS with its own CA); "
    "an unlisted site refused, a wrong-CA site fails TLS; a dropped site revoked, "
    "its key refused at once when trusted again "
    "(gRPC era: a real Prometheus through the hub's NetworkPolicy sees a site's offline alert fire and resolve, "
    "one in another namespace is refused)",
    id="6",
)
def test_6_sites(background, version, record_property):
    report(background.follower(version, "6").wait(RESULT_TIMEOUT), record_property)


@pytest.mark.parametrize("version", HTTP_ERA_VERSIONS)
@pytest.mark.scenario(
    "sites through a Gateway API route: the hub's HTTPRoute and BackendTLSPolicy programmed into the emulated "
    "Gateway (TLS with the federation's certificate, verified hop to the Fleet-only proxy); sites train through it, "
    "Control commands from outside get 404 at the gateway and never reach the SuperLink",
    id="6g",
)
def test_6g_sites_through_a_gateway(background, version, record_property):
    report(background.follower(version, "6g").wait(RESULT_TIMEOUT), record_property)
