"""Register exactly the trusted SuperNode keys with the SuperLink: the node-registration
Job runs this with the SuperLink image's Python (Flower 1.26+), on every `pulumi up` that
changes the key set.

    python register_nodes.py CONNECTION CONFIG_TOML TRUSTED_KEYS

It makes the same Control API calls as `flwr supernode list/register/unregister`,
through Flower's own CLI modules (its connection config, TLS and client), because the
CLI's JSON output leaves out the public keys that tell which node to revoke. Keys in
TRUSTED_KEYS (OpenSSH lines) that are not registered are registered; registered nodes
whose key is not listed are unregistered; the rest is left alone, so a re-run changes
nothing. Until the SuperLink answers (it may still be starting, or restarting: Flower
1.26 can fail or crash on its first calls while it creates its state), calls are retried
with a bounded back-off; what still fails at the deadline fails the Job, and `pulumi up`
with it. A listed key whose node was unregistered fails the Job at once: Flower keeps an
unregistered node's key and never registers it again, so that SuperNode needs a new key.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

PREFIX = "node-registration:"
# Statuses of nodes that no longer hold a registration.
GONE = ("unregistered", "deleted")


def log(message: str) -> None:
    print(f"{PREFIX} {message}", flush=True)


def trusted_keys(path: Path) -> dict[bytes, str]:
    """{key bytes as Flower stores them: OpenSSH line} of every listed key."""
    from cryptography.hazmat.primitives import serialization
    from flwr.supercore.primitives.asymmetric import public_key_to_bytes

    keys: dict[bytes, str] = {}
    for line in path.read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            keys[public_key_to_bytes(serialization.load_ssh_public_key(line.encode()))] = line
    return keys


def control_client(connection_name: str):  # type: ignore[no-untyped-def]
    """Flower's Control API client for the connection, as its CLI builds it: HTTP from
    Flower 1.40, gRPC before. Returns (client, closer)."""
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


def reconcile(connection_name: str, wanted: dict[bytes, str]) -> tuple[int, int, int, list[str]]:
    """(registered, revoked, unchanged, refused): refused are the listed keys of
    unregistered nodes, which Flower will not register again."""
    from flwr.proto.control_pb2 import ListNodesRequest, RegisterNodeRequest, UnregisterNodeRequest

    client, closer = control_client(connection_name)
    try:
        nodes = client.ListNodes(ListNodesRequest()).nodes_info
        have = {bytes(n.public_key): n.node_id for n in nodes if n.status not in GONE}
        gone = {bytes(n.public_key): n.node_id for n in nodes if n.status in GONE}
        revoked = 0
        for key, node_id in sorted(have.items(), key=lambda kv: kv[1]):
            if key not in wanted:
                client.UnregisterNode(request=UnregisterNodeRequest(node_id=node_id))
                log(f"revoked node {node_id} (its key is no longer trusted)")
                revoked += 1
        added, refused = 0, []  # refused: "<key comment> was node <id>, ..."
        for key, line in wanted.items():
            if key in have:
                continue
            if key in gone:
                refused.append(f"{line.split()[-1]} was node {gone[key]}, which is unregistered")
            else:
                node_id = client.RegisterNode(request=RegisterNodeRequest(public_key=key)).node_id
                log(f"registered {line.split()[-1]} as node {node_id}")
                added += 1
        return added, revoked, len(wanted) - added - len(refused), refused
    finally:
        closer.close()


def reason(err: Exception) -> str:
    """One line on why a call failed: a gRPC error's status and details (its text is a
    multi-line dump whose first line says nothing), else the exception's text."""
    code, details = getattr(err, "code", None), getattr(err, "details", None)
    text = f"{code().name}: {details()}" if callable(code) and callable(details) else str(err)
    return f"{type(err).__name__}: {' '.join(text.split())}"[:300]


def main(argv: list[str]) -> int:
    connection_name, config, keys_file = argv[1], Path(argv[2]), Path(argv[3])
    home = Path(os.environ.get("FLWR_HOME") or Path.home() / ".flwr")
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text(config.read_text())
    wanted = trusted_keys(keys_file)
    deadline = time.monotonic() + float(os.environ.get("REGISTRATION_TIMEOUT_SECONDS", "300"))
    delay = 1.0
    while True:
        try:
            added, revoked, kept, refused = reconcile(connection_name, wanted)
        except Exception as err:  # noqa: BLE001 - any failure is retried until the deadline
            why = reason(err)
            if time.monotonic() + delay > deadline:
                log(f"FAILED: the SuperLink's Control API did not accept the registration: {why}")
                return 1
            log(f"Control API call failed ({why}); retrying in {delay:.0f}s")
            time.sleep(delay)
            delay = min(delay * 2, 15.0)
            continue
        for node in refused:
            log(f"FAILED: trusted key {node}: Flower never registers a key twice, give that SuperNode a new key")
        if refused:
            return 1
        log(f"done: {len(wanted)} trusted keys; {added} registered, {revoked} revoked, {kept} unchanged")
        return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
