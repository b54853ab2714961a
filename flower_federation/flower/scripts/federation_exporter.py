"""The federation exporter: what the SuperLink knows, as Prometheus metrics (docs/observability.md names each
one). It runs as the `federation-exporter` container of the SuperLink's pod, with the SuperLink image's Python
and Flower (no image of ours; it imports nothing of ours), so its client always speaks the SuperLink's Control
API version:

    python federation_exporter.py --config CONFIG_TOML --key-labels FILE --port PORT --interval SECONDS
        [--state STATE_DB] [--backups DIR] [--cert PEM] [--ca PEM]

Every `--interval` seconds it asks the Control API over loopback TLS (`ListNodes`, `ListRuns`: the calls
`flwr supernode list` and `flwr ls` make, through Flower's own CLI modules, never the database, whose schema
changes between versions), stats the state file, its volume and the state-guard backups, reads the mounted
certificates' notAfter, and keeps the exposition it built; `GET /metrics` serves the last one (a scrape never
waits for the SuperLink), `GET /healthz` answers 200 while polls keep being made.

A failed poll serves `up 0` and no node or run series: what the SuperLink knows is then unknown, and a stale count
served as current would be a claim nobody made. `last_successful_poll_timestamp_seconds` says since when; the alerts
keep what was firing firing while it is unknown (builders/monitoring_rules.py), never resolve for want of data.

A node is named by its public key through KEY_LABELS (re-read each poll: the ConfigMap is updated in place when
the trusted keys change), one `site pool OpenSSH-key-line` per line. A key it does not list is counted under
site="unknown", pool="unknown": never dropped, so a registered stranger shows. Label sets are bounded: site x
pool x status for nodes, a status for runs, no per-run or per-node label.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import io
import math
import os
import shutil
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Optional

PREFIX = "flower_federation_"
UNKNOWN = "unknown"
NODE_STATUSES = ("online", "offline", "registered", "unregistered")
# A run's status as `flwr ls` shows it: the sub-status of a finished run, else the status.
RUN_STATUSES = ("pending", "starting", "running", "completed", "failed", "stopped")
# Finished runs' durations (seconds): a minute to a week.
DURATION_BUCKETS = (60.0, 300.0, 900.0, 3600.0, 4 * 3600.0, 12 * 3600.0, 86400.0, 7 * 86400.0)
CONNECTION = "federation"
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

HELP = {
    "up": ("gauge", "1 if the last poll of the SuperLink's Control API succeeded, else 0."),
    "control_api_latency_seconds": ("gauge", "How long the last poll's Control API calls took."),
    "last_poll_timestamp_seconds": ("gauge", "When the last poll ended (Unix time)."),
    "last_successful_poll_timestamp_seconds": (
        "gauge",
        "When the last poll whose Control API calls succeeded ended (Unix time); absent until one has.",
    ),
    "poll_errors_total": ("counter", "Polls whose Control API calls failed."),
    "supernodes": ("gauge", "SuperNodes the SuperLink knows, by the site and pool of their key and Flower status."),
    "site_last_online_age_seconds": (
        "gauge",
        "Seconds since a SuperNode of the site was last online (0 while one is); absent if none ever was.",
    ),
    "runs": ("gauge", "Runs in the SuperLink's state by status (a finished run by its sub-status)."),
    "run_duration_seconds": ("histogram", "Durations of finished runs (running to finished)."),
    "oldest_running_run_age_seconds": ("gauge", "Age of the longest-running run since it started (0: none)."),
    "state_file_bytes": ("gauge", "Size of the SuperLink's state file."),
    "state_volume_free_bytes": ("gauge", "Free bytes of the state volume."),
    "state_volume_size_bytes": ("gauge", "Size of the state volume."),
    "state_backups": ("gauge", "state-guard backups on the state volume."),
    "state_backup_newest_age_seconds": ("gauge", "Age of the newest state-guard backup (absent: none)."),
    "certificate_not_after_timestamp_seconds": (
        "gauge",
        "notAfter of the server certificate (kind=server) and each trusted CA (kind=ca) (Unix time).",
    ),
}


def escape(value: str) -> str:
    """A label value in the text format: backslash, double quote and newline escaped."""
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def number(value: float) -> str:
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(float(value)) if not float(value).is_integer() else str(int(value))


def exposition(samples: dict[str, list[tuple[dict[str, str], float]]]) -> str:
    """Prometheus text format 0.0.4: each family's HELP and TYPE once, then its samples in the order given.
    `samples` is keyed by family name without PREFIX; a histogram's samples carry their own suffixes."""
    lines: list[str] = []
    for family, (kind, text) in HELP.items():
        if family not in samples:
            continue
        lines += [f"# HELP {PREFIX}{family} {text}", f"# TYPE {PREFIX}{family} {kind}"]
        for labels, value in samples[family]:
            name = labels.pop("__name__", f"{PREFIX}{family}")
            body = ",".join(f'{k}="{escape(v)}"' for k, v in labels.items())
            lines.append(f"{name}{{{body}}} {number(value)}" if body else f"{name} {number(value)}")
    return "\n".join(lines) + "\n"


def read_key_labels(path: Optional[Path]) -> dict[str, tuple[str, str]]:
    """{key material (the OpenSSH line's second field): (site, pool)} from `site pool key-line` lines."""
    out: dict[str, tuple[str, str]] = {}
    if path is None or not path.exists():
        return out
    for line in path.read_text().split("\n"):
        fields = line.split()
        if len(fields) >= 4 and not line.startswith("#"):
            out[fields[3]] = (fields[0], fields[1])
    return out


def key_material(public_key: bytes) -> str:
    """The OpenSSH base64 material of a key as Flower stores it (PEM SubjectPublicKeyInfo)."""
    from cryptography.hazmat.primitives import serialization

    key = serialization.load_pem_public_key(public_key)
    return key.public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH).decode().split()[1]


def seconds(iso: str) -> Optional[float]:
    """A Flower timestamp (ISO 8601, UTC) as Unix time; None when unset."""
    if not iso:
        return None
    parsed = datetime.datetime.fromisoformat(iso)
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=datetime.timezone.utc)  # noqa: UP017 - Flower images may run Python 3.10
    return parsed.timestamp()


def node_samples(
    nodes: list[dict[str, Any]], labels: dict[str, tuple[str, str]], now: float
) -> dict[str, list[tuple[dict[str, str], float]]]:
    """`supernodes` (every known site and pool x every status, zeros included, so "no online node" is a 0, not a
    missing series) and `site_last_online_age_seconds`, from nodes as {key, status, last_activated_at,
    last_deactivated_at} (material, Flower's status, Unix times or None)."""
    counts: dict[tuple[str, str], dict[str, int]] = {
        place: dict.fromkeys(NODE_STATUSES, 0) for place in sorted(set(labels.values()))
    }
    last_online: dict[str, float] = {}
    for node in nodes:
        site, pool = labels.get(node["key"], (UNKNOWN, UNKNOWN))
        by_status = counts.setdefault((site, pool), dict.fromkeys(NODE_STATUSES, 0))
        by_status[node["status"]] = by_status.get(node["status"], 0) + 1
        if node["status"] == "online":
            last_online[site] = now
        elif node["last_deactivated_at"] is not None and node["last_activated_at"] is not None:
            last_online[site] = max(last_online.get(site, 0.0), node["last_deactivated_at"])
    supernodes = [
        ({"site": site, "pool": pool, "status": status}, float(n))
        for (site, pool), by_status in sorted(counts.items())
        for status, n in by_status.items()
    ]
    ages = [({"site": site}, max(0.0, now - when)) for site, when in sorted(last_online.items())]
    return {"supernodes": supernodes, "site_last_online_age_seconds": ages}


def run_samples(runs: list[dict[str, Any]], now: float) -> dict[str, list[tuple[dict[str, str], float]]]:
    """`runs` by status, the finished runs' `run_duration_seconds` histogram and the oldest running run's age,
    from runs as {status, sub_status, running_at, finished_at} (Unix times or None)."""
    by_status = dict.fromkeys(RUN_STATUSES, 0)
    durations: list[float] = []
    oldest = 0.0
    for run in runs:
        status = run["sub_status"] if run["status"] == "finished" else run["status"]
        by_status[status] = by_status.get(status, 0) + 1
        if run["status"] == "finished" and run["running_at"] is not None and run["finished_at"] is not None:
            durations.append(max(0.0, run["finished_at"] - run["running_at"]))
        elif run["status"] == "running" and run["running_at"] is not None:
            oldest = max(oldest, now - run["running_at"])
    name = f"{PREFIX}run_duration_seconds"
    histogram = [
        ({"__name__": f"{name}_bucket", "le": number(le)}, float(sum(d <= le for d in durations)))
        for le in (*DURATION_BUCKETS, math.inf)
    ]
    histogram += [({"__name__": f"{name}_sum"}, sum(durations)), ({"__name__": f"{name}_count"}, len(durations))]
    return {
        "runs": [({"status": status}, float(n)) for status, n in by_status.items()],
        "run_duration_seconds": histogram,
        "oldest_running_run_age_seconds": [({}, oldest)],
    }


def file_samples(
    state: Optional[Path], backups: Optional[Path], now: float
) -> dict[str, list[tuple[dict[str, str], float]]]:
    out: dict[str, list[tuple[dict[str, str], float]]] = {}
    if state is not None and state.parent.exists():
        if state.exists():
            out["state_file_bytes"] = [({}, float(state.stat().st_size))]
        usage = shutil.disk_usage(state.parent)
        out["state_volume_free_bytes"] = [({}, float(usage.free))]
        out["state_volume_size_bytes"] = [({}, float(usage.total))]
    if backups is not None:
        # Whole copies only: state-guard writes `*.db.tmp` and renames it when complete.
        copies = sorted(backups.glob("*.db")) if backups.exists() else []
        out["state_backups"] = [({}, float(len(copies)))]
        if copies:
            newest = max(p.stat().st_mtime for p in copies)
            out["state_backup_newest_age_seconds"] = [({}, max(0.0, now - newest))]
    return out


def certificate_samples(cert: Optional[Path], ca: Optional[Path]) -> dict[str, list[tuple[dict[str, str], float]]]:
    """notAfter of every certificate in the server's file and the CA bundle, each by kind and subject."""
    from cryptography import x509

    rows: list[tuple[dict[str, str], float]] = []
    for kind, path in (("server", cert), ("ca", ca)):
        if path is None or not path.exists():
            continue
        for c in x509.load_pem_x509_certificates(path.read_bytes()):
            rows.append(({"kind": kind, "subject": c.subject.rfc4514_string()}, c.not_valid_after_utc.timestamp()))
    return {"certificate_not_after_timestamp_seconds": rows} if rows else {}


def control_client(connection_name: str):  # type: ignore[no-untyped-def]
    """Flower's Control API client for the connection, as its CLI builds it (register_nodes.py does the same):
    HTTP from Flower 1.40, gRPC before. Returns (client, closer)."""
    from flwr.cli.flower_config import read_superlink_connection

    connection = read_superlink_connection(connection_name)
    try:
        from flwr.cli.utils import init_http_client_from_connection
    except ImportError:
        from flwr.cli.utils import init_channel_from_connection
        from flwr.proto.control_pb2_grpc import ControlStub

        channel = init_channel_from_connection(connection)
        return ControlStub(channel), channel
    client = init_http_client_from_connection(connection)
    return client, client


def ask_superlink() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(nodes, runs) as the Control API lists them, in the plain shapes `node_samples`/`run_samples` take."""
    from flwr.proto.control_pb2 import ListNodesRequest, ListRunsRequest

    # Flower's CLI prints which connection it uses on every call: a line per poll in the container's log, dropped.
    with contextlib.redirect_stdout(io.StringIO()):
        client, closer = control_client(CONNECTION)
    try:
        listed = client.ListNodes(ListNodesRequest()).nodes_info
        run_dict = client.ListRuns(ListRunsRequest()).run_dict
    finally:
        closer.close()
    nodes = [
        {
            "key": key_material(bytes(n.public_key)),
            "status": n.status,
            "last_activated_at": seconds(n.last_activated_at),
            "last_deactivated_at": seconds(n.last_deactivated_at),
        }
        for n in listed
    ]
    runs = [
        {
            "status": r.status.status,
            "sub_status": r.status.sub_status,
            "running_at": seconds(r.running_at),
            "finished_at": seconds(r.finished_at),
        }
        for r in run_dict.values()
    ]
    return nodes, runs


class Exporter:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.lock = threading.Lock()
        self.text = exposition({"up": [({}, 0.0)]})
        self.errors = 0
        self.last_poll = 0.0
        self.last_success: Optional[float] = None

    def poll(self) -> None:
        a = self.args
        samples: dict[str, list[tuple[dict[str, str], float]]] = {}
        started = time.monotonic()
        try:
            nodes, runs = ask_superlink()
        except Exception as err:  # noqa: BLE001 - any failure is `up 0`, reported, and polled again
            self.errors += 1
            print(f"federation-exporter: Control API poll failed: {type(err).__name__}: {err}"[:400], flush=True)
            samples["up"] = [({}, 0.0)]
        else:
            now = time.time()
            self.last_success = float(int(now))
            samples["up"] = [({}, 1.0)]
            samples["control_api_latency_seconds"] = [({}, round(time.monotonic() - started, 6))]
            samples.update(node_samples(nodes, read_key_labels(a.key_labels), now))
            samples.update(run_samples(runs, now))
        now = time.time()
        samples["last_poll_timestamp_seconds"] = [({}, float(int(now)))]
        if self.last_success is not None:
            samples["last_successful_poll_timestamp_seconds"] = [({}, self.last_success)]
        samples["poll_errors_total"] = [({}, float(self.errors))]
        samples.update(file_samples(a.state, a.backups, now))
        samples.update(certificate_samples(a.cert, a.ca))
        text = exposition(samples)
        with self.lock:
            self.text, self.last_poll = text, time.monotonic()

    def healthy(self) -> bool:
        """Polls keep coming (a poll hung past three intervals fails the liveness probe)."""
        with self.lock:
            return time.monotonic() - self.last_poll < 3 * self.args.interval + 30

    def loop(self) -> None:
        while True:
            self.poll()
            time.sleep(self.args.interval)


def handler(exporter: Exporter) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            if self.path == "/metrics":
                with exporter.lock:
                    body, status = exporter.text.encode(), 200
            elif self.path == "/healthz":
                body, status = (b"ok\n", 200) if exporter.healthy() else (b"polls stalled\n", 503)
            else:
                body, status = b"not found\n", 404
            # A scraper or probe that hangs up before the answer is written (its timeout, a restart) is routine:
            # nothing to report, and http.server would print a traceback for every one.
            try:
                self.send_response(status)
                self.send_header("Content-Type", CONTENT_TYPE)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
            except (BrokenPipeError, ConnectionResetError):
                self.close_connection = True

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - quiet: a scrape a minute is noise
            pass

    return Handler


def parse(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="federation_exporter.py")
    p.add_argument("--config", type=Path, required=True, help="the flwr connection config (TOML)")
    p.add_argument("--key-labels", type=Path)
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--bind", default="0.0.0.0")
    p.add_argument("--interval", type=float, default=30.0)
    p.add_argument("--state", type=Path)
    p.add_argument("--backups", type=Path)
    p.add_argument("--cert", type=Path)
    p.add_argument("--ca", type=Path)
    return p.parse_args(argv)


def main(argv: list[str]) -> int:
    args = parse(argv)
    home = Path(os.environ.get("FLWR_HOME") or Path.home() / ".flwr")
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text(args.config.read_text())
    exporter = Exporter(args)
    server = ThreadingHTTPServer((args.bind, args.port), handler(exporter))
    # The port first (so the bound port is known at once), then polls in the background.
    print(f"federation-exporter: serving on {args.bind}:{server.server_address[1]}", flush=True)
    threading.Thread(target=exporter.loop, daemon=True).start()
    server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
