"""Scenario 7, the SuperExec hop (the HTTP era: Flower 1.42): the rendered federation with process
isolation and distributed SuperExecs, so every SuperExec dials its SuperNode across the
pod network over TLS (the pool's own certificate, by its stable pod name behind the
headless Service: the wildcard SAN) and signs its requests with the pool's auth secret.

Three pools of one SuperNode each:
- `ok`: as rendered. Its ClientApp runs in its SuperExec (positive control).
- `w`: its SuperExec mounts another auth secret (its volume points at a Secret holding
  a different value): its SuperNode refuses it (`SuperExec authentication failed`) and it
  never runs a ClientApp.
- `n`: its SuperExec runs without `--root-certificates` (no CA): it cannot verify the
  SuperNode's certificate and exits (CERTIFICATE_VERIFY_FAILED), never running a ClientApp.

A one-round run with every SuperNode sampled completes with the `ok` node alone (the
round ends once it replied: the app's round-quorum; the other two never answer). No
`--insecure` is anywhere in the render.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable
from typing import Any, Optional

from tests.e2e.harness import NotReady
from tests.e2e.rendering import NAME, NAMESPACE, config
from tests.e2e.scenarios import assert_completed, ran_in
from tests.e2e.stack import Federation

ONLINE_TIMEOUT = 150
EVIDENCE_TIMEOUT = 60
POOLS = [("ok", 1), ("w", 1), ("n", 1)]
AUTH_REFUSED = "SuperExec authentication failed"
TLS_REFUSED = re.compile(r"CERTIFICATE_VERIFY_FAILED|certificate verify failed", re.I)
# The refused two never reply: the round ends once `ok`'s ClientApp has (the app's
# round-quorum; its round timeout only bounds a hang).
RUN_CONFIG = {"num-server-rounds": 1, "min-nodes": len(POOLS), "round-quorum": f"{NAME}-superexec-ok-0"}


def raw_config(version: str) -> dict[str, Any]:
    raw = config(version, isolation="process", pools=POOLS)
    raw["superexecPlacement"] = "distributed"
    return raw


def _superexec(manifests: list[dict[str, Any]], pool: str) -> dict[str, Any]:
    (sts,) = [
        m for m in manifests if m["kind"] == "StatefulSet" and m["metadata"]["name"] == f"{NAME}-superexec-{pool}"
    ]
    return sts


def tamper(manifests: list[dict[str, Any]]) -> None:
    """Pool `w`: another auth secret; pool `n`: no CA. Everything else as rendered."""
    wrong = f"{NAME}-wrong-superexec-auth"
    manifests.append(
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "type": "Opaque",
            "metadata": {"name": wrong, "namespace": NAMESPACE},
            "stringData": {"secret": "not-the-pool-secret"},
        }
    )
    spec = _superexec(manifests, "w")["spec"]["template"]["spec"]
    auth = [v for v in spec["volumes"] if v.get("secret", {}).get("secretName") == f"{NAME}-supernode-w-superexec-auth"]
    assert len(auth) == 1, "pool w's SuperExec mounts no auth secret to replace"
    auth[0]["secret"]["secretName"] = wrong

    (c,) = _superexec(manifests, "n")["spec"]["template"]["spec"]["containers"]
    i = c["args"].index("--root-certificates")
    del c["args"][i : i + 2]


def _log(fed: Federation, pod: str, container: int = 0) -> str:
    return fed.cluster.pod(pod).containers[container].log(100000)


def wait_for(what: str, check: Callable[[], bool], timeout: float, fed: Federation) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"not seen within {timeout:.0f}s: {what}\n{fed.cluster.logs(tail=30)}")
        time.sleep(0.5)


def run(version: str, gate: Optional[threading.Semaphore] = None) -> list[str]:
    """The scenario; returns its phases. Raises AssertionError (or NotReady) on failure. `gate`: held
    while the federation starts (one start at a time: background.py)."""
    raw = raw_config(version)
    if gate is not None:
        gate.acquire()
    try:
        fed = Federation(version, raw, label="appio", tamper=tamper)
    except BaseException:
        if gate is not None:
            gate.release()
        raise
    try:
        start = time.monotonic()
        try:
            fed.cluster.wait_pods_ready([fed.superlink], ONLINE_TIMEOUT)
        finally:
            if gate is not None:
                gate.release()
        rendered_args = [
            a
            for m in fed.rendered.manifests
            if m["kind"] == "StatefulSet" or m["kind"] == "Deployment"
            for c in m["spec"]["template"]["spec"]["containers"]
            for a in c.get("args", [])
        ]
        assert "--insecure" not in rendered_args, "the render still has --insecure"
        fed.register()
        deadline = time.monotonic() + ONLINE_TIMEOUT
        while True:  # the SuperLink's state first (cheap), then the CLI confirms
            states = fed.node_states()
            if (states is None or sum(states.values()) >= len(POOLS)) and len(fed.online()) >= len(POOLS):
                break
            if time.monotonic() > deadline:
                raise NotReady(f"SuperNodes not online within {ONLINE_TIMEOUT}s\n{fed.cluster.logs(tail=30)}")
            time.sleep(1 if states is not None else 3)
        fed.phase("SuperNodes online", time.monotonic() - start)

        t = time.monotonic()
        wait_for(
            "pool w's SuperNode refusing its SuperExec",
            lambda: AUTH_REFUSED in _log(fed, f"{NAME}-supernode-w-0"),
            EVIDENCE_TIMEOUT,
            fed,
        )
        no_ca = fed.cluster.pod(f"{NAME}-superexec-n-0").containers[0]
        wait_for(
            "pool n's SuperExec failing to verify its SuperNode",
            lambda: bool(TLS_REFUSED.search(no_ca.log(100000))) and any(code != 0 for code in no_ca.exit_codes),
            EVIDENCE_TIMEOUT,
            fed,
        )
        fed.phase("refusals seen", time.monotonic() - t)
        for pod in ("ok", "n"):
            assert AUTH_REFUSED not in _log(fed, f"{NAME}-supernode-{pod}-0"), f"pool {pod}'s SuperExec was refused"
        ok = fed.cluster.pod(f"{NAME}-superexec-ok-0").containers[0]
        assert not TLS_REFUSED.search(ok.log(100000)) and ok.restarts == 0, ok.describe()

        result = fed.run_app(RUN_CONFIG)
        # The ClientApp names the pod it ran in: the SuperExec's, across the pod network.
        assert_completed(result, {f"{NAME}-superexec-ok-0": [1, 0]}, rounds=1)
        assert ran_in(result, "flwr-clientapp") == {(f"{NAME}-superexec-ok-0", "superexec-clientapp")}, result.ran
        (serverapp,) = fed.pods("superexec-serverapp")
        assert ran_in(result, "flwr-serverapp") == {(serverapp.name, "superexec-serverapp")}, result.ran
        return fed.phases
    finally:
        fed.close()
