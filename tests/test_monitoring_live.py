"""The federation exporter against a real Flower 1.42.0 SuperLink (issue 34), in one compact test: the rendered
SuperLink with TLS and node authentication (tests/support/live_flower.py), its pool keys registered by the
rendered registration Job, the exporter script run with the Flower venv's python as the SuperLink image's
`python`, with the rendered loopback connection config (only the port and the CA path localized).

A labelled SuperNode comes online and the exporter's gauges say so by site and pool; a SuperNode whose key the
hub's labels do not list (the negative control: it must not be dropped) is counted under site "unknown"; the
labelled one stopped, the gauges move it to offline. Its `up` is 1 and the certificate expiry and state gauges
are there. Each read is prometheus-client's parser over a real scrape of `GET /metrics`."""

from __future__ import annotations

import os
import re
import signal
import time
import tomllib
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import tomli_w
from prometheus_client.parser import text_string_to_metric_families

from flower_federation.builders import monitoring
from tests.support.flower import HTTP_ERA, venv_python
from tests.support.live_flower import READY_TIMEOUT, cli_home, live_superlink, start_supernode, wait_online
from tests.support.processes import process_env
from tests.support.registration_job import job_pod

pytestmark = pytest.mark.live

SITE = "site-a"


def exporter_config(live: Any) -> str:
    """The rendered exporter's `flwr` config, dialing the live SuperLink's local port through its CA."""
    doc = tomllib.loads(monitoring.connection_config(live.r.plan))
    conn = doc["superlink"][monitoring.CONNECTION]
    host, port = conn.pop("address").rsplit(":", 1)
    assert host == "127.0.0.1" and set(conn) == {"root-certificates"}, conn  # loopback TLS, never insecure
    conn["address"] = f"127.0.0.1:{live.ports[int(port)]}"
    conn["root-certificates"] = str(live.ca_file)
    return tomli_w.dumps(doc)


def scrape(port: int) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as res:
        text = res.read().decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def nodes(metrics: dict[Any, float], site: str, pool: str, status: str) -> float:
    labels = (("pool", pool), ("site", site), ("status", status))
    return metrics.get(("flower_federation_supernodes", labels), -1.0)


def wait_for(port: int, what: str, ok: Callable[[dict[Any, float]], bool], log: Callable[[], str]) -> dict:
    deadline = time.monotonic() + READY_TIMEOUT  # a hang guard: returns as soon as the gauges say so
    while True:
        try:
            metrics = scrape(port)
            if ok(metrics):
                return metrics
        except OSError:
            metrics = {}
        assert time.monotonic() < deadline, f"{what}: not seen in {READY_TIMEOUT}s: {metrics}\n{log()}"
        time.sleep(0.5)


def test_the_exporter_counts_a_real_superlinks_nodes_by_site_and_sees_one_go_offline(tmp_path: Path) -> None:
    with live_superlink(HTTP_ERA, tmp_path) as live:
        job = job_pod(live, "registration-job")
        registered = job.run()
        assert registered.returncode == 0, registered.stdout + registered.stderr
        lines = job.keys_file.read_text().splitlines()
        # The hub's labels list pool alpha's node 0 only: node 1 is the stranger the negative control counts.
        labelled = next(line for line in lines if line.endswith("/alpha/0"))
        labels = tmp_path / "key-labels"
        labels.write_text(f"{SITE} alpha {' '.join(labelled.split()[:2])}\n")
        config = tmp_path / "exporter.toml"
        config.write_text(exporter_config(live))
        env = process_env(HTTP_ERA, tmp_path / "exporter")
        Path(env["FLWR_HOME"]).mkdir(parents=True, exist_ok=True)
        argv = [str(venv_python(HTTP_ERA)), str(monitoring.SCRIPT), "--config", str(config)]
        argv += ["--key-labels", str(labels), "--port", "0", "--bind", "127.0.0.1", "--interval", "1"]
        argv += ["--state", str(live.database), "--backups", str(live.database.parent / "backups")]
        argv += ["--ca", str(live.ca_file)]
        proc = live.procs.start("exporter", argv, env)

        def log() -> str:
            return live.procs.log("exporter")

        deadline = time.monotonic() + READY_TIMEOUT
        while not (bound := re.search(r"serving on 127\.0\.0\.1:(\d+)", log())):
            assert proc.poll() is None and time.monotonic() < deadline, log()
            time.sleep(0.2)
        port = int(bound.group(1))

        cli, cli_env = cli_home(live)
        ours, stranger = start_supernode(live, "alpha", 0), start_supernode(live, "alpha", 1)
        wait_online(live, ours, cli, cli_env)
        wait_online(live, stranger, cli, cli_env)
        online = wait_for(
            port,
            "both online",
            lambda m: nodes(m, SITE, "alpha", "online") == 1 and nodes(m, "unknown", "unknown", "online") == 1,
            log,
        )
        assert online[("flower_federation_up", ())] == 1
        assert online[("flower_federation_site_last_online_age_seconds", (("site", SITE),))] == 0
        assert online[("flower_federation_state_file_bytes", ())] > 0
        expiry = [
            v for (name, _), v in online.items() if name == "flower_federation_certificate_not_after_timestamp_seconds"
        ]
        assert expiry and min(expiry) > time.time()

        os.killpg(ours.proc.pid, signal.SIGTERM)  # our own SuperNode's session (started_new_session)
        ours.proc.wait(timeout=30)
        offline = wait_for(port, "ours offline", lambda m: nodes(m, SITE, "alpha", "online") == 0, log)
        assert nodes(offline, SITE, "alpha", "offline") == 1
        assert nodes(offline, "unknown", "unknown", "online") == 1  # the stranger still counted
