"""Which hub/site Flower version pairs work together: the skew window, stated once.

A hub's SuperLink and a site's SuperNodes speak Flower's Fleet API to each other, and nothing else
(docs/security.md: a site reaches only the hub's Fleet port). Across eras that API changes transport
(gRPC to HTTP): refused (plan/sites.py). Within an era, Flower changes the Fleet wire a little each
minor release, and keeps the previous release's SuperNodes working:
- 1.41 -> 1.42: the Fleet routes and messages the SuperNode sends are the same (`/v1/fleet/*`; the
  command lines are identical: ../shared/flower-cli.md); 1.42 adds a state revision, which stays in
  the hub.
- 1.42 -> 1.43 (read off the nightly flwr-nightly==1.43.0.dev20261026): the Fleet API refuses a
  pushed message whose source node is not the authenticated SuperNode (403, error 2011,
  superlink/servicer/fleet/fleet_handlers.py). A 1.42 SuperNode's replies carry as source the
  instruction's destination, itself (flwr/app/message/message.py), so it is not refused; 1.43 also
  drops the gRPC Fleet service, which only FLWR_INTERNAL_GRPC_FLEET_API=1 ever started (never
  rendered here), and no longer refuses a reply for a run that is not running (1.42: 403, error
  2007), which an honest SuperNode only sends for a run the hub just stopped. Seen with real
  processes: e2e scenarios 6s and 6n (tests/e2e/site_skew.py, forged_push.py).
Two minors apart, two such changes compound, and Flower says nothing of it: outside the window.

So: a hub on 1.N works with sites on 1.N-1, 1.N and 1.N+1 (a pre-release counts as its release);
further apart within the era works with a warning (the hub's preview names each such site, the
site's render names the hub); another era is refused. docs/operations.md, "Version skew between a
hub and its sites", holds the matrix and the order to upgrade a consortium in; its rows quote
`ROWS` (tests/test_version_skew.py checks both). The pairs the e2e runs (scenarios 6s and 6n:
tests/support/flower.py SKEW_PAIRINGS) are named there too: the hub rolled on live state from
1.41.0 to 1.42.0 to the next Flower, its sites a minor behind or ahead, both in every round.
"""

from __future__ import annotations

from typing import Optional

from flower_federation.flower.dialects import dialect_for
from flower_federation.flower.versions import FlowerVersion

# Minor releases a site may be behind or ahead of its hub.
WINDOW_MINORS = 1
WHERE = "docs/operations.md, Version skew between a hub and its sites"
# The matrix's rows, by verdict, as docs/operations.md spells them.
ROWS = {
    "same": "same release: tested (every e2e scenario)",
    "window": "up to one minor apart, same era: supported (the pairs below tested end to end)",
    "outside": "two or more minors apart, same era: works with a warning, untested",
    "other era": "gRPC era and HTTP era: refused",
}


def verdict(hub: FlowerVersion, site: FlowerVersion) -> Optional[str]:
    """The matrix row (a key of ROWS) of a hub and a site version; None when either is no supported
    Flower (validation reports that)."""
    hub_era, site_era = dialect_for(hub), dialect_for(site)
    if hub_era is None or site_era is None:
        return None
    if hub_era.name != site_era.name:
        return "other era"
    if hub.release == site.release:
        return "same"
    apart = abs(hub.minor - site.minor) if hub.major == site.major else WINDOW_MINORS + 1
    return "window" if apart <= WINDOW_MINORS else "outside"


def outside_window(hub: FlowerVersion, site: FlowerVersion) -> bool:
    """Same era, but further apart than the window: the pair a warning names."""
    return verdict(hub, site) == "outside"
