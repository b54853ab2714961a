"""The SuperNode side of bench/proxy_rows.py: Flower's Fleet client's HTTP as it moves a model, measured.

One `httpx.Client` (Flower's `ProtobufClient`: HTTP/1.1, connections kept alive and reused, TLS verified
against the federation's CA), `application/protobuf` bodies of Flower's own request types:

- push: the model's objects (one array chunk each, Flower's 5 MiB) as `POST /v1/fleet/push-object`, two at
  a time (FLWR_PRIVATE_MAX_CONCURRENT_OBJ_PUSHES);
- pull: the same objects back as `POST /v1/fleet/pull-object`, two at a time (…_OBJ_PULLS), each checked
  byte for byte against what was pushed (a proxy that altered or cut a body fails the row);
- heartbeats: N `POST /v1/fleet/send-node-heartbeat` each way, direct and through the proxy taking turns,
  each on its kept-alive connection, each timed (a SuperNode's smallest, most frequent request).

Each request is signed as Flower's `NodeAuthHttpInterceptor` signs it (the node's public key, a fresh
timestamp and its signature in headers), with the node bench/proxy_upstream.py created (IDENTITY).

    python bench/proxy_client.py CA_FILE SERVER_NAME IDENTITY transfer URL OBJECTS OBJECT_BYTES
    python bench/proxy_client.py CA_FILE SERVER_NAME IDENTITY heartbeats DIRECT_URL PROXY_URL COUNT

(the Flower venv's python). Before each phase it prints the phase's name (push, pull / heartbeat, then end)
and waits for a line on stdin: the bench reads nginx's CPU time there. Then one JSON line: push and pull
seconds and bytes / each path's heartbeat seconds. A warm-up heartbeat first opens each connection (its TLS
handshake is in no figure).
"""

from __future__ import annotations

import hashlib
import json
import os
import ssl
import sys
import time
from base64 import b64encode
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
from flwr.proto.heartbeat_pb2 import SendNodeHeartbeatRequest
from flwr.proto.message_pb2 import PullObjectRequest, PullObjectResponse, PushObjectRequest, PushObjectResponse
from flwr.proto.node_pb2 import Node
from flwr.supercore.date import now
from flwr.supercore.primitives.asymmetric import bytes_to_private_key, public_key_to_bytes, sign_message

CONCURRENT = 2  # Flower 1.42's FLWR_PRIVATE_MAX_CONCURRENT_OBJ_PUSHES and ..._PULLS
HEADERS = {"content-type": "application/protobuf"}


class Fleet:
    def __init__(self, url: str, ca_file: str, server_name: str, identity: dict[str, Any]):
        self.url = url.rstrip("/")
        self.client = httpx.Client(verify=ssl.create_default_context(cafile=ca_file), timeout=30.0)
        # The name a site dials (the certificate's), whatever address the bench listens on.
        self.extensions = {"sni_hostname": server_name}
        self.headers = {**HEADERS, "host": server_name}
        self.key = bytes_to_private_key(identity["private_key"].encode())
        self.public = b64encode(public_key_to_bytes(self.key.public_key())).decode("ascii")

    def signed(self) -> dict[str, str]:
        """NodeAuthHttpInterceptor's headers: the public key, a timestamp and its signature."""
        timestamp = now().isoformat()
        signature = b64encode(sign_message(self.key, timestamp.encode("ascii"))).decode("ascii")
        return {
            **self.headers,
            "flwr-public-key": self.public,
            "flwr-timestamp": timestamp,
            "flwr-signature": signature,
        }

    def call(self, route: str, body: bytes) -> bytes:
        response = self.client.post(
            f"{self.url}/v1/fleet/{route}", content=body, headers=self.signed(), extensions=self.extensions
        )
        if response.status_code != 200:
            raise SystemExit(f"{route}: HTTP {response.status_code}: {response.text[:200]}")
        return response.content


def check(pulled: bytes, object_id: str) -> None:
    """SystemExit unless a pull-object answer holds the object pushed under `object_id` (its SHA-256)."""
    answer = PullObjectResponse.FromString(pulled)
    if not answer.object_found or hashlib.sha256(answer.object_content).hexdigest() != object_id:
        raise SystemExit(f"pull-object {object_id[:12]}: not the bytes pushed ({len(answer.object_content)} bytes)")


def phase(name: str) -> None:
    """Tell the bench a phase starts (it reads the proxy's CPU then) and wait until it has."""
    print(name, flush=True)
    sys.stdin.readline()


def heartbeat(node: Node) -> bytes:
    return SendNodeHeartbeatRequest(node=node, heartbeat_interval=30.0).SerializeToString()


def transfer(fleet: Fleet, node: Node, objects: int, size: int) -> dict[str, Any]:
    """Push `objects` objects of `size` random bytes, then pull each back and check it."""
    fleet.call("send-node-heartbeat", heartbeat(node))  # the warm-up: connection and handshake
    contents = [os.urandom(size) for _ in range(objects)]
    ids = [hashlib.sha256(c).hexdigest() for c in contents]
    pushes = [
        PushObjectRequest(node=node, run_id=1, object_id=i, object_content=c).SerializeToString()
        for i, c in zip(ids, contents, strict=True)
    ]
    pulls = [PullObjectRequest(node=node, run_id=1, object_id=i).SerializeToString() for i in ids]
    with ThreadPoolExecutor(CONCURRENT) as pool:
        phase("push")
        start = time.perf_counter()
        for answer in pool.map(lambda body: fleet.call("push-object", body), pushes):
            if not PushObjectResponse.FromString(answer).stored:
                raise SystemExit("push-object: not stored")
        push = time.perf_counter() - start
        phase("pull")
        start = time.perf_counter()
        list(pool.map(lambda k: check(fleet.call("pull-object", pulls[k]), ids[k]), range(objects)))
        pull = time.perf_counter() - start
    phase("end")
    return {"push_s": push, "pull_s": pull, "push_bytes": sum(map(len, pushes)), "pull_bytes": objects * size}


def heartbeats(direct: Fleet, proxy: Fleet, node: Node, count: int) -> dict[str, list[float]]:
    """`count` heartbeats each way, direct and through the proxy taking turns (so a burst of other load on
    the machine falls on both alike), each on its kept-alive connection, each timed."""
    body = heartbeat(node)
    times: dict[str, list[float]] = {"direct": [], "proxy": []}
    for fleet in (direct, proxy):
        fleet.call("send-node-heartbeat", body)  # the warm-up
    phase("heartbeat")
    for _ in range(count):
        for path, fleet in (("direct", direct), ("proxy", proxy)):
            start = time.perf_counter()
            fleet.call("send-node-heartbeat", body)
            times[path].append(time.perf_counter() - start)
    phase("end")
    return times


def main(argv: list[str]) -> dict[str, Any]:
    ca_file, server_name, identity_file, mode, *rest = argv
    identity = json.loads(Path(identity_file).read_text())
    node = Node(node_id=identity["node_id"])
    if mode == "transfer":
        url, objects, size = rest
        return transfer(Fleet(url, ca_file, server_name, identity), node, int(objects), int(size))
    direct, proxy, count = rest
    fleets = [Fleet(url, ca_file, server_name, identity) for url in (direct, proxy)]
    return heartbeats(*fleets, node, int(count))


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1:])))
