"""The Fleet-only proxy's bounds against abuse (`superlink.fleetProxy`, docs/exposure.md): no setting may switch one
off. nginx reads `client_max_body_size 0` as "no limit", and the SuperLink reads a whole body before it checks the
node's signature, so `maxRequestBodySize: 0` would let anyone who reaches the proxy make the hub hold any amount: it
is refused, not an opt-in, since a large size (up to 999999m) already says "bigger" explicitly. The other bounds
cannot be switched off by their value: the model's minimums refuse a 0 upload slot count and a 0 header or idle
timeout (which nginx would read as none, or as refusing every client); `keepaliveTimeoutSeconds: 0` closes each
connection after its request, the strictest keep-alive bound, not its absence."""

from __future__ import annotations

from collections.abc import Iterator

from flower_federation.config.errors import Problem, problem
from flower_federation.rules.raw import Raw, get

NO_LIMIT = "0"  # nginx's `client_max_body_size 0`


def fleet_proxy_bounds(raw: Raw) -> Iterator[Problem]:
    size = get(raw, "superlink", "fleetProxy", "maxRequestBodySize")
    if size == NO_LIMIT:
        yield problem(
            ("superlink", "fleetProxy", "maxRequestBodySize"),
            f"{size!r} means no limit in nginx (client_max_body_size 0): the SuperLink reads a whole request body "
            "before it checks the node's signature, so anyone who reaches the proxy could make it hold any amount "
            "(docs/exposure.md). Give a size: unset for 8m, which carries any model (Flower sends arrays in 5 MiB "
            "chunks), or a larger one such as 64m",
        )
