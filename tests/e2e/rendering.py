"""The federation the e2e scenarios deploy, rendered: its config (TLS generated, node auth on,
two pools, the CLI's pod admitted to the SuperLink) and the project's own render path with
real key material, one render at a time. Apart from running what it renders (stack.py)."""

from __future__ import annotations

import copy
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Optional

from flower_federation.cli.offline import run_program
from tests.e2e.cli_user import CLI_LABELS
from tests.support.tls_provider import RealTlsProvider

NAME = "e2e"
NAMESPACE = "flower-e2e"


def config(version: str, *, isolation: str = "subprocess", pools: Optional[list[tuple[str, int]]] = None) -> dict:
    """The federation config the scenarios deploy: TLS (generated) and node
    authentication on; pool `a` numbers its partitions by ordinal, pool `b` is one node;
    the CLI's pod admitted to the SuperLink (CLI_LABELS)."""
    pools = pools or [("a", 3), ("b", 1)]
    raw: dict[str, Any] = {
        "name": NAME,
        "namespace": NAMESPACE,
        "version": version,
        "nodeAuth": {"enabled": True},
        "isolationMode": isolation,
        "supernodes": {"pools": []},
        "superlink": {"networkPolicy": {"ingressPodMatchLabels": dict(CLI_LABELS)}},
    }
    for name, replicas in pools:
        node_config = (
            {"partition-id": "{index}", "num-partitions": "{replicas}"}
            if replicas > 1
            else {"partition-id": 0, "num-partitions": 1}
        )
        pool: dict[str, Any] = {"name": name, "replicas": replicas, "nodeConfig": node_config}
        if isolation == "process":
            pool["images"] = {"superexecClientApp": f"flwr/superexec:{version}"}
        raw["supernodes"]["pools"].append(pool)
    if isolation == "process":
        raw["superlink"]["superexecImage"] = f"flwr/superexec:{version}"
    return raw


@dataclass
class Rendered:
    raw: dict[str, Any]
    manifests: list[dict[str, Any]]
    outputs: dict[str, Any]


_RENDER_LOCK = threading.Lock()


def render(raw: dict[str, Any], provider: Optional[Callable[..., dict[str, Any]]] = None) -> Rendered:
    """The project's render path, with real key material (`provider`: a PulumiState to
    keep it across renders, as a stack's state does). One at a time: the Pulumi SDK's
    lazy imports are not thread-safe (lanes render concurrently)."""
    with _RENDER_LOCK:
        run = run_program({"federation": copy.deepcopy(raw)}, "e2e", provider=provider or RealTlsProvider())
        return Rendered(raw, run.manifests(show_secrets=True), run.outputs)
