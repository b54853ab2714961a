"""The CNI's part: a cluster's NetworkPolicies enforced in every pod's network namespace
with nftables (compiled by netpol.py, whose docstring gives the semantics and the
emulation's limits), kept in step with the cluster's objects and pods; and what the
negative controls need: reachability probes from any network namespace of a cluster and
a host outside the cluster.

`Enforcer.sync()` runs whenever pods, clients or objects change (Cluster.write_dns):
it recompiles the rules of every pod and client and replaces, atomically, the table of
each network namespace whose rules changed (`ip netns exec NS nft -f -`), before any
container of a new pod starts. `nft` is required: without it the harness refuses to
start a cluster (the e2e tests fail), never runs one unfiltered.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import threading
from typing import TYPE_CHECKING, Any, Optional

from tests.e2e.harness.host import HarnessError, kill, run_cmd
from tests.e2e.harness.netpol import compile_policies
from tests.e2e.harness.netpol_model import Endpoint, PodRules
from tests.e2e.harness.netpol_nft import ruleset

if TYPE_CHECKING:
    from tests.e2e.harness.cluster import Cluster

NFT_MISSING = (
    "`nft` (nftables) is not on PATH: the e2e harness enforces NetworkPolicies with it and does "
    "not run without (`make e2e` / `make test` install Debian's nftables as root)"
)
# A documentation address (RFC 5737) for "the outside world": no pod, no cluster.
OUTSIDE_IP = "203.0.113.80"
DNS_LABELS = {"k8s-app": "kube-dns"}
DNS_PORT = 53

PROBE = """
import json, socket, sys, threading
targets, timeout = json.loads(sys.argv[1])
out = {}
def dial(host, port):
    s = socket.socket()
    s.settimeout(timeout)
    try:
        s.connect((host, port))
        out[f"{host}:{port}"] = "ok"
    except socket.timeout:
        out[f"{host}:{port}"] = "timeout"
    except OSError as exc:
        out[f"{host}:{port}"] = f"{type(exc).__name__}: {exc.strerror or exc}"
    finally:
        s.close()
threads = [threading.Thread(target=dial, args=(h, p)) for h, p in targets]
for t in threads: t.start()
for t in threads: t.join()
print(json.dumps(out))
"""

LISTENER = """
import socket, sys, threading
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((sys.argv[1], int(sys.argv[2])))
s.listen(16)
print("ready", flush=True)
while True:
    c, _ = s.accept()
    c.close()
"""


def nft_path() -> Optional[str]:
    """`nft` on PATH, or where Debian installs it (root's PATH has /usr/sbin, not every PATH)."""
    found = shutil.which("nft")
    if found:
        return found
    return next((p for p in ("/usr/sbin/nft", "/sbin/nft") if os.access(p, os.X_OK)), None)


class Enforcer:
    """Loads a cluster's NetworkPolicies into its pods' network namespaces."""

    def __init__(self, cluster: Cluster):
        nft = nft_path()
        if nft is None:
            raise HarnessError(NFT_MISSING)
        self.nft = nft
        self.cluster = cluster
        self.rules: dict[str, PodRules] = {}
        self._loaded: dict[str, str] = {}  # netns -> ruleset text in force
        self._lock = threading.Lock()
        self._listeners: dict[tuple[str, int], subprocess.Popen] = {}  # by address
        self._outside = False
        self._setup_lock = threading.Lock()  # not self._lock: add_client syncs under it

    # -- what the policies see
    def endpoints(self) -> list[Endpoint]:
        c = self.cluster
        out = []
        for pod in [*c.pods.values(), *c.job_pods()]:
            if not pod.ip:
                continue
            ports = {
                p["name"]: (int(p["containerPort"]), p.get("protocol", "TCP"))
                for container in pod.spec.get("containers", [])
                for p in container.get("ports", [])
                if p.get("name")
            }
            out.append(Endpoint(pod.name, pod.netns, pod.namespace, pod.ip, dict(pod.labels), ports))
        for netns, namespace in c.clients:
            name = netns[len(c.id) + 1 :]
            out.append(Endpoint(name, netns, namespace, c.addresses[netns], dict(c.client_labels.get(netns, {}))))
        return out

    def namespaces(self) -> dict[str, dict[str, str]]:
        return {
            name: dict(obj["metadata"].get("labels") or {})
            for (kind, name), obj in self.cluster.objects.items()
            if kind == "Namespace"
        }

    def policies(self) -> list[dict[str, Any]]:
        return [o for (kind, _), o in sorted(self.cluster.objects.items()) if kind == "NetworkPolicy"]

    # -- loading
    def sync(self) -> None:
        """Recompile, and load every changed ruleset (atomically per namespace)."""
        with self._lock:
            self.rules = compile_policies(self.policies(), self.endpoints(), self.namespaces())
            for netns, rules in self.rules.items():
                text = ruleset(rules, exempt=[self.cluster.bridge_ip])
                if self._loaded.get(netns) != text:
                    load(self.nft, netns, text)
                    self._loaded[netns] = text

    def describe(self, netns: str) -> str:
        return self._loaded.get(netns, "(no ruleset)")

    # -- probes
    def reach(self, netns: str, targets: list[tuple[str, int]], timeout: float = 1.5) -> dict[str, str]:
        """Connect from `netns` (as a process of that pod would) to each host:port at once:
        "ok", "timeout" (dropped), or the error (e.g. refused: the packet arrived)."""
        res = run_cmd(
            ["ip", "netns", "exec", netns, sys.executable, "-c", PROBE, json.dumps([targets, timeout])],
            timeout=timeout + 15,
        )
        return json.loads(res.stdout)

    def _listen(self, netns: str, ip: str, port: int) -> None:
        """A TCP listener at ip:port in `netns` that accepts and closes (once per address)."""
        if (ip, port) in self._listeners:
            return
        proc = subprocess.Popen(
            ["ip", "netns", "exec", netns, sys.executable, "-c", LISTENER, ip, str(port)],
            stdout=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            text=True,
            start_new_session=True,
        )
        self._listeners[(ip, port)] = proc
        if proc.stdout is None or proc.stdout.readline().strip() != "ready":
            raise HarnessError(f"the listener on {ip}:{port} in {netns} did not start")

    def outside(self, port: int) -> str:
        """A host outside the cluster listening on `port` (OUTSIDE_IP, on the node, every
        pod routed to it): what egress to the outside world would reach. Returns its address."""
        c = self.cluster
        with self._setup_lock:
            if not self._outside:
                run_cmd(["ip", "-n", c.node_ns, "addr", "add", f"{OUTSIDE_IP}/32", "dev", "lo"])
                c.add_route(f"{OUTSIDE_IP}/32", c.bridge_ip)
                self._outside = True
            self._listen(c.node_ns, OUTSIDE_IP, port)
        return OUTSIDE_IP

    def cluster_dns(self) -> str:
        """A stand-in for the cluster DNS pod (namespace kube-system, `k8s-app: kube-dns`,
        as the policies' DNS rules select it) listening on TCP 53: the controls connect to
        it, while name lookups themselves use the hosts files. Returns its address."""
        c = self.cluster
        netns = f"{c.id}-kube-dns"
        with self._setup_lock:
            if netns not in c.addresses:
                c.add_client("kube-dns", "kube-system", DNS_LABELS)
            self._listen(netns, c.addresses[netns], DNS_PORT)
        return c.addresses[netns]

    def close(self) -> None:
        """Stop the listeners (the tables go with the namespaces)."""
        for proc in self._listeners.values():
            kill(proc.pid)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=5)
            if proc.stdout is not None:
                proc.stdout.close()
        self._listeners.clear()


def load(nft: str, netns: str, text: str) -> None:
    res = subprocess.run(
        ["ip", "netns", "exec", netns, nft, "-f", "-"], input=text, capture_output=True, text=True, timeout=20
    )
    if res.returncode != 0:
        raise HarnessError(f"nft refused the ruleset of {netns}: {res.stderr.strip()}\n{text}")
