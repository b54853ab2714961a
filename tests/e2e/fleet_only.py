"""What the hub's public address exposes (HTTP era, the Fleet-only proxy), seen with
real processes: the rendered `fleet-proxy` container (Debian's nginx running the
rendered nginx.conf, harness/pods.py) in the hub's SuperLink pod, behind the emulated
load balancer (harness/wan.py).

`outside_control_refused`: a `flwr` user outside the hub's cluster (a client network
namespace in a site's cluster, with the hub's CA and the public name) dials the public
address with every Control command a hostile site would try: `flwr ls`, `flwr
supernode register`, `flwr run`. Each must fail, the proxy's access log must show each
Control request answered 404 with no upstream (never forwarded), and the SuperLink's
log must show no Control call in that window. The positive control: the same `flwr ls`
from the hub's cluster (its control Service) succeeds and the SuperLink logs
`ControlServicer.ListRuns`, so the absence above is not a log that says nothing.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import tomli_w

from tests.e2e.cli_user import CLI_TIMEOUT, cli_env
from tests.e2e.harness import Cluster, Pod
from tests.e2e.harness.gateway import ExposedGateway
from tests.e2e.runs import APP_DIR

# The SuperLink's log line for every Control API call (flwr/superlink/servicer/control).
CONTROL_CALL = "ControlServicer."
# The proxy's access log (fleet_proxy.config's `fleet` format): addr "METHOD URI" status ... upstream=ADDR
ACCESS = re.compile(
    r'"(?P<method>[A-Z]+) (?P<uri>\S+)" (?P<status>\d{3}) (?P<req>\d+) (?P<sent>\d+) \S+ upstream=(?P<up>\S+)'
)


def proxy_log(superlink: Pod) -> str:
    return superlink.container("fleet-proxy").log(1000000)


def superlink_log(superlink: Pod) -> str:
    return superlink.container("superlink").log(1000000)


def accesses(log: str) -> list[dict[str, str]]:
    return [m.groupdict() for m in ACCESS.finditer(log)]


class OutsideCli:
    """`flwr` on a machine outside the hub's cluster: the hub's exported flwrConfig with
    the public address instead of the in-cluster one, the hub's CA."""

    def __init__(self, version: str, cluster: Cluster, namespace: str, flwr_config: str, ca: str, address: str):
        self.cluster = cluster
        doc = tomllib.loads(flwr_config)
        self.connection = doc["superlink"]["default"]
        conn: dict[str, Any] = doc["superlink"][self.connection]
        conn["address"] = address
        ca_path = Path(conn["root-certificates"])
        home = cluster.workdir / "outside-cli"
        (home / "flwr").mkdir(parents=True)
        (home / "flwr" / "config.toml").write_text(tomli_w.dumps(doc))
        (home / "ca").mkdir()
        (home / "ca" / ca_path.name).write_text(ca)
        self.home = home
        self.netns = cluster.add_client("outside-cli", namespace)
        self.mounts = [{"source": str(home / "ca"), "target": str(ca_path.parent), "readOnly": True}]
        self.env = cli_env(version, home)

    def flwr(self, *args: str) -> tuple[int, str]:
        res = self.cluster.exec_in(
            self.netns,
            ["flwr", *args],
            env=self.env,
            mounts=self.mounts,
            cwd=str(self.home),
            timeout=CLI_TIMEOUT,
            name="outside-cli",
        )
        return res.returncode, (res.stdout + res.stderr)[-600:]


Front = Callable[[], list[dict[str, str]]]


def proxy_front(superlink: Pod) -> Front:
    """The Fleet-only proxy's requests so far: uri, status, up (the upstream, `-` for none)."""
    return lambda: accesses(proxy_log(superlink))


def gateway_front(gw: ExposedGateway) -> Front:
    """The emulated Gateway's requests so far, in the same shape."""
    return lambda: [
        {"uri": r["uri"], "status": str(r["status"]), "up": r.get("upstream") or "-"} for r in gw.requests()
    ]


def outside_control_refused(cli: OutsideCli, superlink: Pod, public_key: str, front: Front) -> str:
    """Every Control command from outside fails at the `front` (what the public address
    reaches first: the proxy, or a gateway with the proxy behind it) and never reaches
    the SuperLink; returns the evidence."""
    key_file = cli.home / "node.pub"
    key_file.write_text(public_key + "\n")
    front_mark, link_mark = len(front()), len(superlink_log(superlink))
    proxy_mark = len(proxy_log(superlink))
    attempts = {
        "flwr list": cli.flwr("list", cli.connection, "--format", "json"),
        "flwr supernode register": cli.flwr("supernode", "register", str(key_file), cli.connection),
        "flwr run": cli.flwr("run", str(APP_DIR), cli.connection),
    }
    for what, (rc, out) in attempts.items():
        # `--format json` exits 0 and says `"success": false` (flwr 1.41).
        failed = rc != 0 or '"success": false' in out
        assert failed, f"{what} through the public address succeeded (exit {rc}):\n{out}"
    seen = front()[front_mark:]
    control = [a for a in seen if a["uri"].startswith("/v1/control/")]
    assert len(control) >= len(attempts), f"the front saw {len(control)} Control requests, expected >= 3: {seen}"
    forwarded = [a for a in control if a["status"] != "404" or a["up"] != "-"]
    assert not forwarded, f"Control requests forwarded: {forwarded}"
    behind = [a for a in accesses(proxy_log(superlink)[proxy_mark:]) if a["uri"].startswith("/v1/control/")]
    assert all(a["up"] == "-" for a in behind), f"the proxy forwarded Control requests: {behind}"
    on_link = superlink_log(superlink)[link_mark:]
    assert CONTROL_CALL not in on_link and "/v1/control" not in on_link, (
        f"the SuperLink saw a Control call from outside:\n{on_link[-3000:]}"
    )
    uris = sorted({a["uri"] for a in control})
    return (
        f"outside flwr list/register/run refused: {len(control)} Control requests answered 404, none forwarded ({uris})"
    )


def fleet_bytes(superlink: Pod, since: int = 0) -> int:
    """Bytes of request bodies and responses the proxy forwarded on Fleet routes."""
    total = 0
    for a in accesses(proxy_log(superlink)[since:]):
        if a["uri"].startswith("/v1/fleet/") and a["up"] != "-":
            total += int(a["req"]) + int(a["sent"])
    return total
