"""A real Prometheus (Debian's `prometheus`, /usr/bin/prometheus) as a pod of a cluster: what the Prometheus
Operator would run for the rendered ServiceMonitor and PrometheusRule (site_monitoring.py uses it in the sites
scenario).

- **Scrape config from the ServiceMonitor.** `scrape_configs` translates the rendered object as the operator
  does (its endpoints role): the Services in `namespaceSelector.matchNames` that `selector` matches; per
  endpoint, the Service port of that name, its `targetPort` resolved against each selected pod's named container
  ports (the Endpoints object), a target `podIP:port` per pod; `interval`, `path`, `scheme`, `scrapeTimeout`
  taken over; the labels the operator's relabelling sets (`job` the Service's name, as without `jobLabel`;
  `namespace`, `service`, `pod`, `endpoint`). A field it does not translate fails the translation, so the
  builder cannot grow a setting the test silently ignores.
- **Rules from the PrometheusRule.** Its `spec.groups` verbatim as the rules file (the operator writes the same).
- **A pod in a namespace.** It runs in a client namespace of the cluster (harness: a netns standing for a pod
  with these labels in that namespace), so the rendered NetworkPolicies judge its scrapes like any pod's.
- **Its HTTP API** is asked from inside that namespace (nothing of ours is in the host's network namespace).
  It listens on port 0 there and reads the port it got from its own log.
"""

from __future__ import annotations

import contextlib
import json
import re
import subprocess
import sys
import time
from typing import Any, Optional

import yaml

from tests.e2e.harness import Cluster, NotReady
from tests.e2e.harness.host import kill
from tests.e2e.harness.netpol import selector_matches

BINARY = "/usr/bin/prometheus"
# The Prometheus server's own settings (a Prometheus CR's `evaluationInterval`), not the rendered objects': the
# rules are evaluated every 5 s so an alert's `for:` is what the test waits for.
EVALUATION_INTERVAL = "5s"
SPEC_FIELDS = {"selector", "namespaceSelector", "endpoints"}
ENDPOINT_FIELDS = {"port", "interval", "path", "scheme", "scrapeTimeout"}
START_TIMEOUT = 30  # Go binary, empty TSDB: ~1 s idle, a few on a loaded 2-core machine
LISTENING = re.compile(r'msg="Listening on" address=\S+:(\d+)')

API_CALL = """
import json, sys, urllib.request
with urllib.request.urlopen(sys.argv[1], timeout=10) as r:
    sys.stdout.write(r.read().decode())
"""


class TranslationError(AssertionError):
    """The rendered ServiceMonitor holds something scrape_configs does not translate."""


def _target_port(pod_spec: dict[str, Any], target: Any) -> int:
    if isinstance(target, int):
        return target
    for c in pod_spec.get("containers", []):
        for p in c.get("ports", []):
            if p.get("name") == target:
                return int(p["containerPort"])
    raise TranslationError(f"no container port named {target!r}")


def scrape_configs(cluster: Cluster, service_monitor: dict[str, Any]) -> list[dict[str, Any]]:
    """The scrape jobs the Prometheus Operator makes of `service_monitor` against `cluster`'s Services and pods."""
    spec = service_monitor["spec"]
    meta = service_monitor["metadata"]
    if set(spec) - SPEC_FIELDS:
        raise TranslationError(f"ServiceMonitor fields not translated: {sorted(set(spec) - SPEC_FIELDS)}")
    namespaces = spec["namespaceSelector"]["matchNames"]
    services = [
        o
        for (kind, _), o in sorted(cluster.objects.items())
        if kind == "Service"
        and o["metadata"].get("namespace") in namespaces
        and selector_matches(spec["selector"], o["metadata"].get("labels") or {})
    ]
    if not services:
        raise TranslationError(f"the ServiceMonitor selects no Service in {namespaces}")
    jobs = []
    for i, endpoint in enumerate(spec["endpoints"]):
        if set(endpoint) - ENDPOINT_FIELDS:
            raise TranslationError(f"endpoint fields not translated: {sorted(set(endpoint) - ENDPOINT_FIELDS)}")
        static = []
        for svc in services:
            ns, name = svc["metadata"]["namespace"], svc["metadata"]["name"]
            port = next(p for p in svc["spec"]["ports"] if p.get("name") == endpoint["port"])
            for pod in sorted(cluster.pods.values(), key=lambda p: p.name):
                if pod.namespace != ns or not all(pod.labels.get(k) == v for k, v in svc["spec"]["selector"].items()):
                    continue
                labels = {"job": name, "namespace": ns, "service": name, "pod": pod.name, "endpoint": endpoint["port"]}
                static.append({"targets": [f"{pod.ip}:{_target_port(pod.spec, port['targetPort'])}"], "labels": labels})
        job: dict[str, Any] = {
            "job_name": f"serviceMonitor/{meta['namespace']}/{meta['name']}/{i}",
            "scrape_interval": endpoint.get("interval", "30s"),
            "metrics_path": endpoint.get("path", "/metrics"),
            "scheme": endpoint.get("scheme", "http"),
            "static_configs": static,
        }
        if "scrapeTimeout" in endpoint:
            job["scrape_timeout"] = endpoint["scrapeTimeout"]
        jobs.append(job)
    return jobs


class Prometheus:
    """A Prometheus server in a client namespace `name` of `cluster` (namespace `namespace`, pod `labels`),
    scraping `scrape` and evaluating `rule`'s groups. `close()` stops it (the cluster's close would too)."""

    def __init__(
        self,
        cluster: Cluster,
        name: str,
        namespace: str,
        labels: dict[str, str],
        scrape: list[dict[str, Any]],
        rule: Optional[dict[str, Any]] = None,
    ):
        self.cluster = cluster
        self.name = name
        self.netns = cluster.add_client(name, namespace, labels)
        self.dir = cluster.workdir / f"prometheus-{name}"
        self.dir.mkdir()
        config: dict[str, Any] = {"global": {"evaluation_interval": EVALUATION_INTERVAL}, "scrape_configs": scrape}
        if rule is not None:
            (self.dir / "rules.yaml").write_text(yaml.safe_dump({"groups": rule["spec"]["groups"]}, sort_keys=False))
            config["rule_files"] = [str(self.dir / "rules.yaml")]
        (self.dir / "prometheus.yml").write_text(yaml.safe_dump(config, sort_keys=False))
        self.log_file = self.dir / "prometheus.log"
        argv = [
            "ip", "netns", "exec", self.netns, BINARY,
            f"--config.file={self.dir / 'prometheus.yml'}",
            f"--storage.tsdb.path={self.dir / 'data'}",
            f"--web.listen-address={cluster.addresses[self.netns]}:0",
        ]  # fmt: skip
        with self.log_file.open("wb") as log:
            self.proc = subprocess.Popen(argv, stdout=log, stderr=log, stdin=subprocess.DEVNULL, start_new_session=True)
        self.url = f"http://{cluster.addresses[self.netns]}:{self._port()}"

    def _port(self) -> int:
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            found = LISTENING.search(self.log())
            if found:
                return int(found[1])
            if self.proc.poll() is not None:
                break
            time.sleep(0.2)
        raise NotReady(f"Prometheus {self.name} did not listen within {START_TIMEOUT}s:\n{self.log()[-3000:]}")

    def log(self) -> str:
        return self.log_file.read_text(errors="replace") if self.log_file.exists() else ""

    def api(self, path: str) -> Any:
        """GET /api/v1/<path> from inside the pod's namespace; its `data`."""
        res = subprocess.run(
            ["ip", "netns", "exec", self.netns, sys.executable, "-c", API_CALL, f"{self.url}/api/v1/{path}"],
            capture_output=True, text=True, timeout=30,
        )  # fmt: skip
        if res.returncode != 0:
            raise NotReady(f"Prometheus {self.name}: /api/v1/{path} failed: {res.stderr[-1000:]}")
        body = json.loads(res.stdout)
        assert body["status"] == "success", body
        return body["data"]

    def targets(self) -> list[dict[str, Any]]:
        return list(self.api("targets")["activeTargets"])

    def alerts(self, name: str) -> dict[str, str]:
        """{site: state (pending/firing)} of the active alerts called `name`."""
        return {
            a["labels"].get("site", ""): a["state"]
            for a in self.api("alerts")["alerts"]
            if a["labels"]["alertname"] == name
        }

    def query(self, expr: str) -> dict[str, float]:
        """An instant query's vector as {the `site` label (or ""): value}."""
        from urllib.parse import quote

        data = self.api(f"query?query={quote(expr)}")
        return {r["metric"].get("site", ""): float(r["value"][1]) for r in data["result"]}

    def query_range(self, expr: str, start: float, end: float, step: float) -> list[dict[str, Any]]:
        from urllib.parse import quote

        return list(self.api(f"query_range?query={quote(expr)}&start={start}&end={end}&step={step}")["result"])

    def close(self) -> None:
        kill(self.proc.pid)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=10)
