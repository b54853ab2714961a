"""The stand-in SuperLink of bench/proxy_rows.py: Flower 1.42.0's own SuperLink app (`create_app`: its
middlewares, the protobuf translation that reads a whole body with `await request.body()`, the Fleet routes)
served by uvicorn with TLS exactly as `flower-superlink` serves it (`uvicorn.run`, one worker, HTTP/1.1, access
log on), with only the object store replaced by a dict. Every Fleet request is node-authenticated by Flower's
middleware as on a real SuperLink: one node is created in the app's own (in-memory) LinkState, and its private
key and node id written to IDENTITY for the client, which signs each request as a SuperNode does.

Why not a whole SuperLink: a 100 MB model crosses the Fleet API as objects of one array chunk each (5 MiB,
FLWR_PRIVATE_MAX_ARRAY_CHUNK_SIZE), and a real SuperLink stores an object only for a node it registered, in a
run it started, under a message whose object tree names it; a bench of the proxy's bytes would measure
SQLite and a ServerApp too. The body still takes Flower's path: every byte is read and parsed as a
`PushObjectRequest` by Flower's code, and every pull is answered with a serialized `PullObjectResponse`.

    python bench/proxy_upstream.py CERT KEY IDENTITY   (the Flower venv's python; IDENTITY also gets the port)
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import uvicorn
from flwr.proto.message_pb2 import PullObjectRequest, PullObjectResponse, PushObjectRequest, PushObjectResponse
from flwr.supercore.primitives.asymmetric import generate_key_pairs, private_key_to_bytes, public_key_to_bytes
from flwr.superlink.main import create_app
from flwr.superlink.servicer.fleet import fleet_handlers

STORE: dict[str, bytes] = {}


def push_object(request: PushObjectRequest, state: object) -> PushObjectResponse:
    STORE[request.object_id] = request.object_content
    return PushObjectResponse(stored=True)


def pull_object(request: PullObjectRequest, state: object) -> PullObjectResponse:
    content = STORE.get(request.object_id)
    found = content is not None
    return PullObjectResponse(object_found=found, object_available=found, object_content=content or b"")


class Server(uvicorn.Server):
    """uvicorn's server, which writes IDENTITY once it listens: the node, its key and the port it bound."""

    def __init__(self, config: uvicorn.Config, identity: dict[str, object], path: str):
        super().__init__(config)
        self.identity, self.path = identity, path

    async def startup(self, sockets: object = None) -> None:
        await super().startup(sockets=sockets)  # type: ignore[arg-type]
        port = self.servers[0].sockets[0].getsockname()[1]
        written = Path(f"{self.path}.part")
        written.write_text(json.dumps({**self.identity, "port": port}))
        written.replace(self.path)  # whole or absent: the bench waits for this file


def main(cert: str, key: str, identity: str) -> None:
    # The routes call these through the module (`fleet_handlers.push_object(...)`), so replacing them here
    # replaces only the LinkState's part of each request.
    fleet_handlers.push_object = push_object  # type: ignore[assignment]
    fleet_handlers.pull_object = pull_object  # type: ignore[assignment]
    app = create_app()
    private, public = generate_key_pairs()
    node_id = app.state.linkstate_factory.state().create_node("bench", "bench", public_key_to_bytes(public), 30.0)
    node = {"node_id": node_id, "private_key": private_key_to_bytes(private).decode()}
    # `uvicorn.run`'s arguments as flower-superlink passes them, on a free port (0) that uvicorn binds itself, as
    # it binds the SuperLink's (a socket handed in by file descriptor, uvicorn reopens as AF_UNIX: not the same
    # socket setup).
    config = uvicorn.Config(
        app=app,
        host="127.0.0.1",
        port=0,
        reload=False,
        access_log=True,
        log_level="info",
        ssl_keyfile=key,
        ssl_certfile=cert,
        workers=1,
    )
    Server(config, node, identity).run()


if __name__ == "__main__":
    main(*sys.argv[1:4])
