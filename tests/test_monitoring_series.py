"""How many series the federation exporter serves for a 10,000-node hub (issue 34: "a few thousand";
docs/benchmarks.md records the figure): the exporter's real poll (`Exporter.poll`, its Control API answer
replaced by 10,000 synthetic nodes and 1,000 runs, its key labels, state file, backups and certificates real
files), read back with prometheus-client's parser. The hub is `make bench`'s largest (tests/support/hub_scale.py):
500 sites x 20 keys. The count depends on sites x pools, never on nodes or runs (negative control: twice the
nodes and runs, the same count; one more site, five more series)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.support.certificates import ca_pem
from tests.test_monitoring_exporter import NOW, exporter

SITES, KEYS_PER_SITE, POOL = 500, 20, "ward"
STATUSES = ("online", "online", "online", "offline", "registered")  # most nodes online, some not
# Per site and pool: `supernodes` x 4 statuses; per site: `site_last_online_age_seconds`. Then a fixed set: up,
# Control API latency, last poll, last successful poll, poll errors; runs x 6 statuses, the duration histogram
# (8 buckets, +Inf, sum, count), the oldest running run; the state file, volume free and size, backups, the newest
# backup's age; one server certificate and one CA.
FIXED = 5 + 6 + 11 + 1 + 5 + 2


def series(tmp_path: Path, sites: int, nodes_per_key: int, runs: int, monkeypatch: pytest.MonkeyPatch) -> int:
    keys = [(f"site-{s:03d}", f"AAAAkey{s:03d}x{k:02d}") for s in range(sites) for k in range(KEYS_PER_SITE)]
    labels = tmp_path / "key-labels"
    labels.write_text("".join(f"{site} {POOL} ecdsa-sha2-nistp384 {key}\n" for site, key in keys))
    nodes = [
        {
            "key": key,
            "status": STATUSES[i % len(STATUSES)],
            "last_activated_at": NOW - 600,
            "last_deactivated_at": None if STATUSES[i % len(STATUSES)] == "online" else NOW - 300,
        }
        for i, (_, key) in enumerate(keys * nodes_per_key)
    ]
    finished = [
        {"status": "finished", "sub_status": ("completed", "failed", "stopped")[i % 3], "running_at": NOW - 9000 + i,
         "finished_at": NOW - 100}
        for i in range(runs)
    ]  # fmt: skip
    running = [{"status": "running", "sub_status": "", "running_at": NOW - 60, "finished_at": None}]
    monkeypatch.setattr(exporter, "ask_superlink", lambda: (nodes, finished + running))
    state = tmp_path / "state" / "state.db"
    (state.parent / "backups").mkdir(parents=True, exist_ok=True)
    state.write_bytes(b"x")
    (state.parent / "backups" / "1.42.0-abc-20260101T000000Z.db").write_bytes(b"y")
    (tmp_path / "tls.crt").write_text(ca_pem("fl.example.test"))
    (tmp_path / "ca.crt").write_text(ca_pem("federation CA", seed=2))
    args = argparse.Namespace(
        key_labels=labels, state=state, backups=state.parent / "backups",
        cert=tmp_path / "tls.crt", ca=tmp_path / "ca.crt",
    )  # fmt: skip
    e: Any = exporter.Exporter(args)
    e.poll()
    families = list(text_string_to_metric_families(e.text))
    # prometheus-client names a counter's family without `_total`.
    expected = {exporter.PREFIX + name.removesuffix("_total") for name in exporter.HELP}
    assert {f.name for f in families} == expected, e.text[:2000]
    online = next(f for f in families if f.name == "flower_federation_supernodes")
    assert sum(s.value for s in online.samples) == len(nodes)  # every node counted, none dropped
    return sum(len(f.samples) for f in families)


def test_a_10000_node_hub_is_a_few_thousand_series_bounded_by_sites_not_nodes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    count = series(tmp_path, SITES, 1, 1000, monkeypatch)  # 500 x 20 = 10,000 nodes
    assert count == SITES * (4 + 1) + FIXED == 2530
    assert series(tmp_path, SITES, 2, 2000, monkeypatch) == count  # 20,000 nodes, 2,000 runs: the same
    assert series(tmp_path, SITES + 1, 1, 1000, monkeypatch) == count + 5  # a site: 5 series
