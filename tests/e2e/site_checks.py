"""What the sites scenario (sites.py) looks for: Flower's refusals of a SuperNode in its log
and in the SuperLink's (an unknown key, an untrusted certificate), what a process in a
site's cluster resolves and can connect to, and a bounded wait for any of it."""

from __future__ import annotations

import json
import re
import sys
import time
from collections.abc import Callable
from typing import Any

from tests.e2e.harness import Cluster, NotReady
from tests.e2e.site_stacks import SITE_NAMESPACE

# Flower's answer to a SuperNode whose public key is not registered (node auth), as each
# version words it in the SuperNode's log.
REFUSED = re.compile(r"Failed to activate SuperNode|FAILED_PRECONDITION|UNAUTHENTICATED|PERMISSION_DENIED")
# The SuperLink's side of it (both versions); 1.41 also logs the key it did not find.
UNKNOWN_KEY = "No SuperNode found with the given public key"
# A SuperNode that does not trust the server's certificate (gRPC's and Python's wording).
UNTRUSTED = re.compile(r"CERTIFICATE_VERIFY_FAILED|certificate verify failed")


def line_of(text: str, match: re.Match) -> str:
    """The log line a match is on, trimmed."""
    start = text.rfind("\n", 0, match.start()) + 1
    end = text.find("\n", match.end())
    return text[start : end if end >= 0 else None].strip()[:160]


REACH_PROBE = """
import json, socket, sys
names, dials = json.loads(sys.argv[1])
out = {"resolves": {}, "connects": {}}
for n in names:
    try:
        out["resolves"][n] = socket.gethostbyname(n)
    except OSError as exc:
        out["resolves"][n] = None
for host, port in dials:
    try:
        socket.create_connection((host, port), timeout=3).close()
        out["connects"][f"{host}:{port}"] = "ok"
    except OSError as exc:
        out["connects"][f"{host}:{port}"] = type(exc).__name__ + ": " + str(exc)
print(json.dumps(out))
"""


def reach_from(cluster: Cluster, names: list[str], dials: list[tuple[str, int]]) -> dict[str, Any]:
    """What a process in `cluster` (a client netns with the pods' DNS and routes) resolves and can connect to."""
    netns = next((n for n, _ in cluster.clients if n.endswith("-probe")), None) or cluster.add_client(
        "probe", SITE_NAMESPACE
    )
    res = cluster.exec_in(
        netns,
        [sys.executable, "-c", REACH_PROBE, json.dumps([names, dials])],
        env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"},
        mounts=[],
        cwd="/",
        timeout=30,
        name="probe",
    )
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)


def wait_for(what: str, check: Callable[[], Any], timeout: float, every: float = 1.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        got = check()
        if got:
            return got
        if time.monotonic() > deadline:
            raise NotReady(f"{what}: not within {timeout:.0f}s")
        time.sleep(every)
