"""Register exactly the trusted SuperNode keys with the SuperLink: the node-registration
and node-revocation Jobs run this with the SuperLink image's Python (Flower 1.26+), on
every `pulumi up` that changes the key set, one phase each:

    python register_nodes.py CONNECTION CONFIG_TOML TRUSTED_KEYS [TRUSTED_KEYS ...] register|revoke

TRUSTED_KEYS: one file, or (a hub's thousands of keys) the shards of one set: the trusted keys
are the union of every file given.

`register` registers the trusted keys that are not registered and revokes nothing (before
the pools roll onto new keys); `revoke` unregisters the nodes whose key is not trusted and
registers nothing (after they rolled). Both phases in turn make the registered keys
exactly the trusted ones, and no SuperNode is refused in between.

It makes the same Control API calls as `flwr supernode list/register/unregister`,
through Flower's own CLI modules (its connection config, TLS and client), because the
CLI's JSON output leaves out the public keys that tell which node to revoke. Keys in
TRUSTED_KEYS (OpenSSH lines) that are not registered are registered (`register`);
registered nodes whose key is not listed are unregistered (`revoke`); the rest is left
alone, so a re-run changes nothing. Until the SuperLink answers (it may still be starting), calls are retried with
a bounded back-off; what still fails at the deadline fails the Job, and `pulumi up` with it.

Flower keeps a revoked node (status `unregistered`) with its public key, which stays
unique: it never registers that key again. A trusted key that was revoked before (stale)
is therefore reported, never retried, and never blocks a revocation: `register` registers
every other key and logs each stale one as STALE; `revoke` unregisters every untrusted node
first and then, if a trusted key is stale, exits EXIT_REFUSED (the Job's podFailurePolicy
fails the Job on it instead of retrying), so `pulumi up` fails naming the key after the
removed sites are gone: its SuperNode needs a new key pair, which the hub then trusts instead.

The keys files are split on "\n" alone (not str.splitlines(), which also splits on "\r",
U+2028 and other separators): a line is one key, as validation (flower/public_keys.py) made it.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

PREFIX = "node-registration:"
# Statuses of nodes that no longer hold a registration.
GONE = ("unregistered", "deleted")
# The trusted key set can never be registered as it is (federation/registration.py fails
# the Job on this exit code).
EXIT_REFUSED = 3
REGISTER, REVOKE = "register", "revoke"
PHASES = (REGISTER, REVOKE)


class Refused(Exception):
    """The SuperLink will not accept the trusted key set: retrying cannot help."""


def log(message: str) -> None:
    print(f"{PREFIX} {message}", flush=True)


def trusted_keys(*paths: Path) -> dict[bytes, str]:
    """{key bytes as Flower stores them: OpenSSH line} of every key listed in any of the files."""
    from cryptography.hazmat.primitives import serialization
    from flwr.supercore.primitives.asymmetric import public_key_to_bytes

    keys: dict[bytes, str] = {}
    # Bytes decoded as they are: read_text() would turn "\r" into a line break, and splitlines() splits on more.
    for line in (line for path in paths for line in path.read_bytes().decode().split("\n")):
        line = line.strip()
        if line and not line.startswith("#"):
            keys[public_key_to_bytes(serialization.load_ssh_public_key(line.encode()))] = line
    return keys


def label(line: str) -> str:
    """How the log names a key: its comment (`site/pool/slot`), else its type and tail."""
    fields = line.split()
    return " ".join(fields[2:]) if len(fields) > 2 else f"{fields[0]} ...{fields[-1][-12:]}"


def describe(err: BaseException) -> str:
    """One line about a failed call: a gRPC error's status and details, an HTTP error's
    status line and body (their first line alone says neither), else the exception."""
    code, details = getattr(err, "code", None), getattr(err, "details", None)
    if callable(code) and callable(details):
        text = f"{code()} {details()}"
    else:
        text = str(err)
        body = getattr(getattr(err, "response", None), "text", None)
        if isinstance(body, str) and body:
            text += f": {body}"
    return " ".join(f"{type(err).__name__}: {text}".split())[:400]


def plan_changes(
    nodes: list[tuple[int, str, bytes]], wanted: dict[bytes, str]
) -> tuple[list[int], list[bytes], dict[bytes, int]]:
    """(node ids to unregister, keys to register, {stale key: its revoked node id}) that make the
    registered keys exactly `wanted` as far as Flower allows, from the SuperLink's nodes as (node id,
    status, public key). A stale key (a wanted key of a revoked node) is never registered again by
    Flower: it is left out of the keys to register, and reported."""
    have = {key: node_id for node_id, status, key in nodes if status not in GONE}
    revoked = {key: node_id for node_id, status, key in nodes if status in GONE and key not in have}
    stale = {key: revoked[key] for key in wanted if key in revoked}
    drop = sorted(node_id for key, node_id in have.items() if key not in wanted)
    add = [key for key in wanted if key not in have and key not in stale]
    return drop, add, stale


def stale_message(stale: dict[bytes, int], wanted: dict[bytes, str]) -> str:
    ids = ", ".join(str(node_id) for node_id in sorted(stale.values()))
    return (
        f"trusted keys revoked earlier (nodes {ids}): {', '.join(sorted(label(wanted[key]) for key in stale))}. "
        "Flower keeps a revoked node's public key and never registers it again: give each of these SuperNodes a "
        "new key pair (in its stack: `pulumi up --replace` on its node key, or a new nodeAuthKeys value) and "
        "trust the new public key instead"
    )


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


def reconcile(connection_name: str, wanted: dict[bytes, str], phase: str) -> tuple[int, int, int]:
    from flwr.proto.control_pb2 import ListNodesRequest, RegisterNodeRequest, UnregisterNodeRequest

    client, closer = control_client(connection_name)
    try:
        listed = client.ListNodes(ListNodesRequest()).nodes_info
        drop, add, stale = plan_changes([(n.node_id, n.status, bytes(n.public_key)) for n in listed], wanted)
        drop, add = (drop, []) if phase == REVOKE else ([], add)
        for node_id in drop:
            client.UnregisterNode(request=UnregisterNodeRequest(node_id=node_id))
            log(f"revoked node {node_id} (its key is no longer trusted)")
        for key in add:
            node_id = client.RegisterNode(request=RegisterNodeRequest(public_key=key)).node_id
            log(f"registered {label(wanted[key])} as node {node_id}")
        if stale:
            # Reported in both phases; only `revoke`, the last, fails on it (main), once its revocations are done.
            log(f"STALE: {stale_message(stale, wanted)}")
            if phase == REVOKE:
                raise Refused(stale_message(stale, wanted))
        return len(add), len(drop), len(wanted) - len(add) - len(stale)
    finally:
        closer.close()


def main(argv: list[str]) -> int:
    connection_name, config, phase = argv[1], Path(argv[2]), argv[-1]
    keys_files = [Path(arg) for arg in argv[3:-1]]
    if phase not in PHASES or not keys_files:
        log(
            f"unknown phase {phase!r} or no TRUSTED_KEYS file: "
            f"CONNECTION CONFIG_TOML TRUSTED_KEYS... {'|'.join(PHASES)}"
        )
        return 2
    home = Path(os.environ.get("FLWR_HOME") or Path.home() / ".flwr")
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text(config.read_text())
    wanted = trusted_keys(*keys_files)
    deadline = time.monotonic() + float(os.environ.get("REGISTRATION_TIMEOUT_SECONDS", "300"))
    delay = 1.0
    while True:
        try:
            added, revoked, kept = reconcile(connection_name, wanted, phase)
        except Refused as err:
            log(f"REFUSED: {err}")
            return EXIT_REFUSED
        except Exception as err:  # noqa: BLE001 - any other failure is retried until the deadline
            reason = describe(err)
            if time.monotonic() + delay > deadline:
                log(f"FAILED: the SuperLink's Control API did not accept the registration: {reason}")
                return 1
            log(f"Control API call failed ({reason}); retrying in {delay:.0f}s")
            time.sleep(delay)
            delay = min(delay * 2, 15.0)
            continue
        log(f"done ({phase}): {len(wanted)} trusted keys; {added} registered, {revoked} revoked, {kept} unchanged")
        return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
