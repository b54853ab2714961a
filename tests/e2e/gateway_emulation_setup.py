"""The clusters of the Gateway emulation's end-to-end test (test_e2e_gateway_emulation.py):
a hub cluster running the federation's pods (gateway_emulation_hub.py) behind the platform's
Gateway on a WAN, a site cluster with a client that sends requests through it by the
public name, and their end."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Optional

import pytest

from tests.e2e import gateway_objects as g
from tests.e2e import harness
from tests.e2e.gateway_emulation_hub import FED, GW_NS, HOST, hub_objects
from tests.e2e.harness.gateway import ExposedGateway, expose_gateway
from tests.e2e.harness.host import ID_PREFIX
from tests.e2e.harness.wan import Wan
from tests.support.flower import HTTP_ERA, venv

READY_TIMEOUT = 60

# Requests from the client's namespace, each on a connection of its own: [{method, path, headers, size}].
CLIENT = r"""
import hashlib, http.client, json, os, ssl, sys
host, ca, requests = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
ctx = ssl.create_default_context(cafile=ca)
out = []
for r in requests:
    body = os.urandom(r["size"]) if r["size"] else None
    conn = http.client.HTTPSConnection(host, 443, context=ctx, timeout=60)
    conn.request(r["method"], r["path"], body=body, headers=r["headers"])
    resp = conn.getresponse()
    data = resp.read()
    conn.close()
    out.append({"status": resp.status, "body": data.decode(errors="replace")[:20000],
                "sha256": hashlib.sha256(body or b"").hexdigest(), "length": len(body or b"")})
print(json.dumps(out))
"""


class Setup:
    """A hub cluster (the federation's pods, the Gateway on the WAN) and a site cluster (the client)."""

    def __init__(self) -> None:
        self.version = HTTP_ERA
        self.tmp = Path(tempfile.mkdtemp(prefix=f"{ID_PREFIX}-gwtest-"))
        self.wan: Optional[Wan] = None
        self.hub: Optional[harness.Cluster] = None
        self.site: Optional[harness.Cluster] = None

    def start(self) -> None:
        python = venv(self.version) / "bin" / "python"
        if not python.exists():
            pytest.fail(f"{python} missing: run `make test` or `make e2e`, which install flwr=={self.version}")
        self.wan = Wan("gateway")
        self.hub = harness.Cluster(self.version, venv(self.version), "gw-hub")
        self.site = harness.Cluster(self.version, venv(self.version), "gw-site")
        self.ids = {self.wan.id, self.hub.id, self.site.id}
        ca, stranger = g.CA("federation CA"), g.CA("someone else's CA")
        (self.tmp / "ca.crt").write_text(ca.pem)
        self.hub.apply(hub_objects(self.version, ca, stranger))
        pods = self.hub.create_pods()
        self.hub.start_pods(pods)
        self.hub.wait_pods_ready(pods, READY_TIMEOUT)
        self.backend = next(p for p in pods if p.workload == "backend")
        self.proxy = next(p for p in pods if p.workload == "proxy")
        self.gateway: ExposedGateway = expose_gateway(
            self.wan, self.hub, g.gateway("edge", GW_NS, HOST, "fleet-tls", FED)
        )
        self.wan.connect(self.site)
        self.client = self.site.add_client("client", "default")
        self.wan.publish(self.site, HOST, self.gateway.address)

    def send(self, *requests: dict[str, Any]) -> list[dict[str, Any]]:
        """Requests through the Gateway from the other cluster's client, by the public name."""
        argv = ["ip", "netns", "exec", self.client, sys.executable, "-c", CLIENT]
        argv += [HOST, str(self.tmp / "ca.crt"), json.dumps(list(requests))]
        res = subprocess.run(argv, capture_output=True, text=True, timeout=120)
        assert res.returncode == 0, f"client failed:\n{res.stderr}\n{self.gateway.log()}"
        return list(json.loads(res.stdout))

    def backend_requests(self) -> list[dict[str, Any]]:
        lines = self.backend.container("server").log(tail=100000).splitlines()
        return [json.loads(line) for line in lines if line.startswith("{")]

    def close(self) -> None:
        for part in (self.wan, self.site, self.hub):
            if part is not None:
                part.close()
        shutil.rmtree(self.tmp, ignore_errors=True)
