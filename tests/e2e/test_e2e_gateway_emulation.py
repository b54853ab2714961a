"""End to end: the harness's Gateway API emulation (harness/gateway.py) and its nginx images
(harness/pods.py), with real traffic. A platform's Gateway (namespace gateway-system)
terminates TLS for `fleet.example.test` with the federation's certificate (Secret in
namespace fed, read through a ReferenceGrant) and routes, as HTTPRoutes and
BackendTLSPolicies in fed say:

- `/v1/fleet/` to a Fleet-only proxy pod: the nginx image `nginxinc/nginx-unprivileged`
  as the product runs it (uid 101, read-only root, no capabilities; its config from a
  ConfigMap, the server certificate 0440 through the pod's fsGroup, /tmp an emptyDir),
  which passes it on, verified, to a backend;
- `/direct/` to that backend itself, and `/wrong-name/`, `/wrong-ca/` to two ports of it
  whose certificates the policy must reject (another name; another CA): the negative
  controls that verification is on;
- `/plain` to its plain-HTTP port (no policy).

The backend is a Python HTTP(S) server in a Flower image pod that logs and echoes what
arrives (headers, the body's length and SHA-256). A client in another cluster dials the
Gateway's WAN address by its public name. Nothing of it outlives the WAN and clusters.
The federation's objects are gateway_emulation_hub.py's, the clusters and the client
gateway_emulation_setup.py's."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import pytest

from tests.e2e import harness
from tests.e2e.gateway_emulation_hub import FLWR_UID, HOST
from tests.e2e.gateway_emulation_setup import Setup
from tests.e2e.harness import cleanup
from tests.e2e.harness.host import children
from tests.e2e.harness.pods import nginx_path

BODY_BYTES = 40 * 1024 * 1024
# Flower's node-auth headers (HTTP era: flwr.supercore.constant), as a SuperNode signs its requests.
FLOWER_HEADERS = {
    "Content-Type": "application/protobuf",
    "flwr-public-key": "BGm0c1+Yx/Qm2t3hYk9VbqzK3J8o0X0m8v8cVZt2g4yq8yS1o0cQ7p/4d+f3q9Q3yG1b2Q==",
    "flwr-timestamp": "2026-03-01T12:34:56.789012+00:00",
    "flwr-signature": "MEUCIQDx3vN8ZqgkU0r1+5kq6o7p4a+0dGZx1uE3v2m7l9k2cQIgW0Nn/5Yy8TjvJ+YcD3k=",
}


def _get(path: str, headers: dict[str, str] | None = None, size: int = 0) -> dict[str, Any]:
    return {"method": "POST" if size else "GET", "path": path, "headers": headers or {}, "size": size}


@pytest.fixture(scope="module")
def setup():
    harness.install_cleanup_handlers()
    s = Setup()
    try:
        s.start()
        yield s
    finally:
        s.close()


def test_a_fleet_request_reaches_the_backend_unchanged_through_gateway_and_proxy(setup):
    """40 MB and Flower's signature headers, through the Gateway (TLS terminated, the proxy
    verified against the BackendTLSPolicy) and the Fleet-only proxy (the backend verified):
    the bytes and headers arrive as sent."""
    path = "/v1/fleet/push-messages?node=7"
    (res,) = setup.send(_get(path, FLOWER_HEADERS, BODY_BYTES))
    assert res["status"] == 200, res["body"][:2000]
    seen = json.loads(res["body"])
    assert (seen["path"], seen["port"], seen["method"]) == (path, 8443, "POST")
    assert (seen["length"], seen["sha256"]) == (res["length"], res["sha256"]), "the body changed on the way"
    received = {k.lower(): v for k, v in seen["headers"]}
    for name, value in FLOWER_HEADERS.items():
        assert received.get(name.lower()) == value, f"header {name}: sent {value!r}, got {received.get(name.lower())!r}"
    assert received["host"] == HOST
    assert [k.lower() for k, _ in seen["headers"]].count("flwr-signature") == 1
    # The Gateway logged it, forwarded to the proxy pod's Fleet port.
    entry = next(e for e in setup.gateway.requests() if e["uri"] == path)
    assert entry["status"] == 200 and entry["route"] == "fed/superlink#0"
    assert entry["upstream"] == f"{setup.proxy.ip}:8000" and entry["sni"] == HOST
    assert entry["request_length"] > BODY_BYTES


def test_what_no_route_matches_gets_404_and_reaches_no_backend(setup):
    before = len(setup.backend_requests())
    paths = ["/v1/control/list-runs", "/v1/fleetx", "/flwr.proto.Control/ListRuns", "/"]
    answers = setup.send(*(_get(p, FLOWER_HEADERS) for p in paths))
    assert [a["status"] for a in answers] == [404] * len(paths)
    entries = {e["uri"]: e for e in setup.gateway.requests() if e["uri"] in paths}
    assert set(entries) == set(paths)
    for e in entries.values():
        assert (e["status"], e["upstream"], e["route"]) == (404, "", ""), e
    assert setup.backend_requests()[before:] == []
    proxy_log = setup.proxy.container("fleet-proxy").log(tail=100000)
    assert "/v1/control" not in proxy_log and "/v1/fleetx" not in proxy_log


def test_the_backend_tls_policy_verifies_name_and_ca(setup):
    """Negative controls: the same policy, CA and backend pod, on ports whose certificates name
    another host or come from another CA: 502, the request never reaches the backend; the
    port with the right certificate answers (so it is the verification that refuses)."""
    before = len(setup.backend_requests())
    ok, wrong_name, wrong_ca = setup.send(_get("/direct/x"), _get("/wrong-name/x"), _get("/wrong-ca/x"))
    assert ok["status"] == 200, ok["body"]
    assert (wrong_name["status"], wrong_ca["status"]) == (502, 502)
    arrived = [r["path"] for r in setup.backend_requests()[before:]]
    assert arrived == ["/direct/x"]
    entries = {e["uri"]: e for e in setup.gateway.requests()}
    assert entries["/wrong-name/x"]["upstream"] == f"{setup.backend.ip}:9443"
    assert entries["/wrong-ca/x"]["upstream"] == f"{setup.backend.ip}:9444"
    log = setup.gateway.log()
    assert "upstream SSL certificate does not match" in log, log[-3000:]
    assert "upstream SSL certificate verify error" in log, log[-3000:]


def test_a_backend_without_a_policy_is_plain_http(setup):
    (res,) = setup.send(_get("/plain"))
    assert res["status"] == 200, res["body"]
    assert json.loads(res["body"])["port"] == 8080


def _status(pid: int) -> dict[str, str]:
    lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    return {k: v.strip() for k, _, v in (line.partition(":") for line in lines)}


def test_the_nginx_image_runs_as_uid_101_with_a_read_only_root(setup):
    """The proxy container's nginx (master and worker): uid/gid 101, the pod's fsGroup as its only
    supplementary group, no capabilities, no_new_privs; `/` read-only in its mount namespace; the
    host's nginx with the image's environment."""
    procs = [
        (pid, argv) for pod, c, pid, argv in setup.hub.processes() if (pod, c) == (setup.proxy.name, "fleet-proxy")
    ]
    titles = [" ".join(argv) for _, argv in procs]
    assert any("master process" in t for t in titles) and any("worker process" in t for t in titles), titles
    for pid, _ in procs:
        st = _status(pid)
        assert st["Uid"].split() == ["101"] * 4 and st["Gid"].split() == ["101"] * 4, st
        assert st["Groups"].split() == [str(FLWR_UID)]
        assert int(st["CapEff"], 16) == 0 and int(st["CapBnd"], 16) == 0 and st["NoNewPrivs"] == "1"
        root = next(line for line in Path(f"/proc/{pid}/mountinfo").read_text().splitlines() if line.split()[4] == "/")
        assert "ro" in root.split()[5].split(","), root
    master = next(pid for pid, argv in procs if "master process" in " ".join(argv))
    # nginx writes its title over its environment: what podinit was told to exec is in its spec.
    launch = json.loads((setup.proxy.dir / "fleet-proxy.json").read_text())
    assert launch["argv"] == [nginx_path(), "-e", "stderr", "-c", "/etc/fleet-proxy/nginx.conf"]
    env = launch["env"]
    assert env["HOME"] == "/var/cache/nginx" and env["NGINX_VERSION"] == "1.28.0", env
    assert "PYTHONFAULTHANDLER" not in env and "/.venv" not in env["PATH"]
    assert launch["cwd"] == "/" and launch["readOnlyRoot"] is True
    assert os.path.realpath(f"/proc/{master}/exe").endswith("/nginx")
    # It logs its access to /dev/stdout as the images do (the container log, its own since podinit).
    assert '"GET /health HTTP/1.1" 200' in setup.proxy.container("fleet-proxy").log(tail=100000)
    assert setup.proxy.container("fleet-proxy").restarts == 0


def _running(pid: int) -> bool:
    try:
        return "Z (zombie)" not in Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False


def test_closing_leaves_nothing_behind(setup):
    """The WAN's close kills the Gateway's nginx (its PID namespace with it); the clusters'
    closes the rest: no namespace, directory or process of ours is left."""
    unshare_pid = setup.wan.forwarders[-1][0].pid
    gateway_pids = [unshare_pid, *children(unshare_pid)]
    gateway_pids += [kid for pid in gateway_pids[1:] for kid in children(pid)]
    assert len(gateway_pids) == 3, f"unshare, nginx's master and worker: {gateway_pids}"
    directory = setup.gateway.directory
    setup.wan.close()
    assert not directory.exists()
    deadline = time.monotonic() + 5  # the kernel kills the PID namespace's processes as its PID 1 dies
    while any(_running(pid) for pid in gateway_pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not [pid for pid in gateway_pids if _running(pid)], "the Gateway's nginx outlived the WAN"
    setup.close()
    left = [entry for entry in harness.leftovers() if any(i in entry for i in setup.ids)]
    assert left == [], f"left behind: {left}"
    with cleanup._LIVE_LOCK:
        alone = not cleanup._LIVE
    if alone:  # no other cluster of this process runs: nothing at all may be left
        assert harness.leftovers() == []
