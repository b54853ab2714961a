"""The scale scenario's plan (tests/e2e/scale.py), without running it: how E2E_SCALE SuperNodes spread over
sites, what E2E_SCALE accepts, and the memory check that refuses an N this host cannot hold."""

from __future__ import annotations

import pytest

from tests.e2e import scale
from tests.e2e.harness import NotReady


@pytest.mark.parametrize(
    ("n", "expected"),
    [
        (2, {"site-00": 1, "site-01": 1}),
        (10, {"site-00": 5, "site-01": 5}),
        (30, {"site-00": 10, "site-01": 10, "site-02": 10}),
        (45, {"site-00": 9, "site-01": 9, "site-02": 9, "site-03": 9, "site-04": 9}),
        (31, {"site-00": 8, "site-01": 8, "site-02": 8, "site-03": 7}),
    ],
)
def test_the_supernodes_spread_over_sites_of_at_most_ten(n, expected):
    assert scale.sites_for(n) == expected
    assert sum(expected.values()) == n


@pytest.mark.parametrize("value", ["", "x", "1", "-5", "3.5"])
def test_e2e_scale_must_be_a_number_of_supernodes(monkeypatch, value):
    monkeypatch.setenv("E2E_SCALE", value)
    with pytest.raises(ValueError, match="E2E_SCALE"):
        scale.scale()


def test_e2e_scale_defaults_to_what_ci_carries(monkeypatch):
    monkeypatch.delenv("E2E_SCALE", raising=False)
    assert scale.scale() == scale.DEFAULT_SCALE == 10
    monkeypatch.setenv("E2E_SCALE", "200")
    assert scale.scale() == 200


def test_an_n_the_hosts_memory_cannot_hold_is_refused_saying_why():
    scale.check_memory(2)  # the control: two SuperNodes fit any host that runs the suite
    with pytest.raises(NotReady, match=r"E2E_SCALE=100000 needs about .* GiB of memory on this host"):
        scale.check_memory(100_000)


def test_each_site_gives_its_supernodes_time_to_start_beside_the_others():
    raw = scale.scaled_site("1.42.0", "site-00", 10, 30)
    pool = raw["supernodes"]["pools"][0]
    assert pool["replicas"] == 10
    assert pool["nodeConfig"] == {"partition-id": "{index}", "num-partitions": "{replicas}"}
    assert raw["supernodes"]["probes"] == {"startupProbe": {"failureThreshold": 24 + 30}}
