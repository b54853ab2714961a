"""A push a SuperNode should never send: a reply whose message source is another node than the one the
request authenticates as. Flower 1.43 (from the nightly flwr-nightly==1.43.0.dev20261026,
flwr/superlink/servicer/fleet/fleet_handlers.py `push_messages`) refuses it with HTTP 403 and Flower's
error 2011 (FLEET_MESSAGE_SOURCE_NODE_ID_MISMATCH) before it looks at the run; 1.42 has no such check.

The request is made as the site's SuperNode makes its own (flwr/supernode/fleet_http_connection.py): Flower's
FleetHttpClient with its NodeAuthHttpInterceptor (the node's private key signs a timestamp, the public key goes
along, and the SuperLink maps the key to the node id the request names: 401 when they disagree), from the site's
own Flower venv, from a client network namespace in the site's cluster, to the hub's public address, trusting the
hub's CA. Only the message's metadata is crafted: its `src_node_id`, and a run id of a finished run (so 1.42,
which has no source check, refuses the reply for the run's status, 2007, and stores nothing; the nightly checks
the source first and no longer checks the run's status). Each answer is returned as (HTTP status, Flower's error
code or None, body): the scenario (site_skew.py) asserts on them."""

from __future__ import annotations

import json
from pathlib import Path

from tests.e2e.harness import Cluster
from tests.e2e.site_stacks import SITE_NAMESPACE
from tests.support.flower import venv_python

# Flower's error codes (flwr/supercore/error/base.py, ApiErrorCode).
SOURCE_MISMATCH = 2011  # FLEET_MESSAGE_SOURCE_NODE_ID_MISMATCH, new in 1.43
RUN_STATUS_NOT_ALLOWED = 2007  # FLEET_RUN_STATUS_NOT_ALLOWED: a reply for a run that is not running

PUSH = r"""
import json, sys, time
from pathlib import Path

import httpx
from cryptography.hazmat.primitives.serialization import load_ssh_private_key

from flwr.common.serde import message_from_proto
from flwr.proto.error_pb2 import Error
from flwr.proto.fleet_pb2 import PushMessagesRequest
from flwr.proto.message_pb2 import Message, Metadata, ObjectTree
from flwr.proto.node_pb2 import Node
from flwr.supernode.fleet_http_client import FleetHttpClient
from flwr.supernode.node_auth_http_interceptor import NodeAuthHttpInterceptor

address, ca, key_file, node_id, run_id, sources = sys.argv[1:7]
key = load_ssh_private_key(Path(key_file).read_bytes(), password=None)
answers = {}
with FleetHttpClient.from_server_address(
    address, False, ca, interceptors=[NodeAuthHttpInterceptor(key, key.public_key())]
) as client:
    for src in json.loads(sources):
        meta = Metadata(run_id=int(run_id), message_id="", src_node_id=int(src), dst_node_id=0,
                        reply_to_message_id="ab" * 32, group_id="", created_at=time.time(), ttl=3600,
                        message_type="train")
        reply = Message(metadata=meta, error=Error(code=0, reason="forged"))
        meta.message_id = message_from_proto(reply).object_id  # a well-formed message: its id is its content's
        reply = Message(metadata=meta, error=Error(code=0, reason="forged"))
        request = PushMessagesRequest(node=Node(node_id=int(node_id)), messages_list=[reply],
                                      message_object_trees=[ObjectTree(object_id=meta.message_id)])
        try:
            client.PushMessages(request)
            answers[src] = [200, ""]
        except httpx.HTTPStatusError as exc:
            answers[src] = [exc.response.status_code, exc.response.text]
print(json.dumps(answers))
"""


def push_as(
    cluster: Cluster,
    version: str,
    address: str,
    ca: str,
    private_key: str,
    node_id: str,
    run_id: str,
    sources: list[str],
) -> dict[str, tuple[int, object, str]]:
    """{message source: (HTTP status, Flower's error code or None, body)} of one push per source, signed by the node
    whose `private_key` (OpenSSH, as the site's node-keys Secret holds it) registered as `node_id`."""
    work = cluster.workdir / "forged-push"
    work.mkdir(exist_ok=True)
    (work / "ca.crt").write_text(ca)
    (work / "node.key").write_text(private_key)
    (work / "node.key").chmod(0o600)
    netns = next((n for n, _ in cluster.clients if n.endswith("-forger")), None) or cluster.add_client(
        "forger", SITE_NAMESPACE
    )
    args = [address, str(work / "ca.crt"), str(work / "node.key"), node_id, run_id, json.dumps(sources)]
    res = cluster.exec_in(
        netns,
        [str(venv_python(version)), "-c", PUSH, *args],
        env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "HOME": str(work)},
        mounts=[],
        cwd=str(Path("/")),
        timeout=60,
        name="forger",
    )
    assert res.returncode == 0, f"the crafted push did not run (exit {res.returncode}):\n{res.stderr[-3000:]}"
    out: dict[str, tuple[int, object, str]] = {}
    for src, (status, body) in json.loads(res.stdout.strip().splitlines()[-1]).items():
        try:
            code = json.loads(body).get("code") if body else None
        except (ValueError, AttributeError):
            code = None
        out[src] = (status, code, body[:300])
    return out
