"""docs/observability.png: a picture of what a real Prometheus saw in the sites e2e scenario (not Grafana's
rendering, and not the dashboard of issue 34 part 4: its two quantities, drawn with matplotlib).

    E2E_PROMETHEUS_DUMP=/tmp/dump.json .venv/bin/python -m pytest tests/e2e/test_e2e_sites.py -k "6_sites and 1.26"
    /path/to/venv-with-matplotlib/bin/python bench/observability_plot.py /tmp/dump.json docs/observability.png

The dump (tests/e2e/site_monitoring.py) holds the Prometheus range queries of that run, every 2 s from the hub's
start: `sum by (site) (flower_federation_supernodes{status="online"})` and `ALERTS{alertname="FlowerSiteOffline"}`.
matplotlib is not a dependency of the project: install it in a venv of its own (matplotlib==3.11.2 drew the
committed picture).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # no display: a file only
import matplotlib.pyplot as plt  # noqa: E402 - after the backend is chosen


def series(result: list[dict[str, Any]], start: float) -> dict[tuple[str, str], tuple[list[float], list[float]]]:
    """{(site, alert state or ""): (seconds since the start, values)} of a range query's matrix."""
    out = {}
    for r in result:
        key = (r["metric"].get("site", ""), r["metric"].get("alertstate", ""))
        out[key] = ([float(t) - start for t, _ in r["values"]], [float(v) for _, v in r["values"]])
    return out


def main(dump: Path, png: Path) -> None:
    data = json.loads(dump.read_text())
    start = data["start"]
    online, alerts = series(data["online"], start), series(data["alerts"], start)
    sites = sorted({site for site, _ in online})
    fig, (top, bottom) = plt.subplots(2, 1, sharex=True, figsize=(10, 5), height_ratios=(2, 1))
    for i, site in enumerate(sites):
        t, v = online[(site, "")]
        top.step(t, [x + 0.04 * i for x in v], where="post", label=site)  # offset: both lines visible at 1
    top.set_ylabel("SuperNodes online")
    top.set_yticks([0, 1])
    top.legend(loc="center left", bbox_to_anchor=(1.0, 0.5))
    top.set_title("Sites online and FlowerSiteOffline, as a real Prometheus saw them (e2e scenario 6, Flower 1.26.1)")
    colours = {"pending": "tab:orange", "firing": "tab:red"}
    for row, site in enumerate(sites):
        for state in ("pending", "firing"):
            t, _ = alerts.get((site, state), ([], []))
            # A sample every 2 s: each is drawn as the 2 s it stands for.
            bottom.broken_barh([(x, 2.0) for x in t], (row - 0.3, 0.6), color=colours[state], label=state)
    bottom.set_yticks(range(len(sites)), sites)
    handles, labels = bottom.get_legend_handles_labels()
    unique = dict(zip(labels, handles, strict=True))
    bottom.legend(unique.values(), unique.keys(), loc="center left", bbox_to_anchor=(1.0, 0.5))
    bottom.set_ylabel("FlowerSiteOffline")
    bottom.set_xlabel("seconds since Prometheus started (after the hub's first `up`; the sites admitted at its second)")
    fig.tight_layout()
    # No timestamps in the file: the same dump draws the same bytes.
    fig.savefig(png, dpi=80, metadata={"Software": None})


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
