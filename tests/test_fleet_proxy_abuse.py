"""Issue 32 part 3, live: a real Flower 1.42.0 SuperLink (TLS, node auth) behind the Fleet-only
proxy's rendered nginx.conf in Debian's nginx, flooded with concurrent maximum-size
unauthenticated `POST /v1/fleet/push-object` bodies (Flower reads a whole body before it checks
the node's signature), from one loopback address and from many (127.0.0.2-127.0.0.9), and held
by slow clients. The SuperLink's RSS (VmRSS of it and its children, sampled every 20 ms) stays
under its memory limit (the default, 768Mi, so the derived bounds are 5 uploads in all, 2 per
address), requests over the bounds are answered 503,
and the SuperLink still answers `/health` through the proxy afterwards; a real SuperNode dialling
the proxy during a flood comes online and a real `flwr run` round completes through it (its
ClientApp's messages cross the proxy; its memory is recorded, not held: docs/benchmarks.md).

NEGATIVE CONTROLS: the same flood through today's config (048b1d8: `client_max_body_size 64m`, no
`limit_conn`) drives the RSS over the limit; a round whose reply is a counted upload while slow
clients hold every slot ends without the reply, and the round assertion fails. Only the listen
address, ports, certificate paths and the upstream's name are rewritten; every bound is as
rendered. Request counts are bounded (waves x senders), traffic stays on 127.0.0.0/8, every port
is a free one."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import re
import shutil
import socket
import ssl
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Optional

import pytest

from flower_federation.flower import superlink_state
from tests.support.flower import HTTP_ERA, venv_bin
from tests.support.live_flower import LiveSuperLink, cli_home, live_superlink, start_supernode, wait_online
from tests.support.manifests import get
from tests.support.processes import PortMap, free_port, run_bounded
from tests.test_hub_exposure import hub, render

pytestmark = pytest.mark.live
NGINX = shutil.which("nginx") or "/usr/sbin/nginx"
LIMIT = 768 * 1024**2  # the SuperLink's memory limit in the rendered hub (the default preset's)
MIB = 1024**2
MAX_WAVES = 60  # a flood that waits for a round: a bound on its requests, not a duration


def _rendered_conf() -> str:
    raw = hub("1.42.0")
    objects, _, _ = render(raw)
    text: str = get(objects, "ConfigMap", "fl-superlink-fleet-proxy")["data"]["nginx.conf"]
    assert "limit_conn fleet_uploads_per_address 2;" in text and "limit_conn fleet_uploads_total 5;" in text
    return text


def _todays(conf: str) -> str:
    """048b1d8's bounds: 64m bodies, no limit_conn (the rest as rendered now)."""
    lines = [ln for ln in conf.splitlines() if "limit_conn" not in ln]
    return "\n".join(lines).replace("client_max_body_size 8m;", "client_max_body_size 64m;") + "\n"


def _tree_rss(pid: int, field: str = "VmRSS:", file: str = "status") -> int:
    """VmRSS (bytes) of `pid` and its descendants (or another /proc field in kB, e.g. smaps_rollup's Pss)."""
    total, todo = 0, [pid]
    while todo:
        p = todo.pop()
        try:
            status = Path(f"/proc/{p}/{file}").read_text()
            total += int(status.split(field)[1].split()[0]) * 1024
            for task in Path(f"/proc/{p}/task").iterdir():
                todo += [int(c) for c in (task / "children").read_text().split()]
        except (OSError, IndexError):
            continue
    return total


class Proxy:
    def __init__(self, live: LiveSuperLink, conf: str, tmp: Path):
        self.public = free_port()
        cert = next(live.root.rglob("tls.crt"))
        key = cert.with_name("tls.key")
        upstream = live.api_ports[0]
        conf = (
            conf.replace(" /tmp/", f" {tmp}/")  # first: the paths put in below are under /tmp too
            .replace("listen 8000 ssl;", f"listen {self.public} ssl;")  # every 127.0.0.x source reaches it
            .replace("127.0.0.1:9095", f"127.0.0.1:{upstream}")
            .replace("/etc/flower/tls/tls.crt", str(cert))
            .replace("/etc/flower/tls/tls.key", str(key))
            .replace("/etc/flower/ca/ca.crt", str(live.ca_file))
            .replace("proxy_ssl_name fl-superlink.flower-hub.svc.cluster.local;", "proxy_ssl_name localhost;")
            .replace("/dev/stdout", f"{tmp}/access.log")
        )
        (tmp / "nginx.conf").write_text(conf)
        self.proc = subprocess.Popen([NGINX, "-e", f"{tmp}/error.log", "-c", str(tmp / "nginx.conf")])
        self.ctx = ssl.create_default_context(cafile=str(live.ca_file))
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.public), timeout=1).close()
                break
            except OSError:
                assert self.proc.poll() is None and time.monotonic() < deadline, (tmp / "error.log").read_text()
                time.sleep(0.1)

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=10)

    def post(self, source: str, size: int) -> int:
        """One unauthenticated push-object of `size` bytes from `source`: the status, 0 if cut off."""
        try:
            raw = socket.create_connection(("127.0.0.1", self.public), timeout=60, source_address=(source, 0))
            with self.ctx.wrap_socket(raw, server_hostname="localhost") as s:
                head = (
                    f"POST /v1/fleet/push-object HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/protobuf"
                    f"\r\nContent-Length: {size}\r\nConnection: close\r\n\r\n"
                )
                s.sendall(head.encode())
                chunk = os.urandom(MIB)
                for start in range(0, size, MIB):
                    s.sendall(chunk[: min(MIB, size - start)])
                reply = s.recv(64)
                return int(reply.split(b" ", 2)[1]) if reply.startswith(b"HTTP/") else 0
        except (OSError, ssl.SSLError, ValueError, IndexError):
            return 0

    def health(self) -> int:
        with self.ctx.wrap_socket(
            socket.create_connection(("127.0.0.1", self.public), timeout=30), server_hostname="localhost"
        ) as s:
            s.sendall(b"GET /health HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
            return int(s.recv(64).split(b" ", 2)[1])


def flood(
    proxy: Proxy,
    pid: int,
    sources: list[str],
    size: int,
    rounds: int = 3,
    until: Optional[threading.Event] = None,
    pss: Optional[list[int]] = None,
) -> tuple[int, int, list[int]]:
    """(baseline RSS, peak RSS, statuses) of `rounds` waves of one body per source at once, or
    more until `until` is set (at most MAX_WAVES: the request count stays bounded); the peak PSS
    (proportional set size: a page shared by the tree's processes counted once) into `pss[0]`."""
    baseline, peak, stop = _tree_rss(pid), [0], threading.Event()

    def sample() -> None:
        while not stop.is_set():
            peak[0] = max(peak[0], _tree_rss(pid))
            if pss is not None:
                pss[0] = max(pss[0], _tree_rss(pid, "Pss:", "smaps_rollup"))
            time.sleep(0.02)

    sampler = threading.Thread(target=sample)
    sampler.start()
    statuses: list[int] = []
    try:
        wave = 0
        while wave < rounds or (until is not None and not until.is_set() and wave < MAX_WAVES):
            wave += 1
            threads = [threading.Thread(target=lambda s=s: statuses.append(proxy.post(s, size))) for s in sources]
            for t in threads:
                t.start()
            for t in threads:
                t.join(timeout=120)
    finally:
        stop.set()
        sampler.join()
    return baseline, peak[0], statuses


@pytest.fixture
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveSuperLink]:
    """A fresh SuperLink per test: its RSS does not shrink back after a flood (the allocator keeps
    what it took), so each measurement starts from Flower's own baseline."""
    if not Path(NGINX).exists():
        pytest.fail("nginx is not installed: `make test` installs Debian's nginx as root")
    with live_superlink(HTTP_ERA, tmp_path_factory.mktemp("abuse")) as link:
        yield link


def _pid(live: LiveSuperLink) -> int:
    return live.procs.procs[0][1].pid


ONE = ["127.0.0.1"] * 8
MANY = [f"127.0.0.{i}" for i in range(2, 10)] * 2  # 16 at once from 8 addresses


@pytest.mark.parametrize("sources", [ONE, MANY], ids=["one-address", "many-addresses"])
def test_max_size_floods_leave_the_superlink_under_its_limit(
    live: LiveSuperLink, tmp_path: Path, sources: list[str]
) -> None:
    proxy = Proxy(live, _rendered_conf(), tmp_path)
    try:
        baseline, peak, statuses = flood(proxy, _pid(live), sources, 8 * MIB)
        figures = f"baseline {baseline / MIB:.0f} MiB, peak {peak / MIB:.0f} MiB, statuses {sorted(statuses)}"
        print(f"bounded {len(set(sources))} address(es): {figures}")
        assert peak < LIMIT, f"peak {peak / MIB:.0f} MiB over the limit"
        assert 503 in statuses, "no request was over the bounds: the flood did not test them"
        assert proxy.health() == 200 and live.procs.procs[0][1].poll() is None
    finally:
        proxy.stop()


def test_slow_clients_are_dropped_and_do_not_hold_the_superlink(live: LiveSuperLink, tmp_path: Path) -> None:
    """Slow bodies: each holds an upload slot only until `idleTimeoutSeconds` (30 s) of silence."""
    conf = _rendered_conf().replace(
        "client_body_timeout 30s;", "client_body_timeout 3s;"
    )  # the same directive, shorter
    proxy = Proxy(live, conf, tmp_path)
    socks = []
    try:
        for i in range(5):  # every upload slot taken by a client that stalls after 1 MiB
            raw = socket.create_connection(
                ("127.0.0.1", proxy.public), timeout=60, source_address=(f"127.0.0.{10 + i}", 0)
            )
            s = proxy.ctx.wrap_socket(raw, server_hostname="localhost")
            s.sendall(
                f"POST /v1/fleet/push-object HTTP/1.1\r\nHost: localhost\r\nContent-Length: {8 * MIB}\r\n\r\n".encode()
            )
            s.sendall(os.urandom(MIB))
            socks.append(s)
        time.sleep(0.5)
        held = proxy.post("127.0.0.30", 64 * 1024)
        print(f"slow clients: a fresh upload while 5 stalled bodies hold the slots -> {held}")
        assert held == 503  # the slots are held...
        time.sleep(5)  # ...until the body timeout drops the stalled clients (bounded wait, not a speed claim)
        after = proxy.post("127.0.0.31", 64 * 1024)
        print(f"slow clients: after the body timeout -> {after}")
        assert after not in (0, 503)  # a fresh upload is forwarded again (Flower refuses it: no signature)
        assert proxy.health() == 200
    finally:
        for s in socks:
            s.close()
        proxy.stop()


@pytest.fixture
def live_without_collector(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> Iterator[LiveSuperLink]:
    """The same fresh SuperLink, its wrapper without the periodic full collection and the mmap threshold
    (flower_federation/flower/superlink_state.py, part 3): what Flower does on its own."""
    monkeypatch.setattr(superlink_state, "BOUNDED_BODIES", "")
    with live_superlink(HTTP_ERA, tmp_path_factory.mktemp("abuse-uncollected")) as link:
        yield link


def test_negative_control_without_the_collector_refused_bodies_pile_up(
    live_without_collector: LiveSuperLink, tmp_path: Path
) -> None:
    """NEGATIVE CONTROL of the wrapper's collector: the round test's flood (20 maximum-size bodies at a
    time behind the rendered bounds) on a SuperLink without it grows by hundreds of MiB within 15 waves:
    each refused body waits in a reference cycle for CPython's next full collection (about 11 waves
    away), where the round test holds the whole container under its limit over a longer flood."""
    live = live_without_collector
    assert b"gc.collect" not in Path(f"/proc/{_pid(live)}/cmdline").read_bytes()
    proxy = Proxy(live, _rendered_conf(), tmp_path)
    try:
        baseline, peak, statuses = flood(proxy, _pid(live), ONE[:4] + MANY, 8 * MIB, rounds=15)
        print(f"without the collector: baseline {baseline / MIB:.0f} MiB, peak {peak / MIB:.0f} MiB")
        assert 503 in statuses
        assert peak - baseline > 300 * MIB, f"grew only {(peak - baseline) / MIB:.0f} MiB without the collector"
    finally:
        proxy.stop()


def test_negative_control_todays_config_lets_the_superlink_exceed_its_limit(
    live: LiveSuperLink, tmp_path: Path
) -> None:
    proxy = Proxy(live, _todays(_rendered_conf()), tmp_path)
    try:
        baseline, peak, statuses = flood(proxy, _pid(live), ["127.0.0.1"] * 12, 60 * MIB, rounds=1)
        print(f"unbounded: baseline {baseline / MIB:.0f} MiB, peak {peak / MIB:.0f} MiB, statuses {sorted(statuses)}")
        assert peak > LIMIT, f"peak {peak / MIB:.0f} MiB: today's config stayed under the limit"
        assert 503 not in statuses
    finally:
        proxy.stop()


class Trickle:
    """Slow clients that hold upload slots: each sends the head of an 8 MiB push-object, then one
    byte a second, never long enough silent for `client_body_timeout` to drop it, until `release`."""

    def __init__(self, proxy: Proxy, sources: list[str]):
        self.stop, self.socks = threading.Event(), []
        for source in sources:
            raw = socket.create_connection(("127.0.0.1", proxy.public), timeout=60, source_address=(source, 0))
            s = proxy.ctx.wrap_socket(raw, server_hostname="localhost")
            # With Flower's content type: without one the SuperLink answers 415 and the slot is free again.
            head = "POST /v1/fleet/push-object HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/protobuf\r\n"
            s.sendall(f"{head}Content-Length: {8 * MIB}\r\n\r\n".encode())
            self.socks.append(s)
        self.thread = threading.Thread(target=self._trickle)
        self.thread.start()

    def _trickle(self) -> None:
        while not self.stop.wait(1):
            for s in self.socks:
                with contextlib.suppress(OSError):  # a dropped holder no longer holds: the 503 probe tells
                    s.sendall(b"x")

    def release(self) -> None:
        self.stop.set()
        self.thread.join()
        for s in self.socks:
            s.close()


APP = Path(__file__).resolve().parent / "e2e" / "app"  # the e2e's numpy FedAvg app
ROUND = re.compile(r"E2E round=1 seconds=[\d.]+ clients=(\{.*\})$", re.M)


def one_round(
    live: LiveSuperLink, name: str, env: dict[str, str], floats: int, timeout: float, bound: float
) -> tuple[str, str]:
    """`flwr run --stream` of the app, one round on one node (`model-floats` floats, `round-timeout`
    `timeout`), through the Control API: (its output, the run's status in `flwr list`). A stream
    still open after `bound` seconds is cut (the run keeps its status): a reply whose objects are
    held back keeps Flower's ServerApp waiting for them past its round timeout."""
    flwr = str(venv_bin(live.version) / "flwr")
    config = f"num-server-rounds=1 min-nodes=1 model-floats={floats} round-timeout={timeout}"
    argv = [flwr, "run", str(APP), name, "--run-config", config, "--stream"]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    try:
        output, _ = proc.communicate(timeout=bound)
    except subprocess.TimeoutExpired:
        proc.kill()
        output, _ = proc.communicate()
    m = re.search(r"run_id `(\d+)`|started run (\d+)", output)
    assert m, output[-3000:]
    listed = run_bounded([flwr, "list", name, "--format", "json"], env)
    runs = json.loads(listed.stdout[listed.stdout.index("{") :])["runs"]
    return output, {str(r["run-id"]): r["status"] for r in runs}[m.group(1) or m.group(2)]


def _served(log: str, route: str) -> list[str]:
    """The access log's statuses of the SuperNode's (127.0.0.1) requests to a Fleet route."""
    return re.findall(rf'^127\.0\.0\.1 "POST /v1/fleet/{route}" (\d+) ', log, re.M)


def assert_round_completed_through_the_proxy(output: str, status: str, log: str) -> None:
    """The run finished:completed, its one round aggregated the SuperNode's ClientApp reply, and the
    SuperNode's authenticated pull and push of messages (only it calls those routes) were served 200."""
    assert status == "finished:completed", f"the run is {status}"
    rounds = ROUND.findall(output)
    assert len(rounds) == 1 and len(json.loads(rounds[0])) == 1, f"no ClientApp reply aggregated:\n{output[-3000:]}"
    assert "200" in _served(log, "pull-messages") and "200" in _served(log, "push-messages"), log[-3000:]


def test_a_real_supernodes_round_completes_through_the_proxy_during_a_flood(
    live: LiveSuperLink, tmp_path: Path
) -> None:
    """A real SuperNode (its rendered args and own key, registered by the exported script) dials the
    proxy, not the SuperLink, while max-size unauthenticated bodies flood it from 127.0.0.1 and from
    eight other addresses at once and a slow client holds an upload slot: it comes online and a real
    `flwr run` round completes (the ServerApp sends, the ClientApp trains on the SuperNode, its reply is
    aggregated), the flood answered 503 over the bounds. The SuperLink's container stays under its limit
    over the whole flood, the round included (the wrapper's collector: its negative control is
    test_negative_control_without_the_collector_refused_bodies_pile_up).

    NEGATIVE CONTROL (same SuperLink, proxy and SuperNode): a model whose reply is a counted upload
    (> 10 kB) while slow clients hold every slot: the SuperNode's push is answered 503 (Flower retries
    it), the round goes without its reply (or the ServerApp waits for the held-back objects and the run
    stays running), and the same assertion fails."""
    assert b"gc.collect" in Path(f"/proc/{_pid(live)}/cmdline").read_bytes()  # the rendered wrapper runs
    proxy = Proxy(live, _rendered_conf(), tmp_path)
    online_phase, done, results, pss = threading.Event(), threading.Event(), [], [0]
    sources = ONE[:4] + MANY  # 20 at once: 4 from 127.0.0.1, 16 from 127.0.0.2-9

    def flooding_phases() -> None:
        try:  # six waves while the SuperNode comes online, then on until the round has ended
            results.append(flood(proxy, _pid(live), sources, 8 * MIB, rounds=6))
        finally:
            online_phase.set()
        results.append(flood(proxy, _pid(live), sources, 8 * MIB, rounds=1, until=done, pss=pss))

    flooding = threading.Thread(target=flooding_phases)
    holders: list[Trickle] = []
    try:
        name, env = cli_home(live)
        script = live.workdir / "register.sh"
        script.write_text(live.r.outputs["nodeAuth"]["registerScript"])
        registered = run_bounded(["sh", str(script)], env, timeout=240)
        assert registered.returncode == 0, registered.stdout + registered.stderr
        holders.append(Trickle(proxy, ["127.0.0.10"]))  # before the flood, so that it surely holds a slot
        flooding.start()
        # The SuperNode's SuperLink address goes to the proxy's port; `flwr` still uses the Control API directly.
        via_proxy = dataclasses.replace(live, ports=PortMap(dict.fromkeys(live.ports, proxy.public)))
        node = start_supernode(via_proxy, "alpha", 1)
        wait_online(live, node, name, env)
        online_phase.wait(timeout=300)
        ((baseline, peak, statuses),) = results
        print(f"SuperNode online during a flood: baseline {baseline / MIB:.0f} MiB, peak {peak / MIB:.0f} MiB")
        assert peak < LIMIT and 503 in statuses
        output, status = one_round(live, name, env, floats=4, timeout=60, bound=240)
        done.set()
        flooding.join(timeout=300)
        _, (_, peak, statuses) = results
        print(
            f"round during the flood: {status}, {ROUND.findall(output)}; peak {peak / MIB:.0f} MiB "
            f"(PSS {pss[0] / MIB:.0f} MiB), {len(statuses)} flood requests, 503s {statuses.count(503)}"
        )
        log = (tmp_path / "access.log").read_text()
        assert_round_completed_through_the_proxy(output, status, log)
        # Held over the whole flood, the round included: the SuperLink's wrapper collects the refused bodies'
        # reference cycles (flower/superlink_state.py; without it: test_negative_control_without_the_collector...).
        assert peak < LIMIT, f"peak {peak / MIB:.0f} MiB over the limit while the round ran"
        assert 503 in statuses

        # The flood is over: fresh slow clients take every slot (one over the bound, if the first still holds).
        holders.append(Trickle(proxy, ["127.0.0.11", "127.0.0.11", "127.0.0.12", "127.0.0.12", "127.0.0.13"]))
        held = (tmp_path / "access.log").read_text() + (tmp_path / "error.log").read_text()
        assert proxy.post("127.0.0.14", 64 * 1024) == 503, re.findall(r".*127\.0\.0\.1[0-3]\b.*", held)
        before = len((tmp_path / "access.log").read_text())  # after it only the SuperNode comes from 127.0.0.1
        # A 32 KiB reply. The round waits longer than anything here (the stream is cut at `bound`, the run still
        # running): the SuperNode must pull the message before the run ends, which on a loaded machine came after
        # a 15 s round had timed out (CI: no push at all). The reply's push comes once the ClientApp (a new
        # process) has answered: watch for the SuperNode's push-object to reach the proxy, not a fixed time.
        output, status = one_round(live, name, env, floats=4096, timeout=600, bound=60)
        deadline = time.monotonic() + 240
        while not _served(log := (tmp_path / "access.log").read_text()[before:], "push-object"):
            assert time.monotonic() < deadline, f"the SuperNode never pushed its reply:\n{log[-3000:]}"
            time.sleep(0.5)
        print(
            f"round with every slot held: {status}, {ROUND.findall(output)}; "
            f"the SuperNode's push-object statuses {_served(log, 'push-object')}"
        )
        assert "503" in _served(log, "push-object")
        with pytest.raises(AssertionError, match="the run is running"):
            assert_round_completed_through_the_proxy(output, status, log)
    finally:
        done.set()
        if flooding.is_alive():
            flooding.join(timeout=300)
        for h in holders:
            h.release()
        proxy.stop()
