"""The skew window between a hub and its sites (flower/skew.py): one minor release either way within an era is
supported, further apart warns (the hub's preview names the site, the site's render names the hub, each with
the matrix's row), another era is refused (tests/test_sites.py). docs/operations.md holds the same matrix."""

from __future__ import annotations

import json
from typing import Optional

import pytest

from flower_federation.flower.skew import ROWS, WHERE, verdict
from flower_federation.flower.versions import FlowerVersion
from flower_federation.plan import load_plan
from flower_federation.plan.outputs import warnings
from tests.support.flower import HTTP_ERA, NEXT, PREVIOUS_HTTP_ERA, SKEW_PAIRINGS
from tests.support.paths import ROOT
from tests.test_sites import GOLDEN, HUB_STACK, SITE_STACK, settings

NIGHTLY = "1.43.0.dev20261026"


@pytest.mark.parametrize(
    "hub, site, row",
    [
        ("1.42.0", "1.42.0", "same"),
        ("1.42.0", "1.42.1", "window"),  # another release, the same minor
        ("1.42.0", "1.41.0", "window"),
        ("1.41.0", "1.42.0", "window"),
        (NIGHTLY, "1.42.0", "window"),  # the nightly's 403/2011 source check refuses no honest 1.42 SuperNode
        ("1.42.0", NIGHTLY, "window"),
        ("1.41.0", NIGHTLY, "outside"),
        ("1.42.0", "1.40.0", "outside"),
        ("1.26.1", "1.24.0", "outside"),  # the gRPC era has the same window
        ("1.26.1", "1.42.0", "other era"),
        ("1.42.0", "1.37.0", None),  # no supported Flower: validation says so
    ],
)
def test_the_matrix(hub: str, site: str, row: Optional[str]) -> None:
    h, s = FlowerVersion.parse(hub), FlowerVersion.parse(site)
    assert h is not None and s is not None
    assert verdict(h, s) == row


def _skew(said: list[str]) -> list[str]:
    return [w for w in said if ROWS["outside"] in w]


def test_a_hub_names_each_site_outside_the_window_with_the_row() -> None:
    site_outputs = json.loads((GOLDEN / "site-chart.outputs.json").read_text())
    hub = settings("hub")  # Flower 1.41.0
    for within in ("1.41.0", "1.40.0", "1.42.0", NIGHTLY.replace("1.43", "1.42")):
        plan = load_plan(hub, "hub", None, {SITE_STACK: {**site_outputs, "flowerVersion": within}})
        assert _skew(warnings(plan)) == [], within  # the negative control: in the window, nothing
    plan = load_plan(hub, "hub", None, {SITE_STACK: {**site_outputs, "flowerVersion": NIGHTLY}})
    assert _skew(warnings(plan)) == [
        f"Site hospital-a runs Flower {NIGHTLY}, this hub 1.41.0: more than 1 minor release apart ({WHERE}: "
        f"{ROWS['outside']}). Its SuperNodes may connect, but this pair is untested: move the site (or this hub) "
        "within one minor release of the other."
    ]


def test_a_site_names_its_hub_outside_the_window() -> None:
    hub_outputs = json.loads((GOLDEN / "hub.outputs.json").read_text())
    site = settings("site-from-hub")  # Flower 1.41.0
    plan = load_plan(site, "site-b", None, {HUB_STACK: {**hub_outputs, "flowerVersion": "1.42.0"}})
    assert _skew(warnings(plan)) == []
    plan = load_plan(site, "site-b", None, {HUB_STACK: {**hub_outputs, "flowerVersion": NIGHTLY}})
    (said,) = _skew(warnings(plan))
    assert said.startswith(f"The hub runs Flower {NIGHTLY}, this site 1.41.0: more than 1 minor release apart")


def test_docs_hold_the_matrix_rows() -> None:
    text = (ROOT / "docs" / "operations.md").read_text(encoding="utf-8")
    assert f"## {WHERE.split(', ', 1)[1]}" in text
    for row in ROWS.values():
        assert f"| {row.split(': ', 1)[0]} | {row.split(': ', 1)[1]} |" in text, row


def test_docs_name_the_pairings_the_e2e_runs() -> None:
    """docs/operations.md's tested pairs are the e2e's (tests/e2e/site_skew.py), each in the window: a row per
    pairing, the next Flower named as such (its version changes when its release is served)."""
    text = (ROOT / "docs" / "operations.md").read_text(encoding="utf-8")
    rows = [
        [c.strip() for c in line.strip().strip("|").split("|")] for line in text.splitlines() if line.startswith("| ")
    ]
    for scenario, hub, sites in SKEW_PAIRINGS:
        h = FlowerVersion.parse(hub)
        assert h is not None
        for site in sites:
            s = FlowerVersion.parse(site)
            assert s is not None and verdict(h, s) in ("same", "window"), (hub, site)
        hub_cell = "the next Flower" if hub == NEXT and hub not in (HTTP_ERA, PREVIOUS_HTTP_ERA) else hub
        assert [hub_cell, f"{sites[0]} and {sites[1]}", scenario] in [
            [r[0][: len(hub_cell)], r[1].split(" (", 1)[0], r[2]] for r in rows if len(r) == 3
        ], (scenario, hub, sites)
