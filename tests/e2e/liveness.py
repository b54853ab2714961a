"""Scenario 17 (issue 11's liveness), on its own federation of both Flower eras:

 17. A stopped SuperNode (SIGSTOP: alive, answering nothing) is healed by its liveness
     probe, on 1.42 (the gRPC health server) and on the 1.43 nightly (the exec probe of the
     Runtime API's /health): the kubelet kills it after failureThreshold failures and
     restarts it (restartCount grows), the SuperLink activates it again under the same node
     id once it dropped the stopped one (at most NODE_EXPIRY), and a run afterwards includes
     it. Negative control in the same federation and window: pool b's SuperNode, stopped
     at the same moment with its livenessProbe stripped, is never restarted, stays stopped,
     not Ready and offline (in `flwr supernode list` too).

Flower's timers (NODE_EXPIRY and the others): faults.py."""

from __future__ import annotations

import signal
import time
from typing import Any, Optional

from flower_federation.flower.versions import GRPC_HEALTH_UNTIL, FlowerVersion
from tests.e2e import scenarios as base
from tests.e2e.faults import NODE_EXPIRY, WATCH_EVERY, Kept, node_ids
from tests.e2e.harness.host import kill
from tests.e2e.rendering import NAME, config
from tests.e2e.stack import Federation

# The test setting: a stopped SuperNode fails its liveness probe three times 5 s apart (timeoutSeconds stays the
# default 5 s), so the kubelet kills it within ~30 s rather than the default's minute and a half.
LIVENESS = {"periodSeconds": 5, "failureThreshold": 3}
# Bounds a hang only: the liveness kill, then Flower's own wait (the restarted SuperNode's activation is refused
# while the SuperLink still holds the stopped one online, NODE_EXPIRY at most, each refusal an exit and a back-off),
# then a start.
HEAL_TIMEOUT = 3 * (5 + 5) + NODE_EXPIRY + base.READY_TIMEOUT
PROBED, BARE = f"{NAME}-supernode-a-0", f"{NAME}-supernode-b-0"


def probed_config(version: str) -> dict[str, Any]:
    """One SuperNode in each of pools a and b, the liveness probe as LIVENESS says."""
    raw = config(version, pools=[("a", 1), ("b", 1)])
    raw["supernodes"]["probes"] = {"livenessProbe": dict(LIVENESS)}
    return raw


def strip_liveness(manifests: list[dict[str, Any]]) -> None:
    """The negative control's pod: pool b's SuperNode without its livenessProbe (all else as rendered)."""
    (sts,) = [m for m in manifests if m["kind"] == "StatefulSet" and m["metadata"]["name"] == f"{NAME}-supernode-b"]
    (container,) = [c for c in sts["spec"]["template"]["spec"]["containers"] if c["name"] == "supernode"]
    del container["livenessProbe"]  # a KeyError if the render had none: the control would prove nothing


def make_probed(version: str) -> Federation:
    return Federation(version, probed_config(version), label="probes", tamper=strip_liveness)


def _state(pid: Optional[int]) -> str:
    """A process's state letter (T: stopped), '' once it is gone."""
    try:
        return open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return ""


def _activated(c: Any) -> bool:
    """The container's current incarnation logged its node id: the SuperLink activated it (it refuses while it
    still holds the node online)."""
    return "SuperNode ID: " in c.log(100000).rsplit("=== start #", 1)[-1]


def scenario_17(fed: Federation, memo: dict) -> None:
    fed.wait_ready(base.READY_TIMEOUT)
    expected = base.expected_clients(fed.rendered.raw)
    kept = Kept(fed)
    ids = node_ids(fed, [PROBED, BARE])
    probed, bare = (fed.cluster.pod(p).container("supernode") for p in (PROBED, BARE))
    handler = next(k for k in ("grpc", "exec") if k in probed.spec["livenessProbe"])
    assert handler == ("grpc" if FlowerVersion.parse(fed.version) < GRPC_HEALTH_UNTIL else "exec"), handler
    assert "livenessProbe" not in bare.spec and "readinessProbe" in bare.spec
    restarts, kills = probed.restarts, probed.liveness_kills
    bare_before, bare_pid = (bare.restarts, bare.incarnation, bare.liveness_kills), bare.pid1
    for c in (probed, bare):
        kill(c.pid1, signal.SIGSTOP)
    stopped = time.monotonic()
    # Healed: the liveness probe killed the stopped SuperNode, the kubelet restarted it, and the SuperLink activated it
    # again (online under the same node id), in the harness's readiness view too.
    killed_after = None
    deadline = stopped + HEAL_TIMEOUT
    while not (probed.restarts > restarts and probed.is_ready() and _activated(probed)):
        if killed_after is None and probed.liveness_kills > kills:
            killed_after = time.monotonic() - stopped
        assert time.monotonic() < deadline, f"{PROBED} not healed within {HEAL_TIMEOUT:.0f}s: {probed.describe()}"
        time.sleep(WATCH_EVERY)
    healed_after = time.monotonic() - stopped
    assert probed.liveness_kills == kills + 1, f"{PROBED}: {probed.liveness_kills - kills} liveness kills"
    assert node_ids(fed, [PROBED]) == {PROBED: ids[PROBED]}, "the restarted SuperNode came back as another node"
    fed.phase(f"{PROBED} ({handler} probe) killed after {killed_after or 0:.0f}s, online again", healed_after)
    # The negative control, in the same window (and at least until the SuperLink must have dropped the stopped node):
    # nothing restarted the SuperNode without a livenessProbe; it is still stopped, not Ready, and offline.
    time.sleep(max(0.0, stopped + NODE_EXPIRY + 5 - time.monotonic()))
    assert (bare.restarts, bare.incarnation, bare.liveness_kills) == bare_before, bare.describe()
    assert bare.pid1 == bare_pid and bare_before[2] == 0, bare.describe()
    assert _state(bare_pid) in ("T", "t") and not bare.is_ready(), (_state(bare_pid), bare.describe())
    listed = {str(n["node-id"]): n.get("status") for n in fed.supernodes()}  # the user's view
    assert (listed[ids[PROBED]], listed[ids[BARE]]) == ("online", "offline"), listed
    fed.phase(f"{BARE} (no livenessProbe) still stopped and offline", time.monotonic() - stopped)

    # A run afterwards has the healed SuperNode (the stopped one is offline: Flower samples online nodes only).
    result = fed.run_app({"num-server-rounds": 1, "min-nodes": 1, "round-quorum": base.quorum([PROBED])})
    base.assert_completed(result, {PROBED: expected[PROBED]}, rounds=1)
    new = kept.check(fed)
    assert [r["status"] for r in new.values()] == ["finished:completed"], new
