"""End to end across organisations: a hub and its sites, each its own stack, render and
cluster (see sites.py). Scenario 6 reaches the hub through a LoadBalancer Service, for
both Flower versions; scenario 6g through a Gateway API route (the emulated Gateway,
harness/gateway.py), for the HTTP era, whose hub needs the Fleet-only proxy. Scenarios 6s and 6n
(site_skew.py): the skew window, a hub and two sites on different Flowers, the hub rolled between the
pairings on live state (one federation for all three; each test reports its pairing). Each runs in
a thread of its own, following the lanes (background.py); each test waits for
its outcome and reports it with the scenario's own duration and phases."""

from __future__ import annotations

import pytest

from tests.e2e.background import report
from tests.e2e.site_skew import PAIRINGS, pairing_name
from tests.e2e.stack import VERSIONS

RESULT_TIMEOUT = 900  # the scenario takes 1-3 minutes, once its turn to start came; this only bounds a hang
# The skew chain takes 5-7 minutes (measured: site_skew.py's three pairings, two hub rolls), from the first lane's
# end; this only bounds a hang, from its first test's call.
SKEW_TIMEOUT = 1200
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


@pytest.mark.parametrize("pairing", [pairing_name(hub, sites) for sid, hub, sites in PAIRINGS if sid == "6s"])
@pytest.mark.scenario(
    "skew window: a hub and two sites one minor apart (1.41.0 hub with a 1.42.0 site, then the hub rolled to 1.42.0 "
    "with a 1.41.0 site), both sites in every round; the 1.42.0 hub does not refuse a push with a forged source",
    id="6s",
)
def test_6s_skew_window(background, pairing, record_property):
    report(background.pairing(pairing, SKEW_TIMEOUT), record_property)


@pytest.mark.parametrize("pairing", [pairing_name(hub, sites) for sid, hub, sites in PAIRINGS if sid == "6n"])
@pytest.mark.scenario(
    "the next Flower's hub (the nightly) with 1.42.0 sites, rolled to on live state: a run through its Fleet-only "
    "proxy with both sites in every round; a site's push naming another node as its source refused 403, error 2011",
    id="6n",
)
def test_6n_nightly_hub(background, pairing, record_property):
    report(background.pairing(pairing, SKEW_TIMEOUT), record_property)
