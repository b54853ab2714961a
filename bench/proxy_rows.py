"""`make bench`'s proxy rows: what the Fleet-only proxy costs a model crossing it (issue 36 part 3).

Row `proxy-N` (ROWS): a model of N MiB (objects of Flower's 5 MiB array chunk) pushed and pulled by Flower's
Fleet client's HTTP (bench/proxy_client.py) through Debian's nginx running the rendered nginx.conf (the
`hub` stack of tests/test_hub_exposure.py at Flower 1.42.0: TLS from the client, verified TLS to the
upstream, every directive as rendered; only paths, ports and the listen address are moved), and the same
transfer direct to the upstream (TLS, the same certificate). The upstream is Flower 1.42.0's own SuperLink
app under uvicorn with its object store replaced (bench/proxy_upstream.py says why). Then N small Fleet
requests (heartbeats) one after another on the kept-alive connection, each timed.

Reported per path (medians of --repeat runs, direct and proxy alternating): push and pull MB/s (MB = 10^6
bytes), nginx's CPU-seconds per GB each way (utime + stime of the master and every worker, /proc/PID/stat,
read between the phases), heartbeat median and p95 (ms) and the difference the proxy adds.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from tests.support.flower import HTTP_ERA, venv_python
from tests.support.processes import free_port

ROOT = Path(__file__).resolve().parent.parent
CHUNK = 5 * 1024 * 1024  # Flower's FLWR_PRIVATE_MAX_ARRAY_CHUNK_SIZE: one object per chunk
# row id -> (objects, bytes each, heartbeats); in table order.
ROWS: dict[str, tuple[int, int, int]] = {"proxy-100mb": (20, CHUNK, 200)}
DEFAULT = ("proxy-100mb",)
SERVER_NAME = "fl.example.org"  # the hub's externalAddress: the name its certificate gives sites
PATHS = ("direct", "proxy")
TICKS = os.sysconf("SC_CLK_TCK")


def nginx() -> Optional[str]:
    return shutil.which("nginx") or ("/usr/sbin/nginx" if Path("/usr/sbin/nginx").exists() else None)


def missing() -> Optional[str]:
    """Why the rows cannot run here, or None."""
    if nginx() is None:
        return "nginx missing: the proxy rows run Debian's nginx (`apt-get install nginx`, as `make test` does)"
    if not venv_python(HTTP_ERA).exists():
        return f"{venv_python(HTTP_ERA)} missing: `make bench` installs it"
    return None


def rendered() -> tuple[str, dict[str, str]]:
    """The hub's rendered nginx.conf and its TLS Secret (tls.crt, tls.key, ca.crt)."""
    from flower_federation.cli.offline import run_program
    from tests.support.manifests import get
    from tests.support.tls_provider import RealTlsProvider
    from tests.test_hub_exposure import hub

    objects = run_program({"federation": hub(HTTP_ERA)}, "hub", provider=RealTlsProvider()).manifests(show_secrets=True)
    conf: str = get(objects, "ConfigMap", "fl-superlink-fleet-proxy")["data"]["nginx.conf"]
    return conf, dict(get(objects, "Secret", "fl-superlink-tls")["stringData"])


def relocated(conf: str, tmp: Path, public: int, upstream: int) -> str:
    """The rendered config with its paths under `tmp`, listening on `public`, forwarding to `upstream`: every
    other directive as rendered (a rendered line this does not find fails here, not as a quiet no-op)."""
    moves = [
        (" /tmp/", f" {tmp}/"),  # first: the paths put in below are under /tmp too
        ("listen 8000 ssl;", f"listen 127.0.0.1:{public} ssl;"),
        ("127.0.0.1:9095", f"127.0.0.1:{upstream}"),
        ("/etc/flower/tls/", f"{tmp}/"),
        ("/etc/flower/ca/", f"{tmp}/"),
        ("/dev/stdout", f"{tmp}/access.log"),
    ]
    for old, new in moves:
        if old not in conf:
            raise SystemExit(f"the rendered nginx.conf has no {old.strip()!r}: bench/proxy_rows.py is out of date")
        conf = conf.replace(old, new)
    return conf


def _listening(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
        return True
    except OSError:
        return False


def _wait(ready: Callable[[], bool], proc: subprocess.Popen[bytes], log: Path) -> None:
    """Until `ready()` (the condition, not a sleep); SystemExit if `proc` died first or a minute passed."""
    for _ in range(600):
        if ready():
            return
        if proc.poll() is not None:
            raise SystemExit(f"exited {proc.returncode}: {log.read_text(errors='replace')[-2000:]}")
        proc_wait(proc, 0.1)
    raise SystemExit(f"not ready after a minute: {log.read_text(errors='replace')[-2000:]}")


def proc_wait(proc: subprocess.Popen[bytes], seconds: float) -> None:
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=seconds)


def cpu_seconds(master: int) -> float:
    """utime + stime of `master` and its children (nginx's workers), from /proc."""
    pids = [master]
    for task in Path(f"/proc/{master}/task").iterdir():
        pids += [int(c) for c in (task / "children").read_text().split()]
    total = 0
    for pid in pids:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        total += int(fields[11]) + int(fields[12])  # utime, stime: fields 14 and 15 of stat(5)
    return total / TICKS


@dataclass
class Run:
    """One client run's figures (bench/proxy_client.py's JSON) and nginx's CPU-seconds in each phase."""

    figures: dict[str, Any]
    nginx_cpu: dict[str, float]


@dataclass
class ProxyRow:
    id: str
    objects: int
    size: int
    heartbeats: int
    transfers: dict[str, list[Run]] = field(default_factory=lambda: {p: [] for p in PATHS})
    beats: list[Run] = field(default_factory=list)  # figures: path -> seconds of each heartbeat

    def medians(self, path: str) -> dict[str, float]:
        runs = self.transfers[path]
        beats = [b * 1000 for r in self.beats for b in r.figures[path]]
        proxied = [len(r.figures["proxy"]) for r in self.beats]
        return {
            "push_mbs": statistics.median(r.figures["push_bytes"] / r.figures["push_s"] / 1e6 for r in runs),
            "pull_mbs": statistics.median(r.figures["pull_bytes"] / r.figures["pull_s"] / 1e6 for r in runs),
            "push_cpu_gb": statistics.median(r.nginx_cpu["push"] / (r.figures["push_bytes"] / 1e9) for r in runs),
            "pull_cpu_gb": statistics.median(r.nginx_cpu["pull"] / (r.figures["pull_bytes"] / 1e9) for r in runs),
            # nginx serves only the proxied heartbeats: its CPU over them, whichever path this row is.
            "beat_cpu_us": statistics.median(
                r.nginx_cpu["heartbeat"] / n * 1e6 for r, n in zip(self.beats, proxied, strict=True)
            ),
            "beat_ms": statistics.median(beats),
            "beat_p95_ms": statistics.quantiles(beats, n=20)[-1] if len(beats) > 1 else beats[0],
        }


class Bench:
    """The upstream and the proxy in front of it, started once for a row's runs."""

    def __init__(self, tmp: Path):
        self.tmp = tmp
        conf, secret = rendered()
        for name in ("tls.crt", "tls.key", "ca.crt"):
            (tmp / name).write_text(secret[name])
        self.nginx: Optional[subprocess.Popen[bytes]] = None
        try:
            self._start(tmp, conf)
        except BaseException:
            self.stop()  # nothing left running when a start fails
            raise

    def _start(self, tmp: Path, conf: str) -> None:
        log, identity = tmp / "upstream.log", tmp / "identity.json"
        with open(log, "wb") as out:
            self.upstream = subprocess.Popen(
                [str(venv_python(HTTP_ERA)), str(ROOT / "bench" / "proxy_upstream.py"),
                 str(tmp / "tls.crt"), str(tmp / "tls.key"), str(identity)],
                stdout=out, stderr=subprocess.STDOUT, cwd=ROOT,
            )  # fmt: skip
        _wait(identity.exists, self.upstream, log)  # written once it listens, with the port it bound
        self.upstream_port = int(json.loads(identity.read_text())["port"])
        self.public = free_port()
        (tmp / "nginx.conf").write_text(relocated(conf, tmp, self.public, self.upstream_port))
        self.nginx = subprocess.Popen(
            [str(nginx()), "-e", str(tmp / "error.log"), "-c", str(tmp / "nginx.conf")],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        nginx_proc = self.nginx
        _wait(lambda: _listening(self.public), nginx_proc, tmp / "error.log")

    def stop(self) -> None:
        for proc in (self.nginx, getattr(self, "upstream", None)):
            if proc is not None and proc.poll() is None:
                proc.terminate()
                proc.wait(timeout=30)

    def url(self, path: str) -> str:
        return f"https://127.0.0.1:{self.public if path == 'proxy' else self.upstream_port}"

    def client(self, *args: str) -> Run:
        """One bench/proxy_client.py run; nginx's CPU-seconds read at each phase marker it prints."""
        argv = [str(venv_python(HTTP_ERA)), str(ROOT / "bench" / "proxy_client.py")]
        argv += [str(self.tmp / "ca.crt"), SERVER_NAME, str(self.tmp / "identity.json"), *args]
        assert self.nginx is not None, "Bench started"
        nginx_pid = self.nginx.pid
        client = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=ROOT)
        assert client.stdin and client.stdout
        marks: list[tuple[str, float]] = []
        for line in client.stdout:
            name = line.strip()
            if name.startswith("{"):
                figures = json.loads(name)
                break
            marks.append((name, cpu_seconds(nginx_pid)))
            client.stdin.write("\n")
            client.stdin.flush()
        else:
            raise SystemExit(f"bench/proxy_client.py {' '.join(args)} exited {client.wait()}")
        if client.wait() != 0:
            raise SystemExit(f"bench/proxy_client.py {' '.join(args)} exited {client.returncode}")
        return Run(figures, {name: after - cpu for (name, cpu), (_, after) in zip(marks, marks[1:], strict=False)})

    def transfer(self, path: str, objects: int, size: int) -> Run:
        return self.client("transfer", self.url(path), str(objects), str(size))

    def heartbeats(self, count: int) -> Run:
        return self.client("heartbeats", self.url("direct"), self.url("proxy"), str(count))


def run(ids: list[str], repeat: int) -> list[ProxyRow]:
    rows = [ProxyRow(row_id, *ROWS[row_id]) for row_id in ids]
    if not rows:
        return rows
    with tempfile.TemporaryDirectory(prefix="bench-proxy-") as tmp:
        bench = Bench(Path(tmp))
        try:
            for _ in range(repeat):
                for row in rows:
                    for path in PATHS:  # alternating: a burst of other load falls on both alike
                        result = bench.transfer(path, row.objects, row.size)
                        row.transfers[path].append(result)
                        f = result.figures
                        print(
                            f"  {row.id} {path}: push {f['push_bytes'] / f['push_s'] / 1e6:.0f} MB/s, "
                            f"pull {f['pull_bytes'] / f['pull_s'] / 1e6:.0f} MB/s, nginx CPU "
                            f"{result.nginx_cpu['push']:.2f} + {result.nginx_cpu['pull']:.2f} s",
                            file=sys.stderr,
                        )
                    beats = bench.heartbeats(row.heartbeats)
                    row.beats.append(beats)
                    print(
                        "  "
                        + ", ".join(
                            f"{p} heartbeat median {statistics.median(beats.figures[p]) * 1000:.2f} ms" for p in PATHS
                        ),
                        file=sys.stderr,
                    )
        finally:
            bench.stop()
    return rows


HEADER = [
    "| model | path | push MB/s | pull MB/s | nginx CPU s/GB push | nginx CPU s/GB pull "
    "| heartbeat ms median | heartbeat ms p95 | nginx CPU µs/heartbeat |",
    "|---|---|---:|---:|---:|---:|---:|---:|---:|",
]


def table(rows: list[ProxyRow], repeat: int) -> str:
    out = [*HEADER]
    for r in rows:
        model = f"{r.objects} x {r.size / 1024**2:g} MiB"
        m = {path: r.medians(path) for path in PATHS}
        for path in PATHS:
            x = m[path]
            out.append(
                f"| {model} | {path} | {x['push_mbs']:.0f} | {x['pull_mbs']:.0f} | {x['push_cpu_gb']:.2f} "
                f"| {x['pull_cpu_gb']:.2f} | {x['beat_ms']:.2f} | {x['beat_p95_ms']:.2f} "
                + (f"| {x['beat_cpu_us']:.0f} |" if path == "proxy" else "| |")
            )
        d, p = m["direct"], m["proxy"]
        out.append(
            f"| {model} | proxy / direct | {p['push_mbs'] / d['push_mbs']:.2f}x | {p['pull_mbs'] / d['pull_mbs']:.2f}x "
            f"| | | {p['beat_ms'] - d['beat_ms']:+.2f} | {p['beat_p95_ms'] - d['beat_p95_ms']:+.2f} | |"
        )
    out += [
        "",
        f"Median of {repeat} runs each, direct and proxy alternating, one nginx and one upstream for all. "
        f"Client: Flower {HTTP_ERA}'s Fleet HTTP (httpx, HTTP/1.1, one kept-alive connection pool, two objects at "
        "a time), push-object / pull-object of 5 MiB objects, every pulled byte checked. Proxy: Debian's nginx "
        "with the rendered nginx.conf (TLS both sides). Upstream: Flower's SuperLink app under uvicorn, TLS, "
        "object store in memory (bench/proxy_upstream.py). nginx CPU: master + workers, /proc/PID/stat, per GB "
        "(10^9 bytes) of bodies; heartbeats: send-node-heartbeat, direct and proxied taking turns, each path "
        "on its kept-alive connection, p95 over every run's; nginx CPU per proxied heartbeat.",
        "",
    ]
    return "\n".join(out)
